//! preload 0.6.4's prediction model, reproduced rule for rule as the baseline augur must beat.
//!
//! preload scans the running processes once per cycle (20 s) and keeps, for every pair of
//! applications it knows, a 4-state continuous-time Markov chain over "neither runs / only A /
//! only B / both". It updates the chains half a cycle after each scan, and right after each scan
//! predicts, for every application not running, the probability that it starts within 1.5
//! cycles, combining the pairs through log-probabilities. `docs/predictors.md` states every
//! formula and rule; this file follows them exactly, including preload's integer clock, its
//! half-cycle split between scan and model update, and its blindness to anything that starts
//! and ends between two scans. It owns that model only: no pages, no memory budget. Pure.

use std::collections::BTreeMap;

use super::{AppProbability, Explanation, LocalTime, Observation, Predictor, RunningApps, unit};

/// preload's model settings (its `[model]` section), at preload's defaults.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PreloadConfig {
    /// Seconds per cycle (`model.cycle`, default 20).
    pub cycle_s: i64,
    /// Weigh each pair's bid by the correlation coefficient (`model.usecorrelation`, default true).
    pub use_correlation: bool,
}

impl Default for PreloadConfig {
    fn default() -> Self {
        PreloadConfig { cycle_s: 20, use_correlation: true }
    }
}

/// One application as preload tracks it (its `preload_exe_t`).
#[derive(Clone, Debug)]
struct Exe {
    name: String,
    /// Seconds it has been seen running (accounted at model updates).
    time: i64,
    /// Time of the last scan that saw it running; -1 never.
    running_timestamp: i64,
    /// Time its running state last changed (as applied at a model update).
    change_timestamp: i64,
    /// ln P(not needed in the next period), from the last prediction.
    lnprob: f64,
    /// Indices of the chains it takes part in.
    markovs: Vec<usize>,
}

/// The chain of one pair (its `preload_markov_t`). State bit 0: A runs; bit 1: B runs.
#[derive(Clone, Debug)]
struct Markov {
    a: usize,
    b: usize,
    state: usize,
    change_timestamp: i64,
    /// Seconds both ran (state 3), accounted at model updates.
    time: i64,
    /// Mean seconds spent in each state before leaving it.
    time_to_leave: [f64; 4],
    /// `weight[s][s]`: times state s was left; `weight[s][t]`: transitions s → t.
    weight: [[u32; 4]; 4],
}

/// One pair's contribution to an application's probability, kept for `explain`.
#[derive(Clone, Debug)]
struct Bid {
    other: usize,
    state: usize,
    correlation: f64,
    p_state_change: f64,
    p_runs_next: f64,
    p_runs: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Scan,
    Update,
}

/// preload 0.6.4's predictor.
#[derive(Clone, Debug)]
pub struct PreloadPredictor {
    config: PreloadConfig,
    /// Local time of preload's time zero (the first thing it was shown).
    origin: Option<LocalTime>,
    /// preload's clock (`state->time`), whole seconds since the origin.
    time: i64,
    phase: Phase,
    last_running_timestamp: i64,
    last_accounting_timestamp: i64,
    exes: Vec<Exe>,
    by_name: BTreeMap<String, usize>,
    markovs: Vec<Markov>,
    running_exes: Vec<usize>,
    /// Applications seen running at the last scan but not yet known, with the instance seen.
    new_exes: BTreeMap<String, u64>,
    state_changed_exes: Vec<usize>,
    model_dirty: bool,
    /// The bids of the last prediction, per application.
    bids: BTreeMap<usize, Vec<Bid>>,
    /// What /proc would show: the applications running now.
    truth: RunningApps,
}

impl PreloadPredictor {
    /// A predictor that has seen nothing.
    pub fn new(config: PreloadConfig) -> Self {
        PreloadPredictor {
            config,
            origin: None,
            time: 0,
            phase: Phase::Scan,
            last_running_timestamp: 0,
            last_accounting_timestamp: 0,
            exes: Vec::new(),
            by_name: BTreeMap::new(),
            markovs: Vec::new(),
            running_exes: Vec::new(),
            new_exes: BTreeMap::new(),
            state_changed_exes: Vec::new(),
            model_dirty: false,
            bids: BTreeMap::new(),
            truth: RunningApps::default(),
        }
    }

