//! The daemon's configuration: TOML at `/etc/augur/config.toml` by default, every key with a
//! documented default (`docs/config.md`, `packaging/config.toml`), and strict checking: an unknown
//! key or a bad value is rejected with its line number so the daemon never starts half-configured.
//!
//! Owns parsing and validation only; it reads the one file it is given and nothing else.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use augur_core::model::boot::BootSettings;
use augur_core::model::learn::LearnSettings;
use augur_core::model::record::StateLimits;

/// Invalid configuration: what is wrong, in which file, on which line (1-based, when known).
/// The daemon refuses to start (or, on reload, keeps the old configuration) rather than guess.
#[derive(Debug, thiserror::Error)]
#[error("{}{}: {detail}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ConfigError {
    /// The configuration file.
    pub path: PathBuf,
    /// The line the problem is on, 1-based, when known.
    pub line: Option<usize>,
    /// What is wrong, e.g. "learn.decay: 1.5 is not in (0, 1]".
    pub detail: String,
}

/// Result alias of configuration parsing.
pub type Result<T, E = ConfigError> = std::result::Result<T, E>;

/// Where the daemon keeps its state unless configured otherwise.
pub const DEFAULT_STATE_PATH: &str = "/var/lib/augur/state.db";

/// Where the configuration is read from unless `--config` says otherwise.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/augur/config.toml";

/// Where the daemon listens for `augur status`, `apps`, `forget` unless configured otherwise.
pub const DEFAULT_SOCKET_PATH: &str = "/run/augur/augur.sock";

/// Largest `[launch] replay_pad_pages`: 1,024 pages each side (4 MiB of 4 KiB pages), half the
/// largest read-around a kernel does; more would be reading whole files.
pub const MAX_REPLAY_PAD_PAGES: u64 = 1024;

/// Log verbosity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Errors only.
    Error,
    /// Warnings and errors.
    Warn,
    /// Start-up, launches learned, warnings (the default).
    Info,
    /// Every launch window and replay.
    Debug,
    /// Everything.
    Trace,
}

impl LogLevel {
    /// The `tracing` level.
    pub fn level(self) -> tracing::Level {
        match self {
            LogLevel::Error => tracing::Level::ERROR,
            LogLevel::Warn => tracing::Level::WARN,
            LogLevel::Info => tracing::Level::INFO,
            LogLevel::Debug => tracing::Level::DEBUG,
            LogLevel::Trace => tracing::Level::TRACE,
        }
    }
}

/// I/O priority class replay reads run in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReplayPriority {
    /// Only when the disk is otherwise idle: never slows anything, may lose the race with the app.
    Idle,
    /// Normal best-effort class at its lowest level: races the application fairly.
    BestEffort,
}

/// `[daemon]`: where things live and how much is logged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DaemonSection {
    /// SQLite state file.
    pub state_path: PathBuf,
    /// Unix control socket.
    pub socket_path: PathBuf,
    /// Log level.
    pub log_level: LogLevel,
}

impl Default for DaemonSection {
    fn default() -> Self {
        DaemonSection {
            state_path: PathBuf::from(DEFAULT_STATE_PATH),
            socket_path: PathBuf::from(DEFAULT_SOCKET_PATH),
            log_level: LogLevel::Info,
        }
    }
}

