//! `augur generate`: not yet implemented.

use std::process::ExitCode;

use clap::Args;

use crate::error::{Error, Result};

/// Arguments of `augur generate`.
#[derive(Debug, Args)]
pub struct GenerateArgs {}

/// Runs the subcommand.
pub fn run(_args: GenerateArgs) -> Result<ExitCode> {
    Err(Error::Usage("augur generate is not implemented yet".into()))
}
