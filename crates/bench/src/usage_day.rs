//! The usage day: a usage trace ([`augur_core::model::usage_trace`], the prediction issue's format)
//! replayed as real launches and exits of the
//! suite's workloads, time-compressed, once per prefetcher after a training day, reporting the
//! median and 90th-percentile launch latency across the day.
//!
//! [`plan`] (trace → steps) is pure; [`run`] executes the steps. It does not parse the suite.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::Result;
use crate::interrupt;
use crate::launch::{self, LaunchEnv, Running};
use crate::prefetchers::{DaemonFiles, Prefetcher, RunningDaemon};
use crate::suite_file::{DaySpec, Ready, Workload};
use crate::suite_report::{DayReport, DayRun};
use crate::throttle::DiskReadCounter;
use crate::xdisplay::WindowWatcher;
use augur_core::model::usage_trace::{Transition, UsageEvent, UsageTrace};
use augur_os::fetch::drop_all_caches;

/// After the caches are dropped for a long idle time, the day waits at least a prefetcher cycle
/// and this much more before the next launch.
const IDLE_SLACK_SECS: f64 = 5.0;

/// One launch or exit of the trace, as the suite reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceActivity {
    /// Milliseconds since the trace's start.
    pub t_ms: u64,
    /// Application name in the trace.
    pub app: String,
    /// Instance number (launch and exit of one instance share it).
    pub instance: u64,
    /// Launch (true) or exit (false).
    pub launch: bool,
}

/// Reads the launches and exits of a usage trace file ([`augur_core::model::usage_trace`], errors
/// naming the line).
pub fn read_trace(path: &Path) -> Result<Vec<TraceActivity>> {
    Ok(activities(&augur_store::usage_trace_file::load(path)?))
}

/// The launches and exits of a parsed trace, in order.
pub fn activities(trace: &UsageTrace) -> Vec<TraceActivity> {
    trace
        .events
        .iter()
        .filter_map(|e| match e {
            UsageEvent::Activity { t_ms, app, instance, transition } => Some(TraceActivity {
                t_ms: *t_ms,
                app: app.clone(),
                instance: *instance,
                launch: *transition == Transition::Launch,
            }),
            UsageEvent::App { .. } => None,
        })
        .collect()
}

/// A step of the replayed day.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Real seconds to wait before it.
    pub wait_secs: f64,
    /// Drop the caches before it (a long idle gap in the trace).
    pub drop_caches: bool,
    /// Index of the workload.
    pub workload: usize,
    /// Instance key.
    pub instance: (String, u64),
    /// Launch (true) or exit (false).
    pub launch: bool,
}

/// Milliseconds in a trace day.
const DAY_MS: u64 = 86_400_000;

/// How many calendar days the trace's launches span (day N: `t_ms` in [N, N + 1) days).
pub fn trace_days(acts: &[TraceActivity]) -> u32 {
    acts.iter().filter(|a| a.launch).map(|a| (a.t_ms / DAY_MS) as u32 + 1).max().unwrap_or(0)
}

/// The activities of the trace's day `day` (launched that day; an exit of such a launch on a
/// later day is kept, one of an earlier launch dropped).
pub fn day_of(acts: &[TraceActivity], day: u32) -> Vec<TraceActivity> {
    let mut launched = std::collections::HashSet::new();
    acts.iter()
        .filter(|a| {
            if a.launch {
                (a.t_ms / DAY_MS) as u32 == day && launched.insert((a.app.clone(), a.instance))
            } else {
                launched.contains(&(a.app.clone(), a.instance))
            }
        })
        .cloned()
        .collect()
}

/// The trace day replayed as training day `training` (0-based), or as the measured day
/// (`None`): training day N is the trace's day N and the measured day the one after the
/// training days, when the trace has that many; a shorter trace gives its last day.
pub fn trace_day_for(days_in_trace: u32, training_days: u32, training: Option<u32>) -> u32 {
    let want = training.unwrap_or(training_days);
    want.min(days_in_trace.saturating_sub(1))
}

