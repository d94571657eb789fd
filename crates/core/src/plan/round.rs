//! One planning round, the decision the daemon takes on each launch, exit and interval and the
//! simulator takes at each of its re-plans: from the memory figures and pressure, the predictor's
//! output and the learned footprints of the likeliest applications, which page ranges to keep
//! resident and in which order to fetch them.
//!
//! Owns the round's rules, in order: stop while pressure is at or above the stop threshold;
//! the budget (a fixed one, or the computed one from MemAvailable and pressure); the candidates
//! (probability above zero, likeliest first, ties by name, at most [`MAX_CANDIDATES`]); the
//! planner over their footprints, within the memory headroom the caller measured and the cost
//! model's knobs (`read_cost`, `evict_cost`: nothing is fetched that cannot win). Both callers run [`PlanningRound::run`], so the simulator's
//! figures describe the daemon's choice. Pure: it reads nothing itself — the caller passes the
//! memory figures in and gives the predictor's output and each candidate's footprint through
//! closures, called only when the round gets that far (the daemon reads footprints from its
//! state, and some predictors advance their state when asked).

use std::sync::Arc;

use super::budget::{BudgetConfig, MemoryBudget, MemoryPressure, MemorySnapshot};
use super::cost::MemoryHeadroom;
use super::planner::{AppFootprint, Plan, PlannerConfig, plan_within};
use crate::model::predict::AppProbability;

/// Applications considered per round at most (the likeliest), to bound the footprints read.
pub const MAX_CANDIDATES: usize = 32;

/// With a read cost, the least likely candidates whose probabilities add up to at most this
/// share of it are not considered: none of their ranges is worth its read unless another
/// candidate needs it too, and then they add less than this share of the read cost to its
/// probability (`1 − Π (1 − pᵢ) ≤ Σ pᵢ`). A round then reads the footprints of the applications
/// that can matter, not of the tail of a thousand known ones.
pub const NEGLIGIBLE_SHARE_OF_READ_COST: f64 = 0.01;

/// A plan's pages found resident are kept — marked used once more, so that the kernel, which
/// protects what it saw used twice, keeps them until the launch they were read for — at most
/// this often per application (milliseconds). Without it prefetched pages age from the moment
/// they are read, and an application predicted over several launches is read again each time
/// its pages aged out (the simulator's waste was mostly such refetches, docs/predictors.md).
pub const KEEP_GAP_MS: u64 = 60_000;

/// A round's settings (the daemon's `[predict]` section; the simulator's budget and seek cost).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoundConfig {
    /// A fixed budget in bytes; 0 computes it from MemAvailable and pressure.
    pub budget_bytes: u64,
    /// Share of MemAvailable the computed budget may use, in `[0, 1]`.
    pub budget_available_fraction: f64,
    /// No round while PSI `some avg10` is at or above this (percent); the computed budget backs
    /// off linearly from a tenth of it.
    pub pressure_stop_percent: f64,
    /// Candidates planned for at most.
    pub max_candidates: usize,
    /// The planner's cost of one extra read request, in bytes of transfer.
    pub seek_cost_bytes: u64,
    /// The planner's cost of reading a byte ahead of time, in bytes of launch-time reading saved
    /// (`[predict] read_cost`; 0 with `evict_cost` 0 fills the budget as preload does).
    pub read_cost: f64,
    /// The planner's least chance that a byte pushed out is needed again (`[predict] evict_cost`).
    pub evict_cost: f64,
}

/// `[predict] read_cost`'s default: reading ahead of time costs a fifth of what the same read
/// costs a launch waiting for it (it runs at idle priority, but takes the disk and memory
/// bandwidth, and energy). With it, a range is fetched only when the chance it is needed soon is
/// above about 0.2 (less for small ranges, which also save a seek each).
pub const DEFAULT_READ_COST: f64 = 0.2;

/// `[predict] evict_cost`'s default: pushing a byte out of a full page cache counts as at least
/// a one-in-ten chance of pushing out something needed (raised to the measured refault share).
pub const DEFAULT_EVICT_COST: f64 = 0.1;

