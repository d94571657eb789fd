//! A benchmark session: one workload under several conditions, interleaved round by round (each
//! round runs every condition once, in order) so that drift over the session (other load,
//! thermal state) affects all conditions alike; then the summaries.
//!
//! It sequences conditions and runs and reports progress through a callback; it does not print.

use serde::{Deserialize, Serialize};

use crate::error::Result;

use super::condition::{COLD, Condition, Preparation, WARM};
use super::measure::{RunSample, Workload};
use super::stats::{Summary, gap_closed};

/// What the session is doing, for a progress display.
#[derive(Debug)]
pub enum Progress<'a> {
    /// The untimed run before the first round (it also checks the command works).
    WarmUp,
    /// A condition is being prepared for round `round` (1-based) of `rounds`.
    Preparing {
        /// Round number, from 1.
        round: usize,
        /// Number of rounds.
        rounds: usize,
        /// Condition name.
        condition: &'a str,
    },
    /// A timed run finished.
    Ran {
        /// Round number, from 1.
        round: usize,
        /// Number of rounds.
        rounds: usize,
        /// Condition name.
        condition: &'a str,
        /// The measurement.
        sample: &'a RunSample,
        /// What preparing did.
        preparation: &'a Preparation,
    },
}

/// One timed run with what its preparation did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Round number, from 1.
    pub round: usize,
    /// The measurement.
    #[serde(flatten)]
    pub sample: RunSample,
    /// What preparing did.
    #[serde(flatten)]
    pub preparation: Preparation,
}

/// Everything measured under one condition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConditionResult {
    /// Condition name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Elapsed time in milliseconds.
    pub elapsed_ms: Summary,
    /// I/O wait (elapsed − user − sys) in milliseconds.
    pub io_wait_ms: Summary,
    /// CPU time (user + sys) in milliseconds.
    pub cpu_ms: Summary,
    /// Major page faults.
    pub major_faults: Summary,
    /// MiB the file systems read for the command (file data and metadata), from `wait4`'s
    /// `ru_inblock`: what is left for a prefetcher to load.
    pub read_mib: Summary,
    /// Share of the cold-to-warm gap closed, from medians: (cold − this) / (cold − warm).
    pub gap_closed: Option<f64>,
    /// Every run, in order.
    pub runs: Vec<RunRecord>,
}

/// A finished session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionResult {
    /// The command measured.
    pub command: Vec<String>,
    /// Rounds run (timed runs per condition).
    pub rounds: usize,
    /// One entry per condition, in the order they ran in each round.
    pub conditions: Vec<ConditionResult>,
}

impl SessionResult {
    /// The result of the condition named `name`.
    pub fn condition(&self, name: &str) -> Option<&ConditionResult> {
        self.conditions.iter().find(|c| c.name == name)
    }
}

fn summary_of(values: impl Iterator<Item = f64>) -> Summary {
    let v: Vec<f64> = values.collect();
    Summary::of(&v).unwrap_or(Summary { n: 0, median: f64::NAN, min: f64::NAN, max: f64::NAN })
}

