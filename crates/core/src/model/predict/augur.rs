//! augur's own predictor: the probability that each application is the next one launched, from
//! what preload's model lacks — fading memory, the launch sequence just before (a partitioned
//! context model of order 1–2), the time of day and day type, and the session phase.
//!
//! Every part has a switch in [`AugurConfig`] so the simulator can show, by ablation, that each
//! one helps (`BENCHMARKS.md`). Owns the model and its explanation; no pages, no budget. Pure.

use std::collections::BTreeMap;

use super::context::{ContextModel, Symbol};
use super::{AppProbability, Explanation, LocalTime, Observation, Predictor, RunningApps, Transition, unit};

/// The marker that stands for "a session starts" in the launch sequence.
const SESSION_START: Symbol = Symbol::MAX;

/// Settings of the augur predictor; each part can be switched off for ablation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AugurConfig {
    /// Add a fading memory (counts halve every `half_life_launches` launches; preload never
    /// forgets) mixed with the permanent one by how well each predicted the recent launches.
    pub fading: bool,
    /// Half-life of the evidence, in launches.
    pub half_life_launches: f64,
    /// Condition on the applications launched just before (context model up to `max_order`).
    pub sequence: bool,
    /// Longest context, in launches.
    pub max_order: usize,
    /// Successors kept per context (the partition limit that bounds memory).
    pub partition: usize,
    /// Reweigh by how often each application starts at this hour on this kind of day.
    pub time_of_day: bool,
    /// Exponent applied to the time-of-day factor.
    pub time_of_day_weight: f64,
    /// Treat a launch after a quiet gap with nothing running as the start of a session.
    pub session: bool,
    /// Quiet gap that ends a session.
    pub session_gap_ms: u64,
    /// Add-`prior` smoothing of the frequency (order 0) distribution.
    pub prior: f64,
}

impl Default for AugurConfig {
    fn default() -> Self {
        AugurConfig {
            // Off: the simulator shows the fading memory helping only where habits change and
            // costing more where they do not (BENCHMARKS.md, ablation).
            fading: false,
            half_life_launches: 50.0,
            sequence: true,
            max_order: 2,
            partition: 16,
            time_of_day: true,
            time_of_day_weight: 1.0,
            session: true,
            session_gap_ms: 30 * 60 * 1000,
            prior: 0.5,
        }
    }
}

impl AugurConfig {
    /// Every part switched off: a frequency predictor without memory loss (the ablation floor).
    pub fn bare() -> Self {
        AugurConfig { fading: false, sequence: false, time_of_day: false, session: false, ..Self::default() }
    }

    /// Names of the parts that are on, for reports.
    pub fn parts(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.fading {
            v.push("fading");
        }
        if self.sequence {
            v.push("sequence");
        }
        if self.time_of_day {
            v.push("time-of-day");
        }
        if self.session {
            v.push("session");
        }
        v
    }
}

/// Decayed launch counts per application in one time-of-day bucket.
#[derive(Clone, Debug, Default)]
struct Bucket {
    total: f64,
    counts: BTreeMap<Symbol, f64>,
    stamp: u64,
}

/// Number of time-of-day buckets: 24 hours × {weekday, weekend}.
const BUCKETS: usize = 48;

fn bucket_of(t: LocalTime) -> usize {
    let weekend = usize::from(t.weekday() >= 5);
    weekend * 24 + t.hour()
}

/// What augur remembers at one rate of forgetting: the context trie and the time buckets.
#[derive(Clone, Debug)]
struct Memory {
    /// Per-launch multiplier of every count (1 = never forgets).
    decay: f64,
    model: ContextModel,
    buckets: Vec<Bucket>,
    launches: u64,
}

impl Memory {
    fn new(decay: f64, order: usize, partition: usize) -> Self {
        Memory {
            decay,
            model: ContextModel::new(order, partition, decay),
            buckets: vec![Bucket::default(); BUCKETS],
            launches: 0,
        }
    }

    fn bucket_factor(&self, b: usize) -> f64 {
        if self.decay >= 1.0 { 1.0 } else { self.decay.powf((self.launches - self.buckets[b].stamp) as f64) }
    }

    fn learn(&mut self, context: &[Symbol], s: Symbol, at: LocalTime) {
        self.model.update(context, s);
        self.launches += 1;
        let b = bucket_of(at);
        let f = self.bucket_factor(b);
        let bucket = &mut self.buckets[b];
        if f < 1.0 {
            bucket.total *= f;
            for c in bucket.counts.values_mut() {
                *c *= f;
            }
        }
        bucket.stamp = self.launches;
        bucket.total += 1.0;
        *bucket.counts.entry(s).or_default() += 1.0;
    }

