//! `augur-bench kroeger`: Kroeger and Long's four application benchmarks in their protocol
//! (warm-up runs, then measured runs with every cache dropped before each, I/O wait and elapsed
//! time, augur off against on, mean with 95 % intervals) under the chosen machine profiles
//! ([`augur_bench::kroeger`]); and the hidden `augur-bench kroeger-reader`, the long-running
//! reader it times.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;

use augur::daemon::control::{self, Request, Response};
use augur_bench::error::{BenchError, Result};
use augur_bench::interrupt;
use augur_bench::kroeger::{self, BENCHMARKS, Benchmark, DaemonRun, ReaderShape, Runs, Trees};
use augur_bench::machine::{self, ActiveMachine, MachineProfile, MachineSettings};
use augur_bench::measure::{self, RunSample};
use augur_bench::prefetchers::{self, DaemonFiles, Prefetcher, RunningDaemon};

/// Arguments of `augur-bench kroeger`.
#[derive(Debug, Args)]
pub struct KroegerArgs {
    /// Measured runs per benchmark, condition and machine profile (the paper: 20).
    #[arg(long, default_value_t = 20)]
    pub runs: usize,
    /// Unmeasured warm-up runs before them, per condition (the paper: 3); augur learns from them.
    #[arg(long, default_value_t = 3)]
    pub warmups: usize,
    /// Only these benchmarks (build, link, index, reader); default all four.
    #[arg(long = "benchmark")]
    pub benchmarks: Vec<Benchmark>,
    /// Machine profiles, in order; default as-is, then small-memory+slow-disk.
    #[arg(long = "machine", value_name = "PROFILE")]
    pub machines: Vec<MachineProfile>,
    /// Where the benchmarks' trees are made (once) and the daemon keeps its state, socket and log.
    #[arg(long, default_value = "/var/tmp/augur-bench-kroeger")]
    pub dir: PathBuf,
    /// The reader's files.
    #[arg(long, default_value_t = ReaderShape::default().files)]
    pub reader_files: usize,
    /// The reader's CPU work after each file, ms.
    #[arg(long, default_value_t = ReaderShape::default().work_ms)]
    pub reader_work_ms: u64,
    /// A configuration file for the daemon in place of packaging/config.toml (its state and
    /// socket paths replaced).
    #[arg(long)]
    pub augur_config: Option<PathBuf>,
    /// Print the plan and exit.
    #[arg(long)]
    pub plan_only: bool,
    /// Make the benchmarks' trees (copies, objects, the reader's files) and exit: no root, no
    /// daemon, nothing timed.
    #[arg(long)]
    pub setup_only: bool,
}

/// Arguments of `augur-bench kroeger-reader`.
#[derive(Debug, Args)]
pub struct ReaderArgs {
    /// CPU work after each file, ms.
    #[arg(long, default_value_t = ReaderShape::default().work_ms)]
    pub work_ms: u64,
    /// The directory holding `order` and the files it names.
    pub dir: PathBuf,
}

/// Runs the reader.
pub fn run_reader(args: ReaderArgs) -> Result<ExitCode> {
    kroeger::read_in_order(&args.dir, Duration::from_millis(args.work_ms))?;
    Ok(ExitCode::SUCCESS)
}

/// Seconds a daemon start and stop take, about (its state loaded and saved).
const DAEMON_ROUND_TRIP: Duration = Duration::from_secs(3);

/// One timed run (the last run's outputs undone before): sync and drop every cache, run.
fn timed_run(workload: &measure::Workload) -> Result<RunSample> {
    interrupt::check()?;
    augur_os::fetch::drop_all_caches()?;
    measure::run_to_exit(workload)
}

/// Prints what the daemon did to stderr.
fn report_daemon(files: &DaemonFiles) {
    if let Ok(Response::Status(r)) = control::request(&files.augur_socket(), &Request::Status) {
        let e = &r.events;
        eprintln!(
            "  daemon: {} page events, {} launches learned, {} replays, {} file prefetches ({} MiB loaded)",
            e.page_events,
            e.launches_learned,
            e.replays,
            e.file_prefetches,
            (e.file_prefetch_pages * 4096) >> 20
        );
    }
}

/// One run with augur's daemon: the last run's outputs undone (before the daemon starts, so the
/// clean-up is not learned as a run of the workload), the daemon started (its state kept from
/// the last), ready, the run, the daemon stopped (saving what it learned). With what the daemon
/// read and spent from its readiness to the end of the run.
fn run_with_augur(
    files: &DaemonFiles,
    installed: &str,
    trees: &Trees,
    b: Benchmark,
    w: &measure::Workload,
) -> Result<(RunSample, DaemonRun)> {
    trees.reset(b)?;
    let mut daemon = RunningDaemon::start_with(Prefetcher::Augur, files, installed)?;
    daemon.wait_ready(Duration::from_secs(30))?;
    let before = daemon.sample()?;
    let sample = timed_run(w);
    let after = daemon.sample();
    report_daemon(files);
    daemon.stop()?;
    let after = after?;
    let cost = DaemonRun {
        read_bytes: after.read_bytes.saturating_sub(before.read_bytes),
        cpu_secs: (after.cpu_secs - before.cpu_secs).max(0.0),
    };
    Ok((sample?, cost))
}

fn line(s: &RunSample) -> String {
    format!(
        "elapsed {:.2} s, user {:.2} s, sys {:.2} s, I/O wait {:.2} s, {} major faults, {} MiB read",
        s.elapsed_ms / 1000.0,
        s.user_ms / 1000.0,
        s.sys_ms / 1000.0,
        s.io_wait_ms / 1000.0,
        s.major_faults,
        (s.blocks_in * 512) >> 20
    )
}

