//! `augur-bench boot`: boots a real systemd userspace again and again under four setups (no
//! prefetcher, Debian's preload 0.6.4, augur's `augur-boot.service`, and augur started before
//! systemd by `augur-init`) and reports the time to `multi-user.target` and to the autostarted
//! application's first window, from systemd's own timestamps inside the booted system (counted
//! from the container's start) (docs/boot.md, "The boot benchmark").
//!
//! The system is a debootstrap'ed Debian 12 in an ext4 image (built by `scripts/bench-boot-image`),
//! attached as a loop device with direct I/O, throttled to the slow-disk profile by a block-I/O
//! cgroup on that device, and booted by `systemd-nspawn`. Before each boot the image is detached
//! and every cache dropped, so each boot reads from the throttled disk.
//!
//! It owns each setup's switches in the image, one boot's life (attach, throttle, boot, read the
//! timestamps, detach) and the report; it must not build the image nor learn anything itself.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{BenchError, IoContext, Result};
use crate::throttle::{DiskThrottle, ThrottledCgroup};
use crate::{interrupt, launch, page_cache, stats};

/// The unit `augur` ships for boot prefetching, enabled in the image in augur's setup.
pub const AUGUR_BOOT_UNIT: &str = include_str!("../../../packaging/augur-boot.service");

/// Where the image is built and the runs keep their files.
pub const WORK_DIR: &str = "/var/cache/augur-bench/boot";

/// Where the package installs `augur-init` (the kernel's `init=`).
pub const INIT_PATH: &str = "/usr/sbin/augur-init";

/// What runs at boot besides the system itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootSetup {
    /// Nothing prefetches.
    Plain,
    /// Debian's `preload` 0.6.4 package as installed (its init script, at idle I/O priority).
    Preload,
    /// `augur-boot.service` as shipped (packaging/), with the shipped configuration.
    Augur,
    /// The same, booted with `init=/usr/sbin/augur-init` (an opt-in): `augur boot` starts before
    /// systemd, and the unit is skipped.
    AugurInit,
}

impl BootSetup {
    /// Every setup, in the order each round boots them.
    pub const ALL: [BootSetup; 4] = [BootSetup::Plain, BootSetup::Preload, BootSetup::Augur, BootSetup::AugurInit];

    /// The name in tables.
    pub fn describe(self) -> &'static str {
        match self {
            BootSetup::Plain => "no prefetcher",
            BootSetup::Preload => "preload 0.6.4 (Debian's package)",
            BootSetup::Augur => "augur (augur-boot.service)",
            BootSetup::AugurInit => "augur (init=/usr/sbin/augur-init)",
        }
    }

    /// The name on the command line and in log directories.
    pub fn arg(self) -> &'static str {
        match self {
            BootSetup::Plain => "plain",
            BootSetup::Preload => "preload",
            BootSetup::Augur => "augur",
            BootSetup::AugurInit => "augur-init",
        }
    }
}

impl std::str::FromStr for BootSetup {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        BootSetup::ALL
            .into_iter()
            .find(|b| b.arg() == s)
            .ok_or_else(|| format!("no setup {s:?} (plain, preload, augur, augur-init)"))
    }
}

/// One boot's figures: seconds from the container's start (or from systemd's, see [`parse_show`]),
/// and what it read from its disk.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BootTimes {
    /// systemd started (its `UserspaceTimestampMonotonic`): later than the container's start by
    /// nspawn's own setting up, and by `augur-init`'s handover where it runs first.
    pub systemd_s: f64,
    /// `multi-user.target` reached (`ActiveEnterTimestampMonotonic`).
    pub target_s: f64,
    /// The application's first visible window (`bench-window.service`'s
    /// `ExecMainExitTimestampMonotonic`: its `xdotool search --sync` returned).
    pub window_s: f64,
    /// MiB read from the image's loop device during the whole boot (prefetching included).
    pub read_mib: f64,
}

