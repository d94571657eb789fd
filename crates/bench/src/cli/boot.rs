//! `augur-bench boot`: boots the Debian system image again and again under four setups (no
//! prefetcher, preload 0.6.4, augur-boot.service, augur-init) and prints the Markdown table of boot-to-target
//! and boot-plus-application times ([`augur_bench::boot`]). Progress goes to stderr.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use augur_bench::boot::{self, BootBench, BootReportContext, BootSetup, SetupBoots};
use augur_bench::error::{BenchError, Result};
use augur_bench::prefetchers;
use augur_bench::throttle::DiskThrottle;

/// Arguments of `augur-bench boot`.
#[derive(Debug, Args)]
pub struct BootArgs {
    /// Measured boots per setup.
    #[arg(long, default_value_t = 10)]
    pub runs: usize,
    /// Unmeasured boots per setup first (the first boot learns without a plan).
    #[arg(long, default_value_t = 1)]
    pub warmup_boots: usize,
    /// The system image (scripts/bench-boot-image builds it).
    #[arg(long, default_value = "/var/cache/augur-bench/boot/rootfs.img")]
    pub image: PathBuf,
    /// Where the image is mounted and each boot's logs are kept.
    #[arg(long, default_value = boot::WORK_DIR)]
    pub work_dir: PathBuf,
    /// Seconds the booted system stays up after the application's window, for the prefetchers
    /// to learn (preload's cycle is 20 s, augur records until 30 s after login).
    #[arg(long, default_value_t = 45)]
    pub hold_secs: u64,
    /// Longest one boot may take, start to power-off, in seconds.
    #[arg(long, default_value_t = 300)]
    pub boot_timeout_secs: u64,
    /// Only these setups (plain, preload, augur, augur-init); default all.
    #[arg(long = "setup")]
    pub setups: Vec<BootSetup>,
}

/// Runs the boots; prints the table.
pub fn run(args: BootArgs) -> Result<ExitCode> {
    augur_os::privilege::require_root("augur-bench boot")?;
    if args.runs == 0 {
        return Err(BenchError::Usage("--runs must be at least 1".into()));
    }
    augur_bench::interrupt::install()?;
    let setups: Vec<BootSetup> = if args.setups.is_empty() { BootSetup::ALL.to_vec() } else { args.setups.clone() };
    let augur_exe = prefetchers::augur_beside_me()?;
    let mut bench = BootBench {
        image: args.image.clone(),
        work_dir: args.work_dir.clone(),
        augur_config: prefetchers::SHIPPED_AUGUR_CONFIG.to_string(),
        hold_secs: args.hold_secs,
        boot_timeout: Duration::from_secs(args.boot_timeout_secs),
        throttle: DiskThrottle::default(),
        loop_device: None,
    };
    augur_bench::throttle::remove_leftovers();
    // Each boot starts with every cache dropped: gigabytes freed that the balloon would report
    // to the host, whose first touch again (a prefetcher's early reads most) is a host fault.
    let machine = super::prepare_as_is()?;
    bench.reset(&augur_exe)?;
    // Each run's logs only (a boot's logs are in logs/ROUND-SETUP).
    let _ = std::fs::remove_dir_all(args.work_dir.join("logs"));
    let mut rows: Vec<(BootSetup, SetupBoots)> = setups.iter().map(|s| (*s, SetupBoots::default())).collect();
    let rounds = args.warmup_boots + args.runs;
    for round in 0..rounds {
        let measured = round >= args.warmup_boots;
        // Each round starts one setup later than the last: whatever the boot before leaves
        // behind (the host's state, the image's journal) falls on every setup alike.
        let count = rows.len();
        for i in 0..count {
            let (setup, boots) = &mut rows[(round + i) % count];
            let logs = args.work_dir.join("logs").join(format!("{:02}-{}", round, setup.arg()));
            let what = if measured {
                format!("boot {}/{}", round + 1 - args.warmup_boots, args.runs)
            } else {
                format!("warm-up boot {}/{} (not counted)", round + 1, args.warmup_boots)
            };
            match bench.boot_once(*setup, &logs)? {
                Ok(t) => {
                    eprintln!(
                        "{what}, {}: multi-user.target at {:.2} s, window at {:.2} s, {:.1} MiB read",
                        setup.describe(),
                        t.target_s,
                        t.window_s,
                        t.read_mib
                    );
                    if measured {
                        boots.boots.push(t);
                    }
                }
                Err(reason) if round == 0 && boots.boots.is_empty() && *setup == setups[0] => {
                    // The very first boot: the image or the machine is at fault, not a setup.
                    return Err(BenchError::Command {
                        command: format!("the first boot ({})", setup.describe()),
                        detail: reason,
                    });
                }
                Err(reason) => {
                    eprintln!("{what}, {}: FAILED: {reason}", setup.describe());
                    if measured {
                        boots.failed.push(reason);
                    }
                }
            }
        }
    }
    let ctx = BootReportContext {
        warmup_boots: args.warmup_boots,
        throttle: bench.throttle,
        hold_secs: args.hold_secs,
        host_memory: machine.host_memory.clone(),
    };
    print!("{}", boot::markdown(&ctx, &rows));
    Ok(ExitCode::SUCCESS)
}
