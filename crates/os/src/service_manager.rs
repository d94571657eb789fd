//! What the service manager says of the boot: when each of systemd's boot targets was reached
//! (`systemctl show -p ActiveEnterTimestampMonotonic`), the default target (`systemctl
//! get-default`), whether a user is logged in and since when (logind's `/run/systemd/users`),
//! and the phases `augur mark` wrote under other inits, with when it wrote them.
//!
//! Times are `CLOCK_MONOTONIC` microseconds, the clock systemd and logind stamp events with, so a
//! phase reached before `augur boot` looked still gets the time it began. It reports; which phase
//! that makes and what to do about it is `augur-engine::boot`'s.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;
use std::process::{Command, Stdio};

/// journald's socket for streams (what it reads services' standard output and error from).
const JOURNAL_STREAM_SOCKET: &str = "/run/systemd/journal/stdout";

/// Connects this process's standard error to journald, its lines filed under `identifier` at
/// priority info, as systemd connects a unit's: for a process started before systemd (whose
/// console systemd hangs up as it takes it over). False while journald does not listen yet.
pub fn stderr_to_journal(identifier: &str) -> io::Result<bool> {
    let stream = match std::os::unix::net::UnixStream::connect(JOURNAL_STREAM_SOCKET) {
        Ok(s) => s,
        Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused) => return Ok(false),
        Err(e) => return Err(e),
    };
    stream.shutdown(std::net::Shutdown::Read)?;
    // The stream's header (systemd's journald-stream.c): identifier, unit, priority, whether
    // lines carry a <N> prefix, and forwarding to syslog, kmsg and the console, one per line.
    (&stream).write_all(format!("{identifier}\n\n6\n0\n0\n0\n0\n").as_bytes())?;
    rustix::stdio::dup2_stderr(&stream)?;
    Ok(true)
}

/// Where `augur mark PHASE` writes (a line per phase: its name and the monotonic microseconds it
/// was marked at) and `augur boot` reads.
pub const MARK_FILE: &str = "/run/augur-boot/phase";

/// True when systemd is the running init (`sd_booted`'s test).
pub fn systemd_booted() -> bool {
    Path::new("/run/systemd/system").is_dir()
}

/// When each of `units` last became active, in monotonic microseconds (systemd's
/// `ActiveEnterTimestampMonotonic`), in order: `None` for one never active yet. `None` overall
/// when `systemctl` cannot say (not installed, systemd not running).
pub fn units_entered_us(units: &[&str]) -> Option<Vec<Option<u64>>> {
    let out = Command::new("systemctl")
        .args(["show", "--property=ActiveEnterTimestampMonotonic", "--value", "--"])
        .args(units)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    parse_entered_times(&text, units.len())
}

/// `systemctl show --value` prints one value a unit, each followed by an empty line; 0 is "never".
fn parse_entered_times(text: &str, units: usize) -> Option<Vec<Option<u64>>> {
    let times: Vec<Option<u64>> =
        text.lines().map(str::trim).filter(|l| !l.is_empty()).map(|l| l.parse::<u64>().ok().filter(|t| *t > 0)).collect();
    (times.len() == units).then_some(times)
}

/// The target systemd boots into (`graphical.target`, `multi-user.target`...), if it says; before
/// systemd runs (`augur-init`), what the `default.target` link of its unit directories names.
pub fn default_target() -> Option<String> {
    if systemd_booted() {
        let out = Command::new("systemctl").arg("get-default").stdin(Stdio::null()).stderr(Stdio::null()).output().ok()?;
        let name = String::from_utf8_lossy(&out.stdout).trim().to_string();
        return (out.status.success() && !name.is_empty()).then_some(name);
    }
    DEFAULT_TARGET_LINKS.iter().find_map(|link| {
        let target = fs::read_link(link).ok()?;
        Some(target.file_name()?.to_string_lossy().into_owned())
    })
}

