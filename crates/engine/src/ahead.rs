//! Prefetching ahead of the readers the kernel's readahead cannot follow: which streams (one
//! task reading one file) to follow, which pages to load ahead of each and when, and how far
//! ahead, from the pattern records of the kernel's pattern watch.
//!
//! Followed: backward readers, and strided readers whose jumps the kernel's readahead does not
//! bridge (any descending stride; ascending strides longer than
//! [`AheadSettings::kernel_covers_pages`], by default all of them: the kernel takes a read after
//! a gap for a random read and reads ahead nothing). Forward readers, loops and random readers are left to
//! the kernel, so nothing here can slow them. The distance ahead starts at
//! [`AheadSettings::initial_pages`], doubles each time the reader has caught up with half of what
//! was requested and the stream is topped up (up to [`AheadSettings::max_pages`]), and halves when memory pressure rises, which
//! also stops every stream until it falls; a stream whose pattern breaks is dropped at once.
//!
//! Pure: sightings, pressure and the time in; load requests and drops out. It must not open or
//! read files (the daemon's stream worker and `augur_os::fetch::ahead` do).

use std::collections::HashMap;

use augur_core::model::access_pattern::{Access, Pattern};
use augur_core::model::range::PageRange;

/// How far ahead and how many streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AheadSettings {
    /// Pages requested ahead of a newly followed reader.
    pub initial_pages: u64,
    /// Most pages requested ahead of one reader.
    pub max_pages: u64,
    /// Pages per load request (requests are issued nearest to the reader first).
    pub chunk_pages: u64,
    /// Ascending strides up to this many pages are left to the kernel's readahead.
    pub kernel_covers_pages: u64,
    /// Strides up to this many pages are loaded as one contiguous span rather than piece by piece.
    pub span_pages: u64,
    /// Most streams followed at once (the least recently seen is dropped for a new one).
    pub max_streams: usize,
    /// A stream not seen for this long (milliseconds) is dropped.
    pub idle_ms: u64,
}

impl Default for AheadSettings {
    fn default() -> Self {
        AheadSettings {
            initial_pages: 256,
            max_pages: 8192,
            chunk_pages: 256,
            // The kernel's readahead treats any gap as a random read: it bridges none.
            kernel_covers_pages: 0,
            // Past a few pages a gap costs more to read through than to seek over (on an SSD
            // served at queue depth, which the kernel reaches with advice issued at once).
            span_pages: 4,
            max_streams: 64,
            idle_ms: 10_000,
        }
    }
}

/// One task reading one file (the file by device, `st_dev` encoding, and inode).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamKey {
    /// Process.
    pub tgid: u32,
    /// Thread.
    pub tid: u32,
    /// Device of the file.
    pub dev: u64,
    /// Inode of the file.
    pub ino: u64,
}

/// What the kernel said about a stream: its pattern now, at this access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sighting {
    /// The stream.
    pub key: StreamKey,
    /// The access reported.
    pub access: Access,
    /// The pattern established now.
    pub pattern: Option<Pattern>,
}

/// What the daemon should do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AheadAction {
    /// Load these page ranges of the stream's file, in this order (nearest to the reader first).
    Load {
        /// The stream.
        key: StreamKey,
        /// Ranges to load.
        ranges: Vec<PageRange>,
    },
    /// The stream is no longer followed: its file may be closed.
    Drop {
        /// The stream.
        key: StreamKey,
    },
}

/// Counters for `augur status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AheadCounts {
    /// Streams followed since start.
    pub streams_followed: u64,
    /// Pages requested ahead of readers since start.
    pub pages_requested: u64,
    /// Times a distance ahead doubled because its reader caught up with half of it.
    pub grown: u64,
    /// Times following stopped for memory pressure.
    pub pressure_stops: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Backward,
    Strided { stride: i64, len: u64 },
}

#[derive(Clone, Copy, Debug)]
struct Followed {
    direction: Direction,
    /// Pages requested ahead at most.
    window: u64,
    /// Backward: the lowest page requested. Strided: the start of the next access not requested.
    frontier: i64,
    /// Whether anything was requested yet.
    requested: bool,
    last_seen_ms: u64,
}

/// The streams followed and the rule that decides their loads.
#[derive(Clone, Debug)]
pub struct AheadStreams {
    settings: AheadSettings,
    streams: HashMap<StreamKey, Followed>,
    pressure: bool,
    counts: AheadCounts,
}

