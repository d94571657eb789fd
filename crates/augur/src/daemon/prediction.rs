//! The daemon's prediction step (`[predict] enabled = true`): on each launch and on the slow
//! interval it asks the configured predictor which applications come next, computes the memory
//! budget from /proc/meminfo and /proc/pressure/memory, lets the planner choose the page ranges
//! of the learned profiles to keep resident, and hands them to a fetch worker that loads only the
//! missing pages.
//!
//! Memory pressure stops fetching at once: the event loop watches a PSI trigger (`some STALL
//! WINDOW` on /proc/pressure/memory, registered whenever anything fetches); when it fires, the
//! running fetch is cancelled (between 2 MiB chunks) and no new one starts for
//! [`PRESSURE_HOLD_MS`]. Rounds also stop while `some avg10` is at or above
//! `pressure_stop_percent`. Where the loop watches no trigger (no PSI, an old kernel, injected
//! sources) the fetch worker reads the pressure file between chunks instead, every
//! [`PRESSURE_POLL`].
//!
//! It owns the wiring only: prediction is `model::predict` (the configured predictor believed as
//! far as its recent predictions came true, `ConfidentPredictor`); the round's decision (pressure
//! stop, budget, the at most 32 likeliest candidates, the plan and its cost model) is
//! `augur_core::plan::round`, the very function the simulator runs, fed here with /proc/meminfo
//! (the budget, and MemFree as the memory a prefetch fills without pushing anything out),
//! /proc/vmstat (the recent refault share of evicted file pages), /proc/pressure/memory and the
//! learned profiles from the state; the loading is `fetch`. The predictor observes each launch and the exit of the same instance (the root
//! process's pid, see [`augur_engine::running`]), so preload's running-state chain sees real pairs.
//!
//! On battery and on a non-rotational disk, where a miss costs little, it prefetches less: the
//! round's `read_cost` is scaled by [`augur_engine::read_cost`]'s rule, fed with the power source
//! (read each round) and the disk of `/usr` (read once) from `augur-os::machine`.
//!
//! A candidate that learned nothing of its own (a launcher script such as `/usr/bin/libreoffice`,
//! `oosplash`) is planned with the footprint of the program its launches lead to
//! (`augur_core::model::launch_chain`: its exec, or the program it started at once), so that a
//! predicted Writer start loads `soffice.bin`'s pages, not nothing.
//!
//! When free memory (MemFree) beyond a reserve is larger than the prediction budget, the
//! free-memory tier (`augur_core::plan::fill`, `[predict] fill_free_memory`) adds the learned
//! applications the prediction did not plan to the same fetch job, after the prediction's own
//! plans: likeliest then most recently launched first, each fetched with `keep_free_bytes` set to
//! the reserve, so the fetcher re-reads MemFree before every chunk and stops at the reserve (it
//! never makes the kernel push anything out for them). The tier's plan is remade at most every
//! [`FILL_REFRESH_MS`] (and at start); in between the same plan is sent again with each round's
//! fetch until one fetch went through it (a launch cancels the fetch), then not until remade. Its loads are counted apart from the prediction's
//! ledger (`augur status`'s free-memory line).
//!
//! Once the predictor is proven (its skill judged), each prediction plan's fetch also keeps the
//! plan's resident pages, at most every [`KEEP_GAP_MS`] per application ([`KeepSchedule`]):
//! it marks them used once more, so that the kernel moves what was prefetched to its active list
//! and ages it out after what was used once, not from the moment it was read. The free-memory
//! tier's pages are never kept: they fill memory that held nothing, and give way to anything.
//!
//! A round whose fetch would repeat the last one sent (the same plans) while no file page left
//! the page cache since sends none, so the worker is not woken to survey the same resident files
//! at every launch and exit ([`REPEAT_FETCH_MS`]).
//!
//! What prefetching bought over the last day ([`PrefetchLedger`], shown by `augur status`) is
//! counted from what was observed, never assumed ([`ObservedPrefetch`]): the pages each fetch
//! loaded per application (its report, verified with `mincore`), and at the application's next
//! launch the pages its exec-time replay found resident.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, mpsc};

use super::control::FillStatus;
use super::run::{PlanContext, PlanStep, PlanTrigger};
use crate::error::{Error, Result};
use augur_core::model::launch_chain::LaunchChains;
use augur_core::model::predict::{self, ConfidenceConfig, ConfidentPredictor, LocalTime, Observation, Predictor, Transition};
use augur_core::model::profile::{FileProfile, LaunchProfile, UsedRange};
use augur_core::model::record::ActivityRecord;
use augur_core::model::user::{ProcessUser, key_uid};
use augur_core::plan::{
    AppFootprint, EvictionCounters, FillCandidate, FillPlanner, FillReason, FillRoom, KEEP_GAP_MS, LaunchFrequency,
    LearnedFootprint, LedgerTotals, MAX_FILL_APPS, MemoryBudget, MemoryHeadroom, MemoryPressure, MemorySnapshot, Plan,
    PlanningRound, PrefetchLedger, RangeUse, RefaultMeter, RoundConfig, RoundOutcome, RoundPlan, fill_order,
};
use augur_engine::config::Config;
use augur_engine::read_cost::{MachineFacts, ReadCostRule, read_cost_rule};
use augur_os::fetch::IoPriority;
use augur_os::fetch::prefetcher::{CancelFlag, FetchOptions, Prefetcher};
use augur_os::fetch::request::FetchPlan;
use augur_os::loop_io;
use augur_os::machine::{self, PowerSource};

/// After a pressure trigger, no fetch starts for this long: the engine's hold, which exec-time
/// replay keeps too.
pub const PRESSURE_HOLD_MS: u64 = augur_engine::daemon::PRESSURE_HOLD_NS / 1_000_000;

/// Reads the prediction fetch keeps queued ahead of the chunk it waits for. A cancelled fetch stops
/// at the next chunk, after what is queued: 8 MiB bounds that to half a second on a 16 MiB/s disk.
pub const FETCH_WINDOW_BYTES: u64 = 8 << 20;

/// Full rounds (state reads, planning, a new fetch) run at most this often; launches and exits
/// in between are observed at once and planned for in one round when the gap is over. A parallel
/// build starts hundreds of processes a second.
pub const MIN_ROUND_GAP_MS: u64 = 1000;

/// How often the fetch worker reads the pressure file while fetching when no trigger is watched.
pub const PRESSURE_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// The free-memory tier's plan is remade at most this often (and at start); in between the same
/// plan is sent again with each round's fetch (its resident pages are skipped).
pub const FILL_REFRESH_MS: u64 = augur_core::plan::FILL_REFRESH_MS;

/// A round whose fetch would repeat the last one sent (the same plans) while no page left the
/// page cache since sends none, for at most this long after that one was sent: the running fetch
/// goes on, or the finished one's pages are still resident. Pages dropped on purpose
/// (`POSIX_FADV_DONTNEED`, truncation) show in no counter: they are loaded again after this.
pub const REPEAT_FETCH_MS: u64 = FILL_REFRESH_MS;

/// What a fetch job asked for: per plan its application, files and pages, and where the
/// free-memory tier's plans begin.
#[derive(Clone, Debug, PartialEq, Eq)]
struct JobShape {
    plans: Vec<(String, usize, u64)>,
    fill_from: usize,
}

impl JobShape {
    fn of(plans: &[(String, FetchPlan)], fill_from: usize) -> JobShape {
        JobShape { plans: plans.iter().map(|(app, p)| (app.clone(), p.files().len(), p.page_count())).collect(), fill_from }
    }
}

/// The last fetch job sent: its shape, the page-cache drop count (`/proc/vmstat`: file pages
/// reclaimed, `drop_caches` writes) when it was sent, and when (wall-clock ms).
#[derive(Clone, Debug)]
struct SentJob {
    shape: JobShape,
    drops: Option<u64>,
    sent_ms: u64,
}

impl SentJob {
    /// Whether a job of `shape` at `now_ms`, the drop count being `drops`, would repeat this one
    /// (see [`REPEAT_FETCH_MS`]); an unreadable count never does.
    fn repeated_by(&self, shape: &JobShape, drops: Option<u64>, now_ms: u64) -> bool {
        self.shape == *shape
            && drops.is_some()
            && self.drops == drops
            && now_ms >= self.sent_ms
            && now_ms < self.sent_ms.saturating_add(REPEAT_FETCH_MS)
    }
}

struct FetchJob {
    /// One plan per application, the likeliest first; from `fill_from` on, the free-memory
    /// tier's.
    plans: Vec<(String, FetchPlan)>,
    /// Index of the first plan of the free-memory tier (`plans.len()` when there is none).
    fill_from: usize,
    /// Per plan, whether its resident pages are kept ([`KeepSchedule`]).
    keep: Vec<bool>,
    /// Bytes of MemFree the tier's plans leave free (its reserve).
    keep_free_bytes: u64,
    /// Raised by the worker when it went through the tier's plans to their end (or to the
    /// reserve): they are not sent again until the plan is remade.
    fill_done: CancelFlag,
    cancel: CancelFlag,
    /// Set (before `cancel`) when the fetch is stopped for memory pressure rather than replaced.
    pressure: CancelFlag,
    /// Set when no trigger is watched: the worker checks pressure itself while fetching.
    watch: Option<PressureWatch>,
    /// Raised by the worker once it is through with the job (to its end, or stopped).
    finished: CancelFlag,
}

/// What one application's fetch did, in pages, as its report says (sent back to the step).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppFetched {
    /// The application.
    pub app: String,
    /// Pages planned for it.
    pub wanted: u64,
    /// Of those, pages found resident already.
    pub resident: u64,
    /// Pages the fetch loaded.
    pub loaded: u64,
    /// Loaded by the free-memory tier (not a prediction: not in the prediction's ledger).
    pub fill: bool,
}

/// Prefetched pages per application followed until they are used or found gone, into a
/// [`PrefetchLedger`]. Pure: the step hands it fetch reports and replay reports with the time.
///
/// - A fetch that loaded `loaded` pages for an application adds them to its pages prefetched and
///   not yet used (and to the bytes prefetched); pages of those a later fetch for the same
///   application had to load again were pushed out unused: wasted.
/// - At the application's launch its exec-time replay reports how many of its learned pages it
///   found resident: of the pages prefetched and not yet used, that many at most were used, the
///   rest were pushed out before the launch: wasted. The launch was predicted when a fetch had
///   planned pages for it, and they were loaded in time when the replay found at least as many
///   resident as were planned.
#[derive(Debug, Default)]
pub struct ObservedPrefetch {
    /// Per application: (pages planned by its latest fetch, pages prefetched not yet used).
    outstanding: BTreeMap<String, (u64, u64)>,
    ledger: PrefetchLedger,
}

