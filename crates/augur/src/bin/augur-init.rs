//! `augur-init`: the kernel's init for a boot recorded from before systemd
//! (`init=/usr/sbin/augur-init`). As PID 1 it starts a copy of itself (`augur-init --early
//! --before-init INIT`), waits until that records (at most [`RECORDER_WAIT`], a few milliseconds
//! in practice), then executes the real init (`/sbin/init`, or `AUGUR_INIT=PATH` from the
//! kernel's command line), which stays PID 1 (docs/boot.md, "Starting before systemd").
//!
//! The copy (`--early`) sets up the boot's trace itself: a tracefs instance recording every
//! task's page events into the kernel's buffer (tracefs is all it needs: a few writes, no disk),
//! says it records, loads the early load list the last boots left (the pages the boot needs
//! before its default target, in first-use order, in reads of at most 2 MiB), and only then
//! executes `augur boot`, which takes the instance over and reads what it buffered from the
//! first event. augur's own 8 MiB executable is thus read after the early pages, not before
//! systemd could start (0.65-1.1 s on the boot benchmark's disk when it was).
//!
//! It is its own small program, with nothing but the standard library and augur's pure core,
//! because it runs before anything is in memory on a disk that may be slow, and because PID 1
//! that needs only libc cannot fail to start for a missing library of augur's.
//!
//! It must never keep the machine from booting: whatever fails before the handover is reported on
//! the console and the init is executed all the same. It decides nothing about what to load (the
//! list is `augur boot`'s, from the merged boots) or what the recording means.
#![forbid(unsafe_code)]

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use augur_core::model::early_load::{self, EarlyLoadList, INIT_STARTED_MARKER};
use augur_core::model::tracepoints::{ACCESS_EVENTS, INODE_LOAD_EVENT, INSERTION_EVENT, PROCESS_EVENTS};
use augur_engine::config::DEFAULT_STATE_PATH;

/// The inits tried, the kernel's own first (`/sbin/init`), then systemd's usual places.
const INIT_CANDIDATES: [&str; 3] = ["/sbin/init", "/lib/systemd/systemd", "/usr/lib/systemd/systemd"];

/// The environment variable naming the init to execute instead (the kernel passes a command-line
/// parameter `AUGUR_INIT=/path` it does not know to init's environment).
const INIT_VARIABLE: &str = "AUGUR_INIT";

/// augur's executable, where the package installs it: the recorder is `augur boot`.
const AUGUR: &str = "/usr/bin/augur";

/// Where the package installs this program (the copy started with `--early`, when the path it
/// was started by is not absolute).
const OWN_PATH: &str = "/usr/sbin/augur-init";

/// How long the init waits for the copy to record: enough for it to start and set up its trace
/// on a slow disk, short enough that a stuck one delays the boot little.
const RECORDER_WAIT: Duration = Duration::from_millis(1500);

/// Reads of the early pages: large, so that a disk's operations, not page faults, set the pace
/// (larger ones are where readahead(2) and FADV_WILLNEED load only part of what was asked).
const READ_PIECE: u64 = 2 << 20;

/// Pieces of a file this many pages apart or closer are read as one (gaps included): on a disk
/// limited in operations per second, fewer operations (`EarlyLoadList::coalesced`).
const MERGE_GAP_PAGES: u64 = 64;

/// The longest the copy loads before it hands over to `augur boot` (which then loads the phases
/// the boot is in): the kernel buffers the trace meanwhile, and a buffer is finite.
const LOAD_BOUND: Duration = Duration::from_secs(20);

/// Where tracefs is looked for (it is not mounted here when it is in neither: `augur boot` then
/// records from its own start).
const TRACEFS_ROOTS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The trace's buffer per CPU, in KiB: what `augur boot`'s own recording uses. Overwriting is off,
/// so a full buffer drops the newest events (counted), never the boot's first.
const TRACE_BUFFER_KB: u64 = 16 * 1024;

