//! Kroeger and Long's four application benchmarks (issue 22, `augur-bench kroeger`): a `make -j1`
//! build of a real multi-file C project (libbpf), a link of a large program (libbpf, zlib and
//! SQLite's objects into one shared object), a source-tree indexer (`ctags -R`), and a
//! long-running reader that opens many files in one learned order over more than a minute
//! (`augur-bench kroeger-reader`, [`read_in_order`]). Their protocol: warm-up runs, then measured
//! runs with every cache cleared before each, I/O wait = elapsed − (user + sys), mean with a 95 %
//! confidence interval, augur off against on; with the bytes the workload and the daemon read from
//! storage and the daemon's CPU time, which the machine's other work does not change.
//!
//! It owns the benchmarks' trees (copied or generated once into the cache directory, never
//! timed), what is undone before each run (the build's and the link's outputs), the commands
//! timed, the reader, and the Markdown. It does not start daemons, apply machine profiles or drop
//! caches (the command line does, with [`crate::prefetchers`] and [`crate::machine`]), and it
//! never prefetches.

use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::time::Duration;

use crate::error::{BenchError, IoContext, Result};
use crate::measure::{RunSample, Workload};
use crate::{launch, stats};

/// One of the four benchmarks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Benchmark {
    /// `make -j1` of libbpf's static library.
    Build,
    /// A link of libbpf's, zlib's and SQLite's objects into one shared object.
    Link,
    /// `ctags -R` over libbpf-sys's and libsqlite3-sys's sources.
    Index,
    /// A reader opening generated files in one order, with CPU work between them.
    Reader,
}

/// Every benchmark, in the table's order.
pub const BENCHMARKS: [Benchmark; 4] = [Benchmark::Build, Benchmark::Link, Benchmark::Index, Benchmark::Reader];

impl Benchmark {
    /// The command-line name.
    pub fn arg(self) -> &'static str {
        match self {
            Benchmark::Build => "build",
            Benchmark::Link => "link",
            Benchmark::Index => "index",
            Benchmark::Reader => "reader",
        }
    }

    /// What the table calls it.
    pub fn describe(self) -> &'static str {
        match self {
            Benchmark::Build => "`make -j1` of libbpf (static library)",
            Benchmark::Link => "static link of a program with LLVM 14's libraries (`g++`, a 90 MB executable)",
            Benchmark::Index => "`ctags -R` of libbpf-sys + libsqlite3-sys sources",
            Benchmark::Reader => "reader of generated files in a learned order (> 1 min)",
        }
    }

    /// A rough duration of one run on an idle two-core machine as-is, for the plan printed
    /// before the benchmark starts.
    pub fn nominal(self) -> Duration {
        Duration::from_secs(match self {
            Benchmark::Build => 45,
            Benchmark::Link => 10,
            Benchmark::Index => 10,
            Benchmark::Reader => 70,
        })
    }
}

impl FromStr for Benchmark {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Benchmark, String> {
        BENCHMARKS
            .into_iter()
            .find(|b| b.arg() == s)
            .ok_or_else(|| format!("unknown benchmark {s:?} (build, link, index, reader)"))
    }
}

impl fmt::Display for Benchmark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.arg())
    }
}

/// The shape of the reader's files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReaderShape {
    /// How many files.
    pub files: usize,
    /// Smallest file, KiB.
    pub min_kib: u64,
    /// Largest file, KiB.
    pub max_kib: u64,
    /// CPU work after each file, milliseconds (busy, so it counts as user time, not I/O wait).
    pub work_ms: u64,
}

impl Default for ReaderShape {
    /// 1,500 files (under the context model's default cap of 8,192 nodes per workload, about
    /// 2,000 files of one repeated order), 16 KiB to 1 MiB, 45 ms of work after each: about
    /// 70 s of CPU and 750 MiB read.
    fn default() -> Self {
        ReaderShape { files: 1_500, min_kib: 16, max_kib: 1_024, work_ms: 45 }
    }
}

