//! User space's half of the kernel's follow gate (`follow_gate` in observe.bpf.c): the count of
//! launches that ended or stopped being followed, each counted once however many ways its end is
//! heard of (its end record, a stop, a watch, a forgotten end the ring buffer had no room for).
//! While it equals the kernel's count of launches started, the programs that run at every read
//! and path syscall of the machine skip their task lookup.
//!
//! Owns the bookkeeping only: pure, no system calls; the observer writes [`ClosedLaunches::count`]
//! into the map. Must never count a launch twice: a count above the truth would close the gate
//! while a launch is followed, and its reads would go unrecorded.

use std::collections::{HashSet, VecDeque};

use super::record::LaunchId;

/// Launch ids remembered as counted. A launch's end is heard of at most a few times and within
/// moments (a stop, then its end record still in the ring buffer); ids older than this many
/// closes are no longer expected.
const REMEMBERED: usize = 16_384;

/// The launches counted closed.
#[derive(Debug, Default)]
pub struct ClosedLaunches {
    count: u64,
    seen: HashSet<LaunchId>,
    order: VecDeque<LaunchId>,
}

impl ClosedLaunches {
    /// Counts `launch` closed; true when this is the first time (the count changed).
    pub fn close(&mut self, launch: LaunchId) -> bool {
        if !self.seen.insert(launch) {
            return false;
        }
        self.order.push_back(launch);
        if self.order.len() > REMEMBERED
            && let Some(old) = self.order.pop_front()
        {
            self.seen.remove(&old);
        }
        self.count += 1;
        true
    }

    /// Launches counted closed so far.
    pub fn count(&self) -> u64 {
        self.count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launch_heard_ending_twice_is_counted_once() {
        let mut c = ClosedLaunches::default();
        assert!(c.close(7));
        assert!(!c.close(7), "its end record after the stop");
        assert!(c.close(8));
        assert_eq!(c.count(), 2);
    }

    #[test]
    fn the_memory_of_counted_launches_is_bounded() {
        let mut c = ClosedLaunches::default();
        for id in 0..(REMEMBERED as u64 + 10) {
            assert!(c.close(id));
        }
        assert_eq!(c.seen.len(), REMEMBERED);
        assert_eq!(c.order.len(), REMEMBERED);
        assert_eq!(c.count(), REMEMBERED as u64 + 10);
        // The latest are still remembered.
        assert!(!c.close(REMEMBERED as u64 + 9));
    }
}
