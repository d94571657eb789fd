//! The one way augur receives SIGINT, SIGTERM and SIGHUP: a handler that writes the signal's
//! number into a self-pipe and sets a process-wide flag. Event loops poll the pipe's read end
//! (the daemon's epoll, `augur trace`'s poll); code that only checks now and then (the benchmark
//! suite's threads) reads the flag. Optionally a second terminating signal exits the process at
//! once with status 130, for a run that must not wait for its next check point.
//!
//! Unlike a signalfd, it needs no signal blocked in every thread (threads started before it are
//! fine), and children inherit no blocked mask. Handlers use `SA_RESTART`, so system calls other
//! threads make are restarted; `poll` and `epoll_wait` still return `EINTR`, which wakes the
//! loop. The previous handlers come back when the [`SignalPipe`] is dropped.
//!
//! [`die_on_closed_pipe`] gives a command that only prints SIGPIPE's default back (Rust starts
//! with it ignored), so that `augur status | head` ends quietly as other Unix tools do.
//!
//! It owns the handlers only: what a signal means is the caller's business.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use crate::error::{OsError, Result};

/// The signals augur handles.
pub const HANDLED: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// True for the handled signals that ask to stop (SIGINT, SIGTERM); SIGHUP asks a reload.
pub fn is_terminating(sig: i32) -> bool {
    sig != libc::SIGHUP
}

/// Restores SIGPIPE's default action for the rest of the process: writing to a pipe whose
/// reader is gone then ends it silently instead of failing the write (which `println!` turns
/// into a panic). Only for commands whose output goes to their standard output, never the
/// daemon's socket writers.
pub fn die_on_closed_pipe() {
    // SAFETY: signal(2) with SIG_DFL installs no handler; it changes only the disposition of
    // SIGPIPE, which nothing else in augur sets.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// The write end of the pipe of the installed [`SignalPipe`], or -1.
static PIPE: AtomicI32 = AtomicI32::new(-1);
/// Set by the first handled signal; cleared by [`SignalPipe::install`].
static RECEIVED: AtomicBool = AtomicBool::new(false);
/// Whether a terminating signal after the first exits with status 130.
static EXIT_ON_SECOND: AtomicBool = AtomicBool::new(false);

/// Exit status of a process stopped by a second Ctrl-C (128 + SIGINT, as shells report it).
pub const SECOND_SIGNAL_STATUS: i32 = 130;

extern "C" fn on_signal(sig: libc::c_int) {
    let terminating = is_terminating(sig);
    if terminating && EXIT_ON_SECOND.load(Ordering::Relaxed) && RECEIVED.load(Ordering::Relaxed) {
        // SAFETY: _exit(2) is async-signal-safe and takes no pointers.
        unsafe { libc::_exit(SECOND_SIGNAL_STATUS) };
    }
    if terminating {
        RECEIVED.store(true, Ordering::Relaxed);
    }
    let fd = PIPE.load(Ordering::Relaxed);
    if fd >= 0 {
        let byte = sig as u8;
        // SAFETY: write(2) is async-signal-safe; the byte lives on this stack frame. A full pipe
        // (nobody reading) loses the byte, never blocks: the write end is non-blocking.
        unsafe {
            libc::write(fd, (&byte as *const u8).cast(), 1);
        }
    }
}

/// What a second terminating signal does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecondSignal {
    /// It is delivered like the first (the daemon, `augur trace`).
    Deliver,
    /// It exits the process at once with status 130 (the benchmark suite).
    Exit,
}

/// SIGINT, SIGTERM and SIGHUP routed into a pipe while alive; the old handlers restored on drop.
/// Pipes nest (the suite's around a trace's): the innermost receives, and dropping it gives the
/// outer one back its handlers, with the flag still set if a terminating signal came meanwhile.
pub struct SignalPipe {
    read: OwnedFd,
    _write: OwnedFd,
    old: Vec<(libc::c_int, libc::sigaction)>,
    outer_pipe: i32,
    outer_exit_on_second: bool,
    outer_received: bool,
}

