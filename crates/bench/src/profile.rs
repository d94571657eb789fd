//! Where a benchmark's launch profile comes from: a file the user names, or a trace of the
//! workload taken by the bench itself (with the command's output sent to /dev/null).
//!
//! It loads or records a profile and describes it; it does not replay it.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{BenchError, IoContext, Result};
use augur_core::model::profile::{LaunchProfile, TraceMode};
use augur_os::sense::trace_session::{DEFAULT_WINDOW, TraceRequest, describe_status, trace_command};
use augur_store::profile_file;

use super::measure::Workload;

/// What the benchmark's profile is and where it came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileInfo {
    /// `traced` when the bench traced the workload, else the profile's path.
    pub source: String,
    /// Tracing mode the profile was taken in.
    pub mode: TraceMode,
    /// Files in the profile.
    pub files: usize,
    /// Pages in the profile (of `page_size` bytes).
    pub pages: u64,
    /// Page size of `pages`.
    pub page_size: u64,
    /// Trace events the kernel dropped while tracing (0 for a profile from a file).
    pub lost_events: u64,
    /// Pages of inodes the trace could not name.
    pub unresolved_pages: u64,
}

impl ProfileInfo {
    fn of(profile: &LaunchProfile, source: String, lost_events: u64) -> Self {
        ProfileInfo {
            source,
            mode: profile.mode,
            files: profile.files.len(),
            pages: profile.page_count(),
            page_size: profile.page_size,
            lost_events,
            unresolved_pages: profile.unresolved.pages,
        }
    }
}

/// Loads the profile at `path`.
pub fn load_profile(path: &Path) -> Result<(LaunchProfile, ProfileInfo)> {
    let profile = profile_file::load(path)?;
    let info = ProfileInfo::of(&profile, path.display().to_string(), 0);
    Ok((profile, info))
}

/// Points this process's stdout and stderr at /dev/null until dropped, so that a command started
/// meanwhile (which inherits them) writes nowhere. Single-threaded use only (the CLI).
struct OutputSilenced {
    saved_out: std::os::fd::OwnedFd,
    saved_err: std::os::fd::OwnedFd,
}

impl OutputSilenced {
    fn new() -> Result<Self> {
        use std::io::Write;
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        let dup = |fd| rustix::io::fcntl_dupfd_cloexec(fd, 3).map_err(|e| BenchError::io("saving stdout/stderr", e.into()));
        let saved_out = dup(rustix::stdio::stdout())?;
        let saved_err = dup(rustix::stdio::stderr())?;
        let null = std::fs::OpenOptions::new().write(true).open("/dev/null").context(|| "opening /dev/null".into())?;
        let silence = || -> rustix::io::Result<()> {
            rustix::stdio::dup2_stdout(&null)?;
            rustix::stdio::dup2_stderr(&null)
        };
        let guard = OutputSilenced { saved_out, saved_err };
        silence().map_err(|e| BenchError::io("redirecting output to /dev/null", e.into()))?;
        Ok(guard)
    }
}

impl Drop for OutputSilenced {
    fn drop(&mut self) {
        let _ = rustix::stdio::dup2_stdout(&self.saved_out);
        let _ = rustix::stdio::dup2_stderr(&self.saved_err);
    }
}

/// Traces one run of the workload (its output discarded) and returns its profile. The command
/// must succeed: a profile of a failed start-up is not the one to benchmark.
pub fn trace_workload(workload: &Workload) -> Result<(LaunchProfile, ProfileInfo)> {
    let request = TraceRequest { command: workload.command.clone(), window: DEFAULT_WINDOW, mode: None, lookups: true };
    let mut report = {
        let _quiet = OutputSilenced::new()?;
        let mut report = trace_command(&request)?;
        if let Some(mut child) = report.still_running.take() {
            report.status = child.wait().ok();
        }
        report
    };
    if let Some(sig) = report.interrupted_by {
        return Err(BenchError::Command { command: workload.display(), detail: format!("trace interrupted by signal {sig}") });
    }
    if let Some(status) = report.status.take()
        && !status.success()
    {
        return Err(BenchError::Command { command: workload.display(), detail: describe_status(&status) });
    }
    let info = ProfileInfo::of(&report.profile, "traced".into(), report.lost_events);
    Ok((report.profile, info))
}
