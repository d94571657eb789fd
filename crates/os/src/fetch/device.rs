//! What fetch needs to know about the block device under a file: whether it is rotational (so
//! requests are ordered by physical location), how much one readahead request can load, and
//! where a file's bytes lie on it (FIEMAP).
//!
//! Reads sysfs and issues `FS_IOC_FIEMAP`; it decides nothing. A file on a device sysfs does not
//! describe (tmpfs, overlayfs, btrfs's anonymous devices, NFS) gets [`DeviceInfo::unknown`].

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Facts about the block device holding a file system.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// `queue/rotational` is 1: seeks are expensive, so order by physical location.
    pub rotational: bool,
    /// The most one readahead(2)/POSIX_FADV_WILLNEED call loads, in bytes:
    /// `max(read_ahead_kb, max_sectors_kb)` (the kernel's `force_page_cache_ra` silently truncates
    /// longer requests to this), `None` when unknown.
    pub readahead_limit: Option<u64>,
}

impl DeviceInfo {
    /// What is assumed when sysfs says nothing: not rotational, no known limit.
    pub const fn unknown() -> Self {
        DeviceInfo { rotational: false, readahead_limit: None }
    }
}

/// `major(dev)` for the glibc/kernel userspace `dev_t` encoding.
pub fn dev_major(dev: u64) -> u64 {
    ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0000_0fff)
}

/// `minor(dev)` for the glibc/kernel userspace `dev_t` encoding.
pub fn dev_minor(dev: u64) -> u64 {
    ((dev >> 12) & 0xffff_ff00) | (dev & 0x0000_00ff)
}

/// The `queue` directory of the disk holding `dev` (`st_dev` encoding), walking from a partition
/// to its parent disk.
fn queue_dir(sys_dev_block: &Path, dev: u64) -> Option<PathBuf> {
    let node = sys_dev_block.join(format!("{}:{}", dev_major(dev), dev_minor(dev)));
    let real = fs::canonicalize(&node).ok()?;
    let own = real.join("queue");
    if own.is_dir() {
        return Some(own);
    }
    // A partition: .../block/vda/vda1 has no queue/, its disk .../block/vda does.
    let parent = real.parent()?.join("queue");
    parent.is_dir().then_some(parent)
}

fn read_number(path: &Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Reads the facts for `dev` from `sys_dev_block` (normally `/sys/dev/block`).
pub fn device_info_at(sys_dev_block: &Path, dev: u64) -> DeviceInfo {
    let Some(queue) = queue_dir(sys_dev_block, dev) else {
        return DeviceInfo::unknown();
    };
    let rotational = read_number(&queue.join("rotational")) == Some(1);
    let ra_kb = read_number(&queue.join("read_ahead_kb"));
    let io_kb = read_number(&queue.join("max_sectors_kb"));
    let readahead_limit = match (ra_kb, io_kb) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0).max(b.unwrap_or(0)) * 1024),
    };
    DeviceInfo { rotational, readahead_limit }
}

/// How long what sysfs said of a device is trusted across fetches: an administrator's change of
/// `read_ahead_kb` shows within this long, and a daemon replaying at every exec reads sysfs once
/// a minute per device, not three files per device per replay.
const DEVICE_INFO_MAX_AGE: Duration = Duration::from_secs(60);

/// What sysfs said of each device, and when, for every fetch of the process.
static SHARED: Mutex<Option<HashMap<u64, (DeviceInfo, Instant)>>> = Mutex::new(None);

/// Remembers [`DeviceInfo`] per device so sysfs is read once per device per run (and, through
/// the process-wide memory, once per [`DEVICE_INFO_MAX_AGE`]).
#[derive(Debug, Default)]
pub struct DeviceTable {
    known: HashMap<u64, DeviceInfo>,
}

impl DeviceTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Facts for `dev` (`st_dev` encoding).
    pub fn info(&mut self, dev: u64) -> DeviceInfo {
        *self.known.entry(dev).or_insert_with(|| {
            let mut shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
            let shared = shared.get_or_insert_with(HashMap::new);
            match shared.get(&dev) {
                Some((info, at)) if at.elapsed() < DEVICE_INFO_MAX_AGE => *info,
                _ => {
                    let info = device_info_at(Path::new("/sys/dev/block"), dev);
                    shared.insert(dev, (info, Instant::now()));
                    info
                }
            }
        })
    }
}

