//! The page cache as the suite sees it: how much it holds, waiting until it stops growing or
//! the disk stops reading, and cold sequential reads (the proof that a disk throttle bites). Dropping it is
//! [`augur_os::fetch::drop_all_caches`].
//!
//! It never prefetches.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{BenchError, IoContext, Result};
use crate::interrupt;
use augur_os::fetch::drop_all_caches;
use augur_os::sense::procfs;

/// Bytes of file pages in the page cache now (Cached + Buffers of /proc/meminfo).
pub fn cached_bytes() -> Result<u64> {
    Ok(procfs::meminfo("Cached")? + procfs::meminfo("Buffers")?)
}

/// Waits until the page cache stops growing: less than `slack` bytes of growth over `quiet`,
/// at most `limit` in all. Returns the growth seen.
pub fn wait_until_quiet(quiet: Duration, slack: u64, limit: Duration) -> Result<u64> {
    let start = Instant::now();
    let first = cached_bytes()?;
    let mut last = first;
    loop {
        interrupt::sleep(quiet)?;
        let now = cached_bytes()?;
        if now.saturating_sub(last) < slack || start.elapsed() >= limit {
            return Ok(now.saturating_sub(first));
        }
        last = now;
    }
}

/// Sectors the disk `dev` ("MAJ:MIN") has read since boot (`/sys/dev/block/DEV/stat`).
pub fn disk_sectors_read(dev: &str) -> Result<u64> {
    let path = format!("/sys/dev/block/{dev}/stat");
    let text = fs::read_to_string(&path).context(|| format!("reading {path}"))?;
    parse_sectors_read(&text).ok_or_else(|| {
        BenchError::kernel(format!("the read counters of disk {dev}"), format!("{path} has no sectors-read field"))
    })
}

/// The third field of a block device's `stat` file: sectors read.
fn parse_sectors_read(text: &str) -> Option<u64> {
    text.split_whitespace().nth(2)?.parse().ok()
}

/// Waits until the disk `dev` has completed no read for `quiet`, at most `limit`. A prefetch
/// whose reads a block throttle holds back is still loading while its daemon, which submitted
/// them long ago, looks idle and the cache grows by a trickle: only the disk tells.
pub fn wait_until_disk_quiet(dev: &str, quiet: Duration, limit: Duration) -> Result<()> {
    wait_until_unchanged(quiet, limit, || disk_sectors_read(dev))
}

/// Waits until `counter` (sampled every 100 ms) has not changed for `quiet`, at most `limit`.
pub fn wait_until_unchanged(quiet: Duration, limit: Duration, mut counter: impl FnMut() -> Result<u64>) -> Result<()> {
    let deadline = Instant::now() + limit;
    let mut last = counter()?;
    let mut still_since = Instant::now();
    loop {
        interrupt::sleep(Duration::from_millis(100))?;
        let now = counter()?;
        if now != last {
            last = now;
            still_since = Instant::now();
        } else if still_since.elapsed() >= quiet {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Ok(());
        }
    }
}

/// Makes `path` a file of exactly `bytes` non-zero bytes if it is not one already (so a file
/// system cannot store it sparse or compressed).
pub fn ensure_file(path: &Path, bytes: u64) -> Result<()> {
    if fs::metadata(path).map(|m| m.len() == bytes).unwrap_or(false) {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).context(|| format!("creating {}", dir.display()))?;
    }
    let tmp = path.with_extension("partial");
    let mut f = File::create(&tmp).context(|| format!("creating {}", tmp.display()))?;
    let mut block = vec![0u8; 1 << 20];
    let mut state: u64 = bytes ^ 0x9e37_79b9_7f4a_7c15;
    let mut written = 0;
    while written < bytes {
        for chunk in block.chunks_mut(8) {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let n = chunk.len();
            chunk.copy_from_slice(&state.to_le_bytes()[..n]);
        }
        let n = (bytes - written).min(block.len() as u64) as usize;
        f.write_all(&block[..n]).context(|| format!("writing {}", tmp.display()))?;
        written += n as u64;
    }
    f.sync_all().context(|| format!("syncing {}", tmp.display()))?;
    Ok(fs::rename(&tmp, path).context(|| format!("renaming {}", tmp.display()))?)
}

/// Reads `path` start to end with 1 MiB reads; returns the bytes read.
pub fn read_whole(path: &Path) -> Result<u64> {
    let mut f = File::open(path).context(|| format!("opening {}", path.display()))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0;
    loop {
        let n = f.read(&mut buf).context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            return Ok(total);
        }
        total += n as u64;
    }
}

/// Drops the caches and reads `path` cold; returns bytes per second.
pub fn cold_read_throughput(path: &Path) -> Result<f64> {
    drop_all_caches()?;
    let start = Instant::now();
    let bytes = read_whole(path)?;
    Ok(bytes as f64 / start.elapsed().as_secs_f64().max(1e-9))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sectors_read_is_the_third_stat_field() {
        let stat = "  155347    24310 12697318    62890   105716   107016  4468920   300457        0   129632   425563";
        assert_eq!(parse_sectors_read(stat), Some(12_697_318));
        assert_eq!(parse_sectors_read("1 2"), None);
        assert_eq!(parse_sectors_read("1 2 x"), None);
    }

    #[test]
    fn the_root_disk_reports_its_reads_and_an_unknown_disk_is_an_error() {
        let root = crate::throttle::root_disk().unwrap();
        assert!(disk_sectors_read(&root).unwrap() > 0);
        assert!(disk_sectors_read("4095:4095").is_err());
    }
}
