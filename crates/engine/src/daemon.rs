//! The daemon's decisions as one state machine, [`DaemonEngine`]: the event loop hands it typed
//! [`Event`]s with the time ([`Now`]); it decides and hands typed [`Action`]s to the loop to carry
//! out. It owns the launch lifecycle (exec → followed or not → exec-time replay → window closed →
//! learned → saved), the replay bookkeeping (a learned launch waits for its replay's report), the
//! batching of launches and exits written to the state, the planning rounds (their triggers, the
//! owed round, the settle hold after a replayed exec, the re-plan interval), the timer deadline,
//! trace eagerness, configuration reload (prediction turned on, off or changed) and shutdown.
//!
//! It must not make system calls, read clocks or touch files: everything it needs from the world
//! comes through [`DaemonWorld`], which the loop implements with the state store, the kernel's
//! observation (the eBPF observer of every exec, or the tracefs pid filter: [`Observation`]) and
//! the path resolver, and tests implement with a fake that records the actions.
//!
//! Why a trait rather than answers carried in the events: the questions are asked only for some
//! events and in a fixed order with the actions. An exec of a helper under `make` joins a launch
//! and asks nothing, a new launch asks how often its application was learned, and only a launch
//! replayed reads its profile, after its pid went to the kernel's filter (that write must not wait
//! for a state read). So the engine hands each action to [`DaemonWorld::carry_out`] at once, in the
//! order it decides them (as hyperfine's executor), and asks its questions in between. Page events
//! ask nothing and act on nothing: they go in through [`DaemonEngine::on_trace`], without a world,
//! from inside the trace pipe's reader.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use augur_core::model::app::AppIdentity;
use augur_core::model::file_context::{FileContextModel, FileContextRecord, FilePrediction};
use augur_core::model::launcher::{ExecStep, Hint};
use augur_core::model::learn::{LearnSettings, LearningHistory, RefollowHold};
use augur_core::model::profile::{FileProfile, InodeKey, LaunchProfile, Lookup, LookupList, TraceMode, Unresolved, UsedRange};
use augur_core::model::range::PageRange;
use augur_core::model::record::{ActivityRecord, LaunchRecord};
use augur_core::model::usage_trace::Transition;
use augur_core::model::user::{ProcessUser, key_uid};

use crate::config::{Config, PredictSection, ReplayPriority};
use crate::refollow::{self, RefollowVerdict};
use crate::running::{InstanceChange, RunningInstances};
use crate::usage_log::{self, UsageLog};
use crate::window::{
    ActiveLaunch, ExecOutcome, FinishedLaunch, FollowPolicy, FollowStop, LaunchId, LaunchTracker, PageKind, WindowSettings,
};
use crate::workload_run::{FilePrefetch, RunCounts, RunEnd, WorkloadRuns};

/// Launches and exits written to the state in one transaction at most; fewer are written once
/// [`ACTIVITY_FLUSH_NS`] has passed since the last write (and at shutdown).
pub const ACTIVITY_BATCH: usize = 64;
/// See [`ACTIVITY_BATCH`].
pub const ACTIVITY_FLUSH_NS: u64 = 10_000_000_000;

/// For this long after the exec of a launch whose learned pages are replayed, prediction neither
/// plans nor fetches (the round is owed and runs after): a round reads every candidate's profile
/// and checks its residency, CPU and reads that a start of a few tens of milliseconds on a
/// two-core machine would wait for. Execs of applications without a profile do not count.
pub const LAUNCH_SETTLE_NS: u64 = 1_000_000_000;

/// For this long after a followed run's predicted files were last handed out to be loaded,
/// prediction neither plans nor fetches, as while an application starts: the run is reading, and
/// a fetch for later would take its disk and the free memory its next files are loaded into.
/// On the small slow machine, with the build, link and index benchmarks learned, the daemon read
/// 1,064 MiB while Kroeger's reader read 765 (the prediction fetch and the free-memory tier
/// loading the other benchmarks' applications beside its files); with this hold 656, the reader
/// and it 768 together. A run hands out its next files every few seconds while it reads, so the
/// hold lasts the run.
pub const RUN_PREFETCH_SETTLE_NS: u64 = 5_000_000_000;

/// After the memory-pressure trigger fires, no exec-time replay and no prediction fetch starts
/// for this long (PSI's shortest average, avg10, spans 10 s; later rounds then go by it).
pub const PRESSURE_HOLD_NS: u64 = 10_000_000_000;

/// The span `[launch] replay_mib_per_minute` counts over.
pub const REPLAY_BUDGET_SPAN_NS: u64 = 60_000_000_000;

/// What the prefetches of followed workload runs count as in the replay budget's ledger (they
/// share `[launch] replay_mib_per_minute` with exec-time replays): the n-th prefetch handed out
/// is `FILE_PREFETCH_LEDGER_ID - n % FILE_PREFETCH_LEDGER_IDS`; no launch has such an id.
const FILE_PREFETCH_LEDGER_ID: LaunchId = LaunchId::MAX;

/// Padded profiles kept at most (see `DaemonEngine::padded`); beyond that the memory starts over.
const MAX_PADDED_PROFILES: usize = 64;

/// Ids the file prefetches' ledger entries cycle through.
const FILE_PREFETCH_LEDGER_IDS: u64 = 1 << 40;

/// Whether ledger entry `id` is a file prefetch's.
fn is_file_prefetch_entry(id: LaunchId) -> bool {
    id > FILE_PREFETCH_LEDGER_ID - FILE_PREFETCH_LEDGER_IDS
}

/// A run's whole learned file sequence is handed out at its start when it takes at most this
/// fraction (1/n) of the replay budget left then (see [`WorkloadRuns::load_whole`]).
const WHOLE_SEQUENCE_SHARE: u64 = 2;

/// The file-access context models are pruned by age this often.
const CONTEXT_PRUNE_MS: u64 = 24 * 3_600_000;

/// The workloads whose file-access context models changed are written at most this often, at the
/// first run's end or wake-up after it (and at shutdown): a build ends runs every few seconds,
/// and each write encodes a workload's whole model again (a few % of the daemon's CPU while it
/// learned builds).
pub const CONTEXT_SAVE_GAP_NS: u64 = 30_000_000_000;

/// Why the prediction hook is called.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanTrigger {
    /// An application started (its launch window opened): `instance` is its root process id.
    LaunchStarted { app: String, instance: u64 },
    /// An instance of an application ended (its root process exited or exec'd another one).
    AppExited { app: String, instance: u64 },
    /// A launch window closed and was learned.
    LaunchFinished { app: String },
    /// The kernel's memory-pressure trigger fired (a stall above the configured threshold).
    Pressure,
    /// The slow re-plan interval elapsed.
    Interval,
    /// Prediction has just started: the daemon started (after a boot, say), or a reload turned
    /// prediction on or changed the predictor. Plan before anything is launched.
    Start,
}

/// The time of an event: the monotonic clock (ns), the wall clock (Unix ms) and the local wall
/// clock (`unix_ms` shifted by the time zone's offset, ms).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Now {
    /// Monotonic nanoseconds (the clock of process and page events).
    pub mono_ns: u64,
    /// Wall-clock milliseconds since the epoch.
    pub unix_ms: u64,
    /// Local wall-clock milliseconds: time of day.
    pub local_ms: u64,
}

/// What an exec-time replay reported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayReport {
    /// Pages the replayed profile asked for.
    pub pages_wanted: u64,
    /// Of those, pages already resident.
    pub pages_resident: u64,
    /// Pages it loaded.
    pub pages_loaded: u64,
    /// Bytes it read.
    pub bytes_read: u64,
}

/// What happened, as the event loop read it.
pub enum Event {
    /// The loop is set up and tracing: prediction starts when configured.
    Start,
    /// The daemon told it is ready: the first planning round (after a boot the likeliest
    /// applications are loaded before anyone asks).
    Ready,
    /// Process `step.pid` exec'd at `ts_ns` (monotonic); `step` is what `/proc` said of it.
    Exec { step: ExecStep, ts_ns: u64 },
    /// Task `child_pid` (of process `child_tgid`) was created by process `parent_tgid`.
    Fork { parent_tgid: u32, child_pid: u32, child_tgid: u32 },
    /// Task `pid` of process `tgid` exited at `ts_ns` (monotonic).
    Exit { pid: u32, tgid: u32, ts_ns: u64 },
    /// The exec-time replay of `launch` finished.
    ReplayFinished { launch: LaunchId, report: ReplayReport },
    /// A prefetch of files predicted for workload runs finished: it loaded `pages_loaded` pages
    /// in `busy_ns` of the loader's time, having been predicted after an open at
    /// `after_open_ns` (monotonic), if it was (what its runs' prefetch depth is measured by).
    FilePrefetched { pages_loaded: u64, busy_ns: u64, after_open_ns: Option<u64> },
    /// The kernel's memory-pressure trigger fired.
    Pressure,
    /// The loop woke (its timer fired, or anything else): windows whose time is up close, a
    /// re-plan that is due runs.
    Tick,
    /// SIGHUP: the configuration was read again (or could not be).
    Reload(Box<Result<Config, WorldError>>),
    /// SIGTERM or SIGINT, after the replay worker stopped and its reports were handed in: close
    /// every window, save, write what is pending.
    Stop,
    /// The loop is about to sleep: write activity when due, stop tracing what is no longer
    /// followed, set trace eagerness and arm the timer.
    AboutToSleep,
}

/// A page, inode-load or lookup event from the kernel's observation (see
/// [`DaemonEngine::on_trace`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceEvent {
    /// Thread `tid` used or read `pages` of `inode` at `ts_ns` (monotonic).
    Page { tid: u32, ts_ns: u64, kind: PageKind, inode: InodeKey, pages: PageRange },
    /// Thread `tid` needed `inode` from disk at `ts_ns` (monotonic).
    InodeLoad { tid: u32, ts_ns: u64, inode: InodeKey },
    /// Thread `tid` looked up a path at `ts_ns` (monotonic): an open, stat, exec..., failed ones
    /// included (only the eBPF observer sees them).
    Lookup { tid: u32, ts_ns: u64, lookup: Lookup },
    /// Thread `tid` emptied or created `inode` for writing at `ts_ns` (monotonic; an open with
    /// `O_TRUNC`, `O_CREAT | O_EXCL`, `O_TMPFILE`, or `creat`: only the eBPF observer sees them):
    /// what its launch uses of the file from then on is its own output.
    Output { tid: u32, ts_ns: u64, inode: InodeKey },
    /// The kernel started following process `pid` at its exec at `ts_ns` (monotonic), under
    /// [`Observation::EveryExec`]: if no exec or fork of it reaches the daemon (the process
    /// events connector overran), it is taken off after [`UNCLAIMED_EXEC_NS`].
    ExecObserved { pid: u32, ts_ns: u64 },
    /// The kernel's count of the pages a launch followed for its first reads read from disk
    /// (it sends no page record for them), when the launch started by process `root` ended.
    RunDiskReads { root: u32, pages: u64 },
}

/// How long a process the kernel follows from its exec may stay unknown to the daemon (its
/// process event lost) before it is taken off the kernel's set; its exec event is normally read
/// within milliseconds.
pub const UNCLAIMED_EXEC_NS: u64 = 2_000_000_000;

/// Execs observed by the kernel kept for that check, at most (the oldest are dropped).
const UNCLAIMED_MAX: usize = 16_384;

/// How the kernel chooses what the daemon observes, which decides what following costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Observation {
    /// Only the processes the daemon adds to the kernel's pid filter (tracefs), and what they
    /// fork: a launch is traced from when its pid is in force ([`Action::Follow`]), after a
    /// grace period per filter write.
    PidFilter,
    /// Every exec, from its start, with what it forks (the eBPF observer): there is nothing to
    /// add, and a process the daemon does not follow is taken off at its exec
    /// ([`Action::Unfollow`]) so that it costs nothing more.
    EveryExec,
}

/// A launch learned: resolved to files, ready to be saved.
#[derive(Clone, Debug, PartialEq)]
pub struct LearnedLaunch {
    /// The launch it was.
    pub launch: LaunchId,
    /// The application's executable.
    pub exe: String,
    /// What it used.
    pub profile: LaunchProfile,
    /// Its record (hit-rate counters).
    pub record: LaunchRecord,
}

/// What the world resolved of a closed launch's working set.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResolvedLaunch {
    /// Resolved files in first-use order.
    pub files: Vec<FileProfile>,
    /// Totals of what stayed unresolved.
    pub unresolved: Unresolved,
    /// The lookups that repeat what the launch needed from disk beyond its pages (the inodes it
    /// loaded, named).
    pub lookups: Vec<Lookup>,
}

/// What the engine decided; the loop carries it out.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Trace process `pid` (add it to the kernel's pid filter): a launch is followed. Only under
    /// [`Observation::PidFilter`].
    Follow { pid: u32 },
    /// Stop tracing these tasks: their launches are no longer followed (under
    /// [`Observation::EveryExec`]: also a process whose exec the daemon does not follow).
    Unfollow(Vec<u32>),
    /// Stop tracing these processes like [`Action::Unfollow`], but have the kernel count the pages
    /// they read from disk over the next `window_ns` (under [`Observation::EveryExec`] only), for
    /// [`DaemonWorld::disk_reads`], up to `count_limit` pages ([`watch_count_limit`]: the
    /// verdict is known there, and a reader of gigabytes costs the kernel a count per insertion
    /// no longer).
    Watch { pids: Vec<u32>, window_ns: u64, count_limit: u64 },
    /// Keep following the tasks `pids` of a workload run (under [`Observation::EveryExec`] only)
    /// for the files they open, not for their pages (`first_reads_only`), or again for every
    /// page: with first reads only, the kernel records the first page access of each file they
    /// read (what names the file and moves the run on in its sequence), their lookups, forks,
    /// execs and exits, and their page-cache insertions only over the next `disk_reads_ns` (the
    /// run's launch is judged by them). A run of a workload whose file order is settled costs
    /// that instead of every page it touches.
    RunReads { pids: Vec<u32>, first_reads_only: bool, disk_reads_ns: u64 },
    /// A launch of `app` that was replayed but not followed read many pages from disk its profile
    /// did not hold: follow its next launches again until its profile is stable.
    Refollow { app: String },
    /// Keep where `app`'s refollows stand ([`crate::refollow`]), for [`DaemonWorld::refollow_hold`].
    SaveRefollowHold { app: String, hold: RefollowHold },
    /// Load `profile`, application `app`'s, for `launch` at exec, at `priority`, reading only the
    /// files `user` (the user the launch is learned for) may read; report with
    /// [`Event::ReplayFinished`].
    StartReplay { launch: LaunchId, app: String, profile: Arc<LaunchProfile>, priority: ReplayPriority, user: ProcessUser },
    /// Memory pressure: stop the exec-time replays running or queued (each still reports, with
    /// what it loaded).
    StopReplays,
    /// Watch the kernel's memory-pressure trigger (`[predict] pressure_trigger_us` within
    /// `pressure_window_us`; registered again when already watched) or stop watching it. Watched
    /// whenever anything fetches: exec-time replay or prediction.
    WatchPressure(bool),
    /// Save a learned launch to the state ([`Outcome::Failed`] when it could not be).
    SaveLaunch(Box<LearnedLaunch>),
    /// Keep what a launcher's launch was found to start (its next launch expects it).
    SaveHint(Hint),
    /// Write launches and exits to the state.
    WriteActivity(Vec<ActivityRecord>),
    /// Run a planning round. `launching`: an application augur replays is starting now (its
    /// exec-time replay is loading, or it started less than [`LAUNCH_SETTLE_NS`] ago), or a
    /// followed run's files are being prefetched (handed out less than
    /// [`RUN_PREFETCH_SETTLE_NS`] ago).
    /// Answered with [`Outcome::Planned`].
    Plan { trigger: PlanTrigger, launching: bool },
    /// Build the prediction step for the configuration in force (its predictor learns the
    /// launches and exits the state remembers).
    /// [`Outcome::Failed`] when it could not be built.
    BuildPredictionStep,
    /// Drop the prediction step (its fetch stops).
    DropPredictionStep,
    /// Whether the trace pipe wakes the loop on any event (`true`) or only when half full.
    TraceEager(bool),
    /// Whether fanotify opens wake the loop.
    WatchOpens(bool),
    /// Arm the one-shot timer at this monotonic time (ns), or disarm it.
    ArmTimer(Option<u64>),
    /// Load the files a followed run of workload `app` is predicted to open next (each file's
    /// learned ranges, only while its path still names the inode learned), at `priority`,
    /// reading only files `user` may read. Reported back by [`Event::FilePrefetched`], with
    /// `after_open_ns`: when the open they were predicted after happened, if any.
    PrefetchFiles {
        app: String,
        files: Vec<FilePrediction>,
        priority: ReplayPriority,
        user: ProcessUser,
        after_open_ns: Option<u64>,
    },
    /// Save these workloads' file-access context models to the state (`None`: the model dropped
    /// it, delete it).
    SaveFileContexts(Vec<(String, Option<FileContextRecord>)>),
}

/// How an action went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Carried out.
    Done,
    /// A replay or file prefetch carried out from what the loop knew, without reading: the last
    /// one of the same pages found them all resident and nothing left the page cache since.
    AllResident,
    /// Not carried out (the loop logs why).
    Failed,
    /// A planning round ran and returned at monotonic `at_ns`; the step put a round off and wants
    /// one within `owed_in_ms`.
    Planned { owed_in_ms: Option<u64>, at_ns: u64 },
}

/// What went wrong in the world (reading the state or the configuration file): the engine logs it
/// and carries on, so it needs no more than its message.
pub type WorldError = Box<dyn std::error::Error + Send + Sync>;

/// What the engine asks of the world, and where its actions go.
pub trait DaemonWorld {
    /// How many launches of `app` were learned and when the latest was (Unix ms); `None` when
    /// the application is unknown.
    fn learning_history(&mut self, app: &str) -> Result<Option<LearningHistory>, WorldError>;

    /// Where `app`'s refollows stand, as last saved by [`Action::SaveRefollowHold`]; `None`
    /// when it was never refollowed (or is unknown).
    fn refollow_hold(&mut self, app: &str) -> Result<Option<RefollowHold>, WorldError>;

    /// True while the kernel's pid filter is being written (a pid added now would be in force
    /// only after a grace period, too late for a start).
    fn filter_busy(&self) -> bool;

    /// The lookups of the launcher's `PATH` search that found the program `pid` runs (`exe`,
    /// started as `argv0`); asked for followed launches only.
    fn exec_lookups(&mut self, pid: u32, exe: &std::path::Path, argv0: Option<&str>) -> Vec<Lookup>;

    /// `app`'s learned profile as an exec-time replay loads it; `None` when it has none. Shared:
    /// asked at every exec of a known application, it is best kept rather than rebuilt.
    fn replay_profile(&mut self, app: &str, settings: &LearnSettings) -> Result<Option<Arc<LaunchProfile>>, WorldError>;

    /// The application an earlier launch of launcher `key` with `argv` was found to start.
    fn launcher_hint(&mut self, key: &str, argv: &[String]) -> Result<Option<String>, WorldError>;

    /// Since when (monotonic ns) process `root`'s pid has been in force in the kernel's filter,
    /// once (the answer is taken).
    fn take_in_force_since(&mut self, root: u32) -> Option<u64>;

    /// Learns the paths the processes `pids` map and hold open (a launch closed while they run),
    /// as far as `inodes` (the files the launch used) need them: not at all when each is named
    /// already, and no further than the process that names the last.
    fn learn_paths_of(&mut self, pids: &[u32], inodes: &[InodeKey]);

    /// The pages the processes watched for a launch ([`Action::Watch`]) read from disk, and
    /// forgets them; `None` when the kernel did not count them.
    fn disk_reads(&mut self, pids: &[u32]) -> Option<u64>;

    /// The pages the launch of process `root`, followed for its first reads, read from disk so
    /// far by the kernel's count (it sends no page record for them); `None` when the kernel does
    /// not count them (or the launch ended: [`TraceEvent::RunDiskReads`] carried the count).
    fn run_disk_reads(&mut self, root: u32) -> Option<u64>;

    /// MemAvailable now, bytes, no more than the room left in the daemon's memory cgroups (what
    /// it loads is charged there); `None` when it cannot be read.
    fn memory_available(&mut self) -> Option<u64>;

    /// The file-access context models the state keeps (read at the start).
    fn file_contexts(&mut self) -> Result<FileContextModel, WorldError>;

    /// Resolves a closed launch's working set to files, and names the inodes it loaded.
    fn resolve(&mut self, working_set: Vec<(InodeKey, Vec<UsedRange>)>, inodes_loaded: &[InodeKey]) -> ResolvedLaunch;

    /// Carries out `action` under `config`, the configuration in force.
    fn carry_out(&mut self, action: Action, config: &Config) -> Outcome;
}

/// What the engine's bounded lists and queues dropped, by cause ([`DaemonEngine::drops`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineDrops {
    /// Execs that started no launch: the launch list was full ([`crate::window::MAX_LAUNCHES`]).
    pub launches: u64,
    /// Execs inside a launch not recorded for its identity ([`crate::window::MAX_EXECS_PER_LAUNCH`]).
    pub execs_not_recorded: u64,
    /// Page, inode and lookup events of no launch dropped from the full look-behind backlog.
    pub backlog_events: u64,
    /// Oldest events dropped from the full usage log (`augur record`).
    pub usage_log_events: u64,
    /// Exec-time replays not started because the same application's replay was in flight.
    pub replays_coalesced: u64,
    /// Exec-time replays not started because the profile fills a launch window and is larger
    /// than the memory a replay may use ([`DaemonEngine`]'s `replay`).
    pub replays_beyond_memory: u64,
    /// Exec-time replays not started because the replay budget (this minute's, or memory's)
    /// was spent: counted, not logged one by one (a program run in a loop would flood the log).
    pub replays_out_of_budget: u64,
    /// Execs the kernel follows dropped from the full list of those not yet claimed.
    pub observed_execs: u64,
}

