//! `augur apps`: the applications the daemon has learned, most recently launched first.

use std::process::ExitCode;

use clap::Args;

use super::status::{DaemonAddress, ago, human_bytes};
use crate::daemon::control::{self, Request, Response};
use crate::error::{Error, Result};

/// Arguments of `augur apps`.
#[derive(Debug, Args)]
pub struct AppsArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub address: DaemonAddress,
}

/// Runs the subcommand.
pub fn run(args: AppsArgs) -> Result<ExitCode> {
    let socket = args.address.socket()?;
    let apps = match control::request(&socket, &Request::Apps)? {
        Response::Apps { apps } => apps,
        Response::Error { message } => return Err(Error::DaemonRefused(message)),
        other => return Err(Error::DaemonRefused(format!("unexpected answer {other:?}"))),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&apps).map_err(|e| Error::io("encoding", std::io::Error::other(e)))?);
        return Ok(ExitCode::SUCCESS);
    }
    if apps.is_empty() {
        println!("no application learned yet");
        return Ok(ExitCode::SUCCESS);
    }
    let page = augur_os::loop_io::page_size();
    println!("{:>8} {:>10} {:>10} {:<9}  application", "launches", "known", "replayed", "last");
    for a in &apps {
        println!(
            "{:>8} {:>10} {:>10} {:<9}  {}",
            a.launches,
            human_bytes(a.pages * page),
            human_bytes(a.replay_pages * page),
            ago(a.last_launch_ms),
            a.key
        );
    }
    println!("{} application(s)", apps.len());
    Ok(ExitCode::SUCCESS)
}
