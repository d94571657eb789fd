//! DEAR's four single-application reference patterns, reproduced (`augur-bench dear`): a file
//! larger than the memory left to the reader is read in 8 KiB blocks (DEAR's block size)
//! sequentially, in a loop, in temporal clusters and with fixed per-block probabilities, cold, by
//! the kernel alone and with augur's daemon running as installed; disk reads and the response
//! time split into I/O stall, system and user time per run.
//!
//! The reader is a separate process (`augur-bench dear-reader`, [`read_case`]) in the memory
//! cgroup of [`crate::aasfp::ReaderCgroup`]; it reports its own elapsed, user and system time and
//! the bytes it caused to be read from disk (`read_bytes` of `/proc/self/io`: load-independent,
//! unlike the times). Cold means the file's pages are dropped before each run.
//!
//! It owns the cases, their offsets, the reader's measurement and the Markdown; the cgroup,
//! eviction and daemon are `aasfp`'s and `prefetchers`'. It must not prefetch itself.

use std::fmt;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;
use std::str::FromStr;
use std::time::{Duration, Instant};

use augur_core::sim::seeded::SeededRng;

use crate::aasfp::{ReaderCgroup, evict};
use crate::error::{BenchError, IoContext, Result};
use crate::stats;

/// DEAR's block size.
pub const BLOCK: u64 = 8192;

/// One reference pattern of DEAR's single-application table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Case {
    /// The file read through once, forward.
    Sequential,
    /// A range of the file larger than the reader's memory read through several times.
    Looping,
    /// Phases each reading random blocks of one region (recently used blocks are used again).
    Clustered,
    /// Blocks drawn independently with fixed, skewed probabilities (Zipf).
    Probabilistic,
}

/// Every case, in the table's order.
pub const CASES: [Case; 4] = [Case::Sequential, Case::Looping, Case::Clustered, Case::Probabilistic];

/// The shape of the workloads, from the file and memory sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// File size, bytes.
    pub file_bytes: u64,
    /// The loop's length, bytes (from the file's start).
    pub loop_bytes: u64,
    /// Passes over the loop.
    pub passes: u64,
    /// Region of one temporal cluster, bytes.
    pub cluster_bytes: u64,
    /// Reads of the clustered and probabilistic cases.
    pub random_reads: u64,
}

impl Shape {
    /// The default shape for a reader that can have `memory_bytes`: a loop of 1.5 times that
    /// memory read 4 times, clusters of a quarter of it, and as many random reads as the memory
    /// has blocks.
    pub fn for_memory(file_bytes: u64, memory_bytes: u64) -> Shape {
        Shape {
            file_bytes,
            loop_bytes: (memory_bytes / 2 * 3).min(file_bytes),
            passes: 4,
            cluster_bytes: (memory_bytes / 4).max(BLOCK),
            random_reads: (memory_bytes / BLOCK).max(1),
        }
    }
}

impl Case {
    /// The table's name.
    pub fn name(self) -> &'static str {
        match self {
            Case::Sequential => "Sequential",
            Case::Looping => "Looping",
            Case::Clustered => "Temporally clustered",
            Case::Probabilistic => "Probabilistic",
        }
    }

    /// The command-line name.
    pub fn arg(self) -> &'static str {
        match self {
            Case::Sequential => "sequential",
            Case::Looping => "looping",
            Case::Clustered => "clustered",
            Case::Probabilistic => "probabilistic",
        }
    }

    /// What the case reads, for the table.
    pub fn describe(self, shape: &Shape) -> String {
        match self {
            Case::Sequential => format!("{} MiB once", shape.file_bytes >> 20),
            Case::Looping => format!("first {} MiB, {} times", shape.loop_bytes >> 20, shape.passes),
            Case::Clustered => {
                format!("{} reads in 16 phases, each in one {} MiB region", shape.random_reads, shape.cluster_bytes >> 20)
            }
            Case::Probabilistic => format!("{} reads, Zipf over {} MiB", shape.random_reads, shape.file_bytes >> 20),
        }
    }

    /// The offsets read, in order (seeded: the same on every run).
    pub fn offsets(self, shape: &Shape) -> Vec<u64> {
        let blocks = (shape.file_bytes / BLOCK).max(1);
        let mut rng = SeededRng::new(21);
        match self {
            Case::Sequential => (0..blocks).map(|b| b * BLOCK).collect(),
            Case::Looping => {
                let n = (shape.loop_bytes / BLOCK).max(1);
                (0..shape.passes).flat_map(|_| (0..n).map(|b| b * BLOCK)).collect()
            }
            Case::Clustered => {
                let region = (shape.cluster_bytes / BLOCK).clamp(1, blocks);
                let phases = 16;
                let per_phase = (shape.random_reads / phases).max(1);
                let mut out = Vec::new();
                for _ in 0..phases {
                    let base = rng.range(0, blocks - region + 1);
                    for _ in 0..per_phase {
                        out.push((base + rng.range(0, region)) * BLOCK);
                    }
                }
                out
            }
            Case::Probabilistic => {
                // Rank r has weight 1/(r+1); ranks are spread over the file by a seeded shuffle.
                let mut cumulative = Vec::with_capacity(blocks as usize);
                let mut total = 0.0;
                for r in 0..blocks {
                    total += 1.0 / (r + 1) as f64;
                    cumulative.push(total);
                }
                let mut place: Vec<u64> = (0..blocks).collect();
                for i in (1..place.len()).rev() {
                    let j = rng.range(0, i as u64 + 1) as usize;
                    place.swap(i, j);
                }
                (0..shape.random_reads)
                    .map(|_| {
                        let x = rng.unit() * total;
                        let rank = cumulative.partition_point(|c| *c <= x).min(place.len() - 1);
                        place[rank] * BLOCK
                    })
                    .collect()
            }
        }
    }
}

