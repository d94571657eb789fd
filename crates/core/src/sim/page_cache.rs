//! The simulated page cache: a budget-sized LRU of blocks (fixed runs of pages), where the blocks
//! of running applications are pinned (in use, never evicted, not counted against the budget)
//! and everything else — pages left by exited applications and prefetched pages — competes by
//! recency. It counts what prefetching read and what it wasted, and charges prefetching for what
//! it pushed out: a block evicted to make room for a prefetch and needed by a launch before it
//! is read again counts against prefetching. Like the kernel, it also counts refaults — evicted
//! blocks needed again before as many bytes as the cache holds were evicted after them — from
//! which the planner's refault share is measured, as the daemon measures it from /proc/vmstat.
//!
//! Owns only residency and its accounting; it does not decide what to fetch. Pure.

use std::collections::BTreeMap;

/// Index of a block in the simulation's block table.
pub type BlockId = u32;

#[derive(Clone, Copy, Debug)]
struct Resident {
    stamp: u64,
    pins: u32,
    /// Prefetched and not used by a launch since.
    unused_prefetch: bool,
}

/// What a block left behind when it was evicted.
#[derive(Clone, Copy, Debug)]
struct Evicted {
    /// `evicted_bytes` when it went.
    at: u64,
    /// It was pushed out to make room for a prefetch.
    by_prefetch: bool,
    /// It was a prefetch no launch had used (wasted), and nothing has read it since.
    wasted: bool,
}

/// What prefetching did to the cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheCounters {
    /// Bytes read by prefetching.
    pub prefetched_bytes: u64,
    /// Prefetched bytes evicted before any launch used them.
    pub wasted_bytes: u64,
    /// Prefetched bytes a launch used.
    pub used_prefetch_bytes: u64,
    /// Bytes evicted, for any reason.
    pub evicted_bytes: u64,
    /// Evicted bytes a launch needed while fewer bytes than the capacity had been evicted since.
    pub refaulted_bytes: u64,
    /// Bytes evicted to make room for a prefetch.
    pub pushed_out_bytes: u64,
    /// Of those, bytes a launch needed before they were read again: what prefetching cost the
    /// launches.
    pub pushed_out_needed_bytes: u64,
    /// Wasted bytes pushed out by another prefetch (the rest were pushed out by the pages of an
    /// exiting application re-entering the cache).
    pub wasted_by_prefetch_bytes: u64,
    /// Wasted bytes prefetched again before any launch needed them (churn).
    pub wasted_refetched_bytes: u64,
    /// Wasted bytes a launch then needed before they were prefetched again (fetched too early,
    /// or kept too briefly). The rest of the waste was not needed again.
    pub wasted_needed_later_bytes: u64,
}

/// The simulated cache.
#[derive(Clone, Debug)]
pub struct PageCache {
    capacity: u64,
    block_bytes: Vec<u64>,
    resident: Vec<Option<Resident>>,
    evicted: Vec<Option<Evicted>>,
    lru: BTreeMap<u64, BlockId>,
    unpinned_bytes: u64,
    pinned_bytes: u64,
    /// Wasted blocks evicted since the last [`PageCache::take_wasted`].
    wasted_log: Vec<BlockId>,
    clock: u64,
    counters: CacheCounters,
}

impl PageCache {
    /// An empty cache of `capacity` bytes over blocks of the given sizes.
    pub fn new(capacity: u64, block_bytes: Vec<u64>) -> Self {
        PageCache {
            capacity,
            resident: vec![None; block_bytes.len()],
            evicted: vec![None; block_bytes.len()],
            block_bytes,
            lru: BTreeMap::new(),
            unpinned_bytes: 0,
            pinned_bytes: 0,
            wasted_log: Vec::new(),
            clock: 0,
            counters: CacheCounters::default(),
        }
    }

    /// The counters so far.
    pub fn counters(&self) -> CacheCounters {
        self.counters
    }

