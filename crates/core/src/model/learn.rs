//! Adaptive launch profiles: what an application's launches have used, merged over runs, with
//! fading memory, and the replay profile derived from it.
//!
//! Each page range of each file counts in how many recent launches it was used, every count decays
//! by a factor per launch (so old habits fade), ranges unused for several launches are dropped, and
//! a file whose identity changed (a package upgrade) is relearned from scratch, never replayed from
//! stale data. This generalises the "sort-sum" aggregation over the last N traces of trace-based
//! boot prefetchers: a sum over all launches, recent ones weighing more, thresholded on replay.
//!
//! Pure: no I/O, no clocks; the caller passes launches and logical times. Persistence is `store`'s.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::profile::{FileIdentity, FileProfile, LaunchProfile, Lookup, TraceMode, Unresolved, UsedRange};
use super::range::PageRange;
use super::user::key_uid;

/// Path lookups one application's model keeps at most: a cold start of a large program needs a
/// few hundred inodes; more would be a tree walk.
pub const MAX_LEARNED_LOOKUPS: usize = 2_048;

/// Pages at most between two learned ranges of a file that a replay reads with them, as one range.
/// A disk charges per operation (a rotational one a seek; the suite's small slow machine allows
/// 200 a second), and a cold launch reads such gaps anyway (the kernel reads 32 pages around a
/// page fault): Firefox ESR's 1,513 learned ranges become 933 with gaps of up to 8 pages read,
/// for 331 more pages (0.5 %); with 16, 728 for 3,563 more (5.6 %).
pub const REPLAY_BRIDGE_PAGES: u64 = 8;

/// The knobs of learning, from the configuration's `[learn]` section.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LearnSettings {
    /// Factor every range's count is multiplied by at each launch of its application, in (0, 1].
    pub decay: f64,
    /// A range not used by this many consecutive launches is dropped.
    pub drop_after_launches: u32,
    /// Share of the (decayed) launches a range must have been used in to be replayed, in (0, 1].
    pub replay_threshold: f64,
    /// Most ranges kept per application; the least used go first.
    pub max_ranges_per_app: usize,
    /// Most applications kept; the least recently launched go first.
    pub max_apps: usize,
    /// Most applications kept of one user (root, or any other uid: see
    /// [`crate::model::user`]); beyond it that user's least recently launched go first.
    pub max_apps_per_user: usize,
    /// A launch is *stable* when at most this share of its pages were new to the model, in
    /// [0, 1] ([`LaunchNovelty::is_stable`]).
    pub stable_new_share: f64,
}

impl Default for LearnSettings {
    fn default() -> Self {
        LearnSettings {
            decay: 0.75,
            drop_after_launches: 4,
            replay_threshold: 0.2,
            max_ranges_per_app: 8192,
            max_apps: 1000,
            max_apps_per_user: 500,
            stable_new_share: 0.05,
        }
    }
}

/// How much of one launch was new to its application's model when it was merged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaunchNovelty {
    /// Pages the launch used.
    pub pages: u64,
    /// Of those, pages the model did not know (a new file, a changed file, a new range).
    pub new_pages: u64,
}

impl LaunchNovelty {
    /// True when at most `new_share` of the launch's pages were new: the model already held what
    /// it used, so following more launches like it would teach little.
    pub fn is_stable(&self, new_share: f64) -> bool {
        let share = if new_share.is_nan() { 0.0 } else { new_share.clamp(0.0, 1.0) };
        self.new_pages as f64 <= share * self.pages as f64
    }
}

/// What the follow policy knows of an application's learning: how many launches were learned,
/// when the latest was, and whether the latest learned launches kept adding pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LearningHistory {
    /// Launches learned.
    pub learned: u64,
    /// When the latest learned launch started (Unix ms).
    pub last_learned_ms: u64,
    /// Learned launches in a row, the latest included, that were stable (0 when the latest was
    /// not).
    pub stable_streak: u32,
    /// Learned launches in a row, the latest included, that were not stable (0 when the latest
    /// was).
    pub unstable_streak: u32,
}

/// An application's refollows (a launch that read from disk what its profile lacks makes the
/// next ones followed again): where the last one stood, and whether the next is held back because
/// the last ones taught nothing. Kept in the state, so that a restart does not refollow an
/// application whose refollows are known to be fruitless.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RefollowHold {
    /// Launches of the application learned when it was last refollowed.
    pub learned_at: u64,
    /// Fruitless refollows in a row.
    pub fruitless: u32,
    /// No refollow before this (Unix ms; 0: none held).
    pub until_ms: u64,
}

impl LearningHistory {
    /// The history after one more learned launch, started at `started_ms`, with `novelty`.
    pub fn after(self, started_ms: u64, novelty: LaunchNovelty, s: &LearnSettings) -> LearningHistory {
        let stable = novelty.is_stable(s.stable_new_share);
        LearningHistory {
            learned: self.learned.saturating_add(1),
            last_learned_ms: started_ms,
            stable_streak: if stable { self.stable_streak.saturating_add(1) } else { 0 },
            unstable_streak: if stable { 0 } else { self.unstable_streak.saturating_add(1) },
        }
    }
}

