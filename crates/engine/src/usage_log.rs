//! The daemon's bounded in-memory log of what ran since it started — launches and exits with
//! their wall-clock times, and each application's working-set size when it is learned — and its
//! conversion into a usage trace (`docs/usage-trace-format.md`) for `augur record`.
//!
//! Owns the log and the cut: a trace from a time `since` keeps only launch/exit pairs whose
//! launch is inside it (an exit of an instance launched before is dropped), so the result is a
//! valid trace. It reads no clock: the event loop passes every time in. No I/O.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use augur_core::model::usage_trace::{TraceHeader, Transition, UsageEvent, UsageTrace, WorkingSet};

/// Events kept at most (oldest dropped first): about a week of a busy desktop.
pub const MAX_EVENTS: usize = 100_000;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Logged {
    Activity { app: String, instance: u64, transition: Transition },
    WorkingSet { app: String, bytes: u64 },
}

/// The log.
#[derive(Clone, Debug)]
pub struct UsageLog {
    started_unix_ms: u64,
    max_events: usize,
    events: VecDeque<(u64, Logged)>,
    /// Events dropped because the log was full.
    pub dropped: u64,
}

impl UsageLog {
    /// An empty log started at `started_unix_ms`, keeping at most `max_events`.
    pub fn new(started_unix_ms: u64, max_events: usize) -> Self {
        UsageLog { started_unix_ms, max_events: max_events.max(1), events: VecDeque::new(), dropped: 0 }
    }

    /// When the log started (ms since the epoch).
    pub fn started_unix_ms(&self) -> u64 {
        self.started_unix_ms
    }

