//! The free-memory tier: the memory that holds nothing at all (MemFree, and never more than
//! MemAvailable), beyond a reserve kept free for the desktop's own allocations and beyond what the
//! prediction planned, is filled with the learned applications the prediction did not plan, most
//! useful first. Reading into memory that holds nothing pushes nothing out; on a machine whose
//! memory is mostly free it costs only idle disk time, and every application it holds starts warm
//! (preload-ng's load-everything, within a reserve and never at the expense of anything cached).
//!
//! Owns the tier's rules: the reserve, when the tier acts, the order of the applications (the
//! most often launched lately, [`LaunchFrequency`], then the most recently launched) and the plan
//! (each application's replay ranges in first-use order, less what the prediction plan already
//! holds, until the room is full). Pure: the daemon passes the memory figures, the launches and
//! the footprints in; it reads nothing, fetches nothing, and never decides about pressure (the
//! daemon's fetch stops on the PSI trigger and re-checks MemFree between chunks).

use std::collections::BTreeMap;

use super::budget::{MemoryBudget, MemorySnapshot};
use super::planner::{AppFootprint, Plan, PlannedRange};
use crate::model::range::RangeSet;

const MIB: u64 = 1 << 20;

/// Applications the tier plans for at most in one round (bounds the footprints read and the fetch
/// plans held: with 500 learned applications the daemon's RSS was 28.0 MiB without the tier,
/// 30.3 MiB with 32 and 32.2 MiB with 64, over daemon_cost's 32 MiB bound).
pub const MAX_FILL_APPS: usize = 32;

/// The tier's plan is remade at most this often (and at the daemon's start); in between the same
/// plan is sent again with each round's fetch until one fetch went through it.
pub const FILL_REFRESH_MS: u64 = 300_000;

/// The tier's settings (`[predict] fill_free_memory`, `fill_reserve_*`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FillConfig {
    /// The tier is on.
    pub enabled: bool,
    /// Share of the usable memory (MemTotal less Mlocked) kept free, in `[0, 1]` ...
    pub reserve_share: f64,
    /// ... but at least this many bytes ...
    pub reserve_min_bytes: u64,
    /// ... and at most this many (a large machine need not keep a quarter of it idle).
    pub reserve_max_bytes: u64,
}

impl Default for FillConfig {
    /// On; keep a quarter of the memory free, at least 1 GiB and at most 4 GiB. With 2 GiB left
    /// (the suite's small machine) the tier fills 1 GiB, the most often launched applications
    /// first: Firefox ESR then starts warm (docs/predictors.md). Its 36.7 s against 22.8 s cold
    /// at 2011f2f with the same reserve was its launch racing the tier's 1 GiB read on a 40 MB/s
    /// disk, the suite not yet waiting for the tier to finish as it waits for preload-ng's cycle.
    fn default() -> Self {
        FillConfig { enabled: true, reserve_share: 0.25, reserve_min_bytes: 1024 * MIB, reserve_max_bytes: 4096 * MIB }
    }
}

impl FillConfig {
    /// Bytes kept free on a machine of `total` bytes: `reserve_share · total`, at most
    /// `reserve_max_bytes`, at least `reserve_min_bytes`.
    pub fn reserve_bytes(&self, total: u64) -> u64 {
        let share = if self.reserve_share.is_finite() { self.reserve_share.clamp(0.0, 1.0) } else { 1.0 };
        let by_share = (total as f64 * share).ceil() as u64;
        by_share.min(self.reserve_max_bytes).max(self.reserve_min_bytes)
    }
}

/// Why the tier holds what it holds (for `augur status` and the log).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FillReason {
    /// `[predict] fill_free_memory = false`.
    Disabled,
    /// On battery: reading ahead spends energy.
    OnBattery,
    /// `[predict] budget_bytes` is set: a fixed budget caps all prefetching, the tier's too.
    FixedBudget,
    /// No memory figures.
    NoMemoryFigures,
    /// Free memory does not exceed the reserve: the prediction alone decides.
    WithinReserve,
    /// The prediction plan already takes all the free memory beyond the reserve.
    TakenByPrediction,
    /// The tier fills the room.
    Filling,
}

impl FillReason {
    /// A short sentence.
    pub fn describe(&self) -> &'static str {
        match self {
            FillReason::Disabled => "off ([predict] fill_free_memory = false)",
            FillReason::OnBattery => "off on battery (reading ahead spends energy)",
            FillReason::FixedBudget => "off: [predict] budget_bytes caps all prefetching",
            FillReason::NoMemoryFigures => "off: /proc/meminfo unreadable",
            FillReason::WithinReserve => "idle: free memory is within the reserve",
            FillReason::TakenByPrediction => "idle: the prediction plan takes the free memory beyond the reserve",
            FillReason::Filling => "filling free memory beyond the reserve with learned applications",
        }
    }
}