/// The daemon's decisions. See the module documentation.
pub struct DaemonEngine {
    config: Config,
    /// What the kernel observes without being asked.
    observation: Observation,
    /// Execs the kernel follows whose process the daemon may not know yet, oldest first
    /// ([`TraceEvent::ExecObserved`]).
    observed_execs: std::collections::VecDeque<(u32, u64)>,
    /// The trace mode in use and the page size profiles are recorded in.
    mode: TraceMode,
    page_size: u64,
    tracker: LaunchTracker,
    /// Which launches' root processes still run, for the predictors' launch/exit pairs.
    running: RunningInstances,
    /// What ran since the start, for `augur record`.
    usage_log: UsageLog,
    /// Launches whose replay is still running, and finished launches waiting for their replay.
    replays_in_flight: HashMap<LaunchId, Option<LearnedLaunch>>,
    /// The application each replay in flight loads: a launch of one of them is not replayed
    /// again (the replay in flight loads its pages already).
    replaying_apps: HashMap<LaunchId, String>,
    /// Each application's profile as last padded for a replay: (the profile padded, the padding,
    /// the result), reused while the state hands out the same profile (a program run in a loop
    /// padded a copy of its profile at every exec).
    padded: HashMap<String, (Arc<LaunchProfile>, u64, Arc<LaunchProfile>)>,
    /// Replays not started because the same application's was in flight.
    replays_coalesced: u64,
    /// Replays not started: a window-filling profile larger than the memory a replay may use.
    replays_beyond_memory: u64,
    /// See [`EngineDrops::replays_out_of_budget`].
    replays_out_of_budget: u64,
    /// Launches not learned because they were traced late in their window (tracefs only).
    launches_traced_late: u64,
    /// Execs observed by the kernel dropped from the full unclaimed list ([`UNCLAIMED_MAX`]).
    observed_execs_dropped: u64,
    /// Refollows held so far.
    refollows_held: u64,
    /// A prediction step is in place.
    step: bool,
    next_replan_ns: Option<u64>,
    /// Monotonic time of the exec of the newest launch whose learned pages were replayed.
    last_launch_ns: Option<u64>,
    /// Whether the trace pipe currently wakes the loop on any event (a launch is in progress).
    trace_eager: bool,
    /// Whether fanotify opens wake the loop.
    opens_watched: bool,
    /// Whether the memory-pressure trigger is watched.
    pressure_watched: bool,
    /// No exec-time replay starts before this monotonic time (ns): memory pressure rose.
    replay_held_until_ns: Option<u64>,
    /// Exec-time replays and file prefetches of the last [`REPLAY_BUDGET_SPAN_NS`]: (start,
    /// launch or file prefetch, bytes: asked, then read once it reported), oldest first.
    replay_spent: std::collections::VecDeque<(u64, LaunchId, u64)>,
    /// Launches and exits not yet written to the state.
    pending_activity: Vec<ActivityRecord>,
    /// When `pending_activity` was last written (monotonic ns).
    activity_flushed_ns: u64,
    /// Workload runs followed past their launch windows for their file sequences, and the
    /// file-access context model they feed.
    runs: WorkloadRuns,
    /// The time of the event handled last: page events carry only the monotonic time, and the
    /// model's ages are wall-clock.
    clock: Now,
    /// When the file-access context models were last pruned by age (Unix ms).
    contexts_pruned_ms: u64,
    /// When changed file-access context models were last written (monotonic ns).
    contexts_saved_ns: Option<u64>,
    /// A run ended within [`CONTEXT_SAVE_GAP_NS`] of the last write: its models are written at
    /// the first wake-up after the gap.
    contexts_save_owed: bool,
    /// Files predicted for runs not prefetched: the replay budget was spent.
    files_over_budget: u64,
    /// File prefetches handed out, and reported done, since the start: the worker does them in
    /// order, so the next to report is `file_prefetches_settled`'s ledger entry. (Those the loop
    /// answers from memory may report out of that order; each report still settles one entry, so
    /// what the ledger sums is right, only an entry's time may be a neighbour's.)
    file_prefetches_handed: u64,
    file_prefetches_settled: u64,
}

/// The window settings `c` gives in trace `mode`, profiles recorded in pages of `page_size`.
pub fn window_settings(c: &Config, mode: TraceMode, page_size: u64) -> WindowSettings {
    WindowSettings {
        max_ns: c.window_max_ns(),
        quiet_ns: c.quiet().as_nanos() as u64,
        mode,
        max_pages: c.launch.max_launch_mib.saturating_mul(1 << 20) / page_size.max(1),
        read_through_pages: c.launch.read_through_mib.saturating_mul(1 << 20) / page_size.max(1),
    }
}

/// Which launches `c` follows.
pub fn follow_policy(c: &Config) -> FollowPolicy {
    FollowPolicy {
        first_launches: c.launch.follow_first_launches,
        stable_launches: c.launch.stable_launches,
        max_unstable_launches: c.launch.max_unstable_launches,
        refollow_after_ms: c.launch.refollow_after_secs.saturating_mul(1000),
    }
}

/// A watched launch reads at least this many pages from disk before its profile is judged to
/// lack pages (1 MiB of 4 KiB pages: what any launch may read of its data files).
pub const REFOLLOW_MIN_PAGES: u64 = 256;

/// Whether a launch replayed but not followed, which read `read` pages from disk with a profile
/// of `expected` pages, `unloaded` of them neither resident at its exec nor loaded by its replay,
/// shows its profile lacks pages: beyond those `unloaded` pages it read at least
/// [`REFOLLOW_MIN_PAGES`] and more than `share` of its profile's size.
///
/// The `unloaded` pages are no evidence: a launch racing its replay (a cold start, the replay
/// loading the profile while the program already reads it) reads them itself, and the kernel's
/// count of what it read from disk cannot tell them from pages its profile lacks. Taking them
/// for lacking pages followed such an application again after nearly every cold start.
pub fn profile_lacks_pages(read: u64, expected: u64, unloaded: u64, share: f64) -> bool {
    let share = refollow_share(share);
    let beyond = read.saturating_sub(unloaded.min(expected));
    beyond >= REFOLLOW_MIN_PAGES && beyond as f64 > share * expected as f64
}

/// `refollow_read_share` as the refollow rule takes it: never negative, and 1 when not a number.
fn refollow_share(share: f64) -> f64 {
    if share.is_nan() { 1.0 } else { share.max(0.0) }
}

/// The count of pages read from disk past which a launch replayed with a profile of `expected`
/// pages is known to lack pages, whatever its replay left unloaded ([`profile_lacks_pages`] with
/// `share`): a watched launch's count stops there.
pub fn watch_count_limit(expected: u64, share: f64) -> u64 {
    let share = refollow_share(share);
    // Saturating: a float beyond u64 converts to u64::MAX.
    let beyond = REFOLLOW_MIN_PAGES.max((share * expected as f64).ceil() as u64);
    expected.saturating_add(beyond).saturating_add(1)
}

/// True when the prediction step must be built again for `new`: it reads its predictor only
/// when it is built (the other settings it reads each round).
fn step_settings_changed(old: &PredictSection, new: &PredictSection) -> bool {
    old.predictor != new.predictor
}

/// True when anything under `c` reads pages ahead (exec-time replay or prediction): memory
/// pressure must then be watched.
fn fetches(c: &Config) -> bool {
    c.launch.replay_on_exec || c.predict.enabled
}

/// Whether a launch of `app` (process `pid`) is followed now: by the follow `policy`, and not
/// while the pid filter is being written unless the process is `traced` already (a process of a
/// followed launch re-keyed to its application needs no filter write).
/// Whether launch `l` of a learned workload is not followed as a run: not followed to learn its
/// start, its workload settled (its run would be a sample), and its replay answered as all
/// resident. Nothing has left the page cache since every page of its profile was found there, so
/// the files its workload's earlier runs read are there too: following this run would only cost
/// the daemon a record per file and a prefetch of what is resident (a program run in a loop, a
/// build's compiler: a millisecond of the daemon's time each). A cold launch is followed.
fn skips_run(runs: &WorkloadRuns, l: &ActiveLaunch, now: Now) -> bool {
    !l.followed && l.replay_all_resident && runs.is_settled(&l.app.key, now.unix_ms)
}

fn decide_follow(
    policy: FollowPolicy,
    world: &mut impl DaemonWorld,
    now: Now,
    app: &AppIdentity,
    pid: u32,
    traced: bool,
) -> bool {
    let wanted = match world.learning_history(&app.key) {
        Ok(history) => policy.follows(&history.unwrap_or_default(), now.unix_ms),
        Err(e) => {
            tracing::warn!("reading what is known of {}: {e}", app.key);
            true
        }
    };
    // While the filter is being written, this launch's pid would be in force only after a grace
    // period, too late for its start: it is left for a later launch to learn.
    let follow = wanted && (traced || !world.filter_busy());
    if wanted && !follow {
        tracing::debug!("{} (pid {pid}) not followed this time: the pid filter is being written", app.key);
    }
    follow
}

/// What a launch's profile keeps of its lookups: the launcher's `PATH` search that found the
/// program, then the lookups its processes made (observed by the kernel, in first-use order),
/// then the inodes it needed from disk, named (`named`); each path once.
fn launch_lookups(launch: &mut ActiveLaunch, named: Vec<Lookup>) -> Vec<Lookup> {
    let observed = std::mem::take(&mut launch.lookups).finish();
    if observed.is_empty() {
        let mut lookups = launch.exec_lookups.clone();
        lookups.extend(named);
        return lookups;
    }
    let mut list = LookupList::new();
    for l in launch.exec_lookups.iter().cloned().chain(observed).chain(named) {
        list.record(l.path, l.kind);
    }
    list.finish()
}

/// The time of an event that happened at monotonic `ts_ns`, read at `now`: the wall clocks moved
/// back by how long ago it happened (an event stamped after `now` is taken as now).
pub fn event_time(now: Now, ts_ns: u64) -> Now {
    let ago_ms = now.mono_ns.saturating_sub(ts_ns) / 1_000_000;
    Now {
        mono_ns: ts_ns.min(now.mono_ns),
        unix_ms: now.unix_ms.saturating_sub(ago_ms),
        local_ms: now.local_ms.saturating_sub(ago_ms),
    }
}

/// The process whose launch a new task belongs to. A new thread's reported parent is the parent
/// of its whole process (the kernel gives threads their group leader's `real_parent`: for java
/// that is the shell), so a thread belongs to its own thread group; a new process to its parent.
pub fn creator_of(parent_tgid: u32, child_pid: u32, child_tgid: u32) -> u32 {
    if child_tgid != child_pid { child_tgid } else { parent_tgid }
}

impl DaemonEngine {
    /// Nothing in progress, under `config`, observing as `observation` says in `mode` with
    /// profiles in pages of `page_size`, started at `now`.
    pub fn new(config: Config, observation: Observation, mode: TraceMode, page_size: u64, now: Now) -> Self {
        let mut runs = WorkloadRuns::new();
        runs.set_follow(follow_policy(&config), config.launch.stable_new_share);
        runs.set_read_through(window_settings(&config, mode, page_size).read_through_pages);
        DaemonEngine {
            tracker: LaunchTracker::new(window_settings(&config, mode, page_size)),
            config,
            observation,
            observed_execs: std::collections::VecDeque::new(),
            mode,
            page_size,
            running: RunningInstances::new(),
            usage_log: UsageLog::new(now.unix_ms, usage_log::MAX_EVENTS),
            replays_in_flight: HashMap::new(),
            replaying_apps: HashMap::new(),
            padded: HashMap::new(),
            replays_coalesced: 0,
            replays_beyond_memory: 0,
            replays_out_of_budget: 0,
            launches_traced_late: 0,
            observed_execs_dropped: 0,
            refollows_held: 0,
            step: false,
            next_replan_ns: None,
            last_launch_ns: None,
            trace_eager: true,
            opens_watched: false,
            pressure_watched: false,
            replay_held_until_ns: None,
            replay_spent: std::collections::VecDeque::new(),
            pending_activity: Vec::new(),
            activity_flushed_ns: now.mono_ns,
            runs,
            clock: now,
            contexts_pruned_ms: now.unix_ms,
            contexts_saved_ns: None,
            contexts_save_owed: false,
            files_over_budget: 0,
            file_prefetches_handed: 0,
            file_prefetches_settled: 0,
        }
    }

    /// Launches whose application was not followed again though they read pages its profile
    /// lacks: its last refollows taught nothing ([`crate::refollow`]).
    pub fn refollows_held(&self) -> u64 {
        self.refollows_held
    }

    /// What following workload runs did since the start: runs followed, files learned and
    /// predicted, and files not prefetched for the budget.
    pub fn run_counts(&self) -> (RunCounts, u64) {
        (self.runs.counts(), self.files_over_budget)
    }

    /// The file-access context models in memory.
    pub fn file_contexts(&self) -> &FileContextModel {
        self.runs.model()
    }

