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
//! again on the new descriptor. It does what the engine's `ahead` module decided; it must not decide.

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
        for entry in entries.flatten() {
            // A file on a network or FUSE mount is passed over by its mount id, unasked.
            if !crate::untrusted_path::open_file_is_local(tgid, &entry.file_name()) {
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
        drop(held);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
