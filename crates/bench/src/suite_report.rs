//! What a suite run found, as data: per machine profile, per workload and condition the launch
//! times with their summary and the share of the cold-to-warm gap closed, the usage day, the
//! costs. Serialised as the suite's JSON output and rendered by `suite_markdown` and
//! `suite_chart`. Pure data and arithmetic; nothing here measures.

use crate::machine::MachineRecord;
use crate::stats::{Summary, gap_closed, quantile};
use crate::suite_file::{Condition, Ready};
use augur_os::sense::procfs::ProcessSample;

/// Version of the JSON output.
pub const REPORT_VERSION: u32 = 1;

/// A whole suite run.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SuiteReport {
    /// Output format version.
    pub version: u32,
    /// augur's version.
    pub augur_version: String,
    /// `uname -r`.
    pub kernel: String,
    /// CPU model and count, memory.
    pub machine: String,
    /// When the run started, UTC (RFC 3339).
    pub started_utc: String,
    /// The command that produced this report.
    pub command: String,
    /// What the run left out on purpose, and why (an augur variant that is augur as installed).
    pub notes: Vec<String>,
    /// The duration planned from the suite's own constants, seconds.
    pub estimated_secs: f64,
    /// One entry per machine profile, in the order run.
    pub profiles: Vec<ProfileReport>,
    /// Wall-clock seconds the whole run took.
    pub elapsed_secs: f64,
    /// What augur's log says over the whole run (every augur daemon of it); `None` when no augur
    /// daemon ran.
    pub augur_log: Option<crate::prefetchers::AugurLogSummary>,
}

/// Everything measured under one machine profile.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ProfileReport {
    /// The profile as applied.
    pub machine: MachineRecord,
    /// Whether each prefetcher could run, and why not.
    pub prefetchers: Vec<PrefetcherStatus>,
    /// The training phase.
    pub training: Vec<TrainingRecord>,
    /// The profile whose training this one's prefetchers kept (trained once per run).
    pub training_shared_from: Option<String>,
    /// Per workload.
    pub workloads: Vec<WorkloadReport>,
    /// The usage day, if run.
    pub day: Option<DayReport>,
    /// Costs, if measured.
    pub cost: Option<CostReport>,
    /// Wall-clock seconds this profile took.
    pub elapsed_secs: f64,
}

/// Availability of one prefetcher.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PrefetcherStatus {
    /// Name.
    pub name: String,
    /// Whether it ran.
    pub available: bool,
    /// Why not, when it did not.
    pub reason: Option<String>,
}

impl PrefetcherStatus {
    /// The line that says a prefetcher was not measured and why, for the progress output and
    /// the report: `preload-ng: not measured (binary not found at …; run scripts/bench-setup)`.
    pub fn not_measured_line(&self) -> Option<String> {
        if self.available {
            return None;
        }
        let reason = self.reason.as_deref().unwrap_or("no reason given");
        let reason = reason.strip_prefix(&format!("{}: ", self.name)).unwrap_or(reason);
        Some(format!("{}: not measured ({reason})", self.name))
    }
}

/// One workload's training.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TrainingRecord {
    /// Workload.
    pub workload: String,
    /// Launches made while the prefetchers watched.
    pub launches: u32,
    /// Seconds spent.
    pub secs: f64,
    /// Whether preload's state lists the workload's executable afterwards.
    pub preload_learned: Option<bool>,
}

/// One workload under every condition.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WorkloadReport {
    /// Name.
    pub name: String,
    /// Command.
    pub command: Vec<String>,
    /// What launches were timed to.
    pub ready: Ready,
    /// Per condition, in run order.
    pub conditions: Vec<ConditionReport>,
}

/// Outcome of a condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConditionStatus {
    /// Measured (possibly with some failed runs).
    Measured,
    /// The prefetcher cannot run here; no figure.
    Unavailable,
    /// Every run failed.
    Failed,
}