    /// Wall-clock ms at monotonic `ts_ns`, from the time of the event handled last.
    fn unix_ms_at(&self, ts_ns: u64) -> u64 {
        let c = self.clock;
        if ts_ns >= c.mono_ns { c.unix_ms.saturating_add((ts_ns - c.mono_ns) / 1_000_000) } else { c.unix_ms }
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Launches in progress.
    pub fn launches_in_progress(&self) -> usize {
        self.tracker.active().len()
    }

    /// True when a launch in progress is followed (its page events and opened paths are wanted).
    pub fn is_following(&self) -> bool {
        self.tracker.is_following()
    }

    /// True when no launch is in progress.
    pub fn is_idle(&self) -> bool {
        self.tracker.is_idle()
    }

    /// True when a prediction step is in place (prediction is on and its step was built).
    pub fn predicting(&self) -> bool {
        self.config.predict.enabled && self.step
    }

    /// When the next re-plan is due (monotonic ns), if prediction is on.
    pub fn next_replan_ns(&self) -> Option<u64> {
        self.next_replan_ns
    }

    /// What ran since the start, for `augur record`.
    pub fn usage_log(&self) -> &UsageLog {
        &self.usage_log
    }

    /// A page or inode-load event; attributed to its launch (or kept for the exec look-behind).
    /// It asks nothing and acts on nothing at once: a launch it stops following is handed back at
    /// [`Event::AboutToSleep`].
    pub fn on_trace(&mut self, event: TraceEvent) {
        match event {
            TraceEvent::Page { tid, ts_ns, kind, inode, pages } => {
                if self.runs.holds(tid) {
                    let now_ms = self.unix_ms_at(ts_ns);
                    self.runs.on_page(tid, ts_ns, kind == PageKind::Insertion, inode, pages, now_ms);
                }
                self.tracker.on_page(tid, ts_ns, kind, inode, pages)
            }
            TraceEvent::InodeLoad { tid, ts_ns, inode } => self.tracker.on_inode_load(tid, ts_ns, inode),
            TraceEvent::Lookup { tid, ts_ns, lookup } => {
                self.runs.on_lookup(tid, &lookup);
                self.tracker.on_lookup(tid, ts_ns, lookup)
            }
            TraceEvent::Output { tid, ts_ns, inode } => {
                self.runs.on_output(tid, inode);
                self.tracker.on_output(tid, ts_ns, inode)
            }
            TraceEvent::ExecObserved { pid, ts_ns } => {
                if self.observed_execs.len() >= UNCLAIMED_MAX {
                    self.observed_execs.pop_front();
                    self.observed_execs_dropped += 1;
                }
                self.observed_execs.push_back((pid, ts_ns));
            }
            TraceEvent::RunDiskReads { root, pages } => self.runs.add_disk_reads(root, pages),
        }
    }

    /// Unattributed page events dropped from the full backlog (diagnostics).
    pub fn backlog_dropped(&self) -> u64 {
        self.tracker.backlog_dropped
    }

    /// Launches not learned since the start because they were traced late in their window (the
    /// tracefs observer's pid filter came into force after the program had started its work; the
    /// eBPF observer follows launches from their exec in the kernel, so never).
    pub fn launches_traced_late(&self) -> u64 {
        self.launches_traced_late
    }

    /// What the engine's bounded lists and queues dropped since the start, by cause.
    pub fn drops(&self) -> EngineDrops {
        EngineDrops {
            launches: self.tracker.launches_dropped,
            execs_not_recorded: self.tracker.execs_not_recorded,
            backlog_events: self.tracker.backlog_dropped,
            usage_log_events: self.usage_log.dropped,
            replays_coalesced: self.replays_coalesced,
            replays_beyond_memory: self.replays_beyond_memory,
            replays_out_of_budget: self.replays_out_of_budget,
            observed_execs: self.observed_execs_dropped,
        }
    }

    /// Decides what `event` at `now` means; the actions go to `world` as they are decided.
    pub fn handle(&mut self, world: &mut impl DaemonWorld, now: Now, event: Event) {
        self.clock = now;
        match event {
            Event::Start => {
                match world.file_contexts() {
                    Ok(model) => {
                        self.runs.set_model(model);
                        self.runs.prune(now.unix_ms);
                    }
                    Err(e) => tracing::warn!("reading the file-access context models: {e}; starting with none"),
                }
                if fetches(&self.config) {
                    self.pressure_watched = true;
                    world.carry_out(Action::WatchPressure(true), &self.config);
                }
                if self.config.predict.enabled {
                    self.build_step(world, now);
                }
            }
            Event::Ready => {
                if self.predicting() {
                    self.plan(world, now, PlanTrigger::Start);
                    self.schedule_replan(now);
                }
            }
            Event::Exec { step, ts_ns } => {
                self.close_untimed(world, now);
                self.on_exec(world, now, step, ts_ns)
            }
            // Threads are tracked too: page events are attributed by thread id, because the
            // tracer's pid->tgid cache can be stale for a recycled pid. The kernel follows the
            // children of followed processes itself (event-fork).
            Event::Fork { parent_tgid, child_pid, child_tgid } => {
                self.close_untimed(world, now);
                let creator = creator_of(parent_tgid, child_pid, child_tgid);
                self.runs.on_fork(creator, child_pid);
                self.tracker.on_fork(creator, child_pid, child_pid != child_tgid)
            }
            Event::Exit { pid, tgid, ts_ns } => {
                self.runs.on_exit(pid, ts_ns);
                self.tracker.on_exit(pid, ts_ns);
                if let Some(change) = self.running.on_exit(pid, tgid) {
                    // Recorded when it happened: observing every exec, exits wake no one and
                    // are read at the loop's next wake-up.
                    let at = event_time(now, ts_ns);
                    self.report_change(world, now, at, change);
                }
            }
            Event::ReplayFinished { launch, report } => self.on_replay_finished(world, now, launch, report),
            Event::FilePrefetched { pages_loaded, busy_ns, after_open_ns } => {
                // What it read counts against the budget, not what it asked for, as for replays
                // (a program run in a loop found its files resident and spent the budget anyway,
                // so that its exec-time replays, answered from memory, were no longer asked for).
                let id = FILE_PREFETCH_LEDGER_ID - self.file_prefetches_settled % FILE_PREFETCH_LEDGER_IDS;
                self.file_prefetches_settled += 1;
                if let Some(spent) = self.replay_spent.iter_mut().find(|(_, l, _)| *l == id) {
                    spent.2 = pages_loaded.saturating_mul(self.page_size.max(1));
                }
                self.runs.prefetch_done(pages_loaded, busy_ns);
                if let Some(t) = after_open_ns {
                    self.runs.prefetch_lag(now.mono_ns.saturating_sub(t).saturating_sub(busy_ns));
                }
            }
            Event::Pressure => self.on_pressure(world, now),
            Event::Tick => {
                for finished in self.tracker.expire(now.mono_ns) {
                    self.finish_launch(world, now, finished);
                }
                self.expire_runs(world, now);
                if self.next_replan_ns.is_some_and(|t| t <= now.mono_ns) {
                    self.schedule_replan(now);
                    self.plan(world, now, PlanTrigger::Interval);
                }
            }
            Event::Reload(loaded) => match *loaded {
                Ok(new) => self.reload(world, now, new),
                Err(e) => tracing::error!("configuration not reloaded, keeping the old one: {e}"),
            },
            Event::Stop => self.stop(world, now),
            Event::AboutToSleep => self.about_to_sleep(world, now),
        }
    }

    fn on_exec(&mut self, world: &mut impl DaemonWorld, now: Now, step: ExecStep, ts_ns: u64) {
        let tgid = step.pid;
        // A process of a followed launch is traced already (the kernel follows the children of
        // followed processes itself).
        let traced = self.tracker.follows_process(tgid);
        // A program a followed run's process starts once the run's launch window closed is part of
        // the run: the kernel reports its pages as the run's, each once, so a launch of its own
        // would learn only part of them. (Inside the window, the launch's identity decides.)
        let in_run = self.runs.holds(tgid);
        let joins_run = in_run && !self.tracker.knows_process(tgid);
        let policy = follow_policy(&self.config);
        let outcome = self.tracker.on_exec(step, ts_ns, |app| !joins_run && decide_follow(policy, world, now, app, tgid, traced));
        match &outcome {
            ExecOutcome::Started(id) | ExecOutcome::Relabelled(id) | ExecOutcome::Adopted(id) => {
                tracing::debug!("launch {id}: pid {tgid} exec'd, {outcome:?}");
                self.keyed(world, now, *id, (!traced).then_some(tgid));
            }
            ExecOutcome::Joined(id) => tracing::trace!("launch {id}: pid {tgid} joined"),
            ExecOutcome::Dropped => tracing::debug!("pid {tgid} exec'd while the launch list was full: no launch"),
        }
        // A new launch of an application is followed as a workload run past its window, for the
        // files it opens (observing every exec only: the kernel follows it from its exec): a
        // launch followed to learn its start, and every launch of a workload whose files were
        // learned (to prefetch them; such a launch is not watched: its run sees what it reads).
        let mut skipped_run = false;
        if self.observation == Observation::EveryExec
            && !joins_run
            && let ExecOutcome::Started(id) | ExecOutcome::Relabelled(id) = &outcome
            && let Some(l) = self.tracker.get(*id)
            && l.identity.app_stable()
            && !l.identity.provisional()
            && (l.followed || self.runs.model().app(&l.app.key).is_some())
            && {
                skipped_run = skips_run(&self.runs, l, now);
                !skipped_run
            }
        {
            let (root, key, user) = (l.root, l.app.key.clone(), l.identity.app_user().clone());
            // A launch replayed only is judged by what it reads from disk, as a watched one is.
            let judged = !l.followed && l.replayed.is_some() && l.stopped.is_none();
            let run = if self.runs.rekey(root, &key) {
                tracing::debug!("launch {id}: its workload run is of {key} now");
                true
            } else if self.runs.start(root, &key, user, ts_ns) {
                tracing::debug!("launch {id}: {key} (pid {root}) followed as a workload run for the files it opens");
                true
            } else {
                false
            };
            // A workload whose whole learned sequence is small beside the budget gets it all at once.
            // A sampled run too: the sample changes what the kernel sends, not what is prefetched.
            if run && self.fetches_files(now) {
                let max_pages = self.replay_budget_bytes(world, now).0 / self.page_size.max(1) / WHOLE_SEQUENCE_SHARE;
                if self.runs.load_whole(root, max_pages) {
                    tracing::debug!("launch {id}: {key}'s whole learned file sequence handed out at its start");
                }
            }
            if judged {
                let window_ns = self.config.window_max_ns();
                self.runs.count_disk_reads(root, ts_ns.saturating_add(window_ns));
            }
            // A run of a settled workload is a sample, followed for the files it opens only (see
            // about_to_sleep).
            if run && self.runs.sample(root, now.unix_ms) {
                tracing::debug!("launch {id}: {key}'s run is a sample, followed for the files it opens");
            }
        }
        if skipped_run {
            tracing::debug!("pid {tgid}: its workload is settled and its pages resident: not followed as a run");
            self.runs.skipped_resident();
        }
        // The kernel follows every exec from its start: one the daemon does not follow (an
        // application replayed only, a helper of a launch not followed) is taken off at once. A
        // known application's launch is watched instead: the kernel counts what it reads from
        // disk, which says whether its profile still holds what it needs. A run's processes stay.
        if self.observation == Observation::EveryExec && !self.tracker.follows_process(tgid) && !self.runs.holds(tgid) {
            let id = match &outcome {
                ExecOutcome::Started(id) | ExecOutcome::Relabelled(id) | ExecOutcome::Adopted(id) | ExecOutcome::Joined(id) => {
                    Some(*id)
                }
                ExecOutcome::Dropped => None,
            };
            let watch = id.and_then(|id| self.tracker.get_mut(id)).filter(|l| l.replayed.is_some() && l.stopped.is_none());
            match watch {
                Some(l) => {
                    l.watched.push(tgid);
                    let window_ns = self.config.window_max_ns();
                    let count_limit = watch_count_limit(l.pages_expected, self.config.launch.refollow_read_share);
                    world.carry_out(Action::Watch { pids: vec![tgid], window_ns, count_limit }, &self.config);
                }
                None => {
                    world.carry_out(Action::Unfollow(vec![tgid]), &self.config);
                }
            }
        }
    }
    /// Launch `id` is now of the application its identity decided (it started, or was re-keyed):
    /// trace `new_pid` when the launch is followed and that process is not traced yet, learn
    /// the lookups that found the program, replay its profile, report the instance. Nothing of
    /// this for an application that cannot be learned (memfd, throwaway), nor replay or report
    /// for a known wrapper or launcher that has not handed off yet (`timeout`, `xdg-open`).
    fn keyed(&mut self, world: &mut impl DaemonWorld, now: Now, id: LaunchId, new_pid: Option<u32>) {
        let Some(l) = self.tracker.get_mut(id) else { return };
        let (key, pid, followed) = (l.app.key.clone(), l.identity.app_pid(), l.followed);
        let (stable, provisional) = (l.identity.app_stable(), l.identity.provisional());
        let (exe, argv0) = (l.app.exe.clone(), l.argv.first().cloned());
        // Only followed launches reach the kernel's pid filter: an exec of a known application
        // costs no filter write (each one waits for a grace period, see sense::pid_filter).
        // Observing every exec, the kernel follows it already.
        if followed {
            if let Some(p) = new_pid.filter(|_| self.observation == Observation::PidFilter) {
                world.carry_out(Action::Follow { pid: p }, &self.config);
            }
            // Only a followed launch pays for this: environ and a stat per PATH directory.
            let lookups = world.exec_lookups(pid, &exe, argv0.as_deref());
            if let Some(l) = self.tracker.get_mut(id) {
                l.exec_lookups = lookups;
            }
        }
        let how = if followed { "followed" } else { "replayed only" };
        if !stable {
            tracing::debug!("launch {id}: {key} (pid {pid}) is a memfd or throwaway executable: not replayed, not learned");
            return;
        }
        // A launcher that started another application before: expect it, and replay that
        // application's profile now, at the launcher's exec, not when the application is exec'd.
        let mut expected = None;
        if let Some(l) = self.tracker.get_mut(id) {
            let (k, argv) = l.identity.hint_lookup();
            match world.launcher_hint(k, argv) {
                Ok(Some(app)) => {
                    tracing::debug!("launch {id}: {key} started {app} before: expecting it");
                    l.identity.expect(app.clone());
                    expected = Some(app);
                }
                Ok(None) => {}
                Err(e) => tracing::warn!("reading what {key} started before: {e}"),
            }
        }
        tracing::debug!("launch {id}: {key} (pid {pid}, {how}{})", if provisional { ", a wrapper so far" } else { "" });
        let replay_key = match &expected {
            Some(app) => Some(app.as_str()),
            None if provisional => None,
            None => Some(key.as_str()),
        };
        if let Some(replay_key) = replay_key
            && self.config.launch.replay_on_exec
            && !self.replays_in_flight.contains_key(&id)
            && self.tracker.get(id).is_some_and(|l| l.replayed.as_deref() != Some(replay_key))
            && self.replay(world, now, id, replay_key)
        {
            // A start augur serves: prediction leaves it the machine for a moment. Other execs
            // (a shell loop's, a build's) do not hold prediction off.
            self.last_launch_ns = Some(now.mono_ns);
        }
        if provisional {
            return;
        }
        for change in self.running.on_launch(pid, &key) {
            self.report_change(world, now, now, change);
        }
    }

    /// Memory pressure rose: the exec-time replays stop and none starts for
    /// [`PRESSURE_HOLD_NS`]; the prediction step stops fetching.
    fn on_pressure(&mut self, world: &mut impl DaemonWorld, now: Now) {
        let held = self.replay_held_until_ns.is_some_and(|t| now.mono_ns < t);
        self.replay_held_until_ns = Some(now.mono_ns.saturating_add(PRESSURE_HOLD_NS));
        if !self.replays_in_flight.is_empty() {
            tracing::info!("memory pressure rose: exec-time replay stopped");
            world.carry_out(Action::StopReplays, &self.config);
        } else if !held {
            tracing::debug!("memory pressure rose: no exec-time replay for {} s", PRESSURE_HOLD_NS / 1_000_000_000);
        }
        self.plan(world, now, PlanTrigger::Pressure);
    }

    /// Bytes exec-time replays may still read now: `[launch] replay_max_mib` for one launch,
    /// within what is left of `replay_mib_per_minute`, and no more than the prediction budget's
    /// share (`[predict] budget_available_fraction`) of the memory available at the exec: where
    /// memory is short, a replay larger than that evicts its own first pages (or the program's)
    /// before the program uses them, and the launch reads them twice. The second value is that
    /// memory share alone (`None` when the memory available is unknown).
    fn replay_budget_bytes(&mut self, world: &mut impl DaemonWorld, now: Now) -> (u64, Option<u64>) {
        while self.replay_spent.front().is_some_and(|&(t, _, _)| t.saturating_add(REPLAY_BUDGET_SPAN_NS) <= now.mono_ns) {
            self.replay_spent.pop_front();
        }
        let spent: u64 = self.replay_spent.iter().map(|&(_, _, b)| b).sum();
        let l = &self.config.launch;
        let per_minute = l.replay_mib_per_minute.saturating_mul(1 << 20);
        let budget = l.replay_max_mib.saturating_mul(1 << 20).min(per_minute.saturating_sub(spent));
        match world.memory_available() {
            Some(available) => {
                let fraction = self.config.predict.budget_available_fraction;
                let fraction = if fraction.is_finite() { fraction.clamp(0.0, 1.0) } else { 0.0 };
                let memory = (available as f64 * fraction) as u64;
                (budget.min(memory), Some(memory))
            }
            None => (budget, None),
        }
    }

    /// Starts the exec-time replay of `key`'s learned profile, within the replay budget and not
    /// while memory pressure holds replay off; true when one was started.
    fn replay(&mut self, world: &mut impl DaemonWorld, now: Now, id: LaunchId, key: &str) -> bool {
        if self.replay_held_until_ns.is_some_and(|t| now.mono_ns < t) {
            tracing::debug!("launch {id}: {key} not replayed: memory pressure rose less than 10 s ago");
            return false;
        }
        if self.replaying_apps.values().any(|k| k == key) {
            // An exec flood of one application: one replay loads its pages for all.
            self.replays_coalesced += 1;
            return false;
        }
        let profile = match world.replay_profile(key, &self.config.learn_settings()) {
            Ok(Some(p)) => p,
            Ok(None) => return false,
            Err(e) => {
                tracing::warn!("reading the profile of {key}: {e}");
                return false;
            }
        };
        let expected = profile.page_count();
        if expected == 0 {
            return false;
        }
        if let Some(l) = self.tracker.get_mut(id) {
            l.pages_expected = expected;
            l.replayed = Some(key.to_string());
        }
        let page_size = profile.page_size.max(1);
        let (budget_bytes, memory_bytes) = self.replay_budget_bytes(world, now);
        if let Some(memory_bytes) = memory_bytes {
            if fills_a_window_beyond_memory(expected, page_size, self.config.launch.max_launch_mib, memory_bytes) {
                // Not a start but a workload larger than its window (DEAR's random readers of a
                // file larger than their memory): the program itself reads past what a replay
                // would load in the memory left and pushes those pages out before it comes back
                // to them, so a replay at its exec only adds reads.
                tracing::debug!(
                    "launch {id}: {key} not replayed: its {expected} pages fill a launch window and exceed the {} MiB a replay may use",
                    memory_bytes >> 20
                );
                self.replays_beyond_memory += 1;
                return false;
            }
        }
        let budget_pages = budget_bytes / page_size;
        if budget_pages == 0 {
            tracing::debug!("launch {id}: {key} not replayed: no replay budget left (this minute's, or memory)");
            self.replays_out_of_budget += 1;
            return false;
        }
        // Padded where memory is plentiful and the padding fits the budget; exact pages otherwise.
        let pad = self.config.launch.replay_pad_for(world.memory_available());
        let profile = match (pad > 0).then(|| self.padded_profile(key, &profile, pad)) {
            Some(padded) if padded.page_count() <= budget_pages => padded,
            _ => profile,
        };
        let expected_padded = profile.page_count();
        let profile = if expected_padded > budget_pages {
            tracing::debug!("launch {id}: {key} replayed in part: {budget_pages} of its {expected} pages (the replay budget)");
            Arc::new(profile.first_pages(budget_pages))
        } else {
            profile
        };
        let bytes = profile.byte_count();
        let priority = self.config.launch.replay_io_priority;
        // The profile is the key's user's (a launcher's expected application is learned for the
        // same user as the launcher); its groups are the launch's when it runs as that user.
        let user = match self.tracker.get(id).map(|l| l.identity.app_user()) {
            Some(u) if u.uid == key_uid(key) => u.clone(),
            _ => ProcessUser::without_groups(key_uid(key)),
        };
        let outcome =
            world.carry_out(Action::StartReplay { launch: id, app: key.to_string(), profile, priority, user }, &self.config);
        if matches!(outcome, Outcome::Done | Outcome::AllResident) {
            if let Some(l) = self.tracker.get_mut(id) {
                l.replay_all_resident = outcome == Outcome::AllResident;
            }
            self.replays_in_flight.insert(id, None);
            self.replay_spent.push_back((now.mono_ns, id, bytes));
            self.replaying_apps.insert(id, key.to_string());
            return true;
        }
        false
    }

    /// `profile` of application `key` padded by `pad` pages ([`LaunchProfile::padded`]), as
    /// padded last time when it is the same profile.
    fn padded_profile(&mut self, key: &str, profile: &Arc<LaunchProfile>, pad: u64) -> Arc<LaunchProfile> {
        if let Some((base, p, padded)) = self.padded.get(key)
            && Arc::ptr_eq(base, profile)
            && *p == pad
        {
            return Arc::clone(padded);
        }
        if self.padded.len() >= MAX_PADDED_PROFILES {
            self.padded.clear();
        }
        let padded = Arc::new(profile.padded(pad));
        self.padded.insert(key.to_string(), (Arc::clone(profile), pad, Arc::clone(&padded)));
        padded
    }

    fn on_replay_finished(&mut self, world: &mut impl DaemonWorld, now: Now, launch: LaunchId, r: ReplayReport) {
        // What it read counts against the budget, not what it asked for (resident pages cost nothing).
        if let Some(spent) = self.replay_spent.iter_mut().find(|(_, l, _)| *l == launch) {
            spent.2 = r.bytes_read;
        }
        self.replaying_apps.remove(&launch);
        match self.replays_in_flight.remove(&launch) {
            Some(Some(mut learned)) => {
                learned.record.pages_resident_at_exec = r.pages_resident;
                learned.record.pages_prefetched = r.pages_loaded;
                learned.record.bytes_prefetched = r.bytes_read;
                self.save(world, now, learned);
            }
            _ => {
                if let Some(l) = self.tracker.get_mut(launch) {
                    l.pages_resident_at_exec = r.pages_resident;
                    l.pages_prefetched = r.pages_loaded;
                    l.bytes_prefetched = r.bytes_read;
                }
            }
        }
        tracing::debug!(
            "replay for launch {launch}: {} pages wanted, {} resident, {} loaded",
            r.pages_wanted,
            r.pages_resident,
            r.pages_loaded
        );
        if self.replays_in_flight.is_empty() {
            // Prediction paused while the replays loaded; it may go on now.
            self.plan(world, now, PlanTrigger::Interval);
        }
    }

    /// Closes the launch windows that keep no timer whose time is up (see
    /// [`LaunchTracker::expire_untimed`]): before a fork or exec is handled.
    fn close_untimed(&mut self, world: &mut impl DaemonWorld, now: Now) {
        for finished in self.tracker.expire_untimed(now.mono_ns) {
            self.finish_launch(world, now, finished);
        }
    }

    /// Tells the prediction step that an instance started or ended (at `at`), and keeps it for
    /// the state.
    fn report_change(&mut self, world: &mut impl DaemonWorld, now: Now, at: Now, change: InstanceChange) {
        let (app, instance, launch) = match &change {
            InstanceChange::Launched { app, instance } => (app, *instance, true),
            InstanceChange::Exited { app, instance } => (app, *instance, false),
        };
        self.usage_log.activity(at.unix_ms, app, instance, if launch { Transition::Launch } else { Transition::Exit });
        self.pending_activity.push(ActivityRecord {
            at_ms: at.unix_ms,
            local_ms: at.local_ms,
            app: app.clone(),
            instance,
            launch,
        });
        let trigger = match change {
            InstanceChange::Launched { app, instance } => PlanTrigger::LaunchStarted { app, instance },
            InstanceChange::Exited { app, instance } => PlanTrigger::AppExited { app, instance },
        };
        self.plan(world, now, trigger);
    }

    fn finish_launch(&mut self, world: &mut impl DaemonWorld, now: Now, finished: FinishedLaunch) {
        tracing::debug!(
            "launch {} of {} closed: {} page events ({} while not followed, {} of its own output), pids {:?} still live, {} backlog drops so far",
            finished.launch.id,
            finished.launch.app.key,
            finished.launch.page_events,
            finished.launch.page_events_not_followed,
            finished.launch.output_page_events,
            finished.launch.live,
            self.tracker.backlog_dropped
        );
        // Paths of inodes no open event named: the maps and fds of the launch's live processes.
        for hint in finished.launch.identity.finish().hints {
            tracing::debug!("launch {}: {} started {}: expected next time", finished.launch.id, hint.launcher_key, hint.app_key);
            world.carry_out(Action::SaveHint(hint), &self.config);
        }
        // A launch learned from (followed, or stopped with what it used until then) whose files
        // are not all named yet: what its live processes map and hold open may name them. Its
        // threads are read through their process.
        if finished.launch.is_learned_from() {
            let processes: Vec<u32> =
                finished.launch.live.iter().filter(|t| !finished.launch.threads.contains(*t)).copied().collect();
            if !processes.is_empty() {
                let inodes: Vec<InodeKey> = finished.working_set.iter().map(|(inode, _)| *inode).collect();
                world.learn_paths_of(&processes, &inodes);
            }
        }
        if !finished.launch.followed && !finished.launch.watched.is_empty() {
            if let Some(read) = world.disk_reads(&finished.launch.watched) {
                self.judge_read(world, now, &finished.launch, read);
            }
        } else if !finished.launch.followed && self.runs.disk_reads(finished.launch.root).is_some() {
            // Followed as a run instead of watched: the run counted what it read from disk, and
            // for a run followed for its first reads that still runs, the kernel counted the rest
            // so far (its end record has not brought it yet).
            let root = finished.launch.root;
            if let Some(counted) = world.run_disk_reads(root) {
                self.runs.add_disk_reads(root, counted);
            }
            let read = self.runs.disk_reads(root).unwrap_or(0);
            self.judge_read(world, now, &finished.launch, read);
        }
        let id = finished.launch.id;
        // Resolve paths now, while the resolver still knows them.
        let learned = self.prepare(world, now, finished);
        match self.replays_in_flight.get_mut(&id) {
            // Save once the replay reports, so the record holds what it loaded.
            Some(slot) => *slot = learned,
            None => {
                if let Some(l) = learned {
                    self.save(world, now, l);
                }
            }
        }
    }

    /// A closed launch that was replayed but not followed, which read `read` pages from disk in its
    /// window (counted by the kernel for a watched launch, by its run for one followed as a run):
    /// when that is many pages beyond what its profile holds, its profile lacks them, and the
    /// next launches are followed.
    fn judge_read(&mut self, world: &mut impl DaemonWorld, now: Now, l: &ActiveLaunch, read: u64) {
        let key = l.replayed.clone().unwrap_or_else(|| l.app.key.clone());
        tracing::debug!(
            "launch {} of {key} (replayed only) read {read} pages from disk in its window; its profile holds {} ({} resident at its exec, {} loaded by its replay)",
            l.id,
            l.pages_expected,
            l.pages_resident_at_exec,
            l.pages_prefetched
        );
        // Pages of the profile the replay did not load (it had not finished: all of them).
        let unloaded = l.pages_expected.saturating_sub(l.pages_resident_at_exec).saturating_sub(l.pages_prefetched);
        if !profile_lacks_pages(read, l.pages_expected, unloaded, self.config.launch.refollow_read_share) {
            return;
        }
        let history = match world.learning_history(&key) {
            Ok(h) => h.unwrap_or_default(),
            Err(e) => {
                tracing::warn!("reading what is known of {key}: {e}");
                return;
            }
        };
        let hold = match world.refollow_hold(&key) {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!("reading how {key}'s refollows went: {e}");
                return;
            }
        };
        let (verdict, after) = refollow::judge(hold, &history, now.unix_ms);
        if hold != Some(after) {
            world.carry_out(Action::SaveRefollowHold { app: key.clone(), hold: after }, &self.config);
        }
        match verdict {
            RefollowVerdict::Refollow => {
                tracing::info!(
                    "launch of {key} read {read} pages from disk, more than its profile of {} pages leaves to read: following its next launch again",
                    l.pages_expected
                );
                world.carry_out(Action::Refollow { app: key }, &self.config);
            }
            RefollowVerdict::Held { until_ms, fruitless } => {
                self.refollows_held += 1;
                tracing::debug!(
                    "launch of {key} read {read} pages from disk beyond its profile, but its last {fruitless} refollows taught nothing: not followed again for {} s",
                    until_ms.saturating_sub(now.unix_ms) / 1000
                );
            }
        }
    }

    /// What a closed launch teaches, if anything: not a launch that was never followed, traced
    /// from its middle, or that used fewer than `min_pages` pages.
    fn prepare(&mut self, world: &mut impl DaemonWorld, now: Now, finished: FinishedLaunch) -> Option<LearnedLaunch> {
        if !finished.launch.is_learned_from() {
            return None;
        }
        if let Some(why) = finished.launch.identity.finish().not_learnable {
            // Nothing recorded: the next launch is followed again.
            tracing::debug!("launch of {} not learned: {why:?}", finished.launch.app.key);
            return None;
        }
        let in_force = world.take_in_force_since(finished.launch.root);
        if let Some(late_ms) = in_force.and_then(|since| finished.traced_late_ms(since)) {
            // Not a launch learned: the next one is followed again.
            self.launches_traced_late += 1;
            tracing::info!(
                "launch of {} not learned: it was traced from {late_ms} ms after its exec, late in its {} ms window, so what it used is known only in part",
                finished.launch.app.key,
                finished.window_ms
            );
            return None;
        }
        if let Some(since) = in_force {
            tracing::debug!(
                "launch of {} traced from {} us after its exec, in its {} ms window",
                finished.launch.app.key,
                finished.traced_from_ns(since) / 1_000,
                finished.window_ms
            );
        }
        let FinishedLaunch { mut launch, window_ms, working_set } = finished;
        match launch.stopped {
            Some(FollowStop::PageCap { files_read_through: 0 }) => tracing::info!(
                "launch of {} stopped being followed at {} MiB (max_launch_mib): its first pages are learned",
                launch.app.key,
                self.config.launch.max_launch_mib
            ),
            Some(FollowStop::PageCap { files_read_through }) => tracing::info!(
                "launch of {} stopped being followed at {} MiB (max_launch_mib): it was reading files through; what else it used is learned, not the {files_read_through} files it read",
                launch.app.key,
                self.config.launch.max_launch_mib
            ),
            Some(FollowStop::Settled { after_ms }) => tracing::info!(
                "launch of {} stopped being followed after {after_ms} ms: it kept re-using the pages it had loaded; its first pages are learned",
                launch.app.key
            ),
            Some(FollowStop::ReadThrough { after_ms }) => tracing::info!(
                "launch of {} stopped being followed after {after_ms} ms: it was reading a file through ({} MiB in one forward run, most of what it used); what it used until then is learned, not the data it streamed after",
                launch.app.key,
                self.config.launch.read_through_mib
            ),
            None => {}
        }
        let pages_used: u64 = working_set.iter().flat_map(|(_, r)| r.iter().map(|u| u.range.len)).sum();
        let app_key = launch.app.key.clone();
        if pages_used < self.config.launch.min_pages.max(1) {
            tracing::trace!("launch of {app_key}: {pages_used} pages, not learned");
            return None;
        }
        let resolved = world.resolve(working_set, &launch.inodes_loaded);
        let lookups = launch_lookups(&mut launch, resolved.lookups);
        let profile = LaunchProfile {
            command: launch.argv.clone(),
            recorded_at: now.unix_ms / 1000,
            page_size: self.page_size,
            mode: self.mode,
            window_ms,
            files: resolved.files,
            unresolved: resolved.unresolved,
            lookups,
        };
        let started_ms = now.unix_ms.saturating_sub(now.mono_ns.saturating_sub(launch.started_ns) / 1_000_000);
        let record = LaunchRecord {
            app: app_key,
            started_ms,
            window_ms,
            pages_expected: launch.pages_expected,
            pages_resident_at_exec: launch.pages_resident_at_exec,
            pages_prefetched: launch.pages_prefetched,
            bytes_prefetched: launch.bytes_prefetched,
            pages_used,
            pages_read_from_disk: launch.pages_read_from_disk,
            files: profile.files.len() as u64,
        };
        Some(LearnedLaunch { launch: launch.id, exe: launch.app.exe.to_string_lossy().into_owned(), profile, record })
    }

    fn save(&mut self, world: &mut impl DaemonWorld, now: Now, l: LearnedLaunch) {
        let r = l.record.clone();
        let (files, unresolved, page_size) = (l.profile.files.len(), l.profile.unresolved.inodes, l.profile.page_size);
        let app_key = r.app.clone();
        // Its profile changes: the padded copy of the old one is not kept.
        self.padded.remove(&app_key);
        if world.carry_out(Action::SaveLaunch(Box::new(l)), &self.config) == Outcome::Done {
            self.usage_log.working_set(now.unix_ms, &app_key, r.pages_used.saturating_mul(page_size));
            tracing::info!(
                "learned {app_key}: {} pages in {files} files over {} ms; {} read from disk, {} expected, {} prefetched ({unresolved} unresolved inodes)",
                r.pages_used,
                r.window_ms,
                r.pages_read_from_disk,
                r.pages_expected,
                r.pages_prefetched,
            );
        }
        self.plan(world, now, PlanTrigger::LaunchFinished { app: app_key });
    }

    fn schedule_replan(&mut self, now: Now) {
        self.next_replan_ns =
            self.predicting().then(|| now.mono_ns + self.config.predict.replan_interval_secs.saturating_mul(1_000_000_000));
    }

