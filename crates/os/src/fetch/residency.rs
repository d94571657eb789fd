//! Which pages of a file are in the page cache: `cachestat(2)` for fast counts and `mincore(2)` on
//! a read-only shared mapping for the exact pages.
//!
//! Owns the mapping used for probing and the choice between the two calls. It never reads file
//! data and never touches the mapped memory, so a file truncated under it cannot fault us.
//!
//! Why two calls, and when neither: since Linux 5.0, `mincore` on a file mapping reports the page
//! cache only to a process that owns the file, may write it, or has CAP_FOWNER; to anyone else it
//! claims every page is resident. `cachestat` (6.5) counts rather than lists; the first kernels
//! with it answered everyone (so a partly resident range is bisected with it), newer ones (this
//! machine's 6.18) apply the same rule as `mincore` and answer EPERM. For an unprivileged caller
//! reading a file it neither owns nor may write, residency is therefore [`ProbeMethod::Unavailable`]:
//! fetched blindly, reported unverified, never guessed.

use std::ffi::c_void;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::ptr;

use rustix::mm::{Advice, MapFlags, ProtFlags};

use crate::error::OsError;
use augur_core::model::range::{PageRange, RangeSet};

/// `cachestat(2)` on x86_64, arm64 and every architecture using the generic table.
const SYS_CACHESTAT: libc::c_long = 451;

/// Pages probed with one `mincore` call at most (1 GiB of 4 KiB pages), bounding the vector.
const MINCORE_SPAN_PAGES: u64 = 1 << 18;

/// The system page size in bytes.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions; _SC_PAGESIZE is always supported.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 { size as u64 } else { 4096 }
}

/// What `cachestat(2)` says about a byte range (in pages).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheCounts {
    /// Pages in the page cache (dirty ones included).
    pub cached: u64,
    /// Cached pages that are dirty.
    pub dirty: u64,
    /// Pages under writeback.
    pub writeback: u64,
    /// Pages evicted from the cache.
    pub evicted: u64,
    /// Pages evicted recently (their shadow entries are still young).
    pub recently_evicted: u64,
}

#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

/// `cachestat(2)` over pages `range` of `fd`. `Ok(None)` when the kernel lacks the call.
pub fn cachestat(fd: BorrowedFd<'_>, range: PageRange, page_size: u64) -> io::Result<Option<CacheCounts>> {
    if range.is_empty() {
        return Ok(Some(CacheCounts::default()));
    }
    let span = CachestatRange { off: range.start * page_size, len: range.len * page_size };
    let mut out = Cachestat::default();
    // SAFETY: both pointers refer to live, properly aligned #[repr(C)] structs laid out as the
    // kernel's struct cachestat_range and struct cachestat; the kernel reads one and writes the
    // other and keeps neither after returning. flags must be 0.
    let rc =
        unsafe { libc::syscall(SYS_CACHESTAT, fd.as_raw_fd(), &span as *const CachestatRange, &mut out as *mut Cachestat, 0u32) };
    if rc == 0 {
        return Ok(Some(CacheCounts {
            cached: out.nr_cache,
            dirty: out.nr_dirty,
            writeback: out.nr_writeback,
            evicted: out.nr_evicted,
            recently_evicted: out.nr_recently_evicted,
        }));
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::ENOSYS) => Ok(None),
        _ => Err(err),
    }
}

/// A read-only shared mapping of part of a file that is never dereferenced: it exists to be
/// passed to `mincore` and `madvise`. Unmapped on drop.
pub(crate) struct ProbeMapping {
    addr: *mut c_void,
    len: usize,
}

