//! How far a predictor is to be believed, from how its own recent predictions came out: each
//! prediction in force when a launch happens is checked against that launch and the next
//! `horizon_launches − 1`; an application predicted with probability `p` is a hit when it is
//! among them. Per probability band the tracker keeps faded sums of predictions, of their
//! probabilities and of hits, and believes a new prediction `p` of that band at
//! `p · (hits + k) / (Σ p + k)` (`k` = [`ConfidenceConfig::prior`]): a predictor whose
//! predictions come true is taken at its word (or above it: the horizon spans several launches),
//! one whose predictions do not is discounted towards zero — on random usage, where nothing
//! predicts, the probabilities the planner sees shrink and it prefetches little or nothing.
//!
//! Each application also has its own record: its resolved predictions per band and their hits.
//! Where that application's predictions have shown skill over its own base rate (its bands tell
//! its launches from its absences), its own hits over what it was claimed at replace the band's
//! factor (per-application calibration, with the band's factor as the prior); where they have not,
//! or too few are resolved, the band calibration alone stands.
//!
//! Owns [`PredictionConfidence`] (the tally) and [`ConfidentPredictor`] (any predictor, its
//! probabilities passed through the tally). Pure: time and events come from the caller.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::{AppProbability, Explanation, LocalTime, Observation, Predictor, Transition, unit};

/// Upper edges of the probability bands.
const BANDS: [f64; 10] = [0.01, 0.03, 0.06, 0.1, 0.15, 0.25, 0.4, 0.6, 0.8, f64::INFINITY];

/// Probabilities below this are not tallied (they could not pay for a read anyway); it bounds
/// the tally's work per launch when thousands of applications are known.
const TALLY_FLOOR: f64 = 1e-3;

/// Resolved predictions (faded) below which the skill is not judged: the predictor keeps its word.
const SKILL_EVIDENCE: f64 = 100.0;

/// Settings of the tally.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConfidenceConfig {
    /// A prediction is a hit when its application is launched at one of this many launches
    /// from when it was in force (prefetched pages stay for more than the next launch).
    pub horizon_launches: usize,
    /// Tallies fade by half over this many launches: recent accuracy counts.
    pub half_life_launches: f64,
    /// Weight, in expected hits, of the predictor's own word before any outcome is known.
    pub prior: f64,
    /// Skill ([`PredictionConfidence::skill`]) at or below which the predictor is believed at
    /// nothing: it tells what comes no better than chance, and the cache's recency is left alone.
    pub skill_floor: f64,
    /// Skill from which the predictor keeps its (band-calibrated) word.
    pub skill_full: f64,
    /// Per-application calibration on or off (off: the band calibration alone, as before).
    pub per_app: bool,
    /// Weight, in claimed hits, of the band calibration before an application's own record.
    pub app_prior: f64,
    /// Resolved predictions of an application (faded) below which its skill is not judged and
    /// the band calibration alone stands.
    pub app_evidence: f64,
    /// An application's own skill ([`PredictionConfidence::app_skill`]) at or below which its
    /// own record is not used.
    pub app_skill_floor: f64,
    /// An application's own skill from which its own record is used in full.
    pub app_skill_full: f64,
}

impl Default for ConfidenceConfig {
    fn default() -> Self {
        ConfidenceConfig {
            horizon_launches: 3,
            half_life_launches: 200.0,
            prior: 2.0,
            skill_floor: 0.005,
            skill_full: 0.01,
            per_app: true,
            app_prior: 5.0,
            app_evidence: 30.0,
            app_skill_floor: 0.05,
            app_skill_full: 0.1,
        }
    }
}

/// Faded tallies of one probability band.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BandTally {
    /// Predictions resolved.
    pub predictions: f64,
    /// Sum of their probabilities (the hits the predictor claimed, at one launch).
    pub claimed: f64,
    /// Predictions whose application came within the horizon.
    pub hits: f64,
}

/// One application's faded record: its resolved predictions per band.
#[derive(Clone, Debug, Default, PartialEq)]
struct AppRecord {
    bands: [BandTally; BANDS.len()],
}

impl AppRecord {
    fn predictions(&self) -> f64 {
        self.bands.iter().map(|b| b.predictions).sum()
    }

