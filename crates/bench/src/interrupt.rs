//! Ctrl-C and SIGTERM during a benchmark: turns them into a [`BenchError::Interrupted`]
//! at the next check point, so that every guard (balloon, cgroup, daemons, X server) is dropped
//! and cleans up; a second signal exits at once (the balloon still dies with its parent, and the
//! next run removes the cgroup left behind).
//!
//! It owns the suite's check points and sleeping that wakes up on the process-wide flag
//! ([`augur_os::signals`], the one place signals are handled); it must not clean anything up
//! itself.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use augur_os::signals::{SecondSignal, SignalPipe, terminating_signal_received};

use crate::error::{BenchError, Result};

/// The suite's handlers, installed once and kept for the life of the process.
static HANDLERS: OnceLock<SignalPipe> = OnceLock::new();

/// Installs the handlers for SIGINT, SIGTERM and SIGHUP (idempotent). The first terminating
/// signal sets the flag; a second one terminates the process with status 130.
pub fn install() -> Result<()> {
    if HANDLERS.get().is_some() {
        return Ok(());
    }
    let _ = HANDLERS.set(SignalPipe::install(SecondSignal::Exit)?);
    Ok(())
}

/// Whether a terminating signal has arrived.
pub fn requested() -> bool {
    terminating_signal_received()
}

/// The error every check point returns once interrupted.
pub fn interrupted_error() -> BenchError {
    BenchError::Interrupted
}

/// Fails if a terminating signal has arrived.
pub fn check() -> Result<()> {
    if requested() { Err(interrupted_error()) } else { Ok(()) }
}

/// Sleeps for `d`, waking every 50 ms to check for a signal.
pub fn sleep(d: Duration) -> Result<()> {
    let end = Instant::now() + d;
    loop {
        check()?;
        let now = Instant::now();
        if now >= end {
            return Ok(());
        }
        std::thread::sleep((end - now).min(Duration::from_millis(50)));
    }
}
