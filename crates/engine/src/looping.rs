//! Keeping a resident prefix of a loop larger than the memory its reader can have (DEAR's MRU
//! treatment of looping access): which looping readers to treat, and which pages behind each to
//! drop, from the pattern records of the kernel's pattern watch.
//!
//! Left to the kernel, a reader that loops over more than the memory it can have cycles every
//! page through the cache: by the time it comes back to a page, least-recently-used replacement
//! has evicted it, so every pass reads the whole loop from disk. Keeping the loop's first pages
//! and dropping the rest behind the reader (the most recently used ones, MRU) lets every pass
//! after the second find the prefix cached and read only the rest.
//!
//! The rule, per stream (one task looping over a range of one file):
//! - when the loop is first seen, the daemon reports how much memory the reader can have (the
//!   loop's pages cached now plus the room left under its memory cgroups or on the machine,
//!   [`memory_for_loop`], [`LoopStreams::examined`]);
//! - a loop that fits in it is left to the kernel; otherwise the first
//!   [`LoopSettings::keep_percent`] of that memory, from the loop's first page on, is the prefix
//!   kept;
//! - each time the reader is seen further on in a pass, the pages beyond the prefix from where
//!   the last drop ended up to [`LoopSettings::lag_pages`] behind the reader are dropped; when it
//!   comes back to the loop's start, the rest of the pass it finished is dropped. The kernel
//!   itself skips pages someone maps, dirty pages and pages under writeback;
//! - a stream whose pattern stops being a loop is forgotten at once.
//!
//! Pure: sightings in, drop requests out. It must not open files, read the reader's memory limit
//! or call the kernel (the daemon's stream worker and `augur_os` do).

use std::collections::HashMap;

use augur_core::model::access_pattern::Pattern;
use augur_core::model::range::PageRange;

use crate::ahead::{Sighting, StreamKey};
use crate::behind::REDROP_PAGES;

/// Which loops and how much of each to keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopSettings {
    /// Percent of the memory the reader can have kept as the loop's resident prefix, in [1, 100].
    pub keep_percent: u64,
    /// Pages kept behind the reader (a reader that steps back a little finds them).
    pub lag_pages: u64,
    /// Most loops treated at once (the least recently seen is forgotten for a new one).
    pub max_streams: usize,
    /// A stream not seen for this long (milliseconds) is forgotten.
    pub idle_ms: u64,
}

impl Default for LoopSettings {
    fn default() -> Self {
        LoopSettings { keep_percent: 90, lag_pages: 512, max_streams: 64, idle_ms: 10_000 }
    }
}

/// What the daemon should do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoopAction {
    /// A loop not seen before: open its file and report how much memory its reader can have
    /// ([`LoopStreams::examined`]).
    Examine {
        /// The stream.
        key: StreamKey,
    },
    /// Drop these page ranges of the stream's file from the page cache.
    Drop {
        /// The stream.
        key: StreamKey,
        /// Ranges of the loop beyond its prefix that the reader passed.
        ranges: Vec<PageRange>,
    },
    /// The stream is no longer treated: its file may be closed.
    Forget {
        /// The stream.
        key: StreamKey,
    },
}

/// Counters for `augur status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoopCounts {
    /// Loops treated (larger than their reader's memory) since start.
    pub loops: u64,
    /// Pages asked to be dropped since start.
    pub pages_dropped: u64,
}

#[derive(Clone, Debug)]
enum State {
    /// Examine asked; the answer has not come.
    Examining,
    /// Fits in the reader's memory, or its file could not be opened: left to the kernel until it
    /// is forgotten.
    Ignored,
    /// Treated: `[first, keep_end)` is kept, and in this pass everything of `[keep_end, end)` below
    /// `dropped_to` was handled.
    Treated { keep_end: u64, dropped_to: u64 },
}

#[derive(Clone, Debug)]
struct Stream {
    state: State,
    first: u64,
    end: u64,
    last_seen_ms: u64,
}