/// The timestamps of one boot as `bench-report` (in the image) writes them: blocks of
/// `systemctl show -p ...` output (`KEY=VALUE` lines, monotonic microseconds) separated by
/// blank lines, the manager's block first, then one per unit with its `Id=`. Returns the times in
/// seconds after `origin_us` (the container's start on the same monotonic clock; the manager's
/// start when `None`) (`read_mib` 0); an error names what is missing, zero (never happened) or
/// failed.
pub fn parse_show(text: &str, origin_us: Option<u64>) -> std::result::Result<BootTimes, String> {
    let mut userspace = None;
    let mut target = None;
    let mut window = None;
    for block in text.split("\n\n") {
        let get = |key: &str| block.lines().find_map(|l| l.trim_end().strip_prefix(key)?.strip_prefix('='));
        let micros = |key: &str, what: &str| -> std::result::Result<u64, String> {
            let value = get(key).ok_or_else(|| format!("{what}: no {key}"))?;
            match value.parse::<u64>() {
                Ok(0) => Err(format!("{what}: {key} is 0 (it never happened)")),
                Ok(v) => Ok(v),
                Err(_) => Err(format!("{what}: {key}={value:?} is not a number of microseconds")),
            }
        };
        if get("UserspaceTimestampMonotonic").is_some() {
            userspace = Some(micros("UserspaceTimestampMonotonic", "systemd")?);
        }
        match get("Id") {
            Some("multi-user.target") => target = Some(micros("ActiveEnterTimestampMonotonic", "multi-user.target")?),
            Some(id @ "bench-window.service") => {
                let result = get("Result").unwrap_or("");
                let status = get("ExecMainStatus").unwrap_or("");
                if result != "success" || status != "0" {
                    return Err(format!("{id}: the window never showed (Result={result}, ExecMainStatus={status})"));
                }
                window = Some(micros("ExecMainExitTimestampMonotonic", id)?);
            }
            _ => {}
        }
    }
    let userspace = userspace.ok_or("no UserspaceTimestampMonotonic of systemd")?;
    let origin = origin_us.unwrap_or(userspace);
    if userspace < origin {
        return Err(format!("systemd started at {userspace} us, before the container ({origin} us)"));
    }
    let since = |t: Option<u64>, what: &str| -> std::result::Result<f64, String> {
        let t = t.ok_or_else(|| format!("no timestamps of {what}"))?;
        if t < userspace {
            return Err(format!("{what} at {t} us, before systemd started ({userspace} us)"));
        }
        Ok((t - origin) as f64 / 1e6)
    };
    Ok(BootTimes {
        systemd_s: (userspace - origin) as f64 / 1e6,
        target_s: since(target, "multi-user.target")?,
        window_s: since(window, "bench-window.service")?,
        read_mib: 0.0,
    })
}

/// The image attached as a loop device (direct I/O: the image file's own pages are never
/// cached) and mounted; dropping it unmounts (which evicts the file system's pages) and detaches.
#[derive(Debug)]
pub struct AttachedImage {
    device: String,
    root: PathBuf,
    mounted: bool,
}

impl AttachedImage {
    /// Attaches `image` (to `device`, `/dev/loopN`, when given; else the first free loop
    /// device) and mounts it on `root` (created if missing).
    pub fn attach(image: &Path, root: &Path, device: Option<&str>) -> Result<AttachedImage> {
        if !image.is_file() {
            return Err(BenchError::NotFound { path: image.to_path_buf() });
        }
        fs::create_dir_all(root).context(|| format!("creating {}", root.display()))?;
        let mut losetup = Command::new("losetup");
        losetup.arg("--direct-io=on");
        match device {
            Some(d) => losetup.arg(d).arg(image),
            None => losetup.args(["--find", "--show"]).arg(image),
        };
        let device = match (launch::tool_output(&mut losetup, "losetup"), device) {
            (Ok(out), None) => out.trim().to_string(),
            (Ok(_), Some(d)) => d.to_string(),
            // Still attached to this image: its file system outlived the last unmount (another
            // process held it open); mounting the same device again reuses it, nothing doubles.
            (Err(_), Some(d)) if backing_file(d).is_some_and(|b| b == image) => d.to_string(),
            (Err(e), _) => return Err(e),
        };
        let mut attached = AttachedImage { device, root: root.to_path_buf(), mounted: false };
        launch::tool_output(Command::new("mount").arg(&attached.device).arg(root), "mount")?;
        attached.mounted = true;
        Ok(attached)
    }

    /// The loop device, `/dev/loopN`.
    pub fn device(&self) -> &str {
        &self.device
    }

