//! Dropping a large read-once stream behind its reader (DEAR's treatment of sequential access):
//! which forward readers are streams to drop, and which pages behind each to drop, from the
//! pattern records of the kernel's pattern watch, so a backup, a media player or a `cat` of a big
//! file does not push the working sets augur learned out of the page cache.
//!
//! The rule, per stream (one task reading one file forward):
//! - only a file of at least [`BehindSettings::min_file_pages`] is a stream to drop (a smaller
//!   file read through may be read again soon, and costs little cache);
//! - when the stream is first seen, the daemon reports which pages of the file ahead of the
//!   reader were resident already ([`BehindStreams::examined`]): those belong to someone else's
//!   working set and are never dropped, and neither is anything before where it was first seen;
//! - the daemon also reports the memory the reader could still fill without anything being
//!   evicted (the room left under its memory cgroups and the machine's free memory): the stream's
//!   first [`BehindSettings::keep_free_percent`] of that, from where it was first seen, is kept
//!   (DEAR's MRU keeps what came first; it costs no one a page, and a file read again, a loop,
//!   finds it cached), and only what lies beyond is dropped;
//! - each time the reader is seen further on, the pages from where the last drop ended up to
//!   [`BehindSettings::lag_pages`] behind the reader are dropped, less those resident before; the
//!   kernel itself skips pages someone maps, dirty pages and pages under writeback;
//! - a stream whose pattern changes (a loop, a jump back) is forgotten at once: a file read again
//!   keeps what the kernel caches of it from then on.
//!
//! Pure: sightings in, drop requests out. It must not open files or call the kernel (the daemon's
//! stream worker and `augur_os::fetch::ahead` do).

use std::collections::HashMap;

use augur_core::model::access_pattern::Pattern;
use augur_core::model::range::{PageRange, RangeSet};

use crate::ahead::{Sighting, StreamKey};

/// Pages each drop reaches back before where the last one ended (more than the page cache's
/// largest folio).
pub const REDROP_PAGES: u64 = 2048;

/// Which streams and how far behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BehindSettings {
    /// Smallest file (pages) whose forward readers are dropped behind.
    pub min_file_pages: u64,
    /// Pages kept behind the reader (a reader that steps back a little finds them).
    pub lag_pages: u64,
    /// Percent of the memory free for the reader when its stream is first seen kept as the
    /// stream's resident prefix, in [0, 100] (0: everything passed is dropped).
    pub keep_free_percent: u64,
    /// Most streams dropped behind at once (the least recently seen is forgotten for a new one).
    pub max_streams: usize,
    /// A stream not seen for this long (milliseconds) is forgotten.
    pub idle_ms: u64,
}

impl Default for BehindSettings {
    fn default() -> Self {
        BehindSettings { min_file_pages: 65_536, lag_pages: 512, keep_free_percent: 50, max_streams: 64, idle_ms: 10_000 }
    }
}

/// What the daemon should do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BehindAction {
    /// A forward reader not seen before: open its file and report its size and which of its pages
    /// from `from` on are resident now ([`BehindStreams::examined`]).
    Examine {
        /// The stream.
        key: StreamKey,
        /// The reader's position.
        from: u64,
    },
    /// Drop these page ranges of the stream's file from the page cache.
    Drop {
        /// The stream.
        key: StreamKey,
        /// Ranges passed by the reader, none resident before it came.
        ranges: Vec<PageRange>,
    },
    /// The stream is no longer dropped behind: its file may be closed.
    Forget {
        /// The stream.
        key: StreamKey,
    },
}

/// Counters for `augur status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BehindCounts {
    /// Streams dropped behind since start.
    pub streams: u64,
    /// Pages asked to be dropped since start.
    pub pages_dropped: u64,
}

