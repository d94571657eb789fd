//! `augur-bench --suite`: runs a suite file under one or more machine profiles. Per profile:
//! apply the profile, prove it bites (a cold read's throughput), start the X server when desktop
//! workloads need one, train the prefetchers (preload, preload-ng and one augur daemon watch
//! every workload for `training_secs`), then, interleaved run by run, time each workload cold,
//! warm, under preload 0.6.4, under preload-ng, under augur's daemon as installed (and the
//! variants the suite file asks for: exec-time replay only, prediction); then the usage day and
//! the costs. A prefetcher that cannot run is said so in the progress and the report, and left
//! out. Writes JSON, Markdown and SVG after each profile, so an interrupted run keeps what it
//! finished. Every guard (balloon, cgroup, daemons, X server) is undone on return, error or
//! signal.
//!
//! It orchestrates; launching, machine profiles, daemons, statistics and rendering live in their
//! own modules.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{BenchError, IoContext, Result};
use crate::interrupt;
use crate::launch::{self, LaunchEnv};
use crate::machine::{self, ActiveMachine, MachineProfile, MachineSettings};
use crate::page_cache;
use crate::prefetchers::{self, DaemonFiles, Prefetcher, RunningDaemon, StartupEnd, augur_startup_busy};
use crate::suite_file::{Condition, Ready, Suite, Workload};
use crate::suite_report::{
    ConditionReport, ConditionStatus, DaemonCost, PrefetcherStatus, ProfileReport, SuiteReport, TrainingRecord, WorkloadReport,
};
use crate::xdisplay::{WindowWatcher, XServer};
use crate::{suite_chart, suite_markdown};
use augur_os::fetch::drop_all_caches;
use augur_os::privilege::require_root;

/// The longest the idle measurement waits for the daemons' start-up work to be over (augur's
/// first fetch yields to preload-ng's first cycle beside it, which reads gigabytes).
const STARTUP_LIMIT: Duration = Duration::from_secs(240);

/// What to run and where to write.
#[derive(Debug, Clone)]
pub struct SuiteOptions {
    /// The suite file.
    pub suite_path: PathBuf,
    /// Profiles to run, in order.
    pub profiles: Vec<MachineProfile>,
    /// Their knobs.
    pub settings: MachineSettings,
    /// Overrides the suite's `runs`.
    pub runs: Option<u32>,
    /// Overrides the suite's `training_secs`.
    pub training_secs: Option<u64>,
    /// Where `suite.json`, `suite.md`, `suite.svg` and logs go.
    pub output_dir: PathBuf,
    /// Where generated inputs (file tree, C project, read-check file, HOME of the apps) are kept
    /// between runs.
    pub cache_dir: PathBuf,
    /// Only these workloads (all when empty).
    pub only: Vec<String>,
    /// Skip the usage day.
    pub skip_day: bool,
    /// Skip the cost measurements.
    pub skip_cost: bool,
    /// Skip the launch-time tables (training, the usage day and the costs still run).
    pub skip_tables: bool,
    /// Apply each profile, measure that it bites, and stop.
    pub check_profiles_only: bool,
    /// The command line, recorded in the outputs.
    pub command_line: String,
    /// The augur executable to run the daemon with.
    pub augur_exe: PathBuf,
    /// The preload-ng executable (reported as not measured when missing).
    pub preload_ng_exe: PathBuf,
}

