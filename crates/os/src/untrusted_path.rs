//! Looking up paths that other processes named (exec names, `/proc` and fanotify paths, `PATH`
//! probes, profile files and lookups), so that a root daemon following them can neither hang nor
//! be led where it should not go.
//!
//! Every lookup starts at the mount the path names (the longest mount point of
//! `/proc/self/mountinfo` that is a prefix of it) and runs as one `openat2` with
//! `RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS`: it never walks out of that mount (so never into a
//! FUSE or NFS mount a user stacked on a directory, and never triggers an automount), and never
//! follows a `/proc/PID/fd` style link. Whether ordinary symbolic links are followed is the
//! caller's choice ([`Symlinks`]), per use:
//!
//! - learning a file's identity (exec names, `PATH` probes, the loader's program) follows them:
//!   those names are symlinky by nature (`/bin` -> `usr/bin`, `/etc/alternatives`) and the result
//!   is only compared by (device, inode), never read;
//! - reading a profile's file follows them on the way but not in the last component, and reads
//!   only the very inode that was learned (see `fetch::open`);
//! - replaying a lookup follows them, since warming the walk through them is its purpose;
//! - verifying a name the kernel printed (`d_path`, which holds no symbolic link) refuses them.
//!
//! A followed relative link that leads into another mount is refused (`EXDEV`). A link to an
//! absolute path, which `openat2` refuses the same way even when its target is on the same
//! mount, is followed by looking its target up afresh, from the target's own mount and under the
//! same rules. Paths on network and FUSE file systems ([`is_remote_fstype`]) are refused unless
//! [`set_network_filesystems`] allowed them (`[learn] network_filesystems`); allowed ones run on
//! a helper thread with a time limit ([`REMOTE_CALL_LIMIT`]), and a mount that once missed it is
//! skipped for [`UNRESPONSIVE_FOR`].
//! Local file systems are called directly: they answer within disk time.
//!
//! It decides nothing about what to learn or read; it only refuses what it cannot do safely.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags, ResolveFlags, Stat, StatxFlags};

use augur_core::model::profile::FileIdentity;

/// How long a lookup on an allowed network or FUSE file system may take before it is given up
/// (its thread is left to finish on its own).
pub const REMOTE_CALL_LIMIT: Duration = Duration::from_millis(250);

/// A mount whose lookup missed [`REMOTE_CALL_LIMIT`] is skipped for this long.
pub const UNRESPONSIVE_FOR: Duration = Duration::from_secs(60);

/// Remote lookups left running past their limit at most; beyond it remote paths are refused at
/// once, so a hung server cannot pile up threads.
const MAX_STUCK_CALLS: usize = 8;

/// The mount table is read again when it is older than this (new mounts are also noticed when a
/// lookup crosses into one).
const TABLE_MAX_AGE: Duration = Duration::from_secs(1);

/// A lookup that crossed into another mount reads the table again unless it was read this
/// recently (symbolic links into other mounts are refused for good then).
const TABLE_REREAD_GAP: Duration = Duration::from_millis(100);

/// Whether network and FUSE file systems may be looked up (`[learn] network_filesystems`).
static NETWORK_FILESYSTEMS: AtomicBool = AtomicBool::new(false);

/// Remote lookups running past their limit now.
static STUCK_CALLS: AtomicUsize = AtomicUsize::new(0);

/// The process's view of its mounts, shared by the event loop and the fetch workers.
static MOUNTS: Mutex<Option<Mounts>> = Mutex::new(None);

/// Allows (or, the default, refuses) lookups on network and FUSE file systems, process-wide.
pub fn set_network_filesystems(allowed: bool) {
    NETWORK_FILESYSTEMS.store(allowed, Ordering::Relaxed);
}

/// Whether lookups on network and FUSE file systems are allowed.
pub fn network_filesystems() -> bool {
    NETWORK_FILESYSTEMS.load(Ordering::Relaxed)
}

