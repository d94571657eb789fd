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
    /// One entry per machine profile, in the order run.
    pub profiles: Vec<ProfileReport>,
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
    /// Launches replayed per day.
    pub launches: usize,
    /// Per prefetcher ("none" first).
    pub runs: Vec<DayRun>,
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
    /// Bytes the prefetcher read over the day.
    pub prefetch_read_bytes: u64,
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
}

impl DaemonCost {
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
    fn slowdown_ratio() {
        let mut s = Slowdown { off: vec![10.0, 10.0], on: vec![10.2, 10.4], ..Slowdown::default() };
        s.finish();
        assert!((s.ratio.unwrap() - 1.03).abs() < 1e-9);
    }
}