/// The suite file as this run uses it: `--only`, `--runs` and `--training-secs` applied, and
/// augur's variant that would run what augur as installed runs dropped (see
/// [`Prefetcher::same_as_installed`]), with a line saying so. Needs no privilege.
pub fn prepared_suite(opts: &SuiteOptions) -> Result<(Suite, Vec<String>)> {
    let mut suite = Suite::load(&opts.suite_path)?;
    if !opts.only.is_empty() {
        if let Some(unknown) = opts.only.iter().find(|o| !suite.workloads.iter().any(|w| &&w.name == o)) {
            return Err(BenchError::Usage(format!("--only: no workload named `{unknown}` in {}", opts.suite_path.display())));
        }
        suite.workloads.retain(|w| opts.only.contains(&w.name));
    }
    if let Some(r) = opts.runs {
        if r == 0 {
            return Err(BenchError::Usage("--runs must be at least 1".into()));
        }
        suite.runs = r;
    }
    if let Some(t) = opts.training_secs {
        suite.training_secs = t;
    }
    let mut notes = Vec::new();
    if suite.conditions.contains(&Condition::Augur) {
        let predicts = prefetchers::shipped_augur_predicts();
        suite.conditions.retain(|c| {
            let same = prefetcher_of(*c).is_some_and(Prefetcher::same_as_installed);
            if same {
                notes.push(format!(
                    "{}: not measured separately: augur as installed already runs with prediction {} (packaging/config.toml)",
                    c.name(),
                    if predicts { "on" } else { "off" }
                ));
            }
            !same
        });
    }
    Ok((suite, notes))
}

/// Progress lines for stderr.
pub type Progress<'a> = &'a dyn Fn(&str);

/// The size of the file read cold to prove a profile's disk throttle.
const CHECK_FILE_BYTES: u64 = 128 << 20;

/// Runs the suite; returns the report, also written to the output directory.
pub fn run(opts: &SuiteOptions, progress: Progress<'_>) -> Result<SuiteReport> {
    require_root("augur-bench --suite")?;
    let started = Instant::now();
    let (suite, notes) = prepared_suite(opts)?;
    for n in &notes {
        progress(n);
    }
    let estimate = crate::suite_estimate::estimate(&suite, &opts.profiles, opts);
    progress(&format!("planned duration: {}", crate::suite_estimate::describe(&estimate)));
    interrupt::install()?;
    if let Some(msg) = machine::clean_leftovers() {
        progress(&msg);
    }
    fs::create_dir_all(&opts.output_dir).context(|| format!("creating {}", opts.output_dir.display()))?;
    fs::create_dir_all(&opts.cache_dir).context(|| format!("creating {}", opts.cache_dir.display()))?;
    let mut report = SuiteReport {
        version: crate::suite_report::REPORT_VERSION,
        augur_version: env!("CARGO_PKG_VERSION").into(),
        kernel: kernel_release(),
        machine: machine_description(),
        started_utc: utc_now(),
        command: opts.command_line.clone(),
        notes,
        estimated_secs: estimate.iter().map(|(_, s)| s).sum(),
        profiles: Vec::new(),
        elapsed_secs: 0.0,
        augur_log: None,
    };
    // One directory of daemon state for the whole run: the prefetchers are trained once, under
    // the first profile, and every later profile starts from what they learned.
    let daemons_dir = opts.output_dir.join("daemons");
    if daemons_dir.exists() {
        fs::remove_dir_all(&daemons_dir).context(|| format!("clearing {}", daemons_dir.display()))?;
    }
    let mut trained_under: Option<String> = None;
    for &profile in &opts.profiles {
        interrupt::check()?;
        progress(&format!(
            "profile {profile}: applying (in a VM, free memory is touched once so the host backs it: minutes the first time)"
        ));
        // What the earlier profiles' cold launches read: the usage day's working sets for the
        // applications this profile's tables do not time (a cold launch reads the same files
        // whatever memory is left).
        let mut earlier_sets = std::collections::BTreeMap::new();
        for earlier in &report.profiles {
            earlier_sets.extend(cold_working_sets(&suite, earlier));
        }
        let p = run_profile(&suite, opts, profile, &mut trained_under, &earlier_sets, progress)?;
        report.profiles.push(p);
        report.elapsed_secs = started.elapsed().as_secs_f64();
        write_outputs(&report, &opts.output_dir)?;
    }
    report.elapsed_secs = started.elapsed().as_secs_f64();
    report.augur_log = fs::read_to_string(crate::prefetchers::augur_log_in(&daemons_dir))
        .ok()
        .map(|text| crate::prefetchers::AugurLogSummary::of_log(&text));
    write_outputs(&report, &opts.output_dir)?;
    progress(&format!("took {:.0} min (planned {:.0} min)", report.elapsed_secs / 60.0, report.estimated_secs / 60.0));
    Ok(report)
}