/// Whether a lookup follows symbolic links.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Symlinks {
    /// Followed: relative ones as long as they stay on the mount (`RESOLVE_NO_XDEV`), absolute
    /// ones by a fresh lookup of their target ([`with_open`]).
    Follow,
    /// Any symbolic link on the way fails the lookup (`RESOLVE_NO_SYMLINKS`).
    Refuse,
}

/// Why a path was not looked up, or what the lookup said.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// Only absolute paths are looked up.
    #[error("not an absolute path")]
    Relative,
    /// The path is on a network or FUSE file system, which is not allowed.
    #[error("on a {0} file system (network and FUSE file systems are skipped)")]
    RemoteFilesystem(String),
    /// The path's file system missed the time limit (now, or recently).
    #[error("its {0} file system does not answer in time")]
    Unresponsive(String),
    /// The path leads into another mount (a symbolic link, `..`, or a mount point on the way).
    #[error("it leads into another mount")]
    CrossesMount,
    /// The lookup failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl Refused {
    /// The `errno` a plain lookup would have reported, if the lookup ran and failed.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            Refused::Io(e) => e.raw_os_error(),
            _ => None,
        }
    }
}

/// One line of `/proc/PID/mountinfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountEntry {
    /// The mount's id (unique system-wide).
    pub id: u64,
    /// The file system's device in `st_dev` encoding.
    pub dev: u64,
    /// Where it is mounted.
    pub point: PathBuf,
    /// Its file system type (`ext4`, `nfs4`, `fuse.sshfs`, ...).
    pub fstype: String,
}

/// True for file systems whose calls go to a server or a user-space process, and so can take
/// arbitrarily long: NFS, SMB/CIFS, FUSE (and virtiofs), 9p, Ceph and other network file systems.
pub fn is_remote_fstype(fstype: &str) -> bool {
    const REMOTE: &[&str] = &[
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "ncpfs",
        "9p",
        "ceph",
        "glusterfs",
        "lustre",
        "afs",
        "coda",
        "orangefs",
        "beegfs",
        "gpfs",
        "fuse",
        "fuseblk",
        "virtiofs",
        "davfs",
        "sshfs",
    ];
    REMOTE.contains(&fstype) || fstype.starts_with("fuse.") || fstype.starts_with("fuseblk.")
}

/// Parses a `/proc/PID/mountinfo` text; malformed lines are skipped.
pub fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let fields: Vec<&str> = left.split(' ').collect();
        let Some(fstype) = right.split(' ').next().filter(|t| !t.is_empty()) else { continue };
        if fields.len() < 5 {
            continue;
        }
        let Ok(id) = fields[0].parse::<u64>() else { continue };
        let Some((major, minor)) = fields[2].split_once(':') else { continue };
        let (Ok(major), Ok(minor)) = (major.parse::<u32>(), minor.parse::<u32>()) else { continue };
        let point = PathBuf::from(OsStr::from_bytes(&crate::sense::fanotify::unescape_mountinfo(fields[4])));
        if !point.is_absolute() {
            continue;
        }
        out.push(MountEntry { id, dev: crate::sense::event::st_dev_from_parts(major, minor), point, fstype: fstype.to_string() });
    }
    out
}

/// The mount `path` lies on (the last-mounted of the longest matching mount points), and what of
/// `path` is left below its mount point.
///
/// Every lookup the daemon makes comes here, so a plain path (absolute, no `.`, `..` or empty
/// component: what the kernel and `/proc` print) is matched as bytes; any other goes component
/// by component, as `Path::strip_prefix` compares.
fn mount_of<'a, 'p>(mounts: &'a [MountEntry], path: &'p Path) -> Option<(&'a MountEntry, &'p Path)> {
    let bytes = path.as_os_str().as_bytes();
    if !is_plain(bytes) {
        return mount_of_by_components(mounts, path);
    }
    // Mount points are plain too, so the longest matching one is the deepest.
    let mut best: Option<(&MountEntry, &[u8], usize)> = None;
    for m in mounts {
        let point = m.point.as_os_str().as_bytes();
        let Some(rest) = plain_rest_below(point, bytes) else { continue };
        if best.is_none_or(|(_, _, len)| point.len() >= len) {
            best = Some((m, rest, point.len()));
        }
    }
    best.map(|(m, rest, _)| (m, Path::new(OsStr::from_bytes(rest))))
}