/// How many of a loop's pages to keep resident, when its reader can have `memory_pages`: `None`
/// when the loop fits (it is left to the kernel).
pub fn kept_prefix(settings: &LoopSettings, loop_pages: u64, memory_pages: u64) -> Option<u64> {
    if loop_pages <= memory_pages {
        return None;
    }
    Some(memory_pages.saturating_mul(settings.keep_percent.clamp(1, 100)) / 100)
}

/// The memory a looping reader can have, pages: the pages of the loop cached now (the reader's
/// own, which it may keep) plus the least of the room left under its memory cgroups (each one's
/// limit less its usage, `None`: no limit) and what the machine has available. The room, not the
/// limit: what others keep in the reader's cgroup is theirs, and a prefix that filled the whole
/// limit would have the kernel evict it to make room for them.
pub fn memory_for_loop(cgroup_room_pages: Option<u64>, available_pages: u64, loop_resident_pages: u64) -> u64 {
    let free = cgroup_room_pages.map_or(available_pages, |room| room.min(available_pages));
    free.saturating_add(loop_resident_pages)
}

/// The loops treated and the rule that decides their drops.
#[derive(Clone, Debug)]
pub struct LoopStreams {
    settings: LoopSettings,
    streams: HashMap<StreamKey, Stream>,
    counts: LoopCounts,
}

impl LoopStreams {
    /// Treats nothing yet.
    pub fn new(settings: LoopSettings) -> LoopStreams {
        let settings = LoopSettings { max_streams: settings.max_streams.max(1), ..settings };
        LoopStreams { settings, streams: HashMap::new(), counts: LoopCounts::default() }
    }

    /// Its settings.
    pub fn settings(&self) -> &LoopSettings {
        &self.settings
    }

    /// Loops treated now.
    pub fn treated(&self) -> usize {
        self.streams.values().filter(|s| matches!(s.state, State::Treated { .. })).count()
    }

    /// Streams known now (examined, ignored or treated).
    pub fn known(&self) -> usize {
        self.streams.len()
    }

    /// Counters since start.
    pub fn counts(&self) -> LoopCounts {
        self.counts
    }

    /// The loop range `[first, end)` of a stream known now.
    pub fn range(&self, key: StreamKey) -> Option<PageRange> {
        self.streams.get(&key).map(|s| PageRange::from_bounds(s.first, s.end))
    }

    /// Takes one sighting at `now_ms`; returns what to do.
    pub fn on_sighting(&mut self, s: &Sighting, now_ms: u64) -> Vec<LoopAction> {
        let mut out = Vec::new();
        let Some(Pattern::Loop { first, end }) = s.pattern else {
            if self.streams.remove(&s.key).is_some() {
                out.push(LoopAction::Forget { key: s.key });
            }
            return out;
        };
        let known_first = self.streams.get(&s.key).map(|st| st.first);
        if known_first.is_some_and(|f| f != first) {
            // A loop over another range: a new loop.
            self.streams.remove(&s.key);
            out.push(LoopAction::Forget { key: s.key });
        }
        if !self.streams.contains_key(&s.key) {
            if self.streams.len() >= self.settings.max_streams
                && let Some(oldest) = self.streams.iter().min_by_key(|(k, st)| (st.last_seen_ms, **k)).map(|(k, _)| *k)
            {
                self.streams.remove(&oldest);
                out.push(LoopAction::Forget { key: oldest });
            }
            self.streams.insert(s.key, Stream { state: State::Examining, first, end, last_seen_ms: now_ms });
            out.push(LoopAction::Examine { key: s.key });
            return out;
        }
        let lag = self.settings.lag_pages;
        let Some(st) = self.streams.get_mut(&s.key) else { return out };
        st.last_seen_ms = now_ms;
        st.end = st.end.max(end);
        let end = st.end;
        let State::Treated { keep_end, dropped_to } = &mut st.state else { return out };
        let pos = s.access.start;
        let mut ranges = Vec::new();
        let mut new_pages = 0;
        // The kernel drops only the folios wholly inside a range: each drop starts again a margin
        // before where the last one ended.
        if pos < *dropped_to {
            // Behind where the last drop ended: a new pass. The rest of the pass the reader
            // finished goes now.
            if *dropped_to > *keep_end && end > *dropped_to {
                ranges.push(PageRange::from_bounds(dropped_to.saturating_sub(REDROP_PAGES).max(*keep_end), end));
                new_pages += end - *dropped_to;
            }
            *dropped_to = *keep_end;
        }
        let until = pos.saturating_sub(lag).min(end);
        if until > *dropped_to {
            ranges.push(PageRange::from_bounds(dropped_to.saturating_sub(REDROP_PAGES).max(*keep_end), until));
            new_pages += until - *dropped_to;
            *dropped_to = until;
        }
        if ranges.is_empty() {
            return out;
        }
        self.counts.pages_dropped += new_pages;
        out.push(LoopAction::Drop { key: s.key, ranges });
        out
    }

