//! Who the process runs as, and who is on the other end of a local socket. Owns the root check
//! every privileged command makes first and the peer-credential check; it decides nothing else
//! (who may use the control socket is the daemon's rule).

use crate::error::{OsError, Result};

/// Fails with [`OsError::NotRoot`] unless the effective user is root.
pub fn require_root(action: &str) -> Result<()> {
    if rustix::process::geteuid().is_root() { Ok(()) } else { Err(OsError::NotRoot { action: action.to_string() }) }
}

/// True when the peer of `stream` runs as root or as this process's effective user (from its
/// `SO_PEERCRED` credentials); false when they cannot be read.
pub fn peer_is_root_or_same_user(stream: &std::os::unix::net::UnixStream) -> bool {
    match rustix::net::sockopt::socket_peercred(stream) {
        Ok(cred) => cred.uid.is_root() || cred.uid == rustix::process::geteuid(),
        Err(_) => false,
    }
}