impl ObservedPrefetch {
    /// A fetch for `f.app` ended at `at_ms`, pages of `page_size` bytes.
    pub fn fetched(&mut self, at_ms: u64, f: &AppFetched, page_size: u64) {
        let (planned, unused) = self.outstanding.entry(f.app.clone()).or_default();
        let again = (*unused).min(f.loaded);
        *planned = f.wanted;
        *unused = *unused - again + f.loaded;
        self.ledger.prefetched(at_ms, f.loaded * page_size);
        self.ledger.wasted(at_ms, again * page_size);
    }

    /// `app` launched and its exec-time replay found `resident` of its learned pages resident.
    pub fn launched(&mut self, at_ms: u64, app: &str, resident: u64, page_size: u64) {
        let Some((planned, unused)) = self.outstanding.remove(app) else {
            self.ledger.launch(at_ms, false, false);
            return;
        };
        let used = unused.min(resident);
        self.ledger.launch(at_ms, planned > 0, planned > 0 && resident >= planned);
        self.ledger.used(at_ms, used * page_size);
        self.ledger.wasted(at_ms, (unused - used) * page_size);
    }

    /// The last day's counts up to `now_ms`.
    pub fn last_day(&self, now_ms: u64) -> LedgerTotals {
        self.ledger.last_day(now_ms)
    }
}

/// Pressure checked by reading the PSI file (the fallback when no trigger is watched).
#[derive(Clone, Debug, PartialEq)]
struct PressureWatch {
    path: PathBuf,
    stop_percent: f64,
}

impl PressureWatch {
    fn high(&self) -> bool {
        std::fs::read_to_string(&self.path)
            .ok()
            .as_deref()
            .and_then(MemoryPressure::from_psi)
            .is_some_and(|p| p.some_avg10 >= self.stop_percent)
    }
}

/// Runs one fetch; with `watch`, a companion thread reads the pressure file every
/// [`PRESSURE_POLL`] and cancels the fetch when pressure is high.
/// With `keep_free_bytes` above 0 the fetch fills free memory only (the free-memory tier).
fn fetch_watched(
    plan: &FetchPlan,
    cancel: &CancelFlag,
    pressure: &CancelFlag,
    watch: Option<&PressureWatch>,
    keep_free_bytes: u64,
    keep_resident: bool,
) -> augur_os::fetch::FetchReport {
    let fetcher = Prefetcher::new(FetchOptions {
        priority: IoPriority::Idle,
        window_bytes: FETCH_WINDOW_BYTES,
        // A fetch for later waits while anything else reads: it must not slow work happening now.
        yield_to_foreground: true,
        keep_free_bytes,
        keep_resident,
        ..FetchOptions::default()
    });
    let Some(w) = watch else { return fetcher.fetch(plan, cancel) };
    let done = CancelFlag::new();
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.is_cancelled() && !cancel.is_cancelled() {
                if w.high() {
                    tracing::info!("memory pressure at or above {} % while fetching: stopping", w.stop_percent);
                    pressure.cancel();
                    cancel.cancel();
                    break;
                }
                // Woken at once when the fetch ends, instead of keeping it waiting for the join.
                done.wait_timeout(PRESSURE_POLL);
            }
        });
        let report = fetcher.fetch(plan, cancel);
        done.cancel();
        report
    })
}

/// The prediction step the daemon builds with its [`super::run::PlanStepFactory`].
pub struct PredictionStep {
    predictor: Box<dyn Predictor>,
    jobs: Option<mpsc::Sender<FetchJob>>,
    worker: Option<std::thread::JoinHandle<()>>,
    current: CancelFlag,
    /// Set when `current` is stopped for memory pressure.
    current_pressure: CancelFlag,
    /// Raised once the worker is through with the job `current` stops.
    current_finished: CancelFlag,
    /// What the last round decided, for logs: (budget bytes, planned bytes).
    last: Option<(u64, u64)>,
    sources: MemorySources,
    /// Fetch jobs handed to the worker (for tests and status).
    jobs_sent: u64,
    /// Planning rounds that decided a plan (for `augur status`).
    rounds_planned: u64,
    /// Whether the event loop watches the kernel's PSI trigger (else the worker polls).
    trigger_watched: bool,
    /// No fetch starts before this wall-clock time (ms), after a pressure trigger.
    hold_until_ms: Option<u64>,
    /// When the last full round ran (wall-clock ms).
    last_round_ms: Option<u64>,
    /// A round was put off (asked for sooner than [`MIN_ROUND_GAP_MS`] after the last, during a
    /// start, or while pressure holds fetching off): it is owed in this many milliseconds.
    owed_in_ms: Option<u64>,
    /// The recent refault share, from /proc/vmstat read at each round.
    refaults: RefaultMeter,
    /// What each application's fetch did, from the worker.
    fetched: mpsc::Receiver<AppFetched>,
    /// What prefetching bought, as observed.
    observed: ObservedPrefetch,
    /// The disk the applications live on (`/usr`'s): name and whether it is rotational.
    disk: Option<(String, bool)>,
    /// The read-cost rule of the latest round.
    rule: Option<ReadCostRule>,
    /// The free-memory tier.
    fill: FillTier,
    /// Which program each launch leads to (a launcher script to its application).
    chains: LaunchChains,
    /// The last fetch job sent (a round that would repeat it sends none).
    sent: Option<SentJob>,
    /// When each planned application's resident pages were last kept.
    keeps: KeepSchedule,
    /// The footprints of the last round's candidates.
    footprints: FootprintCache,
}

/// When the prediction's plans keep their resident pages ([`FetchOptions::keep_resident`]): once
/// the predictor is proven ([`Predictor::proven`]), each application's at most every
/// [`KEEP_GAP_MS`]; never the free-memory tier's, which only fills memory that holds nothing.
#[derive(Debug, Default)]
struct KeepSchedule {
    /// Planned applications and when their pages were last kept (wall-clock ms).
    kept_ms: BTreeMap<String, u64>,
}

impl KeepSchedule {
    /// Per plan of a job whose prediction plans are `apps[..fill_from]`, whether it keeps, and
    /// notes those that do as kept at `now_ms` (when the job is sent: a job replaced before its
    /// fetch reached an application leaves that one unkept until the gap ends). Applications no
    /// longer planned are forgotten: a planned one again is kept at once.
    fn due(&mut self, apps: &[&str], fill_from: usize, proven: bool, now_ms: u64) -> Vec<bool> {
        let predicted = &apps[..fill_from.min(apps.len())];
        self.kept_ms.retain(|app, _| predicted.contains(&app.as_str()));
        apps.iter()
            .enumerate()
            .map(|(i, app)| {
                let due = i < fill_from
                    && proven
                    && self.kept_ms.get(*app).is_none_or(|&k| now_ms >= k.saturating_add(KEEP_GAP_MS) || now_ms < k);
                if due {
                    self.kept_ms.insert(app.to_string(), now_ms);
                }
                due
            })
            .collect()
    }
}

/// The free-memory tier's state between rounds.
#[derive(Default)]
struct FillTier {
    /// Its room at the latest round, and why.
    room: Option<FillRoom>,
    /// Its plan (one fetch plan per application) and when it was made (wall-clock ms).
    plans: Vec<(String, FetchPlan)>,
    made_ms: Option<u64>,
    /// Bytes of that plan.
    planned_bytes: u64,
    /// Raised once a fetch went through that plan: it is not sent again until remade.
    done: CancelFlag,
    /// Pages it loaded since the step was built.
    loaded_pages: u64,
    /// How often each application was launched lately: the tier's order.
    frequency: LaunchFrequency,
}

impl PredictionStep {
    /// A step with the configured predictor and its fetch worker.
    pub fn new(config: &Config) -> Result<PredictionStep> {
        let predictor = predict::by_name(&config.predict.predictor)
            .ok_or_else(|| Error::UnknownPredictor(config.predict.predictor.clone()))?;
        // Believed only as far as its recent predictions came true (docs/predictors.md).
        let predictor: Box<dyn Predictor> = Box::new(ConfidentPredictor::new(predictor, ConfidenceConfig::default()));
        let (tx, rx) = mpsc::channel::<FetchJob>();
        let (fetched_tx, fetched) = mpsc::channel::<AppFetched>();
        let worker = std::thread::Builder::new()
            .name("augur-predict".into())
            .spawn(move || {
                // Fetching for later must not take CPU from what runs now (a build on every
                // core): this thread does nothing else.
                if let Err(e) = augur_os::fetch::priority::lowest_cpu_priority_for_this_thread() {
                    tracing::debug!("prediction fetches keep the daemon's CPU priority: {e}");
                }
                while let Ok(mut job) = rx.recv() {
                    // Only the newest plan matters.
                    while let Ok(newer) = rx.try_recv() {
                        job = newer;
                    }
                    if job.cancel.is_cancelled() {
                        job.finished.cancel();
                        // Stopped before it started (the fetch it replaced has just returned).
                        if job.pressure.is_cancelled() {
                            tracing::info!(
                                "prediction fetch stopped by memory pressure at monotonic {} ns: before it started",
                                loop_io::monotonic_ns()
                            );
                        }
                        continue;
                    }
                    let mut pages = augur_os::fetch::PageCounts::default();
                    let mut cancelled = false;
                    let mut waited_ms = 0.0;
                    let mut kept = 0;
                    for (i, (app, plan)) in job.plans.iter().enumerate() {
                        let fill = i >= job.fill_from;
                        let keep_free = if fill { job.keep_free_bytes.max(1) } else { 0 };
                        let keep = job.keep.get(i).copied().unwrap_or(false);
                        let report = fetch_watched(plan, &job.cancel, &job.pressure, job.watch.as_ref(), keep_free, keep);
                        kept += report.kept_pages;
                        let _ = fetched_tx.send(AppFetched {
                            app: app.clone(),
                            wanted: report.pages.wanted,
                            resident: report.pages.already_resident,
                            loaded: report.pages.loaded,
                            fill,
                        });
                        waited_ms += report.foreground_wait_ms;
                        pages.wanted += report.pages.wanted;
                        pages.already_resident += report.pages.already_resident;
                        pages.loaded += report.pages.loaded;
                        pages.not_attempted += report.pages.not_attempted;
                        if report.stopped_at_free_reserve {
                            // Free memory is down to the reserve: the tier stops there.
                            tracing::info!(
                                "free-memory tier stopped at its reserve ({} MiB of MemFree kept) while loading {app}",
                                job.keep_free_bytes >> 20
                            );
                            break;
                        }
                        // A fetch cancelled before its survey ended reports its pages as not
                        // attempted without saying it was cancelled: the flag is the truth.
                        if report.cancelled || job.cancel.is_cancelled() {
                            cancelled = true;
                            break;
                        }
                    }
                    if !cancelled && !job.cancel.is_cancelled() && job.fill_from < job.plans.len() {
                        job.fill_done.cancel();
                    }
                    job.finished.cancel();
                    if cancelled && job.pressure.is_cancelled() {
                        tracing::info!(
                            "prediction fetch stopped by memory pressure at monotonic {} ns: {} pages loaded, {} not attempted",
                            loop_io::monotonic_ns(),
                            pages.loaded,
                            pages.not_attempted
                        );
                    } else if cancelled {
                        tracing::debug!("prediction fetch replaced by a newer plan after {} pages", pages.loaded);
                    }
                    tracing::debug!(
                        "prediction fetch: {} pages wanted, {} already resident ({kept} kept), {} loaded; waited {:.0} ms for others' reads",
                        pages.wanted,
                        pages.already_resident,
                        pages.loaded,
                        waited_ms
                    );
                }
            })
            .map_err(|e| Error::io("starting the prediction worker", e))?;
        let sources = MemorySources::default();
        Ok(PredictionStep {
            predictor,
            jobs: Some(tx),
            worker: Some(worker),
            current: CancelFlag::new(),
            current_pressure: CancelFlag::new(),
            current_finished: CancelFlag::new(),
            last: None,
            sources,
            jobs_sent: 0,
            rounds_planned: 0,
            trigger_watched: false,
            hold_until_ms: None,
            last_round_ms: None,
            owed_in_ms: None,
            refaults: RefaultMeter::default(),
            fetched,
            observed: ObservedPrefetch::default(),
            disk: machine::disk_of(std::path::Path::new("/usr")).map(|d| (d.name, d.rotational)),
            rule: None,
            fill: FillTier::default(),
            chains: LaunchChains::new(),
            footprints: FootprintCache::default(),
            sent: None,
            keeps: KeepSchedule::default(),
        })
    }