/// How much free memory the tier may fill this round, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FillRoom {
    /// MemFree the round saw.
    pub free_bytes: u64,
    /// Bytes kept free.
    pub reserve_bytes: u64,
    /// Bytes the tier may plan (0 when it does not act).
    pub room_bytes: u64,
    /// Why.
    pub reason: FillReason,
}

impl FillRoom {
    /// The tier does nothing, for `reason`.
    pub fn none(reason: FillReason) -> Self {
        FillRoom { free_bytes: 0, reserve_bytes: 0, room_bytes: 0, reason }
    }

    /// The room of a round: free memory (MemFree, at most MemAvailable) beyond the reserve (kept
    /// of the usable memory, MemTotal less what is locked) and beyond what the prediction plan
    /// holds (`planned_bytes`). Memory locked in place never holds the cache, so a machine whose
    /// memory is mostly locked keeps the reserve of a machine of what is left. The prediction's
    /// budget does not limit the tier: reading into memory that holds nothing pushes nothing out.
    pub fn of(mem: &MemorySnapshot, planned_bytes: u64, config: &FillConfig) -> Self {
        if !config.enabled {
            return FillRoom::none(FillReason::Disabled);
        }
        let reserve = config.reserve_bytes(mem.total.saturating_sub(mem.locked));
        let free = mem.free.min(mem.available);
        let beyond = free.saturating_sub(reserve);
        let (room, reason) = if beyond == 0 {
            (0, FillReason::WithinReserve)
        } else if beyond <= planned_bytes {
            (0, FillReason::TakenByPrediction)
        } else {
            (beyond - planned_bytes, FillReason::Filling)
        };
        FillRoom { free_bytes: free, reserve_bytes: reserve, room_bytes: room, reason }
    }
}

/// Half-life of a launch in [`LaunchFrequency`]: a week, so that the applications of this week's
/// habits lead and one launched often long ago fades out.
pub const FREQUENCY_HALF_LIFE_MS: u64 = 7 * 86_400_000;

/// Applications a [`LaunchFrequency`] counts at most: past it, the least launched lately are
/// dropped down to three quarters of it (a daemon that runs for months sees every temporary
/// program a build or a test suite starts; each one launched is one entry).
pub const MAX_COUNTED_APPS: usize = 4_096;

/// How often each application was launched, fading: each launch counts 1, halved every
/// [`FREQUENCY_HALF_LIFE_MS`] since. The tier's notion of likeliest: its pages stay for hours,
/// over which the applications launched most (lately) are the likeliest to start; the
/// predictor's next-launch probability follows the program launched last (a shell helper's
/// launch moves it), and what it is confident of the prediction plan loads already.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LaunchFrequency {
    /// Per application: its faded count as of the time beside it (ms).
    counts: BTreeMap<String, (f64, u64)>,
}

impl LaunchFrequency {
    fn fade(count: f64, from_ms: u64, to_ms: u64) -> f64 {
        count * (-(to_ms.saturating_sub(from_ms) as f64) / FREQUENCY_HALF_LIFE_MS as f64).exp2()
    }

    /// Counts a launch of `app` at `at_ms` (in any order: an earlier launch counts faded).
    pub fn launched(&mut self, app: &str, at_ms: u64) {
        // Called at every exec: the name is copied only for an application not yet counted.
        if !self.counts.contains_key(app) {
            self.counts.insert(app.to_string(), (0.0, at_ms));
        }
        let Some((count, as_of)) = self.counts.get_mut(app) else { return };
        if at_ms >= *as_of {
            *count = Self::fade(*count, *as_of, at_ms) + 1.0;
            *as_of = at_ms;
        } else {
            *count += Self::fade(1.0, at_ms, *as_of);
        }
        if self.counts.len() > MAX_COUNTED_APPS {
            self.drop_least_launched(at_ms);
        }
    }

