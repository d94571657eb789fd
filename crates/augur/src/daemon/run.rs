//! The event loop of `augur daemon`: one epoll over the process-events connector, the kernel's
//! observation of launches (the eBPF observer's ring buffer, else the tracefs page-event pipe),
//! the control socket, a signal pipe, a replay-worker eventfd, the
//! memory-pressure trigger, watched whenever anything fetches (PSI, `EPOLLPRI`: a pressure rise
//! stops exec-time replay and runs a planning round at once, which stops prefetching) and a
//! one-shot timer armed only while something is
//! pending (a launch window, or a re-plan when prediction is on). With nothing happening it sleeps
//! in `epoll_wait` without a timeout. fanotify opens never wake it: while a launch is followed
//! they are read at each wake-up, the timer waking it at least every 100 ms. Observing every exec
//! with eBPF, forks and exits do not wake it either: the observer's exec record does (the
//! kernel writes it just before the connector's message), the connector is watched only while an
//! exec so reported waits for its message ([`ExecNotes`]), and otherwise read at every
//! wake-up (the timer draining it every [`PROCESS_EVENTS_DRAIN_NS`] while many of its events
//! come without an exec). Each wake-up gives
//! each source a bounded share (process events, page records, opens, control connections); a
//! source that had more wakes the loop again at once, after the others were served, so a flood of
//! one never starves the control socket.
//!
//! A thin driver: it turns what the file descriptors say into [`augur_engine::daemon`] events and
//! carries out the actions the engine decides (following or dropping pids, replays, saving, planning rounds with
//! the [`PlanStep`], the timer, building or dropping the prediction step). It decides nothing
//! itself: which launch to follow, when a window closes, what is learned and when to plan are
//! the engine's. System calls go through `augur-os`.

use std::os::fd::AsFd;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::time::Instant;

use super::control::{self, EventCounts, PrefetchRule, Request, Response, StatusReport};
use super::exec_step::{ExeNames, ExecNote, ExecNotes, ExecRead, exec_step_of};
use super::resident::{ProfileShape, ReplayStart, ResidentReplays, ResidentReport};
use crate::error::{Error, Result};
use augur_core::model::app;
use augur_core::model::file_context::{FileContextModel, FileContextSettings};
use augur_core::model::learn::{LearnSettings, LearningHistory, RefollowHold};
use augur_core::model::profile::{
    FileIdentity, FileProfile, InodeKey, LaunchProfile, Lookup, LookupKind, TraceMode, Unresolved, UsedRange,
};
use augur_core::model::record::ActivityRecord;
use augur_core::model::user::ProcessUser;
use augur_engine::config::{Config, ReplayPriority};
use augur_engine::daemon::{
    Action, DaemonEngine, DaemonWorld, Event, Now, Observation, Outcome, ReplayReport, ResolvedLaunch, TraceEvent, WorldError,
};
use augur_engine::window::{LaunchId, PageKind};
use augur_os::fetch::{CancelFlag, FetchOptions, FetchPlan, FetchReport, IoPriority, OrderPolicy, Prefetcher};
use augur_os::loop_io::{self, DaemonSignal, DaemonSignals, EventPoll, PressureTrigger, Readiness, Timer, Wakeup, WakeupHandle};
use augur_os::notify::Notifier;
use augur_os::sense::bpf::record::chunk_ranges;
use augur_os::sense::bpf::{FedRecord, LaunchFeed, ObservedEvent};
use augur_os::sense::event::{EventKind, PageEventKind};
use augur_os::sense::fanotify::{OpenScope, OpenWatcher};
use augur_os::sense::inode_name::InodeNamer;
use augur_os::sense::lookups::path_search_lookups;
use augur_os::sense::mode::{ObservationMode, PassedOver, forced_observation_mode_from_env, open_bpf_unless_degraded};
use augur_os::sense::proc_connector::{ProcConnector, ProcEvent};
use augur_os::sense::procfs;
use augur_os::sense::resolve::{PathResolver, assemble_files};
use augur_os::sense::trace_session::PROFILE_PAGE_SIZE;
use augur_os::sense::tracefs::InstanceOptions;
use augur_os::sense::watch::{ModeChoice, PageWatch, WatchScope};
use augur_store::state::{OpenOutcome, StateStore};

pub use augur_engine::daemon::{LAUNCH_SETTLE_NS, PlanTrigger};

/// Paths known to the resolver beyond which it is cleared while no launch is in progress.
const RESOLVER_MAX: usize = 20_000;

/// A directory a launch loaded is listed before the launch when it is at most this big (16
/// blocks): its lookups then find their blocks cached; a bigger one is only stat'ed.
const LISTED_DIR_MAX_BYTES: u64 = 64 << 10;

/// A learned launch of at least this many pages (64 MiB of 4 KiB pages) hands the heap its
/// window used back to the kernel once it is saved (`loop_io::release_free_heap`): smaller ones
/// are not worth the walk of the allocator's free lists.
const HEAP_TRIM_MIN_PAGES: u64 = 16_384;

/// How long a stopping daemon waits for its replay worker to finish the chunk it is reading.
const REPLAY_WORKER_STOP_WAIT: std::time::Duration = std::time::Duration::from_millis(1000);

/// Exec-time replays waiting for the replay worker at most; a launch while the queue is full is
/// not replayed (counted: `replay queue full` in `augur status`). The engine runs one replay per
/// application at a time, so only many different applications starting at once fill it.
const REPLAY_QUEUE_MAX: usize = 16;

/// How long one wake-up spends at most on page records, and on process events: a launch faulting
/// pages at full speed or an exec flood must not keep the loop from the control socket and the
/// timer. What is left is read at the next wake-up, which comes at once (the loop wakes itself).
/// A time, not a count: what a record costs depends on the machine and the build.
const SOURCE_BUDGET: std::time::Duration = std::time::Duration::from_millis(25);
/// Trace lines (tracefs) read between two looks at the clock.
const TRACE_LINES_PER_READ: usize = 2_000;
/// eBPF ring-buffer polls (each up to the observer's records per poll) between two looks at the
/// clock.
const BPF_POLLS_PER_READ: usize = 1;
/// Process events (forks, execs, exits) handled between two looks at the clock: an exec costs
/// reads of /proc and of the state.
const PROCESS_EVENTS_PER_READ: usize = 32;
/// fanotify reads (of up to 64 KiB of events each) per wake-up at most.
const OPEN_READS_PER_WAKE: usize = 4;
/// Control connections served per wake-up at most.
const CONTROL_CLIENTS_PER_WAKE: usize = 16;

/// While a launch is followed, fanotify opens are read at least this often (monotonic ns): they
/// do not wake the loop one by one.
const OPENS_READ_EVERY_NS: u64 = 100_000_000;

/// While the process events connector wakes no one (observing every exec with eBPF) and a
/// reading found at least [`PROCESS_EVENTS_DRAIN_MIN`] events, the timer reads it again within
/// this long (monotonic ns), so that forks and exits of threads with no exec in between cannot
/// fill its socket's buffer (4 MiB: some 5,000 events, 170 a second for this long).
const PROCESS_EVENTS_DRAIN_NS: u64 = 30_000_000_000;

/// Events one reading of the connector finds at least for the timer to read it again (see
/// [`PROCESS_EVENTS_DRAIN_NS`]): the fork, exec and exit of a few processes arm nothing.
const PROCESS_EVENTS_DRAIN_MIN: u64 = 64;

/// How far the exec-time replay advises ahead of the page it waits for: a tenth of a second
/// of a 40 MB/s disk.
const EXEC_REPLAY_WINDOW_BYTES: u64 = 4 << 20;

/// What the prediction hook may look at.
pub struct PlanContext<'a> {
    /// The learned state.
    pub state: &'a StateStore,
    /// The configuration in force.
    pub config: &'a Config,
    /// Wall-clock milliseconds.
    pub now_ms: u64,
    /// Local wall-clock milliseconds (`now_ms` shifted by the time zone's offset): time of day.
    pub local_ms: u64,
    /// An application augur replays is starting now (its exec-time replay is loading its pages,
    /// or it started less than [`LAUNCH_SETTLE_NS`] ago), or a followed run's files are being
    /// prefetched (`augur_engine::daemon::RUN_PREFETCH_SETTLE_NS`): its own reads and CPU come
    /// first.
    pub launching: bool,
}

