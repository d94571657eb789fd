//! `augur record`: writes a usage trace (`docs/usage-trace-format.md`) from the live daemon —
//! the launches and exits it saw, with their times, and each application's working-set size —
//! either everything since the daemon started or, with `--duration`, what happens from now on
//! for that long.
//!
//! It asks the daemon over its control socket and writes the file; the log and the cut are the
//! daemon's (`daemon::usage_log`). Without a daemon: one line, exit 9.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use crate::daemon::control::{self, Request, Response};
use crate::error::{Error, Result};
use augur_core::model::usage_trace;
use augur_store::atomic_file::write_atomically;

/// Arguments of `augur record`.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Write the trace here (`-` for standard output).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: PathBuf,
    /// Record from now on for this many seconds; without it, everything since the daemon started.
    #[arg(long, value_name = "SECS")]
    pub duration: Option<u64>,
    /// The daemon's control socket.
    #[arg(long, default_value = super::explain::DEFAULT_SOCKET)]
    pub socket: PathBuf,
}

fn ask(args: &RecordArgs, since_unix_ms: Option<u64>) -> Result<String> {
    match control::request(&args.socket, &Request::Record { since_unix_ms })? {
        Response::Trace { text } => Ok(text),
        Response::Error { message } => Err(Error::DaemonRefused(message)),
        other => Err(Error::DaemonRefused(format!("unexpected answer {other:?}"))),
    }
}

/// Runs the subcommand.
pub fn run(args: RecordArgs) -> Result<ExitCode> {
    let text = match args.duration {
        None => ask(&args, None)?,
        Some(secs) => {
            // Fail at once when no daemon answers, not after the duration.
            control::request(&args.socket, &Request::Status)?;
            let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
            std::thread::sleep(Duration::from_secs(secs));
            ask(&args, Some(since))?
        }
    };
    // The daemon's answer is checked like any trace before it is written.
    let trace = usage_trace::parse(text.as_bytes()).map_err(|e| usage_trace::error_at(&args.socket, e))?;
    if args.output.as_os_str() == "-" {
        print!("{text}");
    } else {
        write_atomically(&args.output, text.as_bytes(), 0o666).map_err(|e| Error::io_at(&args.output, "writing", e))?;
        let apps: std::collections::BTreeSet<&str> = trace.events.iter().map(|e| e.app()).collect();
        eprintln!(
            "wrote {}: {} launches of {} applications over {:.1} s",
            args.output.display(),
            trace.launch_count(),
            apps.len(),
            trace.duration_ms() as f64 / 1000.0
        );
    }
    Ok(ExitCode::SUCCESS)
}
