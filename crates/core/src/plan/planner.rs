//! The planner: from launch probabilities, learned footprints, a memory budget and what the
//! memory to be filled holds, which page ranges to keep resident and in what order to fetch them;
//! and, against what is already resident, which pages are still missing.
//!
//! Selection is by expected benefit per byte — the probability that some application needing the
//! range starts, times the disk cost of reading it (its bytes plus a per-range seek cost) per
//! byte held — taking the best ranges until the budget is full (the last one cut to fit, to the
//! page), and only while the benefit beats the cost: the read itself (`read_cost` per byte) and,
//! beyond the free memory, what the read pushes out (the largest of `evict_cost`, the measured
//! refault share and the predictor's belief in an application at large, per byte); resident
//! ranges are kept only when they beat that belief. A prefetch that cannot win is not made: with
//! costs of zero the planner fills the budget as preload does. The selected ranges are fetched likeliest
//! application first, in first-use order within an application. Pure: no system calls;
//! `docs/predictors.md` ("Planner", "Cost model") states the rules.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::sync::{Arc, OnceLock};

use foldhash::{HashMap, HashMapExt};

use super::budget::MemoryBudget;
use super::cost::MemoryHeadroom;
use crate::model::predict::AppProbability;
use crate::model::range::{PageRange, RangeSet};

/// One range an application's launch uses, with how often it used it.
#[derive(Clone, Debug, PartialEq)]
pub struct RangeUse {
    /// The file (its path, or any key naming it consistently across applications), shared by
    /// the ranges of one file: a round copies tens of thousands of ranges.
    pub file: Arc<str>,
    /// The pages.
    pub range: PageRange,
    /// Share of the application's recent launches that used the range, in `[0, 1]`.
    pub use_share: f64,
    /// Pages of the range known to be resident now (0 when unknown: all counted as missing).
    /// Keeping resident pages costs no read; only missing pages pay the cost model.
    pub resident_pages: u64,
}

/// What an application's launch needs, in first-use order. Fixed once made: the planner keeps
/// an index of its files with it, made at its first round (the daemon plans with the same
/// footprints round after round).
#[derive(Clone, Debug)]
pub struct AppFootprint {
    app: String,
    ranges: Vec<RangeUse>,
    files: OnceLock<FootprintFiles>,
}

impl PartialEq for AppFootprint {
    fn eq(&self, other: &Self) -> bool {
        self.app == other.app && self.ranges == other.ranges
    }
}

impl AppFootprint {
    /// Application `app`'s footprint: `ranges`, first used first.
    pub fn new(app: impl Into<String>, ranges: Vec<RangeUse>) -> Self {
        AppFootprint { app: app.into(), ranges, files: OnceLock::new() }
    }

    /// The application.
    pub fn app(&self) -> &str {
        &self.app
    }

    /// Its ranges, first used first.
    pub fn ranges(&self) -> &[RangeUse] {
        &self.ranges
    }

    /// The index of its files, made on first use.
    fn files(&self) -> &FootprintFiles {
        self.files.get_or_init(|| FootprintFiles::of(&self.ranges))
    }
}

/// The files one footprint names, made once per footprint: what a round would otherwise hash
/// again for every footprint in every round.
#[derive(Clone, Debug)]
struct FootprintFiles {
    /// Each file once, with a hash of its name.
    names: Vec<(u64, Arc<str>)>,
    /// Per range: its file's index in `names`.
    of_range: Vec<u32>,
    /// Per file: a range of it may be named twice (its ranges do not come each after the one
    /// before it).
    repeats: Vec<bool>,
    /// Per file: some range of it has pages resident.
    resident: Vec<bool>,
    /// Some range has pages resident.
    any_resident: bool,
    /// The largest use share of a range that is not empty (0 when there is none).
    max_share: f64,
}

/// A range's use share as the planner counts it: in `[0, 1]`, 0 when not a number.
fn share_of(r: &RangeUse) -> f64 {
    if r.use_share.is_finite() { r.use_share.clamp(0.0, 1.0) } else { 0.0 }
}

impl FootprintFiles {
    fn of(ranges: &[RangeUse]) -> Self {
        let hasher = foldhash::fast::FixedState::with_seed(0);
        let mut by_name: HashMap<&str, u32> = HashMap::new();
        let mut files = FootprintFiles {
            names: Vec::new(),
            of_range: Vec::with_capacity(ranges.len()),
            repeats: Vec::new(),
            resident: Vec::new(),
            any_resident: false,
            max_share: 0.0,
        };
        // Per file: where its last range ended.
        let mut ends: Vec<u64> = Vec::new();
        let mut last: Option<(&str, u32)> = None;
        for r in ranges {
            let id = match last {
                Some((name, id)) if std::ptr::eq(name, &*r.file) || name == &*r.file => id,
                _ => {
                    let next = files.names.len() as u32;
                    let id = *by_name.entry(&*r.file).or_insert(next);
                    if id == next {
                        files.names.push((hasher.hash_one(&*r.file), Arc::clone(&r.file)));
                        files.repeats.push(false);
                        files.resident.push(false);
                        ends.push(0);
                    }
                    last = Some((&*r.file, id));
                    id
                }
            };
            if !r.range.is_empty() {
                let end = &mut ends[id as usize];
                if r.range.start < *end {
                    files.repeats[id as usize] = true;
                }
                *end = (*end).max(r.range.end());
                files.max_share = files.max_share.max(share_of(r));
            }
            if r.resident_pages > 0 {
                files.resident[id as usize] = true;
                files.any_resident = true;
            }
            files.of_range.push(id);
        }
        files
    }
}

