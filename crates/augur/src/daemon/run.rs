//! The event loop of `augur daemon`: one epoll over the process-events connector, the tracefs
//! page-event pipe, fanotify opens, the control socket, a signalfd, a replay-worker eventfd, the
//! prediction step's memory-pressure trigger (PSI, `EPOLLPRI`: a pressure rise runs a planning
//! round at once, which stops prefetching) and a one-shot timer armed only while something is
//! pending (a launch window, or a re-plan when prediction is on). With nothing happening it sleeps
//! in `epoll_wait` without a timeout.
//!
//! It wires `sense` (events), `model` (identity, learning), `fetch` (replay), `store` (state) and
//! the prediction hook ([`PlanStep`]) together; the policies live in those modules and in
//! [`augur_engine::window`].

use std::collections::HashMap;
use std::os::fd::AsFd;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Instant;

use rustix::event::epoll;

use super::control::{self, EventCounts, Request, Response, StatusReport};
use crate::error::{Error, Result};
use augur_core::model::app::{self, AppIdentity};
use augur_core::model::profile::{LaunchProfile, Lookup, LookupKind, TraceMode};
use augur_core::model::record::{ActivityRecord, LaunchRecord};
use augur_core::model::usage_trace::Transition;
use augur_engine::config::{Config, ReplayPriority};
use augur_engine::running::{InstanceChange, RunningInstances};
use augur_engine::usage_log::UsageLog;
use augur_engine::window::{
    ExecOutcome, FinishedLaunch, FollowPolicy, FollowStop, LaunchId, LaunchTracker, PageKind, WindowSettings,
};
use augur_os::fetch::{CancelFlag, FetchOptions, FetchPlan, FetchReport, IoPriority, OrderPolicy, Prefetcher};
use augur_os::loop_io::{self, DaemonSignal, SignalFd, Timer, Wakeup, WakeupHandle};
use augur_os::notify::Notifier;
use augur_os::sense::event::{EventKind, PageEventKind};
use augur_os::sense::fanotify::OpenWatcher;
use augur_os::sense::inode_name::InodeNamer;
use augur_os::sense::lookups::path_search_lookups;
use augur_os::sense::mode::mode_name;
use augur_os::sense::proc_connector::{ProcConnector, ProcEvent};
use augur_os::sense::procfs;
use augur_os::sense::resolve::{PathResolver, assemble_files};
use augur_os::sense::trace_session::PROFILE_PAGE_SIZE;
use augur_os::sense::tracefs::InstanceOptions;
use augur_os::sense::watch::{ModeChoice, PageWatch, WatchScope};
use augur_store::state::{OpenOutcome, StateStore};

/// Paths known to the resolver beyond which it is cleared while no launch is in progress.
const RESOLVER_MAX: usize = 20_000;

/// Launches and exits written to the state in one transaction at most; fewer are written once
/// [`ACTIVITY_FLUSH_NS`] has passed since the last write (and at shutdown).
const ACTIVITY_BATCH: usize = 64;
const ACTIVITY_FLUSH_NS: u64 = 10_000_000_000;

/// A directory a launch loaded is listed before the launch when it is at most this big (16
/// blocks): its lookups then find their blocks cached; a bigger one is only stat'ed.
const LISTED_DIR_MAX_BYTES: u64 = 64 << 10;

/// How far the exec-time replay advises ahead of the page it waits for: a tenth of a second
/// of a 40 MB/s disk.
const EXEC_REPLAY_WINDOW_BYTES: u64 = 4 << 20;

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
    /// The daemon has just started (after a boot, say): plan before anything is launched.
    Start,
}

/// For this long after the exec of a launch whose learned pages are replayed, prediction neither
/// plans nor fetches (the round is owed and runs after): a round reads every candidate's profile
/// and checks its residency, CPU and reads that a start of a few tens of milliseconds on a
/// two-core machine would wait for. Execs of applications without a profile do not count.
pub const LAUNCH_SETTLE_NS: u64 = 1_000_000_000;

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
    /// or it started less than [`LAUNCH_SETTLE_NS`] ago): its own reads and CPU come first.
    pub launching: bool,
}

