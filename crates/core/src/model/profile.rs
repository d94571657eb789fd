//! Launch profiles: which pages of which files an application used while starting, in the order
//! it first used them, and the builder that turns a stream of page events into one.
//!
//! Pure: it never opens files or asks the kernel; identities and paths come from the caller.

use std::collections::HashMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::range::{PageRange, RangeSet};

/// How a file was identified when it was traced; a file whose identity changed since is stale.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FileIdentity {
    /// Device number as `stat(2)` reports it (`st_dev`).
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time in nanoseconds since the epoch.
    pub mtime_ns: i64,
}

/// A page range and when it was first used, in microseconds since the trace started.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsedRange {
    /// The pages.
    pub range: PageRange,
    /// Microseconds from the start of the launch to the first use of the range's first page.
    pub first_use_us: u64,
}

/// The pages one file contributed to a launch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileProfile {
    /// Absolute path at trace time.
    pub path: PathBuf,
    /// Identity at trace time.
    pub identity: FileIdentity,
    /// Disjoint ranges in first-use order.
    pub ranges: Vec<UsedRange>,
}

impl FileProfile {
    /// Pages this file contributes.
    pub fn page_count(&self) -> u64 {
        self.ranges.iter().map(|r| r.range.len).sum()
    }

    /// When the file was first used.
    pub fn first_use_us(&self) -> u64 {
        self.ranges.iter().map(|r| r.first_use_us).min().unwrap_or(0)
    }

    /// The file's pages as a set.
    pub fn page_set(&self) -> RangeSet {
        self.ranges.iter().map(|r| r.range).collect()
    }
}

/// Which kernel events a trace was taken from, best first. Reported so users know what they get.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TraceMode {
    /// Access events (get_pages, map_pages, fault) plus insertions: complete even on a warm cache.
    Access,
    /// Page-cache insertions only: complete on a cold cache, partial on a warm one.
    Insertion,
    /// No tracing: files from /proc maps and fanotify, whole files, no page detail.
    FileOnly,
}

impl TraceMode {
    /// A short description for status output.
    pub fn describe(self) -> &'static str {
        match self {
            TraceMode::Access => "page access events (complete even with a warm cache)",
            TraceMode::Insertion => "page-cache insertions only (complete only from a cold cache)",
            TraceMode::FileOnly => "no tracing: whole files from /proc maps and fanotify",
        }
    }
}

/// Pages seen in events whose inode could not be turned into a path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unresolved {
    /// Distinct (device, inode) pairs left without a path.
    pub inodes: u64,
    /// Pages they held.
    pub pages: u64,
}

/// One application's start-up working set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchProfile {
    /// The command that was traced, argv style.
    pub command: Vec<String>,
    /// Seconds since the epoch when the trace was taken.
    pub recorded_at: u64,
    /// Page size in bytes the page indices refer to.
    pub page_size: u64,
    /// Events the trace was built from.
    pub mode: TraceMode,
    /// Length of the traced window in milliseconds.
    pub window_ms: u64,
    /// Files in the order of their first use.
    pub files: Vec<FileProfile>,
    /// What the trace could not attribute to a path.
    pub unresolved: Unresolved,
    /// Path lookups of the launch (opens, stats, failed probes, directory listings) in first-use
    /// order, deduplicated; empty when the trace could not record them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lookups: Vec<Lookup>,
}

/// What one recorded path lookup found, which says how to repeat it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LookupKind {
    /// The path existed (opened, stat'ed, accessed, executed): repeat with a stat.
    Stat,
    /// The lookup failed (`ENOENT`/`ENOTDIR`): repeating it leaves a negative dentry.
    Missing,
    /// A directory whose entries were read (`getdents64`): repeat by listing it.
    Dir,
}

/// One path lookup of a launch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lookup {
    /// Absolute path as the program named it (`..` components kept: the walk is what counts).
    pub path: PathBuf,
    /// What the lookup found.
    pub kind: LookupKind,
}