/// Planner settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlannerConfig {
    /// Bytes per page.
    pub page_size: u64,
    /// The cost of one extra read request, expressed in bytes of transfer (default 128 KiB).
    pub seek_cost_bytes: u64,
    /// Ranges whose probability of being needed is at most this are never planned (default 0).
    pub min_probability: f64,
    /// Cost of reading one byte ahead of time, in bytes of launch-time reading saved (default 0:
    /// reading is free). A range is planned only when its benefit per byte exceeds it.
    pub read_cost: f64,
    /// Least chance counted that a byte pushed out of memory is needed again (default 0). Beyond
    /// the free memory, a byte also costs `max(evict_cost, refault share)`.
    pub evict_cost: f64,
    /// The chance, as the predictor believes it, that an application not running is launched
    /// soon — the value of the pages a prefetch pushes out when nothing better is known (the
    /// round passes the mean believed probability of the applications not running; default 0).
    pub displaced_probability: f64,
}

impl Default for PlannerConfig {
    /// The plain budget planner: no read or eviction cost, so every range with a probability
    /// above zero competes for the budget (preload's behaviour).
    fn default() -> Self {
        PlannerConfig {
            page_size: 4096,
            seek_cost_bytes: 128 * 1024,
            min_probability: 0.0,
            read_cost: 0.0,
            evict_cost: 0.0,
            displaced_probability: 0.0,
        }
    }
}

/// Counts of the planner's work, to bound its cost (each is linear in its input).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlannerWork {
    /// Footprint ranges read (every range of every footprint, once).
    pub ranges_read: usize,
    /// Distinct (file, range) candidates scored.
    pub candidates_scored: usize,
}

/// A range chosen to be resident.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedRange {
    /// The file.
    pub file: String,
    /// The pages (possibly the first part of a learned range, cut to fit the budget).
    pub range: PageRange,
    /// The likeliest application needing it (it is fetched in that application's turn).
    pub app: String,
    /// Probability that some application needing it starts within the horizon.
    pub probability: f64,
    /// Expected disk cost saved per byte held (the selection key).
    pub benefit_per_byte: f64,
}

/// What to keep resident, in fetch order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// Ranges in fetch order.
    pub ranges: Vec<PlannedRange>,
    /// The budget planned for.
    pub budget: MemoryBudget,
    /// Bytes the plan holds (never more than the budget).
    pub bytes: u64,
    /// Bytes per page.
    pub page_size: u64,
    /// What it cost to make.
    pub work: PlannerWork,
}

/// Pages resident now, per file.
pub type ResidentPages = BTreeMap<String, RangeSet>;

impl Plan {
    /// The planned pages not yet resident, in fetch order, each page at most once.
    pub fn missing(&self, resident: &ResidentPages) -> Vec<(String, PageRange)> {
        let mut seen: BTreeMap<&str, RangeSet> = BTreeMap::new();
        let mut out = Vec::new();
        for r in &self.ranges {
            let have = resident.get(&r.file);
            let done = seen.entry(&*r.file).or_default();
            let gaps = match have {
                Some(set) => set.missing_from(r.range),
                None => vec![r.range],
            };
            for g in gaps {
                for piece in done.missing_from(g) {
                    out.push((r.file.clone(), piece));
                }
                done.insert(g);
            }
        }
        out
    }

    /// Bytes of [`Plan::missing`].
    pub fn missing_bytes(&self, resident: &ResidentPages) -> u64 {
        self.missing(resident).iter().map(|(_, r)| r.len * self.page_size).sum()
    }
}

struct Candidate<'a> {
    file: &'a str,
    /// The file's index in the round's [`FileTable`].
    file_id: u32,
    range: PageRange,
    /// Π (1 − P(app) · use share) over the footprints before [`Candidate::footprint`].
    p_not_before: f64,
    /// The largest P(app) · use share of the range in footprint [`Candidate::footprint`]: an
    /// application naming a range twice needs it once.
    here: f64,
    /// The last footprint (by index) that named the range.
    footprint: usize,
    owner: &'a str,
    /// The owner's rank among the footprints' applications by name.
    owner_rank: u32,
    owner_p: f64,
    first_use: usize,
    resident: u64,
}

/// The files a round's footprints name: an index for each, per footprint file, and whether
/// more than one footprint names it.
struct FileTable<'a> {
    /// Per footprint, per file of its [`FootprintFiles`]: the file's index.
    ids: Vec<Vec<u32>>,
    /// Per file index: its name.
    names: Vec<&'a str>,
    /// Per file index: named by more than one footprint (its ranges' probabilities combine).
    across: Vec<bool>,
    /// Per footprint: one of its files is named by another footprint too.
    touches_others: Vec<bool>,
}