    /// The mounted root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The loop device as "MAJ:MIN".
    pub fn device_number(&self) -> Result<String> {
        let st = rustix::fs::stat(self.device.as_str()).map_err(|e| BenchError::io(format!("stat {}", self.device), e.into()))?;
        Ok(format!("{}:{}", rustix::fs::major(st.st_rdev), rustix::fs::minor(st.st_rdev)))
    }
}

impl Drop for AttachedImage {
    fn drop(&mut self) {
        // A process that holds a file or the mount open (an augur daemon watching every mount)
        // delays the unmount: try for up to 10 s.
        let umount = |args: &[&str]| {
            Command::new("umount").args(args).arg(&self.root).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
        };
        if self.mounted && !(0..40).any(|_| umount(&[]) || wait_a_little()) {
            // Detached lazily: the next boot mounts the same device, which reuses it.
            umount(&["-l"]);
        }
        let _ = Command::new("losetup").args(["-d", &self.device]).status();
    }
}

/// Sleeps 250 ms; false (to go on trying).
fn wait_a_little() -> bool {
    std::thread::sleep(Duration::from_millis(250));
    false
}

/// The file a loop device (`/dev/loopN`) is attached to, if any.
fn backing_file(device: &str) -> Option<PathBuf> {
    let name = Path::new(device).file_name()?.to_str()?;
    let text = fs::read_to_string(format!("/sys/block/{name}/loop/backing_file")).ok()?;
    Some(PathBuf::from(text.trim()))
}

/// What `scripts/build-deb` strips from the binary it packages: the image gets `augur` as the
/// package installs it. The release build keeps debug info for profiling, 61 MiB against 8; on
/// the throttled disk its exec alone read 16 MiB (the loop device's 2.5 MiB read-around pulls in
/// the debug sections between the code it faults), 0.4 s of the 40 MB/s disk in the middle of
/// the boot it is meant to speed up.
const STRIP_LIKE_THE_PACKAGE: [&str; 3] = ["--strip-unneeded", "--remove-section=.comment", "--remove-section=.note"];

/// At the start of a run: every setup learns from nothing (preload's and augur's states
/// removed) and the image holds this build's `augur`, stripped as the package strips it.
pub fn reset_learning(root: &Path, augur_exe: &Path) -> Result<()> {
    launch::remove_file_if_any(&root.join("var/lib/preload/preload.state"))?;
    for setup in [None, Some(BootSetup::Augur), Some(BootSetup::AugurInit)] {
        let state = augur_state_dir(root, setup);
        if state.exists() {
            fs::remove_dir_all(&state).context(|| format!("removing {}", state.display()))?;
        }
    }
    let installed = root.join("usr/bin/augur");
    launch::tool_output(
        Command::new("strip").args(STRIP_LIKE_THE_PACKAGE).arg("-o").arg(&installed).arg(augur_exe),
        "strip (binutils)",
    )?;
    fs::set_permissions(&installed, fs::Permissions::from_mode(0o755)).context(|| format!("chmod {}", installed.display()))?;
    // augur-init, built beside augur, stripped and installed as scripts/build-deb does.
    let init = root.join(INIT_PATH.trim_start_matches('/'));
    launch::remove_file_if_any(&init)?;
    let built = augur_exe.with_file_name("augur-init");
    launch::tool_output(Command::new("strip").args(STRIP_LIKE_THE_PACKAGE).arg("-o").arg(&init).arg(&built), "strip (binutils)")?;
    fs::set_permissions(&init, fs::Permissions::from_mode(0o755)).context(|| format!("chmod {}", init.display()))?;
    Ok(())
}

/// augur's state directory in the image (`None`), or where a setup's is kept while the other
/// augur setup boots.
fn augur_state_dir(root: &Path, parked: Option<BootSetup>) -> PathBuf {
    root.join(match parked {
        None => "var/lib/augur".to_string(),
        Some(s) => format!("var/lib/augur.{}", s.arg()),
    })
}

/// Names the setup whose state `var/lib/augur` holds.
const STATE_OWNER: &str = ".augur-bench-setup";