/// Writes suite.json, suite.md and suite.svg into `dir`.
pub fn write_outputs(report: &SuiteReport, dir: &Path) -> Result<()> {
    let json = serde_json::to_string_pretty(report).map_err(|e| BenchError::io("serialising the report", e.into()))?;
    for (name, text) in
        [("suite.json", json + "\n"), ("suite.md", suite_markdown::render(report)), ("suite.svg", suite_chart::render(report))]
    {
        let p = dir.join(name);
        fs::write(&p, text).context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

/// Everything a profile's measurements share.
struct Session<'a> {
    suite: &'a Suite,
    env: LaunchEnv,
    watcher: Option<WindowWatcher>,
    files: DaemonFiles,
    available: Vec<Prefetcher>,
    /// The prefetchers the suite file's conditions run, in order.
    measured: Vec<Prefetcher>,
    progress: Progress<'a>,
    /// Where bytes read from disk are counted under this profile.
    disk: crate::throttle::DiskReadCounter,
}

/// A workload's working set under one profile: what its cold launches read from disk (median),
/// by workload index.
fn cold_working_sets(suite: &Suite, report: &ProfileReport) -> std::collections::BTreeMap<usize, u64> {
    report
        .workloads
        .iter()
        .filter_map(|w| {
            let i = suite.workloads.iter().position(|x| x.name == w.name)?;
            let cold = w.condition(Condition::Cold)?;
            let mut v = cold.launch_read_bytes.clone();
            v.sort_unstable();
            v.get(v.len() / 2).map(|b| (i, *b))
        })
        .collect()
}

fn run_profile(
    suite: &Suite,
    opts: &SuiteOptions,
    profile: MachineProfile,
    trained_under: &mut Option<String>,
    earlier_sets: &std::collections::BTreeMap<usize, u64>,
    progress: Progress<'_>,
) -> Result<ProfileReport> {
    let started = Instant::now();
    let check_file = opts.cache_dir.join("read-check.bin");
    page_cache::ensure_file(&check_file, CHECK_FILE_BYTES)?;
    let mut machine = ActiveMachine::apply(profile, &opts.settings)?;
    let bps = page_cache::cold_read_throughput(&check_file)?;
    machine.record.cold_read_bytes_per_sec = Some(bps);
    progress(&format!(
        "profile {profile}: MemAvailable {} MiB (was {} MiB, balloon {} MiB); cold read {:.1} MB/s{}{}",
        machine.record.mem_available_after >> 20,
        machine.record.mem_available_before >> 20,
        machine.record.balloon_locked_bytes >> 20,
        bps / 1e6,
        machine.record.throttle_read_back.as_ref().map(|t| format!("; throttle {t}")).unwrap_or_default(),
        machine.record.free_memory_backed.as_ref().map(|b| format!("; {b}")).unwrap_or_default()
    ));
    let mut report = ProfileReport { machine: machine.record.clone(), ..Default::default() };
    if opts.check_profiles_only {
        report.elapsed_secs = started.elapsed().as_secs_f64();
        return Ok(report);
    }

    let session_dir = opts.output_dir.join(format!("session-{}", profile.name().replace('+', "-")));
    if session_dir.exists() {
        fs::remove_dir_all(&session_dir).context(|| format!("clearing {}", session_dir.display()))?;
    }
    fs::create_dir_all(&session_dir).context(|| format!("creating {}", session_dir.display()))?;
    let needs_x = suite.workloads.iter().any(|w| w.ready == Ready::Window);
    let xserver = if needs_x { Some(XServer::start()?) } else { None };
    let mut env = LaunchEnv::new(opts.cache_dir.join("work"), session_dir.join("workloads.log"));
    let home = opts.cache_dir.join("home");
    let runtime = session_dir.join("xdg-runtime");
    for d in [&home, &runtime] {
        fs::create_dir_all(d).context(|| format!("creating {}", d.display()))?;
    }
    let _ = fs::set_permissions(&runtime, std::os::unix::fs::PermissionsExt::from_mode(0o700));
    env.vars.insert("HOME".into(), home.to_string_lossy().into());
    env.vars.insert("XDG_RUNTIME_DIR".into(), runtime.to_string_lossy().into());
    env.vars.insert("NO_AT_BRIDGE".into(), "1".into());
    if let Some(x) = &xserver {
        env.vars.insert("DISPLAY".into(), x.display_name());
    }
    env.prepare(&suite.workloads)?;
    let watcher = match &xserver {
        Some(x) => Some(WindowWatcher::connect(x.display)?),
        None => None,
    };
    // preload's cycle is its default, 20 s; preload-ng's and augur's re-plan interval are set to it.
    let files = DaemonFiles {
        dir: opts.output_dir.join("daemons"),
        augur_exe: opts.augur_exe.clone(),
        preload_ng_exe: opts.preload_ng_exe.clone(),
        cycle_secs: 20,
    };
    let measured: Vec<Prefetcher> = suite.conditions.iter().filter_map(|c| prefetcher_of(*c)).collect();
    let disk = machine.disk_reads()?;
    let mut s = Session { suite, env, watcher, files, available: Vec::new(), measured, progress, disk };

    let cost_here = !opts.skip_cost
        && suite.cost.as_ref().is_some_and(|c| c.profiles.is_empty() || c.profiles.iter().any(|p| p == profile.name()));
    // Which prefetchers can run here.
    for kind in Prefetcher::ALL {
        if !s.measured.contains(&kind) && !cost_here {
            continue;
        }
        let status = probe(kind, &s.files);
        if let Some(line) = status.not_measured_line() {
            progress(&line);
        } else {
            s.available.push(kind);
        }
        report.prefetchers.push(status);
    }

    // Training: every available prefetcher watches every workload, once per run: a later
    // profile starts from what they learned (and from every measured launch since).
    let mut learning = match trained_under.as_ref() {
        None => {
            let l = train(&mut s, &mut report)?;
            *trained_under = Some(profile.name().to_string());
            l
        }
        Some(first) => {
            progress(&format!("training: done under profile {first}; the prefetchers keep what they learned there"));
            report.training_shared_from = Some(first.clone());
            Vec::new()
        }
    };
    machine.check()?;

    // Idle cost.
    if let (Some(cost), true) = (&suite.cost, cost_here) {
        let mut daemons = idle_cost(&mut s, cost.idle_secs)?;
        for d in &mut daemons {
            if let Some(l) = learning.iter().find(|l| l.prefetcher == d.prefetcher) {
                d.learning_secs = l.learning_secs;
                d.learning_cpu_secs = l.learning_cpu_secs;
                d.learning_peak_rss_bytes = l.learning_peak_rss_bytes;
                d.learning_read_bytes = l.learning_read_bytes;
            }
        }
        learning = daemons;
        report.cost = Some(crate::suite_report::CostReport { daemons: learning.clone(), slowdowns: Vec::new() });
    }

    // The interleaved measurements, of the workloads this profile measures.
    let here: Vec<&Workload> = suite.workloads.iter().filter(|w| !opts.skip_tables && w.measured_under(profile.name())).collect();
    report.workloads = here
        .iter()
        .map(|w| WorkloadReport {
            name: w.name.clone(),
            command: w.command.clone(),
            ready: w.ready,
            conditions: suite.conditions.iter().map(|c| ConditionReport::new(*c)).collect(),
        })
        .collect();
    for (wi, w) in here.iter().enumerate() {
        for c in &mut report.workloads[wi].conditions {
            if let Some(kind) = prefetcher_of(c.condition) {
                if !s.available.contains(&kind) {
                    c.status = ConditionStatus::Unavailable;
                    let why = report.prefetchers.iter().find(|p| p.name == kind.name()).and_then(|p| p.reason.clone());
                    c.reasons.push(why.unwrap_or_else(|| "not available".into()));
                }
            }
        }
        let _ = w;
    }
    // A measurement that timed out is not repeated in this profile's later runs: another 30-60 s
    // timeout (after the prefetcher's whole first cycle) would cost minutes and show nothing new.
    let mut timed_out: std::collections::BTreeMap<(usize, usize), u32> = std::collections::BTreeMap::new();
    for run in 1..=suite.runs {
        for (wi, w) in here.iter().copied().enumerate() {
            let mut warm_now = false;
            for ci in 0..suite.conditions.len() {
                interrupt::check()?;
                machine.check()?;
                let cond = suite.conditions[ci];
                let slot = &mut report.workloads[wi].conditions[ci];
                if slot.status == ConditionStatus::Unavailable {
                    warm_now = false;
                    continue;
                }
                if let Some(first) = timed_out.get(&(wi, ci)) {
                    progress(&format!(
                        "{profile} run {run}/{}: {} {}: not repeated (timed out in run {first})",
                        suite.runs,
                        w.name,
                        cond.name()
                    ));
                    warm_now = false;
                    continue;
                }
                match measure(&mut s, w, cond, warm_now) {
                    Ok(m) => {
                        progress(&format!("{profile} run {run}/{}: {} {}: {:.3} s", suite.runs, w.name, cond.name(), m.secs));
                        slot.samples.push(m.secs);
                        slot.prefetch_read_bytes.extend(m.prefetch_read);
                        slot.cache_growth_bytes.extend(m.cache_growth);
                        slot.preload_decision_bytes.extend(m.preload_decision);
                        slot.launch_read_bytes.push(m.launch_read);
                        warm_now = true;
                    }
                    Err(e) => {
                        interrupt::check()?;
                        progress(&format!("{profile} run {run}/{}: {} {}: failed: {e}", suite.runs, w.name, cond.name()));
                        if matches!(e, BenchError::TimedOut { .. }) {
                            timed_out.insert((wi, ci), run);
                            if run < suite.runs {
                                slot.reasons.push(format!("{e} (run {run}; not repeated in later runs)"));
                            } else {
                                slot.reasons.push(e.to_string());
                            }
                        } else {
                            slot.reasons.push(e.to_string());
                        }
                        warm_now = false;
                    }
                }
            }
        }
    }
    for w in &mut report.workloads {
        w.finish();
    }

    let day_here = suite
        .day
        .as_ref()
        .filter(|d| !opts.skip_day && (d.profiles.is_empty() || d.profiles.iter().any(|p| p == profile.name())));
    if let Some(day) = day_here {
        // This profile's cold launches first, then the earlier profiles'.
        let mut working_sets = cold_working_sets(suite, &report);
        for (&i, &b) in earlier_sets {
            working_sets.entry(i).or_insert(b);
        }
        let memory_left = machine.record.mem_available_after;
        report.day = Some(crate::usage_day::run(&mut s.day_context(memory_left, profile.small_memory(), &working_sets), day)?);
    }
    if let (Some(cost), true) = (&suite.cost, cost_here) {
        let slowdowns = crate::cost::slowdowns(&mut s.cost_context(&opts.cache_dir), cost)?;
        if let Some(c) = report.cost.as_mut() {
            c.slowdowns = slowdowns;
        }
    }
    machine.check()?;
    drop(s);
    drop(xserver);
    report.elapsed_secs = started.elapsed().as_secs_f64();
    drop(machine);
    Ok(report)
}

impl<'a> Session<'a> {
    fn day_context<'b>(
        &'b mut self,
        memory_left: u64,
        small_memory: bool,
        working_sets: &'b std::collections::BTreeMap<usize, u64>,
    ) -> crate::usage_day::DayContext<'b> {
        crate::usage_day::DayContext {
            workloads: &self.suite.workloads,
            env: &self.env,
            watcher: self.watcher.as_mut(),
            files: &self.files,
            available: &self.available,
            measured: &self.measured,
            cycle_wait: Duration::from_secs(self.suite.cycle_wait_secs),
            progress: self.progress,
            disk: &self.disk,
            memory_left,
            working_sets,
            small_memory,
        }
    }

    fn cost_context(&mut self, cache_dir: &Path) -> crate::cost::CostContext<'_> {
        crate::cost::CostContext {
            cache_dir: cache_dir.to_path_buf(),
            env: &self.env,
            files: &self.files,
            available: &self.available,
            progress: self.progress,
        }
    }
}