/// `[launch]`: launch windows and exec-time replay.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LaunchSection {
    /// Longest launch window, seconds (from exec).
    pub window_max_secs: f64,
    /// A window ends once the launch has touched no new page for this many milliseconds.
    pub quiet_ms: u64,
    /// Replay a known application's profile the moment it execs.
    pub replay_on_exec: bool,
    /// I/O priority of replay reads.
    pub replay_io_priority: ReplayPriority,
    /// Launches that used fewer pages than this are not learned (shell built-ins, `true`).
    pub min_pages: u64,
    /// The first this-many launches of an application are followed (traced and learned) ...
    pub follow_first_launches: u64,
    /// ... and after them every launch until this many learned launches in a row were stable
    /// (at most `stable_new_share` of their pages new to the profile) ...
    pub stable_launches: u32,
    /// ... or this many in a row were not (a profile that does not settle is sampled instead) ...
    pub max_unstable_launches: u32,
    /// ... and after that one launch in this many seconds: a known application's launches are
    /// replayed but not traced, so learning costs nothing once a profile is settled. A sampled
    /// launch that adds many pages makes the following launches followed again.
    pub refollow_after_secs: u64,
    /// Largest share of a learned launch's pages that may be new to its profile for the launch
    /// to count as stable, in [0, 1].
    pub stable_new_share: f64,
    /// A launch replayed but not followed that read from disk more than this share of its
    /// profile's pages (and at least 1 MiB) makes the next launches followed again (eBPF only).
    pub refollow_read_share: f64,
    /// A launch is no longer followed once it has used this many MiB (a bulk reader such as
    /// `cat` of a large tree is data, not start-up, and tracing it would slow it down).
    pub max_launch_mib: u64,
    /// A launch is no longer followed once one file it reads contiguously (either direction) has
    /// reached this many MiB in one run (of at least 16 reads) and is more than half of what the launch used: it is
    /// reading that file through (a `cat` of a big file, a backup, a media player), and the data
    /// it streams after is not its start (`augur_core::model::read_through`). What it used until
    /// then is learned. 0: never.
    pub read_through_mib: u64,
    /// An exec-time replay reads at most this many MiB of the launch's learned pages (the ones
    /// it used first).
    pub replay_max_mib: u64,
    /// Exec-time replays read at most this many MiB over any minute; a launch past it is replayed
    /// in part or not at all.
    pub replay_mib_per_minute: u64,
    /// Where memory is plentiful (`replay_pad_min_available_mib`), replayed and tier-loaded
    /// profiles widen every learned range by this many pages on each side, within its file: a
    /// page used just outside a learned range would otherwise be read by the kernel with a
    /// synchronous read-around of `read_ahead_kb` (`LaunchProfile::padded`). 0: exact pages.
    pub replay_pad_pages: u64,
    /// Ranges are padded only while MemAvailable is at least this many MiB: on a machine short of
    /// memory the exact learned pages are what fits.
    pub replay_pad_min_available_mib: u64,
}

impl LaunchSection {
    /// Pages to pad each replayed range with when `available` bytes of memory are available
    /// (MemAvailable; unknown: none).
    pub fn replay_pad_for(&self, available: Option<u64>) -> u64 {
        match available {
            Some(a) if a >= self.replay_pad_min_available_mib.saturating_mul(1 << 20) => self.replay_pad_pages,
            _ => 0,
        }
    }
}

impl Default for LaunchSection {
    fn default() -> Self {
        LaunchSection {
            window_max_secs: 15.0,
            quiet_ms: 1000,
            replay_on_exec: true,
            replay_io_priority: ReplayPriority::BestEffort,
            min_pages: 4,
            follow_first_launches: 3,
            stable_launches: 2,
            max_unstable_launches: 8,
            refollow_after_secs: 3600,
            stable_new_share: 0.05,
            refollow_read_share: 0.25,
            max_launch_mib: 256,
            read_through_mib: 8,
            replay_max_mib: 512,
            replay_mib_per_minute: 2048,
            replay_pad_pages: 16,
            replay_pad_min_available_mib: 4096,
        }
    }
}

/// `[learn]`: how launches are merged and how much is kept.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LearnSection {
    /// Most applications kept (least recently launched evicted first).
    pub max_apps: usize,
    /// Most applications kept of one user (root, or any other uid): a user's flood of programs
    /// evicts only that user's least recently launched.
    pub max_apps_per_user: usize,
    /// Most page ranges kept per application (least used dropped first).
    pub max_ranges_per_app: usize,
    /// Factor each range's usage count decays by at every launch, in (0, 1].
    pub decay: f64,
    /// A range unused by this many consecutive launches is dropped.
    pub drop_after_launches: u32,
    /// Decayed share of launches a range must have been used in to be replayed, in (0, 1].
    pub replay_threshold: f64,
    /// Launch records (hit-rate history) kept.
    pub recent_launches: usize,
    /// Look up, learn and replay files on network and FUSE file systems (NFS, SMB, FUSE, 9p,
    /// Ceph...), whose calls may take arbitrarily long; off, they are skipped without a call.
    pub network_filesystems: bool,
}

impl Default for LearnSection {
    fn default() -> Self {
        let l = LearnSettings::default();
        LearnSection {
            max_apps: l.max_apps,
            max_apps_per_user: l.max_apps_per_user,
            max_ranges_per_app: l.max_ranges_per_app,
            decay: l.decay,
            drop_after_launches: l.drop_after_launches,
            replay_threshold: l.replay_threshold,
            recent_launches: StateLimits::default().max_launch_records,
            network_filesystems: false,
        }
    }
}