#[derive(Clone, Debug)]
enum State {
    /// Examine asked at page `from`; the answer has not come.
    Examining { from: u64 },
    /// Not a stream to drop (a small file, or its file could not be opened): ignored until it
    /// is forgotten.
    Ignored,
    /// Dropped behind from `first` on (where it was first seen, past the prefix kept):
    /// everything below `dropped_to` was handled.
    Dropping { first: u64, dropped_to: u64, resident_before: RangeSet },
}

#[derive(Clone, Debug)]
struct Stream {
    state: State,
    /// The reader's furthest position seen.
    at: u64,
    last_seen_ms: u64,
}

/// How many pages of a stream, from where it was first seen, to keep when its reader could fill
/// `free_pages` more without anything being evicted (`None`: not known, nothing kept).
pub fn kept_prefix(settings: &BehindSettings, free_pages: Option<u64>) -> u64 {
    free_pages.map_or(0, |free| free.saturating_mul(settings.keep_free_percent.min(100)) / 100)
}

/// The streams dropped behind and the rule that decides their drops.
#[derive(Clone, Debug)]
pub struct BehindStreams {
    settings: BehindSettings,
    streams: HashMap<StreamKey, Stream>,
    counts: BehindCounts,
}

impl BehindStreams {
    /// Drops nothing yet.
    pub fn new(settings: BehindSettings) -> BehindStreams {
        let settings = BehindSettings { max_streams: settings.max_streams.max(1), ..settings };
        BehindStreams { settings, streams: HashMap::new(), counts: BehindCounts::default() }
    }

    /// Streams dropped behind now.
    pub fn dropping(&self) -> usize {
        self.streams.values().filter(|s| matches!(s.state, State::Dropping { .. })).count()
    }

    /// Streams known now (examined, ignored or dropped behind).
    pub fn known(&self) -> usize {
        self.streams.len()
    }

    /// Counters since start.
    pub fn counts(&self) -> BehindCounts {
        self.counts
    }

    /// Whether a file of `file_pages` pages is large enough to be dropped behind (the daemon
    /// need not probe a smaller one before answering [`BehindAction::Examine`]).
    pub fn wants(&self, file_pages: u64) -> bool {
        file_pages >= self.settings.min_file_pages
    }

    /// Takes one sighting at `now_ms`; returns what to do.
    pub fn on_sighting(&mut self, s: &Sighting, now_ms: u64) -> Vec<BehindAction> {
        let mut out = Vec::new();
        if s.pattern != Some(Pattern::Forward) {
            if self.streams.remove(&s.key).is_some() {
                out.push(BehindAction::Forget { key: s.key });
            }
            return out;
        }
        let pos = s.access.start;
        if !self.streams.contains_key(&s.key) {
            if self.streams.len() >= self.settings.max_streams
                && let Some(oldest) = self.streams.iter().min_by_key(|(k, st)| (st.last_seen_ms, **k)).map(|(k, _)| *k)
            {
                self.streams.remove(&oldest);
                out.push(BehindAction::Forget { key: oldest });
            }
            self.streams.insert(s.key, Stream { state: State::Examining { from: pos }, at: pos, last_seen_ms: now_ms });
            out.push(BehindAction::Examine { key: s.key, from: pos });
            return out;
        }
        if let Some(st) = self.streams.get_mut(&s.key) {
            st.last_seen_ms = now_ms;
            st.at = st.at.max(pos);
        }
        out.extend(self.drops(s.key));
        out
    }

    /// The answer to [`BehindAction::Examine`]: the file has `file_pages` pages (`None`: it could
    /// not be opened), of those from the reader's position on, `resident` were in the page cache
    /// already, and the reader could fill `free_pages` more without anything being evicted
    /// (`None`: not known; no prefix is kept).
    pub fn examined(
        &mut self,
        key: StreamKey,
        file_pages: Option<u64>,
        resident: RangeSet,
        free_pages: Option<u64>,
    ) -> Vec<BehindAction> {
        let min = self.settings.min_file_pages;
        let keep = kept_prefix(&self.settings, free_pages);
        let Some(st) = self.streams.get_mut(&key) else { return Vec::new() };
        let State::Examining { from } = st.state else { return Vec::new() };
        match file_pages {
            Some(pages) if pages >= min => {
                // What the reader passed before it was seen is not known to have been its own;
                // the prefix after it is kept.
                let first = from.saturating_add(keep);
                st.state = State::Dropping { first, dropped_to: first, resident_before: resident };
                self.counts.streams += 1;
                self.drops(key)
            }
            _ => {
                st.state = State::Ignored;
                Vec::new()
            }
        }
    }