/// The prediction hook: called on launch events and on the slow interval when `[predict]
/// enabled = true`. It decides and fetches on its own (it may keep a worker of its own).
pub trait PlanStep {
    /// One planning round.
    fn plan(&mut self, trigger: &PlanTrigger, ctx: &PlanContext<'_>) -> Result<()>;

    /// Whether the loop watches the kernel's memory-pressure trigger (it then runs a
    /// [`PlanTrigger::Pressure`] round at once when it fires); when it does not, the step must
    /// watch pressure on its own while fetching. Told when the step is built and at each change.
    fn pressure_watched(&mut self, _watched: bool) {}

    /// When the last [`PlanStep::plan`] call put its round off (rounds are rate-limited): the
    /// loop calls again with [`PlanTrigger::Interval`] within this many milliseconds.
    fn round_owed_in_ms(&self) -> Option<u64> {
        None
    }

    /// Planning rounds that decided a plan since the step was built.
    fn rounds_planned(&self) -> u64 {
        0
    }

    /// Fetches handed to the step's worker since it was built (a round that would repeat the
    /// last one sends none).
    fn fetches_sent(&self) -> u64 {
        0
    }

    /// Whether the step's worker is still at a fetch it was sent, or a round is owed.
    fn fetch_busy(&self) -> bool {
        false
    }

    /// `app` launched and its exec-time replay found `pages_resident` of its learned pages (of
    /// `page_size` bytes) resident at wall-clock `now_ms`: what the step prefetched for it was used.
    fn launch_replayed(&mut self, _app: &str, _pages_resident: u64, _page_size: u64, _now_ms: u64) {}

    /// The read-cost rule (battery, disk) the latest round applied, and why.
    fn read_cost_rule(&self) -> Option<augur_engine::read_cost::ReadCostRule> {
        None
    }

    /// What the free-memory tier held at the latest round, and why.
    fn fill_status(&mut self) -> Option<super::control::FillStatus> {
        None
    }

    /// What prefetching bought over the day up to wall-clock `now_ms`, as observed.
    fn last_day(&mut self, _now_ms: u64) -> Option<augur_core::plan::LedgerTotals> {
        None
    }

    /// Launches and exits seen before this start, oldest first: the step's predictor learns
    /// them again, so that prediction survives a restart.
    fn restore(&mut self, _history: &[ActivityRecord]) {}

    /// Why the step's predictor gives `app` the probability it gives at local time `now_ms`.
    fn explain(&mut self, _app: &str, _now_ms: u64) -> Option<augur_core::model::predict::Explanation> {
        None
    }
}

/// How the daemon was started.
#[derive(Clone, Debug, Default)]
pub struct DaemonOptions {
    /// `--config`.
    pub config_path: Option<PathBuf>,
    /// `--state`, overriding the configuration.
    pub state_path: Option<PathBuf>,
    /// `--socket`, overriding the configuration.
    pub socket_path: Option<PathBuf>,
    /// `--mode`: an observation mode asked for (`bpf` is then required; the tracefs modes can
    /// only degrade); `None` reads `AUGUR_FORCE_MODE`, else takes the best.
    pub mode: Option<ObservationMode>,
}

impl DaemonOptions {
    /// Reads the configuration and applies the command-line overrides.
    pub fn load_config(&self) -> Result<Config> {
        let mut c = crate::config_file::load(self.config_path.as_deref())?;
        if let Some(p) = &self.state_path {
            c.daemon.state_path = p.clone();
        }
        if let Some(p) = &self.socket_path {
            c.daemon.socket_path = p.clone();
        }
        Ok(c)
    }
}

/// What the replay worker's reports of file prefetches (for followed workload runs) carry in
/// place of a launch: they report to no launch.
const FILE_PREFETCH_LAUNCH: LaunchId = LaunchId::MAX;

struct ReplayJob {
    launch: LaunchId,
    app: String,
    profile: Arc<LaunchProfile>,
    priority: IoPriority,
    /// The user the launch is learned for: only files they may read are loaded.
    user: ProcessUser,
    stop: ReplayStop,
    /// What [`ResidentReplays`] remembers of it, and under which key (the application's for an
    /// exec-time replay; for a file prefetch, the application's and its files').
    memo: ReplayStart,
    memo_key: String,
    /// The profile's files carry only a device and inode (a file prefetch): each is loaded only
    /// while its path still names that inode, with the identity it has now.
    check_inodes: bool,
    /// A file prefetch's: when the open it was predicted after happened (monotonic ns).
    after_open_ns: Option<u64>,
}

/// How a queued or running exec-time replay is stopped.
#[derive(Clone, Default)]
struct ReplayStop {
    /// Stops it (between chunks).
    cancel: CancelFlag,
    /// Set before `cancel` when it is stopped for memory pressure.
    pressure: CancelFlag,
}

struct ReplayDone {
    launch: LaunchId,
    app: String,
    report: ReplayReport,
    page_size: u64,
    memo: ReplayStart,
    memo_key: String,
    /// It ran to its end (not stopped) and loaded nothing.
    loaded_nothing: bool,
    /// Pages it wanted that no replay can load (past a file's end, in a refused file).
    unloadable: u64,
    /// The worker's time on it (inode checks and loading), ns.
    busy_ns: u64,
    /// The job's [`ReplayJob::after_open_ns`].
    after_open_ns: Option<u64>,
}

impl ReplayDone {
    /// What `report`, of the replay `job` asked for, says.
    fn of(job: &ReplayJob, r: &FetchReport, busy_ns: u64) -> ReplayDone {
        ReplayDone {
            launch: job.launch,
            app: job.app.clone(),
            report: ReplayReport {
                pages_wanted: r.pages.wanted,
                pages_resident: r.pages.already_resident,
                pages_loaded: r.pages.loaded,
                bytes_read: r.bytes_read,
            },
            page_size: r.page_size,
            memo: job.memo,
            memo_key: job.memo_key.clone(),
            loaded_nothing: !r.cancelled && r.pages.loaded == 0 && r.bytes_read == 0,
            unloadable: r.pages.failed + r.pages.skipped,
            busy_ns,
            after_open_ns: job.after_open_ns,
        }
    }
}

/// The replay worker: fetches profiles one at a time so the loop never blocks on I/O.
fn spawn_replay_worker(
    wake: WakeupHandle,
    cancel: CancelFlag,
) -> Result<(mpsc::SyncSender<ReplayJob>, mpsc::Receiver<ReplayDone>, std::thread::JoinHandle<()>)> {
    let (job_tx, job_rx) = mpsc::sync_channel::<ReplayJob>(REPLAY_QUEUE_MAX);
    let (done_tx, done_rx) = mpsc::channel::<ReplayDone>();
    let handle = std::thread::Builder::new()
        .name("augur-replay".into())
        .spawn(move || {
            for mut job in job_rx {
                if cancel.is_cancelled() {
                    break;
                }
                let started_ns = loop_io::monotonic_ns();
                if job.check_inodes {
                    // Here, not in the loop: a stat of a cold path waits for the disk.
                    Arc::make_mut(&mut job.profile).files.retain_mut(|f| {
                        match augur_os::fetch::open::current_identity(&f.path) {
                            Ok(now) if now.dev == f.identity.dev && now.ino == f.identity.ino => {
                                f.identity = now;
                                true
                            }
                            _ => false,
                        }
                    });
                }
                let plan = FetchPlan::from_profiles([&*job.profile], augur_os::fetch::page_size()).for_user(job.user.clone());
                // The application is reading too: keep to its first-use order and only a little
                // ahead of it, so that its own reads never queue behind pages it needs later
                // (on a throttled or slow disk a deep queue in disk order made starts slower).
                let options = FetchOptions {
                    priority: job.priority,
                    order: OrderPolicy::FirstUse,
                    window_bytes: EXEC_REPLAY_WINDOW_BYTES,
                    ..FetchOptions::default()
                };
                let report = Prefetcher::new(options).fetch(&plan, &job.stop.cancel);
                if report.cancelled && job.stop.pressure.is_cancelled() {
                    tracing::info!(
                        "exec-time replay stopped by memory pressure at monotonic {} ns: {} pages loaded, {} not attempted",
                        loop_io::monotonic_ns(),
                        report.pages.loaded,
                        report.pages.not_attempted
                    );
                }
                let busy_ns = loop_io::monotonic_ns().saturating_sub(started_ns);
                if done_tx.send(ReplayDone::of(&job, &report, busy_ns)).is_err() {
                    break;
                }
                wake.wake();
            }
        })
        .map_err(|e| Error::io("starting the replay worker", e))?;
    Ok((job_tx, done_rx, handle))
}

/// The key a file prefetch is remembered under in [`ResidentReplays`]: its application's, with
/// a digest of the files and ranges it asks for (the same run's pieces differ).
fn file_prefetch_memo_key(app: &str, profile: &LaunchProfile) -> String {
    use std::hash::{Hash, Hasher};
    // SipHash with fixed keys: the same files give the same key for the daemon's lifetime.
    let mut h = std::hash::DefaultHasher::new();
    for f in &profile.files {
        f.path.hash(&mut h);
        (f.identity.dev, f.identity.ino).hash(&mut h);
        for r in &f.ranges {
            (r.range.start, r.range.len).hash(&mut h);
        }
    }
    format!("{app}{}{:016x}", crate::daemon::resident::FILES_KEY_SEPARATOR, h.finish())
}

fn io_priority(p: ReplayPriority) -> IoPriority {
    match p {
        ReplayPriority::Idle => IoPriority::Idle,
        ReplayPriority::BestEffort => IoPriority::BestEffort { level: 7 },
    }
}

/// Builds the prediction step for the configuration in force: at the start, and when a reload
/// turns prediction on or changes the predictor.
pub type PlanStepFactory = Box<dyn Fn(&Config) -> Result<Box<dyn PlanStep>>>;

/// The `PATH` search that found the program `pid` runs as `argv0`, as the launcher made it
/// with its `PATH` (the program inherited it): see [`path_search_lookups`].
fn path_search_of(pid: u32, exe: &Path, argv0: Option<&str>) -> Vec<Lookup> {
    let (Some(argv0), Some(search_path)) = (argv0, procfs::env_var(pid, "PATH")) else { return Vec::new() };
    let Some(program) = procfs::identity_of(exe) else { return Vec::new() };
    path_search_lookups(std::ffi::OsStr::new(argv0), &search_path, |candidate| {
        procfs::identity_of(candidate).is_some_and(|id| id.dev == program.dev && id.ino == program.ino)
    })
}

/// When the timer next drains the connector, after a reading at `now_ns` that found `read`
/// events, the drain pending being `pending` (see [`PROCESS_EVENTS_DRAIN_NS`]).
fn drain_deadline(pending: Option<u64>, read: u64, now_ns: u64) -> Option<u64> {
    if read < PROCESS_EVENTS_DRAIN_MIN {
        return pending.filter(|&t| t > now_ns && read > 0);
    }
    Some(pending.filter(|&t| t > now_ns).unwrap_or(now_ns.saturating_add(PROCESS_EVENTS_DRAIN_NS)))
}

const TOKEN_PROC: u64 = 0;
const TOKEN_TRACE: u64 = 1;
const TOKEN_CONTROL: u64 = 3;
const TOKEN_SIGNAL: u64 = 4;
const TOKEN_TIMER: u64 = 5;
const TOKEN_WAKE: u64 = 6;
const TOKEN_PRESSURE: u64 = 7;

/// What each token is, for the log of a wake-up (`-vv`).
const TOKEN_NAMES: [&str; 8] =
    ["process events", "page events", "(none)", "control socket", "signal", "timer", "wake", "memory pressure"];

/// How the kernel shows the daemon launches.
enum Observer {
    /// The eBPF observer of every exec (`None` once closed at shutdown); boxed, as it is far
    /// larger than a page watch.
    Bpf(Option<Box<LaunchFeed>>),
    /// A tracefs page watch of the pids the daemon follows (or none: file-only).
    Tracefs(PageWatch),
}

impl Observer {
    fn mode(&self) -> ObservationMode {
        match self {
            Observer::Bpf(_) => ObservationMode::Bpf,
            Observer::Tracefs(w) => ObservationMode::Tracefs(w.mode()),
        }
    }