/// Runs the benchmarks; prints one Markdown table per machine profile.
pub fn run(args: KroegerArgs) -> Result<ExitCode> {
    if args.runs == 0 {
        return Err(BenchError::Usage("--runs must be at least 1".into()));
    }
    let benchmarks: Vec<Benchmark> = if args.benchmarks.is_empty() { BENCHMARKS.to_vec() } else { args.benchmarks.clone() };
    let machines: Vec<MachineProfile> = if args.machines.is_empty() {
        vec![MachineProfile::AsIs, MachineProfile::SmallMemorySlowDisk]
    } else {
        args.machines.clone()
    };
    let per_condition = args.warmups + args.runs;
    let nominal: Duration = benchmarks.iter().map(|b| (b.nominal() + DAEMON_ROUND_TRIP / 2) * (2 * per_condition) as u32).sum();
    eprintln!(
        "plan: {} benchmark(s) [{}] × {} machine profile(s) [{}] × 2 conditions (augur off, augur on as installed) × ({} warm-up + {} measured) runs = {} runs, every cache dropped before each",
        benchmarks.len(),
        benchmarks.iter().map(|b| b.arg()).collect::<Vec<_>>().join(", "),
        machines.len(),
        machines.iter().map(|m| m.name()).collect::<Vec<_>>().join(", "),
        args.warmups,
        args.runs,
        benchmarks.len() * machines.len() * 2 * per_condition
    );
    eprintln!(
        "plan: about {:.0} min per profile on an idle machine as-is (longer on the slow disk; first use also makes the trees \
         under {}, a few minutes); a better estimate is printed after each benchmark's first run",
        nominal.as_secs_f64() / 60.0,
        args.dir.display()
    );
    if args.plan_only {
        return Ok(ExitCode::SUCCESS);
    }
    let trees = Trees {
        dir: args.dir.clone(),
        reader: ReaderShape { files: args.reader_files, work_ms: args.reader_work_ms, ..ReaderShape::default() },
    };
    std::fs::create_dir_all(&trees.dir).map_err(|e| BenchError::io(format!("creating {}", trees.dir.display()), e))?;
    if args.setup_only {
        for b in &benchmarks {
            if let Some(note) = trees.ensure(*b)? {
                eprintln!("set-up of {b}: {note}");
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    augur_os::privilege::require_root("augur-bench kroeger")?;
    interrupt::install()?;
    if let Some(msg) = machine::clean_leftovers() {
        eprintln!("{msg}");
    }
    for b in &benchmarks {
        interrupt::check()?;
        if let Some(note) = trees.ensure(*b)? {
            eprintln!("set-up of {b}: {note}");
        }
    }
    let me = std::env::current_exe().map_err(|e| BenchError::io("finding the augur-bench executable", e))?;
    let files = DaemonFiles {
        dir: args.dir.join("daemon"),
        augur_exe: prefetchers::augur_beside_me()?,
        preload_ng_exe: prefetchers::preload_ng_exe(),
        cycle_secs: 20,
    };
    let installed = match &args.augur_config {
        Some(p) => std::fs::read_to_string(p).map_err(|e| BenchError::io(format!("reading {}", p.display()), e))?,
        None => prefetchers::SHIPPED_AUGUR_CONFIG.to_string(),
    };
    let started = Instant::now();
    for profile in &machines {
        let mut active = ActiveMachine::apply(*profile, &MachineSettings::default())?;
        eprintln!(
            "machine {profile}: {} MiB available (of {} MiB){}",
            active.record.mem_available_after >> 20,
            active.record.mem_total >> 20,
            active.record.throttle_read_back.as_ref().map(|t| format!("; throttle {t}")).unwrap_or_default()
        );
        // A fresh state per profile: what augur knows comes from this profile's warm-up runs.
        let _ = std::fs::remove_file(files.augur_state());
        let mut rows: Vec<(Benchmark, Runs)> = Vec::new();
        for b in &benchmarks {
            let w = trees.workload(*b, &me)?;
            eprintln!("{profile} / {b}: {}", w.display());
            let bench_start = Instant::now();
            let mut runs = Runs::default();
            for i in 0..per_condition {
                active.check()?;
                let warm = i < args.warmups;
                let label = if warm {
                    format!("warm-up {}/{}", i + 1, args.warmups)
                } else {
                    format!("run {}/{}", i + 1 - args.warmups, args.runs)
                };
                trees.reset(*b)?;
                let off = timed_run(&w)?;
                eprintln!("  {label}, augur off: {}", line(&off));
                let (on, daemon) = run_with_augur(&files, &installed, &trees, *b, &w)?;
                eprintln!(
                    "  {label}, augur on:  {}; the daemon read {} MiB, {:.2} s CPU",
                    line(&on),
                    daemon.read_bytes >> 20,
                    daemon.cpu_secs
                );
                if i == 0 {
                    let round = bench_start.elapsed();
                    eprintln!(
                        "  {b} under {profile}: about {:.0} min for its {per_condition} rounds",
                        (round * per_condition as u32).as_secs_f64() / 60.0
                    );
                }
                if !warm {
                    runs.off.push(off);
                    runs.on.push(on);
                    runs.daemon.push(daemon);
                }
            }
            rows.push((*b, runs));
        }
        active.check()?;
        drop(active);
        println!("{}", kroeger::markdown(profile.name(), args.warmups, &rows));
    }
    eprintln!("kroeger: done in {:.0} min", started.elapsed().as_secs_f64() / 60.0);
    Ok(ExitCode::SUCCESS)
}
