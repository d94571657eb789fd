//! What one prediction round costs the daemon with many learned applications (issue 19: "a
//! planning round with 1,000 known applications costs at most 1 ms of CPU").
//!
//! Owns the measurement: a state of learned applications on disk (each launch a plausible
//! profile of scattered ranges over tens of files), the daemon's predictor as it runs it (the
//! configured one, believed as far as its recent predictions came true) trained on a seeded
//! history of launches, and the round the daemon's prediction step runs, timed on the thread's
//! CPU clock: the predictor's answer, the planning round over the likeliest applications' replay
//! profiles (read through the state's cache, their footprints through the daemon's
//! [`FootprintCache`]), and the fetch plans made of it. What the round reads from `/proc`
//! (meminfo, vmstat, pressure) is not in it: the same three small reads whatever the number of
//! applications. It must not decide anything itself: it calls the daemon's own functions.

use std::path::{Path, PathBuf};

use augur::daemon::prediction::{FootprintCache, fetch_plans_of};
use augur_core::model::learn::LearnSettings;
use augur_core::model::predict::{self, ConfidenceConfig, ConfidentPredictor, LocalTime, Observation, Predictor, Transition};
use augur_core::model::profile::LaunchProfile;
use augur_core::model::record::{LaunchRecord, StateLimits};
use augur_core::model::user::user_key;
use augur_core::plan::{LearnedFootprint, MemoryHeadroom, MemorySnapshot, PlanningRound, RoundConfig, RoundOutcome};
use augur_core::sim::seeded::SeededRng;
use augur_store::state::StateStore;

use crate::error::{BenchError, Result};

/// What to measure.
#[derive(Clone, Debug)]
pub struct RoundCostSetup {
    /// Learned applications (half root's, half one desktop user's: the state keeps at most 500
    /// of each user).
    pub apps: u64,
    /// Launches in the predictor's history.
    pub history: u64,
    /// Rounds timed.
    pub rounds: u64,
    /// The predictor (`[predict] predictor`).
    pub predictor: String,
    /// Where the state is made (a fresh directory, removed after).
    pub dir: PathBuf,
}

/// What the rounds cost, microseconds of the thread's CPU time per round.
#[derive(Clone, Debug, PartialEq)]
pub struct RoundCost {
    /// Applications the state held.
    pub apps: u64,
    /// Applications the predictor knew.
    pub known: usize,
    /// Per round: the predictor's answer alone.
    pub predict_us: Vec<f64>,
    /// Per round: the planning round after the answer (the likeliest applications' replay
    /// profiles read through the state's cache, their footprints, the planner).
    pub plan_us: Vec<f64>,
    /// Per round: the whole round (answer, planning, fetch plans).
    pub round_us: Vec<f64>,
    /// Applications planned in the last round, and the ranges planned.
    pub planned_apps: usize,
    /// Ranges the last round planned.
    pub planned_ranges: usize,
}

/// The key application `n` is learned under: root's for the first half, uid 1000's after.
fn key_of(n: u64, apps: u64) -> String {
    let exe = format!("/opt/app{n}/bin/app");
    if n < apps.div_ceil(2) { exe } else { user_key(1000, &exe) }
}

/// A state of `apps` learned applications, two launches each.
fn learned_state(path: &Path, apps: u64) -> Result<StateStore> {
    let (mut store, _) = StateStore::open(path)?;
    let limits = StateLimits { learn: LearnSettings::default(), max_launch_records: 500, ..StateLimits::default() };
    for n in 0..apps {
        let key = key_of(n, apps);
        let exe = format!("/opt/app{n}/bin/app");
        let launch = LaunchProfile::plausible_example(n);
        for run in 0..2 {
            let record = LaunchRecord { app: key.clone(), started_ms: n * 10 + run, pages_used: 2400, ..Default::default() };
            store.learn_launch(&key, &exe, &launch, &record, &limits)?;
        }
    }
    Ok(store)
}

/// The thread's CPU time, microseconds.
fn thread_cpu_us() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 * 1e6 + t.tv_nsec as f64 / 1e3
}

/// How often one of the [`HABITUAL`] most popular applications is followed by the next one in
/// the ranking: a habit strong enough that the predictor, once proven, is believed above the cost
/// of a read and the rounds plan.
const HABIT: f64 = 0.8;

/// The applications used by habit (the rest, the long tail of a machine in use for years, are
/// launched by popularity alone): a day's usage revisits tens of applications, not all it knows.
const HABITUAL: u64 = 100;

/// The next application after `last`: by habit, or by popularity (Zipf over `weights`).
fn next_app(last: Option<u64>, apps: u64, weights: &[f64], rng: &mut SeededRng) -> u64 {
    let habitual = HABITUAL.min(apps);
    match last {
        Some(l) if l < habitual && rng.chance(HABIT) => (l + 1) % habitual,
        _ => rng.weighted(weights).map_or(0, |k| k as u64),
    }
}

/// The launches the predictor sees, one every two minutes from the local midnight of day 0, each
/// followed by its exit a minute later: a popularity ranking (Zipf) with a habit of follow-ups.
struct Usage {
    apps: u64,
    weights: Vec<f64>,
    rng: SeededRng,
    last: Option<u64>,
    t: u64,
    launches: u64,
}

impl Usage {
    fn new(apps: u64) -> Self {
        let weights = (0..apps).map(|n| 1.0 / (n + 1) as f64).collect();
        Usage { apps, weights, rng: SeededRng::new(1), last: None, t: 0, launches: 0 }
    }

