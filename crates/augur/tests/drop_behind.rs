//! Scan-then-launch (issue 21, DEAR's treatment of sequential access): an application the daemon
//! has learned, its pages charged to a memory cgroup, is launched again after a `cat` of twice
//! the memory that cgroup allows; with the daemon dropping the stream behind the reader
//! (`[pattern] drop_behind`) that launch reads at most 10 % of its cold pages from disk, and
//! without it much more (so the test can fail). Needs root (memory cgroup v1, eBPF, drop_caches).
//!
//! What is measured: the share of the application's data pages (its cold pages: 32 MiB read at
//! its start) still resident after the scan, read with `mincore`, and the bytes the launch after
//! the scan reads from disk (`read_bytes` of its shell's `/proc/PID/io`, which takes in its
//! children's when it reaps them). The daemon neither replays nor predicts here, so nothing but
//! the drop-behind keeps them.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::{Cgroup, TestDaemon, drop_caches, make_app, resident_pages};

const MIB: u64 = 1 << 20;
/// What the cgroup of the application and the scan may hold.
const GROUP_MIB: u64 = 256;

/// What one scan-then-launch measured.
struct Scan {
    /// Data pages resident before the scan and after it.
    before: u64,
    after: u64,
    /// Bytes the daemon dropped behind.
    dropped: u64,
    /// Bytes the launch after the scan read from disk.
    launch_read: u64,
}

/// Learns the application (two launches the daemon follows), runs it, then the scan, then the
/// application again, all in one memory cgroup.
fn scan_then_launch(drop_behind: bool) -> Scan {
    let d = TestDaemon::start(&format!(
        "[launch]\nquiet_ms = 1500\nreplay_on_exec = false\nfollow_first_launches = 100\n[predict]\nenabled = false\n\
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
    // The application is learned: two cold launches the daemon follows.
    let key = script.to_string_lossy().into_owned();
    for n in 1..=2 {
        drop_caches();
        assert!(group.spawn_sh(&format!("sh {}", script.display())).wait().unwrap().success());
        d.wait_launches(&key, n);
    }
    // Its last launch ran in the group: its pages are charged to it.
    let before = resident_pages(&data);
    // The scan, twice what the group may hold, at this disk's full speed (about 1.7 GB/s here).
    assert!(group.spawn_sh(&format!("exec cat {} > /dev/null", big.display())).wait().unwrap().success());
    std::thread::sleep(Duration::from_millis(500));
    let after = resident_pages(&data);
    let peak = std::fs::read_to_string(group.dir.join("memory.max_usage_in_bytes")).unwrap_or_default();
    println!("drop_behind = {drop_behind}: the group's peak usage {} MiB", peak.trim().parse::<u64>().unwrap_or(0) / MIB);
    let status = d.status().ahead;
    println!("drop_behind = {drop_behind}: {status:?}");
    // The learned application's launch after the scan.
    let io = root.path().join("launch-io");
    assert!(
        group
            .spawn_sh(&format!("sh {}; grep read_bytes /proc/$$/io > {}", script.display(), io.display()))
            .wait()
            .unwrap()
            .success()
    );
    let text = std::fs::read_to_string(&io).unwrap();
    let launch_read =
        text.trim().strip_prefix("read_bytes:").and_then(|v| v.trim().parse().ok()).unwrap_or_else(|| panic!("{text:?}"));
    Scan { before, after, dropped: status.map_or(0, |a| a.bytes_dropped_behind), launch_read }
}

#[test]
fn a_learned_application_launched_after_a_scan_of_twice_the_memory_reads_at_most_10_percent_from_disk() {
    let cold = 32 * MIB;
    let Scan { before, after, dropped, launch_read } = scan_then_launch(true);
    println!(
        "drop_behind on: {before} data pages resident before the scan, {after} after; {} MiB dropped; \
         the launch after the scan read {} KiB from disk",
        dropped / MIB,
        launch_read / 1024
    );
    assert!(before >= 8192 * 95 / 100, "the application's data was not loaded: {before} pages");
    assert!(after * 10 >= before * 9, "only {after} of {before} pages survived the scan");
    assert!(dropped >= GROUP_MIB * MIB, "only {dropped} bytes dropped behind");
    // The launch after the scan reads at most 10 % of its cold pages from disk.
    assert!(launch_read * 10 <= cold, "the launch after the scan read {launch_read} bytes from disk");

    let Scan { before, after, dropped, launch_read } = scan_then_launch(false);
    println!(
        "drop_behind off: {before} data pages resident before the scan, {after} after; {dropped} bytes dropped; \
         the launch after the scan read {} KiB from disk",
        launch_read / 1024
    );
    assert!(after * 10 < before * 9, "the scan evicted nothing even without drop-behind: the test measures nothing");
    assert!(launch_read * 10 > cold, "without drop-behind the launch read only {launch_read} bytes: the test measures nothing");
}
