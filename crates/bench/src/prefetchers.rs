//! The prefetch daemons under test, started and stopped by the suite with state, log, socket
//! and configuration in the suite's own directory: preload 0.6.4 (`preload -f -s STATE -l LOG`,
//! its default configuration otherwise), preload-ng (the strongest peer, built by
//! scripts/bench-setup; its defaults but the cycle and the state file) and augur's daemon as
//! installed (`packaging/config.toml` with the suite's state and socket) and in two variants,
//! exec-time replay only and with prediction.
//!
//! It owns their processes (stopped with the signal on which each saves its state, and killed if
//! they do not exit) and knows when one has finished its first planning round and what it
//! decided to load; it does not time workloads.

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
    /// preload-ng, the strongest peer.
    PreloadNg,
    /// `augur daemon` as installed: the shipped configuration.
    Augur,
    /// `augur daemon`, exec-time replay only.
    AugurReplay,
    /// `augur daemon` with prediction.
    AugurPredict,
}

impl Prefetcher {
    /// Every prefetcher, in the order the suite probes them.
    pub const ALL: [Prefetcher; 5] = [Self::Preload, Self::PreloadNg, Self::Augur, Self::AugurReplay, Self::AugurPredict];

    /// Name in outputs.
    pub fn name(self) -> &'static str {
        match self {
            Self::Preload => "preload",
            Self::PreloadNg => "preload-ng",
            Self::Augur => "augur",
            Self::AugurReplay => "augur-replay",
            Self::AugurPredict => "augur-predict",
        }
    }

    /// The program, where configurations do not matter (who watched training, daemon costs):
    /// augur's three configurations are one daemon.
    pub fn program(self) -> &'static str {
        match self {
            Self::Preload => "preload",
            Self::PreloadNg => "preload-ng",
            Self::Augur | Self::AugurReplay | Self::AugurPredict => "augur",
        }
    }

    /// Whether this is one of augur's configurations (they share one state file and socket).
    pub fn is_augur(self) -> bool {
        self.program() == "augur"
    }

    /// Whether it loads pages ahead of launches on its own, at start and every cycle (so a
    /// measurement waits for its first cycle), rather than only when a launch is exec'd.
    /// augur as installed does when `packaging/config.toml` turns prediction on
    /// ([`shipped_augur_predicts`]).
    pub fn prefetches_ahead(self) -> bool {
        match self {
            Self::Preload | Self::PreloadNg | Self::AugurPredict => true,
            Self::AugurReplay => false,
            Self::Augur => shipped_augur_predicts(),
        }
    }

    /// Whether one of augur's variants runs what augur as installed already runs, as far as
    /// prefetching goes (prediction on in both, or off in both): measuring it again would
    /// measure nothing new. The variants differ from the shipped file in their log level and
    /// re-plan interval only.
    pub fn same_as_installed(self) -> bool {
        match self {
            Self::AugurPredict => shipped_augur_predicts(),
            Self::AugurReplay => !shipped_augur_predicts(),
            _ => false,
        }
    }
}

/// Whether the shipped configuration (`packaging/config.toml`, with the engine's defaults for
/// what it leaves commented out) has `[predict] enabled`.
pub fn shipped_augur_predicts() -> bool {
    augur_engine::config::Config::parse(SHIPPED_AUGUR_CONFIG, Path::new("packaging/config.toml")).is_ok_and(|c| c.predict.enabled)
}

/// The daemons that watch training, the usage day's training days and the idle cost: every
/// available prefetcher, but one augur daemon (its configurations share state and socket), as
/// installed when it is measured, else with prediction, else replay only. augur records the
/// same launches and exits whichever configuration watches.
pub fn watching(available: &[Prefetcher]) -> Vec<Prefetcher> {
    let augur =
        [Prefetcher::Augur, Prefetcher::AugurPredict, Prefetcher::AugurReplay].into_iter().find(|k| available.contains(k));
    available.iter().copied().filter(|k| !k.is_augur() || Some(*k) == augur).collect()
}

/// The log every augur daemon of a run appends to, in the run's daemon directory `dir`.
pub fn augur_log_in(dir: &Path) -> PathBuf {
    dir.join("augur-daemon.log")
}

/// What augur's log says over a whole run: how each daemon observed, and launches it could not
/// learn because they were traced late (the observation issue's criterion: none).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct AugurLogSummary {
    /// Daemons started, by observation mode ("bpf", "tracefs", ...), in the order first seen.
    pub modes: Vec<(String, u64)>,
    /// Launches not learned because they were traced late in their window.
    pub launches_traced_late: u64,
}