/// The most lookups one profile keeps: enough for a compiler's include-path probing, small
/// enough to replay in milliseconds.
pub const MAX_LOOKUPS: usize = 20_000;

/// Collects lookups in first-use order: each path once, at its first use; a later listing of a
/// path first seen as a stat turns it into [`LookupKind::Dir`]; relative paths are refused;
/// at most [`MAX_LOOKUPS`] paths (the rest are counted in [`LookupList::dropped`]).
#[derive(Clone, Debug, Default)]
pub struct LookupList {
    lookups: Vec<Lookup>,
    index: HashMap<PathBuf, usize>,
    /// Lookups not kept because the list was full.
    pub dropped: u64,
}

impl LookupList {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one lookup (ignored unless `path` is absolute).
    pub fn record(&mut self, path: PathBuf, kind: LookupKind) {
        if !path.is_absolute() {
            return;
        }
        if let Some(&i) = self.index.get(&path) {
            if kind == LookupKind::Dir {
                self.lookups[i].kind = LookupKind::Dir;
            }
            return;
        }
        if self.lookups.len() >= MAX_LOOKUPS {
            self.dropped += 1;
            return;
        }
        self.index.insert(path.clone(), self.lookups.len());
        self.lookups.push(Lookup { path, kind });
    }

    /// Lookups recorded so far.
    pub fn len(&self) -> usize {
        self.lookups.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.lookups.is_empty()
    }

    /// The lookups in first-use order.
    pub fn finish(self) -> Vec<Lookup> {
        self.lookups
    }
}

impl LaunchProfile {
    /// A plausible learned launch of application `n` (`/opt/app{n}/bin/app`), for measuring what
    /// many learned applications cost (the daemon's cost tests, `augur-bench round-cost`): 40
    /// files of 12 scattered ranges each, about 480 ranges and 2,400 pages.
    pub fn plausible_example(n: u64) -> LaunchProfile {
        LaunchProfile {
            command: vec![format!("/opt/app{n}/bin/app")],
            recorded_at: 0,
            page_size: 4096,
            mode: TraceMode::Access,
            window_ms: 800,
            files: (0..40u64)
                .map(|f| FileProfile {
                    path: PathBuf::from(format!("/opt/app{n}/lib/libpart{f}.so")),
                    identity: FileIdentity { dev: 65024, ino: n * 100 + f, size: 8 << 20, mtime_ns: 1 },
                    ranges: (0..12u64)
                        .map(|k| UsedRange { range: PageRange::new(k * 37 + f % 5, 5), first_use_us: f * 1000 + k })
                        .collect(),
                })
                .collect(),
            unresolved: Unresolved::default(),
            lookups: Vec::new(),
        }
    }

    /// Pages over all files.
    pub fn page_count(&self) -> u64 {
        self.files.iter().map(FileProfile::page_count).sum()
    }

    /// Bytes over all files.
    pub fn byte_count(&self) -> u64 {
        self.page_count() * self.page_size
    }

    /// The profile cut to the `max_pages` pages the launch used first (over all its files, by
    /// first use; the range crossing the limit is cut short), files and ranges in their order.
    pub fn first_pages(&self, max_pages: u64) -> LaunchProfile {
        if self.page_count() <= max_pages {
            return self.clone();
        }
        let mut order: Vec<(u64, usize, usize)> = Vec::new();
        for (f, file) in self.files.iter().enumerate() {
            for (r, used) in file.ranges.iter().enumerate() {
                order.push((used.first_use_us, f, r));
            }
        }
        order.sort_unstable();
        let mut kept: Vec<Vec<Option<u64>>> = self.files.iter().map(|f| vec![None; f.ranges.len()]).collect();
        let mut left = max_pages;
        for (_, f, r) in order {
            if left == 0 {
                break;
            }
            let len = self.files[f].ranges[r].range.len.min(left);
            kept[f][r] = Some(len);
            left -= len;
        }
        let files = self
            .files
            .iter()
            .zip(kept)
            .filter_map(|(file, lens)| {
                let ranges: Vec<UsedRange> = file
                    .ranges
                    .iter()
                    .zip(lens)
                    .filter_map(|(u, len)| len.map(|len| UsedRange { range: PageRange::new(u.range.start, len), ..*u }))
                    .collect();
                (!ranges.is_empty()).then(|| FileProfile { ranges, ..file.clone() })
            })
            .collect();
        LaunchProfile { files, ..self.clone() }
    }