/// The prefetcher a condition runs, if any.
pub fn prefetcher_of(c: Condition) -> Option<Prefetcher> {
    match c {
        Condition::Cold | Condition::Warm => None,
        Condition::Preload => Some(Prefetcher::Preload),
        Condition::PreloadNg => Some(Prefetcher::PreloadNg),
        Condition::Augur => Some(Prefetcher::Augur),
        Condition::AugurReplay => Some(Prefetcher::AugurReplay),
        Condition::AugurPredict => Some(Prefetcher::AugurPredict),
    }
}

fn probe(kind: Prefetcher, files: &DaemonFiles) -> PrefetcherStatus {
    let result = (|| -> Result<()> {
        if kind == Prefetcher::Preload && !launch::command_exists("preload") {
            return Err(BenchError::Command {
                command: "preload".into(),
                detail: "not installed (run scripts/bench-setup)".into(),
            });
        }
        if kind == Prefetcher::PreloadNg && !files.preload_ng_exe.is_file() {
            return Err(BenchError::Command {
                command: kind.name().into(),
                detail: prefetchers::peer_not_found(&files.preload_ng_exe),
            });
        }
        let mut d = RunningDaemon::start(kind, files)?;
        d.wait_ready(Duration::from_secs(30))?;
        if kind.is_augur() && kind.prefetches_ahead() {
            d.wait_planning_round(files, Duration::from_secs(files.cycle_secs + 10))?;
        }
        d.stop()
    })();
    PrefetcherStatus { name: kind.name().into(), available: result.is_ok(), reason: result.err().map(|e| e.to_string()) }
}

