//! Naming an inode that only its number identifies (an `ext4_load_inode` event): the file
//! system's own file handle opens it (`open_by_handle_at` with an ext4-style 32-bit inode handle
//! of generation 0, which ext4 accepts without checking the generation) as an `O_PATH`
//! descriptor, and the kernel reports the path of that descriptor. A name is returned only when
//! a `stat` of it finds the same inode again, so a stale or disconnected name is never kept.
//!
//! Thin OS layer: it opens nothing but `O_PATH` descriptors (no data is read, nothing written
//! or executed) and needs `CAP_DAC_READ_SEARCH` (root). It does not decide what names are for.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use augur_core::model::profile::InodeKey;

use crate::untrusted_path::{self, Symlinks};

use super::fanotify::block_backed_filesystems;

/// `FILEID_INO32_GEN` from `include/linux/exportfs.h`: a 32-bit inode number and generation.
const FILEID_INO32_GEN: i32 = 1;

/// `struct file_handle` with room for an `FILEID_INO32_GEN` handle.
#[repr(C)]
struct Ino32Handle {
    handle_bytes: u32,
    handle_type: i32,
    ino: u32,
    generation: u32,
}

/// What an inode turned out to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedInode {
    /// Its current path.
    pub path: PathBuf,
    /// Whether it is a directory, and then its size in bytes (its blocks).
    pub dir_bytes: Option<u64>,
}

/// Names inodes of the ext2/3/4 file systems mounted now; keeps one descriptor per file system.
#[derive(Debug, Default)]
pub struct InodeNamer {
    /// `st_dev` -> a descriptor of the file system's mount point (`None`: not nameable).
    mounts: HashMap<u64, Option<OwnedFd>>,
}

impl InodeNamer {
    /// A namer that has opened nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current path of `key`, if its file system hands out inode handles and the inode is
    /// still reachable by a path.
    pub fn name(&mut self, key: InodeKey) -> Option<NamedInode> {
        let ino = u32::try_from(key.ino).ok()?;
        let mount = self.mounts.entry(key.dev).or_insert_with(|| mount_of(key.dev)).as_ref()?;
        let mut handle = Ino32Handle { handle_bytes: 8, handle_type: FILEID_INO32_GEN, ino, generation: 0 };
        // SAFETY: `handle` is a `struct file_handle` header followed by the 8 bytes its
        // `handle_bytes` announces, alive for the call; the kernel only reads it. `mount` is an
        // open descriptor. A non-negative result is a new descriptor nobody else owns.
        let fd = unsafe {
            let raw = libc::open_by_handle_at(
                mount.as_raw_fd(),
                (&raw mut handle).cast::<libc::file_handle>(),
                libc::O_PATH | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            );
            if raw < 0 {
                return None;
            }
            OwnedFd::from_raw_fd(raw)
        };
        let path = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
        drop(fd);
        // The kernel's name holds no symbolic link; the walk to it stays on the inode's mount.
        let st = untrusted_path::stat(&path, Symlinks::Refuse).ok()?;
        if st.st_dev != key.dev || st.st_ino != key.ino || !path.is_absolute() {
            return None;
        }
        let is_dir = rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory;
        Some(NamedInode { path, dir_bytes: is_dir.then(|| u64::try_from(st.st_size).unwrap_or(0)) })
    }
}

/// A descriptor of where the ext2/3/4 file system of `dev` is mounted.
fn mount_of(dev: u64) -> Option<OwnedFd> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let fs = block_backed_filesystems(&text)
        .into_iter()
        .find(|m| libc::makedev(m.dev.0, m.dev.1) == dev && m.fstype.starts_with("ext"))?;
    open_dir(&fs.mount_point)
}

/// The mount point, opened for reading: `open_by_handle_at` refuses an `O_PATH` descriptor.
fn open_dir(dir: &Path) -> Option<OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    rustix::fs::open(dir, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn is_root() -> bool {
        rustix::process::geteuid().is_root()
    }

    #[test]
    fn an_inode_of_the_root_file_system_is_named_by_its_number_when_root() {
        let meta = std::fs::metadata("/usr/bin").unwrap();
        let mut namer = InodeNamer::new();
        let fs = std::fs::read_to_string("/proc/self/mounts").unwrap();
        let root_is_ext =
            fs.lines().any(|l| l.split(' ').nth(1) == Some("/") && l.split(' ').nth(2).is_some_and(|t| t.starts_with("ext")));
        let got = namer.name(InodeKey { dev: meta.dev(), ino: meta.ino() });
        if is_root() && root_is_ext {
            let got = got.expect("a name");
            assert_eq!(got.path, Path::new("/usr/bin"));
            assert_eq!(got.dir_bytes, Some(meta.len()));
        } else {
            assert_eq!(got, None);
        }
    }

    #[test]
    fn unknown_devices_and_inodes_have_no_name() {
        let mut namer = InodeNamer::new();
        assert_eq!(namer.name(InodeKey { dev: libc::makedev(4095, 77), ino: 2 }), None);
        let meta = std::fs::metadata("/").unwrap();
        assert_eq!(namer.name(InodeKey { dev: meta.dev(), ino: u64::from(u32::MAX) + 5 }), None);
    }
}