    /// P(app | bucket) / P(app) for each application of `alphabet` (aligned with it, as `base`,
    /// the order-0 distribution, is), smoothed over the neighbouring hours and towards 1.
    fn time_of_day_factors(&self, alphabet: &[Symbol], base: &[f64], now: LocalTime, weight: f64) -> Vec<f64> {
        const STRENGTH: f64 = 4.0;
        let b = bucket_of(now);
        let (day, hour) = (b / 24, b % 24);
        let mut count = vec![0.0; alphabet.len()];
        let mut total = 0.0;
        for (dh, w) in [(23usize, 0.5), (0, 1.0), (1, 0.5)] {
            let nb = day * 24 + (hour + dh) % 24;
            let f = self.bucket_factor(nb);
            for (s, c) in &self.buckets[nb].counts {
                if let Ok(i) = alphabet.binary_search(s) {
                    count[i] += w * f * c;
                }
            }
            total += w * f * self.buckets[nb].total;
        }
        count
            .iter()
            .zip(base)
            .map(|(&count, &base)| {
                if base <= 0.0 {
                    return 1.0;
                }
                let ratio = (count + STRENGTH * base) / (total + STRENGTH) / base;
                if weight == 1.0 { ratio } else { ratio.powf(weight) }
            })
            .collect()
    }

    /// The normalised next-launch distribution over `alphabet` (sorted; the answer is aligned
    /// with it), with its (sequence, time) parts.
    fn scores(
        &self,
        config: &AugurConfig,
        context: &[Symbol],
        order: usize,
        alphabet: &[Symbol],
        now: LocalTime,
    ) -> Vec<(f64, f64, f64)> {
        let q = self.model.distribution(context, alphabet, order, config.prior);
        let tod = if config.time_of_day {
            let base = self.model.distribution(&[], alphabet, 0, config.prior);
            self.time_of_day_factors(alphabet, &base, now, config.time_of_day_weight)
        } else {
            vec![1.0; alphabet.len()]
        };
        let mut out: Vec<(f64, f64, f64)> = q.iter().zip(&tod).map(|(&qs, &t)| (qs * t, qs, t)).collect();
        let sum: f64 = out.iter().map(|v| v.0).sum();
        if sum > 0.0 {
            for v in &mut out {
                v.0 /= sum;
            }
        }
        out
    }
}

/// Share of the mixture weight redistributed evenly after every launch (fixed share), so that a
/// memory that fell behind can take over again when habits change back.
const FIXED_SHARE: f64 = 0.02;

/// augur's predictor.
#[derive(Clone, Debug)]
pub struct AugurPredictor {
    config: AugurConfig,
    symbols: BTreeMap<String, Symbol>,
    names: Vec<String>,
    /// One permanent memory, plus a fading one when `fading` is on.
    memories: Vec<Memory>,
    /// Mixture weights of the memories, from how well each predicted the recent launches.
    weights: Vec<f64>,
    history: Vec<Symbol>,
    running: RunningApps,
    last_activity: Option<LocalTime>,
}

