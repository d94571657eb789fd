//! `augur status`: the daemon's health, trace mode, learned applications, recent launches with
//! their hit rate and bytes prefetched, and its memory, asked over the control socket.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::daemon::control::{self, Request, Response, StatusReport};
use crate::error::{Error, Result};

/// Where to find the daemon: `--socket`, else the configuration's `socket_path`.
#[derive(Debug, Args)]
pub struct DaemonAddress {
    /// Configuration file to read the socket path from [default: /etc/augur/config.toml].
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Control socket of the daemon (overrides the configuration).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
}

impl DaemonAddress {
    /// The socket path to use.
    pub fn socket(&self) -> Result<PathBuf> {
        match &self.socket {
            Some(s) => Ok(s.clone()),
            None => Ok(crate::config_file::load(self.config.as_deref())?.daemon.socket_path),
        }
    }
}

/// Arguments of `augur status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub address: DaemonAddress,
}

/// Human-readable bytes (binary units).
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{bytes} B") } else { format!("{v:.1} {}", UNITS[u]) }
}

/// Age of a millisecond timestamp, for people.
pub fn ago(then_ms: u64) -> String {
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    let s = now_ms.saturating_sub(then_ms) / 1000;
    match s {
        0..=59 => format!("{s}s ago"),
        60..=3599 => format!("{}m ago", s / 60),
        3600..=86_399 => format!("{}h ago", s / 3600),
        _ => format!("{}d ago", s / 86_400),
    }
}

