//! Launching one workload and timing it: to its exit (command-line workloads) or to its first
//! visible window on the suite's X server (desktop applications), then closing it. Each launch
//! runs in a process group of its own and carries a marker in its environment
//! ([`LAUNCH_MARKER`]), so that closing it ends every process it started, even those a desktop
//! launcher (`gtk-launch`, `gio launch`) or a D-Bus session started outside its group and tree.
//!
//! It also holds the set-up helpers the benchmarks share: whether a command exists, running a
//! set-up tool, removing a file that may be absent.
//!
//! It does not touch the page cache or any prefetcher; the suite decides the conditions.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::{BenchError, IoContext, Result};
use crate::interrupt;
use crate::suite_file::{Ready, Workload};
use crate::xdisplay::WindowWatcher;
use augur_os::sense::procfs;

/// Where and how workloads run.
#[derive(Debug, Clone)]
pub struct LaunchEnv {
    /// Environment added to every workload (DISPLAY, HOME, ...).
    pub vars: BTreeMap<String, String>,
    /// Per-workload scratch directories live under this.
    pub work_root: PathBuf,
    /// Output of workloads is appended here.
    pub log: PathBuf,
    /// The log and the scratch directories, held open for the whole session (see
    /// [`LaunchEnv::prepare`]).
    held: Arc<Held>,
}

#[derive(Debug, Default)]
struct Held {
    log: Option<fs::File>,
    dirs: Vec<fs::File>,
}

impl LaunchEnv {
    /// An environment with no variables; nothing is created before [`LaunchEnv::prepare`].
    pub fn new(work_root: PathBuf, log: PathBuf) -> Self {
        LaunchEnv { vars: BTreeMap::new(), work_root, log, held: Arc::default() }
    }

    /// The scratch directory of `w` (`{work}` in its command).
    pub fn work_dir(&self, w: &Workload) -> PathBuf {
        self.work_root.join(sanitize(&w.name))
    }

    /// Creates the scratch directories and writes the workloads' files, then holds the
    /// directories and the log open: a launcher's working directory and its open output are in
    /// memory whatever the page cache holds (an open file pins its inode and path), so a
    /// dropped cache must not make a launch look them up on disk, for any condition.
    pub fn prepare(&mut self, workloads: &[Workload]) -> Result<()> {
        let mut held = Held::default();
        for w in workloads {
            let dir = self.work_dir(w);
            fs::create_dir_all(&dir).context(|| format!("creating {}", dir.display()))?;
            for (name, content) in &w.files {
                let p = dir.join(name);
                fs::write(&p, content).context(|| format!("writing {}", p.display()))?;
            }
            held.dirs.push(fs::File::open(&dir).context(|| format!("opening {}", dir.display()))?);
        }
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .context(|| format!("opening {}", self.log.display()))?;
        held.log = Some(log);
        self.held = Arc::new(held);
        Ok(())
    }

    /// A new handle of the log, appending.
    fn log_handle(&self) -> Result<fs::File> {
        let file = match &self.held.log {
            Some(log) => log.try_clone().context(|| "cloning the log handle".into())?,
            None => fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.log)
                .context(|| format!("opening {}", self.log.display()))?,
        };
        Ok(file)
    }

    /// The workload's command, with its launch marker.
    fn command(&self, w: &Workload) -> Result<(Command, String)> {
        let work = self.work_dir(w);
        let args: Vec<String> = w.command.iter().map(|a| a.replace("{work}", &work.to_string_lossy())).collect();
        let marker = format!("{}-{}", std::process::id(), NEXT_LAUNCH.fetch_add(1, Ordering::Relaxed));
        let mut cmd = Command::new(&args[0]);
        cmd.args(&args[1..]).current_dir(&work).envs(&self.vars).envs(&w.env).env(LAUNCH_MARKER, &marker).stdin(Stdio::null());
        let log = self.log_handle()?;
        let log2 = log.try_clone().context(|| "cloning the log handle".into())?;
        cmd.stdout(log).stderr(log2).process_group(0);
        Ok((cmd, marker))
    }
}

/// The environment variable every process of one launch inherits, with a value unique to the
/// launch: the processes a desktop launcher or a D-Bus daemon started for it are found by it.
pub const LAUNCH_MARKER: &str = "AUGUR_BENCH_LAUNCH";

static NEXT_LAUNCH: AtomicU64 = AtomicU64::new(0);

/// Every live process whose environment carries `marker` as its [`LAUNCH_MARKER`].
fn marked(marker: &str) -> Vec<u32> {
    procfs::all_pids().into_iter().filter(|&p| procfs::env_var(p, LAUNCH_MARKER).is_some_and(|v| v == marker)).collect()
}

