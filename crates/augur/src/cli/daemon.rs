//! `augur daemon`: runs the prefetching daemon in the foreground (systemd or a user starts it).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::daemon::prediction::PredictionStep;
use crate::daemon::run::{Daemon, DaemonOptions, PlanStep, PlanStepFactory};
use crate::error::{Error, Result};
use augur_os::sense::mode::parse_observation_mode;

/// Arguments of `augur daemon`.
#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// Configuration file [default: /etc/augur/config.toml; missing there means defaults].
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// State database (overrides the configuration's `state_path`).
    #[arg(long, value_name = "PATH")]
    pub state: Option<PathBuf>,
    /// Control socket (overrides the configuration's `socket_path`).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Observation mode: bpf (then required), access, insertion or file-only (these only ever
    /// degrade to what the kernel has) [default: AUGUR_FORCE_MODE, else the best available].
    #[arg(long, value_name = "MODE")]
    pub mode: Option<String>,
    /// Check the configuration and exit.
    #[arg(long)]
    pub check_config: bool,
}

/// Runs the subcommand.
pub fn run(args: DaemonArgs, verbose: u8, quiet: bool) -> Result<ExitCode> {
    let mode = match &args.mode {
        Some(m) => Some(
            parse_observation_mode(m)
                .ok_or_else(|| Error::Usage(format!("unknown mode {m:?} (bpf, access, insertion, file-only)")))?,
        ),
        None => None,
    };
    let options = DaemonOptions { config_path: args.config, state_path: args.state, socket_path: args.socket, mode };
    let config = options.load_config()?;
    let level = match (quiet, verbose) {
        (true, _) => tracing::Level::ERROR,
        (false, 0) => config.daemon.log_level.level(),
        (false, 1) => tracing::Level::DEBUG,
        (false, _) => tracing::Level::TRACE,
    };
    super::init_logging_at(level);
    if args.check_config {
        println!("configuration is valid");
        return Ok(ExitCode::SUCCESS);
    }
    // Built whenever `[predict] enabled = true`: at the start, and when a reload turns it on or
    // changes the predictor.
    let make_plan_step: PlanStepFactory = Box::new(|c| Ok(Box::new(PredictionStep::new(c)?) as Box<dyn PlanStep>));
    Daemon::start(options, make_plan_step)?.run()?;
    Ok(ExitCode::SUCCESS)
}
