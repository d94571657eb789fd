//! A fetch for later gives way to a reader that a disk limited in requests per second holds back
//! (`augur_os::fetch::foreground`), under the slow-disk profile's own throttle
//! (`augur_bench::throttle`): a reader of small files at 20 requests a second reads 80 KiB/s, too
//! little for the disks' byte counters to tell it from a quiet disk, but waits on the disk all
//! the time. As root, as CI runs it (cgroups, cache eviction).

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use augur_bench::throttle::{DiskThrottle, ThrottledCgroup, disk_of};
use augur_os::fetch::foreground::{BUSY_BYTES, ForegroundReads, POLL};
use augur_os::fetch::prefetcher::CancelFlag;

/// `read_bytes` of a process, from `/proc/PID/io`.
fn read_bytes(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap();
    augur_os::fetch::foreground::parse_io_read_bytes(&text).unwrap()
}

#[test]
fn a_fetch_waits_while_a_throttled_reader_of_small_files_waits_on_the_disk() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let files: Vec<PathBuf> = (0..400)
        .map(|i| {
            let path = dir.path().join(format!("f{i:03}"));
            std::fs::write(&path, vec![(i % 251) as u8; 4096]).unwrap();
            path
        })
        .collect();
    for f in &files {
        let file = std::fs::File::open(f).unwrap();
        augur_os::fetch::evict_file(file.as_fd()).unwrap();
    }
    let device = disk_of(dir.path()).unwrap();
    // This process moves into the cgroup (it reads no file from disk from here on), and the
    // reader it starts is born there.
    let cgroup = ThrottledCgroup::enter_on(DiskThrottle { read_iops: 20, read_bps: 40_000_000 }, device).unwrap();
    let mut reads = ForegroundReads::start().expect("a disk with a driver and stat");
    let mut reader = Command::new("cat").args(&files).stdout(Stdio::null()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let start_bytes = read_bytes(reader.id());
    let started = Instant::now();
    let cancel = CancelFlag::new();
    let canceller = {
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(2));
            cancel.cancel();
        })
    };
    // A fetch looks before each chunk: a few looks to judge the span, then it waits until
    // cancelled, as the reader goes on for 20 s.
    let mut waited = Duration::ZERO;
    while !cancel.is_cancelled() && waited < POLL {
        waited += reads.wait_turn(&cancel, 0);
        std::thread::sleep(Duration::from_millis(20));
    }
    canceller.join().unwrap();
    let rate = (read_bytes(reader.id()) - start_bytes) as f64 / started.elapsed().as_secs_f64();
    let _ = reader.kill();
    let _ = reader.wait();
    drop(cgroup);
    assert!(rate < BUSY_BYTES as f64, "the reader read {rate:.0} B/s: the bytes alone would tell");
    assert!(waited >= POLL, "the fetch did not wait for a reader held back by the disk ({waited:?})");
}
