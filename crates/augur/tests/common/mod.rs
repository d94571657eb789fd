//! What the daemon integration tests share: starting `augur daemon` on private paths and waiting
//! until it answers, stopping it so it removes its tracefs instance, dropping caches, and a test
//! application that reads its own data files, a daemon on a private directory, and page
//! residency. Test support only: no assertions about augur here.
#![allow(dead_code)] // each test crate uses its own subset

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use augur::daemon::control::{self, Request, Response};
use augur_core::model::record::LaunchRecord;

pub const AUGUR: &str = env!("CARGO_BIN_EXE_augur");

/// Starts `augur daemon` with these paths, stderr to `log`, and waits until its socket answers;
/// panics with the log if it exits first or never answers.
pub fn spawn_daemon(config: &Path, state: &Path, socket: &Path, log: &Path, verbose: bool) -> Child {
    spawn_daemon_with(config, state, socket, log, verbose, &[])
}

/// [`spawn_daemon`] with more arguments (`--mode access`, say).
pub fn spawn_daemon_with(config: &Path, state: &Path, socket: &Path, log: &Path, verbose: bool, args: &[String]) -> Child {
    let mut cmd = Command::new(AUGUR);
    cmd.arg("daemon").args(args);
    if verbose {
        cmd.arg("-v");
    }
    let mut child = cmd
        .arg("--config")
        .arg(config)
        .arg("--state")
        .arg(state)
        .arg("--socket")
        .arg(socket)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let read_log = || std::fs::read_to_string(log).unwrap_or_default();
    let until = Instant::now() + Duration::from_secs(30);
    while Instant::now() < until {
        if control::request(socket, &Request::Status).is_ok() {
            return child;
        }
        if let Some(s) = child.try_wait().unwrap() {
            panic!("daemon exited at start ({s}): {}", read_log());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    stop(&mut child);
    panic!("daemon never answered: {}", read_log());
}

/// SIGTERM (so the daemon removes its tracefs instance), SIGKILL if it has not exited in 5 s.
pub fn stop(child: &mut Child) {
    // SAFETY (test): kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

pub fn drop_caches() {
    // SAFETY (test): sync(2) has no arguments.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3").unwrap();
}

/// Times the page cache was dropped since boot (`drop_pagecache` in /proc/vmstat).
pub fn pagecache_drops() -> u64 {
    std::fs::read_to_string("/proc/vmstat")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("drop_pagecache ").map(|v| v.trim().parse().unwrap()))
        .unwrap()
}

/// A test application: a shell script that spends 0.3 s starting up (as real applications spend
/// CPU time before they read their data) and then reads 32 MiB of its own data files.
/// Exec-time replay loads what it learned while the script is still starting.
pub fn make_app(dir: &Path) -> PathBuf {
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    for i in 0..8 {
        let mut f = std::fs::File::create(data.join(format!("part{i}"))).unwrap();
        let mut buf = vec![0u8; 4 << 20];
        for chunk in buf.chunks_mut(8) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            chunk.copy_from_slice(&seed.to_ne_bytes()[..chunk.len()]);
        }
        f.write_all(&buf).unwrap();
        f.sync_all().unwrap();
    }
    let script = dir.join("app.sh");
    std::fs::write(&script, format!("#!/bin/sh\nsleep 0.3\ncat {}/part* > /dev/null\n", data.display())).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

pub fn run_app(script: &Path) {
    let s = Command::new("sh").arg(script).status().unwrap();
    assert!(s.success());
}

/// A daemon on a private directory (config, state, socket and log inside it), stopped on drop.
pub struct TestDaemon {
    pub child: Option<Child>,
    pub dir: tempfile::TempDir,
    /// More arguments of `augur daemon`, kept for restarts.
    pub args: Vec<String>,
}

impl TestDaemon {
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("run/augur.sock")
    }

    pub fn config(&self) -> PathBuf {
        self.dir.path().join("config.toml")
    }

    pub fn state(&self) -> PathBuf {
        self.dir.path().join("state/state.db")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("daemon.log")
    }

    /// Starts a daemon with `config` (TOML text) and waits until its socket answers.
    pub fn start(config: &str) -> TestDaemon {
        Self::start_with(config, &[])
    }

    /// Starts a daemon with `config` in observation `mode` (`--mode`).
    pub fn start_in_mode(config: &str, mode: &str) -> TestDaemon {
        Self::start_with(config, &["--mode", mode])
    }

    fn start_with(config: &str, args: &[&str]) -> TestDaemon {
        let dir = tempfile::tempdir().unwrap();
        let mut d = TestDaemon { child: None, dir, args: args.iter().map(|a| a.to_string()).collect() };
        std::fs::write(d.config(), config).unwrap();
        d.child = Some(spawn_daemon_with(&d.config(), &d.state(), &d.socket(), &d.log_path(), true, &d.args));
        d
    }

    /// Stops the daemon (SIGTERM: it saves), runs `between`, and starts it again on the same
    /// state and config.
    pub fn restart(&mut self, between: impl FnOnce()) {
        if let Some(mut c) = self.child.take() {
            stop(&mut c);
        }
        between();
        self.child = Some(spawn_daemon_with(&self.config(), &self.state(), &self.socket(), &self.log_path(), true, &self.args));
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// What `augur status` asks.
    pub fn status(&self) -> control::StatusReport {
        match control::request(&self.socket(), &Request::Status).unwrap() {
            Response::Status(s) => *s,
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Launch records of `app`, oldest first, once there are at least `n`.
    pub fn wait_launches(&self, app: &str, n: usize) -> Vec<LaunchRecord> {
        match self.launches_within(app, n, Duration::from_secs(60)) {
            Some(recs) => recs,
            None => panic!("launch {n} of {app} never recorded: {}", self.log()),
        }
    }

    /// Launch records of `app`, oldest first, once there are at least `n`; `None` if there are
    /// fewer after `limit`.
    pub fn launches_within(&self, app: &str, n: usize, limit: Duration) -> Option<Vec<LaunchRecord>> {
        let until = Instant::now() + limit;
        loop {
            let mut recs = match control::request(&self.socket(), &Request::Launches { app: app.into(), limit: 100 }).unwrap() {
                Response::Launches { launches } => launches,
                other => panic!("unexpected {other:?}"),
            };
            if recs.len() >= n {
                recs.reverse();
                return Some(recs);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            stop(&mut c);
        }
    }
}

/// Pages of the files in `dir` resident now.
pub fn resident_pages(dir: &Path) -> u64 {
    use std::os::fd::AsFd;
    let page = augur_os::fetch::page_size();
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let f = std::fs::File::open(e.unwrap().path()).unwrap();
        let pages = f.metadata().unwrap().len().div_ceil(page);
        let probe = augur_os::fetch::residency::ResidencyProbe::new(f.as_fd(), page, true);
        n += probe.count(augur_core::model::range::PageRange::new(0, pages)).unwrap();
    }
    n
}

/// A cgroup v1 group a test creates; dropping it kills (`kill`) or moves back to the root
/// group every process inside and removes it.
pub struct Cgroup {
    pub dir: PathBuf,
    kill: bool,
}

impl Cgroup {
    pub fn create(controller: &str, name: &str, kill: bool) -> Cgroup {
        let root = Path::new("/sys/fs/cgroup").join(controller);
        assert!(root.join("cgroup.procs").exists(), "no cgroup v1 {controller} hierarchy at {}", root.display());
        let dir = root.join(format!("augur-test-{name}-{}", std::process::id()));
        if !dir.exists() {
            std::fs::create_dir(&dir).unwrap();
        }
        Cgroup { dir, kill }
    }

    pub fn set(&self, file: &str, value: &str) {
        std::fs::write(self.dir.join(file), value).unwrap_or_else(|e| panic!("{}/{file} = {value}: {e}", self.dir.display()));
    }

    /// Starts `sh -c SCRIPT` already inside this group (it joins before running the script).
    pub fn spawn_sh(&self, script: &str) -> Child {
        Command::new("sh").arg("-c").arg(format!("echo $$ > {}/cgroup.procs && {script}", self.dir.display())).spawn().unwrap()
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let root_procs = self.dir.parent().unwrap().join("cgroup.procs");
        for _ in 0..100 {
            let procs = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
            for pid in procs.split_whitespace() {
                if self.kill {
                    // SAFETY (test): kill(2) on a process of the test's own cgroup.
                    unsafe { libc::kill(pid.parse().unwrap_or(0), libc::SIGKILL) };
                } else {
                    let _ = std::fs::write(&root_procs, pid);
                }
            }
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The thread of process `pid` named `name`.
pub fn thread_named(pid: u32, name: &str) -> u32 {
    for e in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let e = e.unwrap();
        if std::fs::read_to_string(e.path().join("comm")).unwrap_or_default().trim() == name {
            return e.file_name().to_string_lossy().parse().unwrap();
        }
    }
    panic!("process {pid} has no thread {name}");
}

/// Makes sure `program` is installed (Debian package `package`).
pub fn install(program: &str, package: &str) {
    if Command::new("sh").arg("-c").arg(format!("command -v {program}")).status().unwrap().success() {
        return;
    }
    let s =
        Command::new("apt-get").args(["install", "-y", "-q", package]).env("DEBIAN_FRONTEND", "noninteractive").status().unwrap();
    assert!(s.success(), "installing {package}");
}
