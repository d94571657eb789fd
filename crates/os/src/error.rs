//! What can go wrong talking to the kernel: a feature it lacks, a privilege the process lacks, a
//! command that could not start, an I/O error with what was being done.
//!
//! Messages are one line and carry their context (paths, what was being done). Choosing an exit
//! code is the `augur` binary's business, not this layer's.

use std::io;
use std::path::{Path, PathBuf};

pub use augur_core::error::{IoContext, IoFailure};

/// Result alias of the OS layer.
pub type Result<T, E = OsError> = std::result::Result<T, E>;

/// An OS-layer failure, named by what a caller can do about it.
#[derive(Debug, thiserror::Error)]
pub enum OsError {
    /// The operation needs privileges the process does not have.
    #[error("{action} needs root (run it with sudo or as root)")]
    NotRoot { action: String },

    /// The running kernel lacks a feature augur needs for this operation.
    #[error("kernel lacks {feature}: {detail}")]
    KernelFeature { feature: String, detail: String },

    /// A file the kernel should provide, or one named by the caller, does not exist.
    #[error("{}: no such file", path.display())]
    NotFound { path: PathBuf },

    /// A command augur was asked to run could not start, was interrupted, or failed.
    #[error("{command}: {detail}")]
    Command { command: String, detail: String },

    /// There was no command to run (an empty argument list).
    #[error("no command to trace (usage: augur trace [OPTIONS] -- CMD [ARGS...])")]
    NoCommand,

    /// An environment variable augur reads holds a value it does not accept.
    #[error("{variable}={value:?}: expected {expected}")]
    BadEnvironment { variable: &'static str, value: String, expected: &'static str },

    /// An I/O error with what was being done.
    #[error(transparent)]
    Io(#[from] IoFailure),
}

impl OsError {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        OsError::Io(IoFailure::new(context, source))
    }

    /// Wraps an I/O error on `path`, turning "not found" into [`OsError::NotFound`].
    pub fn io_at(path: &Path, doing: &str, source: io::Error) -> Self {
        if source.kind() == io::ErrorKind::NotFound {
            OsError::NotFound { path: path.to_path_buf() }
        } else {
            OsError::io(format!("{doing} {}", path.display()), source)
        }
    }

    /// The underlying I/O error, if this is one (callers retry on particular errnos).
    pub fn io_source(&self) -> Option<&io::Error> {
        match self {
            OsError::Io(f) => Some(&f.source),
            _ => None,
        }
    }
}
