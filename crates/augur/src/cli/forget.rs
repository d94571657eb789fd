//! `augur forget [APP|--all]`: removes what augur learned. Asks the running daemon over its
//! socket; with no daemon running, edits the state database directly.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::daemon::control::{self, Request, Response};
use crate::error::{Error, Result};
use augur_os::privilege::require_root;
use augur_store::state::StateStore;

/// Arguments of `augur forget`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["app", "all"])))]
pub struct ForgetArgs {
    /// The application to forget, as `augur apps` lists it.
    pub app: Option<String>,
    /// The user whose application it is (a name or a uid; root's without it), as `augur apps`
    /// lists it.
    #[arg(long, value_name = "USER", requires = "app")]
    pub user: Option<String>,
    /// Forget every application, and the recorded boots.
    #[arg(long)]
    pub all: bool,
    /// Configuration file [default: /etc/augur/config.toml].
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Control socket of the daemon (overrides the configuration).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// State database to edit when no daemon runs (overrides the configuration).
    #[arg(long, value_name = "PATH")]
    pub state: Option<PathBuf>,
}

/// Runs the subcommand.
pub fn run(args: ForgetArgs) -> Result<ExitCode> {
    let config = crate::config_file::load(args.config.as_deref())?;
    let socket = args.socket.clone().unwrap_or(config.daemon.socket_path.clone());
    let request = match &args.app {
        Some(app) if !args.all => Request::Forget { app: super::apps::key_of(app, args.user.as_deref())? },
        _ => Request::ForgetAll,
    };
    let forgotten = match control::request(&socket, &request) {
        Ok(Response::Forgot { apps }) => apps,
        Ok(Response::Error { message }) => return Err(Error::DaemonRefused(message)),
        Ok(other) => {
            return Err(Error::DaemonRefused(format!("unexpected answer {other:?}")));
        }
        Err(Error::NoDaemon { .. }) => {
            let path = args.state.clone().unwrap_or(config.daemon.state_path.clone());
            if !path.exists() {
                println!("nothing learned ({} does not exist)", path.display());
                return Ok(ExitCode::SUCCESS);
            }
            require_root("editing the state database").or_else(|e| {
                // A user-owned state (tests, custom paths) needs no root.
                if std::fs::OpenOptions::new().write(true).open(&path).is_ok() { Ok(()) } else { Err(e) }
            })?;
            let (mut store, _) = StateStore::open(&path)?;
            match &request {
                Request::Forget { app } => u64::from(store.forget(app)?),
                _ => store.forget_all()?,
            }
        }
        Err(e) => return Err(e),
    };
    match (&request, forgotten) {
        (Request::Forget { app }, 0) => Err(Error::Usage(format!("augur has not learned {app:?} (see `augur apps`)"))),
        _ => {
            println!("forgot {forgotten} application(s)");
            Ok(ExitCode::SUCCESS)
        }
    }
}