/// One condition of one workload.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ConditionReport {
    /// The condition.
    pub condition: Condition,
    /// Outcome.
    pub status: ConditionStatus,
    /// Reason for unavailable/failed runs.
    pub reasons: Vec<String>,
    /// Launch times, seconds, in run order.
    pub samples: Vec<f64>,
    /// Their summary.
    pub summary: Option<Summary>,
    /// (cold − this) / (cold − warm) on medians.
    pub gap_closed: Option<f64>,
    /// Bytes the prefetcher read from disk between its start and the launch, per run.
    pub prefetch_read_bytes: Vec<u64>,
    /// Page-cache growth between dropping the caches and the launch, per run (memory the
    /// prefetcher filled).
    pub cache_growth_bytes: Vec<u64>,
    /// The prefetcher's own decision of how much to load, per run, bytes: preload's "using N
    /// kb", preload-ng's plan `total_bytes` (empty for augur).
    pub preload_decision_bytes: Vec<u64>,
    /// Bytes read from disk from each launch's spawn to its readiness, per run (the cold ones:
    /// the workload's working set read from disk).
    #[serde(default)]
    pub launch_read_bytes: Vec<u64>,
}

impl ConditionReport {
    /// An empty report for `condition`.
    pub fn new(condition: Condition) -> Self {
        ConditionReport {
            condition,
            status: ConditionStatus::Measured,
            reasons: Vec::new(),
            samples: Vec::new(),
            summary: None,
            gap_closed: None,
            prefetch_read_bytes: Vec::new(),
            cache_growth_bytes: Vec::new(),
            preload_decision_bytes: Vec::new(),
            launch_read_bytes: Vec::new(),
        }
    }
}

impl WorkloadReport {
    /// Fills summaries, statuses and gap shares from the samples.
    pub fn finish(&mut self) {
        for c in &mut self.conditions {
            c.summary = Summary::of(&c.samples);
            if c.summary.is_none() && c.status == ConditionStatus::Measured {
                c.status = ConditionStatus::Failed;
            }
        }
        let median =
            |cond: Condition| self.conditions.iter().find(|c| c.condition == cond).and_then(|c| c.summary).map(|s| s.median);
        let (cold, warm) = (median(Condition::Cold), median(Condition::Warm));
        for c in &mut self.conditions {
            c.gap_closed = match (cold, warm, c.summary) {
                (Some(cold), Some(warm), Some(s)) if c.condition != Condition::Cold && c.condition != Condition::Warm => {
                    gap_closed(cold, warm, s.median)
                }
                _ => None,
            };
        }
    }

    /// The report of `cond`, if measured.
    pub fn condition(&self, cond: Condition) -> Option<&ConditionReport> {
        self.conditions.iter().find(|c| c.condition == cond)
    }
}

/// The usage day per prefetcher.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct DayReport {
    /// The trace replayed.
    pub trace: String,
    /// The trace's day measured (0-based; the days before it trained).
    pub trace_day: u32,
    /// Launches replayed per day.
    pub launches: usize,
    /// The day's applications and the bytes each one's cold launch read from disk.
    pub working_sets: Vec<(String, u64)>,
    /// MemAvailable the machine profile leaves, bytes.
    pub memory_left_bytes: u64,
    /// Working sets / memory left required.
    pub min_memory_ratio: f64,
    /// Why the day was not run (its applications fit in memory).
    pub refused: Option<String>,
    /// What "read from disk" counts.
    pub disk_counter: String,
    /// Per prefetcher ("none" first).
    pub runs: Vec<DayRun>,
}

impl DayReport {
    /// Sum of the working sets.
    pub fn working_set_bytes(&self) -> u64 {
        self.working_sets.iter().map(|(_, b)| b).sum()
    }

    /// Fills each prefetcher's reads beyond the day without one.
    pub fn finish(&mut self) {
        let none = self.runs.iter().find(|r| r.prefetcher == "none").and_then(|r| r.disk_read_bytes);
        for r in &mut self.runs {
            r.read_beyond_none_bytes = match (r.prefetcher.as_str(), none, r.disk_read_bytes) {
                ("none", _, _) => None,
                (_, Some(none), Some(mine)) => Some(mine as i64 - none as i64),
                _ => None,
            };
        }
    }
}

