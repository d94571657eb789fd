//! What a prefetch costs besides its benefit: the memory it fills, as the caller measured it —
//! how much is free (filling it pushes nothing out) and how often pages pushed out of the page
//! cache lately were needed again (the chance that what a prefetch pushes out is missed).
//!
//! Owns [`MemoryHeadroom`] (the planner's input), [`RefaultMeter`] (cumulative eviction and
//! refault counters in, a recent refault share out) and the reading of those counters from
//! `/proc/vmstat` text. The rule that uses them is the planner's (`planner.rs`,
//! `docs/predictors.md`, "Cost model"). Pure: the daemon reads /proc/meminfo and /proc/vmstat and
//! hands the text in; the simulator fills the same structs from its simulated cache.

use crate::proc_text::vmstat_values;

/// The memory a prefetch would fill, as measured by the caller.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemoryHeadroom {
    /// Bytes that can be filled without pushing anything out of the page cache (the daemon:
    /// MemFree; the simulator: the cache's unfilled capacity).
    pub free_bytes: u64,
    /// Share of the page-cache bytes pushed out lately that were needed again soon after, in
    /// `[0, 1]`: the chance that a byte a prefetch pushes out is one a launch then misses
    /// (the daemon: refaults per eviction of file pages from /proc/vmstat; the simulator: the same
    /// count in its cache).
    pub refault_share: f64,
}

impl MemoryHeadroom {
    /// Nothing measured: all memory is treated as free and nothing pushed out as needed, so only
    /// the read cost counts (tests, and callers that plan without memory figures).
    pub const UNMEASURED: MemoryHeadroom = MemoryHeadroom { free_bytes: u64::MAX, refault_share: 0.0 };

    /// The refault share clamped to `[0, 1]` (NaN counts as 1: unknown is treated as costly).
    pub fn refault_share(&self) -> f64 {
        if self.refault_share.is_nan() { 1.0 } else { self.refault_share.clamp(0.0, 1.0) }
    }
}

/// Cumulative page-cache eviction and refault counters, as `/proc/vmstat` keeps them (or as the
/// simulated cache counts them), in any unit as long as both share it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EvictionCounters {
    /// File pages evicted (`pgsteal_file`, or `pgsteal_kswapd + pgsteal_direct` on kernels
    /// before 5.8).
    pub evicted: u64,
    /// Evicted file pages read again while the kernel still remembered them
    /// (`workingset_refault_file`, or `workingset_refault` before 5.9).
    pub refaulted: u64,
}

impl EvictionCounters {
    /// Reads the counters from `/proc/vmstat` text; None when the kernel has none of them.
    pub fn from_vmstat(text: &str) -> Option<Self> {
        Self::from_values(vmstat_values(text, Self::VMSTAT_NAMES))
    }

    /// The `/proc/vmstat` counters [`from_values`](Self::from_values) takes, in its order.
    pub const VMSTAT_NAMES: [&'static str; 5] =
        ["pgsteal_file", "pgsteal_kswapd", "pgsteal_direct", "workingset_refault_file", "workingset_refault"];

    /// The counters from the values of [`VMSTAT_NAMES`](Self::VMSTAT_NAMES), in its order (to
    /// read them in the same pass as others); None when the kernel has none of them.
    pub fn from_values([file, kswapd, direct, refault_file, refault]: [Option<u64>; 5]) -> Option<Self> {
        let evicted = file.or_else(|| Some(kswapd? + direct.unwrap_or(0)))?;
        let refaulted = refault_file.or(refault)?;
        Some(EvictionCounters { evicted, refaulted })
    }
}

/// Turns successive cumulative counter readings into a recent refault share: the deltas of each
/// reading are added to sums that fade by [`RefaultMeter::FADE`] per reading, and the share is
/// refaulted / evicted over those sums. With nothing evicted lately the share is 0: the memory a
/// prefetch fills then held nothing anyone came back for.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RefaultMeter {
    last: Option<EvictionCounters>,
    evicted: f64,
    refaulted: f64,
}

impl RefaultMeter {
    /// Weight an earlier reading's deltas keep at each new reading.
    pub const FADE: f64 = 0.9;

    /// Evictions (in counter units) below which the share is not trusted and reads as 0.
    pub const MIN_EVICTED: f64 = 1.0;

    /// Takes a new cumulative reading. A counter that went backwards (a reset) starts over.
    pub fn update(&mut self, now: EvictionCounters) {
        if let Some(last) = self.last {
            if now.evicted < last.evicted || now.refaulted < last.refaulted {
                *self = RefaultMeter::default();
            } else {
                self.evicted = self.evicted * Self::FADE + (now.evicted - last.evicted) as f64;
                self.refaulted = self.refaulted * Self::FADE + (now.refaulted - last.refaulted) as f64;
            }
        }
        self.last = Some(now);
    }

    /// Recent refaults per eviction, in `[0, 1]`.
    pub fn share(&self) -> f64 {
        if self.evicted < Self::MIN_EVICTED { 0.0 } else { (self.refaulted / self.evicted).clamp(0.0, 1.0) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vmstat_counters_with_and_without_file_split() {
        let new = "pgsteal_kswapd 10\npgsteal_direct 5\npgsteal_file 12\nworkingset_refault_anon 1\nworkingset_refault_file 3\n";
        assert_eq!(EvictionCounters::from_vmstat(new), Some(EvictionCounters { evicted: 12, refaulted: 3 }));
        let old = "pgsteal_kswapd 10\npgsteal_direct 5\nworkingset_refault 4\n";
        assert_eq!(EvictionCounters::from_vmstat(old), Some(EvictionCounters { evicted: 15, refaulted: 4 }));
        assert_eq!(EvictionCounters::from_vmstat("nr_free_pages 1\n"), None);
    }

    #[test]
    fn share_follows_recent_readings_and_survives_resets() {
        let mut m = RefaultMeter::default();
        assert_eq!(m.share(), 0.0);
        m.update(EvictionCounters { evicted: 1000, refaulted: 900 });
        assert_eq!(m.share(), 0.0, "one reading has no delta");
        m.update(EvictionCounters { evicted: 1100, refaulted: 950 });
        assert!((m.share() - 0.5).abs() < 1e-12);
        // Many readings with evictions and no refaults: the share fades towards 0.
        for k in 1..=40 {
            m.update(EvictionCounters { evicted: 1100 + 100 * k, refaulted: 950 });
        }
        assert!(m.share() < 0.01, "{}", m.share());
        m.update(EvictionCounters { evicted: 5, refaulted: 5 });
        assert_eq!(m.share(), 0.0, "a reset starts over");
        assert_eq!(MemoryHeadroom { free_bytes: 0, refault_share: f64::NAN }.refault_share(), 1.0);
    }
}