/// True for `/` and for an absolute path whose every component is a name (no `.`, `..` or empty
/// one, so no `//` and no trailing `/`).
fn is_plain(path: &[u8]) -> bool {
    path == b"/"
        || path.first() == Some(&b'/') && path[1..].split(|b| *b == b'/').all(|c| !c.is_empty() && c != b"." && c != b"..")
}

/// What of plain `path` lies below plain mount point `point` (without its leading `/`), when the
/// point is a whole-component prefix of it.
fn plain_rest_below<'p>(point: &[u8], path: &'p [u8]) -> Option<&'p [u8]> {
    let rest = path.strip_prefix(point)?;
    match rest {
        [] => Some(rest),
        [b'/', below @ ..] => Some(below),
        _ if point == b"/" => Some(rest),
        _ => None,
    }
}

/// [`mount_of`] for any absolute path, component by component.
fn mount_of_by_components<'a, 'p>(mounts: &'a [MountEntry], path: &'p Path) -> Option<(&'a MountEntry, &'p Path)> {
    let mut best: Option<(&MountEntry, &Path, usize)> = None;
    for m in mounts {
        let Ok(rest) = path.strip_prefix(&m.point) else { continue };
        let depth = m.point.components().count();
        if best.is_none_or(|(_, _, d)| depth >= d) {
            best = Some((m, rest, depth));
        }
    }
    best.map(|(m, rest, _)| (m, rest))
}

/// The mount table with a descriptor of each mount point used so far.
struct Mounts {
    entries: Vec<MountEntry>,
    read_at: Instant,
    roots: HashMap<u64, Arc<OwnedFd>>,
    /// Mount id -> until when it is skipped (it missed the time limit).
    unresponsive: HashMap<u64, Instant>,
}

impl Mounts {
    fn read() -> Mounts {
        let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        Mounts { entries: parse_mountinfo(&text), read_at: Instant::now(), roots: HashMap::new(), unresponsive: HashMap::new() }
    }

    fn refresh(&mut self) {
        let fresh = Mounts::read();
        self.entries = fresh.entries;
        self.read_at = fresh.read_at;
        self.roots.clear();
    }

    /// A descriptor of mount `m`'s root; `None` when the way to it passes a mount that may not
    /// be entered, or it cannot be opened.
    fn root_of(&mut self, m: &MountEntry) -> Result<Arc<OwnedFd>, Refused> {
        if let Some(fd) = self.roots.get(&m.id) {
            return Ok(fd.clone());
        }
        // The walk to a mount point passes its ancestors' mounts: none may be a skipped one.
        for a in &self.entries {
            if a.id != m.id && m.point.starts_with(&a.point) && is_remote_fstype(&a.fstype) && !network_filesystems() {
                return Err(Refused::RemoteFilesystem(a.fstype.clone()));
            }
        }
        let fd = Arc::new(open_mount_root(&m.point)?);
        self.roots.insert(m.id, fd.clone());
        Ok(fd)
    }
}

/// Where a lookup starts: the root of the path's mount, and the rest of the path.
struct Start {
    /// The mount's root, opened; `None` for a remote mount, whose root is opened by the helper
    /// thread (on NFS even that may ask the server).
    root: Option<Arc<OwnedFd>>,
    point: PathBuf,
    rest: PathBuf,
    mount_id: u64,
    /// `Some(fstype)` when the mount is an (allowed) network or FUSE one.
    remote: Option<String>,
}

