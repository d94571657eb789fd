//! The memory budget: how many bytes prefetching may keep resident, from the memory figures and
//! the memory-pressure reading the daemon passes in.
//!
//! Owns the formula (a fraction of MemAvailable, capped, backed off linearly as PSI "some avg10"
//! rises and zero above a threshold) and preload's formula for comparison. Pure: it never reads
//! /proc itself.

use crate::proc_text::kb_field_bytes;

/// The memory figures the budget is computed from, in bytes (from /proc/meminfo).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemorySnapshot {
    /// MemTotal.
    pub total: u64,
    /// MemFree.
    pub free: u64,
    /// MemAvailable (free plus what the kernel can reclaim without swapping).
    pub available: u64,
    /// Cached.
    pub cached: u64,
    /// Mlocked: memory locked in place (a balloon, a database's locked buffers), which can never
    /// hold the page cache.
    pub locked: u64,
}

impl MemorySnapshot {
    /// Parses the text of /proc/meminfo (values in kB); None if MemTotal or MemFree is missing.
    /// A kernel without MemAvailable (before 3.14) gets MemFree + Cached as its estimate.
    pub fn from_meminfo(text: &str) -> Option<Self> {
        let field = |name: &str| kb_field_bytes(text, name);
        let total = field("MemTotal")?;
        let free = field("MemFree")?;
        let cached = field("Cached").unwrap_or(0);
        let available = field("MemAvailable").unwrap_or(free.saturating_add(cached));
        let locked = field("Mlocked").unwrap_or(0);
        Some(MemorySnapshot { total, free, available, cached, locked })
    }

    /// The memory as a process in a memory cgroup sees it (`None`: no limit): free and
    /// available memory no larger than the cgroup's. Pages a process loads are charged to its
    /// own cgroup; beyond its room the kernel takes pages back from that cgroup, the first ones
    /// loaded among them.
    pub fn within_room(self, room: Option<CgroupHeadroom>) -> Self {
        match room {
            Some(room) => {
                MemorySnapshot { free: self.free.min(room.free), available: self.available.min(room.available), ..self }
            }
            None => self,
        }
    }
}

/// What a memory cgroup, and every one above it that sets a limit, leaves a process in it, bytes
/// (the least over them): the counterparts of MemFree and MemAvailable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CgroupHeadroom {
    /// The limit less the usage: what the process can fill before the cgroup reclaims.
    pub free: u64,
    /// That plus the cgroup's file pages, which its reclaim takes back first, at most the limit:
    /// a cgroup full of page cache still has room for what is loaded next, as a machine whose
    /// memory is all page cache has MemAvailable.
    pub available: u64,
}

impl CgroupHeadroom {
    /// One cgroup's: its `limit`, its `usage` (unreadable: no room) and its `file` pages.
    pub fn of(limit: u64, usage: Option<u64>, file: u64) -> Self {
        let free = limit.saturating_sub(usage.unwrap_or(limit));
        CgroupHeadroom { free, available: free.saturating_add(file).min(limit) }
    }

    /// The least of two (a cgroup and one above it).
    pub fn least(self, other: Self) -> Self {
        CgroupHeadroom { free: self.free.min(other.free), available: self.available.min(other.available) }
    }
}

/// Memory pressure: the "some avg10" percentage of /proc/pressure/memory (0–100).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MemoryPressure {
    /// Share of the last 10 s in which at least one task stalled on memory, in percent.
    pub some_avg10: f64,
}

impl MemoryPressure {
    /// Parses the text of /proc/pressure/memory (`some avg10=1.23 avg60=… total=…`).
    pub fn from_psi(text: &str) -> Option<Self> {
        let line = text.lines().find(|l| l.starts_with("some "))?;
        let v = line.split_whitespace().find_map(|kv| kv.strip_prefix("avg10="))?;
        let some_avg10: f64 = v.parse().ok()?;
        some_avg10.is_finite().then_some(MemoryPressure { some_avg10 })
    }
}

/// How the budget is derived; every field has a documented default.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BudgetConfig {
    /// Share of MemAvailable prefetching may use (default 0.5).
    pub available_fraction: f64,
    /// Upper bound in bytes, if any (default none).
    pub cap_bytes: Option<u64>,
    /// Pressure (some avg10, %) at which backing off starts (default 1.0).
    pub pressure_low: f64,
    /// Pressure at and above which the budget is zero: fetching stops (default 10.0).
    pub pressure_high: f64,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        BudgetConfig { available_fraction: 0.5, cap_bytes: None, pressure_low: 1.0, pressure_high: 10.0 }
    }
}

