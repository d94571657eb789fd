//! Launch windows: from an application's exec until its page accesses go quiet (capped), which
//! processes belong to the launch (the launching process and its descendants), which launches are
//! followed (traced: their processes are the kernel's pid filter), which page events are the
//! launch's, and the launch's honest hit-rate counters. Which program of a launch is its
//! application (seen through wrappers and launchers) is `augur_core::model::launcher`'s decision:
//! the tracker feeds it the launch's execs, forks, exits and new pages, and re-keys the launch
//! when it says so; pages used before a re-key stay with the launch.
//!
//! Syscall-free and clock-free: every call is given the monotonic time in nanoseconds, so it is
//! tested without root. The daemon's event loop feeds it and acts on what it returns.

use std::collections::{HashMap, HashSet, VecDeque};

use augur_core::model::app::AppIdentity;
use augur_core::model::launcher::{ExecStep, LaunchIdentity, Verdict};
use augur_core::model::learn::LearningHistory;
use augur_core::model::profile::{InodeKey, Lookup, LookupList, TraceMode, UsedRange, WorkingSetBuilder};
use augur_core::model::range::PageRange;
use augur_core::model::read_through::{ForwardRuns, Run, STREAM_HEAD_PAGES};

/// Identifies a launch for the daemon's lifetime.
pub type LaunchId = u64;

/// Page events seen up to this long before the exec event was processed still count (the kernel
/// reads the executable's first pages inside execve, before the exec is reported).
const EXEC_LOOKBEHIND_NS: u64 = 200_000_000;
/// After the last process of a followed launch exits, events still in flight get this long to
/// arrive (and a known wrapper's launch this long to adopt its payload). A launch neither
/// followed nor a wrapper waits for no event: it closes at its last exit, in the same wake-up,
/// so that a process augur only replays (or only groups) costs no timer wake-up of its own.
const EXIT_GRACE_NS: u64 = 100_000_000;
/// Page events of processes outside every launch kept for the look-behind.
const BACKLOG_MAX: usize = 65_536;
/// A followed launch's novelty (the share of its page events that used a page new to it) is
/// judged over spans of this much event time.
const SETTLE_SPAN_NS: u64 = 1_000_000_000;
/// Fewest page events in a span for its novelty to say anything (a start waiting on the disk
/// produces fewer, and is never judged settled).
const SETTLE_MIN_EVENTS: u64 = 2_000;
/// A span in which fewer than one event in this many used a new page: the launch has settled
/// into re-using what it already loaded (a build running one compiler after another), so
/// following it longer costs the traced work without teaching anything about its start.
const SETTLE_EVENTS_PER_NOVEL: u64 = 50;
/// Inodes one launch records as read from disk, at most (a launch that reads more is walking a
/// tree, not starting).
const MAX_INODE_LOADS: usize = 1_024;
/// Launches in progress at most: an exec outside every launch while this many are open starts
/// none (it is neither followed nor replayed), and is counted ([`LaunchTracker::launches_dropped`]).
pub const MAX_LAUNCHES: usize = 256;
/// Execs one launch records at most (each keeps its program's command line, for the launch's
/// identity); later execs of its processes are helpers, counted ([`LaunchTracker::execs_not_recorded`]).
pub const MAX_EXECS_PER_LAUNCH: usize = 256;
/// Execs all launches in progress record at most, together.
pub const MAX_EXECS_RECORDED: usize = 2_048;
/// A followed launch whose pid reached the kernel's filter this long after its exec, and after
/// more than a quarter of its window, was traced from its middle (a short start while the daemon
/// was busy): learning it would teach that the pages it used before were not needed.
const LATE_TRACE_MIN_NS: u64 = 5_000_000;

/// Whether a page event is an access (fires on hits) or an insertion (a read from disk).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageKind {
    /// The page was used (get_pages, map_pages, fault).
    Access,
    /// The page entered the page cache: it was read from disk.
    Insertion,
}

/// Knobs of launch windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowSettings {
    /// Longest window.
    pub max_ns: u64,
    /// Quiet time that ends a window.
    pub quiet_ns: u64,
    /// Events the daemon traces (decides whether insertions or accesses build the profile).
    pub mode: TraceMode,
    /// A launch stops being followed once it used this many pages (a bulk reader).
    pub max_pages: u64,
    /// A launch stops being followed once one file's forward run is this many pages and most of
    /// what it used (it reads the file through: [`augur_core::model::read_through`]); 0: never.
    pub read_through_pages: u64,
}

/// A launch in progress.
pub struct ActiveLaunch {
    /// The launch's id.
    pub id: LaunchId,
    /// The application as decided so far (`identity.app()`).
    pub app: AppIdentity,
    /// The application's command line (for `ld.so PROGRAM ARGS`: `PROGRAM ARGS`).
    pub argv: Vec<String>,
    /// The process whose exec started the launch (the first one traced).
    pub root: u32,
    /// Which of the launch's programs is its application, and whether it may be learned.
    pub identity: LaunchIdentity,
    /// Page events made the identity re-key the launch; not yet taken by the daemon.
    rekeyed_by_pages: bool,
    /// Tasks of the launch still alive: its processes and their threads (the kernel follows
    /// each by its own id).
    pub live: HashSet<u32>,
    /// Those of `live` that are threads of another of its processes: they share that process's
    /// memory and open files, so its maps and descriptors name their files too.
    pub threads: HashSet<u32>,
    /// Exec time, monotonic ns.
    pub started_ns: u64,
    /// Last page event, monotonic ns.
    pub last_event_ns: u64,
    /// When the last process exited, if all did.
    pub all_exited_ns: Option<u64>,
    /// Pages used, first-use ordered.
    pub used: WorkingSetBuilder,
    /// Pages read from disk for the launch during the window.
    pub pages_read_from_disk: u64,
    /// Pages the replayed profile expected (0 for a new application).
    pub pages_expected: u64,
    /// The application whose profile was replayed for this launch last, if any (a launcher's
    /// expected application is replayed at the launcher's exec, and not again at its own).
    pub replayed: Option<String>,
    /// That replay was answered from what the daemon knew: its application's last replay found
    /// every page resident and nothing left the page cache since ([`crate::daemon::Outcome::AllResident`]).
    pub replay_all_resident: bool,
    /// Of those, pages resident when the replay checked.
    pub pages_resident_at_exec: u64,
    /// Pages the replay loaded.
    pub pages_prefetched: u64,
    /// Bytes the replay loaded.
    pub bytes_prefetched: u64,
    /// Page events attributed to the launch.
    pub page_events: u64,
    /// Page events that reached it while it was not followed (observing every exec: those the
    /// kernel sent before the daemon took its processes off).
    pub page_events_not_followed: u64,
    /// Whether the launch is traced and learned; an unfollowed launch only groups its processes
    /// (so its helpers are not launches of their own) and closes when they exit or at the cap.
    pub followed: bool,
    /// Why it stopped being followed before its window closed, if it did; what it used until
    /// then is learned.
    pub stopped: Option<FollowStop>,
    /// The lookups of the launcher's `PATH` search that found the program, learned at exec.
    pub exec_lookups: Vec<augur_core::model::profile::Lookup>,
    /// Inodes the launch needed from disk (ext4 read their inode-table blocks), in first-need
    /// order, each once, at most [`MAX_INODE_LOADS`].
    pub inodes_loaded: Vec<InodeKey>,
    /// The path lookups its processes made while it was followed (opens, stats, execs, failed
    /// ones included), as the kernel observed them, in first-use order.
    pub lookups: LookupList,
    /// Files its processes emptied or created for writing while it was followed (its outputs):
    /// what it uses of them from then on is what it wrote, never learned, never counted toward
    /// the page cap (a linker reading back its 90 MB output filled a fifth of its window).
    pub outputs: HashSet<InodeKey>,
    /// Page events of its outputs, not learned.
    pub output_page_events: u64,
    /// Processes the kernel was asked to watch for this launch, not followed: it counts the pages
    /// they read from disk in the launch's window ([`crate::daemon::Action::Watch`]).
    pub watched: Vec<u32>,
    /// The novelty span in progress (see [`SETTLE_SPAN_NS`]).
    span: NoveltySpan,
    /// The forward runs of its files while it is followed (emptied when it stops).
    runs: ForwardRuns,
}

