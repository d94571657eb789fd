//! What to fetch and in which order: profiles merged into one [`FetchPlan`], then the pages still
//! missing turned into [`Request`]s ordered by first use or by physical location.
//!
//! Pure: no system calls. Physical locations are handed in by the caller.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use augur_core::model::profile::{FileIdentity, LaunchProfile, Lookup, UsedRange};
use augur_core::model::range::{PageRange, RangeSet};
use augur_core::model::user::ProcessUser;

/// One file to fetch: the ranges wanted, in this system's pages, disjoint, in first-use order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedFile {
    /// Path as traced.
    pub path: PathBuf,
    /// Identity as traced; a file that no longer matches it is stale.
    pub identity: FileIdentity,
    /// Disjoint ranges in first-use order.
    pub ranges: Vec<UsedRange>,
}

impl PlannedFile {
    /// Pages wanted.
    pub fn page_count(&self) -> u64 {
        self.ranges.iter().map(|r| r.range.len).sum()
    }

    /// Pages wanted, as a set.
    pub fn page_set(&self) -> RangeSet {
        self.ranges.iter().map(|r| r.range).collect()
    }
}

/// Converts a page range between page sizes, widening to whole target pages.
pub fn convert_range(range: PageRange, from_page_size: u64, to_page_size: u64) -> PageRange {
    if from_page_size == to_page_size {
        return range;
    }
    let start = range.start.saturating_mul(from_page_size) / to_page_size;
    let end = range.end().saturating_mul(from_page_size).div_ceil(to_page_size);
    PageRange::from_bounds(start, end)
}

/// Disjoint ranges from possibly overlapping ones: each page keeps its earliest first use, and
/// the result is in first-use order.
fn disjoint_first_use(ranges: Vec<UsedRange>) -> Vec<UsedRange> {
    // Most files come in order already (a profile's ranges, a plan's ranges of one file): in
    // first-use order and each after the one before it. Then only neighbours used together merge.
    let in_order = ranges.windows(2).all(|w| w[0].first_use_us <= w[1].first_use_us && w[0].range.end() <= w[1].range.start);
    if in_order {
        let mut out: Vec<UsedRange> = Vec::with_capacity(ranges.len());
        for r in ranges.into_iter().filter(|r| !r.range.is_empty()) {
            push_merging(&mut out, r);
        }
        return out;
    }
    disjoint_by_sorting(ranges)
}

/// [`disjoint_first_use`] for ranges in any order.
fn disjoint_by_sorting(mut ranges: Vec<UsedRange>) -> Vec<UsedRange> {
    ranges.sort_by_key(|r| r.first_use_us); // stable: equal times keep their given order
    let mut seen = RangeSet::new();
    let mut out: Vec<UsedRange> = Vec::with_capacity(ranges.len());
    for r in ranges {
        for piece in seen.missing_from(r.range) {
            seen.insert(piece);
            push_merging(&mut out, UsedRange { range: piece, first_use_us: r.first_use_us });
        }
    }
    out
}

/// Appends `r` to `out`, into the last range when it continues it with the same first use.
fn push_merging(out: &mut Vec<UsedRange>, r: UsedRange) {
    match out.last_mut() {
        Some(last) if last.range.end() == r.range.start && last.first_use_us == r.first_use_us => last.range.len += r.range.len,
        _ => out.push(r),
    }
}

/// The files and pages one fetch should load, merged from any number of profiles.
#[derive(Clone, Debug, Default)]
pub struct FetchPlan {
    page_size: u64,
    files: Vec<PlannedFile>,
    /// Each file's entries by identity (one per path it was added under): hashing a `PathBuf`
    /// walks its components, and a round adds hundreds of files.
    index: HashMap<FileIdentity, Vec<usize>>,
    lookups: Vec<Lookup>,
    lookup_paths: HashSet<PathBuf>,
    reader: Option<ProcessUser>,
}

impl FetchPlan {
    /// An empty plan in units of `page_size` bytes (the system's page size).
    pub fn new(page_size: u64) -> Self {
        FetchPlan { page_size: page_size.max(1), ..Default::default() }
    }

