//! The kernel's process events connector (netlink `NETLINK_CONNECTOR`, `CN_IDX_PROC`): fork, exec
//! and exit of every process, delivered the moment they happen, so the daemon reacts to a launch
//! without polling /proc.
//!
//! Owns the socket (subscribe, non-blocking receive) and the parsing of its binary messages, which
//! is pure ([`parse_datagram`]) and must never panic on any input. It does not interpret events.
//!
//! Only forks, execs and exits are asked for: since Linux 6.6 the kernel drops the others (a
//! thread renamed, a user or session changed, a trace attached) before they reach the socket, so
//! they wake no one. Older kernels ignore the filter and send everything; the parser skips
//! what it does not know.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::error::{OsError, Result};

const NETLINK_CONNECTOR: i32 = 11;
const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
const PROC_CN_MCAST_LISTEN: u32 = 1;
const NLMSG_HDRLEN: usize = 16;
const CN_MSG_LEN: usize = 20;
const NLMSG_DONE: u16 = 3;
const NLMSG_ERROR: u16 = 2;
const NLMSG_OVERRUN: u16 = 4;

const PROC_EVENT_FORK: u32 = 0x0000_0001;
const PROC_EVENT_EXEC: u32 = 0x0000_0002;
const PROC_EVENT_EXIT: u32 = 0x8000_0000;

/// The subscription message: `PROC_CN_MCAST_LISTEN` from process `pid`, with (Linux 6.6+'s
/// `struct proc_input`) or without an event filter (`enum proc_cn_event` bits to deliver). A
/// kernel before 6.6 ignores a message of the filter's size, so the daemon sends the plain one
/// first and the filtered one after.
pub fn subscribe_message(pid: u32, events: Option<u32>) -> Vec<u8> {
    let payload: Vec<u8> = match events {
        None => PROC_CN_MCAST_LISTEN.to_ne_bytes().to_vec(),
        Some(bits) => [PROC_CN_MCAST_LISTEN.to_ne_bytes(), bits.to_ne_bytes()].concat(),
    };
    let total = (NLMSG_HDRLEN + CN_MSG_LEN + payload.len()) as u32;
    let mut msg = Vec::with_capacity(total as usize);
    msg.extend_from_slice(&total.to_ne_bytes());
    msg.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
    msg.extend_from_slice(&0u16.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    msg.extend_from_slice(&pid.to_ne_bytes());
    msg.extend_from_slice(&CN_IDX_PROC.to_ne_bytes());
    msg.extend_from_slice(&CN_VAL_PROC.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes()); // seq
    msg.extend_from_slice(&0u32.to_ne_bytes()); // ack
    msg.extend_from_slice(&(payload.len() as u16).to_ne_bytes()); // len
    msg.extend_from_slice(&0u16.to_ne_bytes()); // flags
    msg.extend_from_slice(&payload);
    msg
}

/// The events the daemon asks the kernel for (see [`subscribe_message`]).
pub const EVENTS_WANTED: u32 = PROC_EVENT_FORK | PROC_EVENT_EXEC | PROC_EVENT_EXIT;

/// One process event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcEvent {
    /// `parent` (thread `parent_pid` of process `parent_tgid`) created thread `child_pid` of
    /// process `child_tgid` (a new process when `child_pid == child_tgid`).
    Fork { parent_pid: u32, parent_tgid: u32, child_pid: u32, child_tgid: u32, ts_ns: u64 },
    /// Process `tgid` (through its thread `pid`) executed a new program.
    Exec { pid: u32, tgid: u32, ts_ns: u64 },
    /// Thread `pid` of process `tgid` exited (the process is gone when `pid == tgid`).
    Exit { pid: u32, tgid: u32, ts_ns: u64 },
}

/// What one datagram held.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Datagram {
    /// Events understood, in order.
    pub events: Vec<ProcEvent>,
    /// True when the kernel reported that messages were dropped.
    pub overrun: bool,
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    b.get(off..off + 4).map(|s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
}

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    let s = b.get(off..off + 8)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Some(u64::from_ne_bytes(a))
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    b.get(off..off + 2).map(|s| u16::from_ne_bytes([s[0], s[1]]))
}

