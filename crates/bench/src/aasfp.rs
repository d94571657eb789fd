//! AASFP's micro-benchmark table, reproduced (`augur-bench aasfp`): a file larger than the memory
//! left to the reader is read forward and backward in 4 KiB blocks (Forward 1 / Backward 1) and
//! 32 KiB blocks (Forward 2 / Backward 2), and in 4 KiB blocks every 64 KiB (Strided), cold, by
//! the kernel alone and with augur's daemon running as installed; elapsed time per run.
//!
//! The reader is a separate process (`augur-bench aasfp-reader`, [`read_case`]) that first moves
//! itself into a memory cgroup whose limit (`memory.max`, or v1 `memory.limit_in_bytes`) is the
//! memory left to it ([`ReaderCgroup`]).
//! Cold means the file's pages are dropped from the page cache before each run (POSIX_FADV_DONTNEED
//! on the file, so other users of the cache are not disturbed) and the disk is quiet.
//!
//! It owns the cases, the cgroup, the timing and the Markdown; the daemon is
//! [`crate::prefetchers::RunningDaemon`]'s. It must not prefetch itself.

use std::fmt;
use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;
use std::time::{Duration, Instant};

use crate::dear::RunCost;
use crate::error::{BenchError, IoContext, Result};
use crate::stats;
use crate::throttle::DiskThrottle;

/// One reading pattern of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Case {
    /// Forward, 4 KiB blocks.
    Forward1,
    /// Backward, 4 KiB blocks.
    Backward1,
    /// Forward, 32 KiB blocks.
    Forward2,
    /// Backward, 32 KiB blocks.
    Backward2,
    /// 4 KiB blocks every 64 KiB, forward.
    Strided,
}

/// Every case, in the table's order.
pub const CASES: [Case; 5] = [Case::Forward1, Case::Backward1, Case::Forward2, Case::Backward2, Case::Strided];

impl Case {
    /// The table's name.
    pub fn name(self) -> &'static str {
        match self {
            Case::Forward1 => "Forward 1",
            Case::Backward1 => "Backward 1",
            Case::Forward2 => "Forward 2",
            Case::Backward2 => "Backward 2",
            Case::Strided => "Strided",
        }
    }

    /// The command-line name.
    pub fn arg(self) -> &'static str {
        match self {
            Case::Forward1 => "forward1",
            Case::Backward1 => "backward1",
            Case::Forward2 => "forward2",
            Case::Backward2 => "backward2",
            Case::Strided => "strided",
        }
    }

    /// Bytes per read.
    pub fn block(self) -> u64 {
        match self {
            Case::Forward2 | Case::Backward2 => 32 * 1024,
            _ => 4096,
        }
    }

    /// The offsets read, in order, for a file of `size` bytes.
    pub fn offsets(self, size: u64) -> Box<dyn Iterator<Item = u64>> {
        let block = self.block();
        let blocks = size / block;
        match self {
            Case::Forward1 | Case::Forward2 => Box::new((0..blocks).map(move |i| i * block)),
            Case::Backward1 | Case::Backward2 => Box::new((0..blocks).rev().map(move |i| i * block)),
            Case::Strided => Box::new((0..size / STRIDE).map(|i| i * STRIDE)),
        }
    }

    /// The acceptance of issue 21: the least improvement over the kernel alone (negative: the
    /// most loss allowed), in percent.
    pub fn required_gain_percent(self) -> f64 {
        match self {
            Case::Forward1 | Case::Forward2 => -1.0,
            Case::Backward1 => 86.0,
            Case::Backward2 => 76.0,
            Case::Strided => 70.0,
        }
    }
}

/// The strided reader's step.
pub const STRIDE: u64 = 64 * 1024;

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

