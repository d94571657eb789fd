//! `augur boot`: run early in the boot by `augur-boot.service`, it loads the merged plan of the
//! last boots phase by phase (the current phase and the next, at idle I/O priority) while it
//! records this boot system-wide, and saves the recording in the state when the boot has settled.
//! `augur mark PHASE` tells it the phase under inits other than systemd.
//!
//! It turns what the service manager and the kernel say into `augur-engine::boot` observations
//! and carries out its actions; what a phase is and when to stop are decided there.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use clap::Args;

use crate::error::{Error, Result};
use augur_core::model::boot::{BootPhase, BootPlan, BootSettings, BootTrace, PhaseStart, session_apps};
use augur_core::model::user::{ProcessUser, key_uid};
use augur_engine::boot::{BootAction, BootSequence};
use augur_engine::config::Config;
use augur_os::fetch::{self, CancelFlag, FetchOptions, FetchPlan, IoPriority, OrderPolicy, Prefetcher};
use augur_os::sense::boot_trace::BootRecorder;
use augur_os::sense::trace_session::PROFILE_PAGE_SIZE;
use augur_os::{init_handoff, service_manager};
use augur_store::boot_plan_file;
use augur_store::state::StateStore;

/// Arguments of `augur boot`.
#[derive(Debug, Args)]
pub struct BootArgs {
    /// Configuration file [default: /etc/augur/config.toml; missing there means defaults].
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// State database (overrides the configuration's `state_path`).
    #[arg(long, value_name = "PATH")]
    pub state: Option<PathBuf>,
    /// Replay the plan only; record nothing.
    #[arg(long)]
    pub no_record: bool,
    /// Record only; load nothing.
    #[arg(long)]
    pub no_replay: bool,
    /// The file `augur mark` writes phases to.
    #[arg(long, value_name = "PATH", default_value = service_manager::MARK_FILE)]
    pub marks: PathBuf,
    /// Started by `augur-init` before it executes this init: say when recording started (on
    /// standard output, which `augur-init` waits on) and follow that init's boot.
    #[arg(long, value_name = "INIT", hide = true)]
    pub before_init: Option<PathBuf>,
}

/// Arguments of `augur mark`.
#[derive(Debug, Args)]
pub struct MarkArgs {
    /// The phase the boot reached: sysinit, basic, multi-user, graphical or session.
    #[arg(value_name = "PHASE")]
    pub phase: String,
    /// The file `augur boot` reads phases from.
    #[arg(long, value_name = "PATH", default_value = service_manager::MARK_FILE)]
    pub marks: PathBuf,
}

/// How often the service manager is asked which targets are active.
const PHASE_POLL: Duration = Duration::from_millis(500);

/// The systemd targets that start each phase, in phase order.
fn target_phases() -> Vec<(BootPhase, &'static str)> {
    BootPhase::ALL.into_iter().filter_map(|p| p.systemd_target().map(|t| (p, t))).collect()
}

/// The phases the boot reached, by what the service manager and `augur mark` say, each with when
/// it began in microseconds since `origin_us` (monotonic; a phase that began before is at 0),
/// `now_us` for what says no time.
fn observed_phases(marks: &Path, systemd: bool, origin_us: u64, now_us: u64) -> Vec<PhaseStart> {
    let since = |mono: Option<u64>| mono.map_or(now_us, |t| t.saturating_sub(origin_us));
    let mut reached = Vec::new();
    if systemd && service_manager::systemd_booted() {
        let targets = target_phases();
        let names: Vec<&str> = targets.iter().map(|(_, t)| *t).collect();
        if let Some(entered) = service_manager::units_entered_us(&names) {
            for ((phase, _), at) in targets.iter().zip(entered) {
                if at.is_some() {
                    reached.push(PhaseStart { phase: *phase, at_us: since(at) });
                }
            }
        }
    }
    for mark in service_manager::marked_phases(marks) {
        if let Ok(phase) = mark.phase.parse::<BootPhase>() {
            reached.push(PhaseStart { phase, at_us: since(mark.at_us) });
        }
    }
    if service_manager::user_session_exists() {
        reached.push(PhaseStart { phase: BootPhase::Session, at_us: since(service_manager::first_login_us()) });
    }
    reached
}

/// A job for the loading thread.
enum Load {
    Plans(String, Vec<FetchPlan>),
    Done,
}

/// Loads what it is sent, one job after another, at idle I/O priority (only while the disk is
/// otherwise idle: the boot's own reads always go first), in physical order on rotational disks.
/// The loading thread: jobs go in, it answers the pages loaded and bytes read when it ends.
type Loader = (mpsc::Sender<Load>, thread::JoinHandle<(u64, u64)>);