/// Gives augur's state directory to `setup`: each augur setup learns from its own boots only
/// (the other's is parked beside it).
fn switch_augur_state(root: &Path, setup: BootSetup) -> Result<()> {
    let live = augur_state_dir(root, None);
    let owner = fs::read_to_string(live.join(STATE_OWNER)).ok().and_then(|t| t.trim().parse::<BootSetup>().ok());
    if live.exists() && owner != Some(setup) {
        let parked = augur_state_dir(root, Some(owner.unwrap_or(BootSetup::Augur)));
        if parked.exists() {
            fs::remove_dir_all(&parked).context(|| format!("removing {}", parked.display()))?;
        }
        fs::rename(&live, &parked).context(|| format!("parking {}", live.display()))?;
    }
    let mine = augur_state_dir(root, Some(setup));
    if !live.exists() && mine.exists() {
        fs::rename(&mine, &live).context(|| format!("restoring {}", mine.display()))?;
    }
    fs::create_dir_all(&live).context(|| format!("creating {}", live.display()))?;
    fs::set_permissions(&live, fs::Permissions::from_mode(0o700)).context(|| format!("chmod {}", live.display()))?;
    fs::write(live.join(STATE_OWNER), setup.arg()).context(|| format!("writing {}", live.display()))?;
    Ok(())
}

/// Switches the image to `setup`: preload masked except in its setup, `augur-boot.service`
/// (as shipped, with the shipped configuration) pulled into `sysinit.target` only in augur's;
/// and the seconds the booted system stays up after the window (the prefetchers' learning).
pub fn configure(root: &Path, setup: BootSetup, augur_config: &str, hold_secs: u64) -> Result<()> {
    let units = root.join("etc/systemd/system");
    let mask = units.join("preload.service");
    launch::remove_file_if_any(&mask)?;
    if setup != BootSetup::Preload {
        symlink("/dev/null", &mask).context(|| format!("masking {}", mask.display()))?;
    }
    let wants_dir = units.join("sysinit.target.wants");
    let wants = wants_dir.join("augur-boot.service");
    launch::remove_file_if_any(&wants)?;
    if matches!(setup, BootSetup::Augur | BootSetup::AugurInit) {
        fs::write(units.join("augur-boot.service"), AUGUR_BOOT_UNIT).context(|| "writing augur-boot.service".into())?;
        fs::create_dir_all(&wants_dir).context(|| format!("creating {}", wants_dir.display()))?;
        symlink("/etc/systemd/system/augur-boot.service", &wants).context(|| format!("enabling {}", wants.display()))?;
        let etc = root.join("etc/augur");
        fs::create_dir_all(&etc).context(|| format!("creating {}", etc.display()))?;
        fs::write(etc.join("config.toml"), augur_config).context(|| "writing the image's augur config".into())?;
        launch::remove_file_if_any(&etc.join("no-boot-prefetch"))?;
        switch_augur_state(root, setup)?;
    }
    let env = root.join("etc/augur-bench/env");
    fs::write(&env, format!("HOLD_SECS={hold_secs}\n")).context(|| format!("writing {}", env.display()))?;
    Ok(())
}

/// The booted container: `systemd-nspawn -b` on the mounted image. Dropping it before it ended
/// asks it to power off (SIGTERM), then kills it and its init.
#[derive(Debug)]
struct Container {
    nspawn: Child,
}

impl Container {
    fn boot(root: &Path, setup: BootSetup, out: &Path, log: &Path) -> Result<Container> {
        let file = |p: &Path| fs::File::create(p).context(|| format!("creating {}", p.display()));
        // `-b` starts the image's own init; augur-init's setup starts `/usr/sbin/augur-init` as
        // the container's PID 1 instead (the kernel's `init=`), stopped as `-b` stops systemd.
        let init: &[&str] = if setup == BootSetup::AugurInit { &["--kill-signal=SIGRTMIN+3", "--", INIT_PATH] } else { &["-b"] };
        let nspawn = Command::new("systemd-nspawn")
            .arg("-D")
            .arg(root)
            .args(["--register=no", "--keep-unit", "--console=passive", "--machine=augur-bench-boot"])
            .arg(format!("--bind={}:/bench-out", out.display()))
            // augur-boot reads page events from tracefs (every setup gets the same mounts).
            .arg("--bind=/sys/kernel/tracing")
            .args(["--capability=CAP_BPF,CAP_PERFMON", "--system-call-filter=fanotify_init fanotify_mark bpf perf_event_open"])
            .args(init)
            .stdin(Stdio::null())
            .stdout(file(log)?)
            .stderr(file(&log.with_extension("err"))?)
            .spawn()
            .map_err(|e| BenchError::Command { command: "systemd-nspawn".into(), detail: format!("cannot start: {e}") })?;
        Ok(Container { nspawn })
    }

