//! The planner: from launch probabilities, learned footprints and a memory budget, which page
//! ranges to keep resident and in what order to fetch them; and, against what is already
//! resident, which pages are still missing.
//!
//! Selection is by expected benefit per byte — the probability that some application needing the
//! range starts, times the disk cost of reading it (its bytes plus a per-range seek cost) per
//! byte held — taking the best ranges until the budget is full (the last one cut to fit, to the
//! page). The selected ranges are fetched likeliest application first, in first-use order within
//! an application. Pure: no system calls; `docs/predictors.md` states the rules.

use std::collections::BTreeMap;

use super::budget::MemoryBudget;
use crate::model::predict::AppProbability;
use crate::model::range::{PageRange, RangeSet};

/// One range an application's launch uses, with how often it used it.
#[derive(Clone, Debug, PartialEq)]
pub struct RangeUse {
    /// The file (its path, or any key naming it consistently across applications).
    pub file: String,
    /// The pages.
    pub range: PageRange,
    /// Share of the application's recent launches that used the range, in `[0, 1]`.
    pub use_share: f64,
}

/// What an application's launch needs, in first-use order.
#[derive(Clone, Debug, PartialEq)]
pub struct AppFootprint {
    /// The application.
    pub app: String,
    /// Its ranges, first used first.
    pub ranges: Vec<RangeUse>,
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
}

impl Default for PlannerConfig {
    fn default() -> Self {
        PlannerConfig { page_size: 4096, seek_cost_bytes: 128 * 1024, min_probability: 0.0 }
    }
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
            let done = seen.entry(r.file.as_str()).or_default();
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
    range: PageRange,
    p_not: f64,
    owner: &'a str,
    owner_p: f64,
    first_use: usize,
}

/// Chooses what to keep resident.
pub fn plan(probabilities: &[AppProbability], footprints: &[AppFootprint], budget: MemoryBudget, config: &PlannerConfig) -> Plan {
    let page = config.page_size.max(1);
    let p_of: BTreeMap<&str, f64> = probabilities
        .iter()
        .map(|a| (a.app.as_str(), if a.probability.is_finite() { a.probability.clamp(0.0, 1.0) } else { 0.0 }))
        .collect();
    // One candidate per distinct (file, range); applications sharing it combine as preload's
    // maps do: P(needed) = 1 − Π (1 − P(app) · use share).
    let mut by_key: BTreeMap<(&str, u64, u64), Candidate<'_>> = BTreeMap::new();
    for fp in footprints {
        let p_app = p_of.get(fp.app.as_str()).copied().unwrap_or(0.0);
        for (i, r) in fp.ranges.iter().enumerate() {
            if r.range.is_empty() {
                continue;
            }
            let share = if r.use_share.is_finite() { r.use_share.clamp(0.0, 1.0) } else { 0.0 };
            let c = by_key.entry((r.file.as_str(), r.range.start, r.range.len)).or_insert(Candidate {
                file: &r.file,
                range: r.range,
                p_not: 1.0,
                owner: &fp.app,
                owner_p: -1.0,
                first_use: i,
            });
            c.p_not *= 1.0 - p_app * share;
            if p_app > c.owner_p || (p_app == c.owner_p && fp.app.as_str() < c.owner) {
                c.owner = &fp.app;
                c.owner_p = p_app;
                c.first_use = i;
            }
        }
    }
    let mut scored: Vec<(f64, f64, Candidate<'_>)> = by_key
        .into_values()
        .filter_map(|c| {
            let p = (1.0 - c.p_not).clamp(0.0, 1.0);
            if p <= config.min_probability || p <= 0.0 {
                return None;
            }
            let bytes = (c.range.len * page) as f64;
            let benefit = p * (bytes + config.seek_cost_bytes as f64) / bytes;
            Some((benefit, p, c))
        })
        .collect();
    let owner_order = |a: &Candidate<'_>, b: &Candidate<'_>| {
        b.owner_p.total_cmp(&a.owner_p).then_with(|| a.owner.cmp(b.owner)).then(a.first_use.cmp(&b.first_use))
    };
    scored.sort_by(|x, y| {
        y.0.total_cmp(&x.0)
            .then_with(|| owner_order(&x.2, &y.2))
            .then_with(|| (x.2.file, x.2.range.start).cmp(&(y.2.file, y.2.range.start)))
    });
    // Best benefit per byte first until the budget is full; the last range is cut to fit.
    let mut left = budget.bytes;
    let mut chosen: Vec<(f64, f64, Candidate<'_>)> = Vec::new();
    for (benefit, p, mut c) in scored {
        let pages_fit = left / page;
        if pages_fit == 0 {
            break;
        }
        if c.range.len > pages_fit {
            c.range = PageRange::new(c.range.start, pages_fit);
        }
        left -= c.range.len * page;
        chosen.push((benefit, p, c));
    }
    chosen.sort_by(|x, y| owner_order(&x.2, &y.2).then_with(|| (x.2.file, x.2.range.start).cmp(&(y.2.file, y.2.range.start))));
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
    Plan { ranges, budget, bytes, page_size: page }
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
        AppFootprint {
            app: app.into(),
            ranges: ranges
                .iter()
                .map(|&(f, s, l)| RangeUse { file: f.into(), range: PageRange::new(s, l), use_share: 1.0 })
                .collect(),
        }
    }

    fn probs(v: &[(&str, f64)]) -> Vec<AppProbability> {
        v.iter().map(|&(a, p)| AppProbability { app: a.into(), probability: p }).collect()
    }

    const CFG: PlannerConfig = PlannerConfig { page_size: 4096, seek_cost_bytes: 0, min_probability: 0.0 };

    #[test]
    fn likeliest_first_in_first_use_order() {
        let fps = [fp("a", &[("/a", 10, 5), ("/lib", 0, 5), ("/a", 0, 5)]), fp("b", &[("/b", 0, 10)])];
        let p = plan(&probs(&[("a", 0.3), ("b", 0.6)]), &fps, MemoryBudget::of(1 << 30), &CFG);
        assert_eq!(app_order(&p), vec!["b", "a"]);
        let a: Vec<_> = p.ranges.iter().filter(|r| r.app == "a").map(|r| (r.file.as_str(), r.range.start)).collect();
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

    fn arb_case() -> impl Strategy<Value = (Vec<AppFootprint>, Vec<AppProbability>)> {
        let range = (0usize..4, 0u64..50, 1u64..40, 0.0f64..=1.0);
        let app = proptest::collection::vec(range, 1..6);
        (proptest::collection::vec((app, -0.5f64..1.5), 1..6)).prop_map(|apps| {
            let mut fps = Vec::new();
            let mut ps = Vec::new();
            for (i, (ranges, p)) in apps.into_iter().enumerate() {
                let name = format!("app{i}");
                fps.push(AppFootprint {
                    app: name.clone(),
                    ranges: ranges
                        .into_iter()
                        .map(|(f, s, l, u)| RangeUse { file: format!("/f{f}"), range: PageRange::new(s, l), use_share: u })
                        .collect(),
                });
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
