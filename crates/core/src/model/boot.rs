//! Boot plans: which pages of which files a boot used, phase by phase, merged over the last boots
//! into the plan the next boot replays.
//!
//! A boot is split into phases by the service manager (systemd's targets: sysinit, basic,
//! multi-user, graphical; then the user's session) or by `augur mark PHASE` under other inits. A
//! [`BootTrace`] is one recorded boot: files and page ranges in first-use order, each range with
//! the phase it was first used in. [`BootHistory`] keeps the last `keep_boots` traces and merges
//! them into a [`BootPlan`]: each page counts in the boots that used it, newer boots weighing
//! more (a decayed count, the "sort-sum" of trace-based boot prefetchers with fading), so files a
//! boot used once fade out; a file whose identity changed (a package upgrade) counts only in the
//! boots that saw its current identity, so it is relearned, never replayed from stale data. The
//! plan is bounded in pages and keeps each phase's files and ranges in first-use order; on a
//! rotational disk the fetch worker (`augur-os::fetch`, the same one launch replay uses) loads a
//! phase in physical order instead, from the FIEMAP offsets it reads.
//!
//! Pure: no I/O, no clocks; the caller passes traces, times and disk positions.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::profile::{FileIdentity, FileProfile, LaunchProfile, TraceMode, Unresolved, UsedRange};
use super::range::PageRange;
use super::record::AppSummary;
use super::user::key_uid;

/// A phase of a boot, in the order phases are reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BootPhase {
    /// From the first early unit until `sysinit.target` is reached (mounting, udev, journald).
    Early,
    /// Until `basic.target`: sockets, timers, paths.
    Sysinit,
    /// Until `multi-user.target`: the system's services.
    Basic,
    /// Until `graphical.target`: the display manager.
    MultiUser,
    /// Until a user's session starts.
    Graphical,
    /// The user's session and its autostarted applications, until recording stops.
    Session,
}

impl BootPhase {
    /// Every phase, in order.
    pub const ALL: [BootPhase; 6] =
        [BootPhase::Early, BootPhase::Sysinit, BootPhase::Basic, BootPhase::MultiUser, BootPhase::Graphical, BootPhase::Session];

    /// The name `augur mark` takes and status prints.
    pub const fn name(self) -> &'static str {
        match self {
            BootPhase::Early => "early",
            BootPhase::Sysinit => "sysinit",
            BootPhase::Basic => "basic",
            BootPhase::MultiUser => "multi-user",
            BootPhase::Graphical => "graphical",
            BootPhase::Session => "session",
        }
    }

    /// The systemd target whose being reached starts this phase (none for the first and the
    /// session, which a login starts).
    pub const fn systemd_target(self) -> Option<&'static str> {
        match self {
            BootPhase::Early | BootPhase::Session => None,
            BootPhase::Sysinit => Some("sysinit.target"),
            BootPhase::Basic => Some("basic.target"),
            BootPhase::MultiUser => Some("multi-user.target"),
            BootPhase::Graphical => Some("graphical.target"),
        }
    }

    /// The phase after this one, if any.
    pub fn next(self) -> Option<BootPhase> {
        let i = BootPhase::ALL.iter().position(|p| *p == self)?;
        BootPhase::ALL.get(i + 1).copied()
    }
}

impl fmt::Display for BootPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no boot phase.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown boot phase {0:?} (one of early, sysinit, basic, multi-user, graphical, session)")]
pub struct UnknownPhase(pub String);

impl FromStr for BootPhase {
    type Err = UnknownPhase;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let bare = s.strip_suffix(".target").unwrap_or(s);
        BootPhase::ALL.into_iter().find(|p| p.name() == bare).ok_or_else(|| UnknownPhase(s.to_string()))
    }
}

/// When a phase began, in microseconds since the recording started.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseStart {
    /// The phase.
    pub phase: BootPhase,
    /// Microseconds from the start of recording.
    pub at_us: u64,
}

