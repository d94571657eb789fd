//! `augur-bench aasfp`: AASFP's Forward/Backward micro-benchmark table plus a strided reader,
//! kernel alone against augur's daemon as installed ([`augur_bench::aasfp`]); and the hidden
//! `augur-bench aasfp-reader`, the reading process it times.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;

use augur::daemon::control::{self, Request, Response};
use augur_bench::aasfp::{self, CASES, Case, CaseTimes, ReaderCgroup, Setup};
use augur_bench::error::{BenchError, Result};
use augur_bench::prefetchers::{self, DaemonFiles, Prefetcher, RunningDaemon};

/// Arguments of `augur-bench aasfp`.
#[derive(Debug, Args)]
pub struct AasfpArgs {
    /// Runs per case and condition.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Size of the file read, MiB.
    #[arg(long, default_value_t = 1024)]
    pub file_mib: u64,
    /// Memory left to the reader (the limit of its memory cgroup), MiB.
    #[arg(long, default_value_t = 256)]
    pub memory_mib: u64,
    /// The file read (created once, on a disk-backed file system: tmpfs has no page cache to miss).
    #[arg(long, default_value = "/var/tmp/augur-bench-aasfp/data")]
    pub file: PathBuf,
    /// Where the daemon keeps its state, socket and log.
    #[arg(long, default_value = "/var/tmp/augur-bench-aasfp/daemon")]
    pub daemon_dir: PathBuf,
    /// Only these cases (forward1, backward1, forward2, backward2, strided); default all.
    #[arg(long = "case")]
    pub cases: Vec<Case>,
}

/// Arguments of `augur-bench aasfp-reader`.
#[derive(Debug, Args)]
pub struct ReaderArgs {
    /// The case to read.
    #[arg(long)]
    pub case: Case,
    /// The memory cgroup to move into first.
    #[arg(long)]
    pub cgroup: PathBuf,
    /// The file.
    pub file: PathBuf,
}

/// Runs the reader: into the cgroup, read, print `elapsed_s=`.
pub fn run_reader(args: ReaderArgs) -> Result<ExitCode> {
    aasfp::enter_cgroup(&args.cgroup)?;
    let t = aasfp::read_case(&args.file, args.case)?;
    println!("elapsed_s={:.6}", t.as_secs_f64());
    Ok(ExitCode::SUCCESS)
}

/// Waits until the daemon's stream worker has started (or said why not); returns its note.
fn wait_ahead_started(socket: &std::path::Path, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    let mut note = String::from("no answer");
    while Instant::now() < deadline {
        if let Ok(Response::Status(r)) = control::request(socket, &Request::Status) {
            note = r.ahead.map_or_else(|| "off".to_string(), |a| a.note);
            if note != "starting" {
                return note;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    note
}

/// Runs the benchmark; prints the Markdown table.
pub fn run(args: AasfpArgs) -> Result<ExitCode> {
    augur_os::privilege::require_root("augur-bench aasfp")?;
    if args.runs == 0 {
        return Err(BenchError::Usage("--runs must be at least 1".into()));
    }
    let cases: Vec<Case> = if args.cases.is_empty() { CASES.to_vec() } else { args.cases.clone() };
    let file_bytes = args.file_mib << 20;
    let memory_bytes = args.memory_mib << 20;
    augur_bench::page_cache::ensure_file(&args.file, file_bytes)?;
    let me = std::env::current_exe().map_err(|e| BenchError::io("finding the augur-bench executable", e))?;
    let files = DaemonFiles {
        dir: args.daemon_dir.clone(),
        augur_exe: prefetchers::augur_beside_me()?,
        preload_ng_exe: prefetchers::preload_ng_exe(),
        cycle_secs: 20,
    };
    let cgroup = ReaderCgroup::create(memory_bytes)?;
    let mut times: Vec<(Case, CaseTimes)> = cases.iter().map(|c| (*c, CaseTimes::default())).collect();
    for run in 1..=args.runs {
        for (case, t) in times.iter_mut() {
            let s = aasfp::time_case(&me, &args.file, *case, &cgroup)?.as_secs_f64();
            eprintln!("run {run}/{}: {case}, kernel alone: {s:.2} s", args.runs);
            t.kernel.push(s);
        }
        let mut daemon = RunningDaemon::start(Prefetcher::Augur, &files)?;
        daemon.wait_ready(Duration::from_secs(30))?;
        let note = wait_ahead_started(&files.augur_socket(), Duration::from_secs(10));
        if note != "on" {
            eprintln!("warning: the daemon does not load ahead of readers: {note}");
        }
        for (case, t) in times.iter_mut() {
            let s = aasfp::time_case(&me, &args.file, *case, &cgroup)?.as_secs_f64();
            eprintln!("run {run}/{}: {case}, augur: {s:.2} s", args.runs);
            t.augur.push(s);
        }
        if let Ok(Response::Status(r)) = control::request(&files.augur_socket(), &Request::Status)
            && let Some(a) = r.ahead
        {
            eprintln!(
                "daemon: {} streams followed, {} MiB ahead, {} windows grown, {} pressure stops, {} records ({} lost)",
                a.streams_followed,
                a.bytes_ahead >> 20,
                a.windows_grown,
                a.pressure_stops,
                a.records,
                a.records_lost
            );
        }
        daemon.stop()?;
    }
    drop(cgroup);
    let setup = Setup { file_bytes, memory_bytes, runs: args.runs, machine: "as-is".into() };
    print!("{}", aasfp::markdown(&setup, &times));
    Ok(ExitCode::SUCCESS)
}
