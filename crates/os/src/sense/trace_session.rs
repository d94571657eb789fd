//! One `augur trace` run: set up the page watch and the open watcher, run the command, follow it
//! and its descendants until it exits (or the window closes, or a signal arrives), and build its
//! [`LaunchProfile`].
//!
//! It owns the run's process handling (spawning, signals forwarded, the tracefs instance removed
//! whatever happens) and the wiring of events into `model`'s [`WorkingSetBuilder`]; it does not
//! print or write files (the CLI does).

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustix::event::{PollFd, PollFlags, poll};
use rustix::time::{ClockId, Timespec, clock_gettime};

use crate::error::{OsError, Result};
use augur_core::model::profile::{FileProfile, InodeKey, LaunchProfile, LookupList, TraceMode, UsedRange, WorkingSetBuilder};
use augur_core::model::range::PageRange;

use super::event::{EventKind, TRACE_PAGE_SHIFT, TraceEvent};
use super::fanotify::{OpenWatcher, OpenedFile};
use super::lookups::LookupSource;
use super::procfs;
use super::resolve::{PathResolver, assemble_files, pages_in};
use super::tracefs::InstanceOptions;
use super::watch::{ModeChoice, PageWatch, WatchScope};

/// Page size the profile's indices refer to (the tracepoints' unit).
pub const PROFILE_PAGE_SIZE: u64 = 1 << TRACE_PAGE_SHIFT;

/// The longest trace window, and the default: a launch that takes longer is not a launch.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(60);

/// What to trace.
#[derive(Clone, Debug)]
pub struct TraceRequest {
    /// The command and its arguments.
    pub command: Vec<OsString>,
    /// Stop recording after this long even if the command still runs.
    pub window: Duration,
    /// A mode asked for (can only degrade); `None` takes `AUGUR_FORCE_MODE` or the best.
    pub mode: Option<TraceMode>,
    /// Record the command's path lookups too (under `strace`, when installed).
    pub lookups: bool,
}

/// What a trace produced.
#[derive(Debug)]
pub struct TraceReport {
    /// The profile (not yet saved).
    pub profile: LaunchProfile,
    /// The command's exit status, when it exited within the window.
    pub status: Option<ExitStatus>,
    /// The command, still running when the window closed; the caller waits for it.
    pub still_running: Option<Child>,
    /// The signal that interrupted the trace, if one did.
    pub interrupted_by: Option<i32>,
    /// Events the kernel dropped (ring buffer overruns).
    pub lost_events: u64,
    /// Trace lines that did not parse.
    pub garbage_lines: u64,
    /// fanotify queue overflows (opens not seen).
    pub open_overflows: u64,
    /// Page events recorded.
    pub page_events: u64,
    /// How lookups were recorded (or why not), for the report line.
    pub lookup_note: String,
    /// Lookup calls seen whose path could not be made absolute, or that did not fit the cap.
    pub lookups_skipped: u64,
}

// ---- signals: a self-pipe the poll loop watches ----------------------------------------------

static SIGNAL_PIPE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int) {
    let fd = SIGNAL_PIPE.load(Ordering::Relaxed);
    if fd >= 0 {
        let byte = sig as u8;
        // SAFETY: write(2) is async-signal-safe; the byte lives on this stack frame.
        unsafe {
            libc::write(fd, (&byte as *const u8).cast(), 1);
        }
    }
}

/// Routes SIGINT, SIGTERM and SIGHUP into a pipe while alive; restores the old handlers on drop.
struct SignalPipe {
    read: OwnedFd,
    _write: OwnedFd,
    old: Vec<(libc::c_int, libc::sigaction)>,
}

const HANDLED: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

