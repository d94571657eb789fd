//! `augur-bench dear`: DEAR's four single-application reference patterns (sequential, looping,
//! temporally clustered, probabilistic), kernel alone against augur's daemon as installed
//! ([`augur_bench::dear`]); and the hidden `augur-bench dear-reader`, the reading process it runs.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use augur_bench::aasfp::ReaderCgroup;
use augur_bench::dear::{self, CASES, Case, CaseCosts, Setup, Shape};
use augur_bench::error::{BenchError, Result};
use augur_bench::prefetchers::{self, DaemonFiles};

use super::aasfp::{report_ahead, start_daemon_in};
use augur_bench::machine::MachineProfile;

use super::prepare;

/// Arguments of `augur-bench dear`.
#[derive(Debug, Args)]
pub struct DearArgs {
    /// Runs per case and condition.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Size of the file read, MiB.
    #[arg(long, default_value_t = 1024)]
    pub file_mib: u64,
    /// Memory left to the reader (the limit of its memory cgroup), MiB.
    #[arg(long, default_value_t = 256)]
    pub memory_mib: u64,
    /// The file read (created once, on a disk-backed file system).
    #[arg(long, default_value = "/var/tmp/augur-bench-aasfp/data")]
    pub file: PathBuf,
    /// Where the daemon keeps its state, socket and log.
    #[arg(long, default_value = "/var/tmp/augur-bench-dear/daemon")]
    pub daemon_dir: PathBuf,
    /// Only these cases (sequential, looping, clustered, probabilistic); default all.
    #[arg(long = "case")]
    pub cases: Vec<Case>,
    /// A configuration file for the daemon in place of packaging/config.toml (its state and
    /// socket paths replaced).
    #[arg(long)]
    pub augur_config: Option<PathBuf>,
    /// Unmeasured runs of every case before the measured ones, under each condition.
    #[arg(long, default_value_t = 1)]
    pub training_runs: usize,
    /// The machine profile: as-is, or the small slow machine (`small-memory+slow-disk`: a
    /// balloon leaving 2 GiB and the disk throttled to 200 reads and 40 MB a second for the
    /// reader and the daemon together, in the reader's cgroup). Give the small machine a smaller
    /// file and memory: each 8 KiB read of the random readers is one of its 200 operations a
    /// second.
    #[arg(long = "machine", value_name = "PROFILE", default_value = "as-is")]
    pub machine: MachineProfile,
}

/// Arguments of `augur-bench dear-reader`.
#[derive(Debug, Args)]
pub struct ReaderArgs {
    /// The case to read.
    #[arg(long)]
    pub case: Case,
    /// The cgroups to move into first (the memory cgroup, and the blkio one when apart).
    #[arg(long = "cgroup", required = true)]
    pub cgroups: Vec<PathBuf>,
    /// The loop's length, MiB.
    #[arg(long)]
    pub loop_mib: u64,
    /// Passes over the loop.
    #[arg(long)]
    pub passes: u64,
    /// Region of one temporal cluster, MiB.
    #[arg(long)]
    pub cluster_mib: u64,
    /// Reads of the clustered case.
    #[arg(long)]
    pub clustered_reads: u64,
    /// Reads of the probabilistic case.
    #[arg(long)]
    pub probabilistic_reads: u64,
    /// The file.
    pub file: PathBuf,
}

/// Runs the reader: into the cgroup, read, print its cost line.
pub fn run_reader(args: ReaderArgs) -> Result<ExitCode> {
    augur_bench::aasfp::enter_cgroup(&args.cgroups)?;
    let size = std::fs::metadata(&args.file).map_err(|e| BenchError::io(format!("reading {}", args.file.display()), e))?.len();
    let shape = Shape {
        file_bytes: size,
        loop_bytes: args.loop_mib << 20,
        passes: args.passes,
        cluster_bytes: args.cluster_mib << 20,
        clustered_reads: args.clustered_reads,
        probabilistic_reads: args.probabilistic_reads,
    };
    let cost = dear::read_case(&args.file, args.case, &shape)?;
    println!("{}", cost.line());
    Ok(ExitCode::SUCCESS)
}

