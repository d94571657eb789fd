//! As root (as CI runs it): the daemon is loading a large learned working set (256 MiB, the
//! loading thread's disk reads throttled to 16 MiB/s by a blkio cgroup, so it is still running),
//! then a real memory hog in a memory cgroup (cgroup v1, a 48 MiB limit, four readers re-reading
//! a 96 MiB file so it thrashes) raises memory pressure. The test watches the rise with its own
//! PSI trigger (the same threshold as the daemon's) and asserts that the daemon's loading stopped
//! within one second of it (one read chunk and the reads queued ahead of it at that rate), from
//! the monotonic time the daemon logs when it stops. Two loaders: the prediction fetch, and the
//! exec-time replay of a launch (with prediction off: the trigger is armed whenever anything
//! fetches). No timing beyond that functional deadline.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::{Cgroup, TestDaemon, drop_caches, resident_pages, thread_named};

const MIB: u64 = 1 << 20;
/// PSI trigger of the daemon and of this test: 150 ms of memory stall within 2 s (a window in
/// whole 2 s, which processes without CAP_SYS_RESOURCE are limited to, so both get the same).
const STALL_US: u64 = 150_000;
const WINDOW_US: u64 = 2_000_000;

fn monotonic_ns() -> u64 {
    augur_os::loop_io::monotonic_ns()
}

fn write_file(path: &Path, bytes: u64) {
    let mut f = std::fs::File::create(path).unwrap();
    let mut buf = vec![0u8; MIB as usize];
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i % 251) as u8 | 1;
    }
    for _ in 0..bytes / MIB {
        f.write_all(&buf).unwrap();
    }
    f.sync_all().unwrap();
}

/// The monotonic times the daemon logged for loads stopped by memory pressure: `what` is
/// "prediction fetch" or "exec-time replay".
fn pressure_stops(log: &str, what: &str) -> Vec<u64> {
    let marker = format!("{what} stopped by memory pressure at monotonic ");
    log.lines()
        .filter_map(|l| l.split(marker.as_str()).nth(1))
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .collect()
}

/// A big application: 256 MiB of data read at its start (after `delay`, a shell word such as
/// `0.3`, or `$DELAY` to read it from the environment), and a 96 MiB file for the hog.
struct BigApp {
    root: tempfile::TempDir,
    script: std::path::PathBuf,
}

impl BigApp {
    fn create() -> BigApp {
        let root = tempfile::tempdir_in("/var/tmp").unwrap();
        let data = root.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        for i in 0..64 {
            write_file(&data.join(format!("part{i:02}")), 4 * MIB);
        }
        let script = root.path().join("big-app.sh");
        std::fs::write(&script, format!("#!/bin/sh\nsleep ${{DELAY:-0.3}}\ncat {}/part* > /dev/null\n", data.display())).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        write_file(&root.path().join("hog-data"), 96 * MIB);
        BigApp { root, script }
    }

    fn data(&self) -> std::path::PathBuf {
        self.root.path().join("data")
    }

    fn key(&self) -> String {
        self.script.to_string_lossy().into_owned()
    }