    /// When a followed run's predicted files were last handed out to be loaded: the replay
    /// ledger's newest entry for them (it keeps [`REPLAY_BUDGET_SPAN_NS`] of entries, longer than
    /// [`RUN_PREFETCH_SETTLE_NS`]).
    fn last_run_prefetch_ns(&self) -> Option<u64> {
        self.replay_spent.iter().rev().find(|&&(_, id, _)| is_file_prefetch_entry(id)).map(|&(t, _, _)| t)
    }

    /// Runs a planning round when prediction is on; a round the step puts off is owed.
    fn plan(&mut self, world: &mut impl DaemonWorld, now: Now, trigger: PlanTrigger) {
        if !self.predicting() {
            return;
        }
        let launching = !self.replays_in_flight.is_empty()
            || self.last_launch_ns.is_some_and(|t| now.mono_ns < t.saturating_add(LAUNCH_SETTLE_NS))
            || self.last_run_prefetch_ns().is_some_and(|t| now.mono_ns < t.saturating_add(RUN_PREFETCH_SETTLE_NS));
        if let Outcome::Planned { owed_in_ms: Some(ms), at_ns } =
            world.carry_out(Action::Plan { trigger, launching }, &self.config)
        {
            let owed = at_ns.saturating_add(ms.saturating_mul(1_000_000));
            self.next_replan_ns = Some(self.next_replan_ns.map_or(owed, |t| t.min(owed)));
        }
    }

    /// Builds the prediction step; true when it is in place.
    fn build_step(&mut self, world: &mut impl DaemonWorld, now: Now) -> bool {
        // The step's predictor learns the launches and exits the state remembers: write ours first.
        self.flush_activity(world, now, true);
        self.step = world.carry_out(Action::BuildPredictionStep, &self.config) == Outcome::Done;
        self.schedule_replan(now);
        self.step
    }

    /// Writes the launches and exits seen so far to the state (when `force`, or when enough
    /// are waiting or enough time has passed).
    fn flush_activity(&mut self, world: &mut impl DaemonWorld, now: Now, force: bool) {
        if self.pending_activity.is_empty()
            || !(force
                || self.pending_activity.len() >= ACTIVITY_BATCH
                || now.mono_ns.saturating_sub(self.activity_flushed_ns) >= ACTIVITY_FLUSH_NS)
        {
            return;
        }
        let records = std::mem::take(&mut self.pending_activity);
        world.carry_out(Action::WriteActivity(records), &self.config);
        self.activity_flushed_ns = now.mono_ns;
    }

    fn reload(&mut self, world: &mut impl DaemonWorld, now: Now, new: Config) {
        if new.daemon.state_path != self.config.daemon.state_path || new.daemon.socket_path != self.config.daemon.socket_path {
            tracing::warn!("state_path and socket_path changes take effect at the next start");
        }
        let settings = window_settings(&new, self.mode, self.page_size);
        self.runs.set_read_through(settings.read_through_pages);
        self.tracker.set_settings(settings);
        self.runs.set_follow(follow_policy(&new), new.launch.stable_new_share);
        let old = std::mem::replace(&mut self.config, new);
        let (was, want) = (old.predict.enabled && self.step, self.config.predict.enabled);
        let rebuild = was && want && step_settings_changed(&old.predict, &self.config.predict);
        let watch = fetches(&self.config);
        let (o, n) = (&old.predict, &self.config.predict);
        let respec = o.pressure_trigger_us != n.pressure_trigger_us || o.pressure_window_us != n.pressure_window_us;
        if watch != self.pressure_watched || (watch && respec) {
            world.carry_out(Action::WatchPressure(watch), &self.config);
            self.pressure_watched = watch;
        }
        if self.step && (!want || rebuild) {
            world.carry_out(Action::DropPredictionStep, &self.config);
            self.step = false;
            if !want {
                tracing::info!("prediction off");
            }
        }
        if want && !self.step && self.build_step(world, now) {
            // As at a start: plan before anything is launched.
            self.plan(world, now, PlanTrigger::Start);
        }
        self.schedule_replan(now);
        tracing::info!("configuration reloaded");
    }

    fn about_to_sleep(&mut self, world: &mut impl DaemonWorld, now: Now) {
        self.flush_activity(world, now, false);
        if self.contexts_save_owed {
            self.save_file_contexts(world, now, false);
        }
        // Launches whose page events showed another program to be the application.
        let policy = follow_policy(&self.config);
        for id in self.tracker.take_rekeyed(|app| decide_follow(policy, world, now, app, 0, true)) {
            tracing::debug!("launch {id}: re-keyed by the pages its programs used");
            self.keyed(world, now, id, None);
        }
        // Tells the kernel to stop recording the processes of launches no longer followed, and
        // those it follows from an exec the daemon never heard of; a followed run keeps its own.
        let mut gone = self.tracker.take_unfollowed();
        gone.retain(|&pid| !self.runs.holds(pid));
        // A run whose launch streamed a file or reached the page cap is followed on for its
        // opens only: it would learn the stream page by page otherwise.
        let streamed = self.tracker.take_streamed();
        if !streamed.is_empty() {
            self.runs.pages_streamed(&streamed);
        }
        while let Some(&(pid, ts_ns)) = self.observed_execs.front() {
            if ts_ns.saturating_add(UNCLAIMED_EXEC_NS) > now.mono_ns {
                break;
            }
            self.observed_execs.pop_front();
            if !self.tracker.knows_process(pid) && !self.runs.holds(pid) && !gone.contains(&pid) {
                tracing::debug!("pid {pid}: followed by the kernel since its exec, unknown to the daemon: taken off");
                gone.push(pid);
            }
        }
        // A known application's launch re-keyed to it and not followed is watched (see on_exec).
        // Grouped by the count each needs (its launch's profile size).
        let mut watch: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
        if self.observation == Observation::EveryExec {
            let share = self.config.launch.refollow_read_share;
            gone.retain(|&pid| {
                let l = self.tracker.active_mut().iter_mut().find(|l| l.live.contains(&pid));
                match l.filter(|l| !l.followed && l.replayed.is_some() && l.stopped.is_none()) {
                    Some(l) => {
                        l.watched.push(pid);
                        watch.entry(watch_count_limit(l.pages_expected, share)).or_default().push(pid);
                        false
                    }
                    None => true,
                }
            });
        }
        let window_ns = self.config.window_max_ns();
        for (count_limit, pids) in watch {
            world.carry_out(Action::Watch { pids, window_ns, count_limit }, &self.config);
        }
        if !gone.is_empty() {
            world.carry_out(Action::Unfollow(gone), &self.config);
        }
        // A sampled run is followed for the first read of each file only while none of its
        // processes is in a launch followed to learn its start; its disk reads still count while
        // its launch is judged by them.
        let tracker = &self.tracker;
        for r in self.runs.reads_to_change(|tasks| tasks.iter().any(|&t| tracker.follows_process(t))) {
            let disk_reads_ns = r.disk_until_ns.saturating_sub(now.mono_ns);
            let action = Action::RunReads { pids: r.tasks, first_reads_only: r.first_reads, disk_reads_ns };
            world.carry_out(action, &self.config);
        }
        self.tracker.trim_backlog(now.mono_ns);
        let prefetches = self.runs.take_prefetches();
        if !prefetches.is_empty() {
            self.prefetch_files(world, now, prefetches);
        }
        // Paths and prompt page events matter only while a launch is followed; prompt page
        // events also while a run is (its next files are predicted at each new one).
        let active = self.tracker.is_following();
        let eager = active || !self.runs.is_empty();
        if eager != self.trace_eager {
            world.carry_out(Action::TraceEager(eager), &self.config);
            self.trace_eager = eager;
        }
        if active != self.opens_watched {
            world.carry_out(Action::WatchOpens(active), &self.config);
            self.opens_watched = active;
        }
        let deadline = [self.tracker.next_deadline(), self.next_replan_ns, self.runs.next_deadline()].into_iter().flatten().min();
        world.carry_out(Action::ArmTimer(deadline), &self.config);
    }

    fn stop(&mut self, world: &mut impl DaemonWorld, now: Now) {
        let pending: Vec<LearnedLaunch> = self.replays_in_flight.drain().filter_map(|(_, l)| l).collect();
        self.replaying_apps.clear();
        for l in pending {
            self.save(world, now, l);
        }
        for f in self.tracker.close_all(now.mono_ns) {
            if let Some(l) = self.prepare(world, now, f) {
                self.save(world, now, l);
            }
        }
        self.runs.end_all();
        self.save_file_contexts(world, now, true);
        self.flush_activity(world, now, true);
    }

    /// Ends the runs whose time is up: the kernel stops following their processes still alive
    /// (unless a launch in its window follows them), and the workloads they taught are saved.
    /// The models are pruned by age once a day.
    fn expire_runs(&mut self, world: &mut impl DaemonWorld, now: Now) {
        let ended = self.runs.expire(now.mono_ns);
        if ended.is_empty() {
            return;
        }
        let mut gone = Vec::new();
        for (app, why, live) in ended {
            tracing::debug!("workload run of {app} no longer followed ({why:?}); {} tasks still alive", live.len());
            if why != RunEnd::Exited {
                gone.extend(live.into_iter().filter(|&p| !self.tracker.follows_process(p) && !self.runs.holds(p)));
            }
        }
        if self.observation == Observation::EveryExec && !gone.is_empty() {
            world.carry_out(Action::Unfollow(gone), &self.config);
        }
        if now.unix_ms.saturating_sub(self.contexts_pruned_ms) >= CONTEXT_PRUNE_MS {
            self.contexts_pruned_ms = now.unix_ms;
            self.runs.prune(now.unix_ms);
        }
        self.save_file_contexts(world, now, false);
    }

    /// Saves the workloads whose file-access context models changed, in one transaction: when
    /// `force`d, else at most every [`CONTEXT_SAVE_GAP_NS`] (a save held back is owed).
    fn save_file_contexts(&mut self, world: &mut impl DaemonWorld, now: Now, force: bool) {
        if !self.runs.has_changes() {
            self.contexts_save_owed = false;
            return;
        }
        if !force && self.contexts_saved_ns.is_some_and(|t| now.mono_ns.saturating_sub(t) < CONTEXT_SAVE_GAP_NS) {
            self.contexts_save_owed = true;
            return;
        }
        let changed = self.runs.take_changed();
        world.carry_out(Action::SaveFileContexts(changed), &self.config);
        self.contexts_saved_ns = Some(now.mono_ns);
        self.contexts_save_owed = false;
    }

    /// Whether files predicted for runs are loaded now: exec-time replay is on and memory
    /// pressure does not hold it off.
    fn fetches_files(&self, now: Now) -> bool {
        self.config.launch.replay_on_exec && self.replay_held_until_ns.is_none_or(|t| now.mono_ns >= t)
    }

    /// Hands the files predicted for followed runs to be loaded, within the replay budget (they
    /// share it with exec-time replays: `[launch] replay_mib_per_minute` and the prediction's
    /// share of the memory available), nearest first; none while memory pressure holds replay
    /// off or exec-time replay is off.
    fn prefetch_files(&mut self, world: &mut impl DaemonWorld, now: Now, batch: Vec<FilePrefetch>) {
        let predicted: u64 = batch.iter().map(|p| p.files.len() as u64).sum();
        if !self.fetches_files(now) {
            self.files_over_budget += predicted;
            return;
        }
        let page_size = self.page_size.max(1);
        let mut budget_pages = self.replay_budget_bytes(world, now).0 / page_size;
        for mut p in batch {
            let mut files = Vec::with_capacity(p.files.len());
            for f in std::mem::take(&mut p.files) {
                if f.pages <= budget_pages {
                    budget_pages -= f.pages;
                    files.push(f);
                } else {
                    self.files_over_budget += 1;
                }
            }
            if files.is_empty() {
                continue;
            }
            let pages: u64 = files.iter().map(|f| f.pages).sum();
            tracing::debug!(
                "workload run {} of {}: {} files ({pages} pages) handed out {} us after the open they follow",
                p.root,
                p.app,
                files.len(),
                p.after_open_ns.map_or(0, |t| now.mono_ns.saturating_sub(t) / 1000)
            );
            let action = Action::PrefetchFiles {
                app: p.app.clone(),
                files: files.clone(),
                priority: self.config.launch.replay_io_priority,
                user: p.user.clone(),
                after_open_ns: p.after_open_ns,
            };
            if matches!(world.carry_out(action, &self.config), Outcome::Done | Outcome::AllResident) {
                let id = FILE_PREFETCH_LEDGER_ID - self.file_prefetches_handed % FILE_PREFETCH_LEDGER_IDS;
                self.file_prefetches_handed += 1;
                self.replay_spent.push_back((now.mono_ns, id, pages.saturating_mul(page_size)));
            } else {
                // The prefetch queue was full: asked for again at the run's next prediction.
                budget_pages = budget_pages.saturating_add(pages);
                self.runs.not_prefetched(&FilePrefetch { files, ..p });
            }
        }
    }
}

/// Whether an exec-time replay of a profile of `pages` pages (of `page_size` bytes) is pointless:
/// the profile fills at least nine tenths of a launch window (`max_launch_mib`: its launches went
/// on reading past their window, a workload rather than a start) and is larger than
/// `memory_bytes`, the memory a replay may use. A replay cut to that memory would load the
/// window's first pages only for the program's own reads past them to push them out.
fn fills_a_window_beyond_memory(pages: u64, page_size: u64, max_launch_mib: u64, memory_bytes: u64) -> bool {
    let bytes = pages.saturating_mul(page_size.max(1));
    let window = max_launch_mib.saturating_mul(1 << 20);
    bytes.saturating_mul(10) >= window.saturating_mul(9) && bytes > memory_bytes
}

#[cfg(test)]
mod tests {
    //! Event sequences in, actions out: each daemon feature driven as the loop drives it, with a
    //! fake world that records what the engine did and answers from maps.

    use super::*;
    use crate::workload_run::{PREFETCH_DEPTH, RUN_QUIET_NS};
    use augur_core::model::profile::{FileIdentity, LookupKind};

    /// The history of an application learned `n` times, the latest at `last_ms`, whose profile
    /// is stable.
    fn settled(n: u64, last_ms: u64) -> LearningHistory {
        LearningHistory { learned: n, last_learned_ms: last_ms, stable_streak: 2, unstable_streak: 0 }
    }

    const MS: u64 = 1_000_000;
    /// Monotonic time of `at(0)`, ms (the daemon is not started at the clock's origin).
    const BASE_MS: u64 = 1_000_000;
    const WALL_MS: u64 = 1_750_000_000_000;

    fn at(ms: u64) -> Now {
        Now { mono_ns: (BASE_MS + ms) * MS, unix_ms: WALL_MS + ms, local_ms: WALL_MS + ms + 3_600_000 }
    }

    fn ns(ms: u64) -> u64 {
        at(ms).mono_ns
    }

    /// A learned profile of `pages` pages of one file.
    fn profile(pages: u64) -> LaunchProfile {
        LaunchProfile {
            command: vec!["/bin/a".into()],
            recorded_at: 0,
            page_size: 4096,
            mode: TraceMode::Access,
            window_ms: 100,
            files: vec![FileProfile {
                path: "/lib/a.so".into(),
                identity: FileIdentity { dev: 1, ino: 9, size: 1 << 30, mtime_ns: 0 },
                ranges: vec![UsedRange { range: PageRange::new(0, pages), first_use_us: 0 }],
            }],
            unresolved: Unresolved::default(),
            lookups: Vec::new(),
        }
    }

    #[derive(Default)]
    struct FakeWorld {
        /// Applications' learned launches: (count, last learned Unix ms).
        learned: HashMap<String, LearningHistory>,
        /// Applications' replayable profiles.
        profiles: HashMap<String, LaunchProfile>,
        /// Launchers' hints: (key, argv) → the application expected.
        hints: HashMap<(String, Vec<String>), String>,
        /// Since when each root pid is in force in the filter.
        in_force: HashMap<u32, u64>,
        filter_busy: bool,
        /// What the prediction step answers after a round.
        owed_in_ms: Option<u64>,
        fail_build: bool,
        fail_save: bool,
        /// The prefetch queue is full.
        fail_prefetch: bool,
        /// Replays are answered as all resident (the loop knew their pages were).
        replays_all_resident: bool,
        /// The time of the event being handled (monotonic ns).
        clock_ns: u64,
        /// Questions asked.
        learned_asked: u64,
        paths_of: Vec<u32>,
        /// Pages each watched process read from disk, as the kernel would count them.
        disk_reads: HashMap<u32, u64>,
        /// What the kernel counted of each run's disk reads (followed for its first reads).
        run_disk_reads: HashMap<u32, u64>,
        /// MemAvailable as the world reads it (`None`: unreadable).
        memory_available: Option<u64>,
        /// The file-access context models the state holds.
        file_contexts: Option<FileContextModel>,
        /// Where each application's refollows stand, as saved.
        refollow_holds: HashMap<String, RefollowHold>,
        actions: Vec<Action>,
    }

    impl DaemonWorld for FakeWorld {
        fn learning_history(&mut self, app: &str) -> Result<Option<LearningHistory>, WorldError> {
            self.learned_asked += 1;
            Ok(self.learned.get(app).copied())
        }

        fn refollow_hold(&mut self, app: &str) -> Result<Option<RefollowHold>, WorldError> {
            Ok(self.refollow_holds.get(app).copied())
        }

        fn filter_busy(&self) -> bool {
            self.filter_busy
        }

        fn exec_lookups(&mut self, _pid: u32, exe: &std::path::Path, _argv0: Option<&str>) -> Vec<Lookup> {
            vec![Lookup { path: exe.to_path_buf(), kind: LookupKind::Stat }]
        }

        fn replay_profile(&mut self, app: &str, _settings: &LearnSettings) -> Result<Option<Arc<LaunchProfile>>, WorldError> {
            Ok(self.profiles.get(app).cloned().map(Arc::new))
        }

        fn launcher_hint(&mut self, key: &str, argv: &[String]) -> Result<Option<String>, WorldError> {
            Ok(self.hints.get(&(key.to_string(), argv.to_vec())).cloned())
        }

        fn take_in_force_since(&mut self, root: u32) -> Option<u64> {
            self.in_force.remove(&root)
        }

        fn learn_paths_of(&mut self, pids: &[u32], _inodes: &[InodeKey]) {
            self.paths_of.extend_from_slice(pids);
        }

        fn run_disk_reads(&mut self, root: u32) -> Option<u64> {
            self.run_disk_reads.remove(&root)
        }

        fn disk_reads(&mut self, pids: &[u32]) -> Option<u64> {
            let found: Vec<u64> = pids.iter().filter_map(|p| self.disk_reads.remove(p)).collect();
            (!found.is_empty()).then(|| found.iter().sum())
        }

        fn memory_available(&mut self) -> Option<u64> {
            self.memory_available
        }

        fn file_contexts(&mut self) -> Result<FileContextModel, WorldError> {
            Ok(self.file_contexts.clone().unwrap_or_default())
        }

        fn resolve(&mut self, working_set: Vec<(InodeKey, Vec<UsedRange>)>, inodes_loaded: &[InodeKey]) -> ResolvedLaunch {
            let files = working_set
                .into_iter()
                .map(|(key, ranges)| FileProfile {
                    path: format!("/f/{}", key.ino).into(),
                    identity: FileIdentity { dev: key.dev, ino: key.ino, size: 1 << 30, mtime_ns: 0 },
                    ranges,
                })
                .collect();
            let lookups =
                inodes_loaded.iter().map(|k| Lookup { path: format!("/d/{}", k.ino).into(), kind: LookupKind::Dir }).collect();
            ResolvedLaunch { files, unresolved: Unresolved::default(), lookups }
        }

        fn carry_out(&mut self, action: Action, _config: &Config) -> Outcome {
            let outcome = match &action {
                Action::Plan { .. } => Outcome::Planned { owed_in_ms: self.owed_in_ms, at_ns: self.clock_ns },
                Action::BuildPredictionStep if self.fail_build => Outcome::Failed,
                Action::SaveLaunch(_) if self.fail_save => Outcome::Failed,
                Action::PrefetchFiles { .. } if self.fail_prefetch => Outcome::Failed,
                Action::StartReplay { .. } if self.replays_all_resident => Outcome::AllResident,
                Action::SaveHint(h) => {
                    self.hints.insert((h.launcher_key.clone(), h.launcher_argv.clone()), h.app_key.clone());
                    Outcome::Done
                }
                Action::SaveRefollowHold { app, hold } => {
                    self.refollow_holds.insert(app.clone(), *hold);
                    Outcome::Done
                }
                _ => Outcome::Done,
            };
            self.actions.push(action);
            outcome
        }
    }

    /// The engine and its fake world, driven as the loop drives them.
    struct Daemon {
        engine: DaemonEngine,
        world: FakeWorld,
    }

    impl Daemon {
        fn new(config: Config) -> Daemon {
            Daemon {
                engine: DaemonEngine::new(config, Observation::PidFilter, TraceMode::Access, 4096, at(0)),
                world: FakeWorld::default(),
            }
        }

        /// A daemon whose kernel observes every exec from its start (the eBPF observer).
        fn every_exec(config: Config) -> Daemon {
            let engine = DaemonEngine::new(config, Observation::EveryExec, TraceMode::Access, 4096, at(0));
            Daemon { engine, world: FakeWorld::default() }
        }

        /// Thread `tid` looked `path` up at `ms` (`kind`: found, missing or listed).
        fn lookup(&mut self, ms: u64, tid: u32, path: &str, kind: LookupKind) {
            let lookup = Lookup { path: path.into(), kind };
            self.engine.on_trace(TraceEvent::Lookup { tid, ts_ns: ns(ms), lookup });
        }

        /// A daemon with prediction on, started and ready; what it did so far is dropped.
        fn predicting(mut config: Config) -> Daemon {
            config.predict.enabled = true;
            let mut d = Daemon::new(config);
            d.event(0, Event::Start);
            d.event(0, Event::Ready);
            d.world.actions.clear();
            d
        }

        /// Hands `event` in at `ms`; returns the actions.
        fn event(&mut self, ms: u64, event: Event) -> Vec<Action> {
            self.world.clock_ns = ns(ms);
            self.engine.handle(&mut self.world, at(ms), event);
            std::mem::take(&mut self.world.actions)
        }

        fn exec(&mut self, ms: u64, tgid: u32, exe: &str) -> Vec<Action> {
            self.exec_argv(ms, tgid, exe, &[exe])
        }

        /// Process `tgid` exec'd `exe` with `argv` at `ms`.
        fn exec_argv(&mut self, ms: u64, tgid: u32, exe: &str, argv: &[&str]) -> Vec<Action> {
            self.event(ms, Event::Exec { step: exec_step(tgid, exe, argv), ts_ns: ns(ms) })
        }

        /// Process `parent` forked process `child` at `ms`.
        fn fork(&mut self, ms: u64, parent: u32, child: u32) -> Vec<Action> {
            self.event(ms, Event::Fork { parent_tgid: parent, child_pid: child, child_tgid: child })
        }

        fn exit(&mut self, ms: u64, pid: u32) -> Vec<Action> {
            self.event(ms, Event::Exit { pid, tgid: pid, ts_ns: ns(ms) })
        }