impl AugurPredictor {
    /// A predictor that has seen nothing.
    pub fn new(config: AugurConfig) -> Self {
        let order = if config.sequence { config.max_order.max(1) } else { 1 };
        let mut memories = vec![Memory::new(1.0, order, config.partition)];
        if config.fading && config.half_life_launches > 0.0 {
            memories.push(Memory::new(0.5f64.powf(1.0 / config.half_life_launches), order, config.partition));
        }
        let n = memories.len();
        AugurPredictor {
            config,
            symbols: BTreeMap::new(),
            names: Vec::new(),
            memories,
            weights: vec![1.0 / n as f64; n],
            history: Vec::new(),
            running: RunningApps::default(),
            last_activity: None,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &AugurConfig {
        &self.config
    }

    fn intern(&mut self, app: &str) -> Symbol {
        if let Some(&s) = self.symbols.get(app) {
            return s;
        }
        let s = self.names.len() as Symbol;
        self.names.push(app.to_string());
        self.symbols.insert(app.to_string(), s);
        s
    }

    /// A session starts at `t` when nothing runs and nothing happened for the session gap.
    fn session_starts(&self, t: LocalTime) -> bool {
        self.config.session
            && self.running.is_empty()
            && self.last_activity.is_none_or(|l| t.since(l) >= self.config.session_gap_ms)
    }

    /// The context the next launch at `t` would follow.
    fn context_at(&self, t: LocalTime) -> Vec<Symbol> {
        if self.session_starts(t) { vec![SESSION_START] } else { self.history.clone() }
    }

    /// The context order used for prediction with this configuration and context.
    fn use_order(&self, context: &[Symbol]) -> usize {
        if self.config.sequence {
            self.config.max_order
        } else if context == [SESSION_START] {
            1
        } else {
            0
        }
    }

    /// The mixed next-launch distribution over applications not running, with the parts of the
    /// memory that weighs most, indexed by symbol (`None` for a running application).
    fn scores(&self, now: LocalTime) -> Vec<Option<(f64, f64, f64)>> {
        let context = self.context_at(now);
        let alphabet: Vec<Symbol> =
            (0..self.names.len() as Symbol).filter(|&s| !self.running.is_running(&self.names[s as usize])).collect();
        let order = self.use_order(&context);
        let lead = self.lead_memory();
        let mut out: Vec<Option<(f64, f64, f64)>> = vec![None; self.names.len()];
        for (i, m) in self.memories.iter().enumerate() {
            let w = self.weights[i];
            for (&s, (p, q, tod)) in alphabet.iter().zip(m.scores(&self.config, &context, order, &alphabet, now)) {
                let e = out[s as usize].get_or_insert((0.0, q, tod));
                e.0 += w * p;
                if i == lead {
                    e.1 = q;
                    e.2 = tod;
                }
            }
        }
        out
    }

    fn lead_memory(&self) -> usize {
        (0..self.weights.len()).max_by(|&a, &b| self.weights[a].total_cmp(&self.weights[b])).unwrap_or(0)
    }

    fn describe_context(&self, context: &[Symbol]) -> String {
        context
            .iter()
            .map(|&s| if s == SESSION_START { "<session start>".to_string() } else { self.names[s as usize].clone() })
            .collect::<Vec<_>>()
            .join(" → ")
    }
}

impl Predictor for AugurPredictor {
    fn name(&self) -> &str {
        "augur"
    }

    fn observe(&mut self, event: &Observation<'_>) {
        if event.transition == Transition::Launch {
            let s = self.intern(event.app);
            let context = self.context_at(event.at);
            let context = if self.config.sequence || context == [SESSION_START] { context } else { Vec::new() };
            if self.memories.len() > 1 && !self.running.is_running(event.app) {
                // Reweigh the memories by how likely each found this launch (Bayes, fixed share).
                let alphabet: Vec<Symbol> =
                    (0..self.names.len() as Symbol).filter(|&x| !self.running.is_running(&self.names[x as usize])).collect();
                let order = self.use_order(&context);
                let at = alphabet.binary_search(&s).ok();
                for (i, m) in self.memories.iter().enumerate() {
                    let p = at.map_or(0.0, |k| m.scores(&self.config, &context, order, &alphabet, event.at)[k].0);
                    self.weights[i] *= p.max(1e-6);
                }
                let total: f64 = self.weights.iter().sum();
                let n = self.weights.len() as f64;
                for w in &mut self.weights {
                    *w = (1.0 - FIXED_SHARE) * (*w / total) + FIXED_SHARE / n;
                }
            }
            for m in &mut self.memories {
                m.learn(&context, s, event.at);
            }
            let mut history = context;
            history.push(s);
            let keep = self.memories[0].model.max_order();
            if history.len() > keep {
                history.drain(..history.len() - keep);
            }
            self.history = history;
        }
        self.running.apply(event);
        self.last_activity = Some(event.at);
    }

    fn predict(&mut self, now: LocalTime) -> Vec<AppProbability> {
        let scores = self.scores(now);
        // `symbols` is ordered by name: no sort needed.
        self.symbols
            .iter()
            .map(|(app, s)| AppProbability { app: app.clone(), probability: unit(scores[*s as usize].map_or(0.0, |v| v.0)) })
            .collect()
    }

    fn explain(&mut self, app: &str, now: LocalTime) -> Explanation {
        let mut reasons = Vec::new();
        let Some(&s) = self.symbols.get(app) else {
            return Explanation {
                predictor: self.name().into(),
                app: app.into(),
                probability: 0.0,
                reasons: vec!["never seen launched".into()],
            };
        };
        let scores = self.scores(now);
        let probability = unit(scores[s as usize].map_or(0.0, |v| v.0));
        if self.running.is_running(app) {
            reasons.push("running now: a running application is not predicted".into());
        } else if let Some((_, q, tod)) = scores[s as usize] {
            reasons.push(format!(
                "P(next launch is {app}) = {probability:.3}: sequence model gives {q:.3}, time of day multiplies by {tod:.2}, renormalised over the {} applications not running",
                scores.iter().flatten().count()
            ));
            let context = self.context_at(now);
            let order = self.use_order(&context);
            let lead = &self.memories[self.lead_memory()];
            for ev in lead.model.evidence(&context, s, order).iter().rev() {
                if ev.order == 0 {
                    reasons.push(format!(
                        "overall: started {:.1} of the last {:.1} launches (counts as remembered)",
                        ev.followed_by, ev.seen
                    ));
                } else {
                    reasons.push(format!(
                        "after {}: followed by {app} {:.1} of {:.1} times (weight {:.2})",
                        self.describe_context(&ev.context),
                        ev.followed_by,
                        ev.seen,
                        ev.weight
                    ));
                }
            }
            if self.config.time_of_day {
                let b = bucket_of(now);
                reasons.push(format!(
                    "time of day: {}:00 on a {} — factor {tod:.2}",
                    b % 24,
                    if b >= 24 { "weekend day" } else { "weekday" }
                ));
            }
        }
        if self.session_starts(now) {
            reasons.push("nothing runs and the session gap has passed: predicting a session's first launch".into());
        }
        if self.memories.len() > 1 {
            reasons.push(format!(
                "memories: permanent {:.0} %, fading (half-life {:.0} launches) {:.0} %, weighed by how well each predicted recent launches",
                100.0 * self.weights[0],
                self.config.half_life_launches,
                100.0 * self.weights[1]
            ));
        }
        Explanation { predictor: self.name().into(), app: app.into(), probability, reasons }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{exit, feed, launch, prob};
    use super::*;

    fn day_of_pairs(p: &mut AugurPredictor, days: u64) {
        // Every session: a then b, or c then d; alternating.
        let mut inst = 0;
        for d in 0..days {
            for (k, (x, y)) in [("a", "b"), ("c", "d")].iter().enumerate() {
                let base = d * 86_400 + 9 * 3600 + k as u64 * 4 * 3600;
                inst += 2;
                feed(
                    p,
                    &[
                        launch(base, x, inst),
                        launch(base + 60, y, inst + 1),
                        exit(base + 3600, x, inst),
                        exit(base + 3601, y, inst + 1),
                    ],
                );
            }
        }
    }

    #[test]
    fn sequence_context_predicts_the_partner() {
        let mut p = AugurPredictor::new(AugurConfig::default());
        day_of_pairs(&mut p, 10);
        feed(&mut p, &[launch(10 * 86_400 + 9 * 3600, "c", 1000)]);
        let ps = p.predict(LocalTime((10 * 86_400 + 9 * 3600 + 10) * 1000));
        assert!(prob(&ps, "d") > 0.8, "{ps:?}");
        assert_eq!(prob(&ps, "c"), 0.0);
        let total: f64 = ps.iter().map(|a| a.probability).sum();
        assert!((total - 1.0).abs() < 1e-9);
        let e = p.explain("d", LocalTime((10 * 86_400 + 9 * 3600 + 10) * 1000));
        assert!(e.reasons.iter().any(|r| r.starts_with("after c")), "{:?}", e.reasons);
    }

    #[test]
    fn session_start_and_time_of_day_pick_the_session_opener() {
        let mut p = AugurPredictor::new(AugurConfig::default());
        day_of_pairs(&mut p, 10);
        // Idle before the afternoon session: c opens it.
        let now = LocalTime((10 * 86_400 + 13 * 3600 - 60) * 1000);
        let ps = p.predict(now);
        assert!(prob(&ps, "c") > prob(&ps, "a"), "{ps:?}");
        assert!(p.explain("c", now).reasons.iter().any(|r| r.contains("session")));
        // Morning: a opens.
        let ps = p.predict(LocalTime((10 * 86_400 + 9 * 3600 - 60) * 1000));
        assert!(prob(&ps, "a") > prob(&ps, "c"), "{ps:?}");
    }

    #[test]
    fn bare_configuration_is_frequency_only() {
        let mut p = AugurPredictor::new(AugurConfig::bare());
        feed(
            &mut p,
            &[launch(1, "a", 1), exit(2, "a", 1), launch(3, "a", 2), exit(4, "a", 2), launch(5, "b", 3), exit(6, "b", 3)],
        );
        let ps = p.predict(LocalTime(10_000));
        // (2 + 0.5) / (3 + 1) and (1 + 0.5) / 4.
        assert!((prob(&ps, "a") - 0.625).abs() < 1e-12, "{ps:?}");
        assert!((prob(&ps, "b") - 0.375).abs() < 1e-12);
        assert!(AugurConfig::bare().parts().is_empty());
    }
}
