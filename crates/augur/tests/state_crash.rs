//! Crash test of the daemon's state: a child process learns launches as fast as it can and is
//! killed with SIGKILL at random moments, 200 times; after every kill the state must open,
//! pass SQLite's integrity check, and hold every launch the child reported committed, each one
//! whole (a launch's record and its model update are one transaction).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use augur_core::model::learn::LearnSettings;
use augur_core::model::profile::{FileIdentity, FileProfile, LaunchProfile, TraceMode, Unresolved, UsedRange};
use augur_core::model::range::PageRange;
use augur_core::model::record::{LaunchRecord, StateLimits};
use augur_store::state::{OpenOutcome, StateStore};

const CHILD_ENV: &str = "AUGUR_CRASH_CHILD_STATE";

fn limits() -> StateLimits {
    StateLimits {
        learn: LearnSettings { max_apps: 1000, ..Default::default() },
        max_launch_records: 1_000_000,
        ..StateLimits::default()
    }
}

/// A heavy launch: 40 files of 50 scattered ranges each, varying with `n`.
fn heavy_launch(n: u64) -> LaunchProfile {
    let files = (0..40u64)
        .map(|f| FileProfile {
            path: PathBuf::from(format!("/usr/lib/lib{f}.so")),
            identity: FileIdentity { dev: 1, ino: f, size: 1 << 24, mtime_ns: if n % 11 == 0 { n as i64 } else { 1 } },
            ranges: (0..50u64)
                .map(|k| UsedRange { range: PageRange::new(k * 10 + (n + f) % 5, 1 + (n % 3)), first_use_us: k })
                .collect(),
        })
        .collect();
    LaunchProfile {
        command: vec!["app".into()],
        recorded_at: 0,
        page_size: 4096,
        mode: TraceMode::Access,
        window_ms: 1,
        files,
        unresolved: Unresolved::default(),
        lookups: Vec::new(),
    }
}

/// Not a test on its own: the child the crash test runs and kills.
#[test]
#[ignore = "run by state_survives_sigkill_at_random_moments as its child"]
fn crash_child() {
    let Ok(path) = std::env::var(CHILD_ENV) else { return };
    let (mut store, _) = StateStore::open(Path::new(&path)).unwrap();
    let start = store.recent_launches(1).unwrap().first().map_or(0, |r| r.started_ms + 1);
    for n in start.. {
        let app = format!("/usr/bin/app{}", n % 37);
        let record = LaunchRecord { app: app.clone(), started_ms: n, pages_used: 100, ..Default::default() };
        store.learn_launch(&app, &app, &heavy_launch(n), &record, &limits()).unwrap();
        // Straight to fd 1 (print! may go through the test harness's capture buffer).
        let mut out = std::io::stdout().lock();
        writeln!(out, "committed {n}").unwrap();
        out.flush().unwrap();
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn state_survives_sigkill_at_random_moments() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let exe = std::env::current_exe().unwrap();
    let seed = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1;
    println!("seed {seed}");
    let mut rng = Rng(seed);
    let mut committed: Vec<u64> = Vec::new();
    let kills = 200;
    for round in 0..kills {
        let mut child = Command::new(&exe)
            .args(["--exact", "crash_child", "--ignored", "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(5 + rng.next() % 150));
        child.kill().unwrap(); // SIGKILL
        let out = child.stdout.take().unwrap();
        for line in BufReader::new(out).lines() {
            // The harness may have written "test crash_child ... " before the first line.
            let line = line.unwrap();
            if let Some((_, n)) = line.split_once("committed ") {
                committed.push(n.trim().parse().unwrap());
            }
        }
        child.wait().unwrap();

        let (store, outcome) = StateStore::open(&path).unwrap();
        assert!(!matches!(outcome, OpenOutcome::MovedAside(_)), "round {round}: state moved aside");
        store.integrity_check().unwrap();
        let records = store.recent_launches(usize::MAX >> 1).unwrap();
        let stored: std::collections::BTreeSet<u64> = records.iter().map(|r| r.started_ms).collect();
        for n in &committed {
            assert!(stored.contains(n), "round {round}: committed launch {n} lost");
        }
        // Every launch is whole: records per app equal the launches its model counts.
        for app in store.apps().unwrap() {
            let recs = records.iter().filter(|r| r.app == app.key).count() as u64;
            let model = store.load_app(&app.key).unwrap().unwrap();
            assert_eq!(model.launches, recs, "round {round}: {} half-written", app.key);
            assert_eq!(app.launches, recs);
        }
        // At most the launch in progress was lost beyond what was reported.
        assert!(
            stored.len() as u64 <= committed.len() as u64 + round as u64 + 1,
            "round {round}: {} stored, {} reported",
            stored.len(),
            committed.len()
        );
    }
    assert!(committed.len() > kills, "the child barely wrote anything: {} launches", committed.len());
    println!("{kills} kills, {} launches committed and kept", committed.len());
}