/// A small deterministic generator (xorshift64*), so the trees and the order are the same on
/// every machine and every invocation.
struct Xorshift(u64);

impl Xorshift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// The reader's files (relative paths) with their sizes in bytes, in the order it opens them: a
/// fixed shuffle of names spread over 40 directories, so the order is neither the names' nor
/// the directories'.
pub fn reader_files(shape: &ReaderShape) -> Vec<(PathBuf, u64)> {
    let mut rng = Xorshift(0x6b72_6f65_6765_7222);
    let span = shape.max_kib.saturating_sub(shape.min_kib) + 1;
    let mut files: Vec<(PathBuf, u64)> = (0..shape.files)
        .map(|i| {
            let kib = shape.min_kib + rng.next() % span;
            (PathBuf::from(format!("d{:02}/f{i:05}.dat", i % 40)), kib * 1024)
        })
        .collect();
    for i in (1..files.len()).rev() {
        let j = (rng.next() % (i as u64 + 1)) as usize;
        files.swap(i, j);
    }
    files
}

/// Where the benchmarks keep their trees.
#[derive(Clone, Debug)]
pub struct Trees {
    /// The cache directory.
    pub dir: PathBuf,
    /// The reader's shape.
    pub reader: ReaderShape,
}

impl Trees {
    fn build_dir(&self) -> PathBuf {
        self.dir.join("build/libbpf")
    }
    fn link_dir(&self) -> PathBuf {
        self.dir.join("link")
    }
    fn index_dir(&self) -> PathBuf {
        self.dir.join("index")
    }
    fn reader_dir(&self) -> PathBuf {
        let r = &self.reader;
        self.dir.join(format!("reader-{}-{}-{}", r.files, r.min_kib, r.max_kib))
    }

    /// The command timed for `b`.
    pub fn workload(&self, b: Benchmark, me: &Path) -> Result<Workload> {
        let os = |s: &str| OsString::from(s);
        Ok(Workload::new(match b {
            Benchmark::Build => {
                vec![os("make"), os("-C"), self.build_dir().join("src").into(), os("-j1"), os("BUILD_STATIC_ONLY=y")]
            }
            Benchmark::Link => {
                let dir = self.link_dir();
                let args = fs::read_to_string(dir.join("args")).context(|| format!("reading {}/args", dir.display()))?;
                let mut argv = vec![os("g++"), os("-o"), dir.join("out/big").into(), dir.join("main.o").into()];
                argv.extend(args.lines().filter(|l| !l.is_empty()).map(OsString::from));
                argv
            }
            Benchmark::Index => {
                vec![os("ctags"), os("-R"), os("-f"), self.dir.join("index-tags").into(), self.index_dir().into()]
            }
            Benchmark::Reader => vec![
                me.into(),
                os("kroeger-reader"),
                os("--work-ms"),
                os(&self.reader.work_ms.to_string()),
                self.reader_dir().into(),
            ],
        }))
    }

    /// Undoes what the last run of `b` made, so every run does the same work (untimed).
    pub fn reset(&self, b: Benchmark) -> Result<()> {
        match b {
            Benchmark::Build => {
                let src = self.build_dir().join("src");
                launch::tool_output(Command::new("make").arg("-C").arg(&src).arg("clean"), "make clean").map(drop)
            }
            Benchmark::Link => launch::remove_file_if_any(&self.link_dir().join("out/big")),
            Benchmark::Index => launch::remove_file_if_any(&self.dir.join("index-tags")),
            Benchmark::Reader => Ok(()),
        }
    }

