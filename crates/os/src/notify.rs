//! The systemd readiness protocol (`sd_notify`): tells the service manager that the daemon is
//! ready, what it is doing, that it is reloading or stopping, and pings the watchdog. Also
//! whether stderr is the journal's stream ([`stderr_is_journal`]).
//!
//! It writes one datagram per call to the `AF_UNIX` socket named by `$NOTIFY_SOCKET` (a path, or
//! an abstract name written with a leading `@`). Without `$NOTIFY_SOCKET` (run by hand, or by
//! another init) every call is a silent no-op. It owns no policy: the event loop decides when it is
//! ready. It does not link libsystemd.

use std::ffi::OsStr;
use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

use crate::error::{OsError, Result};

/// Whether stderr is the stream systemd connected to the journal (`$JOURNAL_STREAM` is
/// `<device>:<inode>` of that stream, and stays set in children whose stderr went elsewhere).
pub fn stderr_is_journal() -> bool {
    let Some(stream) = std::env::var_os("JOURNAL_STREAM") else { return false };
    let Ok(stat) = rustix::fs::fstat(std::io::stderr()) else { return false };
    names_stream(&stream.to_string_lossy(), stat.st_dev, stat.st_ino)
}

fn names_stream(journal_stream: &str, dev: u64, ino: u64) -> bool {
    let Some((d, i)) = journal_stream.split_once(':') else { return false };
    d.parse() == Ok(dev) && i.parse() == Ok(ino)
}

/// A handle on the service manager's notification socket, or a no-op when there is none.
#[derive(Debug)]
pub struct Notifier {
    target: Option<(UnixDatagram, SocketAddr)>,
}

impl Notifier {
    /// The notifier for `$NOTIFY_SOCKET`; inactive (all calls no-ops) when it is unset or empty.
    pub fn from_env() -> Result<Notifier> {
        Notifier::from_socket_name(std::env::var_os("NOTIFY_SOCKET").as_deref())
    }

    /// The notifier for a `$NOTIFY_SOCKET`-style name: `/path`, or `@abstract`; `None` or empty
    /// gives an inactive notifier.
    pub fn from_socket_name(name: Option<&OsStr>) -> Result<Notifier> {
        let name = match name {
            Some(n) if !n.is_empty() => n,
            _ => return Ok(Notifier { target: None }),
        };
        let bytes = name.as_bytes();
        let addr = match bytes[0] {
            b'/' => SocketAddr::from_pathname(name),
            b'@' => SocketAddr::from_abstract_name(&bytes[1..]),
            _ => {
                return Err(OsError::io(
                    format!("NOTIFY_SOCKET={}", name.to_string_lossy()),
                    io::Error::new(io::ErrorKind::InvalidInput, "neither a path nor an @abstract name"),
                ));
            }
        }
        .map_err(|e| OsError::io(format!("NOTIFY_SOCKET={}", name.to_string_lossy()), e))?;
        let socket = UnixDatagram::unbound().map_err(|e| OsError::io("creating the notification socket", e))?;
        Ok(Notifier { target: Some((socket, addr)) })
    }

    /// Whether a service manager is listening (`$NOTIFY_SOCKET` was set).
    pub fn is_active(&self) -> bool {
        self.target.is_some()
    }

    /// Sends raw `KEY=value` lines (newline-separated). No-op when inactive.
    pub fn send(&self, state: &str) -> Result<()> {
        let Some((socket, addr)) = &self.target else { return Ok(()) };
        socket.send_to_addr(state.as_bytes(), addr).map(|_| ()).map_err(|e| OsError::io("notifying the service manager", e))
    }

    /// `READY=1`: tracing and state are up; systemd finishes `systemctl start` here.
    pub fn ready(&self, status: &str) -> Result<()> {
        self.send(&format!("READY=1\nSTATUS={}", one_line(status)))
    }

    /// `STATUS=...`: a one-line description shown by `systemctl status`.
    pub fn status(&self, status: &str) -> Result<()> {
        self.send(&format!("STATUS={}", one_line(status)))
    }

    /// `RELOADING=1`: a configuration reload (SIGHUP) began; follow it with [`Notifier::ready`].
    pub fn reloading(&self) -> Result<()> {
        self.send(&format!("RELOADING=1\nMONOTONIC_USEC={}", crate::sense::monotonic_us()))
    }

    /// `STOPPING=1`: shutdown began (state is being saved).
    pub fn stopping(&self) -> Result<()> {
        self.send("STOPPING=1\nSTATUS=saving state and stopping")
    }

