//! augur's own tracefs instances (`instances/augur-<purpose>-<pid>`): creating one, enabling
//! events, pid filtering with descendants followed, reading its `trace_pipe` without blocking,
//! and removing it again, on drop and after stale runs.
//!
//! It never touches the top-level tracing buffer or another tool's instance, so it cannot disturb
//! another tracer. It reports lines; parsing them is [`super::event`]'s job.

use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::error::{IoContext, OsError, Result};

use super::event::{LineStats, TraceLine, parse_line};

/// Prefix of every instance augur creates.
pub const INSTANCE_PREFIX: &str = "augur-";

const PRIMARY_ROOT: &str = "/sys/kernel/tracing";
const DEBUGFS_ROOT: &str = "/sys/kernel/debug/tracing";

/// A mounted tracefs.
#[derive(Clone, Debug)]
pub struct Tracefs {
    root: PathBuf,
}

fn is_tracefs(dir: &Path) -> bool {
    dir.join("instances").is_dir() && dir.join("events").is_dir()
}

fn mount_fs(fstype: &str, target: &str) -> io::Result<()> {
    let source = CString::new("nodev").map_err(io::Error::other)?;
    let fstype = CString::new(fstype).map_err(io::Error::other)?;
    let target = CString::new(target).map_err(io::Error::other)?;
    // SAFETY: every pointer is a valid NUL-terminated string that outlives the call; `data` is
    // null, which mount(2) accepts.
    let rc = unsafe { libc::mount(source.as_ptr(), target.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()) };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

impl Tracefs {
    /// Finds tracefs: `/sys/kernel/tracing` (mounting it there when the directory is empty), else
    /// `/sys/kernel/debug/tracing`. Fails with [`OsError::KernelFeature`] when neither is available.
    pub fn locate() -> Result<Self> {
        let primary = Path::new(PRIMARY_ROOT);
        if is_tracefs(primary) {
            return Ok(Tracefs { root: primary.to_path_buf() });
        }
        let mut tried = Vec::new();
        if primary.is_dir() {
            match mount_fs("tracefs", PRIMARY_ROOT) {
                Ok(()) if is_tracefs(primary) => return Ok(Tracefs { root: primary.to_path_buf() }),
                Ok(()) => tried.push(format!("mounted tracefs on {PRIMARY_ROOT} but it has no instances")),
                Err(e) => tried.push(format!("mount -t tracefs on {PRIMARY_ROOT}: {e}")),
            }
        } else {
            tried.push(format!("{PRIMARY_ROOT} does not exist"));
        }
        let debug = Path::new(DEBUGFS_ROOT);
        if !is_tracefs(debug) && Path::new("/sys/kernel/debug").is_dir() {
            let _ = mount_fs("debugfs", "/sys/kernel/debug");
        }
        if is_tracefs(debug) {
            return Ok(Tracefs { root: debug.to_path_buf() });
        }
        tried.push(format!("{DEBUGFS_ROOT} is not available"));
        Err(OsError::KernelFeature { feature: "tracefs".into(), detail: tried.join("; ") })
    }

    /// A tracefs mounted at `root` (tests use this to point at a copy or a fake).
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Tracefs { root: root.into() }
    }

    /// The mount point.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The top-level `events` directory, which lists the tracepoints the kernel has.
    pub fn events_dir(&self) -> PathBuf {
        self.root.join("events")
    }

    /// Names of augur's instances currently present.
    pub fn augur_instances(&self) -> Vec<String> {
        let Ok(dir) = fs::read_dir(self.root.join("instances")) else { return Vec::new() };
        let mut out: Vec<String> = dir
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.starts_with(INSTANCE_PREFIX))
            .collect();
        out.sort();
        out
    }

    /// Removes augur instances whose creating process is gone (left by a crash or SIGKILL).
    /// Returns how many were removed.
    pub fn remove_stale_instances(&self) -> usize {
        let mut removed = 0;
        for name in self.augur_instances() {
            let Some(pid) = instance_owner(&name) else { continue };
            if Path::new("/proc").join(pid.to_string()).exists() {
                continue;
            }
            let dir = self.root.join("instances").join(&name);
            if remove_instance_dir(&dir).is_ok() {
                tracing::info!("removed stale tracefs instance {name} (process {pid} is gone)");
                removed += 1;
            }
        }
        removed
    }
}