impl ActiveLaunch {
    /// Whether what it used is learned when it closes: it was followed, or stopped being
    /// followed with what it used until then kept.
    pub fn is_learned_from(&self) -> bool {
        self.followed || self.stopped.is_some()
    }
}

/// Why a launch stopped being followed before its window closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FollowStop {
    /// It used `max_pages` pages (a bulk reader); of the files it was reading through, when they
    /// were most of what it used (a tree read), nothing is learned.
    PageCap { files_read_through: u64 },
    /// Its page events stopped using new pages (see [`SETTLE_EVENTS_PER_NOVEL`]), this long (ms)
    /// after its start.
    Settled { after_ms: u64 },
    /// It was reading one file through (a forward run of `read_through_pages` that was most of
    /// what it used), this long (ms) after its start: the data it streams after is not its start.
    ReadThrough { after_ms: u64 },
}

/// Page events of one span of a followed launch, and how many of them used a new page.
#[derive(Clone, Copy, Debug, Default)]
struct NoveltySpan {
    start_ns: Option<u64>,
    events: u64,
    novel: u64,
}

impl NoveltySpan {
    /// Counts one event at `ts_ns`; true when a span just ended with the launch settled.
    fn count(&mut self, ts_ns: u64, novel: bool) -> bool {
        let start = *self.start_ns.get_or_insert(ts_ns);
        self.events += 1;
        self.novel += u64::from(novel);
        if ts_ns.saturating_sub(start) < SETTLE_SPAN_NS {
            return false;
        }
        let settled = self.events >= SETTLE_MIN_EVENTS && self.novel.saturating_mul(SETTLE_EVENTS_PER_NOVEL) < self.events;
        *self = NoveltySpan { start_ns: Some(ts_ns), events: 0, novel: 0 };
        settled
    }
}

/// A launch whose window closed.
pub struct FinishedLaunch {
    /// Everything the launch accumulated.
    pub launch: ActiveLaunch,
    /// Window length in milliseconds.
    pub window_ms: u64,
    /// Inodes in first-use order with their ranges.
    pub working_set: Vec<(InodeKey, Vec<UsedRange>)>,
}

impl FinishedLaunch {
    /// For a launch traced from its middle, its pid in force in the kernel's filter since
    /// `in_force_since_ns`: how long after its exec (ms) its trace began. Its working set is
    /// partial, not to be learned (see [`LATE_TRACE_MIN_NS`]).
    pub fn traced_late_ms(&self, in_force_since_ns: u64) -> Option<u64> {
        let late = self.traced_from_ns(in_force_since_ns);
        let window = self.window_ms.saturating_mul(1_000_000);
        (late >= LATE_TRACE_MIN_NS && late.saturating_mul(4) > window).then_some(late / 1_000_000)
    }

    /// How long after its exec (ns) the launch was traced from, its pid in force in the kernel's
    /// filter since `in_force_since_ns`.
    pub fn traced_from_ns(&self, in_force_since_ns: u64) -> u64 {
        in_force_since_ns.saturating_sub(self.launch.started_ns)
    }
}

/// What an exec meant.
#[derive(Debug, PartialEq, Eq)]
pub enum ExecOutcome {
    /// A new launch started (replay its profile).
    Started(LaunchId),
    /// A process of the launch exec'd the program that is now its application (`env python3
    /// x.py`, the payload of `timeout 10 CMD`): the launch is now of the new application (replay
    /// that one).
    Relabelled(LaunchId),
    /// A process outside every launch exec'd the command a launch's wrapper carried
    /// (`systemd-run CMD`: PID 1 started CMD): it is now that launch's application; its pid is
    /// not a descendant of a followed process, so it must be followed on its own.
    Adopted(LaunchId),
    /// A process of a launch in progress exec'd a helper: part of that launch.
    Joined(LaunchId),
    /// A process outside every launch exec'd while [`MAX_LAUNCHES`] launches were open: no
    /// launch started (counted in [`LaunchTracker::launches_dropped`]).
    Dropped,
}

/// An event of process `tgid` at `ts_ns`, backlogged while the process is not (yet) known to
/// belong to a launch: its exec or fork may be reported after the events it caused were read.
#[derive(Debug, Clone)]
struct TaskEvent {
    tgid: u32,
    ts_ns: u64,
    event: LaunchEvent,
}

/// What a launch learns from: a page used, an inode read from disk, or a path looked up.
#[derive(Debug, Clone)]
enum LaunchEvent {
    Page { kind: PageKind, inode: InodeKey, pages: PageRange },
    InodeLoad(InodeKey),
    Lookup(Lookup),
    Output(InodeKey),
}

/// All launches in progress.
pub struct LaunchTracker {
    settings: WindowSettings,
    active: Vec<ActiveLaunch>,
    owner: HashMap<u32, LaunchId>,
    backlog: VecDeque<TaskEvent>,
    next_id: LaunchId,
    /// Live processes of launches that stopped being followed, not yet taken by the daemon.
    unfollowed: Vec<u32>,
    /// Processes of launches that stopped being followed at the page cap or reading a file
    /// through, for [`Self::take_streamed`].
    streamed: Vec<u32>,
    /// Unattributed events dropped from the full backlog (diagnostics).
    pub backlog_dropped: u64,
    /// Execs that started no launch because [`MAX_LAUNCHES`] were open.
    pub launches_dropped: u64,
    /// Execs of a launch's processes not recorded for its identity ([`MAX_EXECS_PER_LAUNCH`],
    /// [`MAX_EXECS_RECORDED`]).
    pub execs_not_recorded: u64,
}

impl LaunchTracker {
    /// No launch in progress.
    pub fn new(settings: WindowSettings) -> Self {
        LaunchTracker {
            settings,
            active: Vec::new(),
            owner: HashMap::new(),
            backlog: VecDeque::new(),
            next_id: 1,
            unfollowed: Vec::new(),
            streamed: Vec::new(),
            backlog_dropped: 0,
            launches_dropped: 0,
            execs_not_recorded: 0,
        }
    }

    /// Changes the settings (config reload); windows in progress keep their start.
    pub fn set_settings(&mut self, settings: WindowSettings) {
        self.settings = settings;
    }

    /// Launches in progress.
    pub fn active(&self) -> &[ActiveLaunch] {
        &self.active
    }

    /// Launches in progress, to update what the engine learns of them.
    pub fn active_mut(&mut self) -> &mut [ActiveLaunch] {
        &mut self.active
    }

    /// The launch in progress `id`.
    pub fn get(&self, id: LaunchId) -> Option<&ActiveLaunch> {
        self.active.iter().find(|l| l.id == id)
    }

    /// The launch in progress `id`, to change.
    pub fn get_mut(&mut self, id: LaunchId) -> Option<&mut ActiveLaunch> {
        self.active.iter_mut().find(|l| l.id == id)
    }

