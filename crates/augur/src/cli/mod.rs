//! The command line: argument definitions, dispatch to each subcommand, and rendering of errors
//! as one line with a distinct exit code.
//!
//! Each subcommand lives in its own file with its arguments and its `run`; the work itself is done
//! by the library modules, never here.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::error::Result;

pub mod apps;
pub mod boot;
pub mod daemon;
pub mod explain;
pub mod forget;
pub mod gen_trace;
pub mod generate;
pub mod journal;
pub mod prefetch;
pub mod record;
pub mod simulate;
pub mod status;
pub mod trace;

/// augur: an adaptive page-cache prefetcher. It learns which file pages each application needs
/// when it starts and loads them before they are needed.
#[derive(Debug, Parser)]
#[command(name = "augur", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// More log output (repeat for more).
    #[arg(short, long, global = true, action = clap::ArgAction::Count, conflicts_with = "quiet")]
    pub verbose: u8,
    /// Only errors on stderr.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command and record the exact file pages it and its descendants touch.
    Trace(trace::TraceArgs),
    /// Load the pages of one or more launch profiles into the page cache.
    Prefetch(prefetch::PrefetchArgs),
    /// Run the prefetching daemon in the foreground.
    Daemon(daemon::DaemonArgs),
    /// Show the daemon's health, mode and recent launches.
    ///
    /// Also how much it prefetches on this machine and why (the read cost on battery or a fast
    /// disk; the free-memory tier, `[predict] fill_free_memory`: whether it fills free memory,
    /// MemFree, the reserve it keeps free, the applications and bytes it holds), and what
    /// prediction bought over the last day.
    Status(status::StatusArgs),
    /// List the applications the daemon has learned.
    Apps(apps::AppsArgs),
    /// Record a usage trace from the live daemon.
    Record(record::RecordArgs),
    /// Replay a usage trace through the predictors and compare them.
    Simulate(simulate::SimulateArgs),
    /// Generate a seeded, reproducible usage trace for a scenario.
    GenTrace(gen_trace::GenTraceArgs),
    /// Explain why the daemon predicts what it predicts for an application.
    Explain(explain::ExplainArgs),
    /// Remove what augur learned about one application, or everything.
    Forget(forget::ForgetArgs),
    /// Load the plan of the last boots phase by phase while recording this one (run early in
    /// the boot by augur-boot.service).
    Boot(boot::BootArgs),
    /// Tell a running `augur boot` which phase the boot reached (for inits other than systemd).
    Mark(boot::MarkArgs),
    /// Write man pages or shell completions generated from this command line.
    #[command(hide = true)]
    Generate(generate::GenerateArgs),
}

/// Sets up logging to stderr: levels, no timestamps (journald adds its own), no colour unless
/// stderr is a terminal, and syslog priorities when stderr is the journal ([`journal`]).
fn init_logging(verbose: u8, quiet: bool) {
    let level = match (quiet, verbose) {
        (true, _) => tracing::Level::ERROR,
        (false, 0) => tracing::Level::INFO,
        (false, 1) => tracing::Level::DEBUG,
        (false, _) => tracing::Level::TRACE,
    };
    init_logging_at(level);
}

/// Sets up logging at `level` (the daemon takes its default level from its configuration).
pub fn init_logging_at(level: tracing::Level) {
    use std::io::IsTerminal;
    let format = tracing_subscriber::fmt::format().without_time().with_target(false);
    let _ = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        // No colours where NO_COLOR is set (no-color.org; augur-init sets it for the boot
        // recorder, whose log goes from the console to the journal).
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
        .event_format(journal::SyslogPriorityPrefix::new(format, journal::stderr_is_journal()))
        .try_init();
}

fn dispatch(cli: Cli) -> Result<ExitCode> {
    let (verbose, quiet) = (cli.verbose, cli.quiet);
    match cli.command {
        Command::Trace(a) => trace::run(a),
        Command::Prefetch(a) => prefetch::run(a),
        Command::Daemon(a) => daemon::run(a, verbose, quiet),
        Command::Status(a) => status::run(a),
        Command::Apps(a) => apps::run(a),
        Command::Record(a) => record::run(a),
        Command::Simulate(a) => simulate::run(a),
        Command::GenTrace(a) => gen_trace::run(a),
        Command::Explain(a) => explain::run(a),
        Command::Forget(a) => forget::run(a),
        Command::Boot(a) => boot::run(a),
        Command::Mark(a) => boot::run_mark(a),
        Command::Generate(a) => generate::run(a),
    }
}

/// Entry point of the binary: parse, run, render any error as one line.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // The daemon sets up logging itself, at its configured level.
    if !matches!(cli.command, Command::Daemon(_)) {
        init_logging(cli.verbose, cli.quiet);
    }
    // The commands that print a report end quietly when their reader is gone (`| head`).
    if matches!(
        cli.command,
        Command::Status(_)
            | Command::Apps(_)
            | Command::Explain(_)
            | Command::Simulate(_)
            | Command::GenTrace(_)
            | Command::Generate(_)
    ) {
        augur_os::signals::die_on_closed_pipe();
    }
    match dispatch(cli) {
        Ok(code) => code,
        Err(err) => {
            // Under journald the line is filed as an error, not at the default priority.
            let priority = if journal::stderr_is_journal() { "<3>" } else { "" };
            eprintln!("{priority}augur: {err}");
            ExitCode::from(err.exit_code())
        }
    }
}
