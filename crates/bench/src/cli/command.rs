//! `augur-bench [--runs N] [--json] [--profile FILE] -- CMD [ARGS...]`: time a command cold, warm
//! and prefetched, interleaved round by round, and report medians, minima, maxima, the I/O wait
//! and the share of the cold-to-warm gap prefetching closes.
//!
//! Argument handling and rendering only; the work is the `augur_bench` library. Progress goes to stderr,
//! the table (or JSON) to stdout.
//!
//! With `--suite FILE` it runs the benchmark suite instead ([`super::bench_suite`]).

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use augur_bench::condition::PREFETCHED;
use augur_bench::error::{BenchError, IoContext, Result};
use augur_bench::measure::Workload;
use augur_bench::session::Progress;
use augur_bench::stats::Summary;
use augur_bench::{BenchEvent, BenchReport, bench_command};

/// Arguments of `augur-bench`.
#[derive(Debug, Args)]
#[command(
    override_usage = "augur-bench [OPTIONS] -- <CMD> [ARGS]...\n       augur-bench --suite <FILE> [--machine <PROFILE>]... [OPTIONS]",
    after_help = "Needs root: it drops the page cache before the cold and prefetched runs. \
The command's output goes to /dev/null; it must exit successfully. Without --profile the command \
is traced once first (augur trace) to get its profile."
)]
pub struct BenchArgs {
    /// Timed runs per condition (rounds of cold, warm, prefetched) [default: 5; with --suite, the
    /// suite file's `runs`].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub runs: Option<u32>,
    /// Print the results as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Replay this launch profile instead of tracing the command first.
    #[arg(long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// The command to time and its arguments (after `--`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required_unless_present = "suite", value_name = "CMD")]
    pub command: Vec<OsString>,
    /// The benchmark suite's options.
    #[command(flatten)]
    pub suite: super::suite::SuiteArgs,
}

fn progress(event: BenchEvent<'_>) {
    match event {
        BenchEvent::Tracing => eprintln!("augur-bench: tracing the command to get its profile"),
        BenchEvent::ProfileReady(p) => eprintln!(
            "augur-bench: profile ({}): {} files, {} pages ({:.1} MiB)",
            p.source,
            p.files,
            p.pages,
            (p.pages * p.page_size) as f64 / (1024.0 * 1024.0)
        ),
        BenchEvent::Session(Progress::WarmUp) => eprintln!("augur-bench: untimed warm-up run"),
        BenchEvent::Session(Progress::Preparing { .. }) => {}
        BenchEvent::Session(Progress::Ran { round, rounds, condition, sample, preparation }) => {
            let replay = preparation
                .replay
                .map(|r| {
                    let lookups =
                        if r.lookups_replayed > 0 { format!(" and {} path lookups", r.lookups_replayed) } else { String::new() };
                    format!(", replayed {} of {} pages{lookups} first", r.already_resident + r.loaded, r.wanted)
                })
                .unwrap_or_default();
            eprintln!(
                "augur-bench: round {round}/{rounds} {condition:<10} {:>9.1} ms (I/O wait {:.1} ms, {} major faults{replay})",
                sample.elapsed_ms, sample.io_wait_ms, sample.major_faults
            );
        }
    }
}

/// Runs the subcommand.
pub fn run(args: BenchArgs) -> Result<ExitCode> {
    if args.suite.suite.is_some() {
        return super::suite::run(args.suite, args.runs);
    }
    if args.command.is_empty() {
        return Err(BenchError::Usage("no command to time (usage: augur-bench [OPTIONS] -- CMD [ARGS...])".into()));
    }
    let workload = Workload::new(args.command.clone());
    let report = bench_command(&workload, args.profile.as_deref(), args.runs.unwrap_or(5) as usize, &mut progress)?;
    let text = if args.json {
        let mut t = serde_json::to_string_pretty(&report).map_err(|e| BenchError::io("rendering JSON", e.into()))?;
        t.push('\n');
        t
    } else {
        render_table(&workload, &report)
    };
    std::io::stdout().lock().write_all(text.as_bytes()).context(|| "writing to stdout".into())?;
    Ok(ExitCode::SUCCESS)
}

fn ms(s: &Summary) -> [String; 3] {
    [s.median, s.min, s.max].map(|v| format!("{v:.1}"))
}

/// The results for people.
pub fn render_table(workload: &Workload, r: &BenchReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "augur-bench -- {}", workload.display());
    let _ = writeln!(
        s,
        "{} runs per condition, interleaved; kernel {}; profile {} ({} files, {:.1} MiB, {} mode)",
        r.session.rounds,
        r.machine.kernel,
        r.profile.source,
        r.profile.files,
        (r.profile.pages * r.profile.page_size) as f64 / (1024.0 * 1024.0),
        serde_json::to_value(r.profile.mode).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
    );
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{:<12} {:>10} {:>10} {:>10} {:>12} {:>11} {:>9} {:>11}",
        "condition", "median ms", "min ms", "max ms", "I/O wait ms", "maj. faults", "read MiB", "gap closed"
    );
    for c in &r.session.conditions {
        let [med, min, max] = ms(&c.elapsed_ms);
        let gap = c.gap_closed.map(|g| format!("{:.0} %", g * 100.0)).unwrap_or_else(|| "-".into());
        let _ = writeln!(
            s,
            "{:<12} {:>10} {:>10} {:>10} {:>12.1} {:>11.0} {:>9.1} {:>11}",
            c.name, med, min, max, c.io_wait_ms.median, c.major_faults.median, c.read_mib.median, gap
        );
    }
    if let Some(c) = r.session.condition(PREFETCHED) {
        let replays: Vec<_> = c.runs.iter().filter_map(|run| run.preparation.replay).collect();
        if let Some(worst) = replays.iter().min_by_key(|x| x.already_resident + x.loaded) {
            let stale = replays.iter().map(|x| x.stale_files).max().unwrap_or(0);
            let _ = writeln!(
                s,
                "replay before each prefetched run: at least {} of {} pages resident{}{}",
                worst.already_resident + worst.loaded,
                worst.wanted,
                match replays.iter().map(|x| x.lookups_replayed).max() {
                    Some(n) if n > 0 => format!(", {n} path lookups repeated"),
                    _ => String::new(),
                },
                if stale > 0 { format!("; {stale} stale files skipped (retrace the command)") } else { String::new() }
            );
        }
    }
    let _ = writeln!(s);
    match r.session.condition(PREFETCHED).and_then(|c| c.gap_closed) {
        Some(g) => {
            let _ = writeln!(
                s,
                "prefetching closes {:.0} % of the cold-to-warm gap ((cold - prefetched) / (cold - warm), medians).",
                g * 100.0
            );
        }
        None => {
            let _ = writeln!(s, "no cold-to-warm gap to close: warm was not faster than cold.");
        }
    }
    let _ = writeln!(s, "I/O wait = elapsed - (user + sys) of the command, as Kroeger and Long measured it; read MiB = what");
    let _ = writeln!(s, "the file systems read for it (data and metadata, wait4's ru_inblock); medians.");
    s
}
