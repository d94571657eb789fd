//! The benchmark suite file (TOML): which workloads to time, how many runs, the training and
//! waits of the prefetcher protocol, the usage day and the cost measurements. Parsing only:
//! errors name the file and the line; no file is run from here.
//!
//! ```toml
//! runs = 5
//! training_secs = 60
//! [[workload]]
//! name = "java"
//! command = ["java", "-version"]
//! [[workload]]
//! name = "xterm"
//! command = ["xterm"]
//! ready = "window"
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{BenchError, ConfigError, Result};
use augur_engine::config::line_of;

/// What a launch is timed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ready {
    /// The command exits (command-line workloads); a non-zero status is a failure.
    #[default]
    Exit,
    /// The first visible (mapped, not override-redirect) top-level window on the suite's X
    /// server; the application is closed afterwards.
    Window,
}

/// The conditions a workload is measured under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Condition {
    /// All caches dropped, no prefetcher.
    Cold,
    /// Right after a launch, no prefetcher.
    Warm,
    /// preload 0.6.4 with its learned state, caches dropped, one cycle waited.
    Preload,
    /// preload-ng (the strongest peer) with its learned state, caches dropped, one cycle waited.
    PreloadNg,
    /// augur's daemon as installed: the shipped configuration, the suite's state and socket.
    Augur,
    /// augur's daemon with exec-time replay only.
    AugurReplay,
    /// augur's daemon with prediction.
    AugurPredict,
}

impl Condition {
    /// Every condition, in the order they run within a run.
    pub const ALL: [Condition; 7] =
        [Self::Cold, Self::Warm, Self::Preload, Self::PreloadNg, Self::Augur, Self::AugurReplay, Self::AugurPredict];

    /// The name used in the suite file and the outputs.
    pub fn name(self) -> &'static str {
        match self {
            Self::Cold => "cold",
            Self::Warm => "warm",
            Self::Preload => "preload",
            Self::PreloadNg => "preload-ng",
            Self::Augur => "augur",
            Self::AugurReplay => "augur-replay",
            Self::AugurPredict => "augur-predict",
        }
    }

    /// The name in the report's tables and chart: the suite file's name, but augur's daemon as
    /// installed says so, beside its variants.
    pub fn label(self) -> &'static str {
        match self {
            Self::Augur => "augur (as installed)",
            other => other.name(),
        }
    }
}

/// One workload: a command and what its launch is timed to.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Short name used in tables.
    pub name: String,
    /// The command and its arguments. `{work}` is replaced by the workload's scratch directory.
    pub command: Vec<String>,
    /// What the launch is timed to.
    #[serde(default)]
    pub ready: Ready,
    /// A launch that takes longer fails.
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// Extra environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Files written into `{work}` before the suite starts (name -> content).
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Machine profiles whose launch-time tables measure it (all when absent; empty: none, a
    /// workload only the usage day launches). Every workload is trained.
    #[serde(default)]
    pub profiles: Option<Vec<String>>,
}

impl Workload {
    /// Whether the launch-time tables of `profile` measure this workload.
    pub fn measured_under(&self, profile: &str) -> bool {
        self.profiles.as_ref().is_none_or(|ps| ps.iter().any(|p| p == profile))
    }
}

fn default_timeout() -> u64 {
    120
}

/// The usage day: a trace of launches and exits replayed per prefetcher.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct DaySpec {
    /// The usage trace (JSON lines), relative to the suite file.
    pub trace: PathBuf,
    /// Trace application name -> workload name. Unmapped applications are assigned workloads in
    /// order of first appearance.
    #[serde(default)]
    pub apps: BTreeMap<String, String>,
    /// Trace seconds are multiplied by this to get real seconds.
    #[serde(default = "default_time_scale")]
    pub time_scale: f64,
    /// Real idle gaps between events are clamped to [min, max] seconds.
    #[serde(default = "default_gap")]
    pub gap_secs: [f64; 2],
    /// At most this many launches are replayed.
    #[serde(default = "default_max_launches")]
    pub max_launches: usize,
    /// An idle gap of at least this many *trace* seconds drops the caches (the machine did other
    /// things meanwhile); 0 never drops.
    #[serde(default)]
    pub drop_caches_after_idle_secs: f64,
    /// Days replayed with every prefetcher watching before the measured days. When the trace
    /// holds more days than this, training day N replays the trace's day N and the measured
    /// days replay the day after them (the same habits, other noise); a one-day trace is
    /// replayed the same every time.
    #[serde(default = "default_training_days")]
    pub training_days: u32,
    /// Machine profiles the day runs under (all when empty): a day where everything fits in
    /// memory measures nothing prediction is for.
    #[serde(default)]
    pub profiles: Vec<String>,
    /// The day runs only when the working sets of its applications (the bytes each one's cold
    /// launch read from disk, summed) are at least this many times the memory the profile
    /// leaves available; otherwise it is refused, with both figures. 0: no requirement.
    #[serde(default)]
    pub min_memory_ratio: f64,
    /// Under a small-memory profile, the day runs with this much MemAvailable left (a second
    /// balloon for the day's length) when the profile leaves more ("512MiB" style).
    #[serde(default, deserialize_with = "de_opt_bytes")]
    pub leave_available: Option<u64>,
    /// Whether a desktop application stays open until the trace's exit (true) or is closed as
    /// soon as its window is up (false): with little memory left and no swap, the applications'
    /// own memory cannot all stay open together, and the day then measures what each prefetcher
    /// does with the page cache between launches.
    #[serde(default = "default_keep_open")]
    pub keep_open: bool,
    /// A replayed day (training or measured) is cut short after this many seconds (0: never), a
    /// measured day's remaining launches reported as not made: a prefetcher that starves the
    /// launches must not take the session.
    #[serde(default)]
    pub stop_after_secs: u64,
}

