//! Launch predictors behind one interface: they observe application launches and exits with their
//! times and say, for every application they know, the probability that it will be launched
//! within their horizon, and why.
//!
//! Owns the [`Predictor`] trait, its event and answer types, the three predictors
//! ([`naive`], [`preload`], [`augur`]) and [`confidence`], which believes any of them only as far
//! as its recent predictions came true. Pure and deterministic: time comes only from the events
//! and the `now` the caller passes; nothing here reads a clock or the system.

use std::collections::BTreeMap;

pub mod augur;
pub mod confidence;
pub mod context;
pub mod naive;
pub mod preload;

pub use augur::{AugurConfig, AugurPredictor};
pub use confidence::{ConfidenceConfig, ConfidentPredictor, PredictionConfidence};
pub use naive::NaivePredictor;
pub use preload::{PreloadConfig, PreloadPredictor};

/// Local wall-clock time in milliseconds: Unix epoch milliseconds shifted by the UTC offset, so
/// that `ms % 86_400_000` is the local time of day.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LocalTime(pub u64);

impl LocalTime {
    /// Milliseconds per day.
    pub const DAY_MS: u64 = 86_400_000;

    /// Milliseconds since local midnight.
    pub fn ms_of_day(self) -> u64 {
        self.0 % Self::DAY_MS
    }

    /// Hour of the local day, 0–23.
    pub fn hour(self) -> usize {
        (self.ms_of_day() / 3_600_000) as usize
    }

    /// Days since the epoch (local).
    pub fn day(self) -> u64 {
        self.0 / Self::DAY_MS
    }

    /// Day of the week, 0 = Monday (1970-01-01 was a Thursday).
    pub fn weekday(self) -> usize {
        ((self.day() + 3) % 7) as usize
    }

    /// Milliseconds from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: LocalTime) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

/// Whether an application instance started or ended.
pub use crate::model::usage_trace::Transition;

/// One launch or exit as a predictor sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observation<'a> {
    /// When it happened.
    pub at: LocalTime,
    /// The application (executable or script identity).
    pub app: &'a str,
    /// Distinguishes concurrent instances of one application (a pid, or a counter).
    pub instance: u64,
    /// Launch or exit.
    pub transition: Transition,
}

/// One application's predicted probability of being launched within the horizon.
#[derive(Clone, Debug, PartialEq)]
pub struct AppProbability {
    /// The application.
    pub app: String,
    /// In `[0, 1]`.
    pub probability: f64,
}

/// Why a predictor gives an application the probability it gives.
#[derive(Clone, Debug, PartialEq)]
pub struct Explanation {
    /// Predictor name.
    pub predictor: String,
    /// The application.
    pub app: String,
    /// The probability `predict` gives it now.
    pub probability: f64,
    /// Human-readable reasons, most important first.
    pub reasons: Vec<String>,
}

/// A launch predictor.
pub trait Predictor {
    /// Short name (`naive`, `preload`, `augur`).
    fn name(&self) -> &str;

    /// Records a launch or exit. Observations must come in non-decreasing time.
    fn observe(&mut self, event: &Observation<'_>);

    /// Probability, for every application the predictor knows, that it will be launched within
    /// the horizon from `now`; sorted by application name; every value in `[0, 1]`.
    /// `now` must not be earlier than the last observation.
    fn predict(&mut self, now: LocalTime) -> Vec<AppProbability>;

    /// Why `app` gets the probability it gets at `now`.
    fn explain(&mut self, app: &str, now: LocalTime) -> Explanation;

    /// Whether its predictions have been checked against enough launches for a plan's resident
    /// pages to be kept (marked used again, `augur_core::plan::KEEP_GAP_MS`) and not only its
    /// missing ones read: keeping overrides the kernel's own recency, so it waits for evidence
    /// that the predictions mean something. A bare model has no such record and answers false;
    /// [`ConfidentPredictor`] answers once it has judged its skill.
    fn proven(&self) -> bool {
        false
    }
}

/// Names accepted by [`by_name`].
pub const PREDICTOR_NAMES: [&str; 3] = ["naive", "preload", "augur"];

/// A predictor with its default configuration, by name.
pub fn by_name(name: &str) -> Option<Box<dyn Predictor>> {
    match name {
        "naive" => Some(Box::new(NaivePredictor::new())),
        "preload" => Some(Box::new(PreloadPredictor::new(PreloadConfig::default()))),
        "augur" => Some(Box::new(AugurPredictor::new(AugurConfig::default()))),
        _ => None,
    }
}

/// Which instances of which applications are running, from the observations alone.
#[derive(Clone, Debug, Default)]
pub struct RunningApps {
    instances: BTreeMap<String, BTreeMap<u64, LocalTime>>,
}

impl RunningApps {
    /// Applies a launch or exit; returns true when the application's running state changed
    /// (first instance started, or last instance ended).
    pub fn apply(&mut self, event: &Observation<'_>) -> bool {
        match event.transition {
            Transition::Launch => {
                let set = self.instances.entry(event.app.to_string()).or_default();
                let was_empty = set.is_empty();
                set.insert(event.instance, event.at);
                was_empty
            }
            Transition::Exit => match self.instances.get_mut(event.app) {
                Some(set) => {
                    set.remove(&event.instance);
                    if set.is_empty() {
                        self.instances.remove(event.app);
                        true
                    } else {
                        false
                    }
                }
                None => false,
            },
        }
    }

