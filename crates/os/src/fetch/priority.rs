//! The I/O priority prefetching runs at (`ioprio_set(2)` on the calling thread), and the CPU
//! priority of a thread that only fetches for later (`setpriority(2)` on that thread alone).
//!
//! Owns setting and restoring the thread's I/O class. Idle by default, so a prefetch never
//! competes with the I/O of anything that is actually running; best-effort when the pages are
//! needed now (exec-time replay, benchmarks). Not every I/O scheduler honours classes (BFQ and
//! mq-deadline do; `none` does not).

use std::io;

use serde::{Deserialize, Serialize};

const IOPRIO_WHO_PROCESS: libc::c_int = 1;
const IOPRIO_CLASS_SHIFT: u32 = 13;
const IOPRIO_CLASS_BE: u32 = 2;
const IOPRIO_CLASS_IDLE: u32 = 3;

/// The I/O class to fetch at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IoPriority {
    /// Only when the disk is otherwise idle.
    Idle,
    /// Best-effort at `level` (0 highest .. 7 lowest; 4 is the kernel's default).
    BestEffort {
        /// 0..=7.
        level: u8,
    },
    /// Leave the thread's priority alone.
    Inherit,
}

impl IoPriority {
    /// Best-effort at the default level.
    pub const BEST_EFFORT: IoPriority = IoPriority::BestEffort { level: 4 };

    fn raw(self) -> Option<u32> {
        match self {
            IoPriority::Idle => Some(IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT),
            IoPriority::BestEffort { level } => Some((IOPRIO_CLASS_BE << IOPRIO_CLASS_SHIFT) | u32::from(level.min(7))),
            IoPriority::Inherit => None,
        }
    }

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            IoPriority::Idle => "idle",
            IoPriority::BestEffort { .. } => "best-effort",
            IoPriority::Inherit => "inherited",
        }
    }
}

fn ioprio_get_thread() -> io::Result<u32> {
    // SAFETY: ioprio_get takes two integers and returns an integer; no memory is passed.
    let rc = unsafe { libc::syscall(libc::SYS_ioprio_get, IOPRIO_WHO_PROCESS, 0) };
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(rc as u32) }
}

fn ioprio_set_thread(raw: u32) -> io::Result<()> {
    // SAFETY: ioprio_set takes three integers; `who` 0 means the calling thread. No memory passed.
    let rc = unsafe { libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, raw as libc::c_int) };
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// Nice 19 for the calling thread alone: a thread that fetches for later (the prediction and
/// free-memory tiers) then takes CPU time nothing else of normal priority wants. Reading a GiB
/// into the page cache costs the reader CPU (faults, copies, page-cache insertions) that a
/// CPU-bound build on every core would otherwise have had; its idle I/O class does not help there.
/// For good: the daemon holds no CAP_SYS_NICE to raise it back, so only a thread that does nothing
/// else may call this.
pub fn lowest_cpu_priority_for_this_thread() -> io::Result<()> {
    // SAFETY: gettid takes no argument and cannot fail.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) };
    // SAFETY: setpriority takes three integers; with PRIO_PROCESS and a thread id Linux changes
    // that thread alone. No memory is passed.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 19) };
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// Holds the calling thread at an I/O priority and restores the previous one when dropped.
#[derive(Debug)]
pub struct PriorityGuard {
    previous: Option<u32>,
}

impl PriorityGuard {
    /// Sets the calling thread's I/O priority.
    pub fn set(priority: IoPriority) -> io::Result<Self> {
        let Some(raw) = priority.raw() else {
            return Ok(PriorityGuard { previous: None });
        };
        let previous = ioprio_get_thread()?;
        ioprio_set_thread(raw)?;
        Ok(PriorityGuard { previous: Some(previous) })
    }
}

impl Drop for PriorityGuard {
    fn drop(&mut self) {
        if let Some(raw) = self.previous {
            let _ = ioprio_set_thread(raw);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_cpu_priority_is_the_calling_thread_s_alone() {
        let other = std::thread::spawn(|| {
            lowest_cpu_priority_for_this_thread().unwrap();
            // SAFETY: getpriority takes two integers; 0 is the calling thread.
            unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
        });
        assert_eq!(other.join().unwrap(), 19);
        // SAFETY: as above.
        let mine = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        assert_ne!(mine, 19, "the test thread kept its own priority");
    }

    #[test]
    fn sets_and_restores() {
        let before = ioprio_get_thread().unwrap();
        {
            let _g = PriorityGuard::set(IoPriority::Idle).unwrap();
            assert_eq!(ioprio_get_thread().unwrap() >> IOPRIO_CLASS_SHIFT, IOPRIO_CLASS_IDLE);
        }
        assert_eq!(ioprio_get_thread().unwrap(), before);
    }
}