impl AugurLogSummary {
    /// Reads the summary from the text of augur's log.
    pub fn of_log(text: &str) -> Self {
        let mut summary = AugurLogSummary::default();
        for line in text.lines() {
            if let Some(rest) = line.split("augur daemon ready: learning in ").nth(1) {
                let mode = rest.split(" mode").next().unwrap_or("").to_string();
                match summary.modes.iter_mut().find(|(m, _)| *m == mode) {
                    Some((_, n)) => *n += 1,
                    None => summary.modes.push((mode, 1)),
                }
            } else if line.contains("not learned: it was traced from") {
                summary.launches_traced_late += 1;
            }
        }
        summary
    }
}

/// Where scripts/bench-setup installs preload-ng's daemon.
pub const PRELOAD_NG_INSTALLED: &str = "/usr/local/libexec/augur-bench/preload-ng";

/// The preload-ng daemon the suite runs: `$PRELOAD_NG_BIN` when set, else
/// [`PRELOAD_NG_INSTALLED`]. It may not exist; see [`peer_not_found`].
pub fn preload_ng_exe() -> PathBuf {
    std::env::var_os("PRELOAD_NG_BIN").map_or_else(|| PathBuf::from(PRELOAD_NG_INSTALLED), PathBuf::from)
}

/// Why a peer built by scripts/bench-setup is not measured: its binary is missing.
pub fn peer_not_found(exe: &Path) -> String {
    format!("binary not found at {}; run scripts/bench-setup", exe.display())
}

/// preload-ng's log filter (`RUST_LOG`): its usual info lines, plus the planner's trace line
/// that says what each cycle decided to load (`prefetch plan created selected=N total_bytes=B`),
/// the only line preload-ng writes per cycle.
pub const PRELOAD_NG_LOG_FILTER: &str = "info,orchestrator::prefetch::planner=trace";

/// The line preload-ng's planner logs once per cycle, before it prefetches.
const PRELOAD_NG_PLAN_LINE: &str = "prefetch plan created";

/// The augur daemon configuration installed by the package.
pub const SHIPPED_AUGUR_CONFIG: &str = include_str!("../../../packaging/config.toml");

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
    /// The preload-ng executable (it may be missing).
    pub preload_ng_exe: PathBuf,
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
    /// preload-ng's state database.
    pub fn preload_ng_state(&self) -> PathBuf {
        self.dir.join("preload-ng.db")
    }
    fn preload_ng_log(&self) -> PathBuf {
        self.dir.join("preload-ng.log")
    }
    fn preload_ng_config(&self) -> Result<PathBuf> {
        let path = self.dir.join("preload-ng.toml");
        let text = preload_ng_config_text(&self.preload_ng_state(), self.cycle_secs);
        fs::write(&path, text).context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }
    fn augur_installed_config(&self, shipped: &str) -> Result<PathBuf> {
        let path = self.dir.join("augur-installed.toml");
        let text = installed_config_text(shipped, &self.augur_state(), &self.augur_socket());
        fs::write(&path, text).context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }
    fn augur_log(&self) -> PathBuf {
        augur_log_in(&self.dir)
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

/// preload-ng's configuration in the suite: its defaults (`docs/config.example.toml` says the
/// same) but the cycle, the suite's as preload's, and the state file in the session. Given with
/// `--config`, so no /etc, user or working-directory configuration is read.
pub fn preload_ng_config_text(state: &Path, cycle_secs: u64) -> String {
    format!(
        "# Written by augur-bench --suite: preload-ng's defaults but the cycle (the suite's, as preload's)\n\
         # and the state file.\n[model]\ncycle = {cycle_secs}\n\n[persistence]\nstate_path = {state:?}\nsave_on_shutdown = true\n"
    )
}

/// augur's daemon as installed: the shipped configuration text with `[daemon] state_path` and
/// `socket_path` set to the suite's (an uncommented value of either is replaced); nothing else
/// changes, not even the log level (the suite waits for the daemon's socket, not a log line).
pub fn installed_config_text(shipped: &str, state: &Path, socket: &Path) -> String {
    let ours = format!("state_path = {state:?}\nsocket_path = {socket:?}\n");
    let mut out = String::from("# Written by augur-bench --suite: packaging/config.toml, but the state and socket paths.\n");
    let mut in_daemon = false;
    let mut placed = false;
    for line in shipped.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            in_daemon = trimmed == "[daemon]";
        }
        let key = (!trimmed.starts_with('#')).then(|| trimmed.split_once('=').map(|(k, _)| k.trim())).flatten();
        if in_daemon && matches!(key, Some("state_path" | "socket_path")) {
            continue;
        }
        out.push_str(line);
        out.push('\n');
        if in_daemon && !placed && trimmed == "[daemon]" {
            out.push_str(&ours);
            placed = true;
        }
    }
    if !placed {
        out.push_str("\n[daemon]\n");
        out.push_str(&ours);
    }
    out
}

