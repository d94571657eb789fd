//! `augur trace [--window SECS] [--output FILE] [--mode MODE] -- CMD [ARGS...]`: run a command,
//! record the file pages it and its descendants touch, write the launch profile and summarise.
//!
//! Argument handling and rendering only; the work is [`augur_os::sense::trace_session`].

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use crate::error::{Error, Result};
use augur_core::model::profile::{LaunchProfile, LookupKind};
use augur_os::error::OsError;
use augur_os::privilege::require_root;
use augur_os::sense::mode::{FORCE_MODE_ENV, ObservationMode, parse_observation_mode};
use augur_os::sense::trace_session::{DEFAULT_WINDOW, TraceReport, TraceRequest, describe_status, trace_command};
use augur_store::profile_file;

/// Arguments of `augur trace`.
#[derive(Debug, Args)]
#[command(
    override_usage = "augur trace [OPTIONS] -- <CMD> [ARGS]...",
    after_help = "The command's own output passes through. The summary goes to stderr. \
The profile is written even when the command fails or the trace is interrupted (Ctrl-C)."
)]
pub struct TraceArgs {
    /// Stop recording after this many seconds even if the command still runs (default and
    /// maximum: 60). Without it, recording stops when the command exits.
    #[arg(long, value_name = "SECS", value_parser = parse_window)]
    pub window: Option<Duration>,
    /// Where to write the profile [default: ./<command name>.profile.json].
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Observation mode: bpf (default where the kernel has BTF and allows BPF: the command
    /// followed from its exec, pages and path lookups), access (tracefs page access events),
    /// insertion (page-cache insertions only) or file-only (whole files, no tracing). The mode
    /// asked for is required; the default degrades in that order.
    #[arg(long, value_name = "MODE", value_parser = parse_mode_arg, env = FORCE_MODE_ENV)]
    pub mode: Option<ObservationMode>,
    /// Do not record the command's path lookups (recorded by the bpf mode, or else by running the
    /// command under strace when installed, so that a prefetch can warm the directory caches
    /// too).
    #[arg(long)]
    pub no_lookups: bool,
    /// The command to trace and its arguments (after `--`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

fn parse_window(s: &str) -> std::result::Result<Duration, String> {
    let secs: f64 = s.parse().map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(secs > 0.0 && secs <= DEFAULT_WINDOW.as_secs_f64()) {
        return Err(format!("the window must be more than 0 and at most {} seconds", DEFAULT_WINDOW.as_secs()));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn parse_mode_arg(s: &str) -> std::result::Result<ObservationMode, String> {
    parse_observation_mode(s).ok_or_else(|| format!("{s:?}: expected bpf, access, insertion or file-only"))
}

/// The default profile name: `<basename of CMD>.profile.json` in the current directory.
pub fn default_output(command: &[OsString]) -> PathBuf {
    let name = command
        .first()
        .and_then(|c| Path::new(c).file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty() && n != "." && n != "..")
        .unwrap_or_else(|| "trace".into());
    PathBuf::from(format!("{name}.profile.json"))
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn summarise(report: &TraceReport, output: &Path) {
    let p: &LaunchProfile = &report.profile;
    let how = report.mode.describe(p.mode);
    eprintln!(
        "augur: traced {:?} for {:.2} s in {} mode ({how})",
        p.command.join(" "),
        p.window_ms as f64 / 1000.0,
        report.mode.name(),
    );
    if !report.passed_over.is_empty() {
        eprintln!("augur: better modes not used: {}", report.passed_over);
    }
    eprintln!(
        "augur: {} files, {} pages ({:.1} MiB) from {} page events -> {}",
        p.files.len(),
        p.page_count(),
        mib(p.byte_count()),
        report.page_events,
        output.display()
    );
    eprintln!(
        "augur: unresolved: {} inodes ({} pages); lost events: {}{}{}",
        p.unresolved.inodes,
        p.unresolved.pages,
        report.lost_events,
        if report.lost_by_cause.is_empty() {
            String::new()
        } else {
            let causes: Vec<String> = report.lost_by_cause.iter().map(|(why, n)| format!("{n} {why}")).collect();
            format!(" ({})", causes.join(", "))
        },
        if report.open_overflows > 0 { format!("; open-event overflows: {}", report.open_overflows) } else { String::new() }
    );
    eprintln!(
        "augur: {} path lookups ({} missing, {} listed directories{}); {}",
        p.lookups.len(),
        p.lookups.iter().filter(|l| l.kind == LookupKind::Missing).count(),
        p.lookups.iter().filter(|l| l.kind == LookupKind::Dir).count(),
        if report.lookups_skipped > 0 { format!(", {} skipped", report.lookups_skipped) } else { String::new() },
        report.lookup_note
    );
    if report.garbage_lines > 0 {
        eprintln!("augur: {} trace lines did not parse", report.garbage_lines);
    }
}

/// Runs the subcommand.
pub fn run(args: TraceArgs) -> Result<ExitCode> {
    if args.command.is_empty() {
        return Err(Error::Usage("no command to trace (usage: augur trace [OPTIONS] -- CMD [ARGS...])".into()));
    }
    require_root("augur trace")?;
    let output = args.output.clone().unwrap_or_else(|| default_output(&args.command));
    let request = TraceRequest {
        command: args.command.clone(),
        window: args.window.unwrap_or(DEFAULT_WINDOW),
        mode: args.mode,
        lookups: !args.no_lookups,
    };
    let mut report = trace_command(&request).map_err(|e| match e {
        OsError::KernelFeature { feature, detail } if request.mode.is_none() => {
            OsError::KernelFeature { feature, detail: format!("{detail} (--mode file-only records whole files without tracing)") }
        }
        other => other,
    })?;
    profile_file::save(&report.profile, &output)?;
    summarise(&report, &output);
    let cmd = request.command[0].to_string_lossy().into_owned();
    if let Some(sig) = report.interrupted_by {
        eprintln!("augur: interrupted by signal {sig}; the profile covers what ran until then");
        return Ok(ExitCode::from(128u8.saturating_add(sig as u8)));
    }
    let status = match (report.status, report.still_running.take()) {
        (Some(s), _) => Some(s),
        (None, Some(mut child)) => {
            eprintln!("augur: the {:.1} s window closed; waiting for {cmd} to exit", request.window.as_secs_f64());
            child.wait().ok()
        }
        (None, None) => None,
    };
    if let Some(s) = status
        && !s.success()
    {
        eprintln!("augur: note: {cmd} {}; the profile was written anyway", describe_status(&s));
    }
    Ok(ExitCode::SUCCESS)
}