/// Bytes prefetching may keep resident.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct MemoryBudget {
    /// The budget in bytes.
    pub bytes: u64,
}

impl MemoryBudget {
    /// A fixed budget.
    pub const fn of(bytes: u64) -> Self {
        MemoryBudget { bytes }
    }

    /// augur's budget: `fraction · MemAvailable`, capped, times the pressure back-off
    /// `clamp((high − p) / (high − low), 0, 1)` (1 below `low`, 0 from `high` on).
    pub fn compute(mem: &MemorySnapshot, pressure: Option<MemoryPressure>, config: &BudgetConfig) -> Self {
        let fraction = if config.available_fraction.is_finite() { config.available_fraction.clamp(0.0, 1.0) } else { 0.0 };
        let mut bytes = (mem.available as f64 * fraction).floor();
        if let Some(cap) = config.cap_bytes {
            bytes = bytes.min(cap as f64);
        }
        let backoff = pressure.map_or(1.0, |p| Self::backoff(p.some_avg10, config));
        MemoryBudget { bytes: (bytes * backoff).floor().max(0.0) as u64 }
    }

    /// The pressure back-off factor in `[0, 1]`; non-increasing in the pressure.
    pub fn backoff(some_avg10: f64, config: &BudgetConfig) -> f64 {
        if some_avg10.is_nan() {
            return 0.0; // an unreadable pressure is treated as high
        }
        if some_avg10 >= config.pressure_high {
            return 0.0;
        }
        if some_avg10 <= config.pressure_low {
            return 1.0;
        }
        let span = config.pressure_high - config.pressure_low;
        if span <= 0.0 { 0.0 } else { ((config.pressure_high - some_avg10) / span).clamp(0.0, 1.0) }
    }