/// The phase in effect at `at_us`: the last phase started at or before it (phases only move
/// forward: a start earlier than a later phase's is ignored), [`BootPhase::Early`] before any.
pub fn phase_at(starts: &[PhaseStart], at_us: u64) -> BootPhase {
    let mut phase = BootPhase::Early;
    for s in starts {
        if s.at_us <= at_us && s.phase > phase {
            phase = s.phase;
        }
    }
    phase
}

/// A page range of a boot with the phase it was first used in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootRange {
    /// The pages.
    pub range: PageRange,
    /// Microseconds from the start of recording to the first use.
    pub first_use_us: u64,
    /// The phase of that first use.
    pub phase: BootPhase,
}

/// The pages one file contributed to a boot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootFile {
    /// Absolute path at trace time.
    pub path: PathBuf,
    /// Identity at trace time.
    pub identity: FileIdentity,
    /// Disjoint ranges in first-use order.
    pub ranges: Vec<BootRange>,
}

/// One recorded boot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootTrace {
    /// Seconds since the epoch when recording stopped.
    pub recorded_at: u64,
    /// Page size in bytes the page indices refer to.
    pub page_size: u64,
    /// When each phase began.
    pub phases: Vec<PhaseStart>,
    /// Files in the order of their first use.
    pub files: Vec<BootFile>,
}

impl BootTrace {
    /// A boot recorded as one system-wide trace (first-use times from the start of recording),
    /// split at the phase starts.
    pub fn from_profile(profile: &LaunchProfile, phases: &[PhaseStart], recorded_at: u64) -> BootTrace {
        let mut files: Vec<BootFile> = profile
            .files
            .iter()
            .filter(|f| !f.ranges.is_empty())
            .map(|f| {
                let mut ranges: Vec<BootRange> = f
                    .ranges
                    .iter()
                    .filter(|u| !u.range.is_empty())
                    .map(|u| BootRange { range: u.range, first_use_us: u.first_use_us, phase: phase_at(phases, u.first_use_us) })
                    .collect();
                ranges.sort_by_key(|r| (r.first_use_us, r.range.start));
                BootFile { path: f.path.clone(), identity: f.identity, ranges }
            })
            .filter(|f| !f.ranges.is_empty())
            .collect();
        files.sort_by(|a, b| a.first_use_us().cmp(&b.first_use_us()).then_with(|| a.path.cmp(&b.path)));
        let mut phases = phases.to_vec();
        phases.sort_by_key(|p| (p.at_us, p.phase));
        BootTrace { recorded_at, page_size: profile.page_size, phases, files }
    }

    /// Pages over all files.
    pub fn page_count(&self) -> u64 {
        self.files.iter().flat_map(|f| &f.ranges).map(|r| r.range.len).sum()
    }
}

impl BootFile {
    /// When the file was first used.
    pub fn first_use_us(&self) -> u64 {
        self.ranges.iter().map(|r| r.first_use_us).min().unwrap_or(0)
    }
}

/// How boots are merged into a plan, from the configuration's `[boot]` section.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BootSettings {
    /// Boots kept and merged (the newest).
    pub keep_boots: usize,
    /// Weight of a boot relative to the next newer one, in (0, 1].
    pub decay: f64,
    /// Share of the (decayed) boots a page must have been used in to be replayed, in (0, 1].
    pub replay_threshold: f64,
    /// Most pages (of the traces' page size) a plan holds; the least used go first.
    pub max_pages: u64,
}

impl Default for BootSettings {
    fn default() -> Self {
        // Three to five merged traces did best in the reference; 0.75 and 0.2 are the launch
        // profiles' own decay and threshold: a page one boot used fades three boots later.
        BootSettings { keep_boots: 5, decay: 0.75, replay_threshold: 0.2, max_pages: 131_072 }
    }
}

/// The pages one phase of the next boot should find loaded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhasePlan {
    /// The phase.
    pub phase: BootPhase,
    /// Files in load order, each with ranges in load order.
    pub files: Vec<FileProfile>,
}

impl PhasePlan {
    /// Pages of the phase.
    pub fn page_count(&self) -> u64 {
        self.files.iter().map(FileProfile::page_count).sum()
    }
}

