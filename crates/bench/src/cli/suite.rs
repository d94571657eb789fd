//! `augur-bench --suite FILE`: the options of the benchmark suite (flattened into `augur-bench`)
//! and its run: progress on stderr, the summary table on stdout, JSON, Markdown and SVG in the
//! output directory.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use augur_bench::error::{BenchError, Result};
use augur_bench::machine::{MachineProfile, MachineSettings};
use augur_bench::suite::{self, SuiteOptions};
use augur_bench::suite_file::parse_bytes;
use augur_bench::throttle::DiskThrottle;

/// Options of the benchmark suite.
#[derive(Debug, Args)]
pub struct SuiteArgs {
    /// Run the benchmark suite described by this TOML file (see bench/suite.toml) instead of one
    /// command.
    #[arg(long, value_name = "FILE")]
    pub suite: Option<PathBuf>,
    /// Machine profile to run the suite under: as-is, small-memory, slow-disk or
    /// small-memory+slow-disk. Repeat to run several in one session.
    #[arg(long = "machine", value_name = "PROFILE", requires = "suite")]
    pub profiles: Vec<MachineProfile>,
    /// small-memory: memory left available (MemAvailable) by the locked balloon.
    #[arg(long, value_name = "SIZE", default_value = "2GiB", value_parser = parse_size, requires = "suite")]
    pub leave_available: u64,
    /// slow-disk: read operations per second allowed on the root disk.
    #[arg(long, value_name = "N", default_value_t = 200, requires = "suite")]
    pub read_iops: u64,
    /// slow-disk: read bytes per second allowed on the root disk.
    #[arg(long, value_name = "SIZE", default_value = "40MB", value_parser = parse_size, requires = "suite")]
    pub read_bps: u64,
    /// Seconds each workload runs while the prefetchers learn (overrides the suite file).
    #[arg(long, value_name = "SECS", requires = "suite")]
    pub training_secs: Option<u64>,
    /// Only these workloads (comma-separated names).
    #[arg(long, value_name = "NAMES", value_delimiter = ',', requires = "suite")]
    pub only: Vec<String>,
    /// Skip the usage day.
    #[arg(long, requires = "suite")]
    pub skip_day: bool,
    /// Skip the cost measurements.
    #[arg(long, requires = "suite")]
    pub skip_cost: bool,
    /// Skip the launch-time tables: only training, the usage day and the costs.
    #[arg(long, requires = "suite")]
    pub skip_tables: bool,
    /// Only apply each profile, show that it bites (MemAvailable, a cold read's throughput) and
    /// clean up.
    #[arg(long, requires = "suite")]
    pub check_profiles: bool,
    /// Print the planned duration of this run (from the suite file and the suite's own
    /// constants) and exit, without running anything; needs no privilege.
    #[arg(long, requires = "suite")]
    pub estimate: bool,
    /// Where suite.json, suite.md, suite.svg and the logs are written.
    #[arg(long, value_name = "DIR", default_value = "bench-results", requires = "suite")]
    pub output_dir: PathBuf,
    /// Where generated inputs (file tree, C project, the applications' HOME) are kept between
    /// runs.
    #[arg(long, value_name = "DIR", default_value = "/var/cache/augur-bench", requires = "suite")]
    pub cache_dir: PathBuf,
}

fn parse_size(s: &str) -> std::result::Result<u64, String> {
    parse_bytes(s)
}

/// Runs the suite. `runs` is `augur-bench --runs` when given.
pub fn run(args: SuiteArgs, runs: Option<u32>) -> Result<ExitCode> {
    let Some(suite_path) = args.suite else {
        return Err(BenchError::Usage("--suite FILE is required".into()));
    };
    let augur_exe = augur_bench::prefetchers::augur_beside_me()?;
    let opts = SuiteOptions {
        suite_path,
        profiles: if args.profiles.is_empty() { vec![MachineProfile::AsIs] } else { args.profiles },
        settings: MachineSettings {
            leave_available: args.leave_available,
            throttle: DiskThrottle { read_iops: args.read_iops, read_bps: args.read_bps },
        },
        runs,
        training_secs: args.training_secs,
        output_dir: args.output_dir,
        cache_dir: args.cache_dir,
        only: args.only,
        skip_day: args.skip_day,
        skip_cost: args.skip_cost,
        skip_tables: args.skip_tables,
        check_profiles_only: args.check_profiles,
        command_line: std::env::args().collect::<Vec<_>>().join(" "),
        augur_exe,
        preload_ng_exe: augur_bench::prefetchers::preload_ng_exe(),
    };
    // Each line carries the minutes and seconds since the start, so a run's log shows where its
    // time went (what the plan is checked against).
    let started = std::time::Instant::now();
    let progress = move |line: &str| {
        let t = started.elapsed().as_secs();
        eprintln!("augur-bench: [{}:{:02}] {line}", t / 60, t % 60);
    };
    if args.estimate {
        let (suite, notes) = suite::prepared_suite(&opts)?;
        for n in &notes {
            progress(n);
        }
        let phases = augur_bench::suite_estimate::estimate(&suite, &opts.profiles, &opts);
        println!("{}", augur_bench::suite_estimate::describe(&phases));
        return Ok(ExitCode::SUCCESS);
    }
    let report = suite::run(&opts, &progress)?;
    print!("{}", augur_bench::suite_markdown::render(&report));
    eprintln!("augur-bench: wrote {0}/suite.json, {0}/suite.md, {0}/suite.svg", opts.output_dir.display());
    Ok(ExitCode::SUCCESS)
}
