//! The prefetch daemons under test, started and stopped by the suite with state, log, socket
//! and configuration in the suite's own directory: preload 0.6.4 (`preload -f -s STATE -l LOG`,
//! its default configuration otherwise) and augur's daemon in two configurations, exec-time
//! replay only and with prediction.
//!
//! It owns their processes (stopped with SIGTERM, so that they save their state, and killed if
//! they do not exit) and knows when one has finished its first planning round; it does not time
//! workloads.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{BenchError, IoContext, Result};
use crate::{interrupt, page_cache};
use augur_os::sense::procfs::{self, ProcessSample};

/// Which prefetcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Prefetcher {
    /// preload 0.6.4.
    Preload,
    /// `augur daemon`, exec-time replay only.
    AugurReplay,
    /// `augur daemon` with prediction.
    AugurPredict,
}

impl Prefetcher {
    /// Name in outputs.
    pub fn name(self) -> &'static str {
        match self {
            Self::Preload => "preload",
            Self::AugurReplay => "augur-replay",
            Self::AugurPredict => "augur-predict",
        }
    }
}

/// The `augur` executable the suite runs as a daemon: `$AUGUR_BIN` when set, else the one built
/// beside this `augur-bench` (cargo puts both in the same target directory).
pub fn augur_beside_me() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("AUGUR_BIN") {
        return Ok(PathBuf::from(p));
    }
    let me = std::env::current_exe().map_err(|e| BenchError::io("finding the augur-bench executable", e))?;
    let augur = me.with_file_name("augur");
    if augur.is_file() { Ok(augur) } else { Err(BenchError::NotFound { path: augur }) }
}

/// Where the daemons keep their files during a suite.
#[derive(Debug, Clone)]
pub struct DaemonFiles {
    /// Directory holding everything below.
    pub dir: PathBuf,
    /// The augur executable.
    pub augur_exe: PathBuf,
    /// preload's cycle, seconds (its default configuration says 20): augur's re-plan interval is
    /// set to the same so both get the same waits.
    pub cycle_secs: u64,
}

impl DaemonFiles {
    /// preload's state file.
    pub fn preload_state(&self) -> PathBuf {
        self.dir.join("preload.state")
    }
    fn preload_log(&self) -> PathBuf {
        self.dir.join("preload.log")
    }
    fn augur_log(&self) -> PathBuf {
        self.dir.join("augur-daemon.log")
    }
    /// augur's state database.
    pub fn augur_state(&self) -> PathBuf {
        self.dir.join("augur-state.db")
    }
    /// augur's control socket.
    pub fn augur_socket(&self) -> PathBuf {
        self.dir.join("augur.sock")
    }
    fn augur_config(&self, predict: bool) -> Result<PathBuf> {
        let path = self.dir.join(if predict { "augur-predict.toml" } else { "augur-replay.toml" });
        let text = augur_config_text(&self.augur_state(), &self.augur_socket(), predict, self.cycle_secs);
        fs::write(&path, text).context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }
}

/// The augur daemon configuration the suite uses (see docs/config.md): its own state and socket,
/// debug logging, prediction on or off, re-planning every preload cycle.
pub fn augur_config_text(state: &Path, socket: &Path, predict: bool, cycle_secs: u64) -> String {
    format!(
        "# Written by augur-bench --suite.\n[daemon]\nstate_path = {state:?}\nsocket_path = {socket:?}\nlog_level = \"debug\"\n\n\
         [launch]\nreplay_on_exec = true\n\n[predict]\nenabled = {predict}\nreplan_interval_secs = {cycle_secs}\n"
    )
}

/// A prefetch daemon started by the suite. Dropping it stops it.
#[derive(Debug)]
pub struct RunningDaemon {
    /// Which one.
    pub kind: Prefetcher,
    child: Option<Child>,
    log: PathBuf,
    log_start: u64,
    /// When it was started.
    pub started: Instant,
    /// Its counters right after start.
    pub at_start: ProcessSample,
}