/// `[boot]`: recording boots in phases and replaying the merged plan of the last ones
/// (`augur boot`, run by `augur-boot.service`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BootSection {
    /// Boots kept and merged into the next boot's plan.
    pub keep_boots: usize,
    /// Weight of a boot relative to the next newer one, in (0, 1].
    pub decay: f64,
    /// Decayed share of boots a page must have been used in to be replayed, in (0, 1].
    pub replay_threshold: f64,
    /// Most MiB one boot's plan loads.
    pub max_mib: u64,
    /// Recording goes on this long after the user's session started (its autostarted
    /// applications), in seconds.
    pub after_session_secs: u64,
    /// Recording stops this long after it started whatever happened, in seconds.
    pub max_secs: u64,
    /// The session's usual applications (most launched, as the daemon learned them) prefetched
    /// when the session phase is released.
    pub session_apps: usize,
}

impl Default for BootSection {
    fn default() -> Self {
        let b = BootSettings::default();
        BootSection {
            keep_boots: b.keep_boots,
            decay: b.decay,
            replay_threshold: b.replay_threshold,
            max_mib: 512,
            after_session_secs: 30,
            max_secs: 300,
            session_apps: 5,
        }
    }
}

/// `[predict]`: predicting launches and keeping their pages resident within a memory budget.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PredictSection {
    /// Predict and prefetch before launches (on by default; exec-time replay works without it).
    pub enabled: bool,
    /// Predictor: "augur", "preload" or "naive".
    pub predictor: String,
    /// Re-plan at least this often, seconds, besides launch, exit and pressure events.
    pub replan_interval_secs: u64,
    /// Fixed memory budget in bytes; 0 computes it from MemAvailable.
    pub budget_bytes: u64,
    /// Share of MemAvailable the computed budget may use, in [0, 1].
    pub budget_available_fraction: f64,
    /// Stop prefetching while memory pressure (PSI `some avg10`, percent) is above this.
    pub pressure_stop_percent: f64,
    /// PSI trigger: a memory stall of at least this many microseconds within
    /// `pressure_window_us` stops prefetching and exec-time replay at once (the kernel wakes the
    /// daemon). Armed whenever anything fetches (replay on exec or prediction).
    pub pressure_trigger_us: u64,
    /// PSI trigger window in microseconds (the kernel accepts 500000 to 10000000).
    pub pressure_window_us: u64,
    /// Cost model: cost of reading a byte ahead of time, in bytes of launch-time reading saved;
    /// a range is prefetched only when its believed chance of being needed (plus its seek
    /// saving) beats it. In [0, 10].
    pub read_cost: f64,
    /// Cost model: the least chance counted that a byte a prefetch pushes out of a full page
    /// cache is needed again (raised to the measured refault share). In [0, 1].
    pub evict_cost: f64,
    /// On battery, `read_cost` is multiplied by this (reading ahead spends energy). In [1, 50].
    pub battery_read_cost_factor: f64,
    /// When the disk the applications live on is not rotational (a miss costs little),
    /// `read_cost` is multiplied by this. In [1, 50].
    pub non_rotational_read_cost_factor: f64,
    /// The free-memory tier: load the learned applications the prediction did not plan into the
    /// free memory beyond the reserve and beyond the prediction's plan, the most often launched
    /// lately then the most recent first, never pushing anything out (off on battery).
    pub fill_free_memory: bool,
    /// Share of the usable memory (MemTotal less Mlocked) the tier keeps free, in [0, 1] ...
    pub fill_reserve_share: f64,
    /// ... at least this many MiB ...
    pub fill_reserve_min_mib: u64,
    /// ... and at most this many MiB.
    pub fill_reserve_max_mib: u64,
    /// Once every application it fills has its learned pages in, the tier loads the rest of
    /// their files of at most this many MiB, while room is left (programs read ahead of
    /// themselves, which no access event shows). 0: learned pages only. At most 4096.
    pub fill_whole_files_max_mib: u64,
}

impl Default for PredictSection {
    fn default() -> Self {
        PredictSection {
            enabled: true,
            predictor: "augur".into(),
            replan_interval_secs: 300,
            budget_bytes: 0,
            budget_available_fraction: 0.5,
            pressure_stop_percent: 10.0,
            pressure_trigger_us: 150_000,
            pressure_window_us: 1_000_000,
            read_cost: augur_core::plan::DEFAULT_READ_COST,
            evict_cost: augur_core::plan::DEFAULT_EVICT_COST,
            battery_read_cost_factor: 3.0,
            non_rotational_read_cost_factor: 2.0,
            fill_free_memory: true,
            fill_reserve_share: 0.25,
            fill_reserve_min_mib: 1024,
            fill_reserve_max_mib: 4096,
            fill_whole_files_max_mib: 256,
        }
    }
}

