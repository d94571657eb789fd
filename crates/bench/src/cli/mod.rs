//! The `augur-bench` command line: argument definitions, dispatch, and rendering of errors as one
//! line with the same exit codes as `augur`. The work is done by the `augur_bench` library.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use augur_bench::error::{BenchError, Result};
use augur_bench::machine::{self, ActiveMachine, MachineProfile, MachineSettings};

pub mod aasfp;
pub mod balloon;
pub mod boot;
pub mod command;
pub mod dear;
pub mod kroeger;
pub mod round_cost;
pub mod suite;

/// augur-bench: time a command's start-up cold, warm and prefetched, or run the benchmark suite
/// (machine profiles, desktop applications, peers). Not part of the installed package.
#[derive(Debug, Parser)]
#[command(
    name = "augur-bench",
    version,
    about,
    long_about = None,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Cli {
    #[command(flatten)]
    pub bench: command::BenchArgs,
    #[command(subcommand)]
    pub internal: Option<Internal>,
}

/// Subcommands the suite starts itself.
#[derive(Debug, Subcommand)]
pub enum Internal {
    /// Hold the locked memory of the small-memory machine profile (started by the suite).
    #[command(hide = true, name = "balloon")]
    Balloon(balloon::BalloonArgs),
    /// AASFP's micro-benchmark table (forward and backward readers, 4 and 32 KiB blocks, and a
    /// strided reader), kernel alone against augur's daemon as installed.
    Aasfp(aasfp::AasfpArgs),
    /// The reading process `augur-bench aasfp` times (started by it).
    #[command(hide = true, name = "aasfp-reader")]
    AasfpReader(aasfp::ReaderArgs),
    /// Boots a Debian system (systemd in a container on a throttled disk image) under four setups
    /// (no prefetcher, preload 0.6.4, augur-boot.service, augur-init), every cache dropped before each boot:
    /// time to multi-user.target and to the autostarted application's first window.
    Boot(boot::BootArgs),
    /// Kroeger and Long's four application benchmarks (make -j1, a large link, ctags -R, a
    /// long-running reader in a learned order): I/O wait and elapsed time, augur off against on,
    /// warm-up then measured runs with caches dropped before each, under the machine profiles.
    Kroeger(kroeger::KroegerArgs),
    /// The long-running reader `augur-bench kroeger` times (started by it).
    #[command(hide = true, name = "kroeger-reader")]
    KroegerReader(kroeger::ReaderArgs),
    /// DEAR's four single-application reference patterns (sequential, looping, temporally
    /// clustered, probabilistic): disk I/Os and response time, kernel alone against augur's
    /// daemon as installed.
    Dear(dear::DearArgs),
    /// The reading process `augur-bench dear` runs (started by it).
    #[command(hide = true, name = "dear-reader")]
    DearReader(dear::ReaderArgs),
    /// The CPU time of one prediction round with many learned applications: the predictor's
    /// answer, the planning round over the likeliest ones' replay profiles, the fetch plans.
    RoundCost(round_cost::RoundCostArgs),
}

fn dispatch(cli: Cli) -> Result<ExitCode> {
    match cli.internal {
        Some(Internal::Balloon(a)) => balloon::run(a),
        Some(Internal::Aasfp(a)) => aasfp::run(a),
        Some(Internal::AasfpReader(a)) => aasfp::run_reader(a),
        Some(Internal::Boot(a)) => boot::run(a),
        Some(Internal::Kroeger(a)) => kroeger::run(a),
        Some(Internal::KroegerReader(a)) => kroeger::run_reader(a),
        Some(Internal::Dear(a)) => dear::run(a),
        Some(Internal::DearReader(a)) => dear::run_reader(a),
        Some(Internal::RoundCost(a)) => round_cost::run(a),
        None => command::run(cli.bench),
    }
}

/// Entry point of the binary: parse, run, render any error as one line.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let _ = tracing_subscriber::fmt().without_time().with_target(false).with_writer(std::io::stderr).try_init();
    match dispatch(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("augur-bench: {err}");
            ExitCode::from(exit_code(err))
        }
    }
}

