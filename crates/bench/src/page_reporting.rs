//! Pausing the guest's free page reporting (virtio-balloon) while a benchmark runs.
//!
//! In a VM whose balloon device reports free pages, every page freed (dropping the caches frees
//! gigabytes) goes back to the host, and the next touch of it costs a host-side fault. That
//! doubled the system time of a cold tree read here and made it vary by ±30 % from run to run,
//! which buries the few per cent a prefetcher's cost is about. [`ReportingPause`] raises
//! `page_reporting_order` above the buddy allocator's largest order, so nothing is reported, and
//! puts the old value back on drop; a run that was killed leaves the old value in a file that
//! [`restore_leftover`] reads.
//!
//! Pausing is not enough: memory reported before the pause stays unbacked on the host, and a
//! first touch of it cost ~36 µs per 4 KiB page here (10 s per GiB), landing at random in
//! whichever run the allocator happened to hand it to. [`back_free_memory`] touches the free
//! memory once, while reporting is paused, so every later run finds it backed. It touches
//! nothing else.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{IoContext, Result};

const ORDER_PARAM: &str = "/sys/module/page_reporting/parameters/page_reporting_order";
const LEFTOVER: &str = "/run/augur-bench-page-reporting-order";
/// Above MAX_PAGE_ORDER (10 on x86-64): no free block is ever large enough to be reported.
const NEVER: u32 = 11;

/// Free page reporting held off; dropping it resumes reporting.
#[derive(Debug)]
pub struct ReportingPause {
    param: PathBuf,
    saved: String,
    leftover: PathBuf,
}

impl ReportingPause {
    /// Pauses reporting when this kernel reports free pages; `Ok(None)` when it does not.
    pub fn start() -> Result<Option<ReportingPause>> {
        Self::start_at(Path::new(ORDER_PARAM), Path::new(LEFTOVER))
    }

    fn start_at(param: &Path, leftover: &Path) -> Result<Option<ReportingPause>> {
        let Ok(saved) = fs::read_to_string(param) else { return Ok(None) };
        let saved = saved.trim().to_string();
        fs::write(leftover, &saved).context(|| format!("writing {}", leftover.display()))?;
        fs::write(param, NEVER.to_string()).context(|| format!("writing {}", param.display()))?;
        Ok(Some(ReportingPause { param: param.to_path_buf(), saved, leftover: leftover.to_path_buf() }))
    }

    /// What the output records: the order reporting was at, and that it is paused.
    pub fn describe(&self) -> String {
        format!("free page reporting paused (page_reporting_order {} -> {NEVER})", self.saved)
    }
}

impl Drop for ReportingPause {
    fn drop(&mut self) {
        if fs::write(&self.param, &self.saved).is_ok() {
            let _ = fs::remove_file(&self.leftover);
        }
    }
}

/// Touches all free memory but `keep_free` once, in chunks held until the end, then frees it:
/// afterwards (with reporting paused) the host backs every free page. Returns the bytes touched.
/// Page cache and running programs are left alone: only `MemFree` is taken.
pub fn back_free_memory(keep_free: u64) -> Result<u64> {
    const CHUNK: usize = 64 << 20;
    const PAGE: usize = 4096;
    let free = augur_os::sense::procfs::meminfo("MemFree")?;
    let want = free.saturating_sub(keep_free);
    let mut held: Vec<Vec<u8>> = Vec::new();
    let mut touched = 0u64;
    while touched + CHUNK as u64 <= want {
        // Zeroed allocations are mapped lazily; one write per page makes the kernel allocate and
        // clear it, which is the touch the host backs.
        let mut chunk = vec![0u8; CHUNK];
        for i in (0..CHUNK).step_by(PAGE) {
            chunk[i] = 1;
        }
        held.push(std::hint::black_box(chunk));
        touched += CHUNK as u64;
    }
    drop(held);
    Ok(touched)
}

/// Puts back the order a killed run saved; true when there was one.
pub fn restore_leftover() -> bool {
    restore_leftover_at(Path::new(ORDER_PARAM), Path::new(LEFTOVER))
}

fn restore_leftover_at(param: &Path, leftover: &Path) -> bool {
    let Ok(saved) = fs::read_to_string(leftover) else { return false };
    let restored = fs::write(param, saved.trim()).is_ok();
    if restored {
        let _ = fs::remove_file(leftover);
    }
    restored
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_and_restores_and_a_killed_run_is_repaired() {
        let dir = tempfile::tempdir().unwrap();
        let param = dir.path().join("order");
        let leftover = dir.path().join("saved");
        fs::write(&param, "8\n").unwrap();
        let pause = ReportingPause::start_at(&param, &leftover).unwrap().unwrap();
        assert_eq!(fs::read_to_string(&param).unwrap(), "11");
        assert!(pause.describe().contains("8 -> 11"));
        drop(pause);
        assert_eq!(fs::read_to_string(&param).unwrap(), "8");
        assert!(!leftover.exists());

        // Killed: the guard never dropped.
        std::mem::forget(ReportingPause::start_at(&param, &leftover).unwrap());
        assert_eq!(fs::read_to_string(&param).unwrap(), "11");
        assert!(restore_leftover_at(&param, &leftover));
        assert_eq!(fs::read_to_string(&param).unwrap(), "8");
        assert!(!restore_leftover_at(&param, &leftover));
    }

    #[test]
    fn no_reporting_no_pause() {
        let dir = tempfile::tempdir().unwrap();
        assert!(ReportingPause::start_at(&dir.path().join("absent"), &dir.path().join("saved")).unwrap().is_none());
    }

    #[test]
    fn backing_free_memory_leaves_what_it_is_asked_to_keep() {
        let free = augur_os::sense::procfs::meminfo("MemFree").unwrap();
        let keep = free.saturating_sub(200 << 20);
        let touched = back_free_memory(keep).unwrap();
        assert!(touched <= 200 << 20, "touched {touched} bytes");
        assert_eq!(touched % (64 << 20), 0);
        assert_eq!(back_free_memory(u64::MAX).unwrap(), 0);
    }
}