    /// What the pages seen mean (the mode profiles are learned in).
    fn profile_mode(&self) -> TraceMode {
        match self {
            Observer::Bpf(feed) => feed.as_deref().map_or(TraceMode::Access, LaunchFeed::profile_mode),
            Observer::Tracefs(w) => w.mode(),
        }
    }

    fn observation(&self) -> Observation {
        match self {
            Observer::Bpf(_) => Observation::EveryExec,
            Observer::Tracefs(_) => Observation::PidFilter,
        }
    }
}

/// The running daemon: the engine decides, the loop's handles carry out.
pub struct Daemon {
    engine: DaemonEngine,
    io: LoopIo,
}

/// What the loop reads from and acts on: the engine's [`DaemonWorld`].
struct LoopIo {
    options: DaemonOptions,
    state: StateStore,
    procs: ProcConnector,
    observer: Observer,
    /// The better observation modes not used, and why.
    passed_over: PassedOver,
    opens: Option<OpenWatcher>,
    listener: UnixListener,
    signals: DaemonSignals,
    timer: Timer,
    wake: Wakeup,
    /// Wakes the loop at once when a wake-up left work (page records, opens, connections) for
    /// the next one.
    wake_again: WakeupHandle,
    poll: EventPoll,
    resolver: PathResolver,
    /// Names the inodes launches needed from disk, for their lookups.
    namer: InodeNamer,
    replay_tx: Option<mpsc::SyncSender<ReplayJob>>,
    replay_rx: mpsc::Receiver<ReplayDone>,
    replay_worker: Option<std::thread::JoinHandle<()>>,
    replay_cancel: CancelFlag,
    /// How to stop each exec-time replay queued or running.
    replays: Vec<(LaunchId, ReplayStop)>,
    /// Replays that found everything resident, while nothing was dropped since.
    resident: ResidentReplays,
    /// Replays answered from [`ResidentReplays`] without the worker: reported in the same
    /// wake-up, or (answered while going to sleep) the loop wakes again at once.
    replays_answered: Vec<ReplayDone>,
    plan_step: Option<Box<dyn PlanStep>>,
    make_plan_step: PlanStepFactory,
    /// The memory-pressure trigger in the epoll set, while anything fetches.
    pressure: Option<PressureTrigger>,
    started: Instant,
    own_pid: u32,
    /// The daemon's executable (its path when it started).
    own_exe: Option<PathBuf>,
    counts: EventCounts,
    health: Vec<String>,
    notifier: Notifier,
    socket_path: PathBuf,
    /// The time zone's offset (ms): the local time of the events. Worked out again in each new
    /// wall-clock minute only (the C library's time-zone conversion cost 2 % of the event loop
    /// when done at every wake-up; offsets change on the hour at the earliest).
    utc_offset_ms: i64,
    /// The minute (Unix ms / 60,000) `utc_offset_ms` was worked out in.
    utc_offset_minute: u64,
    /// MemAvailable as last read, and when (monotonic ns).
    mem_available: Option<(u64, Option<u64>)>,
    /// The page-cache drop count as last read, and when (monotonic ns): see
    /// [`LoopIo::page_cache_drops`].
    drops_read: Option<(u64, Option<u64>)>,
    vmstat: procfs::VmstatReader,
    /// The loop is starting: a prediction step that cannot be built stops the daemon.
    starting: bool,
    /// The stream worker loading ahead of backward and strided readers (`[pattern]`).
    ahead: Option<super::ahead::AheadWorker>,
    /// fanotify opens are read (a launch is followed): see [`LoopIo::watch_opens`].
    opens_read: bool,
    /// When the timer wakes the loop next to read them (monotonic ns).
    opens_read_at: Option<u64>,
    /// The process events connector is in the epoll set (always, unless observing every exec
    /// with eBPF: then only while an exec record waits in [`ExecNotes`]).
    procs_polled: bool,
    /// What the observer's records of execs say, until the connector's messages of the same
    /// execs are read: while one waits, the connector is polled.
    exec_notes: ExecNotes,
    /// The paths programs that exec'd resolved to.
    exe_names: ExeNames,
    /// While the connector is not polled, the timer reads it by then (monotonic ns): see
    /// [`PROCESS_EVENTS_DRAIN_NS`].
    procs_drain_at: Option<u64>,
    /// Why the loop cannot go on, when an action failed that way (the timer could not be armed,
    /// or the prediction step could not be built at the start).
    fatal: Option<Error>,
}

/// How long a reading of MemAvailable (and of the room in the daemon's memory cgroups) is used
/// for: one second, what sizes the replays of a burst of execs. A program run in a loop execs
/// every few tens of milliseconds, and reading /proc/meminfo and the cgroup files at every other
/// exec was a tenth of the daemon's CPU in `java -version` run back to back. A replay may take
/// only a fraction of what is available (`budget_available_fraction`), and memory pressure itself
/// is watched by its trigger, not by this.
const MEM_AVAILABLE_FRESH_NS: u64 = 1_000_000_000;

/// How long a reading of the page-cache drop count serves (ns): the actions of one wake-up.
const DROPS_FRESH_NS: u64 = 2_000_000;

fn utc_offset_ms() -> i64 {
    i64::from(loop_io::utc_offset_s((loop_io::unix_ms() / 1000) as i64)) * 1000
}

impl Daemon {
    /// Sets everything up: configuration, state, process events, page events, opens, control
    /// socket, signals. Tracing is on when this returns. `make_plan_step` builds the prediction
    /// step whenever `[predict] enabled = true` (at [`Daemon::run`], and on reloads).
    pub fn start(options: DaemonOptions, make_plan_step: PlanStepFactory) -> Result<Daemon> {
        let config = options.load_config()?;
        augur_os::privilege::require_root("running the daemon")?;
        augur_os::untrusted_path::set_network_filesystems(config.learn.network_filesystems);
        let signals = DaemonSignals::new()?;
        let (state, outcome) = StateStore::open(&config.daemon.state_path)?;
        match &outcome {
            OpenOutcome::Created => tracing::info!("new state at {}", config.daemon.state_path.display()),
            OpenOutcome::Opened => {}
            OpenOutcome::MovedAside(p) => tracing::warn!("started a fresh state; the unusable one is {}", p.display()),
        }
        let procs = ProcConnector::open()?;
        let mut health = Vec::new();
        let requested = match options.mode {
            Some(m) => Some(m),
            None => forced_observation_mode_from_env()?,
        };
        // Best first: the kernel follows every launch from its exec (eBPF); else only launches
        // being learned are traced, the kernel dropping everyone else's page events (tracefs pid
        // filter); else file-only.
        let mut passed_over = PassedOver::default();
        let observer = match open_bpf_unless_degraded(requested, &mut passed_over, LaunchFeed::open)? {
            Some(feed) => Observer::Bpf(Some(Box::new(feed))),
            None => {
                let choice = ModeChoice { requested: requested.and_then(ObservationMode::tracefs), degrade_to_file_only: true };
                let watch = PageWatch::open("daemon", &WatchScope::Followed, choice, &InstanceOptions::default())?;
                if watch.mode() == TraceMode::FileOnly {
                    health.push("no page tracing (file-only mode)".to_string());
                }
                passed_over.0.extend(watch.passed_over().0.iter().cloned());
                Observer::Tracefs(watch)
            }
        };
        let passed_over = passed_over.better_than(observer.mode());
        // Under eBPF the observer's records of the opens it follows name their files; fanotify
        // is left the execs (and overlays), not every open on the machine.
        let scope = if matches!(observer, Observer::Bpf(_)) { OpenScope::ExecsOnly } else { OpenScope::Every };
        let opens = match OpenWatcher::new(false, scope) {
            Ok(o) => Some(o),
            Err(e) => {
                tracing::warn!("fanotify unavailable ({e}); paths come from /proc only");
                health.push("no fanotify".into());
                None
            }
        };
        let listener = control::listen(&config.daemon.socket_path)?;
        let timer = Timer::new()?;
        let wake = Wakeup::new()?;
        let wake_again = wake.handle()?;
        let replay_cancel = CancelFlag::new();
        let (tx, rx, worker) = spawn_replay_worker(wake.handle()?, replay_cancel.clone())?;
        if let Observer::Tracefs(watch) = &observer {
            watch.start()?;
        }
        let socket_path = config.daemon.socket_path.clone();
        let notifier = Notifier::from_env()?;
        let resolver = fresh_resolver(opens.as_ref());
        let poll = EventPoll::new()?;
        let io = LoopIo {
            options,
            state,
            procs,
            opens,
            listener,
            signals,
            timer,
            wake,
            wake_again,
            poll,
            resolver,
            namer: InodeNamer::new(),
            replay_tx: Some(tx),
            replay_rx: rx,
            replay_worker: Some(worker),
            replay_cancel,
            replays: Vec::new(),
            resident: ResidentReplays::new(),
            replays_answered: Vec::new(),
            plan_step: None,
            make_plan_step,
            pressure: None,
            started: Instant::now(),
            own_pid: std::process::id(),
            own_exe: std::fs::read_link("/proc/self/exe").ok().map(|p| app::strip_deleted(&p.to_string_lossy()).0),
            counts: EventCounts::default(),
            health,
            notifier,
            socket_path,
            utc_offset_ms: utc_offset_ms(),
            utc_offset_minute: loop_io::unix_ms() / 60_000,
            mem_available: None,
            drops_read: None,
            vmstat: procfs::VmstatReader::new(),
            starting: true,
            ahead: super::ahead::AheadWorker::start(&config, loop_io::page_size()),
            opens_read: false,
            opens_read_at: None,
            procs_polled: false,
            exec_notes: ExecNotes::default(),
            exe_names: ExeNames::default(),
            procs_drain_at: None,
            fatal: None,
            observer,
            passed_over,
        };
        let engine =
            DaemonEngine::new(config, io.observer.observation(), io.observer.profile_mode(), PROFILE_PAGE_SIZE, io.now());
        Ok(Daemon { engine, io })
    }