    /// The profile with every range widened by `pad` pages on each side, within its file (the
    /// file's size at learning time; a file of unknown size, 0, is left exact), files and ranges
    /// in their order: each range's padding is loaded with it, and a page padding already covers
    /// (a neighbour used earlier) is not repeated, so the ranges stay disjoint.
    ///
    /// Why: a program rarely touches exactly the pages a launch learned; one page it uses next
    /// to a learned range, missing, makes the kernel read around it synchronously (for a mapped
    /// file, `read_ahead_kb` centred on the fault: 8 MiB on the development machine), most of
    /// it pages the program does not need. Padding is for a machine with memory to spare (the
    /// caller decides): where memory is short, exact pages are what fits.
    pub fn padded(&self, pad: u64) -> LaunchProfile {
        if pad == 0 {
            return self.clone();
        }
        self.with_file_ranges(|file, pages| {
            let mut taken = RangeSet::default();
            let mut ranges = Vec::with_capacity(file.ranges.len());
            for used in &file.ranges {
                let end = used.range.end().saturating_add(pad).min(pages.max(used.range.end()));
                let wide = PageRange::from_bounds(used.range.start.saturating_sub(pad), end);
                for piece in taken.missing_from(wide) {
                    ranges.push(UsedRange { range: piece, first_use_us: used.first_use_us });
                }
                taken.insert(wide);
            }
            Some(ranges)
        })
    }

    /// The whole of each file of at most `max_file_bytes` (by its size when learned), as one
    /// range from its first page to its last, used when the file was first used; larger files
    /// and files of unknown size keep their learned ranges. Files stay in first-use order.
    ///
    /// Why: a program often reads ahead of itself (Firefox ESR reads the whole of libxul.so and
    /// its omni.ja archives at its start, tens of MiB its launches never touch), and such reads
    /// leave no access event to learn from. Where memory is free to hold them (the caller
    /// decides: the free-memory tier), whole files are what a launch may read.
    pub fn whole_files(&self, max_file_bytes: u64) -> LaunchProfile {
        self.with_file_ranges(|file, pages| {
            let first_use_us = file.ranges.iter().map(|u| u.first_use_us).min()?;
            (file.identity.size <= max_file_bytes).then(|| vec![UsedRange { range: PageRange::new(0, pages), first_use_us }])
        })
    }

    /// This profile with each file of known size given the ranges `ranges_of` makes of it and
    /// its size in pages; a file of unknown size (or `None` from `ranges_of`) keeps its own.
    fn with_file_ranges(&self, ranges_of: impl Fn(&FileProfile, u64) -> Option<Vec<UsedRange>>) -> LaunchProfile {
        let files = self
            .files
            .iter()
            .map(|file| {
                let pages = if self.page_size == 0 { 0 } else { file.identity.size.div_ceil(self.page_size) };
                match (pages > 0).then(|| ranges_of(file, pages)).flatten() {
                    Some(ranges) => FileProfile { path: file.path.clone(), identity: file.identity, ranges },
                    None => file.clone(),
                }
            })
            .collect();
        LaunchProfile {
            command: self.command.clone(),
            recorded_at: self.recorded_at,
            page_size: self.page_size,
            mode: self.mode,
            window_ms: self.window_ms,
            files,
            unresolved: self.unresolved,
            lookups: self.lookups.clone(),
        }
    }
}