/// The merged plan of the last boots.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootPlan {
    /// Page size in bytes the page indices refer to.
    pub page_size: u64,
    /// Boots merged.
    pub boots: usize,
    /// Phases in order, each present only when it holds pages.
    pub phases: Vec<PhasePlan>,
}

impl BootPlan {
    /// Pages over all phases.
    pub fn page_count(&self) -> u64 {
        self.phases.iter().map(PhasePlan::page_count).sum()
    }

    /// Files over all phases (a file whose pages span phases counts in each).
    pub fn file_count(&self) -> usize {
        self.phases.iter().map(|p| p.files.len()).sum()
    }

    /// The plan of one phase, if it holds pages.
    pub fn phase(&self, phase: BootPhase) -> Option<&PhasePlan> {
        self.phases.iter().find(|p| p.phase == phase)
    }

    /// One phase as a profile the fetch worker replays like a launch's.
    pub fn phase_profile(&self, phase: BootPhase) -> Option<LaunchProfile> {
        let p = self.phase(phase)?;
        Some(LaunchProfile {
            command: vec![format!("boot:{}", phase.name())],
            recorded_at: 0,
            page_size: self.page_size,
            mode: TraceMode::Access,
            window_ms: 0,
            files: p.files.clone(),
            unresolved: Unresolved::default(),
            lookups: Vec::new(),
        })
    }
}

/// The last boots, newest last.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootHistory {
    /// Recorded boots, oldest first.
    pub traces: Vec<BootTrace>,
}

/// One piece of a merged file: its pages, its decayed count, and where the newest boot that used
/// it used it first.
#[derive(Clone, Copy, Debug)]
struct Piece {
    range: PageRange,
    score: f64,
    first_use_us: u64,
    phase: BootPhase,
}

impl BootHistory {
    /// Adds a boot, keeping only the newest `keep_boots`; a boot of another page size than the
    /// kept ones replaces them (their page indices cannot be merged).
    pub fn record(&mut self, trace: BootTrace, s: &BootSettings) {
        if self.traces.iter().any(|t| t.page_size != trace.page_size) {
            self.traces.clear();
        }
        self.traces.push(trace);
        let keep = s.keep_boots.max(1);
        if self.traces.len() > keep {
            let excess = self.traces.len() - keep;
            self.traces.drain(..excess);
        }
    }

    /// The plan for the next boot: pages whose decayed count reaches the threshold, at most
    /// `max_pages` of them (lowest counts, then latest first uses, cut first), grouped by the phase
    /// the newest boot using them first used them in, files and ranges in first-use order.
    pub fn plan(&self, s: &BootSettings) -> BootPlan {
        let page_size = self.traces.last().map_or(4096, |t| t.page_size);
        let decay = if s.decay.is_finite() { s.decay.clamp(f64::MIN_POSITIVE, 1.0) } else { 1.0 };
        let n = self.traces.len();
        // Weight of the boot at index i (oldest first): decay^(age).
        let weights: Vec<f64> = (0..n).map(|i| decay.powi(i32::try_from(n - 1 - i).unwrap_or(i32::MAX))).collect();
        let total: f64 = weights.iter().sum();
        let threshold = if s.replay_threshold.is_finite() { s.replay_threshold.clamp(0.0, 1.0) } else { 1.0 };

        // Each path's current identity is the one the newest boot using it saw.
        let mut current: BTreeMap<&Path, FileIdentity> = BTreeMap::new();
        for t in &self.traces {
            for f in &t.files {
                current.insert(&f.path, f.identity);
            }
        }
        let mut pieces: Vec<(&Path, FileIdentity, Piece)> = Vec::new();
        for (path, identity) in &current {
            // The boots (index, ranges sorted by page) that used this identity of the file.
            let mut uses: Vec<(usize, Vec<BootRange>)> = Vec::new();
            for (i, t) in self.traces.iter().enumerate() {
                for f in t.files.iter().filter(|f| f.path.as_path() == *path && f.identity == *identity) {
                    let mut r = f.ranges.clone();
                    r.retain(|r| !r.range.is_empty());
                    r.sort_by_key(|r| r.range.start);
                    uses.push((i, r));
                }
            }
            for piece in merge_file(&uses, &weights) {
                if total > 0.0 && piece.score / total + 1e-12 >= threshold {
                    pieces.push((*path, *identity, piece));
                }
            }
        }
        // Bound the plan: keep the most used, earliest first used pages.
        pieces.sort_by(|a, b| {
            b.2.score
                .total_cmp(&a.2.score)
                .then(a.2.first_use_us.cmp(&b.2.first_use_us))
                .then(a.0.cmp(b.0))
                .then(a.2.range.start.cmp(&b.2.range.start))
        });
        let mut kept = 0u64;
        let mut chosen: Vec<(&Path, FileIdentity, Piece)> = Vec::new();
        for (path, id, mut p) in pieces {
            if kept >= s.max_pages {
                break;
            }
            p.range.len = p.range.len.min(s.max_pages - kept);
            kept += p.range.len;
            chosen.push((path, id, p));
        }
        build_plan(chosen, page_size, n)
    }
}