    /// Waits until the daemon's loading has started (a 32nd of the data resident) and checks
    /// that it was slowed.
    fn wait_loading(&self, d: &TestDaemon) {
        let until = Instant::now() + Duration::from_secs(30);
        let wanted = 256 * MIB / augur_os::fetch::page_size();
        let mut resident = resident_pages(&self.data());
        while resident < wanted / 32 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
            resident = resident_pages(&self.data());
        }
        assert!(resident >= wanted / 32, "the daemon's loading never started ({resident} pages resident): {}", d.log());
        assert!(resident < wanted / 2, "the loading was not slowed ({resident} of {wanted} pages resident already)");
    }

    /// Starts the hog and waits for the memory pressure to rise past the daemon's threshold, as
    /// seen by a trigger of our own: (hog started, the rise, the hog and its cgroup).
    fn raise_pressure(&self) -> (u64, u64, (std::process::Child, Cgroup)) {
        let psi = std::fs::OpenOptions::new().read(true).write(true).open("/proc/pressure/memory").unwrap();
        (&psi).write_all(format!("some {STALL_US} {WINDOW_US}\0").as_bytes()).unwrap();
        let hog_cgroup = Cgroup::create("memory", "pressure-hog", true);
        hog_cgroup.set("memory.limit_in_bytes", &(48 * MIB).to_string());
        let hog_started = monotonic_ns();
        let hog_file = self.root.path().join("hog-data");
        let hog = hog_cgroup
            .spawn_sh(&format!("for i in 1 2 3 4; do (while :; do cat {} > /dev/null; done) & done; wait", hog_file.display()));
        let mut pfd = libc::pollfd { fd: psi.as_raw_fd(), events: libc::POLLPRI, revents: 0 };
        // SAFETY (test): one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, 30_000) };
        let rise = monotonic_ns();
        let pressure = std::fs::read_to_string("/proc/pressure/memory").unwrap();
        assert!(
            n == 1 && pfd.revents & libc::POLLPRI != 0,
            "the hog raised no memory stall of {STALL_US} µs per {WINDOW_US} µs in 30 s: {pressure}"
        );
        println!("pressure at the rise: {}", pressure.trim().replace('\n', "; "));
        (hog_started, rise, (hog, hog_cgroup))
    }
}

