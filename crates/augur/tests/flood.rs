//! Floods the daemon must stay small and answering under (issue 20's bounds and fair loop):
//! 20,000 execs each carrying 100 KB of arguments, half of them helpers of one shell loop's
//! launch and half launches of their own, keep it under 200 MiB resident with `augur status`
//! answering within a second throughout, and what its bounded lists dropped shows in the status;
//! a launch faulting a 4 GiB (sparse) file page by page, followed all the way, leaves its control
//! replies under 200 ms.
//!
//! Needs root. Run one at a time under the shared lock:
//! `flock /tmp/augur-itest.lock cargo test -p augur --test flood -- --test-threads=1`.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use augur::daemon::control::{self, Request, Response, StatusReport};
use common::TestDaemon;

/// Asks for the status; returns it and how long the answer took.
fn timed_status(socket: &Path) -> (StatusReport, Duration) {
    let t = Instant::now();
    match control::request(socket, &Request::Status) {
        Ok(Response::Status(s)) => (*s, t.elapsed()),
        other => panic!("status failed: {other:?}"),
    }
}

/// Asks for the status every `every` until `done`; returns the slowest answer, the largest
/// resident size seen and how many answers there were.
fn watch_status(socket: &Path, done: &AtomicBool, every: Duration) -> (Duration, u64, u64) {
    let (mut slowest, mut rss, mut asked) = (Duration::ZERO, 0, 0);
    let start = Instant::now();
    while !done.load(Ordering::Relaxed) {
        let (s, took) = timed_status(socket);
        if took > Duration::from_millis(100) {
            eprintln!("a status answer took {took:?}, {:?} after the test started asking", start.elapsed() - took);
        }
        slowest = slowest.max(took);
        rss = rss.max(s.rss_bytes);
        asked += 1;
        std::thread::sleep(every);
    }
    (slowest, rss, asked)
}

/// 1,000 words of 100 bytes each: 100 KB of arguments.
fn big_args() -> Vec<String> {
    (0..1_000).map(|i| format!("{i:05}{}", "a".repeat(95))).collect()
}

#[test]
fn twenty_thousand_execs_with_100_kb_of_arguments_keep_the_daemon_small_and_answering() {
    let started = Instant::now();
    let d = TestDaemon::start("[launch]\nquiet_ms = 500\n");
    let socket = d.socket();
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (socket, done) = (socket.clone(), done.clone());
        std::thread::spawn(move || watch_status(&socket, &done, Duration::from_millis(100)))
    };
    let args = big_args();
    // 10,000 execs of one launch: a shell loop's children.
    let mut shell = Command::new("/bin/sh")
        .arg("-c")
        .arg(r#"i=0; while [ $i -lt 10000 ]; do /bin/true "$@"; i=$((i+1)); done"#)
        .arg("sh")
        .args(&args)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // 10,000 launches of their own (outside every launch), from two threads at once.
    let spawners: Vec<_> = (0..2)
        .map(|_| {
            let args = args.clone();
            std::thread::spawn(move || {
                for _ in 0..5_000 {
                    let status = Command::new("/bin/true").args(&args).status().unwrap();
                    assert!(status.success());
                }
            })
        })
        .collect();
    for s in spawners {
        s.join().unwrap();
    }
    assert!(shell.wait().unwrap().success());
    // The windows close after the execs.
    std::thread::sleep(Duration::from_secs(2));
    done.store(true, Ordering::Relaxed);
    let (slowest, rss, asked) = watcher.join().unwrap();
    let (status, _) = timed_status(&socket);
    eprintln!(
        "20,000 execs in {:?}: {asked} status answers, the slowest {slowest:?}; largest resident {} MiB; {} process events; drops: {:?}",
        started.elapsed(),
        rss >> 20,
        status.events.process_events,
        status.drops
    );
    assert!(rss < 200 << 20, "resident {} MiB: {}", rss >> 20, d.log().lines().rev().take(50).collect::<Vec<_>>().join("\n"));
    assert!(slowest < Duration::from_secs(1), "status took {slowest:?}");
    assert!(status.events.argv_cut >= 1_000, "command lines cut: {:?}", status.events);
    assert!(status.drops.iter().any(|(why, n)| why.starts_with("command lines cut") && *n > 0), "{:?}", status.drops);
}