/// Turns trace activities into steps: maps applications to workloads (explicit mapping, then the
/// workloads in order for applications in order of first appearance), compresses and clamps the
/// gaps, drops caches after long idle gaps, and stops after `max_launches` launches (their exits
/// kept).
pub fn plan(acts: &[TraceActivity], workloads: &[Workload], spec: &DaySpec) -> Vec<Step> {
    let mut mapping: HashMap<&str, usize> = HashMap::new();
    for (app, w) in &spec.apps {
        if let Some(i) = workloads.iter().position(|x| &x.name == w) {
            mapping.insert(app.as_str(), i);
        }
    }
    let mut next = 0usize;
    let mut steps = Vec::new();
    let mut launches = 0;
    let mut open: std::collections::HashSet<(String, u64)> = Default::default();
    let mut prev_t: Option<u64> = None;
    let mut pending_wait = 0.0;
    let mut pending_drop = false;
    for a in acts {
        if let Some(p) = prev_t {
            let gap_trace = (a.t_ms - p) as f64 / 1000.0;
            if gap_trace > 0.0 {
                pending_wait += (gap_trace * spec.time_scale).clamp(spec.gap_secs[0], spec.gap_secs[1]);
            }
            if spec.drop_caches_after_idle_secs > 0.0 && gap_trace >= spec.drop_caches_after_idle_secs && open.is_empty() {
                pending_drop = true;
            }
        }
        prev_t = Some(a.t_ms);
        let key = (a.app.clone(), a.instance);
        if a.launch && launches >= spec.max_launches {
            continue;
        }
        if !a.launch && !open.contains(&key) {
            continue;
        }
        let w = *mapping.entry(a.app.as_str()).or_insert_with(|| {
            let i = next % workloads.len().max(1);
            next += 1;
            i
        });
        if a.launch {
            launches += 1;
            open.insert(key.clone());
        } else {
            open.remove(&key);
        }
        steps.push(Step { wait_secs: pending_wait, drop_caches: pending_drop, workload: w, instance: key, launch: a.launch });
        pending_wait = 0.0;
        pending_drop = false;
    }
    steps
}

/// What the day shares with the suite.
pub struct DayContext<'a> {
    /// The suite's workloads.
    pub workloads: &'a [Workload],
    /// Launch environment.
    pub env: &'a LaunchEnv,
    /// X watcher, when desktop workloads are in the suite.
    pub watcher: Option<&'a mut WindowWatcher>,
    /// Daemon files.
    pub files: &'a DaemonFiles,
    /// Prefetchers that can run.
    pub available: &'a [Prefetcher],
    /// The prefetchers the suite measures (its conditions), each given a day, in order.
    pub measured: &'a [Prefetcher],
    /// Longest wait for a first planning round.
    pub cycle_wait: Duration,
    /// Progress lines.
    pub progress: &'a dyn Fn(&str),
    /// Where bytes read from disk are counted.
    pub disk: &'a DiskReadCounter,
    /// MemAvailable the machine profile leaves (after its balloon), bytes.
    pub memory_left: u64,
    /// Bytes each workload's cold launch read from disk (median of the suite's cold runs), by
    /// workload index; a workload of the day missing here is launched cold once to find out.
    pub working_sets: &'a BTreeMap<usize, u64>,
    /// Whether the profile is a small-memory one (where `[day] leave_available` applies).
    pub small_memory: bool,
}

