//! `augur simulate`: replays usage traces through the predictors and the planner over a simulated
//! page cache and prints a scenario × predictor table (or JSON). The simulation is
//! [`augur_core::sim::replay`]; this file parses arguments and renders.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::error::{Error, Result};
use augur_core::sim::replay::SIM_PREDICTORS;
use augur_core::sim::{SimConfig, SimReport, predictors_named, simulate};

/// Arguments of `augur simulate`.
#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Usage trace to replay (repeat for several scenarios; the file stem names the scenario).
    #[arg(long, required = true)]
    pub trace: Vec<PathBuf>,
    /// Predictor: none, naive, preload, augur, an ablation (augur+fading, augur-no-sequence,
    /// augur-no-time-of-day, augur-no-session), `all` (none, naive, preload, augur) or `ablation`.
    #[arg(long, default_value = "all")]
    pub predictor: String,
    /// Cache and prefetch budget (bytes, or with K/M/G/KiB/MiB/GiB); default: half the bytes of
    /// all working sets in each trace.
    #[arg(long, value_parser = parse_bytes)]
    pub budget: Option<u64>,
    /// Without --budget: the budget as this share of the bytes of all working sets in each trace.
    #[arg(long, default_value_t = 0.5)]
    pub budget_share: f64,
    /// The simulated machine's memory for the page cache (bytes, suffixes allowed; its MemTotal
    /// for the free-memory tier's reserve); default: the budget. With more memory than the
    /// budget, the free-memory tier (`[predict] fill_free_memory`) fills what is free beyond its
    /// reserve.
    #[arg(long, value_parser = parse_bytes)]
    pub memory: Option<u64>,
    /// augur's cost model: cost of reading a byte ahead of time, in bytes of launch-time reading
    /// saved (`[predict] read_cost`).
    #[arg(long, default_value_t = augur_core::plan::DEFAULT_READ_COST)]
    pub read_cost: f64,
    /// augur's cost model: least chance counted that a byte pushed out is needed again
    /// (`[predict] evict_cost`).
    #[arg(long, default_value_t = augur_core::plan::DEFAULT_EVICT_COST)]
    pub evict_cost: f64,
    /// Print, on standard error, the wall time each replay took per planning round.
    #[arg(long)]
    pub round_cost: bool,
    /// Disk read rate for prefetching in bytes per second (suffixes allowed); 0 = instantaneous.
    #[arg(long, value_parser = parse_bytes, default_value = "64MiB")]
    pub fetch_rate: u64,
    /// After the tables, why launches missed and where the wasted bytes went.
    #[arg(long)]
    pub diagnose: bool,
    /// Print JSON instead of Markdown tables.
    #[arg(long)]
    pub json: bool,
}

/// Parses `123`, `64M`, `64MiB`, `1.5G` into bytes (binary multiples).
pub fn parse_bytes(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("{s:?} is not a byte count"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" | "kb" => 1 << 10,
        "m" | "mib" | "mb" => 1 << 20,
        "g" | "gib" | "gb" => 1 << 30,
        "t" | "tib" | "tb" => 1 << 40,
        other => return Err(format!("unknown unit {other:?} in {s:?}")),
    };
    let v = n * mult as f64;
    if !v.is_finite() || v < 0.0 || v > u64::MAX as f64 {
        return Err(format!("{s:?} is out of range"));
    }
    Ok(v as u64)
}

/// Runs the subcommand.
pub fn run(args: SimulateArgs) -> Result<ExitCode> {
    let predictors = predictors_named(&args.predictor).ok_or_else(|| {
        Error::Usage(format!("unknown predictor {:?} (known: {}, all, ablation)", args.predictor, SIM_PREDICTORS.join(", ")))
    })?;
    for (name, v) in [("--budget-share", args.budget_share), ("--read-cost", args.read_cost), ("--evict-cost", args.evict_cost)] {
        if !(v.is_finite() && v >= 0.0) || (name == "--budget-share" && v > 1.0) {
            return Err(Error::Usage(format!("{name} {v} is out of range")));
        }
    }
    let config = SimConfig {
        budget: args.budget,
        budget_share: args.budget_share,
        memory: args.memory,
        fetch_rate: args.fetch_rate,
        read_cost: args.read_cost,
        evict_cost: args.evict_cost,
        ..SimConfig::default()
    };
    let mut report = SimReport::default();
    for path in &args.trace {
        let trace = augur_store::usage_trace_file::load(path)?;
        let scenario = path.file_stem().map_or_else(|| path.display().to_string(), |s| s.to_string_lossy().into_owned());
        let scenario = scenario.strip_suffix(".trace").unwrap_or(&scenario).to_string();
        for (name, which) in &predictors {
            let started = std::time::Instant::now();
            let result = simulate(&trace, &scenario, name, *which, &config);
            if args.round_cost && result.rounds > 0 {
                // The whole replay (cache, fetching, prediction and planning) over its rounds: an
                // upper bound of a round's cost.
                let per_round = started.elapsed().as_secs_f64() * 1e6 / result.rounds as f64;
                eprintln!(
                    "{scenario} {name}: {} rounds, {per_round:.1} µs per round (whole replay), at most {} footprint ranges per round",
                    result.rounds, result.max_ranges_per_round
                );
            }
            report.results.push(result);
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
    } else {
        print!("{}", report.to_markdown());
        if args.diagnose {
            print!("\n{}", report.to_diagnosis_markdown());
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_parse() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("64MiB"), Ok(64 << 20));
        assert_eq!(parse_bytes("1.5G"), Ok(3 << 29));
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("5 parsecs").is_err());
    }
}