/// Splits a file's uses at every range boundary and scores each elementary piece with the weights
/// of the boots that used it; phase and first use come from the newest of them.
fn merge_file(uses: &[(usize, Vec<BootRange>)], weights: &[f64]) -> Vec<Piece> {
    let mut bounds: Vec<u64> = uses.iter().flat_map(|(_, rs)| rs.iter().flat_map(|r| [r.range.start, r.range.end()])).collect();
    bounds.sort_unstable();
    bounds.dedup();
    let mut cursors = vec![0usize; uses.len()];
    let mut out: Vec<Piece> = Vec::new();
    for w in bounds.windows(2) {
        let (start, end) = (w[0], w[1]);
        let mut score = 0.0;
        let mut newest: Option<(usize, BootRange)> = None;
        for (k, (boot, ranges)) in uses.iter().enumerate() {
            while cursors[k] < ranges.len() && ranges[cursors[k]].range.end() <= start {
                cursors[k] += 1;
            }
            if let Some(r) = ranges.get(cursors[k]).filter(|r| r.range.start <= start) {
                score += weights.get(*boot).copied().unwrap_or(0.0);
                if newest.is_none_or(|(b, _)| *boot >= b) {
                    newest = Some((*boot, *r));
                }
            }
        }
        let Some((_, r)) = newest else { continue };
        let piece = Piece { range: PageRange::from_bounds(start, end), score, first_use_us: r.first_use_us, phase: r.phase };
        match out.last_mut() {
            Some(last)
                if last.range.end() == start
                    && last.phase == piece.phase
                    && last.first_use_us == piece.first_use_us
                    && (last.score - piece.score).abs() < 1e-12 =>
            {
                last.range.len += piece.range.len;
            }
            _ => out.push(piece),
        }
    }
    out
}

/// Groups chosen pieces into phases, files and ranges in first-use order, adjacent ranges of one
/// phase merged.
fn build_plan(chosen: Vec<(&Path, FileIdentity, Piece)>, page_size: u64, boots: usize) -> BootPlan {
    // A path has one identity in a plan (the newest boot's).
    let mut by_phase: BTreeMap<BootPhase, BTreeMap<&Path, (FileIdentity, Vec<UsedRange>)>> = BTreeMap::new();
    let mut by_range: Vec<(&Path, FileIdentity, Piece)> = chosen;
    by_range.sort_by(|a, b| a.0.cmp(b.0).then(a.2.range.start.cmp(&b.2.range.start)));
    for (path, id, p) in by_range {
        let (_, ranges) = by_phase.entry(p.phase).or_default().entry(path).or_insert_with(|| (id, Vec::new()));
        match ranges.last_mut() {
            Some(last) if last.range.end() == p.range.start => {
                last.range.len += p.range.len;
                last.first_use_us = last.first_use_us.min(p.first_use_us);
            }
            _ => ranges.push(UsedRange { range: p.range, first_use_us: p.first_use_us }),
        }
    }
    let phases = by_phase
        .into_iter()
        .map(|(phase, files)| {
            let mut files: Vec<FileProfile> = files
                .into_iter()
                .map(|(path, (identity, mut ranges))| {
                    ranges.sort_by_key(|u| (u.first_use_us, u.range.start));
                    FileProfile { path: path.to_path_buf(), identity, ranges }
                })
                .collect();
            files.sort_by(|a, b| a.first_use_us().cmp(&b.first_use_us()).then_with(|| a.path.cmp(&b.path)));
            PhasePlan { phase, files }
        })
        .collect();
    BootPlan { page_size, boots, phases }
}

