//! `augur gen-trace`: writes a seeded, reproducible usage trace for one of the simulator's
//! scenarios. The generator is [`augur_core::sim::scenario`]; this file only parses and writes.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::error::{Error, Result};
use augur_core::error::IoContext;
use augur_core::model::usage_trace;
use augur_core::sim::{Scenario, generate};
use augur_store::atomic_file::AtomicFile;

/// Arguments of `augur gen-trace`.
#[derive(Debug, Args)]
pub struct GenTraceArgs {
    /// Scenario: single-user, two-users, changing-habits, random-usage or many-apps.
    #[arg(long)]
    pub scenario: String,
    /// Seed of the generator: the same seed gives the same trace, byte for byte.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Number of days to generate (day 0 is a Monday).
    #[arg(long, default_value_t = 14, value_parser = clap::value_parser!(u32).range(1..=3650))]
    pub days: u32,
    /// Output file (default: standard output).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

/// Runs the subcommand.
pub fn run(args: GenTraceArgs) -> Result<ExitCode> {
    let scenario = Scenario::from_name(&args.scenario).ok_or_else(|| {
        let names: Vec<&str> = Scenario::ALL.iter().map(|s| s.name()).collect();
        Error::Usage(format!("unknown scenario {:?} (known: {})", args.scenario, names.join(", ")))
    })?;
    let trace = generate(scenario, args.seed, args.days);
    match &args.output {
        Some(path) => {
            let mut f = AtomicFile::create(path, 0o666).map_err(|e| Error::io_at(path, "creating", e))?;
            usage_trace::write_to(&trace, &mut f).context(|| format!("writing {}", path.display()))?;
            f.commit().context(|| format!("writing {}", path.display()))?;
        }
        None => {
            let stdout = std::io::stdout();
            let mut lock = stdout.lock();
            usage_trace::write_to(&trace, &mut lock).context(|| "writing the trace to standard output".into())?;
            lock.flush().context(|| "writing the trace to standard output".into())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