    fn exe_is_running(&self, e: usize) -> bool {
        self.exes[e].running_timestamp >= self.last_running_timestamp
    }

    fn markov_state(&self, m: &Markov) -> usize {
        usize::from(self.exe_is_running(m.a)) + 2 * usize::from(self.exe_is_running(m.b))
    }

    /// Local time of the next tick.
    fn next_tick(&self, origin: LocalTime) -> LocalTime {
        LocalTime(origin.0 + (self.time.max(0) as u64) * 1000)
    }

    /// Runs every tick due before `to` (or at `to` too, when `inclusive`).
    fn advance(&mut self, to: LocalTime, inclusive: bool) {
        let origin = *self.origin.get_or_insert(to);
        loop {
            let tick = self.next_tick(origin);
            if tick > to || (tick == to && !inclusive) {
                break;
            }
            match self.phase {
                Phase::Scan => {
                    self.scan();
                    self.model_dirty = true;
                    self.predict_now();
                    self.time += self.config.cycle_s / 2;
                    self.phase = Phase::Update;
                }
                Phase::Update => {
                    if self.model_dirty {
                        self.update_model();
                        self.model_dirty = false;
                    }
                    self.time += (self.config.cycle_s + 1) / 2;
                    self.phase = Phase::Scan;
                }
            }
        }
    }

    /// `preload_spy_scan`: which known applications started or stopped, which are new.
    fn scan(&mut self) {
        let mut new_running = Vec::new();
        self.state_changed_exes.clear();
        self.new_exes.clear();
        let running: Vec<(String, u64)> =
            self.truth.apps().map(|a| (a.to_string(), self.truth.first_instance(a).unwrap_or(0))).collect();
        for (name, instance) in running {
            match self.by_name.get(&name) {
                Some(&e) => {
                    if !self.exe_is_running(e) {
                        new_running.push(e);
                        self.state_changed_exes.push(e);
                    }
                    self.exes[e].running_timestamp = self.time;
                }
                None => {
                    self.new_exes.insert(name, instance);
                }
            }
        }
        self.last_running_timestamp = self.time;
        for &e in &self.running_exes {
            if self.exe_is_running(e) {
                new_running.push(e);
            } else {
                self.state_changed_exes.push(e);
            }
        }
        self.running_exes = new_running;
    }

    /// `preload_spy_update_model`: registers new applications, applies state changes to the
    /// chains, and accounts running time.
    fn update_model(&mut self) {
        let new_exes = std::mem::take(&mut self.new_exes);
        for (name, instance) in new_exes {
            // preload reads the process's maps now; a process that already died is skipped.
            if !self.truth.instance_running(&name, instance) {
                continue;
            }
            let e = self.exes.len();
            self.exes.push(Exe {
                name: name.clone(),
                time: 0,
                running_timestamp: self.last_running_timestamp,
                change_timestamp: self.time,
                lnprob: 0.0,
                markovs: Vec::new(),
            });
            self.by_name.insert(name, e);
            for a in 0..e {
                self.markov_new(a, e);
            }
            self.running_exes.push(e);
        }
        let changed = std::mem::take(&mut self.state_changed_exes);
        for &e in &changed {
            self.exes[e].change_timestamp = self.time;
            for k in 0..self.exes[e].markovs.len() {
                let m = self.exes[e].markovs[k];
                self.markov_state_changed(m);
            }
        }
        let period = self.time - self.last_accounting_timestamp;
        for e in 0..self.exes.len() {
            if self.exe_is_running(e) {
                self.exes[e].time += period;
            }
        }
        for m in &mut self.markovs {
            if m.state == 3 {
                m.time += period;
            }
        }
        self.last_accounting_timestamp = self.time;
    }

