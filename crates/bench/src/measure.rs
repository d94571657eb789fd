//! One timed run of a workload: elapsed wall-clock time from spawn to exit, and what the kernel
//! accounted to the process (CPU time, major faults, blocks read), from which the I/O wait is
//! derived as Kroeger and Long did: elapsed − (user + sys).
//!
//! It runs the command with its output sent to /dev/null and reports; it keeps no statistics.

use std::ffi::OsString;
use std::process::{Command, Stdio};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};
use augur_os::sense::child_usage::wait_with_usage;
use augur_os::sense::trace_session::describe_status;

/// What is measured: a command and its arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    /// argv; the first element is the program, looked up in PATH.
    pub command: Vec<OsString>,
}

impl Workload {
    /// A workload running `command`.
    pub fn new(command: Vec<OsString>) -> Self {
        Workload { command }
    }

    /// The command as text, each argument quoted for a POSIX shell where needed.
    pub fn display(&self) -> String {
        self.command.iter().map(|a| shell_quote(&a.to_string_lossy())).collect::<Vec<_>>().join(" ")
    }

    /// The command as strings (lossy), for JSON.
    pub fn argv(&self) -> Vec<String> {
        self.command.iter().map(|a| a.to_string_lossy().into_owned()).collect()
    }
}

/// Quotes `arg` for a POSIX shell when it holds anything but plain word characters.
pub fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty() && arg.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain { arg.to_string() } else { format!("'{}'", arg.replace('\'', "'\\''")) }
}

/// One measured run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSample {
    /// Wall-clock time from spawn to exit, in milliseconds.
    pub elapsed_ms: f64,
    /// CPU time in user mode, in milliseconds.
    pub user_ms: f64,
    /// CPU time in the kernel, in milliseconds.
    pub sys_ms: f64,
    /// elapsed − (user + sys), at least 0 (a multi-threaded program can use more CPU time than
    /// wall-clock time; then this is 0 and says nothing).
    pub io_wait_ms: f64,
    /// Page faults that needed I/O.
    pub major_faults: u64,
    /// 512-byte blocks read by the file systems for it.
    pub blocks_in: u64,
}

/// Runs the workload once with stdin, stdout and stderr on /dev/null, and measures it. A command
/// that cannot start or exits unsuccessfully is an error: its timings would mean nothing.
pub fn run_to_exit(workload: &Workload) -> Result<RunSample> {
    let Some(program) = workload.command.first() else {
        return Err(BenchError::Usage("no command to run".into()));
    };
    let name = program.to_string_lossy().into_owned();
    let mut cmd = Command::new(program);
    cmd.args(&workload.command[1..]).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    let started = Instant::now();
    let child = cmd.spawn().map_err(|e| BenchError::Command {
        command: name.clone(),
        detail: if e.kind() == std::io::ErrorKind::NotFound { "command not found".into() } else { format!("cannot start: {e}") },
    })?;
    let (status, usage) = wait_with_usage(child).map_err(|e| BenchError::io(format!("waiting for {name}"), e))?;
    let elapsed = started.elapsed();
    if !status.success() {
        return Err(BenchError::Command { command: workload.display(), detail: describe_status(&status) });
    }
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
    let cpu = usage.user + usage.system;
    Ok(RunSample {
        elapsed_ms: ms(elapsed),
        user_ms: ms(usage.user),
        sys_ms: ms(usage.system),
        io_wait_ms: ms(elapsed.saturating_sub(cpu)),
        major_faults: usage.major_faults,
        blocks_in: usage.blocks_in,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_is_minimal_and_safe() {
        assert_eq!(shell_quote("python3"), "python3");
        assert_eq!(shell_quote("import json"), "'import json'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn measures_a_run_and_rejects_failures() {
        let ok = run_to_exit(&Workload::new(vec!["true".into()])).unwrap();
        assert!(ok.elapsed_ms > 0.0 && ok.io_wait_ms >= 0.0);
        let err = run_to_exit(&Workload::new(vec!["false".into()])).unwrap_err();
        assert!(matches!(err, BenchError::Command { .. }), "{err}");
        let err = run_to_exit(&Workload::new(vec!["/nonexistent/augur-cmd".into()])).unwrap_err();
        assert!(err.to_string().contains("command not found"), "{err}");
    }
}
