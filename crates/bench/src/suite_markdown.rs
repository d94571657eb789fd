//! The suite's report for people: Markdown tables (launch times per workload and condition with
//! the share of the cold-to-warm gap closed, the usage day, the costs) under a header naming the
//! machine, kernel, profile and command. Pure rendering of a [`SuiteReport`].

use std::fmt::Write as _;

use crate::suite_file::Condition;
use crate::suite_report::{ConditionStatus, ProfileReport, SuiteReport};

/// Renders the whole report.
pub fn render(report: &SuiteReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# augur benchmark suite\n");
    let _ = writeln!(out, "- command: `{}`", report.command);
    let _ = writeln!(out, "- augur {}, kernel {}, {}", report.augur_version, report.kernel, report.machine);
    let _ = writeln!(out, "- started {}", report.started_utc);
    if report.elapsed_secs > 0.0 {
        let _ = writeln!(
            out,
            "- took {:.0} min (planned {:.0} min from the suite's constants)",
            report.elapsed_secs / 60.0,
            report.estimated_secs / 60.0
        );
    }
    for n in &report.notes {
        let _ = writeln!(out, "- {n}");
    }
    if let Some(log) = &report.augur_log {
        let modes: Vec<String> = log.modes.iter().map(|(m, n)| format!("{n} in {m} mode")).collect();
        let _ = writeln!(
            out,
            "- augur's log over the whole run: daemons started {}; {} launches traced late (not learned)",
            if modes.is_empty() { "none".to_string() } else { modes.join(", ") },
            log.launches_traced_late
        );
    }
    let _ = writeln!(out);
    for p in &report.profiles {
        render_profile(&mut out, p);
    }
    out
}

fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
}

fn mib(b: u64) -> String {
    format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64)
}

/// Seconds with a precision that suits their size.
pub fn secs(s: f64) -> String {
    if s < 0.1 {
        format!("{:.3}", s)
    } else if s < 10.0 {
        format!("{:.2}", s)
    } else {
        format!("{:.1}", s)
    }
}