impl RunningDaemon {
    /// Starts `kind`. Fails with a one-line reason when it cannot run here (not installed, not
    /// implemented in this build, exits at once).
    pub fn start(kind: Prefetcher, files: &DaemonFiles) -> Result<RunningDaemon> {
        fs::create_dir_all(&files.dir).context(|| format!("creating {}", files.dir.display()))?;
        let (mut cmd, log) = match kind {
            Prefetcher::Preload => {
                let mut c = Command::new("preload");
                c.arg("-f").arg("-s").arg(files.preload_state()).arg("-l").arg(files.preload_log()).args(["-V", "10"]);
                (c, files.preload_log())
            }
            Prefetcher::AugurReplay | Prefetcher::AugurPredict => {
                let config = files.augur_config(kind == Prefetcher::AugurPredict)?;
                let _ = fs::remove_file(files.augur_socket());
                let mut c = Command::new(&files.augur_exe);
                c.arg("daemon").arg("--config").arg(config);
                (c, files.augur_log())
            }
        };
        let log_start = fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
        let out = fs::OpenOptions::new().create(true).append(true).open(&log).context(|| format!("opening {}", log.display()))?;
        let err = out.try_clone().context(|| "cloning a log handle".into())?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        let child = cmd.spawn().map_err(|e| BenchError::Command {
            command: kind.name().into(),
            detail: format!("cannot start: {e} (install it with scripts/bench-setup)"),
        })?;
        let pid = child.id();
        let mut daemon = RunningDaemon {
            kind,
            child: Some(child),
            log,
            log_start,
            started: Instant::now(),
            at_start: ProcessSample::default(),
        };
        daemon.at_start = procfs::sample(pid).unwrap_or_default();
        Ok(daemon)
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Fails (with the last line of its log) if the daemon has exited.
    pub fn check_alive(&mut self) -> Result<()> {
        let Some(child) = self.child.as_mut() else {
            return Err(BenchError::Command { command: self.kind.name().into(), detail: "stopped".into() });
        };
        match child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => {
                let tail = self.log_since_start();
                // The first error line says why (clap, augur: ...), else the last line.
                let lines: Vec<&str> = tail.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
                let last = lines
                    .iter()
                    .find(|l| l.to_ascii_lowercase().contains("error"))
                    .or(lines.last())
                    .copied()
                    .unwrap_or("")
                    .to_string();
                Err(BenchError::Command { command: self.kind.name().into(), detail: format!("exited ({status}): {last}") })
            }
            Err(e) => Err(BenchError::io("checking a daemon", e)),
        }
    }

    fn log_since_start(&self) -> String {
        let text = fs::read(&self.log).unwrap_or_default();
        String::from_utf8_lossy(text.get(self.log_start as usize..).unwrap_or(&[])).into_owned()
    }

    /// Waits until the daemon is up (augur: its socket exists; preload: its first cycle logged).
    pub fn wait_ready(&mut self, limit: Duration) -> Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            self.check_alive()?;
            let ready = match self.kind {
                Prefetcher::Preload => self.log_since_start().contains("state predicting end"),
                _ => self.log_since_start().contains("daemon ready") || socket_exists(&self.log, self),
            };
            if ready {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(BenchError::Command {
                    command: self.kind.name().into(),
                    detail: format!("not ready after {} s (log: {})", limit.as_secs(), self.log.display()),
                });
            }
            interrupt::sleep(Duration::from_millis(50))?;
        }
    }

    /// Whether augur's daemon has logged a planning round since it started (a debug line that
    /// mentions planning). Without one, `[predict] enabled = true` is not prediction.
    pub fn saw_planning_round(&self) -> bool {
        self.log_since_start().lines().any(|l| {
            let l = l.to_ascii_lowercase();
            l.contains("plan") && !l.contains("failed")
        })
    }

    /// Waits for augur's first planning round (its re-plan interval is the preload cycle), at
    /// most `limit`; fails when none is logged, so that no replay-only figure is reported as
    /// prediction.
    pub fn wait_planning_round(&mut self, limit: Duration) -> Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            self.check_alive()?;
            if self.saw_planning_round() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(BenchError::Command {
                    command: self.kind.name().into(),
                    detail: format!(
                        "no planning round logged within {} s of start: prediction is not active in this augur daemon",
                        limit.as_secs()
                    ),
                });
            }
            interrupt::sleep(Duration::from_millis(100))?;
        }
    }

    /// Waits for the daemon's first planning round after start to finish loading pages: preload
    /// logs its first cycle at once; augur plans after its re-plan interval (set to preload's
    /// cycle). Then waits until the daemon stops reading, the page cache stops growing and the
    /// disk has read nothing for a second. Returns preload's "using N kb".
    pub fn wait_first_cycle(&mut self, limit: Duration, cycle: Duration) -> Result<Option<u64>> {
        let start = Instant::now();
        self.wait_ready(limit)?;
        if self.kind == Prefetcher::AugurPredict {
            self.wait_planning_round(cycle + Duration::from_secs(10))?;
        }
        // Done when the daemon has read nothing for a while: on a throttled disk a prefetch of
        // small scattered ranges fills the cache too slowly for "the cache stopped growing" to
        // mean "the prefetch is over". Both daemons' reads count to their own process.
        self.wait_until_reads_stop(READS_QUIET, limit.saturating_sub(start.elapsed()).max(Duration::from_secs(1)))?;
        let left = limit.saturating_sub(start.elapsed()).max(Duration::from_secs(1));
        page_cache::wait_until_quiet(Duration::from_millis(700), 2 << 20, left)?;
        // Reads a block throttle still holds back are part of the prefetch: wait for the disk.
        if let Ok(disk) = crate::throttle::root_disk() {
            let left = limit.saturating_sub(start.elapsed()).max(Duration::from_secs(1));
            page_cache::wait_until_disk_quiet(&disk, DISK_QUIET, left)?;
        }
        self.check_alive()?;
        Ok(match self.kind {
            Prefetcher::Preload => preload_using_kb(&self.log_since_start()).map(|kb| kb * 1024),
            _ => None,
        })
    }

    /// Waits until the daemon's bytes read from storage (`/proc/PID/io`, all its threads) have
    /// not changed for `quiet`, at most `limit`.
    pub fn wait_until_reads_stop(&mut self, quiet: Duration, limit: Duration) -> Result<()> {
        page_cache::wait_until_unchanged(quiet, limit, || {
            self.check_alive()?;
            Ok(self.sample()?.read_bytes)
        })
    }

    /// Counters now.
    pub fn sample(&self) -> Result<ProcessSample> {
        Ok(procfs::sample(self.pid())?)
    }

    /// Stops the daemon with SIGTERM (it saves its state), SIGKILL after 20 s.
    pub fn stop(mut self) -> Result<()> {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        if let Some(p) = rustix::process::Pid::from_raw(child.id() as i32) {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::TERM);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        tracing::warn!("{} did not stop within 20 s of SIGTERM; killed", self.kind.name());
        Ok(())
    }
}

