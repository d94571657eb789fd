//! Who the process runs as. Owns the root check every privileged command makes first; it decides
//! nothing else.

use crate::error::{OsError, Result};

/// Fails with [`OsError::NotRoot`] unless the effective user is root.
pub fn require_root(action: &str) -> Result<()> {
    if rustix::process::geteuid().is_root() { Ok(()) } else { Err(OsError::NotRoot { action: action.to_string() }) }
}