fn render_profile(out: &mut String, p: &ProfileReport) {
    let m = &p.machine;
    let _ = writeln!(out, "## Profile `{}`\n", m.profile);
    let _ = write!(out, "MemAvailable {} of {} MemTotal", gib(m.mem_available_after), gib(m.mem_total));
    if m.balloon_locked_bytes > 0 {
        let _ = write!(out, " (balloon locked {})", gib(m.balloon_locked_bytes));
    }
    if let (Some(dev), Some(t)) = (&m.throttled_device, &m.throttle) {
        let _ = write!(out, "; reads from {dev} throttled to {} IOPS, {:.0} MB/s", t.read_iops, t.read_bps as f64 / 1e6);
    }
    if let Some(bps) = m.cold_read_bytes_per_sec {
        let _ = write!(out, "; a cold sequential read ran at {:.1} MB/s", bps / 1e6);
    }
    let host = m.host_memory_note();
    if !host.is_empty() {
        let _ = write!(out, "; {host}");
    }
    let _ = writeln!(out, ". Took {:.0} min.\n", p.elapsed_secs / 60.0);
    // Which prefetchers were not measured, and why, before any table leaves them out.
    let not_measured: Vec<String> = p.prefetchers.iter().filter_map(|s| s.not_measured_line()).collect();
    for line in &not_measured {
        let _ = writeln!(out, "- {line}");
    }
    if !not_measured.is_empty() {
        let _ = writeln!(out);
    }
    let mut notes: Vec<String> = Vec::new();

    // A condition whose prefetcher could not run anywhere gets no column: the line above says why.
    let conds: Vec<Condition> = Condition::ALL
        .into_iter()
        .filter(|c| {
            let reports: Vec<_> = p.workloads.iter().filter_map(|w| w.condition(*c)).collect();
            !reports.is_empty() && !reports.iter().all(|r| r.status == ConditionStatus::Unavailable)
        })
        .collect();
    let prefetch_conds: Vec<Condition> =
        conds.iter().copied().filter(|c| !matches!(c, Condition::Cold | Condition::Warm)).collect();
    if !p.workloads.is_empty() {
        let _ = writeln!(out, "Launch time, seconds: median (min–max) of the runs; gap closed = (cold − x) / (cold − warm).\n");
        let mut head = String::from("| workload |");
        let mut rule = String::from("|---|");
        for c in &conds {
            let _ = write!(head, " {} |", c.label());
            rule.push_str("---:|");
        }
        for c in &prefetch_conds {
            let _ = write!(head, " gap closed: {} |", c.label());
            rule.push_str("---:|");
        }
        let _ = writeln!(out, "{head}\n{rule}");
        for w in &p.workloads {
            let _ = write!(out, "| {} |", w.name);
            for c in &conds {
                let cell = match w.condition(*c) {
                    Some(r) => match (r.status, r.summary) {
                        (_, Some(s)) => {
                            format!("{} ({}–{})", secs(s.median), secs(s.min), secs(s.max))
                        }
                        (ConditionStatus::Unavailable, _) => "unavailable".into(),
                        _ => "failed".into(),
                    },
                    None => "–".into(),
                };
                let _ = write!(out, " {cell} |");
                if let Some(r) = w.condition(*c) {
                    if r.status == ConditionStatus::Failed || (!r.reasons.is_empty() && r.status == ConditionStatus::Measured) {
                        if let Some(reason) = r.reasons.first() {
                            notes.push(format!("{} / {}: {}", w.name, c.name(), reason));
                        }
                    }
                }
            }
            for c in &prefetch_conds {
                let cell =
                    w.condition(*c).and_then(|r| r.gap_closed).map_or("–".to_string(), |g| format!("{:.0} %", g * 100.0));
                let _ = write!(out, " {cell} |");
            }
            let _ = writeln!(out);
        }
        let _ = writeln!(out);
        // What the prefetchers loaded before the launches.
        let mut rows = String::new();
        for w in &p.workloads {
            for c in &prefetch_conds {
                if let Some(r) = w.condition(*c) {
                    if r.samples.is_empty() {
                        continue;
                    }
                    let med = |v: &[u64]| -> u64 {
                        let mut v = v.to_vec();
                        v.sort_unstable();
                        v.get(v.len() / 2).copied().unwrap_or(0)
                    };
                    let decision =
                        if r.preload_decision_bytes.is_empty() { "–".to_string() } else { mib(med(&r.preload_decision_bytes)) };
                    let _ = writeln!(
                        rows,
                        "| {} | {} | {} | {} | {} |",
                        w.name,
                        c.label(),
                        mib(med(&r.prefetch_read_bytes)),
                        mib(med(&r.cache_growth_bytes)),
                        decision
                    );
                }
            }
        }
        if !rows.is_empty() {
            let _ = writeln!(
                out,
                "Before each launch (medians): bytes the prefetcher read from disk, page-cache growth since the caches were dropped, and the prefetcher's own budget decision (preload: the \"using N kb\" of its log; preload-ng: the `total_bytes` of its cycle's plan, before it skips resident pages).\n"
            );
            let _ = writeln!(
                out,
                "| workload | prefetcher | read from disk | page cache filled | it decided to load |\n|---|---|---:|---:|---:|\n{rows}"
            );
        }
    }
    if !p.training.is_empty() {
        let learned: Vec<String> = p
            .training
            .iter()
            .filter_map(|t| t.preload_learned.map(|l| format!("{} {}", t.workload, if l { "yes" } else { "no" })))
            .collect();
        if !learned.is_empty() {
            let _ = writeln!(out, "preload learned the executable after training: {}.\n", learned.join(", "));
        }
    }
    if let Some(t) = &p.training_shared_from {
        let _ = writeln!(
            out,
            "The prefetchers were trained once, under profile `{t}`; here they start from what they learned there.\n"
        );
    }
    if let Some(day) = &p.day {
        render_day(out, day, &mut notes);
    }
    if let Some(cost) = &p.cost {
        let _ = writeln!(out, "### Cost\n");
        if !cost.daemons.is_empty() {
            let _ = writeln!(
                out,
                "| daemon | start-up (from its spawn until its first cycle is done) | idle CPU | wake-ups per idle minute | idle RSS | CPU while learning | peak RSS while learning | read while learning |\n|---|---|---:|---:|---:|---:|---:|---:|"
            );
            for d in &cost.daemons {
                let _ = writeln!(
                    out,
                    "| {} | {} | {:.2} s in {:.0} s | {:.1} | {} | {:.2} s in {:.0} s | {} | {} |",
                    d.prefetcher,
                    startup_cell(d),
                    d.idle_cpu_secs,
                    d.idle_secs,
                    d.idle_wakeups_per_min,
                    mib(d.idle_rss_bytes),
                    d.learning_cpu_secs,
                    d.learning_secs,
                    mib(d.learning_peak_rss_bytes),
                    mib(d.learning_read_bytes)
                );
            }
            let _ = writeln!(out);
        }
        if !cost.slowdowns.is_empty() {
            let _ = writeln!(
                out,
                "I/O-heavy work, prefetcher off versus on (medians, seconds); I/O wait = elapsed − (user + sys), as Kroeger and Long measured it. \
                 *learning*: augur's first runs of the workload, while it still follows (traces) its launches; *on*: later runs, which augur replays without tracing.\n"
            );
            let _ = writeln!(
                out,
                "| workload | prefetcher | off | on | on / off | learning | learning / off | I/O wait off | I/O wait on |\n|---|---|---:|---:|---:|---:|---:|---:|---:|"
            );
            for s in &cost.slowdowns {
                if let Some(why) = &s.unavailable {
                    let _ = writeln!(out, "| {} | {} | unavailable | | | | | | |", s.workload, s.prefetcher);
                    notes.push(format!("{} / {}: {why}", s.workload, s.prefetcher));
                    continue;
                }
                let med = |v: &[f64]| crate::stats::Summary::of(v).map_or("–".into(), |d| secs(d.median));
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    s.workload,
                    s.prefetcher,
                    med(&s.off),
                    med(&s.on),
                    s.ratio.map_or("–".into(), |r| format!("{r:.3}")),
                    med(&s.learning),
                    s.learning_ratio.map_or("–".into(), |r| format!("{r:.3}")),
                    med(&s.io_wait_off),
                    med(&s.io_wait_on)
                );
            }
            let _ = writeln!(out);
        }
    }
    if !notes.is_empty() {
        let _ = writeln!(out, "Notes:\n");
        notes.dedup();
        for n in notes {
            let _ = writeln!(out, "- {n}");
        }
        let _ = writeln!(out);
    }
}

