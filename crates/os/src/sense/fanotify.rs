//! File opens reported by fanotify on every block-backed filesystem: who opened what, as a path
//! with the file's (device, inode) identity, so page events' inodes can be named without
//! walking a filesystem.
//!
//! Notification only (`FAN_CLASS_NOTIF`): it never blocks or denies an open. Each event's fd is
//! `fstat`ed, named through `/proc/self/fd`, and closed at once.

use std::collections::HashSet;
use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use augur_core::model::profile::{FileIdentity, InodeKey};
use rustix::fs::FileType;

use crate::error::{OsError, Result};
use crate::fetch::open::identity_of as identity_from_stat;

/// A regular file some process opened (or executed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenedFile {
    /// The opening process (thread-group id).
    pub pid: u32,
    /// Device (`st_dev`) and inode.
    pub key: InodeKey,
    /// Identity from `fstat` of the event's fd.
    pub identity: FileIdentity,
    /// The path the fd resolves to.
    pub path: PathBuf,
    /// True for `FAN_OPEN_EXEC` (an `execve` or `uselib`).
    pub exec: bool,
    /// For a file opened through an overlay: the same inode number on each layer's device, which
    /// is how the page-cache tracepoints (they see the layer's inode) report it.
    pub aliases: Vec<InodeKey>,
}

/// An overlay filesystem and the devices of its layers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverlayFs {
    /// `major:minor` of the overlay's own (anonymous) device.
    pub dev: (u32, u32),
    /// Where it is mounted.
    pub mount_point: PathBuf,
    /// Its layer directories (`upperdir`, `lowerdir`s), as the mount options name them.
    pub layer_dirs: Vec<PathBuf>,
}

/// Splits on `sep` where it is not escaped by a backslash. An escaped `sep` loses its backslash;
/// other escapes are kept when `keep_other_escapes` (for a later split), else undone.
fn split_unescaped(s: &str, sep: char, keep_other_escapes: bool) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next()
                    && let Some(l) = out.last_mut()
                {
                    if keep_other_escapes && n != sep {
                        l.push('\\');
                    }
                    l.push(n);
                }
            }
            c if c == sep => out.push(String::new()),
            c => {
                if let Some(l) = out.last_mut() {
                    l.push(c);
                }
            }
        }
    }
    out
}

/// The overlay filesystems in a `/proc/self/mountinfo` text, with their layer directories.
pub fn overlay_filesystems(mountinfo: &str) -> Vec<OverlayFs> {
    let mut out: Vec<OverlayFs> = Vec::new();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let fields: Vec<&str> = left.split(' ').collect();
        let rfields: Vec<&str> = right.split(' ').collect();
        if fields.len() < 5 || rfields.len() < 3 || rfields[0] != "overlay" {
            continue;
        }
        let Some((major, minor)) = fields[2].split_once(':') else { continue };
        let (Ok(major), Ok(minor)) = (major.parse::<u32>(), minor.parse::<u32>()) else { continue };
        if out.iter().any(|o| o.dev == (major, minor)) {
            continue;
        }
        let options = String::from_utf8_lossy(&unescape_mountinfo(rfields[2])).into_owned();
        let mut layer_dirs = Vec::new();
        for opt in split_unescaped(&options, ',', true) {
            let Some((key, value)) = opt.split_once('=') else { continue };
            match key {
                "upperdir" | "lowerdir" | "lowerdir+" | "datadir+" => {
                    layer_dirs
                        .extend(split_unescaped(value, ':', false).into_iter().filter(|d| d.starts_with('/')).map(PathBuf::from));
                }
                _ => {}
            }
        }
        let mount_point = PathBuf::from(std::ffi::OsStr::from_bytes(&unescape_mountinfo(fields[4])));
        out.push(OverlayFs { dev: (major, minor), mount_point, layer_dirs });
    }
    out
}

/// A mounted filesystem worth watching.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountedFs {
    /// `major:minor` of the superblock, as mountinfo prints it.
    pub dev: (u32, u32),
    /// Where it is mounted.
    pub mount_point: PathBuf,
    /// Filesystem type.
    pub fstype: String,
}