/// One successful measurement.
struct Measured {
    secs: f64,
    prefetch_read: Option<u64>,
    cache_growth: Option<u64>,
    preload_decision: Option<u64>,
    /// Bytes read from disk from the launch's spawn to its readiness (launch and prefetcher).
    launch_read: u64,
}

fn measure(s: &mut Session<'_>, w: &Workload, cond: Condition, warm_now: bool) -> Result<Measured> {
    let mut m = Measured { secs: 0.0, prefetch_read: None, cache_growth: None, preload_decision: None, launch_read: 0 };
    match cond {
        Condition::Cold => {
            drop_all_caches()?;
        }
        Condition::Warm if !warm_now => {
            let l = launch::launch(&s.env, w, s.watcher.as_mut())?;
            if let Some(r) = l.running {
                r.close()?;
            }
        }
        _ => {}
    }
    let mut daemon = None;
    if let Some(kind) = prefetcher_of(cond) {
        drop_all_caches()?;
        let cached0 = page_cache::cached_bytes()?;
        let mut d = RunningDaemon::start(kind, &s.files)?;
        let limit = Duration::from_secs(s.suite.cycle_wait_secs);
        if !kind.prefetches_ahead() {
            // Replay happens at exec; there is nothing to wait for but the daemon itself.
            d.wait_ready(limit)?;
        } else {
            m.preload_decision = d.wait_first_cycle(&s.files, limit)?;
        }
        m.prefetch_read = Some(d.sample()?.read_bytes);
        m.cache_growth = Some(page_cache::cached_bytes()?.saturating_sub(cached0));
        daemon = Some(d);
    }
    let read0 = s.disk.bytes()?;
    let launched = launch::launch(&s.env, w, s.watcher.as_mut())?;
    m.launch_read = s.disk.bytes()?.saturating_sub(read0);
    m.secs = launched.secs;
    if let Some(r) = launched.running {
        r.close()?;
    }
    if let Some(mut d) = daemon {
        d.check_alive()?;
        d.stop()?;
    }
    Ok(m)
}