/// Replays the day: `training_days` with every prefetcher watching (one augur daemon), then once
/// with none and once per measured prefetcher. Refuses (a report with the reason and no runs)
/// when the day's working sets are less than `min_memory_ratio` times the memory left.
pub fn run(ctx: &mut DayContext<'_>, spec: &DaySpec) -> Result<DayReport> {
    let acts = read_trace(&spec.trace)?;
    let days_in_trace = trace_days(&acts);
    let measured_day = trace_day_for(days_in_trace, spec.training_days, None);
    let steps = plan(&day_of(&acts, measured_day), ctx.workloads, spec);
    let launches = steps.iter().filter(|s| s.launch).count();
    let mut report = DayReport {
        trace: spec.trace.display().to_string(),
        trace_day: measured_day,
        launches,
        disk_counter: ctx.disk.describe(),
        min_memory_ratio: spec.min_memory_ratio,
        ..DayReport::default()
    };
    // The applications of the day and what each needs, under the profile as the tables' cold
    // runs had it (before the day's own balloon).
    let mut used: Vec<usize> = steps.iter().filter(|s| s.launch).map(|s| s.workload).collect();
    used.sort_unstable();
    used.dedup();
    for &wi in &used {
        let bytes = match ctx.working_sets.get(&wi) {
            Some(&b) => b,
            None => measure_working_set(ctx, &ctx.workloads[wi])?,
        };
        report.working_sets.push((ctx.workloads[wi].name.clone(), bytes));
    }
    // Less memory for the day than for the rest of the profile, when asked and when the profile
    // is a small-memory one: a second balloon, gone when the day is.
    let mut day_balloon = None;
    if let (Some(leave), true) = (spec.leave_available, ctx.small_memory) {
        drop_all_caches()?;
        if augur_os::sense::procfs::meminfo("MemAvailable")? > leave {
            let b = crate::balloon::Balloon::inflate(leave)?;
            ctx.memory_left = b.available_after;
            (ctx.progress)(&format!(
                "usage day: a second balloon locked {} MiB more, {} MiB left available",
                b.locked_bytes >> 20,
                b.available_after >> 20
            ));
            day_balloon = Some(b);
        }
    }
    report.memory_left_bytes = ctx.memory_left;
    let need = report.working_set_bytes();
    (ctx.progress)(&format!(
        "usage day: trace day {measured_day}, {launches} launches of {} applications; their working sets (bytes each cold launch read from disk) sum to {} MiB, the profile leaves {} MiB available: {:.1}× (at least {:.1}× asked)",
        used.len(),
        need >> 20,
        ctx.memory_left >> 20,
        need as f64 / ctx.memory_left.max(1) as f64,
        spec.min_memory_ratio
    ));
    if (need as f64) < spec.min_memory_ratio * ctx.memory_left as f64 {
        let why = format!(
            "refused: the day's working sets ({} MiB) are less than {:.1} × the {} MiB the profile leaves available; everything would fit and prediction would not matter (leave less memory with --leave-available or [day] leave_available, or add applications to the day)",
            need >> 20,
            spec.min_memory_ratio,
            ctx.memory_left >> 20
        );
        (ctx.progress)(&format!("usage day {why}"));
        report.refused = Some(why);
        return Ok(report);
    }
    let result = run_days(ctx, spec, &acts, &steps, report, day_balloon.as_mut());
    drop(day_balloon);
    result
}

fn run_days(
    ctx: &mut DayContext<'_>,
    spec: &DaySpec,
    acts: &[TraceActivity],
    steps: &[Step],
    mut report: DayReport,
    mut balloon: Option<&mut crate::balloon::Balloon>,
) -> Result<DayReport> {
    let days_in_trace = trace_days(acts);
    let launches = report.launches;
    let watchers = crate::prefetchers::watching(ctx.available);
    for day in 0..spec.training_days {
        let trace_day = trace_day_for(days_in_trace, spec.training_days, Some(day));
        let training = plan(&day_of(acts, trace_day), ctx.workloads, spec);
        (ctx.progress)(&format!(
            "usage day: training day {}/{} (trace day {trace_day}, {} launches)",
            day + 1,
            spec.training_days,
            training.iter().filter(|s| s.launch).count()
        ));
        for group in training_groups(&watchers) {
            drop_all_caches()?;
            let mut daemons = Vec::new();
            for k in &group {
                let mut d = RunningDaemon::start(*k, ctx.files)?;
                d.wait_ready(ctx.cycle_wait)?;
                daemons.push(d);
            }
            let stop_at = (spec.stop_after_secs > 0).then(|| Instant::now() + Duration::from_secs(spec.stop_after_secs));
            let names: Vec<&str> = group.iter().map(|k| k.name()).collect();
            let _ = replay(ctx, &training, &format!("training {}", names.join(", ")), spec.keep_open, stop_at)?;
            if let Some(b) = balloon.as_deref_mut() {
                b.check_alive()?;
            }
            for d in daemons {
                d.stop()?;
            }
        }
    }
    let mut kinds: Vec<Option<Prefetcher>> = vec![None];
    kinds.extend(day_prefetchers(ctx.measured).into_iter().map(Some));
    for kind in kinds {
        let name = kind.map_or("none", Prefetcher::name).to_string();
        if let Some(k) = kind {
            if !ctx.available.contains(&k) {
                report.runs.push(DayRun {
                    prefetcher: name,
                    unavailable: Some("not available here".into()),
                    ..DayRun::default()
                });
                continue;
            }
        }
        (ctx.progress)(&format!("usage day: {name}"));
        drop_all_caches()?;
        let started = Instant::now();
        let disk0 = ctx.disk.bytes()?;
        let mut daemon = match kind {
            Some(k) => {
                let mut d = RunningDaemon::start(k, ctx.files)?;
                if !k.prefetches_ahead() {
                    d.wait_ready(ctx.cycle_wait)?;
                } else {
                    d.wait_first_cycle(ctx.files, ctx.cycle_wait)?;
                }
                Some(d)
            }
            None => None,
        };
        let stop_at = (spec.stop_after_secs > 0).then(|| started + Duration::from_secs(spec.stop_after_secs));
        let (latencies, mut failures) = replay(ctx, steps, &name, spec.keep_open, stop_at)?;
        let made = latencies.len() + failures.len();
        if made < launches {
            let need = working_set_of_first(steps, made, ctx.workloads, &report.working_sets);
            let why = format!(
                "day stopped after {} s (stop_after_secs) with {made} of {launches} launches made, whose applications need {:.1} × the memory left, not the {:.1} × of the whole day",
                spec.stop_after_secs,
                need as f64 / report.memory_left_bytes.max(1) as f64,
                report.working_set_bytes() as f64 / report.memory_left_bytes.max(1) as f64,
            );
            (ctx.progress)(&format!("usage day ({name}): {why}"));
            failures.push(why);
        }
        if let Some(b) = balloon.as_deref_mut() {
            b.check_alive()?;
        }
        let read = daemon.as_ref().and_then(|d| d.sample().ok()).map_or(0, |s| s.read_bytes);
        let ledger = match (&daemon, kind) {
            (Some(d), Some(k)) if k.is_augur() => d.status_json(ctx.files).and_then(|j| crate::prefetchers::ledger_of_status(&j)),
            _ => None,
        };
        if let Some(d) = daemon.take() {
            d.stop()?;
        }
        let mut day_run = DayRun {
            prefetcher: name,
            latencies,
            failures,
            prefetch_read_bytes: read,
            disk_read_bytes: Some(ctx.disk.bytes()?.saturating_sub(disk0)),
            own_ledger: ledger,
            secs: started.elapsed().as_secs_f64(),
            ..DayRun::default()
        };
        day_run.finish();
        report.runs.push(day_run);
    }
    report.finish();
    Ok(report)
}