    /// Drops the least launched lately (as of `now_ms`) down to three quarters of
    /// [`MAX_COUNTED_APPS`], so that the sort is paid once per thousand new applications.
    fn drop_least_launched(&mut self, now_ms: u64) {
        let mut by_count: Vec<(f64, String)> =
            self.counts.iter().map(|(app, &(count, as_of))| (Self::fade(count, as_of, now_ms), app.clone())).collect();
        by_count.sort_by(|a, b| a.0.total_cmp(&b.0));
        let excess = self.counts.len().saturating_sub(MAX_COUNTED_APPS * 3 / 4);
        for (_, app) in by_count.into_iter().take(excess) {
            self.counts.remove(&app);
        }
    }

    /// `app`'s faded launch count at `now_ms` (0 when never launched).
    pub fn of(&self, app: &str, now_ms: u64) -> f64 {
        self.counts.get(app).map_or(0.0, |&(count, as_of)| Self::fade(count, as_of, now_ms))
    }

    /// Applications counted.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Whether no launch was counted.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
}

/// A learned application the tier may load.
#[derive(Clone, Debug, PartialEq)]
pub struct FillCandidate {
    /// The application.
    pub app: String,
    /// Its faded launch count ([`LaunchFrequency::of`]; 0 when unknown).
    pub frequency: f64,
    /// Its last launch, Unix ms.
    pub last_launch_ms: u64,
}

/// The tier's order: the most often launched lately first ([`LaunchFrequency`]), then the most
/// recently launched, then by name; at most `max`.
pub fn fill_order(mut candidates: Vec<FillCandidate>, max: usize) -> Vec<FillCandidate> {
    let f = |c: &FillCandidate| if c.frequency.is_finite() { c.frequency.max(0.0) } else { 0.0 };
    candidates
        .sort_by(|a, b| f(b).total_cmp(&f(a)).then(b.last_launch_ms.cmp(&a.last_launch_ms)).then_with(|| a.app.cmp(&b.app)));
    candidates.truncate(max);
    candidates
}

/// The tier's plan made one application at a time (so the caller holds one footprint at a
/// time): each footprint given, in the tier's order, has its ranges taken in first-use order, less
/// the pages the prediction plan holds and the pages taken for an earlier application, until the
/// room is full (the last range cut to the page). Every page counts against the room, resident or
/// not (the daemon does not know which are), so it never plans more than the room.
#[derive(Clone, Debug)]
pub struct FillPlanner {
    held: BTreeMap<String, RangeSet>,
    pages_left: u64,
    page_size: u64,
    room_bytes: u64,
    bytes: u64,
}

impl FillPlanner {
    /// A planner for `room_bytes` in pages of `page_size`, beside the `prediction` plan.
    pub fn new(prediction: &Plan, room_bytes: u64, page_size: u64) -> Self {
        let page = page_size.max(1);
        let mut held: BTreeMap<String, RangeSet> = BTreeMap::new();
        for r in &prediction.ranges {
            held.entry(r.file.clone()).or_default().insert(r.range);
        }
        FillPlanner { held, pages_left: room_bytes / page, page_size: page, room_bytes, bytes: 0 }
    }

    /// Whether the room is full.
    pub fn full(&self) -> bool {
        self.pages_left == 0
    }

    /// Bytes planned so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Takes what fits of the next application's footprint: its plan (ranges in first-use order).
    pub fn take(&mut self, fp: &AppFootprint) -> Plan {
        let mut ranges = Vec::new();
        let mut work = super::planner::PlannerWork::default();
        for r in fp.ranges() {
            work.ranges_read += 1;
            if self.pages_left == 0 {
                break;
            }
            let done = match self.held.get_mut(&*r.file) {
                Some(d) => d,
                None => self.held.entry(r.file.to_string()).or_default(),
            };
            for gap in done.missing_from(r.range) {
                if self.pages_left == 0 {
                    break;
                }
                let piece = crate::model::range::PageRange::new(gap.start, gap.len.min(self.pages_left));
                done.insert(piece);
                self.pages_left -= piece.len;
                ranges.push(PlannedRange {
                    file: r.file.to_string(),
                    range: piece,
                    app: fp.app().to_string(),
                    probability: 0.0,
                    benefit_per_byte: 0.0,
                });
            }
        }
        let bytes = ranges.iter().map(|r: &PlannedRange| r.range.len * self.page_size).sum();
        self.bytes += bytes;
        work.candidates_scored = ranges.len();
        Plan { ranges, budget: MemoryBudget::of(self.room_bytes), bytes, page_size: self.page_size, work }
    }
}