    /// Launches `n` (the next one as the usage goes, if `None`) and ends it, as `p` sees it.
    fn launch(&mut self, p: &mut dyn Predictor, n: Option<u64>) {
        let n = n.unwrap_or_else(|| next_app(self.last, self.apps, &self.weights, &mut self.rng));
        let key = key_of(n, self.apps);
        let instance = self.launches;
        p.observe(&Observation { at: LocalTime(self.t), app: &key, instance, transition: Transition::Launch });
        p.observe(&Observation { at: LocalTime(self.t + 60_000), app: &key, instance, transition: Transition::Exit });
        self.last = Some(n);
        self.launches += 1;
        self.t += 120_000;
    }
}

/// Runs the measurement.
pub fn measure(setup: &RoundCostSetup) -> Result<RoundCost> {
    if setup.apps == 0 || setup.rounds == 0 {
        return Err(BenchError::Usage("round-cost needs at least one application and one round".into()));
    }
    std::fs::create_dir_all(&setup.dir).map_err(|e| BenchError::io(setup.dir.display().to_string(), e))?;
    let state_path = setup.dir.join("state.db");
    let store = learned_state(&state_path, setup.apps)?;
    let model = predict::by_name(&setup.predictor)
        .ok_or_else(|| BenchError::Usage(format!("unknown predictor {:?}", setup.predictor)))?;
    let mut predictor: Box<dyn Predictor> = Box::new(ConfidentPredictor::new(model, ConfidenceConfig::default()));
    // Every learned application launched once first (the predictor knows them all), then the
    // history.
    let mut usage = Usage::new(setup.apps);
    for n in 0..setup.apps {
        usage.launch(predictor.as_mut(), Some(n));
    }
    for _ in 0..setup.history {
        usage.launch(predictor.as_mut(), None);
    }
    let known = predictor.predict(LocalTime(usage.t)).len();
    // The daemon's round on a machine of 24 GiB with 16 free (a computed budget, half of
    // MemAvailable, no pressure).
    let config = RoundConfig::default();
    let memory = MemorySnapshot { total: 24 << 30, free: 16 << 30, available: 20 << 30, cached: 4 << 30, locked: 0 };
    let settings = LearnSettings::default();
    let mut footprints = FootprintCache::default();
    let mut cost = RoundCost {
        apps: setup.apps,
        known,
        predict_us: Vec::new(),
        plan_us: Vec::new(),
        round_us: Vec::new(),
        planned_apps: 0,
        planned_ranges: 0,
    };
    for _ in 0..setup.rounds {
        // Between rounds, a launch and its exit, as the usage goes: what makes the daemon plan
        // again.
        usage.launch(predictor.as_mut(), None);
        let at = LocalTime(usage.t);

        let start = thread_cpu_us();
        let probs = predictor.predict(at);
        let predicted = thread_cpu_us();
        let round = PlanningRound {
            config: &config,
            memory: Some(memory),
            pressure: None,
            default_page_size: 4096,
            headroom: MemoryHeadroom { free_bytes: memory.free, refault_share: 0.0 },
        };
        let mut profiles = std::collections::BTreeMap::new();
        let outcome = round.run(
            || probs,
            |app| -> Result<Option<LearnedFootprint>> {
                let Some(profile) = store.replay_profile(app, &settings)? else { return Ok(None) };
                let learned = LearnedFootprint { footprint: footprints.footprint(app, &profile), page_size: profile.page_size };
                profiles.insert(app.to_string(), profile);
                Ok(Some(learned))
            },
        )?;
        footprints.round_done();
        let RoundOutcome::Planned(planned) = outcome else {
            return Err(BenchError::Usage("the round planned nothing: no memory figures or under pressure".into()));
        };
        let plan_end = thread_cpu_us();
        let fetch = fetch_plans_of(&planned.plan, &profiles, 4096);
        let end = thread_cpu_us();
        cost.predict_us.push(predicted - start);
        cost.plan_us.push(plan_end - predicted);
        cost.round_us.push(end - start);
        cost.planned_apps = fetch.len();
        cost.planned_ranges = planned.plan.ranges.len();
    }
    drop(store);
    std::fs::remove_dir_all(&setup.dir).map_err(|e| BenchError::io(setup.dir.display().to_string(), e))?;
    Ok(cost)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_measurement_plans_from_the_learned_state_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let setup =
            RoundCostSetup { apps: 20, history: 400, rounds: 5, predictor: "augur".into(), dir: dir.path().join("round-cost") };
        let cost = measure(&setup).unwrap();
        assert_eq!((cost.predict_us.len(), cost.plan_us.len(), cost.round_us.len()), (5, 5, 5));
        assert!(cost.round_us.iter().zip(&cost.predict_us).all(|(r, p)| r >= p));
        assert!(cost.known >= 10, "{}", cost.known);
        assert!(cost.planned_apps > 0 && cost.planned_ranges > 0);
        assert!(!setup.dir.exists());
        let bad = RoundCostSetup { predictor: "oracle".into(), ..setup };
        assert!(matches!(measure(&bad), Err(BenchError::Usage(_))));
    }

    #[test]
    fn keys_split_between_root_and_one_user() {
        assert_eq!(key_of(0, 1000), "/opt/app0/bin/app");
        assert_eq!(augur_core::model::user::key_uid(&key_of(999, 1000)), 1000);
    }
}