/// Sum of the working sets of the distinct applications among the first `made` launches of
/// `steps` (what a day cut short really needed; `working_sets` by workload name).
pub fn working_set_of_first(steps: &[Step], made: usize, workloads: &[Workload], working_sets: &[(String, u64)]) -> u64 {
    let mut seen = std::collections::BTreeSet::new();
    steps
        .iter()
        .filter(|s| s.launch)
        .take(made)
        .filter(|s| seen.insert(s.workload))
        .filter_map(|s| working_sets.iter().find(|(n, _)| *n == workloads[s.workload].name).map(|(_, b)| *b))
        .sum()
}

/// The prefetchers that watch a training day together. preload-ng watches alone: where memory
/// is short it reads continuously (2.5 GB in eight minutes of a training day shared with preload
/// and augur, 512 MiB left), and the day it starves teaches no one anything (no launch of that
/// day showed a window). The others read little and share a day.
pub fn training_groups(watchers: &[Prefetcher]) -> Vec<Vec<Prefetcher>> {
    let (alone, shared): (Vec<Prefetcher>, Vec<Prefetcher>) = watchers.iter().copied().partition(|k| *k == Prefetcher::PreloadNg);
    let mut groups: Vec<Vec<Prefetcher>> = alone.into_iter().map(|k| vec![k]).collect();
    if !shared.is_empty() {
        groups.push(shared);
    }
    groups
}

/// The prefetchers the day measures: the suite's, but augur's variants only when augur as
/// installed is not among them (a day per variant would double the day for what the
/// launch-time tables already show).
pub fn day_prefetchers(measured: &[Prefetcher]) -> Vec<Prefetcher> {
    let installed = measured.contains(&Prefetcher::Augur);
    measured.iter().copied().filter(|k| !installed || !k.is_augur() || *k == Prefetcher::Augur).collect()
}

/// Bytes `w`'s cold launch reads from disk: caches dropped, launched, closed.
fn measure_working_set(ctx: &mut DayContext<'_>, w: &Workload) -> Result<u64> {
    drop_all_caches()?;
    let before = ctx.disk.bytes()?;
    let l = launch::launch(ctx.env, w, ctx.watcher.as_deref_mut())?;
    let bytes = ctx.disk.bytes()?.saturating_sub(before);
    if let Some(r) = l.running {
        r.close()?;
    }
    (ctx.progress)(&format!("usage day: {} read {} MiB cold", w.name, bytes >> 20));
    Ok(bytes)
}

