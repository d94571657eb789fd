//! `augur forget`: not yet implemented.

use std::process::ExitCode;

use clap::Args;

use crate::error::{Error, Result};

/// Arguments of `augur forget`.
#[derive(Debug, Args)]
pub struct ForgetArgs {}

/// Runs the subcommand.
pub fn run(_args: ForgetArgs) -> Result<ExitCode> {
    Err(Error::Usage("augur forget is not implemented yet".into()))
}
