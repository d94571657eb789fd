//! A page-event watch: augur's tracefs instance set up for a mode and a scope (every process, or
//! some processes and their descendants), read as typed events with augur's own activity left
//! out. This is the API `augur trace` and the daemon share.
//!
//! It chooses the mode ([`super::mode`]), creates and removes the instance
//! ([`super::tracefs`]) and parses lines ([`super::event`]); it does not interpret the events.

use std::os::fd::{AsFd, BorrowedFd};

use crate::error::{OsError, Result};
use augur_core::model::profile::TraceMode;

use super::event::{LineStats, TraceEvent, TraceLine};
use super::mode::{KernelEvents, ObservationMode, PassedOver, mode_name, select_mode};
use super::pid_filter::{FilterFiles, PidFilterWriter};
use super::tracefs::{InstanceOptions, PipeState, TraceInstance, Tracefs};

/// Which tasks a watch records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchScope {
    /// These pids and every task they fork from now on (the kernel's `event-fork`).
    Descendants(Vec<u32>),
    /// Only the tasks handed to [`PageWatch::follow`] and their descendants; none at first.
    /// Everyone else's page events are dropped by the kernel before they are recorded, so they
    /// cost next to nothing (the daemon: only launches being learned are traced).
    Followed,
}

/// A pid no task has (the idle task's): a filter holding only it records nothing, where an empty
/// filter would record everything.
const NOBODY: u32 = 0;

/// How the mode is chosen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModeChoice {
    /// A mode asked for explicitly (it can only degrade); `None` takes the best the kernel
    /// offers. Callers resolve `--mode` and `AUGUR_FORCE_MODE` first
    /// ([`super::mode::forced_observation_mode_from_env`]).
    pub requested: Option<TraceMode>,
    /// Without tracefs or filemap tracepoints, fall back to [`TraceMode::FileOnly`] instead of
    /// failing with [`OsError::KernelFeature`] (the daemon degrades; `augur trace` fails unless
    /// file-only was asked for).
    pub degrade_to_file_only: bool,
}

/// A running watch. Dropping it removes the tracefs instance.
#[derive(Debug)]
pub struct PageWatch {
    /// Writes the pid filters of a [`WatchScope::Followed`] watch (declared first: it must stop
    /// before the instance is removed).
    filter: Option<PidFilterWriter>,
    instance: Option<TraceInstance>,
    mode: TraceMode,
    events: Vec<&'static str>,
    own_pid: u32,
    /// The better tracefs modes not used, and why.
    passed_over: PassedOver,
}

/// Notes why the tracefs modes better than `used` were not used: asked for `used` explicitly, or
/// the kernel lacks their events (`kernel` is `None` without tracefs).
fn passed_over(used: TraceMode, requested: Option<TraceMode>, kernel: Option<&KernelEvents>) -> PassedOver {
    let mut out = PassedOver::default();
    for better in [TraceMode::Access, TraceMode::Insertion] {
        let why = match kernel {
            None => Some("no tracefs".to_string()),
            Some(k) => k.missing_for(better),
        };
        let why = why.or_else(|| requested.map(|r| format!("--mode/{} asked for {}", super::mode::FORCE_MODE_ENV, mode_name(r))));
        if let Some(why) = why {
            out.add(ObservationMode::Tracefs(better), why);
        }
    }
    out.better_than(ObservationMode::Tracefs(used))
}

impl PageWatch {
    /// Chooses the mode, removes stale augur instances, creates `augur-<purpose>-<pid>`, enables
    /// the mode's events for `scope`. Recording starts with [`PageWatch::start`].
    pub fn open(purpose: &str, scope: &WatchScope, choice: ModeChoice, options: &InstanceOptions) -> Result<Self> {
        let requested = choice.requested;
        let own_pid = std::process::id();
        let file_only = |own_pid, passed_over| PageWatch {
            filter: None,
            instance: None,
            mode: TraceMode::FileOnly,
            events: Vec::new(),
            own_pid,
            passed_over,
        };
        if requested == Some(TraceMode::FileOnly) {
            // Not even tracefs is looked for (nor mounted).
            let mut asked = PassedOver::default();
            for better in [TraceMode::Access, TraceMode::Insertion] {
                asked
                    .add(ObservationMode::Tracefs(better), format!("--mode/{} asked for file-only", super::mode::FORCE_MODE_ENV));
            }
            return Ok(file_only(own_pid, asked));
        }
        let tracefs = match Tracefs::locate() {
            Ok(t) => t,
            Err(_) if choice.degrade_to_file_only => return Ok(file_only(own_pid, passed_over(TraceMode::FileOnly, None, None))),
            Err(e) => return Err(e),
        };
        let kernel = KernelEvents::probe(Some(&tracefs.events_dir()));
        let available = kernel.best_mode();
        if available == TraceMode::FileOnly {
            if choice.degrade_to_file_only {
                return Ok(file_only(own_pid, passed_over(TraceMode::FileOnly, None, Some(&kernel))));
            }
            return Err(OsError::KernelFeature {
                feature: "the filemap tracepoints".into(),
                detail: format!("{} has no filemap/mm_filemap_add_to_page_cache", tracefs.events_dir().display()),
            });
        }
        let mode = select_mode(available, requested)?;
        tracefs.remove_stale_instances();
        let instance = TraceInstance::create(&tracefs, purpose, options)?;
        let events = kernel.events_for(mode);
        for e in &events {
            instance.enable_event(e)?;
        }
        // The first list is written here: with no list to replace, the write does not wait.
        let filter = match scope {
            WatchScope::Descendants(pids) => {
                instance.set_pid_filter(pids, true)?;
                None
            }
            WatchScope::Followed => {
                instance.set_pid_filter(&[NOBODY], true)?;
                let files = FilterFiles { follow: instance.pid_filter_path(), notrace: instance.notrace_filter_path() };
                Some(PidFilterWriter::start(files)?)
            }
        };
        tracing::debug!("tracefs instance {} in {} mode: {}", instance.name(), mode_name(mode), events.join(", "));
        let passed_over = passed_over(mode, requested, Some(&kernel));
        Ok(PageWatch { filter, instance: Some(instance), mode, events, own_pid, passed_over })
    }