/// Training: starts every available prefetcher, runs each workload for `training_secs` while
/// they watch, stops them (they save their state). Returns each daemon's learning cost.
fn train(s: &mut Session<'_>, report: &mut ProfileReport) -> Result<Vec<DaemonCost>> {
    let kinds = prefetchers::watching(&s.available);
    if kinds.is_empty() || s.suite.training_secs == 0 {
        return Ok(Vec::new());
    }
    let mut daemons = Vec::new();
    for k in &kinds {
        let mut d = RunningDaemon::start(*k, &s.files)?;
        d.wait_ready(Duration::from_secs(30))?;
        daemons.push(d);
    }
    let start = Instant::now();
    let mut peak = vec![0u64; daemons.len()];
    let mut cpu_before = daemons.iter().map(|d| d.at_start.cpu_secs).collect::<Vec<_>>();
    for w in &s.suite.workloads {
        interrupt::check()?;
        (s.progress)(&format!(
            "training: {} for {} s ({} watching)",
            w.name,
            s.suite.training_secs,
            kinds.iter().map(|k| k.program()).collect::<Vec<_>>().join(", ")
        ));
        let t = Instant::now();
        let launches = match launch::train(&s.env, w, s.suite.training_secs, s.watcher.as_mut()) {
            Ok(n) => n,
            Err(e) => {
                interrupt::check()?;
                (s.progress)(&format!("training {}: failed: {e}", w.name));
                0
            }
        };
        // Each daemon's CPU over this workload, in the log: where the learning cost comes from.
        let mut spent = Vec::with_capacity(daemons.len());
        for (i, d) in daemons.iter_mut().enumerate() {
            d.check_alive()?;
            let now = d.sample()?;
            peak[i] = peak[i].max(now.rss_bytes);
            spent.push(format!("{} {:.2} s", d.kind.program(), now.cpu_secs - cpu_before[i]));
            cpu_before[i] = now.cpu_secs;
        }
        (s.progress)(&format!("training: {}: {launches} launches, daemon CPU: {}", w.name, spent.join(", ")));
        report.training.push(TrainingRecord {
            workload: w.name.clone(),
            launches,
            secs: t.elapsed().as_secs_f64(),
            preload_learned: None,
        });
    }
    let secs = start.elapsed().as_secs_f64();
    let mut costs = Vec::new();
    for (i, d) in daemons.into_iter().enumerate() {
        let end = d.sample()?;
        costs.push(DaemonCost {
            prefetcher: d.kind.program().into(),
            learning_secs: secs,
            learning_cpu_secs: end.cpu_secs - d.at_start.cpu_secs,
            learning_peak_rss_bytes: peak[i].max(end.rss_bytes),
            learning_read_bytes: end.read_bytes,
            ..DaemonCost::default()
        });
        d.stop()?;
    }
    if s.available.contains(&Prefetcher::Preload) {
        let state = fs::read_to_string(s.files.preload_state()).unwrap_or_default();
        for (t, w) in report.training.iter_mut().zip(&s.suite.workloads) {
            t.preload_learned = prefetchers::resolve_exe(&w.command[0]).map(|exe| prefetchers::preload_knows(&state, &exe));
        }
    }
    Ok(costs)
}