impl Start {
    fn open(&self, flags: OFlags, how: ResolveFlags) -> Result<OwnedFd, Refused> {
        let opened;
        let root = match &self.root {
            Some(fd) => fd.as_fd(),
            None => {
                opened = open_mount_root(&self.point)?;
                opened.as_fd()
            }
        };
        rustix::fs::openat2(root, &self.rest, flags, Mode::empty(), how).map_err(|e| crosses(e.into()))
    }
}

/// Opens a mount point (its root directory), as `O_PATH`.
fn open_mount_root(point: &Path) -> Result<OwnedFd, Refused> {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let how = ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    Ok(rustix::fs::openat2(CWD, point, flags, Mode::empty(), how).map_err(io::Error::from)?)
}

/// Finds where `path`'s lookup starts; `fresh` forces a new read of the mount table.
fn start_of(path: &Path, fresh: bool) -> Result<Start, Refused> {
    if !path.is_absolute() {
        return Err(Refused::Relative);
    }
    let mut guard = MOUNTS.lock().unwrap_or_else(|p| p.into_inner());
    let mounts = guard.get_or_insert_with(Mounts::read);
    if fresh || mounts.read_at.elapsed() > TABLE_MAX_AGE {
        mounts.refresh();
    }
    let entries = std::mem::take(&mut mounts.entries);
    let found = mount_of(&entries, path).map(|(m, rest)| (m.clone(), rest.to_path_buf()));
    mounts.entries = entries;
    let Some((m, rest)) = found else { return Err(Refused::CrossesMount) };
    let remote = is_remote_fstype(&m.fstype);
    if remote && !network_filesystems() {
        return Err(Refused::RemoteFilesystem(m.fstype));
    }
    if let Some(until) = mounts.unresponsive.get(&m.id).copied() {
        if Instant::now() < until {
            return Err(Refused::Unresponsive(m.fstype));
        }
        mounts.unresponsive.remove(&m.id);
    }
    let root = if remote { None } else { Some(mounts.root_of(&m)?) };
    let rest = if rest.as_os_str().is_empty() { PathBuf::from(".") } else { rest };
    Ok(Start { root, point: m.point, rest, mount_id: m.id, remote: remote.then_some(m.fstype) })
}

fn resolve_flags(symlinks: Symlinks) -> ResolveFlags {
    let base = ResolveFlags::NO_XDEV | ResolveFlags::NO_MAGICLINKS;
    match symlinks {
        Symlinks::Follow => base,
        Symlinks::Refuse => base | ResolveFlags::NO_SYMLINKS,
    }
}

/// Opens `path` with `flags` (`O_CLOEXEC` is added), staying on its mount, and hands the
/// descriptor to `then`; on an allowed remote file system both run on a helper thread under
/// [`REMOTE_CALL_LIMIT`]. With [`Symlinks::Follow`], a link to an absolute path (which one
/// `openat2` refuses as leaving the mount) is followed by looking its target up afresh, from the
/// target's own mount and under the same rules, at most [`MAX_LINK_HOPS`] times.
pub fn with_open<T: Send + 'static>(
    path: &Path,
    flags: OFlags,
    symlinks: Symlinks,
    then: impl FnOnce(OwnedFd) -> io::Result<T> + Send + 'static,
) -> Result<T, Refused> {
    let flags = flags | OFlags::CLOEXEC;
    let how = resolve_flags(symlinks);
    let mut path = std::borrow::Cow::Borrowed(path);
    for _ in 0..MAX_LINK_HOPS {
        let start = start_of(&path, false)?;
        if start.remote.is_some() {
            return remote_call(start, flags, how, then);
        }
        let opened = match start.open(flags, how) {
            // A mount the table does not know yet may be on the way: look again, with a fresh table.
            Err(Refused::CrossesMount) if mount_table_stale() => {
                let start = start_of(&path, true)?;
                if start.remote.is_some() {
                    return remote_call(start, flags, how, then);
                }
                start.open(flags, how)
            }
            other => other,
        };
        match opened {
            Err(Refused::CrossesMount) if symlinks == Symlinks::Follow => match past_first_link(&path) {
                Some(next) => path = std::borrow::Cow::Owned(next),
                None => return Err(Refused::CrossesMount),
            },
            Ok(fd) => return then(fd).map_err(Refused::Io),
            Err(e) => return Err(e),
        }
    }
    Err(Refused::CrossesMount)
}