impl AheadStreams {
    /// Follows nothing yet.
    pub fn new(settings: AheadSettings) -> AheadStreams {
        let settings = AheadSettings {
            initial_pages: settings.initial_pages.max(1),
            max_pages: settings.max_pages.max(settings.initial_pages.max(1)),
            chunk_pages: settings.chunk_pages.max(1),
            max_streams: settings.max_streams.max(1),
            ..settings
        };
        AheadStreams { settings, streams: HashMap::new(), pressure: false, counts: AheadCounts::default() }
    }

    /// Streams followed now.
    pub fn followed(&self) -> usize {
        self.streams.len()
    }

    /// Whether memory pressure is high (nothing is followed until it falls).
    pub fn pressure(&self) -> bool {
        self.pressure
    }

    /// Counters since start.
    pub fn counts(&self) -> AheadCounts {
        self.counts
    }

    /// What this settings value means after clamping.
    pub fn settings(&self) -> AheadSettings {
        self.settings
    }

    /// Whether a pattern is one this module follows.
    pub fn follows(&self, pattern: Option<Pattern>) -> bool {
        self.direction_of(pattern, 1).is_some()
    }

    fn direction_of(&self, pattern: Option<Pattern>, len: u64) -> Option<Direction> {
        match pattern? {
            Pattern::Backward => Some(Direction::Backward),
            Pattern::Strided { stride } if stride < 0 || stride as u64 > self.settings.kernel_covers_pages => {
                Some(Direction::Strided { stride, len: len.max(1) })
            }
            _ => None,
        }
    }

    /// Memory pressure rose (`true`) or fell: a rise drops every stream and halves nothing
    /// further until it falls; streams are followed again from their next sighting.
    pub fn set_pressure(&mut self, high: bool) -> Vec<AheadAction> {
        if high == self.pressure {
            return Vec::new();
        }
        self.pressure = high;
        if !high {
            return Vec::new();
        }
        self.counts.pressure_stops += 1;
        let mut keys: Vec<StreamKey> = self.streams.keys().copied().collect();
        keys.sort();
        self.streams.clear();
        keys.into_iter().map(|key| AheadAction::Drop { key }).collect()
    }

    /// Drops the streams not seen for [`AheadSettings::idle_ms`].
    pub fn expire(&mut self, now_ms: u64) -> Vec<AheadAction> {
        let idle = self.settings.idle_ms;
        let mut gone: Vec<StreamKey> =
            self.streams.iter().filter(|(_, f)| now_ms.saturating_sub(f.last_seen_ms) > idle).map(|(k, _)| *k).collect();
        gone.sort();
        for k in &gone {
            self.streams.remove(k);
        }
        gone.into_iter().map(|key| AheadAction::Drop { key }).collect()
    }

    /// Takes one sighting at `now_ms`; returns what to do.
    pub fn on_sighting(&mut self, s: &Sighting, now_ms: u64) -> Vec<AheadAction> {
        let mut out = Vec::new();
        let Some(direction) = self.direction_of(s.pattern, s.access.len).filter(|_| !self.pressure) else {
            if self.streams.remove(&s.key).is_some() {
                out.push(AheadAction::Drop { key: s.key });
            }
            return out;
        };
        let fresh = Followed {
            direction,
            window: self.settings.initial_pages,
            frontier: s.access.start as i64,
            requested: false,
            last_seen_ms: now_ms,
        };
        let f = match self.streams.get_mut(&s.key) {
            Some(f) if f.direction == direction => f,
            Some(f) => {
                *f = fresh;
                f
            }
            None => {
                if self.streams.len() >= self.settings.max_streams
                    && let Some(oldest) = self.streams.iter().min_by_key(|(k, f)| (f.last_seen_ms, **k)).map(|(k, _)| *k)
                {
                    self.streams.remove(&oldest);
                    out.push(AheadAction::Drop { key: oldest });
                }
                self.counts.streams_followed += 1;
                self.streams.entry(s.key).or_insert(fresh)
            }
        };
        f.last_seen_ms = now_ms;
        let ranges = plan(f, s.access, &self.settings, &mut self.counts.grown);
        let pages: u64 = ranges.iter().map(|r| r.len).sum();
        if pages > 0 {
            self.counts.pages_requested += pages;
            out.push(AheadAction::Load { key: s.key, ranges });
        }
        out
    }
}