    /// The lowest-numbered running instance of `app`.
    pub fn first_instance(&self, app: &str) -> Option<u64> {
        self.instances.get(app).and_then(|s| s.keys().next().copied())
    }

    /// True when this instance of `app` still runs.
    pub fn instance_running(&self, app: &str, instance: u64) -> bool {
        self.instances.get(app).is_some_and(|s| s.contains_key(&instance))
    }

    /// When the most recent running instance of `app` started.
    pub fn last_start(&self, app: &str) -> Option<LocalTime> {
        self.instances.get(app).and_then(|s| s.values().max().copied())
    }

    /// True when at least one instance of `app` runs.
    pub fn is_running(&self, app: &str) -> bool {
        self.instances.contains_key(app)
    }

    /// The running applications, sorted.
    pub fn apps(&self) -> impl Iterator<Item = &str> {
        self.instances.keys().map(String::as_str)
    }

    /// Number of running applications.
    pub fn len(&self) -> usize {
        self.instances.len()
    }

    /// True when nothing runs.
    pub fn is_empty(&self) -> bool {
        self.instances.is_empty()
    }
}

/// Clamps to `[0, 1]`, mapping NaN to 0.
pub fn unit(p: f64) -> f64 {
    if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    pub fn launch(at_s: u64, app: &str, instance: u64) -> (LocalTime, String, u64, Transition) {
        (LocalTime(at_s * 1000), app.to_string(), instance, Transition::Launch)
    }

    pub fn exit(at_s: u64, app: &str, instance: u64) -> (LocalTime, String, u64, Transition) {
        (LocalTime(at_s * 1000), app.to_string(), instance, Transition::Exit)
    }

    pub fn feed(p: &mut dyn Predictor, events: &[(LocalTime, String, u64, Transition)]) {
        for (at, app, instance, transition) in events {
            p.observe(&Observation { at: *at, app, instance: *instance, transition: *transition });
        }
    }

    pub fn prob(ps: &[AppProbability], app: &str) -> f64 {
        ps.iter().find(|p| p.app == app).map_or(0.0, |p| p.probability)
    }

    #[test]
    fn local_time_fields() {
        let t = LocalTime(LocalTime::DAY_MS * 4 + 13 * 3_600_000 + 5);
        assert_eq!(t.hour(), 13);
        assert_eq!(t.weekday(), 0); // 1970-01-05 was a Monday
    }

    #[test]
    fn running_apps_counts_instances() {
        let mut r = RunningApps::default();
        let ev = |t, i| Observation { at: LocalTime(0), app: "a", instance: i, transition: t };
        assert!(r.apply(&ev(Transition::Launch, 1)));
        assert!(!r.apply(&ev(Transition::Launch, 2)));
        assert!(!r.apply(&ev(Transition::Exit, 1)));
        assert!(r.is_running("a"));
        assert!(r.apply(&ev(Transition::Exit, 2)));
        assert!(!r.is_running("a"));
    }

    fn arb_events() -> impl Strategy<Value = Vec<(u64, usize, bool)>> {
        proptest::collection::vec((1u64..3_000_000, 0usize..5, any::<bool>()), 0..120)
    }

    proptest! {
        /// Every predictor keeps every probability in [0, 1] on arbitrary launch/exit sequences.
        #[test]
        fn probabilities_stay_in_unit_interval(events in arb_events()) {
            let apps = ["a", "b", "c", "d", "e"];
            for name in PREDICTOR_NAMES {
                let mut p = by_name(name).unwrap();
                let mut running = [false; 5];
                let mut t = 0u64;
                for &(dt, i, _) in &events {
                    t += dt;
                    let transition = if running[i] { Transition::Exit } else { Transition::Launch };
                    running[i] = !running[i];
                    p.observe(&Observation { at: LocalTime(t), app: apps[i], instance: i as u64, transition });
                    for ap in p.predict(LocalTime(t + dt / 2)) {
                        prop_assert!((0.0..=1.0).contains(&ap.probability), "{name}: {ap:?}");
                    }
                }
                for a in apps {
                    let e = p.explain(a, LocalTime(t + 1));
                    prop_assert!((0.0..=1.0).contains(&e.probability));
                }
            }
        }
    }
}
