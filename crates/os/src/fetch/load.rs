//! The two page-loading calls: asynchronous advice (`POSIX_FADV_WILLNEED`) and synchronous
//! completion (`MADV_POPULATE_READ` on a read-only mapping, `pread` where the kernel lacks it).
//!
//! Owns only the mechanics of one chunk. Completion reads exactly the chunk: the mapping is
//! marked `MADV_RANDOM` and the descriptor `POSIX_FADV_RANDOM`, so neither fault-around nor
//! read-ahead pulls in pages the profile did not ask for.

use std::io;
use std::os::fd::BorrowedFd;

use rustix::mm::Advice as MemAdvice;

use augur_core::model::range::PageRange;

use super::residency::ProbeMapping;

/// How chunks are completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompletionMethod {
    /// `madvise(MADV_POPULATE_READ)` (Linux 5.14+).
    Populate,
    /// `pread` into a scratch buffer.
    Pread,
}

/// Tells the kernel not to read ahead around what is read through `fd`.
pub fn disable_readahead(fd: BorrowedFd<'_>) -> io::Result<()> {
    rustix::fs::fadvise(fd, 0, None, rustix::fs::Advice::Random)?;
    Ok(())
}

/// Starts reading `range` without waiting (POSIX_FADV_WILLNEED).
pub fn advise(fd: BorrowedFd<'_>, range: PageRange, page_size: u64) -> io::Result<()> {
    let Some(len) = std::num::NonZeroU64::new(range.len * page_size) else {
        return Ok(());
    };
    rustix::fs::fadvise(fd, range.start * page_size, Some(len), rustix::fs::Advice::WillNeed)?;
    Ok(())
}

/// Returns when every page of `range` has been read into the page cache (or an error says why
/// not). `method` is switched to [`CompletionMethod::Pread`] if the kernel lacks
/// `MADV_POPULATE_READ`. `scratch` is reused between calls by the pread path.
pub fn complete(
    fd: BorrowedFd<'_>,
    range: PageRange,
    page_size: u64,
    method: &mut CompletionMethod,
    scratch: &mut Vec<u8>,
) -> io::Result<()> {
    if range.is_empty() {
        return Ok(());
    }
    if *method == CompletionMethod::Populate {
        match populate(fd, range, page_size) {
            Ok(()) => return Ok(()),
            // EINVAL: a kernel before 5.14 (unknown advice); ENODEV: a file system that cannot
            // be mapped. Both can still be read.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENODEV)) => {
                *method = CompletionMethod::Pread;
            }
            Err(e) => return Err(e),
        }
    }
    read_through(fd, range, page_size, scratch)
}

fn populate(fd: BorrowedFd<'_>, range: PageRange, page_size: u64) -> io::Result<()> {
    let map = ProbeMapping::new(fd, range, page_size)?;
    map.advise(MemAdvice::Random)?;
    let mut attempts = 0;
    loop {
        match map.advise(MemAdvice::LinuxPopulateRead) {
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::EAGAIN)) && attempts < 3 => {
                attempts += 1;
            }
            other => return other,
        }
    }
}

fn read_through(fd: BorrowedFd<'_>, range: PageRange, page_size: u64, scratch: &mut Vec<u8>) -> io::Result<()> {
    let total = (range.len * page_size) as usize;
    if scratch.len() < total {
        scratch.resize(total, 0);
    }
    let mut done = 0usize;
    let offset = range.start * page_size;
    while done < total {
        match rustix::io::pread(fd, &mut scratch[done..total], offset + done as u64) {
            Ok(0) => break, // end of file
            Ok(n) => done += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
