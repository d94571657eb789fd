//! Ctrl-C and SIGTERM during a benchmark: turns them into a [`BenchError::Interrupted`]
//! at the next check point, so that every guard (balloon, cgroup, daemons, X server) is dropped
//! and cleans up; a second signal exits at once (the balloon still dies with its parent, and the
//! next run removes the cgroup left behind).
//!
//! It owns the process-wide "interrupted" flag and sleeping that wakes up on it; it must not
//! clean anything up itself.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::{BenchError, Result};

static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// Installs the handlers for SIGINT, SIGTERM and SIGHUP (idempotent). The first signal sets the
/// flag; a second one terminates the process with status 130.
pub fn install() -> Result<()> {
    if FLAG.get().is_some() {
        return Ok(());
    }
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP] {
        // Order matters: the conditional shutdown fires only if the flag is already set.
        signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(&flag))
            .map_err(|e| BenchError::io("installing the signal handler", e))?;
        signal_hook::flag::register(sig, Arc::clone(&flag)).map_err(|e| BenchError::io("installing the signal handler", e))?;
    }
    let _ = FLAG.set(flag);
    Ok(())
}

/// Whether a terminating signal has arrived.
pub fn requested() -> bool {
    FLAG.get().is_some_and(|f| f.load(Ordering::SeqCst))
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
