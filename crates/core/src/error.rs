//! The library's typed errors and the exit code each maps to.
//!
//! Every fallible library function returns [`Result`]. The CLI renders an [`Error`] as one line on
//! stderr and exits with [`Error::exit_code`]; nothing here prints or exits.

use std::io;
use std::path::{Path, PathBuf};

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Distinct process exit codes, one per class of failure. Documented in the README.
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
}

/// Everything that can go wrong in augur, typed so callers can react and the CLI can explain.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An input file does not exist.
    #[error("{}: no such file", path.display())]
    NotFound { path: PathBuf },

    /// An input file could not be parsed.
    #[error("{}: corrupt {what}: {detail}", path.display())]
    Corrupt { path: PathBuf, what: &'static str, detail: String },

    /// An input file was written by a newer augur.
    #[error(
        "{}: {what} format version {found} is newer than this augur supports (up to {supported}); upgrade augur",
        path.display()
    )]
    UnsupportedVersion { path: PathBuf, what: &'static str, found: u32, supported: u32 },

    /// The configuration is invalid; `line` is 1-based when known.
    #[error("{}{}: {detail}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Config { path: PathBuf, line: Option<usize>, detail: String },

    /// The operation needs privileges the process does not have.
    #[error("{action} needs root (run it with sudo or as root)")]
    NotRoot { action: String },

    /// The running kernel lacks a feature augur needs for this operation.
    #[error("kernel lacks {feature}: {detail}")]
    Kernel { feature: String, detail: String },

    /// The daemon's control socket is absent or refuses connections.
    #[error("augur daemon is not running (no answer on {})", socket.display())]
    NoDaemon { socket: PathBuf },

    /// A command augur was asked to run could not start or failed.
    #[error("{command}: {detail}")]
    Command { command: String, detail: String },

    /// The caller asked for something inconsistent (beyond what clap checks).
    #[error("{0}")]
    Usage(String),

    /// An I/O error with what augur was doing at the time.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
}

impl Error {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::NotFound { .. } => exit::NOT_FOUND,
            Error::Corrupt { .. } => exit::CORRUPT,
            Error::UnsupportedVersion { .. } => exit::UNSUPPORTED_VERSION,
            Error::Config { .. } => exit::CONFIG,
            Error::NotRoot { .. } => exit::PERMISSION,
            Error::Kernel { .. } => exit::KERNEL,
            Error::NoDaemon { .. } => exit::NO_DAEMON,
            Error::Command { .. } => exit::COMMAND,
            Error::Usage(_) => exit::USAGE,
            Error::Io { source, .. } if source.kind() == io::ErrorKind::PermissionDenied => exit::PERMISSION,
            Error::Io { .. } => exit::FAILURE,
        }
    }

    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        Error::Io { context: context.into(), source }
    }

    /// Wraps an I/O error on `path`, turning "not found" into [`Error::NotFound`].
    pub fn io_at(path: &Path, doing: &str, source: io::Error) -> Self {
        if source.kind() == io::ErrorKind::NotFound {
            Error::NotFound { path: path.to_path_buf() }
        } else {
            Error::Io { context: format!("{doing} {}", path.display()), source }
        }
    }
}

/// Adds context to `io::Result`s: `file.read(..).context("reading profile")?`.
pub trait IoContext<T> {
    /// Wraps the error with a description of what was being done.
    fn context(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error::io(what(), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_distinct_per_class() {
        let errors = [
            Error::NotFound { path: "a".into() },
            Error::Corrupt { path: "a".into(), what: "profile", detail: "x".into() },
            Error::UnsupportedVersion { path: "a".into(), what: "profile", found: 9, supported: 1 },
            Error::Config { path: "a".into(), line: Some(3), detail: "x".into() },
            Error::NotRoot { action: "x".into() },
            Error::Kernel { feature: "tracefs".into(), detail: "x".into() },
            Error::NoDaemon { socket: "/run/augur.sock".into() },
            Error::Command { command: "x".into(), detail: "x".into() },
        ];
        let mut codes: Vec<u8> = errors.iter().map(Error::exit_code).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), errors.len());
        assert!(!codes.contains(&exit::OK));
    }

    #[test]
    fn config_error_names_the_line() {
        let e = Error::Config { path: "/etc/augur/config.toml".into(), line: Some(7), detail: "unknown key `foo`".into() };
        assert_eq!(e.to_string(), "/etc/augur/config.toml:7: unknown key `foo`");
    }
}