const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
const FIEMAP_EXTENT_UNKNOWN: u32 = 0x0000_0002;
const FIEMAP_EXTENT_DELALLOC: u32 = 0x0000_0004;

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct FiemapExtent {
    fe_logical: u64,
    fe_physical: u64,
    fe_length: u64,
    fe_reserved64: [u64; 2],
    fe_flags: u32,
    fe_reserved: [u32; 3],
}

#[repr(C)]
#[derive(Default)]
struct Fiemap {
    fm_start: u64,
    fm_length: u64,
    fm_flags: u32,
    fm_mapped_extents: u32,
    fm_extent_count: u32,
    fm_reserved: u32,
    fm_extents: [FiemapExtent; 1],
}

/// The physical byte address on the device of the file byte at `offset` (FIEMAP, first extent
/// at or after `offset` within `len` bytes). `Ok(None)` when the bytes have no known location
/// (a hole, delayed allocation, inline data, a file system without FIEMAP).
pub fn physical_offset(fd: BorrowedFd<'_>, offset: u64, len: u64) -> io::Result<Option<u64>> {
    let mut map = Fiemap { fm_start: offset, fm_length: len.max(1), fm_extent_count: 1, ..Default::default() };
    // SAFETY: `map` is a #[repr(C)] struct fiemap followed by room for exactly fm_extent_count
    // (1) struct fiemap_extent, which is all the kernel writes; the pointer is valid for the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), FS_IOC_FIEMAP as _, &mut map as *mut Fiemap) };
    if rc != 0 {
        let err = io::Error::last_os_error();
        return match err.raw_os_error() {
            Some(libc::EOPNOTSUPP) | Some(libc::ENOTTY) | Some(libc::EINVAL) => Ok(None),
            _ => Err(err),
        };
    }
    if map.fm_mapped_extents == 0 {
        return Ok(None);
    }
    let e = map.fm_extents[0];
    if e.fe_flags & (FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC) != 0 {
        return Ok(None);
    }
    Ok(Some(e.fe_physical + offset.saturating_sub(e.fe_logical)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;

    #[test]
    fn dev_numbers_split_like_glibc() {
        assert_eq!((dev_major(0xfe01), dev_minor(0xfe01)), (254, 1));
        let big = libc::makedev(4100, 65537);
        assert_eq!((dev_major(big), dev_minor(big)), (4100, 65537));
    }

    #[test]
    fn partition_walks_to_its_disk() {
        let root = tempfile::tempdir().unwrap();
        let disk = root.path().join("devices/block/sda");
        fs::create_dir_all(disk.join("queue")).unwrap();
        fs::create_dir_all(disk.join("sda1")).unwrap();
        fs::write(disk.join("queue/rotational"), "1\n").unwrap();
        fs::write(disk.join("queue/read_ahead_kb"), "128\n").unwrap();
        fs::write(disk.join("queue/max_sectors_kb"), "1280\n").unwrap();
        let by_dev = root.path().join("dev-block");
        fs::create_dir_all(&by_dev).unwrap();
        std::os::unix::fs::symlink(disk.join("sda1"), by_dev.join("8:1")).unwrap();
        let info = device_info_at(&by_dev, 0x801);
        assert_eq!(info, DeviceInfo { rotational: true, readahead_limit: Some(1280 * 1024) });
        assert_eq!(device_info_at(&by_dev, 0x802), DeviceInfo::unknown());
    }

    #[test]
    fn fiemap_locates_written_data() {
        let mut f = tempfile::NamedTempFile::new_in("/var/tmp").unwrap();
        f.write_all(&vec![1u8; 1 << 16]).unwrap();
        f.as_file().sync_all().unwrap();
        // /var/tmp is on the root file system, ext4 in CI, which supports FIEMAP.
        let at = physical_offset(f.as_file().as_fd(), 4096, 4096).unwrap();
        assert!(at.is_some());
    }
}
