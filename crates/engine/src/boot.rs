//! The decisions of one boot's `augur boot` run: which phase the boot is in and when each phase
//! began (from the service manager's targets, `augur mark` and the first login, each with the
//! time it says the phase began, so a phase seen late still starts when it did), which phases'
//! plans to load (the current one and the one ahead), when to prefetch the session's usual
//! applications, and when recording stops (a while after the session started, or after the last
//! target on a system without one, or at the time limit).
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

    /// The boot was seen at `now_us` to have reached the phases in `reached`, each with the time
    /// it began (one said to begin later than `now_us` begins at `now_us`). A phase never goes
    /// back; one skipped over (not in `reached`) begins with the first phase after it that is;
    /// no phase begins before the one before it. Returns what to load now.
    pub fn observe(&mut self, reached: &[PhaseStart], now_us: u64) -> Vec<BootAction> {
        let Some(phase) = reached.iter().map(|r| r.phase).max().filter(|p| *p > self.phase) else {
            return Vec::new();
        };
        let mut previous = self.starts.last().map_or(0, |s| s.at_us);
        for p in BootPhase::ALL.into_iter().filter(|p| *p > self.phase && *p <= phase) {
            // Its own time, else the earliest of the phases reached beyond it.
            let own = reached.iter().filter(|r| r.phase == p).map(|r| r.at_us).min();
            let beyond = reached.iter().filter(|r| r.phase > p).map(|r| r.at_us).min();
            let at_us = own.or(beyond).unwrap_or(now_us).min(now_us).max(previous);
            self.starts.push(PhaseStart { phase: p, at_us });
            previous = at_us;
            let settles = p == BootPhase::Session || (self.last_target != BootPhase::Graphical && p == self.last_target);
            if settles && self.settled_at_us.is_none() {
                self.settled_at_us = Some(at_us);
            }
        }
        self.phase = phase;
        self.release()
    }

    fn release(&mut self) -> Vec<BootAction> {
        let mut actions = Vec::new();
        for p in phases_released(self.phase, self.last_target) {
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
    use BootPhase::*;

    const S: u64 = 1_000_000;

    fn settings() -> BootSection {
        BootSection { after_session_secs: 30, max_secs: 300, ..BootSection::default() }
    }

    fn at(phase: BootPhase, at_us: u64) -> PhaseStart {
        PhaseStart { phase, at_us }
    }

    fn starts(b: &BootSequence) -> Vec<(BootPhase, u64)> {
        b.phase_starts().iter().map(|p| (p.phase, p.at_us / 1000)).collect()
    }

    #[test]
    fn a_desktop_boot_loads_one_phase_ahead_and_records_until_after_the_session() {
        let mut b = BootSequence::new(&settings(), Graphical);
        assert_eq!(b.start(), vec![BootAction::Replay(Early), BootAction::Replay(Sysinit)]);
        assert_eq!(b.observe(&[at(Sysinit, 2 * S)], 2 * S), vec![BootAction::Replay(Basic)]);
        assert!(b.observe(&[at(Sysinit, 2 * S)], 3 * S).is_empty(), "nothing twice");
        // multi-user and graphical seen at once: both started, the session released with its apps.
        assert_eq!(
            b.observe(&[at(Sysinit, 2 * S), at(MultiUser, 8 * S), at(Graphical, 9 * S)], 9 * S),
            vec![
                BootAction::Replay(MultiUser),
                BootAction::Replay(Graphical),
                BootAction::Replay(Session),
                BootAction::PrefetchSessionApps
            ]
        );
        assert!(b.observe(&[at(Basic, 10 * S)], 10 * S).is_empty(), "phases never go back");
        assert_eq!(b.phase(), Graphical);
        assert!(!b.done(100 * S), "a desktop waits for its session");
        assert!(b.observe(&[at(Session, 120 * S)], 120 * S).is_empty());
        assert!(!b.done(149 * S));
        assert!(b.done(150 * S));
        // basic was skipped over: it began with multi-user, the first phase seen beyond it.
        assert_eq!(
            starts(&b),
            vec![(Sysinit, 2_000), (Basic, 8_000), (MultiUser, 8_000), (Graphical, 9_000), (Session, 120_000)]
        );
    }

    #[test]
    fn phases_seen_late_begin_when_the_service_manager_says() {
        // The whole boot was reached before the first look, 5 s into recording: each phase keeps
        // its own time, so the pages first used in each are planned in it.
        let mut b = BootSequence::new(&settings(), MultiUser);
        b.start();
        let reached = [at(Sysinit, 300_000), at(Basic, 900_000), at(MultiUser, 2_400_000), at(Session, 2_200_000)];
        let actions = b.observe(&reached, 5 * S);
        assert_eq!(actions.last(), Some(&BootAction::PrefetchSessionApps));
        // The login came before multi-user.target was reached: the session begins with it, never
        // before the phase before it; graphical, skipped over, begins with the session.
        assert_eq!(starts(&b), vec![(Sysinit, 300), (Basic, 900), (MultiUser, 2_400), (Graphical, 2_400), (Session, 2_400)]);
        // Recording stops 30 s after the boot settled (multi-user.target: no graphical here), not
        // after it was seen.
        assert!(!b.done(32 * S));
        assert!(b.done(32_400_000));
        // A time later than the look (clocks read one after the other) is the look's.
        let mut late = BootSequence::new(&settings(), MultiUser);
        late.observe(&[at(Sysinit, 7 * S)], 6 * S);
        assert_eq!(starts(&late), vec![(Sysinit, 6_000)]);
    }

    #[test]
    fn a_server_loads_its_session_once_its_last_target_is_reached() {
        let mut b = BootSequence::new(&settings(), MultiUser);
        b.start();
        assert_eq!(b.observe(&[at(Basic, S)], S), vec![BootAction::Replay(Basic), BootAction::Replay(MultiUser)]);
        assert_eq!(
            b.observe(&[at(MultiUser, 2 * S)], 2 * S),
            vec![BootAction::Replay(Graphical), BootAction::Replay(Session), BootAction::PrefetchSessionApps]
        );
    }

    #[test]
    fn a_server_stops_after_its_last_target_and_every_boot_at_the_limit() {
        let mut b = BootSequence::new(&settings(), MultiUser);
        b.start();
        b.observe(&[at(MultiUser, 20 * S)], 20 * S);
        assert!(!b.done(49 * S));
        assert!(b.done(50 * S));
        let never = BootSequence::new(&settings(), Graphical);
        assert!(!never.done(299 * S));
        assert!(never.done(300 * S));
    }
}