    /// The same step reading its memory figures from `sources`. Until the loop says it watches
    /// the kernel's trigger, the fetch worker checks `sources.pressure` itself while fetching.
    pub fn with_sources(mut self, sources: MemorySources) -> Self {
        self.sources = sources;
        self
    }

    /// True when the most recent fetch has been told to stop.
    pub fn fetching_stopped(&self) -> bool {
        self.current.is_cancelled()
    }

    /// Takes in what the fetch worker reported so far.
    fn take_fetched(&mut self) {
        let page = augur_os::fetch::page_size();
        while let Ok(f) = self.fetched.try_recv() {
            if f.fill {
                self.fill.loaded_pages += f.loaded;
            } else {
                self.observed.fetched(loop_io::unix_ms(), &f, page);
            }
        }
    }

    /// The free-memory tier's part of a round: its room (MemFree beyond the reserve and beyond
    /// what the prediction `planned`; none on battery or with a fixed budget) and its fetch
    /// plans, the learned applications in [`fill_order`] (the most often launched lately first)
    /// less what the prediction planned. Remade at start and at most every [`FILL_REFRESH_MS`];
    /// in between the last plans are sent again.
    fn fill_round(
        &mut self,
        ctx: &PlanContext<'_>,
        trigger: &PlanTrigger,
        memory: Option<MemorySnapshot>,
        budget: MemoryBudget,
        planned: &Plan,
        on_battery: bool,
    ) -> Result<Vec<(String, FetchPlan)>> {
        let config = ctx.config.predict.fill_config();
        let room = match memory {
            _ if !config.enabled => FillRoom::none(FillReason::Disabled),
            _ if on_battery => FillRoom::none(FillReason::OnBattery),
            _ if ctx.config.predict.budget_bytes > 0 => FillRoom::none(FillReason::FixedBudget),
            None => FillRoom::none(FillReason::NoMemoryFigures),
            Some(m) => FillRoom::of(&m, planned.bytes, &config),
        };
        if self.fill.room.as_ref().is_none_or(|r| r.reason != room.reason) {
            if room.reserve_bytes == 0 {
                tracing::info!("free-memory tier: {}", room.reason.describe());
            } else {
                tracing::info!(
                    "free-memory tier: {} (MemFree {} MiB, reserve {} MiB, prediction budget {} MiB)",
                    room.reason.describe(),
                    room.free_bytes >> 20,
                    room.reserve_bytes >> 20,
                    budget.bytes >> 20
                );
            }
        }
        let active = room.room_bytes > 0;
        self.fill.room = Some(room.clone());
        if !active {
            self.fill.plans.clear();
            self.fill.planned_bytes = 0;
            self.fill.made_ms = None;
            return Ok(Vec::new());
        }
        let fresh = self.fill.made_ms.is_some_and(|t| ctx.now_ms < t.saturating_add(FILL_REFRESH_MS));
        if fresh && !matches!(trigger, PlanTrigger::Start) {
            // Loaded already (or loaded to the reserve): resending it would only survey its files.
            return Ok(if self.fill.done.is_cancelled() { Vec::new() } else { self.fill.plans.clone() });
        }
        let candidates: Vec<FillCandidate> = ctx
            .state
            .apps()?
            .into_iter()
            .filter(|a| a.replay_pages > 0)
            .map(|a| FillCandidate {
                frequency: self.fill.frequency.of(&a.key, ctx.local_ms),
                last_launch_ms: a.last_launch_ms,
                app: a.key,
            })
            .collect();
        // One application at a time: its model, profile and footprint are dropped before the
        // next is read, so a fill of hundreds of applications holds only their fetch plans.
        let settings = ctx.config.learn_settings();
        let page = augur_os::fetch::page_size();
        // Padded as the exec-time replay pads them (where memory is plentiful, which the tier's
        // room already implies): what the launch's replay would read is then resident already.
        let pad = ctx.config.launch.replay_pad_for(memory.as_ref().map(|m| m.available));
        let whole_max = ctx.config.predict.fill_whole_files_max_mib.saturating_mul(1 << 20);
        let mut planner = FillPlanner::new(planned, room.room_bytes, page);
        let mut fetch: Vec<(String, FetchPlan)> = Vec::new();
        // Each filled application's whole files (a range per file), for the second pass: the
        // learned profile itself is dropped with the application.
        let mut whole: Vec<(String, LaunchProfile)> = Vec::new();
        for c in fill_order(candidates, MAX_FILL_APPS) {
            if planner.full() {
                break;
            }
            // Every learned application in turn: read through the cache, not kept in it.
            let Some(learned) = ctx.state.replay_profile_transient(&c.app, &settings)? else { continue };
            let profile = if pad > 0 { Arc::new(learned.padded(pad)) } else { Arc::clone(&learned) };
            if profile.files.is_empty() || profile.page_size != page {
                continue;
            }
            let part = planner.take(&footprint_of(&c.app, &profile));
            let one = BTreeMap::from([(c.app.clone(), profile)]);
            fetch.extend(fetch_plans_of(&part, &one, page));
            if whole_max > 0 {
                whole.push((c.app, learned.whole_files(whole_max)));
            }
        }
        // Then, in the same order, the rest of their files (what a program reads ahead of itself
        // leaves no access event): only after every application's learned pages, so it never
        // takes the room of a learned page. The planner holds no page twice.
        for (app, profile) in whole {
            if planner.full() {
                break;
            }
            let part = planner.take(&footprint_of(&app, &profile));
            if part.ranges.is_empty() {
                continue;
            }
            let one = BTreeMap::from([(app, Arc::new(profile))]);
            fetch.extend(fetch_plans_of(&part, &one, page));
        }
        let plan_bytes = planner.bytes();
        tracing::debug!(
            "free-memory tier: {} MiB over {} applications into {} MiB of room",
            plan_bytes >> 20,
            fetch.len(),
            room.room_bytes >> 20
        );
        self.fill.plans = fetch.clone();
        self.fill.done = CancelFlag::new();
        self.fill.planned_bytes = plan_bytes;
        self.fill.made_ms = Some(ctx.now_ms);
        Ok(fetch)
    }

    /// Stops the running fetch because of memory pressure.
    fn stop_fetching(&mut self) {
        self.current_pressure.cancel();
        self.current.cancel();
    }
}

impl Drop for PredictionStep {
    fn drop(&mut self) {
        self.current.cancel();
        self.jobs = None;
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

/// Where the memory figures are read (the kernel's files; tests inject their own).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemorySources {
    /// /proc/meminfo.
    pub meminfo: PathBuf,
    /// /proc/pressure/memory (absent on kernels without PSI: no back-off then).
    pub pressure: PathBuf,
    /// /proc/vmstat (file-page evictions and refaults; absent: nothing pushed out counts as
    /// needed beyond `[predict] evict_cost`).
    pub vmstat: PathBuf,
    /// /sys/class/power_supply (absent: mains power).
    pub power_supply: PathBuf,
    /// The process whose memory cgroups bound the memory the daemon's loads may fill: the
    /// daemon's own, to which the pages it loads are charged (`None`: no cgroup is read).
    pub charged_to: Option<u32>,
}

impl Default for MemorySources {
    fn default() -> Self {
        MemorySources {
            meminfo: "/proc/meminfo".into(),
            pressure: "/proc/pressure/memory".into(),
            vmstat: "/proc/vmstat".into(),
            power_supply: "/sys/class/power_supply".into(),
            charged_to: Some(std::process::id()),
        }
    }
}

impl MemorySources {
    fn vmstat(&self) -> Option<String> {
        std::fs::read_to_string(&self.vmstat).ok()
    }

    fn pressure(&self) -> Option<MemoryPressure> {
        std::fs::read_to_string(&self.pressure).ok().as_deref().and_then(MemoryPressure::from_psi)
    }