    /// `preload_markov_new(a, b, TRUE)` for an existing `a` and a just-registered `b`.
    fn markov_new(&mut self, a: usize, b: usize) {
        let mut m = Markov { a, b, state: 0, change_timestamp: self.time, time: 0, time_to_leave: [0.0; 4], weight: [[0; 4]; 4] };
        m.state = self.markov_state(&m);
        let (ta, tb) = (self.exes[a].change_timestamp, self.exes[b].change_timestamp);
        if ta > 0 && tb > 0 {
            if ta < self.time {
                m.change_timestamp = ta;
            }
            if tb < self.time && tb > m.change_timestamp {
                m.change_timestamp = tb;
            }
            if ta > m.change_timestamp {
                m.state ^= 1;
            }
            if tb > m.change_timestamp {
                m.state ^= 2;
            }
        }
        let idx = self.markovs.len();
        self.markovs.push(m);
        self.markov_state_changed(idx);
        self.exes[a].markovs.push(idx);
        self.exes[b].markovs.push(idx);
    }

    /// `preload_markov_state_changed`: closes the sojourn in the old state.
    fn markov_state_changed(&mut self, idx: usize) {
        if self.markovs[idx].change_timestamp == self.time {
            return; // already taken care of
        }
        let new_state = self.markov_state(&self.markovs[idx]);
        let time = self.time;
        let m = &mut self.markovs[idx];
        let old = m.state;
        if old == new_state {
            return; // preload: g_return_if_fail (old_state != new_state)
        }
        m.weight[old][old] += 1;
        let w = f64::from(m.weight[old][old]);
        m.time_to_leave[old] += ((time - m.change_timestamp) as f64 - m.time_to_leave[old]) / w;
        m.weight[old][new_state] += 1;
        m.state = new_state;
        m.change_timestamp = time;
    }

    /// `preload_markov_correlation`: Pearson's coefficient of the two running indicators.
    fn correlation(&self, m: &Markov) -> f64 {
        let t = self.time;
        let a = self.exes[m.a].time;
        let b = self.exes[m.b].time;
        let ab = m.time;
        if a == 0 || a == t || b == 0 || b == t {
            return 0.0;
        }
        let numerator = (t as f64) * (ab as f64) - (a as f64) * (b as f64);
        let denominator2 = (a as f64) * (b as f64) * ((t - a) as f64) * ((t - b) as f64);
        numerator / denominator2.sqrt()
    }

    /// `preload_prophet_predict`'s first half: every chain bids in its non-running applications.
    fn predict_now(&mut self) {
        for e in &mut self.exes {
            e.lnprob = 0.0;
        }
        self.bids.clear();
        for idx in 0..self.markovs.len() {
            let m = &self.markovs[idx];
            let s = m.state;
            if m.weight[s][s] == 0 {
                continue;
            }
            let correlation = if self.config.use_correlation { self.correlation(m) } else { 1.0 };
            let (a, b) = (m.a, m.b);
            if s & 1 == 0 {
                self.bid_for_exe(idx, a, b, 1, correlation);
            }
            if s & 2 == 0 {
                self.bid_for_exe(idx, b, a, 2, correlation);
            }
        }
    }

    /// `markov_bid_for_exe`: P(y runs in the next 1.5 cycles | this pair's state).
    fn bid_for_exe(&mut self, idx: usize, y: usize, other: usize, ystate: usize, correlation: f64) {
        let m = &self.markovs[idx];
        let s = m.state;
        let ttl = m.time_to_leave[s];
        if m.weight[s][s] == 0 || ttl.is_nan() || ttl <= 1.0 {
            return;
        }
        let p_state_change = 1.0 - (-(self.config.cycle_s as f64) * 1.5 / m.time_to_leave[s]).exp();
        let p_runs_next = f64::from(m.weight[s][ystate] + m.weight[s][3]) / (f64::from(m.weight[s][s]) + 0.01);
        let correlation = correlation.abs().min(1.0);
        let p_runs = correlation * p_state_change * p_runs_next;
        self.exes[y].lnprob += (1.0 - p_runs).ln();
        self.bids.entry(y).or_default().push(Bid { other, state: s, correlation, p_state_change, p_runs_next, p_runs });
    }

    fn probability(&self, e: usize) -> f64 {
        if self.exe_is_running(e) {
            return 0.0; // preload votes against the maps of running applications
        }
        unit(1.0 - self.exes[e].lnprob.exp())
    }

