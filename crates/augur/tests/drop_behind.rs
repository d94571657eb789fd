//! Scan-then-launch (issue 21, DEAR's treatment of sequential access): an application's pages,
//! charged to a memory cgroup, survive a `cat` of twice the memory that cgroup allows when the
//! daemon drops the stream behind the reader (`[pattern] drop_behind`), and do not without it
//! (so the test can fail). Needs root (memory cgroup v1, eBPF, drop_caches).
//!
//! What is measured: the share of the application's data pages (its cold pages: 32 MiB read at
//! its start) still resident after the scan, read with `mincore`; a launch then reads the rest,
//! and only the rest, from disk. The daemon neither replays nor predicts here, so nothing but the
//! drop-behind keeps them.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::{Cgroup, TestDaemon, drop_caches, make_app, resident_pages};

const MIB: u64 = 1 << 20;
/// What the cgroup of the application and the scan may hold.
const GROUP_MIB: u64 = 256;

/// Runs the application, then the scan, in one memory cgroup; returns the data pages resident
/// before the scan, after it, and the bytes the daemon dropped behind.
fn scan_then_launch(drop_behind: bool) -> (u64, u64, u64) {
    let d = TestDaemon::start(&format!(
        "[launch]\nquiet_ms = 1500\nreplay_on_exec = false\n[predict]\nenabled = false\n\
         [pattern]\nprefetch_ahead = false\ndrop_behind = {drop_behind}\n"
    ));
    let until = Instant::now() + Duration::from_secs(20);
    while drop_behind && d.status().ahead.is_none_or(|a| a.note != "on") {
        assert!(Instant::now() < until, "the pattern watch never loaded: {:?}\n{}", d.status().ahead, d.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    let root = tempfile::tempdir_in("/var/tmp").unwrap();
    let script = make_app(&root.path().join("app"));
    let data = root.path().join("app").join("data");
    let big = root.path().join("big");
    {
        let mut f = std::fs::File::create(&big).unwrap();
        let chunk = vec![0x5au8; MIB as usize];
        for _ in 0..2 * GROUP_MIB {
            f.write_all(&chunk).unwrap();
        }
        f.sync_all().unwrap();
    }
    let group = Cgroup::create("memory", if drop_behind { "behind-on" } else { "behind-off" }, true);
    group.set("memory.limit_in_bytes", &(GROUP_MIB * MIB).to_string());
    drop_caches();
    // The application starts in the group: its pages are charged to it.
    assert!(group.spawn_sh(&format!("sh {}", script.display())).wait().unwrap().success());
    let before = resident_pages(&data);
    // The scan, twice what the group may hold, at this disk's full speed (about 1.7 GB/s here).
    assert!(group.spawn_sh(&format!("exec cat {} > /dev/null", big.display())).wait().unwrap().success());
    std::thread::sleep(Duration::from_millis(500));
    let after = resident_pages(&data);
    let peak = std::fs::read_to_string(group.dir.join("memory.max_usage_in_bytes")).unwrap_or_default();
    println!("drop_behind = {drop_behind}: the group's peak usage {} MiB", peak.trim().parse::<u64>().unwrap_or(0) / MIB);
    let status = d.status().ahead;
    println!("drop_behind = {drop_behind}: {status:?}");
    (before, after, status.map_or(0, |a| a.bytes_dropped_behind))
}

#[test]
fn a_learned_applications_pages_survive_a_scan_of_twice_the_memory() {
    let (before, after, dropped) = scan_then_launch(true);
    println!("drop_behind on: {before} data pages resident before the scan, {after} after; {} MiB dropped", dropped / MIB);
    assert!(before >= 8192 * 95 / 100, "the application's data was not loaded: {before} pages");
    // A launch now reads at most 10 % of its cold pages from disk.
    assert!(after * 10 >= before * 9, "only {after} of {before} pages survived the scan");
    assert!(dropped >= GROUP_MIB * MIB, "only {dropped} bytes dropped behind");

    let (before, after, dropped) = scan_then_launch(false);
    println!("drop_behind off: {before} data pages resident before the scan, {after} after; {dropped} bytes dropped");
    assert!(after * 10 < before * 9, "the scan evicted nothing even without drop-behind: the test measures nothing");
}
