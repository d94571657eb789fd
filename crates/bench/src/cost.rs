//! What prefetching costs the rest of the machine: I/O-heavy work (reading a multi-GiB file tree
//! cold, a parallel build of a generated C project, cold) with each prefetcher off and on,
//! interleaved, as a ratio of medians; and the I/O wait of each run as Kroeger and Long measured
//! it, elapsed − (user + sys) of the work's processes.
//!
//! It generates its inputs once in the cache directory; it does not measure the daemons' own
//! CPU and memory (the suite does, around training and idleness).

use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{IoContext, Result};
use crate::launch::LaunchEnv;
use crate::measure::{Workload as BenchWorkload, run_to_exit};
use crate::prefetchers::{DaemonFiles, Prefetcher, RunningDaemon};
use crate::suite_file::CostSpec;
use crate::suite_report::Slowdown;
use crate::{interrupt, page_cache};
use augur_os::fetch::drop_all_caches;

/// What the cost measurements share with the suite.
pub struct CostContext<'a> {
    /// Generated inputs live here.
    pub cache_dir: PathBuf,
    /// Workload environment (its log receives the commands' output).
    pub env: &'a LaunchEnv,
    /// Daemon files.
    pub files: &'a DaemonFiles,
    /// Prefetchers that can run.
    pub available: &'a [Prefetcher],
    /// Progress lines.
    pub progress: &'a dyn Fn(&str),
}

/// Elapsed and CPU seconds of one run.
#[derive(Debug, Clone, Copy)]
struct Timed {
    elapsed: f64,
    cpu: f64,
}

impl Timed {
    /// Elapsed − (user + sys): the I/O wait as Kroeger and Long measured it.
    fn io_wait(&self) -> f64 {
        (self.elapsed - self.cpu).max(0.0)
    }
}