impl FromStr for Case {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Case, String> {
        CASES.into_iter().find(|c| c.arg() == s).ok_or_else(|| format!("unknown case {s:?}"))
    }
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One run as the reader measured it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RunCost {
    /// Elapsed time of the reading loop, seconds.
    pub elapsed: f64,
    /// User time, seconds (clock ticks of `/proc/self/stat`).
    pub user: f64,
    /// System time, seconds.
    pub system: f64,
    /// Bytes the reader caused to be read from disk.
    pub read_bytes: u64,
}

impl RunCost {
    /// I/O stall: elapsed time spent neither in user nor system mode.
    pub fn stall(&self) -> f64 {
        (self.elapsed - self.user - self.system).max(0.0)
    }

    /// Disk I/Os in DEAR's blocks (bytes read / 8 KiB).
    pub fn block_ios(&self) -> f64 {
        self.read_bytes as f64 / BLOCK as f64
    }

    /// The reader's output line.
    pub fn line(&self) -> String {
        format!(
            "elapsed_s={:.6} user_s={:.2} system_s={:.2} read_bytes={}",
            self.elapsed, self.user, self.system, self.read_bytes
        )
    }

    /// Parses [`RunCost::line`].
    pub fn parse(text: &str) -> Option<RunCost> {
        let line = text.lines().find(|l| l.starts_with("elapsed_s="))?;
        let mut c = RunCost::default();
        for word in line.split_whitespace() {
            let (k, v) = word.split_once('=')?;
            match k {
                "elapsed_s" => c.elapsed = v.parse().ok()?,
                "user_s" => c.user = v.parse().ok()?,
                "system_s" => c.system = v.parse().ok()?,
                "read_bytes" => c.read_bytes = v.parse().ok()?,
                _ => {}
            }
        }
        Some(c)
    }
}

/// This process's user and system time (seconds) and disk read bytes now.
fn own_cost() -> Result<(f64, f64, u64)> {
    let stat = std::fs::read_to_string("/proc/self/stat").context(|| "reading /proc/self/stat".into())?;
    let (u, s) = augur_core::proc_text::stat_cpu_ticks(&stat)
        .ok_or_else(|| BenchError::kernel("/proc/self/stat", "no CPU times in it".to_string()))?;
    let sample =
        augur_os::sense::procfs::sample(std::process::id()).map_err(|e| BenchError::kernel("/proc/self/io", e.to_string()))?;
    let tick = augur_os::sense::procfs::TICKS_PER_SEC;
    Ok((u as f64 / tick, s as f64 / tick, sample.read_bytes))
}

/// Reads `path` as `case` says, for `shape`; returns what the run cost.
pub fn read_case(path: &Path, case: Case, shape: &Shape) -> Result<RunCost> {
    let f = File::open(path).context(|| format!("opening {}", path.display()))?;
    let size = f.metadata().context(|| format!("reading the size of {}", path.display()))?.len();
    let shape = Shape { file_bytes: shape.file_bytes.min(size), loop_bytes: shape.loop_bytes.min(size), ..*shape };
    let offsets = case.offsets(&shape);
    let mut buf = vec![0u8; BLOCK as usize];
    let mut sum = 0u64;
    let (u0, s0, r0) = own_cost()?;
    let start = Instant::now();
    for off in offsets {
        f.read_exact_at(&mut buf, off).context(|| format!("reading {} at {off}", path.display()))?;
        sum = sum.wrapping_add(u64::from(buf[0]));
    }
    let elapsed = start.elapsed().as_secs_f64();
    let (u1, s1, r1) = own_cost()?;
    std::hint::black_box(sum);
    Ok(RunCost { elapsed, user: u1 - u0, system: s1 - s0, read_bytes: r1.saturating_sub(r0) })
}

/// Runs the reader process for `case` in `cgroup`, cold; returns what it reported.
pub fn time_case(exe: &Path, path: &Path, case: Case, shape: &Shape, cgroup: &ReaderCgroup) -> Result<RunCost> {
    if let Ok(dev) = crate::throttle::root_disk() {
        crate::page_cache::wait_until_disk_quiet(&dev, Duration::from_millis(300), Duration::from_secs(3))?;
    }
    evict(path)?;
    let out = Command::new(exe)
        .arg("dear-reader")
        .arg("--case")
        .arg(case.arg())
        .arg("--cgroup")
        .arg(cgroup.dir())
        .arg("--loop-mib")
        .arg((shape.loop_bytes >> 20).to_string())
        .arg("--passes")
        .arg(shape.passes.to_string())
        .arg("--cluster-mib")
        .arg((shape.cluster_bytes >> 20).to_string())
        .arg("--random-reads")
        .arg(shape.random_reads.to_string())
        .arg(path)
        .output()
        .map_err(|e| BenchError::Command { command: "augur-bench dear-reader".into(), detail: e.to_string() })?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(BenchError::Command {
            command: "augur-bench dear-reader".into(),
            detail: format!("{}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim()),
        });
    }
    RunCost::parse(&text).ok_or_else(|| BenchError::Command {
        command: "augur-bench dear-reader".into(),
        detail: format!("no cost line in {text:?}"),
    })
}

/// One case's runs under both conditions.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CaseCosts {
    /// Kernel alone.
    pub kernel: Vec<RunCost>,
    /// With augur's daemon.
    pub augur: Vec<RunCost>,
}