    fn hits(&self) -> f64 {
        self.bands.iter().map(|b| b.hits).sum()
    }

    fn claimed(&self) -> f64 {
        self.bands.iter().map(|b| b.claimed).sum()
    }

    fn fade(&mut self, fade: f64) {
        for b in &mut self.bands {
            b.predictions *= fade;
            b.claimed *= fade;
            b.hits *= fade;
        }
    }
}

/// A prediction awaiting its outcome.
#[derive(Clone, Debug)]
struct Pending {
    predictions: Vec<(String, f64)>,
    launched: BTreeSet<String>,
    launches: usize,
}

/// The tally of a predictor's recent predictions and what came of them.
#[derive(Clone, Debug)]
pub struct PredictionConfidence {
    config: ConfidenceConfig,
    bands: [BandTally; BANDS.len()],
    /// The prediction in force now (the last one asked for), not yet attached to a launch.
    latest: Vec<(String, f64)>,
    pending: VecDeque<Pending>,
    /// Per application, its own record.
    apps: BTreeMap<String, AppRecord>,
    /// Resolved predictions above the tally floor, and hits, over the whole life (not faded).
    resolved: u64,
    hit: u64,
}

fn band_of(p: f64) -> usize {
    BANDS.iter().position(|&edge| p < edge).unwrap_or(BANDS.len() - 1)
}

impl PredictionConfidence {
    /// A tally that has seen nothing: predictions are taken at their word.
    pub fn new(config: ConfidenceConfig) -> Self {
        PredictionConfidence {
            config,
            bands: [BandTally::default(); BANDS.len()],
            latest: Vec::new(),
            pending: VecDeque::new(),
            apps: BTreeMap::new(),
            resolved: 0,
            hit: 0,
        }
    }

    /// The prediction now in force (replacing the previous one if no launch came in between).
    pub fn predicted(&mut self, predictions: &[AppProbability]) {
        self.latest.clear();
        self.latest.extend(
            predictions.iter().filter(|a| unit(a.probability) >= TALLY_FLOOR).map(|a| (a.app.clone(), unit(a.probability))),
        );
    }

    /// A launch of `app`: it resolves the predictions in force at this and the previous launches.
    pub fn launched(&mut self, app: &str) {
        if !self.latest.is_empty() {
            let predictions = std::mem::take(&mut self.latest);
            self.pending.push_back(Pending { predictions, launched: BTreeSet::new(), launches: 0 });
        }
        let fade = 0.5f64.powf(1.0 / self.config.half_life_launches.max(1.0));
        for b in &mut self.bands {
            b.predictions *= fade;
            b.claimed *= fade;
            b.hits *= fade;
        }
        for r in self.apps.values_mut() {
            r.fade(fade);
        }
        for p in &mut self.pending {
            p.launched.insert(app.to_string());
            p.launches += 1;
        }
        let horizon = self.config.horizon_launches.max(1);
        while self.pending.front().is_some_and(|p| p.launches >= horizon) {
            let Some(done) = self.pending.pop_front() else { break };
            for (a, p) in &done.predictions {
                let hit = done.launched.contains(a);
                let band = band_of(*p);
                let b = &mut self.bands[band];
                b.predictions += 1.0;
                b.claimed += p;
                self.resolved += 1;
                if hit {
                    b.hits += 1.0;
                    self.hit += 1;
                }
                if self.config.per_app {
                    let r = self.apps.entry(a.clone()).or_default();
                    let b = &mut r.bands[band];
                    b.predictions += 1.0;
                    b.claimed += p;
                    if hit {
                        b.hits += 1.0;
                    }
                }
            }
        }
    }

    /// The factor a probability of `p`'s band is believed at: `(hits + k) / (claimed + k)`.
    pub fn factor(&self, p: f64) -> f64 {
        let b = &self.bands[band_of(unit(p))];
        let k = self.config.prior.max(1e-9);
        (b.hits + k) / (b.claimed + k)
    }

