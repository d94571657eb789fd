//! What `augur boot` needs when `augur-init` (its own small program, `src/bin/augur-init.rs`
//! of the `augur` package, the kernel's `init=`) started it before the service manager: telling
//! `augur-init` it records, the marker that makes `augur-boot.service` skip itself, and what the
//! init it hands over to is. Also the one-recorder rule: [`BootLock`] (an abstract Unix socket,
//! which the kernel releases when its holder exits, however it exits) keeps a second `augur boot`
//! (the unit, when `augur-init` already started one) from recording the same boot.
//!
//! It decides nothing about what to load.

use std::ffi::OsStr;
use std::io::{self, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::Path;

/// Written by the child once it records (its pid): `augur-boot.service` is skipped when it exists
/// (`ConditionPathExists=!`), so the unit costs the boot nothing then.
pub const STARTED_MARKER: &str = "/run/augur-init.pid";

/// The abstract socket name [`BootLock`] binds.
const LOCK_NAME: &[u8] = b"augur-boot";

/// True when `init` is systemd (what it resolves to is named `systemd`).
pub fn init_is_systemd(init: &Path) -> bool {
    std::fs::canonicalize(init).is_ok_and(|p| p.file_name() == Some(OsStr::new("systemd")))
}

/// In the child: says it records (one byte on standard output, which `augur-init` waits on) and
/// writes [`STARTED_MARKER`]. Failures are ignored: the parent stops waiting after its bound, and
/// without the marker the unit's `augur boot` finds [`BootLock`] held.
pub fn report_recording() {
    let mut out = io::stdout();
    let _ = out.write_all(b"r").and_then(|()| out.flush());
    let _ = std::fs::write(STARTED_MARKER, format!("{}\n", std::process::id()));
}

/// Held by the `augur boot` that records this boot; released when it exits.
#[derive(Debug)]
pub struct BootLock {
    _socket: UnixListener,
}

/// Takes the boot lock: `None` when another process holds it.
pub fn take_boot_lock() -> io::Result<Option<BootLock>> {
    let addr = SocketAddr::from_abstract_name(LOCK_NAME)?;
    match UnixListener::bind_addr(&addr) {
        Ok(socket) => Ok(Some(BootLock { _socket: socket })),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_resolves_to_systemd_is_systemd() {
        assert!(!init_is_systemd(Path::new("/bin/true")));
        assert!(!init_is_systemd(Path::new("/nonexistent/systemd-not")));
    }

    #[test]
    fn one_boot_lock_at_a_time() {
        // Another test run on the machine may hold it: only the holder's exclusivity is checked.
        if let Some(lock) = take_boot_lock().unwrap() {
            assert!(take_boot_lock().unwrap().is_none(), "a second holder");
            drop(lock);
            assert!(take_boot_lock().unwrap().is_some(), "released at drop");
        }
    }
}