impl SignalPipe {
    /// Installs the handlers.
    pub fn install(second: SecondSignal) -> Result<Self> {
        let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK)
            .map_err(|e| OsError::io("creating the signal pipe", e.into()))?;
        let outer_received = RECEIVED.swap(false, Ordering::Relaxed);
        let outer_exit_on_second = EXIT_ON_SECOND.swap(second == SecondSignal::Exit, Ordering::Relaxed);
        let outer_pipe = PIPE.swap(write.as_raw_fd(), Ordering::Relaxed);
        let mut old = Vec::new();
        for sig in HANDLED {
            // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value; the handler only
            // calls async-signal-safe functions. `prev` is written by the kernel.
            let installed = unsafe {
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
                act.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut act.sa_mask);
                let mut prev: libc::sigaction = std::mem::zeroed();
                (libc::sigaction(sig, &act, &mut prev) == 0).then_some(prev)
            };
            match installed {
                Some(prev) => old.push((sig, prev)),
                None => {
                    let e = std::io::Error::last_os_error();
                    // Dropping what was built so far restores the handlers and the outer state.
                    drop(SignalPipe { read, _write: write, old, outer_pipe, outer_exit_on_second, outer_received });
                    return Err(OsError::io("installing a signal handler", e));
                }
            }
        }
        Ok(SignalPipe { read, _write: write, old, outer_pipe, outer_exit_on_second, outer_received })
    }

    /// The signals received since the last call, oldest first.
    pub fn take(&self) -> Vec<i32> {
        let mut buf = [0u8; 16];
        let mut out = Vec::new();
        while let Ok(n) = rustix::io::read(&self.read, &mut buf) {
            if n == 0 {
                break;
            }
            out.extend(buf[..n].iter().map(|&b| i32::from(b)));
        }
        out
    }
}

/// Whether a terminating signal (SIGINT or SIGTERM) arrived since the pipe was installed; for
/// code that checks between steps rather than polling the pipe.
pub fn terminating_signal_received() -> bool {
    RECEIVED.load(Ordering::Relaxed)
}

impl AsFd for SignalPipe {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.read.as_fd()
    }
}

impl Drop for SignalPipe {
    fn drop(&mut self) {
        for (sig, prev) in &self.old {
            // SAFETY: restoring the action sigaction gave us earlier.
            unsafe {
                libc::sigaction(*sig, prev, std::ptr::null_mut());
            }
        }
        PIPE.store(self.outer_pipe, Ordering::Relaxed);
        EXIT_ON_SECOND.store(self.outer_exit_on_second, Ordering::Relaxed);
        RECEIVED.fetch_or(self.outer_received, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The handlers are process-wide: tests that install them take turns.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn signals_arrive_in_the_pipe_and_set_the_flag_and_the_old_handlers_come_back() {
        let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let pipe = SignalPipe::install(SecondSignal::Deliver).unwrap();
        assert!(!terminating_signal_received());
        // SAFETY: raise(3) with a handled signal number; our handler is installed.
        unsafe {
            libc::raise(libc::SIGHUP);
        }
        assert_eq!(pipe.take(), vec![libc::SIGHUP]);
        assert!(!terminating_signal_received(), "SIGHUP is a reload, not a stop");
        // SAFETY: as above.
        unsafe {
            libc::raise(libc::SIGTERM);
            libc::raise(libc::SIGTERM);
        }
        assert_eq!(pipe.take(), vec![libc::SIGTERM, libc::SIGTERM], "a second one is delivered too");
        assert!(terminating_signal_received());
        assert!(pipe.take().is_empty());
        drop(pipe);
        // SAFETY: reading the current action without changing it.
        let current = unsafe {
            let mut cur: libc::sigaction = std::mem::zeroed();
            libc::sigaction(libc::SIGTERM, std::ptr::null(), &mut cur);
            cur.sa_sigaction
        };
        assert_ne!(current, on_signal as extern "C" fn(libc::c_int) as usize, "the old handler is back");
    }

    #[test]
    fn a_pipe_inside_another_receives_and_gives_the_outer_one_back() {
        let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let outer = SignalPipe::install(SecondSignal::Exit).unwrap();
        {
            let inner = SignalPipe::install(SecondSignal::Deliver).unwrap();
            // SAFETY: raise(3) with a handled signal number; our handler is installed.
            unsafe {
                libc::raise(libc::SIGINT);
                libc::raise(libc::SIGINT);
            }
            assert_eq!(inner.take(), vec![libc::SIGINT, libc::SIGINT], "the inner pipe delivers the second one");
            assert!(outer.take().is_empty());
        }
        assert!(terminating_signal_received(), "the outer one learns of the interruption");
        // SAFETY: as above.
        unsafe {
            libc::raise(libc::SIGHUP);
        }
        assert_eq!(outer.take(), vec![libc::SIGHUP]);
    }
}