/// Runs the I/O-heavy workloads off / augur / preload / preload-ng, interleaved `spec.runs`
/// times.
pub fn slowdowns(ctx: &mut CostContext<'_>, spec: &CostSpec) -> Result<Vec<Slowdown>> {
    let tree = ctx.cache_dir.join("cost-tree");
    (ctx.progress)(&format!(
        "cost: preparing a {} MiB file tree and a {}-file C project",
        spec.tree_bytes >> 20,
        spec.build_sources
    ));
    ensure_tree(&tree, spec.tree_bytes, spec.tree_files)?;
    let build = ctx.cache_dir.join("cost-build");
    ensure_build(&build, spec.build_sources)?;
    // augur as installed when it runs here, else a variant (one augur daemon, as in training).
    let augur = crate::prefetchers::watching(ctx.available).into_iter().find(|k| k.is_augur());
    let preload = ctx.available.contains(&Prefetcher::Preload).then_some(Prefetcher::Preload);
    let preload_ng = ctx.available.contains(&Prefetcher::PreloadNg).then_some(Prefetcher::PreloadNg);
    // The prefetchers compared with none, in the order each run measures them; augur first.
    let peers = [("augur", augur), ("preload", preload), ("preload-ng", preload_ng)];
    let n = peers.len();
    let tree_cmd =
        vec!["sh".to_string(), "-c".into(), format!("find '{}' -type f -print0 | xargs -0 cat > /dev/null", tree.display())];
    let build_cmd =
        vec!["make".to_string(), "-s".into(), "-C".into(), build.display().to_string(), format!("-j{}", spec.build_jobs)];
    let clean_cmd = vec!["make".to_string(), "-s".into(), "-C".into(), build.display().to_string(), "clean".into()];
    type Work<'a> = (&'a str, &'a Vec<String>, Option<&'a Vec<String>>);
    let works: [Work<'_>; 2] = [("read file tree cold", &tree_cmd, None), ("make cold", &build_cmd, Some(&clean_cmd))];
    let mut out: Vec<Slowdown> = Vec::new();
    for (name, _, _) in &works {
        for (label, kind) in peers {
            out.push(Slowdown {
                workload: format!(
                    "{name} ({})",
                    if name.starts_with("make") {
                        format!("-j{}", spec.build_jobs)
                    } else {
                        format!("{} MiB", spec.tree_bytes >> 20)
                    }
                ),
                prefetcher: label.into(),
                unavailable: kind.is_none().then(|| format!("{label} is not available here")),
                ..Slowdown::default()
            });
        }
    }
    // One run of each workload with no prefetcher first, not counted: the first cold read of
    // freshly generated inputs (and of the tools) can take several times longer than any later
    // one in a VM, which would land on whichever condition happened to run first.
    for (name, cmd, prep) in &works {
        interrupt::check()?;
        let t = timed_with(ctx, None, cmd, *prep)?;
        (ctx.progress)(&format!("cost warm-up run (not counted): {name}: {:.2} s", t.elapsed));
    }
    // First sight: augur follows the first launches of an application it does not know yet;
    // those runs are the learning cost, reported apart from the steady state measured below.
    // Each is paired with a run without a prefetcher just before it (counted with the others),
    // so drift in the machine over the session cannot land on the learning runs alone. A round
    // is one first sight; between rounds augur forgets what the round taught it, so the learning
    // columns have more than a handful of samples of an effect of a few per cent.
    if let Some(kind) = augur {
        let learning_runs = augur_engine::config::Config::default().launch.follow_first_launches;
        let rounds = spec.learning_rounds.max(1);
        let known_before = learned_apps(&ctx.files.augur_state())?;
        for round in 1..=rounds {
            if round > 1 {
                forget_apps_except(&ctx.files.augur_state(), &known_before)?;
            }
            for run in 1..=learning_runs {
                for (wi, (name, cmd, prep)) in works.iter().enumerate() {
                    interrupt::check()?;
                    let off = timed_with(ctx, None, cmd, *prep)?;
                    interrupt::check()?;
                    let t = timed_with(ctx, Some(kind), cmd, *prep)?;
                    (ctx.progress)(&format!(
                        "cost learning round {round}/{rounds}, run {run}/{learning_runs}: {name}, off: {:.2} s, augur learning: {:.2} s",
                        off.elapsed, t.elapsed
                    ));
                    for s in &mut out[wi * n..(wi + 1) * n] {
                        s.off.push(off.elapsed);
                        s.io_wait_off.push(off.io_wait());
                    }
                    out[wi * n].learning.push(t.elapsed);
                }
            }
        }
    }
    for run in 1..=spec.runs {
        for (wi, (name, cmd, prep)) in works.iter().enumerate() {
            // Off first, then each prefetcher that runs here.
            for (ci, kind) in std::iter::once(None).chain(peers.iter().map(|(_, k)| *k)).enumerate() {
                if ci > 0 && kind.is_none() {
                    continue;
                }
                interrupt::check()?;
                let t = timed_with(ctx, kind, cmd, *prep)?;
                let label = kind.map_or("off", Prefetcher::name);
                let wait = t.io_wait();
                (ctx.progress)(&format!(
                    "cost run {run}/{}: {name}, {label}: {:.2} s (I/O wait {wait:.2} s)",
                    spec.runs, t.elapsed
                ));
                for (pi, s) in out[wi * n..(wi + 1) * n].iter_mut().enumerate() {
                    // ci 0 is off (every row's baseline); ci = pi + 1 is this row's prefetcher.
                    if ci == 0 {
                        s.off.push(t.elapsed);
                        s.io_wait_off.push(wait);
                    } else if ci == pi + 1 {
                        s.on.push(t.elapsed);
                        s.io_wait_on.push(wait);
                    }
                }
            }
        }
    }
    for s in &mut out {
        s.finish();
    }
    Ok(out)
}

/// The applications augur's state at `path` has learned (none when it does not exist yet).
fn learned_apps(path: &Path) -> Result<Vec<String>> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let (store, _) = augur_store::state::StateStore::open(path)?;
    Ok(store.apps()?.into_iter().map(|a| a.key).collect())
}

/// Forgets, in augur's state at `path` (no daemon running), every application but `keep`.
fn forget_apps_except(path: &Path, keep: &[String]) -> Result<()> {
    let (mut store, _) = augur_store::state::StateStore::open(path)?;
    for app in store.apps()? {
        if !keep.contains(&app.key) {
            store.forget(&app.key)?;
        }
    }
    Ok(())
}