    /// True when nothing is in progress (the daemon then arms no timer).
    pub fn is_idle(&self) -> bool {
        self.active.is_empty()
    }

    /// Whether process `tgid` belongs to a launch in progress, followed or not (its exec or its
    /// fork was seen).
    pub fn knows_process(&self, tgid: u32) -> bool {
        self.owner.contains_key(&tgid)
    }

    /// Whether process `tgid` belongs to a followed launch in progress (the kernel traces it as
    /// a descendant of a followed process).
    pub fn follows_process(&self, tgid: u32) -> bool {
        self.owner
            .get(&tgid)
            .and_then(|id| self.active.iter().find(|l| l.id == *id))
            .is_some_and(|l| l.followed && l.live.contains(&tgid))
    }

    /// True when a launch in progress is followed (its page events and opened paths are wanted).
    pub fn is_following(&self) -> bool {
        self.active.iter().any(|l| l.followed)
    }

    /// Process `step.pid` exec'd at `now_ns` (`step` is what `/proc` said). `follow` says whether
    /// a new launch of an application (or the one a launch is re-keyed to) is traced; it is asked
    /// only then, not for a helper joining a launch in progress (the common exec under `make`),
    /// and never for an application that cannot be learned (a memfd or throwaway executable).
    pub fn on_exec(&mut self, step: ExecStep, now_ns: u64, follow: impl FnOnce(&AppIdentity) -> bool) -> ExecOutcome {
        let tgid = step.pid;
        let recorded: usize = self.active.iter().map(|l| l.identity.exec_count()).sum();
        if let Some(&id) = self.owner.get(&tgid)
            && let Some(l) = self.active.iter_mut().find(|l| l.id == id)
            && l.live.contains(&tgid)
        {
            if l.identity.exec_count() >= MAX_EXECS_PER_LAUNCH || recorded >= MAX_EXECS_RECORDED {
                // A tree of thousands of execs (a build, an exec flood): the process keeps the
                // program it ran before for the identity, and the launch keeps its application.
                self.execs_not_recorded += 1;
                return ExecOutcome::Joined(id);
            }
            return match l.identity.on_exec(&step) {
                // The same application again (`/proc` was read after the exec that followed: the
                // first exec already showed the program): nothing changes.
                Verdict::Rekeyed { key, .. } if key == l.app.key => {
                    l.argv = l.identity.hint_lookup().1.to_vec();
                    ExecOutcome::Joined(id)
                }
                Verdict::Rekeyed { .. } => {
                    relabel(l, &mut self.unfollowed, follow);
                    ExecOutcome::Relabelled(id)
                }
                Verdict::Helper => ExecOutcome::Joined(id),
            };
        }
        // Outside every launch: the payload of a wrapper that had PID 1 start it (systemd-run)?
        if let Some(i) = self.active.iter_mut().position(|l| l.identity.adopt(&step, now_ns).is_some()) {
            let l = &mut self.active[i];
            let id = l.id;
            l.live.insert(tgid);
            self.owner.insert(tgid, id);
            adopt_backlog(&mut self.backlog, l, self.settings, tgid);
            relabel(l, &mut self.unfollowed, follow);
            return ExecOutcome::Adopted(id);
        }
        if self.active.len() >= MAX_LAUNCHES || recorded >= MAX_EXECS_RECORDED {
            self.launches_dropped += 1;
            return ExecOutcome::Dropped;
        }
        let id = self.next_id;
        self.next_id += 1;
        let identity = LaunchIdentity::start(&step, now_ns);
        let app = identity.app().clone();
        let argv = identity.hint_lookup().1.to_vec();
        let follow = identity.app_stable() && follow(&app);
        let mut launch = ActiveLaunch {
            id,
            app,
            argv,
            root: tgid,
            identity,
            rekeyed_by_pages: false,
            live: HashSet::from([tgid]),
            threads: HashSet::new(),
            started_ns: now_ns,
            last_event_ns: now_ns,
            all_exited_ns: None,
            used: WorkingSetBuilder::new(),
            pages_read_from_disk: 0,
            pages_expected: 0,
            replayed: None,
            replay_all_resident: false,
            pages_resident_at_exec: 0,
            pages_prefetched: 0,
            bytes_prefetched: 0,
            page_events: 0,
            page_events_not_followed: 0,
            watched: Vec::new(),
            followed: follow,
            stopped: None,
            exec_lookups: Vec::new(),
            inodes_loaded: Vec::new(),
            outputs: HashSet::new(),
            output_page_events: 0,
            lookups: LookupList::new(),
            span: NoveltySpan::default(),
            runs: ForwardRuns::new(),
        };
        // Events of this process read before its exec was reported.
        adopt_backlog(&mut self.backlog, &mut launch, self.settings, tgid);
        self.owner.insert(tgid, id);
        self.active.push(launch);
        ExecOutcome::Started(id)
    }

    /// Launches the identity re-keyed on their page events since the last call (a program a
    /// script launcher forked used most of the pages: `oosplash` → `soffice.bin`), relabelled now;
    /// `follow` is asked for each one's new application, as at an exec.
    pub fn take_rekeyed(&mut self, mut follow: impl FnMut(&AppIdentity) -> bool) -> Vec<LaunchId> {
        let mut ids = Vec::new();
        for l in self.active.iter_mut().filter(|l| l.rekeyed_by_pages) {
            l.rekeyed_by_pages = false;
            relabel(l, &mut self.unfollowed, &mut follow);
            ids.push(l.id);
        }
        ids
    }

    /// Process `parent` created task `child`, a thread of its own when `thread`.
    pub fn on_fork(&mut self, parent: u32, child: u32, thread: bool) {
        if let Some(&id) = self.owner.get(&parent)
            && let Some(l) = self.active.iter_mut().find(|l| l.id == id)
        {
            l.live.insert(child);
            if thread {
                l.threads.insert(child);
            }
            l.identity.on_fork(parent, child);
            self.owner.insert(child, id);
            // The child may have run (and its events been read) before its fork was reported.
            adopt_backlog(&mut self.backlog, l, self.settings, child);
        }
    }

    /// Task `tgid` exited. It stays mapped to its launch until the window closes: its last page
    /// events may still be unread in the trace pipe when the exit is reported.
    pub fn on_exit(&mut self, tgid: u32, now_ns: u64) {
        if let Some(&id) = self.owner.get(&tgid)
            && let Some(l) = self.active.iter_mut().find(|l| l.id == id)
            && l.live.contains(&tgid)
        {
            l.live.remove(&tgid);
            l.threads.remove(&tgid);
            l.identity.on_exit(tgid);
            if l.live.is_empty() {
                l.all_exited_ns = Some(now_ns);
            }
        }
    }

    /// A page event of process `tgid` at `ts_ns`; attributed to its launch if it has one.
    pub fn on_page(&mut self, tgid: u32, ts_ns: u64, kind: PageKind, inode: InodeKey, pages: PageRange) {
        self.on_event(TaskEvent { tgid, ts_ns, event: LaunchEvent::Page { kind, inode, pages } });
    }

    /// An inode process `tgid` needed from disk at `ts_ns`; kept by its launch while the launch is
    /// followed. Backlogged like page events: a child's first lookups (the loader's, before
    /// `main`) are often read before its fork is reported.
    pub fn on_inode_load(&mut self, tgid: u32, ts_ns: u64, inode: InodeKey) {
        self.on_event(TaskEvent { tgid, ts_ns, event: LaunchEvent::InodeLoad(inode) });
    }