/// Reads `path` as `case` says; returns the elapsed time of the reading loop and the reader's
/// own CPU time over it (what the reader process reports).
pub fn read_case(path: &Path, case: Case) -> Result<RunCost> {
    let f = File::open(path).context(|| format!("opening {}", path.display()))?;
    let size = f.metadata().context(|| format!("reading the size of {}", path.display()))?.len();
    let mut buf = vec![0u8; case.block() as usize];
    let mut sum = 0u64;
    let (u0, s0, r0) = crate::dear::own_cost()?;
    let start = Instant::now();
    for off in case.offsets(size) {
        f.read_exact_at(&mut buf, off).context(|| format!("reading {} at {off}", path.display()))?;
        sum = sum.wrapping_add(u64::from(buf[0]));
    }
    let elapsed = start.elapsed().as_secs_f64();
    let (u1, s1, r1) = crate::dear::own_cost()?;
    std::hint::black_box(sum);
    Ok(RunCost { elapsed, user: u1 - u0, system: s1 - s0, read_bytes: r1.saturating_sub(r0), ..RunCost::default() })
}

/// The memory cgroup the reader runs in, and, when made by [`ReaderCgroup::create_counting`], the
/// block-I/O cgroup that counts the disk reads of everything in it. Dropping it removes them (what
/// ran inside has exited by then).
#[derive(Debug)]
pub struct ReaderCgroup {
    dir: PathBuf,
    io: Option<IoCount>,
}

/// Where a [`ReaderCgroup`]'s disk reads are counted.
#[derive(Debug)]
struct IoCount {
    /// The cgroup whose counters are read: the memory cgroup itself in the unified hierarchy, a
    /// blkio cgroup of the same name in cgroup v1's.
    dir: PathBuf,
    version: crate::throttle::CgroupVersion,
    /// "MAJ:MIN" of the disk counted.
    device: String,
}

/// Disk reads counted in a cgroup: bytes and I/Os (bios the block layer was asked for).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskReads {
    /// Bytes read.
    pub bytes: u64,
    /// Read I/Os.
    pub ios: u64,
}

impl DiskReads {
    /// What was read between `earlier` and `self`.
    pub fn since(self, earlier: DiskReads) -> DiskReads {
        DiskReads { bytes: self.bytes.saturating_sub(earlier.bytes), ios: self.ios.saturating_sub(earlier.ios) }
    }
}

impl ReaderCgroup {
    /// Creates a memory cgroup limited to `bytes`: cgroup v2 (`memory.max`, no swap) where the
    /// unified hierarchy has the memory controller, else cgroup v1 (`memory.limit_in_bytes`).
    pub fn create(bytes: u64) -> Result<ReaderCgroup> {
        let name = format!("{}aasfp-{}", crate::throttle::CGROUP_PREFIX, std::process::id());
        for root in [Path::new("/sys/fs/cgroup"), Path::new("/sys/fs/cgroup/unified")] {
            let controllers = fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
            if !controllers.split_whitespace().any(|c| c == "memory") {
                continue;
            }
            let subtree = fs::read_to_string(root.join("cgroup.subtree_control")).unwrap_or_default();
            if !subtree.split_whitespace().any(|c| c == "memory") {
                fs::write(root.join("cgroup.subtree_control"), "+memory").context(|| "enabling the memory controller".into())?;
            }
            let cg = ReaderCgroup::make(root.join(&name))?;
            fs::write(cg.dir.join("memory.max"), bytes.to_string()).context(|| "writing memory.max".into())?;
            let _ = fs::write(cg.dir.join("memory.swap.max"), "0");
            return Ok(cg);
        }
        let v1 = Path::new("/sys/fs/cgroup/memory");
        if v1.join("memory.limit_in_bytes").exists() {
            let cg = ReaderCgroup::make(v1.join(&name))?;
            fs::write(cg.dir.join("memory.limit_in_bytes"), bytes.to_string())
                .context(|| "writing memory.limit_in_bytes".into())?;
            return Ok(cg);
        }
        Err(BenchError::kernel("a memory cgroup controller", "neither cgroup v2 nor v1 has one mounted"))
    }