/// The loads one sighting at `access` calls for, updating the stream's frontier and window.
fn plan(f: &mut Followed, access: Access, settings: &AheadSettings, grown: &mut u64) -> Vec<PageRange> {
    let pos = access.start as i64;
    match f.direction {
        Direction::Backward => {
            // Requested ahead: pages frontier..pos.
            if pos < f.frontier {
                f.frontier = pos;
            }
            let covered = (pos - f.frontier) as u64;
            if covered >= f.window / 2 || f.frontier <= 0 {
                return Vec::new();
            }
            // The reader has caught up with half of what was requested: ramp up, as the
            // kernel's readahead does for forward readers.
            if f.requested {
                grow(f, settings, grown);
            }
            let target = (pos - f.window as i64).max(0);
            let range = PageRange::from_bounds(target as u64, f.frontier as u64);
            f.frontier = target;
            f.requested = true;
            // Nearest the reader first: the chunks from the top down.
            let mut chunks: Vec<PageRange> = range.chunks(settings.chunk_pages).collect();
            chunks.reverse();
            chunks
        }
        Direction::Strided { stride, len } => {
            // Accesses requested ahead: those from pos + stride up to (not including) frontier.
            let next = pos + stride;
            let behind = if stride > 0 { f.frontier <= next } else { f.frontier >= next };
            if behind {
                f.frontier = next;
            }
            let covered = ((f.frontier - next) / stride) as u64;
            let per_access = len.max(1);
            if covered >= (f.window / per_access).max(1).div_ceil(2) {
                return Vec::new();
            }
            if f.requested {
                grow(f, settings, grown);
            }
            let ahead = (f.window / per_access).max(1);
            let mut ranges: Vec<PageRange> = Vec::new();
            let mut at = f.frontier;
            for _ in covered..ahead {
                if at < 0 {
                    break;
                }
                let piece = PageRange::new(at as u64, per_access);
                match ranges.last_mut() {
                    // Short strides: one contiguous span, in the reader's direction.
                    Some(last) if stride.unsigned_abs() <= settings.span_pages && stride > 0 => {
                        *last = PageRange::from_bounds(last.start, piece.end());
                    }
                    Some(last) if stride.unsigned_abs() <= settings.span_pages => {
                        *last = PageRange::from_bounds(piece.start, last.end());
                    }
                    _ => ranges.push(piece),
                }
                at += stride;
            }
            f.frontier = at;
            f.requested = true;
            ranges.into_iter().flat_map(|r| split_toward(r, stride < 0, settings.chunk_pages)).collect()
        }
    }
}

/// `r` in chunks, nearest to a reader moving down (`down`) or up first.
fn split_toward(r: PageRange, down: bool, chunk: u64) -> Vec<PageRange> {
    let mut c: Vec<PageRange> = r.chunks(chunk).collect();
    if down {
        c.reverse();
    }
    c
}