    /// Makes `b`'s tree once: copies of the sources from cargo's registry, the link's objects
    /// compiled, the reader's files written. Returns what it did, if anything.
    pub fn ensure(&self, b: Benchmark) -> Result<Option<String>> {
        let done = match b {
            Benchmark::Reader => self.reader_dir().join(".ready"),
            Benchmark::Link => self.link_dir().join(".ready-llvm"),
            _ => self.dir.join(format!(".{}-ready", b.arg())),
        };
        if done.exists() {
            return Ok(None);
        }
        let note = match b {
            Benchmark::Build => {
                let libbpf = registry_crate("libbpf-sys-")?.join("libbpf");
                copy_tree(&libbpf, &self.build_dir())?;
                format!("copied {} to {}", libbpf.display(), self.build_dir().display())
            }
            Benchmark::Link => self.make_link_inputs()?,
            Benchmark::Index => {
                let dir = self.index_dir();
                for c in [registry_crate("libbpf-sys-")?, registry_crate("libsqlite3-sys-")?] {
                    let name = c.file_name().map(|n| n.to_os_string()).unwrap_or_default();
                    copy_tree(&c, &dir.join(name))?;
                }
                format!("copied libbpf-sys and libsqlite3-sys to {}", dir.display())
            }
            Benchmark::Reader => {
                let files = reader_files(&self.reader);
                let dir = self.reader_dir();
                let mut rng = Xorshift(0x5eed);
                for (rel, bytes) in &files {
                    let path = dir.join(rel);
                    if let Some(parent) = path.parent() {
                        fs::create_dir_all(parent).context(|| format!("creating {}", parent.display()))?;
                    }
                    let data: Vec<u8> = (0..*bytes / 8).flat_map(|_| rng.next().to_le_bytes()).collect();
                    fs::write(&path, data).context(|| format!("writing {}", path.display()))?;
                }
                let order: String = files.iter().map(|(p, _)| format!("{}\n", p.display())).collect();
                fs::write(dir.join("order"), order).context(|| format!("writing {}/order", dir.display()))?;
                let total: u64 = files.iter().map(|(_, b)| b).sum();
                format!("wrote {} files ({} MiB) under {}", files.len(), total >> 20, dir.display())
            }
        };
        fs::write(&done, b"").context(|| format!("writing {}", done.display()))?;
        Ok(Some(note))
    }

    /// Compiles the program linked (a `main` that initialises every LLVM target, so the static
    /// link pulls in most of LLVM) and writes the link's arguments (`llvm-config --link-static`,
    /// without the Polly libraries Debian does not ship as archives), untimed.
    fn make_link_inputs(&self) -> Result<String> {
        let dir = self.link_dir();
        fs::create_dir_all(dir.join("out")).context(|| format!("creating {}/out", dir.display()))?;
        let config = |args: &[&str]| -> Result<Vec<String>> {
            let out = Command::new("llvm-config").args(args).stderr(Stdio::null()).output().map_err(|e| BenchError::Command {
                command: "llvm-config".into(),
                detail: format!("cannot start ({e}): the link benchmark needs LLVM's static libraries (llvm-dev)"),
            })?;
            if !out.status.success() {
                return Err(BenchError::Command { command: format!("llvm-config {}", args.join(" ")), detail: "failed".into() });
            }
            Ok(String::from_utf8_lossy(&out.stdout).split_whitespace().map(str::to_string).collect())
        };
        let main = dir.join("main.cpp");
        fs::write(&main, LINKED_MAIN).context(|| format!("writing {}", main.display()))?;
        let mut cc = Command::new("g++");
        cc.arg("-c").args(config(&["--cxxflags"])?).arg(&main).arg("-o").arg(dir.join("main.o"));
        launch::tool_output(&mut cc, "g++ -c main.cpp")?;
        let args: Vec<String> = config(&["--link-static", "--ldflags", "--libs", "all", "--system-libs"])?
            .into_iter()
            .filter(|a| !a.starts_with("-lPolly"))
            .collect();
        fs::write(dir.join("args"), args.join("\n") + "\n").context(|| format!("writing {}/args", dir.display()))?;
        Ok(format!("compiled {} and wrote its link's {} arguments", main.display(), args.len()))
    }
}

