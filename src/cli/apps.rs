//! `augur apps`: not yet implemented.

use std::process::ExitCode;

use clap::Args;

use crate::error::{Error, Result};

/// Arguments of `augur apps`.
#[derive(Debug, Args)]
pub struct AppsArgs {}

/// Runs the subcommand.
pub fn run(_args: AppsArgs) -> Result<ExitCode> {
    Err(Error::Usage("augur apps is not implemented yet".into()))
}