/// `cmd` run through a shell that first moves itself into each of `cgroups` (their
/// `cgroup.procs`) and then execs it: the same process, born in those cgroups.
fn born_in_cgroups(cmd: &Command, cgroups: &[PathBuf]) -> Command {
    let script = r#"for d in $AUGUR_BENCH_CGROUPS; do echo $$ > "$d/cgroup.procs" || exit 97; done; exec "$@""#;
    let first = ["-c", script, "augur-bench-daemon"].map(std::ffi::OsStr::new);
    let mut sh = rebuilt(cmd, std::ffi::OsStr::new("/bin/sh"), &[&first[..], &[cmd.get_program()]].concat());
    let dirs: Vec<String> = cgroups.iter().map(|d| d.display().to_string()).collect();
    sh.env("AUGUR_BENCH_CGROUPS", dirs.join(" "));
    sh
}

/// The CPU and I/O priorities `kind` runs at as its package installs it, as wrappers that set
/// them and exec it: augur's unit (`packaging/augur.service`: `Nice=5`,
/// `IOSchedulingClass=best-effort`, `IOSchedulingPriority=7`), Debian's preload init script
/// (`start-stop-daemon --iosched idle`, from `/etc/default/preload`). preload-ng sets its own
/// (nice 19) and is started as it is.
fn installed_priority(kind: Prefetcher) -> &'static [&'static str] {
    match kind {
        Prefetcher::Preload => &["ionice", "-c", "3"],
        k if k.is_augur() => &["nice", "-n", "5", "ionice", "-c", "2", "-n", "7"],
        _ => &[],
    }
}

/// `cmd` under the priority wrappers of `kind` as installed ([`installed_priority`]); the
/// daemon keeps the child's pid (each wrapper execs the next).
fn at_installed_priority(kind: Prefetcher, cmd: &Command) -> Command {
    let Some((first, rest)) = installed_priority(kind).split_first() else {
        return rebuilt(cmd, cmd.get_program(), &[]);
    };
    let mut args: Vec<&std::ffi::OsStr> = rest.iter().map(std::ffi::OsStr::new).collect();
    args.push(cmd.get_program());
    rebuilt(cmd, std::ffi::OsStr::new(first), &args)
}