impl<'a> FileTable<'a> {
    fn of<F: Borrow<AppFootprint>>(footprints: &'a [F]) -> Self {
        // By the hash each footprint keeps of each name (names are hashed once per footprint,
        // not once per round); a collision only costs a comparison. Names whose hash an earlier
        // name has are kept in a list beside.
        let mut by_hash: HashMap<u64, u32> =
            HashMap::with_capacity(footprints.iter().map(|f| f.borrow().files().names.len()).sum());
        let mut collided: Vec<(u64, u32)> = Vec::new();
        let mut table = FileTable {
            ids: Vec::with_capacity(footprints.len()),
            names: Vec::new(),
            across: Vec::new(),
            touches_others: Vec::new(),
        };
        for fp in footprints {
            let files = fp.borrow().files();
            let mut ids = Vec::with_capacity(files.names.len());
            for (hash, name) in &files.names {
                let found = match by_hash.get(hash) {
                    Some(&id) if table.names[id as usize] == &**name => Some(id),
                    Some(_) => {
                        collided.iter().find(|&&(h, id)| h == *hash && table.names[id as usize] == &**name).map(|&(_, id)| id)
                    }
                    None => None,
                };
                let id = match found {
                    // Names are distinct within a footprint: another one named it before.
                    Some(id) => {
                        table.across[id as usize] = true;
                        id
                    }
                    None => {
                        let id = table.names.len() as u32;
                        if by_hash.contains_key(hash) {
                            collided.push((*hash, id));
                        } else {
                            by_hash.insert(*hash, id);
                        }
                        table.names.push(name);
                        table.across.push(false);
                        id
                    }
                };
                ids.push(id);
            }
            table.ids.push(ids);
        }
        table.touches_others = table.ids.iter().map(|ids| ids.iter().any(|&id| table.across[id as usize])).collect();
        table
    }

    /// Per file index, a rank that orders the files `used` names as their names do (others 0).
    fn ranks_of(&self, used: impl Iterator<Item = u32>) -> Vec<u32> {
        let mut ids: Vec<u32> = used.collect();
        ids.sort_unstable();
        ids.dedup();
        ids.sort_by(|&a, &b| self.names[a as usize].cmp(self.names[b as usize]));
        let mut rank = vec![0u32; self.names.len()];
        for (r, id) in ids.into_iter().enumerate() {
            rank[id as usize] = r as u32;
        }
        rank
    }
}

/// Takes `s` into `chosen`, cut to `pages_fit` pages, counting its bytes against the budget left
/// and its missing bytes against the free memory left.
fn take<'a>(
    s: Scored<'a>,
    pages_fit: u64,
    page: u64,
    left: &mut u64,
    free_left: &mut u64,
    chosen: &mut Vec<(f64, f64, Candidate<'a>)>,
) {
    let mut c = s.c;
    if c.range.len > pages_fit {
        c.range = PageRange::new(c.range.start, pages_fit);
    }
    let bytes = c.range.len * page;
    *left -= bytes;
    *free_left = free_left.saturating_sub((bytes as f64 * s.missing).ceil() as u64);
    chosen.push((s.benefit, s.p, c));
}

/// A candidate with its value per byte.
struct Scored<'a> {
    benefit: f64,
    net_pushed: f64,
    net_read: f64,
    /// Share of its pages not resident.
    missing: f64,
    p: f64,
    c: Candidate<'a>,
}

/// Chooses what to keep resident, with all memory counted as free ([`MemoryHeadroom::UNMEASURED`]).
pub fn plan<F: Borrow<AppFootprint>>(
    probabilities: &[AppProbability],
    footprints: &[F],
    budget: MemoryBudget,
    config: &PlannerConfig,
) -> Plan {
    plan_within(probabilities, footprints, budget, &MemoryHeadroom::UNMEASURED, config)
}

/// A non-negative finite cost (NaN and negatives count as 0).
fn cost(c: f64) -> f64 {
    if c.is_finite() { c.max(0.0) } else { 0.0 }
}