    /// /proc/meminfo within the room of the daemon's memory cgroups ([`MemorySnapshot::within_room`]).
    fn memory(&self) -> Option<MemorySnapshot> {
        let machine = std::fs::read_to_string(&self.meminfo).ok().as_deref().and_then(MemorySnapshot::from_meminfo)?;
        Some(machine.within_room(self.charged_to.and_then(augur_os::sense::procfs::memory_cgroup_headroom)))
    }
}

/// Feeds remembered launches and exits to `predictor`, oldest first. Instances whose exit was
/// never seen (the daemon stopped first) are closed at the last remembered time: their pids mean
/// nothing after a restart, and an instance left open would keep its application "running" —
/// never predicted — for good.
pub fn restore_predictor(predictor: &mut dyn Predictor, history: &[ActivityRecord]) {
    let mut open: BTreeSet<(String, u64)> = BTreeSet::new();
    for r in history {
        let transition = if r.launch { Transition::Launch } else { Transition::Exit };
        predictor.observe(&Observation { at: LocalTime(r.local_ms), app: &r.app, instance: r.instance, transition });
        if r.launch {
            open.insert((r.app.clone(), r.instance));
        } else {
            open.remove(&(r.app.clone(), r.instance));
        }
    }
    let last = history.last().map_or(0, |r| r.local_ms);
    for (app, instance) in &open {
        predictor.observe(&Observation { at: LocalTime(last), app, instance: *instance, transition: Transition::Exit });
    }
}

/// The footprints of the applications a round planned over, each kept for the next round while
/// the replay profile it was made from is still the one the state answers (its replay cache
/// hands out the same profile while the application's row is unchanged). A round asks for up
/// to 32 footprints of hundreds of ranges each; making them again every round cost a third of
/// a round's CPU with 1,000 learned applications (`augur-bench round-cost`). Only the last
/// round's are kept, so it holds at most 32.
#[derive(Debug, Default)]
pub struct FootprintCache {
    kept: HashMap<String, KeptFootprint>,
    round: u64,
}

#[derive(Debug)]
struct KeptFootprint {
    profile: Arc<LaunchProfile>,
    footprint: Arc<AppFootprint>,
    round: u64,
}

impl FootprintCache {
    /// `app`'s footprint made from `profile`: the kept one if it was made from this very profile.
    pub fn footprint(&mut self, app: &str, profile: &Arc<LaunchProfile>) -> Arc<AppFootprint> {
        let round = self.round;
        if let Some(k) = self.kept.get_mut(app).filter(|k| Arc::ptr_eq(&k.profile, profile)) {
            k.round = round;
            return Arc::clone(&k.footprint);
        }
        let footprint = Arc::new(footprint_of(app, profile));
        self.kept
            .insert(app.to_string(), KeptFootprint { profile: Arc::clone(profile), footprint: Arc::clone(&footprint), round });
        footprint
    }

    /// The round is over: what it did not ask for is dropped.
    pub fn round_done(&mut self) {
        let round = self.round;
        self.kept.retain(|_, k| k.round == round);
        self.round += 1;
    }

    /// Footprints kept.
    pub fn len(&self) -> usize {
        self.kept.len()
    }

    /// True when none is kept.
    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }
}

/// The planner's view of a learned profile: its ranges in first-use order, keyed by path.
pub fn footprint_of(app: &str, profile: &LaunchProfile) -> AppFootprint {
    let mut ranges: Vec<(u64, RangeUse)> = Vec::new();
    for f in &profile.files {
        let file: Arc<str> = Arc::from(f.path.to_string_lossy());
        for r in &f.ranges {
            ranges
                .push((r.first_use_us, RangeUse { file: Arc::clone(&file), range: r.range, use_share: 1.0, resident_pages: 0 }));
        }
    }
    ranges.sort_by_key(|(t, _)| *t);
    AppFootprint::new(app, ranges.into_iter().map(|(_, r)| r).collect())
}

/// One planned application's ranges gathered by file: its profile, each file's index by the
/// planner's name for it, and the files with their ranges in first-planned order.
type GatheredRanges<'a> = (&'a LaunchProfile, HashMap<&'a str, usize>, Vec<(&'a FileProfile, Vec<UsedRange>)>);

/// The fetch plans for the planned ranges: one per application, in the order the planner took
/// them (the likeliest first), each with the ranges in fetch order and each file's identity from
/// the profile it was learned in (a file whose identity changed is refused by the fetcher). One
/// plan per application keeps a disk-order sort (rotational disks) inside each application, so
/// the likeliest one is complete first even when the round is cut short by a launch. Each plan
/// carries its application's lookups, repeated before its pages, and reads for its key's user
/// (files a user other than root may not read are refused).
pub fn fetch_plans_of(
    planned: &augur_core::plan::Plan,
    profiles: &BTreeMap<String, Arc<LaunchProfile>>,
    page_size: u64,
) -> Vec<(String, FetchPlan)> {
    let mut apps: Vec<&str> = Vec::new();
    let mut plans: Vec<FetchPlan> = Vec::new();
    // Each planned application's files by the path the planner names them with (built once per
    // application: a plan holds thousands of ranges of hundreds of files), and the ranges planned
    // of each, gathered before they are added to its plan: one `add_file` per file, not per
    // range (each merges and sorts the file's ranges again).
    let mut files_of: Vec<HashMap<Cow<'_, str>, &FileProfile>> = Vec::new();
    let mut gathered: Vec<GatheredRanges<'_>> = Vec::new();
    for (order, r) in planned.ranges.iter().enumerate() {
        let Some(profile) = profiles.get(&r.app) else { continue };
        let i = match apps.iter().position(|a| *a == r.app.as_str()) {
            Some(i) => i,
            None => {
                apps.push(r.app.as_str());
                files_of.push(profile.files.iter().map(|f| (f.path.to_string_lossy(), f)).collect());
                gathered.push((profile, HashMap::new(), Vec::new()));
                // A user's application is loaded with the files that user may read only.
                let mut plan = FetchPlan::new(page_size).for_user(ProcessUser::without_groups(key_uid(&r.app)));
                // Its metadata first: the inodes and directories its launches needed from disk.
                for l in &profile.lookups {
                    plan.add_lookup(l.clone());
                }
                plans.push(plan);
                plans.len() - 1
            }
        };
        let Some(&file) = files_of[i].get(r.file.as_str()) else { continue };
        let (_, index, files) = &mut gathered[i];
        let k = *index.entry(r.file.as_str()).or_insert_with(|| {
            files.push((file, Vec::new()));
            files.len() - 1
        });
        files[k].1.push(UsedRange { range: r.range, first_use_us: order as u64 });
    }
    for (plan, (profile, _, files)) in plans.iter_mut().zip(gathered) {
        for (file, ranges) in files {
            plan.add_file(file.path.clone(), file.identity, &ranges, profile.page_size);
        }
    }
    apps.into_iter().map(String::from).zip(plans).collect()
}

impl PlanStep for PredictionStep {
    fn rounds_planned(&self) -> u64 {
        self.rounds_planned
    }

    fn fetches_sent(&self) -> u64 {
        self.jobs_sent
    }

    fn fetch_busy(&self) -> bool {
        (self.jobs_sent > 0 && !self.current_finished.is_cancelled()) || self.owed_in_ms.is_some()
    }

    fn pressure_watched(&mut self, watched: bool) {
        self.trigger_watched = watched;
    }

    fn restore(&mut self, history: &[ActivityRecord]) {
        restore_predictor(self.predictor.as_mut(), history);
        for r in history {
            let transition = if r.launch { Transition::Launch } else { Transition::Exit };
            self.chains.observe(&Observation { at: LocalTime(r.local_ms), app: &r.app, instance: r.instance, transition });
            if r.launch {
                self.fill.frequency.launched(&r.app, r.local_ms);
            }
        }
    }

    fn round_owed_in_ms(&self) -> Option<u64> {
        self.owed_in_ms
    }

    fn explain(&mut self, app: &str, now_ms: u64) -> Option<predict::Explanation> {
        Some(self.predictor.explain(app, LocalTime(now_ms)))
    }

    fn launch_replayed(&mut self, app: &str, pages_resident: u64, page_size: u64, now_ms: u64) {
        self.take_fetched();
        self.observed.launched(now_ms, app, pages_resident, page_size);
    }

    fn read_cost_rule(&self) -> Option<ReadCostRule> {
        self.rule.clone()
    }

    fn fill_status(&mut self) -> Option<FillStatus> {
        self.take_fetched();
        let room = self.fill.room.as_ref()?;
        Some(FillStatus {
            reason: room.reason.describe().to_string(),
            free_bytes: room.free_bytes,
            reserve_bytes: room.reserve_bytes,
            room_bytes: room.room_bytes,
            planned_bytes: self.fill.planned_bytes,
            // An application's learned pages and the rest of its files are two plans: named once.
            apps: self.fill.plans.iter().fold(Vec::new(), |mut apps, (app, _)| {
                if !apps.contains(app) {
                    apps.push(app.clone());
                }
                apps
            }),
            loaded_bytes: self.fill.loaded_pages * augur_os::fetch::page_size(),
        })
    }

    fn last_day(&mut self, now_ms: u64) -> Option<LedgerTotals> {
        self.take_fetched();
        Some(self.observed.last_day(now_ms))
    }