/// Maps `file` and reads one byte of each page in turn, with readahead off (`MADV_RANDOM`): one
/// page read (inserted into the page cache) per fault.
const FAULT_EVERY_PAGE: &str = r#"
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
size = os.fstat(fd).st_size
m = mmap.mmap(fd, size, prot=mmap.PROT_READ)
m.madvise(mmap.MADV_RANDOM)
total = 0
for off in range(0, size, 4096):
    total += m[off]
print(total)
"#;

/// Pages of `file` in the page cache (`fincore`-like, through `mincore` in Python).
fn cached_mib(file: &Path) -> u64 {
    let script = r#"
import ctypes, mmap, os, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open(sys.argv[1], os.O_RDONLY)
size = os.fstat(fd).st_size
libc.mmap.restype = ctypes.c_void_p
addr = libc.mmap(None, ctypes.c_size_t(size), 1, 1, fd, ctypes.c_long(0))
pages = (size + 4095) // 4096
vec = (ctypes.c_ubyte * pages)()
assert libc.mincore(ctypes.c_void_p(addr), ctypes.c_size_t(size), vec) == 0
print(sum(b & 1 for b in vec) * 4096 >> 20)
"#;
    let out = Command::new("python3").arg("-c").arg(script).arg(file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

fn faulting_4_gib_page_by_page_leaves_control_replies_fast(mode: Option<&str>) {
    let started = Instant::now();
    // Followed to the end: every page event of the launch reaches the daemon.
    let config = "[launch]\nquiet_ms = 2000\nwindow_max_secs = 120\nmax_launch_mib = 8192\n";
    let d = match mode {
        Some(m) => TestDaemon::start_in_mode(config, m),
        None => TestDaemon::start(config),
    };
    let data = tempfile::tempdir_in("/var/tmp").unwrap();
    let file = data.path().join("big");
    std::fs::File::create(&file).unwrap().set_len(4 << 30).unwrap();
    let script = data.path().join("fault_every_page.py");
    std::fs::write(&script, FAULT_EVERY_PAGE).unwrap();
    let socket = d.socket();
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (socket, done) = (socket.clone(), done.clone());
        std::thread::spawn(move || watch_status(&socket, &done, Duration::from_millis(20)))
    };
    let t = Instant::now();
    let out = Command::new("python3").arg(&script).arg(&file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let faulted_in = t.elapsed();
    // The kernel put the sparse file's pages in the page cache (so page events were sent).
    let cached = cached_mib(&file);
    // The window closes (quiet) while the status is still asked for.
    std::thread::sleep(Duration::from_secs(3));
    done.store(true, Ordering::Relaxed);
    let (slowest, rss, asked) = watcher.join().unwrap();
    let (status, _) = timed_status(&socket);
    eprintln!(
        "mode {}: 4 GiB faulted in {faulted_in:?} ({cached} MiB cached after); {asked} status answers, the slowest {slowest:?}; largest resident {} MiB; {} page events, {} lost, {} reads deferred; whole test {:?}",
        status.mode,
        rss >> 20,
        status.events.page_events,
        status.events.page_events_lost,
        status.events.page_reads_deferred,
        started.elapsed()
    );
    drop(data);
    eprintln!("{}", d.log().lines().filter(|l| !l.contains("DEBUG")).collect::<Vec<_>>().join("\n"));
    assert!(cached >= 3 << 10, "only {cached} MiB of the sparse file were cached: the test proves nothing");
    assert!(status.events.page_events > 1_000, "{:?}", status.events);
    assert!(slowest < Duration::from_millis(200), "a control reply took {slowest:?}");
}

#[test]
fn a_launch_faulting_4_gib_page_by_page_leaves_control_replies_under_200_ms() {
    faulting_4_gib_page_by_page_leaves_control_replies_fast(None);
}

#[test]
fn a_launch_faulting_4_gib_page_by_page_leaves_control_replies_under_200_ms_with_the_trace_pipe() {
    faulting_4_gib_page_by_page_leaves_control_replies_fast(Some("access"));
}