    /// Forgets the streams not seen for [`BehindSettings::idle_ms`].
    pub fn expire(&mut self, now_ms: u64) -> Vec<BehindAction> {
        let idle = self.settings.idle_ms;
        let mut gone: Vec<StreamKey> =
            self.streams.iter().filter(|(_, s)| now_ms.saturating_sub(s.last_seen_ms) > idle).map(|(k, _)| *k).collect();
        gone.sort();
        for k in &gone {
            self.streams.remove(k);
        }
        gone.into_iter().map(|key| BehindAction::Forget { key }).collect()
    }

    /// The drop a stream calls for now: from where the last one ended to `lag_pages` behind the
    /// reader, less the pages resident before.
    fn drops(&mut self, key: StreamKey) -> Vec<BehindAction> {
        let lag = self.settings.lag_pages;
        let Some(Stream { state: State::Dropping { first, dropped_to, resident_before }, at, .. }) = self.streams.get_mut(&key)
        else {
            return Vec::new();
        };
        let until = at.saturating_sub(lag);
        if until <= *dropped_to {
            return Vec::new();
        }
        let new: u64 = resident_before.missing_from(PageRange::from_bounds(*dropped_to, until)).iter().map(|r| r.len).sum();
        // The kernel drops only the folios wholly inside a range: a large folio across the last
        // drop's end stayed, so each drop starts again a margin before it.
        let passed = PageRange::from_bounds(dropped_to.saturating_sub(REDROP_PAGES).max(*first), until);
        *dropped_to = until;
        let ranges = resident_before.missing_from(passed);
        if new == 0 {
            return Vec::new();
        }
        self.counts.pages_dropped += new;
        vec![BehindAction::Drop { key, ranges }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use augur_core::model::access_pattern::Access;

    const K: StreamKey = StreamKey { tgid: 7, tid: 7, dev: 1, ino: 9 };

    fn seen(pattern: Option<Pattern>, start: u64) -> Sighting {
        Sighting { key: K, access: Access { start, len: 1 }, pattern }
    }

    fn settings() -> BehindSettings {
        BehindSettings { min_file_pages: 1000, lag_pages: 10, keep_free_percent: 50, max_streams: 4, idle_ms: 1000 }
    }

    fn dropped(actions: &[BehindAction]) -> Vec<PageRange> {
        actions
            .iter()
            .flat_map(|a| match a {
                BehindAction::Drop { ranges, .. } => ranges.clone(),
                _ => Vec::new(),
            })
            .collect()
    }

    #[test]
    fn a_large_forward_stream_is_dropped_behind_its_reader_but_not_what_was_resident_before() {
        let mut b = BehindStreams::new(settings());
        assert_eq!(b.on_sighting(&seen(Some(Pattern::Forward), 4), 0), vec![BehindAction::Examine { key: K, from: 4 }]);
        // Pages 100..120 were someone else's, resident before the reader came.
        let resident: RangeSet = [PageRange::new(100, 20)].into_iter().collect();
        assert_eq!(b.examined(K, Some(5000), resident, None), Vec::new(), "nothing passed yet beyond the lag");
        assert_eq!(b.dropping(), 1);
        // From where it was first seen (page 4) to 10 pages behind it.
        assert_eq!(dropped(&b.on_sighting(&seen(Some(Pattern::Forward), 60), 1)), vec![PageRange::new(4, 46)]);
        assert_eq!(
            dropped(&b.on_sighting(&seen(Some(Pattern::Forward), 200), 2)),
            vec![PageRange::new(4, 96), PageRange::new(120, 70)],
            "from a margin before the last drop's end (large folios across it stayed)"
        );
        // A reader seen behind where it was drops nothing again.
        assert!(dropped(&b.on_sighting(&seen(Some(Pattern::Forward), 150), 3)).is_empty());
        assert_eq!(b.counts(), BehindCounts { streams: 1, pages_dropped: 166 });
        // The pattern changes (a loop back to the start): forgotten at once.
        assert_eq!(b.on_sighting(&seen(Some(Pattern::Loop { first: 0, end: 300 }), 0), 4), vec![BehindAction::Forget { key: K }]);
        assert_eq!(b.known(), 0);
    }

    #[test]
    fn small_files_and_files_that_cannot_be_opened_are_left_alone() {
        let mut b = BehindStreams::new(settings());
        b.on_sighting(&seen(Some(Pattern::Forward), 0), 0);
        assert!(b.examined(K, Some(999), RangeSet::new(), Some(100)).is_empty());
        assert!(dropped(&b.on_sighting(&seen(Some(Pattern::Forward), 900), 1)).is_empty());
        let other = StreamKey { ino: 10, ..K };
        b.on_sighting(&Sighting { key: other, access: Access { start: 0, len: 1 }, pattern: Some(Pattern::Forward) }, 0);
        assert!(b.examined(other, None, RangeSet::new(), Some(100)).is_empty());
        assert_eq!(b.dropping(), 0);
        assert_eq!(b.counts(), BehindCounts::default());
        // Backward and other readers are never examined.
        let back = StreamKey { ino: 11, ..K };
        assert!(
            b.on_sighting(&Sighting { key: back, access: Access { start: 50, len: 1 }, pattern: Some(Pattern::Backward) }, 0)
                .is_empty()
        );
    }

    #[test]
    fn a_prefix_of_the_free_memory_is_kept_and_what_lies_beyond_is_dropped() {
        let mut b = BehindStreams::new(settings());
        b.on_sighting(&seen(Some(Pattern::Forward), 4), 0);
        // 200 pages free: the 100 from where it was first seen (pages 4..104) stay.
        assert!(b.examined(K, Some(5000), RangeSet::new(), Some(200)).is_empty());
        assert!(dropped(&b.on_sighting(&seen(Some(Pattern::Forward), 110), 1)).is_empty(), "within the prefix and the lag");
        assert_eq!(dropped(&b.on_sighting(&seen(Some(Pattern::Forward), 300), 2)), vec![PageRange::from_bounds(104, 290)]);
        assert_eq!(
            dropped(&b.on_sighting(&seen(Some(Pattern::Forward), 400), 3)),
            vec![PageRange::from_bounds(104, 390)],
            "the margin for large folios never reaches into the prefix"
        );
        assert_eq!(b.counts().pages_dropped, 286);
        assert_eq!(kept_prefix(&settings(), None), 0);
        assert_eq!(kept_prefix(&BehindSettings { keep_free_percent: 0, ..settings() }, Some(200)), 0);
        assert_eq!(kept_prefix(&BehindSettings { keep_free_percent: 250, ..settings() }, Some(200)), 200);
    }

    #[test]
    fn idle_and_surplus_streams_are_forgotten() {
        let mut b = BehindStreams::new(settings());
        for ino in 0..5u64 {
            let key = StreamKey { ino, ..K };
            let out = b.on_sighting(&Sighting { key, access: Access { start: 0, len: 1 }, pattern: Some(Pattern::Forward) }, ino);
            if ino == 4 {
                assert_eq!(out[0], BehindAction::Forget { key: StreamKey { ino: 0, ..K } });
            }
        }
        assert_eq!(b.known(), 4);
        // Seen at 1, 2, 3 and 4 ms: at 1003 ms, those of 1 and 2 ms were idle more than a second.
        assert_eq!(b.expire(1003).len(), 2);
        assert_eq!(b.known(), 2);
    }
}
