//! `augur-init`: augur's binary run as the kernel's init (`init=/usr/sbin/augur-init`, a link to
//! `augur`). It starts `augur boot` beside the boot, waits until that records (at most
//! [`RECORDER_WAIT`]), then executes the real init (`/sbin/init`, or `AUGUR_INIT=PATH` from the
//! kernel's command line), which stays PID 1. So the boot recorder sees the init load itself and
//! the loader loads the last boots' first pages before the init asks for them; and the
//! `augur-boot.service` unit is then skipped.
//!
//! It must never keep the machine from booting: whatever fails before the handover is reported on
//! the console and the init is executed all the same. It owns the handover only; what to load and
//! record is `augur boot`'s.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use crate::error::exit;
use augur_os::init_handoff;

/// The name this program answers to as the init (the link's name).
pub const INIT_NAME: &str = "augur-init";

/// How long the init waits for the recorder to start: enough for it to set up its trace on a
/// slow disk, short enough that a stuck recorder delays the boot little.
pub const RECORDER_WAIT: Duration = Duration::from_millis(1500);

/// True when the program was started under the init's name.
pub fn invoked_as_init(argv0: Option<&OsStr>) -> bool {
    argv0.and_then(|a| Path::new(a).file_name()).is_some_and(|n| n == INIT_NAME)
}

/// Runs `augur-init` with the kernel's arguments for the init (`args`, without `argv[0]`).
pub fn run(argv0: &OsStr, args: Vec<OsString>) -> ExitCode {
    if std::process::id() != 1 {
        eprintln!(
            "augur-init: runs as the kernel's init only (init=/usr/sbin/augur-init on the kernel's command line), not as process {}",
            std::process::id()
        );
        return ExitCode::from(exit::USAGE);
    }
    let own = std::env::current_exe().ok().unwrap_or_else(|| PathBuf::from(argv0));
    let requested = std::env::var_os(init_handoff::INIT_VARIABLE);
    let Some(init) = init_handoff::choose_init(requested.as_deref(), Some(&own)) else {
        eprintln!("augur-init: no init to execute (tried {})", init_handoff::INIT_CANDIDATES.join(", "));
        return ExitCode::from(exit::KERNEL);
    };
    // The recorder is this same binary under its own name: `augur boot`.
    let boot_args = [OsStr::new("boot"), OsStr::new("--before-init"), init.as_os_str()];
    if let Err(e) = init_handoff::start_beside_init(&own, "augur", &boot_args, RECORDER_WAIT) {
        eprintln!("augur-init: not loading or recording this boot: cannot start {}: {e}", own.display());
    }
    let err = init_handoff::exec_init(&init, &args);
    eprintln!("augur-init: cannot execute {}: {err}", init.display());
    // The kernel's own fallbacks, in its order, before giving up (PID 1 exiting panics the kernel).
    for other in init_handoff::INIT_CANDIDATES.iter().map(Path::new).filter(|p| *p != init) {
        let err = init_handoff::exec_init(other, &args);
        eprintln!("augur-init: cannot execute {}: {err}", other.display());
    }
    ExitCode::from(exit::KERNEL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_init_name_starts_the_init() {
        assert!(invoked_as_init(Some(OsStr::new("/usr/sbin/augur-init"))));
        assert!(invoked_as_init(Some(OsStr::new("augur-init"))));
        assert!(!invoked_as_init(Some(OsStr::new("/usr/bin/augur"))));
        assert!(!invoked_as_init(Some(OsStr::new("augur-init-not"))));
        assert!(!invoked_as_init(None));
    }
}
