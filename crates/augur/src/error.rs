//! The `augur` program's error: every layer's error (`From` each), what the command line and the
//! control socket add, and the one place that maps an error to a process exit code ([`exit`]).
//!
//! Nothing below this crate picks an exit code: the layers say what went wrong, this module says
//! what the process reports. The codes are documented in README.md ("Exit codes") and in the
//! augur(1) man page (from [`exit::MEANINGS`]); `packaging/augur.service` lists those a restart
//! cannot fix.

use std::io;
use std::path::{Path, PathBuf};

use augur_core::error::{FormatError, IoFailure};
use augur_engine::config::ConfigError;
use augur_os::error::OsError;
use augur_store::error::StoreError;

/// Result alias of the `augur` program.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Distinct process exit codes, one per class of failure.
pub mod exit {
    /// Success.
    pub const OK: u8 = 0;
    /// An operation failed at run time (I/O error, unexpected kernel answer).
    pub const FAILURE: u8 = 1;
    /// The command line was wrong (clap uses 2 as well).
    pub const USAGE: u8 = 2;
    /// An input file does not exist.
    pub const NOT_FOUND: u8 = 3;
    /// An input file exists but is corrupt.
    pub const CORRUPT: u8 = 4;
    /// An input file has a format version newer than this build understands.
    pub const UNSUPPORTED_VERSION: u8 = 5;
    /// The configuration is invalid.
    pub const CONFIG: u8 = 6;
    /// The operation needs root (or the named capability).
    pub const PERMISSION: u8 = 7;
    /// The kernel lacks a needed feature (tracefs, a tracepoint, a syscall).
    pub const KERNEL: u8 = 8;
    /// The daemon is not running or not reachable.
    pub const NO_DAEMON: u8 = 9;
    /// A command augur was asked to run could not start or failed.
    pub const COMMAND: u8 = 10;
    /// Another augur daemon already answers on the control socket.
    pub const DAEMON_RUNNING: u8 = 11;

    /// Every code with its one-line meaning, as README.md and the man page state them.
    pub const MEANINGS: &[(u8, &str)] = &[
        (OK, "success"),
        (FAILURE, "a run-time failure (I/O error, unexpected kernel answer)"),
        (USAGE, "bad command line"),
        (NOT_FOUND, "an input file does not exist"),
        (CORRUPT, "an input file is corrupt"),
        (UNSUPPORTED_VERSION, "an input file is from a newer augur (format version too new)"),
        (CONFIG, "invalid configuration"),
        (PERMISSION, "needs root"),
        (KERNEL, "the kernel lacks a needed feature (tracefs, a tracepoint)"),
        (NO_DAEMON, "the daemon is not running"),
        (COMMAND, "a command augur was asked to run failed to start or failed"),
        (DAEMON_RUNNING, "another augur daemon is already running"),
    ];
}