fn default_keep_open() -> bool {
    true
}

fn de_opt_bytes<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<u64>, D::Error> {
    de_bytes(d).map(Some)
}

fn default_time_scale() -> f64 {
    1.0
}
fn default_gap() -> [f64; 2] {
    [2.0, 20.0]
}
fn default_max_launches() -> usize {
    30
}
fn default_training_days() -> u32 {
    1
}

/// The cost measurements.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct CostSpec {
    /// Seconds of idleness over which CPU time and wakeups are counted.
    #[serde(default = "default_idle")]
    pub idle_secs: u64,
    /// Total size of the generated file tree read cold (bytes; "2GiB" style strings allowed).
    #[serde(default = "default_tree", deserialize_with = "de_bytes")]
    pub tree_bytes: u64,
    /// Number of files in that tree.
    #[serde(default = "default_tree_files")]
    pub tree_files: u32,
    /// Number of C sources in the generated build.
    #[serde(default = "default_build_sources")]
    pub build_sources: u32,
    /// `make -jN` of the build.
    #[serde(default = "default_build_jobs")]
    pub build_jobs: u32,
    /// Runs of each (off / augur / preload, interleaved).
    #[serde(default = "default_cost_runs")]
    pub runs: u32,
    /// Times augur learns each workload from first sight (each round as many runs as it follows
    /// a new application's launches, then forgets them): the learning columns' samples.
    #[serde(default = "default_learning_rounds")]
    pub learning_rounds: u32,
    /// Machine profiles the costs are measured under (all when empty): the slowdown is a ratio,
    /// and reading a multi-GiB tree through a 40 MB/s throttle takes minutes per run.
    #[serde(default)]
    pub profiles: Vec<String>,
}

fn default_idle() -> u64 {
    60
}
fn default_tree() -> u64 {
    2 << 30
}
fn default_tree_files() -> u32 {
    2000
}
fn default_build_sources() -> u32 {
    120
}
fn default_build_jobs() -> u32 {
    2
}
fn default_cost_runs() -> u32 {
    3
}
fn default_learning_rounds() -> u32 {
    1
}

impl Default for CostSpec {
    fn default() -> Self {
        CostSpec {
            idle_secs: default_idle(),
            tree_bytes: default_tree(),
            tree_files: default_tree_files(),
            build_sources: default_build_sources(),
            build_jobs: default_build_jobs(),
            runs: default_cost_runs(),
            learning_rounds: default_learning_rounds(),
            profiles: Vec::new(),
        }
    }
}

/// A parsed suite file.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    /// Measured runs per workload and condition.
    #[serde(default = "default_runs")]
    pub runs: u32,
    /// Seconds each workload is run (GUI: kept open; command line: launched again and again)
    /// while the prefetchers learn. preload needs several of its 20 s cycles to see a process.
    #[serde(default = "default_training")]
    pub training_secs: u64,
    /// Longest wait for a prefetcher's first planning round after the caches were dropped.
    #[serde(default = "default_cycle_wait")]
    pub cycle_wait_secs: u64,
    /// The conditions measured (default: all).
    #[serde(default = "default_conditions")]
    pub conditions: Vec<Condition>,
    /// The workloads.
    #[serde(rename = "workload", default)]
    pub workloads: Vec<Workload>,
    /// The usage day, if any.
    #[serde(default)]
    pub day: Option<DaySpec>,
    /// The cost measurements, if any.
    #[serde(default)]
    pub cost: Option<CostSpec>,
}

fn default_runs() -> u32 {
    5
}
fn default_training() -> u64 {
    60
}
fn default_cycle_wait() -> u64 {
    60
}
fn default_conditions() -> Vec<Condition> {
    Condition::ALL.to_vec()
}

