//! Opening the files a profile names, safely: regular files only, and only the very file that was
//! traced.
//!
//! Owns the refusal rules. A path is first opened with `O_PATH | O_NOFOLLOW`, which runs no
//! driver's open routine and cannot block, so a FIFO, device or socket is recognised by `fstat`
//! and refused without ever being opened for reading. Its identity (device, inode, size, mtime) is
//! compared with the profile's; a mismatch makes the file *stale*: skipped, reported, never read.
//! Only then is that same inode reopened for reading through `/proc/self/fd`, with `O_NOATIME`
//! where the caller may use it, so no rename race can substitute another file in between. The
//! path is walked the careful way of [`crate::untrusted_path`] (on its own mount only, no magic
//! links, no network or FUSE file system unless allowed).

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{CWD, FileType, Mode, OFlags, Stat};

use augur_core::model::profile::FileIdentity;
use augur_core::model::user::ProcessUser;

use crate::untrusted_path::{self, Refused, Symlinks};

/// Why a file of a profile was not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Nothing at that path any more.
    Missing,
    /// Not a regular file (directory, FIFO, device, socket, or a symbolic link in the last
    /// component); the detail names the type.
    NotRegular(&'static str),
    /// A different file, or the same file changed, since the profile was taken.
    Stale(String),
    /// It could not be opened (permissions, I/O error).
    Unreadable(String),
    /// The user the pages are for (this uid) may not read it: it is never read on their behalf.
    NotPermitted(u32),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Missing => write!(f, "missing"),
            Refusal::NotRegular(kind) => write!(f, "not a regular file ({kind})"),
            Refusal::Stale(why) => write!(f, "stale: {why}"),
            Refusal::Unreadable(why) => write!(f, "unreadable: {why}"),
            Refusal::NotPermitted(uid) => write!(f, "not readable by uid {uid}, whose launch it is for"),
        }
    }
}

/// A regular file whose identity matched its profile, open for reading.
#[derive(Debug)]
pub struct OpenedFile {
    /// The read-only descriptor.
    pub fd: OwnedFd,
    /// Its identity now (equal to the profile's).
    pub identity: FileIdentity,
    /// Owner, for deciding whether `mincore` may be trusted.
    pub owner_uid: u32,
    /// Whether `O_NOATIME` was granted.
    pub noatime: bool,
}

/// The identity `fstat` reports.
#[allow(clippy::unnecessary_cast)] // st_mtime/st_mtime_nsec types vary by architecture
pub fn identity_of(stat: &Stat) -> FileIdentity {
    FileIdentity {
        dev: stat.st_dev,
        ino: stat.st_ino,
        size: u64::try_from(stat.st_size).unwrap_or(0),
        mtime_ns: (stat.st_mtime as i64).saturating_mul(1_000_000_000).saturating_add(stat.st_mtime_nsec as i64),
    }
}

/// The identity of the regular file at `path` now, without following a final symbolic link and
/// without opening it for reading (what a tracer records).
pub fn current_identity(path: &Path) -> io::Result<FileIdentity> {
    let path_only = OFlags::PATH | OFlags::NOFOLLOW;
    untrusted_path::with_open(path, path_only, Symlinks::Follow, |fd| Ok(identity_of(&rustix::fs::fstat(&fd)?))).map_err(|r| {
        match r {
            Refused::Io(e) => e,
            other => io::Error::other(other.to_string()),
        }
    })
}

/// Describes how `now` differs from `then`, or `None` when they are the same file unchanged.
pub fn identity_change(then: &FileIdentity, now: &FileIdentity) -> Option<String> {
    if then.dev != now.dev || then.ino != now.ino {
        return Some(format!(
            "now a different file (device {:#x} inode {} was device {:#x} inode {})",
            now.dev, now.ino, then.dev, then.ino
        ));
    }
    let mut changes = Vec::new();
    if then.size != now.size {
        changes.push(format!("size {} -> {}", then.size, now.size));
    }
    if then.mtime_ns != now.mtime_ns {
        changes.push("modified since it was traced".to_string());
    }
    (!changes.is_empty()).then(|| changes.join(", "))
}

fn type_name(ft: FileType) -> &'static str {
    match ft {
        FileType::Directory => "directory",
        FileType::Fifo => "FIFO",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Socket => "socket",
        FileType::Symlink => "symbolic link",
        _ => "unknown type",
    }
}

fn refusal_for(err: io::Error) -> Refusal {
    match err.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ENOTDIR) => Refusal::Missing,
        Some(libc::ELOOP) => Refusal::NotRegular("symbolic link"),
        _ => Refusal::Unreadable(err.to_string()),
    }
}

/// Opens `path` for reading if and only if it is the regular file `expected` describes, and, with
/// `reader`, a file that user may read by its mode, owner and group
/// ([`ProcessUser::may_read`]; the directories on the way are not checked).
///
/// The walk to it follows symbolic links on the way but not in the last component, stays on the
/// path's mount, and skips network and FUSE file systems unless allowed ([`untrusted_path`]).
pub fn open_profiled(path: &Path, expected: &FileIdentity, reader: Option<&ProcessUser>) -> Result<OpenedFile, Refusal> {
    let expected = *expected;
    let owned = path.to_path_buf();
    let reader = reader.cloned();
    // O_PATH runs no driver open routine: FIFOs, devices and sockets are examined, never opened.
    let path_only = OFlags::PATH | OFlags::NOFOLLOW;
    match untrusted_path::with_open(path, path_only, Symlinks::Follow, move |pathfd| {
        Ok(check_and_reopen(pathfd, &owned, &expected, reader.as_ref()))
    }) {
        Ok(opened) => opened,
        Err(Refused::Io(e)) => Err(refusal_for(e)),
        Err(other) => Err(Refusal::Unreadable(other.to_string())),
    }
}