/// Parses one `struct proc_event` (`what`, `cpu`, `timestamp_ns`, then the event's data).
fn parse_proc_event(ev: &[u8]) -> Option<ProcEvent> {
    let what = u32_at(ev, 0)?;
    let ts_ns = u64_at(ev, 8)?;
    let d = 16;
    match what {
        PROC_EVENT_FORK => Some(ProcEvent::Fork {
            parent_pid: u32_at(ev, d)?,
            parent_tgid: u32_at(ev, d + 4)?,
            child_pid: u32_at(ev, d + 8)?,
            child_tgid: u32_at(ev, d + 12)?,
            ts_ns,
        }),
        PROC_EVENT_EXEC => Some(ProcEvent::Exec { pid: u32_at(ev, d)?, tgid: u32_at(ev, d + 4)?, ts_ns }),
        PROC_EVENT_EXIT => Some(ProcEvent::Exit { pid: u32_at(ev, d)?, tgid: u32_at(ev, d + 4)?, ts_ns }),
        _ => None,
    }
}

/// Parses a datagram of netlink messages from the connector. Anything malformed is skipped.
pub fn parse_datagram(buf: &[u8]) -> Datagram {
    let mut out = Datagram::default();
    let mut off = 0usize;
    while off + NLMSG_HDRLEN <= buf.len() {
        let Some(len) = u32_at(buf, off).map(|l| l as usize) else { break };
        let ty = u16_at(buf, off + 4).unwrap_or(0);
        if len < NLMSG_HDRLEN || off + len > buf.len() {
            break;
        }
        let msg = &buf[off..off + len];
        match ty {
            NLMSG_OVERRUN => out.overrun = true,
            NLMSG_ERROR => {}
            _ => {
                let cn = &msg[NLMSG_HDRLEN..];
                if let (Some(idx), Some(val), Some(dlen)) = (u32_at(cn, 0), u32_at(cn, 4), u16_at(cn, 16))
                    && idx == CN_IDX_PROC
                    && val == CN_VAL_PROC
                    && let Some(data) = cn.get(CN_MSG_LEN..CN_MSG_LEN + dlen as usize)
                    && let Some(ev) = parse_proc_event(data)
                {
                    out.events.push(ev);
                }
            }
        }
        // Messages are 4-byte aligned.
        off += (len + 3) & !3;
    }
    out
}

/// A subscribed process-events socket (needs `CAP_NET_ADMIN`).
#[derive(Debug)]
pub struct ProcConnector {
    fd: OwnedFd,
    buf: Vec<u8>,
    /// Times the kernel dropped events because the daemon read too slowly.
    pub overruns: u64,
}

impl ProcConnector {
    /// Opens the socket, subscribes to process events, and makes it non-blocking.
    pub fn open() -> Result<Self> {
        let kernel = |detail: String| OsError::KernelFeature { feature: "the process events connector".into(), detail };
        // SAFETY: plain socket(2) call; the returned fd is checked and owned below.
        let raw = unsafe {
            libc::socket(libc::AF_NETLINK, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, NETLINK_CONNECTOR)
        };
        if raw < 0 {
            return Err(kernel(std::io::Error::last_os_error().to_string()));
        }
        // SAFETY: `raw` is a freshly created, valid fd nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: sockaddr_nl is plain data; zeroed is a valid value.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as u16;
        addr.nl_pid = 0;
        addr.nl_groups = CN_IDX_PROC;
        // SAFETY: addr is a valid sockaddr_nl and its size is passed.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            return Err(if e.kind() == std::io::ErrorKind::PermissionDenied {
                OsError::NotRoot { action: "listening to process events".into() }
            } else {
                kernel(format!("bind: {e}"))
            });
        }
        // A large receive buffer so bursts of forks do not overrun (force works as root).
        let size: libc::c_int = 4 << 20;
        // SAFETY: setsockopt with a pointer to a c_int and its size.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (&size as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as u32,
            );
        }
        // Every kernel takes the plain subscription; 6.6+ then narrows it to the events wanted
        // (an older one ignores the second message: it only costs the daemon unread events).
        for events in [None, Some(EVENTS_WANTED)] {
            let msg = subscribe_message(std::process::id(), events);
            // SAFETY: send(2) of an initialised buffer of the given length.
            let n = unsafe { libc::send(fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
            if n < 0 && events.is_none() {
                return Err(kernel(format!("subscribe: {}", std::io::Error::last_os_error())));
            }
        }
        Ok(ProcConnector { fd, buf: vec![0; 64 * 1024], overruns: 0 })
    }

    /// Reads every datagram available without blocking and hands each event to `sink`.
    pub fn read_available(&mut self, sink: impl FnMut(ProcEvent)) -> Result<()> {
        self.read_some(usize::MAX, sink).map(|_| ())
    }

    /// Reads at most `max_datagrams` queued datagrams (one event each, as the kernel sends them)
    /// without blocking, so an event loop stays responsive; true when it stopped there (more
    /// may be queued).
    pub fn read_some(&mut self, max_datagrams: usize, mut sink: impl FnMut(ProcEvent)) -> Result<bool> {
        for _ in 0..max_datagrams {
            // SAFETY: recv(2) into our own buffer of the given length.
            let n = unsafe { libc::recv(self.fd.as_raw_fd(), self.buf.as_mut_ptr().cast(), self.buf.len(), 0) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) => return Ok(false),
                    Some(libc::EINTR) => continue,
                    Some(libc::ENOBUFS) => {
                        self.overruns += 1;
                        continue;
                    }
                    _ => return Err(OsError::io("reading process events", e)),
                }
            }
            let d = parse_datagram(&self.buf[..n as usize]);
            if d.overrun {
                self.overruns += 1;
            }
            d.events.into_iter().for_each(&mut sink);
        }
        Ok(true)
    }
}