/// A command running `program` with `first` then `cmd`'s arguments, and `cmd`'s environment.
fn rebuilt(cmd: &Command, program: &std::ffi::OsStr, first: &[&std::ffi::OsStr]) -> Command {
    let mut c = Command::new(program);
    c.args(first).args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c
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
        RunningDaemon::start_with(kind, files, SHIPPED_AUGUR_CONFIG)
    }

    /// [`RunningDaemon::start`], with `installed` (a configuration file's text) in place of
    /// packaging/config.toml for [`Prefetcher::Augur`]: a variant of the installed daemon, to
    /// split a cost between its parts.
    pub fn start_with(kind: Prefetcher, files: &DaemonFiles, installed: &str) -> Result<RunningDaemon> {
        RunningDaemon::start_in(kind, files, installed, &[])
    }

    /// [`RunningDaemon::start_with`], the daemon born in the cgroups `cgroups` (each a cgroup's
    /// directory, one per hierarchy): a shell writes its own pid into their `cgroup.procs`, then
    /// execs the daemon, so that everything the daemon allocates and reads from its first
    /// instruction on (its maps, its memory, its page cache, its disk reads) is charged there.
    pub fn start_in(kind: Prefetcher, files: &DaemonFiles, installed: &str, cgroups: &[PathBuf]) -> Result<RunningDaemon> {
        fs::create_dir_all(&files.dir).context(|| format!("creating {}", files.dir.display()))?;
        let (mut cmd, log) = match kind {
            Prefetcher::Preload => {
                let mut c = Command::new("preload");
                c.arg("-f").arg("-s").arg(files.preload_state()).arg("-l").arg(files.preload_log()).args(["-V", "10"]);
                (c, files.preload_log())
            }
            Prefetcher::PreloadNg => {
                if !files.preload_ng_exe.is_file() {
                    return Err(BenchError::Command {
                        command: kind.name().into(),
                        detail: peer_not_found(&files.preload_ng_exe),
                    });
                }
                let config = files.preload_ng_config()?;
                let mut c = Command::new(&files.preload_ng_exe);
                c.arg("--config").arg(config).arg("--state").arg(files.preload_ng_state());
                // Plain log lines (tracing's colours are off with NO_COLOR), and the planner's line.
                c.env("NO_COLOR", "1").env("RUST_LOG", PRELOAD_NG_LOG_FILTER);
                (c, files.preload_ng_log())
            }
            Prefetcher::Augur => {
                let config = files.augur_installed_config(installed)?;
                let _ = fs::remove_file(files.augur_socket());
                let mut c = Command::new(&files.augur_exe);
                c.arg("daemon").arg("--config").arg(config);
                (c, files.augur_log())
            }
            Prefetcher::AugurReplay | Prefetcher::AugurPredict => {
                let config = files.augur_config(kind == Prefetcher::AugurPredict)?;
                let _ = fs::remove_file(files.augur_socket());
                let mut c = Command::new(&files.augur_exe);
                c.arg("daemon").arg("--config").arg(config);
                (c, files.augur_log())
            }
        };
        cmd = at_installed_priority(kind, &cmd);
        if !cgroups.is_empty() {
            cmd = born_in_cgroups(&cmd, cgroups);
        }
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

    /// Waits until the daemon is up (augur: its socket exists; preload: its first cycle logged;
    /// preload-ng: its first cycle's plan logged).
    pub fn wait_ready(&mut self, limit: Duration) -> Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            self.check_alive()?;
            let ready = match self.kind {
                Prefetcher::Preload => self.log_since_start().contains("state predicting end"),
                Prefetcher::PreloadNg => self.log_since_start().contains(PRELOAD_NG_PLAN_LINE),
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

    /// The planning rounds augur's daemon has run since it started, as `augur status --json`
    /// counts them (`events.planning_rounds`, the "prediction: on (N planning rounds, ...)" of
    /// its text): read from the daemon itself, so it holds at the shipped log level too.
    /// `None` while the daemon does not answer.
    pub fn planning_rounds(&self, files: &DaemonFiles) -> Option<u64> {
        planning_rounds_of_status(&self.status_json(files)?)
    }

    /// `augur status --json` of this augur daemon, `None` while it does not answer.
    pub fn status_json(&self, files: &DaemonFiles) -> Option<Vec<u8>> {
        let out = Command::new(&files.augur_exe)
            .arg("status")
            .arg("--json")
            .arg("--socket")
            .arg(files.augur_socket())
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        out.status.success().then_some(out.stdout)
    }

    /// Waits for augur's first planning round (`augur status`'s counter), at most `limit`;
    /// fails when none comes, so that no replay-only figure is reported as prediction.
    pub fn wait_planning_round(&mut self, files: &DaemonFiles, limit: Duration) -> Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            self.check_alive()?;
            if self.planning_rounds(files).is_some_and(|n| n > 0) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(BenchError::Command {
                    command: self.kind.name().into(),
                    detail: format!(
                        "augur status counted no planning round within {} s of start: prediction is not active in this augur daemon",
                        limit.as_secs()
                    ),
                });
            }
            interrupt::sleep(Duration::from_millis(250))?;
        }
    }

    /// Waits for the daemon's first planning round after start to finish loading pages: preload
    /// and preload-ng plan their first cycle at once; augur plans as soon as it starts, from
    /// the launches it remembers (counted by `augur status`). Then waits until the daemon is done
    /// with its start-up work ([`RunningDaemon::wait_startup_end`]: its reads stopped and, for
    /// augur, no fetch running or owed, the free-memory tier's included), the page cache stops
    /// growing and the disk has read nothing for a second. Returns the daemon's own decision of
    /// how much to load, in bytes: preload's "using N kb", preload-ng's plan's `total_bytes`.
    pub fn wait_first_cycle(&mut self, files: &DaemonFiles, limit: Duration) -> Result<Option<u64>> {
        let start = Instant::now();
        self.wait_ready(limit)?;
        if self.kind.is_augur() {
            self.wait_planning_round(files, limit.saturating_sub(start.elapsed()).max(Duration::from_secs(1)))?;
        }
        // Done when the daemon has read nothing for a while: on a throttled disk a prefetch of
        // small scattered ranges fills the cache too slowly for "the cache stopped growing" to
        // mean "the prefetch is over". Both daemons' reads count to their own process.
        self.wait_startup_end(files, limit.saturating_sub(start.elapsed()).max(Duration::from_secs(1)))?;
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
            Prefetcher::PreloadNg => preload_ng_plan_bytes(&self.log_since_start()),
            _ => None,
        })
    }

    /// Waits until the daemon is done with its start-up work ([`StartupEnd`]): its bytes read
    /// (`/proc/PID/io`, all its threads) unchanged for [`READS_QUIET`] and, for augur, its status
    /// saying no prediction fetch runs or is owed ([`augur_startup_busy`]), at most `limit`. A
    /// fetch that waits for others' reads reads nothing meanwhile: by its reads alone augur's
    /// free-memory tier looked done while it still had applications to load, and a launch
    /// measured then raced their pages at its exec.
    pub fn wait_startup_end(&mut self, files: &DaemonFiles, limit: Duration) -> Result<()> {
        let started = Instant::now();
        let mut end = StartupEnd::new();
        loop {
            self.check_alive()?;
            let read = self.sample()?.read_bytes;
            let busy = if self.kind.is_augur() { augur_startup_busy(self.status_json(files).as_deref()) } else { None };
            if end.observe(started.elapsed(), read, busy) || started.elapsed() >= limit {
                return Ok(());
            }
            interrupt::sleep(Duration::from_millis(100))?;
        }
    }

    /// Counters now.
    pub fn sample(&self) -> Result<ProcessSample> {
        Ok(procfs::sample(self.pid())?)
    }

    /// Stops the daemon with the signal on which it saves its state (SIGTERM; preload-ng handles
    /// SIGINT only, and SIGTERM would kill it unsaved), SIGKILL after 20 s.
    pub fn stop(mut self) -> Result<()> {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        if let Some(p) = rustix::process::Pid::from_raw(child.id() as i32) {
            let _ = rustix::process::kill_process(p, stop_signal(self.kind));
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
        tracing::warn!("{} did not stop within 20 s of {:?}; killed", self.kind.name(), stop_signal(self.kind));
        Ok(())
    }
}

