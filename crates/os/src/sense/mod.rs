//! What observes the kernel: tracefs instances and their page events, process exec/exit events,
//! and the resolution of (device, inode) pairs to paths.
//!
//! A thin OS layer: it reports what the kernel says and leaves learning to `model`.

pub mod boot_trace;
pub mod bpf;
pub mod child_usage;
pub mod event;
pub mod fanotify;
pub mod inode_name;
pub mod lookups;
pub mod mode;
pub mod pid_filter;
pub mod proc_connector;
pub mod procfs;
pub mod resolve;
pub mod trace_session;
pub mod tracefs;
pub mod watch;

/// Monotonic time in nanoseconds: the clock of proc-connector and `mono` trace timestamps.
pub fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec as u64)
}

/// Monotonic time in microseconds (the unit of recorded first-use times).
pub fn monotonic_us() -> u64 {
    monotonic_ns() / 1000
}
