//! Page ranges and sets of them: the unit in which augur learns, plans and fetches.
//!
//! Owns the arithmetic of half-open page intervals (merging, subtracting, counting). Pure: no I/O,
//! no knowledge of files or of the page size beyond the page indices it is given.

use serde::{Deserialize, Serialize};

/// A half-open run of pages `[start, start + len)` within one file, in page-size units.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PageRange {
    /// Index of the first page.
    pub start: u64,
    /// Number of pages; never zero in a [`RangeSet`].
    pub len: u64,
}

impl PageRange {
    /// The range `[start, start + len)`.
    pub const fn new(start: u64, len: u64) -> Self {
        PageRange { start, len }
    }

    /// The range `[start, end)`; empty when `end <= start`.
    pub fn from_bounds(start: u64, end: u64) -> Self {
        PageRange { start, len: end.saturating_sub(start) }
    }

    /// One past the last page.
    pub const fn end(&self) -> u64 {
        self.start.saturating_add(self.len)
    }

    /// True when the range holds no page.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True when `page` lies in the range.
    pub const fn contains(&self, page: u64) -> bool {
        page >= self.start && page < self.end()
    }

    /// The pages both ranges hold, if any.
    pub fn intersect(&self, other: &PageRange) -> Option<PageRange> {
        let start = self.start.max(other.start);
        let end = self.end().min(other.end());
        (end > start).then(|| PageRange::from_bounds(start, end))
    }

    /// Splits into consecutive pieces of at most `max_pages` pages each.
    pub fn chunks(&self, max_pages: u64) -> impl Iterator<Item = PageRange> + '_ {
        let step = max_pages.max(1);
        (self.start..self.end()).step_by(step as usize).map(move |s| PageRange::from_bounds(s, (s + step).min(self.end())))
    }
}

/// A set of pages kept as sorted, disjoint, non-adjacent ranges.
///
/// Invariant: ranges are sorted by `start`, none is empty, and between any two consecutive ranges
/// there is at least one page that belongs to neither (adjacent ranges are merged).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeSet {
    ranges: Vec<PageRange>,
}

impl RangeSet {
    /// The empty set.
    pub const fn new() -> Self {
        RangeSet { ranges: Vec::new() }
    }

    /// The ranges, sorted, disjoint and non-adjacent.
    pub fn ranges(&self) -> &[PageRange] {
        &self.ranges
    }

    /// True when the set holds no page.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Number of pages in the set.
    pub fn page_count(&self) -> u64 {
        self.ranges.iter().map(|r| r.len).sum()
    }

    /// True when `page` is in the set.
    pub fn contains(&self, page: u64) -> bool {
        let i = self.ranges.partition_point(|r| r.end() <= page);
        self.ranges.get(i).is_some_and(|r| r.contains(page))
    }

    /// Adds every page of `range`, merging with overlapping or adjacent ranges.
    pub fn insert(&mut self, range: PageRange) {
        if range.is_empty() {
            return;
        }
        // First range that ends at or after range.start (could touch it).
        let lo = self.ranges.partition_point(|r| r.end() < range.start);
        // First range that starts strictly after range.end (cannot touch it).
        let hi = self.ranges.partition_point(|r| r.start <= range.end());
        if lo == hi {
            self.ranges.insert(lo, range);
            return;
        }
        let start = range.start.min(self.ranges[lo].start);
        let end = range.end().max(self.ranges[hi - 1].end());
        self.ranges.splice(lo..hi, [PageRange::from_bounds(start, end)]);
    }

    /// Removes every page of `range`.
    pub fn remove(&mut self, range: PageRange) {
        if range.is_empty() {
            return;
        }
        let lo = self.ranges.partition_point(|r| r.end() <= range.start);
        let hi = self.ranges.partition_point(|r| r.start < range.end());
        if lo >= hi {
            return;
        }
        let first = self.ranges[lo];
        let last = self.ranges[hi - 1];
        let mut kept = Vec::with_capacity(2);
        if first.start < range.start {
            kept.push(PageRange::from_bounds(first.start, range.start));
        }
        if last.end() > range.end() {
            kept.push(PageRange::from_bounds(range.end(), last.end()));
        }
        self.ranges.splice(lo..hi, kept);
    }

