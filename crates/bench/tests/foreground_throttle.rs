//! A fetch for later gives way to a reader that a disk limited in requests per second holds back
//! (`augur_os::fetch::foreground`), under the slow-disk profile's own throttle
//! (`augur_bench::throttle`): a reader of small files at 20 requests a second reads 80 KiB/s, too
//! little for the disks' byte counters to tell it from a quiet disk, but waits on the disk all
//! the time. As root, as CI runs it (cgroups, cache eviction).

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use augur_bench::throttle::{DiskThrottle, ThrottledCgroup, disk_of};
use augur_core::model::profile::UsedRange;
use augur_core::model::range::PageRange;
use augur_os::fetch::foreground::{BUSY_BYTES, ForegroundReads, POLL, parse_io_read_bytes};
use augur_os::fetch::open::current_identity;
use augur_os::fetch::{CancelFlag, FetchOptions, FetchPlan, Prefetcher};

/// `read_bytes` of a process, from `/proc/PID/io`.
fn read_bytes(pid: u32) -> u64 {
    parse_io_read_bytes(&std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap()).unwrap()
}

/// `n` files of 4 KiB under `dir`, out of the page cache.
fn cold_files(dir: &std::path::Path, n: usize, tag: &str) -> Vec<PathBuf> {
    let files: Vec<PathBuf> = (0..n)
        .map(|i| {
            let path = dir.join(format!("{tag}{i:03}"));
            std::fs::write(&path, vec![(i % 251) as u8; 4096]).unwrap();
            path
        })
        .collect();
    for f in &files {
        augur_os::fetch::evict_file(std::fs::File::open(f).unwrap().as_fd()).unwrap();
    }
    files
}

/// A reader of `files` at 20 read requests a second (this process moves into the throttled
/// cgroup first: it reads no file from disk afterwards, and the reader is born there).
struct HeldBackReader {
    child: Child,
    cgroup: Option<ThrottledCgroup>,
    start_bytes: u64,
    started: Instant,
}

impl HeldBackReader {
    fn start(dir: &std::path::Path, files: &[PathBuf]) -> HeldBackReader {
        let device = disk_of(dir).unwrap();
        let cgroup = ThrottledCgroup::enter_on(DiskThrottle { read_iops: 20, read_bps: 40_000_000 }, device).unwrap();
        let child = Command::new("cat").args(files).stdout(Stdio::null()).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let start_bytes = read_bytes(child.id());
        HeldBackReader { child, cgroup: Some(cgroup), start_bytes, started: Instant::now() }
    }

    /// Stops it; the bytes per second it read.
    fn stop(mut self) -> f64 {
        let rate = (read_bytes(self.child.id()) - self.start_bytes) as f64 / self.started.elapsed().as_secs_f64();
        let _ = self.child.kill();
        let _ = self.child.wait();
        drop(self.cgroup.take());
        rate
    }
}

/// A flag raised `after` from now.
fn cancel_after(after: Duration) -> (CancelFlag, std::thread::JoinHandle<()>) {
    let cancel = CancelFlag::new();
    let raised = cancel.clone();
    (
        cancel,
        std::thread::spawn(move || {
            std::thread::sleep(after);
            raised.cancel();
        }),
    )
}

/// The tests move this process between cgroups: one at a time, whatever the test threads.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// What each test needs: root, its turn, and 400 cold files for the held-back reader under a
/// directory of its own; `None` (skipped) without root.
fn held_back_setup() -> Option<(std::sync::MutexGuard<'static, ()>, tempfile::TempDir, Vec<PathBuf>)> {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: needs root");
        return None;
    }
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let files = cold_files(dir.path(), 400, "r");
    Some((serial, dir, files))
}

#[test]
fn a_fetch_waits_while_a_throttled_reader_of_small_files_waits_on_the_disk() {
    let Some((_serial, dir, files)) = held_back_setup() else { return };
    let mut reads = ForegroundReads::start().expect("a disk with a driver and stat");
    let reader = HeldBackReader::start(dir.path(), &files);
    let (cancel, canceller) = cancel_after(Duration::from_secs(2));
    // A fetch looks before each chunk: a few looks to judge, then it waits until cancelled, as
    // the reader goes on for 20 s.
    let mut waited = Duration::ZERO;
    while !cancel.is_cancelled() && waited < POLL {
        waited += reads.wait_turn(&cancel, 0);
        std::thread::sleep(Duration::from_millis(20));
    }
    canceller.join().unwrap();
    let rate = reader.stop();
    assert!(rate < BUSY_BYTES as f64, "the reader read {rate:.0} B/s: the bytes alone would tell");
    assert!(waited >= POLL, "the fetch did not wait for a reader held back by the disk ({waited:?})");
}

#[test]
fn a_fetch_for_later_opens_no_file_while_a_throttled_reader_waits_on_the_disk() {
    // Opening a plan's files after the page cache was dropped reads their inodes and
    // directories, a request each: the survey waits as the loads do.
    let Some((_serial, dir, files)) = held_back_setup() else { return };
    let planned = cold_files(dir.path(), 64, "p");
    let mut plan = FetchPlan::new(4096);
    for p in &planned {
        let used = [UsedRange { range: PageRange::new(0, 1), first_use_us: 0 }];
        plan.add_file(p.clone(), current_identity(p).unwrap(), &used, 4096);
    }
    let reader = HeldBackReader::start(dir.path(), &files);
    let prefetcher = Prefetcher::new(FetchOptions { yield_to_foreground: true, ..Default::default() });
    // A first fetch finds the reader and waits; a newer plan replaces it while it waits.
    let (cancel, canceller) = cancel_after(Duration::from_millis(1500));
    let first = prefetcher.fetch(&plan, &cancel);
    canceller.join().unwrap();
    // The fetch that replaces it, on the same thread, knows the disks busy: it opens nothing.
    let (cancel, canceller) = cancel_after(Duration::from_millis(1500));
    let second = prefetcher.fetch(&plan, &cancel);
    canceller.join().unwrap();
    reader.stop();
    assert!(first.foreground_wait_ms >= POLL.as_secs_f64() * 1000.0, "{first:?}");
    assert!(second.foreground_wait_ms >= POLL.as_secs_f64() * 1000.0, "{second:?}");
    assert_eq!(second.files.fetched, 0, "files opened beside the reader: {second:?}");
}
