//! Learning per user, as root (issue 20): another user's launches of root's very application
//! (the same script, fed the user's own data) load none of that user's files into root's next
//! launch, and a user's flood of 1,100 distinct scripts leaves root's applications learned and
//! replayed.
//!
//! Each test creates a throwaway system user (removed at the end, even when the test fails) and
//! runs the user's programs under its uid.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::{TestDaemon, drop_caches, resident_pages};

use augur::daemon::control::{self, Request, Response};
use augur_core::model::record::AppSummary;

/// A user created for one test and removed when dropped.
struct ThrowawayUser {
    name: String,
    uid: u32,
    gid: u32,
}

impl ThrowawayUser {
    fn create(tag: &str) -> ThrowawayUser {
        let name = format!("augur{tag}{}", std::process::id() % 100_000);
        let _ = Command::new("userdel").arg(&name).stderr(std::process::Stdio::null()).status();
        let s = Command::new("useradd")
            .args(["--system", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin"])
            .arg(&name)
            .status()
            .unwrap();
        assert!(s.success(), "useradd {name}: {s}");
        let id = |flag: &str| -> u32 {
            let out = Command::new("id").arg(flag).arg(&name).output().unwrap();
            String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
        };
        let (uid, gid) = (id("-u"), id("-g"));
        assert_ne!(uid, 0);
        ThrowawayUser { name, uid, gid }
    }

    /// `sh SCRIPT` as this user, with `env`, started.
    fn spawn(&self, script: &Path, env: &[(&str, &Path)]) -> std::process::Child {
        let mut cmd = Command::new("sh");
        cmd.arg(script).uid(self.uid).gid(self.gid).current_dir("/");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.spawn().unwrap()
    }

    /// `sh SCRIPT` as this user, with `env`; waits for it.
    fn run(&self, script: &Path, env: &[(&str, &Path)]) {
        let s = self.spawn(script, env).wait().unwrap();
        assert!(s.success(), "{} as {}: {s}", script.display(), self.name);
    }

    fn key(&self, app: &str) -> String {
        format!("uid={}:{app}", self.uid)
    }
}

/// Every process of the user is the test's own and waited for, so the user can go.
impl Drop for ThrowawayUser {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.name).status();
    }
}

/// `count` files of 4 MiB of distinct bytes in `dir`.
fn write_data(dir: &Path, count: usize, seed: u64) {
    std::fs::create_dir_all(dir).unwrap();
    let mut x = seed | 1;
    for i in 0..count {
        let mut buf = vec![0u8; 4 << 20];
        for chunk in buf.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            chunk.copy_from_slice(&x.to_ne_bytes()[..chunk.len()]);
        }
        std::fs::write(dir.join(format!("part{i}")), &buf).unwrap();
    }
    // SAFETY (test): sync(2) has no arguments.
    unsafe { libc::sync() };
}

/// A world-readable directory under /var/tmp (tempdir makes it 0700).
fn shared_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn apps(d: &TestDaemon) -> Vec<AppSummary> {
    match control::request(&d.socket(), &Request::Apps).unwrap() {
        Response::Apps { apps } => apps,
        other => panic!("{other:?}"),
    }
}

fn chown_tree(path: &Path, user: &ThrowawayUser) {
    let s = Command::new("chown").arg("-R").arg(format!("{}:{}", user.uid, user.gid)).arg(path).status().unwrap();
    assert!(s.success());
}

/// Root's tool reads `$TOOL_DATA` (its own data by default). A user runs the very same script with
/// `TOOL_DATA` pointing at 32 MiB of their own files, three times, learned each time. Root's next
/// launch of the tool, after the caches were dropped, is replayed from root's profile only: none of
/// the user's pages are loaded.
#[test]
fn another_users_launches_of_roots_application_load_none_of_their_files_for_root() {
    // Exec-time replay alone: a prediction fetch of the user's own application (which is fine:
    // it is that user's) would make their files resident for another reason than root's launch.
    let d = TestDaemon::start("[launch]\nquiet_ms = 1500\nfollow_first_launches = 100\n[predict]\nenabled = false\n");
    let user = ThrowawayUser::create("p");
    let dir = shared_dir();
    let root_data = dir.path().join("root-data");
    write_data(&root_data, 4, 0x5EED);
    let user_data = dir.path().join("user-data");
    write_data(&user_data, 8, 0xBAD5EED);
    chown_tree(&user_data, &user);
    std::fs::set_permissions(&user_data, std::fs::Permissions::from_mode(0o700)).unwrap();
    let tool: PathBuf = dir.path().join("tool.sh");
    std::fs::write(&tool, format!("#!/bin/sh\nsleep 0.3\ncat \"${{TOOL_DATA:-{}}}\"/part* > /dev/null\n", root_data.display()))
        .unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let root_key = tool.to_string_lossy().into_owned();
    let user_key = user.key(&root_key);

    let run_root = || {
        let s = Command::new("sh").arg(&tool).current_dir("/").status().unwrap();
        assert!(s.success());
    };
    run_root();
    d.wait_launches(&root_key, 1);
    for n in 1..=3 {
        user.run(&tool, &[("TOOL_DATA", &user_data)]);
        d.wait_launches(&user_key, n);
    }
    let listed = apps(&d);
    let user_app = listed.iter().find(|a| a.key == user_key).unwrap_or_else(|| panic!("{user_key} not learned: {listed:?}"));
    assert!(user_app.pages >= 8192, "the user's launches learned their own files: {user_app:?}");
    let root_app = listed.iter().find(|a| a.key == root_key).unwrap();
    assert_eq!(root_app.launches, 1, "the user's launches were not learned as root's: {root_app:?}");

    drop_caches();
    assert_eq!(resident_pages(&user_data), 0);
    run_root();
    let rec = d.wait_launches(&root_key, 2).remove(1);
    println!("root's launch after the user's: {rec:?}");
    let loaded = resident_pages(&user_data);
    for line in d.log().lines().filter(|l| l.contains(&root_key)) {
        println!("daemon: {line}");
    }
    assert!(rec.pages_expected > 0, "root's launch was replayed from root's profile: {rec:?}");
    assert_eq!(loaded, 0, "{loaded} pages of the user's files loaded for root's launch");
    assert!(
        rec.pages_expected < 8192 + 4096,
        "root's profile holds only root's 16 MiB and the shell, not the user's 32 MiB: {rec:?}"
    );
}