fn render(r: &StatusReport) -> String {
    let mut out = String::new();
    let up = r.uptime_secs;
    out.push_str(&format!(
        "augur daemon {}: running, pid {}, up {}h{:02}m{:02}s, health: {}\n",
        r.version,
        r.pid,
        up / 3600,
        up / 60 % 60,
        up % 60,
        r.health
    ));
    out.push_str(&format!("mode: {} ({})\n", r.mode, r.mode_description));
    if !r.passed_over.is_empty() {
        out.push_str(&format!("better modes not used: {}\n", r.passed_over));
    }
    if !r.tracepoints.is_empty() {
        out.push_str(&format!("tracepoints: {}\n", r.tracepoints.join(", ")));
    }
    out.push_str(&format!(
        "applications learned: {}; launches in progress: {}; memory: {} resident\n",
        r.apps_learned,
        r.launches_in_progress,
        human_bytes(r.rss_bytes)
    ));
    let prediction = if r.prediction_enabled {
        format!(
            "on ({} planning rounds, {} fetches{}, {} stopped by memory pressure)",
            r.events.planning_rounds,
            r.events.prediction_fetches,
            if r.prediction_fetch_busy { " (one running or owed)" } else { "" },
            r.events.pressure_events
        )
    } else {
        "off".to_string()
    };
    out.push_str(&format!(
        "replay on exec: {}; prediction: {prediction}; state: {}\n",
        if r.replay_on_exec { "on" } else { "off" },
        r.state_path.display()
    ));
    if let Some(rule) = &r.prefetch_rule {
        out.push_str(&format!("prefetching: {} (read cost {})\n", rule.reasons.join("; "), rule.read_cost));
    }
    if let Some(f) = &r.fill {
        out.push_str(&fill_line(f));
    }
    if let Some(t) = &r.prefetch_last_day {
        out.push_str(&prefetch_line(t));
    }
    let e = &r.events;
    out.push_str(&format!(
        "events: {} process, {} page ({} lost), {} launches learned ({} traced late, not learned), {} replays ({} known resident), {} file prefetches ({} known resident), {} wakeups\n",
        e.process_events,
        e.page_events,
        e.page_events_lost,
        e.launches_learned,
        e.launches_traced_late,
        e.replays,
        e.replays_known_resident,
        e.file_prefetches,
        e.file_prefetches_known_resident,
        e.wakeups
    ));
    if r.mode == "bpf" {
        let lost = if r.lost_by_cause.is_empty() {
            "none".to_string()
        } else {
            r.lost_by_cause.iter().map(|(why, n)| format!("{n} {why}")).collect::<Vec<_>>().join(", ")
        };
        out.push_str(&format!(
            "eBPF: {} path lookups, {} launches stopped (not followed), {} of them read pages their profile lacked (followed again; {} more not, their last refollows having taught nothing); {} workload runs sampled (followed for their opens only), {} sampled runs opened files their model lacked (followed whole again); {} runs followed for their opens only once they or their launch streamed a file; {} runs of settled workloads not followed (their pages resident); records lost: {lost}\n",
            e.lookup_events, e.launches_stopped, e.refollowed, e.refollows_held, e.runs_sampled, e.runs_unsettled, e.runs_streamed, e.runs_skipped_resident
        ));
    }
    let drops = if r.drops.is_empty() {
        "none".to_string()
    } else {
        r.drops.iter().map(|(why, n)| format!("{n} {why}")).collect::<Vec<_>>().join(", ")
    };
    out.push_str(&format!("dropped or cut (bounded queues): {drops}\n"));
    match &r.ahead {
        None => out.push_str("prefetch ahead of readers: off\n"),
        Some(a) if a.note != "on" => out.push_str(&format!("prefetch ahead of readers: {}\n", a.note)),
        Some(a) => out.push_str(&format!(
            "prefetch ahead of readers: on, {} streams followed now ({} since start), {} ahead, {} windows grown, {} pressure stops; {} pattern records ({} lost)\n",
            a.streams_now,
            a.streams_followed,
            human_bytes(a.bytes_ahead),
            a.windows_grown,
            a.pressure_stops,
            a.records,
            a.records_lost
        )),
    }
    match &r.ahead {
        Some(a) if a.note == "on" && a.drop_behind => out.push_str(&format!(
            "drop behind large read-once streams: on, {} streams now ({} since start), {} dropped\n",
            a.behind_now,
            a.behind_streams,
            human_bytes(a.bytes_dropped_behind)
        )),
        Some(a) if a.note == "on" => out.push_str("drop behind large read-once streams: off\n"),
        _ => {}
    }
    match &r.ahead {
        Some(a) if a.note == "on" && a.loop_prefix => out.push_str(&format!(
            "keep a resident prefix of loops larger than memory: on, {} loops now ({} since start), {} dropped\n",
            a.loops_now,
            a.loops_treated,
            human_bytes(a.bytes_dropped_loops)
        )),
        Some(a) if a.note == "on" => out.push_str("keep a resident prefix of loops larger than memory: off\n"),
        _ => {}
    }
    match &r.ahead {
        Some(a) if a.note == "on" && a.advise_random => out.push_str(&format!(
            "no readahead for random readers: on, {} files now ({} since start)\n",
            a.random_now, a.random_files
        )),
        Some(a) if a.note == "on" => out.push_str("no readahead for random readers: off\n"),
        _ => {}
    }
    if r.recent_launches.is_empty() {
        out.push_str("no launch recorded yet\n");
        return out;
    }
    out.push_str("recent launches (hit rate = pages used that were not read from disk during the launch):\n");
    out.push_str(&format!(
        "  {:<9} {:>5} {:>8} {:>10} {:>9} {:>9} {:>11}  {}\n",
        "when", "hit", "used", "from disk", "expected", "resident", "prefetched", "application"
    ));
    for l in &r.recent_launches {
        out.push_str(&format!(
            "  {:<9} {:>4.0}% {:>8} {:>10} {:>9} {:>9} {:>11}  {}\n",
            ago(l.started_ms),
            l.hit_rate() * 100.0,
            l.pages_used,
            l.pages_read_from_disk,
            l.pages_expected,
            l.pages_resident_at_exec,
            human_bytes(l.bytes_prefetched),
            l.app
        ));
    }
    out
}

/// The free-memory tier's line: what it holds and why.
fn fill_line(f: &crate::daemon::control::FillStatus) -> String {
    let mut line = format!(
        "free-memory tier: {}; MemFree {}, reserve {}, room {}",
        f.reason,
        human_bytes(f.free_bytes),
        human_bytes(f.reserve_bytes),
        human_bytes(f.room_bytes)
    );
    if f.planned_bytes > 0 || !f.apps.is_empty() {
        line.push_str(&format!("; planned {} over {} applications", human_bytes(f.planned_bytes), f.apps.len()));
    }
    line.push_str(&format!("; {} loaded since start\n", human_bytes(f.loaded_bytes)));
    line
}