/// Idle cost: every daemon that watched training (augur once, see [`prefetchers::watching`])
/// started after training, side by side. Their start-up is measured first, until each is done
/// with its start-up work ([`StartupEnd`]: augur's first planning round and its fetch, preload's
/// first cycle), at most [`STARTUP_LIMIT`]; then, once every one is done and 5 s more passed,
/// the idle minute. An idle minute that began while a daemon still loaded what it learned
/// (augur's free-memory tier reads hundreds of MiB at start, yielding to preload-ng's reading
/// beside it) measured that start-up, not idleness.
fn idle_cost(s: &mut Session<'_>, idle_secs: u64) -> Result<Vec<DaemonCost>> {
    let kinds = prefetchers::watching(&s.available);
    let mut daemons = Vec::new();
    for k in &kinds {
        let mut d = RunningDaemon::start(*k, &s.files)?;
        d.wait_ready(Duration::from_secs(30))?;
        // From the daemon's spawn: what it does before it says it is ready (augur loads and
        // verifies its eBPF programs) is start-up too.
        let (at_start, started) = (d.at_start, d.started);
        daemons.push((d, at_start, started, StartupEnd::new()));
    }
    if daemons.is_empty() {
        return Ok(Vec::new());
    }
    (s.progress)("cost: daemons start up (until each is done loading what it planned)");
    let begun = Instant::now();
    let mut startup: Vec<Option<DaemonCost>> = vec![None; daemons.len()];
    while startup.iter().any(Option::is_none) {
        let over = begun.elapsed() >= STARTUP_LIMIT;
        for (i, (d, at_start, started, end)) in daemons.iter_mut().enumerate() {
            if startup[i].is_some() {
                continue;
            }
            d.check_alive()?;
            let now = d.sample()?;
            let busy = if d.kind.is_augur() { augur_startup_busy(d.status_json(&s.files).as_deref()) } else { None };
            if end.observe(started.elapsed(), now.read_bytes, busy) || over {
                let mut c = DaemonCost { prefetcher: d.kind.program().into(), ..DaemonCost::default() };
                c.set_startup(at_start, &now, started.elapsed().as_secs_f64(), !over);
                startup[i] = Some(c);
            }
        }
        if startup.iter().any(Option::is_none) {
            interrupt::sleep(Duration::from_millis(250))?;
        }
    }
    if let Ok(disk) = crate::throttle::root_disk() {
        page_cache::wait_until_disk_quiet(&disk, Duration::from_secs(1), Duration::from_secs(30))?;
    }
    (s.progress)(&format!("cost: daemons idle for {idle_secs} s"));
    interrupt::sleep(Duration::from_secs(5))?;
    let before: Vec<_> = daemons.iter().map(|(d, ..)| d.sample()).collect::<Result<_>>()?;
    let t = Instant::now();
    interrupt::sleep(Duration::from_secs(idle_secs))?;
    let secs = t.elapsed().as_secs_f64();
    let mut out = Vec::new();
    for (((d, ..), b), c) in daemons.into_iter().zip(before).zip(startup) {
        let after = d.sample()?;
        let mut c = c.unwrap_or_default();
        c.set_idle(&b, &after, secs);
        out.push(c);
        d.stop()?;
    }
    Ok(out)
}

fn kernel_release() -> String {
    fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_default()
}

fn machine_description() -> String {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, m)| m.trim().to_string()))
        .unwrap_or_else(|| "unknown CPU".into());
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let mem = augur_os::sense::procfs::meminfo("MemTotal").unwrap_or(0);
    let disk = crate::throttle::root_disk().unwrap_or_default();
    format!("{cpus} × {model}, {:.1} GiB memory, root disk {disk}", mem as f64 / (1u64 << 30) as f64)
}

/// Now as RFC 3339 UTC, from the system clock (no date crate: days from civil).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    format_utc(secs)
}

/// Formats Unix seconds as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn format_utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formatting() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_utc(1_700_000_000), "2023-11-14T22:13:20Z");
    }
}