    /// Waits until the container powered off; false when `limit` passed first.
    fn wait(&mut self, limit: Duration) -> Result<bool> {
        let until = Instant::now() + limit;
        loop {
            if self.nspawn.try_wait().context(|| "waiting for systemd-nspawn".into())?.is_some() {
                return Ok(true);
            }
            if Instant::now() > until {
                return Ok(false);
            }
            interrupt::sleep(Duration::from_millis(200))?;
        }
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.nspawn.try_wait() {
            return;
        }
        let pid = self.nspawn.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.nspawn.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // The container's init is nspawn's child: killing it ends every process inside.
        if let Ok(out) = Command::new("pgrep").args(["-P", &pid]).output() {
            for child in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                let _ = Command::new("kill").args(["-KILL", child]).status();
            }
        }
        let _ = self.nspawn.kill();
        let _ = self.nspawn.wait();
    }
}

/// What one run of boots needs.
#[derive(Debug, Clone)]
pub struct BootBench {
    /// The image built by scripts/bench-boot-image.
    pub image: PathBuf,
    /// Where the image is mounted, the booted system's reports land and the logs are kept.
    pub work_dir: PathBuf,
    /// The augur configuration installed in the image (the shipped one).
    pub augur_config: String,
    /// Seconds the system stays up after the window, so that preload (20 s cycles) and augur
    /// (recording until 30 s after login) learn the boot.
    pub hold_secs: u64,
    /// Longest a boot may take, from start to power-off.
    pub boot_timeout: Duration,
    /// The disk's limits.
    pub throttle: DiskThrottle,
    /// The loop device every boot attaches the image to, chosen by [`BootBench::reset`]: the
    /// same one each boot, as a machine's disk, since augur's file identities hold the device
    /// number (another would make every file look replaced).
    pub loop_device: Option<String>,
}

impl BootBench {
    fn root(&self) -> PathBuf {
        self.work_dir.join("root")
    }

    /// Before the first boot: every setup learns from nothing, with this `augur`.
    pub fn reset(&mut self, augur_exe: &Path) -> Result<()> {
        // A loop device still attached to the image (its file system held open past an earlier
        // run) is the one to use: a second device would mount the image twice.
        let held = fs::read_dir("/sys/block").ok().and_then(|d| {
            d.flatten()
                .map(|e| format!("/dev/{}", e.file_name().to_string_lossy()))
                .find(|dev| dev.starts_with("/dev/loop") && backing_file(dev).is_some_and(|b| b == self.image))
        });
        let image = AttachedImage::attach(&self.image, &self.root(), held.as_deref())?;
        self.loop_device = Some(image.device().to_string());
        reset_learning(image.root(), augur_exe)
    }

    /// Attaches to the run's loop device; while it is still held (the last boot's file system
    /// is released late when another process held it open), retries for 20 s.
    fn attach(&self) -> Result<AttachedImage> {
        for _ in 0..40 {
            match AttachedImage::attach(&self.image, &self.root(), self.loop_device.as_deref()) {
                Err(BenchError::Command { .. }) => std::thread::sleep(Duration::from_millis(500)),
                other => return other,
            }
        }
        // Never another device: the image may still be mounted from the first, and a second
        // mount of the same file system would corrupt it.
        AttachedImage::attach(&self.image, &self.root(), self.loop_device.as_deref())
    }

