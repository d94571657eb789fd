//! The daemon's thin OS layer: the epoll set its loop sleeps in, the signal pipe for SIGTERM/SIGINT/SIGHUP,
//! a one-shot timerfd armed only when something is pending, an eventfd the replay worker wakes the
//! loop with, the monotonic clock, the daemon's own memory use, and PSI memory-pressure triggers.
//! No policy here.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::time::{Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec};

use crate::error::{OsError, Result};
use crate::signals::{SecondSignal, SignalPipe};

pub use crate::sense::monotonic_ns;

/// Wall-clock milliseconds since the epoch.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Local time minus UTC in seconds at `unix_s`, by the C library's time-zone rules (`TZ`,
/// /etc/localtime); 0 when they cannot say.
pub fn utc_offset_s(unix_s: i64) -> i32 {
    let t = unix_s as libc::time_t;
    // SAFETY: `tm` is plain data that localtime_r fills; both pointers are valid for the call and
    // localtime_r keeps neither.
    let (ok, tm) = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        let ok = !libc::localtime_r(&t, &mut tm).is_null();
        (ok, tm)
    };
    if ok { i32::try_from(tm.tm_gmtoff).unwrap_or(0) } else { 0 }
}

/// Local wall-clock milliseconds: [`unix_ms`] shifted by [`utc_offset_s`] (so that
/// `ms % 86_400_000` is the local time of day).
pub fn local_ms() -> u64 {
    let now = unix_ms();
    now.saturating_add_signed(i64::from(utc_offset_s((now / 1000) as i64)) * 1000)
}

/// The system page size in bytes.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 { n as u64 } else { 4096 }
}

/// Hands the heap's free memory back to the kernel (glibc `malloc_trim`): for after a one-off
/// burst of allocations, such as libbpf parsing the kernel's BTF to load a BPF object, so that
/// it does not stay resident in the daemon for good. A no-op on other C libraries.
pub fn release_free_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim takes no pointer and only walks the allocator's own free lists, under
    // the allocator's locks; it is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Resident set size of this process in bytes (`VmRSS` of /proc/self/status).
pub fn own_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// What readiness of a file descriptor wakes an [`EventPoll`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Readable (`EPOLLIN`).
    Readable,
    /// Priority data (`EPOLLPRI`): how a PSI trigger fires.
    Priority,
}

/// An epoll set: file descriptors registered with a token each; [`EventPoll::wait`] sleeps until
/// one is ready, without a timeout.
pub struct EventPoll {
    fd: OwnedFd,
    events: Vec<rustix::event::epoll::Event>,
}

impl EventPoll {
    /// An empty set.
    pub fn new() -> Result<Self> {
        use rustix::event::epoll;
        let fd = epoll::create(epoll::CreateFlags::CLOEXEC).map_err(|e| OsError::io("creating epoll", e.into()))?;
        Ok(EventPoll { fd, events: Vec::with_capacity(16) })
    }

    /// Wakes [`EventPoll::wait`] with `token` when `fd` is ready for `readiness`.
    pub fn add(&self, fd: BorrowedFd<'_>, token: u64, readiness: Readiness) -> Result<()> {
        use rustix::event::epoll;
        let flags = match readiness {
            Readiness::Readable => epoll::EventFlags::IN,
            Readiness::Priority => epoll::EventFlags::PRI,
        };
        epoll::add(&self.fd, fd, epoll::EventData::new_u64(token), flags)
            .map_err(|e| OsError::io("registering with epoll", e.into()))
    }

    /// Stops watching `fd`.
    pub fn delete(&self, fd: BorrowedFd<'_>) -> Result<()> {
        rustix::event::epoll::delete(&self.fd, fd).map_err(|e| OsError::io("removing from epoll", e.into()))
    }

    /// Sleeps until a file descriptor is ready; puts the tokens of those ready in `ready`.
    /// False when a signal interrupted the wait (nothing is ready then).
    pub fn wait(&mut self, ready: &mut Vec<u64>) -> Result<bool> {
        use rustix::event::epoll;
        ready.clear();
        self.events.clear();
        match epoll::wait(&self.fd, rustix::buffer::spare_capacity(&mut self.events), None) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => return Ok(false),
            Err(e) => return Err(OsError::io("waiting for events", e.into())),
        }
        ready.extend(self.events.iter().map(|ev| {
            let data = ev.data;
            data.u64()
        }));
        Ok(true)
    }
}

/// The signals the daemon handles, delivered through a file descriptor its loop polls
/// ([`crate::signals`]).
pub struct DaemonSignals {
    pipe: SignalPipe,
}

/// A signal the daemon acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DaemonSignal {
    /// SIGTERM or SIGINT: save and exit.
    Stop,
    /// SIGHUP: reload the configuration.
    Reload,
}

impl DaemonSignals {
    /// Routes SIGTERM, SIGINT and SIGHUP into the pipe.
    pub fn new() -> Result<Self> {
        Ok(DaemonSignals { pipe: SignalPipe::install(SecondSignal::Deliver)? })
    }

    /// Signals received since the last call.
    pub fn take(&self) -> Vec<DaemonSignal> {
        self.pipe
            .take()
            .into_iter()
            .filter_map(|sig| match sig {
                libc::SIGHUP => Some(DaemonSignal::Reload),
                libc::SIGTERM | libc::SIGINT => Some(DaemonSignal::Stop),
                _ => None,
            })
            .collect()
    }
}