    /// The observation mode in use.
    pub fn mode(&self) -> ObservationMode {
        self.io.observer.mode()
    }

    /// Hands `event` to the engine at the current time; the engine's actions are carried out
    /// before this returns.
    fn feed(&mut self, event: Event) -> Result<()> {
        let now = self.io.now();
        self.engine.handle(&mut self.io, now, event);
        match self.io.fatal.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Runs until SIGTERM or SIGINT; saves and returns.
    pub fn run(mut self) -> Result<()> {
        let io = &mut self.io;
        // Observing every exec with eBPF, the observer's exec records wake the loop, and the
        // connector only while an exec waits for its message (see ExecNotes).
        if !matches!(io.observer, Observer::Bpf(Some(_))) {
            io.poll.add(io.procs.as_fd(), TOKEN_PROC, Readiness::Readable)?;
            io.procs_polled = true;
        }
        match &mut io.observer {
            // Records below the observer's wakeup threshold do not make it readable: they are
            // read at every wake-up (the timer's included), as the launch windows' deadlines
            // come before the engine closes them.
            Observer::Bpf(Some(feed)) => io.poll.add(feed.fd(), TOKEN_TRACE, Readiness::Readable)?,
            Observer::Bpf(None) => {}
            Observer::Tracefs(watch) => {
                if let Some(fd) = watch.fd()? {
                    io.poll.add(fd, TOKEN_TRACE, Readiness::Readable)?;
                }
            }
        }
        // fanotify is watched only while a launch is in progress (the engine's trace eagerness).
        io.poll.add(io.listener.as_fd(), TOKEN_CONTROL, Readiness::Readable)?;
        io.poll.add(io.signals.as_fd(), TOKEN_SIGNAL, Readiness::Readable)?;
        io.poll.add(io.timer.as_fd(), TOKEN_TIMER, Readiness::Readable)?;
        io.poll.add(io.wake.as_fd(), TOKEN_WAKE, Readiness::Readable)?;
        // Prediction's step, when it is on (its pressure trigger joins the epoll set).
        self.feed(Event::Start)?;
        self.io.starting = false;

        let passed = &self.io.passed_over;
        let ready = format!(
            "learning in {} mode{}; {} applications known",
            self.io.observer.mode().name(),
            if passed.is_empty() { String::new() } else { format!(" (better modes not used: {passed})") },
            self.io.state.app_count().unwrap_or(0)
        );
        tracing::info!(
            "augur daemon ready: {ready}; state {}, socket {}",
            self.engine.config().daemon.state_path.display(),
            self.io.socket_path.display()
        );
        let _ = self.io.notifier.ready(&ready);
        self.feed(Event::Ready)?;

        let mut ready: Vec<u64> = Vec::with_capacity(16);
        loop {
            if !self.io.poll.wait(&mut ready)? {
                continue;
            }
            self.io.counts.wakeups += 1;
            let minute = loop_io::unix_ms() / 60_000;
            if minute != self.io.utc_offset_minute {
                self.io.utc_offset_minute = minute;
                self.io.utc_offset_ms = utc_offset_ms();
            }
            let mut tokens = [false; 8];
            for &token in &ready {
                if let Some(t) = tokens.get_mut(token as usize) {
                    *t = true;
                }
            }
            if tracing::enabled!(tracing::Level::TRACE) {
                let by: Vec<&str> = ready.iter().map(|&t| TOKEN_NAMES.get(t as usize).copied().unwrap_or("?")).collect();
                tracing::trace!("woken by {}", by.join(", "));
            }
            // A pressure rise first: it stops prefetching, which must not wait for other work.
            if tokens[TOKEN_PRESSURE as usize] {
                self.io.counts.pressure_events += 1;
                self.feed(Event::Pressure)?;
            }
            // Process events first, so page events are attributed to launches they belong to.
            // Each source gets a bounded share of the wake-up; one that left work wakes the
            // loop again at once, after the others were served.
            let until = Instant::now() + SOURCE_BUDGET;
            let events_before = self.io.counts.process_events;
            let mut more = loop {
                let more = self.read_process_events()?;
                if !more || Instant::now() >= until {
                    break more;
                }
            };
            let events_read = self.io.counts.process_events - events_before;
            self.io.drained_process_events(events_read);
            if self.engine.is_following() {
                more |= self.io.read_opens();
            }
            let until = Instant::now() + SOURCE_BUDGET;
            let pages_left = loop {
                let more = self.read_page_events(TRACE_LINES_PER_READ, BPF_POLLS_PER_READ);
                if !more || Instant::now() >= until {
                    break more;
                }
            };
            if pages_left {
                self.io.counts.page_reads_deferred += 1;
                more = true;
            }
            if tokens[TOKEN_WAKE as usize] {
                self.io.wake.clear();
            }
            self.collect_replays()?;
            if tokens[TOKEN_CONTROL as usize] {
                more |= self.serve_control();
            }
            if more {
                self.io.wake_again.wake();
            }
            if tokens[TOKEN_TIMER as usize] {
                self.io.timer.acknowledge();
            }
            self.feed(Event::Tick)?;
            if tokens[TOKEN_SIGNAL as usize] {
                let mut stop = false;
                for s in self.io.signals.take() {
                    match s {
                        DaemonSignal::Stop => stop = true,
                        DaemonSignal::Reload => self.reload()?,
                    }
                }
                if stop {
                    return self.shutdown();
                }
            }
            self.io.poll_process_events()?;
            self.feed(Event::AboutToSleep)?;
            // A replay answered before sleeping (a launch re-keyed then) is reported at once.
            if !self.io.replays_answered.is_empty() {
                self.io.wake_again.wake();
            }
            if self.engine.is_idle() && self.io.resolver.len() > RESOLVER_MAX {
                self.io.resolver = fresh_resolver(self.io.opens.as_ref());
                // The names are forgotten: the programs fanotify stopped reporting are named again
                // at their next exec.
                if let Some(opens) = self.io.opens.as_mut() {
                    opens.report_again();
                }
            }
        }
    }

    /// Handles at most [`PROCESS_EVENTS_PER_READ`] process events; true when more may wait.
    fn read_process_events(&mut self) -> Result<bool> {
        let mut batch = Vec::new();
        let more = match self.io.procs.read_some(PROCESS_EVENTS_PER_READ, |ev| batch.push(ev)) {
            Ok(more) => more,
            Err(e) => {
                tracing::warn!("process events: {e}");
                false
            }
        };
        self.io.counts.process_events += batch.len() as u64;
        self.io.counts.process_overruns = self.io.procs.overruns;
        // An exec's record is written before its message: one read now finds the records of
        // the execs this batch reports (what each exec was is taken from its record).
        if matches!(self.io.observer, Observer::Bpf(Some(_)))
            && batch.iter().any(|ev| matches!(ev, ProcEvent::Exec { tgid, ts_ns, .. } if !self.io.exec_notes.has(*tgid, *ts_ns)))
        {
            self.read_bpf_records(1);
        }
        for ev in batch {
            match ev {
                ProcEvent::Fork { parent_tgid, child_pid, child_tgid, .. } => {
                    self.feed(Event::Fork { parent_tgid, child_pid, child_tgid })?
                }
                ProcEvent::Exec { tgid, ts_ns, .. } => self.on_exec(tgid, ts_ns)?,
                ProcEvent::Exit { pid, .. } if pid == self.io.own_pid => {}
                ProcEvent::Exit { pid, tgid, ts_ns } => self.feed(Event::Exit { pid, tgid, ts_ns })?,
            }
        }
        Ok(more)
    }

    fn on_exec(&mut self, tgid: u32, ts_ns: u64) -> Result<()> {
        if tgid == self.io.own_pid {
            return Ok(());
        }
        let note = self.io.exec_notes.take(tgid, ts_ns);
        let Some(ExecRead { step, argv_cut, exe_inode }) =
            exec_step_of(tgid, note.as_ref(), &mut self.io.exe_names, loop_io::monotonic_ns())
        else {
            let late_ms = loop_io::monotonic_ns().saturating_sub(ts_ns) / 1_000_000;
            tracing::debug!("pid {tgid} exec'd and was gone {late_ms} ms later, when its process event was read");
            return Ok(());
        };
        // augur's own command line (`augur status`, `augur apps`) is no application to learn or
        // replay (the eBPF observer does not follow it either).
        if self.io.own_exe.as_deref().is_some_and(|own| app::strip_deleted(&step.exe).0.as_path() == own) {
            return Ok(());
        }
        self.io.counts.argv_cut += u64::from(argv_cut);
        // The exe itself names an inode the page events will mention.
        let (exe, _) = app::strip_deleted(&step.exe);
        if let Some(inode) = exe_inode.or_else(|| procfs::identity_of(&exe).map(|id| InodeKey { dev: id.dev, ino: id.ino })) {
            self.io.resolver.learn(inode, exe);
        }
        self.feed(Event::Exec { step, ts_ns })
    }

    fn collect_replays(&mut self) -> Result<()> {
        loop {
            let done = match self.io.replays_answered.pop() {
                Some(done) => done,
                None => match self.io.replay_rx.try_recv() {
                    Ok(done) => {
                        let found = ResidentReport {
                            wanted: done.report.pages_wanted,
                            resident: done.report.pages_resident,
                            unloadable: done.unloadable,
                        };
                        self.io.resident.finished(&done.memo_key, done.memo, found, done.loaded_nothing);
                        done
                    }
                    Err(_) => break,
                },
            };
            self.io.replays.retain(|(l, _)| *l != done.launch);
            let report = done.report;
            if done.launch == FILE_PREFETCH_LAUNCH {
                self.io.counts.file_prefetch_pages += report.pages_loaded;
                tracing::debug!(
                    "file prefetch for {}: {} pages wanted, {} resident, {} loaded",
                    done.app,
                    report.pages_wanted,
                    report.pages_resident,
                    report.pages_loaded
                );
                let (busy_ns, after_open_ns) = (done.busy_ns, done.after_open_ns);
                self.feed(Event::FilePrefetched { pages_loaded: report.pages_loaded, busy_ns, after_open_ns })?;
                continue;
            }
            if let Some(step) = self.io.plan_step.as_mut() {
                step.launch_replayed(&done.app, report.pages_resident, done.page_size, loop_io::unix_ms());
            }
            self.feed(Event::ReplayFinished { launch: done.launch, report })?;
        }
        Ok(())
    }

    /// Reads page events: at most `max_lines` trace lines, or `max_polls` eBPF ring-buffer
    /// polls. True when it stopped with more waiting.
    fn read_page_events(&mut self, max_lines: usize, max_polls: usize) -> bool {
        match &self.io.observer {
            Observer::Bpf(_) => self.read_bpf_records(max_polls),
            Observer::Tracefs(_) => self.read_trace_pipe(max_lines),
        }
    }

    /// The eBPF observer's records of confirmed launches: pages, inode loads and lookups go to
    /// the engine, by thread, as the trace pipe's events do.
    fn read_bpf_records(&mut self, max_polls: usize) -> bool {
        let engine = &mut self.engine;
        let io = &mut self.io;
        let Observer::Bpf(Some(feed)) = &mut io.observer else { return false };
        let (counts, resolver, notes) = (&mut io.counts, &mut io.resolver, &mut io.exec_notes);
        let mut sink = |FedRecord { event, lookup }| {
            // An open names the file it returned, which the launch's page records mention (the
            // eBPF observer's opens replace fanotify's, which reported every open on the
            // machine): named once, as the kernel names it (`/lib` -> `/usr/lib` resolved).
            if let ObservedEvent::Lookup { opened: Some(key), .. } = &event
                && let Some(lookup) = &lookup
                && !resolver.knows(*key)
            {
                let path = augur_os::untrusted_path::canonical(&lookup.path).unwrap_or_else(|| lookup.path.clone());
                resolver.learn(*key, path);
            }
            if let Some(task) = event.task()
                && let Some(lookup) = lookup
            {
                counts.lookup_events += 1;
                engine.on_trace(TraceEvent::Lookup { tid: task.tid, ts_ns: task.ts_ns, lookup });
            }
            if let Some(task) = event.task()
                && let Some(inode) = event.output_opened()
            {
                engine.on_trace(TraceEvent::Output { tid: task.tid, ts_ns: task.ts_ns, inode });
            }
            match event {
                ObservedEvent::Pages { task, inode, source, chunk, bits } => {
                    counts.page_events += 1;
                    let kind = if source == PageEventKind::Insertion { PageKind::Insertion } else { PageKind::Access };
                    for pages in chunk_ranges(chunk, bits) {
                        engine.on_trace(TraceEvent::Page { tid: task.tid, ts_ns: task.ts_ns, kind, inode, pages });
                    }
                }
                ObservedEvent::InodeLoad { task, inode } => {
                    engine.on_trace(TraceEvent::InodeLoad { tid: task.tid, ts_ns: task.ts_ns, inode })
                }
                ObservedEvent::LaunchEnd { root_tgid, disk_pages, .. } if disk_pages > 0 => {
                    engine.on_trace(TraceEvent::RunDiskReads { root: root_tgid, pages: disk_pages })
                }
                ObservedEvent::Exec { task, exe, filename, new_launch, interp, creds, args, args_cut, .. } => {
                    // Its process event may not be queued yet: the connector wakes the loop
                    // until it is read.
                    notes.noted(task.tgid, ExecNote { ts_ns: task.ts_ns, exe, interp, creds, args, args_cut });
                    if new_launch {
                        engine.on_trace(TraceEvent::ExecObserved { pid: task.tgid, ts_ns: task.ts_ns });
                    }
                    // The exe's name, for the page events that mention its inode.
                    resolver.learn(exe, filename);
                }
                _ => {}
            }
        };
        let more = match feed.read(max_polls, &mut sink) {
            Ok(more) => more,
            Err(e) => {
                tracing::warn!("eBPF records: {e}");
                false
            }
        };
        io.counts.launches_stopped = feed.launches_stopped;
        more
    }

    fn read_trace_pipe(&mut self, max_lines: usize) -> bool {
        let engine = &mut self.engine;
        let io = &mut self.io;
        let Observer::Tracefs(watch) = &mut io.observer else { return false };
        let mono = watch.uses_mono_clock();
        let state = watch.read(max_lines, |e| {
            let tid = e.pid;
            match e.kind {
                EventKind::Page(p) => {
                    io.counts.page_events += 1;
                    if !mono {
                        return;
                    }
                    let kind = if p.kind == PageEventKind::Insertion { PageKind::Insertion } else { PageKind::Access };
                    let ts_ns = e.ts_us.saturating_mul(1000);
                    engine.on_trace(TraceEvent::Page { tid, ts_ns, kind, inode: p.inode, pages: p.pages });
                }
                EventKind::Exec { filename, .. } => {
                    if let Some(id) = procfs::identity_of(Path::new(&filename)) {
                        io.resolver.learn(InodeKey { dev: id.dev, ino: id.ino }, filename);
                    }
                }
                EventKind::InodeLoad { inode } => {
                    if mono {
                        engine.on_trace(TraceEvent::InodeLoad { tid, ts_ns: e.ts_us.saturating_mul(1000), inode });
                    }
                }
                EventKind::Fork { .. } | EventKind::Exit { .. } => {}
            }
        });
        io.counts.page_events_lost = watch.stats().lost;
        match state {
            Ok(augur_os::sense::tracefs::PipeState::More) => true,
            Ok(_) => false,
            Err(e) => {
                tracing::warn!("page events: {e}");
                false
            }
        }
    }

    /// Answers waiting control connections, at most [`CONTROL_CLIENTS_PER_WAKE`]; true when it
    /// stopped there (more may be waiting).
    fn serve_control(&mut self) -> bool {
        for _ in 0..CONTROL_CLIENTS_PER_WAKE {
            let stream = match self.io.listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
                Err(e) => {
                    tracing::warn!("control socket: {e}");
                    return false;
                }
            };
            if !control::peer_allowed(&stream) {
                let _ = control::write_response(&stream, &Response::Error { message: "permission denied: root only".into() });
                continue;
            }
            let response = match control::read_request(&stream) {
                Ok(req) => self.answer(req),
                Err(message) => Response::Error { message },
            };
            if let Err(e) = control::write_response(&stream, &response) {
                tracing::debug!("control client went away: {e}");
            }
        }
        true
    }