/// One measured day.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct DayRun {
    /// "none", or a prefetcher's name ("preload", "preload-ng", "augur", "augur-predict", ...).
    pub prefetcher: String,
    /// Whether it ran; reason when not.
    pub unavailable: Option<String>,
    /// Launch latencies in order, seconds.
    pub latencies: Vec<f64>,
    /// Their summary (median and p90 are the figures reported).
    pub summary: Option<Summary>,
    /// 90th percentile of the latencies.
    pub p90: Option<f64>,
    /// Launches that failed.
    pub failures: Vec<String>,
    /// Bytes the prefetcher read over the day (its `/proc/PID/io` `read_bytes`).
    pub prefetch_read_bytes: u64,
    /// Bytes read from disk over the day, launches and prefetcher (see
    /// [`DayReport::disk_counter`]).
    pub disk_read_bytes: Option<u64>,
    /// `disk_read_bytes` minus the day without a prefetcher's: what the prefetcher read that
    /// no launch then needed from disk (prefetched and never used, or pushed out before use
    /// and read again), as far as the disk can tell; negative when it saved more than it read.
    pub read_beyond_none_bytes: Option<i64>,
    /// The prefetcher's own accounting where it reports one (augur's status: bytes
    /// prefetched, bytes wasted).
    pub own_ledger: Option<(u64, u64)>,
    /// Wall-clock seconds.
    pub secs: f64,
}

impl DayRun {
    /// Fills the summary and the 90th percentile from the latencies.
    pub fn finish(&mut self) {
        self.summary = Summary::of(&self.latencies);
        self.p90 = quantile(&self.latencies, 0.9);
    }
}

/// What the prefetchers cost.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct CostReport {
    /// Per prefetcher: idle and learning costs.
    pub daemons: Vec<DaemonCost>,
    /// I/O-heavy workloads, prefetcher off versus on.
    pub slowdowns: Vec<Slowdown>,
}

/// One daemon's own cost.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct DaemonCost {
    /// Prefetcher name.
    pub prefetcher: String,
    /// Seconds of idleness measured.
    pub idle_secs: f64,
    /// CPU seconds used while idle.
    pub idle_cpu_secs: f64,
    /// Context switches (wake-ups) per idle minute.
    pub idle_wakeups_per_min: f64,
    /// RSS at the end of the idle period, bytes.
    pub idle_rss_bytes: u64,
    /// Seconds of training measured.
    pub learning_secs: f64,
    /// CPU seconds used while learning (training phase).
    pub learning_cpu_secs: f64,
    /// Largest RSS sampled while learning, bytes.
    pub learning_peak_rss_bytes: u64,
    /// Bytes read from disk while learning.
    pub learning_read_bytes: u64,
    /// Seconds from the daemon's start (after training) to the end of its start-up work (its
    /// first cycle: what it loads of what it learned), measured before the idle minute.
    pub startup_secs: f64,
    /// CPU seconds over that start-up.
    pub startup_cpu_secs: f64,
    /// Context switches (wake-ups) of all its threads over that start-up.
    pub startup_wakeups: u64,
    /// Bytes it read from disk over that start-up.
    pub startup_read_bytes: u64,
    /// False when the start-up was not over within the suite's limit (the idle minute then began
    /// while it still worked).
    pub startup_done: bool,
}

impl DaemonCost {
    /// Fills the start-up fields from samples at the start and at its end, `secs` apart.
    pub fn set_startup(&mut self, start: &ProcessSample, end: &ProcessSample, secs: f64, done: bool) {
        self.startup_secs = secs;
        self.startup_cpu_secs = (end.cpu_secs - start.cpu_secs).max(0.0);
        self.startup_wakeups = end.context_switches.saturating_sub(start.context_switches);
        self.startup_read_bytes = end.read_bytes.saturating_sub(start.read_bytes);
        self.startup_done = done;
    }

    /// Fills the idle fields from two samples `secs` apart.
    pub fn set_idle(&mut self, before: &ProcessSample, after: &ProcessSample, secs: f64) {
        self.idle_secs = secs;
        self.idle_cpu_secs = (after.cpu_secs - before.cpu_secs).max(0.0);
        let switches = after.context_switches.saturating_sub(before.context_switches) as f64;
        self.idle_wakeups_per_min = if secs > 0.0 { switches * 60.0 / secs } else { 0.0 };
        self.idle_rss_bytes = after.rss_bytes;
    }
}

