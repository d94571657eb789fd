//! The conditions a workload is timed under. Each brings the system into its state right before
//! a timed run: cold (every cache dropped), warm (whatever the previous run left), prefetched
//! (caches dropped, then the workload's profile replayed to completion).
//!
//! A condition is a [`Condition`] trait object, so the suite adds its own (preload, the augur
//! daemon with replay only or with prediction) beside these without changing the session.

use serde::{Deserialize, Serialize};

use crate::error::Result;
use augur_os::fetch::{CancelFlag, FetchOptions, FetchPlan, FetchReport, IoPriority, Prefetcher, drop_all_caches};

/// Name of the cold condition; the gap is measured from it.
pub const COLD: &str = "cold";
/// Name of the warm condition; the gap is measured to it.
pub const WARM: &str = "warm";
/// Name of the prefetched condition.
pub const PREFETCHED: &str = "prefetched";

/// A replay's page counts, kept per run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplaySummary {
    /// Pages the profile holds.
    pub wanted: u64,
    /// Already resident (should be near zero right after dropping caches).
    pub already_resident: u64,
    /// Loaded by the replay, verified.
    pub loaded: u64,
    /// Not loaded: failed, skipped (stale, missing...) or not attempted.
    pub not_loaded: u64,
    /// Files refused as stale.
    pub stale_files: u64,
    /// Time the replay took (not part of the timed run), in milliseconds.
    pub elapsed_ms: f64,
    /// Path lookups repeated before the pages were loaded.
    #[serde(default)]
    pub lookups_replayed: u64,
}

impl From<&FetchReport> for ReplaySummary {
    fn from(r: &FetchReport) -> Self {
        ReplaySummary {
            wanted: r.pages.wanted,
            already_resident: r.pages.already_resident,
            loaded: r.pages.loaded,
            not_loaded: r.pages.failed + r.pages.skipped + r.pages.not_attempted,
            stale_files: r.files.stale,
            elapsed_ms: r.elapsed_ms,
            lookups_replayed: r.lookups_replayed,
        }
    }
}

/// What preparing a condition did, recorded with the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Preparation {
    /// The replay, for conditions that replay a profile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplaySummary>,
}

/// A state the system is put in before a timed run.
pub trait Condition {
    /// Short name used in tables and JSON (`cold`, `warm`, `prefetched`, ...).
    fn name(&self) -> &str;
    /// One line saying what the condition does.
    fn describe(&self) -> String;
    /// Puts the system in this state; called right before every timed run of the condition.
    fn prepare(&mut self) -> Result<Preparation>;
}

/// Every cache dropped (`sync; echo 3 > /proc/sys/vm/drop_caches`).
#[derive(Debug, Default)]
pub struct Cold;

impl Condition for Cold {
    fn name(&self) -> &str {
        COLD
    }
    fn describe(&self) -> String {
        "page cache, dentries and inodes dropped before each run".into()
    }
    fn prepare(&mut self) -> Result<Preparation> {
        drop_all_caches()?;
        Ok(Preparation::default())
    }
}

/// The cache as the previous run of the same workload left it. The session runs the workload
/// once, untimed, before the first round, so this holds even when warm comes first.
#[derive(Debug, Default)]
pub struct Warm;

impl Condition for Warm {
    fn name(&self) -> &str {
        WARM
    }
    fn describe(&self) -> String {
        "the cache as the previous run left it".into()
    }
    fn prepare(&mut self) -> Result<Preparation> {
        Ok(Preparation::default())
    }
}

/// Caches dropped, then the workload's profile replayed to completion before the run starts.
#[derive(Debug)]
pub struct Prefetched {
    plan: FetchPlan,
    prefetcher: Prefetcher,
}

impl Prefetched {
    /// Replays `plan` at best-effort I/O priority (nothing else competes in a benchmark).
    pub fn new(plan: FetchPlan) -> Self {
        Prefetched::with_options(plan, FetchOptions { priority: IoPriority::BEST_EFFORT, ..FetchOptions::default() })
    }

    /// Replays `plan` with `options`.
    pub fn with_options(plan: FetchPlan, options: FetchOptions) -> Self {
        Prefetched { plan, prefetcher: Prefetcher::new(options) }
    }
}

impl Condition for Prefetched {
    fn name(&self) -> &str {
        PREFETCHED
    }
    fn describe(&self) -> String {
        format!(
            "caches dropped, then the profile's {} path lookups and {} pages in {} files replayed to completion before the run",
            self.plan.lookups().len(),
            self.plan.page_count(),
            self.plan.files().len()
        )
    }
    fn prepare(&mut self) -> Result<Preparation> {
        drop_all_caches()?;
        let report = self.prefetcher.fetch(&self.plan, &CancelFlag::new());
        Ok(Preparation { replay: Some(ReplaySummary::from(&report)) })
    }
}

/// The foundation's three conditions, in the order each round runs them.
pub fn standard_conditions(plan: FetchPlan) -> Vec<Box<dyn Condition>> {
    vec![Box::new(Cold), Box::new(Warm), Box::new(Prefetched::new(plan))]
}
