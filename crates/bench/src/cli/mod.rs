//! The `augur-bench` command line: argument definitions, dispatch, and rendering of errors as one
//! line with the same exit codes as `augur`. The work is done by the `augur_bench` library.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use augur_core::error::Result;

pub mod balloon;
pub mod command;
pub mod suite;

/// augur-bench: time a command's start-up cold, warm and prefetched, or run the benchmark suite
/// (machine profiles, desktop applications, peers). Not part of the installed package.
#[derive(Debug, Parser)]
#[command(
    name = "augur-bench",
    version,
    about,
    long_about = None,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Cli {
    #[command(flatten)]
    pub bench: command::BenchArgs,
    #[command(subcommand)]
    pub internal: Option<Internal>,
}

/// Subcommands the suite starts itself.
#[derive(Debug, Subcommand)]
pub enum Internal {
    /// Hold the locked memory of the small-memory machine profile (started by the suite).
    #[command(hide = true, name = "balloon")]
    Balloon(balloon::BalloonArgs),
}

fn dispatch(cli: Cli) -> Result<ExitCode> {
    match cli.internal {
        Some(Internal::Balloon(a)) => balloon::run(a),
        None => command::run(cli.bench),
    }
}

/// Entry point of the binary: parse, run, render any error as one line.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let _ = tracing_subscriber::fmt().without_time().with_target(false).with_writer(std::io::stderr).try_init();
    match dispatch(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("augur-bench: {err}");
            ExitCode::from(err.exit_code())
        }
    }
}