impl ProbeMapping {
    /// Maps pages `range` of `fd`.
    pub(crate) fn new(fd: BorrowedFd<'_>, range: PageRange, page_size: u64) -> io::Result<Self> {
        let len = usize::try_from(range.len * page_size).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        if len == 0 {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        // SAFETY: a null hint lets the kernel choose a fresh address, so no existing memory is
        // replaced; the offset is a multiple of the page size; the mapping is PROT_READ and we
        // never form a reference to it, so truncation of the file cannot cause a fault in Rust
        // code (mincore and madvise report errors instead of faulting).
        let addr =
            unsafe { rustix::mm::mmap(ptr::null_mut(), len, ProtFlags::READ, MapFlags::SHARED, fd, range.start * page_size) }?;
        Ok(ProbeMapping { addr, len })
    }

    /// Advises the kernel about the whole mapping.
    pub(crate) fn advise(&self, advice: Advice) -> io::Result<()> {
        // SAFETY: addr/len describe exactly the mapping this struct owns; the advice values used
        // (MADV_RANDOM, MADV_POPULATE_READ) neither free nor change the contents of memory.
        unsafe { rustix::mm::madvise(self.addr, self.len, advice) }.map_err(io::Error::from)
    }

    /// The residency vector of the mapping, one byte per page (bit 0 = resident).
    fn mincore(&self, page_size: u64) -> io::Result<Vec<u8>> {
        let pages = self.len.div_ceil(page_size as usize);
        let mut vec = vec![0u8; pages];
        // SAFETY: addr is page-aligned (returned by mmap), len covers only our mapping, and vec
        // has one byte for each page of it, as mincore requires.
        let rc = unsafe { libc::mincore(self.addr, self.len, vec.as_mut_ptr()) };
        if rc == 0 { Ok(vec) } else { Err(io::Error::last_os_error()) }
    }
}

impl Drop for ProbeMapping {
    fn drop(&mut self) {
        // SAFETY: addr/len are exactly what mmap returned and nothing refers into the mapping.
        let _ = unsafe { rustix::mm::munmap(self.addr, self.len) };
    }
}

/// How residency is probed for one open file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeMethod {
    /// `cachestat` counts, `mincore` for exact pages of partly resident ranges.
    CachestatThenMincore,
    /// `cachestat` counts, bisection with `cachestat` for partly resident ranges (unprivileged).
    CachestatBisect,
    /// `mincore` only (kernel without cachestat).
    Mincore,
    /// The kernel will not tell this process (see the module documentation).
    Unavailable,
}

/// Finds the resident pages of one open file.
pub struct ResidencyProbe<'fd> {
    fd: BorrowedFd<'fd>,
    page_size: u64,
    method: ProbeMethod,
}

impl<'fd> ResidencyProbe<'fd> {
    /// A probe for `fd`. `may_mincore` says whether `mincore` reports the page cache for this file
    /// (the caller owns it or has CAP_FOWNER, see [`mincore_reports_page_cache`]).
    pub fn new(fd: BorrowedFd<'fd>, page_size: u64, may_mincore: bool) -> Self {
        let method = match (cachestat(fd, PageRange::new(0, 1), page_size), may_mincore) {
            (Ok(Some(_)), true) => ProbeMethod::CachestatThenMincore,
            (Ok(Some(_)), false) => ProbeMethod::CachestatBisect,
            // ENOSYS, or EPERM from a seccomp filter that predates cachestat (systemd 252's).
            (Ok(None) | Err(_), true) => ProbeMethod::Mincore,
            (Ok(None) | Err(_), false) => ProbeMethod::Unavailable,
        };
        ResidencyProbe { fd, page_size, method }
    }

    /// True when residency can be known for this file.
    pub fn is_available(&self) -> bool {
        self.method != ProbeMethod::Unavailable
    }

    /// The method in use.
    pub fn method(&self) -> ProbeMethod {
        self.method
    }

    /// Number of resident pages in `range`.
    pub fn count(&self, range: PageRange) -> io::Result<u64> {
        if self.method == ProbeMethod::Unavailable {
            return Err(unavailable());
        }
        if self.method != ProbeMethod::Mincore {
            if let Some(c) = cachestat(self.fd, range, self.page_size)? {
                return Ok(c.cached.min(range.len));
            }
        }
        Ok(self.resident(range)?.page_count())
    }

    /// The resident pages of `range`.
    pub fn resident(&self, range: PageRange) -> io::Result<RangeSet> {
        let mut out = RangeSet::new();
        self.resident_into(range, &mut out)?;
        Ok(out)
    }

    /// The resident pages of every range of `set`.
    pub fn resident_of(&self, set: &RangeSet) -> io::Result<RangeSet> {
        let mut out = RangeSet::new();
        for r in set.ranges() {
            self.resident_into(*r, &mut out)?;
        }
        Ok(out)
    }

    fn resident_into(&self, range: PageRange, out: &mut RangeSet) -> io::Result<()> {
        if range.is_empty() {
            return Ok(());
        }
        match self.method {
            ProbeMethod::Unavailable => Err(unavailable()),
            ProbeMethod::Mincore => self.mincore_into(range, out),
            ProbeMethod::CachestatThenMincore => match self.cached(range)? {
                0 => Ok(()),
                n if n >= range.len => {
                    out.insert(range);
                    Ok(())
                }
                _ => self.mincore_into(range, out),
            },
            ProbeMethod::CachestatBisect => self.bisect_into(range, out),
        }
    }

    fn cached(&self, range: PageRange) -> io::Result<u64> {
        Ok(cachestat(self.fd, range, self.page_size)?.map_or(0, |c| c.cached))
    }