/// The largest page size a model may be in (a huge page of 1 GiB).
pub const MAX_PAGE_SIZE: u64 = 1 << 30;

/// A run of pages with one usage history.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    /// The pages.
    pub range: PageRange,
    /// Decayed number of launches that used these pages.
    pub score: f64,
    /// Number (1-based) of the last launch that used them.
    pub last_launch: u64,
    /// When that launch first used them, microseconds from its start.
    pub first_use_us: u64,
}

/// What is known of one file an application uses.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FileModel {
    /// Identity when the file was last seen; a different identity restarts learning.
    pub identity: FileIdentity,
    /// When the last launch that used the file first used it (orders files on replay).
    pub first_use_us: u64,
    /// Sorted, disjoint, non-empty segments.
    pub segments: Vec<Segment>,
}

/// Everything learned about one application's launches.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppModel {
    /// Launches recorded.
    pub launches: u64,
    /// Decayed number of launches: the score of a range used by every launch.
    pub weight: f64,
    /// Page size the page indices refer to.
    pub page_size: u64,
    /// Events the last launch was learned from.
    pub mode: TraceMode,
    /// Command line of the last launch.
    pub command: Vec<String>,
    /// Files by path.
    pub files: BTreeMap<PathBuf, FileModel>,
    /// Path lookups to repeat before the pages (the inodes and directories launches needed from
    /// disk), the latest launch's first, each path once, at most [`MAX_LEARNED_LOOKUPS`]. A launch that
    /// found its metadata cached reports none, so lookups are kept, not faded, until newer ones
    /// push them out. Always written (the state's binary form has no field names, so none may be
    /// left out); JSON an older augur wrote may lack it.
    #[serde(default)]
    pub lookups: Vec<Lookup>,
}

impl AppModel {
    /// A model that has seen no launch.
    pub fn new(page_size: u64) -> Self {
        AppModel {
            launches: 0,
            weight: 0.0,
            page_size,
            mode: TraceMode::Access,
            command: Vec::new(),
            files: BTreeMap::new(),
            lookups: Vec::new(),
        }
    }

