//! Launch chains: which program a launch leads to, from the launches and exits the predictors
//! observe, so that a prediction of a program that learns nothing of its own (a launcher script
//! such as `/usr/bin/libreoffice`, which execs `oosplash`, which starts `soffice.bin`) loads the
//! pages of the application it starts.
//!
//! A program leads to the next one when, in the observed sequence:
//! - **it exec'd it**: its instance exits and the same instance launches another program at
//!   once (a script's `exec`), or
//! - **it started it**: another program launches within [`CHAIN_WINDOW_MS`] of its launch while
//!   it still runs (`oosplash` → `soffice.bin`).
//!
//! The latest successor is kept. It is used only for a program without a footprint of its own
//! (the caller decides that), so a shell that starts commands is never taken for them.
//!
//! Pure: fed [`Observation`]s; no I/O, no clock.

use std::collections::BTreeMap;

use crate::model::predict::{Observation, Transition};

/// How soon after a program's launch another launch counts as started by it.
pub const CHAIN_WINDOW_MS: u64 = 2_000;
/// Successors followed at most from one program.
pub const MAX_HOPS: usize = 4;
/// Programs remembered at most (a new one is not remembered past it).
pub const MAX_CHAINS: usize = 4_096;

/// What launch leads to which, learned from the observed launches and exits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LaunchChains {
    leads_to: BTreeMap<String, String>,
    /// Running instances: instance → (program, launched at).
    running: BTreeMap<u64, (String, u64)>,
    /// The latest exit: (program, instance, at).
    last_exit: Option<(String, u64, u64)>,
    /// The latest launch: (program, instance, at).
    last_launch: Option<(String, u64, u64)>,
}

impl LaunchChains {
    /// An empty set.
    pub fn new() -> Self {
        LaunchChains::default()
    }

    /// Takes in one launch or exit.
    pub fn observe(&mut self, o: &Observation<'_>) {
        let at = o.at.0;
        match o.transition {
            Transition::Exit => {
                self.running.remove(&o.instance);
                self.last_exit = Some((o.app.to_string(), o.instance, at));
            }
            Transition::Launch => {
                let exec_of = self
                    .last_exit
                    .as_ref()
                    .filter(|(app, instance, t)| *instance == o.instance && *t == at && app != o.app)
                    .map(|(app, _, _)| app.clone());
                let started_by = self
                    .last_launch
                    .as_ref()
                    .filter(|(app, instance, t)| {
                        *instance != o.instance
                            && app != o.app
                            && at.saturating_sub(*t) <= CHAIN_WINDOW_MS
                            && self.running.get(instance).is_some_and(|(a, _)| a == app)
                    })
                    .map(|(app, _, _)| app.clone());
                if let Some(from) = exec_of.or(started_by) {
                    self.remember(from, o.app);
                }
                self.running.insert(o.instance, (o.app.to_string(), at));
                self.last_launch = Some((o.app.to_string(), o.instance, at));
            }
        }
    }

    fn remember(&mut self, from: String, to: &str) {
        if self.leads_to.len() >= MAX_CHAINS && !self.leads_to.contains_key(&from) {
            return;
        }
        self.leads_to.insert(from, to.to_string());
    }

    /// The programs `app` leads to, nearest first, at most [`MAX_HOPS`], without repeats (a
    /// cycle ends the chain).
    pub fn successors(&self, app: &str) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        let mut at = app;
        while out.len() < MAX_HOPS {
            let Some(next) = self.leads_to.get(at) else { break };
            if next == app || out.contains(&next.as_str()) {
                break;
            }
            out.push(next);
            at = next;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::predict::LocalTime;

    fn feed(chains: &mut LaunchChains, events: &[(u64, &str, u64, bool)]) {
        for &(at, app, instance, launch) in events {
            let transition = if launch { Transition::Launch } else { Transition::Exit };
            chains.observe(&Observation { at: LocalTime(at), app, instance, transition });
        }
    }

    #[test]
    fn a_launcher_script_leads_through_its_exec_and_its_child_to_the_application() {
        // As recorded for LibreOffice Writer: the script execs oosplash, which starts soffice.bin.
        let mut c = LaunchChains::new();
        feed(
            &mut c,
            &[
                (1_000, "/usr/bin/evolution", 10, true),
                (3_000, "/usr/bin/evolution", 10, false),
                (60_315, "/usr/bin/libreoffice", 2945, true),
                (60_315, "/usr/bin/libreoffice", 2945, false),
                (60_315, "oosplash", 2945, true),
                (60_321, "soffice.bin", 2960, true),
                (60_691, "soffice.bin", 2960, false),
                (60_701, "oosplash", 2945, false),
            ],
        );
        assert_eq!(c.successors("/usr/bin/libreoffice"), vec!["oosplash", "soffice.bin"]);
        assert_eq!(c.successors("oosplash"), vec!["soffice.bin"]);
        assert!(c.successors("/usr/bin/evolution").is_empty(), "it had exited when the script started");
        assert!(c.successors("soffice.bin").is_empty());
    }

    #[test]
    fn a_launch_long_after_or_after_an_exit_is_not_started_by_it() {
        let mut c = LaunchChains::new();
        feed(&mut c, &[(0, "a", 1, true), (5_000, "b", 2, true), (6_000, "a", 1, false), (8_000, "c", 3, true)]);
        assert!(c.successors("a").is_empty(), "b came 5 s after it; c after it exited");
        assert!(c.successors("b").is_empty(), "c came 3 s after it");
    }

    #[test]
    fn cycles_end_the_chain_and_the_latest_successor_is_kept() {
        let mut c = LaunchChains::new();
        feed(&mut c, &[(0, "a", 1, true), (10, "b", 2, true), (20, "a", 3, true)]);
        assert_eq!(c.successors("a"), vec!["b"]);
        assert_eq!(c.successors("b"), vec!["a"]);
        feed(&mut c, &[(10_000, "a", 4, true), (10_005, "x", 5, true)]);
        assert_eq!(c.successors("a"), vec!["x"]);
    }
}