    /// Seconds on preload's clock (for tests and explanations).
    pub fn clock_s(&self) -> i64 {
        self.time
    }
}

impl Predictor for PreloadPredictor {
    fn name(&self) -> &str {
        "preload"
    }

    fn observe(&mut self, event: &Observation<'_>) {
        self.advance(event.at, false);
        self.truth.apply(event);
    }

    fn predict(&mut self, now: LocalTime) -> Vec<AppProbability> {
        self.advance(now, true);
        self.by_name.iter().map(|(app, &e)| AppProbability { app: app.clone(), probability: self.probability(e) }).collect()
    }

    fn explain(&mut self, app: &str, now: LocalTime) -> Explanation {
        self.advance(now, true);
        let mut reasons = Vec::new();
        let probability = match self.by_name.get(app) {
            None => {
                reasons.push("not known to preload: never seen running at a scan and still running half a cycle later".into());
                0.0
            }
            Some(&e) => {
                if self.exe_is_running(e) {
                    reasons.push("running at the last scan: preload does not prefetch running applications".into());
                }
                let mut bids = self.bids.get(&e).cloned().unwrap_or_default();
                bids.sort_by(|x, y| y.p_runs.total_cmp(&x.p_runs));
                for b in &bids {
                    reasons.push(format!(
                        "with {} ({}): P(pair state changes within 1.5 cycles) = {:.3}, P(it then runs) = {:.3}, |correlation| = {:.3} => bid {:.4}",
                        self.exes[b.other].name,
                        state_name(b.state, &self.exes[e].name, &self.exes[b.other].name, self.markovs.iter().any(|m| m.a == e && m.b == b.other)),
                        b.p_state_change,
                        b.p_runs_next,
                        b.correlation,
                        b.p_runs
                    ));
                }
                if bids.is_empty() {
                    reasons.push(
                        "no pair bid for it at the last scan (no chain has left its current state before, or zero correlation)"
                            .into(),
                    );
                }
                reasons.push(format!("ln P(not needed) = {:.4} summed over {} bids", self.exes[e].lnprob, bids.len()));
                self.probability(e)
            }
        };
        Explanation { predictor: self.name().into(), app: app.into(), probability, reasons }
    }
}

