//! The daemon's reading of the eBPF observer: [`LaunchFeed`] follows every exec in the kernel
//! ([`FollowPolicy::AllExecs`], augur's own executable excepted), holds each launch's records
//! until its exec confirms it ([`PendingLaunches`]), turns lookup records into absolute paths per
//! launch ([`LookupPaths`], each launch's first process starting in the working directory
//! `/proc` gives), and stops observing the processes the daemon does not follow.
//!
//! It reports what the kernel said, record by record, with the lookup each stands for; it must
//! not decide which launch is followed or learned (the daemon's engine does, by process id).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use augur_core::model::profile::{Lookup, TraceMode};

use super::error::BpfError;
use super::launches::PendingLaunches;
use super::lookup_paths::LookupPaths;
use super::observer::{BpfObserver, FollowPolicy, LostCounts, ObserverOptions};
use super::record::{LaunchId, ObservedEvent};

/// Records of a launch stopped this long ago are no longer expected: the ones the kernel had
/// written before the stop were read by then.
const STOPPED_MEMORY: Duration = Duration::from_secs(10);

/// How often launches stopped longer than [`STOPPED_MEMORY`] ago are forgotten.
const STOPPED_PRUNE_EVERY: Duration = Duration::from_secs(1);

/// Watched launches kept at most (each holds an entry of the kernel's launch map until read):
/// beyond that the oldest is forgotten unread.
const MAX_WATCHED: usize = 256;

/// Processes whose launch the last exec record told, kept at most (then all are forgotten:
/// the kernel's map answers for them).
const MAX_EXEC_LAUNCHES: usize = 4096;

/// One confirmed record, with the path lookup it stands for (a lookup record made absolute, the
/// file name of an exec); `None` when it stands for none or the path could not be made absolute.
#[derive(Debug)]
pub struct FedRecord {
    /// The kernel's record.
    pub event: ObservedEvent,
    /// Its lookup.
    pub lookup: Option<Lookup>,
}

/// The observer of every exec and what reading its records needs.
pub struct LaunchFeed {
    observer: BpfObserver,
    launches: PendingLaunches,
    /// The working directories and descriptors of each confirmed launch's processes.
    paths: HashMap<LaunchId, LookupPaths>,
    /// Launches stopped, and when: their records still in the ring buffer are dropped.
    stopped: HashMap<LaunchId, Instant>,
    /// When `stopped` was last pruned (once a second: a program run in a loop stops a launch
    /// at every run, and pruning at every read walked them all).
    stopped_pruned: Instant,
    /// Lookups whose path could not be made absolute.
    pub lookups_skipped: u64,
    /// Launches stopped because the daemon does not follow their processes.
    pub launches_stopped: u64,
    /// Launches watched (their disk reads counted by the kernel), by the process they were
    /// watched for, oldest first.
    watched: Vec<(u32, LaunchId)>,
    /// Watched launches forgotten unread because more were watched.
    pub watched_dropped: u64,
    /// Launches observed for the first read of each file only ([`LaunchFeed::first_reads_only`]).
    pub launches_first_reads: u64,
    /// The launch of each process as its last exec record told it: the daemon stops or watches
    /// a launch in answer to its exec, and asking the kernel's task map (a system call, the
    /// value copied in and out) for each was a twentieth of its CPU in a loop of short programs.
    /// The children a launch's processes fork are entered too (their pids may be ended ones').
    exec_launches: HashMap<u32, LaunchId>,
    /// The launches in `exec_launches` whose end record was read: a short program (`as`) often
    /// ends before the daemon answers its exec, and the kernel then knows it no more, which the
    /// task map and `/proc/PID/task` took two failed lookups to say.
    ended_launches: HashSet<LaunchId>,
}

impl std::fmt::Debug for LaunchFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaunchFeed").field("observer", &self.observer).field("launches", &self.paths.len()).finish()
    }
}

impl LaunchFeed {
    /// Loads the observer for every exec; augur's own executable (`/proc/self/exe`) starts no
    /// launch. Fails like [`BpfObserver::open`].
    pub fn open() -> Result<LaunchFeed, BpfError> {
        let observer = BpfObserver::open(ObserverOptions { follow: FollowPolicy::AllExecs, ..Default::default() })?;
        if let Some(own) = crate::sense::procfs::identity_of(std::path::Path::new("/proc/self/exe")) {
            observer.set_not_followed(own.dev, own.ino, true)?;
        }
        Ok(LaunchFeed {
            observer,
            launches: PendingLaunches::new(),
            paths: HashMap::new(),
            stopped: HashMap::new(),
            stopped_pruned: Instant::now(),
            lookups_skipped: 0,
            launches_stopped: 0,
            watched: Vec::new(),
            watched_dropped: 0,
            launches_first_reads: 0,
            exec_launches: HashMap::new(),
            ended_launches: HashSet::new(),
        })
    }

    /// What the pages of the records mean: accesses where the kernel has the access tracepoints
    /// (6.11+), else insertions.
    pub fn profile_mode(&self) -> TraceMode {
        if self.observer.attached().access { TraceMode::Access } else { TraceMode::Insertion }
    }