    /// Whether the model holds what learning keeps true (a model read back from a corrupt or
    /// hand-edited state may not): a page size a kernel has (0 if unknown), a finite weight,
    /// launches that can still be counted, and in each file segments that are sorted, disjoint
    /// and non-empty, ending within the page indices a file can have, with finite scores, each
    /// last used by a launch counted. `Err` says what does not hold; such a model is relearned,
    /// not used.
    pub fn check_consistent(&self) -> Result<(), &'static str> {
        if self.page_size != 0 && (!self.page_size.is_power_of_two() || self.page_size > MAX_PAGE_SIZE) {
            return Err("page size no kernel has");
        }
        if !self.weight.is_finite() || self.weight < 0.0 {
            return Err("weight not a finite count");
        }
        if self.launches == u64::MAX {
            return Err("launch count at its limit");
        }
        let max_page = u64::MAX / self.page_size.max(1);
        for f in self.files.values() {
            let mut end = 0;
            for (i, seg) in f.segments.iter().enumerate() {
                if seg.range.len == 0 || seg.range.start.checked_add(seg.range.len).is_none_or(|e| e > max_page) {
                    return Err("segment empty or beyond a file's pages");
                }
                if i > 0 && seg.range.start < end {
                    return Err("segments out of order or overlapping");
                }
                end = seg.range.end();
                if !seg.score.is_finite() || seg.score < 0.0 {
                    return Err("segment score not a finite count");
                }
                if seg.last_launch > self.launches {
                    return Err("segment used by a launch not counted");
                }
            }
        }
        Ok(())
    }

    /// Number of segments over all files.
    pub fn segment_count(&self) -> usize {
        self.files.values().map(|f| f.segments.len()).sum()
    }

    /// Pages known over all files, whatever their score.
    pub fn page_count(&self) -> u64 {
        self.files.values().flat_map(|f| &f.segments).map(|s| s.range.len).sum()
    }

    /// Share of launches a segment was used in, decayed: in (0, 1].
    pub fn confidence(&self, seg: &Segment) -> f64 {
        if self.weight <= 0.0 { 0.0 } else { (seg.score / self.weight).min(1.0) }
    }

    /// Merges one launch into the model; says how much of it the model did not know.
    pub fn record_launch(&mut self, launch: &LaunchProfile, s: &LearnSettings) -> LaunchNovelty {
        let mut novelty = LaunchNovelty::default();
        let decay = s.decay.clamp(f64::MIN_POSITIVE, 1.0);
        self.launches += 1;
        let n = self.launches;
        self.weight = self.weight * decay + 1.0;
        if launch.page_size != 0 && launch.page_size != self.page_size {
            // Page indices of another size cannot be merged; start over.
            self.files.clear();
            self.page_size = launch.page_size;
        }
        self.mode = launch.mode;
        self.command = launch.command.clone();
        for f in self.files.values_mut() {
            for seg in &mut f.segments {
                seg.score *= decay;
            }
        }
        for fp in &launch.files {
            if fp.ranges.is_empty() {
                // Seen without pages: only a changed identity matters (its old pages are stale).
                if let Some(f) = self.files.get_mut(&fp.path).filter(|f| f.identity != fp.identity) {
                    f.identity = fp.identity;
                    f.segments.clear();
                }
                continue;
            }
            let entry = self.files.entry(fp.path.clone()).or_insert_with(|| FileModel {
                identity: fp.identity,
                first_use_us: fp.first_use_us(),
                segments: Vec::new(),
            });
            if entry.identity != fp.identity {
                // Upgraded or rewritten: what was learned describes another file.
                entry.identity = fp.identity;
                entry.segments.clear();
            }
            entry.first_use_us = fp.first_use_us();
            let (segments, new_pages) = merge_segments(&entry.segments, &fp.ranges, n);
            entry.segments = segments;
            novelty.pages += fp.page_count();
            novelty.new_pages += new_pages;
        }
        let horizon = u64::from(s.drop_after_launches.max(1));
        for f in self.files.values_mut() {
            f.segments.retain(|seg| n - seg.last_launch < horizon);
        }
        self.files.retain(|_, f| !f.segments.is_empty());
        self.enforce_range_cap(s.max_ranges_per_app);
        self.merge_lookups(&launch.lookups);
        novelty
    }

    /// Puts `latest` first (in its order), then the older lookups it does not repeat, capped.
    fn merge_lookups(&mut self, latest: &[Lookup]) {
        if latest.is_empty() {
            return;
        }
        let mut merged: Vec<Lookup> = Vec::with_capacity(latest.len() + self.lookups.len());
        let mut seen = std::collections::HashSet::new();
        for l in latest.iter().chain(self.lookups.iter()) {
            if merged.len() >= MAX_LEARNED_LOOKUPS {
                break;
            }
            if seen.insert(l.path.clone()) {
                merged.push(l.clone());
            }
        }
        self.lookups = merged;
    }

    /// Drops the least used segments (latest first used among equals) until at most `cap` remain.
    fn enforce_range_cap(&mut self, cap: usize) {
        let total = self.segment_count();
        if total <= cap {
            return;
        }
        let mut all: Vec<(f64, u64, PathBuf, u64)> = self
            .files
            .iter()
            .flat_map(|(p, f)| f.segments.iter().map(move |s| (s.score, s.first_use_us, p.clone(), s.range.start)))
            .collect();
        // Lowest score first; among equal scores, the latest first use goes first.
        all.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)).then(a.3.cmp(&b.3)));
        let mut doomed: BTreeMap<PathBuf, Vec<u64>> = BTreeMap::new();
        for (_, _, path, start) in all.into_iter().take(total - cap) {
            doomed.entry(path).or_default().push(start);
        }
        for (path, starts) in doomed {
            if let Some(f) = self.files.get_mut(&path) {
                f.segments.retain(|s| !starts.contains(&s.range.start));
            }
        }
        self.files.retain(|_, f| !f.segments.is_empty());
    }

    /// The profile to replay: segments whose confidence reaches the threshold, files and ranges in
    /// first-use order, ranges merged where at most [`REPLAY_BRIDGE_PAGES`] pages lie between
    /// them (the gap read with them, the merged range first used when the earlier of the two was).
    pub fn replay_profile(&self, s: &LearnSettings) -> LaunchProfile {
        // Each file with its first use: `self.files` iterates in path order, so a stable sort by
        // first use alone orders ties by path without comparing a path (or looking one up) at all.
        let mut files: Vec<(u64, FileProfile)> = Vec::new();
        for (path, f) in &self.files {
            let mut chosen: Vec<UsedRange> = Vec::new();
            for seg in &f.segments {
                if self.confidence(seg) + 1e-12 < s.replay_threshold {
                    continue;
                }
                match chosen.last_mut() {
                    Some(last)
                        if seg.range.start >= last.range.end() && seg.range.start - last.range.end() <= REPLAY_BRIDGE_PAGES =>
                    {
                        last.range = PageRange::from_bounds(last.range.start, seg.range.end());
                        last.first_use_us = last.first_use_us.min(seg.first_use_us);
                    }
                    _ => chosen.push(UsedRange { range: seg.range, first_use_us: seg.first_use_us }),
                }
            }
            if chosen.is_empty() {
                continue;
            }
            chosen.sort_by_key(|u| (u.first_use_us, u.range.start));
            files.push((f.first_use_us, FileProfile { path: path.clone(), identity: f.identity, ranges: chosen }));
        }
        files.sort_by_key(|(first_use_us, _)| *first_use_us);
        let files = files.into_iter().map(|(_, f)| f).collect();
        LaunchProfile {
            command: self.command.clone(),
            recorded_at: 0,
            page_size: self.page_size,
            mode: self.mode,
            window_ms: 0,
            files,
            unresolved: Unresolved::default(),
            lookups: self.lookups.clone(),
        }
    }
}