    /// The parts of `range` not in the set, in ascending order.
    pub fn missing_from(&self, range: PageRange) -> Vec<PageRange> {
        let mut out = Vec::new();
        let mut cursor = range.start;
        let lo = self.ranges.partition_point(|r| r.end() <= range.start);
        for r in &self.ranges[lo..] {
            if r.start >= range.end() {
                break;
            }
            if r.start > cursor {
                out.push(PageRange::from_bounds(cursor, r.start));
            }
            cursor = cursor.max(r.end());
        }
        if cursor < range.end() {
            out.push(PageRange::from_bounds(cursor, range.end()));
        }
        out
    }

    /// Number of pages of `range` that are in the set.
    pub fn overlap_count(&self, range: PageRange) -> u64 {
        let lo = self.ranges.partition_point(|r| r.end() <= range.start);
        self.ranges[lo..].iter().take_while(|r| r.start < range.end()).filter_map(|r| r.intersect(&range)).map(|r| r.len).sum()
    }

    /// Adds every page of `other`.
    pub fn union_with(&mut self, other: &RangeSet) {
        for r in &other.ranges {
            self.insert(*r);
        }
    }

    /// Merges the two neighbouring ranges with the fewest pages between them (the gap is
    /// filled) until at most `max_ranges` ranges are left (at least one): a superset of the
    /// pages, in fewer ranges, that adds as few pages as merging one gap at a time can.
    pub fn fill_smallest_gaps(&mut self, max_ranges: usize) {
        let max_ranges = max_ranges.max(1);
        while self.ranges.len() > max_ranges {
            let Some(i) = (0..self.ranges.len() - 1).min_by_key(|&i| self.ranges[i + 1].start - self.ranges[i].end()) else {
                return;
            };
            let merged = PageRange::from_bounds(self.ranges[i].start, self.ranges[i + 1].end());
            self.ranges.splice(i..i + 2, [merged]);
        }
    }
}

