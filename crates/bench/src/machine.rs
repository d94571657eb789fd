//! Machine profiles: the conditions a benchmark runs under, selectable per run and recorded in
//! its output. *as-is*; *small-memory* (a locked [`Balloon`] leaves a chosen amount available);
//! *slow-disk* (a [`ThrottledCgroup`] holding the whole workload, daemons included); and both.
//! Under every profile the guest's free page reporting is paused ([`ReportingPause`]), because
//! its host-side faults add more noise than the effects measured.
//!
//! [`ActiveMachine`] applies a profile and undoes it on drop, on error and (through the suite's
//! interrupt checks) on SIGINT/SIGTERM; [`clean_leftovers`] removes what a killed run left.
//! It does not run workloads.

use std::fmt;
use std::str::FromStr;

use crate::balloon::{self, Balloon};
use crate::error::{BenchError, Result};
use crate::page_reporting::{self, ReportingPause};
use crate::throttle::{self, DiskThrottle, ThrottledCgroup};
use augur_os::sense::procfs;

/// A machine profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MachineProfile {
    /// The machine as it is.
    AsIs,
    /// Little memory available.
    SmallMemory,
    /// A throttled disk.
    SlowDisk,
    /// Both.
    SmallMemorySlowDisk,
}

impl MachineProfile {
    /// Every profile, in the order they are documented.
    pub const ALL: [MachineProfile; 4] = [Self::AsIs, Self::SmallMemory, Self::SlowDisk, Self::SmallMemorySlowDisk];

    /// The profile's name on the command line and in outputs.
    pub fn name(self) -> &'static str {
        match self {
            Self::AsIs => "as-is",
            Self::SmallMemory => "small-memory",
            Self::SlowDisk => "slow-disk",
            Self::SmallMemorySlowDisk => "small-memory+slow-disk",
        }
    }

    /// Whether it inflates a balloon.
    pub fn small_memory(self) -> bool {
        matches!(self, Self::SmallMemory | Self::SmallMemorySlowDisk)
    }

    /// Whether it throttles the disk.
    pub fn slow_disk(self) -> bool {
        matches!(self, Self::SlowDisk | Self::SmallMemorySlowDisk)
    }
}

impl fmt::Display for MachineProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for MachineProfile {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        Self::ALL.into_iter().find(|p| p.name() == s).ok_or_else(|| {
            let names: Vec<_> = Self::ALL.iter().map(|p| p.name()).collect();
            format!("unknown machine profile `{s}` (expected one of: {})", names.join(", "))
        })
    }
}

/// The knobs of the profiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct MachineSettings {
    /// Bytes the balloon leaves available (MemAvailable) under *small-memory*.
    pub leave_available: u64,
    /// Disk limits under *slow-disk*.
    pub throttle: DiskThrottle,
}

impl Default for MachineSettings {
    fn default() -> Self {
        MachineSettings { leave_available: 2 << 30, throttle: DiskThrottle::default() }
    }
}

/// What a profile looked like while it was applied: written into every output.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct MachineRecord {
    /// Profile name.
    pub profile: String,
    /// MemTotal, bytes.
    pub mem_total: u64,
    /// MemAvailable before the profile was applied.
    pub mem_available_before: u64,
    /// MemAvailable once it was applied.
    pub mem_available_after: u64,
    /// Bytes the balloon locked (0 without one).
    pub balloon_locked_bytes: u64,
    /// Target MemAvailable of the balloon, if any.
    pub balloon_target_available: Option<u64>,
    /// Throttled disk ("MAJ:MIN"), if any.
    pub throttled_device: Option<String>,
    /// Limits set, if any.
    pub throttle: Option<DiskThrottle>,
    /// The limits as the kernel reads them back.
    pub throttle_read_back: Option<String>,
    /// cgroup interface used, if any.
    pub cgroup_version: Option<String>,
    /// Throughput of a cold sequential read measured under the profile, bytes/s (the proof that
    /// the disk throttle bites); filled in by the suite.
    pub cold_read_bytes_per_sec: Option<f64>,
    /// Free page reporting paused for the run, if the kernel reports free pages.
    pub free_page_reporting: Option<String>,
    /// Free memory touched once under the paused reporting so the host backs it, if it was.
    pub free_memory_backed: Option<String>,
}

impl MachineRecord {
    /// What was done to the guest's free memory so the host's faults stay out of the times (free
    /// page reporting paused, free memory backed), as clauses for a table's header: empty on a
    /// machine that does not report free pages.
    pub fn host_memory_note(&self) -> String {
        [&self.free_page_reporting, &self.free_memory_backed].into_iter().flatten().cloned().collect::<Vec<_>>().join("; ")
    }
}