    /// A path lookup process `tgid` made at `ts_ns`; kept by its launch while the launch is
    /// followed. Backlogged like page events (the loader's lookups come right after the exec).
    pub fn on_lookup(&mut self, tgid: u32, ts_ns: u64, lookup: Lookup) {
        self.on_event(TaskEvent { tgid, ts_ns, event: LaunchEvent::Lookup(lookup) });
    }

    /// A file process `tgid` emptied or created for writing at `ts_ns` (an open with `O_TRUNC`,
    /// ...): its launch's outputs from then on, while the launch is followed.
    pub fn on_output(&mut self, tgid: u32, ts_ns: u64, inode: InodeKey) {
        self.on_event(TaskEvent { tgid, ts_ns, event: LaunchEvent::Output(inode) });
    }

    /// Gives an event to its process's launch, or backlogs it while the process has none.
    fn on_event(&mut self, e: TaskEvent) {
        let settings = self.settings;
        match self.owner.get(&e.tgid).and_then(|id| self.active.iter_mut().find(|l| l.id == *id)) {
            Some(l) if e.ts_ns + EXEC_LOOKBEHIND_NS >= l.started_ns => {
                if attribute(l, settings, e.tgid, e.ts_ns, e.event) {
                    self.unfollowed.extend(l.live.iter().copied());
                    if matches!(l.stopped, Some(FollowStop::PageCap { .. } | FollowStop::ReadThrough { .. })) {
                        self.streamed.extend(l.live.iter().copied());
                    }
                }
            }
            Some(_) => {}
            None => self.push_backlog(e),
        }
    }

    /// Keeps an unattributed event for the look-behind before the newest one, at most
    /// [`BACKLOG_MAX`] of them.
    fn push_backlog(&mut self, event: TaskEvent) {
        let since = event.ts_ns.saturating_sub(EXEC_LOOKBEHIND_NS);
        while self.backlog.front().is_some_and(|b| b.ts_ns < since) {
            self.backlog.pop_front();
        }
        if self.backlog.len() >= BACKLOG_MAX {
            self.backlog.pop_front();
            self.backlog_dropped += 1;
        }
        self.backlog.push_back(event);
    }

    /// Forgets backlogged events older than the look-behind (called before sleeping).
    pub fn trim_backlog(&mut self, now_ns: u64) {
        let since = now_ns.saturating_sub(EXEC_LOOKBEHIND_NS);
        self.backlog.retain(|b| b.ts_ns >= since);
    }

    /// Live processes (and threads) of launches that stopped being followed since the last call:
    /// a launch closed, reached the page cap, or was relabelled to an application not followed.
    pub fn take_unfollowed(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.unfollowed)
    }

    /// Live processes of launches that stopped being followed at the page cap or while reading
    /// a file through since the last call (a subset of [`Self::take_unfollowed`]'s).
    pub fn take_streamed(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.streamed)
    }

    fn deadline_of(&self, l: &ActiveLaunch) -> u64 {
        // An unfollowed launch has no events to go quiet on: it lasts while its processes do.
        let quiet = if l.followed { l.last_event_ns.max(l.started_ns).saturating_add(self.settings.quiet_ns) } else { u64::MAX };
        let cap = l.started_ns.saturating_add(self.settings.max_ns);
        let grace = if l.followed || l.identity.provisional() { EXIT_GRACE_NS } else { 0 };
        let exited = l.all_exited_ns.map_or(u64::MAX, |t| t.saturating_add(grace));
        quiet.min(cap).min(exited)
    }

    /// When the earliest window that keeps the timer armed closes (monotonic ns), if any is open
    /// (see [`keeps_timer`]).
    pub fn next_deadline(&self) -> Option<u64> {
        self.active.iter().filter(|l| keeps_timer(l)).map(|l| self.deadline_of(l)).min()
    }

    /// Closes the windows that keep no timer ([`keeps_timer`]) whose time is up at `now_ns`:
    /// before a fork or an exec is handled, so that a process of a launch whose window is over
    /// starts a launch of its own, as it would had the window closed on time.
    pub fn expire_untimed(&mut self, now_ns: u64) -> Vec<FinishedLaunch> {
        let mut done = Vec::new();
        let mut i = 0;
        while i < self.active.len() {
            if !keeps_timer(&self.active[i]) && self.deadline_of(&self.active[i]) <= now_ns {
                let l = self.active.swap_remove(i);
                done.push(self.finish(l, now_ns));
            } else {
                i += 1;
            }
        }
        done
    }

    /// Closes every window whose time is up at `now_ns`.
    pub fn expire(&mut self, now_ns: u64) -> Vec<FinishedLaunch> {
        let mut done = Vec::new();
        let mut i = 0;
        while i < self.active.len() {
            if self.deadline_of(&self.active[i]) <= now_ns {
                let l = self.active.swap_remove(i);
                done.push(self.finish(l, now_ns));
            } else {
                i += 1;
            }
        }
        done
    }

    /// Closes every window now (shutdown).
    pub fn close_all(&mut self, now_ns: u64) -> Vec<FinishedLaunch> {
        let all: Vec<ActiveLaunch> = self.active.drain(..).collect();
        all.into_iter().map(|l| self.finish(l, now_ns)).collect()
    }

    fn finish(&mut self, mut l: ActiveLaunch, now_ns: u64) -> FinishedLaunch {
        self.owner.retain(|_, id| *id != l.id);
        if l.followed {
            self.unfollowed.extend(l.live.iter().copied());
        }
        let end = now_ns.min(l.started_ns.saturating_add(self.settings.max_ns)).min(l.last_event_ns.max(l.started_ns));
        let window_ms = end.saturating_sub(l.started_ns) / 1_000_000;
        let used = std::mem::take(&mut l.used);
        FinishedLaunch { launch: l, window_ms, working_set: used.finish() }
    }
}

/// Which launches are followed: every launch of an application until its profile is stable (its
/// latest learned launches added almost no pages), then one in a while, so a settled profile
/// stays current without tracing every launch; a sampled launch that adds many pages makes the
/// next ones followed again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FollowPolicy {
    /// Launches always followed first.
    pub first_launches: u64,
    /// Followed until this many learned launches in a row were stable ...
    pub stable_launches: u32,
    /// ... or this many in a row were not (such a profile is sampled instead).
    pub max_unstable_launches: u32,
    /// Then one launch in this long (milliseconds) is followed.
    pub refollow_after_ms: u64,
}

impl FollowPolicy {
    /// Whether a launch at `now_ms` (Unix ms) of an application with learning history `h` is
    /// followed.
    pub fn follows(&self, h: &LearningHistory, now_ms: u64) -> bool {
        let settling = h.stable_streak < self.stable_launches && h.unstable_streak < self.max_unstable_launches;
        // A clock set back re-follows at once instead of waiting for it to catch up.
        let sample_due = now_ms < h.last_learned_ms || now_ms - h.last_learned_ms >= self.refollow_after_ms;
        h.learned < self.first_launches || settling || sample_due
    }
}

/// Whether launch `l`'s window arms the daemon's timer for its deadline: a launch followed (its
/// page events go quiet), one that was and is learned at its close, a replayed one (its record,
/// with what the replay loaded, is written at its close) and a wrapper's (it may still adopt its
/// payload). Any other launch only groups its processes and learns nothing: it closes
/// at the first wake-up after its processes exited or its cap passed, whatever wakes the loop
/// (and before a fork or exec is handled: [`LaunchTracker::expire_untimed`]), so that the
/// machine's other processes cost the daemon no timer wake-up of their own.
fn keeps_timer(l: &ActiveLaunch) -> bool {
    l.followed || l.stopped.is_some() || l.identity.provisional() || l.replayed.is_some()
}

