//! What the daemon records about launches and applications, and the limits on how much of it is
//! kept: plain data shared by the engine, the store and the command line. Pure: nothing here
//! reads or writes anything.

use serde::{Deserialize, Serialize};

use crate::model::learn::LearnSettings;

/// One launch or exit of an application instance, as the predictor observed it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActivityRecord {
    /// Wall-clock time, milliseconds since the epoch.
    pub at_ms: u64,
    /// The same instant in local time (what time-of-day prediction reads).
    pub local_ms: u64,
    /// Application key.
    pub app: String,
    /// The instance (the root process's pid).
    pub instance: u64,
    /// True for a launch, false for an exit.
    pub launch: bool,
}

/// What one launch cost and what replay saved it: the daemon's honest hit rate.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchRecord {
    /// Application key.
    pub app: String,
    /// When the launch started, milliseconds since the epoch.
    pub started_ms: u64,
    /// Length of the launch window in milliseconds.
    pub window_ms: u64,
    /// Pages the replayed profile expected (0 when the application was new).
    pub pages_expected: u64,
    /// Of those, pages already resident at exec.
    pub pages_resident_at_exec: u64,
    /// Pages the replay loaded.
    pub pages_prefetched: u64,
    /// Bytes the replay loaded.
    pub bytes_prefetched: u64,
    /// Distinct pages the launch used (access events, or insertions when those are all there is).
    pub pages_used: u64,
    /// Pages inserted into the page cache during the window for the launch: read from disk.
    pub pages_read_from_disk: u64,
    /// Files the launch used.
    pub files: u64,
}

impl LaunchRecord {
    /// Share of the pages used that did not have to be read from disk during the launch, in [0, 1].
    pub fn hit_rate(&self) -> f64 {
        if self.pages_used == 0 {
            return 1.0;
        }
        1.0 - (self.pages_read_from_disk.min(self.pages_used) as f64 / self.pages_used as f64)
    }
}

/// One learned application as listed by `augur apps`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppSummary {
    /// Application key.
    pub key: String,
    /// Executable.
    pub exe: String,
    /// Launches learned.
    pub launches: u64,
    /// Last launch, milliseconds since the epoch.
    pub last_launch_ms: u64,
    /// Pages known.
    pub pages: u64,
    /// Pages the next replay would load (before residency checks).
    pub replay_pages: u64,
}

/// Limits on what the state keeps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StateLimits {
    /// How learning merges launches and how many applications are kept.
    pub learn: LearnSettings,
    /// Launch records kept (oldest dropped first).
    pub max_launch_records: usize,
    /// Launch and exit events kept for the predictor (oldest dropped first).
    pub max_activity_records: usize,
}

impl Default for StateLimits {
    fn default() -> Self {
        StateLimits { learn: LearnSettings::default(), max_launch_records: 500, max_activity_records: 20_000 }
    }
}