/// The pid an instance name ends with (`augur-<purpose>-<pid>`).
pub fn instance_owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(INSTANCE_PREFIX)?;
    let (_, pid) = rest.rsplit_once('-')?;
    pid.parse().ok()
}

fn remove_instance_dir(dir: &Path) -> io::Result<()> {
    let _ = write_file(&dir.join("tracing_on"), "0");
    // rmdir fails with EBUSY while a reader still holds trace_pipe; readers close quickly.
    let mut last = Ok(());
    for attempt in 0..50 {
        match fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => last = Err(e),
        }
        std::thread::sleep(Duration::from_millis(10 * (attempt + 1).min(5)));
    }
    last
}

fn write_file(path: &Path, value: &str) -> io::Result<()> {
    // One write(2) call: tracefs control files parse each write on its own.
    let mut f = OpenOptions::new().write(true).truncate(true).open(path)?;
    f.write_all(value.as_bytes())
}

static NEXT_SEQ: AtomicU32 = AtomicU32::new(0);

/// How to set up an instance.
#[derive(Clone, Debug)]
pub struct InstanceOptions {
    /// Ring buffer size per CPU in KiB (`buffer_size_kb`); `None` keeps the kernel default.
    pub buffer_kb_per_cpu: Option<u64>,
    /// Use the `mono` trace clock, so timestamps compare with `CLOCK_MONOTONIC` (and with the
    /// proc connector's timestamps). Falls back to the default clock when absent.
    pub mono_clock: bool,
    /// Record thread-group ids (`options/record-tgid`), so events carry the process id.
    pub record_tgid: bool,
    /// `buffer_percent`: how full a CPU buffer must be before a poll on `trace_pipe` wakes up.
    /// 0 wakes on any data (what an event loop wants); the kernel's default is 50.
    pub wake_percent: u32,
}

impl Default for InstanceOptions {
    fn default() -> Self {
        InstanceOptions { buffer_kb_per_cpu: Some(16 * 1024), mono_clock: true, record_tgid: true, wake_percent: 0 }
    }
}

/// One tracefs instance owned by this process. Tracing is off until [`TraceInstance::start`];
/// the instance is removed by [`TraceInstance::remove`] or on drop.
#[derive(Debug)]
pub struct TraceInstance {
    name: String,
    dir: PathBuf,
    pipe: Option<TracePipe>,
    removed: bool,
    mono_clock: bool,
}

