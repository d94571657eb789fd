//! Recording a boot: every process's page accesses, system-wide, from the moment `augur boot`
//! starts until it stops the recording, turned into one [`LaunchProfile`] whose first-use times
//! count from the start (the caller splits it into phases: `model::boot`).
//!
//! A tracefs instance of its own with no pid filter (the page access events of every task but
//! augur's own: this process's and a running daemon's, so what augur loads is never mistaken for
//! a use), fanotify
//! opens and the exec events to name inodes, `/proc` and inode handles for what is still unnamed
//! at the end. It decides nothing: when to stop and what the phases are is the caller's.

use std::collections::HashMap;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustix::event::{PollFd, PollFlags, poll};
use rustix::time::Timespec;

use crate::error::{OsError, Result};
use augur_core::model::profile::{InodeKey, LaunchProfile, TraceMode, WorkingSetBuilder};

use super::event::{EventKind, TraceEvent};
use super::fanotify::{OpenScope, OpenWatcher};
use super::inode_name::InodeNamer;
use super::procfs;
use super::resolve::{PathResolver, assemble_files};
use super::trace_session::PROFILE_PAGE_SIZE;
use super::tracefs::InstanceOptions;
use super::watch::{ModeChoice, PageWatch, WatchScope};

/// The running recording of one boot.
pub struct BootRecorder {
    watch: PageWatch,
    opens: OpenWatcher,
    resolver: PathResolver,
    builder: WorkingSetBuilder,
    mode: TraceMode,
    /// `CLOCK_MONOTONIC` at the start, microseconds.
    start_us: u64,
    mono: bool,
    /// Timestamp origin of the events when the trace clock is not monotonic.
    origin_us: Option<u64>,
    page_events: u64,
    /// Whether each process seen runs augur's own executable (its loads are no use).
    augur_processes: HashMap<u32, bool>,
    own_exe: Option<PathBuf>,
}

/// What a finished recording produced.
#[derive(Debug)]
pub struct BootRecording {
    /// Every file's used pages, first-use times from the start of recording.
    pub profile: LaunchProfile,
    /// Page events read.
    pub page_events: u64,
    /// Events the kernel dropped (its buffer overran).
    pub lost_events: u64,
    /// fanotify queue overflows (opens not seen).
    pub open_overflows: u64,
}

impl BootRecorder {
    /// Starts recording every task's page accesses (needs root and tracefs with the filemap
    /// access events; page-cache insertions where those are missing).
    pub fn start() -> Result<Self> {
        let choice = ModeChoice { requested: None, degrade_to_file_only: false };
        // An empty pid filter records every task; this process's own events are dropped on read.
        let watch = PageWatch::open("boot", &WatchScope::Descendants(Vec::new()), choice, &InstanceOptions::default())?;
        let mode = watch.mode();
        let opens = OpenWatcher::new(true, OpenScope::Every)?;
        let mut resolver = PathResolver::new();
        resolver.learn_overlays(&opens);
        watch.start()?;
        let mono = watch.uses_mono_clock();
        Ok(BootRecorder {
            watch,
            opens,
            resolver,
            builder: WorkingSetBuilder::new(),
            mode,
            start_us: super::monotonic_us(),
            mono,
            origin_us: None,
            page_events: 0,
            augur_processes: HashMap::new(),
            own_exe: std::env::current_exe().ok(),
        })
    }

    /// When recording started, in monotonic microseconds (the clock of systemd's timestamps).
    pub fn started_at_us(&self) -> u64 {
        self.start_us
    }

    /// Microseconds since recording started (the clock phase starts are given in).
    pub fn now_us(&self) -> u64 {
        super::monotonic_us().saturating_sub(self.start_us)
    }

    /// Events the trace is made of.
    pub fn mode(&self) -> TraceMode {
        self.mode
    }