    /// True when the block is in memory.
    pub fn is_resident(&self, b: BlockId) -> bool {
        self.resident.get(b as usize).is_some_and(Option::is_some)
    }

    /// Bytes of unpinned resident blocks (never above capacity after an operation).
    pub fn unpinned_bytes(&self) -> u64 {
        self.unpinned_bytes
    }

    /// Bytes of pinned blocks (in use by running applications).
    pub fn pinned_bytes(&self) -> u64 {
        self.pinned_bytes
    }

    /// The wasted blocks evicted since the last call, oldest first.
    pub fn take_wasted(&mut self) -> Vec<BlockId> {
        std::mem::take(&mut self.wasted_log)
    }

    /// Bytes that can be filled without evicting anything.
    pub fn free_bytes(&self) -> u64 {
        self.capacity.saturating_sub(self.unpinned_bytes)
    }

    /// True when the block is not resident because a prefetch pushed it out.
    pub fn pushed_out_by_prefetch(&self, b: BlockId) -> bool {
        !self.is_resident(b) && self.evicted.get(b as usize).is_some_and(|e| e.is_some_and(|e| e.by_prefetch))
    }

    fn bytes(&self, b: BlockId) -> u64 {
        self.block_bytes.get(b as usize).copied().unwrap_or(0)
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Marks an unpinned resident block most recently used.
    pub fn touch(&mut self, b: BlockId) {
        let stamp = self.tick();
        if let Some(Some(r)) = self.resident.get_mut(b as usize)
            && r.pins == 0
        {
            self.lru.remove(&r.stamp);
            r.stamp = stamp;
            self.lru.insert(stamp, b);
        }
    }

    /// Reads a block in by prefetching (no effect if resident). Returns true if it was read.
    pub fn prefetch(&mut self, b: BlockId) -> bool {
        if self.is_resident(b) || b as usize >= self.resident.len() {
            return false;
        }
        let stamp = self.tick();
        let bytes = self.bytes(b);
        self.resident[b as usize] = Some(Resident { stamp, pins: 0, unused_prefetch: true });
        self.lru.insert(stamp, b);
        self.unpinned_bytes += bytes;
        self.counters.prefetched_bytes += bytes;
        if self.evicted[b as usize].take().is_some_and(|e| e.wasted) {
            self.counters.wasted_refetched_bytes += bytes;
        }
        self.evict_over_capacity(true);
        true
    }

    /// A launch uses the block: reads it if missing, and pins it while the application runs.
    pub fn pin(&mut self, b: BlockId) {
        let bytes = self.bytes(b);
        let Some(slot) = self.resident.get_mut(b as usize) else { return };
        match slot {
            Some(r) => {
                if r.unused_prefetch {
                    r.unused_prefetch = false;
                    self.counters.used_prefetch_bytes += bytes;
                }
                if r.pins == 0 {
                    self.lru.remove(&r.stamp);
                    self.unpinned_bytes -= bytes;
                    self.pinned_bytes += bytes;
                }
                r.pins += 1;
            }
            None => {
                *slot = Some(Resident { stamp: 0, pins: 1, unused_prefetch: false });
                self.pinned_bytes += bytes;
                if let Some(e) = self.evicted[b as usize].take() {
                    if self.counters.evicted_bytes - e.at <= self.capacity {
                        self.counters.refaulted_bytes += bytes;
                    }
                    if e.by_prefetch {
                        self.counters.pushed_out_needed_bytes += bytes;
                    }
                    if e.wasted {
                        self.counters.wasted_needed_later_bytes += bytes;
                    }
                }
            }
        }
    }

    /// The application using the block ended: the block becomes ordinary, most recently used cache.
    pub fn unpin(&mut self, b: BlockId) {
        let stamp = self.tick();
        let bytes = self.bytes(b);
        if let Some(Some(r)) = self.resident.get_mut(b as usize)
            && r.pins > 0
        {
            r.pins -= 1;
            if r.pins == 0 {
                r.stamp = stamp;
                self.lru.insert(stamp, b);
                self.unpinned_bytes += bytes;
                self.pinned_bytes -= bytes;
            }
        }
        self.evict_over_capacity(false);
    }

    fn evict_over_capacity(&mut self, by_prefetch: bool) {
        while self.unpinned_bytes > self.capacity {
            let Some((_, victim)) = self.lru.pop_first() else { break };
            let bytes = self.bytes(victim);
            let wasted = self.resident.get_mut(victim as usize).and_then(Option::take).is_some_and(|r| r.unused_prefetch);
            if wasted {
                self.wasted_log.push(victim);
                self.counters.wasted_bytes += bytes;
                if by_prefetch {
                    self.counters.wasted_by_prefetch_bytes += bytes;
                }
            }
            self.unpinned_bytes -= bytes;
            self.counters.evicted_bytes += bytes;
            if by_prefetch {
                self.counters.pushed_out_bytes += bytes;
            }
            self.evicted[victim as usize] = Some(Evicted { at: self.counters.evicted_bytes, by_prefetch, wasted });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_evicts_oldest_unpinned_and_counts_waste() {
        let mut c = PageCache::new(20, vec![10, 10, 10, 10]);
        assert!(c.prefetch(0));
        assert!(c.prefetch(1));
        c.touch(0);
        assert!(c.prefetch(2)); // evicts 1, never used
        assert!(!c.is_resident(1));
        assert_eq!(c.counters().wasted_bytes, 10);
        c.pin(0); // used: not waste, and no longer counted
        assert_eq!(c.unpinned_bytes(), 10);
        c.pin(3); // read by the launch itself
        assert!(c.prefetch(1));
        assert!(c.is_resident(2) && c.is_resident(1));
        c.unpin(0); // back in the LRU, most recent: evicts 2 (unused)
        assert!(!c.is_resident(2));
        assert!(c.unpinned_bytes() <= 20);
        assert_eq!(
            c.counters(),
            CacheCounters {
                prefetched_bytes: 40,
                wasted_bytes: 20,
                used_prefetch_bytes: 10,
                evicted_bytes: 20,
                refaulted_bytes: 0,
                pushed_out_bytes: 10,
                pushed_out_needed_bytes: 0,
                wasted_by_prefetch_bytes: 10,
                wasted_refetched_bytes: 10,
                wasted_needed_later_bytes: 0,
            }
        );
    }

    #[test]
    fn what_a_prefetch_pushes_out_and_a_launch_then_needs_is_charged_to_it() {
        let mut c = PageCache::new(20, vec![10, 10, 10, 10]);
        c.pin(0);
        c.unpin(0); // ordinary cache, used
        c.pin(1);
        c.unpin(1);
        assert_eq!(c.free_bytes(), 0);
        assert!(c.prefetch(2)); // pushes 0 out
        assert!(c.pushed_out_by_prefetch(0) && !c.pushed_out_by_prefetch(1));
        c.pin(0); // a launch needs it: a refault, and a cost of the prefetch
        let k = c.counters();
        assert_eq!((k.pushed_out_bytes, k.pushed_out_needed_bytes, k.refaulted_bytes, k.evicted_bytes), (10, 10, 10, 10));
        assert!(!c.pushed_out_by_prefetch(0));
        // Pushed out again, and needed again after only 10 bytes of evictions: a refault again.
        c.unpin(0); // evicts 1 (not by a prefetch)
        assert!(c.prefetch(3)); // evicts 2 (unused: waste)
        assert!(c.prefetch(1)); // evicts 0
        assert!(c.prefetch(2)); // evicts 3
        c.pin(0);
        let k = c.counters();
        assert_eq!(k.refaulted_bytes, 20);
        assert_eq!(k.pushed_out_needed_bytes, 20);
    }
}