/// True when the mount table was read long enough ago that a mount may be missing from it (so a
/// lookup that crossed into another mount is worth repeating after a new read).
fn mount_table_stale() -> bool {
    let guard = MOUNTS.lock().unwrap_or_else(|p| p.into_inner());
    guard.as_ref().is_none_or(|m| m.read_at.elapsed() > TABLE_REREAD_GAP)
}

fn crosses(e: io::Error) -> Refused {
    if e.raw_os_error() == Some(libc::EXDEV) { Refused::CrossesMount } else { Refused::Io(e) }
}

/// Runs the lookup of `start` and `then` on a helper thread, waiting at most
/// [`REMOTE_CALL_LIMIT`].
fn remote_call<T: Send + 'static>(
    start: Start,
    flags: OFlags,
    how: ResolveFlags,
    then: impl FnOnce(OwnedFd) -> io::Result<T> + Send + 'static,
) -> Result<T, Refused> {
    let fstype = start.remote.clone().unwrap_or_default();
    if STUCK_CALLS.load(Ordering::Relaxed) >= MAX_STUCK_CALLS {
        return Err(Refused::Unresponsive(fstype));
    }
    let (tx, rx) = mpsc::sync_channel(1);
    let mount_id = start.mount_id;
    STUCK_CALLS.fetch_add(1, Ordering::Relaxed);
    let spawned = std::thread::Builder::new().name("augur-remote-lookup".into()).spawn(move || {
        let r = start.open(flags, how).and_then(|fd| then(fd).map_err(Refused::Io));
        STUCK_CALLS.fetch_sub(1, Ordering::Relaxed);
        let _ = tx.send(r);
    });
    if let Err(e) = spawned {
        STUCK_CALLS.fetch_sub(1, Ordering::Relaxed);
        return Err(Refused::Io(e));
    }
    match rx.recv_timeout(REMOTE_CALL_LIMIT) {
        Ok(r) => r,
        Err(_) => {
            tracing::warn!(
                "a {fstype} file system did not answer within {REMOTE_CALL_LIMIT:?}: skipped for {UNRESPONSIVE_FOR:?}"
            );
            let mut guard = MOUNTS.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(m) = guard.as_mut() {
                m.unresponsive.insert(mount_id, Instant::now() + UNRESPONSIVE_FOR);
            }
            Err(Refused::Unresponsive(fstype))
        }
    }
}

/// Opens `path` (see [`with_open`]).
pub fn open(path: &Path, flags: OFlags, symlinks: Symlinks) -> Result<OwnedFd, Refused> {
    with_open(path, flags, symlinks, Ok)
}

/// `fstat` of what `path` names (see [`with_open`]; a final symbolic link is followed when
/// `symlinks` says so).
pub fn stat(path: &Path, symlinks: Symlinks) -> Result<Stat, Refused> {
    with_open(path, OFlags::PATH, symlinks, |fd| Ok(rustix::fs::fstat(&fd)?))
}

/// Walks `path` (see [`with_open`]) and nothing more: the kernel caches what the walk found
/// (dentries, negative ones included), which is what replaying a lookup is for.
pub fn walk(path: &Path, symlinks: Symlinks) -> Result<(), Refused> {
    with_open(path, OFlags::PATH, symlinks, |_| Ok(()))
}

/// The identity of the regular file at `path`; `None` for anything else, or when it cannot be
/// looked up safely.
pub fn identity(path: &Path, symlinks: Symlinks) -> Option<FileIdentity> {
    let st = stat(path, symlinks).ok()?;
    (FileType::from_raw_mode(st.st_mode) == FileType::RegularFile).then(|| crate::fetch::open::identity_of(&st))
}