impl PredictSection {
    /// The free-memory tier's settings.
    pub fn fill_config(&self) -> augur_core::plan::FillConfig {
        augur_core::plan::FillConfig {
            enabled: self.fill_free_memory,
            reserve_share: self.fill_reserve_share,
            reserve_min_bytes: self.fill_reserve_min_mib.saturating_mul(1 << 20),
            reserve_max_bytes: self.fill_reserve_max_mib.saturating_mul(1 << 20),
        }
    }
}

/// `[pattern]`: per-file access-pattern detection and prefetching ahead of backward and strided
/// readers (`crate::ahead`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PatternSection {
    /// Watch every task's page-cache reads for their access pattern (eBPF, kernel 6.11+) and load
    /// pages ahead of backward and strided readers.
    pub prefetch_ahead: bool,
    /// Consecutive accesses of one kind that establish a pattern (at least 2).
    pub establish_accesses: u32,
    /// Distance ahead a newly followed reader starts with, KiB.
    pub initial_ahead_kib: u64,
    /// Most a reader's distance ahead grows to, KiB.
    pub max_ahead_kib: u64,
    /// Most streams (task, file) followed at once.
    pub max_streams: usize,
    /// Drop a large read-once stream behind its reader (`crate::behind`): pages a forward reader
    /// of a big file has passed leave the page cache, unless they were resident before it came
    /// or someone maps them, so a backup or a `cat` of a big file does not evict working sets.
    pub drop_behind: bool,
    /// Smallest file, MiB, whose forward readers are dropped behind.
    pub drop_behind_min_file_mib: u64,
    /// Kept behind the reader, KiB (a reader that steps back a little finds its pages).
    pub drop_behind_lag_kib: u64,
    /// A forward reader is looked at (and its pages behind dropped) each time it moved this many
    /// KiB; a file read through in less is never looked at.
    pub drop_behind_every_kib: u64,
    /// Percent of the memory free for a stream's reader when it is first seen (the room left
    /// under its memory cgroups, at most the machine's free memory) kept as the stream's
    /// resident prefix, in [0, 100]: only what lies beyond is dropped behind, so a file read
    /// again (a loop) finds its start cached, and no one else's page is evicted for it.
    pub drop_behind_keep_free_percent: u64,
    /// Keep a resident prefix of a loop over more than the memory its reader can have
    /// (`crate::looping`, DEAR's MRU): the pages beyond the prefix are dropped behind the reader
    /// at each pass, so every pass finds the prefix cached instead of the kernel cycling the whole
    /// loop through the cache. Reported with `drop_behind_every_kib`'s movement.
    pub loop_prefix: bool,
    /// Percent of the memory the looping reader can have (the loop's pages cached now plus the
    /// room left under its memory cgroups, or what the machine has available) kept as the
    /// prefix, in [1, 100].
    pub loop_keep_percent: u64,
    /// Advise random access (`POSIX_FADV_RANDOM`: no readahead) on the open files of readers
    /// whose pattern is random (`crate::random_read`), so that the kernel reads only the blocks
    /// they ask for, not the pages around them; readahead comes back when a reader of the file
    /// goes forward or loops, or stops being random. Off by default: the advice changes the
    /// readahead of other processes' open files (through `pidfd_getfd`), which is too intrusive
    /// to do system-wide unasked.
    pub advise_random: bool,
}

impl Default for PatternSection {
    fn default() -> Self {
        PatternSection {
            prefetch_ahead: true,
            establish_accesses: 4,
            initial_ahead_kib: 1024,
            max_ahead_kib: 32768,
            max_streams: 64,
            drop_behind: true,
            drop_behind_min_file_mib: 256,
            drop_behind_lag_kib: 2048,
            drop_behind_every_kib: 4096,
            drop_behind_keep_free_percent: 50,
            loop_prefix: true,
            loop_keep_percent: 90,
            advise_random: false,
        }
    }
}

/// The whole configuration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// `[daemon]`.
    pub daemon: DaemonSection,
    /// `[launch]`.
    pub launch: LaunchSection,
    /// `[learn]`.
    pub learn: LearnSection,
    /// `[predict]`.
    pub predict: PredictSection,
    /// `[pattern]`.
    pub pattern: PatternSection,
    /// `[boot]`.
    pub boot: BootSection,
}

/// Predictor names `[predict] predictor` accepts.
pub const PREDICTORS: &[&str] = &["augur", "preload", "naive"];

impl Config {
    /// Parses and validates configuration text; errors name `path` and the line.
    pub fn parse(text: &str, path: &Path) -> Result<Config> {
        let config: Config = toml::from_str(text).map_err(|e| ConfigError {
            path: path.to_path_buf(),
            line: e.span().map(|s| line_of(text, s.start)),
            detail: e.message().trim().to_string(),
        })?;
        config.validate(text, path)?;
        Ok(config)
    }

