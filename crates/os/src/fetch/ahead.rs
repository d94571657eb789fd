//! Loading pages ahead of a reader the pattern watch follows, and dropping pages behind a large
//! read-once stream: finding the very file it reads among its open descriptors, reopening it
//! read-only for the daemon, and asking the kernel to start reading page ranges of it without
//! waiting (`POSIX_FADV_WILLNEED`), to tell which of its pages are resident, or to drop page
//! ranges from the page cache (`POSIX_FADV_DONTNEED`, which leaves pages someone maps, dirty
//! pages and pages under writeback where they are).
//!
//! The file is found by device and inode among `/proc/PID/fd` (regular files on local mounts
//! only, judged by mount id as [`crate::sense::procfs::open_files`] does, so nothing here asks a
//! network file system anything), reopened through that magic link, and its identity checked
//! again on the new descriptor. [`advise_reader_access`] instead duplicates the reader's own
//! descriptors (`pidfd_getfd`), since readahead advice belongs to an open file description. It does
//! what the engine's `ahead`, `behind`, `looping` and `random_read` modules decided; it must not
//! decide.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;

use rustix::fs::{CWD, FileType, Mode, OFlags};

use augur_core::model::range::{PageRange, RangeSet};

use super::load;
use super::residency::ResidencyProbe;

/// A watched reader's file, open read-only for loading ahead of it.
#[derive(Debug)]
pub struct ReaderFile {
    fd: OwnedFd,
}

impl ReaderFile {
    /// Opens the file of device `dev` (`st_dev` encoding) and inode `ino` that process `tgid`
    /// holds open; `Ok(None)` when it holds no such regular file on a local mount (any more).
    pub fn open(tgid: u32, dev: u64, ino: u64) -> io::Result<Option<ReaderFile>> {
        let dir = PathBuf::from(format!("/proc/{tgid}/fd"));
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None), // it exited
            Err(e) => return Err(e),
        };
        let mut mounts = crate::untrusted_path::OpenFileMounts::of(tgid);
        for entry in entries.flatten() {
            // A file on a network or FUSE mount is passed over by its mount id, unasked.
            if !mounts.is_local(&entry.file_name()) {
                continue;
            }
            let link = entry.path();
            let Some(id) = crate::untrusted_path::open_file_identity(&link) else { continue };
            if id.dev != dev || id.ino != ino {
                continue;
            }
            let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::NOATIME;
            let fd = match rustix::fs::openat(CWD, &link, flags, Mode::empty()) {
                Ok(fd) => fd,
                // O_NOATIME is refused on files the caller does not own without CAP_FOWNER.
                Err(rustix::io::Errno::PERM) => rustix::fs::openat(CWD, &link, flags - OFlags::NOATIME, Mode::empty())?,
                Err(_) => continue, // closed or replaced in between
            };
            let st = rustix::fs::fstat(&fd)?;
            let same = FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
                && crate::fetch::open::identity_of(&st).dev == dev
                && st.st_ino == ino;
            if same {
                return Ok(Some(ReaderFile { fd }));
            }
        }
        Ok(None)
    }

    /// Starts reading each of `ranges` (pages of `page_size` bytes) without waiting, in order.
    pub fn load(&self, ranges: &[PageRange], page_size: u64) -> io::Result<()> {
        for r in ranges {
            load::advise(self.fd.as_fd(), *r, page_size)?;
        }
        Ok(())
    }

    /// The file's size in pages of `page_size` bytes.
    pub fn pages(&self, page_size: u64) -> io::Result<u64> {
        let st = rustix::fs::fstat(&self.fd)?;
        Ok(super::residency::pages_in(st.st_size.max(0) as u64, page_size))
    }

    /// The pages of `range` in the page cache now (`None`: this process cannot know, see
    /// [`super::residency`]).
    pub fn resident(&self, range: PageRange, page_size: u64) -> io::Result<Option<RangeSet>> {
        let st = rustix::fs::fstat(&self.fd)?;
        let probe = ResidencyProbe::new(self.fd.as_fd(), page_size, super::residency::mincore_reports_page_cache(st.st_uid));
        if !probe.is_available() {
            return Ok(None);
        }
        probe.resident(range).map(Some)
    }

    /// Drops each of `ranges` from the page cache (`POSIX_FADV_DONTNEED`): clean pages no one
    /// maps go; the kernel keeps mapped, dirty and locked pages and pages under writeback.
    pub fn drop_cached(&self, ranges: &[PageRange], page_size: u64) -> io::Result<()> {
        for r in ranges {
            let Some(len) = std::num::NonZeroU64::new(r.len * page_size) else { continue };
            rustix::fs::fadvise(&self.fd, r.start * page_size, Some(len), rustix::fs::Advice::DontNeed)?;
        }
        Ok(())
    }
}