impl TraceInstance {
    /// Creates `instances/augur-<purpose>-<pid>` (with a sequence suffix on the purpose when this
    /// process already has one by that name) and applies `options`. Tracing stays off.
    pub fn create(tracefs: &Tracefs, purpose: &str, options: &InstanceOptions) -> Result<Self> {
        let pid = std::process::id();
        let instances = tracefs.root.join("instances");
        let purpose: String = purpose.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
        let (name, dir) = loop {
            let seq = NEXT_SEQ.fetch_add(1, Ordering::Relaxed);
            let name = if seq == 0 {
                format!("{INSTANCE_PREFIX}{purpose}-{pid}")
            } else {
                format!("{INSTANCE_PREFIX}{purpose}.{seq}-{pid}")
            };
            let dir = instances.join(&name);
            match fs::create_dir(&dir) {
                Ok(()) => break (name, dir),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                    return Err(OsError::NotRoot { action: "creating a tracefs instance".into() });
                }
                Err(e) => return Err(OsError::io_at(&dir, "creating tracefs instance", e)),
            }
        };
        let mut inst = TraceInstance { name, dir, pipe: None, removed: false, mono_clock: false };
        inst.configure(options)?;
        Ok(inst)
    }

    fn configure(&mut self, options: &InstanceOptions) -> Result<()> {
        self.write("tracing_on", "0")?;
        if let Some(kb) = options.buffer_kb_per_cpu {
            self.set_buffer_kb_per_cpu(kb)?;
        }
        if options.mono_clock {
            let clocks = fs::read_to_string(self.dir.join("trace_clock")).unwrap_or_default();
            if clocks.split_whitespace().any(|c| c.trim_matches(['[', ']']) == "mono") {
                self.write("trace_clock", "mono")?;
                self.mono_clock = true;
            }
        }
        if options.record_tgid {
            // Older kernels may lack the option; events then carry no tgid.
            let _ = self.write("options/record-tgid", "1");
        }
        let _ = self.write("buffer_percent", &options.wake_percent.to_string());
        Ok(())
    }

    /// The instance's name under `instances/`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The instance's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// True when timestamps come from `CLOCK_MONOTONIC` (the `mono` trace clock).
    pub fn uses_mono_clock(&self) -> bool {
        self.mono_clock
    }

    fn write(&self, file: &str, value: &str) -> Result<()> {
        let path = self.dir.join(file);
        Ok(write_file(&path, value).context(|| format!("writing {value:?} to {}", path.display()))?)
    }

    /// Sets the ring buffer size per CPU, in KiB.
    pub fn set_buffer_kb_per_cpu(&self, kb: u64) -> Result<()> {
        self.write("buffer_size_kb", &kb.max(4).to_string())
    }

    /// Enables one event, named `system/event` (like `filemap/mm_filemap_fault`).
    pub fn enable_event(&self, event: &str) -> Result<()> {
        let path = self.dir.join("events").join(event).join("enable");
        write_file(&path, "1").map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => {
                OsError::KernelFeature { feature: format!("tracepoint {event}"), detail: "not in this kernel's tracefs".into() }
            }
            _ => OsError::io(format!("enabling {event} in {}", self.dir.display()), e),
        })
    }

    /// Restricts events to `pids` (replacing the previous list) and, when `follow_forks`, to their
    /// descendants too (`options/event-fork`: the kernel adds children as they are forked).
    pub fn set_pid_filter(&self, pids: &[u32], follow_forks: bool) -> Result<()> {
        self.write("options/event-fork", if follow_forks { "1" } else { "0" })?;
        let list: Vec<String> = pids.iter().map(u32::to_string).collect();
        self.write("set_event_pid", &list.join(" "))
    }

    /// The path of the pid filter file, for a child that adds itself before `exec`.
    pub fn pid_filter_path(&self) -> PathBuf {
        self.dir.join("set_event_pid")
    }

    /// The path of the filter of pids never recorded (it wins over `set_event_pid`).
    pub fn notrace_filter_path(&self) -> PathBuf {
        self.dir.join("set_event_notrace_pid")
    }

    /// Turns recording on.
    pub fn start(&self) -> Result<()> {
        self.write("tracing_on", "1")
    }

    /// Turns recording off; what was recorded stays readable.
    pub fn stop(&self) -> Result<()> {
        self.write("tracing_on", "0")
    }

    /// The instance's `trace_pipe`, opened non-blocking on first use.
    pub fn pipe(&mut self) -> Result<&mut TracePipe> {
        if self.pipe.is_none() {
            let path = self.dir.join("trace_pipe");
            let file = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
                .open(&path)
                .map_err(|e| OsError::io_at(&path, "opening", e))?;
            self.pipe = Some(TracePipe::new(file));
        }
        match self.pipe.as_mut() {
            Some(p) => Ok(p),
            None => Err(OsError::io("opening trace_pipe", io::Error::other("no pipe"))),
        }
    }

    /// Counts of what the pipe delivered, once it was opened.
    pub fn pipe_stats(&self) -> Option<LineStats> {
        self.pipe.as_ref().map(|p| p.stats)
    }

    /// Removes the instance (closing its pipe first). Idempotent; also done on drop.
    pub fn remove(&mut self) -> Result<()> {
        if self.removed {
            return Ok(());
        }
        self.pipe = None;
        remove_instance_dir(&self.dir).map_err(|e| OsError::io_at(&self.dir, "removing tracefs instance", e))?;
        self.removed = true;
        Ok(())
    }
}