    fn validate(&self, text: &str, path: &Path) -> Result<()> {
        let bad = |section: &str, key: &str, detail: String| ConfigError {
            path: path.to_path_buf(),
            line: key_line(text, section, key),
            detail: format!("{section}.{key}: {detail}"),
        };
        let l = &self.launch;
        if !(l.window_max_secs.is_finite() && (0.1..=600.0).contains(&l.window_max_secs)) {
            return Err(bad("launch", "window_max_secs", format!("{} is not between 0.1 and 600", l.window_max_secs)));
        }
        if !(10..=60_000).contains(&l.quiet_ms) {
            return Err(bad("launch", "quiet_ms", format!("{} is not between 10 and 60000", l.quiet_ms)));
        }
        if l.follow_first_launches == 0 {
            return Err(bad("launch", "follow_first_launches", "must be at least 1 (or nothing is ever learned)".into()));
        }
        if !(l.stable_new_share.is_finite() && (0.0..=1.0).contains(&l.stable_new_share)) {
            return Err(bad("launch", "stable_new_share", format!("{} is not between 0 and 1", l.stable_new_share)));
        }
        if !(l.refollow_read_share.is_finite() && (0.0..=100.0).contains(&l.refollow_read_share)) {
            return Err(bad("launch", "refollow_read_share", format!("{} is not between 0 and 100", l.refollow_read_share)));
        }
        if l.max_launch_mib == 0 {
            return Err(bad("launch", "max_launch_mib", "must be at least 1".into()));
        }
        for (key, v) in [("replay_max_mib", l.replay_max_mib), ("replay_mib_per_minute", l.replay_mib_per_minute)] {
            if v == 0 {
                return Err(bad("launch", key, "must be at least 1 (replay_on_exec = false turns replay off)".into()));
            }
        }
        if l.replay_pad_pages > MAX_REPLAY_PAD_PAGES {
            return Err(bad(
                "launch",
                "replay_pad_pages",
                format!("{} is more than {MAX_REPLAY_PAD_PAGES} (4 MiB of 4 KiB pages each side)", l.replay_pad_pages),
            ));
        }
        let n = &self.learn;
        if !(n.decay > 0.0 && n.decay <= 1.0) {
            return Err(bad("learn", "decay", format!("{} is not in (0, 1]", n.decay)));
        }
        if !(n.replay_threshold > 0.0 && n.replay_threshold <= 1.0) {
            return Err(bad("learn", "replay_threshold", format!("{} is not in (0, 1]", n.replay_threshold)));
        }
        if n.max_apps == 0 {
            return Err(bad("learn", "max_apps", "must be at least 1".into()));
        }
        if n.max_apps_per_user == 0 {
            return Err(bad("learn", "max_apps_per_user", "must be at least 1".into()));
        }
        if n.max_ranges_per_app == 0 {
            return Err(bad("learn", "max_ranges_per_app", "must be at least 1".into()));
        }
        if n.drop_after_launches == 0 {
            return Err(bad("learn", "drop_after_launches", "must be at least 1".into()));
        }
        let p = &self.predict;
        if !PREDICTORS.contains(&p.predictor.as_str()) {
            return Err(bad(
                "predict",
                "predictor",
                format!("unknown predictor {:?} (known: {})", p.predictor, PREDICTORS.join(", ")),
            ));
        }
        if p.replan_interval_secs == 0 {
            return Err(bad("predict", "replan_interval_secs", "must be at least 1".into()));
        }
        if !(0.0..=1.0).contains(&p.budget_available_fraction) {
            return Err(bad("predict", "budget_available_fraction", format!("{} is not in [0, 1]", p.budget_available_fraction)));
        }
        if !(0.0..=100.0).contains(&p.pressure_stop_percent) {
            return Err(bad("predict", "pressure_stop_percent", format!("{} is not in [0, 100]", p.pressure_stop_percent)));
        }
        if !(500_000..=10_000_000).contains(&p.pressure_window_us) {
            return Err(bad("predict", "pressure_window_us", format!("{} is not in [500000, 10000000]", p.pressure_window_us)));
        }
        if !(0.0..=10.0).contains(&p.read_cost) {
            return Err(bad("predict", "read_cost", format!("{} is not in [0, 10]", p.read_cost)));
        }
        if !(0.0..=1.0).contains(&p.evict_cost) {
            return Err(bad("predict", "evict_cost", format!("{} is not in [0, 1]", p.evict_cost)));
        }
        for (key, v) in [
            ("battery_read_cost_factor", p.battery_read_cost_factor),
            ("non_rotational_read_cost_factor", p.non_rotational_read_cost_factor),
        ] {
            if !(1.0..=50.0).contains(&v) {
                return Err(bad("predict", key, format!("{v} is not in [1, 50]")));
            }
        }
        if !(0.0..=1.0).contains(&p.fill_reserve_share) {
            return Err(bad("predict", "fill_reserve_share", format!("{} is not in [0, 1]", p.fill_reserve_share)));
        }
        if p.fill_reserve_max_mib < p.fill_reserve_min_mib {
            return Err(bad(
                "predict",
                "fill_reserve_max_mib",
                format!("{} is below fill_reserve_min_mib ({})", p.fill_reserve_max_mib, p.fill_reserve_min_mib),
            ));
        }
        if p.fill_whole_files_max_mib > 4096 {
            return Err(bad(
                "predict",
                "fill_whole_files_max_mib",
                format!("{} is not in [0, 4096]", p.fill_whole_files_max_mib),
            ));
        }
        if p.pressure_trigger_us == 0 || p.pressure_trigger_us > p.pressure_window_us {
            return Err(bad(
                "predict",
                "pressure_trigger_us",
                format!("{} is not in [1, pressure_window_us]", p.pressure_trigger_us),
            ));
        }
        let t = &self.pattern;
        if !(2..=64).contains(&t.establish_accesses) {
            return Err(bad("pattern", "establish_accesses", format!("{} is not between 2 and 64", t.establish_accesses)));
        }
        if !(4..=1_048_576).contains(&t.initial_ahead_kib) {
            return Err(bad("pattern", "initial_ahead_kib", format!("{} is not between 4 and 1048576", t.initial_ahead_kib)));
        }
        if t.max_ahead_kib < t.initial_ahead_kib || t.max_ahead_kib > 4_194_304 {
            return Err(bad(
                "pattern",
                "max_ahead_kib",
                format!("{} is not between initial_ahead_kib and 4194304", t.max_ahead_kib),
            ));
        }
        if !(1..=4096).contains(&t.max_streams) {
            return Err(bad("pattern", "max_streams", format!("{} is not between 1 and 4096", t.max_streams)));
        }
        if !(64..=4_194_304).contains(&t.drop_behind_every_kib) {
            return Err(bad(
                "pattern",
                "drop_behind_every_kib",
                format!("{} is not between 64 and 4194304", t.drop_behind_every_kib),
            ));
        }
        if t.drop_behind_keep_free_percent > 100 {
            return Err(bad(
                "pattern",
                "drop_behind_keep_free_percent",
                format!("{} is more than 100", t.drop_behind_keep_free_percent),
            ));
        }
        if !(1..=100).contains(&t.loop_keep_percent) {
            return Err(bad("pattern", "loop_keep_percent", format!("{} is not between 1 and 100", t.loop_keep_percent)));
        }
        if t.drop_behind_lag_kib > 4_194_304 {
            return Err(bad("pattern", "drop_behind_lag_kib", format!("{} is more than 4194304", t.drop_behind_lag_kib)));
        }
        let b = &self.boot;
        if !(1..=50).contains(&b.keep_boots) {
            return Err(bad("boot", "keep_boots", format!("{} is not between 1 and 50", b.keep_boots)));
        }
        if !(b.decay.is_finite() && b.decay > 0.0 && b.decay <= 1.0) {
            return Err(bad("boot", "decay", format!("{} is not in (0, 1]", b.decay)));
        }
        if !(b.replay_threshold.is_finite() && b.replay_threshold > 0.0 && b.replay_threshold <= 1.0) {
            return Err(bad("boot", "replay_threshold", format!("{} is not in (0, 1]", b.replay_threshold)));
        }
        if !(1..=65_536).contains(&b.max_mib) {
            return Err(bad("boot", "max_mib", format!("{} is not between 1 and 65536", b.max_mib)));
        }
        if !(10..=3600).contains(&b.max_secs) {
            return Err(bad("boot", "max_secs", format!("{} is not between 10 and 3600", b.max_secs)));
        }
        if b.after_session_secs > b.max_secs {
            return Err(bad("boot", "after_session_secs", format!("{} is more than max_secs", b.after_session_secs)));
        }
        for (key, v) in [("state_path", &self.daemon.state_path), ("socket_path", &self.daemon.socket_path)] {
            if !v.is_absolute() {
                return Err(bad("daemon", key, format!("{} is not an absolute path", v.display())));
            }
        }
        Ok(())
    }