/// Splits `old` segments (already decayed) and the launch's `used` ranges at every boundary and
/// counts launch `n` on the pieces it used.
fn merge_segments(old: &[Segment], used: &[UsedRange], n: u64) -> (Vec<Segment>, u64) {
    let mut new_pages = 0u64;
    let mut used: Vec<UsedRange> = used.iter().copied().filter(|u| !u.range.is_empty()).collect();
    used.sort_by_key(|u| u.range.start);
    let mut bounds: Vec<u64> = Vec::with_capacity(2 * (old.len() + used.len()));
    for s in old {
        bounds.push(s.range.start);
        bounds.push(s.range.end());
    }
    for u in &used {
        bounds.push(u.range.start);
        bounds.push(u.range.end());
    }
    bounds.sort_unstable();
    bounds.dedup();
    let mut out: Vec<Segment> = Vec::new();
    let (mut i, mut j) = (0usize, 0usize);
    for w in bounds.windows(2) {
        let (a, b) = (w[0], w[1]);
        while i < old.len() && old[i].range.end() <= a {
            i += 1;
        }
        while j < used.len() && used[j].range.end() <= a {
            j += 1;
        }
        let seg = old.get(i).filter(|s| s.range.start <= a);
        let u = used.get(j).filter(|u| u.range.start <= a);
        let piece = PageRange::from_bounds(a, b);
        let next = match (seg, u) {
            (Some(s), Some(u)) => Segment { range: piece, score: s.score + 1.0, last_launch: n, first_use_us: u.first_use_us },
            (Some(s), None) => Segment { range: piece, ..*s },
            (None, Some(u)) => {
                new_pages += piece.len;
                Segment { range: piece, score: 1.0, last_launch: n, first_use_us: u.first_use_us }
            }
            (None, None) => continue,
        };
        match out.last_mut() {
            Some(last)
                if last.range.end() == a
                    && last.score.to_bits() == next.score.to_bits()
                    && last.last_launch == next.last_launch =>
            {
                last.range.len += piece.len;
                last.first_use_us = last.first_use_us.min(next.first_use_us);
            }
            _ => out.push(next),
        }
    }
    (out, new_pages)
}

/// Application keys to evict so that at most `cap` remain: the least recently launched first
/// (ties by key). `apps` pairs each key with its last launch time.
pub fn apps_to_evict<'a>(apps: impl IntoIterator<Item = (&'a str, u64)>, cap: usize) -> Vec<String> {
    let mut all: Vec<(u64, &str)> = apps.into_iter().map(|(k, t)| (t, k)).collect();
    if all.len() <= cap {
        return Vec::new();
    }
    all.sort_unstable();
    let excess = all.len() - cap;
    all.into_iter().take(excess).map(|(_, k)| k.to_string()).collect()
}

/// Application keys to evict after `learned` was learned, so that its user keeps at most
/// `max_per_user` applications and all users together at most `max_apps`: the user's own least
/// recently launched go first (ties by key), so that one user's flood of programs never evicts
/// root's or another user's. Only when that user has nothing else to give up (its first
/// application, the cap lowered below what the others keep) does the least recently launched
/// application of anyone go. `learned` itself is never evicted. `apps` pairs each key with its
/// last launch time.
pub fn apps_to_evict_for<'a>(
    apps: impl IntoIterator<Item = (&'a str, u64)>,
    learned: &str,
    max_apps: usize,
    max_per_user: usize,
) -> Vec<String> {
    let (max_apps, max_per_user) = (max_apps.max(1), max_per_user.max(1));
    let mut all: Vec<(u64, &str)> = apps.into_iter().map(|(k, t)| (t, k)).collect();
    all.sort_unstable();
    let uid = key_uid(learned);
    let mut total = all.len();
    let mut of_user = all.iter().filter(|(_, k)| key_uid(k) == uid).count();
    let mut evicted: Vec<&str> = Vec::new();
    for &(_, k) in &all {
        if of_user <= max_per_user && total <= max_apps {
            break;
        }
        if k != learned && key_uid(k) == uid {
            evicted.push(k);
            of_user -= 1;
            total -= 1;
        }
    }
    for &(_, k) in &all {
        if total <= max_apps {
            break;
        }
        if k != learned && !evicted.contains(&k) {
            evicted.push(k);
            total -= 1;
        }
    }
    evicted.into_iter().map(String::from).collect()
}

/// An in-memory set of learned applications, bounded by `max_apps` (for simulations and tests;
/// the daemon keeps its models in the state database and loads one at a time).
#[derive(Clone, Debug, Default)]
pub struct Learner {
    apps: BTreeMap<String, (AppModel, u64)>,
}

impl Learner {
    /// No application learned.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a launch of `app` at logical time `now`; evicts the least recently launched
    /// applications beyond the cap.
    pub fn record(&mut self, app: &str, launch: &LaunchProfile, now: u64, s: &LearnSettings) {
        let entry = self.apps.entry(app.to_string()).or_insert_with(|| (AppModel::new(launch.page_size), now));
        entry.0.record_launch(launch, s);
        entry.1 = now;
        let apps = self.apps.iter().map(|(k, (_, t))| (k.as_str(), *t));
        for k in apps_to_evict_for(apps, app, s.max_apps, s.max_apps_per_user) {
            self.apps.remove(&k);
        }
    }

