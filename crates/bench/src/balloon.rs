//! The memory balloon of the *small-memory* machine profile: a child process that locks
//! anonymous memory until only the chosen amount stays available to everything else
//! (MemAvailable), and holds it until it is killed.
//!
//! Both sides live here: [`Balloon::inflate`] (the suite's side: spawn, wait until ready, kill on
//! drop) and [`hold`] (the child's side, run by the hidden `augur-bench balloon` subcommand).
//! The child dies with its parent (PR_SET_PDEATHSIG) and checks on its owner every second, so a
//! crashed suite never leaves locked memory behind; [`kill_leftovers`] removes any that did.
//! Nothing here measures anything.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::error::{BenchError, IoContext, Result};
use augur_os::sense::procfs;

/// The hidden subcommand that runs [`hold`].
pub const SUBCOMMAND: &str = "balloon";

/// Memory is locked in chunks of this size while far from the target, then in smaller ones.
const CHUNK: usize = 64 << 20;
const FINE_CHUNK: usize = 4 << 20;

/// A running balloon. Dropping it kills the child, which frees its memory.
#[derive(Debug)]
pub struct Balloon {
    child: Child,
    /// Bytes the child locked.
    pub locked_bytes: u64,
    /// MemAvailable right after it was inflated.
    pub available_after: u64,
}

impl Balloon {
    /// Starts `augur-bench balloon` and waits until MemAvailable is down to `leave_available`.
    pub fn inflate(leave_available: u64) -> Result<Balloon> {
        let exe = std::env::current_exe().context(|| "finding the augur-bench executable".into())?;
        let mut child = Command::new(&exe)
            .args([SUBCOMMAND, "--leave", &leave_available.to_string(), "--owner"])
            .arg(std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context(|| format!("starting the memory balloon ({} {SUBCOMMAND})", exe.display()))?;
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            return Err(BenchError::Command { command: SUBCOMMAND.into(), detail: "no stdout".into() });
        };
        let mut line = String::new();
        let read = BufReader::new(stdout).read_line(&mut line);
        let parsed = read.ok().and_then(|_| parse_ready(&line));
        match parsed {
            Some((locked_bytes, available_after)) => Ok(Balloon { child, locked_bytes, available_after }),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                Err(BenchError::Command { command: "memory balloon".into(), detail: format!("did not inflate: {}", line.trim()) })
            }
        }
    }

    /// Fails if the balloon is gone (the OOM killer chose it): the profile no longer holds.
    pub fn check_alive(&mut self) -> Result<()> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(BenchError::Command {
                command: "memory balloon".into(),
                detail: format!("died ({status}), probably chosen by the OOM killer: leave more memory available"),
            }),
            Err(e) => Err(BenchError::io("checking the memory balloon", e)),
        }
    }

    /// The balloon's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Balloon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn parse_ready(line: &str) -> Option<(u64, u64)> {
    let mut words = line.split_whitespace();
    if words.next()? != "ready" {
        return None;
    }
    let locked = words.next()?.strip_prefix("locked=")?.parse().ok()?;
    let available = words.next()?.strip_prefix("available=")?.parse().ok()?;
    Some((locked, available))
}

/// The child's side: lock memory until MemAvailable ≤ `leave_available`, report
/// `ready locked=N available=M` on stdout, then hold it until killed or until `owner` is gone.
pub fn hold(leave_available: u64, owner: u32) -> Result<()> {
    use rustix::process::{Signal, set_parent_process_death_signal};
    set_parent_process_death_signal(Some(Signal::KILL))
        .map_err(|e| BenchError::io("setting the balloon's parent-death signal", e.into()))?;
    if !procfs::is_alive(owner) {
        return Ok(());
    }
    // When memory runs out (the usage day leaves little), the OOM killer must pick a workload,
    // whose launch is then reported as failed, not the balloon, whose locked memory would
    // otherwise make it the first choice and end the profile.
    let _ = std::fs::write("/proc/self/oom_score_adj", "-1000");
    // Every mapping from now on is locked and populated as it is made, so nothing of the
    // balloon can be reclaimed or swapped.
    rustix::mm::mlockall(rustix::mm::MlockAllFlags::CURRENT | rustix::mm::MlockAllFlags::FUTURE)
        .map_err(|e| BenchError::io("mlockall for the memory balloon (needs root)", e.into()))?;
    let mut held: Vec<Vec<u8>> = Vec::new();
    let mut locked: u64 = 0;
    loop {
        if !procfs::is_alive(owner) {
            return Ok(());
        }
        let available = procfs::meminfo("MemAvailable")?;
        let excess = available.saturating_sub(leave_available);
        if excess < FINE_CHUNK as u64 {
            let mut out = std::io::stdout().lock();
            writeln!(out, "ready locked={locked} available={available}").context(|| "balloon stdout".into())?;
            out.flush().context(|| "balloon stdout".into())?;
            break;
        }
        let size = if excess > 2 * CHUNK as u64 { CHUNK } else { FINE_CHUNK };
        // Writing every byte makes the pages real (not the shared zero page).
        held.push(vec![0xa5u8; size]);
        locked += size as u64;
    }
    while procfs::is_alive(owner) {
        std::thread::sleep(Duration::from_secs(1));
    }
    drop(held);
    Ok(())
}

/// Kills balloons whose owner is gone (left by a run that was killed with SIGKILL). Returns how
/// many it killed.
pub fn kill_leftovers() -> usize {
    let mut killed = 0;
    for pid in procfs::all_pids() {
        let args = procfs::cmdline(pid);
        if args.get(1).map(String::as_str) != Some(SUBCOMMAND) {
            continue;
        }
        let owner = args.iter().position(|a| a == "--owner").and_then(|i| args.get(i + 1)).and_then(|o| o.parse::<u32>().ok());
        if owner.is_some_and(procfs::is_alive) {
            continue;
        }
        if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
            if rustix::process::kill_process(p, rustix::process::Signal::KILL).is_ok() {
                killed += 1;
            }
        }
    }
    killed
}

/// Every balloon process alive now (for checks that cleanup worked).
pub fn running() -> Vec<u32> {
    procfs::all_pids().into_iter().filter(|&p| procfs::cmdline(p).get(1).map(String::as_str) == Some(SUBCOMMAND)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_line() {
        assert_eq!(parse_ready("ready locked=100 available=7\n"), Some((100, 7)));
        assert_eq!(parse_ready("error: no\n"), None);
        assert_eq!(parse_ready(""), None);
    }
}