    /// The tracepoints the programs are attached to, for a status report.
    pub fn tracepoints(&self) -> Vec<String> {
        use crate::sense::mode::{ACCESS_EVENTS, INODE_LOAD_EVENT, INSERTION_EVENT, PROCESS_EVENTS};
        let attached = self.observer.attached();
        let mut out: Vec<String> = PROCESS_EVENTS.iter().map(|e| e.to_string()).collect();
        out.push(if attached.insertion_btf { format!("{INSERTION_EVENT} (BTF-typed)") } else { INSERTION_EVENT.to_string() });
        if attached.access {
            out.extend(ACCESS_EVENTS.iter().map(|e| e.to_string()));
        }
        if attached.inode_load {
            out.push(INODE_LOAD_EVENT.to_string());
        }
        out.push("syscalls (path lookups)".to_string());
        out
    }

    /// The descriptor to poll (see [`BpfObserver::fd`]: poll on a timer too).
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.observer.fd()
    }

    /// Hands every waiting record of a confirmed launch to `sink`, at most `max_rounds` polls of
    /// the observer's maximum each; true when records may still wait.
    pub fn read(&mut self, max_rounds: usize, mut sink: impl FnMut(FedRecord)) -> Result<bool, BpfError> {
        let full = ObserverOptions::default().max_records_per_poll;
        let now = Instant::now();
        if now.duration_since(self.stopped_pruned) >= STOPPED_PRUNE_EVERY {
            self.stopped.retain(|_, at| now.duration_since(*at) < STOPPED_MEMORY);
            self.stopped_pruned = now;
        }
        for _ in 0..max_rounds {
            let mut events = Vec::new();
            let n = self.observer.poll(|e| events.push(e))?;
            for e in events {
                if self.stopped.contains_key(&e.launch()) {
                    continue;
                }
                let (paths, skipped) = (&mut self.paths, &mut self.lookups_skipped);
                let (exec_launches, ended_launches) = (&mut self.exec_launches, &mut self.ended_launches);
                self.launches.push(e, |event| {
                    let launch = event.launch();
                    let ended = matches!(event, ObservedEvent::LaunchEnd { .. });
                    let new_process = match &event {
                        ObservedEvent::Exec { task, .. } => Some(task.tgid),
                        ObservedEvent::Fork { child_tid, child_tgid, .. } if child_tid == child_tgid => Some(*child_tgid),
                        _ => None,
                    };
                    if exec_launches.len() >= MAX_EXEC_LAUNCHES || ended_launches.len() >= MAX_EXEC_LAUNCHES {
                        exec_launches.clear();
                        ended_launches.clear();
                    }
                    if let Some(pid) = new_process {
                        exec_launches.insert(pid, launch);
                    } else if ended {
                        ended_launches.insert(launch);
                    }
                    let mut lookup = None;
                    if !ended {
                        let p = paths.entry(launch).or_insert_with(|| match event.task() {
                            Some(task) => LookupPaths::deferred(task.tgid, crate::sense::procfs::cwd_of),
                            None => LookupPaths::new(None),
                        });
                        let before = p.skipped;
                        p.on_event_each(&event, |path, kind| lookup = Some(Lookup { path, kind }));
                        *skipped += p.skipped - before;
                    } else {
                        paths.remove(&launch);
                    }
                    sink(FedRecord { event, lookup });
                });
            }
            if n < full {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Stops observing the launches of processes `pids` (the daemon does not follow them): the
    /// kernel forgets the launches, so a later exec by one of their processes starts a new one.
    pub fn stop_following(&mut self, pids: &[u32]) {
        for (_, launch) in self.launches_of(pids) {
            match self.observer.stop_following(launch) {
                Ok(true) => self.launches_stopped += 1,
                Ok(false) => {}
                Err(e) => tracing::debug!("stopping launch {launch}: {e}"),
            }
            self.forget(launch);
        }
    }

    /// Stops observing the launches of processes `pids` like [`stop_following`](Self::stop_following),
    /// but has the kernel count the pages they read from disk for `window` from now, or until
    /// the count reaches `count_limit` (0: no limit): read (once) by
    /// [`take_disk_reads`](Self::take_disk_reads).
    pub fn watch(&mut self, pids: &[u32], window: Duration, count_limit: u64) {
        let until_ns = crate::sense::monotonic_ns().saturating_add(window.as_nanos().min(u128::from(u64::MAX)) as u64);
        for (pid, launch) in self.launches_of(pids) {
            match self.observer.watch(launch, until_ns, count_limit) {
                Ok(true) => {
                    self.launches_stopped += 1;
                    if self.watched.len() >= MAX_WATCHED {
                        let (_, oldest) = self.watched.remove(0);
                        if let Err(e) = self.observer.take_watched(oldest) {
                            tracing::debug!("forgetting watched launch {oldest}: {e}");
                        }
                        self.watched_dropped += 1;
                    }
                    self.watched.push((pid, launch));
                }
                Ok(false) => {}
                Err(e) => tracing::debug!("watching launch {launch}: {e}"),
            }
            self.forget(launch);
        }
    }

    /// Keeps observing the launches of tasks `pids` (a workload run's) for the first page access
    /// of each file they read and their lookups, forks, execs and exits only (`on`), their
    /// page-cache insertions (reads from disk) still recorded for `disk_reads` from now
    /// ([`BpfObserver::first_reads_only`]); or (`!on`) for every page again.
    pub fn first_reads_only(&mut self, pids: &[u32], on: bool, disk_reads: Duration) {
        let until_ns = crate::sense::monotonic_ns().saturating_add(disk_reads.as_nanos().min(u128::from(u64::MAX)) as u64);
        let mut done: Vec<LaunchId> = Vec::new();
        for (_, launch) in self.launches_of(pids) {
            if done.contains(&launch) {
                continue;
            }
            done.push(launch);
            match self.observer.first_reads_only(launch, on, until_ns) {
                Ok(true) if on => self.launches_first_reads += 1,
                Ok(_) => {}
                Err(e) => tracing::debug!("launch {launch} to first reads ({on}): {e}"),
            }
        }
    }

    /// The launches the processes `pids` follow, each with its process (those the kernel does
    /// not follow are left out).
    fn launches_of(&self, pids: &[u32]) -> Vec<(u32, LaunchId)> {
        pids.iter()
            .filter_map(|&pid| match self.launch_of_process(pid) {
                Ok(l) => l.map(|l| (pid, l)),
                Err(e) => {
                    tracing::debug!("the launch of pid {pid}: {e}");
                    None
                }
            })
            .collect()
    }

    /// Forgets what is held for `launch`, no longer observed: its records still in the ring
    /// buffer are dropped.
    fn forget(&mut self, launch: LaunchId) {
        self.launches.forget(launch);
        self.paths.remove(&launch);
        self.stopped.insert(launch, Instant::now());
    }

    /// The pages the launches watched for `pids` read from disk, summed, and forgets them;
    /// `None` when none of them was watched (or the kernel forgot them).
    pub fn take_disk_reads(&mut self, pids: &[u32]) -> Option<u64> {
        let mut total = None;
        let mut taken = Vec::new();
        self.watched.retain(|&(pid, launch)| {
            if pids.contains(&pid) && !taken.contains(&launch) {
                taken.push(launch);
                false
            } else {
                true
            }
        });
        for launch in taken {
            match self.observer.take_watched(launch) {
                Ok(Some(n)) => *total.get_or_insert(0) += n,
                Ok(None) => {}
                Err(e) => tracing::debug!("reading watched launch {launch}: {e}"),
            }
        }
        total
    }

    /// The pages the launch of process `pid`, followed for its first reads, read from disk so far
    /// while they were counted; `None` when it is not followed so or ended (its end record then
    /// carried the count: [`ObservedEvent::LaunchEnd`]).
    pub fn first_reads_disk_pages(&self, pid: u32) -> Option<u64> {
        let launch = match self.launch_of_process(pid) {
            Ok(l) => l?,
            Err(e) => {
                tracing::debug!("the launch of pid {pid}: {e}");
                return None;
            }
        };
        match self.observer.first_reads_disk_pages(launch) {
            Ok(n) => n,
            Err(e) => {
                tracing::debug!("reading launch {launch}: {e}");
                None
            }
        }
    }

    /// The launch process `pid` follows: the one its last exec or fork record told (none when
    /// that launch was stopped or ended since), else its main thread's in the kernel's map,
    /// else (the main thread exited) one of its threads'.
    fn launch_of_process(&self, pid: u32) -> Result<Option<LaunchId>, BpfError> {
        if let Some(&l) = self.exec_launches.get(&pid) {
            // Stopped or ended, the kernel follows the process no more: a later exec, or a fork
            // of a followed launch reusing its pid, would have entered it again. (A launch is
            // stopped once watched, and the processes of a watched launch are taken off again
            // when its window closes, mostly long gone: asking the kernel's task map, then
            // `/proc/PID/task`, to hear that cost two failed lookups each.)
            let gone = self.stopped.contains_key(&l) || self.ended_launches.contains(&l);
            return Ok((!gone).then_some(l));
        }
        if let Some(l) = self.observer.launch_of(pid)? {
            return Ok(Some(l));
        }
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Ok(None) };
        for tid in tasks.flatten().filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok()) {
            if let Some(l) = self.observer.launch_of(tid)? {
                return Ok(Some(l));
            }
        }
        Ok(None)
    }

    /// Records lost so far, by cause (only causes that lost any): the kernel's counters, and the
    /// records held for a launch past the bound before its exec.
    pub fn lost_by_cause(&self) -> Vec<(&'static str, u64)> {
        let mut causes = match self.observer.stats() {
            Ok(counts) => counts.by_cause(),
            Err(e) => {
                tracing::debug!("reading the lost counters: {e}");
                LostCounts::default().by_cause()
            }
        };
        if self.launches.overflowed_records > 0 {
            causes.push(("held past the launch's exec bound", self.launches.overflowed_records));
        }
        causes
    }

    /// Detaches the programs (about a second: see [`BpfObserver::close`]).
    pub fn close(self) {
        self.observer.close();
    }
}
