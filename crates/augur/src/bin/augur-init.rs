//! `augur-init`: the kernel's init for a boot recorded from before systemd
//! (`init=/usr/sbin/augur-init`). It loads augur's own executable in a few large reads, starts
//! `augur boot --before-init INIT` beside the boot, waits until that records (at most
//! [`RECORDER_WAIT`]), then executes the real init (`/sbin/init`, or `AUGUR_INIT=PATH` from the
//! kernel's command line), which stays PID 1 (docs/boot.md, "Starting before systemd").
//!
//! It is its own small program, with nothing but the standard library, because it runs before
//! anything is in memory on a disk that may be slow: as PID 1, augur's 8 MiB executable cost
//! 0.65 s of page faults on the boot benchmark's disk before systemd could start; this one is a
//! few hundred KiB, and it reads augur's executable in 2 MiB pieces for the recorder.
//!
//! It must never keep the machine from booting: whatever fails before the handover is reported on
//! the console and the init is executed all the same. It decides nothing about what to load or
//! record (that is `augur boot`'s).
#![forbid(unsafe_code)]

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The inits tried, the kernel's own first (`/sbin/init`), then systemd's usual places.
const INIT_CANDIDATES: [&str; 3] = ["/sbin/init", "/lib/systemd/systemd", "/usr/lib/systemd/systemd"];

/// The environment variable naming the init to execute instead (the kernel passes a command-line
/// parameter `AUGUR_INIT=/path` it does not know to init's environment).
const INIT_VARIABLE: &str = "AUGUR_INIT";

/// augur's executable, where the package installs it: the recorder is `augur boot`.
const AUGUR: &str = "/usr/bin/augur";

/// How long the init waits for the recorder to start: enough for it to set up its trace on a
/// slow disk, short enough that a stuck recorder delays the boot little.
const RECORDER_WAIT: Duration = Duration::from_millis(1500);

/// Reads of augur's executable: large, so that a disk's operations, not page faults, set the pace.
const READ_PIECE: usize = 2 << 20;

/// Exit status when started as anything but PID 1 (augur's "bad command line").
const NOT_INIT: u8 = 2;
/// Exit status when no init could be executed (augur's "kernel lacks a needed feature").
const NO_INIT: u8 = 8;

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if std::process::id() != 1 {
        eprintln!(
            "augur-init: runs as the kernel's init only (init=/usr/sbin/augur-init on the kernel's command line), not as process {}",
            std::process::id()
        );
        return ExitCode::from(NOT_INIT);
    }
    let own = std::env::current_exe().ok();
    let requested = std::env::var_os(INIT_VARIABLE);
    let Some(init) = choose_init(requested.as_deref(), own.as_deref()) else {
        eprintln!("augur-init: no init to execute (tried {})", INIT_CANDIDATES.join(", "));
        return ExitCode::from(NO_INIT);
    };
    if let Err(e) = read_through(Path::new(AUGUR)) {
        eprintln!("augur-init: cannot read {AUGUR}: {e}");
    }
    let boot_args = [OsStr::new("boot"), OsStr::new("--before-init"), init.as_os_str()];
    if let Err(e) = start_recorder(Path::new(AUGUR), &boot_args, RECORDER_WAIT) {
        eprintln!("augur-init: not loading or recording this boot: cannot start {AUGUR}: {e}");
    }
    let err = Command::new(&init).arg0(&init).args(&args).exec();
    eprintln!("augur-init: cannot execute {}: {err}", init.display());
    // The kernel's own fallbacks, in its order, before giving up (PID 1 exiting panics the kernel).
    for other in INIT_CANDIDATES.iter().map(Path::new).filter(|p| *p != init) {
        let err = Command::new(other).arg0(other).args(&args).exec();
        eprintln!("augur-init: cannot execute {}: {err}", other.display());
    }
    ExitCode::from(NO_INIT)
}

/// The init to execute: `requested` when it names an absolute path, else the first candidate
/// that exists and is not this program (so `/sbin/init` linked to `augur-init` cannot loop).
fn choose_init(requested: Option<&OsStr>, own: Option<&Path>) -> Option<PathBuf> {
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

/// Reads `path` whole in [`READ_PIECE`] reads, so that its pages are in the page cache; returns
/// the bytes read.
fn read_through(path: &Path) -> io::Result<u64> {
    let file = File::open(path)?;
    let mut buf = vec![0u8; READ_PIECE];
    let mut at = 0u64;
    loop {
        match file.read_at(&mut buf, at) {
            Ok(0) => return Ok(at),
            Ok(n) => at += n as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Starts `exe args` and waits at most `wait` for it to write a byte to its standard output (or
/// close it): it is then recording. It gets a process group of its own (not the console's
/// foreground group, which the kernel sends SIGHUP when the init lets go of the console), no
/// colours in its log (`NO_COLOR`: the log goes from the console to the journal), and this
/// process's standard error. It is not waited for: the init this process becomes reaps it.
fn start_recorder(exe: &Path, args: &[&OsStr], wait: Duration) -> io::Result<()> {
    let mut child = Command::new(exe)
        .arg0("augur")
        .args(args)
        .env("NO_COLOR", "1")
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()?;
    let Some(mut out) = child.stdout.take() else { return Ok(()) };
    let (said, heard) = mpsc::channel();
    // A thread blocks on the pipe; this one waits on the channel with a bound. The thread ends
    // with the read, or with this process when it executes the init.
    std::thread::spawn(move || {
        let mut byte = [0u8; 1];
        let _ = out.read(&mut byte);
        let _ = said.send(());
    });
    let _ = heard.recv_timeout(wait);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn the_init_is_the_one_asked_for_else_the_first_that_is_not_augur_init() {
        assert_eq!(choose_init(Some(OsStr::new("/bin/true")), None), Some(PathBuf::from("/bin/true")));
        // A relative name is no init (the kernel gives init no PATH to search).
        let fallback = choose_init(Some(OsStr::new("true")), None);
        assert_eq!(fallback, INIT_CANDIDATES.iter().map(Path::new).find(|p| p.exists()).map(Path::to_path_buf));
        if let Some(first) = fallback {
            let next = choose_init(None, Some(&first)).and_then(|p| std::fs::canonicalize(p).ok());
            assert_ne!(next, std::fs::canonicalize(&first).ok(), "it would execute itself");
        }
    }

    #[test]
    fn a_file_is_read_whole() {
        let dir = std::env::temp_dir().join(format!("augur-init-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("data");
        std::fs::write(&path, vec![3u8; READ_PIECE * 2 + 5]).unwrap();
        assert_eq!(read_through(&path).unwrap(), (READ_PIECE * 2 + 5) as u64);
        assert!(read_through(&dir.join("missing")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_recorder_that_reports_is_waited_for_and_a_silent_one_only_for_the_bound() {
        let sh = Path::new("/bin/sh");
        let t = Instant::now();
        start_recorder(sh, &[OsStr::new("-c"), OsStr::new("echo r; sleep 5")], Duration::from_secs(3)).unwrap();
        assert!(t.elapsed() < Duration::from_secs(2), "waited {:?} for a recorder that reported", t.elapsed());
        let t = Instant::now();
        start_recorder(sh, &[OsStr::new("-c"), OsStr::new("sleep 5")], Duration::from_millis(300)).unwrap();
        let waited = t.elapsed();
        assert!(waited >= Duration::from_millis(300) && waited < Duration::from_secs(3), "waited {waited:?}");
        assert!(start_recorder(Path::new("/nonexistent/augur"), &[], Duration::from_secs(1)).is_err());
    }
}
