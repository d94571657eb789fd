//! The decisions of one boot's `augur boot` run: which phase the boot is in (from the service
//! manager's targets, `augur mark` and the first user session), which phases' plans to load
//! (the current one and the next), when to prefetch the session's usual applications, and when
//! recording stops (a while after the session started, or after the last target on a system
//! without one, or at the time limit).
//!
//! Pure: the time (microseconds since recording started) and what was observed come in; actions
//! go out. It makes no system call and reads no clock.

use augur_core::model::boot::{BootPhase, PhaseStart, phases_released};

use crate::config::BootSection;

/// What the run should do now, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootAction {
    /// Load this phase's plan (each phase once).
    Replay(BootPhase),
    /// Load the session's usual applications (once, as the session phase is released).
    PrefetchSessionApps,
}

/// One boot's phases and the time limits of its recording.
#[derive(Clone, Debug)]
pub struct BootSequence {
    phase: BootPhase,
    starts: Vec<PhaseStart>,
    released: Vec<BootPhase>,
    /// The phase that ends the boot when no session comes (the default target's).
    last_target: BootPhase,
    /// When `last_target` (or the session) was reached.
    settled_at_us: Option<u64>,
    after_us: u64,
    max_us: u64,
}

impl BootSequence {
    /// A boot whose default target starts `last_target` (graphical: recording waits for a
    /// session; anything else: it stops `after_session_secs` after that target).
    pub fn new(settings: &BootSection, last_target: BootPhase) -> Self {
        BootSequence {
            phase: BootPhase::Early,
            starts: Vec::new(),
            released: Vec::new(),
            last_target,
            settled_at_us: None,
            after_us: settings.after_session_secs.saturating_mul(1_000_000),
            max_us: settings.max_secs.saturating_mul(1_000_000),
        }
    }

    /// The phase the boot is in.
    pub fn phase(&self) -> BootPhase {
        self.phase
    }

    /// When each phase after the first began.
    pub fn phase_starts(&self) -> &[PhaseStart] {
        &self.starts
    }

    /// The actions at the start of recording: the first phases' plans.
    pub fn start(&mut self) -> Vec<BootAction> {
        self.release()
    }

    /// The boot was seen in `phase` at `now_us` (a phase never goes back; one skipped over
    /// starts with the one reached). Returns what to load now.
    pub fn observe(&mut self, phase: BootPhase, now_us: u64) -> Vec<BootAction> {
        if phase <= self.phase {
            return Vec::new();
        }
        for p in BootPhase::ALL.into_iter().filter(|p| *p > self.phase && *p <= phase) {
            self.starts.push(PhaseStart { phase: p, at_us: now_us });
        }
        self.phase = phase;
        let settles = phase == BootPhase::Session || (self.last_target != BootPhase::Graphical && phase >= self.last_target);
        if settles && self.settled_at_us.is_none() {
            self.settled_at_us = Some(now_us);
        }
        self.release()
    }

    fn release(&mut self) -> Vec<BootAction> {
        let mut actions = Vec::new();
        for p in phases_released(self.phase) {
            if self.released.contains(&p) {
                continue;
            }
            self.released.push(p);
            actions.push(BootAction::Replay(p));
            if p == BootPhase::Session {
                actions.push(BootAction::PrefetchSessionApps);
            }
        }
        actions
    }

    /// True when recording should stop at `now_us`.
    pub fn done(&self, now_us: u64) -> bool {
        now_us >= self.max_us || self.settled_at_us.is_some_and(|t| now_us >= t.saturating_add(self.after_us))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000;

    fn settings() -> BootSection {
        BootSection { after_session_secs: 30, max_secs: 300, ..BootSection::default() }
    }

    #[test]
    fn a_desktop_boot_loads_one_phase_ahead_and_records_until_after_the_session() {
        let mut b = BootSequence::new(&settings(), BootPhase::Graphical);
        assert_eq!(b.start(), vec![BootAction::Replay(BootPhase::Early), BootAction::Replay(BootPhase::Sysinit)]);
        assert_eq!(b.observe(BootPhase::Sysinit, 2 * S), vec![BootAction::Replay(BootPhase::Basic)]);
        assert!(b.observe(BootPhase::Sysinit, 3 * S).is_empty(), "nothing twice");
        // multi-user and graphical seen at once: both started, the session released with its apps.
        assert_eq!(
            b.observe(BootPhase::Graphical, 9 * S),
            vec![
                BootAction::Replay(BootPhase::MultiUser),
                BootAction::Replay(BootPhase::Graphical),
                BootAction::Replay(BootPhase::Session),
                BootAction::PrefetchSessionApps
            ]
        );
        assert!(b.observe(BootPhase::Basic, 10 * S).is_empty(), "phases never go back");
        assert_eq!(b.phase(), BootPhase::Graphical);
        assert!(!b.done(100 * S), "a desktop waits for its session");
        assert!(b.observe(BootPhase::Session, 120 * S).is_empty());
        assert!(!b.done(149 * S));
        assert!(b.done(150 * S));
        let starts: Vec<(BootPhase, u64)> = b.phase_starts().iter().map(|p| (p.phase, p.at_us / S)).collect();
        assert_eq!(
            starts,
            vec![
                (BootPhase::Sysinit, 2),
                (BootPhase::Basic, 9),
                (BootPhase::MultiUser, 9),
                (BootPhase::Graphical, 9),
                (BootPhase::Session, 120)
            ]
        );
    }

    #[test]
    fn a_server_stops_after_its_last_target_and_every_boot_at_the_limit() {
        let mut b = BootSequence::new(&settings(), BootPhase::MultiUser);
        b.start();
        b.observe(BootPhase::MultiUser, 20 * S);
        assert!(!b.done(49 * S));
        assert!(b.done(50 * S));
        let never = BootSequence::new(&settings(), BootPhase::Graphical);
        assert!(!never.done(299 * S));
        assert!(never.done(300 * S));
    }
}
