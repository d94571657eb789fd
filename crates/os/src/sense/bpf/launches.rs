//! The user-space rule of the observer's launches: a launch starts at `execve` *entry* (so the
//! pages exec itself reads are attributed), which means its first records can precede its EXEC
//! record, and a launch that ends without an EXEC record (its exec failed for good, or its
//! executable is not followed) never was one. [`PendingLaunches`] holds each launch's records
//! until its EXEC confirms it and drops them when it ends unconfirmed.
//!
//! Pure: records in, records out, in kernel order per launch. It must not interpret records
//! beyond their launch id and kind.

use std::collections::{HashMap, HashSet};

use super::record::{LaunchId, ObservedEvent};

/// Records held per unconfirmed launch at most (what exec reads before its EXEC record is a
/// few hundred); more are dropped and counted.
pub const MAX_HELD_PER_LAUNCH: usize = 65_536;

/// Launches seen but not yet confirmed by an EXEC record, with their held records.
#[derive(Debug, Default)]
pub struct PendingLaunches {
    held: HashMap<LaunchId, Vec<ObservedEvent>>,
    confirmed: HashSet<LaunchId>,
    /// Launches that ended without an EXEC record.
    pub dropped_launches: u64,
    /// Records discarded: those of launches that ended unconfirmed, and those over
    /// [`MAX_HELD_PER_LAUNCH`].
    pub dropped_records: u64,
    /// Held records discarded because a launch held too many (a real loss, unlike the others).
    pub overflowed_records: u64,
}

impl PendingLaunches {
    /// An empty set.
    pub fn new() -> Self {
        PendingLaunches::default()
    }

    /// Takes one record; hands `emit` the records that now belong to a confirmed launch: the
    /// record itself, or, when it is the EXEC confirming its launch, the launch's held records
    /// first, then the EXEC.
    pub fn push(&mut self, event: ObservedEvent, mut emit: impl FnMut(ObservedEvent)) {
        let launch = event.launch();
        match &event {
            _ if self.confirmed.contains(&launch) => {
                if matches!(event, ObservedEvent::LaunchEnd { .. }) {
                    self.confirmed.remove(&launch);
                }
                emit(event);
            }
            ObservedEvent::Exec { .. } => {
                self.confirmed.insert(launch);
                for held in self.held.remove(&launch).unwrap_or_default() {
                    emit(held);
                }
                emit(event);
            }
            ObservedEvent::LaunchEnd { .. } => {
                let held = self.held.remove(&launch).unwrap_or_default();
                self.dropped_records += held.len() as u64 + 1;
                self.dropped_launches += 1;
            }
            _ => {
                let held = self.held.entry(launch).or_default();
                if held.len() < MAX_HELD_PER_LAUNCH {
                    held.push(event);
                } else {
                    self.dropped_records += 1;
                    self.overflowed_records += 1;
                }
            }
        }
    }

    /// Forgets a launch (after `BpfObserver::stop_following`, whose later records may never
    /// come): its held records are discarded and later ones are held again.
    pub fn forget(&mut self, launch: LaunchId) {
        self.confirmed.remove(&launch);
        if let Some(held) = self.held.remove(&launch) {
            self.dropped_records += held.len() as u64;
        }
    }

    /// True once an EXEC record confirmed `launch` (until it ends or is forgotten).
    pub fn is_confirmed(&self, launch: LaunchId) -> bool {
        self.confirmed.contains(&launch)
    }

    /// Launches with held records, waiting for their EXEC.
    pub fn unconfirmed(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use augur_core::model::profile::InodeKey;

    use super::*;
    use crate::sense::bpf::record::TaskContext;
    use crate::sense::event::PageEventKind;

    fn task(launch: LaunchId) -> TaskContext {
        TaskContext { tid: 10, tgid: 10, ts_ns: 1, launch }
    }

    fn pages(launch: LaunchId, chunk: u64) -> ObservedEvent {
        ObservedEvent::Pages {
            task: task(launch),
            inode: InodeKey { dev: 1, ino: 2 },
            source: PageEventKind::GetPages,
            chunk,
            bits: 1,
        }
    }

    fn exec(launch: LaunchId) -> ObservedEvent {
        ObservedEvent::Exec {
            task: task(launch),
            old_tid: 10,
            parent_tgid: 1,
            exe: InodeKey { dev: 1, ino: 3 },
            new_launch: true,
            comm: "x".into(),
            filename: PathBuf::from("/bin/x"),
            interp: PathBuf::from("/bin/x"),
            creds: Default::default(),
            args: b"x\0".to_vec(),
            args_cut: false,
        }
    }

    fn end(launch: LaunchId) -> ObservedEvent {
        ObservedEvent::LaunchEnd { launch, ts_ns: 9, root_tgid: 100, disk_pages: 0 }
    }

    fn run(p: &mut PendingLaunches, events: Vec<ObservedEvent>) -> Vec<ObservedEvent> {
        let mut out = Vec::new();
        for e in events {
            p.push(e, |e| out.push(e));
        }
        out
    }

    #[test]
    fn records_before_the_exec_are_released_with_it_in_order() {
        let mut p = PendingLaunches::new();
        let out = run(&mut p, vec![pages(1, 0), pages(1, 1), exec(1), pages(1, 2), end(1)]);
        assert_eq!(out, vec![pages(1, 0), pages(1, 1), exec(1), pages(1, 2), end(1)]);
        assert_eq!((p.dropped_launches, p.dropped_records, p.unconfirmed()), (0, 0, 0));
        assert!(!p.is_confirmed(1), "an ended launch is forgotten");
    }

    #[test]
    fn a_launch_ending_without_exec_is_dropped_and_others_are_untouched() {
        let mut p = PendingLaunches::new();
        let out = run(&mut p, vec![pages(1, 0), pages(2, 0), end(1), exec(2), pages(1, 5)]);
        assert_eq!(out, vec![pages(2, 0), exec(2)]);
        assert_eq!((p.dropped_launches, p.dropped_records), (1, 2));
        assert_eq!(p.unconfirmed(), 1, "launch 1's late record waits for an exec that will not come");
        p.forget(1);
        assert_eq!((p.unconfirmed(), p.dropped_records), (0, 3));
    }

    #[test]
    fn held_records_are_bounded() {
        let mut p = PendingLaunches::new();
        let out = run(&mut p, (0..MAX_HELD_PER_LAUNCH as u64 + 3).map(|c| pages(4, c)).collect());
        assert!(out.is_empty());
        assert_eq!(p.overflowed_records, 3);
        let mut n = 0;
        p.push(exec(4), |_| n += 1);
        assert_eq!(n, MAX_HELD_PER_LAUNCH + 1);
    }
}
