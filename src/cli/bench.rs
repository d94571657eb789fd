//! `augur bench`: not yet implemented.

use std::process::ExitCode;

use clap::Args;

use crate::error::{Error, Result};

/// Arguments of `augur bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {}

/// Runs the subcommand.
pub fn run(_args: BenchArgs) -> Result<ExitCode> {
    Err(Error::Usage("augur bench is not implemented yet".into()))
}