/// Where `systemctl set-default` links `default.target`, the administrator's first.
const DEFAULT_TARGET_LINKS: [&str; 3] =
    ["/etc/systemd/system/default.target", "/lib/systemd/system/default.target", "/usr/lib/systemd/system/default.target"];

/// True when logind knows a logged-in user (a file per user in `/run/systemd/users`).
pub fn user_session_exists() -> bool {
    fs::read_dir("/run/systemd/users").is_ok_and(|mut d| d.any(|e| e.is_ok()))
}

/// When the earliest logged-in user logind knows logged in, in monotonic microseconds (the
/// `MONOTONIC=` of its file in `/run/systemd/users`); `None` when none says.
pub fn first_login_us() -> Option<u64> {
    let dir = fs::read_dir("/run/systemd/users").ok()?;
    dir.filter_map(|e| e.ok())
        // Regular files only (logind keeps FIFOs beside its session files; none should be here).
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| parse_login_time(&fs::read_to_string(e.path()).ok()?))
        .min()
}

/// The `MONOTONIC=` line of a logind user (or session) file, when set.
fn parse_login_time(text: &str) -> Option<u64> {
    text.lines().find_map(|l| l.trim().strip_prefix("MONOTONIC=")?.parse::<u64>().ok()).filter(|t| *t > 0)
}

/// A phase `augur mark` wrote: its name and when (monotonic microseconds; none in a line an
/// older `augur mark` wrote, or one written by hand).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mark {
    /// The phase's name as written.
    pub phase: String,
    /// When it was marked.
    pub at_us: Option<u64>,
}

/// The phases `augur mark` wrote to `path`, in order; none when it does not exist.
pub fn marked_phases(path: &Path) -> Vec<Mark> {
    fs::read_to_string(path).map(|t| parse_marks(&t)).unwrap_or_default()
}

fn parse_marks(text: &str) -> Vec<Mark> {
    text.lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let phase = words.next()?.to_string();
            Some(Mark { phase, at_us: words.next().and_then(|w| w.parse().ok()) })
        })
        .collect()
}

/// Appends `phase`, marked at `at_us` (monotonic microseconds), to the mark file at `path` (its
/// directory created 0755 when missing; the file 0644, so an unprivileged reader can see the
/// phases).
pub fn mark_phase(path: &Path, phase: &str, at_us: u64) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        fs::DirBuilder::new().recursive(true).mode(0o755).create(dir)?;
    }
    let mut f = fs::OpenOptions::new().create(true).append(true).mode(0o644).custom_flags(libc::O_NOFOLLOW).open(path)?;
    writeln!(f, "{phase} {at_us}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_times_are_read_one_a_unit() {
        assert_eq!(parse_entered_times("1500\n\n0\n\n2600\n", 3), Some(vec![Some(1500), None, Some(2600)]));
        assert_eq!(parse_entered_times("1500\n", 2), None);
    }

    #[test]
    fn a_user_file_says_when_the_user_logged_in() {
        let text = "# This is private data. Do not parse.\nNAME=bench\nSTATE=active\nSTOPPING=no\nREALTIME=1795581757000000\n\
                    MONOTONIC=62471796254\nLEADER=33\n";
        assert_eq!(parse_login_time(text), Some(62_471_796_254));
        assert_eq!(parse_login_time("UID=1000\nMONOTONIC=0\n"), None);
        assert_eq!(parse_login_time("UID=1000\n"), None);
    }

    #[test]
    fn marks_are_appended_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run/augur/boot-phase");
        assert!(marked_phases(&path).is_empty());
        mark_phase(&path, "basic", 1_000).unwrap();
        mark_phase(&path, "session", 2_000).unwrap();
        let mark = |phase: &str, at_us| Mark { phase: phase.into(), at_us };
        assert_eq!(marked_phases(&path), [mark("basic", Some(1_000)), mark("session", Some(2_000))]);
        // A line without a time (an older augur mark's) still names its phase.
        assert_eq!(parse_marks("sysinit\n\nbasic 7\n"), [mark("sysinit", None), mark("basic", Some(7))]);
    }
}