    /// How far the bands tell what comes from what does not: the resolution term of the Brier
    /// score (how far each band's hit rate is from the overall one, weighted by its predictions)
    /// over its uncertainty term (`h·(1 − h)`, `h` the overall hit rate), less what chance alone
    /// gives a predictor without skill over as many predictions (`(bands used − 1) / predictions`),
    /// in `[0, 1]`. 1 until [`SKILL_EVIDENCE`] predictions are resolved: the predictor is taken at its
    /// word.
    pub fn skill(&self) -> f64 {
        let n: f64 = self.bands.iter().map(|b| b.predictions).sum();
        if n < SKILL_EVIDENCE {
            return 1.0;
        }
        resolution_skill(&self.bands).unwrap_or(1.0)
    }

    /// Whether the skill has been judged: [`SKILL_EVIDENCE`] predictions resolved, in more than
    /// one band, with hits and misses among them (before, [`PredictionConfidence::skill`] is 1:
    /// the predictor taken at its word).
    pub fn skill_judged(&self) -> bool {
        let n: f64 = self.bands.iter().map(|b| b.predictions).sum();
        n >= SKILL_EVIDENCE && resolution_skill(&self.bands).is_some()
    }

    /// How far `app`'s own bands tell its launches from its absences, over its own base rate
    /// (the same measure as [`PredictionConfidence::skill`], over its predictions only); 0 until
    /// [`ConfidenceConfig::app_evidence`] of them are resolved, and when they fall in one band or
    /// all came or none did: nothing shown.
    pub fn app_skill(&self, app: &str) -> f64 {
        match self.apps.get(app) {
            Some(r) if r.predictions() >= self.config.app_evidence => resolution_skill(&r.bands).unwrap_or(0.0),
            _ => 0.0,
        }
    }

    /// How far `app`'s own record is used, from its skill: 0 at or below
    /// [`ConfidenceConfig::app_skill_floor`], 1 from [`ConfidenceConfig::app_skill_full`], linear
    /// between (0 with per-application calibration off).
    pub fn app_gate(&self, app: &str) -> f64 {
        if !self.config.per_app {
            return 0.0;
        }
        gate(self.app_skill(app), self.config.app_skill_floor, self.config.app_skill_full)
    }

    /// `app`'s own calibration of a prediction `p`: its hits over the probabilities it was
    /// predicted at, with the band's factor for `p` as the prior, `(hits + k·band factor) /
    /// (claimed + k)` (`k` = [`ConfidenceConfig::app_prior`]); the band's factor for an
    /// application without a record.
    pub fn app_factor(&self, app: &str, p: f64) -> f64 {
        let k = self.config.app_prior.max(1e-9);
        let band = self.factor(p);
        self.apps.get(app).map_or(band, |r| (r.hits() + k * band) / (r.claimed() + k))
    }

    /// The share of its word a predictor of this skill keeps: 0 at or below
    /// [`ConfidenceConfig::skill_floor`], 1 from [`ConfidenceConfig::skill_full`], linear between.
    pub fn skill_gate(&self) -> f64 {
        gate(self.skill(), self.config.skill_floor, self.config.skill_full)
    }

    /// The probability `p` is believed at, in `[0, 1]`: its band's factor, times the skill gate.
    pub fn believe(&self, p: f64) -> f64 {
        let p = unit(p);
        unit(self.skill_gate() * p * self.factor(p))
    }

    /// The probability `p` of `app` is believed at, in `[0, 1]`: as [`PredictionConfidence::believe`],
    /// with the band's factor replaced by `app`'s own ([`PredictionConfidence::app_factor`]) as far
    /// as its gate lets it count: `skill gate · p · ((1 − g)·band factor + g·own factor)`.
    pub fn believe_app(&self, app: &str, p: f64) -> f64 {
        self.believed(self.skill_gate(), self.apps.get(app), p)
    }

    /// [`PredictionConfidence::believe_app`] for every prediction in place: the skill gate
    /// computed once and each application's record looked up once (a round asks about every
    /// application known, a thousand of them on a machine in use for long).
    pub fn believe_all(&self, predictions: &mut [AppProbability]) {
        let skill_gate = self.skill_gate();
        if predictions.windows(2).all(|w| w[0].app < w[1].app) {
            // Ordered by name as the records are (augur's predictor answers so): walk both.
            let mut records = self.apps.iter().peekable();
            for a in predictions {
                while records.next_if(|(app, _)| app.as_str() < a.app.as_str()).is_some() {}
                let record = records.peek().filter(|(app, _)| **app == a.app).map(|(_, r)| *r);
                a.probability = self.believed(skill_gate, record, a.probability);
            }
        } else {
            for a in predictions {
                a.probability = self.believed(skill_gate, self.apps.get(&a.app), a.probability);
            }
        }
    }