/// The tier's whole plan over `footprints` in the given order ([`FillPlanner`] over each).
pub fn plan_fill(footprints: &[AppFootprint], prediction: &Plan, room_bytes: u64, page_size: u64) -> Plan {
    let mut planner = FillPlanner::new(prediction, room_bytes, page_size);
    let mut plan = Plan { budget: MemoryBudget::of(room_bytes), page_size: page_size.max(1), ..Plan::default() };
    for fp in footprints {
        if planner.full() {
            break;
        }
        let part = planner.take(fp);
        plan.work.ranges_read += part.work.ranges_read;
        plan.ranges.extend(part.ranges);
    }
    plan.bytes = planner.bytes();
    plan.work.candidates_scored = plan.ranges.len();
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::range::PageRange;
    use crate::plan::RangeUse;
    use proptest::prelude::*;

    const GIB: u64 = 1 << 30;

    fn mem(total: u64, free: u64) -> MemorySnapshot {
        MemorySnapshot { total, free, available: free, cached: 0, locked: 0 }
    }

    fn fp(app: &str, ranges: &[(&str, u64, u64)]) -> AppFootprint {
        AppFootprint::new(
            app,
            ranges
                .iter()
                .map(|&(f, s, l)| RangeUse { file: f.into(), range: PageRange::new(s, l), use_share: 1.0, resident_pages: 0 })
                .collect(),
        )
    }

    #[test]
    fn the_reserve_is_a_quarter_of_memory_within_its_bounds() {
        let c = FillConfig::default();
        assert_eq!(c.reserve_bytes(24 * GIB), 4 * GIB, "a large machine keeps 4 GiB free, not 6");
        assert_eq!(c.reserve_bytes(8 * GIB), 2 * GIB);
        assert_eq!(c.reserve_bytes(2 * GIB), GIB, "a small one keeps at least 1 GiB");
    }

    #[test]
    fn free_memory_beyond_the_reserve_and_the_prediction_is_filled() {
        let c = FillConfig::default();
        // As is: 24 GiB, 22 free; the prediction planned 1 GiB.
        let room = FillRoom::of(&mem(24 * GIB, 22 * GIB), GIB, &c);
        assert_eq!(room.reason, FillReason::Filling);
        assert_eq!(room.room_bytes, 22 * GIB - 4 * GIB - GIB);
        // A 4 GiB machine with 3.5 GiB free: the reserve is 1 GiB, 2.5 GiB is filled.
        let small = FillRoom::of(&mem(4 * GIB, 7 * GIB / 2), 0, &c);
        assert_eq!((small.room_bytes, small.reason), (5 * GIB / 2, FillReason::Filling));
        // The suite's small slow machine: 24 GiB of which a balloon locked 21; 3 GiB free but
        // 2 GiB available. The reserve is that of a 3 GiB machine (1 GiB): 1 GiB is filled.
        let ballooned = MemorySnapshot { total: 24 * GIB, free: 3 * GIB, available: 2 * GIB, cached: 0, locked: 21 * GIB };
        let b = FillRoom::of(&ballooned, 0, &c);
        assert_eq!((b.reserve_bytes, b.room_bytes, b.reason), (GIB, GIB, FillReason::Filling));
        // With 1.5 GiB available there, half a GiB is.
        let tighter = FillRoom::of(&MemorySnapshot { available: 3 * GIB / 2, ..ballooned }, 0, &c);
        assert_eq!((tighter.reserve_bytes, tighter.room_bytes), (GIB, GIB / 2));
        // The usage day's machine: 512 MiB left. Nothing.
        let short = MemorySnapshot { available: GIB / 2, free: GIB / 2, ..ballooned };
        let s = FillRoom::of(&short, 0, &c);
        assert_eq!((s.room_bytes, s.reason), (0, FillReason::WithinReserve));
        // The prediction plan takes it all.
        let taken = FillRoom::of(&mem(24 * GIB, 22 * GIB), 18 * GIB, &c);
        assert_eq!((taken.room_bytes, taken.reason), (0, FillReason::TakenByPrediction));
        let off = FillRoom::of(&mem(24 * GIB, 22 * GIB), 0, &FillConfig { enabled: false, ..c });
        assert_eq!((off.room_bytes, off.reason), (0, FillReason::Disabled));
    }

    #[test]
    fn most_often_launched_first_then_most_recent() {
        let c = |app: &str, frequency, last_launch_ms| FillCandidate { app: app.into(), frequency, last_launch_ms };
        let order = fill_order(vec![c("old", 0.0, 1), c("new", 0.0, 9), c("often", 3.0, 0), c("nan", f64::NAN, 5)], 3);
        let names: Vec<&str> = order.iter().map(|c| c.app.as_str()).collect();
        assert_eq!(names, vec!["often", "new", "nan"]);
    }

    #[test]
    fn launch_frequency_fades_by_half_a_week() {
        let week = FREQUENCY_HALF_LIFE_MS;
        let mut f = LaunchFrequency::default();
        assert!(f.is_empty());
        f.launched("/a", 0);
        f.launched("/a", 0);
        f.launched("/b", week);
        assert_eq!(f.of("/a", 0), 2.0);
        assert_eq!(f.of("/a", week), 1.0, "two launches a week ago count as one now");
        assert_eq!(f.of("/b", week), 1.0);
        assert_eq!(f.of("/none", week), 0.0);
        // A launch given out of order counts faded to the latest time.
        f.launched("/b", 0);
        assert_eq!(f.of("/b", week), 1.5);
        assert_eq!(f.len(), 2);
    }

    #[test]
    fn launch_frequency_keeps_the_most_launched_within_its_bound() {
        let mut f = LaunchFrequency::default();
        for _ in 0..5 {
            f.launched("/usr/bin/often", 0);
        }
        for i in 0..=MAX_COUNTED_APPS as u64 {
            f.launched(&format!("/tmp/build/{i}"), i);
        }
        assert!(f.len() <= MAX_COUNTED_APPS, "{} counted", f.len());
        assert_eq!(f.of("/usr/bin/often", 0), 5.0, "the most launched stays");
        assert!(f.of(&format!("/tmp/build/{MAX_COUNTED_APPS}"), MAX_COUNTED_APPS as u64) > 0.0, "the latest stays");
    }

    proptest! {
        /// The faded count at the latest launch is at least that launch and at most every launch
        /// counted.
        #[test]
        fn launch_frequency_is_bounded_by_the_launches(times in proptest::collection::vec(0u64..60 * 86_400_000, 1..40)) {
            let mut f = LaunchFrequency::default();
            for &t in &times {
                f.launched("/a", t);
            }
            let now = *times.iter().max().unwrap();
            let v = f.of("/a", now);
            prop_assert!(v >= 1.0 - 1e-9 && v <= times.len() as f64 + 1e-9);
        }
    }

    #[test]
    fn the_fill_skips_what_prediction_holds_and_stops_at_the_room() {
        let prediction = Plan {
            ranges: vec![PlannedRange {
                file: "/lib/shared".into(),
                range: PageRange::new(0, 10),
                app: "p".into(),
                probability: 0.9,
                benefit_per_byte: 1.0,
            }],
            page_size: 4096,
            ..Plan::default()
        };
        let a = fp("a", &[("/a", 0, 4), ("/lib/shared", 5, 10)]);
        let b = fp("b", &[("/lib/shared", 12, 2), ("/b", 0, 100)]);
        let plan = plan_fill(&[a, b], &prediction, 12 * 4096, 4096);
        let got: Vec<(&str, &str, u64, u64)> =
            plan.ranges.iter().map(|r| (r.app.as_str(), r.file.as_str(), r.range.start, r.range.len)).collect();
        // a: /a whole, /lib/shared 10..15 (0..10 is the prediction's); b: its shared pages were
        // taken for a, then /b cut to what is left (12 − 4 − 5 = 3).
        assert_eq!(got, vec![("a", "/a", 0, 4), ("a", "/lib/shared", 10, 5), ("b", "/b", 0, 3)]);
        assert_eq!(plan.bytes, 12 * 4096);
    }

    proptest! {
        #[test]
        fn the_fill_never_exceeds_its_room_nor_plans_a_page_twice(
            room in 0u64..400,
            apps in proptest::collection::vec(proptest::collection::vec((0u8..3, 0u64..50, 1u64..40), 1..6), 1..5),
        ) {
            let fps: Vec<AppFootprint> = apps.iter().enumerate().map(|(i, rs)| AppFootprint::new(
                format!("app{i}"),
                rs.iter().map(|&(f, s, l)| RangeUse {
                    file: format!("/f{f}").into(), range: PageRange::new(s, l), use_share: 1.0, resident_pages: 0,
                }).collect(),
            )).collect();
            let plan = plan_fill(&fps, &Plan::default(), room * 4096, 4096);
            prop_assert!(plan.bytes <= room * 4096);
            let mut seen: BTreeMap<&str, RangeSet> = BTreeMap::new();
            for r in &plan.ranges {
                let s = seen.entry(r.file.as_str()).or_default();
                prop_assert_eq!(s.overlap_count(r.range), 0);
                s.insert(r.range);
            }
        }
    }
}