    /// A plan holding every page of `profiles`, in the system's page size.
    pub fn from_profiles<'a>(profiles: impl IntoIterator<Item = &'a LaunchProfile>, page_size: u64) -> Self {
        let mut plan = FetchPlan::new(page_size);
        for p in profiles {
            plan.add_profile(p);
        }
        plan
    }

    /// Adds every file and every path lookup of `profile`.
    pub fn add_profile(&mut self, profile: &LaunchProfile) {
        for f in &profile.files {
            self.add_file(f.path.clone(), f.identity, &f.ranges, profile.page_size);
        }
        for l in &profile.lookups {
            self.add_lookup(l.clone());
        }
    }

    /// Adds one path lookup to repeat before the pages are loaded (each path once, the first
    /// kind added wins unless a later one lists the directory).
    pub fn add_lookup(&mut self, lookup: Lookup) {
        if self.lookup_paths.insert(lookup.path.clone()) {
            self.lookups.push(lookup);
        } else if lookup.kind == augur_core::model::profile::LookupKind::Dir
            && let Some(l) = self.lookups.iter_mut().find(|l| l.path == lookup.path)
        {
            l.kind = lookup.kind;
        }
    }

    /// Loads the pages for `user` (the user whose launch they are for): a file that user may not
    /// read by its mode, owner and group is refused, never read. Without it (the default, and for
    /// root) every file is read.
    pub fn for_user(mut self, user: ProcessUser) -> Self {
        self.reader = (!user.is_root()).then_some(user);
        self
    }

    /// The user the pages are loaded for, when it is not root.
    pub fn reader(&self) -> Option<&ProcessUser> {
        self.reader.as_ref()
    }

    /// The path lookups to repeat, in first-use order.
    pub fn lookups(&self) -> &[Lookup] {
        &self.lookups
    }

    /// Adds ranges of one file given in units of `ranges_page_size`. The same path with the same
    /// identity merges (each page keeps its earliest first use); the same path with another
    /// identity stays a separate entry, so the stale one is reported rather than hidden.
    pub fn add_file(&mut self, path: PathBuf, identity: FileIdentity, ranges: &[UsedRange], ranges_page_size: u64) {
        let converted: Vec<UsedRange> = ranges
            .iter()
            .map(|r| UsedRange {
                range: convert_range(r.range, ranges_page_size.max(1), self.page_size),
                first_use_us: r.first_use_us,
            })
            .filter(|r| !r.range.is_empty())
            .collect();
        let entries = self.index.entry(identity).or_default();
        match entries.iter().copied().find(|&i| self.files[i].path == path) {
            Some(i) => {
                let mut all = std::mem::take(&mut self.files[i].ranges);
                all.extend(converted);
                self.files[i].ranges = disjoint_first_use(all);
            }
            None => {
                entries.push(self.files.len());
                self.files.push(PlannedFile { path, identity, ranges: disjoint_first_use(converted) });
            }
        }
    }

    /// Page size of the plan's page indices.
    pub fn page_size(&self) -> u64 {
        self.page_size
    }

    /// The files, in the order they were first added.
    pub fn files(&self) -> &[PlannedFile] {
        &self.files
    }

    /// Pages over all files.
    pub fn page_count(&self) -> u64 {
        self.files.iter().map(PlannedFile::page_count).sum()
    }
}

/// One contiguous piece of one file still to be loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Index of the file in the plan.
    pub file: usize,
    /// Pages to load.
    pub range: PageRange,
    /// When the application first used them (microseconds from its start).
    pub first_use_us: u64,
}

/// How requests are ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum OrderPolicy {
    /// Physical location when any file lies on a rotational device, first use otherwise.
    #[default]
    Auto,
    /// The order the application first used the pages, across all files.
    FirstUse,
    /// Physical location on the device (FIEMAP), to spare seeks.
    Physical,
}

/// The order actually used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Order {
    /// By first use.
    FirstUse,
    /// By physical location.
    Physical,
}

impl Order {
    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Order::FirstUse => "first use",
            Order::Physical => "physical location",
        }
    }
}

/// Sorts requests by first use across all files; ties keep file then page order.
pub fn order_by_first_use(requests: &mut [Request]) {
    requests.sort_by_key(|r| (r.first_use_us, r.file, r.range.start));
}

/// Sorts requests by `(device, physical byte address)` as `location` reports it; requests
/// without a known location go last, by first use.
pub fn order_by_location(requests: &mut Vec<Request>, mut location: impl FnMut(&Request) -> Option<(u64, u64)>) {
    let mut keyed: Vec<(Option<(u64, u64)>, Request)> = requests.iter().map(|r| (location(r), *r)).collect();
    keyed.sort_by_key(|(loc, r)| (loc.is_none(), *loc, r.first_use_us, r.file, r.range.start));
    *requests = keyed.into_iter().map(|(_, r)| r).collect();
}

#[cfg(test)]
mod tests {
    use super::*;
    use augur_core::model::profile::{FileProfile, TraceMode, Unresolved};

    fn id(ino: u64) -> FileIdentity {
        FileIdentity { dev: 1, ino, size: 1 << 20, mtime_ns: 0 }
    }

    fn used(start: u64, len: u64, t: u64) -> UsedRange {
        UsedRange { range: PageRange::new(start, len), first_use_us: t }
    }

    proptest::proptest! {
        /// Ranges already in first-use and file order take the short way, with the same result.
        #[test]
        fn ranges_in_order_come_out_as_sorting_them_does(steps in proptest::collection::vec((0u64..3, 0u64..4, 0u64..3), 0..40)) {
            let (mut start, mut t) = (0, 0);
            let ranges: Vec<UsedRange> = steps
                .into_iter()
                .map(|(gap, len, dt)| {
                    start += gap;
                    t += dt;
                    let r = used(start, len, t);
                    start += len;
                    r
                })
                .collect();
            proptest::prop_assert_eq!(disjoint_first_use(ranges.clone()), disjoint_by_sorting(ranges));
        }
    }