/// Exit status when started as anything but PID 1 (augur's "bad command line").
const NOT_INIT: u8 = 2;
/// Exit status when no init could be executed (augur's "kernel lacks a needed feature").
const NO_INIT: u8 = 8;

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "--early") {
        return early(&args[2..]);
    }
    let args = &args[1.min(args.len())..];
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
    // The path the kernel started this program by (`/proc` is not mounted yet on a machine).
    let own_path = std::env::args_os().next().map(PathBuf::from).filter(|p| p.is_absolute());
    let own_path = own_path.unwrap_or_else(|| PathBuf::from(OWN_PATH));
    let early_args = [OsStr::new("--early"), OsStr::new("--before-init"), init.as_os_str()];
    if let Err(e) = start_recorder(&own_path, &early_args, RECORDER_WAIT) {
        eprintln!("augur-init: not loading or recording this boot: cannot start {}: {e}", own_path.display());
    }
    let err = Command::new(&init).arg0(&init).args(args).exec();
    eprintln!("augur-init: cannot execute {}: {err}", init.display());
    // The kernel's own fallbacks, in its order, before giving up (PID 1 exiting panics the kernel).
    for other in INIT_CANDIDATES.iter().map(Path::new).filter(|p| *p != init) {
        let err = Command::new(other).arg0(other).args(args).exec();
        eprintln!("augur-init: cannot execute {}: {err}", other.display());
    }
    ExitCode::from(NO_INIT)
}

/// `augur-init --early [--before-init INIT]`: records the boot into a tracefs instance of its
/// own, says so (standard output and [`INIT_STARTED_MARKER`]), loads the early load list, then
/// becomes `augur boot`, which takes the recording over. Started by the init above; by hand it
/// does the same (as root) and exits with `augur boot`.
fn early(args: &[OsString]) -> ExitCode {
    let before_init = match args {
        [] => None,
        [flag, init] if flag == "--before-init" => Some(PathBuf::from(init)),
        _ => {
            eprintln!("augur-init: usage: augur-init --early [--before-init INIT]");
            return ExitCode::from(NOT_INIT);
        }
    };
    let trace = match EarlyTrace::start() {
        Ok(t) => Some(t),
        Err(e) => {
            eprintln!("augur-init: not recording before augur boot starts: {e}");
            None
        }
    };
    if before_init.is_some() {
        let mut out = io::stdout();
        let _ = out.write_all(b"r").and_then(|()| out.flush());
        let _ = std::fs::write(INIT_STARTED_MARKER, format!("{}\n", std::process::id()));
    }
    let list_path = early_load::path_beside(Path::new(DEFAULT_STATE_PATH));
    let summary = match read_list(&list_path) {
        Ok(Some(list)) => {
            let loaded = load(&list, Instant::now() + LOAD_BOUND);
            // Said again by augur boot, in the journal: by now systemd may have hung up the console.
            eprintln!(
                "augur-init: loaded {} of the {} pages the last boots used before their target ({} files changed since)",
                loaded.pages,
                list.page_count(),
                loaded.changed_files
            );
            Some(format!("{}/{}/{}", loaded.pages, list.page_count(), loaded.changed_files))
        }
        Ok(None) => None,
        Err(e) => {
            eprintln!("augur-init: not loading early: {e}");
            None
        }
    };
    let mut recorder = Command::new(AUGUR);
    recorder.arg0("augur").arg("boot").env("NO_COLOR", "1").stdout(Stdio::null());
    if let Some(init) = &before_init {
        recorder.arg("--before-init").arg(init);
    }
    if let Some(t) = &trace {
        recorder.arg("--adopt-trace").arg(&t.name).arg("--trace-origin-us").arg(t.started_at_us.to_string());
    }
    if let Some(summary) = summary {
        recorder.arg("--early-loaded").arg(summary);
    }
    let err = recorder.exec();
    eprintln!("augur-init: cannot execute {AUGUR}: {err}");
    if let Some(t) = trace {
        t.remove();
    }
    ExitCode::from(NO_INIT)
}