        /// `len` pages of inode `ino` from `start`, used by thread `tid` at `ms`.
        fn pages(&mut self, ms: u64, tid: u32, ino: u64, start: u64, len: u64) {
            let inode = InodeKey { dev: 1, ino };
            self.engine.on_trace(TraceEvent::Page {
                tid,
                ts_ns: ns(ms),
                kind: PageKind::Access,
                inode,
                pages: PageRange::new(start, len),
            });
        }

        /// One wake-up at `ms` with nothing read: what is due, then what is done before sleeping.
        fn wake(&mut self, ms: u64) -> Vec<Action> {
            let mut out = self.event(ms, Event::Tick);
            out.extend(self.event(ms, Event::AboutToSleep));
            out
        }
    }

    /// What `/proc` says of process `pid` after it exec'd `exe` with `argv` in `/home/u`.
    fn exec_step(pid: u32, exe: &str, argv: &[&str]) -> ExecStep {
        let argv = argv.iter().map(|a| a.to_string()).collect();
        ExecStep { pid, exe: exe.to_string(), argv, cwd: Some("/home/u".into()), loader_target: None, user: ProcessUser::ROOT }
    }

    /// The profiles replayed, by size.
    fn replays(actions: &[Action]) -> Vec<u64> {
        actions
            .iter()
            .filter_map(|a| if let Action::StartReplay { profile, .. } = a { Some(profile.page_count()) } else { None })
            .collect()
    }

    fn saved(actions: &[Action]) -> Vec<LearnedLaunch> {
        actions.iter().filter_map(|a| if let Action::SaveLaunch(l) = a { Some((**l).clone()) } else { None }).collect()
    }

    fn plans(actions: &[Action]) -> Vec<(PlanTrigger, bool)> {
        actions
            .iter()
            .filter_map(|a| if let Action::Plan { trigger, launching } = a { Some((trigger.clone(), *launching)) } else { None })
            .collect()
    }

    fn timer(actions: &[Action]) -> Option<Option<u64>> {
        actions.iter().rev().find_map(|a| if let Action::ArmTimer(t) = a { Some(*t) } else { None })
    }

    fn activity(actions: &[Action]) -> Vec<Vec<ActivityRecord>> {
        actions.iter().filter_map(|a| if let Action::WriteActivity(r) = a { Some(r.clone()) } else { None }).collect()
    }

    /// A daemon that only learns: neither exec-time replay nor prediction (on by default).
    fn no_replay() -> Config {
        let mut c = Config::default();
        c.launch.replay_on_exec = false;
        c.predict.enabled = false;
        c
    }

    // --- The launch lifecycle ---------------------------------------------------------------

    #[test]
    fn a_new_application_is_followed_learned_when_quiet_and_saved() {
        let mut d = Daemon::new(no_replay());
        let out = d.exec(0, 100, "/bin/a");
        assert_eq!(out, vec![Action::Follow { pid: 100 }]);
        // Prompt page events and opened paths while it is followed.
        let out = d.event(0, Event::AboutToSleep);
        assert!(!out.contains(&Action::TraceEager(true)), "eager from the start: {out:?}");
        assert!(out.contains(&Action::WatchOpens(true)), "{out:?}");
        assert_eq!(timer(&out), Some(Some(ns(1000))), "the quiet time ends the window");
        d.pages(10, 100, 5, 0, 8);
        d.pages(300, 100, 6, 0, 4);
        assert!(saved(&d.wake(1000)).is_empty(), "quiet since 300 ms only");
        let out = d.wake(1300);
        let learned = saved(&out);
        assert_eq!(learned.len(), 1, "{out:?}");
        let l = &learned[0];
        assert_eq!(l.record.app, "/bin/a");
        assert_eq!(l.record.pages_used, 12);
        assert_eq!(l.record.window_ms, 300);
        assert_eq!(l.record.files, 2);
        assert_eq!(l.record.started_ms, WALL_MS, "the exec's wall time");
        assert_eq!(l.profile.lookups, vec![Lookup { path: "/bin/a".into(), kind: LookupKind::Stat }], "the PATH search");
        assert_eq!(l.exe, "/bin/a");
        assert_eq!(d.world.paths_of, vec![100], "paths of the live process learned at close");
        // Nothing followed any more: no prompt events, no opens, no timer.
        assert!(out.contains(&Action::Unfollow(vec![100])), "{out:?}");
        assert!(out.contains(&Action::TraceEager(false)) && out.contains(&Action::WatchOpens(false)), "{out:?}");
        assert_eq!(timer(&out), Some(None));
        assert_eq!(d.engine.usage_log().len(), 2, "the launch and its working set");
    }

    // --- Learning per user --------------------------------------------------------------------

    /// Process `tgid` of user `uid` (group `uid`, also in group 24) exec'd `exe` at `ms`.
    fn exec_as(d: &mut Daemon, ms: u64, uid: u32, tgid: u32, exe: &str) -> Vec<Action> {
        let step = ExecStep { user: ProcessUser { uid, gid: uid, groups: vec![24] }, ..exec_step(tgid, exe, &[exe]) };
        d.event(ms, Event::Exec { step, ts_ns: ns(ms) })
    }

    fn replayed(actions: &[Action]) -> Vec<(String, ProcessUser)> {
        actions
            .iter()
            .filter_map(|a| if let Action::StartReplay { app, user, .. } = a { Some((app.clone(), user.clone())) } else { None })
            .collect()
    }

    #[test]
    fn a_users_launch_is_learned_and_replayed_as_that_users_never_as_roots() {
        let mut d = Daemon::every_exec(Config::default());
        exec_as(&mut d, 0, 1000, 100, "/usr/bin/python3");
        d.pages(10, 100, 5, 0, 8);
        d.exit(20, 100);
        let learned = saved(&d.wake(2000));
        assert_eq!(learned.len(), 1);
        assert_eq!(learned[0].record.app, "uid=1000:/usr/bin/python3", "learned under the user's key");
        // Root's launch of the same program asks for root's profile only: the user's is not it.
        d.world.profiles.insert("uid=1000:/usr/bin/python3".into(), profile(50));
        assert!(replayed(&exec_as(&mut d, 3000, 0, 101, "/usr/bin/python3")).is_empty(), "the user's profile replayed for root");
        d.world.profiles.insert("/usr/bin/python3".into(), profile(40));
        let root = replayed(&exec_as(&mut d, 3100, 0, 102, "/usr/bin/python3"));
        assert_eq!(root, vec![("/usr/bin/python3".to_string(), ProcessUser { uid: 0, gid: 0, groups: vec![24] })]);
        // The user's next launch replays the user's profile, reading as the user.
        let user = replayed(&exec_as(&mut d, 3200, 1000, 103, "/usr/bin/python3"));
        assert_eq!(user, vec![("uid=1000:/usr/bin/python3".to_string(), ProcessUser { uid: 1000, gid: 1000, groups: vec![24] })]);
    }

    // --- Observing every exec (the eBPF observer) ---------------------------------------------

    #[test]
    fn observing_every_exec_a_new_application_is_learned_with_its_lookups_without_a_filter_write() {
        let mut d = Daemon::every_exec(no_replay());
        // The loader's first reads and lookups may be read before the exec's process event.
        d.pages(0, 100, 7, 0, 2);
        d.lookup(0, 100, "/etc/ld.so.cache", LookupKind::Stat);
        let out = d.exec(1, 100, "/bin/a");
        assert!(out.is_empty(), "nothing to add, nothing to take off: {out:?}");
        d.lookup(5, 100, "/etc/ld.so.preload", LookupKind::Missing);
        d.lookup(6, 100, "/etc/ld.so.cache", LookupKind::Stat);
        d.pages(10, 100, 5, 0, 8);
        d.fork(20, 100, 101);
        d.lookup(30, 101, "/usr/share/a", LookupKind::Dir);
        let out = d.wake(2000);
        let learned = saved(&out);
        assert_eq!(learned.len(), 1, "{out:?}");
        let l = &learned[0];
        assert_eq!(l.record.pages_used, 10, "the pages read before the exec event count");
        assert_eq!(
            l.profile.lookups,
            vec![
                Lookup { path: "/bin/a".into(), kind: LookupKind::Stat },
                Lookup { path: "/etc/ld.so.cache".into(), kind: LookupKind::Stat },
                Lookup { path: "/etc/ld.so.preload".into(), kind: LookupKind::Missing },
                Lookup { path: "/usr/share/a".into(), kind: LookupKind::Dir },
            ],
            "the PATH search, then what its processes looked up, each once, failed ones included"
        );
        // Its processes still run: followed as a workload run past the window, then, once the
        // run read nothing new for RUN_QUIET_NS, the kernel stops following them.
        assert!(!out.iter().any(|a| matches!(a, Action::Unfollow(_))), "{out:?}");
        let out = d.wake(10 + RUN_QUIET_NS / MS);
        assert!(out.contains(&Action::Unfollow(vec![100, 101])), "{out:?}");
    }

    #[test]
    fn only_a_learned_launch_s_live_processes_not_their_threads_name_its_files() {
        let mut d = Daemon::new(no_replay());
        d.exec(0, 100, "/bin/a");
        // A thread of 100 (its own tid, 100's thread group) and a child process.
        d.event(1, Event::Fork { parent_tgid: 1, child_pid: 102, child_tgid: 100 });
        d.fork(2, 100, 101);
        d.pages(10, 100, 5, 0, 8);
        let out = d.wake(1300);
        assert_eq!(saved(&out).len(), 1, "{out:?}");
        let mut read = d.world.paths_of.clone();
        read.sort_unstable();
        assert_eq!(read, vec![100, 101], "the thread is read through its process");
        // A launch replayed only, not followed, learns nothing: no process of it is read.
        d.world.paths_of.clear();
        d.world.learned.insert("/bin/b".into(), settled(3, WALL_MS - 60_000));
        d.exec(2000, 200, "/bin/b");
        d.pages(2010, 200, 6, 0, 8);
        let out = d.wake(5000);
        assert!(saved(&out).is_empty(), "{out:?}");
        assert!(d.world.paths_of.is_empty(), "{:?}", d.world.paths_of);
    }

    #[test]
    fn observing_every_exec_what_the_daemon_does_not_follow_is_taken_off_at_its_exec() {
        let mut d = Daemon::every_exec(no_replay());
        d.world.learned.insert("/bin/a".into(), settled(3, WALL_MS - 60_000));
        assert_eq!(d.exec(0, 100, "/bin/a"), vec![Action::Unfollow(vec![100])], "replayed only");
        // A helper it forks and execs is part of its launch, and not followed either.
        d.fork(10, 100, 101);
        assert_eq!(d.exec(11, 101, "/bin/helper"), vec![Action::Unfollow(vec![101])]);
        d.lookup(12, 101, "/etc/helper.conf", LookupKind::Stat);
        d.pages(12, 101, 5, 0, 8);
        // A followed application's helpers stay followed.
        assert!(d.exec(20, 200, "/bin/b").is_empty());
        d.fork(21, 200, 201);
        assert!(d.exec(22, 201, "/bin/helper").is_empty());
        d.pages(23, 201, 6, 0, 8);
        d.lookup(23, 201, "/etc/b.conf", LookupKind::Missing);
        d.exit(30, 101);
        d.exit(30, 100);
        let out = d.wake(3000);
        let learned = saved(&out);
        assert_eq!(learned.len(), 1, "{out:?}");
        assert_eq!(learned[0].record.app, "/bin/b");
        assert_eq!(learned[0].record.pages_used, 8);
        assert!(learned[0].profile.lookups.contains(&Lookup { path: "/etc/b.conf".into(), kind: LookupKind::Missing }));
        assert!(!out.iter().any(|a| matches!(a, Action::Follow { .. })), "{out:?}");
    }

    #[test]
    fn observing_every_exec_a_replayed_launch_is_watched_and_one_that_read_beyond_its_profile_is_followed_next() {
        let mut d = Daemon::every_exec(Config::default());
        let window_ns = Config::default().window_max().as_nanos() as u64;
        // A 1000-page profile is known to lack pages once 1,257 were read (1000, then at least
        // 256 beyond it and more than a quarter of it, plus one).
        let count_limit = 1257;
        for (app, pid) in [("/bin/a", 100), ("/bin/b", 200)] {
            d.world.learned.insert(app.into(), settled(3, WALL_MS - 60_000));
            d.world.profiles.insert(app.into(), profile(1000));
            let out = d.exec(0, pid, app);
            assert!(out.contains(&Action::Watch { pids: vec![pid], window_ns, count_limit }), "{out:?}");
            assert!(!out.iter().any(|a| matches!(a, Action::Unfollow(_))), "{out:?}");
        }
        // Both replays loaded the whole profile.
        d.event(5, Event::ReplayFinished { launch: 1, report: read(1000) });
        d.event(5, Event::ReplayFinished { launch: 2, report: read(1000) });
        // A helper /bin/a execs is watched with it.
        d.fork(10, 100, 101);
        assert_eq!(d.exec(11, 101, "/bin/helper"), vec![Action::Watch { pids: vec![101], window_ns, count_limit }]);
        // /bin/a and its helper read 600 pages from disk, past a quarter of its 1000-page profile;
        // /bin/b read 200 (its profile held what it needed).
        d.world.disk_reads.extend([(100, 500), (101, 100), (200, 200)]);
        d.exit(30, 101);
        d.exit(30, 100);
        d.exit(30, 200);
        let out = d.wake(3000);
        let refollowed: Vec<&Action> = out.iter().filter(|a| matches!(a, Action::Refollow { .. })).collect();
        assert_eq!(refollowed, vec![&Action::Refollow { app: "/bin/a".into() }], "{out:?}");
        assert!(d.world.disk_reads.is_empty(), "every watched process was read once");
        assert!(saved(&out).is_empty(), "nothing learned from launches not followed");
    }

    #[test]
    fn a_cold_start_that_raced_its_replay_is_not_taken_for_a_profile_that_lacks_pages() {
        let mut d = Daemon::every_exec(Config::default());
        d.world.learned.insert("/bin/a".into(), settled(3, WALL_MS - 60_000));
        d.world.profiles.insert("/bin/a".into(), profile(1000));
        d.exec(0, 100, "/bin/a");
        // The program read 600 pages of its profile itself while the replay loaded the other 400.
        d.event(5, Event::ReplayFinished { launch: 1, report: read(400) });
        d.world.disk_reads.extend([(100, 600)]);
        d.exit(30, 100);
        let out = d.wake(3000);
        assert!(!out.iter().any(|a| matches!(a, Action::Refollow { .. })), "{out:?}");
        // The same reads with the whole profile loaded by the replay: 600 pages it lacked.
        d.exec(4000, 200, "/bin/a");
        let launch = d.engine.tracker.active().iter().find(|l| l.root == 200).map(|l| l.id).expect("a's launch");
        d.event(4005, Event::ReplayFinished { launch, report: read(1000) });
        d.world.disk_reads.extend([(200, 600)]);
        d.exit(4030, 200);
        let out = d.wake(8000);
        assert!(out.contains(&Action::Refollow { app: "/bin/a".into() }), "{out:?}");
    }

    #[test]
    fn a_refollow_that_taught_nothing_holds_the_next_one() {
        let mut d = Daemon::every_exec(Config::default());
        d.world.learned.insert("/bin/reader".into(), settled(3, WALL_MS - 60_000));
        d.world.profiles.insert("/bin/reader".into(), profile(1000));
        // A watched launch that read 50,000 pages from disk after its whole profile was loaded.
        let watched_read = |d: &mut Daemon, at: u64, pid: u32| {
            d.exec(at, pid, "/bin/reader");
            let launch = d.engine.tracker.active().iter().find(|l| l.root == pid).map(|l| l.id).expect("its launch");
            d.event(at + 5, Event::ReplayFinished { launch, report: read(1000) });
            d.world.disk_reads.extend([(pid, 50_000)]);
            d.exit(at + 30, pid);
            d.wake(at + 3000)
        };
        let out = watched_read(&mut d, 0, 100);
        assert!(out.contains(&Action::Refollow { app: "/bin/reader".into() }), "{out:?}");
        assert_eq!(d.engine.refollows_held(), 0);
        // The launch followed after it found the profile stable (one more learned, stable).
        d.world.learned.insert(
            "/bin/reader".into(),
            LearningHistory { learned: 4, last_learned_ms: WALL_MS, stable_streak: 3, unstable_streak: 0 },
        );
        let out = watched_read(&mut d, 10_000, 200);
        assert!(!out.iter().any(|a| matches!(a, Action::Refollow { .. })), "{out:?}");
        assert_eq!(d.engine.refollows_held(), 1);
        // The hold is kept by the world: a restarted daemon holds the refollow too.
        let held = d.world.refollow_holds["/bin/reader"];
        assert_eq!((held.learned_at, held.fruitless), (4, 1));
        let mut restarted = Daemon::every_exec(Config::default());
        restarted.world = std::mem::take(&mut d.world);
        let out = watched_read(&mut restarted, 20_000, 300);
        assert!(!out.iter().any(|a| matches!(a, Action::Refollow { .. })), "{out:?}");
        assert_eq!(restarted.engine.refollows_held(), 1);
    }

    // --- Workload runs followed for their file sequence (issue 22) ------------------------------

    /// Exec-time replay on (the prefetches of runs share its budget), prediction off.
    fn replay_only() -> Config {
        let mut c = Config::default();
        c.predict.enabled = false;
        c
    }

    /// One build: `make` (pid `root`) at `t0` ms, each of `files` sources opened and read
    /// (`pages` pages) by a `cc1` process of its own, one a second, so that from the 16th on
    /// they come after make's launch window (15 s at most); then make exits. Every action.
    fn build(d: &mut Daemon, t0: u64, root: u32, files: u64, pages: u64) -> Vec<Action> {
        let mut out = d.exec(t0, root, "/usr/bin/make");
        out.extend(d.wake(t0));
        for i in 0..files {
            let t = t0 + 1000 * (i + 1);
            let child = root + 1 + i as u32;
            out.extend(d.fork(t, root, child));
            out.extend(d.exec(t, child, "/usr/bin/cc1"));
            d.lookup(t, child, &format!("/src/f{i}.c"), LookupKind::Stat);
            d.pages(t, child, 1000 + i, 0, pages);
            out.extend(d.exit(t + 1, child));
            out.extend(d.wake(t + 2));
        }
        let end = t0 + 1000 * (files + 1);
        out.extend(d.exit(end, root));
        out.extend(d.wake(end + 1000));
        out
    }

    /// The actions of `out` (a [`build`]'s) until the loop's first sleep, after make's exec and
    /// before any source is opened.
    fn until_first_sleep(out: &[Action]) -> Vec<Action> {
        out.iter().take_while(|a| !matches!(a, Action::ArmTimer(_))).cloned().collect()
    }

    /// The files handed out to be prefetched, in order.
    fn prefetched(actions: &[Action]) -> Vec<String> {
        actions
            .iter()
            .filter_map(|a| if let Action::PrefetchFiles { files, .. } = a { Some(files) } else { None })
            .flatten()
            .map(|f| f.path.clone())
            .collect()
    }

    fn source(i: u64) -> String {
        format!("/src/f{i}.c")
    }

    #[test]
    fn a_build_is_followed_past_its_window_across_its_short_processes_and_learned() {
        let mut d = Daemon::every_exec(replay_only());
        let out = build(&mut d, 0, 100, 20, 4);
        assert!(prefetched(&out).is_empty(), "nothing known yet: {out:?}");
        assert!(!out.iter().any(|a| matches!(a, Action::Unfollow(_))), "make stays followed past its window: {out:?}");
        let saved: Vec<&(String, Option<FileContextRecord>)> =
            out.iter().filter_map(|a| if let Action::SaveFileContexts(r) = a { Some(r) } else { None }).flatten().collect();
        assert_eq!(saved.len(), 1, "saved once, at the run's end: {out:?}");
        assert_eq!(saved[0].0, "/usr/bin/make");
        let record = saved[0].1.as_ref().unwrap();
        let mut paths: Vec<String> = record.files.iter().map(|f| f.path.clone()).collect();
        paths.sort();
        let mut want: Vec<String> = (0..20).map(source).collect();
        want.sort();
        assert_eq!(paths, want, "every source, those read after make's 15 s window too, by 20 processes");
        let (counts, _) = d.engine.run_counts();
        assert_eq!((counts.runs, counts.files_learned), (1, 20));
    }

    #[test]
    fn a_learned_build_has_its_next_files_prefetched_ahead_once_per_run() {
        let mut d = Daemon::every_exec(replay_only());
        build(&mut d, 0, 100, 40, 4);
        for (run, t0, root) in [(2, 100_000, 200), (3, 200_000, 300)] {
            let out = build(&mut d, t0, root, 40, 4);
            let asked = prefetched(&out);
            let mut once = asked.clone();
            once.sort();
            once.dedup();
            assert_eq!(once.len(), asked.len(), "run {run}: each file asked for once: {asked:?}");
            let mut want: Vec<String> = (0..40).map(source).collect();
            want.sort();
            assert_eq!(once, want, "run {run}: every source predicted");
            // The whole build is 160 pages, far under the replay budget: at make's exec, before
            // any source is opened, every source is asked for, in learned order.
            let at_exec = prefetched(&until_first_sleep(&out));
            assert_eq!(at_exec, (0..40).map(source).collect::<Vec<_>>(), "run {run}");
            let files = out.iter().find_map(|a| if let Action::PrefetchFiles { files, .. } = a { Some(files) } else { None });
            let f = &files.unwrap()[0];
            assert_eq!((f.dev, f.ino, f.ranges.clone()), (1, 1000, vec![PageRange::new(0, 4)]), "the inode and ranges learned");
        }
    }

    #[test]
    fn prediction_waits_while_a_run_s_files_are_prefetched() {
        let mut d = Daemon::every_exec(Config::default());
        d.event(0, Event::Start);
        d.event(0, Event::Ready);
        build(&mut d, 0, 100, 40, 4);
        // The next build: its whole learned sequence is handed out at make's exec.
        let mut out = d.exec(100_000, 200, "/usr/bin/make");
        out.extend(d.wake(100_000));
        assert!(!prefetched(&out).is_empty(), "the build is prefetched: {out:?}");
        // An application without a profile starts 2 s later: no replay of its own, but the
        // build's files are being loaded, so the round waits.
        let out = d.exec(102_000, 900, "/bin/other");
        assert_eq!(plans(&out), vec![(PlanTrigger::LaunchStarted { app: "/bin/other".into(), instance: 900 }, true)]);
        // Nothing handed out since: the hold has ended 5 s after.
        let out = d.exit(106_000, 900);
        assert_eq!(plans(&out), vec![(PlanTrigger::AppExited { app: "/bin/other".into(), instance: 900 }, false)]);
    }

    #[test]
    fn the_replay_budget_bounds_what_runs_prefetch() {
        let mut c = replay_only();
        // 1 MiB a minute: four of the 256 KiB sources.
        c.launch.replay_mib_per_minute = 1;
        let mut d = Daemon::every_exec(c);
        build(&mut d, 0, 100, 20, 64);
        let asked = prefetched(&build(&mut d, 100_000, 200, 20, 64));
        assert_eq!(asked.len(), 4, "{asked:?}");
        assert_eq!(d.engine.run_counts().1, 16, "the others not prefetched, counted");
        // No budget at all: nothing, the model still learns.
        let mut c = replay_only();
        c.launch.replay_on_exec = false;
        let mut d = Daemon::every_exec(c);
        build(&mut d, 0, 100, 20, 4);
        assert!(prefetched(&build(&mut d, 100_000, 200, 20, 4)).is_empty());
        assert_eq!(d.engine.run_counts().0.files_learned, 40);
    }