    /// Waits up to `timeout` for events and reads what is there.
    pub fn poll(&mut self, timeout: Duration) -> Result<()> {
        let ts = Timespec { tv_sec: timeout.as_secs() as i64, tv_nsec: i64::from(timeout.subsec_nanos()) };
        {
            let trace_fd = self.watch.fd()?;
            let mut fds = vec![PollFd::new(&self.opens, PollFlags::IN)];
            if let Some(fd) = trace_fd.as_ref() {
                fds.push(PollFd::from_borrowed_fd(fd.as_fd(), PollFlags::IN));
            }
            match poll(&mut fds, Some(&ts)) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(OsError::io("polling boot trace events", e.into())),
            }
        }
        self.read_some()
    }

    fn read_some(&mut self) -> Result<()> {
        let resolver = &mut self.resolver;
        self.opens.read_available(|f| resolver.learn_open(&f))?;
        let mut events = Vec::new();
        self.watch.read(50_000, |e| events.push(e))?;
        for e in events {
            self.on_event(e);
        }
        Ok(())
    }

    fn on_event(&mut self, e: TraceEvent) {
        let at = if self.mono {
            e.ts_us.saturating_sub(self.start_us)
        } else {
            let origin = *self.origin_us.get_or_insert(e.ts_us);
            e.ts_us.saturating_sub(origin)
        };
        match e.kind {
            EventKind::Page(_) if self.is_augur(e.tgid.unwrap_or(e.pid)) => {}
            EventKind::Page(p) => {
                self.page_events += 1;
                // With access events, an insertion nobody accessed is the kernel's readahead
                // guessing ahead (or a prefetcher's): not a use.
                if p.kind.is_access() || self.mode != TraceMode::Access {
                    self.builder.touch(p.inode, p.pages, at);
                }
            }
            EventKind::Exec { filename, pid, .. } => {
                // It runs something else now: `augur-init` (PID 1) becomes the init it executes.
                self.augur_processes.remove(&pid);
                if let Some(id) = procfs::identity_of(std::path::Path::new(&filename)) {
                    self.resolver.learn(InodeKey { dev: id.dev, ino: id.ino }, filename);
                }
                self.learn_from_proc(pid);
            }
            _ => {}
        }
    }

    /// True when process `tgid` runs the same executable as this one (an augur daemon loading
    /// pages); asked of `/proc` once per process.
    fn is_augur(&mut self, tgid: u32) -> bool {
        let own = self.own_exe.as_deref();
        *self.augur_processes.entry(tgid).or_insert_with(|| {
            let exe = std::fs::read_link(format!("/proc/{tgid}/exe")).ok();
            own.is_some() && exe.as_deref() == own
        })
    }

    fn learn_from_proc(&mut self, pid: u32) {
        for f in procfs::mapped_files(pid) {
            self.resolver.learn(f.key, f.path);
        }
        for (f, _) in procfs::open_files(pid) {
            self.resolver.learn(f.key, f.path);
        }
    }

    /// Stops recording and builds the profile: inodes no open named are looked up in every
    /// process's maps and descriptors, then by inode handle.
    pub fn finish(mut self) -> Result<BootRecording> {
        self.watch.stop()?;
        self.read_some()?;
        let mut events = Vec::new();
        self.watch.drain(|e| events.push(e))?;
        for e in events {
            self.on_event(e);
        }
        for pid in procfs::all_pids() {
            self.learn_from_proc(pid);
        }
        let working_set = std::mem::take(&mut self.builder).finish();
        let mut namer = InodeNamer::new();
        for (key, _) in &working_set {
            if !self.resolver.knows(*key)
                && let Some(named) = namer.name(*key)
            {
                self.resolver.learn(*key, named.path);
            }
        }
        let stats = self.watch.stats();
        let assembly = assemble_files(working_set, &self.resolver, PROFILE_PAGE_SIZE, procfs::identity_of);
        let open_overflows = self.opens.overflows;
        let window_ms = self.now_us() / 1000;
        let (mode, page_events) = (self.mode, self.page_events);
        self.watch.close()?;
        let profile = LaunchProfile {
            command: vec!["boot".into()],
            recorded_at: SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
            page_size: PROFILE_PAGE_SIZE,
            mode,
            window_ms,
            files: assembly.files,
            unresolved: assembly.unresolved,
            lookups: Vec::new(),
        };
        Ok(BootRecording { profile, page_events, lost_events: stats.lost, open_overflows })
    }
}
