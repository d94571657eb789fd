//! `augur explain APP`: why an application gets the launch probability it gets.
//!
//! With `--trace FILE`, trains a predictor on a usage trace and explains its prediction at the
//! end of the trace (or at `--at-ms`); without it, asks the running daemon over its socket. The
//! explanations come from the predictors' `explain`; this file parses and renders.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde::Serialize;

use crate::daemon::control::{self, Request, Response};
use crate::error::{Error, Result};
use augur_core::model::predict::{self, LocalTime, Observation, PREDICTOR_NAMES};
use augur_core::model::usage_trace::UsageEvent;

/// The daemon's control socket when no other is configured.
pub const DEFAULT_SOCKET: &str = "/run/augur/augur.sock";

/// Arguments of `augur explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The application (as the daemon or the trace names it).
    pub app: String,
    /// Asking the daemon: the user whose application it is (a name or a uid; root's without it),
    /// as `augur apps` lists it.
    #[arg(long, value_name = "USER", conflicts_with = "trace")]
    pub user: Option<String>,
    /// Train on this usage trace instead of asking the daemon.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Predictor to explain with --trace: naive, preload or augur.
    #[arg(long, default_value = "augur")]
    pub predictor: String,
    /// With --trace: replay only up to this trace time (ms) and explain the prediction then.
    #[arg(long)]
    pub at_ms: Option<u64>,
    /// The daemon's control socket.
    #[arg(long, default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Rendered<'a> {
    predictor: &'a str,
    app: &'a str,
    probability: f64,
    reasons: &'a [String],
}

/// Runs the subcommand.
pub fn run(args: ExplainArgs) -> Result<ExitCode> {
    let Some(path) = &args.trace else {
        if !args.socket.exists() {
            return Err(Error::NoDaemon { socket: args.socket.clone() });
        }
        let app = super::apps::key_of(&args.app, args.user.as_deref())?;
        return match control::request(&args.socket, &Request::Explain { app })? {
            Response::Explanation { predictor, app, probability, reasons } => {
                render(&args, &predict::Explanation { predictor, app, probability, reasons });
                Ok(ExitCode::SUCCESS)
            }
            Response::Error { message } => Err(Error::DaemonRefused(message)),
            other => Err(Error::DaemonRefused(format!("unexpected answer {other:?}"))),
        };
    };
    let mut predictor = predict::by_name(&args.predictor)
        .ok_or_else(|| Error::Usage(format!("unknown predictor {:?} (known: {})", args.predictor, PREDICTOR_NAMES.join(", "))))?;
    let trace = augur_store::usage_trace_file::load(path)?;
    let until = args.at_ms.unwrap_or(u64::MAX);
    let mut last = 0;
    for e in &trace.events {
        if e.t_ms() > until {
            break;
        }
        last = e.t_ms();
        if let UsageEvent::Activity { t_ms, app, instance, transition } = e {
            predictor.observe(&Observation {
                at: LocalTime(trace.header.local_ms(*t_ms)),
                app,
                instance: *instance,
                transition: *transition,
            });
        }
    }
    let at = LocalTime(trace.header.local_ms(args.at_ms.unwrap_or(last)));
    let e = predictor.explain(&args.app, at);
    render(&args, &e);
    Ok(ExitCode::SUCCESS)
}

fn render(args: &ExplainArgs, e: &predict::Explanation) {
    if args.json {
        let r = Rendered { predictor: &e.predictor, app: &e.app, probability: e.probability, reasons: &e.reasons };
        println!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
    } else {
        println!("{} ({}): probability {:.3}", e.app, e.predictor, e.probability);
        for r in &e.reasons {
            println!("  - {r}");
        }
    }
}