/// Executes the steps; returns launch latencies and failures. Every application still open at
/// the end is closed.
fn replay(
    ctx: &mut DayContext<'_>,
    steps: &[Step],
    label: &str,
    keep_open: bool,
    stop_at: Option<Instant>,
) -> Result<(Vec<f64>, Vec<String>)> {
    let mut open: BTreeMap<(String, u64), Running> = BTreeMap::new();
    let mut latencies = Vec::new();
    let mut failures = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        if stop_at.is_some_and(|t| Instant::now() >= t) {
            break;
        }
        if step.drop_caches {
            // Only when nothing of the day is open: the machine was left alone for a long time
            // and its cache went to other work. The cache is lost at the start of the idle
            // time, and the idle time is at least one prefetcher cycle and a little more, as it
            // is on a real machine (half an hour against a 20 s cycle), however compressed the
            // day: what a prefetcher does with an idle machine is what is measured.
            drop_all_caches()?;
            let idle = step.wait_secs.max(ctx.files.cycle_secs as f64 + IDLE_SLACK_SECS);
            interrupt::sleep(Duration::from_secs_f64(idle))?;
        } else {
            interrupt::sleep(Duration::from_secs_f64(step.wait_secs))?;
        }
        let w = &ctx.workloads[step.workload];
        if step.launch {
            match launch::launch(ctx.env, w, ctx.watcher.as_deref_mut()) {
                Ok(l) => {
                    latencies.push(l.secs);
                    (ctx.progress)(&format!("usage day ({label}) step {}/{}: {} {:.3} s", i + 1, steps.len(), w.name, l.secs));
                    if let Some(r) = l.running {
                        if w.ready == Ready::Window && keep_open {
                            open.insert(step.instance.clone(), r);
                        } else {
                            r.close()?;
                        }
                    }
                }
                Err(e) => {
                    interrupt::check()?;
                    failures.push(format!("{}: {e}", w.name));
                }
            }
        } else if let Some(r) = open.remove(&step.instance) {
            r.close()?;
        }
    }
    for (_, r) in std::mem::take(&mut open) {
        r.close()?;
    }
    Ok((latencies, failures))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = r#"{"format":"augur-usage-trace","version":1,"start_unix_ms":0,"page_size":4096}
{"event":"app","t_ms":0,"app":"web","bytes":1000}
{"event":"launch","t_ms":0,"app":"web","instance":1}
{"event":"launch","t_ms":60000,"app":"mail","instance":2}
{"event":"exit","t_ms":70000,"app":"mail","instance":2}
{"event":"exit","t_ms":80000,"app":"web","instance":1}
{"event":"launch","t_ms":7280000,"app":"web","instance":3}
"#;

    fn workloads() -> Vec<Workload> {
        ["a", "b"]
            .iter()
            .map(|n| Workload {
                name: n.to_string(),
                command: vec![n.to_string()],
                ready: Ready::Window,
                timeout_secs: 10,
                env: Default::default(),
                files: Default::default(),
                profiles: None,
            })
            .collect()
    }

    fn spec() -> DaySpec {
        DaySpec {
            trace: "t".into(),
            apps: [("mail".to_string(), "a".to_string())].into(),
            time_scale: 0.1,
            gap_secs: [1.0, 5.0],
            max_launches: 10,
            drop_caches_after_idle_secs: 3600.0,
            training_days: 1,
            profiles: Vec::new(),
            min_memory_ratio: 0.0,
            leave_available: None,
            keep_open: true,
            stop_after_secs: 0,
        }
    }

    fn parse_trace(text: &str) -> Vec<TraceActivity> {
        activities(&augur_core::model::usage_trace::parse(text.as_bytes()).unwrap())
    }

    #[test]
    fn reads_launches_and_exits_of_a_usage_trace() {
        let acts = parse_trace(TRACE);
        assert_eq!(acts.len(), 5);
        assert!(acts[0].launch && acts[0].app == "web");
        assert!(!acts[2].launch && acts[2].instance == 2);
    }

    #[test]
    fn the_repository_day_is_a_valid_trace() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/day.jsonl");
        let acts = read_trace(&path).unwrap();
        assert!(acts.iter().filter(|a| a.launch).count() >= 14);
    }

    #[test]
    fn plan_maps_compresses_and_drops() {
        let acts = parse_trace(TRACE);
        let steps = plan(&acts, &workloads(), &spec());
        assert_eq!(steps.len(), 5);
        // mail -> a explicitly; web -> first workload in order of appearance.
        assert_eq!(steps[1].workload, 0);
        assert_eq!(steps[0].workload, 0);
        // 60 s of trace at 0.1 -> 6 s, clamped to 5.
        assert_eq!(steps[1].wait_secs, 5.0);
        assert_eq!(steps[2].wait_secs, 1.0);
        assert!(!steps[3].drop_caches);
        assert!(steps[4].drop_caches, "two hours idle with nothing open");
    }

    #[test]
    fn a_day_cut_short_counts_only_the_applications_it_launched() {
        let acts = parse_trace(TRACE);
        let steps = plan(&acts, &workloads(), &spec());
        let names: Vec<String> = workloads().iter().map(|w| w.name.clone()).collect();
        let sets: Vec<(String, u64)> = names.iter().enumerate().map(|(i, n)| (n.clone(), 100 << (10 * i))).collect();
        let launched: Vec<usize> = steps.iter().filter(|s| s.launch).map(|s| s.workload).collect();
        assert!(launched.len() >= 2, "{launched:?}");
        assert_eq!(working_set_of_first(&steps, 0, &workloads(), &sets), 0);
        assert_eq!(working_set_of_first(&steps, 1, &workloads(), &sets), sets[launched[0]].1);
        let mut distinct = launched.clone();
        distinct.sort_unstable();
        distinct.dedup();
        let all: u64 = distinct.iter().map(|&w| sets[w].1).sum();
        assert_eq!(working_set_of_first(&steps, launched.len(), &workloads(), &sets), all, "each application counted once");
    }

    #[test]
    fn the_day_measures_augur_as_installed_not_its_variants() {
        use Prefetcher::*;
        assert_eq!(day_prefetchers(&[Preload, PreloadNg, Augur, AugurPredict]), [Preload, PreloadNg, Augur]);
        assert_eq!(day_prefetchers(&[Preload, AugurPredict, AugurReplay]), [Preload, AugurPredict, AugurReplay]);
    }

    #[test]
    fn preload_ng_trains_alone_the_others_together() {
        use Prefetcher::*;
        assert_eq!(training_groups(&[Preload, PreloadNg, Augur]), vec![vec![PreloadNg], vec![Preload, Augur]]);
        assert_eq!(training_groups(&[Augur]), vec![vec![Augur]]);
        assert!(training_groups(&[]).is_empty());
    }

    #[test]
    fn days_of_a_trace() {
        let mut acts = parse_trace(TRACE);
        // A second day: web again, launched late on day 1 and closed on day 2.
        let day = 86_400_000;
        for (t, launch, i) in [(day + 100, true, 4), (day + 200, false, 4), (2 * day - 10, true, 5), (2 * day + 10, false, 5)] {
            acts.push(TraceActivity { t_ms: t, app: "web".into(), instance: i, launch });
        }
        assert_eq!(trace_days(&acts), 2);
        let d0 = day_of(&acts, 0);
        assert_eq!(d0.len(), 5);
        let d1 = day_of(&acts, 1);
        assert_eq!(d1.iter().map(|a| a.instance).collect::<Vec<_>>(), [4, 4, 5, 5]);
        assert!(day_of(&acts, 2).is_empty(), "an exit whose launch was the day before is not a day of its own");
        // Training on days 0 and 1, measured on day 2; a one-day trace replays its only day.
        assert_eq!(trace_day_for(3, 2, Some(0)), 0);
        assert_eq!(trace_day_for(3, 2, Some(1)), 1);
        assert_eq!(trace_day_for(3, 2, None), 2);
        assert_eq!(trace_day_for(1, 1, None), 0);
        assert_eq!(trace_day_for(1, 1, Some(0)), 0);
    }

    #[test]
    fn plan_stops_after_max_launches_but_keeps_exits() {
        let acts = parse_trace(TRACE);
        let mut s = spec();
        s.max_launches = 1;
        let steps = plan(&acts, &workloads(), &s);
        assert_eq!(steps.iter().filter(|s| s.launch).count(), 1);
        assert_eq!(steps.iter().filter(|s| !s.launch).count(), 1);
    }
}