/// Runs `rounds` rounds of `conditions` on `workload`, timing each run with `measure`
/// ([`super::measure::run_to_exit`] for a command line; the suite passes its own, e.g. time to
/// first window). `rounds` below 1 is treated as 1.
pub fn run_interleaved(
    workload: &Workload,
    conditions: &mut [Box<dyn Condition>],
    rounds: usize,
    measure: &mut dyn FnMut(&Workload) -> Result<RunSample>,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<SessionResult> {
    let rounds = rounds.max(1);
    progress(Progress::WarmUp);
    measure(workload)?;
    let mut records: Vec<Vec<RunRecord>> = vec![Vec::with_capacity(rounds); conditions.len()];
    for round in 1..=rounds {
        for (i, condition) in conditions.iter_mut().enumerate() {
            progress(Progress::Preparing { round, rounds, condition: condition.name() });
            let preparation = condition.prepare()?;
            let sample = measure(workload)?;
            progress(Progress::Ran { round, rounds, condition: condition.name(), sample: &sample, preparation: &preparation });
            records[i].push(RunRecord { round, sample, preparation });
        }
    }
    let mut results: Vec<ConditionResult> = conditions
        .iter()
        .zip(records)
        .map(|(c, runs)| ConditionResult {
            name: c.name().to_string(),
            description: c.describe(),
            elapsed_ms: summary_of(runs.iter().map(|r| r.sample.elapsed_ms)),
            io_wait_ms: summary_of(runs.iter().map(|r| r.sample.io_wait_ms)),
            cpu_ms: summary_of(runs.iter().map(|r| r.sample.user_ms + r.sample.sys_ms)),
            major_faults: summary_of(runs.iter().map(|r| r.sample.major_faults as f64)),
            read_mib: summary_of(runs.iter().map(|r| r.sample.blocks_in as f64 * 512.0 / (1024.0 * 1024.0))),
            gap_closed: None,
            runs,
        })
        .collect();
    fill_gaps(&mut results);
    Ok(SessionResult { command: workload.argv(), rounds, conditions: results })
}

/// Sets every condition's share of the cold-to-warm gap from the medians, when both cold and
/// warm were measured.
pub fn fill_gaps(results: &mut [ConditionResult]) {
    let median = |name: &str| results.iter().find(|c| c.name == name).map(|c| c.elapsed_ms.median);
    let (Some(cold), Some(warm)) = (median(COLD), median(WARM)) else {
        return;
    };
    for c in results.iter_mut() {
        c.gap_closed = gap_closed(cold, warm, c.elapsed_ms.median);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::BenchError;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// A condition that records when it is prepared and sets the "cache state" the fake
    /// measurement reads.
    struct Fake {
        name: &'static str,
        state: Rc<RefCell<(Vec<String>, f64)>>,
        elapsed: f64,
    }

    impl Condition for Fake {
        fn name(&self) -> &str {
            self.name
        }
        fn describe(&self) -> String {
            format!("fake {}", self.name)
        }
        fn prepare(&mut self) -> Result<Preparation> {
            let mut s = self.state.borrow_mut();
            s.0.push(self.name.to_string());
            s.1 = self.elapsed;
            Ok(Preparation::default())
        }
    }

    #[test]
    fn rounds_interleave_conditions_and_gap_is_computed() {
        let state = Rc::new(RefCell::new((Vec::new(), 0.0)));
        let mut conditions: Vec<Box<dyn Condition>> = vec![
            Box::new(Fake { name: COLD, state: state.clone(), elapsed: 200.0 }),
            Box::new(Fake { name: WARM, state: state.clone(), elapsed: 100.0 }),
            Box::new(Fake { name: "prefetched", state: state.clone(), elapsed: 105.0 }),
        ];
        let measured = Rc::new(RefCell::new(0usize));
        let m = measured.clone();
        let s = state.clone();
        let mut measure = move |_: &Workload| -> Result<RunSample> {
            *m.borrow_mut() += 1;
            let e = s.borrow().1;
            Ok(RunSample { elapsed_ms: e, user_ms: 10.0, sys_ms: 5.0, io_wait_ms: e - 15.0, major_faults: 0, blocks_in: 0 })
        };
        let mut events = Vec::new();
        let result = run_interleaved(&Workload::new(vec!["x".into()]), &mut conditions, 3, &mut measure, &mut |p| {
            events.push(format!("{p:?}").chars().take(8).collect::<String>())
        })
        .unwrap();
        assert_eq!(*measured.borrow(), 1 + 9, "one warm-up plus three rounds of three");
        assert_eq!(state.borrow().0, ["cold", "warm", "prefetched"].repeat(3));
        assert_eq!(result.rounds, 3);
        let p = result.condition("prefetched").unwrap();
        assert_eq!(p.elapsed_ms.n, 3);
        assert!((p.gap_closed.unwrap() - 0.95).abs() < 1e-9);
        assert_eq!(result.condition(COLD).unwrap().gap_closed, Some(0.0));
        assert_eq!(result.condition(WARM).unwrap().gap_closed, Some(1.0));
        assert_eq!(p.runs.iter().map(|r| r.round).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!(events[0], "WarmUp");
    }

    #[test]
    fn a_failing_run_stops_the_session() {
        let mut conditions: Vec<Box<dyn Condition>> = vec![Box::new(super::super::condition::Warm)];
        let mut n = 0;
        let mut measure = |_: &Workload| -> Result<RunSample> {
            n += 1;
            if n > 1 {
                Err(BenchError::Command { command: "x".into(), detail: "exited with status 1".into() })
            } else {
                Ok(RunSample { elapsed_ms: 1.0, user_ms: 0.0, sys_ms: 0.0, io_wait_ms: 1.0, major_faults: 0, blocks_in: 0 })
            }
        };
        let err = run_interleaved(&Workload::new(vec!["x".into()]), &mut conditions, 2, &mut measure, &mut |_| {});
        assert!(matches!(err, Err(BenchError::Command { .. })));
    }
}
