//! The naive baseline of preload's thesis: every application that is not running gets a starting
//! probability proportional to how often it has been started, `launches(app) / all launches`.
//!
//! Owns only the launch counts; no time, no context. Pure.

use std::collections::BTreeMap;

use super::{AppProbability, Explanation, LocalTime, Observation, Predictor, RunningApps, Transition, unit};

/// Frequency-proportional predictor.
#[derive(Clone, Debug, Default)]
pub struct NaivePredictor {
    launches: BTreeMap<String, u64>,
    total: u64,
    running: RunningApps,
}

impl NaivePredictor {
    /// A predictor that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    fn probability(&self, app: &str) -> f64 {
        if self.total == 0 || self.running.is_running(app) {
            return 0.0;
        }
        unit(self.launches.get(app).copied().unwrap_or(0) as f64 / self.total as f64)
    }
}

impl Predictor for NaivePredictor {
    fn name(&self) -> &str {
        "naive"
    }

    fn observe(&mut self, event: &Observation<'_>) {
        self.running.apply(event);
        if event.transition == Transition::Launch {
            *self.launches.entry(event.app.to_string()).or_default() += 1;
            self.total += 1;
        }
    }

    fn predict(&mut self, _now: LocalTime) -> Vec<AppProbability> {
        self.launches.keys().map(|app| AppProbability { app: app.clone(), probability: self.probability(app) }).collect()
    }

    fn explain(&mut self, app: &str, _now: LocalTime) -> Explanation {
        let n = self.launches.get(app).copied().unwrap_or(0);
        let mut reasons = vec![format!("started {n} of {} launches seen", self.total)];
        if self.running.is_running(app) {
            reasons.insert(0, "running now: a running application is not predicted".into());
        }
        Explanation { predictor: self.name().into(), app: app.into(), probability: self.probability(app), reasons }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{exit, feed, launch, prob};
    use super::*;

    #[test]
    fn proportional_to_launch_counts() {
        let mut p = NaivePredictor::new();
        feed(
            &mut p,
            &[
                launch(1, "a", 1),
                exit(2, "a", 1),
                launch(3, "a", 2),
                exit(4, "a", 2),
                launch(5, "b", 3),
                exit(6, "b", 3),
                launch(7, "c", 4),
            ],
        );
        let ps = p.predict(LocalTime(10_000));
        assert!((prob(&ps, "a") - 0.5).abs() < 1e-12);
        assert!((prob(&ps, "b") - 0.25).abs() < 1e-12);
        assert_eq!(prob(&ps, "c"), 0.0, "running");
        assert!(p.explain("a", LocalTime(10_000)).reasons[0].contains("2 of 4"));
    }
}