/// Runs `prep`, drops the caches, starts `daemon` (if any) and lets it settle, drops the caches
/// again, and times `cmd` cold. Without a daemon the same pause and second drop come before the
/// run, so that every condition's run starts the same way (when runs without a daemon started
/// straight after the first drop, preload, which does nothing for these workloads, measured the
/// tree read 6 % slower than none).
fn timed_with(ctx: &CostContext<'_>, daemon: Option<Prefetcher>, cmd: &[String], prep: Option<&Vec<String>>) -> Result<Timed> {
    if let Some(prep) = prep {
        run_command(prep)?;
    }
    drop_all_caches()?;
    let daemon = match daemon {
        Some(k) => {
            let mut d = RunningDaemon::start(k, ctx.files)?;
            d.wait_ready(Duration::from_secs(30))?;
            Some(d)
        }
        None => None,
    };
    interrupt::sleep(Duration::from_secs(2))?;
    drop_all_caches()?;
    let t = run_command(cmd)?;
    if let Some(d) = daemon {
        d.stop()?;
    }
    Ok(t)
}

/// Runs `cmd` to completion with [`run_to_exit`]: elapsed and CPU (user + sys, from wait4).
fn run_command(cmd: &[String]) -> Result<Timed> {
    let sample = run_to_exit(&BenchWorkload::new(cmd.iter().map(OsString::from).collect()))?;
    interrupt::check()?;
    Ok(Timed { elapsed: sample.elapsed_ms / 1000.0, cpu: (sample.user_ms + sample.sys_ms) / 1000.0 })
}

/// Makes `dir` a tree of `files` files totalling `bytes`, unless a previous run made the same.
pub fn ensure_tree(dir: &Path, bytes: u64, files: u32) -> Result<()> {
    let stamp = dir.join(".complete");
    let want = format!("{bytes} {files}\n");
    if fs::read_to_string(&stamp).ok().as_deref() == Some(want.as_str()) {
        return Ok(());
    }
    if dir.exists() {
        fs::remove_dir_all(dir).context(|| format!("clearing {}", dir.display()))?;
    }
    let files = files.max(1);
    let per = bytes / u64::from(files);
    for i in 0..files {
        let sub = dir.join(format!("d{:03}", i / 100));
        let path = sub.join(format!("f{i:05}.bin"));
        let size = if i == files - 1 { bytes - per * u64::from(files - 1) } else { per };
        page_cache::ensure_file(&path, size)?;
        interrupt::check()?;
    }
    Ok(fs::write(&stamp, want).context(|| format!("writing {}", stamp.display()))?)
}

/// Makes `dir` a C project of `sources` files with a Makefile, unless it is one already.
pub fn ensure_build(dir: &Path, sources: u32) -> Result<()> {
    let stamp = dir.join(".complete");
    let want = format!("{sources}\n");
    if fs::read_to_string(&stamp).ok().as_deref() == Some(want.as_str()) {
        return Ok(());
    }
    fs::create_dir_all(dir).context(|| format!("creating {}", dir.display()))?;
    let mut objs = String::new();
    for i in 0..sources {
        let mut c = String::from(
            "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <math.h>\n#include <errno.h>\n#include <signal.h>\n#include <time.h>\n\n",
        );
        for f in 0..12 {
            let _ = writeln!(
                c,
                "double unit{i}_f{f}(const double *v, size_t n) {{\n    double acc = 0;\n    for (size_t k = 0; k < n; k++) acc += sqrt(fabs(v[k])) * {f}.5 + (k % {m});\n    char buf[64];\n    snprintf(buf, sizeof buf, \"%f\", acc);\n    return acc + (double)strlen(buf);\n}}\n",
                m = f + 3
            );
        }
        let name = format!("unit{i}.c");
        fs::write(dir.join(&name), c).context(|| format!("writing {}", dir.join(&name).display()))?;
        let _ = write!(objs, " unit{i}.o");
    }
    fs::write(dir.join("main.c"), "int main(void) { return 0; }\n").context(|| "writing main.c".into())?;
    let makefile = format!(
        "# Generated by augur-bench --suite.\nOBJS = main.o{objs}\nCFLAGS = -O2\n\nprog: $(OBJS)\n\t$(CC) -o $@ $(OBJS) -lm\n\n%.o: %.c\n\t$(CC) $(CFLAGS) -c $< -o $@\n\nclean:\n\trm -f prog *.o\n"
    );
    fs::write(dir.join("Makefile"), makefile).context(|| "writing the Makefile".into())?;
    Ok(fs::write(&stamp, want).context(|| format!("writing {}", stamp.display()))?)
}