/// Undoes mountinfo's octal escapes (`\040` for a space and the like).
pub(crate) fn unescape_mountinfo(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            let v = (u32::from(b[i + 1] - b'0') << 6) | (u32::from(b[i + 2] - b'0') << 3) | u32::from(b[i + 3] - b'0');
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// The block-backed filesystems in a `/proc/self/mountinfo` text, one entry per superblock (the
/// first mount of each). Block-backed: a device number with a non-zero major, or a `/dev/...`
/// source (btrfs and friends use anonymous device numbers). FUSE on a block device (`fuseblk`) is left
/// out unless network and FUSE file systems are allowed.
pub fn block_backed_filesystems(mountinfo: &str) -> Vec<MountedFs> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let fields: Vec<&str> = left.split(' ').collect();
        let rfields: Vec<&str> = right.split(' ').collect();
        if fields.len() < 5 || rfields.len() < 2 {
            continue;
        }
        let Some((major, minor)) = fields[2].split_once(':') else { continue };
        let (Ok(major), Ok(minor)) = (major.parse::<u32>(), minor.parse::<u32>()) else { continue };
        let source = rfields[1];
        if major == 0 && !source.starts_with("/dev/") {
            continue;
        }
        // A FUSE file system on a block device (ntfs-3g): its opens would be described by asking
        // a user-space process, which may never answer.
        if crate::untrusted_path::is_remote_fstype(rfields[0]) && !crate::untrusted_path::network_filesystems() {
            continue;
        }
        if !seen.insert((major, minor)) {
            continue;
        }
        let mount_point = PathBuf::from(std::ffi::OsStr::from_bytes(&unescape_mountinfo(fields[4])));
        out.push(MountedFs { dev: (major, minor), mount_point, fstype: rfields[0].to_string() });
    }
    out
}

/// Which opens an [`OpenWatcher`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenScope {
    /// Every open of a file (and every exec).
    Every,
    /// Execs only (programs and their interpreters, which the kernel opens itself), except on
    /// overlays, whose files are cached as their layers' inodes: every open there. For a reader
    /// that learns the other names from the eBPF observer's records of the opens it follows,
    /// without a fanotify event for every open on the machine.
    ExecsOnly,
}

/// A fanotify group watching opens on every block-backed filesystem.
#[derive(Debug)]
pub struct OpenWatcher {
    fd: OwnedFd,
    watched: Vec<MountedFs>,
    layers: Vec<(u64, Vec<u64>)>,
    buf: Vec<u8>,
    /// Queue overflows the kernel reported (opens lost).
    pub overflows: u64,
    /// This process: its own opens are skipped.
    own_pid: u32,
    /// Execs only: a program or interpreter named once is not reported again (see
    /// [`OpenWatcher::read_some_unknown`]).
    execs_only: bool,
    /// Ignore marks added since the last [`OpenWatcher::report_again`].
    ignored: usize,
}

/// Ignore marks an exec-only watcher adds at most (each pins its inode in memory until
/// [`OpenWatcher::report_again`]); beyond them every exec is reported again.
const MAX_IGNORED: usize = 4096;