/// Everything that can make an `augur` command fail.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An input (a usage trace, a daemon's answer) is corrupt or from a newer augur.
    #[error(transparent)]
    Format(#[from] FormatError),

    /// The kernel, a privilege, or a command run for augur failed.
    #[error(transparent)]
    Os(#[from] OsError),

    /// The state or a profile file is missing, corrupt, too new or unreadable.
    #[error(transparent)]
    Store(#[from] StoreError),

    /// The configuration file is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),

    /// The configured predictor is not one this build has.
    #[error("[predict] predictor: unknown predictor {0:?}")]
    UnknownPredictor(String),

    /// An input file named on the command line (or the configuration) does not exist.
    #[error("{}: no such file", path.display())]
    NotFound { path: PathBuf },

    /// The command line asks for something inconsistent (beyond what clap checks).
    #[error("{0}")]
    Usage(String),

    /// The daemon's control socket is absent or refuses connections.
    #[error("augur daemon is not running (no answer on {})", socket.display())]
    NoDaemon { socket: PathBuf },

    /// Another daemon answers on the control socket this one was to listen on.
    #[error("another augur daemon is running (it answers on {})", socket.display())]
    DaemonAlreadyRunning { socket: PathBuf },

    /// The daemon answered a request with an error, or with an answer that does not fit it.
    #[error("augur daemon: {0}")]
    DaemonRefused(String),

    /// An I/O error with what augur was doing at the time.
    #[error(transparent)]
    Io(#[from] IoFailure),
}

impl Error {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        Error::Io(IoFailure::new(context, source))
    }

    /// Wraps an I/O error on `path`, turning "not found" into [`Error::NotFound`].
    pub fn io_at(path: &Path, doing: &str, source: io::Error) -> Self {
        if source.kind() == io::ErrorKind::NotFound {
            Error::NotFound { path: path.to_path_buf() }
        } else {
            Error::io(format!("{doing} {}", path.display()), source)
        }
    }

    /// The process exit code for this error: the only mapping from errors to exit codes.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Format(e) => format_code(e),
            Error::Os(e) => match e {
                OsError::NotRoot { .. } => exit::PERMISSION,
                OsError::KernelFeature { .. } => exit::KERNEL,
                OsError::NotFound { .. } => exit::NOT_FOUND,
                OsError::Command { .. } => exit::COMMAND,
                OsError::NoCommand | OsError::BadEnvironment { .. } => exit::USAGE,
                OsError::Io(f) => io_code(f),
            },
            Error::Store(e) => match e {
                StoreError::NotFound { .. } => exit::NOT_FOUND,
                StoreError::Format(f) => format_code(f),
                StoreError::NotAFile { .. } => exit::USAGE,
                StoreError::Io(f) => io_code(f),
            },
            Error::Config(_) | Error::UnknownPredictor(_) => exit::CONFIG,
            Error::NotFound { .. } => exit::NOT_FOUND,
            Error::Usage(_) => exit::USAGE,
            Error::NoDaemon { .. } => exit::NO_DAEMON,
            Error::DaemonAlreadyRunning { .. } => exit::DAEMON_RUNNING,
            Error::DaemonRefused(_) => exit::COMMAND,
            Error::Io(f) => io_code(f),
        }
    }
}

fn format_code(e: &FormatError) -> u8 {
    match e {
        FormatError::Corrupt { .. } => exit::CORRUPT,
        FormatError::UnsupportedVersion { .. } => exit::UNSUPPORTED_VERSION,
    }
}

