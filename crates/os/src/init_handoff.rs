//! Starting `augur boot` before the service manager: `augur-init`, given to the kernel as its init
//! (`init=/usr/sbin/augur-init`), starts the boot recorder and loader as a child, waits a bounded
//! time for it to say it records, then executes the real init in its own process, which stays
//! PID 1. The child then sees the init's own loading (the service manager reading itself, its
//! libraries and its units), which a unit started by it never can.
//!
//! Also the one-recorder rule: [`BootLock`] (an abstract Unix socket, which the kernel releases
//! when its holder exits, however it exits) keeps a second `augur boot` (the unit, when
//! `augur-init` already started one) from recording the same boot.
//!
//! It must never keep the machine from booting: the caller executes the init whatever happened
//! here. It decides nothing about what to load.

use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, poll};
use rustix::time::Timespec;

/// The inits tried, in the kernel's own order for the first (`/sbin/init`), then systemd's
/// usual places.
pub const INIT_CANDIDATES: [&str; 3] = ["/sbin/init", "/lib/systemd/systemd", "/usr/lib/systemd/systemd"];

/// The environment variable naming the init to execute instead (the kernel passes a command-line
/// parameter `AUGUR_INIT=/path` it does not know to init's environment).
pub const INIT_VARIABLE: &str = "AUGUR_INIT";

/// Written by the child once it records (its pid): `augur-boot.service` is skipped when it exists
/// (`ConditionPathExists=!`), so the unit costs the boot nothing then.
pub const STARTED_MARKER: &str = "/run/augur-init.pid";

/// The abstract socket name [`BootLock`] binds.
const LOCK_NAME: &[u8] = b"augur-boot";

/// The init to execute: `AUGUR_INIT` when it names an absolute path, else the first candidate
/// that exists and is not this program (so `/sbin/init` linked to `augur-init` cannot loop).
pub fn choose_init(requested: Option<&OsStr>, own: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = requested.map(Path::new).filter(|p| p.is_absolute()) {
        return Some(p.to_path_buf());
    }
    let own = own.and_then(|p| std::fs::canonicalize(p).ok());
    INIT_CANDIDATES
        .iter()
        .map(Path::new)
        .filter(|p| p.exists())
        .find(|p| own.is_none() || std::fs::canonicalize(p).ok() != own)
        .map(Path::to_path_buf)
}

/// True when `init` is systemd (what it resolves to is named `systemd`).
pub fn init_is_systemd(init: &Path) -> bool {
    std::fs::canonicalize(init).is_ok_and(|p| p.file_name() == Some(OsStr::new("systemd")))
}

/// Starts `exe args` (with `argv[0]` set to `name`) and waits at most `wait` for it to write a
/// byte to its standard output (or close it): the child is then recording. Its standard error is
/// this process's (the console), uncoloured (`NO_COLOR`). Returns the child's pid.
pub fn start_beside_init(exe: &Path, name: &str, args: &[&OsStr], wait: Duration) -> io::Result<u32> {
    // A process group of its own: not the console's foreground group, which the kernel sends
    // SIGHUP when the init (the console's session leader) lets go of the console.
    let mut child = Command::new(exe)
        .arg0(name)
        .args(args)
        .env("NO_COLOR", "1")
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()?;
    let pid = child.id();
    let Some(mut out) = child.stdout.take() else { return Ok(pid) };
    let until = Instant::now() + wait;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let timeout = Timespec { tv_sec: left.as_secs() as i64, tv_nsec: i64::from(left.subsec_nanos()) };
        let fd = out.as_fd();
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        match poll(&mut fds, Some(&timeout)) {
            Ok(0) => break,
            Ok(_) => {
                let mut byte = [0u8; 1];
                let _ = out.read(&mut byte);
                break;
            }
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    // The child is not waited for: the init this process becomes reaps it.
    drop(child);
    Ok(pid)
}

/// In the child: says it records (one byte on standard output, which `augur-init` waits on) and
/// writes [`STARTED_MARKER`]. Failures are ignored: the parent stops waiting after its bound, and
/// without the marker the unit's `augur boot` finds [`BootLock`] held.
pub fn report_recording() {
    let mut out = io::stdout();
    let _ = out.write_all(b"r").and_then(|()| out.flush());
    let _ = std::fs::write(STARTED_MARKER, format!("{}\n", std::process::id()));
}

/// Executes `init` in this process with `args` (`argv[0]` is the init's path); returns only when
/// that failed.
pub fn exec_init(init: &Path, args: &[OsString]) -> io::Error {
    Command::new(init).arg0(init).args(args).exec()
}

/// Held by the `augur boot` that records this boot; released when it exits.
#[derive(Debug)]
pub struct BootLock {
    _socket: UnixListener,
}

/// Takes the boot lock: `None` when another process holds it.
pub fn take_boot_lock() -> io::Result<Option<BootLock>> {
    let addr = SocketAddr::from_abstract_name(LOCK_NAME)?;
    match UnixListener::bind_addr(&addr) {
        Ok(socket) => Ok(Some(BootLock { _socket: socket })),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_init_is_the_one_asked_for_else_the_first_that_is_not_augur() {
        assert_eq!(choose_init(Some(OsStr::new("/bin/true")), None), Some(PathBuf::from("/bin/true")));
        // A relative name is no init (the kernel gives init no PATH to search).
        let fallback = choose_init(Some(OsStr::new("true")), None);
        assert_eq!(fallback, INIT_CANDIDATES.iter().map(Path::new).find(|p| p.exists()).map(Path::to_path_buf));
        // /sbin/init itself, when it is what runs: the next candidate.
        if let Some(first) = fallback {
            assert_ne!(
                choose_init(None, Some(&first)).and_then(|p| std::fs::canonicalize(p).ok()),
                std::fs::canonicalize(&first).ok()
            );
        }
        assert!(!init_is_systemd(Path::new("/bin/true")));
    }

    #[test]
    fn one_boot_lock_at_a_time() {
        // Another test run on the machine may hold it: only the holder's exclusivity is checked.
        if let Some(lock) = take_boot_lock().unwrap() {
            assert!(take_boot_lock().unwrap().is_none(), "a second holder");
            drop(lock);
            assert!(take_boot_lock().unwrap().is_some(), "released at drop");
        }
    }

    #[test]
    fn a_child_that_reports_is_waited_for_and_a_silent_one_only_for_the_bound() {
        let t = Instant::now();
        start_beside_init(Path::new("/bin/sh"), "sh", &[OsStr::new("-c"), OsStr::new("echo r; sleep 5")], Duration::from_secs(3))
            .unwrap();
        assert!(t.elapsed() < Duration::from_secs(2), "waited {:?} for a child that reported", t.elapsed());
        let t = Instant::now();
        start_beside_init(Path::new("/bin/sh"), "sh", &[OsStr::new("-c"), OsStr::new("sleep 5")], Duration::from_millis(300))
            .unwrap();
        let waited = t.elapsed();
        assert!(waited >= Duration::from_millis(300) && waited < Duration::from_secs(3), "waited {waited:?}");
        assert!(start_beside_init(Path::new("/nonexistent/augur"), "augur", &[], Duration::from_secs(1)).is_err());
    }
}