impl Drop for RunningDaemon {
    fn drop(&mut self) {
        let _ = self.stop_inner();
    }
}

fn socket_exists(log: &Path, d: &RunningDaemon) -> bool {
    d.kind.is_augur() && log.parent().is_some_and(|dir| dir.join("augur.sock").exists())
}

/// The signal on which a daemon saves its state and exits. preload-ng (0.3.2) waits for
/// `tokio::signal::ctrl_c`, SIGINT only: SIGTERM's default action would end it without saving
/// what it learned.
pub fn stop_signal(kind: Prefetcher) -> rustix::process::Signal {
    match kind {
        Prefetcher::PreloadNg => rustix::process::Signal::INT,
        _ => rustix::process::Signal::TERM,
    }
}

/// How long a prefetcher must have read nothing for its round to count as finished.
const READS_QUIET: Duration = Duration::from_millis(1500);

/// Whether a daemon is done with its start-up work (its first cycle: preload's and preload-ng's
/// first prefetch, augur's first planning round and the fetch it sent), from what is sampled
/// while it starts: its bytes read (`/proc/PID/io`) unchanged for [`READS_QUIET`] and, where the
/// daemon says so itself, nothing pending ([`augur_startup_busy`]). Pure: fed the samples.
#[derive(Clone, Debug, Default)]
pub struct StartupEnd {
    last_read: Option<u64>,
    unchanged_since: Duration,
}

impl StartupEnd {
    /// Nothing sampled yet.
    pub fn new() -> StartupEnd {
        StartupEnd::default()
    }

    /// A sample `at` after the daemon started: its bytes read, and whether it says it is busy
    /// (`None`: it says nothing). True once its start-up is over.
    pub fn observe(&mut self, at: Duration, read_bytes: u64, busy: Option<bool>) -> bool {
        if self.last_read != Some(read_bytes) {
            self.last_read = Some(read_bytes);
            self.unchanged_since = at;
        }
        busy != Some(true) && at.saturating_sub(self.unchanged_since) >= READS_QUIET
    }
}

/// Whether augur says it is still at its start-up work, from its `augur status --json`: busy
/// while it does not answer, before its first planning round, and while a prediction fetch runs
/// or a round is owed (`prediction_fetch_busy`); `None` when this augur does not report that
/// (its bytes read alone then tell, and a fetch waiting for others' reads looks done).
pub fn augur_startup_busy(status_json: Option<&[u8]>) -> Option<bool> {
    let Some(json) = status_json else { return Some(true) };
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(json) else { return Some(true) };
    if v.get("events").and_then(|e| e.get("planning_rounds")).and_then(|n| n.as_u64()).unwrap_or(0) == 0 {
        return Some(true);
    }
    v.get("prediction_fetch_busy").and_then(|b| b.as_bool())
}
/// How long the disk must have completed no read for a prefetch to count as finished.
const DISK_QUIET: Duration = Duration::from_millis(1000);

/// The "using N kb" preload logs per prediction round (its prefetch decision), last one.
pub fn preload_using_kb(log: &str) -> Option<u64> {
    log.lines().rev().find_map(|l| {
        let (_, rest) = l.split_once("available for preloading, using ")?;
        rest.split("kb").next()?.trim().parse().ok()
    })
}

