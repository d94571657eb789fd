//! A private headless X server (Xvfb) for the desktop workloads, and a watcher that reports
//! when a new top-level window becomes visible: a minimal X11 client on the server's Unix socket
//! that selects SubstructureNotify on the root window and reads MapNotify events (no window
//! manager runs, so every top-level window is a child of the root).
//!
//! It owns the X server's lifetime (killed on drop); it does not start applications.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{BenchError, IoContext, Result};
use crate::interrupt;

/// A running Xvfb. Dropping it kills the server.
#[derive(Debug)]
pub struct XServer {
    child: Child,
    /// Display number (`:N`).
    pub display: u32,
}

impl XServer {
    /// Starts `Xvfb` on a free display (chosen by the server itself with `-displayfd`).
    pub fn start() -> Result<XServer> {
        let mut child = Command::new("Xvfb")
            .args(["-displayfd", "1", "-screen", "0", "1280x1024x24", "-nolisten", "tcp", "-ac", "-noreset"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| BenchError::Command {
                command: "Xvfb".into(),
                detail: format!("{e} (install it with scripts/bench-setup)"),
            })?;
        let mut out =
            child.stdout.take().ok_or_else(|| BenchError::Command { command: "Xvfb".into(), detail: "no stdout".into() })?;
        let mut text = String::new();
        let mut buf = [0u8; 16];
        while !text.contains('\n') {
            match out.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => text.push_str(&String::from_utf8_lossy(&buf[..n])),
            }
        }
        let display = match text.trim().parse::<u32>() {
            Ok(d) => d,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(BenchError::Command { command: "Xvfb".into(), detail: "did not report a display".into() });
            }
        };
        let server = XServer { child, display };
        // The socket accepts connections once the display number was written.
        WindowWatcher::connect(display)?;
        Ok(server)
    }

    /// The `DISPLAY` value.
    pub fn display_name(&self) -> String {
        format!(":{}", self.display)
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for XServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An X11 connection listening for top-level windows being mapped.
#[derive(Debug)]
pub struct WindowWatcher {
    stream: UnixStream,
}

/// X11 event codes used here.
const MAP_NOTIFY: u8 = 19;
const SUBSTRUCTURE_NOTIFY_MASK: u32 = 1 << 19;
const CW_EVENT_MASK: u32 = 1 << 11;

impl WindowWatcher {
    /// Connects to display `:display` and selects SubstructureNotify on its root window.
    pub fn connect(display: u32) -> Result<WindowWatcher> {
        let path = PathBuf::from(format!("/tmp/.X11-unix/X{display}"));
        let mut stream = UnixStream::connect(&path).context(|| format!("connecting to the X server at {}", path.display()))?;
        let bad = |detail: &str| BenchError::Command { command: format!("X display :{display}"), detail: detail.into() };
        // Connection setup: little-endian, protocol 11.0, no authorisation (the server runs -ac).
        let setup: [u8; 12] = [b'l', 0, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        stream.write_all(&setup).context(|| "X connection setup".into())?;
        let mut head = [0u8; 8];
        stream.read_exact(&mut head).context(|| "X connection setup reply".into())?;
        let extra_len = u16::from_le_bytes([head[6], head[7]]) as usize * 4;
        let mut extra = vec![0u8; extra_len];
        stream.read_exact(&mut extra).context(|| "X connection setup reply".into())?;
        if head[0] != 1 {
            return Err(bad("the X server refused the connection"));
        }
        let root = root_window(&extra).ok_or_else(|| bad("malformed connection setup reply"))?;
        // ChangeWindowAttributes(root, event-mask = SubstructureNotify).
        let mut req = Vec::with_capacity(16);
        req.extend_from_slice(&[2, 0]);
        req.extend_from_slice(&4u16.to_le_bytes());
        req.extend_from_slice(&root.to_le_bytes());
        req.extend_from_slice(&CW_EVENT_MASK.to_le_bytes());
        req.extend_from_slice(&SUBSTRUCTURE_NOTIFY_MASK.to_le_bytes());
        stream.write_all(&req).context(|| "selecting X events".into())?;
        Ok(WindowWatcher { stream })
    }

    /// Discards events received so far.
    pub fn drain(&mut self) -> Result<()> {
        self.stream.set_nonblocking(true).context(|| "X socket".into())?;
        let mut buf = [0u8; 4096];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => break,
                Ok(_) => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => return Err(BenchError::io("reading X events", e)),
            }
        }
        Ok(self.stream.set_nonblocking(false).context(|| "X socket".into())?)
    }

    /// Waits for the next top-level window (not override-redirect) to be mapped; returns when it
    /// was seen. `give_up` is asked every 50 ms whether to stop waiting (with its error).
    pub fn wait_for_window(&mut self, deadline: Instant, mut give_up: impl FnMut() -> Option<BenchError>) -> Result<Instant> {
        self.stream.set_read_timeout(Some(Duration::from_millis(50))).context(|| "X socket".into())?;
        let mut event = [0u8; 32];
        let mut filled = 0;
        loop {
            interrupt::check()?;
            match self.stream.read(&mut event[filled..]) {
                Ok(0) => {
                    return Err(BenchError::Command { command: "X server".into(), detail: "connection closed".into() });
                }
                Ok(n) => {
                    filled += n;
                    if filled == 32 {
                        filled = 0;
                        if is_toplevel_map(&event) {
                            return Ok(Instant::now());
                        }
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(BenchError::io("reading X events", e)),
            }
            if let Some(err) = give_up() {
                return Err(err);
            }
            if Instant::now() >= deadline {
                return Err(BenchError::TimedOut { command: "X window".into(), detail: "no window appeared in time".into() });
            }
        }
    }
}

/// The first screen's root window from the additional data of a connection setup reply.
pub fn root_window(extra: &[u8]) -> Option<u32> {
    let vendor_len = u16::from_le_bytes([*extra.get(16)?, *extra.get(17)?]) as usize;
    let formats = *extra.get(21)? as usize;
    let screen = 32 + vendor_len.div_ceil(4) * 4 + 8 * formats;
    let b = extra.get(screen..screen + 4)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Whether a 32-byte X event is a MapNotify of a window that is not override-redirect.
pub fn is_toplevel_map(event: &[u8; 32]) -> bool {
    event[0] & 0x7f == MAP_NOTIFY && event[12] == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_window_offset() {
        let mut extra = vec![0u8; 32 + 8 + 16 + 40];
        extra[16] = 5; // vendor length 5 -> padded to 8
        extra[21] = 2; // two pixmap formats
        let at = 32 + 8 + 16;
        extra[at..at + 4].copy_from_slice(&0x1234u32.to_le_bytes());
        assert_eq!(root_window(&extra), Some(0x1234));
        assert_eq!(root_window(&[0u8; 10]), None);
    }

    #[test]
    fn map_notify_filter() {
        let mut e = [0u8; 32];
        e[0] = MAP_NOTIFY;
        assert!(is_toplevel_map(&e));
        e[0] = MAP_NOTIFY | 0x80; // sent by SendEvent: still a map
        assert!(is_toplevel_map(&e));
        e[12] = 1; // override-redirect (menus, tooltips, splash screens)
        assert!(!is_toplevel_map(&e));
        e[0] = 16; // CreateNotify
        e[12] = 0;
        assert!(!is_toplevel_map(&e));
    }
}