impl Drop for RunningDaemon {
    fn drop(&mut self) {
        let _ = self.stop_inner();
    }
}

fn socket_exists(log: &Path, d: &RunningDaemon) -> bool {
    let _ = log;
    d.kind != Prefetcher::Preload && log.parent().is_some_and(|dir| dir.join("augur.sock").exists())
}

/// How long a prefetcher must have read nothing for its round to count as finished.
const READS_QUIET: Duration = Duration::from_millis(1500);
/// How long the disk must have completed no read for a prefetch to count as finished.
const DISK_QUIET: Duration = Duration::from_millis(1000);

/// The "using N kb" preload logs per prediction round (its prefetch decision), last one.
pub fn preload_using_kb(log: &str) -> Option<u64> {
    log.lines().rev().find_map(|l| {
        let (_, rest) = l.split_once("available for preloading, using ")?;
        rest.split("kb").next()?.trim().parse().ok()
    })
}

/// Whether preload's state file lists an executable whose path is `exe` (preload learned it).
pub fn preload_knows(state_text: &str, exe: &Path) -> bool {
    let want = format!("file://{}", exe.display());
    state_text.lines().any(|l| l.starts_with("EXE") && l.split_whitespace().last() == Some(want.as_str()))
}

/// Resolves a command name to the executable the kernel runs (PATH, then symlinks).
pub fn resolve_exe(program: &str) -> Option<PathBuf> {
    let p = if program.contains('/') {
        PathBuf::from(program)
    } else {
        let paths = std::env::var_os("PATH")?;
        std::env::split_paths(&paths).map(|d| d.join(program)).find(|p| p.is_file())?
    };
    fs::canonicalize(p).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preload_log_decision() {
        let log =
            "[x] 8323630kb available for preloading, using 0kb of it\n[y] 900kb available for preloading, using 512kb of it\n";
        assert_eq!(preload_using_kb(log), Some(512));
        assert_eq!(preload_using_kb("nothing"), None);
    }

    #[test]
    fn preload_state_exes() {
        let st = "PRELOAD\t0.6.4\t50\nEXE\t1\t20\t1\t-1\tfile:///usr/bin/xterm\nMAP\t1\t1\t0\t4096\t-1\tfile:///usr/lib/x.so\n";
        assert!(preload_knows(st, Path::new("/usr/bin/xterm")));
        assert!(!preload_knows(st, Path::new("/usr/lib/x.so")));
    }

    #[test]
    fn augur_config_is_toml() {
        let t = augur_config_text(Path::new("/tmp/s.db"), Path::new("/tmp/a.sock"), true, 20);
        let v: toml::Table = toml::from_str(&t).unwrap();
        assert_eq!(v["predict"]["enabled"].as_bool(), Some(true));
        assert_eq!(v["daemon"]["socket_path"].as_str(), Some("/tmp/a.sock"));
    }
}