    fn plan(&mut self, trigger: &PlanTrigger, ctx: &PlanContext<'_>) -> Result<()> {
        let now = LocalTime(ctx.local_ms);
        match trigger {
            PlanTrigger::LaunchStarted { app, instance } => {
                let o = Observation { at: now, app, instance: *instance, transition: Transition::Launch };
                self.predictor.observe(&o);
                self.chains.observe(&o);
                self.fill.frequency.launched(app, ctx.local_ms);
            }
            PlanTrigger::AppExited { app, instance } => {
                let o = Observation { at: now, app, instance: *instance, transition: Transition::Exit };
                self.predictor.observe(&o);
                self.chains.observe(&o);
            }
            PlanTrigger::LaunchFinished { .. } | PlanTrigger::Pressure | PlanTrigger::Interval | PlanTrigger::Start => {}
        }
        let cfg = &ctx.config.predict;
        if *trigger == PlanTrigger::Pressure {
            self.stop_fetching();
            let already_held = self.hold_until_ms.is_some_and(|t| ctx.now_ms < t);
            self.hold_until_ms = Some(ctx.now_ms.saturating_add(PRESSURE_HOLD_MS));
            // Nothing else may come to plan again once the hold is over: a round is owed then.
            self.owed_in_ms = Some(PRESSURE_HOLD_MS);
            if already_held {
                tracing::debug!("memory pressure still rising: prefetching stays stopped");
            } else {
                tracing::info!("memory pressure rose (trigger at monotonic {} ns): prefetching stopped", loop_io::monotonic_ns());
            }
            return Ok(());
        }
        if let Some(until) = self.hold_until_ms.filter(|&t| ctx.now_ms < t) {
            tracing::debug!("memory pressure rose less than {PRESSURE_HOLD_MS} ms ago: not fetching");
            self.owed_in_ms = Some(until - ctx.now_ms);
            return Ok(());
        }
        if ctx.launching {
            // Prefetching for later must not compete with a start happening now (on a slow disk
            // every request it queues delays the application's own); a round is owed for when
            // the start has settled.
            // A fetch already through is left as it is: what it loaded is not sent again.
            if !self.current.is_cancelled() && !self.current_finished.is_cancelled() {
                tracing::debug!("an application is starting: prediction fetch paused while it starts");
                self.current.cancel();
            }
            self.owed_in_ms = Some(MIN_ROUND_GAP_MS);
            return Ok(());
        }
        if !matches!(trigger, PlanTrigger::Start)
            && self.last_round_ms.is_some_and(|t| ctx.now_ms < t.saturating_add(MIN_ROUND_GAP_MS))
        {
            self.owed_in_ms = Some(MIN_ROUND_GAP_MS);
            return Ok(());
        }
        self.owed_in_ms = None;
        self.last_round_ms = Some(ctx.now_ms);
        let facts = MachineFacts {
            on_battery: machine::power_source_in(&self.sources.power_supply) == PowerSource::Battery,
            disk: self.disk.clone(),
        };
        let on_battery = facts.on_battery;
        let rule = read_cost_rule(cfg, &facts);
        if self.rule.as_ref().is_none_or(|r| r.reasons != rule.reasons) {
            tracing::info!("prefetching: {} (read cost {})", rule.reasons.join("; "), rule.read_cost);
        }
        let round_config = RoundConfig {
            budget_bytes: cfg.budget_bytes,
            budget_available_fraction: cfg.budget_available_fraction,
            pressure_stop_percent: cfg.pressure_stop_percent,
            read_cost: rule.read_cost,
            evict_cost: cfg.evict_cost,
            ..RoundConfig::default()
        };
        self.rule = Some(rule);
        let memory = self.sources.memory();
        let vmstat = self.sources.vmstat();
        if let Some(counters) = vmstat.as_deref().and_then(EvictionCounters::from_vmstat) {
            self.refaults.update(counters);
        }
        let drops = vmstat.as_deref().and_then(augur_os::sense::procfs::page_cache_drops_in);
        // MemFree is what a prefetch fills without pushing anything out; without meminfo,
        // everything it fills counts as pushed out.
        let headroom = MemoryHeadroom { free_bytes: memory.map_or(0, |m| m.free), refault_share: self.refaults.share() };
        let round = PlanningRound {
            config: &round_config,
            memory,
            pressure: self.sources.pressure(),
            default_page_size: augur_os::fetch::page_size(),
            headroom,
        };
        let settings = ctx.config.learn_settings();
        let mut profiles = BTreeMap::new();
        let predictor = &mut self.predictor;
        let chains = &self.chains;
        let footprints = &mut self.footprints;
        let outcome = round.run(
            || predictor.predict(now),
            |app| -> Result<Option<LearnedFootprint>> {
                // A program that learned nothing of its own (a launcher script, oosplash) is
                // planned with the pages of the application its launches lead to.
                let mut found = None;
                for key in std::iter::once(app).chain(chains.successors(app)) {
                    let Some(profile) = ctx.state.replay_profile(key, &settings)? else { continue };
                    if !profile.files.is_empty() {
                        if key != app {
                            tracing::debug!("{app} is planned with the pages of {key}, which its launches lead to");
                        }
                        found = Some(profile);
                        break;
                    }
                }
                let Some(profile) = found else { return Ok(None) };
                let learned = LearnedFootprint { footprint: footprints.footprint(app, &profile), page_size: profile.page_size };
                profiles.insert(app.to_string(), profile);
                Ok(Some(learned))
            },
        )?;
        self.footprints.round_done();
        let RoundPlan { budget, candidates: probs, plan: planned, .. } = match outcome {
            RoundOutcome::Planned(p) => p,
            RoundOutcome::PressureStop => {
                self.stop_fetching();
                tracing::info!("memory pressure at or above {} %: prefetching stopped", cfg.pressure_stop_percent);
                // avg10 falls within about ten seconds of the stalls ending: look again then.
                self.owed_in_ms = Some(PRESSURE_HOLD_MS);
                return Ok(());
            }
            RoundOutcome::NoMemoryFigures => {
                tracing::warn!("cannot read /proc/meminfo: no prediction budget");
                return Ok(());
            }
        };
        self.rounds_planned += 1;
        let fetch = fetch_plans_of(&planned, &profiles, augur_os::fetch::page_size());
        let fill_fetch = self.fill_round(ctx, trigger, memory, budget, &planned, on_battery)?;
        if self.last != Some((budget.bytes, planned.bytes)) {
            let page = augur_os::fetch::page_size();
            let first: Vec<String> = fetch
                .iter()
                .take(3)
                .map(|(app, f)| {
                    let p = probs.iter().find(|p| &p.app == app).map_or(0.0, |p| p.probability);
                    format!("{app} p={p:.2} {} MiB", (f.files().iter().map(|x| x.page_count()).sum::<u64>() * page) >> 20)
                })
                .collect();
            tracing::debug!(
                "planned {} of {} budget bytes over {} applications ({trigger:?}); first: {}",
                planned.bytes,
                budget.bytes,
                profiles.len(),
                first.join(", ")
            );
            self.last = Some((budget.bytes, planned.bytes));
        }
        self.take_fetched();
        let fill_from = fetch.len();
        let mut plans = fetch;
        plans.extend(fill_fetch);
        let shape = JobShape::of(&plans, fill_from);
        if !self.current.is_cancelled() && self.sent.as_ref().is_some_and(|j| j.repeated_by(&shape, drops, ctx.now_ms)) {
            // The worker is still at it, or what it loaded is still resident: waking it would
            // only survey the same files again.
            tracing::trace!("prediction: the same fetch as the last, nothing left the page cache since: none sent");
            return Ok(());
        }
        self.current.cancel();
        self.current = CancelFlag::new();
        self.current_pressure = CancelFlag::new();
        self.current_finished = CancelFlag::new();
        if let Some(tx) = &self.jobs {
            let watch = (!self.trigger_watched)
                .then(|| PressureWatch { path: self.sources.pressure.clone(), stop_percent: cfg.pressure_stop_percent });
            let keep_free_bytes = self.fill.room.as_ref().map_or(0, |r| r.reserve_bytes);
            let apps: Vec<&str> = plans.iter().map(|(app, _)| app.as_str()).collect();
            let keep = self.keeps.due(&apps, fill_from, self.predictor.proven(), ctx.now_ms);
            let job = FetchJob {
                plans,
                fill_from,
                keep,
                keep_free_bytes,
                fill_done: self.fill.done.clone(),
                cancel: self.current.clone(),
                pressure: self.current_pressure.clone(),
                watch,
                finished: self.current_finished.clone(),
            };
            if tx.send(job).is_err() {
                tracing::warn!("prediction worker gone");
            } else {
                self.jobs_sent += 1;
                self.sent = Some(SentJob { shape, drops, sent_ms: ctx.now_ms });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use augur_core::model::predict::AppProbability;
    use augur_core::model::profile::{FileIdentity, FileProfile, TraceMode, Unresolved};
    use augur_core::model::range::PageRange;
    use augur_core::model::record::LaunchRecord;
    use augur_core::plan::{MemoryBudget, PlannerConfig, plan};

    /// (path, [(first page, pages, first use µs)])
    type FileRanges<'a> = (&'a str, &'a [(u64, u64, u64)]);
    type Files<'a> = &'a [FileRanges<'a>];

    fn profile(files: Files<'_>) -> LaunchProfile {
        LaunchProfile {
            command: vec!["x".into()],
            recorded_at: 0,
            page_size: 4096,
            mode: TraceMode::Access,
            window_ms: 1,
            files: files
                .iter()
                .map(|(path, ranges)| FileProfile {
                    path: path.into(),
                    identity: FileIdentity { dev: 1, ino: 2, size: 1 << 30, mtime_ns: 3 },
                    ranges: ranges.iter().map(|&(s, l, t)| UsedRange { range: PageRange::new(s, l), first_use_us: t }).collect(),
                })
                .collect(),
            unresolved: Unresolved::default(),
            lookups: Vec::new(),
        }
    }

    /// The memory the daemon's loads may fill is no more than its memory cgroup's: a process in
    /// a cgroup limited to 64 MiB sees at most that much free and available, on a machine with
    /// gigabytes free; once the cgroup is full of page cache, little is free but most is still
    /// available (root: it makes a cgroup, v1 or v2 as mounted).
    #[test]
    fn a_memory_cgroup_limit_bounds_the_memory_the_loads_may_fill() {
        use std::io::Write;
        const LIMIT: u64 = 64 << 20;
        let v1 = std::path::Path::new("/sys/fs/cgroup/memory");
        let (dir, limit_file) = if v1.join("memory.limit_in_bytes").exists() {
            (v1.join(format!("augur-test-room-{}", std::process::id())), "memory.limit_in_bytes")
        } else {
            let root = std::path::Path::new("/sys/fs/cgroup");
            std::fs::write(root.join("cgroup.subtree_control"), "+memory").unwrap();
            (root.join(format!("augur-test-room-{}", std::process::id())), "memory.max")
        };
        // 96 MiB on a disk (tmpfs pages are not file pages), written and then evicted, so that
        // reading it charges its pages to the cgroup.
        let mut data = tempfile::NamedTempFile::new_in("/var/tmp").unwrap();
        let chunk = vec![7u8; 1 << 20];
        for _ in 0..96 {
            data.write_all(&chunk).unwrap();
        }
        data.as_file().sync_all().unwrap();
        augur_os::fetch::evict_file(std::os::fd::AsFd::as_fd(data.as_file())).unwrap();
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join(limit_file), LIMIT.to_string()).unwrap();
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        std::fs::write(dir.join("cgroup.procs"), child.id().to_string()).unwrap();
        let machine = MemorySources { charged_to: None, ..MemorySources::default() }.memory().unwrap();
        let in_cgroup = MemorySources { charged_to: Some(child.id()), ..MemorySources::default() };
        let empty = in_cgroup.memory();
        let procs = dir.join("cgroup.procs");
        let read = std::process::Command::new("sh")
            .arg("-c")
            .arg(r#"echo $$ > "$1" && cat "$2" > /dev/null"#)
            .args(["sh", &procs.to_string_lossy(), &data.path().to_string_lossy()])
            .status();
        let full = in_cgroup.memory();
        child.kill().unwrap();
        child.wait().unwrap();
        std::fs::remove_dir(&dir).unwrap();
        assert!(read.unwrap().success());
        let (empty, full) = (empty.unwrap(), full.unwrap());
        assert!(machine.available > 4 * LIMIT && machine.free > 4 * LIMIT, "{machine:?}");
        assert!(empty.available <= LIMIT && empty.free <= LIMIT && empty.free > LIMIT / 2, "{empty:?}");
        assert_eq!((empty.total, empty.cached), (machine.total, machine.cached));
        assert!(full.free < LIMIT / 4 && full.available > LIMIT / 2 && full.available <= LIMIT, "{full:?}");
    }

    /// A private directory with a meminfo (4 GB available) and a pressure file to inject, and an
    /// empty state in it.
    fn fixture() -> (tempfile::TempDir, MemorySources, augur_store::state::StateStore) {
        let dir = tempfile::tempdir().unwrap();
        let sources = MemorySources {
            meminfo: dir.path().join("meminfo"),
            pressure: dir.path().join("psi"),
            vmstat: dir.path().join("vmstat"),
            power_supply: dir.path().join("power_supply"),
            charged_to: None,
        };
        std::fs::write(
            &sources.meminfo,
            "MemTotal: 8000000 kB\nMemFree: 1000000 kB\nMemAvailable: 4000000 kB\nCached: 2000000 kB\n",
        )
        .unwrap();
        let (state, _) = augur_store::state::StateStore::open(&dir.path().join("state.db")).unwrap();
        (dir, sources, state)
    }

    #[test]
    fn prefetched_pages_count_as_used_when_the_launch_finds_them_and_wasted_when_they_are_gone() {
        let mut o = ObservedPrefetch::default();
        let fetched = |app: &str, wanted, resident, loaded| AppFetched { app: app.into(), wanted, resident, loaded, fill: false };
        // a: 100 pages planned, 100 loaded; its launch finds all of them: used, in time.
        o.fetched(1_000, &fetched("a", 100, 0, 100), 10);
        o.launched(2_000, "a", 120, 10);
        // b: 50 loaded, then 30 of them loaded again (pushed out meanwhile); its launch finds 40
        // of its pages resident: 40 used, 10 gone before it started.
        o.fetched(1_000, &fetched("b", 60, 10, 50), 10);
        o.fetched(1_500, &fetched("b", 60, 30, 30), 10);
        o.launched(2_000, "b", 40, 10);
        // c: never prefetched; d: prefetched, not launched yet.
        o.launched(2_000, "c", 0, 10);
        o.fetched(2_000, &fetched("d", 5, 0, 5), 10);
        let t = o.last_day(3_000);
        assert_eq!(
            t,
            LedgerTotals {
                launches: 3,
                predicted: 2,
                loaded_in_time: 1,
                prefetched_bytes: 1850,
                used_bytes: 1400,
                wasted_bytes: 400
            }
        );
        assert!(t.used_bytes + t.wasted_bytes <= t.prefetched_bytes);
    }

    #[test]
    fn pressure_stops_fetching_at_once_and_planning_resumes_when_it_falls() {
        let (_dir, sources, state) = fixture();
        let config = Config::default();
        let mut step = PredictionStep::new(&config).unwrap().with_sources(sources.clone());
        let ctx = PlanContext { state: &state, config: &config, now_ms: 1_000, local_ms: 1_000, launching: false };
        let psi = |avg10: f64| {
            format!("some avg10={avg10:.2} avg60=0.00 avg300=0.00 total=1\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
        };

        std::fs::write(&sources.pressure, psi(0.5)).unwrap();
        step.plan(&PlanTrigger::LaunchStarted { app: "a".into(), instance: 1 }, &ctx).unwrap();
        assert_eq!(step.fetches_sent(), 1);
        assert!(!step.fetching_stopped());

        // Pressure rises: the very next round cancels the running fetch and sends nothing.
        std::fs::write(&sources.pressure, psi(config.predict.pressure_stop_percent + 5.0)).unwrap();
        step.plan(&PlanTrigger::Pressure, &ctx).unwrap();
        assert!(step.fetching_stopped());
        assert_eq!(step.fetches_sent(), 1);

        assert_eq!(step.round_owed_in_ms(), Some(PRESSURE_HOLD_MS), "a round is owed for when the hold is over");

        // A round soon after the trigger fetches nothing, even with low pressure, and still owes
        // one for the end of the hold (nothing else may come to plan again).
        std::fs::write(&sources.pressure, psi(0.0)).unwrap();
        let soon = PlanContext { now_ms: 4_000, ..ctx };
        step.plan(&PlanTrigger::LaunchStarted { app: "b".into(), instance: 2 }, &soon).unwrap();
        assert_eq!(step.fetches_sent(), 1);
        assert_eq!(step.round_owed_in_ms(), Some(PRESSURE_HOLD_MS - 3_000));

        // While an application starts, nothing is fetched for later; afterwards planning resumes.
        let launching =
            PlanContext { state: &state, config: &config, now_ms: 1_000 + PRESSURE_HOLD_MS, local_ms: 1_000, launching: true };
        step.plan(&PlanTrigger::Interval, &launching).unwrap();
        assert_eq!(step.fetches_sent(), 1);
        assert_eq!(step.round_owed_in_ms(), Some(MIN_ROUND_GAP_MS), "a round is owed for after the start");

        // It stays low: planning resumes once the hold is over.
        let later = PlanContext {
            state: &state,
            config: &config,
            now_ms: 1_000 + PRESSURE_HOLD_MS,
            local_ms: 1_000 + PRESSURE_HOLD_MS,
            launching: false,
        };
        step.plan(&PlanTrigger::Interval, &later).unwrap();
        assert_eq!(step.fetches_sent(), 2);
        assert!(!step.fetching_stopped());
    }

    /// Learns one launch of each of `apps` (the last the most recent), a private file each.
    fn learn_apps(state: &mut augur_store::state::StateStore, config: &Config, apps: &[&str]) {
        for (i, app) in apps.iter().enumerate() {
            let file = format!("/nonexistent/augur-test/{i}.so");
            let p = profile(&[(file.as_str(), &[(0, 8, 1)])]);
            let record = LaunchRecord { app: app.to_string(), started_ms: 1_000 + i as u64, pages_used: 8, ..Default::default() };
            state.learn_launch(app, app, &p, &record, &config.state_limits()).unwrap();
        }
    }

    /// /proc/meminfo of the suite's as-is machine: 24 GiB, 22 free.
    const LARGE_MEMINFO: &str = "MemTotal: 25165824 kB\nMemFree: 23068672 kB\nMemAvailable: 24117248 kB\nCached: 0 kB\n";

    /// The tier's tests' start: `/bin/a`, `/bin/b` and `/bin/c` learned (the last the most
    /// recent), on the as-is machine.
    fn tier_fixture() -> (tempfile::TempDir, MemorySources, augur_store::state::StateStore, Config) {
        let (dir, sources, mut state) = fixture();
        let config = Config::default();
        learn_apps(&mut state, &config, &["/bin/a", "/bin/b", "/bin/c"]);
        std::fs::write(&sources.meminfo, LARGE_MEMINFO).unwrap();
        (dir, sources, state, config)
    }

    #[test]
    fn the_tier_loads_the_most_often_launched_applications_first() {
        let (_dir, sources, state, config) = tier_fixture();
        let mut step = PredictionStep::new(&config).unwrap().with_sources(sources);
        // Remembered: /bin/a launched three times, /bin/b twice (restored at the daemon's start),
        // then /bin/b once more, observed live; /bin/c, launched last, never before.
        let launch = |app: &str, instance: u64, ms: u64| ActivityRecord {
            at_ms: ms,
            local_ms: ms,
            app: app.into(),
            instance,
            launch: true,
        };
        step.restore(&[
            launch("/bin/a", 1, 100),
            launch("/bin/a", 2, 200),
            launch("/bin/b", 3, 300),
            launch("/bin/a", 4, 400),
            launch("/bin/b", 5, 500),
        ]);
        let at = |ms: u64| PlanContext { state: &state, config: &config, now_ms: ms, local_ms: ms, launching: false };
        step.plan(&PlanTrigger::LaunchStarted { app: "/bin/b".into(), instance: 6 }, &at(10_000)).unwrap();
        step.plan(&PlanTrigger::Start, &at(10_000)).unwrap();
        let f = step.fill_status().unwrap();
        assert_eq!(f.apps, vec!["/bin/b", "/bin/a", "/bin/c"], "three launches each for b and a (b's the latest), none for c");
    }

    #[test]
    fn the_tier_plans_learned_applications_into_free_memory_beyond_the_reserve_and_where_memory_is_short_nothing() {
        // 24 GiB, 22 free: the reserve is 4 GiB, the budget half of MemAvailable.
        let (_dir, sources, state, config) = tier_fixture();
        let mut step = PredictionStep::new(&config).unwrap().with_sources(sources.clone());
        let at = |ms: u64| PlanContext { state: &state, config: &config, now_ms: ms, local_ms: ms, launching: false };
        step.plan(&PlanTrigger::Start, &at(10_000)).unwrap();
        let f = step.fill_status().unwrap();
        assert_eq!(f.reason, FillReason::Filling.describe());
        assert_eq!(f.reserve_bytes, 4 << 30);
        assert_eq!(f.apps, vec!["/bin/c", "/bin/b", "/bin/a"], "no launch remembered: the most recently launched first");
        // Padded as the exec-time replay pads them where memory is plentiful: each learned
        // [0, 8) is loaded as [0, 24) (`[launch] replay_pad_pages`, nothing before page 0).
        assert_eq!(f.planned_bytes, 3 * (8 + 16) * 4096);
        assert_eq!(step.fetches_sent(), 1);
        // The usage day's machine: 512 MiB left of 24 GiB (a balloon locked the rest). Nothing.
        std::fs::write(
            &sources.meminfo,
            "MemTotal: 25165824 kB\nMemFree: 524288 kB\nMemAvailable: 524288 kB\nCached: 0 kB\nMlocked: 24117248 kB\n",
        )
        .unwrap();
        step.plan(&PlanTrigger::Interval, &at(20_000)).unwrap();
        let f = step.fill_status().unwrap();
        assert_eq!(f.reason, FillReason::WithinReserve.describe());
        assert!(f.apps.is_empty() && f.planned_bytes == 0 && f.room_bytes == 0, "{f:?}");
        // A small machine: 3 GiB left, 21 GiB locked: the reserve of a 3 GiB machine (1 GiB),
        // the rest is filled.
        std::fs::write(
            &sources.meminfo,
            "MemTotal: 25165824 kB\nMemFree: 3145728 kB\nMemAvailable: 3145728 kB\nCached: 0 kB\nMlocked: 22020096 kB\n",
        )
        .unwrap();
        step.plan(&PlanTrigger::Interval, &at(30_000)).unwrap();
        let f = step.fill_status().unwrap();
        assert_eq!(f.reason, FillReason::Filling.describe());
        assert_eq!(f.reserve_bytes, 1 << 30);
        // Turned off, it says so.
        let off = Config {
            predict: augur_engine::config::PredictSection { fill_free_memory: false, ..config.predict.clone() },
            ..config.clone()
        };
        let sources_again = sources.clone();
        std::fs::write(&sources.meminfo, LARGE_MEMINFO).unwrap();
        let mut step = PredictionStep::new(&off).unwrap().with_sources(sources);
        step.plan(
            &PlanTrigger::Start,
            &PlanContext { state: &state, config: &off, now_ms: 30_000, local_ms: 30_000, launching: false },
        )
        .unwrap();
        assert_eq!(step.fill_status().unwrap().reason, FillReason::Disabled.describe());
        // A fixed budget caps all prefetching: the tier stays off.
        let fixed = Config {
            predict: augur_engine::config::PredictSection { budget_bytes: 1 << 20, ..config.predict.clone() },
            ..config.clone()
        };
        let mut step = PredictionStep::new(&fixed).unwrap().with_sources(sources_again);
        step.plan(
            &PlanTrigger::Start,
            &PlanContext { state: &state, config: &fixed, now_ms: 40_000, local_ms: 40_000, launching: false },
        )
        .unwrap();
        assert_eq!(step.fill_status().unwrap().reason, FillReason::FixedBudget.describe());
    }

    #[test]
    fn the_tier_loads_the_rest_of_small_files_after_every_learned_page() {
        let (_dir, sources, mut state) = fixture();
        let config = Config::default();
        // Two applications, each [0, 8) of a file of 64 pages; /bin/b also [0, 8) of a 1 GiB
        // file, larger than fill_whole_files_max_mib.
        for (i, app) in ["/bin/a", "/bin/b"].iter().enumerate() {
            let small = format!("/nonexistent/augur-test/{i}.so");
            let files: Vec<FileRanges<'_>> = if i == 0 {
                vec![(small.as_str(), &[(0, 8, 1)])]
            } else {
                vec![(small.as_str(), &[(0, 8, 1)]), ("/nonexistent/augur-test/big.db", &[(0, 8, 2)])]
            };
            let mut p = profile(&files);
            p.files[0].identity.size = 64 * 4096;
            let record = LaunchRecord { app: app.to_string(), started_ms: 1_000 + i as u64, pages_used: 8, ..Default::default() };
            state.learn_launch(app, app, &p, &record, &config.state_limits()).unwrap();
        }
        std::fs::write(&sources.meminfo, LARGE_MEMINFO).unwrap();
        let mut step = PredictionStep::new(&config).unwrap().with_sources(sources.clone());
        let ctx = PlanContext { state: &state, config: &config, now_ms: 10_000, local_ms: 10_000, launching: false };
        step.plan(&PlanTrigger::Start, &ctx).unwrap();
        let f = step.fill_status().unwrap();
        assert_eq!(f.apps, vec!["/bin/b", "/bin/a"], "each application named once");
        // Learned pages padded by 16 ([0, 24) of each file), then the rest of the two small files
        // ([24, 64) each); the 1 GiB file only its padded pages.
        assert_eq!(f.planned_bytes, (3 * 24 + 2 * 40) * 4096);
        let plans = step.fill.plans.clone();
        let order: Vec<&str> = plans.iter().map(|(app, _)| app.as_str()).collect();
        assert_eq!(order, vec!["/bin/b", "/bin/a", "/bin/b", "/bin/a"], "every learned page before any whole file");
        // Turned off: learned pages only.
        let off = Config {
            predict: augur_engine::config::PredictSection { fill_whole_files_max_mib: 0, ..config.predict.clone() },
            ..config.clone()
        };
        let mut step = PredictionStep::new(&off).unwrap().with_sources(sources);
        step.plan(
            &PlanTrigger::Start,
            &PlanContext { state: &state, config: &off, now_ms: 10_000, local_ms: 10_000, launching: false },
        )
        .unwrap();
        assert_eq!(step.fill_status().unwrap().planned_bytes, 3 * 24 * 4096);
    }

    #[test]
    fn a_predicted_launcher_script_is_planned_with_the_application_it_leads_to() {
        let (_dir, sources, mut state) = fixture();
        let config = Config::default();
        learn_apps(&mut state, &config, &["/usr/lib/libreoffice/program/soffice.bin"]);
        let mut step = PredictionStep::new(&config).unwrap().with_sources(sources);
        // The script execs oosplash, which starts soffice.bin; then something else, every time.
        let mut history = Vec::new();
        let mut rec = |at_ms: u64, app: &str, instance: u64, launch: bool| {
            history.push(ActivityRecord { at_ms, local_ms: at_ms, app: app.into(), instance, launch })
        };
        for i in 0..20u64 {
            let t = i * 100_000;
            rec(t, "/usr/bin/evolution", i * 10, true);
            rec(t + 1_000, "/usr/bin/evolution", i * 10, false);
            rec(t + 50_000, "/usr/bin/libreoffice", i * 10 + 1, true);
            rec(t + 50_000, "/usr/bin/libreoffice", i * 10 + 1, false);
            rec(t + 50_000, "/usr/lib/libreoffice/program/oosplash", i * 10 + 1, true);
            rec(t + 50_006, "/usr/lib/libreoffice/program/soffice.bin", i * 10 + 2, true);
            rec(t + 50_400, "/usr/lib/libreoffice/program/soffice.bin", i * 10 + 2, false);
            rec(t + 50_410, "/usr/lib/libreoffice/program/oosplash", i * 10 + 1, false);
        }
        step.restore(&history);
        assert_eq!(
            step.chains.successors("/usr/bin/libreoffice"),
            vec!["/usr/lib/libreoffice/program/oosplash", "/usr/lib/libreoffice/program/soffice.bin"]
        );
        // Evolution starts: the script is the likeliest next launch, and soffice.bin's pages are
        // what gets planned for it.
        let ctx = PlanContext { state: &state, config: &config, now_ms: 2_000_000, local_ms: 2_000_000, launching: false };
        step.plan(&PlanTrigger::LaunchStarted { app: "/usr/bin/evolution".into(), instance: 999 }, &ctx).unwrap();
        let later = PlanContext { now_ms: 2_002_000, local_ms: 2_002_000, ..ctx };
        step.plan(&PlanTrigger::AppExited { app: "/usr/bin/evolution".into(), instance: 999 }, &later).unwrap();
        let planned = step.last.map_or(0, |(_, planned)| planned);
        assert_eq!(planned, 8 * 4096, "soffice.bin's 8 pages are planned for the predicted script");
    }

    #[test]
    fn on_battery_and_on_a_fast_disk_the_round_reads_at_a_higher_cost_and_says_why() {
        let (dir, sources, state) = fixture();
        let config = Config::default();
        let mut step = PredictionStep::new(&config).unwrap().with_sources(sources.clone());
        step.disk = Some(("vda".into(), true));
        let at = |ms: u64| PlanContext { state: &state, config: &config, now_ms: ms, local_ms: ms, launching: false };
        step.plan(&PlanTrigger::Start, &at(10_000)).unwrap();
        let rule = step.read_cost_rule().unwrap();
        assert_eq!(rule.read_cost, config.predict.read_cost);
        assert_eq!(rule.reasons, vec!["disk vda: rotational → full prefetching", "on mains power"]);
        // sysfs as a laptop's, unplugged, on an NVMe disk.
        let bat = sources.power_supply.join("BAT0");
        std::fs::create_dir_all(&bat).unwrap();
        std::fs::write(bat.join("type"), "Battery\n").unwrap();
        std::fs::write(bat.join("status"), "Discharging\n").unwrap();
        step.disk = Some(("nvme0n1".into(), false));
        step.plan(&PlanTrigger::Interval, &at(20_000)).unwrap();
        let rule = step.read_cost_rule().unwrap();
        let p = &config.predict;
        assert!((rule.read_cost - p.read_cost * p.battery_read_cost_factor * p.non_rotational_read_cost_factor).abs() < 1e-12);
        assert_eq!(rule.reasons[1], format!("on battery → read cost ×{}", p.battery_read_cost_factor));
        drop(dir);
    }

    #[test]
    fn the_step_is_busy_while_its_fetch_runs_or_a_round_is_owed() {
        let (_dir, sources, state) = fixture();
        let config = Config::default();
        let mut step = PredictionStep::new(&config).unwrap().with_sources(sources);
        let at = |ms: u64| PlanContext { state: &state, config: &config, now_ms: ms, local_ms: ms, launching: false };
        assert!(!step.fetch_busy(), "nothing sent, nothing owed");
        step.plan(&PlanTrigger::Start, &at(10_000)).unwrap();
        assert_eq!(step.fetches_sent(), 1);
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while step.fetch_busy() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(!step.fetch_busy(), "the worker went through its (empty) fetch");
        // A round put off (too soon after the last) is owed: busy until it runs.
        step.plan(&PlanTrigger::Interval, &at(10_500)).unwrap();
        assert!(step.round_owed_in_ms().is_some());
        assert!(step.fetch_busy());
    }

    #[test]
    fn a_round_that_would_repeat_the_last_fetch_sends_none_until_pages_leave_the_cache() {
        let (_dir, sources, state) = fixture();
        let config = Config::default();
        std::fs::write(&sources.vmstat, "pgsteal_kswapd 7\npgsteal_direct 3\nworkingset_refault_file 2\n").unwrap();
        let mut step = PredictionStep::new(&config).unwrap().with_sources(sources.clone());
        let at = |ms: u64| PlanContext { state: &state, config: &config, now_ms: ms, local_ms: ms, launching: false };
        step.plan(&PlanTrigger::Start, &at(10_000)).unwrap();
        assert_eq!(step.fetches_sent(), 1);
        // The same plan, nothing reclaimed: the worker is not woken, and its fetch goes on.
        step.plan(&PlanTrigger::Interval, &at(12_000)).unwrap();
        assert_eq!(step.fetches_sent(), 1);
        assert!(!step.fetching_stopped());
        // File pages were reclaimed since: the same plan is sent again (its survey finds what left).
        std::fs::write(&sources.vmstat, "pgsteal_kswapd 70\npgsteal_direct 3\nworkingset_refault_file 2\n").unwrap();
        step.plan(&PlanTrigger::Interval, &at(14_000)).unwrap();
        assert_eq!(step.fetches_sent(), 2);
        // A start leaves a fetch that is through as it is: the round after it sends none.
        while !step.current_finished.is_cancelled() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        step.plan(&PlanTrigger::Interval, &PlanContext { launching: true, ..at(16_000) }).unwrap();
        assert!(!step.fetching_stopped());
        step.plan(&PlanTrigger::Interval, &at(17_000)).unwrap();
        assert_eq!(step.fetches_sent(), 2);
        // Memory pressure stopped it: the first round after the hold sends it again.
        step.plan(&PlanTrigger::Pressure, &at(18_000)).unwrap();
        let t = 18_000 + PRESSURE_HOLD_MS;
        step.plan(&PlanTrigger::Interval, &at(t)).unwrap();
        assert_eq!(step.fetches_sent(), 3);
        // And at the latest REPEAT_FETCH_MS after the last one (pages dropped on purpose show in
        // no counter).
        step.plan(&PlanTrigger::Interval, &at(t + REPEAT_FETCH_MS - 2_000)).unwrap();
        assert_eq!(step.fetches_sent(), 3);
        step.plan(&PlanTrigger::Interval, &at(t + REPEAT_FETCH_MS)).unwrap();
        assert_eq!(step.fetches_sent(), 4);
        // Without a readable count, every round sends its fetch (as before the rule).
        std::fs::remove_file(&sources.vmstat).unwrap();
        step.plan(&PlanTrigger::Interval, &at(t + REPEAT_FETCH_MS + 2_000)).unwrap();
        step.plan(&PlanTrigger::Interval, &at(t + REPEAT_FETCH_MS + 4_000)).unwrap();
        assert_eq!(step.fetches_sent(), 6);
    }

    #[test]
    fn a_proven_predictors_plans_keep_their_pages_at_most_every_gap_and_the_tiers_never() {
        let mut keeps = KeepSchedule::default();
        // ["a", "b"] predicted, ["t"] the free-memory tier's.
        let apps = ["a", "b", "t"];
        assert_eq!(keeps.due(&apps, 2, false, 1_000), [false, false, false], "an unproven predictor keeps nothing");
        assert_eq!(keeps.due(&apps, 2, true, 2_000), [true, true, false]);
        assert_eq!(keeps.due(&apps, 2, true, 2_000 + KEEP_GAP_MS - 1), [false, false, false], "kept within the gap");
        // "c" is planned for the first time: kept at once; "a" and "b" once the gap is over.
        assert_eq!(keeps.due(&["c", "a", "t"], 2, true, 3_000), [true, false, false]);
        assert_eq!(keeps.due(&["c", "a", "t"], 2, true, 2_000 + KEEP_GAP_MS), [false, true, false]);
        // "b" left the plan and is forgotten: planned again, it is kept at once.
        assert_eq!(keeps.due(&["b"], 1, true, 2_000 + KEEP_GAP_MS + 1), [true]);
        // A clock that went back does not hold keeping off for good.
        assert_eq!(keeps.due(&["b"], 1, true, 10), [true]);
    }

    #[test]
    fn rounds_are_rate_limited_and_the_owed_one_is_asked_for() {
        let (_dir, sources, state) = fixture();
        let config = Config::default();
        let mut step = PredictionStep::new(&config).unwrap().with_sources(sources);
        let at = |ms: u64| PlanContext { state: &state, config: &config, now_ms: ms, local_ms: ms, launching: false };
        step.plan(&PlanTrigger::Start, &at(10_000)).unwrap();
        assert_eq!((step.fetches_sent(), step.round_owed_in_ms()), (1, None));
        for (i, ms) in [10_100, 10_200, 10_900].into_iter().enumerate() {
            step.plan(&PlanTrigger::LaunchStarted { app: format!("/bin/p{i}"), instance: i as u64 }, &at(ms)).unwrap();
        }
        assert_eq!(step.fetches_sent(), 1, "a burst of launches costs no extra round");
        assert_eq!(step.round_owed_in_ms(), Some(MIN_ROUND_GAP_MS));
        step.plan(&PlanTrigger::Interval, &at(11_000)).unwrap();
        assert_eq!((step.fetches_sent(), step.round_owed_in_ms()), (2, None));
        let explained = step.explain("/bin/p2", 11_000).unwrap();
        assert!(
            explained.reasons.iter().any(|r| r.contains("running now")),
            "launches in the burst were observed: {explained:?}"
        );
    }

    #[test]
    fn an_unwatched_trigger_means_the_polling_fallback_and_it_reads_the_pressure_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut step = PredictionStep::new(&Config::default()).unwrap().with_sources(MemorySources {
            meminfo: dir.path().join("m"),
            pressure: dir.path().join("p"),
            vmstat: dir.path().join("v"),
            power_supply: dir.path().join("ps"),
            charged_to: None,
        });
        assert!(!step.trigger_watched, "polling until the loop says it watches the trigger");
        step.pressure_watched(true);
        assert!(step.trigger_watched);
        let w = PressureWatch { path: dir.path().join("p"), stop_percent: 10.0 };
        assert!(!w.high(), "a missing file is no pressure");
        std::fs::write(&w.path, "some avg10=12.00 avg60=0.00 avg300=0.00 total=5\n").unwrap();
        assert!(w.high());
        std::fs::write(&w.path, "some avg10=2.00 avg60=0.00 avg300=0.00 total=5\n").unwrap();
        assert!(!w.high());
    }

    #[test]
    fn a_restored_predictor_predicts_like_one_that_never_stopped() {
        let apps = ["/bin/a", "/bin/b", "/bin/c"];
        let mut history = Vec::new();
        for i in 0..30u64 {
            let app = apps[(i % 3) as usize];
            history.push(ActivityRecord { at_ms: i * 1000, local_ms: i * 1000, app: app.into(), instance: i, launch: true });
            history.push(ActivityRecord {
                at_ms: i * 1000 + 500,
                local_ms: i * 1000 + 500,
                app: app.into(),
                instance: i,
                launch: false,
            });
        }
        // The daemon stopped while an instance of /bin/a ran: its exit was never recorded.
        history.push(ActivityRecord { at_ms: 40_000, local_ms: 40_000, app: "/bin/a".into(), instance: 99, launch: true });
        let mut live = predict::by_name("augur").unwrap();
        let mut restored = predict::by_name("augur").unwrap();
        for r in &history {
            let transition = if r.launch { Transition::Launch } else { Transition::Exit };
            live.observe(&Observation { at: LocalTime(r.local_ms), app: &r.app, instance: r.instance, transition });
        }
        live.observe(&Observation { at: LocalTime(40_000), app: "/bin/a", instance: 99, transition: Transition::Exit });
        restore_predictor(restored.as_mut(), &history);
        let now = LocalTime(41_000);
        assert_eq!(restored.predict(now), live.predict(now));
        let b = restored.predict(now).into_iter().find(|p| p.app == "/bin/b").unwrap();
        assert!(b.probability > 0.5, "after a, b came every time: {b:?}");
        assert!(restored.predict(now).iter().find(|p| p.app == "/bin/a").unwrap().probability > 0.0, "a is not left running");
    }

    #[test]
    fn each_application_gets_its_own_fetch_in_the_planners_order() {
        let a = profile(&[("/usr/lib/shared.so", &[(0, 4, 1)]), ("/usr/bin/a", &[(0, 4, 2)])]);
        let b = profile(&[("/usr/bin/b", &[(0, 4, 1)])]);
        let probs =
            vec![AppProbability { app: "a".into(), probability: 0.2 }, AppProbability { app: "b".into(), probability: 0.7 }];
        let fps = vec![footprint_of("a", &a), footprint_of("b", &b)];
        let planned = plan(&probs, &fps, MemoryBudget::of(1 << 30), &PlannerConfig::default());
        let profiles = BTreeMap::from([("a".to_string(), Arc::new(a)), ("b".to_string(), Arc::new(b))]);
        let fetch = fetch_plans_of(&planned, &profiles, 4096);
        let paths: Vec<Vec<String>> =
            fetch.iter().map(|(_, p)| p.files().iter().map(|f| f.path.to_string_lossy().into_owned()).collect()).collect();
        assert_eq!(paths[0], vec!["/usr/bin/b"], "the likelier application is fetched first");
        assert_eq!(paths.len(), 2);
        assert!(paths[1].contains(&"/usr/bin/a".to_string()));
    }

    #[test]
    fn each_fetch_repeats_its_applications_lookups() {
        use augur_core::model::profile::{Lookup, LookupKind};
        let mut a = profile(&[("/usr/bin/a", &[(0, 4, 1)])]);
        a.lookups = vec![Lookup { path: "/usr/share/a".into(), kind: LookupKind::Dir }];
        let b = profile(&[("/usr/bin/b", &[(0, 4, 1)])]);
        let probs =
            vec![AppProbability { app: "a".into(), probability: 0.9 }, AppProbability { app: "b".into(), probability: 0.5 }];
        let fps = vec![footprint_of("a", &a), footprint_of("b", &b)];
        let planned = plan(&probs, &fps, MemoryBudget::of(1 << 30), &PlannerConfig::default());
        let profiles = BTreeMap::from([("a".to_string(), Arc::new(a.clone())), ("b".to_string(), Arc::new(b))]);
        let fetch = fetch_plans_of(&planned, &profiles, 4096);
        assert_eq!(fetch[0].0, "a");
        assert_eq!(fetch[0].1.lookups(), a.lookups.as_slice());
        assert!(fetch[1].1.lookups().is_empty());
    }

    #[test]
    fn a_footprint_is_kept_while_its_profile_is_and_only_for_the_next_round() {
        let mut cache = FootprintCache::default();
        let a = Arc::new(profile(&[("/usr/bin/a", &[(0, 4, 0)])]));
        let b = Arc::new(profile(&[("/usr/bin/b", &[(0, 4, 0)])]));
        let first = cache.footprint("a", &a);
        cache.footprint("b", &b);
        cache.round_done();
        assert!(Arc::ptr_eq(&first, &cache.footprint("a", &a)), "same profile: the footprint is kept");
        cache.round_done();
        assert_eq!(cache.len(), 1, "b was not asked for in the last round: dropped");
        // A new profile (the application learned a launch): a new footprint.
        let relearned = Arc::new(profile(&[("/usr/bin/a", &[(0, 8, 0)])]));
        let second = cache.footprint("a", &relearned);
        assert!(!Arc::ptr_eq(&first, &second));
        assert_eq!(second.ranges()[0].range.len, 8);
        cache.round_done();
        cache.round_done();
        assert!(cache.is_empty());
    }

    #[test]
    fn footprints_follow_first_use_and_plans_become_fetches() {
        let b = profile(&[("/usr/lib/libb.so", &[(0, 10, 5)]), ("/usr/bin/b", &[(100, 4, 1), (0, 2, 9)])]);
        let fp = footprint_of("b", &b);
        let order: Vec<(&str, u64)> = fp.ranges().iter().map(|r| (&*r.file, r.range.start)).collect();
        assert_eq!(order, vec![("/usr/bin/b", 100), ("/usr/lib/libb.so", 0), ("/usr/bin/b", 0)]);
        let probs = vec![AppProbability { app: "b".into(), probability: 0.9 }];
        let planned = plan(&probs, &[fp], MemoryBudget::of(12 * 4096), &PlannerConfig::default());
        assert_eq!(planned.bytes, 12 * 4096);
        let profiles = BTreeMap::from([("b".to_string(), Arc::new(b))]);
        let fetch = fetch_plans_of(&planned, &profiles, 4096);
        assert_eq!(fetch.len(), 1);
        assert_eq!(fetch[0].1.files().iter().map(|f| f.page_count()).sum::<u64>(), 12);
    }
}
