//! `augur-bench aasfp`: AASFP's Forward/Backward micro-benchmark table plus a strided reader,
//! kernel alone against augur's daemon as installed ([`augur_bench::aasfp`]); and the hidden
//! `augur-bench aasfp-reader`, the reading process it times.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;

use augur::daemon::control::{self, Request, Response};
use augur_bench::aasfp::{self, CASES, Case, CaseTimes, ReaderCgroup, Setup};
use augur_bench::error::{BenchError, Result};
use augur_bench::prefetchers::{self, DaemonFiles, Prefetcher, RunningDaemon};

use augur_bench::machine::MachineProfile;

use super::prepare;

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
    /// A configuration file for the daemon in place of packaging/config.toml (its state and
    /// socket paths replaced): a variant of the installed daemon, to split a cost between its parts.
    #[arg(long)]
    pub augur_config: Option<PathBuf>,
    /// Unmeasured runs of every case before the measured ones, under each condition: the kernel
    /// alone warms up as augur's daemon learns the reader, as it would have on a user's machine
    /// (its first launches of a program are followed by design).
    #[arg(long, default_value_t = 1)]
    pub training_runs: usize,
    /// The machine profile: as-is, or the small slow machine (`small-memory+slow-disk`: a
    /// balloon leaving 2 GiB and the disk throttled to 200 reads and 40 MB a second for the
    /// reader and the daemon together). Give the small machine a smaller file and memory: every
    /// 4 KiB read of Backward 1 is one of its 200 operations a second.
    #[arg(long = "machine", value_name = "PROFILE", default_value = "as-is")]
    pub machine: MachineProfile,
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

/// Runs the reader: into the cgroup, read, print `elapsed_s=` and its CPU times.
pub fn run_reader(args: ReaderArgs) -> Result<ExitCode> {
    aasfp::enter_cgroup(std::slice::from_ref(&args.cgroup))?;
    let cost = aasfp::read_case(&args.file, args.case)?;
    println!("{}", cost.line());
    Ok(ExitCode::SUCCESS)
}

/// Waits until the daemon's stream worker has started (or said why not); returns its note.
pub(crate) fn wait_ahead_started(socket: &std::path::Path, limit: Duration) -> String {
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

/// Starts the daemon with `installed` as its configuration and waits until it and its stream
/// worker are ready, and its start-up work is over.
pub(crate) fn start_daemon(files: &DaemonFiles, installed: &str) -> Result<RunningDaemon> {
    start_daemon_in(files, installed, &[])
}

/// The longest a benchmark waits for the daemon's start-up work (its first planning round's
/// fetch, the free-memory tier) to be over before it measures.
const STARTUP_WAIT: Duration = Duration::from_secs(60);

/// [`start_daemon`], the daemon born in `cgroups` (none: where this process is).
pub(crate) fn start_daemon_in(files: &DaemonFiles, installed: &str, cgroups: &[std::path::PathBuf]) -> Result<RunningDaemon> {
    let mut daemon = RunningDaemon::start_in(Prefetcher::Augur, files, installed, cgroups)?;
    daemon.wait_ready(Duration::from_secs(30))?;
    let note = wait_ahead_started(&files.augur_socket(), Duration::from_secs(10));
    if note != "on" {
        eprintln!("note: the daemon does not load ahead of readers: {note}");
    }
    // Installed, the daemon starts with the machine, long before a user reads a file; started
    // here just before the first case, its start-up loads (the free-memory tier fills free
    // memory with the learned readers) raced that case's reads (on the throttled disk Forward 1
    // took 2.35 s instead of 1.68). The suite waits for the same before it measures.
    daemon.wait_startup_end(files, STARTUP_WAIT)?;
    Ok(daemon)
}

/// Prints what the daemon did (launches, replays, streams followed) to stderr.
pub(crate) fn report_ahead(files: &DaemonFiles) {
    let Ok(Response::Status(r)) = control::request(&files.augur_socket(), &Request::Status) else {
        return;
    };
    let e = &r.events;
    eprintln!(
        "daemon: {} page events, {} launches learned, {} replays, {} launches stopped, {} followed again",
        e.page_events, e.launches_learned, e.replays, e.launches_stopped, e.refollowed
    );
    if let Some(a) = r.ahead {
        eprintln!(
            "daemon: {} streams followed, {} MiB ahead, {} windows grown, {} pressure stops, {} records ({} lost)",
            a.streams_followed,
            a.bytes_ahead >> 20,
            a.windows_grown,
            a.pressure_stops,
            a.records,
            a.records_lost
        );
        eprintln!(
            "daemon: {} streams dropped behind ({} MiB), {} loops kept a prefix ({} MiB dropped)",
            a.behind_streams,
            a.bytes_dropped_behind >> 20,
            a.loops_treated,
            a.bytes_dropped_loops >> 20
        );
    }
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
    let readers_dir = args.daemon_dir.parent().unwrap_or(Path::new("/var/tmp")).join("readers");
    let readers = aasfp::reader_programs(&me, &readers_dir, &cases, |c| format!("aasfp-{}", c.arg()))?;
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
    // A fresh state: what the daemon knows of the reader comes from this invocation's training.
    let _ = std::fs::remove_file(files.augur_state());
    let machine = prepare(args.machine)?;
    let cgroup = ReaderCgroup::create(memory_bytes)?;
    for run in 1..=args.training_runs {
        for case in &cases {
            let s = aasfp::time_case(reader(*case), &args.file, *case, &cgroup)?.elapsed;
            eprintln!("training {run}/{}: {case}, kernel alone: {s:.2} s (not counted)", args.training_runs);
        }
        let daemon = start_daemon(&files, &installed)?;
        for case in &cases {
            let s = aasfp::time_case(reader(*case), &args.file, *case, &cgroup)?.elapsed;
            eprintln!("training {run}/{}: {case}, augur: {s:.2} s (not counted)", args.training_runs);
        }
        report_ahead(&files);
        daemon.stop()?;
    }
    let mut times: Vec<(Case, CaseTimes)> = cases.iter().map(|c| (*c, CaseTimes::default())).collect();
    for run in 1..=args.runs {
        for (case, t) in times.iter_mut() {
            let c = aasfp::time_case(reader(*case), &args.file, *case, &cgroup)?;
            eprintln!("run {run}/{}: {case}, kernel alone: {:.2} s ({:.2} s CPU)", args.runs, c.elapsed, c.user + c.system);
            t.push_kernel(&c);
        }
        let daemon = start_daemon(&files, &installed)?;
        for (case, t) in times.iter_mut() {
            let c = aasfp::time_case(reader(*case), &args.file, *case, &cgroup)?;
            eprintln!("run {run}/{}: {case}, augur: {:.2} s ({:.2} s CPU)", args.runs, c.elapsed, c.user + c.system);
            t.push_augur(&c);
        }
        report_ahead(&files);
        daemon.stop()?;
    }
    drop(cgroup);
    let setup = Setup { file_bytes, memory_bytes, runs: args.runs, machine: machine.profile_name() };
    print!("{}", aasfp::markdown(&setup, &times));
    Ok(ExitCode::SUCCESS)
}