impl AsFd for ProcConnector {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(what: u32, data: &[u32]) -> Vec<u8> {
        let mut ev = Vec::new();
        ev.extend_from_slice(&what.to_ne_bytes());
        ev.extend_from_slice(&0u32.to_ne_bytes());
        ev.extend_from_slice(&1234u64.to_ne_bytes());
        for d in data {
            ev.extend_from_slice(&d.to_ne_bytes());
        }
        let mut m = Vec::new();
        let total = (NLMSG_HDRLEN + CN_MSG_LEN + ev.len()) as u32;
        m.extend_from_slice(&total.to_ne_bytes());
        m.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(&CN_IDX_PROC.to_ne_bytes());
        m.extend_from_slice(&CN_VAL_PROC.to_ne_bytes());
        m.extend_from_slice(&[0; 8]);
        m.extend_from_slice(&(ev.len() as u16).to_ne_bytes());
        m.extend_from_slice(&[0; 2]);
        m.extend_from_slice(&ev);
        while m.len() % 4 != 0 {
            m.push(0);
        }
        m
    }

    #[test]
    fn fork_exec_exit_parse() {
        let mut buf = message(PROC_EVENT_FORK, &[10, 10, 11, 11]);
        buf.extend(message(PROC_EVENT_EXEC, &[11, 11]));
        buf.extend(message(PROC_EVENT_EXIT, &[11, 11, 0, 17, 10, 10]));
        buf.extend(message(0x200, &[11, 11, 0, 0, 0, 0])); // comm: ignored
        let d = parse_datagram(&buf);
        assert_eq!(
            d.events,
            vec![
                ProcEvent::Fork { parent_pid: 10, parent_tgid: 10, child_pid: 11, child_tgid: 11, ts_ns: 1234 },
                ProcEvent::Exec { pid: 11, tgid: 11, ts_ns: 1234 },
                ProcEvent::Exit { pid: 11, tgid: 11, ts_ns: 1234 },
            ]
        );
        assert!(!d.overrun);
    }

    #[test]
    fn the_subscription_asks_for_forks_execs_and_exits_only() {
        let plain = subscribe_message(42, None);
        assert_eq!(plain.len(), NLMSG_HDRLEN + CN_MSG_LEN + 4);
        assert_eq!(u32_at(&plain, 0), Some(plain.len() as u32));
        assert_eq!(u32_at(&plain, 12), Some(42));
        assert_eq!(u16_at(&plain, NLMSG_HDRLEN + 16), Some(4));
        assert_eq!(u32_at(&plain, NLMSG_HDRLEN + CN_MSG_LEN), Some(PROC_CN_MCAST_LISTEN));
        // struct proc_input { mcast_op, event_type }: the size the kernel recognises as a filter.
        let filtered = subscribe_message(42, Some(EVENTS_WANTED));
        assert_eq!(filtered.len(), NLMSG_HDRLEN + CN_MSG_LEN + 8);
        assert_eq!(u16_at(&filtered, NLMSG_HDRLEN + 16), Some(8));
        assert_eq!(u32_at(&filtered, NLMSG_HDRLEN + CN_MSG_LEN), Some(PROC_CN_MCAST_LISTEN));
        assert_eq!(u32_at(&filtered, NLMSG_HDRLEN + CN_MSG_LEN + 4), Some(0x8000_0003));
        assert_eq!(&plain[4..NLMSG_HDRLEN + 16], &filtered[4..NLMSG_HDRLEN + 16]);
    }

    #[test]
    fn truncated_and_garbage_input_never_panics() {
        let full = message(PROC_EVENT_FORK, &[1, 2, 3, 4]);
        for cut in 0..full.len() {
            let _ = parse_datagram(&full[..cut]);
        }
        let mut bad = full.clone();
        bad[0..4].copy_from_slice(&3u32.to_ne_bytes());
        assert!(parse_datagram(&bad).events.is_empty());
        bad[0..4].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert!(parse_datagram(&bad).events.is_empty());
    }
}