impl AsFd for DaemonSignals {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.pipe.as_fd()
    }
}

/// A one-shot monotonic timer.
pub struct Timer {
    fd: OwnedFd,
    armed_at: Option<u64>,
}

impl Timer {
    /// A disarmed timer.
    pub fn new() -> Result<Self> {
        let fd = rustix::time::timerfd_create(TimerfdClockId::Monotonic, TimerfdFlags::CLOEXEC | TimerfdFlags::NONBLOCK)
            .map_err(|e| OsError::io("creating a timerfd", e.into()))?;
        Ok(Timer { fd, armed_at: None })
    }

    /// Arms the timer for the absolute monotonic time `at_ns`, or disarms it with `None`.
    pub fn set(&mut self, at_ns: Option<u64>) -> Result<()> {
        if self.armed_at == at_ns {
            return Ok(());
        }
        let value = match at_ns {
            // An absolute time of 0 would disarm; at least 1 ns.
            Some(t) => Timespec { tv_sec: (t / 1_000_000_000) as i64, tv_nsec: (t % 1_000_000_000).max(1) as i64 },
            None => Timespec { tv_sec: 0, tv_nsec: 0 },
        };
        let spec = Itimerspec { it_interval: Timespec { tv_sec: 0, tv_nsec: 0 }, it_value: value };
        rustix::time::timerfd_settime(&self.fd, TimerfdTimerFlags::ABSTIME, &spec)
            .map_err(|e| OsError::io("arming the timer", e.into()))?;
        self.armed_at = at_ns;
        Ok(())
    }

    /// Consumes an expiry (after the fd polled readable).
    pub fn acknowledge(&mut self) {
        let mut buf = [0u8; 8];
        if rustix::io::read(&self.fd, &mut buf).is_ok() {
            self.armed_at = None;
        }
    }
}

impl AsFd for Timer {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// An eventfd another thread writes to wake the loop.
pub struct Wakeup {
    fd: OwnedFd,
}

impl Wakeup {
    /// A fresh eventfd.
    pub fn new() -> Result<Self> {
        let fd = rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK)
            .map_err(|e| OsError::io("creating an eventfd", e.into()))?;
        Ok(Wakeup { fd })
    }

    /// A handle for another thread.
    pub fn handle(&self) -> Result<WakeupHandle> {
        let fd = self.fd.try_clone().map_err(|e| OsError::io("duplicating the eventfd", e))?;
        Ok(WakeupHandle { fd })
    }

    /// Clears pending wakeups.
    pub fn clear(&self) {
        let mut buf = [0u8; 8];
        let _ = rustix::io::read(&self.fd, &mut buf);
    }
}

impl AsFd for Wakeup {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The writing side of a [`Wakeup`].
pub struct WakeupHandle {
    fd: OwnedFd,
}

impl WakeupHandle {
    /// Wakes the loop.
    pub fn wake(&self) {
        let _ = rustix::io::write(&self.fd, &1u64.to_ne_bytes());
    }
}

/// A PSI trigger (Documentation/accounting/psi.rst): the kernel raises `POLLPRI` on the file
/// descriptor when tasks stalled on memory for at least `stall_us` within a `window_us` window,
/// at most once per window. Works on /proc/pressure/memory and on a cgroup2 `memory.pressure`.
pub struct PressureTrigger {
    fd: OwnedFd,
    /// The `(stall_us, window_us)` registered.
    pub spec: (u64, u64),
}

impl PressureTrigger {
    /// Opens `path` read-write and registers the trigger `some STALL WINDOW`. A process without
    /// CAP_SYS_RESOURCE (a sandbox, a container) may only use windows in whole 2 s: then the
    /// window is rounded up to one and the stall scaled with it. Fails where PSI or triggers are
    /// unavailable (no file, a kernel before 5.2, `psi=0`).
    pub fn open(path: &std::path::Path, stall_us: u64, window_us: u64) -> Result<Self> {
        match Self::register(path, stall_us, window_us) {
            Err(e)
                if e.io_source().and_then(std::io::Error::raw_os_error) == Some(libc::EINVAL) && window_us % 2_000_000 != 0 =>
            {
                let window = window_us.div_ceil(2_000_000) * 2_000_000;
                Self::register(path, stall_us.saturating_mul(window) / window_us.max(1), window)
            }
            other => other,
        }
    }

    fn register(path: &std::path::Path, stall_us: u64, window_us: u64) -> Result<Self> {
        use rustix::fs::{Mode, OFlags};
        let fd = rustix::fs::open(path, OFlags::RDWR | OFlags::NONBLOCK | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| OsError::io_at(path, "opening the memory pressure file", e.into()))?;
        // The kernel reads the specification as a NUL-terminated string (as psi.rst's example).
        let spec = format!("some {stall_us} {window_us}\0");
        rustix::io::write(&fd, spec.as_bytes())
            .map_err(|e| OsError::io_at(path, "registering a pressure trigger on", e.into()))?;
        Ok(PressureTrigger { fd, spec: (stall_us, window_us) })
    }
}

impl AsFd for PressureTrigger {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_time_is_within_a_day_of_utc() {
        for t in [0, 1_767_571_200, 1_782_000_000] {
            assert!(utc_offset_s(t).abs() <= 14 * 3600, "{}", utc_offset_s(t));
        }
        assert!(local_ms().abs_diff(unix_ms()) <= 14 * 3_600_000 + 1000);
    }
}