    /// Events held.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// True when nothing was logged.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    fn push(&mut self, unix_ms: u64, e: Logged) {
        // Wall-clock steps back are flattened: traces never go back in time.
        let t = self.events.back().map_or(unix_ms, |(last, _)| unix_ms.max(*last));
        if self.events.len() >= self.max_events {
            self.events.pop_front();
            self.dropped += 1;
        }
        self.events.push_back((t, e));
    }

    /// An instance of `app` started or ended.
    pub fn activity(&mut self, unix_ms: u64, app: &str, instance: u64, transition: Transition) {
        self.push(unix_ms, Logged::Activity { app: app.to_string(), instance, transition });
    }

    /// `app` was learned with a working set of `bytes`.
    pub fn working_set(&mut self, unix_ms: u64, app: &str, bytes: u64) {
        if bytes > 0 {
            self.push(unix_ms, Logged::WorkingSet { app: app.to_string(), bytes });
        }
    }

    /// The trace of everything logged from `since_unix_ms` (or the log's start) on. `known`
    /// gives working-set sizes learned before (from the state), declared at time zero for the
    /// applications the trace launches; sizes learned inside the window follow as `app` lines.
    pub fn trace(
        &self,
        since_unix_ms: Option<u64>,
        utc_offset_s: i32,
        page_size: u64,
        source: &str,
        known: &BTreeMap<String, u64>,
    ) -> UsageTrace {
        let start = since_unix_ms.unwrap_or(self.started_unix_ms).max(self.started_unix_ms);
        let window: Vec<&(u64, Logged)> = self.events.iter().filter(|(t, _)| *t >= start).collect();
        // Sizes as of the window's start: the state's, updated by what the log learned before.
        let mut sizes = known.clone();
        for (t, e) in &self.events {
            if *t >= start {
                break;
            }
            if let Logged::WorkingSet { app, bytes } = e {
                sizes.insert(app.clone(), *bytes);
            }
        }
        let launched: BTreeSet<&str> = window
            .iter()
            .filter_map(|(_, e)| match e {
                Logged::Activity { app, transition: Transition::Launch, .. } => Some(app.as_str()),
                _ => None,
            })
            .collect();
        let mut events = Vec::new();
        for app in &launched {
            if let Some(&bytes) = sizes.get(*app).filter(|&&b| b > 0) {
                events.push(UsageEvent::App { t_ms: 0, app: app.to_string(), working_set: WorkingSet::Bytes(bytes) });
            }
        }
        let mut running: BTreeSet<(&str, u64)> = BTreeSet::new();
        for (t, e) in window {
            let t_ms = t - start;
            match e {
                Logged::WorkingSet { app, bytes } => {
                    events.push(UsageEvent::App { t_ms, app: app.clone(), working_set: WorkingSet::Bytes(*bytes) });
                }
                Logged::Activity { app, instance, transition: Transition::Launch } => {
                    if !running.insert((app.as_str(), *instance)) {
                        // Its exit was missed (a lost process event): end it before it restarts.
                        events.push(UsageEvent::Activity {
                            t_ms,
                            app: app.clone(),
                            instance: *instance,
                            transition: Transition::Exit,
                        });
                    }
                    events.push(UsageEvent::Activity {
                        t_ms,
                        app: app.clone(),
                        instance: *instance,
                        transition: Transition::Launch,
                    });
                }
                Logged::Activity { app, instance, transition: Transition::Exit } => {
                    if running.remove(&(app.as_str(), *instance)) {
                        events.push(UsageEvent::Activity {
                            t_ms,
                            app: app.clone(),
                            instance: *instance,
                            transition: Transition::Exit,
                        });
                    }
                }
            }
        }
        UsageTrace { header: TraceHeader::new(start, utc_offset_s, page_size, source), events }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use augur_core::model::usage_trace;

    fn sample() -> UsageLog {
        let mut log = UsageLog::new(1_000, 100);
        log.activity(1_100, "old", 1, Transition::Launch);
        log.working_set(1_200, "old", 4096 * 10);
        log.activity(2_000, "a", 7, Transition::Launch);
        log.activity(2_500, "old", 1, Transition::Exit);
        log.activity(3_000, "a", 7, Transition::Exit);
        log.working_set(3_100, "a", 4096 * 3);
        log.activity(4_000, "b", 9, Transition::Launch);
        log
    }

    #[test]
    fn the_whole_log_is_a_valid_trace_with_times_from_the_start() {
        let known = BTreeMap::from([("b".to_string(), 8192u64)]);
        let trace = sample().trace(None, 3600, 4096, "test", &known);
        assert_eq!(trace.header.start_unix_ms, 1_000);
        assert_eq!(trace.header.utc_offset_s, 3600);
        let parsed = usage_trace::parse(trace.to_text().as_bytes()).unwrap();
        assert_eq!(parsed, trace);
        assert_eq!(trace.launch_count(), 3);
        // b's size known from the state is declared at time zero; a's learned size follows.
        assert_eq!(trace.events[0], UsageEvent::App { t_ms: 0, app: "b".into(), working_set: WorkingSet::Bytes(8192) });
        assert!(trace.events.contains(&UsageEvent::App {
            t_ms: 2_100,
            app: "a".into(),
            working_set: WorkingSet::Bytes(4096 * 3)
        }));
    }

    #[test]
    fn a_window_drops_exits_of_instances_launched_before_it() {
        let trace = sample().trace(Some(1_500), 0, 4096, "", &BTreeMap::new());
        usage_trace::parse(trace.to_text().as_bytes()).unwrap();
        assert!(trace.events.iter().all(|e| e.app() != "old"), "{:?}", trace.events);
        assert_eq!(trace.events.first().map(UsageEvent::t_ms), Some(500));
        // Working sets learned before the window stay known.
        let from_log = sample().trace(Some(1_500), 0, 4096, "", &BTreeMap::new());
        assert_eq!(from_log.launch_count(), 2);
    }

    #[test]
    fn missed_exits_and_clock_steps_still_give_a_valid_trace() {
        let mut log = UsageLog::new(0, 100);
        log.activity(10, "a", 1, Transition::Launch);
        log.activity(5, "a", 1, Transition::Launch); // exit lost, clock stepped back
        log.activity(20, "a", 1, Transition::Exit);
        log.activity(30, "a", 1, Transition::Exit); // reported twice
        let trace = log.trace(None, 0, 4096, "", &BTreeMap::new());
        let parsed = usage_trace::parse(trace.to_text().as_bytes()).unwrap();
        assert_eq!(parsed.launch_count(), 2);
    }

    #[test]
    fn the_log_is_bounded() {
        let mut log = UsageLog::new(0, 3);
        for i in 0..5 {
            log.activity(i, "a", i, Transition::Launch);
        }
        assert_eq!(log.len(), 3);
        assert_eq!(log.dropped, 2);
    }
}
