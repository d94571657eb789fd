//! `augur prefetch`: loads the pages of one or more launch profiles into the page cache and
//! reports, verified, what was already there, what was loaded and what could not be.
//!
//! Runs unprivileged too: it needs only read access to the files (files it cannot open are
//! listed as unreadable). Root adds `O_NOATIME` on every file and exact `mincore` residency.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use serde::Serialize;

use crate::error::Result;
use augur_core::error::IoContext;
use augur_os::fetch::{CancelFlag, FetchOptions, FetchPlan, FetchReport, IoPriority, OrderPolicy, Prefetcher};
use augur_store::profile_file;

/// Request order on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OrderArg {
    /// Physical location on rotational disks, first use otherwise.
    Auto,
    /// The order the application first used the pages.
    FirstUse,
    /// Physical location on the disk (FIEMAP).
    Physical,
}

impl From<OrderArg> for OrderPolicy {
    fn from(o: OrderArg) -> Self {
        match o {
            OrderArg::Auto => OrderPolicy::Auto,
            OrderArg::FirstUse => OrderPolicy::FirstUse,
            OrderArg::Physical => OrderPolicy::Physical,
        }
    }
}

/// Arguments of `augur prefetch`.
#[derive(Debug, Args)]
pub struct PrefetchArgs {
    /// Fetch at best-effort I/O priority instead of idle (idle yields to all other I/O).
    #[arg(long)]
    pub best_effort: bool,
    /// Order of the requests.
    #[arg(long, value_enum, default_value_t = OrderArg::Auto)]
    pub order: OrderArg,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Launch profiles written by `augur trace`.
    #[arg(required = true, value_name = "PROFILE")]
    pub profiles: Vec<PathBuf>,
}

#[derive(Serialize)]
struct JsonOutput<'a> {
    profiles: &'a [PathBuf],
    #[serde(flatten)]
    report: &'a FetchReport,
}

/// Runs the subcommand.
pub fn run(args: PrefetchArgs) -> Result<ExitCode> {
    let profiles = args.profiles.iter().map(|p| profile_file::load(p)).collect::<Result<Vec<_>, _>>()?;
    let plan = FetchPlan::from_profiles(&profiles, augur_os::fetch::page_size());
    let options = FetchOptions {
        priority: if args.best_effort { IoPriority::BEST_EFFORT } else { IoPriority::Idle },
        order: args.order.into(),
        ..FetchOptions::default()
    };
    let report = Prefetcher::new(options).fetch(&plan, &CancelFlag::new());
    let mut out = std::io::stdout().lock();
    if args.json {
        let text = serde_json::to_string_pretty(&JsonOutput { profiles: &args.profiles, report: &report })
            .map_err(|e| crate::error::Error::io("rendering JSON", e.into()))?;
        writeln!(out, "{text}").context(|| "writing to stdout".into())?;
    } else {
        out.write_all(render_table(&args.profiles, &report).as_bytes()).context(|| "writing to stdout".into())?;
    }
    Ok(ExitCode::SUCCESS)
}

fn mib(pages: u64, page_size: u64) -> f64 {
    (pages * page_size) as f64 / (1024.0 * 1024.0)
}

/// Problems listed in the table at most (all are in `--json`).
const PROBLEMS_SHOWN: usize = 20;

/// The report for people.
pub fn render_table(profiles: &[PathBuf], r: &FetchReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let ps = r.page_size;
    let _ = writeln!(
        s,
        "prefetched {} profile{} ({} files), ordered by {}, I/O priority {}{}",
        profiles.len(),
        if profiles.len() == 1 { "" } else { "s" },
        r.files.wanted,
        r.order.name(),
        r.priority.name(),
        if r.priority_applied { "" } else { " (could not be set)" },
    );
    let _ = writeln!(s, "  {:<20} {:>10} {:>10}", "pages", "count", "MiB");
    let rows = [
        ("wanted", r.pages.wanted),
        ("already resident", r.pages.already_resident),
        ("loaded", r.pages.loaded),
        ("failed", r.pages.failed),
        ("skipped (refused)", r.pages.skipped),
    ];
    for (name, n) in rows {
        let _ = writeln!(s, "  {:<20} {:>10} {:>10.1}", name, n, mib(n, ps));
    }
    if r.pages.unverified > 0 {
        let _ = writeln!(s, "  {:<20} {:>10} {:>10.1}", "read, unverified", r.pages.unverified, mib(r.pages.unverified, ps));
    }
    if r.pages.not_attempted > 0 {
        let _ = writeln!(s, "  {:<20} {:>10} {:>10.1}", "not attempted", r.pages.not_attempted, mib(r.pages.not_attempted, ps));
    }
    let f = &r.files;
    let _ = writeln!(
        s,
        "  files: {} fetched, {} stale, {} missing, {} not regular, {} unreadable, {} with read errors",
        f.fetched, f.stale, f.missing, f.not_regular, f.unreadable, f.read_errors
    );
    if r.lookups_replayed > 0 {
        let _ = writeln!(s, "  path lookups replayed: {}", r.lookups_replayed);
    }
    let _ = writeln!(
        s,
        "  resident now: {:.1} % of wanted; read {:.1} MiB in {:.0} ms{}",
        r.resident_share() * 100.0,
        r.bytes_read as f64 / (1024.0 * 1024.0),
        r.elapsed_ms,
        if r.cancelled { " (cancelled)" } else { "" }
    );
    if r.files.unverified > 0 {
        let _ = writeln!(
            s,
            "  note: residency of {} files is unverified: the kernel reports it only to their owner or root",
            r.files.unverified
        );
    }
    for p in r.problems.iter().take(PROBLEMS_SHOWN) {
        let kind = serde_json::to_value(p.kind).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
        let _ = writeln!(s, "  {:<12} {}: {}", kind, p.path.display(), p.detail);
    }
    if r.problems.len() > PROBLEMS_SHOWN {
        let _ = writeln!(s, "  ... and {} more (--json lists all)", r.problems.len() - PROBLEMS_SHOWN);
    }
    s
}
