//! Measurement: start-up time of a command cold, warm and prefetched, with the statistics the
//! reference papers report.
//!
//! It drives other modules and the system (drop caches, run commands); it contains no learning.
//!
//! Layout: [`measure`] times one run; [`condition`] puts the system in a state before a run (the
//! [`condition::Condition`] trait is the extension point for the suite's preload and daemon
//! conditions); [`session`] interleaves conditions round by round and summarises; [`stats`] is
//! the pure arithmetic; [`profile`] finds the workload's launch profile. [`bench_command`] is the
//! whole of `augur-bench -- CMD`.
//!
//! The suite (`augur-bench --suite`, [`suite`]) builds on these: [`suite_file`] parses it,
//! [`machine`] applies the machine profiles ([`balloon`], [`throttle`]), [`launch`] times a
//! workload to its exit or first window ([`xdisplay`]), [`prefetchers`] runs preload and the augur
//! daemon, [`usage_day`] and [`cost`] the day and the costs, [`suite_report`] holds the results
//! and [`suite_markdown`] / [`suite_chart`] render them.
//!
//! [`round_cost`] times the daemon's prediction round with many learned applications
//! (`augur-bench round-cost`).
//!
//! [`boot`] boots a Debian system in a container on a throttled disk image under four setups
//! (`augur-bench boot`).

#![forbid(unsafe_code)]

pub mod condition;
pub mod measure;
pub mod profile;
pub mod session;
pub mod stats;

pub mod aasfp;
pub mod balloon;
pub mod boot;
pub mod cost;
pub mod dear;
pub mod error;
pub mod interrupt;
pub mod kroeger;
pub mod launch;
pub mod machine;
pub mod page_cache;
pub mod page_reporting;
pub mod prefetchers;
pub mod round_cost;
pub mod suite;
pub mod suite_chart;
pub mod suite_estimate;
pub mod suite_file;
pub mod suite_markdown;
pub mod suite_report;
pub mod throttle;
pub mod usage_day;
pub mod xdisplay;

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use augur_os::fetch::{FetchPlan, page_size};
use augur_os::privilege::require_root;

use condition::standard_conditions;
use measure::{Workload, run_to_exit};
use profile::{ProfileInfo, load_profile, trace_workload};
use session::{Progress, SessionResult, run_interleaved};

/// The machine a benchmark ran on, recorded with its figures.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// Page size in bytes.
    pub page_size: u64,
}

impl Machine {
    /// This machine.
    pub fn current() -> Self {
        let uname = rustix::system::uname();
        Machine { kernel: uname.release().to_string_lossy().into_owned(), page_size: page_size() }
    }
}

/// Result of `augur-bench -- CMD`, as printed with `--json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    /// Where it ran.
    pub machine: Machine,
    /// The profile the prefetched condition replayed.
    pub profile: ProfileInfo,
    /// The measurements.
    #[serde(flatten)]
    pub session: SessionResult,
}

/// Something the bench reports while it runs.
#[derive(Debug)]
pub enum BenchEvent<'a> {
    /// Tracing the workload to get its profile.
    Tracing,
    /// The profile is ready.
    ProfileReady(&'a ProfileInfo),
    /// Session progress.
    Session(Progress<'a>),
}

/// `augur-bench -- CMD`: gets the profile (from `profile`, or by tracing the workload), then runs
/// `rounds` interleaved rounds of cold, warm and prefetched. Needs root (it drops caches).
pub fn bench_command(
    workload: &Workload,
    profile: Option<&Path>,
    rounds: usize,
    events: &mut dyn FnMut(BenchEvent<'_>),
) -> Result<BenchReport> {
    require_root("augur-bench")?;
    let (launch_profile, info) = match profile {
        Some(path) => load_profile(path)?,
        None => {
            events(BenchEvent::Tracing);
            trace_workload(workload)?
        }
    };
    events(BenchEvent::ProfileReady(&info));
    let plan = FetchPlan::from_profiles([&launch_profile], page_size());
    let mut conditions = standard_conditions(plan);
    let session = run_interleaved(workload, &mut conditions, rounds, &mut run_to_exit, &mut |p| events(BenchEvent::Session(p)))?;
    Ok(BenchReport { machine: Machine::current(), profile: info, session })
}
