//! DEAR's four single-application reference patterns, reproduced (`augur-bench dear`): a file
//! larger than the memory left to the reader is read in 8 KiB blocks (DEAR's block size)
//! sequentially, in a loop, in temporal clusters and with fixed per-block probabilities, cold, by
//! the kernel alone and with augur's daemon running as installed; disk reads and the response
//! time split into I/O stall, system and user time per run.
//!
//! The reader is a separate process (`augur-bench dear-reader`, [`read_case`]) in the cgroup of
//! [`crate::aasfp::ReaderCgroup::create_counting`]; it reports its own elapsed, user and system
//! time and the bytes it caused to be read from disk itself (`read_bytes` of `/proc/self/io`).
//! What the table counts is what DEAR counted, the disk reads of everything involved: the
//! daemon runs in the same cgroup (born there: its memory and page cache share the reader's
//! limit, as everything shared DEAR's one buffer cache), and the cgroup's block-I/O counters
//! (bytes and I/Os) are read before the reader starts and after it has exited and the disk is
//! quiet, so the daemon's reads for it (the replay of its learned pages at exec, loading ahead)
//! count as the reader's own do. Load-independent, unlike the times. Cold means the file's pages
//! are dropped before each run.
//!
//! The shape follows DEAR's experiments (USENIX 1999, 6 MB buffer cache, inputs of 2.5-50 MB):
//! see [`Shape::for_memory`].
//!
//! It owns the cases, their offsets, the runs' measurement and the Markdown; the cgroup,
//! eviction and daemon are `aasfp`'s and `prefetchers`'. It must not prefetch itself.

use std::fmt;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;
use std::str::FromStr;
use std::time::{Duration, Instant};

use augur_core::sim::seeded::SeededRng;

use crate::aasfp::{DiskReads, ReaderCgroup, evict};
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
    /// Reads of the clustered case.
    pub clustered_reads: u64,
    /// Reads of the probabilistic case.
    pub probabilistic_reads: u64,
}

impl Shape {
    /// The shape for a reader that can have `memory_bytes`, scaled from DEAR's experiments, whose
    /// buffer cache was 6 MB: the loop is 1.5 times the memory, read 4 times (cscope looped over
    /// 9 MB, gnuplot plotted 8 MB four times); the clustered phases are regions of a quarter of
    /// the memory, with 3 reads per block of memory, so that the blocks they touch (1.65 times
    /// the memory on these seeded offsets, for 1 GiB and 256 MiB) exceed it as cpp's 11 MB of
    /// sources and headers exceeded its 6 MB; the probabilistic reads are 12 per block of memory,
    /// so that the Zipf set they touch (1.9 times the memory) exceeds it likewise: a replacement
    /// policy can only matter when the pattern does not fit.
    pub fn for_memory(file_bytes: u64, memory_bytes: u64) -> Shape {
        let memory_blocks = (memory_bytes / BLOCK).max(1);
        Shape {
            file_bytes,
            loop_bytes: (memory_bytes / 2 * 3).min(file_bytes),
            passes: 4,
            cluster_bytes: (memory_bytes / 4).max(BLOCK),
            clustered_reads: memory_blocks * 3,
            probabilistic_reads: memory_blocks * 12,
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
                format!("{} reads in 16 phases, each in one {} MiB region", shape.clustered_reads, shape.cluster_bytes >> 20)
            }
            Case::Probabilistic => format!("{} reads, Zipf over {} MiB", shape.probabilistic_reads, shape.file_bytes >> 20),
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
                let per_phase = (shape.clustered_reads / phases).max(1);
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
                (0..shape.probabilistic_reads)
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
    /// Bytes the reader itself caused to be read from disk.
    pub read_bytes: u64,
    /// Disk reads of everything in the cgroup over the run (the reader and, with augur, the
    /// daemon), as the cgroup counted them; filled in by [`time_case`], not the reader.
    pub disk: DiskReads,
}

impl RunCost {
    /// I/O stall: elapsed time spent neither in user nor system mode.
    pub fn stall(&self) -> f64 {
        (self.elapsed - self.user - self.system).max(0.0)
    }

    /// Disk reads in DEAR's blocks: bytes read from disk by everything in the cgroup / 8 KiB.
    pub fn block_ios(&self) -> f64 {
        self.disk.bytes as f64 / BLOCK as f64
    }

    /// Read I/Os the block layer was asked for by everything in the cgroup.
    pub fn requests(&self) -> f64 {
        self.disk.ios as f64
    }