    /// The answer to [`LoopAction::Examine`]: the reader can have `memory_pages` pages (`None`:
    /// the file could not be opened or the memory not known).
    pub fn examined(&mut self, key: StreamKey, memory_pages: Option<u64>) -> Vec<LoopAction> {
        let settings = self.settings;
        let Some(st) = self.streams.get_mut(&key) else { return Vec::new() };
        if !matches!(st.state, State::Examining) {
            return Vec::new();
        }
        let keep = memory_pages.and_then(|m| kept_prefix(&settings, st.end.saturating_sub(st.first), m));
        match keep {
            Some(keep) => {
                let keep_end = st.first + keep;
                st.state = State::Treated { keep_end, dropped_to: keep_end };
                self.counts.loops += 1;
            }
            None => st.state = State::Ignored,
        }
        Vec::new()
    }

    /// Forgets the streams not seen for [`LoopSettings::idle_ms`].
    pub fn expire(&mut self, now_ms: u64) -> Vec<LoopAction> {
        let idle = self.settings.idle_ms;
        let mut gone: Vec<StreamKey> =
            self.streams.iter().filter(|(_, s)| now_ms.saturating_sub(s.last_seen_ms) > idle).map(|(k, _)| *k).collect();
        gone.sort();
        for k in &gone {
            self.streams.remove(k);
        }
        gone.into_iter().map(|key| LoopAction::Forget { key }).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use augur_core::model::access_pattern::{Access, PatternRule, PatternTracker};

    const K: StreamKey = StreamKey { tgid: 7, tid: 7, dev: 1, ino: 9 };

    fn settings() -> LoopSettings {
        LoopSettings { keep_percent: 50, lag_pages: 4, max_streams: 4, idle_ms: 1000 }
    }

    fn dropped(actions: &[LoopAction]) -> Vec<PageRange> {
        actions
            .iter()
            .flat_map(|a| match a {
                LoopAction::Drop { ranges, .. } => ranges.clone(),
                _ => Vec::new(),
            })
            .collect()
    }

    /// The pages a looping reader finds cached, pass after pass, with a cache of `memory` pages
    /// under least-recently-used replacement, with and without the rule's drops (applied as the
    /// kernel's pattern watch would report the stream: its pattern from the reference rule, a
    /// sighting every `every` pages).
    fn simulate(loop_pages: u64, memory: u64, passes: u64, treat: bool) -> (u64, u64) {
        let every = 8;
        let mut rule = PatternTracker::new(PatternRule::default());
        let mut loops = LoopStreams::new(settings());
        // LRU cache: page -> last use.
        let mut cache: HashMap<u64, u64> = HashMap::new();
        let (mut hits, mut misses, mut clock) = (0u64, 0u64, 0u64);
        let mut last_report = 0u64;
        for _ in 0..passes {
            for page in 0..loop_pages {
                clock += 1;
                if cache.insert(page, clock).is_some() {
                    hits += 1;
                } else {
                    misses += 1;
                    if cache.len() as u64 > memory {
                        let (&old, _) = cache.iter().min_by_key(|(_, t)| **t).unwrap();
                        cache.remove(&old);
                    }
                }
                rule.observe(Access { start: page, len: 1 });
                let pattern = rule.pattern();
                let report = matches!(pattern, Some(Pattern::Loop { .. })) && (page.abs_diff(last_report) >= every || page == 0);
                if treat && report {
                    last_report = page;
                    let s = Sighting { key: K, access: Access { start: page, len: 1 }, pattern };
                    for a in loops.on_sighting(&s, clock) {
                        match a {
                            LoopAction::Examine { key } => {
                                loops.examined(key, Some(memory));
                            }
                            LoopAction::Drop { ranges, .. } => {
                                for r in ranges {
                                    for p in r.start..r.end() {
                                        cache.remove(&p);
                                    }
                                }
                            }
                            LoopAction::Forget { .. } => {}
                        }
                    }
                }
            }
        }
        (hits, misses)
    }

    #[test]
    fn a_loop_larger_than_memory_keeps_its_prefix_and_the_kernel_alone_cycles_everything() {
        let (loop_pages, memory, passes) = (600, 400, 6);
        let (kernel_hits, kernel_misses) = simulate(loop_pages, memory, passes, false);
        assert_eq!(kernel_hits, 0, "least-recently-used replacement finds nothing of a loop larger than the cache");
        assert_eq!(kernel_misses, loop_pages * passes);
        let (hits, misses) = simulate(loop_pages, memory, passes, true);
        // The loop is seen at the start of the second pass; from the third on, the prefix (half
        // the memory, 200 pages) is found cached.
        assert!(hits >= 200 * (passes - 2), "{hits} hits");
        assert!(misses <= kernel_misses - 200 * (passes - 2), "{misses} misses");
    }

    /// Hits per pass of a reader looping `passes` times over `loop_pages` with a cache of
    /// `memory` pages under least-recently-used replacement, both rules applied: the read-once
    /// rule on the first pass (keeping `keep_free_percent` of the free cache) and the loop rule
    /// from the second pass on.
    fn hits_per_pass(loop_pages: u64, memory: u64, passes: u64, keep_free_percent: u64) -> Vec<u64> {
        use crate::behind::{BehindAction, BehindSettings, BehindStreams};
        use augur_core::model::range::RangeSet;
        let every = 8;
        let mut rule = PatternTracker::new(PatternRule::default());
        let mut behind = BehindStreams::new(BehindSettings {
            min_file_pages: 1,
            lag_pages: 4,
            keep_free_percent,
            max_streams: 4,
            idle_ms: 1000,
        });
        let mut loops = LoopStreams::new(settings());
        let mut cache: HashMap<u64, u64> = HashMap::new();
        let (mut clock, mut last_report) = (0u64, 0u64);
        let mut out = Vec::new();
        for _ in 0..passes {
            let mut hits = 0;
            for page in 0..loop_pages {
                clock += 1;
                if cache.insert(page, clock).is_some() {
                    hits += 1;
                } else if cache.len() as u64 > memory {
                    let (&old, _) = cache.iter().min_by_key(|(_, t)| **t).unwrap();
                    cache.remove(&old);
                }
                rule.observe(Access { start: page, len: 1 });
                let pattern = rule.pattern();
                if pattern.is_none() || (page.abs_diff(last_report) < every && page != 0) {
                    continue;
                }
                last_report = page;
                let s = Sighting { key: K, access: Access { start: page, len: 1 }, pattern };
                let mut drops = Vec::new();
                let mut queue = behind.on_sighting(&s, clock);
                while let Some(a) = queue.pop() {
                    match a {
                        BehindAction::Examine { key, .. } => {
                            let free = memory - cache.len() as u64;
                            queue.extend(behind.examined(key, Some(loop_pages), RangeSet::new(), Some(free)));
                        }
                        BehindAction::Drop { ranges, .. } => drops.extend(ranges),
                        BehindAction::Forget { .. } => {}
                    }
                }
                for a in loops.on_sighting(&s, clock) {
                    match a {
                        LoopAction::Examine { key } => {
                            loops.examined(key, Some(memory));
                        }
                        LoopAction::Drop { ranges, .. } => drops.extend(ranges),
                        LoopAction::Forget { .. } => {}
                    }
                }
                for r in drops {
                    for p in r.start..r.end() {
                        cache.remove(&p);
                    }
                }
            }
            out.push(hits);
        }
        out
    }

    #[test]
    fn the_first_pass_kept_by_the_read_once_rule_is_found_by_the_second() {
        // 400 pages of cache, half kept: the first pass keeps about 200 pages (from page 8, where
        // the stream was first seen), the loop rule then keeps its own 200-page prefix.
        let kept = hits_per_pass(600, 400, 4, 50);
        assert_eq!(kept[0], 0);
        assert!(kept[1..].iter().all(|&h| h >= 195), "{kept:?}");
        // Without the read-once prefix, the second pass finds (almost) nothing cached.
        let dropped = hits_per_pass(600, 400, 4, 0);
        assert!(dropped[1] < 50, "{dropped:?}");
        assert!(dropped[2..].iter().all(|&h| h >= 195), "{dropped:?}");
    }

    #[test]
    fn a_loop_that_fits_is_left_to_the_kernel() {
        let (kernel_hits, _) = simulate(300, 400, 4, false);
        let (hits, _) = simulate(300, 400, 4, true);
        assert_eq!(hits, kernel_hits);
        assert_eq!(kept_prefix(&settings(), 400, 400), None);
        assert_eq!(kept_prefix(&settings(), 401, 400), Some(200));
    }

    #[test]
    fn drops_start_beyond_the_prefix_follow_the_reader_and_finish_each_pass() {
        let mut l = LoopStreams::new(settings());
        let at = |start: u64| Sighting {
            key: K,
            access: Access { start, len: 1 },
            pattern: Some(Pattern::Loop { first: 100, end: 10_100 }),
        };
        assert_eq!(l.on_sighting(&at(100), 0), vec![LoopAction::Examine { key: K }]);
        l.examined(K, Some(4000));
        assert_eq!(l.treated(), 1);
        // Prefix: 100..2100. Nothing to drop inside it.
        assert!(dropped(&l.on_sighting(&at(2000), 1)).is_empty());
        assert_eq!(dropped(&l.on_sighting(&at(5000), 2)), vec![PageRange::from_bounds(2100, 4996)]);
        assert_eq!(dropped(&l.on_sighting(&at(9000), 3)), vec![PageRange::from_bounds(4996 - REDROP_PAGES, 8996)]);
        // Back at the start: the rest of the pass goes, and the next pass starts again beyond the
        // prefix.
        assert_eq!(dropped(&l.on_sighting(&at(100), 4)), vec![PageRange::from_bounds(8996 - REDROP_PAGES, 10_100)]);
        assert_eq!(dropped(&l.on_sighting(&at(3000), 5)), vec![PageRange::from_bounds(2100, 2996)]);
        assert_eq!(l.counts().loops, 1);
        // No longer a loop: forgotten.
        let fwd = Sighting { key: K, access: Access { start: 3100, len: 1 }, pattern: Some(Pattern::Forward) };
        assert_eq!(l.on_sighting(&fwd, 6), vec![LoopAction::Forget { key: K }]);
        assert_eq!(l.known(), 0);
    }

    #[test]
    fn memory_is_the_loops_own_plus_the_least_room_of_the_cgroup_and_the_machine() {
        assert_eq!(memory_for_loop(Some(100), 1000, 50), 150);
        assert_eq!(memory_for_loop(None, 1000, 50), 1050);
        assert_eq!(memory_for_loop(Some(5000), 1000, 50), 1050);
        // A cgroup filled by others leaves the loop only what it has.
        assert_eq!(memory_for_loop(Some(0), 1000, 50), 50);
    }

    #[test]
    fn unknown_memory_idle_and_surplus_streams() {
        let mut l = LoopStreams::new(settings());
        for ino in 0..5u64 {
            let key = StreamKey { ino, ..K };
            let s = Sighting { key, access: Access { start: 0, len: 1 }, pattern: Some(Pattern::Loop { first: 0, end: 900 }) };
            let out = l.on_sighting(&s, ino);
            if ino == 4 {
                assert_eq!(out[0], LoopAction::Forget { key: StreamKey { ino: 0, ..K } });
            }
            l.examined(key, None);
        }
        assert_eq!(l.treated(), 0, "memory not known: nothing treated");
        assert_eq!(l.expire(1003).len(), 2);
        assert_eq!(l.known(), 2);
    }
}
