//! What can be wrong with an input handed to the core: a file whose content is corrupt or whose
//! format version is newer than this build ([`FormatError`]), and the I/O failure shape every
//! layer reuses ([`IoFailure`], [`IoContext`]).
//!
//! Nothing here prints, exits or picks an exit code: the `augur` binary maps every layer's error
//! to its exit code, and nowhere else does.

use std::io;
use std::path::PathBuf;

/// An input (a file, a daemon's answer) whose content augur cannot use.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// The content could not be parsed or contradicts itself.
    #[error("{}: corrupt {what}: {detail}", path.display())]
    Corrupt { path: PathBuf, what: &'static str, detail: String },

    /// The content was written by a newer augur, in a format version this build does not know.
    #[error(
        "{}: {what} format version {found} is newer than this augur supports (up to {supported}); upgrade augur",
        path.display()
    )]
    UnsupportedVersion { path: PathBuf, what: &'static str, found: u32, supported: u32 },
}

/// An I/O error with what augur was doing at the time; every layer's error carries one.
#[derive(Debug, thiserror::Error)]
#[error("{context}: {source}")]
pub struct IoFailure {
    /// What was being done, e.g. "writing /var/lib/augur/state.db".
    pub context: String,
    /// What the kernel answered.
    #[source]
    pub source: io::Error,
}

impl IoFailure {
    /// Wraps an I/O error with what was being done.
    pub fn new(context: impl Into<String>, source: io::Error) -> Self {
        IoFailure { context: context.into(), source }
    }

    /// Whether the kernel refused for lack of privilege (the CLI reports that as "needs root").
    pub fn is_permission_denied(&self) -> bool {
        self.source.kind() == io::ErrorKind::PermissionDenied
    }
}

/// Adds context to `io::Result`s: `file.read(..).context(|| "reading profile".into())?`; `?` then
/// turns the [`IoFailure`] into the calling layer's error.
pub trait IoContext<T> {
    /// Wraps the error with a description of what was being done.
    fn context(self, what: impl FnOnce() -> String) -> Result<T, IoFailure>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T, IoFailure> {
        self.map_err(|e| IoFailure::new(what(), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_file_and_stay_one_line() {
        let e = FormatError::UnsupportedVersion { path: "p.json".into(), what: "profile", found: 9, supported: 2 };
        assert_eq!(e.to_string(), "p.json: profile format version 9 is newer than this augur supports (up to 2); upgrade augur");
        let e = FormatError::Corrupt { path: "t".into(), what: "usage trace", detail: "line 3: x".into() };
        assert_eq!(e.to_string(), "t: corrupt usage trace: line 3: x");
        let e: Result<(), _> = Err(io::Error::from(io::ErrorKind::PermissionDenied)).context(|| "reading x".into());
        let e = e.unwrap_err();
        assert!(e.is_permission_denied() && e.to_string().starts_with("reading x: "), "{e}");
    }
}