/// An I/O-heavy workload with a prefetcher off and on.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Slowdown {
    /// Workload ("read file tree cold", "make -j2 cold").
    pub workload: String,
    /// The prefetcher running in the "on" case.
    pub prefetcher: String,
    /// Elapsed seconds, off.
    pub off: Vec<f64>,
    /// Elapsed seconds, on.
    pub on: Vec<f64>,
    /// I/O wait (elapsed − user − sys), off.
    pub io_wait_off: Vec<f64>,
    /// I/O wait, on.
    pub io_wait_on: Vec<f64>,
    /// Elapsed seconds with the daemon on while it still learns the workload (augur follows the
    /// first launches of an application, then only replays them); empty for preload.
    #[serde(default)]
    pub learning: Vec<f64>,
    /// median(on) / median(off).
    pub ratio: Option<f64>,
    /// median(learning) / median(off).
    #[serde(default)]
    pub learning_ratio: Option<f64>,
    /// Why it could not run.
    pub unavailable: Option<String>,
}

impl Slowdown {
    /// Computes the ratio of medians.
    pub fn finish(&mut self) {
        let ratio = |on: &[f64]| match (Summary::of(&self.off), Summary::of(on)) {
            (Some(off), Some(on)) if off.median > 0.0 => Some(on.median / off.median),
            _ => None,
        };
        self.ratio = ratio(&self.on);
        self.learning_ratio = ratio(&self.learning);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn workload(samples: &[(Condition, &[f64])]) -> WorkloadReport {
        let mut w = WorkloadReport { name: "w".into(), command: vec!["w".into()], ready: Ready::Exit, conditions: vec![] };
        for (c, s) in samples {
            let mut r = ConditionReport::new(*c);
            r.samples = s.to_vec();
            w.conditions.push(r);
        }
        w.finish();
        w
    }

    #[test]
    fn gap_closed_from_medians() {
        let w = workload(&[
            (Condition::Cold, &[10.0, 12.0, 11.0]),
            (Condition::Warm, &[1.0, 1.0, 1.0]),
            (Condition::Preload, &[6.0, 6.0, 7.0]),
            (Condition::AugurPredict, &[]),
        ]);
        let p = w.condition(Condition::Preload).unwrap();
        assert!((p.gap_closed.unwrap() - 0.5).abs() < 1e-9);
        assert_eq!(w.condition(Condition::Cold).unwrap().gap_closed, None);
        assert_eq!(w.condition(Condition::AugurPredict).unwrap().status, ConditionStatus::Failed);
    }

    #[test]
    fn not_measured_line_names_the_prefetcher_once() {
        let s = |available, reason: Option<&str>| PrefetcherStatus {
            name: "preload-ng".into(),
            available,
            reason: reason.map(String::from),
        };
        let missing = s(false, Some("preload-ng: binary not found at /x/preload-ng; run scripts/bench-setup"));
        assert_eq!(
            missing.not_measured_line().unwrap(),
            "preload-ng: not measured (binary not found at /x/preload-ng; run scripts/bench-setup)"
        );
        assert_eq!(s(false, None).not_measured_line().unwrap(), "preload-ng: not measured (no reason given)");
        assert_eq!(s(true, None).not_measured_line(), None);
    }

    #[test]
    fn day_reads_beyond_no_prefetcher() {
        let run = |p: &str, disk| DayRun { prefetcher: p.into(), disk_read_bytes: disk, ..DayRun::default() };
        let mut d = DayReport {
            working_sets: vec![("a".into(), 300), ("b".into(), 700)],
            runs: vec![run("none", Some(1000)), run("preload", Some(1500)), run("augur", Some(800)), run("x", None)],
            ..DayReport::default()
        };
        d.finish();
        assert_eq!(d.working_set_bytes(), 1000);
        let beyond: Vec<_> = d.runs.iter().map(|r| r.read_beyond_none_bytes).collect();
        assert_eq!(beyond, [None, Some(500), Some(-200), None]);
    }

    #[test]
    fn slowdown_ratio() {
        let mut s = Slowdown { off: vec![10.0, 10.0], on: vec![10.2, 10.4], ..Slowdown::default() };
        s.finish();
        assert!((s.ratio.unwrap() - 1.03).abs() < 1e-9);
    }
}