    /// [`ReaderCgroup::create`], plus the counting of every disk read of what runs in it from the
    /// disk holding `file` ([`ReaderCgroup::disk_reads`]): cgroup v2's `io.stat` (the same
    /// cgroup), or a cgroup v1 blkio cgroup of the same name (`blkio.throttle.io_service_bytes`
    /// and `io_serviced`; the kernel's throttle layer, which keeps those counters, is made active
    /// on the disk by a limit of 0, which is none). With `throttle` (the small slow machine),
    /// that cgroup carries the disk's limits instead: what runs in it (the reader and the daemon)
    /// shares them, as the whole workload shares them in the suite.
    pub fn create_counting(bytes: u64, file: &Path, throttle: Option<DiskThrottle>) -> Result<ReaderCgroup> {
        use crate::throttle::CgroupVersion;
        let mut cg = ReaderCgroup::create(bytes)?;
        let device = crate::throttle::disk_of(file)?;
        let (version, hierarchy) = crate::throttle::find_hierarchy()?;
        let dir = match version {
            CgroupVersion::V2Io if cg.dir.starts_with(&hierarchy) => {
                if let Some(t) = throttle {
                    let max = cg.dir.join("io.max");
                    fs::write(&max, format!("{device} rbps={} riops={}", t.read_bps, t.read_iops))
                        .context(|| format!("writing {}", max.display()))?;
                }
                cg.dir.clone()
            }
            CgroupVersion::V2Io => {
                return Err(BenchError::kernel(
                    "a block-I/O cgroup",
                    "the io and memory controllers are in different hierarchies",
                ));
            }
            CgroupVersion::V1Blkio => {
                let dir = hierarchy.join(cg.dir.file_name().unwrap_or_default());
                if !dir.exists() {
                    fs::create_dir(&dir).context(|| format!("creating cgroup {}", dir.display()))?;
                }
                let (bps, iops) = throttle.map_or((0, None), |t| (t.read_bps, Some(t.read_iops)));
                let limit = dir.join("blkio.throttle.read_bps_device");
                fs::write(&limit, format!("{device} {bps}")).context(|| format!("writing {}", limit.display()))?;
                if let Some(iops) = iops {
                    let limit = dir.join("blkio.throttle.read_iops_device");
                    fs::write(&limit, format!("{device} {iops}")).context(|| format!("writing {}", limit.display()))?;
                }
                dir
            }
        };
        cg.io = Some(IoCount { dir, version, device });
        Ok(cg)
    }

    fn make(dir: PathBuf) -> Result<ReaderCgroup> {
        if !dir.exists() {
            fs::create_dir(&dir).context(|| format!("creating cgroup {}", dir.display()))?;
        }
        Ok(ReaderCgroup { dir, io: None })
    }

    /// Its directory (the reader writes its pid into `cgroup.procs` there).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every directory a process joins to be in it: the memory cgroup, and the blkio cgroup
    /// when that is apart (cgroup v1).
    pub fn dirs(&self) -> Vec<PathBuf> {
        let mut out = vec![self.dir.clone()];
        if let Some(io) = self.io.as_ref().filter(|io| io.dir != self.dir) {
            out.push(io.dir.clone());
        }
        out
    }

    /// The disk reads counted so far (`None`: made by [`ReaderCgroup::create`], nothing counted).
    pub fn disk_reads(&self) -> Result<Option<DiskReads>> {
        use crate::throttle::{CgroupVersion, cgroup_read_counter};
        let Some(io) = &self.io else { return Ok(None) };
        let read = |file: &str| -> Result<String> {
            let path = io.dir.join(file);
            Ok(fs::read_to_string(&path).context(|| format!("reading {}", path.display()))?)
        };
        Ok(Some(match io.version {
            CgroupVersion::V1Blkio => DiskReads {
                bytes: cgroup_read_counter(&read("blkio.throttle.io_service_bytes")?, io.version, &io.device, "rbytes="),
                ios: cgroup_read_counter(&read("blkio.throttle.io_serviced")?, io.version, &io.device, "rios="),
            },
            CgroupVersion::V2Io => {
                let text = read("io.stat")?;
                DiskReads {
                    bytes: cgroup_read_counter(&text, io.version, &io.device, "rbytes="),
                    ios: cgroup_read_counter(&text, io.version, &io.device, "rios="),
                }
            }
        }))
    }
}