    /// Boots once under `setup`, every cache dropped first; the boot's files (nspawn's console,
    /// the timestamps, the prefetchers' journal) are kept in `logs`. An error that is the boot's
    /// own (it never reached the target or the window, or did not power off in time) is
    /// `Ok(Err(reason))`: the run goes on.
    pub fn boot_once(&self, setup: BootSetup, logs: &Path) -> Result<std::result::Result<BootTimes, String>> {
        let out = self.work_dir.join("out");
        let _ = fs::remove_dir_all(&out);
        fs::create_dir_all(&out).context(|| format!("creating {}", out.display()))?;
        fs::create_dir_all(logs).context(|| format!("creating {}", logs.display()))?;
        {
            let image = self.attach()?;
            configure(image.root(), setup, &self.augur_config, self.hold_secs)?;
        }
        augur_os::fetch::drop_all_caches()?;
        let image = self.attach()?;
        let device = image.device_number()?;
        let read_before = page_cache::disk_sectors_read(&device)?;
        let origin_us;
        let ended = {
            let _throttle = ThrottledCgroup::enter_on(self.throttle, device.clone())?;
            // Times count from here: an init that runs before systemd is in them.
            origin_us = augur_os::sense::monotonic_us();
            let mut container = Container::boot(image.root(), setup, &out, &logs.join("nspawn.log"))?;
            container.wait(self.boot_timeout)?
        };
        let read_mib = (page_cache::disk_sectors_read(&device)?.saturating_sub(read_before) * 512) as f64 / (1 << 20) as f64;
        for name in ["show.txt", "journal.txt"] {
            let _ = fs::copy(out.join(name), logs.join(name));
        }
        drop(image);
        let show = match fs::read_to_string(out.join("show.txt")) {
            Ok(text) => text,
            Err(_) => return Ok(Err(format!("the boot wrote no timestamps (see {})", logs.display()))),
        };
        let times = parse_show(&show, Some(origin_us)).map(|t| BootTimes { read_mib, ..t });
        if !ended && times.is_ok() {
            return Ok(Err(format!("it did not power off within {:?} (see {})", self.boot_timeout, logs.display())));
        }
        Ok(times)
    }
}

/// One setup's boots.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SetupBoots {
    /// Measured boots.
    pub boots: Vec<BootTimes>,
    /// Measured boots that failed, with why.
    pub failed: Vec<String>,
}

/// "mean ± sd" with two decimals.
fn mean_sd(values: &[f64]) -> String {
    if values.is_empty() {
        return "–".into();
    }
    format!("{:.2} ± {:.2}", stats::mean(values), stats::stddev(values))
}

/// One figure of a boot, for the table's columns.
type Metric = fn(&BootTimes) -> f64;

/// The context printed above the table.
#[derive(Debug, Clone)]
pub struct BootReportContext {
    /// Unmeasured boots per setup first (they learn without a plan).
    pub warmup_boots: usize,
    /// The disk's limits.
    pub throttle: DiskThrottle,
    /// Seconds each boot stayed up after the window.
    pub hold_secs: u64,
    /// What was done to the guest's free memory (free page reporting), empty if nothing.
    pub host_memory: String,
}