/// Advises random access (`POSIX_FADV_RANDOM`: the kernel reads only the pages asked, no
/// readahead) or, with `random` false, normal access (`POSIX_FADV_NORMAL`) on every open file
/// description of the file of device `dev` (`st_dev` encoding) and inode `ino` that process `tgid`
/// holds, through a duplicate of its descriptor (`pidfd_getfd`, which needs the right to ptrace it:
/// the advice is on the description it shares with the process). Returns how many descriptions
/// were advised (0: it holds no such regular file on a local mount, or it exited).
pub fn advise_reader_access(tgid: u32, dev: u64, ino: u64, random: bool) -> io::Result<usize> {
    let Some(pid) = i32::try_from(tgid).ok().and_then(rustix::process::Pid::from_raw) else { return Ok(0) };
    let pidfd = match rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::SRCH) => return Ok(0), // it exited
        Err(e) => return Err(e.into()),
    };
    let entries = match std::fs::read_dir(format!("/proc/{tgid}/fd")) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let advice = if random { rustix::fs::Advice::Random } else { rustix::fs::Advice::Normal };
    let mut advised = 0;
    let mut mounts = crate::untrusted_path::OpenFileMounts::of(tgid);
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !mounts.is_local(&name) {
            continue;
        }
        let Some(id) = crate::untrusted_path::open_file_identity(&entry.path()) else { continue };
        if id.dev != dev || id.ino != ino {
            continue;
        }
        let Some(number) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let fd = match rustix::process::pidfd_getfd(&pidfd, number, rustix::process::PidfdGetfdFlags::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::BADF) => continue, // closed in between
            Err(e) => return Err(e.into()),
        };
        let st = rustix::fs::fstat(&fd)?;
        let same = FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
            && crate::fetch::open::identity_of(&st).dev == dev
            && st.st_ino == ino;
        if same {
            rustix::fs::fadvise(&fd, 0, None, advice)?;
            advised += 1;
        }
    }
    Ok(advised)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn finds_a_file_this_process_holds_open_and_only_that_one() {
        let dir = std::env::temp_dir().join(format!("augur-ahead-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("data");
        std::fs::write(&path, vec![1u8; 64 * 1024]).unwrap();
        let held = std::fs::File::open(&path).unwrap();
        let m = held.metadata().unwrap();
        let me = std::process::id();
        let f = ReaderFile::open(me, m.dev(), m.ino()).unwrap().expect("found among our descriptors");
        f.load(&[PageRange::new(0, 4), PageRange::new(8, 2)], 4096).unwrap();
        assert_eq!(f.pages(4096).unwrap(), 16);
        f.drop_cached(&[PageRange::new(0, 16)], 4096).unwrap();
        if let Some(resident) = f.resident(PageRange::new(0, 16), 4096).unwrap() {
            assert!(resident.page_count() <= 16);
        }
        assert!(ReaderFile::open(me, m.dev(), m.ino() + 1_000_000).unwrap().is_none());
        // Advice on our own descriptor: allowed without privilege (a process may ptrace-inspect
        // itself), where the kernel supports pidfd_getfd.
        if let Ok(n) = advise_reader_access(me, m.dev(), m.ino(), true) {
            // Two descriptions of it: the file held and the one `ReaderFile` reopened.
            assert_eq!(n, 2);
            assert_eq!(advise_reader_access(me, m.dev(), m.ino(), false).unwrap(), 2);
        }
        assert_eq!(advise_reader_access(me, m.dev(), m.ino() + 1_000_000, true).unwrap_or(0), 0);
        drop(held);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