    /// `WATCHDOG=1`: the event loop is alive. Only needed when [`watchdog_interval`] is `Some`.
    pub fn watchdog(&self) -> Result<()> {
        self.send("WATCHDOG=1")
    }
}

/// How often the service manager expects [`Notifier::watchdog`] (half of `$WATCHDOG_USEC`, as
/// `sd_watchdog_enabled` advises), or `None` when no watchdog is configured for this process.
pub fn watchdog_interval() -> Option<Duration> {
    watchdog_interval_from(
        std::env::var_os("WATCHDOG_USEC").as_deref(),
        std::env::var_os("WATCHDOG_PID").as_deref(),
        std::process::id(),
    )
}

fn watchdog_interval_from(usec: Option<&OsStr>, pid: Option<&OsStr>, me: u32) -> Option<Duration> {
    let usec: u64 = usec?.to_str()?.parse().ok().filter(|&u| u > 0)?;
    if let Some(pid) = pid {
        let pid: u32 = pid.to_str()?.parse().ok()?;
        if pid != me {
            return None;
        }
    }
    Some(Duration::from_micros(usec / 2))
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_stream_must_name_this_very_stream() {
        assert!(names_stream("8:1234", 8, 1234));
        assert!(!names_stream("8:1234", 8, 1235));
        assert!(!names_stream("8:1234", 9, 1234));
        assert!(!names_stream("garbage", 8, 1234));
        assert!(!names_stream("", 8, 1234));
    }

    fn recv(listener: &UnixDatagram) -> String {
        let mut buf = [0u8; 512];
        let n = listener.recv(&mut buf).unwrap();
        String::from_utf8(buf[..n].to_vec()).unwrap()
    }

    #[test]
    fn sends_each_state_to_a_path_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let listener = UnixDatagram::bind(&path).unwrap();
        let n = Notifier::from_socket_name(Some(path.as_os_str())).unwrap();
        assert!(n.is_active());
        n.ready("learning 3 applications\nin mode access").unwrap();
        assert_eq!(recv(&listener), "READY=1\nSTATUS=learning 3 applications in mode access");
        n.status("idle").unwrap();
        assert_eq!(recv(&listener), "STATUS=idle");
        n.reloading().unwrap();
        let msg = recv(&listener);
        assert!(msg.starts_with("RELOADING=1\nMONOTONIC_USEC="), "{msg}");
        n.stopping().unwrap();
        assert!(recv(&listener).starts_with("STOPPING=1\n"));
        n.watchdog().unwrap();
        assert_eq!(recv(&listener), "WATCHDOG=1");
    }

    #[test]
    fn an_at_sign_names_an_abstract_socket() {
        let name = format!("augur-notify-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let listener = UnixDatagram::bind_addr(&addr).unwrap();
        let n = Notifier::from_socket_name(Some(OsStr::new(&format!("@{name}")))).unwrap();
        n.ready("up").unwrap();
        assert_eq!(recv(&listener), "READY=1\nSTATUS=up");
    }

    #[test]
    fn without_a_socket_every_call_is_a_no_op() {
        for name in [None, Some(OsStr::new(""))] {
            let n = Notifier::from_socket_name(name).unwrap();
            assert!(!n.is_active());
            n.ready("x").unwrap();
            n.stopping().unwrap();
        }
    }

    #[test]
    fn a_relative_name_is_rejected_and_a_dead_socket_is_an_error_not_a_panic() {
        assert!(Notifier::from_socket_name(Some(OsStr::new("relative/notify"))).is_err());
        let dir = tempfile::tempdir().unwrap();
        let n = Notifier::from_socket_name(Some(dir.path().join("nobody").as_os_str())).unwrap();
        assert!(n.ready("x").is_err());
    }

    #[test]
    fn watchdog_interval_is_half_the_timeout_and_only_for_the_named_pid() {
        let s = |v: &'static str| Some(OsStr::new(v));
        assert_eq!(watchdog_interval_from(s("10000000"), None, 7), Some(Duration::from_secs(5)));
        assert_eq!(watchdog_interval_from(s("10000000"), s("7"), 7), Some(Duration::from_secs(5)));
        assert_eq!(watchdog_interval_from(s("10000000"), s("8"), 7), None);
        assert_eq!(watchdog_interval_from(None, None, 7), None);
        assert_eq!(watchdog_interval_from(s("0"), None, 7), None);
        assert_eq!(watchdog_interval_from(s("x"), None, 7), None);
    }
}