fn spawn_loader(cancel: CancelFlag) -> Result<Loader> {
    let (tx, rx) = mpsc::channel::<Load>();
    let handle = thread::Builder::new()
        .name("augur-boot-load".into())
        .spawn(move || {
            let prefetcher =
                Prefetcher::new(FetchOptions { priority: IoPriority::Idle, order: OrderPolicy::Auto, ..FetchOptions::default() });
            let (mut pages, mut bytes) = (0u64, 0u64);
            while let Ok(Load::Plans(what, plans)) = rx.recv() {
                let (mut loaded, mut resident, mut read, mut ms) = (0, 0, 0, 0.0);
                for plan in &plans {
                    if cancel.is_cancelled() {
                        break;
                    }
                    let report = prefetcher.fetch(plan, &cancel);
                    loaded += report.pages.loaded;
                    resident += report.pages.already_resident;
                    read += report.bytes_read;
                    ms += report.elapsed_ms;
                }
                tracing::info!(
                    "boot: {what}: {loaded} pages loaded, {resident} already resident, {read} bytes read in {ms:.0} ms"
                );
                pages += loaded;
                bytes += read;
            }
            (pages, bytes)
        })
        .map_err(|e| Error::io("starting the boot loader thread", e))?;
    Ok((tx, handle))
}

/// The load plans of the session's usual applications, as the daemon learned them, each only of
/// files its user may read (as the daemon replays them).
fn session_plans(store: &StateStore, config: &Config) -> Vec<FetchPlan> {
    let apps = match store.apps() {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!("boot: cannot read the learned applications: {e}");
            return Vec::new();
        }
    };
    let settings = config.learn_settings();
    session_apps(&apps, config.boot.session_apps)
        .into_iter()
        .filter_map(|key| Some((key_uid(&key), store.load_app(&key).ok().flatten()?)))
        .map(|(uid, m)| (uid, m.replay_profile(&settings)))
        .filter(|(_, p)| !p.files.is_empty())
        .map(|(uid, p)| FetchPlan::from_profiles([&p], fetch::page_size()).for_user(ProcessUser::without_groups(uid)))
        .collect()
}

/// The plan to load: the plan file the last boot wrote beside the state, else (no plan file yet,
/// or a corrupt one) merged from the boots in the state, read without writing (the root may still
/// be read-only before the service manager runs).
fn load_plan(config: &Config, settings: &BootSettings) -> BootPlan {
    let path = boot_plan_file::path_beside(&config.daemon.state_path);
    match boot_plan_file::read(&path) {
        Ok(Some(plan)) => return plan,
        Ok(None) => {}
        Err(e) => tracing::warn!("boot: {e}; merging the stored boots instead"),
    }
    match augur_store::state::read_boot_history(&config.daemon.state_path) {
        Ok(history) => history.plan(settings),
        Err(e) => {
            tracing::warn!("boot: no plan to load: {e}");
            BootPlan { page_size: PROFILE_PAGE_SIZE, boots: 0, phases: Vec::new() }
        }
    }
}