fn render_day(out: &mut String, day: &crate::suite_report::DayReport, notes: &mut Vec<String>) {
    let _ = writeln!(out, "### Usage day\n");
    let need = day.working_set_bytes();
    let sets: Vec<String> = day.working_sets.iter().map(|(n, b)| format!("{n} {}", mib(*b))).collect();
    let _ = writeln!(
        out,
        "Day {} of `{}` (the days before it trained every prefetcher), {} launches. Its applications' working sets (what each one's cold launch read from disk) sum to {}, {:.1} × the {} this profile leaves available (at least {:.1} × required): {}.\n",
        day.trace_day,
        day.trace,
        day.launches,
        mib(need),
        need as f64 / day.memory_left_bytes.max(1) as f64,
        mib(day.memory_left_bytes),
        day.min_memory_ratio,
        sets.join(", ")
    );
    if let Some(why) = &day.refused {
        let _ = writeln!(out, "Not run: {why}\n");
        return;
    }
    let _ = writeln!(
        out,
        "Read from disk: {}, over the whole day. Beyond none: that minus the day without a prefetcher, what the prefetcher read that no launch then needed from disk (prefetched and never used, or pushed out before use and read again; negative: it saved more than it read). Own accounting: what the prefetcher itself reports (augur's status: prefetched, wasted); preload and preload-ng report none.\n",
        day.disk_counter
    );
    let _ = writeln!(
        out,
        "| prefetcher | median launch | 90th percentile | max | failed | read from disk | prefetcher read | beyond none | own accounting |\n|---|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for r in &day.runs {
        match (&r.unavailable, r.summary) {
            (Some(why), _) => {
                let _ = writeln!(out, "| {} | unavailable | | | | | | | |", r.prefetcher);
                notes.push(format!("usage day / {}: {why}", r.prefetcher));
            }
            (None, Some(s)) => {
                let beyond = r
                    .read_beyond_none_bytes
                    .map_or("–".into(), |b| if b < 0 { format!("−{}", mib(b.unsigned_abs())) } else { mib(b as u64) });
                let own = match (r.own_ledger, r.prefetcher.as_str()) {
                    (Some((p, w)), _) => format!("{} prefetched, {} wasted", mib(p), mib(w)),
                    (None, "none") => String::new(),
                    (None, _) => "not reported".into(),
                };
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    if r.prefetcher == "augur" { "augur (as installed)" } else { r.prefetcher.as_str() },
                    secs(s.median),
                    secs(r.p90.unwrap_or(s.max)),
                    secs(s.max),
                    r.failures.len(),
                    r.disk_read_bytes.map_or("–".into(), mib),
                    if r.prefetcher == "none" { String::new() } else { mib(r.prefetch_read_bytes) },
                    beyond,
                    own
                );
            }
            (None, None) => {
                let _ = writeln!(out, "| {} | failed | | | {} | | | | |", r.prefetcher, r.failures.len());
            }
        }
    }
    let _ = writeln!(out);
}