/// Links to absolute paths one lookup follows at most (the kernel's own limit on links).
const MAX_LINK_HOPS: usize = 40;

/// `path` with its symbolic links resolved, as the kernel names the file (`/etc/localtime` names
/// `/usr/share/zoneinfo/...`).
pub fn canonical(path: &Path) -> Option<PathBuf> {
    with_open(path, OFlags::PATH, Symlinks::Follow, |fd| fd_path(&fd)).ok()
}

/// `path` with its first symbolic link replaced by the link's target; `None` when it has none or
/// a prefix cannot be looked up.
fn past_first_link(path: &Path) -> Option<PathBuf> {
    let parts: Vec<_> = path.components().collect();
    let mut prefix = PathBuf::new();
    for (i, part) in parts.iter().enumerate() {
        prefix.push(part);
        if i == 0 {
            continue; // the root
        }
        // O_PATH | O_NOFOLLOW without symbolic links on the way: the link itself, if it is one.
        let target = with_open(&prefix, OFlags::PATH | OFlags::NOFOLLOW, Symlinks::Refuse, |fd| {
            let st = rustix::fs::fstat(&fd)?;
            if FileType::from_raw_mode(st.st_mode) != FileType::Symlink {
                return Ok(None);
            }
            Ok(Some(PathBuf::from(OsStr::from_bytes(rustix::fs::readlinkat(&fd, "", Vec::new())?.as_bytes()))))
        })
        .ok()?;
        if let Some(target) = target {
            let mut next = match prefix.parent() {
                Some(dir) if target.is_relative() => dir.join(target),
                _ => target,
            };
            next.extend(&parts[i + 1..]);
            return Some(next);
        }
    }
    None
}

/// The path the kernel gives an open descriptor.
fn fd_path(fd: &OwnedFd) -> io::Result<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// Tells which descriptors of one process are files on a mount that may be looked up (a local
/// one, or any when network file systems are allowed), judged by their `mnt_id` in
/// `/proc/PID/fdinfo` without touching the files. The process's mount table (it may live in
/// another mount namespace, whose table names its mounts) is read once, at the first question.
pub struct OpenFileMounts {
    pid: u32,
    table: Option<Vec<MountEntry>>,
}

impl OpenFileMounts {
    /// For the descriptors of process `pid`.
    pub fn of(pid: u32) -> OpenFileMounts {
        OpenFileMounts { pid, table: None }
    }

    /// True when descriptor `fd` (its name under `/proc/PID/fd`) is a file on such a mount.
    pub fn is_local(&mut self, fd: &OsStr) -> bool {
        if network_filesystems() {
            return true;
        }
        let pid = self.pid;
        let Ok(info) = std::fs::read_to_string(Path::new(&format!("/proc/{pid}/fdinfo")).join(fd)) else { return false };
        let Some(mnt_id) = augur_core::proc_text::field_value(&info, "mnt_id") else { return false };
        let table = self.table.get_or_insert_with(|| {
            parse_mountinfo(&std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap_or_default())
        });
        table.iter().find(|m| m.id == mnt_id).is_some_and(|m| !is_remote_fstype(&m.fstype))
    }
}

