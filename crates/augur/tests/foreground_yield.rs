//! As root (as CI runs it): the daemon's prediction fetch waits while another process reads
//! from the disk, and fetches once the disk is quiet. An application (32 MiB of data) is learned
//! (a launch learns at most 40 MiB here, so the reader's own launch stays small); the caches are
//! dropped; a foreground `cat` of a 1 GiB file runs while a launch makes the daemon plan a fetch
//! of the application. `cat` is held to 64 MiB/s and the daemon's fetch thread to 4 MiB/s by blkio
//! cgroups (this VM's disk serves a just-written file from the host's cache at GB/s, so neither
//! would last otherwise). While `cat` reads, the application's pages stay mostly out (what the
//! fetch queued before it noticed: at most its window, a chunk and the busy margin); after it ends they are fetched,
//! and the daemon logs how long it waited. No timing assertion.

use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::{Cgroup, TestDaemon, drop_caches, make_app, resident_pages, run_app, thread_named};

const MIB: u64 = 1 << 20;

/// The milliseconds of the daemon's logged fetches that waited for others' reads.
fn waits(log: &str) -> Vec<f64> {
    log.lines().filter_map(|l| l.split("; waited ").nth(1)).filter_map(|rest| rest.split(" ms").next()?.parse().ok()).collect()
}

#[test]
fn the_prediction_fetch_waits_while_another_process_reads_the_disk() {
    let d = TestDaemon::start(
        "[launch]\nquiet_ms = 1500\nreplay_on_exec = false\nmax_launch_mib = 40\n[predict]\nenabled = true\npredictor = \"naive\"\nbudget_bytes = 1073741824\n",
    );
    let root = tempfile::tempdir_in("/var/tmp").unwrap();
    let app = make_app(&root.path().join("app"));
    let data = root.path().join("app").join("data");
    run_app(&app);
    d.wait_launches(&app.to_string_lossy(), 1);

    // The foreground work: 1 GiB read cold, several seconds on this disk.
    let big = root.path().join("foreground");
    {
        let mut f = std::fs::File::create(&big).unwrap();
        let block = vec![0x5au8; MIB as usize];
        for _ in 0..1024 {
            f.write_all(&block).unwrap();
        }
        f.sync_all().unwrap();
    }
    let disk = augur_bench::throttle::root_disk().unwrap();
    let fetch_throttle = Cgroup::create("blkio", "yield-fetch", false);
    fetch_throttle.set("blkio.throttle.read_bps_device", &format!("{disk} {}", 4 * MIB));
    fetch_throttle.set("tasks", &thread_named(d.pid(), "augur-predict").to_string());
    let reader_throttle = Cgroup::create("blkio", "yield-reader", true);
    reader_throttle.set("blkio.throttle.read_bps_device", &format!("{disk} {}", 64 * MIB));
    drop_caches();
    let wanted = 32 * MIB / augur_os::fetch::page_size();
    assert!(resident_pages(&data) < wanted / 10);
    let mut reader = reader_throttle.spawn_sh(&format!("exec cat {} > /dev/null", big.display()));
    // Any launch makes a planning round once its start has settled: the application is fetched.
    assert!(Command::new("true").status().unwrap().success());
    let status = reader.wait().unwrap();
    assert!(status.success());
    let during = resident_pages(&data);
    // What the fetch may have queued or loaded before it saw the disk busy: its window of
    // advised chunks, the chunk it was completing, and what others may read unnoticed in a span.
    let slack = (augur::daemon::prediction::FETCH_WINDOW_BYTES
        + augur_os::fetch::schedule::MAX_CHUNK_BYTES
        + augur_os::fetch::foreground::BUSY_BYTES)
        / augur_os::fetch::page_size();
    assert!(
        during <= slack,
        "{during} of {wanted} pages fetched while the foreground read (at most {slack} expected): {}",
        d.log()
    );

    // Afterwards the fetch goes on and says it waited.
    let until = Instant::now() + Duration::from_secs(60);
    while resident_pages(&data) < wanted * 9 / 10 || !waits(&d.log()).iter().any(|&ms| ms >= 100.0) {
        assert!(
            Instant::now() < until,
            "after the foreground read, the application was not fetched ({} of {wanted} pages) or no fetch logged a wait of 100 ms or more: {}",
            resident_pages(&data),
            d.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let waited = waits(&d.log());
    println!("fetches waited {waited:?} ms; {during} pages were resident when the reader ended");
}