fn state_name(state: usize, me: &str, other: &str, me_is_a: bool) -> String {
    let (a, b) = if me_is_a { (me, other) } else { (other, me) };
    match state {
        0 => "neither running".into(),
        1 => format!("only {a} running"),
        2 => format!("only {b} running"),
        _ => "both running".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{exit, feed, launch, prob};
    use super::*;

    /// The timeline worked by hand in docs/predictors.md ("A worked example").
    fn worked_example() -> PreloadPredictor {
        let mut p = PreloadPredictor::new(PreloadConfig::default());
        p.predict(LocalTime(0)); // preload starts at t = 0: scans at 0, 20, 40, ...; updates at 10, 30, ...
        feed(&mut p, &[launch(5, "A", 1), launch(25, "B", 2), exit(65, "A", 1), exit(85, "B", 2), launch(150, "A", 3)]);
        p
    }

    #[test]
    fn chain_counts_match_the_hand_computation() {
        let mut p = worked_example();
        p.predict(LocalTime(175_000));
        assert_eq!(p.clock_s(), 180);
        let m = &p.markovs[0];
        assert_eq!((m.a, m.b), (0, 1));
        // Registration of B at 50 records A-only (since A's change at 30) -> both.
        assert_eq!(m.weight[1][1], 1);
        assert_eq!(m.weight[1][3], 1);
        assert_eq!(m.time_to_leave[1], 20.0);
        // Both -> only B at 90 (A's exit seen at the scan at 80).
        assert_eq!(m.weight[3][3], 1);
        assert_eq!(m.weight[3][2], 1);
        assert_eq!(m.time_to_leave[3], 40.0);
        // Only B -> neither at 110 (B's exit seen at the scan at 100); neither -> only A at 170.
        assert_eq!((m.weight[2][2], m.weight[2][0], m.time_to_leave[2]), (1, 1, 20.0));
        assert_eq!((m.weight[0][0], m.weight[0][1], m.time_to_leave[0]), (1, 1, 60.0));
        assert_eq!(m.state, 1);
        assert_eq!(m.time, 40);
        // A: 20 s accounted at each update that saw it running (30, 50, 70, 170).
        assert_eq!(p.exes[0].time, 80);
        assert_eq!(p.exes[1].time, 60);
    }

    #[test]
    fn prediction_matches_the_hand_computation() {
        let mut p = worked_example();
        // Before the scan at 180 no chain has a bid (state "neither" was never left at 160).
        let before = p.predict(LocalTime(170_000));
        assert_eq!(prob(&before, "B"), 0.0);
        let ps = p.predict(LocalTime(180_000));
        // corr = (180*40 - 80*60) / sqrt(80*60*100*120) = 1/sqrt(10)
        // P(change) = 1 - exp(-20*1.5/20) = 1 - e^-1.5; P(B next) = (0 + 1) / (1 + 0.01)
        let expected = (1.0 / 10f64.sqrt()) * (1.0 - (-1.5f64).exp()) * (1.0 / 1.01);
        assert!((prob(&ps, "B") - expected).abs() < 1e-12, "{} vs {expected}", prob(&ps, "B"));
        assert!((expected - 0.243_235).abs() < 1e-5);
        assert_eq!(prob(&ps, "A"), 0.0, "A runs");
        let e = p.explain("B", LocalTime(180_000));
        assert!(e.reasons[0].contains("only A running"), "{:?}", e.reasons);
    }

    #[test]
    fn without_correlation_the_bid_is_the_chain_alone() {
        let mut p = PreloadPredictor::new(PreloadConfig { use_correlation: false, ..PreloadConfig::default() });
        p.predict(LocalTime(0));
        feed(&mut p, &[launch(5, "A", 1), launch(25, "B", 2), exit(65, "A", 1), exit(85, "B", 2), launch(150, "A", 3)]);
        let ps = p.predict(LocalTime(180_000));
        let expected = (1.0 - (-1.5f64).exp()) / 1.01;
        assert!((prob(&ps, "B") - expected).abs() < 1e-12);
    }

    #[test]
    fn short_lived_processes_are_invisible() {
        let mut p = PreloadPredictor::new(PreloadConfig::default());
        p.predict(LocalTime(0));
        // Starts after the scan at 0 and ends before the scan at 20.
        feed(&mut p, &[launch(1, "blip", 1), exit(19, "blip", 1)]);
        // Seen at the scan at 40 but gone before the update at 50: not registered either.
        feed(&mut p, &[launch(39, "quick", 2), exit(45, "quick", 2)]);
        assert!(p.predict(LocalTime(100_000)).is_empty());
    }

    #[test]
    fn multiple_applications_combine_through_log_probabilities() {
        // Two chains bidding for C: P = 1 - (1 - p1)(1 - p2).
        let mut p = PreloadPredictor::new(PreloadConfig { use_correlation: false, ..PreloadConfig::default() });
        p.predict(LocalTime(0));
        let mut events = Vec::new();
        // A and B start together; C follows; all stop; twice.
        let mut inst = 0;
        for base in [0u64, 400] {
            for (dt, app) in [(5, "A"), (6, "B"), (45, "C")] {
                inst += 1;
                events.push(launch(base + dt, app, inst));
            }
            for (k, app) in ["A", "B", "C"].iter().enumerate() {
                events.push(exit(base + 200 + k as u64, app, inst - 2 + k as u64));
            }
        }
        events.push(launch(805, "A", 100));
        events.push(launch(806, "B", 101));
        feed(&mut p, &events);
        let ps = p.predict(LocalTime(840_000));
        let c = p.by_name["C"];
        let bids = &p.bids[&c];
        assert_eq!(bids.len(), 2);
        let expected = 1.0 - bids.iter().map(|b| 1.0 - b.p_runs).product::<f64>();
        assert!((prob(&ps, "C") - expected).abs() < 1e-12);
        assert!(prob(&ps, "C") > bids[0].p_runs.max(bids[1].p_runs));
    }
}
