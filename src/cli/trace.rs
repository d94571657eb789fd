//! `augur trace`: not yet implemented.

use std::process::ExitCode;

use clap::Args;

use crate::error::{Error, Result};

/// Arguments of `augur trace`.
#[derive(Debug, Args)]
pub struct TraceArgs {}

/// Runs the subcommand.
pub fn run(_args: TraceArgs) -> Result<ExitCode> {
    Err(Error::Usage("augur trace is not implemented yet".into()))
}
