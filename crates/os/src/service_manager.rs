//! What the service manager says of the boot: which of systemd's boot targets are active
//! (`systemctl show -p ActiveState`), the default target (`systemctl get-default`), whether a
//! user session exists (logind's `/run/systemd/users`), and the phases `augur mark` wrote under
//! other inits.
//!
//! It reports; which phase that makes and what to do about it is `augur-engine::boot`'s.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;
use std::process::{Command, Stdio};

/// Where `augur mark PHASE` writes (one phase name a line) and `augur boot` reads.
pub const MARK_FILE: &str = "/run/augur-boot/phase";

/// True when systemd is the running init (`sd_booted`'s test).
pub fn systemd_booted() -> bool {
    Path::new("/run/systemd/system").is_dir()
}

/// Whether each of `units` is active, in order; `None` when `systemctl` cannot say (not
/// installed, systemd not running).
pub fn units_active(units: &[&str]) -> Option<Vec<bool>> {
    let out = Command::new("systemctl")
        .args(["show", "--property=ActiveState", "--value", "--"])
        .args(units)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    parse_active_states(&text, units.len())
}

/// `systemctl show --value` prints one value a unit, each followed by an empty line.
fn parse_active_states(text: &str, units: usize) -> Option<Vec<bool>> {
    let states: Vec<bool> = text.lines().filter(|l| !l.trim().is_empty()).map(|l| l.trim() == "active").collect();
    (states.len() == units).then_some(states)
}

/// The target systemd boots into (`graphical.target`, `multi-user.target`...), if it says.
pub fn default_target() -> Option<String> {
    let out = Command::new("systemctl").arg("get-default").stdin(Stdio::null()).stderr(Stdio::null()).output().ok()?;
    let name = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !name.is_empty()).then_some(name)
}

/// True when logind knows a logged-in user (a file per user in `/run/systemd/users`).
pub fn user_session_exists() -> bool {
    fs::read_dir("/run/systemd/users").is_ok_and(|mut d| d.any(|e| e.is_ok()))
}

/// The phase names `augur mark` wrote to `path`, in order; none when it does not exist.
pub fn marked_phases(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .map(|t| t.lines().map(|l| l.trim().to_string()).filter(|l| !l.is_empty()).collect())
        .unwrap_or_default()
}

/// Appends `phase` to the mark file at `path` (its directory created 0755 when missing; the file
/// 0644, so an unprivileged reader can see the phases).
pub fn mark_phase(path: &Path, phase: &str) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        fs::DirBuilder::new().recursive(true).mode(0o755).create(dir)?;
    }
    let mut f = fs::OpenOptions::new().create(true).append(true).mode(0o644).custom_flags(libc::O_NOFOLLOW).open(path)?;
    writeln!(f, "{phase}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn active_states_are_read_one_a_unit() {
        assert_eq!(parse_active_states("active\n\ninactive\n\nactivating\n", 3), Some(vec![true, false, false]));
        assert_eq!(parse_active_states("active\n", 2), None);
    }

    #[test]
    fn marks_are_appended_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run/augur/boot-phase");
        assert!(marked_phases(&path).is_empty());
        mark_phase(&path, "basic").unwrap();
        mark_phase(&path, "session").unwrap();
        assert_eq!(marked_phases(&path), ["basic", "session"]);
    }
}