impl FromIterator<PageRange> for RangeSet {
    fn from_iter<I: IntoIterator<Item = PageRange>>(iter: I) -> Self {
        let mut set = RangeSet::new();
        for r in iter {
            set.insert(r);
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn pages(set: &RangeSet) -> BTreeSet<u64> {
        set.ranges().iter().flat_map(|r| r.start..r.end()).collect()
    }

    fn assert_canonical(set: &RangeSet) {
        for w in set.ranges().windows(2) {
            assert!(w[0].end() < w[1].start, "ranges {:?} and {:?} touch or overlap", w[0], w[1]);
        }
        assert!(set.ranges().iter().all(|r| !r.is_empty()));
    }

    #[test]
    fn adjacent_ranges_merge() {
        let set: RangeSet = [PageRange::new(0, 2), PageRange::new(2, 3)].into_iter().collect();
        assert_eq!(set.ranges(), &[PageRange::new(0, 5)]);
    }

    #[test]
    fn insert_bridging_many() {
        let mut set: RangeSet = [PageRange::new(0, 1), PageRange::new(4, 1), PageRange::new(8, 1)].into_iter().collect();
        set.insert(PageRange::new(1, 7));
        assert_eq!(set.ranges(), &[PageRange::new(0, 9)]);
    }

    #[test]
    fn remove_splits() {
        let mut set: RangeSet = [PageRange::new(0, 10)].into_iter().collect();
        set.remove(PageRange::new(3, 2));
        assert_eq!(set.ranges(), &[PageRange::new(0, 3), PageRange::new(5, 5)]);
    }

    #[test]
    fn the_smallest_gaps_are_filled_first_down_to_the_range_cap() {
        let mut s: RangeSet =
            [PageRange::new(0, 2), PageRange::new(10, 2), PageRange::new(13, 1), PageRange::new(30, 5)].into_iter().collect();
        s.fill_smallest_gaps(3);
        assert_eq!(s.ranges(), [PageRange::new(0, 2), PageRange::new(10, 4), PageRange::new(30, 5)]);
        s.fill_smallest_gaps(2);
        assert_eq!(s.ranges(), [PageRange::new(0, 14), PageRange::new(30, 5)]);
        s.fill_smallest_gaps(0);
        assert_eq!(s.ranges(), [PageRange::new(0, 35)], "one range at least");
        s.fill_smallest_gaps(5);
        assert_eq!(s.page_count(), 35, "nothing to do under the cap");
    }

    #[test]
    fn missing_from_reports_gaps() {
        let set: RangeSet = [PageRange::new(2, 2), PageRange::new(6, 1)].into_iter().collect();
        assert_eq!(
            set.missing_from(PageRange::new(0, 8)),
            vec![PageRange::new(0, 2), PageRange::new(4, 2), PageRange::new(7, 1)]
        );
    }

    #[test]
    fn chunks_cover_exactly() {
        let r = PageRange::new(5, 1030);
        let parts: Vec<_> = r.chunks(512).collect();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts.iter().map(|p| p.len).sum::<u64>(), 1030);
        assert_eq!(parts[0].start, 5);
        assert_eq!(parts[2].end(), 1035);
    }

    fn arb_range() -> impl Strategy<Value = PageRange> {
        (0u64..200, 0u64..20).prop_map(|(s, l)| PageRange::new(s, l))
    }

    proptest! {
        #[test]
        fn insert_matches_page_set(ranges in proptest::collection::vec(arb_range(), 0..40)) {
            let mut model = BTreeSet::new();
            let mut set = RangeSet::new();
            for r in &ranges {
                set.insert(*r);
                model.extend(r.start..r.end());
                assert_canonical(&set);
            }
            prop_assert_eq!(pages(&set), model.clone());
            prop_assert_eq!(set.page_count(), model.len() as u64);
            for p in 0..230 {
                prop_assert_eq!(set.contains(p), model.contains(&p));
            }
        }

        #[test]
        fn remove_matches_page_set(ins in proptest::collection::vec(arb_range(), 0..30),
                                   del in proptest::collection::vec(arb_range(), 0..30)) {
            let mut set: RangeSet = ins.iter().copied().collect();
            let mut model = pages(&set);
            for r in &del {
                set.remove(*r);
                for p in r.start..r.end() { model.remove(&p); }
                assert_canonical(&set);
            }
            prop_assert_eq!(pages(&set), model);
        }

        #[test]
        fn missing_and_overlap_partition_the_query(ins in proptest::collection::vec(arb_range(), 0..30),
                                                   q in arb_range()) {
            let set: RangeSet = ins.iter().copied().collect();
            let missing: u64 = set.missing_from(q).iter().map(|r| r.len).sum();
            prop_assert_eq!(missing + set.overlap_count(q), q.len);
            for m in set.missing_from(q) {
                prop_assert_eq!(set.overlap_count(m), 0);
            }
        }

        #[test]
        fn filling_gaps_keeps_every_page_within_the_cap(ins in proptest::collection::vec(arb_range(), 0..30), cap in 1usize..8) {
            let set: RangeSet = ins.iter().copied().collect();
            let mut filled = set.clone();
            filled.fill_smallest_gaps(cap);
            assert_canonical(&filled);
            prop_assert!(filled.ranges().len() <= cap.max(usize::from(!set.is_empty())));
            prop_assert!(pages(&set).is_subset(&pages(&filled)));
            prop_assert_eq!(filled.ranges().first().map(|r| r.start), set.ranges().first().map(|r| r.start));
            prop_assert_eq!(filled.ranges().last().map(|r| r.end()), set.ranges().last().map(|r| r.end()));
        }
    }
}