/// A daemon's start-up before the idle minute: how long, its CPU, wake-ups and reads.
fn startup_cell(d: &crate::suite_report::DaemonCost) -> String {
    format!(
        "{:.0} s{}: {:.2} s CPU, {} wake-ups, {} read",
        d.startup_secs,
        if d.startup_done { "" } else { " (not over: the idle minute began while it worked)" },
        d.startup_cpu_secs,
        d.startup_wakeups,
        mib(d.startup_read_bytes)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::MachineRecord;
    use crate::suite_file::Ready;
    use crate::suite_report::{ConditionReport, PrefetcherStatus, WorkloadReport};

    #[test]
    fn a_daemons_start_up_is_shown_apart_and_says_when_it_was_not_over() {
        let mut d = crate::suite_report::DaemonCost {
            startup_secs: 41.6,
            startup_cpu_secs: 1.234,
            startup_wakeups: 2500,
            startup_read_bytes: 600 << 20,
            startup_done: true,
            ..Default::default()
        };
        let cell = startup_cell(&d);
        assert!(cell.starts_with("42 s: 1.23 s CPU, 2500 wake-ups, "), "{cell}");
        assert!(!cell.contains("not over"));
        d.startup_done = false;
        assert!(startup_cell(&d).contains("not over"));
    }

    fn report() -> SuiteReport {
        let mut w = WorkloadReport { name: "java".into(), command: vec!["java".into()], ready: Ready::Exit, conditions: vec![] };
        for (c, s) in [
            (Condition::Cold, vec![2.0, 2.2, 2.1]),
            (Condition::Warm, vec![0.5, 0.5, 0.6]),
            (Condition::Preload, vec![2.0, 2.1, 2.0]),
        ] {
            let mut r = ConditionReport::new(c);
            r.samples = s;
            w.conditions.push(r);
        }
        let mut u = ConditionReport::new(Condition::AugurPredict);
        u.status = ConditionStatus::Unavailable;
        u.reasons.push("augur daemon is not implemented in this build".into());
        w.conditions.push(u);
        let mut a = ConditionReport::new(Condition::Augur);
        a.samples = vec![0.6, 0.7, 0.6];
        w.conditions.push(a);
        let mut ng = ConditionReport::new(Condition::PreloadNg);
        ng.status = ConditionStatus::Unavailable;
        ng.reasons.push("preload-ng: binary not found at /x/preload-ng; run scripts/bench-setup".into());
        w.conditions.push(ng);
        w.finish();
        SuiteReport {
            command: "augur-bench --suite bench/suite.toml".into(),
            profiles: vec![ProfileReport {
                machine: MachineRecord {
                    profile: "as-is".into(),
                    mem_total: 8 << 30,
                    mem_available_after: 6 << 30,
                    ..Default::default()
                },
                prefetchers: vec![
                    PrefetcherStatus { name: "augur-predict".into(), available: false, reason: Some("not implemented".into()) },
                    PrefetcherStatus {
                        name: "preload-ng".into(),
                        available: false,
                        reason: Some("preload-ng: binary not found at /x/preload-ng; run scripts/bench-setup".into()),
                    },
                    PrefetcherStatus { name: "augur".into(), available: true, reason: None },
                ],
                workloads: vec![w],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn table_has_medians_ranges_gaps_and_notes() {
        let md = render(&report());
        // Unavailable everywhere: no column, but a line that says why, before the table.
        assert!(
            md.contains(
                "| workload | cold | warm | preload | augur (as installed) | gap closed: preload | gap closed: augur (as installed) |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| java | 2.10 (2.00–2.20) | 0.50 (0.50–0.60) | 2.00 (2.00–2.10) | 0.60 (0.60–0.70) | 6 % | 94 % |"),
            "{md}"
        );
        let table = md.find("| workload |").unwrap();
        let ng = md.find("- preload-ng: not measured (binary not found at /x/preload-ng; run scripts/bench-setup)").expect(&md);
        assert!(ng < table, "{md}");
        assert!(md.contains("- augur-predict: not measured (not implemented)"), "{md}");
        assert!(!md.contains("- augur: not measured"), "{md}");
        assert!(md.contains("`augur-bench --suite bench/suite.toml`"));
        assert!(!md.contains("augur's log"), "no augur daemon ran: {md}");
    }

    #[test]
    fn the_header_says_how_augur_observed_and_how_many_launches_were_traced_late() {
        let mut r = report();
        r.augur_log = Some(crate::prefetchers::AugurLogSummary { modes: vec![("bpf".into(), 40)], launches_traced_late: 0 });
        let md = render(&r);
        assert!(
            md.contains("- augur's log over the whole run: daemons started 40 in bpf mode; 0 launches traced late (not learned)"),
            "{md}"
        );
    }

    #[test]
    fn the_day_shows_memory_need_latency_disk_and_waste() {
        use crate::suite_report::{DayReport, DayRun};
        let run = |p: &str, lat: &[f64], disk: u64, own| {
            let mut r = DayRun {
                prefetcher: p.into(),
                latencies: lat.to_vec(),
                disk_read_bytes: Some(disk << 20),
                prefetch_read_bytes: 100 << 20,
                own_ledger: own,
                ..DayRun::default()
            };
            r.finish();
            r
        };
        let mut day = DayReport {
            trace: "bench/day.jsonl".into(),
            trace_day: 1,
            launches: 3,
            working_sets: vec![("firefox-esr".into(), 400 << 20), ("evolution".into(), 1200 << 20)],
            memory_left_bytes: 512 << 20,
            min_memory_ratio: 3.0,
            disk_counter: "the suite's cgroup".into(),
            runs: vec![
                run("none", &[1.0, 2.0, 3.0], 900, None),
                run("preload-ng", &[1.0, 1.0, 2.0], 1000, None),
                run("augur", &[0.5, 0.5, 1.0], 800, Some((300 << 20, 50 << 20))),
            ],
            ..DayReport::default()
        };
        day.finish();
        let mut r = report();
        r.profiles[0].day = Some(day.clone());
        let md = render(&r);
        assert!(md.contains("sum to 1600 MiB, 3.1 × the 512 MiB this profile leaves available"), "{md}");
        assert!(md.contains("| none | 2.00 | 2.80 | 3.00 | 0 | 900 MiB |  | – |  |"), "{md}");
        assert!(md.contains("| preload-ng | 1.00 | 1.80 | 2.00 | 0 | 1000 MiB | 100 MiB | 100 MiB | not reported |"), "{md}");
        assert!(md.contains("| augur (as installed) | 0.50 | 0.90 | 1.00 | 0 | 800 MiB | 100 MiB | −100 MiB | 300 MiB prefetched, 50 MiB wasted |"), "{md}");
        day.refused = Some("refused: it fits".into());
        r.profiles[0].day = Some(day);
        let md = render(&r);
        assert!(md.contains("Not run: refused: it fits"), "{md}");
        assert!(!md.contains("| preload-ng | 1.00"), "{md}");
    }

    #[test]
    fn seconds_precision() {
        assert_eq!(secs(0.0456), "0.046");
        assert_eq!(secs(1.234), "1.23");
        assert_eq!(secs(12.34), "12.3");
    }
}
