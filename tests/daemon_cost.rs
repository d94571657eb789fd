//! What the daemon costs: memory with 500 learned applications, and wakeups while nothing
//! happens (run as root, as CI does). Each test starts its own daemon on temporary paths.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use augur::daemon::control::{self, Request, Response, StatusReport};
use augur::model::learn::LearnSettings;
use augur::model::profile::{FileIdentity, FileProfile, LaunchProfile, TraceMode, Unresolved, UsedRange};
use augur::model::range::PageRange;
use augur::store::state::{LaunchRecord, StateLimits, StateStore};

const AUGUR: &str = env!("CARGO_BIN_EXE_augur");

struct Daemon {
    child: Child,
    socket: PathBuf,
}

impl Daemon {
    fn start(dir: &Path, state: &Path) -> Daemon {
        let socket = dir.join("augur.sock");
        let child = Command::new(AUGUR)
            .args(["daemon", "--config", "/dev/null", "--state"])
            .arg(state)
            .arg("--socket")
            .arg(&socket)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("daemon.log")).unwrap())
            .spawn()
            .unwrap();
        let d = Daemon { child, socket };
        let until = Instant::now() + Duration::from_secs(30);
        while control::request(&d.socket, &Request::Status).is_err() {
            assert!(Instant::now() < until, "daemon never answered");
            std::thread::sleep(Duration::from_millis(50));
        }
        d
    }

    fn status(&self) -> StatusReport {
        match control::request(&self.socket, &Request::Status).unwrap() {
            Response::Status(s) => *s,
            other => panic!("{other:?}"),
        }
    }

    /// Voluntary plus involuntary context switches over all the daemon's threads.
    fn context_switches(&self) -> u64 {
        let mut total = 0;
        for task in std::fs::read_dir(format!("/proc/{}/task", self.child.id())).unwrap() {
            let status = std::fs::read_to_string(task.unwrap().path().join("status")).unwrap_or_default();
            for line in status.lines() {
                if let Some(v) = line.strip_prefix("voluntary_ctxt_switches:").or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:")) {
                    total += v.trim().parse::<u64>().unwrap();
                }
            }
        }
        total
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plausible launch: 40 files of 12 scattered ranges each (about 480 ranges, 2 400 pages).
fn launch(app: u64) -> LaunchProfile {
    LaunchProfile {
        command: vec![format!("/opt/app{app}/bin/app")],
        recorded_at: 0,
        page_size: 4096,
        mode: TraceMode::Access,
        window_ms: 800,
        files: (0..40u64)
            .map(|f| FileProfile {
                path: PathBuf::from(format!("/opt/app{app}/lib/libpart{f}.so")),
                identity: FileIdentity { dev: 65024, ino: app * 100 + f, size: 8 << 20, mtime_ns: 1 },
                ranges: (0..12u64)
                    .map(|k| UsedRange { range: PageRange::new(k * 37 + f % 5, 5), first_use_us: f * 1000 + k })
                    .collect(),
            })
            .collect(),
        unresolved: Unresolved::default(),
    }
}

#[test]
fn rss_stays_under_32_mib_with_500_learned_applications() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.db");
    {
        let (mut store, _) = StateStore::open(&state).unwrap();
        let limits = StateLimits { learn: LearnSettings::default(), max_launch_records: 500 };
        for app in 0..500u64 {
            let key = format!("/opt/app{app}/bin/app");
            for run in 0..2 {
                let record = LaunchRecord { app: key.clone(), started_ms: app * 10 + run, pages_used: 2400, ..Default::default() };
                store.learn_launch(&key, &key, &launch(app), &record, &limits).unwrap();
            }
        }
    }
    let d = Daemon::start(dir.path(), &state);
    // Listing every application and the recent launches must not load the models into memory.
    let apps = match control::request(&d.socket, &Request::Apps).unwrap() {
        Response::Apps { apps } => apps,
        other => panic!("{other:?}"),
    };
    assert_eq!(apps.len(), 500);
    let s = d.status();
    assert_eq!(s.apps_learned, 500);
    println!("daemon RSS with {} learned applications: {} KiB", s.apps_learned, s.rss_bytes / 1024);
    assert!(s.rss_bytes > 0);
    assert!(s.rss_bytes < 32 << 20, "RSS {} bytes", s.rss_bytes);
}

#[test]
fn idle_daemon_wakes_at_most_a_handful_of_times_in_60_s() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &dir.path().join("state.db"));
    // Let the start-up settle (launch windows of whatever ran meanwhile close within 15 s).
    let until = Instant::now() + Duration::from_secs(20);
    while d.status().launches_in_progress > 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(2));
    let before = d.status();
    let switches_before = d.context_switches();
    std::thread::sleep(Duration::from_secs(60));
    let switches = d.context_switches() - switches_before;
    let after = d.status();
    // The status request itself woke the daemon once.
    let wakeups = after.events.wakeups - before.events.wakeups - 1;
    let process_events = after.events.process_events - before.events.process_events;
    let opens = after.events.open_events - before.events.open_events;
    println!("over 60 s: {switches} context switches, {wakeups} wakeups, {process_events} process events and {opens} file opens on the machine");
    // Nothing is polled: every wakeup is caused by a process event or an open elsewhere on the
    // machine (none on an idle one), plus a handful.
    assert!(wakeups <= 5 + process_events + opens, "{wakeups} wakeups");
    // And no thread wakes behind the loop's back: each wakeup costs about one switch.
    assert!(switches <= 2 * wakeups + 6, "{switches} context switches for {wakeups} wakeups");
}