    /// How boots are merged, for plans of `page_size`-byte pages.
    pub fn boot_settings(&self, page_size: u64) -> BootSettings {
        BootSettings {
            keep_boots: self.boot.keep_boots,
            decay: self.boot.decay,
            replay_threshold: self.boot.replay_threshold,
            max_pages: self.boot.max_mib.saturating_mul(1 << 20) / page_size.max(1),
        }
    }

    /// The learning settings.
    pub fn learn_settings(&self) -> LearnSettings {
        LearnSettings {
            decay: self.learn.decay,
            drop_after_launches: self.learn.drop_after_launches,
            replay_threshold: self.learn.replay_threshold,
            max_ranges_per_app: self.learn.max_ranges_per_app,
            max_apps: self.learn.max_apps,
            max_apps_per_user: self.learn.max_apps_per_user,
            stable_new_share: self.launch.stable_new_share,
        }
    }

    /// What the state keeps.
    pub fn state_limits(&self) -> StateLimits {
        StateLimits { learn: self.learn_settings(), max_launch_records: self.learn.recent_launches, ..StateLimits::default() }
    }

    /// Longest launch window.
    pub fn window_max(&self) -> Duration {
        Duration::from_secs_f64(self.launch.window_max_secs)
    }

    /// [`window_max`](Self::window_max) in nanoseconds (saturating).
    pub fn window_max_ns(&self) -> u64 {
        self.window_max().as_nanos().min(u128::from(u64::MAX)) as u64
    }