    /// What `believe_app` says of `p`, given the skill gate and the application's record.
    fn believed(&self, skill_gate: f64, record: Option<&AppRecord>, p: f64) -> f64 {
        let p = unit(p);
        let band = self.factor(p);
        let g = match record {
            Some(r) if self.config.per_app && r.predictions() >= self.config.app_evidence => {
                gate(resolution_skill(&r.bands).unwrap_or(0.0), self.config.app_skill_floor, self.config.app_skill_full)
            }
            _ => 0.0,
        };
        if g <= 0.0 {
            return unit(skill_gate * p * band);
        }
        let k = self.config.app_prior.max(1e-9);
        let own = record.map_or(band, |r| (r.hits() + k * band) / (r.claimed() + k));
        unit(skill_gate * p * ((1.0 - g) * band + g * own))
    }

    /// (resolved predictions, hits) over the tally's whole life.
    pub fn record(&self) -> (u64, u64) {
        (self.resolved, self.hit)
    }

    /// The faded tallies per band, with the band's upper edge.
    pub fn bands(&self) -> impl Iterator<Item = (f64, BandTally)> + '_ {
        BANDS.iter().copied().zip(self.bands.iter().copied())
    }
}

/// A share from a skill: 0 at or below `lo`, 1 from `hi`, linear between.
fn gate(skill: f64, lo: f64, hi: f64) -> f64 {
    if hi <= lo {
        return if skill > lo { 1.0 } else { 0.0 };
    }
    ((skill - lo) / (hi - lo)).clamp(0.0, 1.0)
}

/// The resolution of `bands` over their uncertainty, less chance's share (see
/// [`PredictionConfidence::skill`]), in `[0, 1]`; None when there is nothing to resolve (every
/// prediction came, or none did, or they fall in one band).
fn resolution_skill(bands: &[BandTally]) -> Option<f64> {
    let n: f64 = bands.iter().map(|b| b.predictions).sum();
    let hits: f64 = bands.iter().map(|b| b.hits).sum();
    if n <= 0.0 {
        return None;
    }
    let h = hits / n;
    let uncertainty = h * (1.0 - h);
    let used = bands.iter().filter(|b| b.predictions > 0.0).count() as f64;
    if uncertainty <= 0.0 || used < 2.0 {
        return None;
    }
    let resolution: f64 =
        bands.iter().filter(|b| b.predictions > 0.0).map(|b| b.predictions * (b.hits / b.predictions - h).powi(2)).sum::<f64>()
            / n;
    Some((resolution / uncertainty - (used - 1.0) / n).clamp(0.0, 1.0))
}

/// A predictor whose probabilities are believed as far as its recent predictions came true.
pub struct ConfidentPredictor {
    inner: Box<dyn Predictor>,
    confidence: PredictionConfidence,
}

impl ConfidentPredictor {
    /// Wraps `inner`.
    pub fn new(inner: Box<dyn Predictor>, config: ConfidenceConfig) -> Self {
        ConfidentPredictor { inner, confidence: PredictionConfidence::new(config) }
    }

    /// The tally.
    pub fn confidence(&self) -> &PredictionConfidence {
        &self.confidence
    }
}

impl Predictor for ConfidentPredictor {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn observe(&mut self, event: &Observation<'_>) {
        if event.transition == Transition::Launch {
            self.confidence.launched(event.app);
        }
        self.inner.observe(event);
    }

    fn predict(&mut self, now: LocalTime) -> Vec<AppProbability> {
        let mut out = self.inner.predict(now);
        self.confidence.predicted(&out);
        self.confidence.believe_all(&mut out);
        out
    }

    fn proven(&self) -> bool {
        self.confidence.skill_judged()
    }