/// Moves backlogged events of `tgid` from the launch's look-behind on into the launch.
fn adopt_backlog(backlog: &mut VecDeque<TaskEvent>, launch: &mut ActiveLaunch, settings: WindowSettings, tgid: u32) {
    let since = launch.started_ns.saturating_sub(EXEC_LOOKBEHIND_NS);
    backlog.retain(|b| {
        if b.tgid == tgid && b.ts_ns >= since {
            attribute(launch, settings, b.tgid, b.ts_ns, b.event.clone());
            false
        } else {
            true
        }
    });
}

/// The launch's identity re-keyed it to the application it decided: the launch follows its
/// name, argv and whether it is traced (`follow` asked again; its processes are handed back
/// through `unfollowed` when the new application is not followed).
fn relabel(l: &mut ActiveLaunch, unfollowed: &mut Vec<u32>, follow: impl FnOnce(&AppIdentity) -> bool) {
    l.app = l.identity.app().clone();
    l.argv = l.identity.hint_lookup().1.to_vec();
    let follow = l.stopped.is_none() && l.identity.app_stable() && follow(&l.app);
    if l.followed && !follow {
        unfollowed.extend(l.live.iter().copied());
    }
    l.followed = follow;
}

/// Adds one event of task `tid` to its launch; true when that made the launch stop being followed.
fn attribute(l: &mut ActiveLaunch, settings: WindowSettings, tid: u32, ts_ns: u64, event: LaunchEvent) -> bool {
    match event {
        LaunchEvent::Page { kind, inode, pages } => {
            let before = l.used.page_count();
            let stop = apply(l, settings, kind, inode, pages, ts_ns);
            let new = l.used.page_count().saturating_sub(before);
            if new > 0 && matches!(l.identity.on_pages(tid, new), Some(Verdict::Rekeyed { .. })) {
                l.rekeyed_by_pages = true;
            }
            stop
        }
        LaunchEvent::InodeLoad(inode) => {
            keep_inode_load(l, inode);
            false
        }
        LaunchEvent::Lookup(lookup) => {
            if l.followed && l.stopped.is_none() {
                l.lookups.record(lookup.path, lookup.kind);
            }
            false
        }
        LaunchEvent::Output(inode) => {
            if l.followed && l.stopped.is_none() {
                l.outputs.insert(inode);
            }
            false
        }
    }
}

/// Keeps an inode a followed launch needed from disk, once, at most [`MAX_INODE_LOADS`].
fn keep_inode_load(l: &mut ActiveLaunch, inode: InodeKey) {
    if l.followed && l.stopped.is_none() && l.inodes_loaded.len() < MAX_INODE_LOADS && !l.inodes_loaded.contains(&inode) {
        l.inodes_loaded.push(inode);
    }
}