fn sanitize(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

/// A workload that is running (a desktop application after its window appeared). Dropping it
/// closes it.
#[derive(Debug)]
pub struct Running {
    child: Option<Child>,
    name: String,
    marker: String,
}

impl Running {
    /// Closes the application: SIGTERM to its process group and descendants, SIGKILL after 5 s.
    pub fn close(mut self) -> Result<()> {
        self.close_inner()
    }

    fn close_inner(&mut self) -> Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let pid = child.id();
        let mut family = procfs::descendants(pid);
        for p in marked(&self.marker) {
            if p != pid && !family.contains(&p) {
                family.push(p);
            }
        }
        signal_all(pid, &family, rustix::process::Signal::TERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let parent_done = matches!(child.try_wait(), Ok(Some(_)) | Err(_));
            if parent_done && family.iter().all(|&p| !procfs::is_alive(p)) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let late: Vec<u32> = marked(&self.marker).into_iter().filter(|p| !family.contains(p)).collect();
                family.extend(late);
                signal_all(pid, &family, rustix::process::Signal::KILL);
                let _ = child.wait();
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether it is still running: the process the suite started, or one it left behind with
    /// the launch's marker (`gtk-launch` exits as soon as it has started the application).
    pub fn alive(&mut self) -> bool {
        let Some(child) = self.child.as_mut() else { return false };
        matches!(child.try_wait(), Ok(None)) || !marked(&self.marker).is_empty()
    }

    /// The workload's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.close_inner();
    }
}

fn signal_all(group: u32, family: &[u32], sig: rustix::process::Signal) {
    if let Some(p) = rustix::process::Pid::from_raw(group as i32) {
        let _ = rustix::process::kill_process_group(p, sig);
    }
    for &f in family {
        if let Some(p) = rustix::process::Pid::from_raw(f as i32) {
            let _ = rustix::process::kill_process(p, sig);
        }
    }
}

/// The result of one timed launch.
#[derive(Debug)]
pub struct Launched {
    /// Seconds from spawn to ready.
    pub secs: f64,
    /// The application, still running, for window workloads; `None` for commands that exited.
    pub running: Option<Running>,
}

/// Launches `w` and times it to ready. `watcher` is needed for window workloads.
pub fn launch(env: &LaunchEnv, w: &Workload, watcher: Option<&mut WindowWatcher>) -> Result<Launched> {
    interrupt::check()?;
    let (mut cmd, marker) = env.command(w)?;
    let timeout = Duration::from_secs(w.timeout_secs);
    match w.ready {
        Ready::Exit => {
            let start = Instant::now();
            let mut child = cmd.spawn().map_err(|e| spawn_error(w, e))?;
            let mut guard = Running { child: None, name: w.name.clone(), marker };
            loop {
                if let Some(status) = child.try_wait().context(|| format!("waiting for {}", w.name))? {
                    let secs = start.elapsed().as_secs_f64();
                    if !status.success() {
                        return Err(BenchError::Command {
                            command: w.command.join(" "),
                            detail: format!("{status} (output in {})", env.log.display()),
                        });
                    }
                    return Ok(Launched { secs, running: None });
                }
                if start.elapsed() > timeout || interrupt::requested() {
                    guard.child = Some(child);
                    drop(guard);
                    interrupt::check()?;
                    return Err(BenchError::TimedOut {
                        command: w.command.join(" "),
                        detail: format!("did not finish within {} s", w.timeout_secs),
                    });
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        Ready::Window => {
            let watcher =
                watcher.ok_or_else(|| BenchError::Usage(format!("{}: a window workload needs the X server", w.name)))?;
            watcher.drain()?;
            let start = Instant::now();
            let child = cmd.spawn().map_err(|e| spawn_error(w, e))?;
            let mut running = Running { child: Some(child), name: w.name.clone(), marker };
            let command = w.command.join(" ");
            let log = env.log.clone();
            let seen = watcher.wait_for_window(start + timeout, || {
                (!running.alive()).then(|| BenchError::Command {
                    command: command.clone(),
                    detail: format!("exited before showing a window (output in {})", log.display()),
                })
            })?;
            Ok(Launched { secs: seen.duration_since(start).as_secs_f64(), running: Some(running) })
        }
    }
}

fn spawn_error(w: &Workload, e: std::io::Error) -> BenchError {
    BenchError::Command { command: w.command.join(" "), detail: format!("cannot start: {e}") }
}

/// Runs `w` again and again for `secs` (commands) or keeps it open that long (windows), so that a
/// prefetcher sees it. Returns the number of launches.
pub fn train(env: &LaunchEnv, w: &Workload, secs: u64, mut watcher: Option<&mut WindowWatcher>) -> Result<u32> {
    let end = Instant::now() + Duration::from_secs(secs);
    let mut launches = 0;
    loop {
        let launched = launch(env, w, watcher.as_deref_mut())?;
        launches += 1;
        if let Some(running) = launched.running {
            interrupt::sleep(end.saturating_duration_since(Instant::now()))?;
            running.close()?;
        }
        if Instant::now() >= end {
            return Ok(launches);
        }
    }
}

/// Runs a set-up tool (not a workload) to completion: its standard output, or an error with
/// its last error line.
pub fn tool_output(cmd: &mut Command, what: &str) -> Result<String> {
    let out = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .output()
        .map_err(|e| BenchError::Command { command: what.into(), detail: format!("cannot start: {e}") })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(BenchError::Command { command: what.into(), detail: err.lines().last().unwrap_or("failed").to_string() })
    }
}

/// Removes `path`; a file already absent is not an error.
pub fn remove_file_if_any(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(BenchError::io(format!("removing {}", path.display()), e)),
        _ => Ok(()),
    }
}

/// Whether a command exists on PATH (or as a path).
pub fn command_exists(program: &str) -> bool {
    if program.contains('/') {
        return Path::new(program).exists();
    }
    std::env::var_os("PATH").map(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file())).unwrap_or(false)
}