    fn answer(&mut self, req: Request) -> Response {
        fn fail(e: impl std::fmt::Display) -> Response {
            Response::Error { message: e.to_string() }
        }
        let io = &mut self.io;
        match req {
            Request::Status => match self.status() {
                Ok(s) => Response::Status(Box::new(s)),
                Err(e) => fail(e),
            },
            Request::Apps => match io.state.apps() {
                Ok(apps) => Response::Apps { apps },
                Err(e) => fail(e),
            },
            Request::Launches { app, limit } => match io.state.launches_of(&app, limit) {
                Ok(launches) => Response::Launches { launches },
                Err(e) => fail(e),
            },
            Request::Forget { app } => match io.state.forget(&app).inspect(|_| io.resident.forget_app(&app)) {
                Ok(found) => Response::Forgot { apps: u64::from(found) },
                Err(e) => fail(e),
            },
            Request::ForgetAll => match io.state.forget_all().inspect(|_| io.resident.clear()) {
                Ok(n) => Response::Forgot { apps: n },
                Err(e) => fail(e),
            },
            Request::Explain { app } => {
                let explained = if self.engine.config().predict.enabled {
                    io.plan_step.as_mut().and_then(|s| s.explain(&app, loop_io::local_ms()))
                } else {
                    None
                };
                match explained {
                    Some(e) => Response::Explanation {
                        predictor: e.predictor,
                        app: e.app,
                        probability: e.probability,
                        reasons: e.reasons,
                    },
                    None => Response::Error { message: "prediction is off in this daemon ([predict] enabled = false)".into() },
                }
            }
            Request::Record { since_unix_ms } => match io.state.apps() {
                Ok(apps) => {
                    let known = apps.into_iter().map(|a| (a.key, a.pages.saturating_mul(PROFILE_PAGE_SIZE))).collect();
                    let source = format!("augur record (daemon pid {})", io.own_pid);
                    let trace = self.engine.usage_log().trace(
                        since_unix_ms,
                        loop_io::utc_offset_s((loop_io::unix_ms() / 1000) as i64),
                        PROFILE_PAGE_SIZE,
                        &source,
                        &known,
                    );
                    Response::Trace { text: trace.to_text() }
                }
                Err(e) => fail(e),
            },
        }
    }

