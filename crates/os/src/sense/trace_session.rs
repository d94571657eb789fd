//! One `augur trace` run: choose the observation mode (the eBPF observer first, then a tracefs
//! page watch, then file-only), set up the open watcher, run the command, follow it and its
//! descendants until it exits (or the window closes, or a signal arrives), and build its
//! [`LaunchProfile`].
//!
//! It owns the run's process handling (spawning, signals forwarded, the tracefs instance removed
//! whatever happens) and the wiring of events into `model`'s [`WorkingSetBuilder`]; it does not
//! print or write files (the CLI does).

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::os::fd::AsFd;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustix::event::{PollFd, PollFlags, poll};
use rustix::time::Timespec;

use crate::error::{OsError, Result};
use augur_core::model::profile::{FileProfile, InodeKey, LaunchProfile, LookupList, TraceMode, UsedRange, WorkingSetBuilder};
use augur_core::model::range::PageRange;

use super::bpf::record::chunk_ranges;
use super::bpf::{BpfObserver, FollowPolicy, LookupPaths, ObservedEvent, ObserverOptions, PendingLaunches};
use super::event::{EventKind, TRACE_PAGE_SHIFT, TraceEvent};
use super::fanotify::{OpenScope, OpenWatcher, OpenedFile};
use super::lookups::LookupSource;
use super::mode::{ObservationMode, PassedOver, forced_observation_mode_from_env, open_bpf_unless_degraded};
use super::procfs;
use super::resolve::{PathResolver, assemble_files};
use super::tracefs::InstanceOptions;
use super::watch::{ModeChoice, PageWatch, WatchScope};
use crate::fetch::residency::pages_in;

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
    /// A mode asked for (then required; lesser ones degrade); `None` takes `AUGUR_FORCE_MODE` or
    /// the best.
    pub mode: Option<ObservationMode>,
    /// Record the command's path lookups too (by the eBPF observer, else under `strace` when
    /// installed).
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
    /// How the command was observed (the profile's `mode` says what its pages mean).
    pub mode: ObservationMode,
    /// The better modes not used, and why.
    pub passed_over: PassedOver,
    /// Events the kernel dropped (ring buffer overruns; in bpf mode every record lost).
    pub lost_events: u64,
    /// In bpf mode, the lost records by cause (only causes that lost any).
    pub lost_by_cause: Vec<(&'static str, u64)>,
    /// Trace lines that did not parse.
    pub garbage_lines: u64,
    /// fanotify queue overflows (opens not seen).
    pub open_overflows: u64,
    /// Page events recorded (bpf mode: page records, each a 64-page chunk's pages new to the
    /// launch).
    pub page_events: u64,
    /// How lookups were recorded (or why not), for the report line.
    pub lookup_note: String,
    /// Lookup calls seen whose path could not be made absolute, or that did not fit the cap.
    pub lookups_skipped: u64,
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
    /// Files the command emptied or created for writing ([`ObservedEvent::output_opened`]):
    /// what it uses of them from then on is its own output, left out of the profile.
    outputs: HashSet<InodeKey>,
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

    /// One record of the command's launch (confirmed by [`PendingLaunches`]).
    fn on_bpf_event(&mut self, e: &ObservedEvent) {
        match e {
            ObservedEvent::Pages { inode, .. } if self.outputs.contains(inode) => self.page_events += 1,
            ObservedEvent::Pages { task, inode, source, chunk, bits } => {
                let at = self.relative(task.ts_ns / 1000);
                self.page_events += 1;
                // As with tracefs: insertions count only where the access events are missing.
                if source.is_access() || self.mode != TraceMode::Access {
                    for range in chunk_ranges(*chunk, *bits) {
                        self.builder.touch(*inode, range, at);
                    }
                }
            }
            ObservedEvent::Exec { task, exe, filename, .. } => {
                self.traced.insert(task.tgid);
                self.resolver.learn(*exe, filename.clone());
                self.learn_from_proc(task.tgid);
            }
            ObservedEvent::Fork { child_tgid, .. } => {
                self.traced.insert(*child_tgid);
            }
            ObservedEvent::Exit { task, .. } => {
                if procfs::is_alive(task.tgid) {
                    self.learn_from_proc(task.tgid);
                }
                self.exited.insert(task.tgid);
            }
            ObservedEvent::Lookup { .. } => {
                if let Some(inode) = e.output_opened() {
                    self.outputs.insert(inode);
                }
            }
            ObservedEvent::LaunchEnd { .. } | ObservedEvent::InodeLoad { .. } => {}
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

/// The eBPF observer of one trace with what reading it needs.
struct BpfTrace {
    observer: BpfObserver,
    launches: PendingLaunches,
    /// `None` when lookups are not recorded.
    lookup_paths: Option<LookupPaths>,
    lookups: LookupList,
}

impl BpfTrace {
    /// Loads the observer for the children of this process (the command, whose exec starts its
    /// launch, and everything it forks).
    fn open(lookups: bool) -> std::result::Result<Self, super::bpf::BpfError> {
        let options = ObserverOptions { follow: FollowPolicy::ChildrenOf(std::process::id()), lookups, ..Default::default() };
        let observer = BpfObserver::open(options)?;
        let cwd = std::env::current_dir().ok();
        Ok(BpfTrace {
            observer,
            launches: PendingLaunches::new(),
            lookup_paths: lookups.then(|| LookupPaths::new(cwd)),
            lookups: LookupList::new(),
        })
    }

    /// The mode the profile records: access events where the kernel has them.
    fn profile_mode(&self) -> TraceMode {
        if self.observer.attached().access { TraceMode::Access } else { TraceMode::Insertion }
    }

    /// Hands every waiting record of a confirmed launch to `c` (bounded work per call: `poll`
    /// returns at most its maximum, and the loop stops when less came).
    fn read(&mut self, c: &mut Collector, max_rounds: usize) -> Result<()> {
        for _ in 0..max_rounds {
            let mut events = Vec::new();
            let n = self.observer.poll(|e| events.push(e))?;
            for e in events {
                let (paths, list) = (&mut self.lookup_paths, &mut self.lookups);
                self.launches.push(e, |e| {
                    if let Some(paths) = paths.as_mut() {
                        paths.on_event(&e, list);
                    }
                    c.on_bpf_event(&e);
                });
            }
            if n < ObserverOptions::default().max_records_per_poll {
                break;
            }
        }
        Ok(())
    }
}

/// Where a trace's pages come from.
enum PageSourceOfTrace {
    Bpf(Box<BpfTrace>),
    Tracefs(PageWatch),
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
    let signals = crate::signals::SignalPipe::install(crate::signals::SecondSignal::Deliver)?;
    let requested = match req.mode {
        Some(m) => Some(m),
        None => forced_observation_mode_from_env()?,
    };
    let mut passed_over = PassedOver::default();
    let bpf = open_bpf_unless_degraded(requested, &mut passed_over, || BpfTrace::open(req.lookups))?;
    let mut source = match bpf {
        Some(b) => PageSourceOfTrace::Bpf(Box::new(b)),
        None => {
            let choice = ModeChoice { requested: requested.and_then(ObservationMode::tracefs), degrade_to_file_only: false };
            // Own pid in the filter with event-fork: the kernel adds the child at fork, before it
            // execs. augur's own events are dropped by PageWatch::read.
            let watch = PageWatch::open("trace", &WatchScope::Descendants(vec![own_pid]), choice, &InstanceOptions::default())?;
            passed_over.0.extend(watch.passed_over().0.iter().cloned());
            PageSourceOfTrace::Tracefs(watch)
        }
    };
    let (observation, mode) = match &source {
        PageSourceOfTrace::Bpf(b) => (ObservationMode::Bpf, b.profile_mode()),
        PageSourceOfTrace::Tracefs(w) => (ObservationMode::Tracefs(w.mode()), w.mode()),
    };
    let passed_over = passed_over.better_than(observation);
    let mut opens = OpenWatcher::new(true, OpenScope::Every)?;
    let mut resolver = PathResolver::new();
    resolver.learn_overlays(&opens);
    if let Some(sig) = signals.take().first() {
        return Err(OsError::Command {
            command: command_name,
            detail: format!("not started: interrupted by signal {sig} while setting up"),
        });
    }

    let mono = match &source {
        PageSourceOfTrace::Tracefs(watch) => {
            watch.start()?;
            watch.uses_mono_clock()
        }
        // bpf_ktime_get_ns is CLOCK_MONOTONIC.
        PageSourceOfTrace::Bpf(_) => true,
    };
    let started = Instant::now();
    let start_us = super::monotonic_us();
    let lookup_source = match &source {
        // The observer records the lookups: the command runs as it is.
        PageSourceOfTrace::Bpf(_) => LookupSource::Off("recorded by bpf".into()),
        PageSourceOfTrace::Tracefs(_) => LookupSource::choose(req.lookups, program),
    };
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
        outputs: HashSet::new(),
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
            let trace_fd = match &mut source {
                PageSourceOfTrace::Tracefs(watch) => watch.fd()?,
                PageSourceOfTrace::Bpf(b) => Some(b.observer.fd()),
            };
            let mut fds = vec![
                PollFd::new(&pidfd, PollFlags::IN),
                PollFd::new(&signals, PollFlags::IN),
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
        let now_us = super::monotonic_us().saturating_sub(start_us);
        opens.read_available(|f| c.on_open(f, now_us))?;
        match &mut source {
            PageSourceOfTrace::Tracefs(watch) => {
                watch.read(20_000, |e| c.on_trace_event(e))?;
            }
            PageSourceOfTrace::Bpf(b) => b.read(&mut c, 5)?,
        }
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
    if let PageSourceOfTrace::Tracefs(watch) = &source {
        watch.stop()?;
    }
    let elapsed = started.elapsed();
    opens.read_available(|f| c.on_open(f, elapsed.as_micros() as u64))?;
    match &mut source {
        PageSourceOfTrace::Tracefs(watch) => watch.drain(|e| c.on_trace_event(e))?,
        PageSourceOfTrace::Bpf(b) => b.read(&mut c, usize::MAX)?,
    }

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

    let mut lookups = LookupList::new();
    let (lost_events, lost_by_cause, garbage_lines, bpf_lookups_skipped) = match source {
        PageSourceOfTrace::Tracefs(watch) => {
            let stats = watch.stats();
            watch.close()?;
            (stats.lost, Vec::new(), stats.garbage, 0)
        }
        PageSourceOfTrace::Bpf(b) => {
            let BpfTrace { observer, launches, lookup_paths, lookups: recorded } = *b;
            let mut causes = observer.stats()?.by_cause();
            // Records held for a launch past the bound are lost as surely as the kernel's.
            if launches.overflowed_records > 0 {
                causes.push(("held past the launch's exec bound", launches.overflowed_records));
            }
            observer.close();
            lookups = recorded;
            let total = causes.iter().map(|(_, n)| n).sum();
            (total, causes, 0, lookup_paths.map_or(0, |p| p.skipped))
        }
    };
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
    let log_stats = lookup_source.collect(&mut lookups);
    let lookups_skipped = log_stats.unresolved + bpf_lookups_skipped + lookups.dropped;
    let lookup_note = match &lookup_source {
        LookupSource::Strace { .. } if status.is_none() => {
            format!("{} (the command was still running: lookups so far)", lookup_source.describe())
        }
        _ if observation == ObservationMode::Bpf && req.lookups => "path lookups recorded with bpf".into(),
        _ if observation == ObservationMode::Bpf => LookupSource::Off("not asked for".into()).describe(),
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
        mode: observation,
        passed_over,
        lost_events,
        lost_by_cause,
        garbage_lines,
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