/// Free memory left untouched when the guest's free memory is backed (see
/// [`page_reporting::back_free_memory`]): well above the kernel's watermarks.
const BACKING_KEEP_FREE: u64 = 512 << 20;

/// A profile in force. Dropping it undoes it (balloon first, then the cgroup).
#[derive(Debug)]
pub struct ActiveMachine {
    /// The profile.
    pub profile: MachineProfile,
    balloon: Option<Balloon>,
    cgroup: Option<ThrottledCgroup>,
    reporting: Option<ReportingPause>,
    /// Its record.
    pub record: MachineRecord,
}

impl ActiveMachine {
    /// Applies `profile`: enters the throttled cgroup, then inflates the balloon.
    pub fn apply(profile: MachineProfile, settings: &MachineSettings) -> Result<ActiveMachine> {
        let mem_total = procfs::meminfo("MemTotal")?;
        let before = procfs::meminfo("MemAvailable")?;
        let mut active = ActiveMachine {
            profile,
            balloon: None,
            cgroup: None,
            reporting: ReportingPause::start()?,
            record: MachineRecord {
                profile: profile.name().into(),
                mem_total,
                mem_available_before: before,
                mem_available_after: before,
                ..MachineRecord::default()
            },
        };
        active.record.free_page_reporting = active.reporting.as_ref().map(ReportingPause::describe);
        if profile.slow_disk() {
            let cgroup = ThrottledCgroup::enter(settings.throttle)?;
            active.record.throttled_device = Some(cgroup.device.clone());
            active.record.throttle = Some(cgroup.limits);
            active.record.throttle_read_back = Some(cgroup.read_back());
            active.record.cgroup_version =
                Some(serde_json::to_value(cgroup.version).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default());
            active.cgroup = Some(cgroup);
        }
        if profile.small_memory() {
            if before <= settings.leave_available {
                return Err(BenchError::Usage(format!(
                    "small-memory: only {} MiB available, already at most the {} MiB to leave",
                    before >> 20,
                    settings.leave_available >> 20
                )));
            }
            let b = Balloon::inflate(settings.leave_available)?;
            active.record.balloon_locked_bytes = b.locked_bytes;
            active.record.balloon_target_available = Some(settings.leave_available);
            active.balloon = Some(b);
        }
        active.record.mem_available_after = procfs::meminfo("MemAvailable")?;
        if active.reporting.is_some() {
            // After the balloon, so only what the workloads will use is touched.
            let started = std::time::Instant::now();
            augur_os::fetch::drop_all_caches()?;
            let touched = page_reporting::back_free_memory(BACKING_KEEP_FREE)?;
            active.record.free_memory_backed = Some(format!(
                "{:.1} GiB of free memory touched once so the host backs it ({:.0} s)",
                touched as f64 / (1u64 << 30) as f64,
                started.elapsed().as_secs_f64()
            ));
        }
        Ok(active)
    }

    /// Where this profile counts bytes read from disk: its throttled cgroup, else the root disk.
    pub fn disk_reads(&self) -> Result<crate::throttle::DiskReadCounter> {
        crate::throttle::DiskReadCounter::new(self.cgroup.as_ref())
    }

    /// Fails if the profile no longer holds (the balloon was killed).
    pub fn check(&mut self) -> Result<()> {
        match self.balloon.as_mut() {
            Some(b) => b.check_alive(),
            None => Ok(()),
        }
    }

    /// The throttled cgroup, if any.
    pub fn cgroup(&self) -> Option<&ThrottledCgroup> {
        self.cgroup.as_ref()
    }
}

impl Drop for ActiveMachine {
    fn drop(&mut self) {
        self.balloon.take();
        self.cgroup.take();
        self.reporting.take();
    }
}

/// Removes balloons and throttle cgroups left by a run that was killed. Returns a description of
/// what it removed, if anything.
pub fn clean_leftovers() -> Option<String> {
    let balloons = balloon::kill_leftovers();
    let cgroups = throttle::remove_leftovers();
    let reporting = if page_reporting::restore_leftover() { ", free page reporting resumed" } else { "" };
    (balloons + cgroups > 0 || !reporting.is_empty())
        .then(|| format!("removed leftovers of an earlier run: {balloons} balloon(s), {cgroups} cgroup(s){reporting}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_names_round_trip() {
        for p in MachineProfile::ALL {
            assert_eq!(p.name().parse::<MachineProfile>().unwrap(), p);
        }
        let err = "fast".parse::<MachineProfile>().unwrap_err();
        assert!(err.contains("small-memory+slow-disk"), "{err}");
    }

    #[test]
    fn profile_parts() {
        assert!(MachineProfile::SmallMemorySlowDisk.small_memory());
        assert!(MachineProfile::SmallMemorySlowDisk.slow_disk());
        assert!(!MachineProfile::AsIs.small_memory() && !MachineProfile::AsIs.slow_disk());
    }
}