    /// The model of `app`, if learned.
    pub fn get(&self, app: &str) -> Option<&AppModel> {
        self.apps.get(app).map(|(m, _)| m)
    }

    /// Number of applications learned.
    pub fn len(&self) -> usize {
        self.apps.len()
    }

    /// True when nothing is learned.
    pub fn is_empty(&self) -> bool {
        self.apps.is_empty()
    }

    /// Forgets one application; true when it was known.
    pub fn forget(&mut self, app: &str) -> bool {
        self.apps.remove(app).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::range::RangeSet;
    use proptest::prelude::*;

    fn ident(ino: u64) -> FileIdentity {
        FileIdentity { dev: 1, ino, size: 1 << 20, mtime_ns: 7 }
    }

    type FileSpec<'a> = (&'a str, FileIdentity, &'a [(u64, u64)]);

    fn launch(files: &[FileSpec<'_>]) -> LaunchProfile {
        LaunchProfile {
            command: vec!["app".into()],
            recorded_at: 0,
            page_size: 4096,
            mode: TraceMode::Access,
            window_ms: 100,
            files: files
                .iter()
                .enumerate()
                .map(|(i, (p, id, rs))| FileProfile {
                    path: PathBuf::from(p),
                    identity: *id,
                    ranges: rs
                        .iter()
                        .enumerate()
                        .map(|(k, &(s, l))| UsedRange { range: PageRange::new(s, l), first_use_us: (i * 100 + k) as u64 })
                        .collect(),
                })
                .collect(),
            unresolved: Unresolved::default(),
            lookups: Vec::new(),
        }
    }

    fn replay_pages(m: &AppModel, s: &LearnSettings, path: &str) -> RangeSet {
        m.replay_profile(s)
            .files
            .iter()
            .filter(|f| f.path.as_path() == std::path::Path::new(path))
            .flat_map(|f| f.ranges.iter().map(|u| u.range))
            .collect()
    }

    #[test]
    fn first_launch_is_replayed_whole_in_first_use_order() {
        let s = LearnSettings::default();
        let mut m = AppModel::new(4096);
        m.record_launch(&launch(&[("/b", ident(2), &[(20, 5), (0, 2)]), ("/a", ident(1), &[(0, 1)])]), &s);
        let p = m.replay_profile(&s);
        assert_eq!(p.files.iter().map(|f| f.path.to_str().unwrap()).collect::<Vec<_>>(), vec!["/b", "/a"]);
        assert_eq!(
            p.files[0].ranges.iter().map(|u| u.range).collect::<Vec<_>>(),
            vec![PageRange::new(20, 5), PageRange::new(0, 2)]
        );
        assert_eq!(p.page_count(), 8);
    }

    #[test]
    fn small_gaps_between_learned_ranges_are_replayed_with_them() {
        let s = LearnSettings::default();
        let mut m = AppModel::new(4096);
        // [30, 32) first, then [0, 2), [10, 12) (a gap of 8 pages) and [40, 41) (a gap of 8 after
        // [30, 32)), then [60, 61) (a gap of 19: kept apart).
        m.record_launch(&launch(&[("/a", ident(1), &[(30, 2), (0, 2), (10, 2), (40, 1), (60, 1)])]), &s);
        let p = m.replay_profile(&s);
        assert_eq!(
            p.files[0].ranges.iter().map(|u| u.range).collect::<Vec<_>>(),
            vec![PageRange::new(30, 11), PageRange::new(0, 12), PageRange::new(60, 1)],
            "merged runs are first used when their earliest range was"
        );
        assert_eq!(p.page_count(), 24);
    }

    #[test]
    fn ranges_used_once_fade_below_the_threshold_and_are_then_dropped() {
        let s = LearnSettings { decay: 0.5, drop_after_launches: 3, replay_threshold: 0.3, ..Default::default() };
        let mut m = AppModel::new(4096);
        m.record_launch(&launch(&[("/a", ident(1), &[(0, 10), (100, 5)])]), &s);
        m.record_launch(&launch(&[("/a", ident(1), &[(0, 10)])]), &s);
        // [100,105) used 1 of 2 launches: 0.5 / 1.5 = 0.33 -> still replayed.
        assert_eq!(replay_pages(&m, &s, "/a").page_count(), 15);
        m.record_launch(&launch(&[("/a", ident(1), &[(0, 10)])]), &s);
        // 0.25 / 1.75 = 0.14 -> known but not replayed.
        assert_eq!(replay_pages(&m, &s, "/a").page_count(), 10);
        assert_eq!(m.page_count(), 15);
        m.record_launch(&launch(&[("/a", ident(1), &[(0, 10)])]), &s);
        // Unused for 3 launches: dropped.
        assert_eq!(m.page_count(), 10);
    }

    #[test]
    fn lookups_put_the_latest_launch_first_and_outlive_launches_that_had_none() {
        use crate::model::profile::LookupKind;
        let s = LearnSettings::default();
        let stat = |p: &str| Lookup { path: PathBuf::from(p), kind: LookupKind::Stat };
        let mut m = AppModel::new(4096);
        let mut first = launch(&[("/lib/a", ident(1), &[(0, 1)])]);
        first.lookups = vec![stat("/etc"), stat("/usr/share/locale")];
        m.record_launch(&first, &s);
        let mut second = first.clone();
        second.lookups = vec![stat("/usr/share/locale/locale.alias"), stat("/etc")];
        m.record_launch(&second, &s);
        let warm = launch(&[("/lib/a", ident(1), &[(0, 1)])]);
        m.record_launch(&warm, &s);
        let replayed = m.replay_profile(&s);
        let paths: Vec<&str> = replayed.lookups.iter().map(|l| l.path.to_str().unwrap()).collect();
        assert_eq!(paths, ["/usr/share/locale/locale.alias", "/etc", "/usr/share/locale"]);
        let many: Vec<Lookup> = (0..MAX_LEARNED_LOOKUPS + 10).map(|i| stat(&format!("/d/{i}"))).collect();
        let mut big = warm.clone();
        big.lookups = many;
        m.record_launch(&big, &s);
        assert_eq!(m.lookups.len(), MAX_LEARNED_LOOKUPS);
        assert_eq!(m.lookups[0].path, PathBuf::from("/d/0"));
    }

    #[test]
    fn overlapping_ranges_split_and_count_separately() {
        let s = LearnSettings { decay: 1.0, ..Default::default() };
        let mut m = AppModel::new(4096);
        m.record_launch(&launch(&[("/a", ident(1), &[(0, 10)])]), &s);
        m.record_launch(&launch(&[("/a", ident(1), &[(5, 10)])]), &s);
        let segs: Vec<(u64, u64, f64)> =
            m.files[&PathBuf::from("/a")].segments.iter().map(|g| (g.range.start, g.range.len, g.score)).collect();
        assert_eq!(segs, vec![(0, 5, 1.0), (5, 5, 2.0), (10, 5, 1.0)]);
    }

    #[test]
    fn a_launch_says_how_many_of_its_pages_were_new_to_the_model() {
        let s = LearnSettings::default();
        let mut m = AppModel::new(4096);
        let first = m.record_launch(&launch(&[("/a", ident(1), &[(0, 10)]), ("/b", ident(2), &[(0, 5)])]), &s);
        assert_eq!(first, LaunchNovelty { pages: 15, new_pages: 15 });
        // The same pages again: nothing new.
        let same = m.record_launch(&launch(&[("/a", ident(1), &[(0, 10)]), ("/b", ident(2), &[(0, 5)])]), &s);
        assert_eq!(same, LaunchNovelty { pages: 15, new_pages: 0 });
        assert!(same.is_stable(0.0));
        // Two pages past /a's known ones, and /b rewritten (all of it new again).
        let grown = m.record_launch(&launch(&[("/a", ident(1), &[(5, 7)]), ("/b", ident(3), &[(0, 5)])]), &s);
        assert_eq!(grown, LaunchNovelty { pages: 12, new_pages: 7 });
        assert!(!grown.is_stable(0.5));
    }

    #[test]
    fn the_learning_history_counts_stable_and_unstable_launches_in_a_row() {
        let s = LearnSettings { stable_new_share: 0.1, ..Default::default() };
        let new = LaunchNovelty { pages: 100, new_pages: 100 };
        let settled = LaunchNovelty { pages: 100, new_pages: 10 };
        let h = LearningHistory::default().after(5, new, &s);
        assert_eq!(h, LearningHistory { learned: 1, last_learned_ms: 5, stable_streak: 0, unstable_streak: 1 });
        let h = h.after(6, settled, &s).after(7, settled, &s);
        assert_eq!(h, LearningHistory { learned: 3, last_learned_ms: 7, stable_streak: 2, unstable_streak: 0 });
        let h = h.after(8, new, &s);
        assert_eq!((h.stable_streak, h.unstable_streak), (0, 1));
        // An empty launch is stable (nothing new), and NaN settings count as "nothing new allowed".
        assert!(LaunchNovelty::default().is_stable(f64::NAN));
        assert!(!LaunchNovelty { pages: 1, new_pages: 1 }.is_stable(f64::NAN));
    }

    #[test]
    fn a_changed_file_is_relearned_never_replayed_stale() {
        let s = LearnSettings::default();
        let mut m = AppModel::new(4096);
        for _ in 0..3 {
            m.record_launch(&launch(&[("/lib.so", ident(1), &[(0, 50)])]), &s);
        }
        m.record_launch(&launch(&[("/lib.so", ident(99), &[(60, 4)])]), &s);
        let p = m.replay_profile(&s);
        assert_eq!(p.files.len(), 1);
        assert_eq!(p.files[0].identity, ident(99));
        assert_eq!(p.files[0].page_set().ranges(), &[PageRange::new(60, 4)]);
    }

    #[test]
    fn app_cap_evicts_the_least_recently_launched() {
        let s = LearnSettings { max_apps: 2, ..Default::default() };
        let mut l = Learner::new();
        let one = launch(&[("/a", ident(1), &[(0, 1)])]);
        l.record("x", &one, 1, &s);
        l.record("y", &one, 2, &s);
        l.record("x", &one, 3, &s);
        l.record("z", &one, 4, &s);
        assert_eq!(l.len(), 2);
        assert!(l.get("y").is_none());
        assert!(l.get("x").is_some() && l.get("z").is_some());
    }

    #[test]
    fn a_users_flood_evicts_only_that_users_apps() {
        let s = LearnSettings { max_apps: 10, max_apps_per_user: 5, ..Default::default() };
        let mut l = Learner::new();
        let one = launch(&[("/a", ident(1), &[(0, 1)])]);
        for (t, k) in ["/usr/bin/a", "/usr/bin/b", "uid=7:/usr/bin/a"].iter().enumerate() {
            l.record(k, &one, t as u64, &s);
        }
        for i in 0..1100u64 {
            l.record(&format!("uid=1000:/home/u/s{i}.sh"), &one, 10 + i, &s);
        }
        assert!(l.get("/usr/bin/a").is_some() && l.get("/usr/bin/b").is_some(), "root's stay");
        assert!(l.get("uid=7:/usr/bin/a").is_some(), "another user's stay");
        assert_eq!(l.len(), 3 + 5, "the flooding user keeps its share");
        assert!(l.get("uid=1000:/home/u/s1099.sh").is_some() && l.get("uid=1000:/home/u/s1094.sh").is_none());
    }

    #[test]
    fn past_max_apps_the_learning_user_gives_up_its_own_first() {
        let apps = [("/r1", 1), ("uid=5:/a", 2), ("uid=5:/b", 3), ("/r2", 4), ("uid=6:/x", 5)];
        assert_eq!(apps_to_evict_for(apps, "uid=5:/b", 4, 10), vec!["uid=5:/a".to_string()]);
        assert_eq!(apps_to_evict_for(apps, "/r2", 4, 10), vec!["/r1".to_string()]);
        // Nothing else of its own: the least recently launched of anyone goes, never itself.
        assert_eq!(apps_to_evict_for(apps, "uid=6:/x", 4, 10), vec!["/r1".to_string()]);
        assert_eq!(apps_to_evict_for(apps, "uid=5:/b", 10, 1), vec!["uid=5:/a".to_string()]);
        assert!(apps_to_evict_for(apps, "uid=6:/x", 5, 1).is_empty());
    }

    fn arb_launch() -> impl Strategy<Value = LaunchProfile> {
        // Up to 4 files, identity from a small set so changes happen, ranges in a small space.
        prop::collection::vec((0u8..4, 0u64..2, prop::collection::vec((0u64..200, 1u64..20), 0..6)), 0..5).prop_map(|files| {
            let mut seen = std::collections::BTreeSet::new();
            let files = files
                .into_iter()
                .filter(|(f, _, _)| seen.insert(*f))
                .enumerate()
                .map(|(i, (f, idv, rs))| {
                    // Make the file's ranges disjoint as WorkingSetBuilder would.
                    let mut set = RangeSet::new();
                    let mut ranges = Vec::new();
                    for (k, (start, len)) in rs.into_iter().enumerate() {
                        for piece in set.missing_from(PageRange::new(start, len)) {
                            set.insert(piece);
                            ranges.push(UsedRange { range: piece, first_use_us: (i * 10 + k) as u64 });
                        }
                    }
                    FileProfile { path: PathBuf::from(format!("/f{f}")), identity: ident(u64::from(f) * 10 + idv), ranges }
                })
                .collect();
            LaunchProfile {
                command: vec![],
                recorded_at: 0,
                page_size: 4096,
                mode: TraceMode::Access,
                window_ms: 0,
                files,
                unresolved: Unresolved::default(),
                lookups: Vec::new(),
            }
        })
    }

    fn arb_settings() -> impl Strategy<Value = LearnSettings> {
        (0.1f64..=1.0, 1u32..6, 0.05f64..=1.0, 1usize..40).prop_map(|(decay, drop, thr, cap)| LearnSettings {
            decay,
            drop_after_launches: drop,
            replay_threshold: thr,
            max_ranges_per_app: cap,
            max_apps: 10,
            max_apps_per_user: 10,
            stable_new_share: 0.05,
        })
    }

    proptest! {
        #[test]
        fn model_invariants_hold(s in arb_settings(), launches in prop::collection::vec(arb_launch(), 1..12)) {
            let mut m = AppModel::new(4096);
            for (idx, l) in launches.iter().enumerate() {
                m.record_launch(l, &s);
                let n = (idx + 1) as u64;
                prop_assert_eq!(m.launches, n);
                prop_assert!(m.segment_count() <= s.max_ranges_per_app);
                // What the state refuses to read back as a model (a corrupt one) is never learned.
                prop_assert_eq!(m.check_consistent(), Ok(()));
                for (path, f) in &m.files {
                    prop_assert!(!f.segments.is_empty());
                    for w in f.segments.windows(2) {
                        prop_assert!(w[0].range.end() <= w[1].range.start, "segments overlap or unsorted");
                    }
                    for g in &f.segments {
                        prop_assert!(!g.range.is_empty());
                        prop_assert!(g.score > 0.0 && g.score <= m.weight + 1e-9);
                        prop_assert!(n - g.last_launch < u64::from(s.drop_after_launches));
                    }
                    // A file seen in this launch holds only ranges learned under its current identity.
                    if let Some(fp) = l.files.iter().find(|fp| &fp.path == path) {
                        prop_assert_eq!(f.identity, fp.identity);
                    }
                }
                // The replay profile is what is known, with gaps of at most REPLAY_BRIDGE_PAGES
                // between known ranges, never of a stale identity; its ranges are disjoint.
                let p = m.replay_profile(&s);
                for fp in &p.files {
                    let f = &m.files[&fp.path];
                    prop_assert_eq!(fp.identity, f.identity);
                    let known: RangeSet = f.segments.iter().map(|g| g.range).collect();
                    let mut replayed = RangeSet::default();
                    for u in &fp.ranges {
                        prop_assert!(known.contains(u.range.start) && known.contains(u.range.end() - 1));
                        for gap in known.missing_from(u.range) {
                            prop_assert!(gap.len <= REPLAY_BRIDGE_PAGES);
                        }
                        prop_assert!(replayed.missing_from(u.range) == vec![u.range], "replayed ranges overlap");
                        replayed.insert(u.range);
                    }
                }
            }
        }

        #[test]
        fn eviction_keeps_the_caps_and_spares_other_users(
            apps in prop::collection::btree_map(0u32..4, prop::collection::btree_set(0u64..50, 0..20), 1..4),
            learned_uid in 0u32..4,
            max_apps in 1usize..40,
            per_user in 1usize..20,
        ) {
            let keys: Vec<(String, u64)> = apps
                .iter()
                .flat_map(|(&u, ts)| ts.iter().map(move |&t| (crate::model::user::user_key(u, &format!("/p{t}")), t)))
                .collect();
            let learned = crate::model::user::user_key(learned_uid, "/new");
            let mut all = keys.clone();
            all.push((learned.clone(), 100));
            let evicted = apps_to_evict_for(all.iter().map(|(k, t)| (k.as_str(), *t)), &learned, max_apps, per_user);
            prop_assert!(!evicted.contains(&learned));
            let left: Vec<&(String, u64)> = all.iter().filter(|(k, _)| !evicted.contains(k)).collect();
            prop_assert!(left.len() <= max_apps);
            let own_left = left.iter().filter(|(k, _)| key_uid(k) == learned_uid).count();
            prop_assert!(own_left <= per_user.max(1));
            // Another user's application goes only when the learning user kept nothing else.
            if evicted.iter().any(|k| key_uid(k) != learned_uid) {
                prop_assert_eq!(own_left, 1);
            }
        }

        #[test]
        fn without_a_cap_the_latest_launch_is_fully_known(launches in prop::collection::vec(arb_launch(), 1..10)) {
            let s = LearnSettings { max_ranges_per_app: usize::MAX, ..Default::default() };
            let mut m = AppModel::new(4096);
            for l in &launches {
                m.record_launch(l, &s);
            }
            let last = launches.last().unwrap();
            for fp in &last.files {
                if fp.ranges.is_empty() { continue; }
                let f = &m.files[&fp.path];
                let known: RangeSet = f.segments.iter().map(|g| g.range).collect();
                let used = fp.page_set();
                for r in used.ranges() {
                    prop_assert!(known.missing_from(*r).is_empty());
                }
                // Pages learned under an older identity of this file are gone.
                let stale: u64 = known.ranges().iter().map(|r| {
                    used.missing_from(*r).iter().map(|p| p.len).sum::<u64>()
                }).sum();
                let changed = launches.iter().rev().skip(1)
                    .find_map(|l| l.files.iter().find(|o| o.path == fp.path && !o.ranges.is_empty()))
                    .is_some_and(|o| o.identity != fp.identity);
                if changed { prop_assert_eq!(stale, 0); }
            }
        }

        #[test]
        fn ranges_used_every_time_have_full_confidence(n in 1usize..15, decay in 0.1f64..=1.0) {
            let s = LearnSettings { decay, ..Default::default() };
            let mut m = AppModel::new(4096);
            let l = launch(&[("/a", ident(1), &[(0, 8)])]);
            for _ in 0..n { m.record_launch(&l, &s); }
            let seg = m.files[&PathBuf::from("/a")].segments[0];
            prop_assert!((m.confidence(&seg) - 1.0).abs() < 1e-9);
        }

        #[test]
        fn learner_never_exceeds_its_app_cap(cap in 1usize..8, keys in prop::collection::vec(0u8..20, 1..60)) {
            let s = LearnSettings { max_apps: cap, ..Default::default() };
            let mut l = Learner::new();
            let one = launch(&[("/a", ident(1), &[(0, 1)])]);
            for (t, k) in keys.iter().enumerate() {
                let key = format!("app{k}");
                l.record(&key, &one, t as u64, &s);
                prop_assert!(l.len() <= cap);
                prop_assert!(l.get(&key).is_some());
            }
        }
    }
}