/// Chooses what to keep resident, given what the memory to be filled holds. With `p` the
/// probability a range is needed, `m` its missing share and `per_byte = (bytes + seek) / bytes`,
/// its net value per byte is `(p − (1 − m)·d − m·(read_cost + max(evict_cost, refault share,
/// d)))·per_byte`, `d` being `displaced_probability`: its resident share must beat what an
/// application at large is worth (keeping it holds memory the cache would give to what was used
/// last), its missing share must also pay for its read and for what the read pushes out. Ranges
/// are taken best net value first while that is positive, until the budget is full (the last
/// cut to fit); then those whose missing share pays for its read alone
/// (`(p − (1 − m)·d − m·read_cost) > 0`) fill what is left of the free memory, cut at its end.
pub fn plan_within<F: Borrow<AppFootprint>>(
    probabilities: &[AppProbability],
    footprints: &[F],
    budget: MemoryBudget,
    headroom: &MemoryHeadroom,
    config: &PlannerConfig,
) -> Plan {
    let page = config.page_size.max(1);
    let mut work = PlannerWork::default();
    let p_of: BTreeMap<&str, f64> = probabilities
        .iter()
        .map(|a| (a.app.as_str(), if a.probability.is_finite() { a.probability.clamp(0.0, 1.0) } else { 0.0 }))
        .collect();
    // Applications and files are ranked by name once, so that ties are broken as by their names
    // without comparing strings in the sorts (a round reads tens of thousands of ranges).
    let mut app_names: Vec<&str> = footprints.iter().map(|f| f.borrow().app.as_str()).collect();
    app_names.sort_unstable();
    app_names.dedup();
    let files = FileTable::of(footprints);
    // One candidate per distinct (file, range); applications sharing it combine as preload's
    // maps do: P(needed) = 1 − Π (1 − P(app) · use share), an application naming a range twice
    // counting once, with its larger share. Only ranges of files named by more than one
    // footprint, or more than once by one, can be named twice: the others become candidates
    // without a lookup.
    let mut alone: Vec<Candidate<'_>> = Vec::new();
    // (Its order does not matter: candidates are sorted by value, ties by owner and place.)
    let mut merged: HashMap<(u32, u64, u64), Candidate<'_>> = HashMap::new();
    // A range only its own application names, with nothing of its file resident, is worth taking
    // only when its probability beats its read (the scoring below says the same of it): the rest
    // are counted and left out here, so a round over many unlikely applications builds almost
    // nothing.
    let read_cost = cost(config.read_cost);
    let floor = read_cost.max(config.min_probability).max(0.0);
    let mut passed_over = 0usize;
    for (k, (fp, file_ids)) in footprints.iter().zip(&files.ids).enumerate() {
        let fp: &AppFootprint = fp.borrow();
        let own = fp.files();
        let p_app = p_of.get(fp.app.as_str()).copied().unwrap_or(0.0);
        // A range needed with this share is worth taking alone only when its probability beats
        // its read (the same test as the scoring's: 1 − (1 − p)).
        let cannot_pay = |share: f64| (1.0 - (1.0 - p_app * share)).clamp(0.0, 1.0) <= floor;
        // A footprint no other names a file of, with nothing resident, whose likeliest range is
        // not worth its read: every range of it would be passed over below.
        if !files.touches_others[k] && !own.any_resident && cannot_pay(own.max_share) {
            work.ranges_read += fp.ranges.len();
            passed_over += fp.ranges.iter().filter(|r| !r.range.is_empty()).count();
            continue;
        }
        let owner_rank = app_names.binary_search(&fp.app.as_str()).unwrap_or(0) as u32;
        for (i, (r, &local)) in fp.ranges.iter().zip(&own.of_range).enumerate() {
            work.ranges_read += 1;
            if r.range.is_empty() {
                continue;
            }
            let share = share_of(r);
            let (local, file) = (local as usize, file_ids[local as usize]);
            let across = files.across[file as usize];
            // (Of a file named twice here, every copy of a range must be passed over or none.)
            let nothing_resident = if own.repeats[local] { !own.resident[local] } else { r.resident_pages == 0 };
            if !across && nothing_resident && cannot_pay(share) {
                passed_over += 1;
                continue;
            }
            let fresh = Candidate {
                file: &r.file,
                file_id: file,
                range: r.range,
                p_not_before: 1.0,
                here: 0.0,
                footprint: k,
                owner: &fp.app,
                owner_rank,
                owner_p: -1.0,
                first_use: i,
                resident: 0,
            };
            let c = if across || own.repeats[local] {
                merged.entry((file, r.range.start, r.range.len)).or_insert(fresh)
            } else {
                alone.push(fresh);
                alone.last_mut().expect("just pushed")
            };
            c.resident = c.resident.max(r.resident_pages.min(r.range.len));
            if c.footprint != k {
                c.p_not_before *= 1.0 - c.here;
                c.here = 0.0;
                c.footprint = k;
            }
            c.here = c.here.max(p_app * share);
            if p_app > c.owner_p || (p_app == c.owner_p && owner_rank < c.owner_rank) {
                c.owner = &fp.app;
                c.owner_rank = owner_rank;
                c.owner_p = p_app;
                c.first_use = i;
            }
        }
    }
    // Net value per byte: the benefit, less the cost model's price of the missing share — at
    // the price of pushing something out (`net_pushed`) and of reading into free memory only
    // (`net_read`). Resident pages are kept for nothing, so a missing range displaces a resident
    // one only when it is worth more than that one after paying for its read. A range worth
    // neither is dropped before any sorting.
    let pushed_cost = read_cost + cost(config.evict_cost).max(headroom.refault_share()).max(cost(config.displaced_probability));
    work.candidates_scored = alone.len() + merged.len() + passed_over;
    let mut scored: Vec<Scored<'_>> = alone
        .into_iter()
        .chain(merged.into_values())
        .filter_map(|c| {
            let p = (1.0 - c.p_not_before * (1.0 - c.here)).clamp(0.0, 1.0);
            if p <= config.min_probability || p <= 0.0 {
                return None;
            }
            let bytes = (c.range.len * page) as f64;
            // Reading the range ahead, and reading again what it pushed out, each cost a seek
            // too: every term scales with (bytes + seek cost).
            let per_byte = (bytes + config.seek_cost_bytes as f64) / bytes;
            let benefit = p * per_byte;
            let missing = (c.range.len - c.resident) as f64 / c.range.len as f64;
            // Keeping even a resident range holds memory the cache would otherwise give to what
            // was used last: it must beat what the predictor believes of an application at large.
            let keep = cost(config.displaced_probability);
            let net_pushed = (p - keep - missing * (pushed_cost - keep)) * per_byte;
            let net_read = (p - (1.0 - missing) * keep - missing * read_cost) * per_byte;
            (net_pushed > 0.0 || net_read > 0.0).then_some(Scored { benefit, net_pushed, net_read, missing, p, c })
        })
        .collect();
    let file_rank = files.ranks_of(scored.iter().map(|s| s.c.file_id));
    let place = |c: &Candidate<'_>| (file_rank[c.file_id as usize], c.range.start, c.range.len);
    let owner_order = |a: &Candidate<'_>, b: &Candidate<'_>| {
        b.owner_p.total_cmp(&a.owner_p).then(a.owner_rank.cmp(&b.owner_rank)).then(a.first_use.cmp(&b.first_use))
    };
    let tie = |x: &Scored<'_>, y: &Scored<'_>| owner_order(&x.c, &y.c).then_with(|| place(&x.c).cmp(&place(&y.c)));
    scored.sort_by(|x, y| y.net_pushed.total_cmp(&x.net_pushed).then_with(|| tie(x, y)));
    // First pass: best net value first, while it is positive, until the budget is full (the last
    // range cut to fit). Second pass: what is worth its read but not pushing anything out, best
    // first, into the free memory left.
    let mut left = budget.bytes;
    let mut free_left = headroom.free_bytes;
    let mut chosen: Vec<(f64, f64, Candidate<'_>)> = Vec::new();
    let mut rest: Vec<Scored<'_>> = Vec::new();
    let mut scored = scored.into_iter();
    for s in scored.by_ref() {
        if s.net_pushed <= 0.0 {
            rest.push(s);
            break; // sorted: no later range is worth pushing anything out
        }
        let pages_fit = left / page;
        if pages_fit == 0 {
            break;
        }
        take(s, pages_fit, page, &mut left, &mut free_left, &mut chosen);
    }
    rest.extend(scored.filter(|s| s.net_read > 0.0));
    rest.retain(|s| s.net_read > 0.0);
    rest.sort_by(|x, y| y.net_read.total_cmp(&x.net_read).then_with(|| tie(x, y)));
    for s in rest {
        let free_pages = if s.missing > 0.0 { (free_left as f64 / (page as f64 * s.missing)).floor() as u64 } else { u64::MAX };
        let pages_fit = (left / page).min(free_pages);
        if pages_fit == 0 {
            if left < page || free_left < page {
                break;
            }
            continue;
        }
        take(s, pages_fit, page, &mut left, &mut free_left, &mut chosen);
    }
    chosen.sort_by(|x, y| owner_order(&x.2, &y.2).then_with(|| place(&x.2).cmp(&place(&y.2))));
    let ranges: Vec<PlannedRange> = chosen
        .into_iter()
        .map(|(benefit, p, c)| PlannedRange {
            file: c.file.to_string(),
            range: c.range,
            app: c.owner.to_string(),
            probability: p,
            benefit_per_byte: benefit,
        })
        .collect();
    let bytes = ranges.iter().map(|r| r.range.len * page).sum();
    Plan { ranges, budget, bytes, page_size: page, work }
}

/// Compares two plans' fetch orders by application (for tests and reports).
pub fn app_order(plan: &Plan) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in &plan.ranges {
        if out.last() != Some(&r.app) {
            out.push(r.app.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fp(app: &str, ranges: &[(&str, u64, u64)]) -> AppFootprint {
        AppFootprint::new(
            app,
            ranges
                .iter()
                .map(|&(f, s, l)| RangeUse { file: f.into(), range: PageRange::new(s, l), use_share: 1.0, resident_pages: 0 })
                .collect(),
        )
    }

    fn probs(v: &[(&str, f64)]) -> Vec<AppProbability> {
        v.iter().map(|&(a, p)| AppProbability { app: a.into(), probability: p }).collect()
    }

    const CFG: PlannerConfig = PlannerConfig {
        page_size: 4096,
        seek_cost_bytes: 0,
        min_probability: 0.0,
        read_cost: 0.0,
        evict_cost: 0.0,
        displaced_probability: 0.0,
    };

    #[test]
    fn likeliest_first_in_first_use_order() {
        let fps = [fp("a", &[("/a", 10, 5), ("/lib", 0, 5), ("/a", 0, 5)]), fp("b", &[("/b", 0, 10)])];
        let p = plan(&probs(&[("a", 0.3), ("b", 0.6)]), &fps, MemoryBudget::of(1 << 30), &CFG);
        assert_eq!(app_order(&p), vec!["b", "a"]);
        let a: Vec<_> = p.ranges.iter().filter(|r| r.app == "a").map(|r| (&*r.file, r.range.start)).collect();
        assert_eq!(a, vec![("/a", 10), ("/lib", 0), ("/a", 0)]);
        assert_eq!(p.bytes, 25 * 4096);
    }

    #[test]
    fn budget_cuts_the_least_beneficial_and_trims_to_the_page() {
        let fps = [fp("a", &[("/a", 0, 10)]), fp("b", &[("/b", 0, 10)])];
        let p = plan(&probs(&[("a", 0.3), ("b", 0.6)]), &fps, MemoryBudget::of(13 * 4096 + 100), &CFG);
        assert_eq!(p.bytes, 13 * 4096);
        assert_eq!(p.ranges[1].range, PageRange::new(0, 3));
        assert_eq!(p.ranges[1].app, "a");
    }

    #[test]
    fn shared_ranges_combine_probabilities() {
        let fps = [fp("a", &[("/lib", 0, 10)]), fp("b", &[("/lib", 0, 10)]), fp("c", &[("/c", 0, 10)])];
        let p = plan(&probs(&[("a", 0.3), ("b", 0.3), ("c", 0.45)]), &fps, MemoryBudget::of(10 * 4096), &CFG);
        // 1 - 0.7 * 0.7 = 0.51 > 0.45: the shared library wins the only slot.
        assert_eq!(p.ranges.len(), 1);
        assert_eq!(p.ranges[0].file, "/lib");
        assert!((p.ranges[0].probability - 0.51).abs() < 1e-12);
    }

    #[test]
    fn a_range_named_twice_by_one_application_counts_once_with_its_larger_share() {
        let twice = |first: f64, second: f64| {
            AppFootprint::new(
                "a",
                [first, second]
                    .into_iter()
                    .map(|use_share| RangeUse { file: "/lib".into(), range: PageRange::new(0, 10), use_share, resident_pages: 0 })
                    .collect(),
            )
        };
        let p = plan(&probs(&[("a", 0.5)]), &[twice(0.4, 1.0)], MemoryBudget::of(1 << 30), &CFG);
        assert_eq!(p.ranges.len(), 1, "planned once");
        assert_eq!(p.ranges[0].probability, 0.5);
        let with_b = [twice(1.0, 0.4), fp("b", &[("/lib", 0, 10)])];
        let p = plan(&probs(&[("a", 0.5), ("b", 0.5)]), &with_b, MemoryBudget::of(1 << 30), &CFG);
        assert_eq!(p.ranges.len(), 1);
        assert_eq!(p.ranges[0].probability, 0.75);
        // Below the read cost once, it is not worth reading for being named twice.
        let cfg = PlannerConfig { read_cost: 0.2, ..CFG };
        assert!(plan(&probs(&[("a", 0.15)]), &[twice(1.0, 1.0)], MemoryBudget::of(1 << 30), &cfg).ranges.is_empty());
    }

    #[test]
    fn seek_cost_favours_small_ranges() {
        let cfg = PlannerConfig { seek_cost_bytes: 1 << 20, ..CFG };
        let fps = [fp("big", &[("/big", 0, 1000)]), fp("small", &[("/s", 0, 1)])];
        let p = plan(&probs(&[("big", 0.5), ("small", 0.4)]), &fps, MemoryBudget::of(4096), &cfg);
        assert_eq!(p.ranges[0].app, "small");
    }

    #[test]
    fn zero_probability_and_running_apps_are_not_planned() {
        let fps = [fp("a", &[("/a", 0, 10)])];
        assert!(plan(&probs(&[("a", 0.0)]), &fps, MemoryBudget::of(1 << 30), &CFG).ranges.is_empty());
        assert!(plan(&[], &fps, MemoryBudget::of(1 << 30), &CFG).ranges.is_empty());
    }

    #[test]
    fn missing_skips_resident_and_duplicate_pages() {
        let fps = [fp("a", &[("/f", 0, 10)]), fp("b", &[("/f", 5, 10)])];
        let p = plan(&probs(&[("a", 0.9), ("b", 0.5)]), &fps, MemoryBudget::of(1 << 30), &CFG);
        let mut resident = ResidentPages::new();
        resident.entry("/f".into()).or_default().insert(PageRange::new(2, 2));
        let m = p.missing(&resident);
        assert_eq!(
            m,
            vec![
                ("/f".to_string(), PageRange::new(0, 2)),
                ("/f".into(), PageRange::new(4, 6)),
                ("/f".into(), PageRange::new(10, 5))
            ]
        );
        assert_eq!(p.missing_bytes(&resident), 13 * 4096);
    }

    #[test]
    fn a_prefetch_is_made_only_when_it_beats_its_cost() {
        let cfg = PlannerConfig { read_cost: 0.1, evict_cost: 0.3, ..CFG };
        let fps = [fp("sure", &[("/s", 0, 10)]), fp("maybe", &[("/m", 0, 10)]), fp("unlikely", &[("/u", 0, 10)])];
        let ps = probs(&[("sure", 0.9), ("maybe", 0.2), ("unlikely", 0.05)]);
        // Everything free: "sure" and "maybe" beat the read cost, "unlikely" does not.
        let all_free = plan_within(&ps, &fps, MemoryBudget::of(1 << 30), &MemoryHeadroom::UNMEASURED, &cfg);
        assert_eq!(app_order(&all_free), vec!["sure", "maybe"]);
        // 15 free pages: "sure" is worth pushing things out for; "maybe" only fills what is free.
        let some_free = MemoryHeadroom { free_bytes: 15 * 4096, refault_share: 0.0 };
        let p = plan_within(&ps, &fps, MemoryBudget::of(1 << 30), &some_free, &cfg);
        assert_eq!(app_order(&p), vec!["sure", "maybe"]);
        assert_eq!(p.ranges[1].range, PageRange::new(0, 5), "cut at the end of the free memory");
        // A high refault share raises the cost of pushing out above even "sure"'s benefit.
        let thrashing = MemoryHeadroom { free_bytes: 0, refault_share: 0.95 };
        assert!(plan_within(&ps, &fps, MemoryBudget::of(1 << 30), &thrashing, &cfg).ranges.is_empty());
        // Costs of zero and nothing measured: the plain budget planner.
        let fill = plan_within(&ps, &fps, MemoryBudget::of(1 << 30), &MemoryHeadroom::UNMEASURED, &CFG);
        assert_eq!(app_order(&fill), vec!["sure", "maybe", "unlikely"]);
        assert_eq!(fill.work, PlannerWork { ranges_read: 3, candidates_scored: 3 });
    }

    fn arb_case() -> impl Strategy<Value = (Vec<AppFootprint>, Vec<AppProbability>)> {
        let range = (0usize..4, 0u64..50, 1u64..40, 0.0f64..=1.0);
        let app = proptest::collection::vec(range, 1..6);
        (proptest::collection::vec((app, -0.5f64..1.5), 1..6)).prop_map(|apps| {
            let mut fps = Vec::new();
            let mut ps = Vec::new();
            for (i, (ranges, p)) in apps.into_iter().enumerate() {
                let name = format!("app{i}");
                fps.push(AppFootprint::new(
                    name.clone(),
                    ranges
                        .into_iter()
                        .map(|(f, s, l, u)| RangeUse {
                            file: format!("/f{f}").into(),
                            range: PageRange::new(s, l),
                            use_share: u,
                            resident_pages: 0,
                        })
                        .collect(),
                ));
                ps.push(AppProbability { app: name, probability: p });
            }
            (fps, ps)
        })
    }

    fn pages(p: &Plan) -> BTreeMap<String, RangeSet> {
        let mut m: BTreeMap<String, RangeSet> = BTreeMap::new();
        for r in &p.ranges {
            m.entry(r.file.clone()).or_default().insert(r.range);
        }
        m
    }

    fn bytes_of(p: &Plan, app: &str) -> u64 {
        p.ranges.iter().filter(|r| r.app == app).map(|r| r.range.len * p.page_size).sum()
    }

    proptest! {
        /// The planner never plans beyond its budget, and only ranges some likely app needs.
        #[test]
        fn never_beyond_budget((fps, ps) in arb_case(), budget in 0u64..400_000, seek in 0u64..200_000) {
            let cfg = PlannerConfig { seek_cost_bytes: seek, ..CFG };
            let p = plan(&ps, &fps, MemoryBudget::of(budget), &cfg);
            prop_assert!(p.bytes <= budget);
            prop_assert_eq!(p.bytes, p.ranges.iter().map(|r| r.range.len * 4096).sum::<u64>());
            for r in &p.ranges {
                prop_assert!(r.probability > 0.0 && r.probability <= 1.0);
                prop_assert!(!r.range.is_empty());
            }
            prop_assert!(p.missing_bytes(&ResidentPages::new()) <= p.bytes);
        }

        /// Whatever the memory holds, nothing is planned whose benefit per byte does not beat
        /// the read cost — so a predictor believed at zero confidence (every probability 0, or
        /// too small to pay for its read) prefetches nothing — and nothing beyond the free
        /// memory whose benefit does not also beat what it pushes out.
        #[test]
        fn nothing_planned_that_loses((fps, ps) in arb_case(), budget in 0u64..400_000, seek in 0u64..200_000,
                                      read in 0.0f64..1.5, evict in 0.0f64..1.0, free in 0u64..200_000, refault in 0.0f64..1.0,
                                      confidence in 0.0f64..1.0) {
            let cfg = PlannerConfig { seek_cost_bytes: seek, read_cost: read, evict_cost: evict, ..CFG };
            let headroom = MemoryHeadroom { free_bytes: free, refault_share: refault };
            let p = plan_within(&ps, &fps, MemoryBudget::of(budget), &headroom, &cfg);
            prop_assert!(p.bytes <= budget);
            let pushed = read + evict.max(refault);
            let mut beyond = 0u64;
            for r in &p.ranges {
                prop_assert!(r.probability > read && r.benefit_per_byte > read);
                if r.probability <= pushed {
                    beyond += r.range.len * 4096;
                }
            }
            prop_assert!(beyond <= free, "ranges not worth pushing anything out fit in the free memory");
            let zero: Vec<AppProbability> = ps.iter().map(|a| AppProbability { probability: 0.0, ..a.clone() }).collect();
            prop_assert!(plan_within(&zero, &fps, MemoryBudget::of(budget), &headroom, &cfg).ranges.is_empty());
            // Probabilities scaled down by a confidence below the read cost over the largest
            // seek bonus: nothing is worth reading.
            let max_bonus = 1.0 + seek as f64 / 4096.0;
            let doubted: Vec<AppProbability> = ps.iter()
                .map(|a| AppProbability { probability: a.probability.clamp(0.0, 1.0) * confidence * read / max_bonus, ..a.clone() })
                .collect();
            let shared_max = fps.len() as f64; // at most this many applications share a range
            if read > 0.0 && confidence * shared_max < 1.0 {
                prop_assert!(plan_within(&doubted, &fps, MemoryBudget::of(budget), &headroom, &cfg).ranges.is_empty());
            }
        }

        /// Each planned range's probability is that some application needing it starts, each
        /// application counted once (with its largest share of the range), however its file's
        /// ranges come: in runs or interleaved, under one shared name or a name per range.
        #[test]
        fn probabilities_combine_applications_once_each((fps, ps) in arb_case(), budget in 0u64..400_000,
                                                          read in 0.0f64..0.5) {
            let cfg = PlannerConfig { read_cost: read, ..CFG };
            let p = plan(&ps, &fps, MemoryBudget::of(budget), &cfg);
            let p_of = |app: &str| ps.iter().find(|a| a.app == app).map_or(0.0, |a| a.probability.clamp(0.0, 1.0));
            // The candidate a planned range was cut from: a range of the same file and start,
            // at least as long.
            let probability_of = |file: &str, range: PageRange| -> f64 {
                1.0 - fps.iter().map(|f| {
                    let share = f.ranges.iter()
                        .filter(|u| &*u.file == file && u.range == range)
                        .map(|u| u.use_share.clamp(0.0, 1.0))
                        .fold(0.0f64, f64::max);
                    1.0 - p_of(&f.app) * share
                }).product::<f64>()
            };
            for r in &p.ranges {
                let found = fps.iter().flat_map(|f| &f.ranges).any(|u| {
                    &*u.file == r.file.as_str() && u.range.start == r.range.start && u.range.len >= r.range.len
                        && (probability_of(&u.file, u.range).clamp(0.0, 1.0) - r.probability).abs() < 1e-12
                });
                prop_assert!(found, "{:?}", r);
            }
            // The same footprints with a name allocated per range, and with a name shared by
            // all ranges of a file: the same plan.
            let per_range: Vec<AppFootprint> = fps.iter().map(|f| AppFootprint::new(
                f.app(),
                f.ranges().iter().map(|u| RangeUse { file: Arc::from(&*u.file), ..u.clone() }).collect(),
            )).collect();
            let mut names: BTreeMap<String, Arc<str>> = BTreeMap::new();
            let one_name: Vec<AppFootprint> = fps.iter().map(|f| AppFootprint::new(
                f.app(),
                f.ranges().iter().map(|u| RangeUse {
                    file: Arc::clone(names.entry(u.file.to_string()).or_insert_with(|| Arc::clone(&u.file))),
                    ..u.clone()
                }).collect(),
            )).collect();
            prop_assert_eq!(&plan(&ps, &per_range, MemoryBudget::of(budget), &cfg), &p);
            prop_assert_eq!(&plan(&ps, &one_name, MemoryBudget::of(budget), &cfg), &p);
        }

        /// A larger budget keeps everything a smaller one kept (the plan grows as a prefix).
        #[test]
        fn monotone_in_budget((fps, ps) in arb_case(), b1 in 0u64..400_000, b2 in 0u64..400_000) {
            let (lo, hi) = if b1 <= b2 { (b1, b2) } else { (b2, b1) };
            let small = pages(&plan(&ps, &fps, MemoryBudget::of(lo), &CFG));
            let large = pages(&plan(&ps, &fps, MemoryBudget::of(hi), &CFG));
            for (file, set) in small {
                for r in set.ranges() {
                    prop_assert_eq!(large.get(&file).map_or(0, |l| l.overlap_count(*r)), r.len);
                }
            }
        }

        /// Raising one application's probability never lowers the bytes planned for it.
        #[test]
        fn monotone_in_probability((fps, ps) in arb_case(), budget in 0u64..400_000, which in 0usize..6, up in 0.0f64..1.0) {
            let which = which % ps.len();
            let before = plan(&ps, &fps, MemoryBudget::of(budget), &CFG);
            let mut raised = ps.clone();
            let old = raised[which].probability.clamp(0.0, 1.0);
            raised[which].probability = old + (1.0 - old) * up;
            let after = plan(&raised, &fps, MemoryBudget::of(budget), &CFG);
            let app = &ps[which].app;
            // Private (unshared) footprints make the claim exact; shared ranges may move owner.
            let shared = fps.iter().any(|f| &f.app != app && f.ranges.iter().any(|r| fps[which].ranges.iter().any(|o| o.file == r.file)));
            if !shared {
                prop_assert!(bytes_of(&after, app) >= bytes_of(&before, app));
            }
        }
    }
}