    /// The settings of prefetching ahead of readers, for pages of `page_size` bytes.
    pub fn ahead_settings(&self, page_size: u64) -> crate::ahead::AheadSettings {
        let pages = |kib: u64| (kib * 1024 / page_size.max(1)).max(1);
        crate::ahead::AheadSettings {
            initial_pages: pages(self.pattern.initial_ahead_kib),
            max_pages: pages(self.pattern.max_ahead_kib),
            max_streams: self.pattern.max_streams,
            ..crate::ahead::AheadSettings::default()
        }
    }

    /// The settings of dropping streams behind their readers, for pages of `page_size` bytes.
    pub fn behind_settings(&self, page_size: u64) -> crate::behind::BehindSettings {
        let page_size = page_size.max(1);
        crate::behind::BehindSettings {
            min_file_pages: self.pattern.drop_behind_min_file_mib.saturating_mul(1 << 20) / page_size,
            lag_pages: self.pattern.drop_behind_lag_kib.saturating_mul(1024) / page_size,
            keep_free_percent: self.pattern.drop_behind_keep_free_percent,
            max_streams: self.pattern.max_streams,
            ..crate::behind::BehindSettings::default()
        }
    }

    /// The settings of keeping a resident prefix of loops larger than memory, for pages of
    /// `page_size` bytes.
    pub fn loop_settings(&self, page_size: u64) -> crate::looping::LoopSettings {
        crate::looping::LoopSettings {
            keep_percent: self.pattern.loop_keep_percent,
            lag_pages: self.pattern.drop_behind_lag_kib.saturating_mul(1024) / page_size.max(1),
            max_streams: self.pattern.max_streams,
            ..crate::looping::LoopSettings::default()
        }
    }

    /// The settings of advising random readers' files random access.
    pub fn random_settings(&self) -> crate::random_read::RandomSettings {
        crate::random_read::RandomSettings { max_files: self.pattern.max_streams }
    }

    /// Movement, in pages of `page_size` bytes, between the kernel's records of a forward or a
    /// looping reader (0 when nothing is dropped behind either).
    pub fn forward_progress_pages(&self, page_size: u64) -> u32 {
        if !self.pattern.drop_behind && !self.pattern.loop_prefix {
            return 0;
        }
        (self.pattern.drop_behind_every_kib.saturating_mul(1024) / page_size.max(1)).clamp(1, u64::from(u32::MAX)) as u32
    }

    /// Quiet time that ends a launch window.
    pub fn quiet(&self) -> Duration {
        Duration::from_millis(self.launch.quiet_ms)
    }
}

/// 1-based line of byte `offset` in `text` (where a TOML parser's span starts); the suite file's
/// errors use it too.
pub fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())].iter().filter(|&&b| b == b'\n').count() + 1
}