fn de_bytes<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        N(u64),
        S(String),
    }
    match Raw::deserialize(d)? {
        Raw::N(n) => Ok(n),
        Raw::S(s) => parse_bytes(&s).map_err(serde::de::Error::custom),
    }
}

/// Parses "2GiB", "1.4GiB", "40MB", "512k", "1000" into bytes (binary for Ki/Mi/Gi and k/M/G
/// without B... decimal for kB/MB/GB).
pub fn parse_bytes(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.parse().map_err(|_| format!("`{s}` is not a size (like 2GiB or 40MB)"))?;
    let mult: f64 = match unit.trim() {
        "" | "B" => 1.0,
        "k" | "K" | "KiB" => 1024.0,
        "M" | "MiB" => 1024.0 * 1024.0,
        "G" | "GiB" => 1024.0 * 1024.0 * 1024.0,
        "kB" | "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        other => {
            return Err(format!("unknown size unit `{other}` in `{s}` (use KiB, MiB, GiB, kB, MB, GB)"));
        }
    };
    Ok((value * mult).round() as u64)
}

impl Suite {
    /// Reads and checks a suite file.
    pub fn load(path: &Path) -> Result<Suite> {
        let text = std::fs::read_to_string(path).map_err(|e| BenchError::io_at(path, "reading suite", e))?;
        Self::parse(&text, path)
    }

    /// Parses and checks suite text; `path` is used in errors and to resolve relative paths.
    pub fn parse(text: &str, path: &Path) -> Result<Suite> {
        let mut suite: Suite = toml::from_str(text).map_err(|e| ConfigError {
            path: path.to_path_buf(),
            line: e.span().map(|s| line_of(text, s.start)),
            detail: e.message().to_string(),
        })?;
        let fail = |line: Option<usize>, detail: String| BenchError::from(ConfigError { path: path.to_path_buf(), line, detail });
        if suite.workloads.is_empty() {
            return Err(fail(None, "no [[workload]] defined".into()));
        }
        if suite.runs == 0 {
            return Err(fail(find_line(text, "runs"), "runs must be at least 1".into()));
        }
        let mut names = std::collections::HashSet::new();
        for w in &suite.workloads {
            let line = find_line(text, &format!("\"{}\"", w.name));
            if w.name.trim().is_empty() {
                return Err(fail(line, "a workload has an empty name".into()));
            }
            if w.command.is_empty() || w.command[0].is_empty() {
                return Err(fail(line, format!("workload `{}` has an empty command", w.name)));
            }
            if !names.insert(w.name.clone()) {
                return Err(fail(line, format!("workload `{}` is defined twice", w.name)));
            }
            for p in w.profiles.iter().flatten() {
                if let Err(e) = p.parse::<crate::machine::MachineProfile>() {
                    return Err(fail(line, format!("workload `{}`: profiles: {e}", w.name)));
                }
            }
            if let Some(bad) = w.files.keys().find(|k| k.contains('/') || k.starts_with('.')) {
                return Err(fail(line, format!("workload `{}`: file name `{bad}` must be a plain name", w.name)));
            }
        }
        if let Some(day) = suite.day.as_mut() {
            let line = find_line(text, "[day]");
            for (app, workload) in &day.apps {
                if !names.contains(workload) {
                    return Err(fail(line, format!("[day] maps `{app}` to unknown workload `{workload}`")));
                }
            }
            if day.time_scale.is_nan() || day.time_scale <= 0.0 || day.gap_secs[0] < 0.0 || day.gap_secs[1] < day.gap_secs[0] {
                return Err(fail(line, "[day] needs time_scale > 0 and 0 <= gap_secs[0] <= gap_secs[1]".into()));
            }
            for p in &day.profiles {
                if let Err(e) = p.parse::<crate::machine::MachineProfile>() {
                    return Err(fail(line, format!("[day] profiles: {e}")));
                }
            }
            if day.min_memory_ratio.is_nan() || day.min_memory_ratio < 0.0 {
                return Err(fail(line, "[day] min_memory_ratio must be at least 0".into()));
            }
            if day.trace.is_relative() {
                if let Some(dir) = path.parent() {
                    day.trace = dir.join(&day.trace);
                }
            }
        }
        if let Some(cost) = &suite.cost {
            for p in &cost.profiles {
                if let Err(e) = p.parse::<crate::machine::MachineProfile>() {
                    return Err(fail(find_line(text, "profiles"), format!("[cost] profiles: {e}")));
                }
            }
        }
        let mut seen = std::collections::HashSet::new();
        suite.conditions.retain(|c| seen.insert(*c));
        Ok(suite)
    }
}