impl Default for RoundConfig {
    /// The daemon's defaults.
    fn default() -> Self {
        let budget = BudgetConfig::default();
        RoundConfig {
            budget_bytes: 0,
            budget_available_fraction: budget.available_fraction,
            pressure_stop_percent: budget.pressure_high,
            max_candidates: MAX_CANDIDATES,
            seek_cost_bytes: PlannerConfig::default().seek_cost_bytes,
            read_cost: DEFAULT_READ_COST,
            evict_cost: DEFAULT_EVICT_COST,
        }
    }
}

/// A footprint learned for a candidate, with the page size of the profile it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct LearnedFootprint {
    /// The ranges, in first-use order (shared: the daemon keeps a planned application's
    /// footprint from round to round while its profile is unchanged).
    pub footprint: Arc<AppFootprint>,
    /// Bytes per page (per planning unit) of `footprint`'s ranges.
    pub page_size: u64,
}

/// What a round starts from: its settings and the memory figures the caller read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlanningRound<'a> {
    /// Settings.
    pub config: &'a RoundConfig,
    /// /proc/meminfo, if readable (needed only without a fixed budget).
    pub memory: Option<MemorySnapshot>,
    /// /proc/pressure/memory, if readable (no pressure: no back-off, no stop).
    pub pressure: Option<MemoryPressure>,
    /// The page size planned in when no candidate has a footprint.
    pub default_page_size: u64,
    /// What the memory to be filled holds: free bytes and the recent refault share.
    pub headroom: MemoryHeadroom,
}

/// What a round decided.
#[derive(Clone, Debug, PartialEq)]
pub enum RoundOutcome {
    /// Pressure is at or above the stop threshold: fetching stops, nothing is planned.
    PressureStop,
    /// No fixed budget and no memory figures: no round.
    NoMemoryFigures,
    /// The round planned.
    Planned(RoundPlan),
}

/// A round's plan and what it was made from.
#[derive(Clone, Debug, PartialEq)]
pub struct RoundPlan {
    /// The budget planned for.
    pub budget: MemoryBudget,
    /// The candidates, likeliest first (ties by name), at most `max_candidates`, each above zero.
    pub candidates: Vec<AppProbability>,
    /// Applications whose footprint the plan was made over, by name.
    pub planned_apps: Vec<String>,
    /// What to keep resident, in fetch order (likeliest application first).
    pub plan: Plan,
}

/// `candidates` (likeliest first) without the least likely ones whose probabilities add up to at
/// most [`NEGLIGIBLE_SHARE_OF_READ_COST`] of `read_cost` (all of them when it is 0).
pub fn without_negligible_tail(mut candidates: Vec<AppProbability>, read_cost: f64) -> Vec<AppProbability> {
    if read_cost.is_nan() || read_cost <= 0.0 {
        return candidates;
    }
    let limit = read_cost * NEGLIGIBLE_SHARE_OF_READ_COST;
    let mut tail = 0.0;
    let mut keep = candidates.len();
    while let Some(c) = keep.checked_sub(1).map(|k| &candidates[k]) {
        tail += c.probability.clamp(0.0, 1.0);
        if tail > limit {
            break;
        }
        keep -= 1;
    }
    candidates.truncate(keep);
    candidates
}

/// The candidates of a round: probability above zero (NaN is not), likeliest first, ties by
/// application name, at most `max`.
/// Linear in the number of predictions (a selection, then a sort of the `max` kept), so a round
/// over thousands of known applications stays cheap.
pub fn candidates(mut predictions: Vec<AppProbability>, max: usize) -> Vec<AppProbability> {
    predictions.retain(|p| p.probability > 0.0);
    let order = |a: &AppProbability, b: &AppProbability| b.probability.total_cmp(&a.probability).then_with(|| a.app.cmp(&b.app));
    if max == 0 {
        predictions.clear();
    } else if predictions.len() > max {
        predictions.select_nth_unstable_by(max - 1, order);
        predictions.truncate(max);
    }
    predictions.sort_by(order);
    predictions
}