    fn bisect_into(&self, range: PageRange, out: &mut RangeSet) -> io::Result<()> {
        let n = self.cached(range)?;
        if n == 0 {
            return Ok(());
        }
        if n >= range.len {
            out.insert(range);
            return Ok(());
        }
        let half = range.len / 2;
        self.bisect_into(PageRange::new(range.start, half), out)?;
        self.bisect_into(PageRange::from_bounds(range.start + half, range.end()), out)
    }

    fn mincore_into(&self, range: PageRange, out: &mut RangeSet) -> io::Result<()> {
        for span in range.chunks(MINCORE_SPAN_PAGES) {
            let map = ProbeMapping::new(self.fd, span, self.page_size)?;
            let vec = map.mincore(self.page_size)?;
            let mut run_start: Option<u64> = None;
            for (i, byte) in vec.iter().enumerate() {
                let page = span.start + i as u64;
                match (byte & 1 == 1, run_start) {
                    (true, None) => run_start = Some(page),
                    (false, Some(s)) => {
                        out.insert(PageRange::from_bounds(s, page));
                        run_start = None;
                    }
                    _ => {}
                }
            }
            if let Some(s) = run_start {
                out.insert(PageRange::from_bounds(s, span.end()));
            }
        }
        Ok(())
    }
}

fn unavailable() -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, "the kernel reports page-cache residency only to the file's owner or root")
}

/// Whether `mincore` tells this process about the page cache of a file owned by `owner_uid`:
/// true for root (CAP_FOWNER) and for the file's owner.
pub fn mincore_reports_page_cache(owner_uid: u32) -> bool {
    let euid = rustix::process::geteuid();
    euid.is_root() || euid.as_raw() == owner_uid
}

/// Number of whole or partial `page_size` pages in a file of `size` bytes.
pub fn pages_in(size: u64, page_size: u64) -> u64 {
    size.div_ceil(page_size.max(1))
}

/// Drops every clean page, dentry and inode from the caches after writing dirty data back:
/// `sync; echo 3 > /proc/sys/vm/drop_caches`. Needs root.
pub fn drop_all_caches() -> Result<(), OsError> {
    rustix::fs::sync();
    std::fs::write("/proc/sys/vm/drop_caches", b"3\n").map_err(|e| {
        if e.kind() == io::ErrorKind::PermissionDenied {
            OsError::NotRoot { action: "dropping the page cache".into() }
        } else {
            OsError::io("writing /proc/sys/vm/drop_caches", e)
        }
    })
}

/// Evicts the clean cached pages of one file (POSIX_FADV_DONTNEED), after writing it back.
pub fn evict_file(fd: BorrowedFd<'_>) -> io::Result<()> {
    rustix::fs::fdatasync(fd.as_fd())?;
    rustix::fs::fadvise(fd, 0, None, rustix::fs::Advice::DontNeed)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_of_pages(pages: u64) -> (tempfile::NamedTempFile, u64) {
        let ps = page_size();
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&vec![7u8; (pages * ps) as usize]).unwrap();
        f.flush().unwrap();
        (f, ps)
    }

    #[test]
    fn methods_agree_after_partial_eviction() {
        let (f, ps) = file_of_pages(64);
        let fd = f.as_file().as_fd();
        evict_file(fd).unwrap();
        // Read pages 3..5 and 40..41 through pread; fadvise(RANDOM) keeps readahead out.
        rustix::fs::fadvise(fd, 0, None, rustix::fs::Advice::Random).unwrap();
        let mut buf = vec![0u8; ps as usize];
        for p in [3u64, 4, 40] {
            rustix::io::pread(fd, &mut buf, p * ps).unwrap();
        }
        let whole = PageRange::new(0, 64);
        let exact = ResidencyProbe::new(fd, ps, true);
        let bisect = ResidencyProbe { fd, page_size: ps, method: ProbeMethod::CachestatBisect };
        let mincore = ResidencyProbe { fd, page_size: ps, method: ProbeMethod::Mincore };
        let a = exact.resident(whole).unwrap();
        assert_eq!(a, bisect.resident(whole).unwrap());
        assert_eq!(a, mincore.resident(whole).unwrap());
        for p in [3u64, 4, 40] {
            assert!(a.contains(p), "page {p} should be resident: {a:?}");
        }
        assert_eq!(exact.count(whole).unwrap(), a.page_count());
    }

    #[test]
    fn fully_resident_file_after_write() {
        let (f, ps) = file_of_pages(8);
        let probe = ResidencyProbe::new(f.as_file().as_fd(), ps, true);
        assert_eq!(probe.resident(PageRange::new(0, 8)).unwrap().page_count(), 8);
    }
}