/// The prediction hook: called on launch events and on the slow interval when `[predict]
/// enabled = true`. It decides and fetches on its own (it may keep a worker of its own).
pub trait PlanStep {
    /// One planning round.
    fn plan(&mut self, trigger: &PlanTrigger, ctx: &PlanContext<'_>) -> Result<()>;

    /// A PSI trigger the event loop should watch (`EPOLLPRI`); when it fires the loop runs a
    /// [`PlanTrigger::Pressure`] round at once.
    fn pressure_trigger(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }

    /// The loop could not watch [`PlanStep::pressure_trigger`]: the step must watch pressure on
    /// its own.
    fn pressure_trigger_unusable(&mut self) {}

    /// When the last [`PlanStep::plan`] call put its round off (rounds are rate-limited): the
    /// loop calls again with [`PlanTrigger::Interval`] within this many milliseconds.
    fn round_owed_in_ms(&self) -> Option<u64> {
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
    /// `--mode`: a trace mode asked for (can only degrade).
    pub mode: Option<TraceMode>,
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

/// A finished launch, resolved to files, ready to be saved.
struct Learned {
    exe: String,
    profile: LaunchProfile,
    record: LaunchRecord,
}

struct ReplayJob {
    launch: LaunchId,
    profile: LaunchProfile,
    priority: IoPriority,
}

struct ReplayDone {
    launch: LaunchId,
    report: FetchReport,
}

/// The replay worker: fetches profiles one at a time so the loop never blocks on I/O.
fn spawn_replay_worker(
    wake: WakeupHandle,
    cancel: CancelFlag,
) -> Result<(mpsc::Sender<ReplayJob>, mpsc::Receiver<ReplayDone>, std::thread::JoinHandle<()>)> {
    let (job_tx, job_rx) = mpsc::channel::<ReplayJob>();
    let (done_tx, done_rx) = mpsc::channel::<ReplayDone>();
    let handle = std::thread::Builder::new()
        .name("augur-replay".into())
        .spawn(move || {
            for job in job_rx {
                if cancel.is_cancelled() {
                    break;
                }
                let plan = FetchPlan::from_profiles([&job.profile], augur_os::fetch::page_size());
                // The application is reading too: keep to its first-use order and only a little
                // ahead of it, so that its own reads never queue behind pages it needs later
                // (on a throttled or slow disk a deep queue in disk order made starts slower).
                let options = FetchOptions {
                    priority: job.priority,
                    order: OrderPolicy::FirstUse,
                    window_bytes: EXEC_REPLAY_WINDOW_BYTES,
                    ..FetchOptions::default()
                };
                let report = Prefetcher::new(options).fetch(&plan, &cancel);
                if done_tx.send(ReplayDone { launch: job.launch, report }).is_err() {
                    break;
                }
                wake.wake();
            }
        })
        .map_err(|e| Error::io("starting the replay worker", e))?;
    Ok((job_tx, done_rx, handle))
}

fn io_priority(p: ReplayPriority) -> IoPriority {
    match p {
        ReplayPriority::Idle => IoPriority::Idle,
        ReplayPriority::BestEffort => IoPriority::BestEffort { level: 7 },
    }
}

fn window_settings(c: &Config, mode: TraceMode) -> WindowSettings {
    WindowSettings {
        max_ns: c.window_max().as_nanos() as u64,
        quiet_ns: c.quiet().as_nanos() as u64,
        mode,
        max_pages: c.launch.max_launch_mib.saturating_mul(1 << 20) / PROFILE_PAGE_SIZE,
    }
}

/// The `PATH` search that found the program `pid` runs as `argv0`, as the launcher made it
/// with its `PATH` (the program inherited it): see [`path_search_lookups`].
fn path_search_of(pid: u32, exe: &Path, argv0: Option<&str>) -> Vec<Lookup> {
    let (Some(argv0), Some(search_path)) = (argv0, procfs::env_var(pid, "PATH")) else { return Vec::new() };
    let Some(program) = procfs::identity_of(exe) else { return Vec::new() };
    path_search_lookups(std::ffi::OsStr::new(argv0), &search_path, |candidate| {
        procfs::identity_of(candidate).is_some_and(|id| id.dev == program.dev && id.ino == program.ino)
    })
}

fn follow_policy(c: &Config) -> FollowPolicy {
    FollowPolicy {
        first_launches: c.launch.follow_first_launches,
        refollow_after_ms: c.launch.refollow_after_secs.saturating_mul(1000),
    }
}

/// Identifies the application process `tgid` runs now, from /proc.
fn identify_process(tgid: u32) -> Option<(AppIdentity, Vec<String>)> {
    let exe = std::fs::read_link(format!("/proc/{tgid}/exe")).ok()?;
    let raw = std::fs::read(format!("/proc/{tgid}/cmdline")).unwrap_or_default();
    let argv = app::split_cmdline(&raw);
    let cwd = std::fs::read_link(format!("/proc/{tgid}/cwd")).ok();
    Some((app::identify(&exe.to_string_lossy(), &argv, cwd.as_deref()), argv))
}

const TOKEN_PROC: u64 = 0;
const TOKEN_TRACE: u64 = 1;
const TOKEN_OPENS: u64 = 2;
const TOKEN_CONTROL: u64 = 3;
const TOKEN_SIGNAL: u64 = 4;
const TOKEN_TIMER: u64 = 5;
const TOKEN_WAKE: u64 = 6;
const TOKEN_PRESSURE: u64 = 7;

/// The running daemon.
pub struct Daemon {
    options: DaemonOptions,
    config: Config,
    state: StateStore,
    procs: ProcConnector,
    watch: PageWatch,
    opens: Option<OpenWatcher>,
    listener: UnixListener,
    signals: SignalFd,
    timer: Timer,
    wake: Wakeup,
    tracker: LaunchTracker,
    /// Which launches' root processes still run, for the predictors' launch/exit pairs.
    running: RunningInstances,
    /// What ran since the start, for `augur record`.
    usage_log: UsageLog,
    resolver: PathResolver,
    /// Names the inodes launches needed from disk, for their lookups.
    namer: InodeNamer,
    replay_tx: Option<mpsc::Sender<ReplayJob>>,
    replay_rx: mpsc::Receiver<ReplayDone>,
    replay_worker: Option<std::thread::JoinHandle<()>>,
    replay_cancel: CancelFlag,
    /// Launches whose replay is still running, and finished launches waiting for their replay.
    replays_in_flight: HashMap<LaunchId, Option<Learned>>,
    plan_step: Option<Box<dyn PlanStep>>,
    next_replan_ns: Option<u64>,
    /// Monotonic time of the exec of the newest launch whose learned pages were replayed.
    last_launch_ns: Option<u64>,
    started: Instant,
    own_pid: u32,
    counts: EventCounts,
    health: Vec<String>,
    notifier: Notifier,
    socket_path: PathBuf,
    /// Whether the trace pipe currently wakes the loop on any event (a launch is in progress).
    trace_eager: bool,
    /// Launches and exits not yet written to the state.
    pending_activity: Vec<ActivityRecord>,
    /// When `pending_activity` was last written (monotonic ns).
    activity_flushed_ns: u64,
}

impl Daemon {
    /// Sets everything up: configuration, state, process events, page events, opens, control
    /// socket, signals. Tracing is on when this returns.
    pub fn start(options: DaemonOptions) -> Result<Daemon> {
        let config = options.load_config()?;
        augur_os::privilege::require_root("running the daemon")?;
        let signals = SignalFd::new()?;
        let (state, outcome) = StateStore::open(&config.daemon.state_path)?;
        match &outcome {
            OpenOutcome::Created => tracing::info!("new state at {}", config.daemon.state_path.display()),
            OpenOutcome::Opened => {}
            OpenOutcome::MovedAside(p) => tracing::warn!("started a fresh state; the unusable one is {}", p.display()),
        }
        let procs = ProcConnector::open()?;
        let choice = ModeChoice { requested: options.mode, degrade_to_file_only: true };
        let mut health = Vec::new();
        // Only launches being learned are traced: the kernel drops everyone else's page events.
        let watch = PageWatch::open("daemon", &WatchScope::Followed, choice, &InstanceOptions::default())?;
        if watch.mode() == TraceMode::FileOnly {
            health.push("no page tracing (file-only mode)".to_string());
        }
        let opens = match OpenWatcher::new(false) {
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
        let replay_cancel = CancelFlag::new();
        let (tx, rx, worker) = spawn_replay_worker(wake.handle()?, replay_cancel.clone())?;
        watch.start()?;
        let tracker = LaunchTracker::new(window_settings(&config, watch.mode()));
        let socket_path = config.daemon.socket_path.clone();
        let notifier = Notifier::from_env()?;
        let resolver = fresh_resolver(opens.as_ref());
        Ok(Daemon {
            options,
            config,
            state,
            procs,
            watch,
            opens,
            listener,
            signals,
            timer,
            wake,
            tracker,
            running: RunningInstances::new(),
            usage_log: UsageLog::new(loop_io::unix_ms(), augur_engine::usage_log::MAX_EVENTS),
            resolver,
            namer: InodeNamer::new(),
            replay_tx: Some(tx),
            replay_rx: rx,
            replay_worker: Some(worker),
            replay_cancel,
            replays_in_flight: HashMap::new(),
            plan_step: None,
            next_replan_ns: None,
            last_launch_ns: None,
            started: Instant::now(),
            own_pid: std::process::id(),
            counts: EventCounts::default(),
            health,
            notifier,
            socket_path,
            trace_eager: true,
            pending_activity: Vec::new(),
            activity_flushed_ns: loop_io::monotonic_ns(),
        })
    }

    /// Installs the prediction hook (used when `[predict] enabled = true`).
    /// The step first learns the launches and exits kept in the state.
    pub fn set_plan_step(&mut self, mut step: Box<dyn PlanStep>) {
        match self.state.recent_activity(self.config.state_limits().max_activity_records) {
            Ok(history) => {
                if !history.is_empty() {
                    tracing::info!("prediction: {} launches and exits remembered from earlier runs", history.len());
                }
                step.restore(&history);
            }
            Err(e) => tracing::warn!("reading the remembered launches: {e}; prediction starts from nothing"),
        }
        self.plan_step = Some(step);
        self.schedule_replan();
    }

    /// Writes the launches and exits seen so far to the state (when `force`, or when enough
    /// are waiting or enough time has passed).
    fn flush_activity(&mut self, force: bool) {
        let now = loop_io::monotonic_ns();
        if self.pending_activity.is_empty()
            || !(force
                || self.pending_activity.len() >= ACTIVITY_BATCH
                || now.saturating_sub(self.activity_flushed_ns) >= ACTIVITY_FLUSH_NS)
        {
            return;
        }
        let records = std::mem::take(&mut self.pending_activity);
        if let Err(e) = self.state.add_activity(&records, &self.config.state_limits()) {
            tracing::warn!("recording {} launches and exits: {e}", records.len());
        }
        self.activity_flushed_ns = now;
    }

    /// The trace mode in use.
    pub fn mode(&self) -> TraceMode {
        self.watch.mode()
    }

    fn schedule_replan(&mut self) {
        self.next_replan_ns = (self.config.predict.enabled && self.plan_step.is_some())
            .then(|| loop_io::monotonic_ns() + self.config.predict.replan_interval_secs.saturating_mul(1_000_000_000));
    }

    fn plan(&mut self, trigger: PlanTrigger) {
        if !self.config.predict.enabled {
            return;
        }
        if let Some(step) = self.plan_step.as_mut() {
            let ctx = PlanContext {
                state: &self.state,
                config: &self.config,
                now_ms: loop_io::unix_ms(),
                local_ms: loop_io::local_ms(),
                launching: !self.replays_in_flight.is_empty()
                    || self.last_launch_ns.is_some_and(|t| loop_io::monotonic_ns() < t.saturating_add(LAUNCH_SETTLE_NS)),
            };
            if let Err(e) = step.plan(&trigger, &ctx) {
                tracing::warn!("planning round ({trigger:?}) failed: {e}");
            }
            if let Some(ms) = step.round_owed_in_ms() {
                let owed = loop_io::monotonic_ns().saturating_add(ms.saturating_mul(1_000_000));
                self.next_replan_ns = Some(self.next_replan_ns.map_or(owed, |t| t.min(owed)));
            }
        }
    }

    /// Runs until SIGTERM or SIGINT; saves and returns.
    pub fn run(mut self) -> Result<()> {
        let ep = epoll::create(epoll::CreateFlags::CLOEXEC).map_err(|e| Error::io("creating epoll", e.into()))?;
        let add = |fd: std::os::fd::BorrowedFd<'_>, token: u64| {
            epoll::add(&ep, fd, epoll::EventData::new_u64(token), epoll::EventFlags::IN)
                .map_err(|e| Error::io("registering with epoll", e.into()))
        };
        add(self.procs.as_fd(), TOKEN_PROC)?;
        if let Some(fd) = self.watch.fd()? {
            add(fd, TOKEN_TRACE)?;
        }
        // fanotify is watched only while a launch is in progress (see `set_trace_eager`).
        let mut opens_watched = false;
        add(self.listener.as_fd(), TOKEN_CONTROL)?;
        add(self.signals.as_fd(), TOKEN_SIGNAL)?;
        add(self.timer.as_fd(), TOKEN_TIMER)?;
        add(self.wake.as_fd(), TOKEN_WAKE)?;
        if self.config.predict.enabled
            && let Some(step) = self.plan_step.as_mut()
        {
            let watched = step
                .pressure_trigger()
                .map(|fd| epoll::add(&ep, fd, epoll::EventData::new_u64(TOKEN_PRESSURE), epoll::EventFlags::PRI));
            match watched {
                Some(Ok(())) => tracing::info!("memory pressure trigger armed"),
                Some(Err(e)) => {
                    tracing::warn!("cannot watch the memory pressure trigger ({e}); checking pressure while fetching instead");
                    step.pressure_trigger_unusable();
                }
                None => {}
            }
        }

        let ready = format!(
            "learning in {} mode; {} applications known",
            mode_name(self.watch.mode()),
            self.state.app_count().unwrap_or(0)
        );
        tracing::info!(
            "augur daemon ready: {ready}; state {}, socket {}",
            self.config.daemon.state_path.display(),
            self.socket_path.display()
        );
        let _ = self.notifier.ready(&ready);

        // Plan at once: after a boot the likeliest applications are loaded before anyone asks.
        if self.config.predict.enabled && self.plan_step.is_some() {
            self.plan(PlanTrigger::Start);
            self.schedule_replan();
        }

        let mut events: Vec<epoll::Event> = Vec::with_capacity(16);
        loop {
            events.clear();
            match epoll::wait(&ep, rustix::buffer::spare_capacity(&mut events), None) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(Error::io("waiting for events", e.into())),
            }
            self.counts.wakeups += 1;
            let mut tokens = [false; 8];
            for ev in &events {
                let data = ev.data;
                if let Some(t) = tokens.get_mut(data.u64() as usize) {
                    *t = true;
                }
            }
            // A pressure rise first: it stops prefetching, which must not wait for other work.
            if tokens[TOKEN_PRESSURE as usize] {
                self.counts.pressure_events += 1;
                self.plan(PlanTrigger::Pressure);
            }
            // Process events first, so page events are attributed to launches they belong to.
            self.read_process_events();
            if tokens[TOKEN_OPENS as usize] || self.tracker.is_following() {
                self.read_opens();
            }
            self.read_page_events();
            if tokens[TOKEN_WAKE as usize] {
                self.wake.clear();
            }
            self.collect_replays();
            if tokens[TOKEN_CONTROL as usize] {
                self.serve_control();
            }
            let now = loop_io::monotonic_ns();
            if tokens[TOKEN_TIMER as usize] {
                self.timer.acknowledge();
            }
            for finished in self.tracker.expire(now) {
                self.finish_launch(finished);
            }
            if self.next_replan_ns.is_some_and(|t| t <= now) {
                self.schedule_replan();
                self.plan(PlanTrigger::Interval);
            }
            if tokens[TOKEN_SIGNAL as usize] {
                let mut stop = false;
                for s in self.signals.take() {
                    match s {
                        DaemonSignal::Stop => stop = true,
                        DaemonSignal::Reload => self.reload(),
                    }
                }
                if stop {
                    return self.shutdown();
                }
            }
            self.flush_activity(false);
            self.sync_followed();
            self.tracker.trim_backlog(now);
            // Paths and prompt page events matter only while a launch is followed.
            let active = self.tracker.is_following();
            self.set_trace_eager(active);
            if let Some(o) = &self.opens
                && active != opens_watched
            {
                let r = if active {
                    epoll::add(&ep, o.as_fd(), epoll::EventData::new_u64(TOKEN_OPENS), epoll::EventFlags::IN)
                } else {
                    epoll::delete(&ep, o.as_fd())
                };
                if let Err(e) = r {
                    tracing::warn!("fanotify watch in epoll: {e}");
                }
                opens_watched = active;
            }
            if self.tracker.is_idle() && self.resolver.len() > RESOLVER_MAX {
                self.resolver = fresh_resolver(self.opens.as_ref());
            }
            let deadline = match (self.tracker.next_deadline(), self.next_replan_ns) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            self.timer.set(deadline)?;
        }
    }

    /// While no launch is in progress the trace pipe wakes the loop only when a CPU buffer is half
    /// full and fanotify opens are left queued, so page and file activity of other processes costs
    /// no wakeups; both are read (for the exec look-behind and paths) as soon as a process event
    /// wakes the loop.
    fn set_trace_eager(&mut self, eager: bool) {
        if eager == self.trace_eager {
            return;
        }
        if let Some(instance) = self.watch.instance() {
            let path = instance.dir().join("buffer_percent");
            if let Err(e) = std::fs::write(&path, if eager { "0" } else { "50" }) {
                tracing::debug!("{}: {e}", path.display());
            }
        }
        self.trace_eager = eager;
    }

    fn read_process_events(&mut self) {
        let mut batch = Vec::new();
        if let Err(e) = self.procs.read_available(|ev| batch.push(ev)) {
            tracing::warn!("process events: {e}");
        }
        self.counts.process_events += batch.len() as u64;
        self.counts.process_overruns = self.procs.overruns;
        for ev in batch {
            match ev {
                // Threads are tracked too: page events are attributed by thread id, because the
                // tracer's pid->tgid cache can be stale for a recycled pid.
                // The kernel follows the children of followed processes itself (event-fork).
                ProcEvent::Fork { parent_tgid, child_pid, child_tgid, .. } => {
                    self.tracker.on_fork(creator_of(parent_tgid, child_pid, child_tgid), child_pid)
                }
                ProcEvent::Exec { tgid, ts_ns, .. } => self.on_exec(tgid, ts_ns),
                ProcEvent::Exit { pid, .. } if pid == self.own_pid => {}
                ProcEvent::Exit { pid, tgid, ts_ns } => {
                    self.tracker.on_exit(pid, ts_ns);
                    if let Some(change) = self.running.on_exit(pid, tgid) {
                        self.report_change(change);
                    }
                }
            }
        }
    }

    fn on_exec(&mut self, tgid: u32, ts_ns: u64) {
        if tgid == self.own_pid {
            return;
        }
        let Some((app, argv)) = identify_process(tgid) else { return };
        // The exe itself names an inode the page events will mention.
        if let Some(id) = procfs::identity_of(&app.exe) {
            self.resolver.learn(augur_core::model::profile::InodeKey { dev: id.dev, ino: id.ino }, app.exe.clone());
        }
        let key = app.key.clone();
        let argv0 = argv.first().cloned();
        let (state, watch, policy) = (&self.state, &self.watch, follow_policy(&self.config));
        let decide = |app: &AppIdentity| {
            let wanted = match state.learned_launches(&app.key) {
                Ok(learned) => {
                    let (n, last_ms) = learned.unwrap_or((0, 0));
                    policy.follows(n, last_ms, loop_io::unix_ms())
                }
                Err(e) => {
                    tracing::warn!("reading what is known of {}: {e}", app.key);
                    true
                }
            };
            // While the filter is being written, this launch's pid would be in force only after
            // a grace period, too late for its start: it is left for a later launch to learn.
            let follow = wanted && !watch.filter_busy();
            if wanted && !follow {
                tracing::debug!("{} (pid {tgid}) not followed this time: the pid filter is being written", app.key);
            }
            follow
        };
        let outcome = self.tracker.on_exec(tgid, app, argv, ts_ns, decide);
        let id = match &outcome {
            ExecOutcome::Started(id) | ExecOutcome::Relabelled(id) => *id,
            ExecOutcome::Joined(id) => {
                tracing::trace!("launch {id}: {key} joined (pid {tgid})");
                return;
            }
        };
        // Only followed launches reach the kernel's pid filter: an exec of a known application
        // costs no filter write (each one waits for a grace period, see sense::pid_filter).
        let follow = self.tracker.get_mut(id).is_some_and(|l| l.followed);
        if follow {
            self.watch.follow(&[tgid]);
            // Only a followed launch pays for this: environ and a stat per PATH directory.
            if let Some(l) = self.tracker.get_mut(id) {
                l.exec_lookups = path_search_of(tgid, &l.app.exe, argv0.as_deref());
            }
        }
        let how = if follow { "followed" } else { "replayed only" };
        tracing::debug!("launch {id}: {key} (pid {tgid}, {outcome:?}, {how})");
        if self.config.launch.replay_on_exec && !self.replays_in_flight.contains_key(&id) && self.replay(id, &key) {
            // A start augur serves: prediction leaves it the machine for a moment. Other execs
            // (a shell loop's, a build's) do not hold prediction off.
            self.last_launch_ns = Some(loop_io::monotonic_ns());
        }
        for change in self.running.on_launch(tgid, &key) {
            self.report_change(change);
        }
    }

    /// Tells the kernel to stop recording the processes of launches no longer followed.
    fn sync_followed(&mut self) {
        let gone = self.tracker.take_unfollowed();
        self.watch.unfollow(&gone);
    }

    /// Tells the prediction step that an instance started or ended.
    fn report_change(&mut self, change: InstanceChange) {
        let now = loop_io::unix_ms();
        let (app, instance, launch) = match &change {
            InstanceChange::Launched { app, instance } => (app, *instance, true),
            InstanceChange::Exited { app, instance } => (app, *instance, false),
        };
        self.usage_log.activity(now, app, instance, if launch { Transition::Launch } else { Transition::Exit });
        self.pending_activity.push(ActivityRecord {
            at_ms: now,
            local_ms: loop_io::local_ms(),
            app: app.clone(),
            instance,
            launch,
        });
        let trigger = match change {
            InstanceChange::Launched { app, instance } => PlanTrigger::LaunchStarted { app, instance },
            InstanceChange::Exited { app, instance } => PlanTrigger::AppExited { app, instance },
        };
        self.plan(trigger);
    }

    /// Sends the exec-time replay of `key`'s learned profile; true when one was sent.
    fn replay(&mut self, id: LaunchId, key: &str) -> bool {
        let model = match self.state.load_app(key) {
            Ok(Some(m)) => m,
            Ok(None) => return false,
            Err(e) => {
                tracing::warn!("reading the profile of {key}: {e}");
                return false;
            }
        };
        let profile = model.replay_profile(&self.config.learn_settings());
        let expected = profile.page_count();
        if expected == 0 {
            return false;
        }
        if let Some(l) = self.tracker.get_mut(id) {
            l.pages_expected = expected;
        }
        let job = ReplayJob { launch: id, profile, priority: io_priority(self.config.launch.replay_io_priority) };
        if let Some(tx) = &self.replay_tx
            && tx.send(job).is_ok()
        {
            self.replays_in_flight.insert(id, None);
            self.counts.replays += 1;
            return true;
        }
        false
    }

    fn collect_replays(&mut self) {
        let mut collected = false;
        while let Ok(done) = self.replay_rx.try_recv() {
            collected = true;
            let r = &done.report;
            let apply = |l: &mut augur_engine::window::ActiveLaunch| {
                l.pages_resident_at_exec = r.pages.already_resident;
                l.pages_prefetched = r.pages.loaded;
                l.bytes_prefetched = r.bytes_read;
            };
            match self.replays_in_flight.remove(&done.launch) {
                Some(Some(mut learned)) => {
                    learned.record.pages_resident_at_exec = r.pages.already_resident;
                    learned.record.pages_prefetched = r.pages.loaded;
                    learned.record.bytes_prefetched = r.bytes_read;
                    self.save(learned);
                }
                _ => {
                    if let Some(l) = self.tracker.get_mut(done.launch) {
                        apply(l);
                    }
                }
            }
            tracing::debug!(
                "replay for launch {}: {} pages wanted, {} resident, {} loaded",
                done.launch,
                r.pages.wanted,
                r.pages.already_resident,
                r.pages.loaded
            );
        }
        if collected && self.replays_in_flight.is_empty() {
            // Prediction paused while the replays loaded; it may go on now.
            self.plan(PlanTrigger::Interval);
        }
    }

    fn read_opens(&mut self) {
        let Some(opens) = self.opens.as_mut() else { return };
        let resolver = &mut self.resolver;
        let counts = &mut self.counts;
        if let Err(e) = opens.read_available(|f| {
            counts.open_events += 1;
            resolver.learn_open(&f)
        }) {
            tracing::warn!("fanotify: {e}");
        }
    }

    fn read_page_events(&mut self) {
        let tracker = &mut self.tracker;
        let resolver = &mut self.resolver;
        let counts = &mut self.counts;
        let mono = self.watch.uses_mono_clock();
        loop {
            let state = self.watch.read(50_000, |e| {
                let tid = e.pid;
                match e.kind {
                    EventKind::Page(p) => {
                        counts.page_events += 1;
                        if !mono {
                            return;
                        }
                        let kind = if p.kind == PageEventKind::Insertion { PageKind::Insertion } else { PageKind::Access };
                        tracker.on_page(tid, e.ts_us.saturating_mul(1000), kind, p.inode, p.pages);
                    }
                    EventKind::Exec { filename, .. } => {
                        if let Some(id) = procfs::identity_of(Path::new(&filename)) {
                            resolver.learn(augur_core::model::profile::InodeKey { dev: id.dev, ino: id.ino }, filename);
                        }
                    }
                    EventKind::InodeLoad { inode } => {
                        if mono {
                            tracker.on_inode_load(tid, e.ts_us.saturating_mul(1000), inode);
                        }
                    }
                    EventKind::Fork { .. } | EventKind::Exit { .. } => {}
                }
            });
            match state {
                Ok(augur_os::sense::tracefs::PipeState::More) => continue,
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!("page events: {e}");
                    break;
                }
            }
        }
        self.counts.page_events_lost = self.watch.stats().lost;
    }

    fn finish_launch(&mut self, finished: FinishedLaunch) {
        tracing::debug!(
            "launch {} of {} closed: {} page events, pids {:?} still live, {} backlog drops so far",
            finished.launch.id,
            finished.launch.app.key,
            finished.launch.page_events,
            finished.launch.live,
            self.tracker.backlog_dropped
        );
        // Paths of inodes no open event named: the maps and fds of the launch's live processes.
        for pid in finished.launch.live.iter().copied() {
            for f in procfs::mapped_files(pid) {
                self.resolver.learn(f.key, f.path);
            }
            for (f, _) in procfs::open_files(pid) {
                self.resolver.learn(f.key, f.path);
            }
        }
        let id = finished.launch.id;
        // Resolve paths now, while the resolver still knows them.
        let learned = self.prepare(finished);
        match self.replays_in_flight.get_mut(&id) {
            // Save once the replay reports, so the record holds what it loaded.
            Some(slot) => *slot = learned,
            None => {
                if let Some(l) = learned {
                    self.save(l);
                }
            }
        }
    }

    fn prepare(&mut self, finished: FinishedLaunch) -> Option<Learned> {
        if !finished.launch.followed && finished.launch.stopped.is_none() {
            return None;
        }
        let in_force = self.watch.take_in_force_since(finished.launch.root);
        if let Some(late_ms) = in_force.and_then(|since| finished.traced_late_ms(since)) {
            // Not a launch learned: the next one is followed again.
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
        let FinishedLaunch { launch, window_ms, working_set } = finished;
        match launch.stopped {
            Some(FollowStop::PageCap) => tracing::info!(
                "launch of {} stopped being followed at {} MiB (max_launch_mib): its first pages are learned",
                launch.app.key,
                self.config.launch.max_launch_mib
            ),
            Some(FollowStop::Settled { after_ms }) => tracing::info!(
                "launch of {} stopped being followed after {after_ms} ms: it kept re-using the pages it had loaded; its first pages are learned",
                launch.app.key
            ),
            None => {}
        }
        let pages_used: u64 = working_set.iter().flat_map(|(_, r)| r.iter().map(|u| u.range.len)).sum();
        let app_key = launch.app.key.clone();
        if pages_used < self.config.launch.min_pages.max(1) {
            tracing::trace!("launch of {app_key}: {pages_used} pages, not learned");
            return None;
        }
        let assembly = assemble_files(working_set, &self.resolver, PROFILE_PAGE_SIZE, procfs::identity_of);
        let (files, unresolved) = (assembly.files, assembly.unresolved);
        let mut lookups = launch.exec_lookups.clone();
        lookups.extend(self.lookups_of(&launch.inodes_loaded));
        let profile = LaunchProfile {
            command: launch.argv.clone(),
            recorded_at: loop_io::unix_ms() / 1000,
            page_size: PROFILE_PAGE_SIZE,
            mode: self.watch.mode(),
            window_ms,
            files,
            unresolved,
            lookups,
        };
        let started_ms = loop_io::unix_ms().saturating_sub(loop_io::monotonic_ns().saturating_sub(launch.started_ns) / 1_000_000);
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
        Some(Learned { exe: launch.app.exe.to_string_lossy().into_owned(), profile, record })
    }

    /// The lookups that repeat what a launch needed from disk beyond its pages: a stat of each
    /// inode it loaded (the walk to it loads the directories on the way), and a listing of each
    /// small directory among them (the blocks its failed and successful lookups read).
    fn lookups_of(&mut self, inodes: &[augur_core::model::profile::InodeKey]) -> Vec<Lookup> {
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

    fn save(&mut self, l: Learned) {
        let limits = self.config.state_limits();
        let r = &l.record;
        let app_key = r.app.clone();
        match self.state.learn_launch(&app_key, &l.exe, &l.profile, r, &limits) {
            Ok(_) => {
                self.counts.launches_learned += 1;
                self.usage_log.working_set(loop_io::unix_ms(), &app_key, r.pages_used.saturating_mul(l.profile.page_size));
                tracing::info!(
                    "learned {app_key}: {} pages in {} files over {} ms; {} read from disk, {} expected, {} prefetched ({} unresolved inodes)",
                    r.pages_used,
                    l.profile.files.len(),
                    r.window_ms,
                    r.pages_read_from_disk,
                    r.pages_expected,
                    r.pages_prefetched,
                    l.profile.unresolved.inodes
                );
            }
            Err(e) => tracing::error!("saving the launch of {app_key}: {e}"),
        }
        self.plan(PlanTrigger::LaunchFinished { app: app_key });
    }

    fn serve_control(&mut self) {
        loop {
            let stream = match self.listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    tracing::warn!("control socket: {e}");
                    return;
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
    }

    fn answer(&mut self, req: Request) -> Response {
        fn fail(e: impl std::fmt::Display) -> Response {
            Response::Error { message: e.to_string() }
        }
        match req {
            Request::Status => match self.status() {
                Ok(s) => Response::Status(Box::new(s)),
                Err(e) => fail(e),
            },
            Request::Apps => match self.state.apps() {
                Ok(apps) => Response::Apps { apps },
                Err(e) => fail(e),
            },
            Request::Launches { app, limit } => match self.state.launches_of(&app, limit) {
                Ok(launches) => Response::Launches { launches },
                Err(e) => fail(e),
            },
            Request::Forget { app } => match self.state.forget(&app) {
                Ok(found) => Response::Forgot { apps: u64::from(found) },
                Err(e) => fail(e),
            },
            Request::ForgetAll => match self.state.forget_all() {
                Ok(n) => Response::Forgot { apps: n },
                Err(e) => fail(e),
            },
            Request::Explain { app } => {
                let explained = if self.config.predict.enabled {
                    self.plan_step.as_mut().and_then(|s| s.explain(&app, loop_io::local_ms()))
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
            Request::Record { since_unix_ms } => match self.state.apps() {
                Ok(apps) => {
                    let known = apps.into_iter().map(|a| (a.key, a.pages.saturating_mul(PROFILE_PAGE_SIZE))).collect();
                    let source = format!("augur record (daemon pid {})", self.own_pid);
                    let trace = self.usage_log.trace(
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

    fn status(&self) -> Result<StatusReport> {
        let mode = self.watch.mode();
        let health = if self.health.is_empty() { "ok".to_string() } else { format!("degraded: {}", self.health.join("; ")) };
        Ok(StatusReport {
            pid: self.own_pid,
            version: env!("CARGO_PKG_VERSION").to_string(),
            uptime_secs: self.started.elapsed().as_secs(),
            health,
            mode: mode_name(mode).to_string(),
            mode_description: mode.describe().to_string(),
            tracepoints: self.watch.events().iter().map(|s| s.to_string()).collect(),
            apps_learned: self.state.app_count()?,
            launches_in_progress: self.tracker.active().len() as u64,
            recent_launches: self.state.recent_launches(20)?,
            rss_bytes: loop_io::own_rss_bytes(),
            state_path: self.state.path().to_path_buf(),
            config_path: self.options.config_path.clone().or_else(|| {
                let p = PathBuf::from(augur_engine::config::DEFAULT_CONFIG_PATH);
                p.exists().then_some(p)
            }),
            replay_on_exec: self.config.launch.replay_on_exec,
            prediction_enabled: self.config.predict.enabled,
            events: self.counts.clone(),
        })
    }

    fn reload(&mut self) {
        let _ = self.notifier.reloading();
        match self.options.load_config() {
            Ok(new) => {
                if new.daemon.state_path != self.config.daemon.state_path
                    || new.daemon.socket_path != self.config.daemon.socket_path
                {
                    tracing::warn!("state_path and socket_path changes take effect at the next start");
                }
                self.tracker.set_settings(window_settings(&new, self.watch.mode()));
                self.config = new;
                self.schedule_replan();
                tracing::info!("configuration reloaded");
            }
            Err(e) => tracing::error!("configuration not reloaded, keeping the old one: {e}"),
        }
        let _ = self.notifier.ready("configuration reloaded");
    }

    fn shutdown(mut self) -> Result<()> {
        let _ = self.notifier.stopping();
        tracing::info!("stopping: saving launches in progress");
        self.replay_cancel.cancel();
        self.replay_tx = None;
        if let Some(w) = self.replay_worker.take() {
            let _ = w.join();
        }
        self.collect_replays();
        let now = loop_io::monotonic_ns();
        let pending: Vec<Learned> = self.replays_in_flight.drain().filter_map(|(_, l)| l).collect();
        for l in pending {
            self.save(l);
        }
        for f in self.tracker.close_all(now) {
            if let Some(l) = self.prepare(f) {
                self.save(l);
            }
        }
        self.flush_activity(true);
        if let Err(e) = self.state.checkpoint() {
            tracing::warn!("checkpointing the state: {e}");
        }
        let _ = std::fs::remove_file(&self.socket_path);
        self.watch.stop()?;
        tracing::info!("stopped");
        Ok(())
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

/// The process whose launch a new task belongs to. A new thread's reported parent is the parent
/// of its whole process (the kernel gives threads their group leader's `real_parent`: for java
/// that is the shell), so a thread belongs to its own thread group; a new process to its parent.
fn creator_of(parent_tgid: u32, child_pid: u32, child_tgid: u32) -> u32 {
    if child_tgid != child_pid { child_tgid } else { parent_tgid }
}

#[cfg(test)]
mod fork_tests {
    use super::creator_of;

    #[test]
    fn threads_belong_to_their_process_and_processes_to_their_parent() {
        // A thread 501 of process 500, reported with the shell 100 as its parent.
        assert_eq!(creator_of(100, 501, 500), 500);
        // A child process 600 of 500.
        assert_eq!(creator_of(500, 600, 600), 500);
    }
}