fn grow(f: &mut Followed, settings: &AheadSettings, grown: &mut u64) {
    let next = (f.window * 2).min(settings.max_pages);
    if next > f.window {
        f.window = next;
        *grown += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KEY: StreamKey = StreamKey { tgid: 10, tid: 11, dev: 2049, ino: 77 };

    fn settings() -> AheadSettings {
        AheadSettings { initial_pages: 64, max_pages: 256, chunk_pages: 32, ..AheadSettings::default() }
    }

    fn sight(start: u64, len: u64, pattern: Pattern) -> Sighting {
        Sighting { key: KEY, access: Access::new(start, len), pattern: Some(pattern) }
    }

    fn loads(actions: &[AheadAction]) -> Vec<PageRange> {
        actions
            .iter()
            .flat_map(|a| match a {
                AheadAction::Load { ranges, .. } => ranges.clone(),
                AheadAction::Drop { .. } => Vec::new(),
            })
            .collect()
    }

    #[test]
    fn a_backward_reader_gets_the_pages_below_it_nearest_first() {
        let mut s = AheadStreams::new(settings());
        let a = s.on_sighting(&sight(1000, 1, Pattern::Backward), 0);
        assert_eq!(loads(&a), vec![PageRange::new(968, 32), PageRange::new(936, 32)]);
        // Half the window still ahead: nothing more yet.
        assert!(loads(&s.on_sighting(&sight(970, 1, Pattern::Backward), 1)).is_empty());
        // Less than half: topped up, the distance doubled (the reader caught up with half).
        let expected = vec![PageRange::new(928, 8), PageRange::new(896, 32), PageRange::new(864, 32), PageRange::new(832, 32)];
        assert_eq!(loads(&s.on_sighting(&sight(960, 1, Pattern::Backward), 2)), expected);
        assert_eq!(s.counts().grown, 1);
        assert_eq!(s.followed(), 1);
    }

    #[test]
    fn the_window_doubles_when_the_reader_catches_up_and_stops_at_the_maximum() {
        let mut s = AheadStreams::new(settings());
        s.on_sighting(&sight(10_000, 1, Pattern::Backward), 0);
        let mut pos = 10_000;
        for _ in 0..6 {
            pos -= 200; // past everything requested
            s.on_sighting(&sight(pos, 1, Pattern::Backward), 0);
        }
        assert_eq!(s.counts().grown, 2, "64 -> 128 -> 256, capped");
        let a = s.on_sighting(&sight(pos - 300, 1, Pattern::Backward), 0);
        assert_eq!(loads(&a).iter().map(|r| r.len).sum::<u64>(), 256);
    }

    #[test]
    fn the_start_of_the_file_ends_a_backward_stream_s_loads() {
        let mut s = AheadStreams::new(settings());
        assert_eq!(
            loads(&s.on_sighting(&sight(40, 1, Pattern::Backward), 0)),
            vec![PageRange::new(32, 8), PageRange::new(0, 32)]
        );
        assert!(loads(&s.on_sighting(&sight(20, 1, Pattern::Backward), 0)).is_empty());
    }

    #[test]
    fn forward_loop_random_and_short_forward_strides_are_left_to_the_kernel() {
        let mut s = AheadStreams::new(AheadSettings { kernel_covers_pages: 32, ..settings() });
        for p in [Pattern::Forward, Pattern::Random, Pattern::Loop { first: 0, end: 10 }, Pattern::Strided { stride: 16 }] {
            assert!(s.on_sighting(&sight(100, 1, p), 0).is_empty(), "{p:?}");
        }
        assert_eq!(s.followed(), 0);
    }

    #[test]
    fn a_long_stride_is_loaded_piece_by_piece_a_short_one_as_a_span() {
        let mut s = AheadStreams::new(settings());
        let a = s.on_sighting(&sight(0, 2, Pattern::Strided { stride: 100 }), 0);
        let r = loads(&a);
        assert_eq!(r.len(), 32, "64 pages of 2-page pieces");
        assert_eq!(r[0], PageRange::new(100, 2));
        assert_eq!(r[1], PageRange::new(200, 2));
        let mut s = AheadStreams::new(settings());
        let r = loads(&s.on_sighting(&sight(10_000, 1, Pattern::Strided { stride: -4 }), 0));
        assert_eq!(r.iter().map(|r| r.len).sum::<u64>(), 4 * 63 + 1);
        assert_eq!(r[0].end(), 9997, "nearest the reader first");
    }

    #[test]
    fn a_break_drops_the_stream_and_pressure_drops_them_all() {
        let mut s = AheadStreams::new(settings());
        s.on_sighting(&sight(1000, 1, Pattern::Backward), 0);
        assert_eq!(s.on_sighting(&sight(900, 1, Pattern::Random), 0), vec![AheadAction::Drop { key: KEY }]);
        s.on_sighting(&sight(1000, 1, Pattern::Backward), 0);
        assert_eq!(s.set_pressure(true), vec![AheadAction::Drop { key: KEY }]);
        assert!(s.on_sighting(&sight(990, 1, Pattern::Backward), 0).is_empty());
        assert!(s.set_pressure(false).is_empty());
        assert!(!s.on_sighting(&sight(980, 1, Pattern::Backward), 0).is_empty());
        assert_eq!(s.counts().pressure_stops, 1);
    }

    #[test]
    fn idle_and_excess_streams_are_dropped() {
        let mut s = AheadStreams::new(AheadSettings { max_streams: 2, idle_ms: 100, ..settings() });
        for (i, t) in [(1u32, 0u64), (2, 10), (3, 20)] {
            let key = StreamKey { tid: i, ..KEY };
            let a = s.on_sighting(&Sighting { key, access: Access::new(500, 1), pattern: Some(Pattern::Backward) }, t);
            if i == 3 {
                assert!(a.contains(&AheadAction::Drop { key: StreamKey { tid: 1, ..KEY } }));
            }
        }
        assert_eq!(s.followed(), 2);
        assert_eq!(s.expire(115), vec![AheadAction::Drop { key: StreamKey { tid: 2, ..KEY } }]);
    }

    proptest! {
        /// Whatever a backward reader does, what is requested lies below it, is never requested
        /// twice, and never exceeds the largest window below it.
        #[test]
        fn backward_loads_stay_below_the_reader_and_never_repeat(steps in proptest::collection::vec(1u64..300, 1..60)) {
            let mut s = AheadStreams::new(settings());
            let mut pos = 20_000u64;
            let mut seen = augur_core::model::range::RangeSet::default();
            for step in steps {
                for r in loads(&s.on_sighting(&sight(pos, 1, Pattern::Backward), 0)) {
                    prop_assert!(r.end() <= pos);
                    prop_assert!(r.start + settings().max_pages >= pos);
                    prop_assert_eq!(seen.missing_from(r), vec![r]);
                    seen.insert(r);
                }
                pos -= step;
            }
        }
    }
}
