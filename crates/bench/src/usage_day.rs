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
}

/// Replays the day: `training_days` with every prefetcher watching (one augur daemon), then once
/// with none and once per measured prefetcher.
pub fn run(ctx: &mut DayContext<'_>, spec: &DaySpec) -> Result<DayReport> {
    let acts = read_trace(&spec.trace)?;
    let steps = plan(&acts, ctx.workloads, spec);
    let launches = steps.iter().filter(|s| s.launch).count();
    let mut report = DayReport { trace: spec.trace.display().to_string(), launches, runs: Vec::new() };
    let watchers = crate::prefetchers::watching(ctx.available);
    for day in 1..=spec.training_days {
        (ctx.progress)(&format!("usage day: training day {day}/{} ({launches} launches)", spec.training_days));
        let mut daemons = Vec::new();
        for k in &watchers {
            let mut d = RunningDaemon::start(*k, ctx.files)?;
            d.wait_ready(ctx.cycle_wait)?;
            daemons.push(d);
        }
        let _ = replay(ctx, &steps, "training")?;
        for d in daemons {
            d.stop()?;
        }
    }
    let mut kinds: Vec<Option<Prefetcher>> = vec![None];
    kinds.extend(ctx.measured.iter().copied().map(Some));
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
        let mut daemon = match kind {
            Some(k) => {
                let mut d = RunningDaemon::start(k, ctx.files)?;
                if !k.prefetches_ahead() {
                    d.wait_ready(ctx.cycle_wait)?;
                } else {
                    d.wait_first_cycle(ctx.cycle_wait, Duration::from_secs(ctx.files.cycle_secs))?;
                }
                Some(d)
            }
            None => None,
        };
        let (latencies, failures) = replay(ctx, &steps, &name)?;
        let read = daemon.as_ref().and_then(|d| d.sample().ok()).map_or(0, |s| s.read_bytes);
        if let Some(d) = daemon.take() {
            d.stop()?;
        }
        let mut day_run = DayRun {
            prefetcher: name,
            latencies,
            failures,
            prefetch_read_bytes: read,
            secs: started.elapsed().as_secs_f64(),
            ..DayRun::default()
        };
        day_run.finish();
        report.runs.push(day_run);
    }
    Ok(report)
}

/// Executes the steps; returns launch latencies and failures. Every application still open at
/// the end is closed.
fn replay(ctx: &mut DayContext<'_>, steps: &[Step], label: &str) -> Result<(Vec<f64>, Vec<String>)> {
    let mut open: BTreeMap<(String, u64), Running> = BTreeMap::new();
    let mut latencies = Vec::new();
    let mut failures = Vec::new();
    for (i, step) in steps.iter().enumerate() {
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
                        if w.ready == Ready::Window {
                            open.insert(step.instance.clone(), r);
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
    fn plan_stops_after_max_launches_but_keeps_exits() {
        let acts = parse_trace(TRACE);
        let mut s = spec();
        s.max_launches = 1;
        let steps = plan(&acts, &workloads(), &s);
        assert_eq!(steps.iter().filter(|s| s.launch).count(), 1);
        assert_eq!(steps.iter().filter(|s| !s.launch).count(), 1);
    }
}