/// The identity of the file behind `/proc/PID/fd/N` (`link`), without asking its file system to
/// refresh what it has cached (`AT_STATX_DONT_SYNC`); regular files only.
pub fn open_file_identity(link: &Path) -> Option<FileIdentity> {
    let flags = AtFlags::STATX_DONT_SYNC;
    let mask = StatxFlags::TYPE | StatxFlags::INO | StatxFlags::SIZE | StatxFlags::MTIME;
    let st = rustix::fs::statx(CWD, link, flags, mask).ok()?;
    if FileType::from_raw_mode(u32::from(st.stx_mode)) != FileType::RegularFile {
        return None;
    }
    let dev = crate::sense::event::st_dev_from_parts(st.stx_dev_major, st.stx_dev_minor);
    Some(FileIdentity {
        dev,
        ino: st.stx_ino,
        size: st.stx_size,
        mtime_ns: st.stx_mtime.tv_sec.saturating_mul(1_000_000_000).saturating_add(i64::from(st.stx_mtime.tv_nsec)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    const MOUNTINFO: &str = "\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
23 22 0:21 / /proc rw shared:2 - proc proc rw
40 22 254:16 / /usr rw shared:3 - ext4 /dev/vdb rw
41 22 0:45 / /home/u/my\\040mnt rw,nosuid,nodev - fuse.sshfs u@host: rw,user_id=1000
42 40 0:46 / /usr/share/nfs rw - nfs4 server:/x rw
43 22 254:32 / /usr rw shared:4 - ext4 /dev/vdc rw
bad line
44 22 x:y / /bad rw - ext4 /dev/x rw
";

    #[test]
    fn mountinfo_is_parsed_and_escapes_undone() {
        let m = parse_mountinfo(MOUNTINFO);
        assert_eq!(m.len(), 6);
        assert_eq!(m[3].point, Path::new("/home/u/my mnt"));
        assert_eq!(m[3].fstype, "fuse.sshfs");
        assert_eq!(m[0].dev, crate::sense::event::st_dev_from_parts(254, 0));
        assert_eq!(m[0].id, 22);
    }

    #[test]
    fn a_path_lies_on_its_longest_newest_mount() {
        let m = parse_mountinfo(MOUNTINFO);
        let on = |p: &str| mount_of(&m, Path::new(p)).map(|(m, rest)| (m.id, rest.to_str().unwrap().to_string()));
        assert_eq!(on("/etc/passwd"), Some((22, "etc/passwd".into())));
        assert_eq!(on("/usr/lib/x"), Some((43, "lib/x".into())), "the later of two mounts on /usr is on top");
        assert_eq!(on("/usrx/y"), Some((22, "usrx/y".into())));
        assert_eq!(on("/usr/share/nfs/a"), Some((42, "a".into())));
        assert_eq!(on("/home/u/my mnt/f"), Some((41, "f".into())));
        assert_eq!(on("/"), Some((22, "".into())));
        // Paths that are not plain are compared component by component, with the same answers.
        assert_eq!(on("/usr//lib/x"), Some((43, "lib/x".into())));
        assert_eq!(on("/usr/./share/nfs/a"), Some((42, "a".into())));
        assert_eq!(on("/home/u/my mnt/"), Some((41, "".into())));
    }

    #[test]
    fn plain_paths_are_told_apart() {
        for p in ["/", "/a", "/a/b c/d", "/.a/..b"] {
            assert!(is_plain(p.as_bytes()), "{p}");
        }
        for p in ["", "a/b", "//", "/a/", "/a//b", "/a/./b", "/a/..", "/."] {
            assert!(!is_plain(p.as_bytes()), "{p}");
        }
    }

    proptest::proptest! {
        /// The byte comparison finds what the component comparison finds, for every path.
        #[test]
        fn bytes_and_components_agree(parts in proptest::collection::vec("(usr|lib|share|nfs|x|\\.|\\.\\.|)", 0..6)) {
            let m = parse_mountinfo(MOUNTINFO);
            let path = PathBuf::from(format!("/{}", parts.join("/")));
            let fast = mount_of(&m, &path).map(|(m, rest)| (m.id, rest.to_path_buf()));
            let slow = mount_of_by_components(&m, &path).map(|(m, rest)| (m.id, rest.to_path_buf()));
            proptest::prop_assert_eq!(fast, slow);
        }
    }

    #[test]
    fn network_and_fuse_types_are_remote() {
        for t in ["nfs", "nfs4", "cifs", "smb3", "fuse", "fuseblk", "fuse.sshfs", "9p", "ceph", "virtiofs"] {
            assert!(is_remote_fstype(t), "{t}");
        }
        for t in ["ext4", "xfs", "btrfs", "tmpfs", "overlay", "proc", "vfat"] {
            assert!(!is_remote_fstype(t), "{t}");
        }
    }

    #[test]
    fn local_files_are_identified_and_symlinks_followed_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"abc").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("f", &link).unwrap();
        let meta = std::fs::metadata(&file).unwrap();
        let id = identity(&file, Symlinks::Refuse).expect("a local regular file");
        assert_eq!((id.dev, id.ino, id.size), (meta.dev(), meta.ino(), 3));
        assert_eq!(identity(&link, Symlinks::Follow), Some(id));
        let absolute_link = dir.path().join("absolute-link");
        std::os::unix::fs::symlink(std::fs::canonicalize(&file).unwrap(), &absolute_link).unwrap();
        assert_eq!(identity(&absolute_link, Symlinks::Follow), Some(id), "a link to an absolute path is followed");
        assert_eq!(identity(&absolute_link, Symlinks::Refuse), None);
        assert!(walk(&absolute_link, Symlinks::Follow).is_ok());
        assert_eq!(identity(&link, Symlinks::Refuse), None);
        assert_eq!(identity(dir.path(), Symlinks::Follow), None, "a directory has no file identity");
        assert_eq!(FileType::from_raw_mode(stat(dir.path(), Symlinks::Follow).unwrap().st_mode), FileType::Directory);
        assert_eq!(canonical(&link).as_deref(), Some(std::fs::canonicalize(&file).unwrap().as_path()));
        // A link to an absolute path, and one on the way, as `/usr/share/locale/locale.alias`
        // and `/etc/localtime` are.
        let absolute = dir.path().join("absolute");
        std::os::unix::fs::symlink(&file, &absolute).unwrap();
        assert_eq!(canonical(&absolute).as_deref(), Some(std::fs::canonicalize(&file).unwrap().as_path()));
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("g"), b"g").unwrap();
        std::os::unix::fs::symlink(&sub, dir.path().join("to-sub")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("to-sub/g"), dir.path().join("to-g")).unwrap();
        assert_eq!(canonical(&dir.path().join("to-g")).as_deref(), Some(std::fs::canonicalize(sub.join("g")).unwrap().as_path()));
        assert_eq!(canonical(&dir.path().join("to-sub/../f")).as_deref(), Some(std::fs::canonicalize(&file).unwrap().as_path()));
        // A loop ends.
        std::os::unix::fs::symlink(dir.path().join("loop"), dir.path().join("loop")).unwrap();
        assert_eq!(canonical(&dir.path().join("loop")), None);
        assert!(matches!(open(Path::new("relative"), OFlags::PATH, Symlinks::Follow), Err(Refused::Relative)));
    }

    #[test]
    fn magic_links_and_mount_crossings_are_refused() {
        let f = tempfile::NamedTempFile::new().unwrap();
        use std::os::fd::AsRawFd;
        let magic = PathBuf::from(format!("/proc/self/fd/{}", f.as_file().as_raw_fd()));
        assert!(open(&magic, OFlags::PATH, Symlinks::Follow).is_err());
        // `..` at the root of the proc mount would climb out of it.
        assert!(matches!(open(Path::new("/proc/../etc"), OFlags::PATH, Symlinks::Follow), Err(Refused::CrossesMount)));
    }

    #[test]
    fn open_files_of_this_process_are_local_and_identified() {
        let f = tempfile::NamedTempFile::new().unwrap();
        use std::os::fd::AsRawFd;
        let n = f.as_file().as_raw_fd().to_string();
        let pid = std::process::id();
        if network_filesystems() {
            return;
        }
        // tmpfs or a disk: local either way.
        let mut mounts = OpenFileMounts::of(pid);
        assert!(mounts.is_local(OsStr::new(&n)));
        let id = open_file_identity(&PathBuf::from(format!("/proc/{pid}/fd/{n}"))).unwrap();
        assert_eq!(id.ino, std::fs::metadata(f.path()).unwrap().ino());
        assert!(!mounts.is_local(OsStr::new("999999")));
        assert!(mounts.table.is_some(), "the mount table was read once, for the first question");
    }
}