impl OpenWatcher {
    /// Creates the group and marks every block-backed filesystem (whole superblock, or the mount
    /// on kernels without `FAN_MARK_FILESYSTEM`) for the opens `scope` says. `unlimited_queue`
    /// avoids overflows for a reader that keeps up (short traces).
    pub fn new(unlimited_queue: bool, scope: OpenScope) -> Result<Self> {
        let mut flags = libc::FAN_CLASS_NOTIF | libc::FAN_CLOEXEC | libc::FAN_NONBLOCK;
        if unlimited_queue {
            flags |= libc::FAN_UNLIMITED_QUEUE;
        }
        let event_flags = (libc::O_RDONLY | libc::O_LARGEFILE | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOATIME) as u32;
        // SAFETY: fanotify_init takes two flag words and returns a new fd or -1.
        let raw = unsafe { libc::fanotify_init(flags, event_flags) };
        if raw < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EPERM) => OsError::NotRoot { action: "watching file opens with fanotify".into() },
                Some(libc::ENOSYS) | Some(libc::EINVAL) => {
                    OsError::KernelFeature { feature: "fanotify".into(), detail: e.to_string() }
                }
                _ => OsError::io("fanotify_init", e),
            });
        }
        // SAFETY: `raw` is a fresh fd returned by fanotify_init and owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mountinfo = fs::read_to_string("/proc/self/mountinfo").map_err(|e| OsError::io("reading /proc/self/mountinfo", e))?;
        let mut watcher = OpenWatcher {
            fd,
            watched: Vec::new(),
            layers: Vec::new(),
            buf: vec![0; 64 * 1024],
            overflows: 0,
            own_pid: std::process::id(),
            execs_only: scope == OpenScope::ExecsOnly,
            ignored: 0,
        };
        for fs in block_backed_filesystems(&mountinfo) {
            match watcher.mark(&fs, scope) {
                Ok(()) => watcher.watched.push(fs),
                Err(e) => tracing::debug!("not watching opens on {}: {e}", fs.mount_point.display()),
            }
        }
        // Files read through an overlay are cached (and traced) as the layer's inode, which
        // opens on the layer's own filesystem do not report: watch the overlay itself too.
        for ovl in overlay_filesystems(&mountinfo) {
            let layer_devs: Vec<u64> = ovl
                .layer_dirs
                .iter()
                .filter_map(|d| fs::metadata(d).ok())
                .map(|m| std::os::unix::fs::MetadataExt::dev(&m))
                .collect();
            let fs = MountedFs { dev: ovl.dev, mount_point: ovl.mount_point, fstype: "overlay".into() };
            match watcher.mark(&fs, OpenScope::Every) {
                Ok(()) => watcher.watched.push(fs),
                Err(e) => tracing::debug!("not watching opens on overlay {}: {e}", fs.mount_point.display()),
            }
            let mut devs = layer_devs;
            devs.sort_unstable();
            devs.dedup();
            watcher.layers.push((super::event::st_dev_from_parts(ovl.dev.0, ovl.dev.1), devs));
        }
        if watcher.watched.is_empty() {
            return Err(OsError::KernelFeature {
                feature: "fanotify marks".into(),
                detail: "no block-backed filesystem could be marked".into(),
            });
        }
        Ok(watcher)
    }

    fn mark(&self, fs: &MountedFs, scope: OpenScope) -> io::Result<()> {
        let path = CString::new(fs.mount_point.as_os_str().as_bytes()).map_err(io::Error::other)?;
        let wanted = match scope {
            OpenScope::Every => libc::FAN_OPEN | libc::FAN_OPEN_EXEC,
            OpenScope::ExecsOnly => libc::FAN_OPEN_EXEC,
        };
        let mut mask = wanted;
        for how in [libc::FAN_MARK_FILESYSTEM, libc::FAN_MARK_MOUNT] {
            for _ in 0..2 {
                // SAFETY: the fd is our fanotify group, `path` a valid NUL-terminated string.
                let rc = unsafe {
                    libc::fanotify_mark(self.fd.as_raw_fd(), libc::FAN_MARK_ADD | how, mask, libc::AT_FDCWD, path.as_ptr())
                };
                if rc == 0 {
                    return Ok(());
                }
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINVAL) {
                    return Err(e);
                }
                mask = libc::FAN_OPEN; // kernels before 5.0 lack FAN_OPEN_EXEC
            }
            mask = wanted;
        }
        Err(io::Error::from_raw_os_error(libc::EINVAL))
    }

    /// The filesystems being watched.
    pub fn watched(&self) -> &[MountedFs] {
        &self.watched
    }

    /// Each overlay's device (`st_dev`) with the devices of its layers, for
    /// [`PathResolver::learn_layers`](super::resolve::PathResolver::learn_layers).
    pub fn overlay_layers(&self) -> &[(u64, Vec<u64>)] {
        &self.layers
    }

    /// Reads every queued event without blocking, calling `sink` for each regular file opened.
    pub fn read_available(&mut self, sink: impl FnMut(OpenedFile)) -> Result<()> {
        self.read_some(usize::MAX, sink).map(|_| ())
    }

    /// Reads queued events without blocking, at most `max_reads` buffers of them (so an event
    /// loop stays responsive), calling `sink` for each regular file opened. True when it stopped
    /// at `max_reads` (more may be queued).
    pub fn read_some(&mut self, max_reads: usize, sink: impl FnMut(OpenedFile)) -> Result<bool> {
        self.read_some_unknown(max_reads, |_| false, sink)
    }

    /// [`read_some`](Self::read_some), skipping the files `known` says were named already (by
    /// their identity: device, inode, size, mtime): those cost an `fstat`, not the `readlink` of
    /// `/proc` that names a file (the same libraries are opened by nearly every process).
    ///
    /// Watching execs only ([`OpenScope::ExecsOnly`]), a program or interpreter once named (or
    /// found known) gets an ignore mark: the kernel reports its later execs no more (each cost
    /// the kernel an open of the file for this process, then an `fstat` and a `close` here), until
    /// it is modified (the mark does not survive a write) or [`report_again`](Self::report_again)
    /// drops the marks, as a caller that forgets the names must.
    pub fn read_some_unknown(
        &mut self,
        max_reads: usize,
        known: impl Fn(&FileIdentity) -> bool,
        mut sink: impl FnMut(OpenedFile),
    ) -> Result<bool> {
        for _ in 0..max_reads {
            // SAFETY: the buffer is valid for writes of its length and the fd is ours.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), self.buf.as_mut_ptr().cast(), self.buf.len()) };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock => return Ok(false),
                    io::ErrorKind::Interrupted => continue,
                    _ => return Err(OsError::io("reading fanotify events", e)),
                }
            }
            if n == 0 {
                return Ok(false);
            }
            let n = n as usize;
            let meta_len = std::mem::size_of::<libc::fanotify_event_metadata>();
            let mut off = 0;
            while off + meta_len <= n {
                // SAFETY: at least `meta_len` bytes from `off` are initialised event data;
                // read_unaligned copes with the buffer's alignment.
                let meta: libc::fanotify_event_metadata = unsafe { std::ptr::read_unaligned(self.buf.as_ptr().add(off).cast()) };
                let len = meta.event_len as usize;
                if len < meta_len || off + len > n {
                    break;
                }
                off += len;
                if meta.mask & libc::FAN_Q_OVERFLOW != 0 {
                    self.overflows += 1;
                }
                if meta.fd < 0 {
                    continue;
                }
                // SAFETY: the kernel opened this fd for us with the event; we own and close it.
                let fd = unsafe { OwnedFd::from_raw_fd(meta.fd) };
                // This process's own opens (exec-time replay, prediction, the stream worker read
                // the files of learned profiles) are no launch's: closed without a look, which
                // spares an fstat and a readlink of /proc per file they open.
                if u32::try_from(meta.pid).is_ok_and(|pid| pid == self.own_pid) {
                    continue;
                }
                let exec = meta.mask & libc::FAN_OPEN_EXEC != 0;
                let named = match describe(fd.as_fd(), meta.pid, exec, &known) {
                    Described::Named(mut opened) => {
                        if let Some((_, devs)) = self.layers.iter().find(|(d, _)| *d == opened.key.dev) {
                            opened.aliases = devs.iter().map(|&dev| InodeKey { dev, ino: opened.key.ino }).collect();
                        }
                        sink(opened);
                        true
                    }
                    Described::Known => true,
                    Described::Skipped => false,
                };
                if named && exec && self.execs_only {
                    self.ignore(fd.as_fd());
                }
            }
        }
        Ok(true)
    }

    /// Stops the kernel reporting the execs of the file behind `fd` (see
    /// [`read_some_unknown`](Self::read_some_unknown)).
    fn ignore(&mut self, fd: BorrowedFd<'_>) {
        if self.ignored >= MAX_IGNORED {
            return;
        }
        let how = libc::FAN_MARK_ADD | libc::FAN_MARK_IGNORED_MASK;
        // SAFETY: both fds are open for the call; a null path marks the inode `fd` refers to.
        let rc = unsafe { libc::fanotify_mark(self.fd.as_raw_fd(), how, libc::FAN_OPEN_EXEC, fd.as_raw_fd(), std::ptr::null()) };
        if rc == 0 {
            self.ignored += 1;
        } else {
            tracing::debug!("fanotify ignore mark: {}", io::Error::last_os_error());
        }
    }

    /// Drops every ignore mark: each program and interpreter is reported at its next exec again
    /// (for a caller that forgot the names it learned).
    pub fn report_again(&mut self) {
        if self.ignored == 0 {
            return;
        }
        // SAFETY: the fd is our fanotify group; a flush of inode marks takes no path.
        let rc = unsafe { libc::fanotify_mark(self.fd.as_raw_fd(), libc::FAN_MARK_FLUSH, 0, libc::AT_FDCWD, std::ptr::null()) };
        if rc == 0 {
            self.ignored = 0;
        } else {
            tracing::warn!("dropping fanotify ignore marks: {}", io::Error::last_os_error());
        }
    }
}