/// The program the link benchmark links: every LLVM target initialised.
const LINKED_MAIN: &str = r#"#include <llvm/Support/TargetSelect.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
int main() {
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::LLVMContext c;
    llvm::Module m("augur-bench", c);
    return 0;
}
"#;

/// The newest unpacked crate in cargo's registry whose directory name starts with `prefix`.
fn registry_crate(prefix: &str) -> Result<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .unwrap_or_else(|| PathBuf::from("/root/.cargo"));
    let src = home.join("registry/src");
    let mut found: Vec<PathBuf> = Vec::new();
    for index in fs::read_dir(&src).map_err(|e| BenchError::io_at(&src, "listing", e))?.flatten() {
        for e in fs::read_dir(index.path()).into_iter().flatten().flatten() {
            if e.file_name().to_string_lossy().starts_with(prefix) {
                found.push(e.path());
            }
        }
    }
    found.sort();
    found.pop().ok_or_else(|| BenchError::NotFound { path: src.join(format!("*/{prefix}*")) })
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent).context(|| format!("creating {}", parent.display()))?;
    }
    let _ = fs::remove_dir_all(to);
    launch::tool_output(Command::new("cp").arg("-a").arg(from).arg(to), &format!("cp -a {}", from.display())).map(drop)
}

/// The reader (`augur-bench kroeger-reader DIR`): opens the files `DIR/order` names, in that
/// order, reads each through, and after each spins the CPU for `work` of its CPU time (busy, so
/// it counts as user time). Returns the bytes read.
pub fn read_in_order(dir: &Path, work: Duration) -> Result<u64> {
    let order = fs::read_to_string(dir.join("order")).context(|| format!("reading {}/order", dir.display()))?;
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    let mut sum = 0u64;
    for rel in order.lines().filter(|l| !l.is_empty()) {
        let path = dir.join(rel);
        let mut f = fs::File::open(&path).context(|| format!("opening {}", path.display()))?;
        loop {
            let n = f.read(&mut buf).context(|| format!("reading {}", path.display()))?;
            if n == 0 {
                break;
            }
            total += n as u64;
            sum = sum.wrapping_add(u64::from(buf[0]));
        }
        // Counted in the thread's CPU time, not the wall clock: on a busy machine the same work
        // then takes the same user time, and only the waits (disk, or the CPU) show as I/O wait.
        let until = thread_cpu_time() + work;
        while thread_cpu_time() < until {
            for _ in 0..1_000 {
                sum = std::hint::black_box(sum.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
            }
        }
    }
    std::hint::black_box(sum);
    Ok(total)
}

/// CPU time this thread has used.
fn thread_cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec.max(0) as u64, t.tv_nsec.clamp(0, 999_999_999) as u32)
}

/// What augur's daemon did over one run with augur on (from its readiness to the end of the
/// run): counts that do not depend on how busy the machine is.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DaemonRun {
    /// Bytes it caused to be read from storage (`read_bytes` of its `/proc/PID/io`): its
    /// prefetches, and its state.
    pub read_bytes: u64,
    /// Its CPU time (user + system), seconds.
    pub cpu_secs: f64,
}

/// The measured runs of one benchmark under one machine profile.
#[derive(Clone, Debug, Default)]
pub struct Runs {
    /// augur not running.
    pub off: Vec<RunSample>,
    /// augur's daemon as installed.
    pub on: Vec<RunSample>,
    /// What the daemon did in each run of `on`.
    pub daemon: Vec<DaemonRun>,
}

/// `mean ± half width` of the 95 % interval, in seconds, from milliseconds.
fn mean_ci(ms: &[f64]) -> String {
    let half = stats::ci95_half_width(ms);
    if half.is_finite() {
        format!("{:.2} ± {:.2}", stats::mean(ms) / 1000.0, half / 1000.0)
    } else {
        format!("{:.2}", stats::mean(ms) / 1000.0)
    }
}

