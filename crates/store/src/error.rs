//! What can go wrong with what persists: a state or profile file that is missing, corrupt or
//! from a newer augur, a state path that is not a file, an I/O error with what was being done.
//!
//! Messages are one line and name the file. Choosing an exit code is the `augur` binary's
//! business, not this layer's.

use std::io;
use std::path::{Path, PathBuf};

pub use augur_core::error::{FormatError, IoContext, IoFailure};

/// Result alias of the store.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A store failure, named by what a caller can do about it.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file to read does not exist.
    #[error("{}: no such file", path.display())]
    NotFound { path: PathBuf },

    /// The file is corrupt or from a newer augur ([`FormatError`] says which).
    #[error(transparent)]
    Format(#[from] FormatError),

    /// The state path names something other than a regular file (a directory, a device).
    #[error("{}: state path is not a regular file", path.display())]
    NotAFile { path: PathBuf },

    /// An I/O (or SQLite) error with what was being done.
    #[error(transparent)]
    Io(#[from] IoFailure),
}

impl StoreError {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        StoreError::Io(IoFailure::new(context, source))
    }

    /// Wraps an I/O error on `path`, turning "not found" into [`StoreError::NotFound`].
    pub fn io_at(path: &Path, doing: &str, source: io::Error) -> Self {
        if source.kind() == io::ErrorKind::NotFound {
            StoreError::NotFound { path: path.to_path_buf() }
        } else {
            StoreError::io(format!("{doing} {}", path.display()), source)
        }
    }

    /// `path` holds a corrupt `what`.
    pub fn corrupt(path: &Path, what: &'static str, detail: String) -> Self {
        StoreError::Format(FormatError::Corrupt { path: path.to_path_buf(), what, detail })
    }

    /// `path` holds a `what` in format version `found`, newer than `supported`.
    pub fn too_new(path: &Path, what: &'static str, found: u32, supported: u32) -> Self {
        StoreError::Format(FormatError::UnsupportedVersion { path: path.to_path_buf(), what, found, supported })
    }

    /// Accepts a file format version this build reads (1 to `supported`): a newer one is
    /// [`FormatError::UnsupportedVersion`], version 0 (never written) corrupt.
    pub fn check_version(path: &Path, what: &'static str, found: u32, supported: u32) -> Result<(), Self> {
        match found {
            0 => Err(StoreError::corrupt(path, what, "version 0 does not exist".into())),
            v if v > supported => Err(StoreError::too_new(path, what, v, supported)),
            _ => Ok(()),
        }
    }
}
