//! `augur status`: not yet implemented.

use std::process::ExitCode;

use clap::Args;

use crate::error::{Error, Result};

/// Arguments of `augur status`.
#[derive(Debug, Args)]
pub struct StatusArgs {}

/// Runs the subcommand.
pub fn run(_args: StatusArgs) -> Result<ExitCode> {
    Err(Error::Usage("augur status is not implemented yet".into()))
}