    fn status(&mut self) -> Result<StatusReport> {
        let io = &mut self.io;
        let config = self.engine.config();
        let mode = io.observer.mode();
        let health = if io.health.is_empty() { "ok".to_string() } else { format!("degraded: {}", io.health.join("; ")) };
        let mut events = io.counts.clone();
        events.planning_rounds += io.plan_step.as_ref().map_or(0, |s| s.rounds_planned());
        events.prediction_fetches += io.plan_step.as_ref().map_or(0, |s| s.fetches_sent());
        events.launches_traced_late = self.engine.launches_traced_late();
        let (runs, _) = self.engine.run_counts();
        (events.runs_sampled, events.runs_unsettled, events.runs_streamed, events.runs_skipped_resident) =
            (runs.runs_sampled, runs.runs_unsettled, runs.runs_streamed, runs.runs_skipped_resident);
        events.refollows_held = self.engine.refollows_held();
        let (tracepoints, lost_by_cause) = match &io.observer {
            Observer::Bpf(Some(feed)) => {
                let lost = feed.lost_by_cause();
                events.page_events_lost = lost.iter().map(|(_, n)| n).sum();
                (feed.tracepoints(), lost.into_iter().map(|(why, n)| (why.to_string(), n)).collect())
            }
            Observer::Bpf(None) => (Vec::new(), Vec::new()),
            Observer::Tracefs(watch) => (watch.events().iter().map(|s| s.to_string()).collect(), Vec::new()),
        };
        let d = self.engine.drops();
        let opens_lost = io.opens.as_ref().map_or(0, |o| o.overflows);
        let drops = [
            ("launches not started (launch list full)", d.launches),
            ("execs not recorded (launch's exec list full)", d.execs_not_recorded),
            ("command lines cut", events.argv_cut),
            ("replays coalesced (same application replaying)", d.replays_coalesced),
            ("replays not started (a window-filling profile beyond memory)", d.replays_beyond_memory),
            ("replays not started (replay budget spent)", d.replays_out_of_budget),
            ("replays not started (replay queue full)", events.replay_queue_full),
            ("files predicted for runs not prefetched (replay budget)", self.engine.run_counts().1),
            ("events of no launch (look-behind full)", d.backlog_events),
            ("kernel-followed execs unclaimed list full", d.observed_execs),
            ("usage log events (log full)", d.usage_log_events),
            ("fanotify queue overflows", opens_lost),
            ("process event overruns", events.process_overruns),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(why, n)| (why.to_string(), n))
        .collect();
        Ok(StatusReport {
            drops,
            pid: io.own_pid,
            version: env!("CARGO_PKG_VERSION").to_string(),
            uptime_secs: io.started.elapsed().as_secs(),
            health,
            mode: mode.name().to_string(),
            mode_description: mode.describe(io.observer.profile_mode()),
            passed_over: io.passed_over.to_string(),
            lost_by_cause,
            tracepoints,
            apps_learned: io.state.app_count()?,
            launches_in_progress: self.engine.launches_in_progress() as u64,
            recent_launches: io.state.recent_launches(20)?,
            rss_bytes: loop_io::own_rss_bytes(),
            state_path: io.state.path().to_path_buf(),
            config_path: io.options.config_path.clone().or_else(|| {
                let p = PathBuf::from(augur_engine::config::DEFAULT_CONFIG_PATH);
                p.exists().then_some(p)
            }),
            replay_on_exec: config.launch.replay_on_exec,
            prediction_enabled: config.predict.enabled,
            prefetch_last_day: io.plan_step.as_mut().and_then(|s| s.last_day(loop_io::unix_ms())),
            prefetch_rule: io
                .plan_step
                .as_ref()
                .and_then(|s| s.read_cost_rule())
                .map(|r| PrefetchRule { read_cost: r.read_cost, reasons: r.reasons }),
            fill: io.plan_step.as_mut().and_then(|s| s.fill_status()),
            prediction_fetch_busy: io.plan_step.as_ref().is_some_and(|s| s.fetch_busy()),
            events,
            ahead: io.ahead.as_ref().map(super::ahead::AheadWorker::status),
        })
    }

    fn reload(&mut self) -> Result<()> {
        let _ = self.io.notifier.reloading();
        let loaded = self.io.options.load_config();
        self.feed(Event::Reload(Box::new(loaded.map_err(Into::into))))?;
        augur_os::untrusted_path::set_network_filesystems(self.engine.config().learn.network_filesystems);
        let _ = self.io.notifier.ready("configuration reloaded");
        Ok(())
    }

    fn shutdown(mut self) -> Result<()> {
        let _ = self.io.notifier.stopping();
        tracing::info!("stopping: saving launches in progress");
        self.io.replay_cancel.cancel();
        for (_, stop) in &self.io.replays {
            stop.cancel.cancel();
        }
        self.io.replay_tx = None;
        // The stream worker detaches its programs while the rest stops; joined at the end.
        let ahead = self.io.ahead.take();
        if let Some(a) = &ahead {
            a.request_stop();
        }
        if let Some(w) = self.io.replay_worker.take() {
            // A read stuck on an (allowed) network or FUSE file system must not hold the stop up:
            // the worker stops between chunks, and one that does not is left to the exit.
            let until = Instant::now() + REPLAY_WORKER_STOP_WAIT;
            while !w.is_finished() && Instant::now() < until {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            if w.is_finished() {
                let _ = w.join();
            } else {
                tracing::warn!("the replay worker is still reading; stopping without it");
            }
        }
        self.collect_replays()?;
        // The eBPF observer: what the kernel recorded until now belongs to the launches being
        // saved; then its programs are detached while the state is saved (detaching waits for
        // an RCU grace period, about a second).
        if matches!(self.io.observer, Observer::Bpf(_)) {
            self.read_page_events(usize::MAX, usize::MAX);
        }
        let detaching = match &mut self.io.observer {
            Observer::Bpf(feed) => {
                feed.take().map(|feed| std::thread::Builder::new().name("augur-bpf-close".into()).spawn(move || feed.close()))
            }
            Observer::Tracefs(_) => None,
        };
        self.feed(Event::Stop)?;
        if let Err(e) = self.io.state.checkpoint() {
            tracing::warn!("checkpointing the state: {e}");
        }
        let _ = std::fs::remove_file(&self.io.socket_path);
        if let Observer::Tracefs(watch) = &self.io.observer {
            watch.stop()?;
        }
        match detaching {
            Some(Ok(thread)) => {
                let _ = thread.join();
            }
            Some(Err(e)) => tracing::debug!("detaching the BPF programs in a thread: {e}; detached one by one"),
            None => {}
        }
        if let Some(a) = ahead {
            a.stop();
        }
        tracing::info!("stopped");
        Ok(())
    }
}

impl LoopIo {
    /// The time now; the local time by the offset read at the last wake-up.
    fn now(&self) -> Now {
        let unix_ms = loop_io::unix_ms();
        Now { mono_ns: loop_io::monotonic_ns(), unix_ms, local_ms: unix_ms.saturating_add_signed(self.utc_offset_ms) }
    }

    /// What [`ResidentReplays`] needs of a replay or file prefetch of `profile` for `uid`
    /// starting now.
    fn replay_start(&mut self, profile: &LaunchProfile, uid: u32) -> ReplayStart {
        ReplayStart {
            shape: ProfileShape { pages: profile.page_count(), files: profile.files.len(), bytes: profile.byte_count() },
            drops: self.page_cache_drops(),
            started_ns: loop_io::monotonic_ns(),
            uid,
        }
    }

    /// When the last replay under `memo_key` found all its pages resident and nothing left the
    /// page cache since, answers this one (of `launch`, for `app`) with the report it would give,
    /// without opening its files; true when it did.
    fn answer_from_memory(
        &mut self,
        launch: LaunchId,
        app: &str,
        memo_key: &str,
        memo: ReplayStart,
        after_open_ns: Option<u64>,
    ) -> bool {
        let Some(found) = self.resident.still_resident(memo_key, memo.uid, memo.shape, memo.drops, memo.started_ns) else {
            return false;
        };
        self.replays_answered.push(ReplayDone {
            launch,
            app: app.to_string(),
            report: ReplayReport { pages_wanted: found.wanted, pages_resident: found.resident, pages_loaded: 0, bytes_read: 0 },
            page_size: augur_os::fetch::page_size(),
            memo,
            memo_key: memo_key.to_string(),
            loaded_nothing: true,
            unloadable: found.unloadable,
            busy_ns: 0,
            after_open_ns,
        });
        true
    }

    /// The page-cache drop count ([`procfs::VmstatReader::page_cache_drops`]) plus the pages the
    /// stream worker dropped behind readers: while it stays the same, resident pages stayed
    /// resident.
    fn page_cache_drops(&mut self) -> Option<u64> {
        // The replay and the file prefetches one wake-up starts share a reading of
        // /proc/vmstat (some 30 us, a fifth of the daemon's time on a program run in a loop):
        // taken within DROPS_FRESH_NS, it is as recent as one taken for each.
        let now = loop_io::monotonic_ns();
        let vmstat = match self.drops_read {
            Some((at, value)) if now.saturating_sub(at) < DROPS_FRESH_NS => value,
            _ => {
                let value = self.vmstat.page_cache_drops();
                self.drops_read = Some((now, value));
                value
            }
        };
        let behind = self.ahead.as_ref().map_or(0, |a| a.status().bytes_dropped_behind);
        vmstat.map(|d| d.wrapping_add(behind))
    }

    /// Reads fanotify opens, at most [`OPEN_READS_PER_WAKE`] buffers; true when more may wait.
    fn read_opens(&mut self) -> bool {
        let Some(opens) = self.opens.as_mut() else { return false };
        let resolver = &mut self.resolver;
        let counts = &mut self.counts;
        // A file an earlier open named already is not named again: the same libraries are
        // opened by nearly every process, and naming one costs a readlink of /proc.
        let named: &PathResolver = resolver;
        let mut opened = Vec::new();
        let read = opens.read_some_unknown(OPEN_READS_PER_WAKE, |id| named.knows_open(id), |f| opened.push(f));
        for f in &opened {
            counts.open_events += 1;
            resolver.learn_open(f);
        }
        match read {
            Ok(more) => more,
            Err(e) => {
                tracing::warn!("fanotify: {e}");
                false
            }
        }
    }

    /// While no launch is in progress the trace pipe wakes the loop only when a CPU buffer is half
    /// full and fanotify opens are left queued, so page and file activity of other processes costs
    /// no wakeups; both are read (for the exec look-behind and paths) as soon as a process event
    /// wakes the loop.
    fn set_trace_eager(&mut self, eager: bool) {
        if let Observer::Tracefs(watch) = &self.observer
            && let Some(instance) = watch.instance()
        {
            let path = instance.dir().join("buffer_percent");
            if let Err(e) = std::fs::write(&path, if eager { "0" } else { "50" }) {
                tracing::debug!("{}: {e}", path.display());
            }
        }
    }

