//! `augur explain`: not yet implemented.

use std::process::ExitCode;

use clap::Args;

use crate::error::{Error, Result};

/// Arguments of `augur explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {}

/// Runs the subcommand.
pub fn run(_args: ExplainArgs) -> Result<ExitCode> {
    Err(Error::Usage("augur explain is not implemented yet".into()))
}