/// Runs `augur boot`.
pub fn run(args: BootArgs) -> Result<ExitCode> {
    augur_os::privilege::require_root("augur boot")?;
    let mut config = crate::config_file::load(args.config.as_deref())?;
    if let Some(s) = args.state {
        config.daemon.state_path = s;
    }
    // One recorder per boot: the unit's, or the one `augur-init` started before the init.
    let _lock = match init_handoff::take_boot_lock() {
        Ok(Some(lock)) => Some(lock),
        Ok(None) => {
            tracing::info!("boot: another augur boot records this boot (started by augur-init); nothing to do");
            if args.before_init.is_some() {
                init_handoff::report_recording();
            }
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => {
            tracing::warn!("boot: cannot tell whether another augur boot runs ({e}); going on");
            None
        }
    };
    // Recording starts first, before the plan is read: every page the boot uses from here on
    // is in the trace.
    let mut recorder = if args.no_record {
        None
    } else {
        match BootRecorder::start() {
            Ok(r) => Some(r),
            Err(e) => {
                // Replay still helps this boot; the next one has no new trace to learn from.
                tracing::warn!("boot: not recording this boot: {e}");
                None
            }
        }
    };
    // Times count from the start of recording, on the monotonic clock the service manager's
    // timestamps are on.
    let origin_us = recorder.as_ref().map_or_else(augur_os::sense::monotonic_us, BootRecorder::started_at_us);
    let now_us = || augur_os::sense::monotonic_us().saturating_sub(origin_us);
    let settings = config.boot_settings(PROFILE_PAGE_SIZE);
    let plan = load_plan(&config, &settings);
    tracing::info!(
        "boot: {}plan of {} boots: {} pages in {} files over {} phases ({})",
        if args.before_init.is_some() { "started before the init; " } else { "" },
        plan.boots,
        plan.page_count(),
        plan.file_count(),
        plan.phases.len(),
        plan.phases.iter().map(|p| format!("{} {}", p.phase, p.page_count())).collect::<Vec<_>>().join(", ")
    );
    // The state database is opened when it is needed (the session's applications, saving): not
    // at the start, where its reads would compete with the boot's and the root may be read-only.
    let mut store: Option<StateStore> = None;
    let signals = augur_os::signals::SignalPipe::install(augur_os::signals::SecondSignal::Deliver)?;
    let cancel = CancelFlag::new();
    let (loader, loader_thread) = spawn_loader(cancel.clone())?;
    // Before the init runs, what it is says whether systemd will boot.
    let systemd = service_manager::systemd_booted() || args.before_init.as_deref().is_some_and(init_handoff::init_is_systemd);
    let last_target = if systemd {
        service_manager::default_target().and_then(|t| t.parse::<BootPhase>().ok()).unwrap_or(BootPhase::MultiUser)
    } else {
        BootPhase::Session
    };
    let mut sequence = BootSequence::new(&config.boot, last_target);
    let mut act = |actions: Vec<BootAction>| {
        for action in actions {
            let job = match action {
                _ if args.no_replay => None,
                BootAction::Replay(phase) => plan
                    .phase_profile(phase)
                    .map(|p| Load::Plans(format!("phase {phase}"), vec![FetchPlan::from_profiles([&p], fetch::page_size())])),
                BootAction::PrefetchSessionApps => {
                    let plans = open_store(&mut store, &config).map(|s| session_plans(s, &config)).unwrap_or_default();
                    (!plans.is_empty()).then(|| Load::Plans(format!("{} session applications", plans.len()), plans))
                }
            };
            if let Some(job) = job {
                let _ = loader.send(job);
            }
        }
    };
    act(sequence.start());
    if args.before_init.is_some() {
        init_handoff::report_recording();
    }
    let mut interrupted = false;
    let mut next_look = std::time::Instant::now();
    // Started before systemd, its standard error is the console, which systemd hangs up: the
    // journal takes its lines once journald listens.
    let mut to_journal = args.before_init.is_some();
    loop {
        if to_journal && service_manager::systemd_booted() {
            match service_manager::stderr_to_journal("augur-boot") {
                Ok(true) => {
                    to_journal = false;
                    tracing::info!("boot: started before the init; its log goes to the journal from here");
                }
                Ok(false) => {}
                Err(e) => {
                    to_journal = false;
                    tracing::warn!("boot: cannot log to the journal: {e}");
                }
            }
        }
        // The service manager is asked at once, then at most twice a second (events wake the
        // loop often during a boot); what it says carries when each phase began.
        if std::time::Instant::now() >= next_look {
            next_look = std::time::Instant::now() + PHASE_POLL;
            let now = now_us();
            act(sequence.observe(&observed_phases(&args.marks, systemd, origin_us, now), now));
        }
        match recorder.as_mut() {
            Some(r) => r.poll(PHASE_POLL)?,
            None => thread::sleep(PHASE_POLL),
        }
        // SIGHUP (a terminal hung up: systemd, becoming PID 1, lets go of the console) is no
        // reason to stop recording.
        if signals.take().into_iter().any(augur_os::signals::is_terminating) {
            interrupted = true;
            break;
        }
        if sequence.done(now_us()) {
            break;
        }
    }
    let _ = loader.send(Load::Done);
    cancel.cancel();
    let (pages, bytes) = loader_thread.join().unwrap_or_default();
    tracing::info!(
        "boot: loaded {pages} pages ({bytes} bytes read); reached phase {} ({})",
        sequence.phase(),
        sequence
            .phase_starts()
            .iter()
            .map(|p| format!("{} at {:.2} s", p.phase, p.at_us as f64 / 1e6))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some(r) = recorder {
        let recording = r.finish()?;
        let trace = BootTrace::from_profile(&recording.profile, sequence.phase_starts(), recording.profile.recorded_at);
        if interrupted && sequence.phase() < BootPhase::MultiUser {
            tracing::warn!("boot: stopped in phase {} by a signal; this partial boot is not kept", sequence.phase());
        } else {
            let store = match store.as_mut() {
                Some(s) => s,
                None => store.insert(StateStore::open(&config.daemon.state_path)?.0),
            };
            store.add_boot_trace(&trace, config.boot.keep_boots)?;
            // The next boot loads this plan without reading the database.
            let next = store.boot_history()?.plan(&settings);
            let path = boot_plan_file::path_beside(&config.daemon.state_path);
            if let Err(e) = boot_plan_file::write(&path, &next) {
                tracing::warn!("boot: {e}; the next boot merges the stored boots itself");
            }
            tracing::info!(
                "boot: recorded {} pages of {} files ({} page events, {} lost)",
                trace.page_count(),
                trace.files.len(),
                recording.page_events,
                recording.lost_events
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The state, opened at the first need; `None` (and a warning) when it cannot be.
fn open_store<'a>(store: &'a mut Option<StateStore>, config: &Config) -> Option<&'a StateStore> {
    if store.is_none() {
        match StateStore::open(&config.daemon.state_path) {
            Ok((s, _)) => *store = Some(s),
            Err(e) => tracing::warn!("boot: cannot open the state: {e}"),
        }
    }
    store.as_ref()
}

/// Runs `augur mark`.
pub fn run_mark(args: MarkArgs) -> Result<ExitCode> {
    let phase: BootPhase = args.phase.parse().map_err(|e: augur_core::model::boot::UnknownPhase| Error::Usage(e.to_string()))?;
    service_manager::mark_phase(&args.marks, phase.name(), augur_os::sense::monotonic_us())
        .map_err(|e| Error::io_at(&args.marks, "marking the boot phase", e))?;
    Ok(ExitCode::SUCCESS)
}
