//! `augur record`: not yet implemented.

use std::process::ExitCode;

use clap::Args;

use crate::error::{Error, Result};

/// Arguments of `augur record`.
#[derive(Debug, Args)]
pub struct RecordArgs {}

/// Runs the subcommand.
pub fn run(_args: RecordArgs) -> Result<ExitCode> {
    Err(Error::Usage("augur record is not implemented yet".into()))
}
