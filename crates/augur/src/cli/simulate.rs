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
    /// Disk read rate for prefetching in bytes per second (suffixes allowed); 0 = instantaneous.
    #[arg(long, value_parser = parse_bytes, default_value = "64MiB")]
    pub fetch_rate: u64,
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
    let config = SimConfig { budget: args.budget, fetch_rate: args.fetch_rate, ..SimConfig::default() };
    let mut report = SimReport::default();
    for path in &args.trace {
        let trace = augur_store::usage_trace_file::load(path)?;
        let scenario = path.file_stem().map_or_else(|| path.display().to_string(), |s| s.to_string_lossy().into_owned());
        let scenario = scenario.strip_suffix(".trace").unwrap_or(&scenario).to_string();
        for (name, which) in &predictors {
            report.results.push(simulate(&trace, &scenario, name, *which, &config));
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
    } else {
        print!("{}", report.to_markdown());
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