    /// Opens are wanted (a launch is followed) or not. They do not wake the loop: fanotify
    /// reports every open on the machine, one wake-up each; they are read at every wake-up while
    /// a launch is followed, and the timer wakes the loop at least every
    /// [`OPENS_READ_EVERY_NS`] (see [`Self::arm_timer`]), so the queue never fills. The launch
    /// window closes in a wake-up that read them first.
    fn watch_opens(&mut self, watched: bool) {
        self.opens_read = watched && self.opens.is_some();
        if !self.opens_read {
            self.opens_read_at = None;
        }
    }

    /// Puts the process events connector in the epoll set while an exec the eBPF observer
    /// reported waits for its message, and takes it out after (observing every exec only; under
    /// tracefs it is always there).
    fn poll_process_events(&mut self) -> Result<()> {
        if !matches!(self.observer, Observer::Bpf(Some(_))) {
            return Ok(());
        }
        let wanted = self.exec_notes.waiting(loop_io::monotonic_ns());
        if wanted == self.procs_polled {
            return Ok(());
        }
        if wanted {
            // Level-triggered: a message queued since it was read wakes the loop at once.
            self.poll.add(self.procs.as_fd(), TOKEN_PROC, Readiness::Readable)?;
        } else {
            self.poll.delete(self.procs.as_fd())?;
        }
        self.procs_polled = wanted;
        Ok(())
    }

    /// The connector was read in this wake-up and gave `read` events: while it is not polled
    /// and they keep coming by the [`PROCESS_EVENTS_DRAIN_MIN`], the timer reads it again within
    /// [`PROCESS_EVENTS_DRAIN_NS`]; a reading that finds fewer leaves it to the next wake-up.
    fn drained_process_events(&mut self, read: u64) {
        self.procs_drain_at = drain_deadline(self.procs_drain_at, read, loop_io::monotonic_ns());
    }

    /// Arms the timer for the engine's deadline `at_ns`, or sooner while opens are read (every
    /// [`OPENS_READ_EVERY_NS`]).
    fn arm_timer(&mut self, at_ns: Option<u64>) -> Result<()> {
        let at_ns = if self.opens_read {
            let now = loop_io::monotonic_ns();
            let due = match self.opens_read_at {
                Some(t) if t > now => t,
                _ => now.saturating_add(OPENS_READ_EVERY_NS),
            };
            self.opens_read_at = Some(due);
            Some(at_ns.map_or(due, |t| t.min(due)))
        } else {
            at_ns
        };
        let drain = self.procs_drain_at.filter(|_| !self.procs_polled);
        let at_ns = [at_ns, drain].into_iter().flatten().min();
        Ok(self.timer.set(at_ns)?)
    }

    /// The lookups that repeat what a launch needed from disk beyond its pages: a stat of each
    /// inode it loaded (the walk to it loads the directories on the way), and a listing of each
    /// small directory among them (the blocks its failed and successful lookups read).
    fn lookups_of(&mut self, inodes: &[InodeKey]) -> Vec<Lookup> {
        let mut out = Vec::with_capacity(inodes.len());
        for &key in inodes {
            let Some(named) = self.namer.name(key) else { continue };
            let kind = match named.dir_bytes {
                Some(bytes) if bytes <= LISTED_DIR_MAX_BYTES => LookupKind::Dir,
                _ => LookupKind::Stat,
            };
            out.push(Lookup { path: named.path, kind });
        }
        if !inodes.is_empty() {
            tracing::debug!("{} of {} inodes loaded from disk named for lookups", out.len(), inodes.len());
        }
        out
    }

    /// Builds the prediction step; it first learns the launches and exits kept in the state, and
    /// its pressure trigger joins the epoll set.
    fn build_plan_step(&mut self, config: &Config) -> Outcome {
        let mut step = match (self.make_plan_step)(config) {
            Ok(s) => s,
            Err(e) => {
                if self.starting {
                    self.fatal = Some(e);
                } else {
                    tracing::error!("prediction not started: {e}");
                }
                return Outcome::Failed;
            }
        };
        match self.state.recent_activity(config.state_limits().max_activity_records) {
            Ok(history) => {
                if !history.is_empty() {
                    tracing::info!("prediction: {} launches and exits remembered from earlier runs", history.len());
                }
                step.restore(&history);
            }
            Err(e) => tracing::warn!("reading the remembered launches: {e}; prediction starts from nothing"),
        }
        tracing::info!("prediction on: predictor {}", config.predict.predictor);
        step.pressure_watched(self.pressure.is_some());
        self.plan_step = Some(step);
        Outcome::Done
    }

    /// Drops the prediction step (its fetch stops).
    fn drop_plan_step(&mut self) {
        let Some(step) = self.plan_step.take() else { return };
        self.counts.planning_rounds += step.rounds_planned();
        self.counts.prediction_fetches += step.fetches_sent();
        drop(step);
    }

    /// Watches the memory-pressure trigger `config` specifies (registered anew when one is
    /// watched already), or stops watching it; the prediction step is told.
    fn watch_pressure(&mut self, config: &Config, watched: bool) -> Outcome {
        if let Some(old) = self.pressure.take()
            && let Err(e) = self.poll.delete(old.as_fd())
        {
            tracing::debug!("memory pressure trigger: {e}");
        }
        let mut outcome = Outcome::Done;
        if watched {
            let p = &config.predict;
            let opened = PressureTrigger::open(Path::new("/proc/pressure/memory"), p.pressure_trigger_us, p.pressure_window_us)
                .map_err(Error::from)
                .and_then(|t| Ok(self.poll.add(t.as_fd(), TOKEN_PRESSURE, Readiness::Priority).map(|()| t)?));
            match opened {
                Ok(t) => {
                    tracing::info!("memory pressure trigger armed: {} us of stall within {} us", t.spec.0, t.spec.1);
                    self.pressure = Some(t);
                }
                Err(e) => {
                    tracing::warn!(
                        "cannot watch a memory pressure trigger ({e}); prediction checks pressure while fetching instead, exec-time replay does not stop for it"
                    );
                    outcome = Outcome::Failed;
                }
            }
        }
        if let Some(step) = self.plan_step.as_mut() {
            step.pressure_watched(self.pressure.is_some());
        }
        outcome
    }
}

impl DaemonWorld for LoopIo {
    fn learning_history(&mut self, app: &str) -> Result<Option<LearningHistory>, WorldError> {
        Ok(self.state.learning_history(app)?)
    }

    fn refollow_hold(&mut self, app: &str) -> Result<Option<RefollowHold>, WorldError> {
        Ok(self.state.refollow_hold(app)?)
    }

    fn filter_busy(&self) -> bool {
        match &self.observer {
            Observer::Tracefs(watch) => watch.filter_busy(),
            Observer::Bpf(_) => false,
        }
    }

    fn exec_lookups(&mut self, pid: u32, exe: &Path, argv0: Option<&str>) -> Vec<Lookup> {
        path_search_of(pid, exe, argv0)
    }

    fn replay_profile(&mut self, app: &str, settings: &LearnSettings) -> Result<Option<Arc<LaunchProfile>>, WorldError> {
        Ok(self.state.replay_profile(app, settings)?)
    }

    fn launcher_hint(&mut self, key: &str, argv: &[String]) -> Result<Option<String>, WorldError> {
        Ok(self.state.launcher_hint(key, argv)?)
    }

    fn take_in_force_since(&mut self, root: u32) -> Option<u64> {
        match &self.observer {
            Observer::Tracefs(watch) => watch.take_in_force_since(root),
            // Followed in the kernel from its exec.
            Observer::Bpf(_) => None,
        }
    }

    fn run_disk_reads(&mut self, root: u32) -> Option<u64> {
        match &self.observer {
            Observer::Bpf(Some(feed)) => feed.first_reads_disk_pages(root),
            _ => None,
        }
    }

    fn disk_reads(&mut self, pids: &[u32]) -> Option<u64> {
        match &mut self.observer {
            Observer::Bpf(Some(feed)) => feed.take_disk_reads(pids),
            _ => None,
        }
    }

    fn memory_available(&mut self) -> Option<u64> {
        // A burst of execs asks for every replay (twice): /proc/meminfo is read once per
        // MEM_AVAILABLE_FRESH_NS. Within the room of the daemon's memory cgroups, to which
        // what it loads is charged (MemorySnapshot::within_room).
        let now = loop_io::monotonic_ns();
        match self.mem_available {
            Some((at, value)) if now.saturating_sub(at) < MEM_AVAILABLE_FRESH_NS => value,
            _ => {
                let value = procfs::meminfo("MemAvailable")
                    .ok()
                    .map(|a| procfs::memory_cgroup_headroom(std::process::id()).map_or(a, |room| a.min(room.available)));
                self.mem_available = Some((now, value));
                value
            }
        }
    }

    fn learn_paths_of(&mut self, pids: &[u32], inodes: &[InodeKey]) {
        // Reading a process's maps costs the kernel a line per mapping (Firefox: hundreds of
        // threads and processes, a few named nothing new): only while a file still needs a name.
        let mut unnamed: std::collections::HashSet<InodeKey> =
            inodes.iter().filter(|k| !self.resolver.knows(**k)).copied().collect();
        let mut read = 0;
        for &pid in pids {
            if unnamed.is_empty() {
                break;
            }
            read += 1;
            for f in procfs::mapped_files(pid) {
                unnamed.remove(&f.key);
                self.resolver.learn(f.key, f.path);
            }
            for (f, _) in procfs::open_files(pid) {
                unnamed.remove(&f.key);
                self.resolver.learn(f.key, f.path);
            }
        }
        tracing::debug!("maps and descriptors of {read} of {} processes read; {} files still unnamed", pids.len(), unnamed.len());
    }

    fn file_contexts(&mut self) -> Result<FileContextModel, WorldError> {
        Ok(self.state.load_file_contexts(FileContextSettings::default())?)
    }