impl Drop for ReaderCgroup {
    fn drop(&mut self) {
        for dir in self.dirs().iter().rev() {
            for _ in 0..50 {
                if fs::remove_dir(dir).is_ok() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// Moves this process into the cgroup at each of `dirs` (the reader, before it reads).
pub fn enter_cgroup(dirs: &[PathBuf]) -> Result<()> {
    for dir in dirs {
        let procs = dir.join("cgroup.procs");
        fs::write(&procs, std::process::id().to_string()).context(|| format!("writing {}", procs.display()))?;
    }
    Ok(())
}

/// Drops `path`'s pages from the page cache (clean pages: the file was synced when written).
pub fn evict(path: &Path) -> Result<()> {
    let f = File::open(path).context(|| format!("opening {}", path.display()))?;
    augur_os::fetch::evict_file(std::os::fd::AsFd::as_fd(&f)).context(|| format!("evicting {}", path.display()))?;
    Ok(())
}

/// A program of its own for each case's reader: a copy of `exe` (augur-bench) named `name(case)`
/// in `dir`, refreshed when `exe` changed. AASFP's and DEAR's
/// micro-benchmarks were separate programs; run as one executable, the readers are one
/// application to augur, whose profile mixes the data pages each case reads, and the exec-time
/// replay of one case loads another's pages (scattered over the file a forward reader then reads,
/// breaking its readahead; in DEAR's 256 MiB cgroup, the probabilistic reader's 256 MiB of
/// learned pages loaded beside the sequential one).
pub fn reader_programs<C: Copy>(exe: &Path, dir: &Path, cases: &[C], name: impl Fn(C) -> String) -> Result<Vec<(C, PathBuf)>> {
    fs::create_dir_all(dir).context(|| format!("creating {}", dir.display()))?;
    let meta = fs::metadata(exe).context(|| format!("reading {}", exe.display()))?;
    cases
        .iter()
        .map(|&case| {
            let path = dir.join(name(case));
            let same = fs::metadata(&path).is_ok_and(|m| m.len() == meta.len() && m.modified().ok() >= meta.modified().ok());
            if !same {
                fs::copy(exe, &path).context(|| format!("copying {} to {}", exe.display(), path.display()))?;
            }
            Ok((case, path))
        })
        .collect()
}

/// Runs the reader process for `case` in `cgroup`, cold; returns what it reported.
pub fn time_case(exe: &Path, path: &Path, case: Case, cgroup: &ReaderCgroup) -> Result<RunCost> {
    // Quiet first (nothing of the previous run still arriving), then cold.
    if let Ok(dev) = crate::throttle::root_disk() {
        crate::page_cache::wait_until_disk_quiet(&dev, Duration::from_millis(300), Duration::from_secs(3))?;
    }
    evict(path)?;
    let out = Command::new(exe)
        .arg("aasfp-reader")
        .arg("--case")
        .arg(case.arg())
        .arg("--cgroup")
        .arg(cgroup.dir())
        .arg(path)
        .output()
        .map_err(|e| BenchError::Command { command: "augur-bench aasfp-reader".into(), detail: e.to_string() })?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(BenchError::Command {
            command: "augur-bench aasfp-reader".into(),
            detail: format!("{}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim()),
        });
    }
    RunCost::parse(&text).ok_or_else(|| BenchError::Command {
        command: "augur-bench aasfp-reader".into(),
        detail: format!("no elapsed time in {text:?}"),
    })
}

/// One case's times under both conditions.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CaseTimes {
    /// Kernel alone, seconds per run.
    pub kernel: Vec<f64>,
    /// With augur's daemon, seconds per run.
    pub augur: Vec<f64>,
    /// Kernel alone, the reader's CPU time (user + system) per run, seconds.
    pub kernel_cpu: Vec<f64>,
    /// With augur's daemon, the reader's CPU time per run, seconds.
    pub augur_cpu: Vec<f64>,
}

impl CaseTimes {
    /// Adds one run under the kernel alone.
    pub fn push_kernel(&mut self, run: &RunCost) {
        self.kernel.push(run.elapsed);
        self.kernel_cpu.push(run.user + run.system);
    }

    /// Adds one run with augur's daemon.
    pub fn push_augur(&mut self, run: &RunCost) {
        self.augur.push(run.elapsed);
        self.augur_cpu.push(run.user + run.system);
    }
}

impl CaseTimes {
    /// Improvement of augur's mean over the kernel's, percent (negative: slower).
    pub fn gain_percent(&self) -> f64 {
        let (k, a) = (stats::mean(&self.kernel), stats::mean(&self.augur));
        if k > 0.0 { (k - a) / k * 100.0 } else { 0.0 }
    }
}

/// How a table was measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Setup {
    /// File size, bytes.
    pub file_bytes: u64,
    /// `memory.max` of the reader's cgroup, bytes.
    pub memory_bytes: u64,
    /// Runs per case and condition.
    pub runs: usize,
    /// Machine profile name.
    pub machine: String,
}

/// The Markdown table: mean ± standard deviation per condition, the gain, and the acceptance.
pub fn markdown(setup: &Setup, rows: &[(Case, CaseTimes)]) -> String {
    let mut out = format!(
        "File of {} MiB read by a process whose memory cgroup allows {} MiB, cold (the file's pages dropped \
         before each run); {} runs per case and condition, machine profile {}; elapsed time of the reading loop, mean ± \
         standard deviation. Reader CPU: the reader's user + system time over its reading loop (10 ms ticks, mean), \
         which the disk's speed does not change: what watching every read in the kernel costs the reader. \
         Each case's reader is a program of its own (a copy of augur-bench named after the case), as AASFP's \
         micro-benchmarks were: one executable would be one application to augur, its profile mixing the \
         data pages of all five cases.\n\n",
        setup.file_bytes >> 20,
        setup.memory_bytes >> 20,
        setup.runs,
        setup.machine
    );
    out.push_str(
        "| case | block | kernel alone (s) | augur as installed (s) | faster by | required | met | reader CPU, kernel alone (s) | reader CPU, augur (s) |\n",
    );
    out.push_str("| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |\n");
    for (case, t) in rows {
        let block = if *case == Case::Strided {
            format!("{} KiB every {} KiB", case.block() / 1024, STRIDE / 1024)
        } else {
            format!("{} KiB", case.block() / 1024)
        };
        let req = case.required_gain_percent();
        let gain = t.gain_percent();
        out.push_str(&format!(
            "| {} | {block} | {:.2} ± {:.2} | {:.2} ± {:.2} | {gain:.1} % | {} | {} | {:.2} | {:.2} |\n",
            case.name(),
            stats::mean(&t.kernel),
            stats::stddev(&t.kernel),
            stats::mean(&t.augur),
            stats::stddev(&t.augur),
            if req < 0.0 { format!("≤ {:.0} % slower", -req) } else { format!("≥ {req:.0} % faster") },
            if gain >= req { "yes" } else { "no" },
            stats::mean(&t.kernel_cpu),
            stats::mean(&t.augur_cpu),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_read_the_offsets_their_names_say() {
        let size = 1 << 20;
        let b1: Vec<u64> = Case::Backward1.offsets(size).collect();
        assert_eq!(b1.len(), 256);
        assert_eq!((b1[0], b1[255]), (size - 4096, 0));
        let f2: Vec<u64> = Case::Forward2.offsets(size).take(2).collect();
        assert_eq!(f2, vec![0, 32768]);
        let s: Vec<u64> = Case::Strided.offsets(size).collect();
        assert_eq!(s.len(), 16);
        assert_eq!(s[1], STRIDE);
        assert_eq!("backward2".parse::<Case>(), Ok(Case::Backward2));
    }

    #[test]
    fn the_readers_line_is_parsed_and_the_table_judged() {
        let line = RunCost { elapsed: 1.5, user: 0.01, system: 0.25, ..RunCost::default() }.line();
        let run = RunCost::parse(&line).unwrap();
        assert!(run.elapsed == 1.5 && (run.user + run.system - 0.26).abs() < 1e-9, "{run:?}");
        assert_eq!(RunCost::parse("nothing"), None);
        let mut t = CaseTimes::default();
        for (k, a) in [(10.0, 1.0), (10.0, 1.0)] {
            t.push_kernel(&RunCost { elapsed: k, system: 0.5, ..RunCost::default() });
            t.push_augur(&RunCost { elapsed: a, system: 0.75, ..RunCost::default() });
        }
        assert!((t.gain_percent() - 90.0).abs() < 1e-9);
        let setup = Setup { file_bytes: 1 << 30, memory_bytes: 256 << 20, runs: 2, machine: "as-is".into() };
        let md = markdown(&setup, &[(Case::Backward1, t)]);
        assert!(
            md.contains("| Backward 1 | 4 KiB | 10.00 ± 0.00 | 1.00 ± 0.00 | 90.0 % | ≥ 86 % faster | yes | 0.50 | 0.75 |"),
            "{md}"
        );
    }
}
