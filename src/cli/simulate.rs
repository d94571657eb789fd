//! `augur simulate`: not yet implemented.

use std::process::ExitCode;

use clap::Args;

use crate::error::{Error, Result};

/// Arguments of `augur simulate`.
#[derive(Debug, Args)]
pub struct SimulateArgs {}

/// Runs the subcommand.
pub fn run(_args: SimulateArgs) -> Result<ExitCode> {
    Err(Error::Usage("augur simulate is not implemented yet".into()))
}