/// Line where `section.key` is set, from the parser's spans.
fn key_line(text: &str, section: &str, key: &str) -> Option<usize> {
    let doc = toml::de::DeTable::parse(text).ok()?;
    let table = doc.get_ref().get(section)?;
    let toml::de::DeValue::Table(t) = table.get_ref() else { return None };
    let (k, _) = t.get_key_value(key)?;
    Some(line_of(text, k.span().start))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config> {
        Config::parse(text, Path::new("/etc/augur/config.toml"))
    }

    fn line(text: &str) -> Option<usize> {
        match parse(text) {
            Err(ConfigError { line, .. }) => line,
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn empty_file_means_defaults() {
        assert_eq!(parse("").unwrap(), Config::default());
        assert_eq!(Config::default().launch.window_max_secs, 15.0);
    }

    #[test]
    fn replay_padding_only_where_memory_is_plentiful() {
        let l = Config::default().launch;
        assert_eq!(l.replay_pad_for(Some(8 << 30)), 16);
        assert_eq!(l.replay_pad_for(Some(4 << 30)), 16);
        assert_eq!(l.replay_pad_for(Some((4 << 30) - 1)), 0, "the small machine replays exact pages");
        assert_eq!(l.replay_pad_for(None), 0);
        assert!(parse("[launch]\nreplay_pad_pages = 0\n").is_ok());
        assert_eq!(line("[launch]\nreplay_pad_pages = 5000\n"), Some(2));
    }

    #[test]
    fn shipped_file_is_the_defaults() {
        let shipped = include_str!("../../../packaging/config.toml");
        assert_eq!(parse(shipped).unwrap(), Config::default());
        // Uncommenting every key gives the defaults too: the comments tell the truth.
        let uncommented: String = shipped
            .lines()
            .map(|l| if l.starts_with("# ") && l.contains(" = ") { &l[2..] } else { l })
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(parse(&uncommented).unwrap(), Config::default());
    }

    #[test]
    fn every_key_is_documented() {
        let doc = include_str!("../../../docs/config.md");
        let shipped = include_str!("../../../packaging/config.toml");
        let value = toml::Value::try_from(Config::default()).unwrap();
        for (section, table) in value.as_table().unwrap() {
            assert!(doc.contains(&format!("[{section}]")), "[{section}] undocumented");
            for key in table.as_table().unwrap().keys() {
                assert!(doc.contains(&format!("`{key}`")), "{section}.{key} missing from docs/config.md");
                assert!(shipped.contains(&format!("# {key} = ")), "{section}.{key} missing from packaging/config.toml");
            }
        }
    }

    #[test]
    fn values_are_read() {
        let c = parse("[launch]\nwindow_max_secs = 5\nreplay_io_priority = \"idle\"\n[predict]\nenabled = true\n").unwrap();
        assert_eq!(c.launch.window_max_secs, 5.0);
        assert_eq!(c.launch.replay_io_priority, ReplayPriority::Idle);
        assert!(c.predict.enabled);
    }

    #[test]
    fn unknown_keys_are_rejected_with_their_line() {
        assert_eq!(line("[launch]\nquiet_ms = 500\nwindow_secs = 3\n"), Some(3));
        assert_eq!(line("\n\n[nonsense]\nx = 1\n"), Some(3));
    }

    #[test]
    fn bad_types_and_syntax_name_their_line() {
        assert_eq!(line("[learn]\n\ndecay = \"fast\"\n"), Some(3));
        assert_eq!(line("[daemon]\nlog_level = \"loud\"\n"), Some(2));
        assert_eq!(line("[daemon]\nstate_path = \n"), Some(2));
    }

    #[test]
    fn out_of_range_values_name_their_line() {
        assert_eq!(line("[learn]\nmax_apps = 10\n# comment\ndecay = 1.5\n"), Some(4));
        assert_eq!(line("[launch]\nwindow_max_secs = 0\n"), Some(2));
        assert_eq!(line("[predict]\n\n\npredictor = \"oracle\"\n"), Some(4));
        assert_eq!(line("[daemon]\nsocket_path = \"rel.sock\"\n"), Some(2));
        assert_eq!(line("[pattern]\nestablish_accesses = 1\n"), Some(2));
        assert_eq!(line("[pattern]\ninitial_ahead_kib = 512\nmax_ahead_kib = 256\n"), Some(3));
        let e = parse("[learn]\ndecay = 0\n").unwrap_err();
        assert!(e.to_string().starts_with("/etc/augur/config.toml:2: learn.decay"), "{e}");
    }

    #[test]
    fn config_error_names_the_line() {
        let e = ConfigError { path: "/etc/augur/config.toml".into(), line: Some(7), detail: "unknown key `foo`".into() };
        assert_eq!(e.to_string(), "/etc/augur/config.toml:7: unknown key `foo`");
        let e = ConfigError { path: "/etc/augur/config.toml".into(), line: None, detail: "not UTF-8 text".into() };
        assert_eq!(e.to_string(), "/etc/augur/config.toml: not UTF-8 text");
    }
}