fn mean_of(runs: &[RunCost], f: impl Fn(&RunCost) -> f64) -> f64 {
    stats::mean(&runs.iter().map(f).collect::<Vec<_>>())
}

impl CaseCosts {
    /// Fewer disk I/Os with augur than with the kernel alone, percent (negative: more).
    pub fn fewer_ios_percent(&self) -> f64 {
        let (k, a) = (mean_of(&self.kernel, RunCost::block_ios), mean_of(&self.augur, RunCost::block_ios));
        if k > 0.0 { (k - a) / k * 100.0 } else { 0.0 }
    }
}

/// How a table was measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Setup {
    /// The workloads' shape.
    pub shape: Shape,
    /// `memory.max` of the reader's cgroup, bytes.
    pub memory_bytes: u64,
    /// Runs per case and condition.
    pub runs: usize,
}

/// Issue 21's acceptance: on average this many percent fewer disk I/Os...
pub const REQUIRED_AVERAGE_FEWER: f64 = 25.0;
/// ...and no case more than this many percent worse.
pub const ALLOWED_WORSE: f64 = 2.0;

/// The Markdown table: per case and condition the disk I/Os and the response time split, the
/// change in I/Os, and the acceptance.
pub fn markdown(setup: &Setup, rows: &[(Case, CaseCosts)]) -> String {
    let mut out = format!(
        "File of {} MiB read in {} KiB blocks by a process whose memory cgroup allows {} MiB, cold (the file's pages \
         dropped before each run); {} runs per case and condition, as-is machine profile. Disk I/Os: bytes the reader \
         caused to be read from disk (`read_bytes` of /proc/PID/io) in 8 KiB blocks, load-independent. Response time \
         (mean) = I/O stall + system + user, seconds; stall = elapsed − user − system (CPU times in 10 ms ticks); times \
         are noisy on a loaded machine.\n\n",
        setup.shape.file_bytes >> 20,
        BLOCK / 1024,
        setup.memory_bytes >> 20,
        setup.runs,
    );
    out.push_str(
        "| pattern | reads | disk I/Os, kernel alone | disk I/Os, augur | fewer I/Os | response (stall + sys + user), kernel alone | response, augur |\n",
    );
    out.push_str("| --- | --- | ---: | ---: | ---: | --- | --- |\n");
    let split = |runs: &[RunCost]| {
        format!(
            "{:.2} ({:.2} + {:.2} + {:.2})",
            mean_of(runs, |r| r.elapsed),
            mean_of(runs, RunCost::stall),
            mean_of(runs, |r| r.system),
            mean_of(runs, |r| r.user)
        )
    };
    let mut gains = Vec::new();
    for (case, c) in rows {
        let gain = c.fewer_ios_percent();
        gains.push(gain);
        out.push_str(&format!(
            "| {} | {} | {:.0} | {:.0} | {gain:.1} % | {} | {} |\n",
            case.name(),
            case.describe(&setup.shape),
            mean_of(&c.kernel, RunCost::block_ios),
            mean_of(&c.augur, RunCost::block_ios),
            split(&c.kernel),
            split(&c.augur)
        ));
    }
    let average = stats::mean(&gains);
    let worst = gains.iter().copied().fold(f64::INFINITY, f64::min);
    let met = average >= REQUIRED_AVERAGE_FEWER && worst >= -ALLOWED_WORSE;
    out.push_str(&format!(
        "\nOn average {average:.1} % fewer disk I/Os (required ≥ {REQUIRED_AVERAGE_FEWER:.0} %), worst case {worst:.1} % \
         (required ≥ −{ALLOWED_WORSE:.0} %): {}.\n",
        if met { "met" } else { "not met" }
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> Shape {
        Shape::for_memory(16 << 20, 4 << 20)
    }

    #[test]
    fn cases_read_the_offsets_their_names_say() {
        let s = shape();
        assert_eq!(s.loop_bytes, 6 << 20);
        let seq = Case::Sequential.offsets(&s);
        assert_eq!(seq.len() as u64, (16 << 20) / BLOCK);
        let lp = Case::Looping.offsets(&s);
        assert_eq!(lp.len() as u64, 4 * (6 << 20) / BLOCK);
        assert_eq!(lp[(6 << 20) / BLOCK as usize], 0, "the second pass starts again at the start");
        let cl = Case::Clustered.offsets(&s);
        assert_eq!(cl.len() as u64, s.random_reads / 16 * 16);
        let per = (s.random_reads / 16) as usize;
        let phase = &cl[..per];
        let (lo, hi) = (phase.iter().min().unwrap(), phase.iter().max().unwrap());
        assert!(hi - lo < s.cluster_bytes, "one phase stays in one region");
        let pr = Case::Probabilistic.offsets(&s);
        assert_eq!(pr.len() as u64, s.random_reads);
        assert!(pr.iter().all(|o| o % BLOCK == 0 && *o < s.file_bytes));
        let mut counts = std::collections::HashMap::new();
        for o in &pr {
            *counts.entry(*o).or_insert(0u32) += 1;
        }
        assert!(
            *counts.values().max().unwrap() as usize * 20 > pr.len(),
            "skewed: the top block is drawn in more than 5 % of reads"
        );
        assert_eq!(Case::Probabilistic.offsets(&s), pr, "seeded");
        assert_eq!("looping".parse::<Case>(), Ok(Case::Looping));
    }

    #[test]
    fn the_readers_line_round_trips_and_the_table_judges() {
        let c = RunCost { elapsed: 2.0, user: 0.1, system: 0.4, read_bytes: 8192 * 100 };
        assert_eq!(RunCost::parse(&c.line()), Some(c));
        assert!((c.stall() - 1.5).abs() < 1e-9);
        let half = RunCost { read_bytes: 8192 * 50, ..c };
        let rows = vec![
            (Case::Looping, CaseCosts { kernel: vec![c], augur: vec![half] }),
            (Case::Sequential, CaseCosts { kernel: vec![c], augur: vec![c] }),
        ];
        let setup = Setup { shape: shape(), memory_bytes: 4 << 20, runs: 1 };
        let md = markdown(&setup, &rows);
        assert!(md.contains("| Looping | first 6 MiB, 4 times | 100 | 50 | 50.0 % |"), "{md}");
        assert!(md.contains("On average 25.0 % fewer disk I/Os"), "{md}");
        assert!(md.contains(": met."), "{md}");
    }
}