    #[test]
    fn run_prefetches_count_against_the_budget_by_what_they_read() {
        let mut c = replay_only();
        c.launch.replay_mib_per_minute = 1;
        let mut d = Daemon::every_exec(c);
        build(&mut d, 0, 100, 20, 64);
        let out = build(&mut d, 100_000, 200, 20, 64);
        assert_eq!(prefetched(&out).len(), 4);
        // Each prefetch reports, in order, that it read nothing (the files were resident).
        let handed = out.iter().filter(|a| matches!(a, Action::PrefetchFiles { .. })).count();
        for _ in 0..handed {
            d.event(121_500, Event::FilePrefetched { pages_loaded: 0, busy_ns: 0, after_open_ns: None });
        }
        assert_eq!(prefetched(&build(&mut d, 125_000, 300, 20, 64)).len(), 4, "the minute's budget is whole again");
        // A prefetch that read what it asked for keeps it spent.
        let mut c = replay_only();
        c.launch.replay_mib_per_minute = 1;
        let mut d = Daemon::every_exec(c);
        build(&mut d, 0, 100, 20, 64);
        let out = build(&mut d, 100_000, 200, 20, 64);
        for a in &out {
            if let Action::PrefetchFiles { files, .. } = a {
                let pages = files.iter().map(|f| f.pages).sum();
                d.event(121_500, Event::FilePrefetched { pages_loaded: pages, busy_ns: 0, after_open_ns: None });
            }
        }
        assert!(prefetched(&build(&mut d, 125_000, 300, 20, 64)).is_empty(), "spent");
    }

    #[test]
    fn a_build_gets_its_whole_learned_sequence_at_its_exec_only_when_it_takes_at_most_half_the_budget() {
        // 40 sources of 64 pages: 2,560 pages (10 MiB).
        for (mib_per_minute, whole) in [(16, false), (32, true)] {
            let mut c = replay_only();
            c.launch.replay_mib_per_minute = mib_per_minute;
            let mut d = Daemon::every_exec(c);
            build(&mut d, 0, 100, 40, 64);
            let out = build(&mut d, 100_000, 200, 40, 64);
            let at_exec = prefetched(&until_first_sleep(&out));
            let want = if whole { 40 } else { PREFETCH_DEPTH as u64 };
            assert_eq!(at_exec, (0..want).map(source).collect::<Vec<_>>(), "{mib_per_minute} MiB a minute");
            assert_eq!(d.engine.run_counts().0.runs_whole, u64::from(whole));
        }
    }

    #[test]
    fn files_not_queued_are_asked_for_again_at_the_next_prediction() {
        let mut d = Daemon::every_exec(replay_only());
        build(&mut d, 0, 100, 40, 4);
        d.world.fail_prefetch = true;
        let out = d.exec(100_000, 200, "/usr/bin/make");
        assert!(prefetched(&out).is_empty());
        let failed = prefetched(&d.event(100_000, Event::AboutToSleep));
        assert_eq!(failed, (0..40).map(source).collect::<Vec<_>>(), "the whole build asked for, not queued");
        d.world.fail_prefetch = false;
        d.fork(101_000, 200, 201);
        d.lookup(101_000, 201, &source(0), LookupKind::Stat);
        d.pages(101_000, 201, 1000, 0, 4);
        let again = prefetched(&d.event(101_000, Event::AboutToSleep));
        assert_eq!(again, (1..=PREFETCH_DEPTH as u64).map(source).collect::<Vec<_>>(), "f1.. asked for again, then f8");
    }

    #[test]
    fn a_launch_replayed_only_of_a_workload_with_learned_files_is_followed_as_a_run() {
        let mut d = Daemon::every_exec(replay_only());
        build(&mut d, 0, 100, 3, 4);
        // make is now known and settled: its launches are replayed only, and would be taken off at
        // exec; its files were learned, so its run is followed instead.
        d.world.learned.insert("/usr/bin/make".into(), settled(3, WALL_MS + 50_000));
        let out = d.exec(100_000, 200, "/usr/bin/make");
        assert!(!out.iter().any(|a| matches!(a, Action::Unfollow(_) | Action::Watch { .. })), "{out:?}");
        let out = d.event(100_000, Event::AboutToSleep);
        assert_eq!(prefetched(&out), vec![source(0), source(1), source(2)]);
        // An application with nothing learned of its files is taken off as before.
        d.world.learned.insert("/bin/a".into(), settled(3, WALL_MS + 50_000));
        assert_eq!(d.exec(100_001, 300, "/bin/a"), vec![Action::Unfollow(vec![300])]);
    }

    #[test]
    fn a_run_replayed_only_that_read_beyond_its_profile_makes_the_next_launch_followed() {
        let mut d = Daemon::every_exec(replay_only());
        build(&mut d, 0, 100, 3, 4);
        d.world.learned.insert("/usr/bin/make".into(), settled(3, WALL_MS + 50_000));
        d.world.profiles.insert("/usr/bin/make".into(), profile(1000));
        let out = d.exec(100_000, 200, "/usr/bin/make");
        assert!(replays(&out).len() == 1 && !out.iter().any(|a| matches!(a, Action::Watch { .. })), "{out:?}");
        let launch = d.engine.tracker.active().iter().find(|l| l.root == 200).map(|l| l.id).expect("make's launch");
        d.event(100_050, Event::ReplayFinished { launch, report: read(1000) });
        // 600 pages read from disk in its window, past a quarter of its 1000-page profile.
        d.engine.on_trace(TraceEvent::Page {
            tid: 200,
            ts_ns: ns(100_100),
            kind: PageKind::Insertion,
            inode: InodeKey { dev: 1, ino: 77 },
            pages: PageRange::new(0, 600),
        });
        d.exit(100_200, 200);
        let out = d.wake(103_000);
        assert!(out.contains(&Action::Refollow { app: "/usr/bin/make".into() }), "{out:?}");
    }

    #[test]
    fn a_run_s_disk_reads_the_kernel_counted_are_judged_as_its_page_records_were() {
        // Counted to its end (the launch's end record), or so far (the launch still runs).
        for ended in [true, false] {
            let mut d = Daemon::every_exec(replay_only());
            build(&mut d, 0, 100, 3, 4);
            d.world.learned.insert("/usr/bin/make".into(), settled(3, WALL_MS + 50_000));
            d.world.profiles.insert("/usr/bin/make".into(), profile(1000));
            d.exec(100_000, 200, "/usr/bin/make");
            let launch = d.engine.tracker.active().iter().find(|l| l.root == 200).map(|l| l.id).expect("make's launch");
            d.event(100_050, Event::ReplayFinished { launch, report: read(1000) });
            if ended {
                d.exit(100_200, 200);
                d.engine.on_trace(TraceEvent::RunDiskReads { root: 200, pages: 600 });
            } else {
                d.world.run_disk_reads.insert(200, 600);
            }
            let out = d.wake(140_000);
            assert!(out.contains(&Action::Refollow { app: "/usr/bin/make".into() }), "ended {ended}: {out:?}");
        }
    }