/// How much lower `on`'s mean is than `off`'s, percent (negative: higher).
fn lower_by(off: &[f64], on: &[f64]) -> f64 {
    let base = stats::mean(off);
    if base > 0.0 { (base - stats::mean(on)) / base * 100.0 } else { 0.0 }
}

/// I/O wait must be at least this much lower with augur (issue 22's acceptance).
pub const REQUIRED_IO_WAIT_CUT_PERCENT: f64 = 60.0;

/// The table of one machine profile: I/O wait and elapsed time, off against on, mean ± 95 %
/// interval, and whether the acceptance is met (I/O wait ≥ 60 % lower, elapsed not higher).
pub fn markdown(profile: &str, warmups: usize, rows: &[(Benchmark, Runs)]) -> String {
    let n = rows.first().map_or(0, |(_, r)| r.off.len());
    let mut out = format!(
        "Machine profile **{profile}**: {warmups} warm-up runs, then {n} measured runs per benchmark and condition, every cache \
         dropped before each run; I/O wait = elapsed − (user + sys) of the benchmark and its children; seconds, mean ± half \
         width of the 95 % confidence interval (Student's t).\n\n"
    );
    out.push_str(
        "| benchmark | I/O wait, augur off | I/O wait, augur on | lower by | elapsed, off | elapsed, on | lower by | met |\n",
    );
    out.push_str("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
    for (b, r) in rows {
        let io = |s: &[RunSample]| s.iter().map(|x| x.io_wait_ms).collect::<Vec<_>>();
        let el = |s: &[RunSample]| s.iter().map(|x| x.elapsed_ms).collect::<Vec<_>>();
        let (io_off, io_on, el_off, el_on) = (io(&r.off), io(&r.on), el(&r.off), el(&r.on));
        let io_cut = lower_by(&io_off, &io_on);
        let el_cut = lower_by(&el_off, &el_on);
        // Elapsed "not worse": the interval of the difference would be stricter; the means are
        // what the acceptance names.
        let met = io_cut >= REQUIRED_IO_WAIT_CUT_PERCENT && el_cut >= 0.0;
        out.push_str(&format!(
            "| {} | {} | {} | {io_cut:.1} % | {} | {} | {el_cut:.1} % | {} |\n",
            b.describe(),
            mean_ci(&io_off),
            mean_ci(&io_on),
            mean_ci(&el_off),
            mean_ci(&el_on),
            if met { "yes" } else { "no" }
        ));
    }
    out.push_str(&bytes_read_table(rows));
    out
}

/// Bytes read from storage, which the machine's other work does not change as it does the
/// times: by the workload (its and its children's `ru_inblock`) with augur off and on, by the
/// daemon, and the daemon's CPU time; MiB and seconds, means.
fn bytes_read_table(rows: &[(Benchmark, Runs)]) -> String {
    let mib = |bytes: f64| bytes / f64::from(1u32 << 20);
    let mean = |v: Vec<f64>| if v.is_empty() { f64::NAN } else { stats::mean(&v) };
    let read = |s: &[RunSample]| mean(s.iter().map(|x| x.blocks_in as f64 * 512.0).collect());
    let cell = |x: f64, digits: usize| if x.is_finite() { format!("{x:.digits$}") } else { "–".to_string() };
    let mut out = String::from(
        "\nRead from storage, MiB (mean of the measured runs): by the benchmark and its children (`ru_inblock`), and by \
         augur's daemon from its readiness to the end of the run (`/proc/PID/io` `read_bytes`: its prefetches), with the \
         daemon's CPU time.\n\n",
    );
    out.push_str(
        "| benchmark | read by it, augur off | read by it, augur on | read by the daemon | both, augur on | daemon CPU, s |\n",
    );
    out.push_str("| --- | ---: | ---: | ---: | ---: | ---: |\n");
    for (b, r) in rows {
        let (off, on) = (read(&r.off), read(&r.on));
        let daemon = mean(r.daemon.iter().map(|d| d.read_bytes as f64).collect());
        let cpu = mean(r.daemon.iter().map(|d| d.cpu_secs).collect());
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            b.describe(),
            cell(mib(off), 1),
            cell(mib(on), 1),
            cell(mib(daemon), 1),
            cell(mib(on + daemon), 1),
            cell(cpu, 2)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_order_is_fixed_shuffled_and_sized() {
        let shape = ReaderShape { files: 200, min_kib: 4, max_kib: 8, work_ms: 1 };
        let a = reader_files(&shape);
        assert_eq!(a, reader_files(&shape), "the same on every call");
        assert_eq!(a.len(), 200);
        assert!(a.iter().all(|(_, b)| (4096..=8192).contains(b) && b % 1024 == 0));
        let mut names: Vec<_> = a.iter().map(|(p, _)| p.clone()).collect();
        let in_order = names.clone();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 200, "each file once");
        assert_ne!(in_order, names, "not in name order");
    }

    #[test]
    fn reader_reads_every_file_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let trees = Trees { dir: dir.path().into(), reader: ReaderShape { files: 30, min_kib: 1, max_kib: 3, work_ms: 0 } };
        assert!(trees.ensure(Benchmark::Reader).unwrap().is_some());
        assert!(trees.ensure(Benchmark::Reader).unwrap().is_none(), "made once");
        let want: u64 = reader_files(&trees.reader).iter().map(|(_, b)| b).sum();
        assert_eq!(read_in_order(&trees.reader_dir(), Duration::ZERO).unwrap(), want);
    }

    #[test]
    fn names_round_trip() {
        for b in BENCHMARKS {
            assert_eq!(b.arg().parse::<Benchmark>().unwrap(), b);
        }
        assert!("kernel".parse::<Benchmark>().is_err());
    }

    #[test]
    fn table_says_what_was_met() {
        let s = |io: f64, el: f64| RunSample {
            elapsed_ms: el,
            user_ms: el - io,
            sys_ms: 0.0,
            io_wait_ms: io,
            major_faults: 0,
            blocks_in: if io >= 1000.0 { 2_048 } else { 1_024 },
        };
        let daemon = vec![DaemonRun { read_bytes: 3 << 20, cpu_secs: 0.5 }, DaemonRun { read_bytes: 5 << 20, cpu_secs: 0.7 }];
        let met = Runs { off: vec![s(1000.0, 5000.0), s(1200.0, 5200.0)], on: vec![s(300.0, 4300.0), s(340.0, 4350.0)], daemon };
        let not = Runs {
            off: vec![s(1000.0, 5000.0), s(1000.0, 5000.0)],
            on: vec![s(500.0, 4500.0), s(500.0, 4500.0)],
            daemon: Vec::new(),
        };
        let md = markdown("as-is", 3, &[(Benchmark::Build, met), (Benchmark::Reader, not)]);
        let lines: Vec<&str> = md.lines().filter(|l| l.starts_with("| ")).collect();
        assert_eq!(lines.len(), 8, "two tables of a header, a separator and two rows: {md}");
        assert!(lines[2].contains("70.9 %") && lines[2].ends_with("| yes |"), "{}", lines[2]);
        assert!(lines[3].contains("50.0 %") && lines[3].ends_with("| no |"), "{}", lines[3]);
        assert!(md.contains("3 warm-up runs, then 2 measured"), "{md}");
        // 2,048 blocks of 512 bytes off, 1,024 on, 4 MiB read by the daemon on average.
        assert!(lines[6].ends_with("| 1.0 | 0.5 | 4.0 | 4.5 | 0.60 |"), "{}", lines[6]);
        assert!(lines[7].ends_with("| 1.0 | 0.5 | – | – | – |"), "no daemon figures: {}", lines[7]);
    }
}
