//! `augur explain APP`: why an application gets the launch probability it gets.
//!
//! With `--trace FILE`, trains a predictor on a usage trace and explains its prediction at the
//! end of the trace (or at `--at-ms`); without it, asks the running daemon over its socket. The
//! explanations come from the predictors' `explain`; this file parses and renders.
//!
//! With `--files`, shows instead what the file-access context model learned of the workload
//! (its most frequent sequences and what a run is expected to open first), read from the state
//! database without writing to it.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde::Serialize;

use crate::daemon::control::{self, Request, Response};
use crate::error::{Error, Result};
use augur_core::model::file_context::{FileContextModel, FileContextStats, FilePrediction, LearnedSequence};
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
    /// Show the workload's learned file sequences (the file-access context model) instead.
    #[arg(long, conflicts_with_all = ["trace", "at_ms"])]
    pub files: bool,
    /// With --files: how many opens ahead to predict from a run's start.
    #[arg(long, default_value_t = 8, requires = "files")]
    pub depth: usize,
    /// With --files: the state database (overrides the configuration).
    #[arg(long, value_name = "PATH", requires = "files")]
    pub state: Option<PathBuf>,
    /// With --files: configuration file [default: /etc/augur/config.toml].
    #[arg(long, value_name = "FILE", requires = "files")]
    pub config: Option<PathBuf>,
}

/// Sequences and predictions shown by `--files`.
const SHOWN: usize = 12;
/// Least confidence of a prediction shown by `--files`.
const SHOWN_CONFIDENCE: f64 = 0.05;

#[derive(Serialize)]
struct RenderedFiles<'a> {
    app: &'a str,
    stats: FileContextStats,
    sequences: Vec<LearnedSequence>,
    first_opens: Vec<FilePrediction>,
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
    if args.files {
        return explain_files(&args);
    }
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

/// `--files`: the workload's file-access context model from the state database.
fn explain_files(args: &ExplainArgs) -> Result<ExitCode> {
    let state = match &args.state {
        Some(p) => p.clone(),
        None => crate::config_file::load(args.config.as_deref())?.daemon.state_path,
    };
    let record = augur_store::state::read_file_context(&state, &args.app)?;
    let mut model = FileContextModel::default();
    if let Some(r) = &record {
        model.insert(&args.app, r);
    }
    let Some(app) = model.app(&args.app) else {
        if args.json {
            println!("null");
        } else {
            println!("{}: no file sequence learned (state {})", args.app, state.display());
        }
        return Ok(ExitCode::SUCCESS);
    };
    let r = RenderedFiles {
        app: &args.app,
        stats: app.stats(),
        sequences: app.top_sequences(SHOWN),
        first_opens: app.predict_start(args.depth, SHOWN_CONFIDENCE, SHOWN),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r).map_err(|e| Error::io("encoding", std::io::Error::other(e)))?);
        return Ok(ExitCode::SUCCESS);
    }
    let page = augur_os::loop_io::page_size();
    println!(
        "{}: {} run(s), {} first opens learned; {} files, {} sequence nodes in {} partitions, {} of ranges",
        r.app,
        r.stats.runs,
        r.stats.opens,
        r.stats.files,
        r.stats.nodes,
        r.stats.partitions,
        super::status::human_bytes(r.stats.pages * page)
    );
    println!("most frequent sequences (count, confidence that the last file follows the others):");
    for s in &r.sequences {
        println!("  {:>6} {:>5.1}%  {}", s.count, 100.0 * s.confidence, s.files.join(" -> "));
    }
    println!("a run is expected to open first ({} opens ahead, confidence at least {SHOWN_CONFIDENCE}):", args.depth);
    for p in &r.first_opens {
        println!(
            "  #{:<3} {:>5.1}% {:>9}  {}",
            p.distance,
            100.0 * p.confidence,
            super::status::human_bytes(p.pages * page),
            p.path
        );
    }
    Ok(ExitCode::SUCCESS)
}