    fn resolve(&mut self, working_set: Vec<(InodeKey, Vec<UsedRange>)>, inodes_loaded: &[InodeKey]) -> ResolvedLaunch {
        let assembly = assemble_files(working_set, &self.resolver, PROFILE_PAGE_SIZE, procfs::identity_of);
        if !assembly.unresolved_inodes.is_empty() {
            // The list is formatted only when the debug level is on (tracing evaluates the
            // arguments then).
            tracing::debug!(
                "{} inodes left without a path, first {}",
                assembly.unresolved_inodes.len(),
                assembly
                    .unresolved_inodes
                    .iter()
                    .take(8)
                    .map(|(k, pages)| format!("{}:{} ({pages} pages)", k.dev, k.ino))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        ResolvedLaunch { files: assembly.files, unresolved: assembly.unresolved, lookups: self.lookups_of(inodes_loaded) }
    }

    fn carry_out(&mut self, action: Action, config: &Config) -> Outcome {
        match action {
            Action::Follow { pid } => {
                if let Observer::Tracefs(watch) = &self.observer {
                    watch.follow(&[pid]);
                }
            }
            Action::Unfollow(pids) => match &mut self.observer {
                Observer::Tracefs(watch) => watch.unfollow(&pids),
                Observer::Bpf(Some(feed)) => feed.stop_following(&pids),
                Observer::Bpf(None) => {}
            },
            Action::Watch { pids, window_ns, count_limit } => match &mut self.observer {
                Observer::Tracefs(watch) => watch.unfollow(&pids),
                Observer::Bpf(Some(feed)) => feed.watch(&pids, std::time::Duration::from_nanos(window_ns), count_limit),
                Observer::Bpf(None) => {}
            },
            Action::RunReads { pids, first_reads_only, disk_reads_ns } => {
                if let Observer::Bpf(Some(feed)) = &mut self.observer {
                    feed.first_reads_only(&pids, first_reads_only, std::time::Duration::from_nanos(disk_reads_ns));
                }
            }
            Action::Refollow { app } => {
                if let Err(e) = self.state.unsettle(&app, config.launch.stable_launches.saturating_sub(1)) {
                    tracing::warn!("marking {app} to be followed again: {e}");
                    return Outcome::Failed;
                }
                self.counts.refollowed += 1;
            }
            Action::SaveRefollowHold { app, hold } => {
                if let Err(e) = self.state.set_refollow_hold(&app, hold) {
                    tracing::warn!("keeping how {app}'s refollows went: {e}");
                    return Outcome::Failed;
                }
            }
            Action::StartReplay { launch, app, profile, priority, user } => {
                let memo = self.replay_start(&profile, user.uid);
                if self.answer_from_memory(launch, &app, &app, memo, None) {
                    self.counts.replays += 1;
                    self.counts.replays_known_resident += 1;
                    return Outcome::AllResident;
                }
                let stop = ReplayStop::default();
                let job = ReplayJob {
                    launch,
                    memo_key: app.clone(),
                    app,
                    profile,
                    priority: io_priority(priority),
                    user,
                    stop: stop.clone(),
                    memo,
                    check_inodes: false,
                    after_open_ns: None,
                };
                let Some(tx) = &self.replay_tx else { return Outcome::Failed };
                return match tx.try_send(job) {
                    Ok(()) => {
                        self.counts.replays += 1;
                        self.replays.push((launch, stop));
                        Outcome::Done
                    }
                    Err(mpsc::TrySendError::Full(_)) => {
                        self.counts.replay_queue_full += 1;
                        tracing::debug!("launch {launch} not replayed: {REPLAY_QUEUE_MAX} replays queued already");
                        Outcome::Failed
                    }
                    Err(mpsc::TrySendError::Disconnected(_)) => Outcome::Failed,
                };
            }
            Action::PrefetchFiles { app, files, priority, user, after_open_ns } => {
                let profile = LaunchProfile {
                    command: Vec::new(),
                    recorded_at: 0,
                    page_size: PROFILE_PAGE_SIZE,
                    mode: TraceMode::Access,
                    window_ms: 0,
                    files: files
                        .into_iter()
                        .map(|f| FileProfile {
                            path: PathBuf::from(f.path),
                            identity: FileIdentity { dev: f.dev, ino: f.ino, size: 0, mtime_ns: 0 },
                            ranges: f.ranges.into_iter().map(|range| UsedRange { range, first_use_us: 0 }).collect(),
                        })
                        .collect(),
                    unresolved: Unresolved::default(),
                    lookups: Vec::new(),
                };
                // Remembered as resident like an exec-time replay, under the files it names: a
                // workload run in a loop asks for the same files at every run.
                let memo_key = file_prefetch_memo_key(&app, &profile);
                let memo = self.replay_start(&profile, user.uid);
                if self.answer_from_memory(FILE_PREFETCH_LAUNCH, &app, &memo_key, memo, after_open_ns) {
                    self.counts.file_prefetches += 1;
                    self.counts.file_prefetches_known_resident += 1;
                    return Outcome::AllResident;
                }
                let stop = ReplayStop::default();
                let job = ReplayJob {
                    launch: FILE_PREFETCH_LAUNCH,
                    app,
                    memo_key,
                    profile: Arc::new(profile),
                    priority: io_priority(priority),
                    user,
                    stop: stop.clone(),
                    memo,
                    check_inodes: true,
                    after_open_ns,
                };
                let Some(tx) = &self.replay_tx else { return Outcome::Failed };
                return match tx.try_send(job) {
                    Ok(()) => {
                        self.counts.file_prefetches += 1;
                        self.replays.push((FILE_PREFETCH_LAUNCH, stop));
                        Outcome::Done
                    }
                    Err(_) => Outcome::Failed,
                };
            }
            Action::SaveFileContexts(records) => {
                let mut model = FileContextModel::default();
                for (app, record) in &records {
                    if let Some(r) = record {
                        model.insert(app, r);
                    }
                }
                let apps: Vec<&str> = records.iter().map(|(a, _)| a.as_str()).collect();
                if let Err(e) = self.state.save_file_contexts(&model, &apps, loop_io::unix_ms()) {
                    tracing::warn!("saving the file-access context models of {} workloads: {e}", apps.len());
                    return Outcome::Failed;
                }
            }
            Action::StopReplays => {
                for (_, stop) in &self.replays {
                    stop.pressure.cancel();
                    stop.cancel.cancel();
                }
            }
            Action::WatchPressure(watched) => return self.watch_pressure(config, watched),
            Action::SaveLaunch(l) => {
                let r = &l.record;
                self.resident.forget_app(&r.app);
                if let Err(e) = self.state.learn_launch(&r.app, &l.exe, &l.profile, r, &config.state_limits()) {
                    tracing::error!("saving the launch of {}: {e}", r.app);
                    return Outcome::Failed;
                }
                self.counts.launches_learned += 1;
                // A large launch's window (its page sets, its records, its profile) is freed
                // now; glibc would keep that heap resident, charged to the daemon's memory
                // cgroup (the reader's own, in DEAR's benchmark) until the next burst.
                let large = r.pages_used >= HEAP_TRIM_MIN_PAGES;
                drop(l);
                if large {
                    loop_io::release_free_heap();
                }
            }
            Action::SaveHint(hint) => {
                if let Err(e) = self.state.save_launcher_hint(&hint, loop_io::unix_ms()) {
                    tracing::warn!("keeping what {} started: {e}", hint.launcher_key);
                    return Outcome::Failed;
                }
            }
            Action::WriteActivity(records) => {
                if let Err(e) = self.state.add_activity(&records, &config.state_limits()) {
                    tracing::warn!("recording {} launches and exits: {e}", records.len());
                }
            }
            Action::Plan { trigger, launching } => {
                let Some(step) = self.plan_step.as_mut() else { return Outcome::Done };
                let ctx = PlanContext {
                    state: &self.state,
                    config,
                    now_ms: loop_io::unix_ms(),
                    local_ms: loop_io::local_ms(),
                    launching,
                };
                if let Err(e) = step.plan(&trigger, &ctx) {
                    tracing::warn!("planning round ({trigger:?}) failed: {e}");
                }
                return Outcome::Planned { owed_in_ms: step.round_owed_in_ms(), at_ns: loop_io::monotonic_ns() };
            }
            Action::BuildPredictionStep => return self.build_plan_step(config),
            Action::DropPredictionStep => self.drop_plan_step(),
            Action::TraceEager(eager) => self.set_trace_eager(eager),
            Action::WatchOpens(watched) => self.watch_opens(watched),
            Action::ArmTimer(at_ns) => {
                if let Err(e) = self.arm_timer(at_ns) {
                    self.fatal = Some(e);
                    return Outcome::Failed;
                }
            }
        }
        Outcome::Done
    }
}

/// An empty resolver that knows the overlays fanotify watches, so files read through an overlay
/// (whose pages the kernel caches under the lower layer's inode) resolve to their overlay paths.
fn fresh_resolver(opens: Option<&OpenWatcher>) -> PathResolver {
    let mut resolver = PathResolver::new();
    if let Some(watcher) = opens {
        resolver.learn_overlays(watcher);
    }
    resolver
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn the_connector_is_drained_on_the_timer_only_while_its_events_keep_coming() {
        let s = 1_000 * MS;
        // A few processes' fork, exec and exit: nothing armed.
        assert_eq!(drain_deadline(None, 3, s), None);
        // Threads churning: read again within the drain interval, and not later for more.
        let due = s + PROCESS_EVENTS_DRAIN_NS;
        assert_eq!(drain_deadline(None, PROCESS_EVENTS_DRAIN_MIN, s), Some(due));
        assert_eq!(drain_deadline(Some(due), 500, s + 5_000 * MS), Some(due));
        assert_eq!(drain_deadline(Some(due), 2, s + 6_000 * MS), Some(due));
        // The drain itself: more churn re-arms it; little, or none, ends it.
        assert_eq!(drain_deadline(Some(due), 100, due), Some(due + PROCESS_EVENTS_DRAIN_NS));
        assert_eq!(drain_deadline(Some(due), 5, due), None);
        assert_eq!(drain_deadline(Some(due), 0, s + 7_000 * MS), None);
    }
}
