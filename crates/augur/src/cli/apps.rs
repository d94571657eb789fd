//! `augur apps`: the applications the daemon has learned, most recently launched first, with the
//! user each was learned for (augur learns each user's launches apart); and how the other
//! subcommands name a user's application (`--user`).

use std::process::ExitCode;

use clap::Args;

use super::status::{DaemonAddress, ago, human_bytes};
use crate::daemon::control::{self, Request, Response};
use crate::error::{Error, Result};
use augur_core::model::user::{passwd_name, passwd_uid, split_user_key, user_key};

/// Arguments of `augur apps`.
#[derive(Debug, Args)]
pub struct AppsArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub address: DaemonAddress,
}

/// How `augur apps` names user `uid`: its name in `passwd` (the text of `/etc/passwd`), else
/// `uid=UID`.
pub fn user_name(passwd: &str, uid: u32) -> String {
    passwd_name(passwd, uid).map_or_else(|| format!("uid={uid}"), str::to_string)
}

/// The learned key of application `app` of `user` (a name in `/etc/passwd` or a uid; root's when
/// `None`): what `augur forget` and `augur explain` look up. A key `augur apps --json` lists
/// (`uid=1000:/usr/bin/x`) is taken as it is without `--user`.
pub fn key_of(app: &str, user: Option<&str>) -> Result<String> {
    let Some(user) = user else { return Ok(app.to_string()) };
    let uid = match user.parse::<u32>() {
        Ok(uid) => uid,
        Err(_) => {
            let passwd = std::fs::read_to_string("/etc/passwd").map_err(|e| Error::io("reading /etc/passwd", e))?;
            passwd_uid(&passwd, user).ok_or_else(|| Error::Usage(format!("no user {user:?} in /etc/passwd")))?
        }
    };
    Ok(user_key(uid, app))
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
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    println!("{:>8} {:>10} {:>10} {:<9} {:<10} application", "launches", "known", "replayed", "last", "user");
    for a in &apps {
        let (uid, app) = split_user_key(&a.key);
        println!(
            "{:>8} {:>10} {:>10} {:<9} {:<10} {}",
            a.launches,
            human_bytes(a.pages * page),
            human_bytes(a.replay_pages * page),
            ago(a.last_launch_ms),
            user_name(&passwd, uid),
            app
        );
    }
    println!("{} application(s)", apps.len());
    Ok(ExitCode::SUCCESS)
}