/// An I/O error the kernel refused for lack of privilege needs root; any other is a failure.
fn io_code(f: &IoFailure) -> u8 {
    if f.is_permission_denied() { exit::PERMISSION } else { exit::FAILURE }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corrupt() -> FormatError {
        FormatError::Corrupt { path: "a".into(), what: "profile", detail: "x".into() }
    }

    fn too_new() -> FormatError {
        FormatError::UnsupportedVersion { path: "a".into(), what: "profile", found: 9, supported: 1 }
    }

    fn config() -> ConfigError {
        ConfigError { path: "a".into(), line: Some(3), detail: "x".into() }
    }

    #[test]
    fn exit_codes_are_distinct_per_class() {
        let errors = [
            Error::NotFound { path: "a".into() },
            corrupt().into(),
            too_new().into(),
            config().into(),
            OsError::NotRoot { action: "x".into() }.into(),
            OsError::KernelFeature { feature: "tracefs".into(), detail: "x".into() }.into(),
            Error::NoDaemon { socket: "/run/augur/augur.sock".into() },
            OsError::Command { command: "x".into(), detail: "x".into() }.into(),
            Error::Usage("x".into()),
            Error::io("x", io::Error::other("x")),
            Error::DaemonAlreadyRunning { socket: "/run/augur/augur.sock".into() },
        ];
        let mut codes: Vec<u8> = errors.iter().map(Error::exit_code).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), errors.len());
        assert!(!codes.contains(&exit::OK));
        let documented: Vec<u8> = exit::MEANINGS.iter().map(|(c, _)| *c).filter(|c| *c != exit::OK).collect();
        assert_eq!(codes, documented, "every class has a documented code and every documented code a class");
    }

    #[test]
    fn core_errors_map_to_their_codes() {
        assert_eq!(Error::from(corrupt()).exit_code(), exit::CORRUPT);
        assert_eq!(Error::from(too_new()).exit_code(), exit::UNSUPPORTED_VERSION);
    }

    #[test]
    fn os_errors_map_to_their_codes() {
        let code = |e: OsError| Error::from(e).exit_code();
        assert_eq!(code(OsError::NotRoot { action: "x".into() }), exit::PERMISSION);
        assert_eq!(code(OsError::KernelFeature { feature: "f".into(), detail: "d".into() }), exit::KERNEL);
        assert_eq!(code(OsError::NotFound { path: "/proc/pressure/memory".into() }), exit::NOT_FOUND);
        assert_eq!(code(OsError::Command { command: "x".into(), detail: "command not found".into() }), exit::COMMAND);
        assert_eq!(code(OsError::NoCommand), exit::USAGE);
        assert_eq!(code(OsError::BadEnvironment { variable: "V", value: "x".into(), expected: "y" }), exit::USAGE);
        assert_eq!(code(OsError::io("x", io::Error::other("x"))), exit::FAILURE);
        assert_eq!(code(OsError::io("x", io::ErrorKind::PermissionDenied.into())), exit::PERMISSION);
        assert_eq!(code(OsError::io_at(Path::new("/x"), "opening", io::ErrorKind::NotFound.into())), exit::NOT_FOUND);
    }

    #[test]
    fn store_errors_map_to_their_codes() {
        let code = |e: StoreError| Error::from(e).exit_code();
        assert_eq!(code(StoreError::io_at(Path::new("/p"), "reading profile", io::ErrorKind::NotFound.into())), exit::NOT_FOUND);
        assert_eq!(code(StoreError::corrupt(Path::new("/p"), "profile", "x".into())), exit::CORRUPT);
        assert_eq!(code(StoreError::too_new(Path::new("/p"), "state", 9, 2)), exit::UNSUPPORTED_VERSION);
        assert_eq!(code(StoreError::NotAFile { path: "/p".into() }), exit::USAGE);
        assert_eq!(code(StoreError::io("writing", io::Error::other("disk full"))), exit::FAILURE);
        assert_eq!(code(StoreError::io("writing", io::ErrorKind::PermissionDenied.into())), exit::PERMISSION);
    }

    #[test]
    fn configuration_errors_map_to_invalid_configuration() {
        assert_eq!(Error::from(config()).exit_code(), exit::CONFIG);
        assert_eq!(Error::UnknownPredictor("oracle".into()).exit_code(), exit::CONFIG);
    }

    #[test]
    fn daemon_errors_map_to_their_codes() {
        assert_eq!(Error::NoDaemon { socket: "/s".into() }.exit_code(), exit::NO_DAEMON);
        assert_eq!(Error::DaemonAlreadyRunning { socket: "/s".into() }.exit_code(), exit::DAEMON_RUNNING);
        assert_eq!(Error::DaemonRefused("x".into()).exit_code(), exit::COMMAND);
    }

    #[test]
    fn messages_keep_their_context_on_one_line() {
        let e: Error = config().into();
        assert_eq!(e.to_string(), "a:3: x");
        let e: Error = OsError::io_at(Path::new("/proc/pressure/memory"), "opening", io::ErrorKind::InvalidInput.into()).into();
        assert!(e.to_string().starts_with("opening /proc/pressure/memory: "), "{e}");
        let e = Error::DaemonAlreadyRunning { socket: "/run/augur/augur.sock".into() };
        assert_eq!(e.to_string(), "another augur daemon is running (it answers on /run/augur/augur.sock)");
    }

    #[test]
    fn readme_lists_every_exit_code() {
        let readme = include_str!("../../../README.md");
        let table = readme.split("## Exit codes").nth(1).and_then(|t| t.split("\n## ").next()).unwrap();
        for (code, meaning) in exit::MEANINGS {
            assert!(table.contains(&format!("| {code} | {meaning} |")), "README lacks `| {code} | {meaning} |`");
        }
        let rows = table.lines().filter(|l| l.starts_with("| ") && !l.starts_with("| code") && !l.starts_with("| ---")).count();
        assert_eq!(rows, exit::MEANINGS.len());
    }
}
