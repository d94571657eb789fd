//! Keys learned by an augur that named a launch after its first exec, which the launcher rules
//! never produce: wrappers, launchers, memfd and throwaway executables. On upgrade the store
//! drops the profiles (and usage history) under these keys so that wrapper-learned pages are
//! relearned under the real application, never mixed into it.
//!
//! Owns the classification of old keys only. It must not touch the store (the store's upgrade
//! step calls it for each key it holds) nor judge keys by what they learned.

use std::path::Path;

use super::program::{random_name, starts_other_programs};

/// Why an old key is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StaleKey {
    /// A wrapper or launcher: its pages belong to the programs it started.
    Wrapper,
    /// A memfd executable: a generated name, never seen again.
    Memfd,
    /// A throwaway executable or script in a randomly named temporary directory.
    Throwaway,
    /// A loader run as a program (`ld.so PROGRAM` was learned as the loader).
    Loader,
}

/// Whether a key an older augur learned must be dropped on upgrade, and why.
pub fn stale_key(key: &str) -> Option<StaleKey> {
    if key.starts_with("/memfd:") {
        return Some(StaleKey::Memfd);
    }
    let path = Path::new(key.split(' ').next().unwrap_or(key));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    // Executables whose launches were learned under their name although another program did the
    // work (the measured `/usr/bin/dbus-run-session`, `/usr/bin/timeout`, ...). Shells are not
    // among them: `bash -c` launches were keyed `/usr/bin/bash`, but so are terminal shells.
    if starts_other_programs(name) {
        return Some(StaleKey::Wrapper);
    }
    if name == "ld.so" || (name.starts_with("ld-") && name.contains(".so")) {
        return Some(StaleKey::Loader);
    }
    let temporary = ["/tmp/", "/var/tmp/", "/dev/shm/", "/run/user/"].iter().any(|d| key.starts_with(d));
    if temporary && path.components().any(|c| random_name(&c.as_os_str().to_string_lossy())) {
        return Some(StaleKey::Throwaway);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_wrapper_keys_are_dropped_and_applications_kept() {
        assert_eq!(stale_key("/usr/bin/dbus-run-session"), Some(StaleKey::Wrapper));
        assert_eq!(stale_key("/usr/bin/timeout"), Some(StaleKey::Wrapper));
        assert_eq!(stale_key("/memfd:sealed-91173221a7ea"), Some(StaleKey::Memfd));
        assert_eq!(stale_key("/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"), Some(StaleKey::Loader));
        assert_eq!(stale_key("/tmp/tmp.MD6Szv1a/prog"), Some(StaleKey::Throwaway));
        assert_eq!(stale_key("/usr/bin/gedit"), None);
        assert_eq!(stale_key("/usr/bin/python3 -m http.server"), None);
        assert_eq!(stale_key("/usr/bin/bash"), None);
        assert_eq!(stale_key("/tmp/script.py"), None);
    }
}