    /// preload 0.6.4's default: `max(0, −10 % · MemTotal + 50 % · MemFree) + 0 % · Cached`,
    /// computed as preload does in whole kilobytes of each 1 % — zero whenever free memory is
    /// below 20 % of the total.
    pub fn preload_default(mem: &MemorySnapshot) -> Self {
        let total_kb = (mem.total / 1024) as i64;
        let free_kb = (mem.free / 1024) as i64;
        let avail_kb = (-10 * (total_kb / 100) + 50 * (free_kb / 100)).max(0);
        MemoryBudget { bytes: avail_kb as u64 * 1024 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn half_of_available_by_default() {
        let mem = MemorySnapshot { total: 16 * GIB, free: 2 * GIB, available: 8 * GIB, cached: 6 * GIB, locked: 0 };
        assert_eq!(MemoryBudget::compute(&mem, None, &BudgetConfig::default()).bytes, 4 * GIB);
        let capped = BudgetConfig { cap_bytes: Some(GIB), ..BudgetConfig::default() };
        assert_eq!(MemoryBudget::compute(&mem, None, &capped).bytes, GIB);
    }

    #[test]
    fn a_memory_cgroup_s_room_bounds_free_and_available_memory() {
        let mem = MemorySnapshot { total: 16 * GIB, free: 2 * GIB, available: 8 * GIB, cached: 6 * GIB, locked: 0 };
        assert_eq!(mem.within_room(None), mem);
        // A 256 MiB cgroup using 192 MiB, 128 MiB of it page cache.
        let room = CgroupHeadroom::of(GIB / 4, Some(3 * GIB / 16), GIB / 8);
        assert_eq!(room, CgroupHeadroom { free: GIB / 16, available: 3 * GIB / 16 });
        let small = mem.within_room(Some(room));
        assert_eq!((small.free, small.available, small.total, small.cached), (GIB / 16, 3 * GIB / 16, 16 * GIB, 6 * GIB));
        // Half of what the cgroup has available, not half of the machine's MemAvailable.
        assert_eq!(MemoryBudget::compute(&small, None, &BudgetConfig::default()).bytes, 3 * GIB / 32);
        // Full of page cache: nothing free, all of it available; never more than the limit.
        assert_eq!(CgroupHeadroom::of(GIB / 4, Some(GIB / 4), GIB / 4), CgroupHeadroom { free: 0, available: GIB / 4 });
        assert_eq!(CgroupHeadroom::of(GIB / 4, Some(GIB / 8), GIB), CgroupHeadroom { free: GIB / 8, available: GIB / 4 });
        // A usage that cannot be read leaves no room.
        assert_eq!(CgroupHeadroom::of(GIB, None, 0), CgroupHeadroom { free: 0, available: 0 });
        let roomy = mem.within_room(Some(CgroupHeadroom::of(8 * GIB, Some(4 * GIB), 0)));
        assert_eq!((roomy.free, roomy.available), (2 * GIB, 4 * GIB));
        assert_eq!(
            room.least(CgroupHeadroom { free: GIB, available: GIB / 8 }),
            CgroupHeadroom { free: GIB / 16, available: GIB / 8 }
        );
    }

    #[test]
    fn pressure_backs_off_and_stops() {
        let mem = MemorySnapshot { total: 16 * GIB, free: 2 * GIB, available: 8 * GIB, cached: 0, locked: 0 };
        let c = BudgetConfig::default();
        let at = |p: f64| MemoryBudget::compute(&mem, Some(MemoryPressure { some_avg10: p }), &c).bytes;
        assert_eq!(at(0.0), 4 * GIB);
        assert_eq!(at(5.5), 2 * GIB);
        assert_eq!(at(10.0), 0);
        assert_eq!(at(80.0), 0);
        assert_eq!(at(f64::NAN), 0);
    }

    #[test]
    fn preload_default_is_zero_below_twenty_percent_free() {
        let mem = |free| MemorySnapshot { total: 10 * GIB, free, available: 5 * GIB, cached: 0, locked: 0 };
        assert_eq!(MemoryBudget::preload_default(&mem(GIB)).bytes, 0);
        assert_eq!(MemoryBudget::preload_default(&mem(2 * GIB)).bytes, 0);
        // 50 % of 4 GiB − 10 % of 10 GiB = 1 GiB (to preload's kilobyte rounding).
        let b = MemoryBudget::preload_default(&mem(4 * GIB)).bytes;
        assert!(b.abs_diff(GIB) < 2 * 1024 * 1024, "{b}");
    }

    #[test]
    fn proc_texts_parse() {
        let meminfo = "MemTotal:       16384000 kB\nMemFree:         2048000 kB\nMemAvailable:    8192000 kB\nBuffers: 1 kB\nCached:          6000000 kB\nMlocked:           18000 kB\n";
        let m = MemorySnapshot::from_meminfo(meminfo).unwrap();
        assert_eq!((m.total, m.free, m.available, m.cached), (16384000 * 1024, 2048000 * 1024, 8192000 * 1024, 6000000 * 1024));
        assert_eq!(m.locked, 18000 * 1024);
        let old = MemorySnapshot::from_meminfo("MemTotal: 100 kB\nMemFree: 10 kB\nCached: 20 kB\n").unwrap();
        assert_eq!(old.available, 30 * 1024);
        assert_eq!(MemorySnapshot::from_meminfo("garbage"), None);
        let psi = "some avg10=12.50 avg60=3.00 avg300=1.00 total=12345\nfull avg10=2.00 avg60=0.00 avg300=0.00 total=1\n";
        assert_eq!(MemoryPressure::from_psi(psi), Some(MemoryPressure { some_avg10: 12.5 }));
        assert_eq!(MemoryPressure::from_psi("full avg10=2.00"), None);
    }

    proptest! {
        #[test]
        fn budget_never_exceeds_available_or_cap(avail in 0u64..(1 << 40), frac in -1.0f64..2.0,
                                                  cap in proptest::option::of(0u64..(1 << 40)), p in 0.0f64..100.0) {
            let mem = MemorySnapshot { total: avail * 2, free: avail / 2, available: avail, cached: 0, locked: 0 };
            let c = BudgetConfig { available_fraction: frac, cap_bytes: cap, ..BudgetConfig::default() };
            let b = MemoryBudget::compute(&mem, Some(MemoryPressure { some_avg10: p }), &c).bytes;
            prop_assert!(b <= avail);
            if let Some(cap) = cap { prop_assert!(b <= cap); }
        }

        #[test]
        fn budget_is_non_increasing_in_pressure(p1 in 0.0f64..100.0, p2 in 0.0f64..100.0) {
            let mem = MemorySnapshot { total: 8 * GIB, free: GIB, available: 4 * GIB, cached: 0, locked: 0 };
            let c = BudgetConfig::default();
            let (lo, hi) = if p1 <= p2 { (p1, p2) } else { (p2, p1) };
            let at = |p| MemoryBudget::compute(&mem, Some(MemoryPressure { some_avg10: p }), &c).bytes;
            prop_assert!(at(hi) <= at(lo));
        }
    }
}