    fn profile(files: Vec<FileProfile>, page_size: u64) -> LaunchProfile {
        LaunchProfile {
            command: vec!["x".into()],
            recorded_at: 0,
            page_size,
            mode: TraceMode::Access,
            window_ms: 0,
            files,
            unresolved: Unresolved::default(),
            lookups: Vec::new(),
        }
    }

    #[test]
    fn lookups_of_profiles_merge_once_per_path_and_listing_wins() {
        use augur_core::model::profile::{Lookup, LookupKind};
        let mut a = profile(vec![], 4096);
        a.lookups =
            vec![Lookup { path: "/x".into(), kind: LookupKind::Stat }, Lookup { path: "/y".into(), kind: LookupKind::Missing }];
        let mut b = profile(vec![], 4096);
        b.lookups =
            vec![Lookup { path: "/x".into(), kind: LookupKind::Dir }, Lookup { path: "/z".into(), kind: LookupKind::Stat }];
        let plan = FetchPlan::from_profiles([&a, &b], 4096);
        let got: Vec<(String, LookupKind)> = plan.lookups().iter().map(|l| (l.path.display().to_string(), l.kind)).collect();
        assert_eq!(
            got,
            vec![("/x".into(), LookupKind::Dir), ("/y".into(), LookupKind::Missing), ("/z".into(), LookupKind::Stat)]
        );
    }

    #[test]
    fn page_sizes_convert_by_widening() {
        assert_eq!(convert_range(PageRange::new(3, 2), 4096, 4096), PageRange::new(3, 2));
        // 16 KiB pages 1..3 are bytes 16K..48K: 4 KiB pages 4..12.
        assert_eq!(convert_range(PageRange::new(1, 2), 16384, 4096), PageRange::new(4, 8));
        // 4 KiB pages 5..6 are bytes 20K..24K: 16 KiB page 1.
        assert_eq!(convert_range(PageRange::new(5, 1), 4096, 16384), PageRange::new(1, 1));
        assert_eq!(convert_range(PageRange::new(3, 2), 4096, 16384), PageRange::new(0, 2));
    }

    #[test]
    fn profiles_merge_keeping_earliest_first_use() {
        let a = profile(
            vec![FileProfile { path: "/a".into(), identity: id(1), ranges: vec![used(0, 4, 10), used(10, 2, 30)] }],
            4096,
        );
        let b = profile(
            vec![
                FileProfile { path: "/a".into(), identity: id(1), ranges: vec![used(2, 10, 20)] },
                FileProfile { path: "/b".into(), identity: id(2), ranges: vec![used(0, 1, 5)] },
            ],
            4096,
        );
        let plan = FetchPlan::from_profiles([&a, &b], 4096);
        assert_eq!(plan.files().len(), 2);
        assert_eq!(plan.files()[0].ranges, vec![used(0, 4, 10), used(4, 8, 20)]);
        assert_eq!(plan.files()[0].page_count(), 12);
        assert_eq!(plan.page_count(), 13);
    }

    #[test]
    fn same_path_other_identity_stays_separate() {
        let mut plan = FetchPlan::new(4096);
        plan.add_file("/a".into(), id(1), &[used(0, 1, 0)], 4096);
        plan.add_file("/a".into(), id(9), &[used(0, 1, 0)], 4096);
        assert_eq!(plan.files().len(), 2);
    }

    #[test]
    fn first_use_interleaves_files() {
        let mut reqs = vec![
            Request { file: 0, range: PageRange::new(0, 1), first_use_us: 5 },
            Request { file: 0, range: PageRange::new(9, 1), first_use_us: 50 },
            Request { file: 1, range: PageRange::new(3, 1), first_use_us: 7 },
        ];
        order_by_first_use(&mut reqs);
        let order: Vec<(usize, u64)> = reqs.iter().map(|r| (r.file, r.range.start)).collect();
        assert_eq!(order, vec![(0, 0), (1, 3), (0, 9)]);
    }

    #[test]
    fn physical_order_sorts_by_device_address_unknown_last() {
        let mut reqs = vec![
            Request { file: 0, range: PageRange::new(0, 1), first_use_us: 1 },
            Request { file: 1, range: PageRange::new(0, 1), first_use_us: 2 },
            Request { file: 2, range: PageRange::new(0, 1), first_use_us: 0 },
            Request { file: 3, range: PageRange::new(0, 1), first_use_us: 3 },
        ];
        order_by_location(&mut reqs, |r| match r.file {
            0 => Some((8, 9000)),
            1 => Some((8, 100)),
            3 => Some((7, 5_000_000)),
            _ => None,
        });
        let files: Vec<usize> = reqs.iter().map(|r| r.file).collect();
        assert_eq!(files, vec![3, 1, 0, 2]);
    }
}