/// Adds one page event to a followed launch; true when that made it stop being followed (it reached
/// the page cap or settled).
fn apply(l: &mut ActiveLaunch, settings: WindowSettings, kind: PageKind, inode: InodeKey, pages: PageRange, ts_ns: u64) -> bool {
    if !l.followed {
        l.page_events_not_followed += 1;
        return false;
    }
    if l.outputs.contains(&inode) {
        l.output_page_events += 1;
        return false;
    }
    let at_us = ts_ns.saturating_sub(l.started_ns) / 1000;
    let before = l.used.page_count();
    let builds = match kind {
        PageKind::Insertion => {
            l.pages_read_from_disk += pages.len;
            settings.mode != TraceMode::Access
        }
        PageKind::Access => true,
    };
    let mut run = Run::NONE;
    if builds {
        l.used.touch(inode, pages, at_us);
        if settings.read_through_pages > 0 {
            run = l.runs.on_use(inode, pages);
        }
    }
    l.last_event_ns = l.last_event_ns.max(ts_ns);
    l.page_events += 1;
    let stop = if l.used.page_count() >= settings.max_pages {
        // A tree reader's files are its data, not its start ([`ForwardRuns::files_read_through`]).
        let through = l.runs.files_read_through(l.used.page_count(), |inode| l.used.pages_of(inode));
        for (inode, span) in &through {
            l.used.keep_head(*inode, *span, 0);
        }
        Some(FollowStop::PageCap { files_read_through: through.len() as u64 })
    } else if ForwardRuns::reads_through(run, l.used.page_count(), settings.read_through_pages) {
        // What it learns of the stream is where the stream began, not the data it read.
        l.used.keep_head(inode, run.span(), STREAM_HEAD_PAGES);
        Some(FollowStop::ReadThrough { after_ms: ts_ns.saturating_sub(l.started_ns) / 1_000_000 })
    } else if builds && l.span.count(ts_ns, l.used.page_count() > before) {
        Some(FollowStop::Settled { after_ms: ts_ns.saturating_sub(l.started_ns) / 1_000_000 })
    } else {
        None
    };
    if stop.is_some() {
        l.followed = false;
        l.stopped = stop;
        l.runs = ForwardRuns::new();
    }
    stop.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use augur_core::model::user::ProcessUser;

    const MS: u64 = 1_000_000;
    const F: InodeKey = InodeKey { dev: 1, ino: 5 };

    fn tracker() -> LaunchTracker {
        LaunchTracker::new(WindowSettings {
            max_ns: 15_000 * MS,
            quiet_ns: 1000 * MS,
            mode: TraceMode::Access,
            max_pages: 1 << 20,
            read_through_pages: 0,
        })
    }

    fn step(pid: u32, exe: &str) -> ExecStep {
        ExecStep {
            pid,
            exe: exe.to_string(),
            argv: vec![exe.to_string()],
            cwd: None,
            loader_target: None,
            user: ProcessUser::ROOT,
        }
    }

    #[test]
    fn descendants_are_attributed_and_strangers_are_not() {
        let mut t = tracker();
        let base = 10_000 * MS;
        assert_eq!(t.on_exec(step(100, "/bin/app"), base, |_| true), ExecOutcome::Started(1));
        t.on_fork(100, 101, false);
        assert_eq!(t.on_exec(step(101, "/bin/helper"), base + MS, |_| true), ExecOutcome::Joined(1));
        t.on_page(101, base + 2 * MS, PageKind::Access, F, PageRange::new(0, 4));
        t.on_page(101, base + 2 * MS, PageKind::Insertion, F, PageRange::new(0, 4));
        t.on_page(555, base + 2 * MS, PageKind::Access, F, PageRange::new(50, 4));
        let done = t.expire(base + 2000 * MS);
        assert_eq!(done.len(), 1);
        let d = &done[0];
        assert_eq!(d.launch.app.key, "/bin/app");
        assert_eq!(d.working_set, vec![(F, vec![UsedRange { range: PageRange::new(0, 4), first_use_us: 2000 }])]);
        assert_eq!(d.launch.pages_read_from_disk, 4);
        assert!(t.is_idle());
        assert_eq!(t.next_deadline(), None);
    }

    #[test]
    fn an_exec_flood_is_bounded_and_its_drops_are_counted() {
        let mut t = tracker();
        let base = 10_000 * MS;
        // One launch whose shell loop execs thousands of helpers: a bounded number is recorded.
        assert_eq!(t.on_exec(step(100, "/bin/sh"), base, |_| true), ExecOutcome::Started(1));
        for i in 0..1_000u32 {
            t.on_fork(100, 1_000 + i, false);
            assert_eq!(t.on_exec(step(1_000 + i, "/bin/true"), base + MS, |_| true), ExecOutcome::Joined(1));
        }
        assert_eq!(t.get(1).unwrap().identity.exec_count(), MAX_EXECS_PER_LAUNCH);
        assert_eq!(t.execs_not_recorded, 1_000 - (MAX_EXECS_PER_LAUNCH as u64 - 1));
        // Execs outside every launch: at most MAX_LAUNCHES open, the rest counted.
        let mut dropped = 0;
        for i in 0..1_000u32 {
            if t.on_exec(step(100_000 + i, &format!("/bin/x{i}")), base + 2 * MS, |_| true) == ExecOutcome::Dropped {
                dropped += 1;
            }
        }
        assert_eq!(t.active().len(), MAX_LAUNCHES);
        assert_eq!(dropped, 1_000 - (MAX_LAUNCHES as u64 - 1));
        assert_eq!(t.launches_dropped, dropped);
        let recorded: usize = t.active().iter().map(|l| l.identity.exec_count()).sum();
        assert!(recorded <= MAX_EXECS_RECORDED);
        // Closing windows makes room again.
        assert_eq!(t.expire(base + 60_000 * MS).len(), MAX_LAUNCHES);
        assert_eq!(t.on_exec(step(7, "/bin/y"), base + 61_000 * MS, |_| true), ExecOutcome::Started(MAX_LAUNCHES as u64 + 1));
    }

    #[test]
    fn a_launch_traced_from_its_middle_says_so() {
        let finished = |last_ms: u64| {
            let mut t = tracker();
            t.on_exec(step(9, "/bin/java"), 1000 * MS, |_| true);
            t.on_page(9, (1000 + last_ms) * MS, PageKind::Access, F, PageRange::new(0, 1));
            t.expire((1000 + last_ms) * MS + 2000 * MS).remove(0)
        };
        // A 36 ms warm start whose pid reached the filter after 30 ms.
        assert_eq!(finished(36).traced_late_ms(1030 * MS), Some(30));
        // In force from its first milliseconds, however short or long the launch.
        assert_eq!(finished(36).traced_late_ms(1001 * MS), None);
        assert_eq!(finished(6).traced_late_ms(1004 * MS), None);
        // Late, but early in a long start (or in force before the exec was reported).
        assert_eq!(finished(1500).traced_late_ms(1040 * MS), None);
        assert_eq!(finished(36).traced_late_ms(999 * MS), None);
    }

    #[test]
    fn window_ends_when_quiet_or_at_the_cap() {
        let mut t = tracker();
        t.on_exec(step(1, "/bin/a"), 0, |_| true);
        assert_eq!(t.next_deadline(), Some(1000 * MS));
        // Busy for 20 s: the cap closes it at 15 s.
        for i in 1..20_000u64 {
            t.on_page(1, i * MS, PageKind::Access, F, PageRange::new(i, 1));
            assert!(t.expire(i * MS).is_empty() || i >= 15_000);
            if t.is_idle() {
                assert_eq!(i, 15_000);
                return;
            }
        }
        panic!("window never closed");
    }

    #[test]
    fn all_exited_closes_after_a_grace() {
        let mut t = tracker();
        t.on_exec(step(7, "/bin/a"), 0, |_| true);
        t.on_page(7, 10 * MS, PageKind::Access, F, PageRange::new(0, 1));
        t.on_exit(7, 20 * MS);
        assert_eq!(t.next_deadline(), Some(20 * MS + EXIT_GRACE_NS));
        assert_eq!(t.expire(200 * MS).len(), 1);
    }

    #[test]
    fn root_reexec_relabels_and_lookbehind_catches_execve_reads() {
        let mut t = tracker();
        t.on_page(9, 5 * MS, PageKind::Insertion, F, PageRange::new(0, 2));
        t.on_exec(step(9, "/usr/bin/env"), 6 * MS, |_| true);
        assert_eq!(t.on_exec(step(9, "/usr/bin/python3"), 7 * MS, |_| true), ExecOutcome::Relabelled(1));
        let done = t.close_all(8 * MS);
        assert_eq!(done[0].launch.app.key, "/usr/bin/python3");
        assert_eq!(done[0].launch.pages_read_from_disk, 2);
    }

    #[test]
    fn inodes_a_followed_launch_loaded_are_kept_once_each_in_order() {
        let mut t = tracker();
        let (a, b) = (InodeKey { dev: 1, ino: 10 }, InodeKey { dev: 1, ino: 11 });
        let c = InodeKey { dev: 1, ino: 12 };
        t.on_inode_load(50, 0, c); // before the look-behind of the exec: not its
        t.on_inode_load(50, 300 * MS, a); // its execve's path walk, read before the exec
        t.on_exec(step(50, "/bin/a"), 400 * MS, |_| true);
        t.on_inode_load(50, 402 * MS, b);
        t.on_inode_load(50, 403 * MS, a);
        t.on_inode_load(50, 404 * MS, b);
        t.on_exec(step(60, "/bin/quiet"), 400 * MS, |_| false);
        t.on_inode_load(60, 402 * MS, a);
        let done = t.close_all(410 * MS);
        let of = |key: &str| done.iter().find(|d| d.launch.app.key == key).unwrap().launch.inodes_loaded.clone();
        assert_eq!(of("/bin/a"), vec![a, b]);
        assert!(of("/bin/quiet").is_empty());
    }

    #[test]
    fn events_of_a_child_read_before_its_fork_was_reported_are_kept() {
        let mut t = tracker();
        let lib = InodeKey { dev: 1, ino: 77 };
        t.on_exec(step(20, "/bin/sh"), 0, |_| true);
        t.on_page(21, 5 * MS, PageKind::Access, F, PageRange::new(0, 3));
        t.on_inode_load(21, 6 * MS, lib);
        t.on_fork(20, 21, false);
        let done = t.close_all(10 * MS);
        assert_eq!(done[0].launch.inodes_loaded, vec![lib]);
        assert_eq!(done[0].working_set[0].1[0].range, PageRange::new(0, 3));
    }

    #[test]
    fn events_read_after_the_exit_was_reported_still_count() {
        let mut t = tracker();
        t.on_exec(step(30, "/bin/a"), 0, |_| true);
        t.on_exit(30, 5 * MS);
        t.on_page(30, 4 * MS, PageKind::Access, F, PageRange::new(0, 9));
        let done = t.expire(5 * MS + EXIT_GRACE_NS);
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].working_set[0].1[0].range, PageRange::new(0, 9));
    }

    #[test]
    fn an_unfollowed_launch_groups_its_processes_learns_nothing_and_lasts_until_they_exit() {
        let mut t = tracker();
        assert_eq!(t.on_exec(step(40, "/usr/bin/make"), 0, |_| false), ExecOutcome::Started(1));
        t.on_fork(40, 41, false);
        assert_eq!(
            t.on_exec(step(41, "/usr/bin/gcc"), MS, |_| unreachable!("a helper joining a launch is not asked about")),
            ExecOutcome::Joined(1)
        );
        t.on_page(41, 2 * MS, PageKind::Access, F, PageRange::new(0, 3));
        assert!(!t.is_following() && !t.is_idle());
        // No events to go quiet on: still open long after the quiet time.
        assert!(t.expire(5000 * MS).is_empty());
        t.on_exit(41, 5000 * MS);
        t.on_exit(40, 6000 * MS);
        // No event to wait for: it closes at its last exit, without a grace period, and arms no
        // timer (it closes at whatever wakes the loop next).
        assert_eq!(t.next_deadline(), None);
        let done = t.expire(6000 * MS);
        assert_eq!(done.len(), 1);
        assert!(done[0].working_set.is_empty());
        assert_eq!(done[0].launch.page_events, 0);
        assert!(t.take_unfollowed().is_empty(), "it was never followed");
    }

    #[test]
    fn only_a_followed_launch_or_a_wrapper_waits_after_its_last_exit() {
        // Followed: its last page events may still be in flight.
        let mut t = tracker();
        t.on_exec(step(60, "/bin/a"), 0, |_| true);
        t.on_exit(60, 10 * MS);
        assert_eq!(t.next_deadline(), Some(10 * MS + EXIT_GRACE_NS));
        // A wrapper not followed may still adopt what PID 1 starts for it.
        let mut t = tracker();
        let wrapper = ExecStep { argv: vec!["timeout".into(), "5".into(), "gedit".into()], ..step(70, "/usr/bin/timeout") };
        t.on_exec(wrapper, 0, |_| false);
        t.on_exit(70, 10 * MS);
        assert_eq!(t.next_deadline(), Some(10 * MS + EXIT_GRACE_NS));
        // Neither: closed at the exit, and no timer is armed for it.
        let mut t = tracker();
        t.on_exec(step(80, "/bin/b"), 0, |_| false);
        assert_eq!(t.next_deadline(), None);
        t.on_exit(80, 10 * MS);
        assert_eq!(t.next_deadline(), None);
        assert_eq!(t.expire(10 * MS).len(), 1);
    }

    #[test]
    fn a_launch_that_keeps_no_timer_closes_before_a_later_fork_or_exec_is_handled() {
        let mut t = tracker();
        // A known shell, replayed and not followed, past its cap: a command it starts now is a
        // launch of its own.
        t.on_exec(step(90, "/bin/bash"), 0, |_| false);
        assert!(t.expire_untimed(14_000 * MS).is_empty());
        let done = t.expire_untimed(15_000 * MS);
        assert_eq!(done.len(), 1);
        t.on_fork(90, 91, false);
        assert_eq!(t.on_exec(step(91, "/bin/ls"), 15_001 * MS, |_| false), ExecOutcome::Started(2));
        // A followed launch is closed by its own deadline (the timer), never here.
        t.on_exec(step(95, "/bin/new"), 15_002 * MS, |_| true);
        assert!(t.expire_untimed(60_000 * MS).iter().all(|d| d.launch.root != 95));
        assert!(t.get(3).is_some());
    }

    /// A tracker whose launches are followed to 100 pages at most.
    fn capped_tracker() -> LaunchTracker {
        LaunchTracker::new(WindowSettings {
            max_ns: 15_000 * MS,
            quiet_ns: 1000 * MS,
            mode: TraceMode::Access,
            max_pages: 100,
            read_through_pages: 0,
        })
    }

    #[test]
    fn a_bulk_reader_stops_being_followed_at_the_page_cap() {
        let mut t = capped_tracker();
        t.on_exec(step(50, "/usr/bin/cat"), 0, |_| true);
        t.on_fork(50, 51, false);
        t.on_page(50, MS, PageKind::Access, F, PageRange::new(0, 60));
        assert!(t.take_unfollowed().is_empty());
        t.on_page(50, 2 * MS, PageKind::Access, F, PageRange::new(60, 60));
        let mut gone = t.take_unfollowed();
        gone.sort_unstable();
        assert_eq!(gone, vec![50, 51]);
        assert!(!t.is_following());
        t.on_page(50, 3 * MS, PageKind::Access, F, PageRange::new(500, 60));
        t.on_exit(51, 4 * MS);
        t.on_exit(50, 4 * MS);
        let done = t.expire(4 * MS + EXIT_GRACE_NS);
        assert_eq!(done[0].launch.stopped, Some(FollowStop::PageCap { files_read_through: 0 }));
        // The first 120 pages (the event that crossed the cap counts), nothing after it.
        assert_eq!(done[0].working_set[0].1.iter().map(|u| u.range.len).sum::<u64>(), 120);
    }

    #[test]
    fn what_a_launch_uses_of_a_file_it_emptied_for_writing_is_its_output_not_learned_nor_counted() {
        let mut t = capped_tracker();
        let (input, output) = (InodeKey { dev: 1, ino: 7 }, InodeKey { dev: 1, ino: 8 });
        t.on_exec(step(50, "/usr/bin/ld"), 0, |_| true);
        // It reads the old contents first (a program that reads its settings, then rewrites
        // them): that is learned.
        t.on_page(50, MS, PageKind::Access, output, PageRange::new(0, 2));
        t.on_output(50, 2 * MS, output);
        t.on_page(50, 3 * MS, PageKind::Access, input, PageRange::new(0, 60));
        // Then it reads back what it wrote, far more than the cap: no stop, nothing learned.
        t.on_page(50, 4 * MS, PageKind::Access, output, PageRange::new(0, 500));
        assert!(t.is_following());
        t.on_page(50, 5 * MS, PageKind::Access, input, PageRange::new(60, 30));
        t.on_exit(50, 6 * MS);
        let done = t.expire(6 * MS + EXIT_GRACE_NS);
        assert_eq!(done[0].launch.stopped, None);
        assert_eq!(done[0].launch.output_page_events, 1);
        let pages = |inode| {
            done[0].working_set.iter().filter(|(k, _)| *k == inode).flat_map(|(_, u)| u.iter().map(|u| u.range.len)).sum::<u64>()
        };
        assert_eq!((pages(input), pages(output)), (90, 2));
    }

    fn read_through_tracker() -> LaunchTracker {
        LaunchTracker::new(WindowSettings {
            max_ns: 15_000 * MS,
            quiet_ns: 1000 * MS,
            mode: TraceMode::Access,
            max_pages: 65_536,
            read_through_pages: 2048,
        })
    }

    #[test]
    fn a_launch_reading_one_file_through_stops_being_followed_and_keeps_its_start() {
        let mut t = read_through_tracker();
        let (libc, data) = (InodeKey { dev: 1, ino: 20 }, InodeKey { dev: 1, ino: 21 });
        t.on_exec(step(50, "/usr/bin/cat"), 0, |_| true);
        t.on_page(50, MS, PageKind::Access, F, PageRange::new(0, 10));
        t.on_page(50, MS, PageKind::Access, libc, PageRange::new(0, 300));
        // 4 KiB reads of a 1 GiB file, the header read again now and then.
        let mut stopped_at = None;
        for i in 0..10_000u64 {
            t.on_page(50, 2 * MS + i * 10_000, PageKind::Access, data, PageRange::new(i, 1));
            if i % 100 == 0 {
                t.on_page(50, 2 * MS + i * 10_000, PageKind::Access, data, PageRange::new(0, 1));
            }
            if stopped_at.is_none() && !t.is_following() {
                stopped_at = Some(i);
            }
        }
        assert_eq!(stopped_at, Some(2047), "stopped once the run reached 2,048 pages");
        assert_eq!(t.take_unfollowed(), vec![50]);
        let done = t.close_all(200 * MS);
        assert!(matches!(done[0].launch.stopped, Some(FollowStop::ReadThrough { .. })), "{:?}", done[0].launch.stopped);
        let pages = |k: InodeKey| -> u64 {
            done[0].working_set.iter().filter(|(i, _)| *i == k).flat_map(|(_, r)| r.iter().map(|u| u.range.len)).sum()
        };
        assert_eq!(
            (pages(F), pages(libc), pages(data)),
            (10, 300, STREAM_HEAD_PAGES),
            "its start, and of the stream only where it began"
        );
    }

    #[test]
    fn a_start_with_data_files_or_a_big_program_is_not_reading_through() {
        let mut t = read_through_tracker();
        // A script reading eight 4 MiB files: no run reaches 8 MiB.
        t.on_exec(step(60, "/bin/sh"), 0, |_| true);
        for part in 0..8u64 {
            for i in 0..1024u64 {
                t.on_page(60, MS + i * 1000, PageKind::Access, InodeKey { dev: 1, ino: 100 + part }, PageRange::new(i, 1));
            }
        }
        // A game that maps 60 MiB of itself, then reads 32 MiB of its pack file forward.
        t.on_exec(step(70, "/usr/games/game"), 0, |_| true);
        t.on_page(70, MS, PageKind::Access, F, PageRange::new(0, 15_360));
        for i in 0..8192u64 {
            t.on_page(70, MS + i * 1000, PageKind::Access, InodeKey { dev: 1, ino: 200 }, PageRange::new(i, 1));
        }
        assert_eq!(t.active().iter().filter(|l| l.followed).count(), 2);
        assert!(t.take_unfollowed().is_empty());
        // A backward reader of a big file reads it through too.
        t.on_exec(step(80, "/usr/bin/tac"), 0, |_| true);
        for i in (0..8192u64).rev() {
            t.on_page(80, MS + (8192 - i) * 1000, PageKind::Access, InodeKey { dev: 1, ino: 300 }, PageRange::new(i, 1));
        }
        assert_eq!(t.take_unfollowed(), vec![80]);
        // Of its stream it keeps where it began: the file's end, read first.
        let done = t.close_all(10_000 * MS);
        let tac = done.iter().find(|d| d.launch.stopped.is_some()).expect("tac's launch");
        let kept: Vec<PageRange> = tac.working_set.iter().flat_map(|(_, r)| r.iter().map(|u| u.range)).collect();
        let mut set = augur_core::model::range::RangeSet::new();
        kept.iter().for_each(|r| set.insert(*r));
        assert_eq!(set.ranges(), &[PageRange::new(8192 - STREAM_HEAD_PAGES, STREAM_HEAD_PAGES)]);
    }

    #[test]
    fn a_launch_that_keeps_reusing_its_pages_settles_and_stops_being_followed() {
        // A build: every compile maps the same compiler pages again; one new source page each.
        let mut t = tracker();
        t.on_exec(step(80, "/usr/bin/make"), 0, |_| true);
        t.on_fork(80, 81, false);
        let mut ts = 0;
        let mut stopped_at = None;
        for compile in 0..200u64 {
            for page in 0..100 {
                ts += 100_000; // 10,000 events a second
                t.on_page(81, ts, PageKind::Access, F, PageRange::new(page, 1));
            }
            t.on_page(81, ts, PageKind::Access, InodeKey { dev: 1, ino: 100 + compile }, PageRange::new(0, 1));
            if stopped_at.is_none() && !t.is_following() {
                stopped_at = Some(ts);
            }
        }
        let stopped_at = stopped_at.expect("the build settled");
        assert!((SETTLE_SPAN_NS..=2 * SETTLE_SPAN_NS + MS).contains(&stopped_at), "stopped at {stopped_at} ns");
        let mut gone = t.take_unfollowed();
        gone.sort_unstable();
        assert_eq!(gone, vec![80, 81]);
        let done = t.close_all(ts);
        let Some(FollowStop::Settled { after_ms }) = done[0].launch.stopped else { panic!("{:?}", done[0].launch.stopped) };
        assert!(after_ms <= stopped_at / MS && after_ms + 11 >= stopped_at / MS, "{after_ms} ms, noticed at {stopped_at} ns");
        // What it used until then is learned: the compiler's pages and the first sources.
        assert_eq!(done[0].working_set[0].1.iter().map(|u| u.range.len).sum::<u64>(), 100);
        assert!(done[0].working_set.len() > 50);
    }

    #[test]
    fn a_start_that_loads_new_pages_or_waits_on_the_disk_is_never_judged_settled() {
        let mut t = tracker();
        // Fast and all new: 20,000 events a second, each a new page.
        t.on_exec(step(90, "/bin/new"), 0, |_| true);
        for i in 0..60_000u64 {
            t.on_page(90, i * 50_000, PageKind::Access, F, PageRange::new(i, 1));
        }
        // Slow and repetitive: a cold start waiting on the disk re-reads pages, but only a few
        // hundred events a second.
        t.on_exec(step(91, "/bin/slow"), 0, |_| true);
        for i in 0..3_000u64 {
            t.on_page(91, i * 3 * MS, PageKind::Access, InodeKey { dev: 1, ino: 6 }, PageRange::new(i % 10, 1));
        }
        assert_eq!(t.active().iter().filter(|l| l.followed).count(), 2);
        assert!(t.take_unfollowed().is_empty());
    }

    #[test]
    fn the_live_processes_of_a_launch_no_longer_followed_are_handed_back() {
        let mut t = tracker();
        t.on_exec(step(60, "/bin/a"), 0, |_| true);
        t.on_fork(60, 61, false);
        t.on_exec(step(70, "/bin/b"), 0, |_| true);
        // 61 exited; 60 keeps running after its window went quiet; 70 is still busy.
        t.on_exit(61, MS);
        t.on_page(70, 500 * MS, PageKind::Access, F, PageRange::new(5, 1));
        t.expire(1000 * MS);
        assert_eq!(t.take_unfollowed(), vec![60], "only live processes: a dead pid may be reused");
        assert!(t.take_unfollowed().is_empty());
        // Relabelled to an application that is not followed.
        t.on_page(70, 1500 * MS, PageKind::Access, F, PageRange::new(0, 1));
        t.on_exec(step(70, "/bin/c"), 1600 * MS, |_| false);
        assert_eq!(t.take_unfollowed(), vec![70]);
        assert!(!t.is_following());
    }

    #[test]
    fn the_first_launches_are_followed_then_one_in_a_while() {
        let p = FollowPolicy { first_launches: 3, stable_launches: 2, max_unstable_launches: 8, refollow_after_ms: 3_600_000 };
        let now = 10_000_000_000;
        let h = |learned, last_learned_ms| LearningHistory { learned, last_learned_ms, stable_streak: 2, unstable_streak: 0 };
        assert!(p.follows(&h(0, 0), now));
        assert!(p.follows(&h(2, now - 1), now));
        assert!(!p.follows(&h(3, now - 1), now));
        assert!(!p.follows(&h(50, now - 3_599_999), now));
        assert!(p.follows(&h(50, now - 3_600_000), now));
        assert!(p.follows(&h(50, now + 5), now), "the clock was set back");
    }

    #[test]
    fn insertion_mode_learns_from_insertions() {
        let mut t = LaunchTracker::new(WindowSettings {
            max_ns: 15_000 * MS,
            quiet_ns: 1000 * MS,
            mode: TraceMode::Insertion,
            max_pages: 1 << 20,
            read_through_pages: 0,
        });
        t.on_exec(step(3, "/bin/a"), 0, |_| true);
        t.on_page(3, MS, PageKind::Insertion, F, PageRange::new(8, 2));
        let done = t.close_all(2 * MS);
        assert_eq!(done[0].working_set[0].1[0].range, PageRange::new(8, 2));
    }
}