/// Line of the first occurrence of `needle` outside comments, if any.
fn find_line(text: &str, needle: &str) -> Option<usize> {
    text.lines().position(|l| l.split('#').next().is_some_and(|code| code.contains(needle))).map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(t: &str) -> Result<Suite> {
        Suite::parse(t, Path::new("/x/suite.toml"))
    }

    #[test]
    fn minimal_suite_gets_defaults() {
        let s = parse("[[workload]]\nname = \"java\"\ncommand = [\"java\", \"-version\"]\n").unwrap();
        assert_eq!(s.runs, 5);
        assert_eq!(s.conditions, Condition::ALL.to_vec());
        assert_eq!(s.workloads[0].ready, Ready::Exit);
        assert!(s.day.is_none() && s.cost.is_none());
    }

    #[test]
    fn full_suite() {
        let t = r#"
runs = 3
conditions = ["cold", "warm", "preload", "preload-ng", "augur"]
[[workload]]
name = "xterm"
command = ["xterm"]
ready = "window"
env = { NO_AT_BRIDGE = "1" }
[[workload]]
name = "gcc"
command = ["gcc", "-c", "{work}/a.c"]
files = { "a.c" = "int x;" }
[day]
trace = "day.jsonl"
apps = { term = "xterm" }
time_scale = 0.01
[cost]
tree_bytes = "1.5GiB"
"#;
        let s = parse(t).unwrap();
        assert_eq!(s.conditions, [Condition::Cold, Condition::Warm, Condition::Preload, Condition::PreloadNg, Condition::Augur]);
        assert_eq!(s.workloads[0].ready, Ready::Window);
        assert_eq!(s.day.as_ref().unwrap().trace, PathBuf::from("/x/day.jsonl"));
        assert_eq!(s.cost.as_ref().unwrap().tree_bytes, (1.5 * (1u64 << 30) as f64) as u64);
    }

    #[test]
    fn unknown_key_names_its_line() {
        let e = parse("runs = 2\n\n[[workload]]\nname = \"a\"\ncomand = [\"a\"]\n").unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("/x/suite.toml:5: "), "{msg}");
        assert!(msg.contains("comand"), "{msg}");
    }

    #[test]
    fn bad_value_names_its_line() {
        let e = parse("[[workload]]\nname = \"a\"\ncommand = [\"a\"]\nready = \"soon\"\n").unwrap_err();
        assert!(e.to_string().starts_with("/x/suite.toml:4: "), "{e}");
    }

    #[test]
    fn semantic_errors_name_their_line() {
        let e = parse("[[workload]]\nname = \"a\"\ncommand = []\n").unwrap_err();
        assert!(e.to_string().starts_with("/x/suite.toml:2: "), "{e}");
        let e =
            parse("[[workload]]\nname = \"a\"\ncommand = [\"a\"]\n[[workload]]\nname = \"a\"\ncommand = [\"b\"]\n").unwrap_err();
        assert!(e.to_string().contains("defined twice"), "{e}");
        let e = parse("[[workload]]\nname = \"a\"\ncommand = [\"a\"]\n[day]\ntrace = \"t\"\napps = { x = \"b\" }\n").unwrap_err();
        assert!(e.to_string().starts_with("/x/suite.toml:4: "), "{e}");
        assert!(parse("runs = 1\n").unwrap_err().to_string().contains("no [[workload]]"));
    }

    #[test]
    fn cost_profiles_are_checked() {
        let t = "[[workload]]\nname = \"a\"\ncommand = [\"a\"]\n[cost]\nprofiles = [\"fast\"]\n";
        let e = parse(t).unwrap_err();
        assert!(e.to_string().starts_with("/x/suite.toml:5: "), "{e}");
        let ok = parse(&t.replace("fast", "small-memory+slow-disk")).unwrap();
        assert_eq!(ok.cost.unwrap().profiles, vec!["small-memory+slow-disk".to_string()]);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_bytes("40MB").unwrap(), 40_000_000);
        assert_eq!(parse_bytes("1.4G").unwrap(), (1.4 * (1u64 << 30) as f64).round() as u64);
        assert_eq!(parse_bytes("512").unwrap(), 512);
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("3 parsecs").is_err());
    }

    #[test]
    fn the_repository_example_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/suite.toml");
        let s = Suite::load(&path).unwrap();
        assert!(s.workloads.iter().filter(|w| w.ready == Ready::Window).count() >= 3);
        // Desktop applications start as a desktop starts them: from .desktop files and through
        // a session's wrapper; the thesis's applications are there.
        fn launcher(w: &Workload) -> Option<&str> {
            w.command.first().map(String::as_str)
        }
        let windows: Vec<&Workload> = s.workloads.iter().filter(|w| w.ready == Ready::Window).collect();
        for how in ["gtk-launch", "gio", "dbus-run-session"] {
            assert!(windows.iter().any(|w| launcher(w) == Some(how)), "no desktop workload started by {how}");
        }
        for app in ["firefox-esr", "gedit", "evolution", "gnome-terminal"] {
            assert!(windows.iter().any(|w| w.name == app), "{app} is missing");
        }
    }
}