/// The recording `augur-init --early` sets up: a tracefs instance named as augur's own
/// (`augur-boot-PID`: the pid stays this process's when it becomes `augur boot`), recording every
/// task but this one.
struct EarlyTrace {
    name: String,
    dir: PathBuf,
    /// `CLOCK_MONOTONIC` microseconds when recording started.
    started_at_us: u64,
}

impl EarlyTrace {
    fn start() -> io::Result<EarlyTrace> {
        let root = TRACEFS_ROOTS
            .iter()
            .map(Path::new)
            .find(|r| r.join("instances").is_dir())
            .ok_or_else(|| io::Error::other(format!("tracefs is not mounted at {}", TRACEFS_ROOTS.join(" or "))))?;
        let name = format!("augur-boot-{}", std::process::id());
        let dir = root.join("instances").join(&name);
        std::fs::create_dir(&dir)?;
        let trace = EarlyTrace { name, dir, started_at_us: 0 };
        match trace.configure() {
            Ok(started_at_us) => Ok(EarlyTrace { started_at_us, ..trace }),
            Err(e) => {
                trace.remove();
                Err(e)
            }
        }
    }

    /// Sets the instance up as `augur boot` would its own, then starts it; returns when.
    fn configure(&self) -> io::Result<u64> {
        let write = |file: &str, value: &str| std::fs::write(self.dir.join(file), value);
        write("tracing_on", "0")?;
        write("buffer_size_kb", &TRACE_BUFFER_KB.to_string())?;
        let clocks = std::fs::read_to_string(self.dir.join("trace_clock"))?;
        if !clocks.split_whitespace().any(|c| c.trim_matches(['[', ']']) == "mono") {
            return Err(io::Error::other("no mono trace clock"));
        }
        write("trace_clock", "mono")?;
        // Optional on older kernels, as for augur's own instances.
        let _ = write("options/record-tgid", "1");
        let _ = write("options/overwrite", "0");
        write("set_event_notrace_pid", &std::process::id().to_string())?;
        let mut access = true;
        for event in ACCESS_EVENTS {
            access &= write(&format!("events/{event}/enable"), "1").is_ok();
        }
        write(&format!("events/{INSERTION_EVENT}/enable"), "1")?;
        if !access {
            // Insertions are the trace then; a half-set of access events would say nothing.
            for event in ACCESS_EVENTS {
                let _ = write(&format!("events/{event}/enable"), "0");
            }
        }
        for event in PROCESS_EVENTS.iter().chain([&INODE_LOAD_EVENT]) {
            let _ = write(&format!("events/{event}/enable"), "1");
        }
        let started_at_us = monotonic_us();
        write("tracing_on", "1")?;
        Ok(started_at_us)
    }

    fn remove(&self) {
        let _ = std::fs::write(self.dir.join("tracing_on"), "0");
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// `CLOCK_MONOTONIC` now, in microseconds (the clock of the trace and of systemd's timestamps).
fn monotonic_us() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64).saturating_mul(1_000_000).saturating_add(t.tv_nsec as u64 / 1000)
}

/// The early load list at `path`; `None` when there is none yet (no boot recorded).
fn read_list(path: &Path) -> Result<Option<EarlyLoadList>, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => EarlyLoadList::parse(&text).map(Some).map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// What [`load`] did.
#[derive(Debug, Default, PartialEq, Eq)]
struct Loaded {
    pages: u64,
    changed_files: u64,
}

