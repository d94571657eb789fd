//! `augur daemon`: not yet implemented.

use std::process::ExitCode;

use clap::Args;

use crate::error::{Error, Result};

/// Arguments of `augur daemon`.
#[derive(Debug, Args)]
pub struct DaemonArgs {}

/// Runs the subcommand.
pub fn run(_args: DaemonArgs) -> Result<ExitCode> {
    Err(Error::Usage("augur daemon is not implemented yet".into()))
}