/// The mean probability of the applications predicted above zero (0 when none is): the value of
/// an application's pages as far as the predictor can tell, when it cannot tell which.
pub fn mean_probability(predictions: &[AppProbability]) -> f64 {
    let (n, sum) = predictions
        .iter()
        .filter(|p| p.probability > 0.0)
        .fold((0usize, 0.0f64), |(n, s), p| (n + 1, s + p.probability.min(1.0)));
    if n == 0 { 0.0 } else { sum / n as f64 }
}

impl PlanningRound<'_> {
    /// The budget of this round, or why there is no round.
    pub fn budget(&self) -> Result<MemoryBudget, RoundOutcome> {
        let c = self.config;
        if self.pressure.is_some_and(|p| p.some_avg10 >= c.pressure_stop_percent) {
            return Err(RoundOutcome::PressureStop);
        }
        if c.budget_bytes > 0 {
            return Ok(MemoryBudget::of(c.budget_bytes));
        }
        let Some(mem) = &self.memory else { return Err(RoundOutcome::NoMemoryFigures) };
        let bc = BudgetConfig {
            available_fraction: c.budget_available_fraction,
            cap_bytes: None,
            pressure_low: c.pressure_stop_percent / 10.0,
            pressure_high: c.pressure_stop_percent,
        };
        Ok(MemoryBudget::compute(mem, self.pressure, &bc))
    }

    /// Runs the round: `predict` is asked for the predictor's output only once the round has a
    /// budget, `footprint` only for each candidate, likeliest first (None: nothing learned).
    pub fn run<E>(
        &self,
        predict: impl FnOnce() -> Vec<AppProbability>,
        mut footprint: impl FnMut(&str) -> Result<Option<LearnedFootprint>, E>,
    ) -> Result<RoundOutcome, E> {
        let budget = match self.budget() {
            Ok(b) => b,
            Err(outcome) => return Ok(outcome),
        };
        let predictions = predict();
        let displaced_probability =
            if self.config.read_cost > 0.0 || self.config.evict_cost > 0.0 { mean_probability(&predictions) } else { 0.0 };
        let candidates = without_negligible_tail(candidates(predictions, self.config.max_candidates), self.config.read_cost);
        let mut learned: Vec<LearnedFootprint> = Vec::new();
        for c in &candidates {
            if let Some(f) = footprint(&c.app)? {
                learned.push(f);
            }
        }
        learned.sort_by(|a, b| a.footprint.app().cmp(b.footprint.app()));
        let page_size = learned.first().map_or(self.default_page_size, |f| f.page_size);
        let planned_apps: Vec<String> = learned.iter().map(|f| f.footprint.app().to_string()).collect();
        let footprints: Vec<Arc<AppFootprint>> = learned.into_iter().map(|f| f.footprint).collect();
        let config = PlannerConfig {
            page_size,
            seek_cost_bytes: self.config.seek_cost_bytes,
            read_cost: self.config.read_cost,
            evict_cost: self.config.evict_cost,
            displaced_probability,
            ..PlannerConfig::default()
        };
        let plan = plan_within(&candidates, &footprints, budget, &self.headroom, &config);
        Ok(RoundOutcome::Planned(RoundPlan { budget, candidates, planned_apps, plan }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::range::PageRange;
    use crate::plan::RangeUse;
    use crate::plan::planner::app_order;
    use std::collections::BTreeMap;
    use std::convert::Infallible;

    fn probs(v: &[(&str, f64)]) -> Vec<AppProbability> {
        v.iter().map(|&(a, p)| AppProbability { app: a.into(), probability: p }).collect()
    }

    /// Each app: one private file of `pages` pages.
    fn footprints(apps: &[(&str, u64)]) -> BTreeMap<String, LearnedFootprint> {
        apps.iter()
            .map(|&(app, pages)| {
                let ranges = vec![RangeUse {
                    file: format!("/{app}").into(),
                    range: PageRange::new(0, pages),
                    use_share: 1.0,
                    resident_pages: 0,
                }];
                (app.to_string(), LearnedFootprint { footprint: Arc::new(AppFootprint::new(app, ranges)), page_size: 4096 })
            })
            .collect()
    }

    fn fixed(bytes: u64) -> RoundConfig {
        RoundConfig { budget_bytes: bytes, seek_cost_bytes: 0, read_cost: 0.0, evict_cost: 0.0, ..RoundConfig::default() }
    }

    fn round(config: &RoundConfig) -> PlanningRound<'_> {
        PlanningRound { config, memory: None, pressure: None, default_page_size: 4096, headroom: MemoryHeadroom::UNMEASURED }
    }

    /// Runs `r` and returns the plan and the applications asked for, in order.
    fn run(r: &PlanningRound<'_>, p: Vec<AppProbability>, fps: &BTreeMap<String, LearnedFootprint>) -> (RoundPlan, Vec<String>) {
        let mut asked = Vec::new();
        let outcome = r
            .run(
                || p,
                |app| {
                    asked.push(app.to_string());
                    Ok::<_, Infallible>(fps.get(app).cloned())
                },
            )
            .unwrap();
        match outcome {
            RoundOutcome::Planned(plan) => (plan, asked),
            other => panic!("no plan: {other:?}"),
        }
    }

    #[test]
    fn a_tail_that_cannot_pay_for_a_read_is_not_read() {
        let fps = footprints(&[("a", 4), ("b", 4), ("c", 4), ("d", 4)]);
        let config = RoundConfig { read_cost: 0.2, ..fixed(1 << 30) };
        // 1 % of the read cost is 0.002: c and d together (0.0015) are left out, b is not.
        let (plan, asked) = run(&round(&config), probs(&[("a", 0.9), ("b", 0.01), ("c", 0.001), ("d", 0.0005)]), &fps);
        assert_eq!(asked, vec!["a", "b"]);
        assert_eq!(plan.candidates, probs(&[("a", 0.9), ("b", 0.01)]));
        // Without a read cost every candidate's pages are worth taking: none is left out.
        let (_, asked) = run(&round(&fixed(1 << 30)), probs(&[("a", 0.9), ("b", 0.01), ("c", 0.001), ("d", 0.0005)]), &fps);
        assert_eq!(asked, vec!["a", "b", "c", "d"]);
        assert_eq!(without_negligible_tail(probs(&[("a", 0.001)]), 0.2), vec![]);
        assert_eq!(without_negligible_tail(probs(&[("a", 0.001)]), f64::NAN), probs(&[("a", 0.001)]));
    }

    #[test]
    fn zero_probability_is_no_candidate_and_its_footprint_is_not_read() {
        let fps = footprints(&[("a", 4), ("b", 4), ("c", 4)]);
        let (plan, asked) = run(&round(&fixed(1 << 30)), probs(&[("a", 0.0), ("b", 0.4), ("c", f64::NAN)]), &fps);
        assert_eq!(asked, vec!["b"]);
        assert_eq!(plan.candidates, probs(&[("b", 0.4)]));
        assert_eq!(app_order(&plan.plan), vec!["b"]);
    }

    #[test]
    fn at_most_max_candidates_the_likeliest_with_ties_by_name() {
        // 40 applications, probabilities in six tiers (0.6 down to 0.1) of 6 or 7: the cap of 32
        // falls inside the 0.2 tier, which has 7.
        let names: Vec<String> = (0..40).map(|i| format!("app{i:02}")).collect();
        let p: Vec<AppProbability> = names
            .iter()
            .rev()
            .enumerate()
            .map(|(i, n)| AppProbability { app: n.clone(), probability: 0.1 * (1 + i % 6) as f64 })
            .collect();
        let apps: Vec<(&str, u64)> = names.iter().map(|n| (n.as_str(), 1)).collect();
        let fps = footprints(&apps);
        let config = fixed(1 << 30);
        let (plan, asked) = run(&round(&config), p.clone(), &fps);
        assert_eq!(plan.candidates.len(), MAX_CANDIDATES);
        assert_eq!(asked.len(), MAX_CANDIDATES);
        let expected: Vec<&str> = plan.candidates.iter().map(|c| c.app.as_str()).collect();
        assert_eq!(asked, expected, "footprints are read likeliest first");
        for w in plan.candidates.windows(2) {
            assert!(
                w[0].probability > w[1].probability || (w[0].probability == w[1].probability && w[0].app < w[1].app),
                "{w:?}"
            );
        }
        // The four upper tiers (26), then the 0.2 tier by name: all of it but its last name.
        let tier = |q: f64| -> Vec<&str> {
            let mut v: Vec<&str> = p.iter().filter(|c| (c.probability - q).abs() < 1e-9).map(|c| c.app.as_str()).collect();
            v.sort();
            v
        };
        let low = tier(0.2);
        assert_eq!(low.len(), 7);
        assert!(plan.candidates.iter().all(|c| c.probability > 0.15));
        assert!(low[..6].iter().all(|a| expected.contains(a)) && !expected.contains(&low[6]));
        assert_eq!(app_order(&plan.plan), expected, "fetched likeliest first, ties by name");
        // The input order does not matter.
        let mut shuffled = p;
        shuffled.reverse();
        shuffled.rotate_left(7);
        assert_eq!(run(&round(&config), shuffled, &fps).0, plan);
        // A smaller cap takes a prefix.
        let three = RoundConfig { max_candidates: 3, ..config };
        let (small, _) = run(&round(&three), plan.candidates.clone(), &fps);
        assert_eq!(small.candidates, plan.candidates[..3]);
    }

    #[test]
    fn the_budget_is_respected_and_goes_to_the_likeliest() {
        let fps = footprints(&[("a", 10), ("b", 10), ("c", 10)]);
        let (plan, _) = run(&round(&fixed(15 * 4096)), probs(&[("a", 0.2), ("b", 0.9), ("c", 0.5)]), &fps);
        assert_eq!(plan.budget, MemoryBudget::of(15 * 4096));
        assert_eq!(plan.plan.bytes, 15 * 4096);
        assert_eq!(app_order(&plan.plan), vec!["b", "c"]);
        assert_eq!(plan.plan.ranges[1].range, PageRange::new(0, 5), "the last range is cut to fit");
        assert_eq!(plan.planned_apps, vec!["a", "b", "c"]);
    }

    #[test]
    fn the_computed_budget_follows_memory_and_pressure_and_stops() {
        let fps = footprints(&[("a", 1 << 20)]);
        let config = RoundConfig::default();
        let mem = MemorySnapshot { total: 8 << 30, free: 1 << 30, available: 4 << 30, cached: 2 << 30, locked: 0 };
        let at = |pressure: Option<f64>| PlanningRound {
            config: &config,
            memory: Some(mem),
            pressure: pressure.map(|some_avg10| MemoryPressure { some_avg10 }),
            default_page_size: 4096,
            headroom: MemoryHeadroom::UNMEASURED,
        };
        assert_eq!(run(&at(None), probs(&[("a", 1.0)]), &fps).0.budget, MemoryBudget::of(2 << 30));
        // Back-off starts at a tenth of the stop threshold: 5.5 % is half-way from 1 % to 10 %.
        assert_eq!(run(&at(Some(5.5)), probs(&[("a", 1.0)]), &fps).0.budget, MemoryBudget::of(1 << 30));
        let mut asked = false;
        let stopped = at(Some(10.0))
            .run(
                || {
                    asked = true;
                    Vec::new()
                },
                |_| Ok::<_, Infallible>(None),
            )
            .unwrap();
        assert_eq!(stopped, RoundOutcome::PressureStop);
        assert!(!asked, "the predictor is not asked when the round stops");
        let unknown = PlanningRound { memory: None, ..at(None) };
        assert_eq!(unknown.run(Vec::new, |_| Ok::<_, Infallible>(None)).unwrap(), RoundOutcome::NoMemoryFigures);
        // A fixed budget needs no memory figures, but pressure still stops it.
        let fixed_cfg = fixed(4096);
        assert_eq!(round(&fixed_cfg).budget(), Ok(MemoryBudget::of(4096)));
        let pressed = PlanningRound { pressure: Some(MemoryPressure { some_avg10: 50.0 }), ..round(&fixed_cfg) };
        assert_eq!(pressed.budget(), Err(RoundOutcome::PressureStop));
    }

    /// The cost of a round does not grow with the applications known beyond the prediction
    /// list itself: with 1,000 known applications (each a footprint of 40 ranges), the round reads
    /// the footprints of 32 and the planner scores 32 × 40 ranges. (`augur simulate --round-cost`
    /// measures the time; docs/predictors.md gives the figure.)
    #[test]
    fn a_round_over_a_thousand_applications_does_bounded_work() {
        let n = 1000;
        let fps: BTreeMap<String, LearnedFootprint> = (0..n)
            .map(|i| {
                let app = format!("app{i:04}");
                let ranges = (0..40)
                    .map(|k| RangeUse {
                        file: format!("/{app}/{}", k % 5).into(),
                        range: PageRange::new(k * 100, 50),
                        use_share: 1.0,
                        resident_pages: 0,
                    })
                    .collect();
                (app.clone(), LearnedFootprint { footprint: Arc::new(AppFootprint::new(app, ranges)), page_size: 4096 })
            })
            .collect();
        let p: Vec<AppProbability> = (0..n)
            .map(|i| AppProbability { app: format!("app{i:04}"), probability: ((i * 7919) % 1000) as f64 / 1000.0 })
            .collect();
        let config = RoundConfig { budget_bytes: 1 << 30, ..RoundConfig::default() };
        let (plan, asked) = run(&round(&config), p, &fps);
        assert_eq!(asked.len(), MAX_CANDIDATES);
        assert_eq!(plan.plan.work.ranges_read, MAX_CANDIDATES * 40);
        assert!(plan.plan.work.candidates_scored <= MAX_CANDIDATES * 40);
        assert!(plan.candidates.windows(2).all(|w| w[0].probability >= w[1].probability));
        assert_eq!(plan.candidates[0].probability, 0.999);
    }

    /// A predictor whose predictions never come true is believed at almost nothing, and a round
    /// with the daemon's cost model then fetches nothing, however much memory is free.
    #[test]
    fn a_predictor_never_right_prefetches_nothing() {
        use crate::model::predict::{ConfidenceConfig, PredictionConfidence};
        let fps = footprints(&[("a", 10), ("b", 10)]);
        let said = probs(&[("a", 0.9), ("b", 0.6)]);
        let mut tally = PredictionConfidence::new(ConfidenceConfig::default());
        let config = RoundConfig { budget_bytes: 1 << 30, ..RoundConfig::default() };
        let believed = |tally: &PredictionConfidence| -> Vec<AppProbability> {
            said.iter().map(|a| AppProbability { app: a.app.clone(), probability: tally.believe(a.probability) }).collect()
        };
        assert_eq!(app_order(&run(&round(&config), believed(&tally), &fps).0.plan), vec!["a", "b"], "taken at its word at first");
        for _ in 0..300 {
            tally.predicted(&said);
            tally.launched("c");
        }
        assert!(run(&round(&config), believed(&tally), &fps).0.plan.ranges.is_empty());
    }

    #[test]
    fn a_footprint_error_ends_the_round() {
        let config = fixed(1 << 20);
        let r = round(&config).run(|| probs(&[("a", 0.5)]), |_| Err::<Option<LearnedFootprint>, _>("state unreadable"));
        assert_eq!(r, Err("state unreadable"));
    }

    #[test]
    fn without_footprints_the_plan_is_empty_in_the_default_page_size() {
        let config = fixed(1 << 20);
        let (plan, asked) = run(&round(&config), probs(&[("a", 0.5)]), &BTreeMap::new());
        assert_eq!(asked, vec!["a"]);
        assert!(plan.plan.ranges.is_empty() && plan.planned_apps.is_empty());
        assert_eq!(plan.plan.page_size, 4096);
    }
}