/// The phase whose plan is loaded while the boot is in `current`, one ahead: the next, or the
/// session once `last_target` (the default target's phase) is reached, as a boot whose default
/// target is `multi-user` never reaches `graphical` and its session comes next.
pub fn phase_ahead(current: BootPhase, last_target: BootPhase) -> BootPhase {
    if current >= last_target { BootPhase::Session } else { current.next().unwrap_or(current) }
}

/// Which phases' plans may be loaded while the boot is in `current`: those up to the phase ahead
/// of it (loading one phase ahead hides the disk's latency without filling memory with pages
/// needed minutes later).
pub fn phases_released(current: BootPhase, last_target: BootPhase) -> Vec<BootPhase> {
    let ahead = phase_ahead(current, last_target);
    BootPhase::ALL.into_iter().filter(|p| *p <= ahead).collect()
}

/// The session's usual applications: the `n` most launched of those learned for a user (keys
/// with a uid: what people start, not services), or of every application when no user has any.
pub fn session_apps(apps: &[AppSummary], n: usize) -> Vec<String> {
    let mut users: Vec<&AppSummary> = apps.iter().filter(|a| key_uid(&a.key) != 0).collect();
    if users.is_empty() {
        users = apps.iter().collect();
    }
    users.sort_by(|a, b| b.launches.cmp(&a.launches).then(b.last_launch_ms.cmp(&a.last_launch_ms)).then(a.key.cmp(&b.key)));
    users.into_iter().take(n).map(|a| a.key.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ident(n: u64) -> FileIdentity {
        FileIdentity { dev: 1, ino: n, size: n * 100, mtime_ns: 7 }
    }

    /// Ranges as (start, len, first use in us).
    type Ranges = [(u64, u64, u64)];
    /// A file as (path, identity number, ranges).
    type File<'a> = (&'a str, u64, &'a Ranges);
    type RangeList = Vec<(u64, u64, u64)>;

    fn boot(files: &[File<'_>], phases: &[(BootPhase, u64)]) -> BootTrace {
        let profile = LaunchProfile {
            command: vec!["boot".into()],
            recorded_at: 0,
            page_size: 4096,
            mode: TraceMode::Access,
            window_ms: 0,
            files: files
                .iter()
                .map(|(p, id, rs)| FileProfile {
                    path: PathBuf::from(p),
                    identity: ident(*id),
                    ranges: rs.iter().map(|(s, l, t)| UsedRange { range: PageRange::new(*s, *l), first_use_us: *t }).collect(),
                })
                .collect(),
            unresolved: Unresolved::default(),
            lookups: Vec::new(),
        };
        let starts: Vec<PhaseStart> = phases.iter().map(|(phase, at_us)| PhaseStart { phase: *phase, at_us: *at_us }).collect();
        BootTrace::from_profile(&profile, &starts, 1)
    }

    const PHASES: &[(BootPhase, u64)] =
        &[(BootPhase::Sysinit, 1_000), (BootPhase::Basic, 2_000), (BootPhase::MultiUser, 3_000), (BootPhase::Session, 5_000)];

    fn plan_pages(plan: &BootPlan) -> Vec<(BootPhase, String, u64, u64)> {
        plan.phases
            .iter()
            .flat_map(|p| {
                p.files.iter().flat_map(move |f| {
                    f.ranges.iter().map(move |u| (p.phase, f.path.display().to_string(), u.range.start, u.range.len))
                })
            })
            .collect()
    }

    #[test]
    fn phase_names_parse_and_print() {
        for p in BootPhase::ALL {
            assert_eq!(p.name().parse::<BootPhase>(), Ok(p));
            if let Some(t) = p.systemd_target() {
                assert_eq!(t.parse::<BootPhase>(), Ok(p));
            }
        }
        assert!("shutdown".parse::<BootPhase>().is_err());
        assert_eq!(BootPhase::Graphical.next(), Some(BootPhase::Session));
        assert_eq!(BootPhase::Session.next(), None);
    }

    #[test]
    fn ranges_take_the_phase_of_their_first_use() {
        let starts = [PhaseStart { phase: BootPhase::Sysinit, at_us: 10 }, PhaseStart { phase: BootPhase::Basic, at_us: 20 }];
        assert_eq!(phase_at(&starts, 0), BootPhase::Early);
        assert_eq!(phase_at(&starts, 10), BootPhase::Sysinit);
        assert_eq!(phase_at(&starts, 25), BootPhase::Basic);
        // A phase reported late never moves the boot backwards.
        let late = [PhaseStart { phase: BootPhase::Basic, at_us: 5 }, PhaseStart { phase: BootPhase::Sysinit, at_us: 8 }];
        assert_eq!(phase_at(&late, 9), BootPhase::Basic);

        let t = boot(&[("/sbin/init", 1, &[(0, 4, 0), (10, 2, 2_500)]), ("/usr/bin/app", 2, &[(0, 8, 6_000)])], PHASES);
        assert_eq!(t.files[0].ranges[1].phase, BootPhase::Basic);
        assert_eq!(t.files[1].ranges[0].phase, BootPhase::Session);
        let mut h = BootHistory::default();
        h.record(t, &BootSettings::default());
        let plan = h.plan(&BootSettings::default());
        assert_eq!(
            plan_pages(&plan),
            vec![
                (BootPhase::Early, "/sbin/init".into(), 0, 4),
                (BootPhase::Basic, "/sbin/init".into(), 10, 2),
                (BootPhase::Session, "/usr/bin/app".into(), 0, 8),
            ]
        );
        let session = plan.phase_profile(BootPhase::Session).unwrap();
        assert_eq!(session.page_count(), 8);
        assert!(plan.phase_profile(BootPhase::Graphical).is_none());
    }

    #[test]
    fn a_file_one_boot_used_fades_and_a_habit_stays() {
        let s = BootSettings::default();
        let mut h = BootHistory::default();
        h.record(boot(&[("/a", 1, &[(0, 4, 0)]), ("/once", 2, &[(0, 4, 10)])], PHASES), &s);
        // The newest boot counts at once.
        assert!(plan_pages(&h.plan(&s)).iter().any(|p| p.1 == "/once"));
        for _ in 0..3 {
            h.record(boot(&[("/a", 1, &[(0, 4, 0)])], PHASES), &s);
        }
        let pages = plan_pages(&h.plan(&s));
        assert!(pages.iter().all(|p| p.1 != "/once"), "{pages:?}");
        assert!(pages.iter().any(|p| p.1 == "/a"));
        // Only the newest keep_boots are kept.
        for _ in 0..10 {
            h.record(boot(&[("/a", 1, &[(0, 4, 0)])], PHASES), &s);
        }
        assert_eq!(h.traces.len(), s.keep_boots);
        assert_eq!(h.plan(&s).boots, s.keep_boots);
    }

    #[test]
    fn an_upgraded_file_is_relearned_from_its_new_identity_only() {
        let s = BootSettings::default();
        let mut h = BootHistory::default();
        for _ in 0..3 {
            h.record(boot(&[("/lib/libc.so", 1, &[(0, 100, 0)])], PHASES), &s);
        }
        // Upgraded: a different inode, and this boot used other pages.
        h.record(boot(&[("/lib/libc.so", 9, &[(50, 10, 0)])], PHASES), &s);
        let plan = h.plan(&s);
        let early = plan.phase(BootPhase::Early).unwrap();
        assert_eq!(early.files.len(), 1);
        assert_eq!(early.files[0].identity, ident(9));
        assert_eq!(early.files[0].page_count(), 10);
    }

    #[test]
    fn the_plan_is_bounded_cutting_the_least_used_first() {
        let s = BootSettings { max_pages: 10, replay_threshold: 0.1, ..Default::default() };
        let mut h = BootHistory::default();
        h.record(boot(&[("/rare", 1, &[(0, 8, 100)])], PHASES), &s);
        h.record(boot(&[("/often", 2, &[(0, 8, 200)])], PHASES), &s);
        h.record(boot(&[("/often", 2, &[(0, 8, 200)])], PHASES), &s);
        let plan = h.plan(&s);
        assert_eq!(plan.page_count(), 10);
        let pages = plan_pages(&plan);
        assert!(pages.contains(&(BootPhase::Early, "/often".into(), 0, 8)), "{pages:?}");
        assert!(pages.contains(&(BootPhase::Early, "/rare".into(), 0, 2)), "{pages:?}");
    }

    #[test]
    fn files_and_ranges_are_in_first_use_order() {
        let s = BootSettings::default();
        let mut h = BootHistory::default();
        h.record(boot(&[("/b", 2, &[(0, 1, 5)]), ("/a", 1, &[(3, 1, 1), (0, 1, 9)]), ("/c", 3, &[(0, 1, 7)])], PHASES), &s);
        let plan = h.plan(&s);
        let order: Vec<&str> = plan.phases[0].files.iter().map(|f| f.path.to_str().unwrap()).collect();
        assert_eq!(order, ["/a", "/b", "/c"]);
        assert_eq!(plan.phases[0].files[0].ranges[0].range.start, 3, "ranges in first-use order");
    }

    #[test]
    fn the_session_apps_are_the_users_most_launched() {
        use crate::model::user::user_key;
        let app = |key: String, launches| AppSummary {
            key,
            exe: String::new(),
            launches,
            last_launch_ms: 0,
            pages: 0,
            replay_pages: 0,
        };
        let apps = vec![
            app("/usr/sbin/cron".into(), 50),
            app(user_key(1000, "/usr/bin/firefox"), 9),
            app(user_key(1000, "/usr/bin/gimp"), 2),
            app(user_key(1001, "/usr/bin/emacs"), 5),
        ];
        assert_eq!(session_apps(&apps, 2), vec![user_key(1000, "/usr/bin/firefox"), user_key(1001, "/usr/bin/emacs")]);
        assert_eq!(session_apps(&apps[..1], 5), vec!["/usr/sbin/cron".to_string()]);
        assert!(session_apps(&apps, 0).is_empty());
    }

    #[test]
    fn loading_runs_one_phase_ahead() {
        use BootPhase::*;
        assert_eq!(phases_released(Early, Graphical), vec![Early, Sysinit]);
        assert_eq!(phases_released(Basic, Graphical), vec![Early, Sysinit, Basic, MultiUser]);
        assert_eq!(phases_released(MultiUser, Graphical).last(), Some(&Graphical), "a desktop logs in after graphical");
        assert_eq!(phases_released(Graphical, Graphical).last(), Some(&Session));
        assert_eq!(phases_released(Session, Graphical).len(), BootPhase::ALL.len());
        // A boot whose default target is multi-user: its session comes after that target.
        assert_eq!(phase_ahead(Basic, MultiUser), MultiUser);
        assert_eq!(phase_ahead(MultiUser, MultiUser), Session);
        assert_eq!(phases_released(MultiUser, MultiUser).len(), BootPhase::ALL.len());
    }

    #[test]
    fn the_history_round_trips_through_json() {
        let mut h = BootHistory::default();
        h.record(boot(&[("/a", 1, &[(0, 4, 0)])], PHASES), &BootSettings::default());
        let text = serde_json::to_string(&h).unwrap();
        assert_eq!(serde_json::from_str::<BootHistory>(&text).unwrap(), h);
    }

    fn arb_boot() -> impl Strategy<Value = BootTrace> {
        // Up to 4 files, identities from a small set so upgrades happen, ranges in a small space.
        prop::collection::vec((0u8..4, 0u64..2, prop::collection::vec((0u64..40, 1u64..8, 0u64..6_000), 1..4)), 0..5).prop_map(
            |files| {
                let mut by_path: BTreeMap<u8, (u64, crate::model::range::RangeSet, u64)> = BTreeMap::new();
                for (f, idv, ranges) in files {
                    let e = by_path.entry(f).or_insert_with(|| (idv, Default::default(), u64::MAX));
                    for (s, l, t) in ranges {
                        e.1.insert(PageRange::new(s, l));
                        e.2 = e.2.min(t);
                    }
                }
                let owned: Vec<(String, u64, RangeList)> = by_path
                    .into_iter()
                    .map(|(f, (idv, set, t))| {
                        let rs = set.ranges().iter().enumerate().map(|(i, r)| (r.start, r.len, t + i as u64 * 900)).collect();
                        (format!("/f{f}"), u64::from(f) * 10 + idv, rs)
                    })
                    .collect();
                let borrowed: Vec<File<'_>> = owned.iter().map(|(p, id, rs)| (p.as_str(), *id, rs.as_slice())).collect();
                boot(&borrowed, PHASES)
            },
        )
    }

    proptest! {
        #[test]
        fn plans_hold_only_current_pages_within_bounds(
            boots in prop::collection::vec(arb_boot(), 1..8),
            keep in 1usize..6,
            max_pages in 0u64..300,
            threshold in 0.05f64..1.0,
        ) {
            let s = BootSettings { keep_boots: keep, max_pages, replay_threshold: threshold, ..Default::default() };
            let mut h = BootHistory::default();
            for b in &boots {
                h.record(b.clone(), &s);
            }
            prop_assert!(h.traces.len() <= keep);
            let plan = h.plan(&s);
            prop_assert!(plan.page_count() <= max_pages);
            // Each file of the plan carries the identity the newest boot using it saw, and every
            // planned page was used by some kept boot under that identity.
            for phase in &plan.phases {
                prop_assert!(!phase.files.is_empty());
                for f in &phase.files {
                    let newest = h.traces.iter().rev().flat_map(|t| &t.files).find(|bf| bf.path == f.path).unwrap();
                    prop_assert_eq!(f.identity, newest.identity);
                    for u in &f.ranges {
                        prop_assert!(!u.range.is_empty());
                        for page in u.range.start..u.range.end() {
                            let used = h.traces.iter().flat_map(|t| &t.files)
                                .filter(|bf| bf.path == f.path && bf.identity == f.identity)
                                .any(|bf| bf.ranges.iter().any(|r| r.range.contains(page)));
                            prop_assert!(used);
                        }
                    }
                }
            }
            // No page is planned twice.
            let mut seen = std::collections::HashSet::new();
            for phase in &plan.phases {
                for f in &phase.files {
                    for u in &f.ranges {
                        for page in u.range.start..u.range.end() {
                            prop_assert!(seen.insert((f.path.clone(), page)));
                        }
                    }
                }
            }
            // The newest boot weighs at least 1 / (1 + 0.75 + ...) > 0.25 of the kept boots: its
            // pages are all planned when the threshold is lower and nothing bounds the plan.
            if max_pages >= 250 && threshold <= 0.25 {
                let newest = h.traces.last().unwrap();
                prop_assert!(plan.page_count() >= newest.page_count());
            }
        }

        #[test]
        fn a_boot_used_every_time_is_always_planned(times in 1usize..8) {
            let s = BootSettings::default();
            let mut h = BootHistory::default();
            for _ in 0..times {
                h.record(boot(&[("/always", 1, &[(0, 16, 0)])], PHASES), &s);
            }
            prop_assert_eq!(h.plan(&s).page_count(), 16);
        }
    }
}