/// Kernel-side key of a cached file: the superblock device as the tracepoints report it (already
/// converted to `st_dev` encoding by the sense layer) and the inode number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InodeKey {
    /// Device number in `st_dev` encoding.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
}

#[derive(Default)]
struct InodePages {
    seen: RangeSet,
    order: Vec<UsedRange>,
    first_seq: u64,
}

/// Accumulates page events into first-use-ordered ranges per inode.
///
/// Feed it every event with [`WorkingSetBuilder::touch`]; pages already seen are ignored, new
/// pages extend the range first used just before them when contiguous, or start a new range.
#[derive(Default)]
pub struct WorkingSetBuilder {
    inodes: HashMap<InodeKey, InodePages>,
    next_seq: u64,
    pages: u64,
}

impl WorkingSetBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `pages` of `inode` were used at `at_us` (microseconds since the launch start).
    pub fn touch(&mut self, inode: InodeKey, pages: PageRange, at_us: u64) {
        if pages.is_empty() {
            return;
        }
        let seq = self.next_seq;
        let entry = self.inodes.entry(inode).or_insert_with(|| InodePages { first_seq: seq, ..Default::default() });
        let fresh = entry.seen.missing_from(pages);
        if fresh.is_empty() {
            return;
        }
        self.next_seq += 1;
        for piece in fresh {
            self.pages += piece.len;
            entry.seen.insert(piece);
            match entry.order.last_mut() {
                Some(last) if last.range.end() == piece.start => last.range.len += piece.len,
                _ => entry.order.push(UsedRange { range: piece, first_use_us: at_us }),
            }
        }
    }

    /// Forgets the pages of `inode` inside `span` but the first `head` of them in first-use order:
    /// a file the launch was reading through, whose data is not its start. Returns the pages
    /// forgotten.
    pub fn keep_head(&mut self, inode: InodeKey, span: PageRange, head: u64) -> u64 {
        let Some(entry) = self.inodes.get_mut(&inode) else { return 0 };
        let (mut kept, mut dropped) = (0u64, 0u64);
        let mut order = Vec::with_capacity(entry.order.len());
        for used in std::mem::take(&mut entry.order) {
            let Some(inside) = used.range.intersect(&span) else {
                order.push(used);
                continue;
            };
            let keep = inside.len.min(head.saturating_sub(kept));
            kept += keep;
            // What lies before and after the span stays; of the part inside, its first `keep` pages.
            let before = PageRange::new(used.range.start, inside.start - used.range.start);
            let after = PageRange::new(inside.end(), used.range.end() - inside.end());
            let front = PageRange::new(inside.start, keep);
            let rest = PageRange::new(inside.start + keep, inside.len - keep);
            if !rest.is_empty() {
                // The used ranges of an inode are disjoint: nothing is counted twice.
                entry.seen.remove(rest);
                dropped += rest.len;
            }
            for piece in [before, front, after] {
                if !piece.is_empty() {
                    order.push(UsedRange { range: piece, first_use_us: used.first_use_us });
                }
            }
        }
        entry.order = order;
        self.pages -= dropped;
        dropped
    }

    /// Distinct pages seen so far, over all inodes.
    pub fn page_count(&self) -> u64 {
        self.pages
    }

    /// Distinct inodes seen so far.
    pub fn inode_count(&self) -> usize {
        self.inodes.len()
    }

    /// Pages seen so far for `inode`.
    pub fn pages_of(&self, inode: InodeKey) -> u64 {
        self.inodes.get(&inode).map_or(0, |p| p.seen.page_count())
    }

    /// The inodes seen, in first-use order, each with its ranges in first-use order.
    pub fn finish(self) -> Vec<(InodeKey, Vec<UsedRange>)> {
        let mut all: Vec<_> = self.inodes.into_iter().collect();
        all.sort_by_key(|(key, p)| (p.first_seq, *key));
        all.into_iter().map(|(key, p)| (key, p.order)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_files() -> LaunchProfile {
        let identity = FileIdentity { dev: 1, ino: 2, size: 1 << 20, mtime_ns: 3 };
        let used = |start, len, first_use_us| UsedRange { range: PageRange::new(start, len), first_use_us };
        LaunchProfile {
            command: vec!["a".into()],
            recorded_at: 0,
            page_size: 4096,
            mode: TraceMode::Access,
            window_ms: 100,
            files: vec![
                FileProfile { path: "/bin/a".into(), identity, ranges: vec![used(0, 10, 1), used(50, 10, 30)] },
                FileProfile { path: "/lib/b.so".into(), identity, ranges: vec![used(0, 10, 20)] },
            ],
            unresolved: Unresolved::default(),
            lookups: Vec::new(),
        }
    }

    #[test]
    fn keep_head_forgets_a_streamed_span_but_its_first_pages_and_keeps_the_rest_of_the_file() {
        let f = InodeKey { dev: 1, ino: 7 };
        let g = InodeKey { dev: 1, ino: 8 };
        let mut b = WorkingSetBuilder::new();
        b.touch(f, PageRange::new(0, 2), 1); // a header read first
        b.touch(g, PageRange::new(0, 10), 2);
        for p in 0..100 {
            b.touch(f, PageRange::new(100 + p, 1), 10 + p);
        }
        assert_eq!(b.page_count(), 112);
        assert_eq!(b.keep_head(f, PageRange::new(100, 100), 8), 92);
        assert_eq!(b.page_count(), 20);
        assert_eq!(b.pages_of(f), 10);
        assert_eq!(b.keep_head(InodeKey { dev: 9, ino: 9 }, PageRange::new(0, 10), 0), 0);
        let done = b.finish();
        let fr: Vec<PageRange> = done.iter().find(|(k, _)| *k == f).unwrap().1.iter().map(|u| u.range).collect();
        assert_eq!(fr, vec![PageRange::new(0, 2), PageRange::new(100, 8)]);
        // A page touched again after the cut is new again (it was forgotten).
        let mut b = WorkingSetBuilder::new();
        b.touch(f, PageRange::new(0, 64), 0);
        b.keep_head(f, PageRange::new(0, 64), 4);
        b.touch(f, PageRange::new(60, 1), 5);
        assert_eq!(b.pages_of(f), 5);
    }

    #[test]
    fn first_pages_keeps_what_was_used_first_and_cuts_the_crossing_range() {
        let p = two_files();
        assert_eq!(p.first_pages(100), p);
        let cut = p.first_pages(15);
        assert_eq!(cut.page_count(), 15);
        assert_eq!(cut.files[0].ranges, vec![UsedRange { range: PageRange::new(0, 10), first_use_us: 1 }]);
        assert_eq!(cut.files[1].ranges, vec![UsedRange { range: PageRange::new(0, 5), first_use_us: 20 }]);
        let cut = p.first_pages(5);
        assert_eq!(cut.files.len(), 1, "a file with nothing kept is left out");
        assert_eq!(p.first_pages(0).files, vec![]);
    }

    proptest::proptest! {
        #[test]
        fn first_pages_never_exceeds_its_limit_and_keeps_a_subset(max in 0u64..40) {
            let p = two_files();
            let cut = p.first_pages(max);
            proptest::prop_assert_eq!(cut.page_count(), max.min(p.page_count()));
            for f in &cut.files {
                let whole = p.files.iter().find(|o| o.path == f.path).unwrap().page_set();
                for r in &f.ranges {
                    proptest::prop_assert_eq!(whole.overlap_count(r.range), r.range.len);
                }
            }
        }
    }

    #[test]
    fn padding_widens_ranges_within_the_file_and_repeats_no_page() {
        let p = two_files(); // files of 256 pages
        let padded = p.padded(16);
        let a = &padded.files[0].ranges;
        // [0, 10) used first: [0, 26); then [50, 60): [34, 76).
        assert_eq!(a[0], UsedRange { range: PageRange::new(0, 26), first_use_us: 1 });
        assert_eq!(a[1], UsedRange { range: PageRange::new(34, 42), first_use_us: 30 });
        assert_eq!(padded.files[1].ranges, vec![UsedRange { range: PageRange::new(0, 26), first_use_us: 20 }]);
        // Overlapping padding: the later range gets only what the earlier one left.
        let near = p.padded(30);
        assert_eq!(near.files[0].ranges[0].range, PageRange::new(0, 40));
        assert_eq!(near.files[0].ranges[1].range, PageRange::new(40, 50));
        assert_eq!(p.padded(0), p);
        // Never past the end of the file.
        let whole = p.padded(1 << 20);
        assert_eq!(whole.files[0].page_count(), 256);
    }

    #[test]
    fn whole_files_cover_each_small_file_from_its_first_use_and_leave_large_ones_learned() {
        let mut p = two_files(); // files of 256 pages (1 MiB)
        p.files[1].identity.size = 2 << 20;
        let whole = p.whole_files(1 << 20);
        assert_eq!(whole.files[0].ranges, vec![UsedRange { range: PageRange::new(0, 256), first_use_us: 1 }]);
        for r in &p.files[0].ranges {
            assert_eq!(whole.files[0].page_set().overlap_count(r.range), r.range.len, "every learned page stays in");
        }
        assert_eq!(whole.files[1], p.files[1], "larger than the limit: its learned ranges");
        assert_eq!(whole.files.iter().map(|f| &f.path).collect::<Vec<_>>(), p.files.iter().map(|f| &f.path).collect::<Vec<_>>());
        // A size not a multiple of the page: its last page too; unknown size: learned ranges.
        p.files[0].identity.size = 4096 * 10 + 1;
        p.files[1].identity.size = 0;
        let whole = p.whole_files(u64::MAX);
        assert_eq!(whole.files[0].page_count(), 11);
        assert_eq!(whole.files[1], p.files[1]);
    }

    #[test]
    fn padding_leaves_a_file_of_unknown_size_exact() {
        let mut p = two_files();
        p.files[1].identity.size = 0;
        assert_eq!(p.padded(8).files[1], p.files[1]);
    }

    proptest::proptest! {
        #[test]
        fn padding_keeps_every_page_adds_only_near_ones_within_the_file(
            ranges in proptest::collection::vec((0u64..300, 1u64..20, 0u64..1000), 1..12),
            pad in 0u64..64,
            size_pages in 1u64..400,
        ) {
            // Disjoint input ranges in first-use order, as replay profiles hold.
            let mut set = RangeSet::default();
            let mut used = Vec::new();
            for (start, len, t) in ranges {
                let r = PageRange::new(start, len);
                if set.overlap_count(r) == 0 {
                    set.insert(r);
                    used.push(UsedRange { range: r, first_use_us: t });
                }
            }
            used.sort_by_key(|u| u.first_use_us);
            let identity = FileIdentity { dev: 1, ino: 2, size: size_pages * 4096 - 1, mtime_ns: 0 };
            let mut p = two_files();
            p.files = vec![FileProfile { path: "/f".into(), identity, ranges: used.clone() }];
            let out = p.padded(pad);
            let f = &out.files[0];
            let mut seen = RangeSet::default();
            for r in &f.ranges {
                proptest::prop_assert_eq!(seen.overlap_count(r.range), 0, "ranges stay disjoint");
                seen.insert(r.range);
                // Within the file, or within the original range where it ran past the end.
                let orig_end = used.iter().map(|u| u.range.end()).max().unwrap_or(0);
                proptest::prop_assert!(r.range.end() <= size_pages.max(orig_end));
                // Every added page is within `pad` of an original page.
                for page in [r.range.start, r.range.end() - 1] {
                    let near = used.iter().any(|u| page + pad >= u.range.start && page < u.range.end() + pad);
                    proptest::prop_assert!(near);
                }
            }
            for u in &used {
                proptest::prop_assert_eq!(seen.overlap_count(u.range), u.range.len, "every learned page kept");
            }
            proptest::prop_assert!(f.page_count() <= set.page_count() + 2 * pad * used.len() as u64);
            // First-use order is kept.
            proptest::prop_assert!(f.ranges.windows(2).all(|w| w[0].first_use_us <= w[1].first_use_us));
        }
    }

    #[test]
    fn lookups_keep_first_use_order_once_each_and_listing_wins() {
        let mut l = LookupList::new();
        l.record("/a".into(), LookupKind::Stat);
        l.record("/b/x".into(), LookupKind::Missing);
        l.record("relative".into(), LookupKind::Stat);
        l.record("/a".into(), LookupKind::Dir);
        l.record("/b/x".into(), LookupKind::Stat);
        let got = l.finish();
        assert_eq!(
            got,
            vec![Lookup { path: "/a".into(), kind: LookupKind::Dir }, Lookup { path: "/b/x".into(), kind: LookupKind::Missing },]
        );
    }

    #[test]
    fn lookups_are_capped() {
        let mut l = LookupList::new();
        for i in 0..MAX_LOOKUPS + 5 {
            l.record(format!("/p{i}").into(), LookupKind::Stat);
        }
        assert_eq!(l.len(), MAX_LOOKUPS);
        assert_eq!(l.dropped, 5);
    }

    const A: InodeKey = InodeKey { dev: 1, ino: 10 };
    const B: InodeKey = InodeKey { dev: 1, ino: 20 };

    #[test]
    fn contiguous_first_uses_extend_one_range() {
        let mut b = WorkingSetBuilder::new();
        b.touch(A, PageRange::new(0, 4), 5);
        b.touch(A, PageRange::new(4, 4), 9);
        let out = b.finish();
        assert_eq!(out[0].1, vec![UsedRange { range: PageRange::new(0, 8), first_use_us: 5 }]);
    }

    #[test]
    fn repeated_pages_are_ignored_and_order_is_first_use() {
        let mut b = WorkingSetBuilder::new();
        b.touch(B, PageRange::new(100, 1), 1);
        b.touch(A, PageRange::new(50, 2), 2);
        b.touch(B, PageRange::new(100, 1), 3);
        b.touch(A, PageRange::new(10, 2), 4);
        b.touch(A, PageRange::new(49, 4), 5);
        // 1 page of B; 50-51, 10-11, then 49 and 52 of A.
        assert_eq!(b.page_count(), 7);
        let out = b.finish();
        assert_eq!(out.iter().map(|(k, _)| *k).collect::<Vec<_>>(), vec![B, A]);
        let a = &out[1].1;
        assert_eq!(
            a,
            &vec![
                UsedRange { range: PageRange::new(50, 2), first_use_us: 2 },
                UsedRange { range: PageRange::new(10, 2), first_use_us: 4 },
                UsedRange { range: PageRange::new(49, 1), first_use_us: 5 },
                UsedRange { range: PageRange::new(52, 1), first_use_us: 5 },
            ]
        );
    }

    #[test]
    fn backward_reads_keep_their_order() {
        // A backward scan (AASFP's case): each page is a new range, latest pages first.
        let mut b = WorkingSetBuilder::new();
        for (t, p) in (0..5u64).rev().enumerate() {
            b.touch(A, PageRange::new(p, 1), t as u64);
        }
        let starts: Vec<u64> = b.finish()[0].1.iter().map(|r| r.range.start).collect();
        assert_eq!(starts, vec![4, 3, 2, 1, 0]);
    }
}