impl SignalPipe {
    fn install() -> Result<Self> {
        let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC | rustix::pipe::PipeFlags::NONBLOCK)
            .map_err(|e| OsError::io("creating the signal pipe", e.into()))?;
        SIGNAL_PIPE.store(std::os::fd::AsRawFd::as_raw_fd(&write), Ordering::Relaxed);
        let mut old = Vec::new();
        for sig in HANDLED {
            // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value; we set the
            // handler to a function that only calls write(2). No SA_RESTART, so poll returns EINTR.
            unsafe {
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
                libc::sigemptyset(&mut act.sa_mask);
                let mut prev: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &act, &mut prev) == 0 {
                    old.push((sig, prev));
                }
            }
        }
        Ok(SignalPipe { read, _write: write, old })
    }

    /// The signals received since the last call.
    fn take(&self) -> Vec<i32> {
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

impl Drop for SignalPipe {
    fn drop(&mut self) {
        for (sig, prev) in &self.old {
            // SAFETY: restoring the action sigaction gave us earlier.
            unsafe {
                libc::sigaction(*sig, prev, std::ptr::null_mut());
            }
        }
        SIGNAL_PIPE.store(-1, Ordering::Relaxed);
    }
}

fn monotonic_us() -> u64 {
    let t = clock_gettime(ClockId::Monotonic);
    (t.tv_sec as u64).saturating_mul(1_000_000).saturating_add(t.tv_nsec as u64 / 1000)
}

fn command_text(command: &[OsString]) -> Vec<String> {
    command.iter().map(|a| a.to_string_lossy().into_owned()).collect()
}

// ---- the run ---------------------------------------------------------------------------------

/// Everything learnt while the command runs.
struct Collector {
    mode: TraceMode,
    own_pid: u32,
    child_pid: u32,
    /// Timestamp origin in the watch's clock, microseconds.
    origin_us: Option<u64>,
    builder: WorkingSetBuilder,
    resolver: PathResolver,
    traced: HashSet<u32>,
    exited: HashSet<u32>,
    /// File-only mode: files in first-open order with their first-open time.
    opened: Vec<(InodeKey, u64)>,
    ancestry: HashMap<u32, bool>,
    page_events: u64,
    /// The lookup recorder (strace) the command runs under, whose own pages are not the
    /// command's.
    wrapper_pid: Option<u32>,
}

impl Collector {
    fn relative(&mut self, ts_us: u64) -> u64 {
        let origin = *self.origin_us.get_or_insert(ts_us);
        ts_us.saturating_sub(origin)
    }

    fn learn_from_proc(&mut self, pid: u32) {
        for f in procfs::mapped_files(pid) {
            self.resolver.learn(f.key, f.path);
        }
        for (f, _) in procfs::open_files(pid) {
            self.resolver.learn(f.key, f.path);
        }
    }

    fn on_trace_event(&mut self, e: TraceEvent) {
        let at = self.relative(e.ts_us);
        match e.kind {
            EventKind::Page(_) if self.wrapper_pid.is_some_and(|w| e.tgid.unwrap_or(e.pid) == w) => {}
            EventKind::Page(p) => {
                self.page_events += 1;
                // With access events, an insertion the program never accessed is the kernel's
                // readahead guessing ahead: replaying it would only cost I/O and memory.
                // Insertions are the profile only where access events are missing.
                if p.kind.is_access() || self.mode != TraceMode::Access {
                    self.builder.touch(p.inode, p.pages, at);
                }
            }
            EventKind::Exec { filename, pid, .. } => {
                self.traced.insert(pid);
                if let Some(id) = procfs::identity_of(Path::new(&filename)) {
                    self.resolver.learn(InodeKey { dev: id.dev, ino: id.ino }, filename);
                }
                self.learn_from_proc(pid);
            }
            EventKind::Fork { child_pid, .. } => {
                self.traced.insert(child_pid);
            }
            EventKind::Exit { pid, .. } => {
                if procfs::is_alive(pid) {
                    self.learn_from_proc(pid);
                }
                self.exited.insert(pid);
            }
            // A profile file's lookups come from strace, which names them by path.
            EventKind::InodeLoad { .. } => {}
        }
    }

    fn is_ours(&mut self, pid: u32) -> bool {
        if pid == self.own_pid || Some(pid) == self.wrapper_pid {
            return false;
        }
        if self.traced.contains(&pid) {
            return true;
        }
        let child = self.child_pid;
        *self.ancestry.entry(pid).or_insert_with(|| procfs::descends_from(pid, child))
    }

    fn on_open(&mut self, f: OpenedFile, now_us: u64) {
        if self.mode == TraceMode::FileOnly && self.is_ours(f.pid) && !self.opened.iter().any(|(k, _)| *k == f.key) {
            self.opened.push((f.key, now_us));
        }
        self.resolver.learn_open(&f);
    }
}

/// Runs the request's command under the trace and returns its profile.
///
/// The tracefs instance is removed before this returns, whatever happened. A signal (SIGINT,
/// SIGTERM, SIGHUP) is forwarded to the command and ends the trace early; the profile still
/// covers what was seen.
pub fn trace_command(req: &TraceRequest) -> Result<TraceReport> {
    let Some(program) = req.command.first() else {
        return Err(OsError::NoCommand);
    };
    let command_name = program.to_string_lossy().into_owned();
    let own_pid = std::process::id();
    // Handlers first: a Ctrl-C during set-up must still lead to the instance's removal.
    let signals = SignalPipe::install()?;
    let choice = ModeChoice { requested: req.mode, degrade_to_file_only: false };
    // Own pid in the filter with event-fork: the kernel adds the child at fork, before it execs.
    // augur's own events are dropped by PageWatch::read.
    let mut watch = PageWatch::open("trace", &WatchScope::Descendants(vec![own_pid]), choice, &InstanceOptions::default())?;
    let mode = watch.mode();
    let mut opens = OpenWatcher::new(true)?;
    let mut resolver = PathResolver::new();
    resolver.learn_overlays(&opens);
    if let Some(sig) = signals.take().first() {
        return Err(OsError::Command {
            command: command_name,
            detail: format!("not started: interrupted by signal {sig} while setting up"),
        });
    }

    watch.start()?;
    let mono = watch.uses_mono_clock();
    let started = Instant::now();
    let start_us = monotonic_us();
    let lookup_source = LookupSource::choose(req.lookups, program);
    let argv = lookup_source.command_line(&req.command);
    let mut child = Command::new(&argv[0]).args(&argv[1..]).spawn().map_err(|e| OsError::Command {
        command: command_name.clone(),
        detail: if e.kind() == std::io::ErrorKind::NotFound { "command not found".into() } else { format!("cannot start: {e}") },
    })?;
    let child_pid = child.id();
    let pidfd = rustix::process::pidfd_open(rustix::process::Pid::from_child(&child), rustix::process::PidfdFlags::empty())
        .map_err(|e| OsError::io("pidfd_open on the traced command", e.into()))?;

    let mut c = Collector {
        mode,
        own_pid,
        child_pid,
        origin_us: mono.then_some(start_us),
        builder: WorkingSetBuilder::new(),
        resolver,
        traced: HashSet::from([child_pid]),
        exited: HashSet::new(),
        opened: Vec::new(),
        ancestry: HashMap::new(),
        page_events: 0,
        wrapper_pid: lookup_source.wraps().then_some(child_pid),
    };

    let deadline = started + req.window;
    let mut status = None;
    let mut interrupted_by = None;
    loop {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        // Bounded wait even with nothing to do: a cheap guard against a missed wakeup.
        let wait = (deadline - now).min(Duration::from_millis(250));
        let timeout = Timespec { tv_sec: wait.as_secs() as i64, tv_nsec: i64::from(wait.subsec_nanos()) };
        let ready = {
            let trace_fd = watch.fd()?;
            let mut fds = vec![
                PollFd::new(&pidfd, PollFlags::IN),
                PollFd::new(&signals.read, PollFlags::IN),
                PollFd::new(&opens, PollFlags::IN),
            ];
            if let Some(fd) = trace_fd.as_ref() {
                fds.push(PollFd::from_borrowed_fd(fd.as_fd(), PollFlags::IN));
            }
            match poll(&mut fds, Some(&timeout)) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(OsError::io("polling trace events", e.into())),
            }
            fds.iter().map(|f| !f.revents().is_empty()).collect::<Vec<_>>()
        };
        let now_us = monotonic_us().saturating_sub(start_us);
        opens.read_available(|f| c.on_open(f, now_us))?;
        watch.read(20_000, |e| c.on_trace_event(e))?;
        if ready[1] {
            let sigs = signals.take();
            if let Some(&sig) = sigs.first() {
                // The lookup recorder blocks fatal signals while it runs a command: the command
                // (its child) gets the signal directly.
                let mut targets = vec![child_pid];
                if lookup_source.wraps() {
                    targets.extend(procfs::children_of(child_pid));
                }
                for pid in targets {
                    // SAFETY: kill(2) on our own child (or its child) with a valid signal number.
                    unsafe {
                        libc::kill(pid as libc::pid_t, sig);
                    }
                }
                interrupted_by = Some(sig);
                break;
            }
        }
        if ready[0] {
            status = Some(child.wait().map_err(|e| OsError::io("waiting for the traced command", e))?);
            break;
        }
    }
    watch.stop()?;
    let elapsed = started.elapsed();
    opens.read_available(|f| c.on_open(f, elapsed.as_micros() as u64))?;
    watch.drain(|e| c.on_trace_event(e))?;

    if interrupted_by.is_some() && status.is_none() {
        // Give the command a moment to exit on the forwarded signal.
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            if let Ok(Some(s)) = child.try_wait() {
                status = Some(s);
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    // Last chance for inodes no open event named: the maps of traced processes still alive.
    let alive: Vec<u32> = c.traced.iter().copied().filter(|p| procfs::is_alive(*p)).collect();
    for pid in alive {
        c.learn_from_proc(pid);
    }

    let stats = watch.stats();
    watch.close()?;
    drop(signals);

    let window_ms = elapsed.as_millis() as u64;
    let (files, unresolved) = match mode {
        TraceMode::FileOnly => whole_files(&c),
        _ => {
            let working_set = std::mem::take(&mut c.builder).finish();
            let assembly = assemble_files(working_set, &c.resolver, PROFILE_PAGE_SIZE, procfs::identity_of);
            for (key, pages) in &assembly.unresolved_inodes {
                tracing::debug!(
                    "unresolved: dev {}:{} ino {} ({pages} pages)",
                    libc::major(key.dev),
                    libc::minor(key.dev),
                    key.ino
                );
            }
            (assembly.files, assembly.unresolved)
        }
    };
    // The wrapper's forked child runs wrapper code until it execs the command: those pages are
    // the wrapper's, not the command's.
    let mut files = files;
    if let Some(wrapper) = lookup_source.program() {
        let wrapper = std::fs::canonicalize(wrapper).unwrap_or_else(|_| wrapper.to_path_buf());
        files.retain(|f| f.path != wrapper);
    }
    let mut lookups = LookupList::new();
    let log_stats = lookup_source.collect(&mut lookups);
    let lookups_skipped = log_stats.unresolved + lookups.dropped;
    let lookup_note = match &lookup_source {
        LookupSource::Strace { .. } if status.is_none() => {
            format!("{} (the command was still running: lookups so far)", lookup_source.describe())
        }
        _ => lookup_source.describe(),
    };
    let profile = LaunchProfile {
        command: command_text(&req.command),
        recorded_at: SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        page_size: PROFILE_PAGE_SIZE,
        mode,
        window_ms,
        files,
        unresolved,
        lookups: lookups.finish(),
    };
    let still_running = if status.is_none() { Some(child) } else { None };
    Ok(TraceReport {
        profile,
        status,
        still_running,
        interrupted_by,
        lost_events: stats.lost,
        garbage_lines: stats.garbage,
        open_overflows: opens.overflows,
        page_events: c.page_events,
        lookup_note,
        lookups_skipped,
    })
}

/// File-only mode: every regular file the command opened, whole, in first-open order.
fn whole_files(c: &Collector) -> (Vec<FileProfile>, augur_core::model::profile::Unresolved) {
    let mut files = Vec::new();
    let mut unresolved = augur_core::model::profile::Unresolved::default();
    for (key, at) in &c.opened {
        match c.resolver.resolve(*key, procfs::identity_of) {
            super::resolve::Resolution::Resolved { path, identity } => {
                let pages = pages_in(identity.size, PROFILE_PAGE_SIZE);
                if pages > 0 {
                    files.push(FileProfile {
                        path,
                        identity,
                        ranges: vec![UsedRange { range: PageRange::new(0, pages), first_use_us: *at }],
                    });
                }
            }
            _ => unresolved.inodes += 1,
        }
    }
    (files, unresolved)
}

/// A description of how the command ended, for the summary.
pub fn describe_status(status: &ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(0), _) => "exited successfully".into(),
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(sig)) => format!("was killed by signal {sig}"),
        (None, None) => "ended".into(),
    }
}