/// The `total_bytes` of the last plan preload-ng logged (the maps it decided to load this
/// cycle, before skipping resident pages). Tolerates tracing's ANSI colours.
pub fn preload_ng_plan_bytes(log: &str) -> Option<u64> {
    log.lines().rev().find_map(|l| {
        let l = strip_ansi(l);
        let (_, fields) = l.split_once(PRELOAD_NG_PLAN_LINE)?;
        fields.split_whitespace().find_map(|f| f.strip_prefix("total_bytes=")?.parse().ok())
    })
}

/// `line` without ANSI escape sequences (`ESC [ ... letter`).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `events.planning_rounds` of `augur status --json` output.
pub fn planning_rounds_of_status(json: &[u8]) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_slice(json).ok()?;
    v.get("events")?.get("planning_rounds")?.as_u64()
}

/// What augur's own accounting says it prefetched and wasted, when its `augur status --json`
/// has it: the first object anywhere in the report holding both `prefetched_bytes` and
/// `wasted_bytes` (the prefetch ledger's totals). `None` when this augur does not report them.
pub fn ledger_of_status(json: &[u8]) -> Option<(u64, u64)> {
    fn find(v: &serde_json::Value) -> Option<(u64, u64)> {
        match v {
            serde_json::Value::Object(m) => {
                if let (Some(p), Some(w)) =
                    (m.get("prefetched_bytes").and_then(|x| x.as_u64()), m.get("wasted_bytes").and_then(|x| x.as_u64()))
                {
                    return Some((p, w));
                }
                m.values().find_map(find)
            }
            serde_json::Value::Array(a) => a.iter().find_map(find),
            _ => None,
        }
    }
    find(&serde_json::from_slice(json).ok()?)
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
    fn augur_runs_at_the_priorities_its_unit_sets() {
        let unit = include_str!("../../../packaging/augur.service");
        for line in ["Nice=5", "IOSchedulingClass=best-effort", "IOSchedulingPriority=7"] {
            assert!(unit.lines().any(|l| l == line), "packaging/augur.service no longer says {line}: update installed_priority");
        }
        let cmd = at_installed_priority(Prefetcher::Augur, Command::new("/x/augur").arg("daemon"));
        let argv: Vec<&std::ffi::OsStr> = std::iter::once(cmd.get_program()).chain(cmd.get_args()).collect();
        assert_eq!(argv, ["nice", "-n", "5", "ionice", "-c", "2", "-n", "7", "/x/augur", "daemon"]);
        let plain = at_installed_priority(Prefetcher::PreloadNg, Command::new("/x/cli").arg("--config"));
        assert_eq!(plain.get_program(), "/x/cli");
    }

    #[test]
    fn a_daemon_born_in_cgroups_joins_them_then_runs_as_itself() {
        let mut cmd = Command::new("/usr/bin/augur");
        cmd.arg("daemon").arg("--config").arg("/tmp/c.toml").env("RUST_LOG", "info");
        let dirs = [PathBuf::from("/sys/fs/cgroup/memory/x"), PathBuf::from("/sys/fs/cgroup/blkio/x")];
        let sh = born_in_cgroups(&cmd, &dirs);
        assert_eq!(sh.get_program(), "/bin/sh");
        let args: Vec<_> = sh.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert!(args[1].contains("cgroup.procs") && args[1].ends_with(r#"exec "$@""#), "{args:?}");
        assert_eq!(&args[2..], ["augur-bench-daemon", "/usr/bin/augur", "daemon", "--config", "/tmp/c.toml"]);
        let envs: Vec<_> = sh.get_envs().map(|(k, v)| (k.to_owned(), v.map(|v| v.to_owned()))).collect();
        assert!(envs.contains(&("RUST_LOG".into(), Some("info".into()))));
        assert!(envs.contains(&("AUGUR_BENCH_CGROUPS".into(), Some("/sys/fs/cgroup/memory/x /sys/fs/cgroup/blkio/x".into()))));
    }

    #[test]
    fn start_up_ends_when_reads_stop_and_the_daemon_says_nothing_is_pending() {
        let ms = Duration::from_millis;
        let mut e = StartupEnd::new();
        assert!(!e.observe(ms(0), 0, None));
        assert!(!e.observe(ms(1000), 10 << 20, None), "reading");
        assert!(!e.observe(ms(2000), 10 << 20, None), "quiet for 1 s only");
        assert!(e.observe(ms(2500), 10 << 20, None), "quiet for 1.5 s");
        // A daemon that says it is busy (a fetch waiting for others' reads) is not done.
        let mut e = StartupEnd::new();
        assert!(!e.observe(ms(0), 5, Some(true)));
        assert!(!e.observe(ms(9000), 5, Some(true)));
        assert!(e.observe(ms(9250), 5, Some(false)), "reads were quiet all along");
    }

    #[test]
    fn augur_says_whether_its_start_up_is_pending() {
        let busy = |j: &str| augur_startup_busy(Some(j.as_bytes()));
        assert_eq!(augur_startup_busy(None), Some(true), "not answering");
        assert_eq!(busy("garbage"), Some(true));
        assert_eq!(busy(r#"{"events": {"planning_rounds": 0}, "prediction_fetch_busy": false}"#), Some(true), "no round yet");
        assert_eq!(busy(r#"{"events": {"planning_rounds": 2}, "prediction_fetch_busy": true}"#), Some(true));
        assert_eq!(busy(r#"{"events": {"planning_rounds": 2}, "prediction_fetch_busy": false}"#), Some(false));
        assert_eq!(busy(r#"{"events": {"planning_rounds": 2}}"#), None, "an augur that does not say");
    }

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
    fn preload_ng_log_decision() {
        // As tracing-subscriber's fmt writes them, plain and coloured.
        let log = "2026-04-20T10:00:00.123456Z  INFO cli: prefetcher auto-selected concurrency=1 backend=\"readahead\"\n\
                   2026-04-20T10:00:00.200000Z TRACE orchestrator::prefetch::planner: prefetch plan created selected=3 total_bytes=4096\n\
                   2026-04-20T10:00:20.200000Z TRACE orchestrator::prefetch::planner: prefetch plan created selected=41 total_bytes=73400320\n";
        assert_eq!(preload_ng_plan_bytes(log), Some(73_400_320));
        let coloured = "\u{1b}[2m2026-04-20T10:00:00Z\u{1b}[0m \u{1b}[35mTRACE\u{1b}[0m \u{1b}[2morchestrator::prefetch::planner\u{1b}[0m\u{1b}[2m:\u{1b}[0m prefetch plan created \u{1b}[3mselected\u{1b}[0m\u{1b}[2m=\u{1b}[0m0 \u{1b}[3mtotal_bytes\u{1b}[0m\u{1b}[2m=\u{1b}[0m0";
        assert_eq!(preload_ng_plan_bytes(coloured), Some(0));
        assert_eq!(preload_ng_plan_bytes("INFO cli: process nice value set nice=19\n"), None);
        assert_eq!(strip_ansi("\u{1b}[3mx\u{1b}[0m=1"), "x=1");
    }

    #[test]
    fn preload_ng_config_sets_cycle_and_state_only() {
        let t = preload_ng_config_text(Path::new("/s/preload-ng.db"), 20);
        let v: toml::Table = toml::from_str(&t).unwrap();
        assert_eq!(v["model"].as_table().unwrap().len(), 1);
        assert_eq!(v["model"]["cycle"].as_integer(), Some(20));
        assert_eq!(v["persistence"]["state_path"].as_str(), Some("/s/preload-ng.db"));
        assert_eq!(v["persistence"]["save_on_shutdown"].as_bool(), Some(true));
        assert_eq!(v.len(), 2);
    }

    #[test]
    fn missing_peer_says_where_and_what_to_run() {
        let msg = peer_not_found(Path::new("/nowhere/preload-ng"));
        assert_eq!(msg, "binary not found at /nowhere/preload-ng; run scripts/bench-setup");
        let files = DaemonFiles {
            dir: std::env::temp_dir().join(format!("augur-bench-test-{}", std::process::id())),
            augur_exe: PathBuf::from("/nowhere/augur"),
            preload_ng_exe: PathBuf::from("/nowhere/preload-ng"),
            cycle_secs: 20,
        };
        let err = RunningDaemon::start(Prefetcher::PreloadNg, &files).unwrap_err().to_string();
        assert_eq!(err, format!("preload-ng: {msg}"));
        let _ = fs::remove_dir_all(&files.dir);
    }

    #[test]
    fn preload_ng_saves_on_sigint_only() {
        assert_eq!(stop_signal(Prefetcher::PreloadNg), rustix::process::Signal::INT);
        assert_eq!(stop_signal(Prefetcher::Preload), rustix::process::Signal::TERM);
        assert_eq!(stop_signal(Prefetcher::Augur), rustix::process::Signal::TERM);
    }

    #[test]
    fn installed_config_is_the_shipped_one_but_state_and_socket() {
        use augur_engine::config::Config;
        let (state, socket) = (Path::new("/s/augur-state.db"), Path::new("/s/augur.sock"));
        let text = installed_config_text(SHIPPED_AUGUR_CONFIG, state, socket);
        let ours = Config::parse(&text, Path::new("installed.toml")).unwrap();
        let mut shipped = Config::parse(SHIPPED_AUGUR_CONFIG, Path::new("packaging/config.toml")).unwrap();
        shipped.daemon.state_path = state.to_path_buf();
        shipped.daemon.socket_path = socket.to_path_buf();
        assert_eq!(ours, shipped);
        // An uncommented value in the shipped file is replaced, not duplicated.
        let set = "[daemon]\nstate_path = \"/var/lib/augur/state.db\"\nlog_level = \"warn\"\n[predict]\nenabled = false\n";
        let v: toml::Table = toml::from_str(&installed_config_text(set, state, socket)).unwrap();
        assert_eq!(v["daemon"]["state_path"].as_str(), Some("/s/augur-state.db"));
        assert_eq!(v["daemon"]["log_level"].as_str(), Some("warn"));
        // No [daemon] table: one is added.
        let v: toml::Table = toml::from_str(&installed_config_text("[predict]\n", state, socket)).unwrap();
        assert_eq!(v["daemon"]["socket_path"].as_str(), Some("/s/augur.sock"));
    }

    #[test]
    fn as_installed_waits_for_prediction_when_the_package_turns_it_on() {
        // The suite waits for the as-installed daemon's first planning round exactly when the
        // shipped file predicts, and skips the variant that would measure the same thing.
        let c = augur_engine::config::Config::parse(SHIPPED_AUGUR_CONFIG, Path::new("packaging/config.toml")).unwrap();
        assert!(c.launch.replay_on_exec);
        assert_eq!(Prefetcher::Augur.prefetches_ahead(), c.predict.enabled);
        assert_eq!(Prefetcher::AugurPredict.same_as_installed(), c.predict.enabled);
        assert_eq!(Prefetcher::AugurReplay.same_as_installed(), !c.predict.enabled);
        assert!(Prefetcher::AugurPredict.prefetches_ahead() && !Prefetcher::AugurReplay.prefetches_ahead());
    }

    #[test]
    fn status_json_counters() {
        let status = br#"{"pid":1,"events":{"replays":2,"planning_rounds":7},"recent_launches":[]}"#;
        assert_eq!(planning_rounds_of_status(status), Some(7));
        assert_eq!(planning_rounds_of_status(b"{\"events\":{}}"), None);
        assert_eq!(planning_rounds_of_status(b"not json"), None);
        assert_eq!(ledger_of_status(status), None);
        let with_ledger =
            br#"{"events":{"planning_rounds":1},"accuracy":{"day":{"prefetched_bytes":100,"used_bytes":60,"wasted_bytes":30}}}"#;
        assert_eq!(ledger_of_status(with_ledger), Some((100, 30)));
    }

    #[test]
    fn one_augur_daemon_watches() {
        use Prefetcher::*;
        assert_eq!(watching(&[Preload, PreloadNg, Augur, AugurReplay, AugurPredict]), [Preload, PreloadNg, Augur]);
        assert_eq!(watching(&[Preload, AugurReplay, AugurPredict]), [Preload, AugurPredict]);
        assert_eq!(watching(&[AugurReplay]), [AugurReplay]);
        assert_eq!(watching(&[]), []);
    }

    #[test]
    fn augur_config_is_toml() {
        let t = augur_config_text(Path::new("/tmp/s.db"), Path::new("/tmp/a.sock"), true, 20);
        let v: toml::Table = toml::from_str(&t).unwrap();
        assert_eq!(v["predict"]["enabled"].as_bool(), Some(true));
        assert_eq!(v["daemon"]["socket_path"].as_str(), Some("/tmp/a.sock"));
    }

    #[test]
    fn augur_log_summary_counts_modes_and_late_launches() {
        let log = "2026-11-24T21:00:00Z  INFO augur daemon ready: learning in bpf mode; 0 applications known; state s, socket t\n\
                   2026-11-24T21:00:01Z  INFO launch of /usr/bin/node not learned: it was traced from 30 ms after its exec, late in its 200 ms window, so what it used is known only in part\n\
                   2026-11-24T21:01:00Z  INFO augur daemon ready: learning in bpf mode (better modes not used: none); 3 applications known\n\
                   2026-11-24T21:02:00Z  INFO augur daemon ready: learning in tracefs mode; 3 applications known\n";
        let s = AugurLogSummary::of_log(log);
        assert_eq!(s.modes, vec![("bpf".to_string(), 2), ("tracefs".to_string(), 1)]);
        assert_eq!(s.launches_traced_late, 1);
        assert_eq!(AugurLogSummary::of_log(""), AugurLogSummary::default());
    }
}