impl Drop for TraceInstance {
    fn drop(&mut self) {
        if let Err(e) = self.remove() {
            tracing::warn!("{e}");
        }
    }
}

/// What one non-blocking read of a pipe produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PipeState {
    /// Everything available was read; poll the fd before reading again.
    Drained,
    /// The per-call line budget was reached; more may be waiting.
    More,
}

/// A non-blocking reader of an instance's `trace_pipe` that hands out parsed lines.
#[derive(Debug)]
pub struct TracePipe {
    file: File,
    buf: Vec<u8>,
    filled: usize,
    /// Counts of what the pipe has delivered so far.
    pub stats: LineStats,
}

impl TracePipe {
    fn new(file: File) -> Self {
        TracePipe { file, buf: vec![0; 256 * 1024], filled: 0, stats: LineStats::default() }
    }

    /// Reads what is available without blocking and calls `sink` for each complete line, up to
    /// about `max_lines` lines (so an event loop stays responsive).
    pub fn read_available(&mut self, max_lines: usize, mut sink: impl FnMut(TraceLine)) -> Result<PipeState> {
        let mut lines = 0;
        loop {
            if self.filled == self.buf.len() {
                // A line longer than the buffer: drop it as garbage rather than grow unbounded.
                self.stats.count(TraceLine::Garbage);
                self.filled = 0;
            }
            let n = match self.file.read(&mut self.buf[self.filled..]) {
                Ok(0) => return Ok(PipeState::Drained),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(PipeState::Drained),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(OsError::io("reading trace_pipe", e)),
            };
            self.filled += n;
            let mut start = 0;
            while let Some(nl) = self.buf[start..self.filled].iter().position(|&b| b == b'\n') {
                let raw = &self.buf[start..start + nl];
                let line = match std::str::from_utf8(raw) {
                    Ok(text) => parse_line(text),
                    Err(_) => parse_line(&String::from_utf8_lossy(raw)),
                };
                sink(self.stats.count(line));
                lines += 1;
                start += nl + 1;
            }
            self.buf.copy_within(start..self.filled, 0);
            self.filled -= start;
            if lines >= max_lines {
                return Ok(PipeState::More);
            }
        }
    }
}

impl AsFd for TracePipe {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_pid_is_the_name_suffix() {
        assert_eq!(instance_owner("augur-trace-1234"), Some(1234));
        assert_eq!(instance_owner("augur-trace.3-77"), Some(77));
        assert_eq!(instance_owner("augur-daemon-x"), None);
        assert_eq!(instance_owner("other-1"), None);
    }

    #[test]
    fn stale_instances_of_dead_pids_are_removed_and_live_ones_kept() {
        let root = tempfile::tempdir().unwrap();
        for d in ["instances", "events"] {
            fs::create_dir(root.path().join(d)).unwrap();
        }
        let me = std::process::id();
        let dead = "augur-trace-4194304"; // above PID_MAX_LIMIT: never alive
        let live = format!("augur-trace-{me}");
        for n in [dead, live.as_str(), "someone-else-1"] {
            fs::create_dir(root.path().join("instances").join(n)).unwrap();
        }
        let t = Tracefs::at(root.path());
        let mut both = vec![dead.to_string(), live.clone()];
        both.sort();
        assert_eq!(t.augur_instances(), both);
        assert_eq!(t.remove_stale_instances(), 1);
        assert_eq!(t.augur_instances(), vec![live]);
        assert!(root.path().join("instances/someone-else-1").exists());
    }
}