    fn explain(&mut self, app: &str, now: LocalTime) -> Explanation {
        let mut e = self.inner.explain(app, now);
        let raw = e.probability;
        e.probability = self.confidence.believe_app(app, raw);
        let (resolved, hits) = self.confidence.record();
        e.reasons.push(format!(
            "believed at {:.3}: predictions of its band came within {} launches {:.2}× as often as claimed ({hits} of {resolved} recent predictions came true)",
            e.probability,
            self.confidence.config.horizon_launches,
            self.confidence.factor(raw)
        ));
        let c = &self.confidence;
        e.reasons.push(format!(
            "its own predictions: skill {:.3} over its base rate (own record used {:.0} %), came within the horizon {:.2}× as often as claimed",
            c.app_skill(app),
            100.0 * c.app_gate(app),
            c.app_factor(app, raw)
        ));
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ps(v: &[(&str, f64)]) -> Vec<AppProbability> {
        v.iter().map(|&(a, p)| AppProbability { app: a.into(), probability: p }).collect()
    }

    #[test]
    fn unknown_accuracy_takes_the_predictor_at_its_word() {
        let c = PredictionConfidence::new(ConfidenceConfig::default());
        assert_eq!(c.believe(0.3), 0.3);
        assert_eq!(c.believe(f64::NAN), 0.0);
    }

    #[test]
    fn predictions_that_never_come_true_are_believed_at_almost_nothing() {
        let mut c = PredictionConfidence::new(ConfidenceConfig { horizon_launches: 1, ..ConfidenceConfig::default() });
        for _ in 0..500 {
            c.predicted(&ps(&[("a", 0.5), ("b", 0.5)]));
            c.launched("c");
        }
        assert!(c.believe(0.5) < 0.02, "{}", c.believe(0.5));
        assert_eq!(c.record().1, 0);
    }

    #[test]
    fn calibrated_predictions_keep_their_value_and_the_horizon_raises_it() {
        // "a" is predicted at 0.5 and comes every other launch.
        let mut one = PredictionConfidence::new(ConfidenceConfig { horizon_launches: 1, ..ConfidenceConfig::default() });
        let mut three = PredictionConfidence::new(ConfidenceConfig::default());
        for k in 0..1000 {
            for c in [&mut one, &mut three] {
                c.predicted(&ps(&[("a", 0.5)]));
                c.launched(if k % 2 == 0 { "a" } else { "b" });
            }
        }
        assert!((one.believe(0.5) - 0.5).abs() < 0.03, "{}", one.believe(0.5));
        assert!(three.believe(0.5) > 0.95, "within three launches it always came: {}", three.believe(0.5));
    }

    #[test]
    fn uniform_random_launches_stay_at_their_small_probability() {
        let apps: Vec<String> = (0..20).map(|i| format!("app{i}")).collect();
        let mut c = PredictionConfidence::new(ConfidenceConfig { horizon_launches: 1, ..ConfidenceConfig::default() });
        let mut rng = crate::sim::seeded::SeededRng::new(3);
        for _ in 0..2000 {
            let p: Vec<AppProbability> = apps.iter().map(|a| AppProbability { app: a.clone(), probability: 0.05 }).collect();
            c.predicted(&p);
            c.launched(&apps[rng.range(0, 20) as usize]);
        }
        assert!(c.believe(0.05) < 0.1, "{}", c.believe(0.05));
    }

    /// Predictions whose bands all come as often as each other (no skill) are believed at
    /// nothing, so the planner leaves the cache to recency; predictions whose higher bands come
    /// more often keep their word.
    #[test]
    fn without_skill_nothing_is_believed_and_with_it_the_word_stands() {
        let apps: Vec<String> = (0..12).map(|i| format!("app{i}")).collect();
        let mut rng = crate::sim::seeded::SeededRng::new(5);
        let mut chance = PredictionConfidence::new(ConfidenceConfig::default());
        let mut skilled = PredictionConfidence::new(ConfidenceConfig::default());
        assert_eq!(chance.skill(), 1.0, "taken at its word before any outcome");
        for _ in 0..1500 {
            // Chance: probabilities spread over bands at random, launches uniform.
            let noisy: Vec<AppProbability> =
                apps.iter().map(|a| AppProbability { app: a.clone(), probability: 0.02 + rng.unit() * 0.2 }).collect();
            chance.predicted(&noisy);
            chance.launched(&apps[rng.range(0, 12) as usize]);
            // Skill: the one predicted at 0.7 comes, the others (0.02) rarely do.
            let next = rng.range(0, 12) as usize;
            let told: Vec<AppProbability> = apps
                .iter()
                .enumerate()
                .map(|(i, a)| AppProbability { app: a.clone(), probability: if i == next { 0.7 } else { 0.02 } })
                .collect();
            skilled.predicted(&told);
            skilled.launched(&apps[if rng.chance(0.9) { next } else { rng.range(0, 12) as usize }]);
        }
        assert!(chance.skill() < 0.005, "{}", chance.skill());
        assert_eq!(chance.skill_gate(), 0.0);
        assert_eq!(chance.believe(0.2), 0.0);
        assert!(skilled.skill() > 0.1, "{}", skilled.skill());
        assert_eq!(skilled.skill_gate(), 1.0);
        assert!(skilled.believe(0.7) > 0.7, "{}", skilled.believe(0.7));
    }

    /// One application, "hab", always comes two launches after "cue" and is predicted low
    /// (0.05) every time, as others are: its own record shows its predictions come far more often
    /// than the band expects after "cue" and not otherwise (skill over its base rate), so it is
    /// believed above the band calibration; "noise", predicted at random levels and launched at
    /// random, shows none and keeps the band calibration.
    #[test]
    fn an_application_whose_own_predictions_show_skill_is_calibrated_on_its_own_record() {
        let others: Vec<String> = (0..10).map(|i| format!("other{i}")).collect();
        let mut rng = crate::sim::seeded::SeededRng::new(7);
        let mut c = PredictionConfidence::new(ConfidenceConfig::default());
        let mut after_cue = 0u32;
        for _ in 0..1500 {
            let mut p = vec![
                AppProbability { app: "hab".into(), probability: if after_cue > 0 { 0.3 } else { 0.02 } },
                AppProbability { app: "noise".into(), probability: 0.02 + rng.unit() * 0.3 },
            ];
            p.extend(others.iter().map(|a| AppProbability { app: a.clone(), probability: 0.05 }));
            c.predicted(&p);
            let next = if after_cue == 1 {
                "hab".to_string()
            } else if rng.chance(0.15) {
                "cue".to_string()
            } else if rng.chance(0.1) {
                "noise".to_string()
            } else {
                others[rng.range(0, 10) as usize].clone()
            };
            after_cue = match (next.as_str(), after_cue) {
                ("cue", _) => 2,
                (_, n) => n.saturating_sub(1),
            };
            c.launched(&next);
        }
        assert_eq!(c.skill_gate(), 1.0);
        assert!(c.app_skill("hab") > 0.1, "{}", c.app_skill("hab"));
        assert_eq!(c.app_gate("hab"), 1.0);
        assert!(c.app_skill("noise") < ConfidenceConfig::default().app_skill_floor, "{}", c.app_skill("noise"));
        assert_eq!(c.app_gate("noise"), 0.0);
        assert_eq!(c.believe_app("noise", 0.2), c.believe(0.2), "no skill of its own: the bands alone");
        assert_eq!(c.app_gate("cue"), 0.0, "never predicted above the tally's floor: no record");
        assert_eq!(c.believe_app("cue", 0.2), c.believe(0.2));
        let own = c.believe_app("hab", 0.3);
        assert!((own - unit(0.3 * c.app_factor("hab", 0.3))).abs() < 1e-12, "{own}");
        assert!(own > c.believe(0.3), "above the band, which \"noise\" shares: {own} {}", c.believe(0.3));
        let off = PredictionConfidence { config: ConfidenceConfig { per_app: false, ..c.config }, ..c.clone() };
        assert_eq!(off.believe_app("hab", 0.3), off.believe(0.3), "per-application calibration off");
        // All at once, in name order (walked beside the records) or not: as one by one.
        let said = ps(&[("a0", 0.4), ("cue", 0.2), ("hab", 0.3), ("noise", 0.2), ("zz", 0.6)]);
        let one_by_one: Vec<f64> = said.iter().map(|a| c.believe_app(&a.app, a.probability)).collect();
        let mut sorted = said.clone();
        c.believe_all(&mut sorted);
        assert_eq!(sorted.iter().map(|a| a.probability).collect::<Vec<_>>(), one_by_one);
        let mut reversed: Vec<AppProbability> = said.iter().rev().cloned().collect();
        c.believe_all(&mut reversed);
        assert_eq!(reversed.iter().rev().map(|a| a.probability).collect::<Vec<_>>(), one_by_one);
    }

    #[test]
    fn too_little_evidence_keeps_the_band_calibration() {
        let mut c = PredictionConfidence::new(ConfidenceConfig::default());
        for k in 0..20 {
            c.predicted(&ps(&[("a", 0.5), ("b", 0.05)]));
            c.launched(if k % 2 == 0 { "a" } else { "c" });
        }
        assert_eq!(c.app_skill("a"), 0.0);
        assert_eq!(c.app_gate("a"), 0.0);
        assert_eq!(c.believe_app("a", 0.5), c.believe(0.5));
    }

    proptest::proptest! {
        /// Skill and gate stay in [0, 1], and a belief never exceeds what the band's factor
        /// alone gives: the gate only ever lowers it.
        #[test]
        fn the_gate_only_lowers_belief(ps in proptest::collection::vec(0.0f64..1.0, 1..8),
                                       launches in proptest::collection::vec(0usize..10, 0..300),
                                       q in 0.0f64..1.0) {
            let mut c = PredictionConfidence::new(ConfidenceConfig::default());
            let apps: Vec<String> = (0..10).map(|i| format!("app{i}")).collect();
            for (k, l) in launches.iter().enumerate() {
                let p: Vec<AppProbability> = ps.iter().enumerate()
                    .map(|(i, &p)| AppProbability { app: apps[(i + k) % 10].clone(), probability: p })
                    .collect();
                c.predicted(&p);
                c.launched(&apps[*l]);
            }
            proptest::prop_assert!((0.0..=1.0).contains(&c.skill()));
            proptest::prop_assert!((0.0..=1.0).contains(&c.skill_gate()));
            proptest::prop_assert!(c.believe(q) <= (q * c.factor(q)).min(1.0) + 1e-12);
        }

        /// An application's own record only moves its belief from the band calibration's towards
        /// its own, as far as its gate allows: the belief stays in [0, 1], between the two, and is
        /// 0 wherever the predictor's skill gate is 0 (its own record never overrides "no skill":
        /// never a loss).
        #[test]
        fn an_applications_own_record_scales_the_band_belief_within_its_gate(
            ps in proptest::collection::vec(0.0f64..1.0, 1..8),
            launches in proptest::collection::vec(0usize..10, 0..400),
            q in 0.0f64..1.0,
            which in 0usize..10,
        ) {
            let mut c = PredictionConfidence::new(ConfidenceConfig::default());
            let apps: Vec<String> = (0..10).map(|i| format!("app{i}")).collect();
            for (k, l) in launches.iter().enumerate() {
                let p: Vec<AppProbability> = ps.iter().enumerate()
                    .map(|(i, &p)| AppProbability { app: apps[(i * 3 + k) % 10].clone(), probability: p })
                    .collect();
                c.predicted(&p);
                c.launched(&apps[*l]);
            }
            let app = &apps[which];
            let (band, own) = (c.believe(q), c.believe_app(app, q));
            proptest::prop_assert!((0.0..=1.0).contains(&c.app_skill(app)));
            proptest::prop_assert!((0.0..=1.0).contains(&c.app_gate(app)));
            proptest::prop_assert!(c.app_factor(app, q) > 0.0);
            proptest::prop_assert!((0.0..=1.0).contains(&own));
            let scaled = unit(c.skill_gate() * unit(q) * c.app_factor(app, q));
            proptest::prop_assert!(own >= band.min(scaled) - 1e-12 && own <= band.max(scaled) + 1e-12, "{band} {own} {scaled}");
            if c.skill_gate() == 0.0 {
                proptest::prop_assert_eq!(own, 0.0);
            }
            if c.app_gate(app) == 0.0 {
                proptest::prop_assert_eq!(own, band);
            }
        }
    }
}