/// The checks of [`open_profiled`] on the `O_PATH` descriptor of `path`, and the reopening.
fn check_and_reopen(
    pathfd: OwnedFd,
    path: &Path,
    expected: &FileIdentity,
    reader: Option<&ProcessUser>,
) -> Result<OpenedFile, Refusal> {
    let stat = rustix::fs::fstat(&pathfd).map_err(|e| refusal_for(e.into()))?;
    let ft = FileType::from_raw_mode(stat.st_mode);
    if ft != FileType::RegularFile {
        return Err(Refusal::NotRegular(type_name(ft)));
    }
    let identity = identity_of(&stat);
    if let Some(change) = identity_change(expected, &identity) {
        return Err(Refusal::Stale(change));
    }
    if let Some(user) = reader
        && !user.may_read(stat.st_mode & 0o777, stat.st_uid, stat.st_gid)
    {
        return Err(Refusal::NotPermitted(user.uid));
    }
    let (fd, noatime, by_path) = reopen_for_reading(&pathfd, path).map_err(refusal_for)?;
    // Same inode by construction when reopened through /proc; checked again for the fallback.
    if by_path {
        let now = rustix::fs::fstat(&fd).map_err(|e| refusal_for(e.into()))?;
        if FileType::from_raw_mode(now.st_mode) != FileType::RegularFile {
            return Err(Refusal::NotRegular(type_name(FileType::from_raw_mode(now.st_mode))));
        }
        if let Some(change) = identity_change(expected, &identity_of(&now)) {
            return Err(Refusal::Stale(change));
        }
    }
    Ok(OpenedFile { fd, identity, owner_uid: stat.st_uid, noatime })
}

/// Whether `/proc/self/fd` is there (looked at once per process: a mount of /proc does not come
/// and go under a running daemon).
fn proc_fd_available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| Path::new("/proc/self/fd").is_dir())
}

/// Reopens the inode behind an `O_PATH` descriptor for reading, `O_NOATIME` when permitted;
/// true when it had to be by `path` again (no `/proc`), which may name another file by then.
fn reopen_for_reading(pathfd: &OwnedFd, path: &Path) -> io::Result<(OwnedFd, bool, bool)> {
    let via_proc: PathBuf = format!("/proc/self/fd/{}", pathfd.as_raw_fd()).into();
    let target: &Path = if proc_fd_available() { &via_proc } else { path };
    let base = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
    let extra = if target == path { OFlags::NOFOLLOW } else { OFlags::empty() };
    let by_path = target == path;
    match rustix::fs::openat(CWD, target, base | extra | OFlags::NOATIME, Mode::empty()) {
        Ok(fd) => Ok((fd, true, by_path)),
        // O_NOATIME needs ownership or CAP_FOWNER.
        Err(rustix::io::Errno::PERM) => {
            let fd = rustix::fs::openat(CWD, target, base | extra, Mode::empty())?;
            Ok((fd, false, by_path))
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn identity(path: &Path) -> FileIdentity {
        current_identity(path).unwrap()
    }

    #[test]
    fn opens_the_profiled_file() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(b"hello").unwrap();
        let id = identity(f.path());
        let opened = open_profiled(f.path(), &id, None).unwrap();
        assert_eq!(opened.identity, id);
    }

    #[test]
    fn a_file_the_reader_may_not_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(b"secret").unwrap();
        std::fs::set_permissions(f.path(), std::fs::Permissions::from_mode(0o600)).unwrap();
        let id = identity(f.path());
        let me = rustix::process::geteuid().as_raw();
        let stranger = ProcessUser { uid: me.wrapping_add(4242).max(1), gid: u32::MAX, groups: Vec::new() };
        assert_eq!(open_profiled(f.path(), &id, Some(&stranger)).unwrap_err(), Refusal::NotPermitted(stranger.uid));
        std::fs::set_permissions(f.path(), std::fs::Permissions::from_mode(0o604)).unwrap();
        let id = identity(f.path());
        assert!(open_profiled(f.path(), &id, Some(&stranger)).is_ok(), "readable by others");
        assert!(open_profiled(f.path(), &id, Some(&ProcessUser::ROOT)).is_ok());
    }

    #[test]
    fn changed_file_is_stale() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(b"hello").unwrap();
        let id = identity(f.path());
        f.write_all(b" world").unwrap();
        f.flush().unwrap();
        assert!(matches!(open_profiled(f.path(), &id, None), Err(Refusal::Stale(_))));
        let other = FileIdentity { ino: id.ino + 1, ..identity(f.path()) };
        assert!(matches!(open_profiled(f.path(), &other, None), Err(Refusal::Stale(s)) if s.contains("different file")));
    }

    #[test]
    fn non_regular_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(CWD, &fifo, FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
        let id = identity(&fifo);
        assert_eq!(open_profiled(&fifo, &id, None).unwrap_err(), Refusal::NotRegular("FIFO"));
        let id = identity(dir.path());
        assert_eq!(open_profiled(dir.path(), &id, None).unwrap_err(), Refusal::NotRegular("directory"));
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("/etc/hostname", &link).unwrap();
        let id = identity(&link);
        assert_eq!(open_profiled(&link, &id, None).unwrap_err(), Refusal::NotRegular("symbolic link"));
        assert_eq!(open_profiled(&dir.path().join("none"), &id, None).unwrap_err(), Refusal::Missing);
    }
}
