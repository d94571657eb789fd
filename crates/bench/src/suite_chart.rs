//! The suite's chart: a hand-written SVG of horizontal bars, one group per workload and machine
//! profile, one bar per condition, its length the median launch time relative to cold (so the
//! cold-to-warm gap and how much of it each prefetcher closes are visible side by side), with
//! min–max whiskers and the absolute median as a label. Pure rendering of a [`SuiteReport`].

use std::fmt::Write as _;

use crate::suite_file::Condition;
use crate::suite_markdown::secs;
use crate::suite_report::{ConditionStatus, SuiteReport, WorkloadReport};

const BAR: f64 = 14.0;
const GAP: f64 = 3.0;
const GROUP_GAP: f64 = 18.0;
const LEFT: f64 = 230.0;
const PLOT: f64 = 520.0;
const WIDTH: f64 = LEFT + PLOT + 90.0;

fn color(c: Condition) -> &'static str {
    match c {
        Condition::Cold => "#9e9e9e",
        Condition::Warm => "#4caf50",
        Condition::Preload => "#ff9800",
        Condition::PreloadNg => "#e65100",
        Condition::Augur => "#1e88e5",
        Condition::AugurReplay => "#90caf9",
        Condition::AugurPredict => "#1565c0",
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Renders the chart; a report without measurements gives a chart that says so.
pub fn render(report: &SuiteReport) -> String {
    let mut body = String::new();
    let mut y = 60.0;
    // Scale: the largest whisker relative to its cold median, at least 1.
    let mut max_ratio: f64 = 1.0;
    for p in &report.profiles {
        for w in &p.workloads {
            let Some(cold) = cold_median(w) else {
                continue;
            };
            for c in &w.conditions {
                if let Some(s) = c.summary {
                    max_ratio = max_ratio.max(s.max / cold);
                }
            }
        }
    }
    let max_ratio = max_ratio.min(3.0);
    let x_of = |r: f64| LEFT + PLOT * (r.min(max_ratio) / max_ratio);
    let mut groups = 0;
    for p in &report.profiles {
        for w in &p.workloads {
            let Some(cold) = cold_median(w) else {
                continue;
            };
            groups += 1;
            // A prefetcher that could not run gets no bar (the report says why).
            let bars: Vec<_> = w.conditions.iter().filter(|c| c.status != ConditionStatus::Unavailable).collect();
            let group_h = bars.len() as f64 * (BAR + GAP);
            let _ = writeln!(
                body,
                r##"<text x="{:.1}" y="{:.1}" text-anchor="end" font-weight="bold">{}</text><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#555">{}</text>"##,
                LEFT - 8.0,
                y + group_h / 2.0 - 2.0,
                esc(&w.name),
                LEFT - 8.0,
                y + group_h / 2.0 + 12.0,
                esc(&p.machine.profile)
            );
            for c in bars {
                let label_y = y + BAR - 3.0;
                match c.summary {
                    Some(s) => {
                        let (x0, x1) = (x_of(0.0), x_of(s.median / cold));
                        let _ = writeln!(
                            body,
                            r#"<rect x="{x0:.1}" y="{y:.1}" width="{:.1}" height="{BAR}" fill="{}"><title>{}: median {} s, min {} s, max {} s</title></rect>"#,
                            (x1 - x0).max(0.5),
                            color(c.condition),
                            esc(c.condition.label()),
                            secs(s.median),
                            secs(s.min),
                            secs(s.max)
                        );
                        let (wl, wr) = (x_of(s.min / cold), x_of(s.max / cold));
                        let mid = y + BAR / 2.0;
                        let _ = writeln!(
                            body,
                            r##"<path d="M{wl:.1},{mid:.1}H{wr:.1}M{wl:.1},{:.1}V{:.1}M{wr:.1},{:.1}V{:.1}" stroke="#222" fill="none"/>"##,
                            mid - 4.0,
                            mid + 4.0,
                            mid - 4.0,
                            mid + 4.0
                        );
                        let _ =
                            writeln!(body, r#"<text x="{:.1}" y="{label_y:.1}">{} s</text>"#, wr.max(x1) + 5.0, secs(s.median));
                    }
                    None => {
                        let _ = writeln!(
                            body,
                            r##"<text x="{:.1}" y="{label_y:.1}" fill="#b71c1c">{}: {}</text>"##,
                            LEFT + 4.0,
                            esc(c.condition.label()),
                            match c.status {
                                ConditionStatus::Unavailable => "unavailable",
                                _ => "failed",
                            }
                        );
                    }
                }
                y += BAR + GAP;
            }
            y += GROUP_GAP;
        }
    }
    if groups == 0 {
        let _ = writeln!(body, r#"<text x="{LEFT}" y="{y}">no workload was measured cold</text>"#);
        y += 30.0;
    }
    // Axis: ticks every 0.25 of cold.
    let mut axis = String::new();
    let axis_y = y + 4.0;
    let _ = writeln!(axis, r##"<path d="M{LEFT},{:.1}H{:.1}" stroke="#222"/>"##, axis_y, LEFT + PLOT);
    let mut t = 0.0;
    while t <= max_ratio + 1e-9 {
        let x = x_of(t);
        let _ = writeln!(
            axis,
            r##"<path d="M{x:.1},50V{axis_y:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{:.0} %</text>"##,
            axis_y + 16.0,
            t * 100.0
        );
        t += 0.25;
    }
    let _ = writeln!(
        axis,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">launch time relative to cold (median; whiskers: min–max)</text>"#,
        LEFT + PLOT / 2.0,
        axis_y + 36.0
    );
    // The legend names the conditions that have a bar somewhere, each as wide as its label.
    let mut legend = String::new();
    let mut lx = 10.0;
    let shown = Condition::ALL.into_iter().filter(|c| {
        report
            .profiles
            .iter()
            .flat_map(|p| &p.workloads)
            .filter_map(|w| w.condition(*c))
            .any(|r| r.status != ConditionStatus::Unavailable)
    });
    for c in shown {
        let _ = write!(
            legend,
            r#"<rect x="{lx:.1}" y="30" width="12" height="12" fill="{}"/><text x="{:.1}" y="40">{}</text>"#,
            color(c),
            lx + 16.0,
            esc(c.label())
        );
        lx += 16.0 + 6.5 * c.label().chars().count() as f64 + 14.0;
    }
    let height = axis_y + 50.0;
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {WIDTH:.0} {height:.0}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"10\" y=\"18\" font-size=\"14\" font-weight=\"bold\">{}</text>\n{legend}\n<g>\n{axis}</g>\n<g>\n{body}</g>\n</svg>\n",
        esc(&format!("augur-bench --suite: launch times (kernel {})", report.kernel))
    )
}

/// The workload's cold median, the chart's unit; none when cold did not run or took no time.
fn cold_median(w: &WorkloadReport) -> Option<f64> {
    w.condition(Condition::Cold).and_then(|c| c.summary).map(|s| s.median).filter(|&m| m > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite_file::Ready;
    use crate::suite_report::{ConditionReport, ProfileReport, WorkloadReport};

    #[test]
    fn bars_whiskers_and_labels() {
        let mut w = WorkloadReport { name: "a<b".into(), command: vec![], ready: Ready::Exit, conditions: vec![] };
        for (c, s) in [(Condition::Cold, vec![2.0, 2.0]), (Condition::Warm, vec![1.0, 1.0]), (Condition::AugurPredict, vec![])] {
            let mut r = ConditionReport::new(c);
            r.samples = s;
            w.conditions.push(r);
        }
        let mut ng = ConditionReport::new(Condition::PreloadNg);
        ng.status = ConditionStatus::Unavailable;
        w.conditions.push(ng);
        w.finish();
        let report =
            SuiteReport { profiles: vec![ProfileReport { workloads: vec![w], ..Default::default() }], ..Default::default() };
        let svg = render(&report);
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.trim_end().ends_with("</svg>"));
        // Two bars (cold, warm) and a legend of the three conditions shown; no preload-ng.
        assert_eq!(svg.matches("<rect x=").count(), 2 + 3, "{svg}");
        assert!(!svg.contains("preload-ng"), "{svg}");
        assert!(svg.contains("a&lt;b"));
        assert!(svg.contains("augur-predict: failed"));
        assert!(svg.contains("2.00 s") && svg.contains("1.00 s"));
        // Cold spans the whole plot when it is the largest; warm half of it.
        assert!(svg.contains(&format!(r#"width="{:.1}""#, PLOT)));
        assert!(svg.contains(&format!(r#"width="{:.1}""#, PLOT / 2.0)));
    }

    #[test]
    fn empty_report_says_so() {
        assert!(render(&SuiteReport::default()).contains("no workload was measured cold"));
    }
}