/// A user launches 1,100 distinct scripts (each learned: more than the 1,000 applications kept):
/// the user keeps its share of `max_apps` (500), root's application learned before stays learned
/// and is replayed afterwards, and root's new application is learned.
#[test]
fn a_users_flood_of_distinct_scripts_leaves_roots_applications_learned() {
    const SCRIPTS: usize = 1100;
    let d = TestDaemon::start("[launch]\nquiet_ms = 200\nfollow_first_launches = 100\n[predict]\nenabled = false\n");
    let user = ThrowawayUser::create("f");
    let dir = shared_dir();
    let root_data = dir.path().join("root-data");
    write_data(&root_data, 2, 0xF00D);
    let root_tool = dir.path().join("root-tool.sh");
    // No pause before it reads: a quiet time of 200 ms (for the flood) would end its window.
    std::fs::write(&root_tool, format!("#!/bin/sh\ncat {}/part* > /dev/null\n", root_data.display())).unwrap();
    let root_key = root_tool.to_string_lossy().into_owned();
    let run_root = |script: &Path| {
        let s = Command::new("sh").arg(script).current_dir("/").status().unwrap();
        assert!(s.success());
    };
    run_root(&root_tool);
    d.wait_launches(&root_key, 1);

    let flood = dir.path().join("flood");
    std::fs::create_dir_all(&flood).unwrap();
    // Each lives a fifth of a second, so that the daemon reads its /proc before it exits (a
    // process gone by then starts no launch), ten at a time.
    for i in 0..SCRIPTS {
        let text = format!("#!/bin/sh\n# {i}\ncat /etc/os-release > /dev/null\nsleep 0.2\n");
        std::fs::write(flood.join(format!("s{i}.sh")), text).unwrap();
    }
    chown_tree(&flood, &user);
    let started = Instant::now();
    for batch in (0..SCRIPTS).collect::<Vec<_>>().chunks(10) {
        let children: Vec<_> = batch.iter().map(|i| user.spawn(&flood.join(format!("s{i}.sh")), &[])).collect();
        for mut c in children {
            assert!(c.wait().unwrap().success());
        }
    }
    let launched = started.elapsed();
    // Until the daemon has learned what it will of the flood: no new launch of the user's
    // learned for 3 s.
    let learned_of_user = || d.log().lines().filter(|l| l.contains(&format!("learned uid={}:", user.uid))).count();
    let (mut learned, mut since) = (learned_of_user(), Instant::now());
    let until = Instant::now() + Duration::from_secs(60);
    while since.elapsed() < Duration::from_secs(3) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(250));
        let now = learned_of_user();
        if now != learned {
            (learned, since) = (now, Instant::now());
        }
    }
    let listed = apps(&d);
    let of_user = listed.iter().filter(|a| a.key.starts_with(&format!("uid={}:", user.uid))).count();
    println!(
        "flood of {SCRIPTS} scripts launched in {launched:?}, {learned} of their launches learned after {:?}; applications kept: {} in all, {of_user} of the user's",
        started.elapsed(),
        listed.len()
    );
    assert!(learned > 500, "only {learned} of the flood's launches were learned: the user's share was never reached");
    assert_eq!(of_user, 500, "the user keeps its share of max_apps, no more");
    assert!(listed.iter().any(|a| a.key == root_key), "root's application was pushed out by the user's flood");

    // Root's application is still replayed, and a new one of root's is learned.
    // The launch records kept (`recent_launches`, 500) are the flood's by now: root's first may be gone.
    let before = d.launches_within(&root_key, 0, Duration::ZERO).unwrap().len();
    drop_caches();
    run_root(&root_tool);
    let rec = d.wait_launches(&root_key, before + 1).pop().unwrap();
    assert!(rec.pages_expected >= 2048, "root's application replayed after the flood: {rec:?}");
    assert!(rec.pages_prefetched > 0, "{rec:?}");
    let new_tool = dir.path().join("root-new.sh");
    std::fs::write(&new_tool, format!("#!/bin/sh\ncat {}/part0 > /dev/null\n", root_data.display())).unwrap();
    run_root(&new_tool);
    d.wait_launches(&new_tool.to_string_lossy(), 1);
    let listed = apps(&d);
    assert!(listed.iter().any(|a| a.key == root_key) && listed.iter().any(|a| a.key == new_tool.to_string_lossy()));
}