/// The Markdown section body: one row per setup (boots, time to `multi-user.target` and to the
/// application's first window as mean ± sample standard deviation, MiB read), then whether
/// augur's means are lower than both others' (issue 23's acceptance).
pub fn markdown(ctx: &BootReportContext, rows: &[(BootSetup, SetupBoots)]) -> String {
    let mut out = format!(
        "Each setup booted in turn, round after round, each round starting one setup later; the first {} boot(s) of each setup dropped (learning from nothing), \
         every cache dropped and the disk throttled to {} read IOPS and {:.0} MB/s before each boot; the system stayed up {} s \
         after the window (the prefetchers' learning){}. Seconds from the container's start (`systemd-nspawn` started, on the \
         monotonic clock the booted system shares), mean ± sample standard deviation; systemd starts later by nspawn's \
         setting up and, where `augur-init` runs first, by its handover (`UserspaceTimestampMonotonic`); MiB read from \
         the system's disk in the whole boot, prefetching included.\n\n",
        ctx.warmup_boots,
        ctx.throttle.read_iops,
        ctx.throttle.read_bps as f64 / 1e6,
        ctx.hold_secs,
        if ctx.host_memory.is_empty() { String::new() } else { format!("; {}", ctx.host_memory) }
    );
    out.push_str(
        "| setup | boots | systemd started, s | to multi-user.target, s | to AbiWord's first window, s | read, MiB | failed |\n",
    );
    out.push_str("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    let column = |r: &SetupBoots, f: Metric| r.boots.iter().map(f).collect::<Vec<f64>>();
    for (setup, r) in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            setup.describe(),
            r.boots.len(),
            mean_sd(&column(r, |b| b.systemd_s)),
            mean_sd(&column(r, |b| b.target_s)),
            mean_sd(&column(r, |b| b.window_s)),
            mean_sd(&column(r, |b| b.read_mib)),
            r.failed.len()
        ));
    }
    let mean_of = |s: BootSetup, f: Metric| {
        rows.iter().find(|(x, r)| *x == s && !r.boots.is_empty()).map(|(_, r)| stats::mean(&column(r, f)))
    };
    let metrics: [(&str, Metric); 2] = [("multi-user.target", |b| b.target_s), ("the window", |b| b.window_s)];
    for ((what, f), augur_setup) in metrics.into_iter().flat_map(|m| [(m, BootSetup::Augur), (m, BootSetup::AugurInit)]) {
        let Some(augur) = mean_of(augur_setup, f) else { continue };
        let others: Vec<(BootSetup, f64)> =
            [BootSetup::Plain, BootSetup::Preload].into_iter().filter_map(|s| mean_of(s, f).map(|m| (s, m))).collect();
        if others.is_empty() {
            continue;
        }
        let lower = others.iter().all(|(_, m)| augur < *m);
        let versus: Vec<String> = others.iter().map(|(s, m)| format!("{:+.2} s against {}", augur - m, s.describe())).collect();
        out.push_str(&format!(
            "\n{}'s mean time to {what} is {} than every other setup's ({}).",
            augur_setup.describe(),
            if lower { "lower" } else { "not lower" },
            versus.join(", ")
        ));
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHOW: &str = "UserspaceTimestampMonotonic=2000000\nFinishTimestampMonotonic=9000000\n\n\
                        Id=multi-user.target\nActiveEnterTimestampMonotonic=7500000\nExecMainExitTimestampMonotonic=0\n\
                        ExecMainStatus=0\nResult=success\n\n\
                        Id=bench-window.service\nActiveEnterTimestampMonotonic=14250000\n\
                        ExecMainExitTimestampMonotonic=14200000\nExecMainStatus=0\nResult=success\n";

    #[test]
    fn times_are_seconds_after_systemd_started() {
        let t = parse_show(SHOW, None).unwrap();
        assert_eq!((t.systemd_s, t.target_s, t.window_s, t.read_mib), (0.0, 5.5, 12.2, 0.0));
        // From the container's start, 0.5 s before systemd's.
        let c = parse_show(SHOW, Some(1_500_000)).unwrap();
        assert_eq!((c.systemd_s, c.target_s, c.window_s), (0.5, 6.0, 12.7));
        assert!(parse_show(SHOW, Some(2_500_000)).unwrap_err().contains("before the container"));
        // Unit blocks in any order.
        let (manager, units) = SHOW.split_once("\n\n").unwrap();
        let (target, window) = units.split_once("\n\n").unwrap();
        assert_eq!(parse_show(&format!("{window}\n{manager}\n\n{target}"), None).unwrap(), t);
    }

    #[test]
    fn a_boot_that_missed_a_step_says_which() {
        let never = SHOW.replace("ActiveEnterTimestampMonotonic=7500000", "ActiveEnterTimestampMonotonic=0");
        assert!(parse_show(&never, None).unwrap_err().contains("multi-user.target: ActiveEnterTimestampMonotonic is 0"));
        let timeout = SHOW.replace("ExecMainStatus=0\nResult=success\n", "ExecMainStatus=0\nResult=timeout\n");
        let e = parse_show(&timeout, None).unwrap_err();
        assert!(e.contains("bench-window.service") && e.contains("Result=timeout"), "{e}");
        let no_manager = SHOW.split_once("\n\n").unwrap().1;
        assert!(parse_show(no_manager, None).unwrap_err().contains("UserspaceTimestampMonotonic"));
        let no_window = SHOW.split("\n\n").take(2).collect::<Vec<_>>().join("\n\n");
        assert!(parse_show(&no_window, None).unwrap_err().contains("no timestamps of bench-window.service"));
        assert!(parse_show(&SHOW.replace("=7500000", "=n/a"), None).unwrap_err().contains("not a number"));
        assert!(parse_show(&SHOW.replace("=7500000", "=1000"), None).unwrap_err().contains("before systemd started"));
        assert!(parse_show("", None).is_err());
    }

    #[test]
    fn setups_round_trip() {
        for s in BootSetup::ALL {
            assert_eq!(s.arg().parse::<BootSetup>().unwrap(), s);
        }
        assert!("ureadahead".parse::<BootSetup>().is_err());
    }

    #[test]
    fn configure_switches_the_prefetchers_in_the_image() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("etc/systemd/system")).unwrap();
        fs::create_dir_all(root.join("etc/augur-bench")).unwrap();
        let units = root.join("etc/systemd/system");
        configure(root, BootSetup::Augur, "[boot]\n", 45).unwrap();
        assert_eq!(fs::read_link(units.join("preload.service")).unwrap(), Path::new("/dev/null"));
        assert_eq!(fs::read_to_string(units.join("augur-boot.service")).unwrap(), AUGUR_BOOT_UNIT);
        assert!(fs::symlink_metadata(units.join("sysinit.target.wants/augur-boot.service")).is_ok());
        assert_eq!(fs::read_to_string(root.join("etc/augur/config.toml")).unwrap(), "[boot]\n");
        assert_eq!(fs::read_to_string(root.join("etc/augur-bench/env")).unwrap(), "HOLD_SECS=45\n");
        fs::write(root.join("var/lib/augur/state.db"), "unit's").unwrap();
        // augur-init's setup: the same unit (skipped by its condition when augur-init ran), its own state.
        configure(root, BootSetup::AugurInit, "[boot]\n", 45).unwrap();
        assert!(fs::symlink_metadata(units.join("sysinit.target.wants/augur-boot.service")).is_ok());
        assert!(!root.join("var/lib/augur/state.db").exists(), "augur-init's boots learn from their own");
        fs::write(root.join("var/lib/augur/state.db"), "init's").unwrap();
        configure(root, BootSetup::Augur, "[boot]\n", 45).unwrap();
        assert_eq!(fs::read_to_string(root.join("var/lib/augur/state.db")).unwrap(), "unit's");
        configure(root, BootSetup::AugurInit, "[boot]\n", 45).unwrap();
        assert_eq!(fs::read_to_string(root.join("var/lib/augur/state.db")).unwrap(), "init's");
        configure(root, BootSetup::Preload, "", 30).unwrap();
        assert!(fs::symlink_metadata(units.join("preload.service")).is_err(), "preload unmasked");
        assert!(fs::symlink_metadata(units.join("sysinit.target.wants/augur-boot.service")).is_err(), "augur off");
        configure(root, BootSetup::Plain, "", 30).unwrap();
        assert!(fs::symlink_metadata(units.join("preload.service")).is_ok(), "masked again");
        assert!(fs::symlink_metadata(units.join("sysinit.target.wants/augur-boot.service")).is_err());
    }

    #[test]
    fn table_says_whether_augur_is_lower_than_both() {
        let b = |t: f64, w: f64| BootTimes { systemd_s: 0.1, target_s: t, window_s: w, read_mib: 100.0 };
        let ctx =
            BootReportContext { warmup_boots: 1, throttle: DiskThrottle::default(), hold_secs: 45, host_memory: String::new() };
        let rows = vec![
            (BootSetup::Plain, SetupBoots { boots: vec![b(6.0, 12.0), b(8.0, 14.0)], failed: vec![] }),
            (BootSetup::Preload, SetupBoots { boots: vec![b(6.5, 11.0), b(6.5, 11.0)], failed: vec!["x".into()] }),
            (BootSetup::Augur, SetupBoots { boots: vec![b(5.0, 11.5), b(5.0, 11.5)], failed: vec![] }),
        ];
        let md = markdown(&ctx, &rows);
        let lines: Vec<&str> = md.lines().filter(|l| l.starts_with("| ")).collect();
        assert_eq!(lines.len(), 5, "{md}");
        assert!(lines[2].contains("| 2 | 0.10 ± 0.00 | 7.00 ± 1.41 | 13.00 ± 1.41 | 100.00 ± 0.00 | 0 |"), "{}", lines[2]);
        assert!(lines[3].ends_with("| 1 |"), "{}", lines[3]);
        assert!(
            md.contains("augur (augur-boot.service)'s mean time to multi-user.target is lower than every other setup's (-2.00 s against no prefetcher"),
            "{md}"
        );
        assert!(!md.contains("augur-init)'s mean"), "a setup not booted has no verdict: {md}");
        assert!(md.contains("to the window is not lower"), "{md}");
        assert!(md.contains("200 read IOPS and 40 MB/s"), "{md}");
    }
}
