//! What can go wrong in a benchmark: a workload, peer or helper that failed, a suite file that is
//! invalid, an interruption, or any lower layer's error (`From` each).
//!
//! Messages are one line with their context. The `augur-bench` binary maps these to the exit
//! codes `augur` uses; nothing here picks one.

use std::io;
use std::path::{Path, PathBuf};

pub use augur_core::error::{FormatError, IoContext, IoFailure};
pub use augur_engine::config::ConfigError;
pub use augur_os::error::OsError;
pub use augur_store::error::StoreError;

/// Result alias of the benchmarks.
pub type Result<T, E = BenchError> = std::result::Result<T, E>;

/// A benchmark failure, named by what a caller can do about it.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A usage trace or profile is corrupt or from a newer augur.
    #[error(transparent)]
    Format(#[from] FormatError),

    /// The kernel, a privilege or a traced command failed.
    #[error(transparent)]
    Os(#[from] OsError),

    /// A profile or state file is missing, corrupt or unreadable.
    #[error(transparent)]
    Store(#[from] StoreError),

    /// The suite file is invalid (path and line).
    #[error(transparent)]
    Config(#[from] ConfigError),

    /// A file the benchmark needs (the augur binary beside it, a suite file) does not exist.
    #[error("{}: no such file", path.display())]
    NotFound { path: PathBuf },

    /// The command line or the machine asks for something that cannot be done.
    #[error("{0}")]
    Usage(String),

    /// A workload, peer prefetcher, X server or balloon could not start or failed.
    #[error("{command}: {detail}")]
    Command { command: String, detail: String },

    /// A workload did not become ready (exit or window) within its timeout: a measurement that
    /// failed this way is not repeated in later runs of the same profile.
    #[error("{command}: {detail}")]
    TimedOut { command: String, detail: String },

    /// SIGINT, SIGTERM or SIGHUP arrived; every guard has been dropped.
    #[error("augur-bench: interrupted; cleaned up")]
    Interrupted,

    /// An I/O error with what was being done.
    #[error(transparent)]
    Io(#[from] IoFailure),
}

impl BenchError {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        BenchError::Io(IoFailure::new(context, source))
    }

    /// Wraps an I/O error on `path`, turning "not found" into [`BenchError::NotFound`].
    pub fn io_at(path: &Path, doing: &str, source: io::Error) -> Self {
        if source.kind() == io::ErrorKind::NotFound {
            BenchError::NotFound { path: path.to_path_buf() }
        } else {
            BenchError::io(format!("{doing} {}", path.display()), source)
        }
    }

    /// The kernel lacks `feature` (a counter, a cgroup controller) the benchmark needs.
    pub fn kernel(feature: impl Into<String>, detail: impl Into<String>) -> Self {
        BenchError::Os(OsError::KernelFeature { feature: feature.into(), detail: detail.into() })
    }
}
