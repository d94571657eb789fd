//! `augur prefetch`: not yet implemented.

use std::process::ExitCode;

use clap::Args;

use crate::error::{Error, Result};

/// Arguments of `augur prefetch`.
#[derive(Debug, Args)]
pub struct PrefetchArgs {}

/// Runs the subcommand.
pub fn run(_args: PrefetchArgs) -> Result<ExitCode> {
    Err(Error::Usage("augur prefetch is not implemented yet".into()))
}