/// What prefetching bought over the last day, in one line.
fn prefetch_line(t: &augur_core::plan::LedgerTotals) -> String {
    format!(
        "prefetching, last day: {} launches replayed, {} predicted, {} loaded in time; {} prefetched, {} used, {} wasted ({:.0} %)\n",
        t.launches,
        t.predicted,
        t.loaded_in_time,
        human_bytes(t.prefetched_bytes),
        human_bytes(t.used_bytes),
        human_bytes(t.wasted_bytes),
        t.wasted_share() * 100.0
    )
}

/// The boot plan the next boot will load (`augur boot`), read from the state without writing;
/// nothing when the configuration or the state cannot be read.
fn boot_plan_lines(address: &DaemonAddress) -> String {
    let Ok(config) = crate::config_file::load(address.config.as_deref()) else { return String::new() };
    match augur_store::state::read_boot_history(&config.daemon.state_path) {
        Ok(history) => render_boot_plan(&history.plan(&config.boot_settings(augur_os::sense::trace_session::PROFILE_PAGE_SIZE))),
        Err(e) => format!("boot plan: cannot read it ({e})\n"),
    }
}

/// The boot plan for people: boots merged, size, and each phase's share.
fn render_boot_plan(plan: &augur_core::model::boot::BootPlan) -> String {
    if plan.boots == 0 {
        return "boot plan: no boot recorded yet (augur-boot.service records each boot)\n".into();
    }
    let phases: Vec<String> = plan
        .phases
        .iter()
        .map(|p| format!("{} {} in {} files", p.phase, human_bytes(p.page_count() * plan.page_size), p.files.len()))
        .collect();
    format!(
        "boot plan: {} boots merged, {} in {} files; by phase: {}\n",
        plan.boots,
        human_bytes(plan.page_count() * plan.page_size),
        plan.file_count(),
        if phases.is_empty() { "none".to_string() } else { phases.join(", ") }
    )
}

/// Runs the subcommand.
pub fn run(args: StatusArgs) -> Result<ExitCode> {
    let socket = args.address.socket()?;
    match control::request(&socket, &Request::Status)? {
        Response::Status(report) => {
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&report).map_err(|e| Error::io("encoding", std::io::Error::other(e)))?
                );
            } else {
                print!("{}", render(&report));
                print!("{}", boot_plan_lines(&args.address));
            }
            Ok(ExitCode::SUCCESS)
        }
        Response::Error { message } => Err(Error::DaemonRefused(message)),
        other => Err(Error::DaemonRefused(format!("unexpected answer {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefetch_line_says_what_was_predicted_used_and_wasted() {
        let t = augur_core::plan::LedgerTotals {
            launches: 10,
            predicted: 4,
            loaded_in_time: 3,
            prefetched_bytes: 8 << 20,
            used_bytes: 6 << 20,
            wasted_bytes: 2 << 20,
        };
        assert_eq!(
            prefetch_line(&t),
            "prefetching, last day: 10 launches replayed, 4 predicted, 3 loaded in time; 8.0 MiB prefetched, 6.0 MiB used, 2.0 MiB wasted (25 %)\n"
        );
    }

    #[test]
    fn the_boot_plan_line_says_boots_size_and_phases() {
        use augur_core::model::boot::{BootPhase, BootPlan, PhasePlan};
        use augur_core::model::profile::{FileIdentity, FileProfile, UsedRange};
        use augur_core::model::range::PageRange;
        assert!(render_boot_plan(&BootPlan { page_size: 4096, boots: 0, phases: vec![] }).contains("no boot recorded"));
        let file = FileProfile {
            path: "/sbin/init".into(),
            identity: FileIdentity { dev: 1, ino: 2, size: 3, mtime_ns: 4 },
            ranges: vec![UsedRange { range: PageRange::new(0, 256), first_use_us: 0 }],
        };
        let plan = BootPlan { page_size: 4096, boots: 3, phases: vec![PhasePlan { phase: BootPhase::Early, files: vec![file] }] };
        assert_eq!(
            render_boot_plan(&plan),
            "boot plan: 3 boots merged, 1.0 MiB in 1 files; by phase: early 1.0 MiB in 1 files\n"
        );
    }

    #[test]
    fn bytes_for_people() {
        assert_eq!(human_bytes(12), "12 B");
        assert_eq!(human_bytes(3 << 20), "3.0 MiB");
    }
}