/// Runs the benchmark; prints the Markdown table.
pub fn run(args: DearArgs) -> Result<ExitCode> {
    augur_os::privilege::require_root("augur-bench dear")?;
    if args.runs == 0 {
        return Err(BenchError::Usage("--runs must be at least 1".into()));
    }
    let cases: Vec<Case> = if args.cases.is_empty() { CASES.to_vec() } else { args.cases.clone() };
    let file_bytes = args.file_mib << 20;
    let memory_bytes = args.memory_mib << 20;
    augur_bench::page_cache::ensure_file(&args.file, file_bytes)?;
    let shape = Shape::for_memory(file_bytes, memory_bytes);
    let me = std::env::current_exe().map_err(|e| BenchError::io("finding the augur-bench executable", e))?;
    let readers_dir = args.daemon_dir.parent().unwrap_or(std::path::Path::new("/var/tmp")).join("readers");
    let readers = augur_bench::aasfp::reader_programs(&me, &readers_dir, &cases, |c| format!("dear-{}", c.arg()))?;
    let reader = |case: Case| readers.iter().find(|(c, _)| *c == case).map_or(me.as_path(), |(_, p)| p.as_path());
    let files = DaemonFiles {
        dir: args.daemon_dir.clone(),
        augur_exe: prefetchers::augur_beside_me()?,
        preload_ng_exe: prefetchers::preload_ng_exe(),
        cycle_secs: 20,
    };
    let installed = match &args.augur_config {
        Some(p) => std::fs::read_to_string(p).map_err(|e| BenchError::io(format!("reading {}", p.display()), e))?,
        None => prefetchers::SHIPPED_AUGUR_CONFIG.to_string(),
    };
    let _ = std::fs::remove_file(files.augur_state());
    let machine = prepare(args.machine)?;
    let cgroup = ReaderCgroup::create_counting(memory_bytes, &args.file, machine.throttle)?;
    let show = |what: &str, case: Case, c: &dear::RunCost| {
        eprintln!(
            "{what}: {case}, {:.0} blocks of 8 KiB read ({:.0} by the reader) in {:.0} I/Os, {:.2} s (stall {:.2}, system {:.2}, user {:.2})",
            c.block_ios(),
            c.reader_block_ios(),
            c.requests(),
            c.elapsed,
            c.stall(),
            c.system,
            c.user
        );
    };
    for run in 1..=args.training_runs {
        for case in &cases {
            let c = dear::time_case(reader(*case), &args.file, *case, &shape, &cgroup)?;
            show(&format!("training {run}/{}, kernel alone (not counted)", args.training_runs), *case, &c);
        }
        let daemon = start_daemon_in(&files, &installed, &cgroup.dirs())?;
        for case in &cases {
            let c = dear::time_case(reader(*case), &args.file, *case, &shape, &cgroup)?;
            show(&format!("training {run}/{}, augur (not counted)", args.training_runs), *case, &c);
        }
        report_ahead(&files);
        daemon.stop()?;
    }
    let mut costs: Vec<(Case, CaseCosts)> = cases.iter().map(|c| (*c, CaseCosts::default())).collect();
    for run in 1..=args.runs {
        for (case, c) in costs.iter_mut() {
            let r = dear::time_case(reader(*case), &args.file, *case, &shape, &cgroup)?;
            show(&format!("run {run}/{}, kernel alone", args.runs), *case, &r);
            c.kernel.push(r);
        }
        let daemon = start_daemon_in(&files, &installed, &cgroup.dirs())?;
        for (case, c) in costs.iter_mut() {
            let r = dear::time_case(reader(*case), &args.file, *case, &shape, &cgroup)?;
            show(&format!("run {run}/{}, augur", args.runs), *case, &r);
            c.augur.push(r);
        }
        report_ahead(&files);
        daemon.stop()?;
    }
    drop(cgroup);
    let setup = Setup { shape, memory_bytes, runs: args.runs, machine: machine.profile_name() };
    print!("{}", dear::markdown(&setup, &costs));
    Ok(ExitCode::SUCCESS)
}