    /// The reader's own disk reads in 8 KiB blocks (the rest of [`RunCost::block_ios`] is the
    /// daemon's).
    pub fn reader_block_ios(&self) -> f64 {
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
pub(crate) fn own_cost() -> Result<(f64, f64, u64)> {
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
    Ok(RunCost { elapsed, user: u1 - u0, system: s1 - s0, read_bytes: r1.saturating_sub(r0), disk: DiskReads::default() })
}

/// Runs the reader process for `case` in `cgroup`, cold; returns what it reported, with the disk
/// reads the cgroup counted from just before the reader started to when the disk was quiet again
/// after it exited (a daemon's reads for it included).
pub fn time_case(exe: &Path, path: &Path, case: Case, shape: &Shape, cgroup: &ReaderCgroup) -> Result<RunCost> {
    let dev = crate::throttle::root_disk().ok();
    let quiet = |dev: &Option<String>| -> Result<()> {
        if let Some(dev) = dev {
            crate::page_cache::wait_until_disk_quiet(dev, Duration::from_millis(300), Duration::from_secs(3))?;
        }
        Ok(())
    };
    quiet(&dev)?;
    evict(path)?;
    let mut cmd = Command::new(exe);
    cmd.arg("dear-reader").arg("--case").arg(case.arg());
    for dir in cgroup.dirs() {
        cmd.arg("--cgroup").arg(dir);
    }
    cmd.arg("--loop-mib")
        .arg((shape.loop_bytes >> 20).to_string())
        .arg("--passes")
        .arg(shape.passes.to_string())
        .arg("--cluster-mib")
        .arg((shape.cluster_bytes >> 20).to_string())
        .arg("--clustered-reads")
        .arg(shape.clustered_reads.to_string())
        .arg("--probabilistic-reads")
        .arg(shape.probabilistic_reads.to_string())
        .arg(path);
    let before = cgroup.disk_reads()?;
    let out =
        cmd.output().map_err(|e| BenchError::Command { command: "augur-bench dear-reader".into(), detail: e.to_string() })?;
    quiet(&dev)?;
    let after = cgroup.disk_reads()?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(BenchError::Command {
            command: "augur-bench dear-reader".into(),
            detail: format!("{}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim()),
        });
    }
    let mut cost = RunCost::parse(&text).ok_or_else(|| BenchError::Command {
        command: "augur-bench dear-reader".into(),
        detail: format!("no cost line in {text:?}"),
    })?;
    cost.disk = match (before, after) {
        (Some(b), Some(a)) => a.since(b),
        // No cgroup counter: the reader's own reads are all that is known.
        _ => DiskReads { bytes: cost.read_bytes, ios: 0 },
    };
    Ok(cost)
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
    /// Fewer disk reads (8 KiB blocks, [`RunCost::block_ios`]) with augur than with the kernel
    /// alone, percent (negative: more).
    pub fn fewer_ios_percent(&self) -> f64 {
        self.fewer_percent(RunCost::block_ios)
    }

    /// Fewer read I/Os ([`RunCost::requests`]) with augur than with the kernel alone, percent.
    pub fn fewer_requests_percent(&self) -> f64 {
        self.fewer_percent(RunCost::requests)
    }

    fn fewer_percent(&self, f: impl Fn(&RunCost) -> f64 + Copy) -> f64 {
        let (k, a) = (mean_of(&self.kernel, f), mean_of(&self.augur, f));
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
    /// Machine profile name, and what was done to the machine (free page reporting).
    pub machine: String,
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
         dropped before each run); {} runs per case and condition, machine profile {}. Disk reads are what DEAR \
         counted, everything involved: the reader and the daemon run in one cgroup (the daemon born there, its memory \
         and page cache under the same limit), whose block-I/O counters (cgroup v1 `blkio.throttle.io_service_bytes` / \
         `io_serviced`, v2 `io.stat` `rbytes` / `rios`) are read before the reader starts and once the disk is quiet \
         after it exits: bytes in 8 KiB blocks (the acceptance's count; the daemon's share, its replay of the learned \
         pages at exec and its loads ahead, in brackets) and read I/Os (requests the block layer was asked for; \
         readahead makes one of many blocks). Load-independent. Response time (mean) = I/O stall + system + user, \
         seconds, of the reader's reading loop; stall = elapsed − user − system (CPU times in 10 ms ticks); times are \
         noisy on a loaded machine. Each case's reader is a program of its own (a copy of augur-bench named after the \
         case), as DEAR's applications were: one executable would be one application to augur, its profile mixing the \
         data pages of all four cases.\n\n",
        setup.shape.file_bytes >> 20,
        BLOCK / 1024,
        setup.memory_bytes >> 20,
        setup.runs,
        setup.machine,
    );
    out.push_str(
        "| pattern | reads | 8 KiB blocks read, kernel alone | blocks read, augur (daemon's) | fewer blocks | read I/Os, kernel alone | read I/Os, augur | fewer I/Os | response (stall + sys + user), kernel alone | response, augur |\n",
    );
    out.push_str("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |\n");
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
    let mut request_gains = Vec::new();
    for (case, c) in rows {
        let gain = c.fewer_ios_percent();
        let request_gain = c.fewer_requests_percent();
        gains.push(gain);
        request_gains.push(request_gain);
        let augur_blocks = mean_of(&c.augur, RunCost::block_ios);
        let daemon_blocks = (augur_blocks - mean_of(&c.augur, RunCost::reader_block_ios)).max(0.0);
        out.push_str(&format!(
            "| {} | {} | {:.0} | {augur_blocks:.0} ({daemon_blocks:.0}) | {gain:.1} % | {:.0} | {:.0} | {request_gain:.1} % | {} | {} |\n",
            case.name(),
            case.describe(&setup.shape),
            mean_of(&c.kernel, RunCost::block_ios),
            mean_of(&c.kernel, RunCost::requests),
            mean_of(&c.augur, RunCost::requests),
            split(&c.kernel),
            split(&c.augur)
        ));
    }
    let average = stats::mean(&gains);
    let worst = gains.iter().copied().fold(f64::INFINITY, f64::min);
    let met = average >= REQUIRED_AVERAGE_FEWER && worst >= -ALLOWED_WORSE;
    out.push_str(&format!(
        "\nOn average {average:.1} % fewer disk reads in 8 KiB blocks (required ≥ {REQUIRED_AVERAGE_FEWER:.0} %), worst \
         case {worst:.1} % (required ≥ −{ALLOWED_WORSE:.0} %): {}. Read I/Os: {:.1} % fewer on average.\n",
        if met { "met" } else { "not met" },
        stats::mean(&request_gains)
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
        assert_eq!(cl.len() as u64, s.clustered_reads / 16 * 16);
        let per = (s.clustered_reads / 16) as usize;
        let phase = &cl[..per];
        let (lo, hi) = (phase.iter().min().unwrap(), phase.iter().max().unwrap());
        assert!(hi - lo < s.cluster_bytes, "one phase stays in one region");
        let pr = Case::Probabilistic.offsets(&s);
        assert_eq!(pr.len() as u64, s.probabilistic_reads);
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
        let c = RunCost {
            elapsed: 2.0,
            user: 0.1,
            system: 0.4,
            read_bytes: 8192 * 100,
            disk: DiskReads { bytes: 8192 * 100, ios: 10 },
        };
        assert_eq!(
            RunCost::parse(&c.line()),
            Some(RunCost { disk: DiskReads::default(), ..c }),
            "the cgroup's count is the bench's"
        );
        assert!((c.stall() - 1.5).abs() < 1e-9);
        // With augur: 50 blocks in all, 30 of them the reader's, 20 the daemon's; 8 I/Os.
        let half = RunCost { read_bytes: 8192 * 30, disk: DiskReads { bytes: 8192 * 50, ios: 8 }, ..c };
        let rows = vec![
            (Case::Looping, CaseCosts { kernel: vec![c], augur: vec![half] }),
            (Case::Sequential, CaseCosts { kernel: vec![c], augur: vec![c] }),
        ];
        let setup = Setup { shape: shape(), memory_bytes: 4 << 20, runs: 1, machine: "as-is".into() };
        let md = markdown(&setup, &rows);
        assert!(md.contains("| Looping | first 6 MiB, 4 times | 100 | 50 (20) | 50.0 % | 10 | 8 | 20.0 % |"), "{md}");
        assert!(md.contains("On average 25.0 % fewer disk reads in 8 KiB blocks"), "{md}");
        assert!(md.contains(": met. Read I/Os: 10.0 % fewer on average."), "{md}");
    }

    #[test]
    fn the_random_patterns_touch_more_than_the_memory_as_dears_inputs_did() {
        // The benchmark's own shape: 1 GiB file, 256 MiB of memory.
        let memory = 256u64 << 20;
        let s = Shape::for_memory(1 << 30, memory);
        let memory_blocks = (memory / BLOCK) as f64;
        for case in [Case::Clustered, Case::Probabilistic] {
            let distinct: std::collections::HashSet<u64> = case.offsets(&s).into_iter().collect();
            let ratio = distinct.len() as f64 / memory_blocks;
            assert!((1.4..2.3).contains(&ratio), "{case}: the blocks touched are {ratio:.2} times the memory");
        }
        assert_eq!(s.loop_bytes, memory / 2 * 3, "cscope's 9 MB over a 6 MB cache");
    }
}