    /// The better tracefs modes not used, and why (empty when this is the best).
    pub fn passed_over(&self) -> &PassedOver {
        &self.passed_over
    }

    /// The mode in use.
    pub fn mode(&self) -> TraceMode {
        self.mode
    }

    /// The tracepoints enabled.
    pub fn events(&self) -> &[&'static str] {
        &self.events
    }

    /// The tracefs instance, when the mode traces at all.
    pub fn instance(&self) -> Option<&TraceInstance> {
        self.instance.as_ref()
    }

    /// True when event timestamps are `CLOCK_MONOTONIC` microseconds.
    pub fn uses_mono_clock(&self) -> bool {
        self.instance.as_ref().is_some_and(TraceInstance::uses_mono_clock)
    }

    /// Records `pids` and the tasks they fork from now on ([`WatchScope::Followed`]). Returns at
    /// once; see [`super::pid_filter`] for when the kernel applies it.
    pub fn follow(&self, pids: &[u32]) {
        if let Some(f) = &self.filter {
            f.request(pids, true);
        }
    }

    /// Stops recording `pids` and what they fork from now on.
    pub fn unfollow(&self, pids: &[u32]) {
        if let Some(f) = &self.filter {
            f.request(pids, false);
        }
    }

    /// Since when (monotonic ns) `pid`, asked to be followed, has been in the kernel's pid filter;
    /// forgets it. `None` when it was not written or there is no filter.
    pub fn take_in_force_since(&self, pid: u32) -> Option<u64> {
        self.filter.as_ref().and_then(|f| f.take_in_force_since(pid))
    }

    /// True while the pid filter is being written: a pid followed now would be in force only
    /// after the write in progress (see [`super::pid_filter`]).
    pub fn filter_busy(&self) -> bool {
        self.filter.as_ref().is_some_and(PidFilterWriter::is_busy)
    }

    /// Waits until the pids asked for are the kernel's filter; false on timeout.
    pub fn settle(&self, timeout: std::time::Duration) -> bool {
        self.filter.as_ref().is_none_or(|f| f.settle(timeout))
    }

    /// Starts recording.
    pub fn start(&self) -> Result<()> {
        match &self.instance {
            Some(i) => i.start(),
            None => Ok(()),
        }
    }

    /// Stops recording; what was recorded can still be read.
    pub fn stop(&self) -> Result<()> {
        match &self.instance {
            Some(i) => i.stop(),
            None => Ok(()),
        }
    }

    /// The fd to poll for readability (`None` in file-only mode). Opens the pipe on first use.
    pub fn fd(&mut self) -> Result<Option<BorrowedFd<'_>>> {
        match &mut self.instance {
            Some(i) => {
                let pipe: &super::tracefs::TracePipe = i.pipe()?;
                Ok(Some(pipe.as_fd()))
            }
            None => Ok(None),
        }
    }

    /// Reads up to about `max_lines` lines without blocking and hands each event of another
    /// process than augur itself to `sink`. Lost-event notices are counted in [`Self::stats`].
    pub fn read(&mut self, max_lines: usize, mut sink: impl FnMut(TraceEvent)) -> Result<PipeState> {
        let own = self.own_pid;
        let Some(instance) = &mut self.instance else { return Ok(PipeState::Drained) };
        instance.pipe()?.read_available(max_lines, |line| {
            if let TraceLine::Event(e) = line
                && e.pid != own
                && e.tgid != Some(own)
            {
                sink(e);
            }
        })
    }

    /// Reads everything still buffered (after [`Self::stop`]).
    pub fn drain(&mut self, mut sink: impl FnMut(TraceEvent)) -> Result<()> {
        while self.read(usize::MAX, &mut sink)? == PipeState::More {}
        Ok(())
    }

    /// Counts of events, lost events and garbage lines so far.
    pub fn stats(&self) -> LineStats {
        self.instance.as_ref().and_then(TraceInstance::pipe_stats).unwrap_or_default()
    }

    /// Removes the instance now (also done on drop).
    pub fn close(mut self) -> Result<()> {
        self.filter.take();
        match &mut self.instance {
            Some(i) => i.remove(),
            None => Ok(()),
        }
    }
}