    /// The runs' tasks to be followed for their first reads only, with how long their disk
    /// reads still count.
    fn first_reads(actions: &[Action]) -> Vec<(Vec<u32>, u64)> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::RunReads { pids, first_reads_only: true, disk_reads_ns } => Some((pids.clone(), *disk_reads_ns)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_run_whose_launch_streams_a_file_is_followed_on_for_its_opens_only() {
        let mut d = Daemon::every_exec(replay_only());
        let mut out = d.exec(0, 100, "/usr/bin/reader");
        out.extend(d.wake(0));
        assert!(first_reads(&out).is_empty(), "a first launch is followed whole: {out:?}");
        // It reads one file forward, 16 MiB in 64-page steps: past `read_through_mib` (8).
        d.lookup(1, 100, "/data/big", LookupKind::Stat);
        for i in 0..64 {
            d.pages(1 + i, 100, 5000, i * 64, 64);
        }
        let out = d.event(100, Event::AboutToSleep);
        assert_eq!(first_reads(&out), vec![(vec![100], 0)], "its run is taken to first reads: {out:?}");
        assert!(!out.iter().any(|a| matches!(a, Action::Unfollow(_))), "its run still follows it: {out:?}");
        let (counts, _) = d.engine.run_counts();
        assert_eq!((counts.runs_streamed, counts.runs_sampled), (1, 0));
    }

    #[test]
    fn a_settled_workload_s_runs_are_followed_for_their_opens_only_and_still_prefetched() {
        let mut d = Daemon::every_exec(replay_only());
        for (t0, root) in [(0, 100), (100_000, 200), (200_000, 300)] {
            let out = build(&mut d, t0, root, 40, 4);
            assert!(first_reads(&out).is_empty(), "followed whole while the model learns: {out:?}");
        }
        // The last two runs opened nothing the model had not foreseen: the next is a sample, taken
        // to its first reads once make's launch (followed to learn its start) no longer is.
        let out = build(&mut d, 300_000, 400, 40, 4);
        let sampled = first_reads(&out);
        assert_eq!(sampled.len(), 1, "{out:?}");
        assert!(sampled[0].0.contains(&400) && sampled[0].1 == 0, "{sampled:?}");
        let mut asked = prefetched(&out);
        asked.sort();
        let mut want: Vec<String> = (0..40).map(source).collect();
        want.sort();
        assert_eq!(asked, want, "its next files are still prefetched, each once");
        let (counts, _) = d.engine.run_counts();
        assert_eq!((counts.runs, counts.runs_sampled, counts.files_learned), (4, 1, 160));
        // A launch replayed only is judged by its disk reads in its window: they still count.
        d.world.learned.insert("/usr/bin/make".into(), settled(3, WALL_MS + 350_000));
        d.world.profiles.insert("/usr/bin/make".into(), profile(1000));
        let mut out = d.exec(400_000, 500, "/usr/bin/make");
        out.extend(d.event(400_000, Event::AboutToSleep));
        assert_eq!(first_reads(&out), vec![(vec![500], 15_000_000_000)], "{out:?}");
    }

    #[test]
    fn a_settled_workload_whose_replay_found_everything_resident_is_not_followed_as_a_run() {
        let mut d = Daemon::every_exec(replay_only());
        for (t0, root) in [(0, 100), (100_000, 200), (200_000, 300), (300_000, 400)] {
            build(&mut d, t0, root, 40, 4);
        }
        d.world.learned.insert("/usr/bin/make".into(), settled(3, WALL_MS + 350_000));
        d.world.profiles.insert("/usr/bin/make".into(), profile(1000));
        d.world.replays_all_resident = true;
        let mut out = d.exec(400_000, 500, "/usr/bin/make");
        out.extend(d.event(400_000, Event::AboutToSleep));
        assert!(first_reads(&out).is_empty(), "not followed: {out:?}");
        assert!(prefetched(&out).is_empty(), "nothing to prefetch: {out:?}");
        assert!(out.iter().any(|a| matches!(a, Action::Watch { pids, .. } if pids == &vec![500])), "still watched: {out:?}");
        assert_eq!(d.engine.run_counts().0.runs_skipped_resident, 1);
        // A replay that had to look (or load) leaves the run followed, a sample.
        d.world.replays_all_resident = false;
        let mut out = d.exec(500_000, 600, "/usr/bin/make");
        out.extend(d.event(500_000, Event::AboutToSleep));
        assert_eq!(first_reads(&out).len(), 1, "{out:?}");
        assert_eq!(d.engine.run_counts().0.runs_skipped_resident, 1);
    }

    #[test]
    fn a_sampled_run_opening_files_its_model_did_not_foresee_makes_the_next_runs_followed_whole() {
        let mut d = Daemon::every_exec(replay_only());
        for (t0, root) in [(0, 100), (100_000, 200), (200_000, 300)] {
            build(&mut d, t0, root, 20, 4);
        }
        let out = build(&mut d, 300_000, 400, 40, 4);
        assert_eq!(first_reads(&out).len(), 1, "a sample: {out:?}");
        assert_eq!(d.engine.run_counts().0.runs_unsettled, 1, "20 of its 40 files were new");
        let out = build(&mut d, 400_000, 500, 40, 4);
        assert!(first_reads(&out).is_empty(), "followed whole again: {out:?}");
    }

    #[test]
    fn a_sampled_run_still_gets_its_whole_learned_sequence_at_its_exec() {
        let mut d = Daemon::every_exec(replay_only());
        for (t0, root) in [(0, 100), (100_000, 200), (200_000, 300)] {
            build(&mut d, t0, root, 40, 4);
        }
        let out = build(&mut d, 300_000, 400, 40, 4);
        assert_eq!(first_reads(&out).len(), 1, "a sample: {out:?}");
        let at_exec = prefetched(&until_first_sleep(&out));
        assert_eq!(at_exec, (0..40).map(source).collect::<Vec<_>>(), "every source at make's exec, in learned order");
        let (counts, _) = d.engine.run_counts();
        assert_eq!((counts.runs_whole, counts.runs_sampled, counts.runs_unsettled), (3, 1, 0), "{counts:?}");
    }

    #[test]
    fn file_contexts_are_loaded_at_the_start_and_saved_at_the_stop() {
        let mut d = Daemon::every_exec(replay_only());
        build(&mut d, 0, 100, 3, 4);
        let model = d.engine.file_contexts().clone();
        let mut d = Daemon::every_exec(replay_only());
        d.world.file_contexts = Some(model);
        d.event(0, Event::Start);
        d.exec(10, 200, "/usr/bin/make");
        assert_eq!(prefetched(&d.event(10, Event::AboutToSleep)), vec![source(0), source(1), source(2)]);
        d.fork(20, 200, 201);
        d.lookup(20, 201, "/src/new.c", LookupKind::Stat);
        d.pages(20, 201, 77, 0, 1);
        let out = d.event(30, Event::Stop);
        assert!(
            out.iter().any(|a| matches!(a, Action::SaveFileContexts(r) if r.len() == 1 && r[0].0 == "/usr/bin/make")),
            "{out:?}"
        );
    }

    #[test]
    fn changed_file_contexts_are_written_at_most_every_30_s_and_at_the_stop() {
        let saves = |out: &[Action]| out.iter().filter(|a| matches!(a, Action::SaveFileContexts(_))).count();
        let mut d = Daemon::every_exec(replay_only());
        assert_eq!(saves(&build(&mut d, 0, 100, 3, 4)), 1, "the first run's end writes at once");
        // A second build ends 10 s later: not written yet, nor at a wake-up before 30 s.
        assert_eq!(saves(&build(&mut d, 6_000, 200, 3, 4)), 0);
        assert_eq!(saves(&d.wake(20_000)), 0);
        assert_eq!(saves(&d.wake(36_000)), 1, "the first wake-up 30 s after the last write writes it");
        assert_eq!(saves(&d.wake(70_000)), 0, "nothing changed since");
        // Changed again, then stopped within the 30 s: the stop writes it.
        assert_eq!(saves(&build(&mut d, 80_000, 300, 3, 4)), 1);
        assert_eq!(saves(&build(&mut d, 86_000, 400, 3, 4)), 0);
        assert_eq!(saves(&d.event(92_000, Event::Stop)), 1);
    }

    proptest::proptest! {
        /// Once a watched launch's count reaches its limit the verdict is known: its profile
        /// lacks pages whatever its replay left unloaded; below the limit the count is exact.
        #[test]
        fn a_count_at_the_watch_limit_always_says_the_profile_lacks_pages(
            expected in 0u64..1_000_000_000,
            unloaded in 0u64..2_000_000_000,
            share in 0.0f64..4.0,
            extra in 0u64..1_000_000,
        ) {
            let limit = watch_count_limit(expected, share);
            proptest::prop_assert!(profile_lacks_pages(limit + extra, expected, unloaded, share));
        }
    }

    #[test]
    fn a_profile_lacks_pages_when_its_launch_read_more_than_its_share_and_a_mebibyte() {
        assert!(profile_lacks_pages(300, 1000, 0, 0.25));
        assert!(!profile_lacks_pages(250, 1000, 0, 0.25));
        assert!(!profile_lacks_pages(255, 10, 0, 0.25), "below a MiB: data any launch may read");
        assert!(profile_lacks_pages(256, 0, 0, 0.25));
        assert!(!profile_lacks_pages(1000, 1000, 0, f64::NAN), "NaN is read as 1: only beyond the whole profile");
        assert!(profile_lacks_pages(1001, 1000, 0, f64::NAN));
    }

    #[test]
    fn what_a_profile_holds_and_its_replay_did_not_load_is_no_evidence_that_it_lacks_pages() {
        // A cold start racing its replay: 3500 of the 8000 profile pages were left to the program.
        assert!(!profile_lacks_pages(3500, 8000, 4000, 0.25));
        assert!(!profile_lacks_pages(6000, 8000, 4000, 0.25), "2000 beyond: not past a quarter");
        assert!(profile_lacks_pages(6001, 8000, 4000, 0.25));
        // The replay had not finished: every page of the profile may have been read by the launch.
        assert!(!profile_lacks_pages(8000, 8000, 8000, 0.25));
        assert!(profile_lacks_pages(10_001, 8000, 8000, 0.25));
        assert!(profile_lacks_pages(600, 0, 500, 0.25), "unloaded pages are capped by the profile");
    }

    #[test]
    fn observing_every_exec_a_process_whose_exec_event_was_lost_is_taken_off() {
        let mut d = Daemon::every_exec(no_replay());
        d.engine.on_trace(TraceEvent::ExecObserved { pid: 300, ts_ns: ns(0) });
        d.engine.on_trace(TraceEvent::ExecObserved { pid: 100, ts_ns: ns(0) });
        assert!(d.exec(1, 100, "/bin/a").is_empty(), "followed");
        let out = d.event(1000, Event::AboutToSleep);
        assert!(!out.iter().any(|a| matches!(a, Action::Unfollow(_))), "not yet: {out:?}");
        let out = d.event(UNCLAIMED_EXEC_NS / MS + 1, Event::AboutToSleep);
        assert!(out.contains(&Action::Unfollow(vec![300])), "{out:?}");
        let out = d.event(5000, Event::AboutToSleep);
        assert!(!out.iter().any(|a| matches!(a, Action::Unfollow(_))), "once: {out:?}");
    }

    #[test]
    fn a_launch_that_leaves_no_lookup_keeps_its_lookups_as_before() {
        let mut d = Daemon::every_exec(no_replay());
        d.exec(0, 100, "/bin/a");
        d.pages(10, 100, 5, 0, 8);
        d.event(10, Event::Exit { pid: 100, tgid: 100, ts_ns: ns(10) });
        let out = d.wake(2000);
        let l = &saved(&out)[0];
        assert_eq!(l.profile.lookups, vec![Lookup { path: "/bin/a".into(), kind: LookupKind::Stat }]);
        assert!(!out.iter().any(|a| matches!(a, Action::Unfollow(_))), "its processes are gone: {out:?}");
    }

    #[test]
    fn an_application_learned_often_and_lately_is_not_followed_and_learns_nothing() {
        let mut d = Daemon::new(no_replay());
        d.world.learned.insert("/bin/a".into(), settled(3, WALL_MS - 60_000));
        assert_eq!(d.exec(0, 100, "/bin/a"), vec![]);
        d.pages(10, 100, 5, 0, 8);
        // It lasts while its processes do: the quiet time does not end it.
        assert!(d.wake(5000).iter().all(|a| !matches!(a, Action::SaveLaunch(_))));
        assert_eq!(d.engine.launches_in_progress(), 1);
        d.exit(6000, 100);
        let out = d.wake(6100);
        assert!(saved(&out).is_empty(), "{out:?}");
        assert!(d.engine.is_idle());
    }

    #[test]
    fn once_every_window_closed_no_timer_is_armed_but_the_replan_interval() {
        // Idle must cost no wake-up: with nothing in progress the loop sleeps without a timeout
        // (prediction off), or until the next re-plan (prediction on), whatever ran before.
        for predicting in [false, true] {
            let mut config = no_replay();
            config.predict.enabled = predicting;
            let mut d = Daemon::every_exec(config);
            d.event(0, Event::Start);
            d.event(0, Event::Ready);
            d.world.learned.insert("/bin/known".into(), settled(5, WALL_MS - 60_000));
            d.exec(0, 100, "/bin/known");
            d.exec(0, 200, "/bin/new");
            d.pages(10, 200, 5, 0, 8);
            assert!(timer(&d.wake(20)).is_some_and(|t| t.is_some()), "windows open: a deadline");
            d.exit(30, 100);
            d.exit(40, 200);
            let out = d.wake(20_000);
            assert!(d.engine.is_idle(), "{out:?}");
            let replan = predicting.then(|| d.engine.next_replan_ns()).flatten();
            assert_eq!(timer(&out), Some(replan), "predicting: {predicting}");
            assert_eq!(replan.is_some(), predicting);
            // Sleeping again with nothing new arms nothing sooner.
            assert_eq!(timer(&d.wake(20_001)), Some(replan));
        }
    }

    #[test]
    fn observing_every_exec_a_launch_only_grouping_its_processes_arms_no_timer_and_closes_before_a_later_fork() {
        let mut d = Daemon::every_exec(no_replay());
        d.event(0, Event::Start);
        d.world.learned.insert("/bin/known".into(), settled(5, WALL_MS - 60_000));
        d.exec(0, 100, "/bin/known");
        assert_eq!(d.engine.launches_in_progress(), 1);
        assert_eq!(timer(&d.event(0, Event::AboutToSleep)), Some(None), "nothing to wait for: no wake-up of its own");
        // Still running past its cap: what it starts now is a launch of its own, as when its
        // window closed on time.
        d.fork(20_000, 100, 101);
        assert!(d.engine.tracker.get(1).is_none());
        d.exec(20_001, 101, "/bin/known");
        assert!(d.engine.tracker.get(2).is_some_and(|l| l.root == 101));
        // Its exit, read at the next wake-up: it closes then, with no grace period.
        d.exit(20_050, 101);
        d.wake(20_050);
        assert!(d.engine.is_idle());
    }

    #[test]
    fn an_exit_read_late_is_recorded_when_it_happened() {
        let mut d = Daemon::predicting(no_replay());
        d.exec(10, 100, "/bin/a");
        // Nothing woke the loop for 4 s after the exit (observing every exec, exits wake no one).
        let out = d.event(5_000, Event::Exit { pid: 100, tgid: 100, ts_ns: ns(1_000) });
        assert_eq!(plans(&out), vec![(PlanTrigger::AppExited { app: "/bin/a".into(), instance: 100 }, false)]);
        let records = activity(&d.event(5_000, Event::Stop)).concat();
        let exit = records.iter().find(|r| !r.launch).expect("the exit is recorded");
        assert_eq!((exit.at_ms, exit.local_ms), (at(1_000).unix_ms, at(1_000).local_ms));
        // An event stamped after the time it is read at is taken as read then.
        assert_eq!(event_time(at(10), ns(20)), at(10));
        assert_eq!(event_time(at(10), ns(4)), at(4));
    }

    #[test]
    fn a_settled_application_is_followed_again_after_the_refollow_interval() {
        let mut d = Daemon::new(no_replay());
        d.world.learned.insert("/bin/a".into(), settled(5, WALL_MS - 3_600_000));
        assert_eq!(d.exec(0, 100, "/bin/a"), vec![Action::Follow { pid: 100 }]);
        d.world.learned.insert("/bin/b".into(), settled(5, WALL_MS - 3_599_000));
        assert_eq!(d.exec(0, 200, "/bin/b"), vec![]);
    }

    #[test]
    fn an_application_is_followed_until_its_profile_is_stable_then_sampled() {
        let mut d = Daemon::new(no_replay());
        let h = |learned, stable_streak, unstable_streak| LearningHistory {
            learned,
            last_learned_ms: WALL_MS - 60_000,
            stable_streak,
            unstable_streak,
        };
        // Past its first launches, still adding pages: followed.
        d.world.learned.insert("/bin/a".into(), h(5, 0, 1));
        assert_eq!(d.exec(0, 100, "/bin/a"), vec![Action::Follow { pid: 100 }]);
        // One stable launch is not enough (stable_launches = 2).
        d.world.learned.insert("/bin/b".into(), h(5, 1, 0));
        assert_eq!(d.exec(0, 200, "/bin/b"), vec![Action::Follow { pid: 200 }]);
        // Two in a row: settled, sampled once an hour.
        d.world.learned.insert("/bin/c".into(), h(5, 2, 0));
        assert_eq!(d.exec(0, 300, "/bin/c"), vec![]);
        // A profile that never settles is sampled after max_unstable_launches in a row.
        d.world.learned.insert("/bin/e".into(), h(12, 0, 8));
        assert_eq!(d.exec(0, 400, "/bin/e"), vec![]);
    }

    #[test]
    fn the_follow_policy_always_follows_the_first_launches_and_a_due_sample() {
        let p = FollowPolicy { first_launches: 3, stable_launches: 2, max_unstable_launches: 8, refollow_after_ms: 1000 };
        let settled = LearningHistory { learned: 3, last_learned_ms: 10_000, stable_streak: 5, unstable_streak: 0 };
        assert!(!p.follows(&settled, 10_500));
        assert!(p.follows(&settled, 11_000), "a sample is due");
        assert!(p.follows(&settled, 9_000), "the clock went back");
        assert!(p.follows(&LearningHistory { learned: 2, ..settled }, 10_500), "first launches");
        let off = FollowPolicy { stable_launches: 0, ..p };
        assert!(!off.follows(&LearningHistory { stable_streak: 0, unstable_streak: 3, ..settled }, 10_500));
    }

    #[test]
    fn a_launch_is_not_followed_while_the_pid_filter_is_being_written() {
        let mut d = Daemon::new(no_replay());
        d.world.filter_busy = true;
        assert_eq!(d.exec(0, 100, "/bin/a"), vec![]);
    }

    #[test]
    fn a_helper_joining_a_launch_asks_nothing_and_does_nothing() {
        let mut d = Daemon::new(no_replay());
        d.exec(0, 100, "/bin/a");
        d.event(1, Event::Fork { parent_tgid: 100, child_pid: 101, child_tgid: 101 });
        let asked = d.world.learned_asked;
        assert_eq!(d.exec(2, 101, "/bin/helper"), vec![]);
        assert_eq!(d.world.learned_asked, asked);
        // The helper's pages are the launch's.
        d.pages(3, 101, 7, 0, 10);
        assert_eq!(saved(&d.wake(2000))[0].record.pages_used, 10);
    }

    #[test]
    fn a_new_thread_belongs_to_its_process_and_a_new_process_to_its_parent() {
        // A thread 501 of process 500, reported with the shell 100 as its parent.
        assert_eq!(creator_of(100, 501, 500), 500);
        // A child process 600 of 500.
        assert_eq!(creator_of(500, 600, 600), 500);
    }

    #[test]
    fn a_launch_with_a_profile_is_replayed_at_exec_and_learned_with_what_the_replay_did() {
        let mut d = Daemon::new(Config::default());
        d.world.profiles.insert("/bin/a".into(), profile(50));
        let out = d.exec(0, 100, "/bin/a");
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(out[0], Action::Follow { pid: 100 }, "the pid filter first");
        assert!(
            matches!(&out[1], Action::StartReplay { launch: 1, profile: p, priority: ReplayPriority::BestEffort, .. } if p.page_count() == 50)
        );
        let report = ReplayReport { pages_wanted: 50, pages_resident: 10, pages_loaded: 40, bytes_read: 40 * 4096 };
        d.event(20, Event::ReplayFinished { launch: 1, report });
        d.pages(30, 100, 5, 0, 8);
        let l = &saved(&d.wake(1100))[0];
        assert_eq!(
            (l.record.pages_expected, l.record.pages_resident_at_exec, l.record.pages_prefetched, l.record.bytes_prefetched),
            (50, 10, 40, 40 * 4096)
        );
    }

    #[test]
    fn an_exec_flood_of_one_application_runs_one_replay_at_a_time_and_counts_the_rest() {
        let mut d = Daemon::new(Config::default());
        d.world.profiles.insert("/bin/a".into(), profile(50));
        let mut started = 0;
        for i in 0..100u32 {
            started += replays(&d.exec(i as u64, 100 + i, "/bin/a")).len();
        }
        assert_eq!(started, 1, "one replay for the flood");
        assert_eq!(d.engine.drops().replays_coalesced, 99);
        let report = ReplayReport { pages_wanted: 50, pages_resident: 0, pages_loaded: 50, bytes_read: 50 * 4096 };
        d.event(200, Event::ReplayFinished { launch: 1, report });
        assert_eq!(replays(&d.exec(300, 999, "/bin/a")).len(), 1, "replayed again once the first finished");
    }

    #[test]
    fn a_learned_launch_waits_for_its_replay_report_before_it_is_saved() {
        let mut d = Daemon::new(Config::default());
        d.world.profiles.insert("/bin/a".into(), profile(50));
        d.exec(0, 100, "/bin/a");
        d.pages(30, 100, 5, 0, 8);
        // The window closed; the replay is still loading.
        assert!(saved(&d.wake(1100)).is_empty());
        assert!(d.engine.is_idle());
        let report = ReplayReport { pages_wanted: 50, pages_resident: 0, pages_loaded: 50, bytes_read: 50 * 4096 };
        let out = d.event(3000, Event::ReplayFinished { launch: 1, report });
        let l = &saved(&out)[0];
        assert_eq!((l.record.pages_used, l.record.pages_prefetched, l.record.bytes_prefetched), (8, 50, 50 * 4096));
        // Another exec of it while no replay is in flight replays again.
        assert!(d.exec(4000, 101, "/bin/a").iter().any(|a| matches!(a, Action::StartReplay { .. })));
    }

    #[test]
    fn an_empty_or_missing_profile_is_not_replayed_and_replay_off_replays_nothing() {
        let mut d = Daemon::new(Config::default());
        d.world.profiles.insert("/bin/a".into(), profile(0));
        assert_eq!(d.exec(0, 100, "/bin/a"), vec![Action::Follow { pid: 100 }]);
        assert_eq!(d.exec(0, 200, "/bin/b"), vec![Action::Follow { pid: 200 }]);
        let mut d = Daemon::new(no_replay());
        d.world.profiles.insert("/bin/a".into(), profile(50));
        assert_eq!(d.exec(0, 100, "/bin/a"), vec![Action::Follow { pid: 100 }]);
    }

    #[test]
    fn a_launch_traced_late_in_its_window_is_not_learned() {
        let mut d = Daemon::new(no_replay());
        d.exec(0, 100, "/bin/a");
        d.pages(250, 100, 5, 0, 8);
        d.pages(400, 100, 5, 8, 8);
        // Its pid reached the filter 200 ms after its exec, in a 400 ms window.
        d.world.in_force.insert(100, ns(200));
        assert!(saved(&d.wake(1500)).is_empty());
        assert_eq!(d.engine.launches_traced_late(), 1, "counted for augur status");
        // Early enough: learned.
        d.exec(2000, 200, "/bin/a");
        d.pages(2250, 200, 5, 0, 8);
        d.pages(2400, 200, 5, 8, 8);
        d.world.in_force.insert(200, ns(2003));
        assert_eq!(saved(&d.wake(3500)).len(), 1);
    }

    #[test]
    fn a_launch_below_min_pages_is_not_learned() {
        let mut d = Daemon::new(no_replay());
        d.exec(0, 100, "/bin/a");
        d.pages(10, 100, 5, 0, 3);
        assert!(saved(&d.wake(1500)).is_empty());
        d.exec(2000, 200, "/bin/a");
        d.pages(2010, 200, 5, 0, 4);
        assert_eq!(saved(&d.wake(3500)).len(), 1);
    }

    #[test]
    fn a_bulk_reader_stops_being_followed_at_the_page_cap_and_its_first_pages_are_learned() {
        let mut c = no_replay();
        c.launch.max_launch_mib = 1; // 256 pages of 4 KiB
        let mut d = Daemon::new(c);
        d.exec(0, 100, "/bin/cp");
        assert!(d.event(0, Event::AboutToSleep).contains(&Action::WatchOpens(true)));
        d.pages(10, 100, 5, 0, 200);
        d.pages(20, 100, 5, 200, 100);
        let out = d.event(20, Event::AboutToSleep);
        assert!(out.contains(&Action::Unfollow(vec![100])), "{out:?}");
        assert!(out.contains(&Action::WatchOpens(false)), "{out:?}");
        // Not followed, it lasts while its process does.
        assert!(saved(&d.wake(5000)).is_empty());
        d.exit(6000, 100);
        let l = &saved(&d.wake(6100))[0];
        assert_eq!(l.record.pages_used, 300);
    }

    #[test]
    fn a_tree_reader_at_the_page_cap_learns_its_programs_not_the_files_it_read_through() {
        let mut c = no_replay();
        c.launch.max_launch_mib = 1; // 256 pages of 4 KiB
        let mut d = Daemon::new(c);
        d.exec(0, 100, "/usr/bin/find");
        d.pages(5, 100, 2, 0, 30); // its program and libraries
        // Files of 40 pages, each read in four uses: the seventh crosses the cap.
        for (i, ino) in (10..17u64).enumerate() {
            for part in 0..4 {
                d.pages(10 + i as u64, 100, ino, part * 10, 10);
            }
        }
        assert!(d.event(20, Event::AboutToSleep).contains(&Action::Unfollow(vec![100])));
        d.exit(6000, 100);
        let l = &saved(&d.wake(6100))[0];
        assert_eq!(l.record.pages_used, 30);
    }

    #[test]
    fn a_launch_that_settles_into_reusing_its_pages_stops_being_followed_and_is_learned() {
        let mut d = Daemon::new(no_replay());
        d.exec(0, 100, "/usr/bin/make");
        // 3000 events over 1.2 s on the same 10 pages.
        for i in 0..3000u64 {
            let ts = ns(0) + i * 400_000;
            let inode = InodeKey { dev: 1, ino: 5 };
            d.engine.on_trace(TraceEvent::Page {
                tid: 100,
                ts_ns: ts,
                kind: PageKind::Access,
                inode,
                pages: PageRange::new(i % 10, 1),
            });
        }
        assert!(d.event(1200, Event::AboutToSleep).contains(&Action::Unfollow(vec![100])));
        d.exit(2000, 100);
        let l = &saved(&d.wake(2100))[0];
        assert_eq!(l.record.pages_used, 10);
    }

    #[test]
    fn a_failed_save_is_not_counted_in_the_usage_log() {
        let mut d = Daemon::new(no_replay());
        d.world.fail_save = true;
        d.exec(0, 100, "/bin/a");
        d.pages(10, 100, 5, 0, 8);
        assert_eq!(saved(&d.wake(1500)).len(), 1);
        assert_eq!(d.engine.usage_log().len(), 1, "the launch only");
    }

    #[test]
    fn stopping_saves_open_windows_and_launches_waiting_for_their_replay_and_writes_activity() {
        let mut d = Daemon::new(Config::default());
        d.world.profiles.insert("/bin/a".into(), profile(50));
        // /bin/a closed, its replay still loading; /bin/b still in its window.
        d.exec(0, 100, "/bin/a");
        d.pages(10, 100, 5, 0, 8);
        d.wake(1100);
        d.exec(1200, 200, "/bin/b");
        d.pages(1210, 200, 6, 0, 16);
        let out = d.event(1300, Event::Stop);
        let mut learned: Vec<(String, u64)> = saved(&out).iter().map(|l| (l.record.app.clone(), l.record.pages_used)).collect();
        learned.sort();
        assert_eq!(learned, vec![("/bin/a".to_string(), 8), ("/bin/b".to_string(), 16)]);
        let written = activity(&out);
        assert_eq!(written.len(), 1);
        assert_eq!(written[0].iter().map(|r| r.app.as_str()).collect::<Vec<_>>(), ["/bin/a", "/bin/b"]);
        assert!(d.engine.is_idle());
    }

    // --- Exec-time replay: budget and memory pressure --------------------------------------

    /// The replay report of a replay that read `pages` pages.
    fn read(pages: u64) -> ReplayReport {
        ReplayReport { pages_wanted: pages, pages_resident: 0, pages_loaded: pages, bytes_read: pages * 4096 }
    }

    #[test]
    fn replay_alone_watches_memory_pressure_without_a_prediction_step() {
        let mut d =
            Daemon::new(Config { predict: PredictSection { enabled: false, ..PredictSection::default() }, ..Config::default() });
        assert_eq!(d.event(0, Event::Start), vec![Action::WatchPressure(true)]);
        let mut d =
            Daemon::new(Config { predict: PredictSection { enabled: false, ..PredictSection::default() }, ..no_replay() });
        assert_eq!(d.event(0, Event::Start), vec![], "nothing fetches: nothing watched");
    }

    #[test]
    fn memory_pressure_stops_exec_time_replay_and_holds_it_off_for_ten_seconds() {
        let mut d =
            Daemon::new(Config { predict: PredictSection { enabled: false, ..PredictSection::default() }, ..Config::default() });
        d.world.profiles.insert("/bin/a".into(), profile(50));
        d.event(0, Event::Start);
        assert_eq!(replays(&d.exec(10, 100, "/bin/a")), vec![50]);
        assert_eq!(d.event(20, Event::Pressure), vec![Action::StopReplays]);
        d.event(30, Event::ReplayFinished { launch: 1, report: read(8) });
        assert_eq!(replays(&d.exec(5_000, 101, "/bin/a")), Vec::<u64>::new(), "held off");
        assert_eq!(d.event(6_000, Event::Pressure), vec![], "nothing to stop: the hold is extended");
        assert_eq!(replays(&d.exec(15_000, 102, "/bin/a")), Vec::<u64>::new(), "still held off");
        assert_eq!(replays(&d.exec(16_001, 103, "/bin/a")), vec![50], "ten seconds after the last rise");
    }

    #[test]
    fn a_replay_reads_at_most_its_budget_the_pages_used_first() {
        let mut c = Config::default();
        c.launch.replay_max_mib = 1;
        let mut d = Daemon::new(c);
        d.world.profiles.insert("/bin/a".into(), profile(1000));
        assert_eq!(replays(&d.exec(10, 100, "/bin/a")), vec![256]);
    }

    #[test]
    fn a_replay_pads_its_ranges_only_where_memory_is_plentiful_and_the_padding_fits() {
        let mut c = Config::default();
        c.launch.replay_max_mib = 1; // 256 pages
        let mut d = Daemon::new(c);
        for app in ["/bin/a", "/bin/b", "/bin/c", "/bin/d"] {
            d.world.profiles.insert(app.into(), profile(if app == "/bin/c" { 250 } else { 50 }));
        }
        // 16 GiB available: [0, 50) is replayed as [0, 66) (nothing before page 0).
        d.world.memory_available = Some(16 << 30);
        assert_eq!(replays(&d.exec(10, 100, "/bin/a")), vec![66]);
        // The launch still expects the pages it learned, not the padding.
        assert_eq!(d.engine.tracker.get(1).map(|l| l.pages_expected), Some(50));
        // 3 GiB (under replay_pad_min_available_mib): exact pages.
        d.world.memory_available = Some(3 << 30);
        assert_eq!(replays(&d.exec(20, 101, "/bin/b")), vec![50]);
        // Padding past the budget (250 + 16 > 256): exact pages, not a padded profile cut short.
        d.world.memory_available = Some(16 << 30);
        assert_eq!(replays(&d.exec(30, 102, "/bin/c")), vec![250]);
        // Turned off.
        d.engine.config.launch.replay_pad_pages = 0;
        assert_eq!(replays(&d.exec(40, 103, "/bin/d")), vec![50]);
    }

    #[test]
    fn a_replay_reads_at_most_the_budget_share_of_available_memory() {
        let mut d = Daemon::new(Config::default());
        d.world.profiles.insert("/bin/a".into(), profile(1000));
        d.world.profiles.insert("/bin/b".into(), profile(1000));
        // 2 MiB available, half of it (the default share): 256 of the 1000 pages used first.
        d.world.memory_available = Some(2 << 20);
        assert_eq!(replays(&d.exec(10, 100, "/bin/a")), vec![256]);
        // Unreadable: the other budgets alone.
        d.world.memory_available = None;
        assert_eq!(replays(&d.exec(20, 101, "/bin/b")), vec![1000]);
    }

    #[test]
    fn a_profile_that_fills_a_launch_window_is_not_replayed_into_less_memory_than_it_holds() {
        let mut c = Config::default();
        c.launch.max_launch_mib = 1; // a window of 256 pages
        let mut d = Daemon::new(c);
        for app in ["/bin/a", "/bin/b", "/bin/c"] {
            d.world.profiles.insert(app.into(), profile(if app == "/bin/c" { 200 } else { 240 }));
        }
        // 2 MiB available, 256 pages for a replay: the window-filling profile fits, replayed whole.
        d.world.memory_available = Some(2 << 20);
        assert_eq!(replays(&d.exec(10, 100, "/bin/a")), vec![240]);
        // 1 MiB available, 128 pages: it does not fit; not replayed at all, and counted.
        d.world.memory_available = Some(1 << 20);
        assert_eq!(replays(&d.exec(20, 101, "/bin/b")), Vec::<u64>::new());
        assert_eq!(d.engine.drops().replays_beyond_memory, 1);
        // A start that does not fill its window is still replayed in part, its first pages.
        assert_eq!(replays(&d.exec(30, 102, "/bin/c")), vec![128]);
        // Memory unknown: the other budgets alone decide.
        d.world.memory_available = None;
        assert_eq!(replays(&d.exec(40, 103, "/bin/b")), vec![240]);
    }

    #[test]
    fn a_window_beyond_memory_needs_both_a_full_window_and_too_little_memory() {
        let mib = 1u64 << 20;
        // 256 MiB windows of 4 KiB pages: 65,536 pages.
        assert!(fills_a_window_beyond_memory(65_536, 4096, 256, 122 * mib), "DEAR's reader: a full window, 122 MiB");
        assert!(fills_a_window_beyond_memory(60_000, 4096, 256, 122 * mib), "nine tenths of the window count as full");
        assert!(!fills_a_window_beyond_memory(58_000, 4096, 256, 122 * mib), "under nine tenths: a start, replayed in part");
        assert!(!fills_a_window_beyond_memory(65_536, 4096, 256, 256 * mib), "it fits");
        assert!(!fills_a_window_beyond_memory(0, 4096, 256, 0), "an empty profile fills nothing");
        assert!(fills_a_window_beyond_memory(u64::MAX, u64::MAX, u64::MAX, u64::MAX - 1), "saturates, no overflow");
    }

    #[test]
    fn replays_read_at_most_the_per_minute_budget_counted_by_what_they_read() {
        let mut c = Config::default();
        c.launch.replay_mib_per_minute = 2;
        let mut d = Daemon::new(c);
        // Five applications (one replay of an application runs at a time: see the flood tests).
        for app in ["/bin/a", "/bin/b", "/bin/c", "/bin/d", "/bin/e"] {
            d.world.profiles.insert(app.into(), profile(300));
        }
        assert_eq!(replays(&d.exec(10, 100, "/bin/a")), vec![300]);
        assert_eq!(replays(&d.exec(20, 101, "/bin/b")), vec![212], "the rest of the minute's 512 pages");
        assert_eq!(replays(&d.exec(30, 102, "/bin/c")), Vec::<u64>::new(), "spent");
        // The first found most of its pages resident: only what it read counts.
        d.event(40, Event::ReplayFinished { launch: 1, report: read(100) });
        assert_eq!(replays(&d.exec(50, 103, "/bin/d")), vec![200]);
        assert_eq!(replays(&d.exec(60_020, 104, "/bin/e")), vec![300], "a minute later the first two no longer count");
    }

    // --- Planning rounds --------------------------------------------------------------------

    #[test]
    fn prediction_starts_with_a_start_round_and_re_plans_on_the_interval() {
        let mut c = no_replay();
        c.predict.enabled = true;
        let mut d = Daemon::new(c);
        assert_eq!(d.event(0, Event::Start), vec![Action::WatchPressure(true), Action::BuildPredictionStep]);
        assert_eq!(plans(&d.event(5, Event::Ready)), vec![(PlanTrigger::Start, false)]);
        assert_eq!(timer(&d.event(5, Event::AboutToSleep)), Some(Some(ns(5 + 300_000))));
        assert!(plans(&d.wake(299_000)).is_empty());
        let out = d.wake(300_005);
        assert_eq!(plans(&out), vec![(PlanTrigger::Interval, false)]);
        assert_eq!(timer(&out), Some(Some(ns(600_005))));
    }

    #[test]
    fn prediction_off_plans_nothing_and_arms_no_replan() {
        let mut d = Daemon::new(no_replay());
        assert_eq!(d.event(0, Event::Start), vec![]);
        assert_eq!(d.event(0, Event::Ready), vec![]);
        d.exec(10, 100, "/bin/a");
        assert!(plans(&d.event(20, Event::Pressure)).is_empty());
        d.exit(30, 100);
        assert_eq!(timer(&d.wake(40)), Some(Some(ns(130))), "the window's exit grace only");
    }

    #[test]
    fn a_step_that_cannot_be_built_leaves_prediction_off() {
        let mut c = no_replay();
        c.predict.enabled = true;
        let mut d = Daemon::new(c);
        d.world.fail_build = true;
        d.event(0, Event::Start);
        assert_eq!(d.event(0, Event::Ready), vec![]);
        assert!(!d.engine.predicting());
        assert_eq!(timer(&d.event(0, Event::AboutToSleep)), Some(None));
    }

    #[test]
    fn launches_exits_and_learned_launches_each_run_a_round() {
        let mut d = Daemon::predicting(no_replay());
        let out = d.exec(10, 100, "/bin/a");
        assert_eq!(plans(&out), vec![(PlanTrigger::LaunchStarted { app: "/bin/a".into(), instance: 100 }, false)]);
        d.pages(20, 100, 5, 0, 8);
        let out = d.wake(1100);
        assert_eq!(plans(&out), vec![(PlanTrigger::LaunchFinished { app: "/bin/a".into() }, false)]);
        // The root process exec'd another application: the first instance ended.
        let out = d.exec(2000, 100, "/bin/b");
        assert_eq!(
            plans(&out),
            vec![
                (PlanTrigger::AppExited { app: "/bin/a".into(), instance: 100 }, false),
                (PlanTrigger::LaunchStarted { app: "/bin/b".into(), instance: 100 }, false)
            ]
        );
        // A thread's exit is not the instance's.
        assert!(plans(&d.event(2100, Event::Exit { pid: 101, tgid: 100, ts_ns: ns(2100) })).is_empty());
        assert_eq!(plans(&d.exit(2200, 100)), vec![(PlanTrigger::AppExited { app: "/bin/b".into(), instance: 100 }, false)]);
    }

    #[test]
    fn a_pressure_rise_runs_a_round_at_once() {
        let mut d = Daemon::predicting(no_replay());
        assert_eq!(plans(&d.event(50, Event::Pressure)), vec![(PlanTrigger::Pressure, false)]);
    }

    #[test]
    fn a_round_the_step_put_off_is_owed_and_runs_when_due() {
        let mut d = Daemon::predicting(no_replay());
        d.world.owed_in_ms = Some(1000);
        d.event(100, Event::Pressure);
        d.world.owed_in_ms = None;
        assert_eq!(timer(&d.event(100, Event::AboutToSleep)), Some(Some(ns(1100))));
        assert!(plans(&d.wake(1099)).is_empty());
        let out = d.wake(1100);
        assert_eq!(plans(&out), vec![(PlanTrigger::Interval, false)]);
        assert_eq!(timer(&out), Some(Some(ns(301_100))), "then the interval again");
        // An owed round never puts the next round later than the interval's.
        d.world.owed_in_ms = Some(400_000);
        d.event(2000, Event::Pressure);
        assert_eq!(d.engine.next_replan_ns(), Some(ns(301_100)));
    }

    #[test]
    fn rounds_hold_off_while_a_replayed_start_loads_and_settles() {
        let mut d = Daemon::predicting(Config::default());
        d.world.profiles.insert("/bin/a".into(), profile(50));
        // Its replay is loading: the launch's round knows.
        let out = d.exec(1000, 100, "/bin/a");
        assert_eq!(plans(&out), vec![(PlanTrigger::LaunchStarted { app: "/bin/a".into(), instance: 100 }, true)]);
        // The replay reported: prediction may go on, but the start is still settling.
        let out = d.event(1300, Event::ReplayFinished { launch: 1, report: ReplayReport::default() });
        assert_eq!(plans(&out), vec![(PlanTrigger::Interval, true)]);
        assert_eq!(plans(&d.event(1999, Event::Pressure)), vec![(PlanTrigger::Pressure, true)]);
        assert_eq!(plans(&d.event(2000, Event::Pressure)), vec![(PlanTrigger::Pressure, false)]);
        // An application without a profile holds nothing.
        let out = d.exec(5000, 200, "/bin/b");
        assert_eq!(plans(&out), vec![(PlanTrigger::LaunchStarted { app: "/bin/b".into(), instance: 200 }, false)]);
    }

    // --- Activity written to the state ------------------------------------------------------

    #[test]
    fn launches_and_exits_are_written_in_batches_of_64() {
        let mut d = Daemon::new(no_replay());
        d.world.learned.extend((0..64).map(|i| (format!("/bin/p{i}"), settled(9, WALL_MS))));
        for i in 0..63u32 {
            d.exec(1, 1000 + i, &format!("/bin/p{i}"));
        }
        assert!(activity(&d.event(2, Event::AboutToSleep)).is_empty());
        d.exec(3, 2000, "/bin/p63");
        let written = activity(&d.event(4, Event::AboutToSleep));
        assert_eq!(written.len(), 1);
        assert_eq!(written[0].len(), 64);
        let r = &written[0][63];
        assert_eq!(
            (r.app.as_str(), r.instance, r.launch, r.at_ms, r.local_ms),
            ("/bin/p63", 2000, true, WALL_MS + 3, WALL_MS + 3_600_003)
        );
        assert!(activity(&d.event(5, Event::AboutToSleep)).is_empty());
    }

    #[test]
    fn fewer_launches_and_exits_are_written_once_ten_seconds_passed() {
        let mut d = Daemon::new(no_replay());
        d.exec(1000, 100, "/bin/a");
        d.exit(1500, 100);
        assert!(activity(&d.wake(9_999)).is_empty(), "10 s since the start only at 10 000 ms");
        let written = activity(&d.wake(10_000));
        assert_eq!(written.len(), 1);
        assert_eq!(written[0].iter().map(|r| r.launch).collect::<Vec<_>>(), [true, false]);
        // The next ones wait ten seconds from that write.
        d.exec(12_000, 200, "/bin/b");
        assert!(activity(&d.wake(19_999)).is_empty());
        assert_eq!(activity(&d.wake(20_000)).len(), 1);
    }

    // --- Reload -----------------------------------------------------------------------------

    fn with_prediction(predictor: &str) -> Config {
        let mut c = no_replay();
        c.predict.enabled = true;
        c.predict.predictor = predictor.into();
        c
    }

    #[test]
    fn a_reload_turns_prediction_on_writing_activity_first_then_plans_at_once() {
        let mut d = Daemon::new(no_replay());
        d.event(0, Event::Start);
        d.event(0, Event::Ready);
        d.exec(10, 100, "/bin/a");
        let out = d.event(500, Event::Reload(Box::new(Ok(with_prediction("augur")))));
        assert_eq!(activity(&out).len(), 1, "the step's predictor restores from the state: {out:?}");
        let build = out.iter().position(|a| *a == Action::BuildPredictionStep).expect("built");
        assert_eq!(out[0], Action::WatchPressure(true), "something fetches now: pressure is watched first");
        assert!(matches!(out[1], Action::WriteActivity(_)) && build == 2, "{out:?}");
        assert_eq!(plans(&out), vec![(PlanTrigger::Start, false)]);
        assert!(d.engine.predicting());
        assert_eq!(d.engine.next_replan_ns(), Some(ns(500 + 300_000)));
        assert_eq!(plans(&d.exec(600, 200, "/bin/b")).len(), 1);
    }

    #[test]
    fn a_reload_turns_prediction_off() {
        let mut d = Daemon::predicting(with_prediction("augur"));
        let out = d.event(500, Event::Reload(Box::new(Ok(no_replay()))));
        assert_eq!(out, vec![Action::WatchPressure(false), Action::DropPredictionStep], "nothing fetches any more");
        assert!(!d.engine.predicting());
        assert!(plans(&d.event(600, Event::Pressure)).is_empty());
        assert!(plans(&d.exec(700, 100, "/bin/a")).is_empty());
        assert_eq!(d.engine.next_replan_ns(), None);
    }

    #[test]
    fn a_reload_changing_the_predictor_builds_a_new_step_and_other_changes_keep_it() {
        let mut d = Daemon::predicting(with_prediction("augur"));
        let out = d.event(500, Event::Reload(Box::new(Ok(with_prediction("preload")))));
        assert_eq!(out[0], Action::DropPredictionStep);
        assert!(out.contains(&Action::BuildPredictionStep));
        assert_eq!(d.engine.config().predict.predictor, "preload");
        let mut c = with_prediction("preload");
        c.predict.budget_bytes = 1 << 30;
        assert_eq!(d.event(600, Event::Reload(Box::new(Ok(c)))), vec![], "read each round: no new step");
        let mut c = with_prediction("preload");
        c.predict.pressure_trigger_us = 50_000;
        assert_eq!(
            d.event(700, Event::Reload(Box::new(Ok(c)))),
            vec![Action::WatchPressure(true)],
            "the trigger is re-armed, the step kept"
        );
    }

    #[test]
    fn a_bad_reload_keeps_the_configuration_in_force() {
        let mut d = Daemon::predicting(with_prediction("augur"));
        let bad = Config::parse("[predict]\nbogus = 1\n", std::path::Path::new("c.toml")).map(|_| ()).unwrap_err();
        assert_eq!(d.event(500, Event::Reload(Box::new(Err(bad.into())))), vec![]);
        assert!(d.engine.predicting());
        assert_eq!(d.engine.config(), &with_prediction("augur"));
    }

    #[test]
    fn a_reload_changes_the_launch_windows() {
        let mut d = Daemon::new(no_replay());
        let mut c = no_replay();
        c.launch.quiet_ms = 200;
        d.event(0, Event::Reload(Box::new(Ok(c))));
        d.exec(10, 100, "/bin/a");
        d.pages(20, 100, 5, 0, 8);
        assert_eq!(timer(&d.event(20, Event::AboutToSleep)), Some(Some(ns(220))));
    }

    #[test]
    fn trace_eagerness_follows_whether_a_launch_is_followed() {
        let mut d = Daemon::new(no_replay());
        let out = d.event(0, Event::AboutToSleep);
        assert_eq!(out, vec![Action::TraceEager(false), Action::ArmTimer(None)], "idle: lazy");
        d.exec(10, 100, "/bin/a");
        let out = d.event(10, Event::AboutToSleep);
        assert!(out.contains(&Action::TraceEager(true)) && out.contains(&Action::WatchOpens(true)), "{out:?}");
        let out = d.event(11, Event::AboutToSleep);
        assert_eq!(out, vec![Action::ArmTimer(Some(ns(1010)))], "no change, nothing said");
    }

    // --- Any sequence -----------------------------------------------------------------------

    /// One step of a generated sequence: (kind, process, amount).
    fn step(d: &mut Daemon, ms: u64, (kind, pid, n): (u8, u32, u64), saved_launches: &mut Vec<LaunchId>) {
        let out = match kind {
            0 => d.exec(ms, 100 + pid, ["/bin/a", "/bin/b", "/bin/c"][(n % 3) as usize]),
            1 => d.event(ms, Event::Fork { parent_tgid: 100 + pid, child_pid: 200 + pid, child_tgid: 200 + pid }),
            2 => d.exit(ms, 100 + pid),
            3 => {
                d.pages(ms, 100 + pid, n % 4, n, 1 + n % 64);
                Vec::new()
            }
            4 => d.event(ms, Event::ReplayFinished { launch: n % 8, report: ReplayReport::default() }),
            5 => d.event(ms, Event::Pressure),
            _ => d.wake(ms),
        };
        saved_launches.extend(saved(&out).iter().map(|l| l.launch));
    }

    proptest::proptest! {
        #[test]
        fn any_sequence_keeps_a_timer_for_open_windows_saves_each_launch_once_and_stops_clean(
            steps in proptest::collection::vec((0u8..8, 0u32..4, 0u64..1000, 0u64..400), 1..120),
        ) {
            let mut c = Config::default();
            c.predict.enabled = true;
            let mut d = Daemon::predicting(c);
            d.world.profiles.insert("/bin/a".into(), profile(20));
            d.world.learned.insert("/bin/c".into(), settled(9, WALL_MS));
            let mut saved_launches = Vec::new();
            let mut ms = 0;
            for (kind, pid, n, gap) in steps {
                ms += gap;
                step(&mut d, ms, (kind, pid, n), &mut saved_launches);
                let out = d.event(ms, Event::AboutToSleep);
                let armed = timer(&out).expect("a timer decision before every sleep");
                // Something in progress or a re-plan pending always wakes the loop, never in the past.
                proptest::prop_assert!(armed.is_some());
                proptest::prop_assert!(armed.unwrap() > ns(ms) || !d.engine.is_idle());
            }
            let out = d.event(ms, Event::Stop);
            saved_launches.extend(saved(&out).iter().map(|l| l.launch));
            let mut unique = saved_launches.clone();
            unique.sort_unstable();
            unique.dedup();
            proptest::prop_assert_eq!(unique.len(), saved_launches.len(), "a launch saved twice: {:?}", saved_launches);
            proptest::prop_assert!(d.engine.is_idle());
            let again = d.event(ms, Event::Stop);
            proptest::prop_assert!(activity(&again).is_empty() && saved(&again).is_empty());
        }
    }

    // Applications as users know them: launches through wrappers, events in, actions out.

    /// A daemon that replays `app`'s learned profile of 50 pages, and nothing else.
    fn knowing(app: &str) -> Daemon {
        let mut d = Daemon::new(Config::default());
        d.world.profiles.insert(app.into(), profile(50));
        d
    }

    /// The launch's replay reports, the window closes: what was saved.
    fn close(d: &mut Daemon, launch: LaunchId) -> Vec<LearnedLaunch> {
        let report = ReplayReport { pages_wanted: 50, pages_resident: 0, pages_loaded: 50, bytes_read: 50 * 4096 };
        let mut out = d.event(1500, Event::ReplayFinished { launch, report });
        out.extend(d.wake(5000));
        saved(&out)
    }

    /// The application is learned under `key`, with the wrapper's pages and the replay's counts.
    fn learned_as(saved: &[LearnedLaunch], key: &str, pages: u64) {
        assert_eq!(saved.len(), 1, "{saved:?}");
        assert_eq!(saved[0].record.app, key);
        assert_eq!(saved[0].record.pages_used, pages, "pages used before the re-key stay with the launch");
        assert_eq!(saved[0].record.pages_expected, 50, "the application's profile was replayed");
    }

    #[test]
    fn env_execs_the_application_in_place_and_its_profile_is_replayed_then() {
        let mut d = knowing("/usr/bin/gedit");
        let out = d.exec_argv(0, 100, "/usr/bin/env", &["env", "LANG=C", "gedit"]);
        assert_eq!(out, vec![Action::Follow { pid: 100 }], "a wrapper is followed, not replayed");
        d.pages(1, 100, 7, 0, 4);
        let out = d.exec_argv(2, 100, "/usr/bin/gedit", &["gedit"]);
        assert_eq!(replays(&out), vec![50]);
        assert!(!out.contains(&Action::Follow { pid: 100 }), "the process is traced already: no filter write");
        d.pages(3, 100, 8, 0, 10);
        learned_as(&close(&mut d, 1), "/usr/bin/gedit", 14);
        let written = activity(&d.event(6000, Event::Stop)).concat();
        let launched: Vec<(&str, u64)> = written.iter().filter(|r| r.launch).map(|r| (r.app.as_str(), r.instance)).collect();
        assert_eq!(launched, vec![("/usr/bin/gedit", 100)], "env is never reported as an application");
    }

    #[test]
    fn timeout_runs_its_payload_in_a_child_which_is_the_application() {
        let mut d = knowing("/usr/bin/cat");
        assert_eq!(d.exec_argv(0, 100, "/usr/bin/timeout", &["timeout", "10", "cat", "f"]), vec![Action::Follow { pid: 100 }]);
        d.pages(1, 100, 7, 0, 4);
        d.fork(2, 100, 101);
        let out = d.exec_argv(3, 101, "/usr/bin/cat", &["cat", "f"]);
        assert_eq!(replays(&out), vec![50]);
        assert!(!out.iter().any(|a| matches!(a, Action::Follow { .. })), "the child is traced as the wrapper's");
        d.pages(4, 101, 8, 0, 20);
        learned_as(&close(&mut d, 1), "/usr/bin/cat", 24);
    }

    #[test]
    fn dbus_run_session_is_seen_through_and_its_bus_is_a_helper() {
        let mut d = knowing("/usr/bin/gedit");
        d.exec_argv(0, 100, "/usr/bin/dbus-run-session", &["dbus-run-session", "--", "gedit"]);
        d.fork(1, 100, 101);
        let out = d.exec_argv(2, 101, "/usr/bin/dbus-daemon", &["dbus-daemon", "--nofork", "--print-address=4", "--session"]);
        assert_eq!(out, vec![], "the session bus is a helper");
        d.pages(3, 101, 6, 0, 3);
        d.fork(4, 100, 102);
        assert_eq!(replays(&d.exec_argv(5, 102, "/usr/bin/gedit", &["gedit"])), vec![50]);
        d.pages(6, 102, 8, 0, 30);
        learned_as(&close(&mut d, 1), "/usr/bin/gedit", 33);
    }

    #[test]
    fn a_shell_string_s_command_is_the_application() {
        let mut d = knowing("/usr/bin/gedit");
        d.exec_argv(0, 100, "/usr/bin/dash", &["sh", "-c", "gedit notes.txt --new-window"]);
        d.pages(1, 100, 7, 0, 2);
        d.fork(2, 100, 101);
        assert_eq!(replays(&d.exec_argv(3, 101, "/usr/bin/gedit", &["gedit", "notes.txt", "--new-window"])), vec![50]);
        d.pages(4, 101, 8, 0, 10);
        learned_as(&close(&mut d, 1), "/usr/bin/gedit", 12);
    }

    #[test]
    fn the_loader_running_a_program_is_that_program_from_its_exec() {
        let mut d = knowing("/usr/bin/gedit");
        let mut s =
            exec_step(100, "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", &["/lib64/ld-linux-x86-64.so.2", "/usr/bin/gedit"]);
        s.loader_target = Some("/usr/bin/gedit".into());
        let out = d.event(0, Event::Exec { step: s, ts_ns: ns(0) });
        assert_eq!(out[0], Action::Follow { pid: 100 });
        assert_eq!(replays(&out), vec![50], "replayed at the loader's exec");
        d.pages(1, 100, 8, 0, 10);
        learned_as(&close(&mut d, 1), "/usr/bin/gedit", 10);
    }

    #[test]
    fn a_script_launcher_s_big_child_takes_the_launch_over() {
        let bin = "/usr/lib/libreoffice/program/soffice.bin";
        let mut d = knowing(bin);
        d.exec_argv(0, 100, "/usr/lib/libreoffice/program/oosplash", &["/usr/lib/libreoffice/program/oosplash", "--writer"]);
        d.pages(1, 100, 7, 0, 200);
        d.fork(2, 100, 101);
        assert_eq!(
            replays(&d.exec_argv(3, 101, bin, &[bin, "--writer", "--splash-pipe=5"])),
            Vec::<u64>::new(),
            "not yet: a child like any"
        );
        d.pages(4, 101, 8, 0, 5000);
        let out = d.event(5, Event::AboutToSleep);
        assert_eq!(replays(&out), vec![50], "once it dominates, its profile is replayed");
        learned_as(&close(&mut d, 1), bin, 5200);
    }

    #[test]
    fn a_memfd_application_is_neither_replayed_nor_learned() {
        let mut d = knowing("/memfd:prog (deleted)");
        let out = d.exec_argv(0, 100, "/memfd:prog (deleted)", &["prog"]);
        assert_eq!(out, vec![], "not followed, not replayed");
        d.pages(1, 100, 8, 0, 10);
        assert_eq!(saved(&d.wake(5000)), vec![]);
        // Nor a throwaway one behind a wrapper: `sudo /tmp/tmp.X/installer`.
        let mut d = Daemon::new(Config::default());
        d.exec_argv(0, 200, "/usr/bin/sudo", &["sudo", "/tmp/tmp.Ab3dE6fG/installer"]);
        d.fork(1, 200, 201);
        d.exec_argv(2, 201, "/tmp/tmp.Ab3dE6fG/installer (deleted)", &["/tmp/tmp.Ab3dE6fG/installer"]);
        d.pages(3, 201, 8, 0, 10);
        assert_eq!(saved(&d.wake(5000)), vec![]);
    }

    #[test]
    fn a_launch_re_keyed_while_the_filter_is_being_written_stays_followed_and_a_repeated_exec_changes_nothing() {
        let mut d = knowing("/usr/bin/cat");
        d.exec_argv(0, 100, "/usr/bin/timeout", &["timeout", "10", "cat", "f"]);
        // The child is traced as the wrapper's already: no filter write is needed to follow it.
        d.world.filter_busy = true;
        d.fork(1, 100, 101);
        assert_eq!(replays(&d.exec_argv(2, 101, "/usr/bin/cat", &["cat", "f"])), vec![50]);
        // `/proc` read late shows the same program for a second exec event: nothing happens.
        assert_eq!(d.exec_argv(3, 101, "/usr/bin/cat", &["cat", "f"]), vec![]);
        d.pages(4, 101, 8, 0, 20);
        learned_as(&close(&mut d, 1), "/usr/bin/cat", 20);
    }

    #[test]
    fn a_launcher_s_dominant_child_is_expected_and_its_profile_replayed_at_the_first_exec_next_time() {
        let (splash, bin) = ("/usr/lib/libreoffice/program/oosplash", "/usr/lib/libreoffice/program/soffice.bin");
        let mut d = knowing(bin);
        // The `libreoffice` shell script execs oosplash, which forks soffice.bin.
        let launch = |d: &mut Daemon, base: u64, pid: u32, replay_done: bool| {
            let script = d.exec_argv(base, pid, "/usr/bin/dash", &["/bin/sh", "/usr/bin/libreoffice", "--writer"]);
            if replay_done {
                for a in &script {
                    if let Action::StartReplay { launch, .. } = a {
                        d.event(base, Event::ReplayFinished { launch: *launch, report: ReplayReport::default() });
                    }
                }
            }
            let splash_exec = d.exec_argv(base + 1, pid, splash, &[splash, "--writer"]);
            d.fork(base + 2, pid, pid + 1);
            let bin_exec = d.exec_argv(base + 3, pid + 1, bin, &[bin, "--writer", "--splash-pipe=5"]);
            (replays(&script), replays(&splash_exec), replays(&bin_exec))
        };
        launch(&mut d, 0, 100, false);
        d.pages(4, 101, 8, 0, 5000);
        d.event(5, Event::AboutToSleep);
        let first = close(&mut d, 1);
        assert_eq!(first[0].record.app, bin);
        let mut launchers: Vec<_> = d.world.hints.iter().map(|((k, _), app)| (k.as_str(), app.as_str())).collect();
        launchers.sort();
        assert_eq!(launchers, [("/usr/bin/libreoffice", bin), (splash, bin)], "the successor of the launcher and of the script");
        // The next launch expects soffice.bin from the script's exec and replays its profile
        // there, once, even when the first replay is over before soffice.bin is exec'd, and even
        // when the launch is not followed (no page events to find it by).
        d.world.learned.insert(bin.into(), settled(3, WALL_MS + 10_000));
        assert_eq!(launch(&mut d, 10_000, 200, true), (vec![50], vec![], vec![]));
    }

    #[test]
    fn systemd_run_s_command_started_by_pid_1_is_adopted_followed_and_replayed() {
        let mut d = knowing("/usr/bin/gedit");
        d.exec_argv(0, 100, "/usr/bin/systemd-run", &["systemd-run", "--user", "gedit", "a.txt"]);
        d.pages(1, 100, 7, 0, 2);
        // PID 1 starts the command: not a descendant of the launch, so it is followed on its own.
        let out = d.exec_argv(3, 300, "/usr/bin/gedit", &["/usr/bin/gedit", "a.txt"]);
        assert_eq!(out[0], Action::Follow { pid: 300 });
        assert_eq!(replays(&out), vec![50]);
        d.exit(4, 100);
        d.pages(5, 300, 8, 0, 30);
        learned_as(&close(&mut d, 1), "/usr/bin/gedit", 32);
    }
}