/// What [`describe`] made of an event's file.
enum Described {
    /// A regular file, named here.
    Named(OpenedFile),
    /// A regular file `known` already: not named again.
    Known,
    /// Not a regular file, or one that cannot be named (gone, deleted).
    Skipped,
}

/// Names and identifies the regular file behind an event fd, unless `known` already.
fn describe(fd: BorrowedFd<'_>, pid: i32, exec: bool, known: impl Fn(&FileIdentity) -> bool) -> Described {
    let Ok(meta) = rustix::fs::fstat(fd) else { return Described::Skipped };
    if FileType::from_raw_mode(meta.st_mode) != FileType::RegularFile {
        return Described::Skipped;
    }
    let identity = identity_from_stat(&meta);
    if known(&identity) {
        return Described::Known;
    }
    let Ok(path) = fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())) else { return Described::Skipped };
    if !path.is_absolute() || path.as_os_str().as_bytes().ends_with(b" (deleted)") {
        return Described::Skipped;
    }
    Described::Named(OpenedFile {
        pid: u32::try_from(pid).unwrap_or(0),
        key: InodeKey { dev: identity.dev, ino: identity.ino },
        identity,
        path,
        exec,
        aliases: Vec::new(),
    })
}

impl AsFd for OpenWatcher {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24731712k
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
45 27 0:39 / /tmp/ovl/m rw,relatime - overlay overlay rw,lowerdir=/tmp/ovl/l
50 27 254:0 /srv /mnt/bind rw,relatime - ext4 /dev/vda rw
51 27 0:55 / /mnt/my\\040disk rw,relatime shared:5 - btrfs /dev/sdb1 rw
52 27 259:1 / /boot rw - vfat /dev/nvme0n1p1 rw
";

