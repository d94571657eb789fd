//! `augur gen-trace`: not yet implemented.

use std::process::ExitCode;

use clap::Args;

use crate::error::{Error, Result};

/// Arguments of `augur gen-trace`.
#[derive(Debug, Args)]
pub struct GenTraceArgs {}

/// Runs the subcommand.
pub fn run(_args: GenTraceArgs) -> Result<ExitCode> {
    Err(Error::Usage("augur gen-trace is not implemented yet".into()))
}
