//! `augur-bench balloon` (hidden): the child process that holds the locked memory of the
//! benchmark suite's *small-memory* profile. Started and killed by `augur-bench --suite` only.

use std::process::ExitCode;

use clap::Args;

use augur_bench::error::Result;

/// Arguments of `augur-bench balloon`.
#[derive(Debug, Args)]
pub struct BalloonArgs {
    /// Lock memory until MemAvailable is at most this many bytes.
    #[arg(long)]
    pub leave: u64,
    /// Exit when this process is gone.
    #[arg(long)]
    pub owner: u32,
}

/// Runs the balloon until killed.
pub fn run(args: BalloonArgs) -> Result<ExitCode> {
    augur_bench::balloon::hold(args.leave, args.owner)?;
    Ok(ExitCode::SUCCESS)
}