    #[test]
    fn only_block_backed_filesystems_once_each() {
        let fs = block_backed_filesystems(MOUNTINFO);
        let points: Vec<&str> = fs.iter().map(|f| f.mount_point.to_str().unwrap()).collect();
        assert_eq!(points, vec!["/", "/mnt/my disk", "/boot"]);
        assert_eq!(fs[0].dev, (254, 0));
        assert_eq!(fs[1].fstype, "btrfs");
    }

    #[test]
    fn overlays_and_their_layers() {
        let info = "45 27 0:39 / /tmp/ovl/m rw,relatime - overlay overlay rw,lowerdir=/l1:/l\\:2,upperdir=/u,workdir=/w,uuid=on\n\
                    46 27 0:40 / /c rw - overlay overlay rw,lowerdir+=/a,lowerdir+=/b,datadir+=/d,redirect_dir=on\n\
                    27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n";
        let o = overlay_filesystems(info);
        assert_eq!(o.len(), 2);
        assert_eq!(o[0].dev, (0, 39));
        assert_eq!(o[0].layer_dirs, vec![PathBuf::from("/l1"), PathBuf::from("/l:2"), PathBuf::from("/u")]);
        assert_eq!(o[1].layer_dirs, vec![PathBuf::from("/a"), PathBuf::from("/b"), PathBuf::from("/d")]);
        assert_eq!(split_unescaped("a\\,b,c", ',', true), vec!["a,b".to_string(), "c".to_string()]);
    }

    #[test]
    fn escapes_are_undone_and_bad_escapes_kept() {
        assert_eq!(unescape_mountinfo("a\\040b\\011c"), b"a b\tc");
        assert_eq!(unescape_mountinfo("x\\9"), b"x\\9");
        assert_eq!(unescape_mountinfo("end\\04"), b"end\\04");
    }
}