/// The exit code of `err`, in `augur`'s numbering: the layers' errors exactly as `augur` maps
/// them, the benchmark's own by the class they belong to.
fn exit_code(err: BenchError) -> u8 {
    use augur::error::{Error, exit};
    match err {
        BenchError::Format(e) => Error::from(e).exit_code(),
        BenchError::Os(e) => Error::from(e).exit_code(),
        BenchError::Store(e) => Error::from(e).exit_code(),
        BenchError::Config(e) => Error::from(e).exit_code(),
        BenchError::Io(e) => Error::from(e).exit_code(),
        BenchError::NotFound { .. } => exit::NOT_FOUND,
        BenchError::Usage(_) => exit::USAGE,
        BenchError::Command { .. } | BenchError::TimedOut { .. } | BenchError::Interrupted => exit::COMMAND,
    }
}

/// The as-is machine, held for the benchmark's time, with the name its table gives it. In a VM
/// whose balloon reports free pages, the first touch of a reported page is a host-side fault
/// (tens of microseconds); a reader of a 1 GiB file through a 256 MiB cgroup touches 262,144
/// freed pages per run, and whether the allocator handed it reported ones or recycled ones
/// made Forward 2 take 0.5 or 1.4 s, with augur or without. Reporting is paused and the free
/// memory backed, as the suite does ([`ActiveMachine::apply`]).
pub(crate) fn prepare_as_is() -> Result<PreparedMachine> {
    prepare(MachineProfile::AsIs)
}

/// [`prepare_as_is`] for any machine profile: the small slow machine's balloon and disk throttle
/// (entered by this process, so the reader and the daemon it starts are under it) too.
pub(crate) fn prepare(profile: MachineProfile) -> Result<PreparedMachine> {
    if let Some(msg) = machine::clean_leftovers() {
        eprintln!("{msg}");
    }
    let active = ActiveMachine::apply(profile, &MachineSettings::default())?;
    let host_memory = active.record.host_memory_note();
    if !host_memory.is_empty() {
        eprintln!("machine {profile}: {host_memory}");
    }
    let mut name = profile.name().to_string();
    if let (Some(t), Some(dev)) = (active.record.throttle, active.record.throttled_device.as_ref()) {
        name.push_str(&format!(
            ", reads of {dev} throttled to {} operations and {} MB a second",
            t.read_iops,
            t.read_bps / 1_000_000
        ));
    }
    if active.record.balloon_locked_bytes > 0 {
        name.push_str(&format!(", {} MiB available", active.record.mem_available_after >> 20));
    }
    Ok(PreparedMachine { throttle: active.record.throttle, _active: active, host_memory, name })
}

/// The machine prepared by [`prepare`]; dropping it undoes the preparation.
pub(crate) struct PreparedMachine {
    _active: ActiveMachine,
    /// What was done to the guest's free memory, empty if nothing.
    pub host_memory: String,
    /// The disk throttle in force, if any.
    pub throttle: Option<augur_bench::throttle::DiskThrottle>,
    name: String,
}

impl PreparedMachine {
    /// The profile's name for a table ("as-is", "small-memory+slow-disk, reads of 254:0
    /// throttled ..."), with what was done to it.
    pub fn profile_name(&self) -> String {
        if self.host_memory.is_empty() { self.name.clone() } else { format!("{} ({})", self.name, self.host_memory) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use augur::error::exit;
    use augur_bench::error::{ConfigError, OsError};

    #[test]
    fn bench_errors_map_to_augurs_codes() {
        assert_eq!(exit_code(BenchError::NotFound { path: "/usr/bin/augur".into() }), exit::NOT_FOUND);
        assert_eq!(exit_code(BenchError::Usage("--runs must be at least 1".into())), exit::USAGE);
        assert_eq!(exit_code(BenchError::Command { command: "x".into(), detail: "exited".into() }), exit::COMMAND);
        assert_eq!(exit_code(BenchError::Interrupted), exit::COMMAND);
        let suite = ConfigError { path: "suite.toml".into(), line: Some(5), detail: "unknown field".into() };
        assert_eq!(exit_code(suite.into()), exit::CONFIG);
        assert_eq!(exit_code(OsError::NotRoot { action: "augur-bench".into() }.into()), exit::PERMISSION);
        assert_eq!(exit_code(BenchError::kernel("a block-I/O cgroup controller", "none")), exit::KERNEL);
        assert_eq!(exit_code(BenchError::io("x", std::io::Error::other("x"))), exit::FAILURE);
    }
}