/// Reads every piece of `list` in order (a file's pieces at most [`MERGE_GAP_PAGES`] apart as one,
/// without read-ahead), in reads of at most [`READ_PIECE`], so that its pages are in the page
/// cache; a file whose size or modification time is not the one recorded is skipped
/// (it changed: the next recording relearns it), as is one that cannot be opened. Stops at
/// `deadline`.
fn load(list: &EarlyLoadList, deadline: Instant) -> Loaded {
    let list = &list.coalesced(MERGE_GAP_PAGES);
    let mut done = Loaded::default();
    let mut buf = vec![0u8; READ_PIECE as usize];
    let mut open: Option<(PathBuf, Option<File>)> = None;
    for piece in &list.pieces {
        if Instant::now() >= deadline {
            break;
        }
        if open.as_ref().is_none_or(|(p, _)| *p != piece.path) {
            let file = File::open(&piece.path).ok().filter(|f| {
                let same = f.metadata().is_ok_and(|m| {
                    m.len() == piece.size
                        && m.mtime().saturating_mul(1_000_000_000).saturating_add(m.mtime_nsec()) == piece.mtime_ns
                });
                if !same {
                    done.changed_files += 1;
                }
                same
            });
            // Exactly the pieces: no read-ahead around them (what lies beyond was not used).
            if let Some(f) = &file {
                let _ = rustix::fs::fadvise(f, 0, None, rustix::fs::Advice::Random);
            }
            open = Some((piece.path.clone(), file));
        }
        let Some((_, Some(file))) = &open else { continue };
        let start = piece.first_page.saturating_mul(list.page_size);
        let end = piece.first_page.saturating_add(piece.pages).saturating_mul(list.page_size).min(piece.size);
        let mut at = start;
        while at < end {
            let want = (end - at).min(READ_PIECE) as usize;
            match file.read_at(&mut buf[..want], at) {
                Ok(0) => break,
                Ok(n) => at += n as u64,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        done.pages += (at.saturating_sub(start)).div_ceil(list.page_size);
    }
    done
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

/// Starts `exe args` and waits at most `wait` for it to write a byte to its standard output (or
/// close it): it is then recording. It gets a process group of its own (not the console's
/// foreground group, which the kernel sends SIGHUP when the init lets go of the console), no
/// colours in its log (`NO_COLOR`: the log goes from the console to the journal), and this
/// process's standard error. It is not waited for: the init this process becomes reaps it.
fn start_recorder(exe: &Path, args: &[&OsStr], wait: Duration) -> io::Result<()> {
    let mut child = Command::new(exe)
        .arg0(exe.file_name().unwrap_or(exe.as_os_str()))
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
    use augur_core::model::early_load::EarlyPiece;

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

    fn piece(path: &Path, first_page: u64, pages: u64) -> EarlyPiece {
        let m = std::fs::metadata(path).unwrap();
        EarlyPiece {
            path: path.to_path_buf(),
            size: m.len(),
            mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
            first_page,
            pages,
        }
    }

    #[test]
    fn the_list_is_loaded_in_order_and_changed_files_are_left_alone() {
        let dir = std::env::temp_dir().join(format!("augur-init-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (big, small, changed) = (dir.join("big"), dir.join("small"), dir.join("changed"));
        std::fs::write(&big, vec![3u8; READ_PIECE as usize * 2 + 4096 * 3]).unwrap();
        std::fs::write(&small, b"five\n").unwrap();
        std::fs::write(&changed, vec![1u8; 8192]).unwrap();
        let mut stale = piece(&changed, 0, 2);
        stale.mtime_ns += 1;
        let pieces = vec![
            piece(&big, 0, 2),
            // More than 2 MiB, to its end: read in pieces of at most READ_PIECE.
            piece(&big, 10, 1100),
            stale,
            // Past the end of the file: only what exists counts.
            piece(&small, 0, 4),
            EarlyPiece { path: dir.join("missing"), ..piece(&small, 0, 1) },
        ];
        let list = EarlyLoadList { page_size: 4096, pieces };
        let loaded = load(&list, Instant::now() + Duration::from_secs(60));
        // The gap of 8 pages between big's two pieces is read with them: all of big, 1,027 pages.
        assert_eq!(loaded, Loaded { pages: 1027 + 1, changed_files: 1 });
        assert_eq!(load(&list, Instant::now()), Loaded::default(), "past its deadline it loads nothing");
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