/// Waits for the daemon to log that `what` stopped for memory pressure after `since`.
fn wait_stop(d: &TestDaemon, what: &str, since: u64) -> u64 {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(&t) = pressure_stops(&d.log(), what).iter().find(|&&t| t >= since) {
            return t;
        }
        assert!(Instant::now() < until, "the daemon's {what} did not stop within 5 s of the rise: {}", d.log());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Slows the daemon's thread `name` to 16 MiB/s so its load of 256 MiB takes about 16 s. Not
/// slower: a stop waits for the reads it keeps queued (8 MiB at most), half a second at this rate.
fn throttle_thread(d: &TestDaemon, name: &str) -> Cgroup {
    let throttle = Cgroup::create("blkio", "pressure-fetch", false);
    let disk = augur_bench::throttle::root_disk().unwrap();
    throttle.set("blkio.throttle.read_bps_device", &format!("{disk} {}", 16 * MIB));
    // Only that thread: the event loop's own reads (state, /proc) stay unthrottled.
    throttle.set("tasks", &thread_named(d.pid(), name).to_string());
    throttle
}

/// Waits (up to a minute) until memory pressure is low (`some avg10` under 1 %): a hog of an
/// earlier test keeps it high for a while, and the daemon would not fetch.
fn wait_calm() {
    let until = Instant::now() + Duration::from_secs(60);
    let avg10 = || -> f64 {
        let text = std::fs::read_to_string("/proc/pressure/memory").unwrap_or_default();
        text.split_whitespace().find_map(|w| w.strip_prefix("avg10=")).and_then(|v| v.parse().ok()).unwrap_or(0.0)
    };
    while avg10() >= 1.0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn fetching_stops_within_one_second_of_memory_pressure_rising() {
    wait_calm();
    let d = TestDaemon::start(&format!(
        "[launch]\nquiet_ms = 1500\nreplay_on_exec = false\nmax_launch_mib = 4096\n[predict]\nenabled = true\npredictor = \"naive\"\n\
         budget_bytes = 1073741824\npressure_trigger_us = {STALL_US}\npressure_window_us = {WINDOW_US}\n"
    ));
    assert!(d.log().contains("memory pressure trigger armed"), "the daemon watches no PSI trigger: {}", d.log());
    let app = BigApp::create();
    assert!(Command::new("sh").arg(&app.script).status().unwrap().success());
    d.wait_launches(&app.key(), 1);

    let throttle = throttle_thread(&d, "augur-predict");
    // Any launch makes a planning round: the learned application is fetched.
    drop_caches();
    assert!(Command::new("sleep").arg("1").status().unwrap().success());
    app.wait_loading(&d);

    let (hog_started, rise, (mut hog, hog_cgroup)) = app.raise_pressure();
    let stop = wait_stop(&d, "prediction fetch", hog_started);
    let _ = hog.kill();
    let _ = hog.wait();
    drop(hog_cgroup);
    drop(throttle);
    for line in d.log().lines().filter(|l| l.contains("pressure") || l.contains("prediction fetch")) {
        println!("daemon: {line}");
    }
    println!("hog started at {hog_started} ns, pressure rose at {rise} ns, fetch stopped at {stop} ns");
    println!("fetch stopped {:.3} s after the rise", (stop as f64 - rise as f64) / 1e9);
    assert!(stop <= rise + 1_000_000_000, "fetching stopped {} ms after the rise", (stop - rise) / 1_000_000);
    assert!(d.status().events.pressure_events >= 1, "no pressure event counted");
}

#[test]
fn exec_time_replay_stops_within_one_chunk_of_memory_pressure_rising_with_prediction_off() {
    wait_calm();
    let d = TestDaemon::start(&format!(
        "[launch]\nquiet_ms = 1500\nmax_launch_mib = 4096\n[predict]\nenabled = false\n\
         pressure_trigger_us = {STALL_US}\npressure_window_us = {WINDOW_US}\n"
    ));
    assert!(d.log().contains("memory pressure trigger armed"), "replay alone arms no PSI trigger: {}", d.log());
    let app = BigApp::create();
    assert!(Command::new("sh").arg(&app.script).status().unwrap().success());
    d.wait_launches(&app.key(), 1);

    let throttle = throttle_thread(&d, "augur-replay");
    drop_caches();
    // The next launch waits before reading: only the daemon's exec-time replay loads its pages.
    let mut launch = Command::new("sh").arg(&app.script).env("DELAY", "60").spawn().unwrap();
    app.wait_loading(&d);

    let (hog_started, rise, (mut hog, hog_cgroup)) = app.raise_pressure();
    let resident_at_rise = resident_pages(&app.data());
    let stop = wait_stop(&d, "exec-time replay", hog_started);
    // Whatever was queued at the stop lands; then nothing more.
    std::thread::sleep(Duration::from_secs(1));
    let resident_after = resident_pages(&app.data());
    std::thread::sleep(Duration::from_secs(2));
    let resident_later = resident_pages(&app.data());
    let _ = hog.kill();
    let _ = hog.wait();
    let _ = launch.kill();
    let _ = launch.wait();
    drop(hog_cgroup);
    drop(throttle);
    for line in d.log().lines().filter(|l| l.contains("pressure") || l.contains("replay")) {
        println!("daemon: {line}");
    }
    let page = augur_os::fetch::page_size();
    println!("hog started at {hog_started} ns, pressure rose at {rise} ns, replay stopped at {stop} ns");
    println!(
        "replay stopped {:.3} s after the rise; resident pages: {resident_at_rise} at the rise, {resident_after} 1 s after the stop, {resident_later} 3 s after",
        (stop as f64 - rise as f64) / 1e9
    );
    assert!(stop <= rise + 1_000_000_000, "the replay stopped {} ms after the rise", (stop - rise) / 1_000_000);
    // One 2 MiB chunk and the 4 MiB the replay reads ahead of it, at most, after the rise (the
    // hog may evict some of the data meanwhile: it only lowers the count).
    assert!(
        resident_later.saturating_sub(resident_at_rise) * page <= 6 * MIB + MIB,
        "the replay went on loading after the rise: {resident_at_rise} -> {resident_later} pages"
    );
    assert!(d.status().events.pressure_events >= 1, "no pressure event counted");
}
