//! Who the process runs as. Owns the root check every privileged command makes first; it decides
//! nothing else.

use augur_core::error::{Error, Result};

/// Fails with [`Error::NotRoot`] unless the effective user is root.
pub fn require_root(action: &str) -> Result<()> {
    if rustix::process::geteuid().is_root() { Ok(()) } else { Err(Error::NotRoot { action: action.to_string() }) }
}
