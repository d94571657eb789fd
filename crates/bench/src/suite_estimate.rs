//! How long a suite run will take, planned from the suite file and the constants below (what one
//! launch, one prefetcher's first cycle, one profile's set-up take on the machine the recorded
//! runs were made on), printed before a run starts (`--estimate` prints it alone). Pure
//! arithmetic on the suite; it measures nothing, and the run prints what it really took.

use crate::machine::MachineProfile;
use crate::prefetchers::Prefetcher;
use crate::suite::{SuiteOptions, prefetcher_of};
use crate::suite_file::{Condition, Ready, Suite, Workload};

/// Seconds to apply a profile and prove it: backing all free memory the first time (90 s for
/// 21 GiB as-is here), the balloon (30 s), the cold read through the throttle.
fn profile_setup_secs(p: MachineProfile) -> f64 {
    if p.small_memory() { 35.0 } else { 90.0 }
}

/// Seconds a launch takes to be ready and to be closed again, cold, under `p` (the recorded runs:
/// desktop applications 0.1–4 s as-is and 11–45 s on the small slow machine, GNOME Terminal and
/// gedit 12–13 s, Firefox ESR 22–24 s, Evolution 45 s; commands 0.1–0.5 s and 3–4 s).
fn launch_secs(w: &Workload, p: MachineProfile) -> f64 {
    match (w.ready, p.slow_disk()) {
        (Ready::Exit, false) => 0.4,
        (Ready::Exit, true) => 3.0,
        (Ready::Window, false) => 1.5,
        (Ready::Window, true) => 20.0,
    }
}

/// Seconds a launch takes under prefetcher `kind`: on the slow disk, a prefetcher that reads
/// every application it learned before each launch (preload-ng) competes with the launch's own
/// reads, and the recorded runs' launches hit their timeout (at 9809e37: node 30 s of 30 twice,
/// Firefox ESR no window within 60 s three times; earlier gedit 38 s, GNOME Terminal 31 s).
fn launch_secs_under(kind: Prefetcher, w: &Workload, p: MachineProfile) -> f64 {
    let cold = launch_secs(w, p);
    if times_out(kind, p) { w.timeout_secs as f64 } else { cold }
}

/// Whether a launch under `kind` is expected to time out: then it is measured in one run only
/// (a measurement that timed out is not repeated).
fn times_out(kind: Prefetcher, p: MachineProfile) -> bool {
    kind == Prefetcher::PreloadNg && p.slow_disk()
}

/// Seconds around a launch under a prefetcher: drop the caches, start it, its first cycle and
/// the quiet waits (1.5 s of no reads, the cache settling, 1 s of a quiet disk), stop it (the
/// state saved). On the slow disk, loading what it planned at 40 MB/s; a prefetcher that loads
/// every application it learned (preload-ng: 1.3 GB, half a minute at 40 MB/s) is waited for
/// until the suite's `cycle_wait_secs`. As is, both prefetchers that plan ahead read 0.7–2.3 GB
/// before each launch (augur's free-memory tier, preload-ng everything it knows) and are waited
/// for until their reads stop and the disk is quiet: the run at 9809e37 took 31 min for the
/// as-is profile with its costs against 26 planned with 5 s here (6.5 s charges that run's 31).
fn prefetcher_secs(kind: Prefetcher, p: MachineProfile, cycle_wait_secs: u64) -> f64 {
    match (kind.prefetches_ahead(), p.slow_disk()) {
        (true, true) if kind == Prefetcher::PreloadNg => cycle_wait_secs as f64,
        (true, false) => 6.5,
        (false, false) => 1.0,
        (true, true) => 10.0,
        (false, true) => 3.0,
    }
}

/// Seconds around each replayed day besides its launches (see [`estimate`]).
const DAY_OVERHEAD_SECS: f64 = 45.0;

/// Seconds to find out a prefetcher can run (start, first cycle or planning round, stop).
const PROBE_SECS: f64 = 4.0;

/// The phases of a run and their planned seconds, in order.
pub fn estimate(suite: &Suite, profiles: &[MachineProfile], opts: &SuiteOptions) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    let measured: Vec<Prefetcher> = suite.conditions.iter().filter_map(|c| prefetcher_of(*c)).collect();
    let watchers = crate::prefetchers::watching(&measured);
    for (i, &p) in profiles.iter().enumerate() {
        let mut secs = profile_setup_secs(p) + PROBE_SECS * measured.len() as f64;
        if i == 0 {
            secs += suite.workloads.iter().map(|w| suite.training_secs as f64 + launch_secs(w, p)).sum::<f64>();
        }
        let here: Vec<&Workload> = suite.workloads.iter().filter(|w| !opts.skip_tables && w.measured_under(p.name())).collect();
        for w in &here {
            for c in &suite.conditions {
                let runs = match prefetcher_of(*c) {
                    Some(k) if times_out(k, p) => 1.0,
                    _ => f64::from(suite.runs),
                };
                secs += runs
                    * match (c, prefetcher_of(*c)) {
                        (_, Some(k)) => launch_secs_under(k, w, p) + prefetcher_secs(k, p, suite.cycle_wait_secs),
                        (Condition::Cold, None) => launch_secs(w, p) + 1.0,
                        _ => 0.2,
                    };
            }
        }
        out.push((format!("{p}: set-up, training and {} runs of {} workloads", suite.runs, here.len()), secs));
        if let Some(day) =
            suite.day.as_ref().filter(|d| !opts.skip_day && (d.profiles.is_empty() || d.profiles.iter().any(|x| x == p.name())))
        {
            let steps = crate::usage_day::read_trace(&day.trace)
                .map(|acts| {
                    let d = crate::usage_day::trace_day_for(crate::usage_day::trace_days(&acts), day.training_days, None);
                    crate::usage_day::plan(&crate::usage_day::day_of(&acts, d), &suite.workloads, day)
                })
                .unwrap_or_default();
            let mut one_day: f64 = steps
                .iter()
                .map(|s| {
                    let wait = if s.drop_caches { s.wait_secs.max(25.0) } else { s.wait_secs };
                    // Launches the day repeats are partly warm: half a cold launch.
                    wait + if s.launch { launch_secs(&suite.workloads[s.workload], p) * 0.5 } else { 0.0 }
                })
                .sum::<f64>()
                + 20.0;
            if day.stop_after_secs > 0 {
                one_day = one_day.min(day.stop_after_secs as f64);
            }
            // Around each day: the caches dropped, the prefetcher started and its first cycle
            // waited for, the launch in flight when the day stops, the state saved (six days
            // took 22 min at 9809e37 with 165 s each).
            one_day += DAY_OVERHEAD_SECS;
            // The working sets of the day's applications no table of this or an earlier profile
            // measured cold.
            let timed_before =
                |w: &crate::suite_file::Workload| !opts.skip_tables && profiles[..i].iter().any(|q| w.measured_under(q.name()));
            let unmeasured: std::collections::BTreeSet<usize> = steps
                .iter()
                .filter(|s| {
                    s.launch
                        && !here.iter().any(|w| w.name == suite.workloads[s.workload].name)
                        && !timed_before(&suite.workloads[s.workload])
                })
                .map(|s| s.workload)
                .collect();
            let sets: f64 = unmeasured.iter().map(|&w| launch_secs(&suite.workloads[w], p) + 3.0).sum();
            // Each training day is replayed once per group of prefetchers that train together.
            let groups = crate::usage_day::training_groups(&watchers).len().max(1);
            let days = day.training_days as usize * groups + 1 + crate::usage_day::day_prefetchers(&measured).len();
            out.push((format!("{p}: usage day, {days} days of {one_day:.0} s"), days as f64 * one_day + sets));
        }
        if let Some(cost) =
            suite.cost.as_ref().filter(|c| !opts.skip_cost && (c.profiles.is_empty() || c.profiles.iter().any(|x| x == p.name())))
        {
            // A cold read of the tree at the as-is disk's 900 MB/s; a cold build of 120 sources
            // took 5 s.
            let tree = cost.tree_bytes as f64 / 900e6 + 1.0;
            let build = 5.0 * f64::from(cost.build_sources) / 120.0;
            let others = watchers.len() as f64 + 1.0;
            let runs = 1.0 + f64::from(cost.learning_rounds) * 3.0 * 2.0 + f64::from(cost.runs) * others;
            out.push((format!("{p}: costs"), cost.idle_secs as f64 + 15.0 + runs * (tree + build)));
        }
    }
    out
}

/// "about 57 min (as-is: ... 18 min; ...)".
pub fn describe(phases: &[(String, f64)]) -> String {
    let total: f64 = phases.iter().map(|(_, s)| s).sum();
    let parts: Vec<String> = phases.iter().map(|(n, s)| format!("{n} {:.0} min", s / 60.0)).collect();
    format!("about {:.0} min ({})", total / 60.0, parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repository_suite_runs_within_an_hour_with_three_runs() {
        let opts = SuiteOptions {
            suite_path: std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/suite.toml"),
            profiles: vec![MachineProfile::AsIs, MachineProfile::SmallMemorySlowDisk],
            settings: Default::default(),
            runs: Some(3),
            training_secs: None,
            output_dir: "unused".into(),
            cache_dir: "unused".into(),
            only: Vec::new(),
            skip_day: false,
            skip_cost: false,
            skip_tables: false,
            check_profiles_only: false,
            command_line: String::new(),
            augur_exe: "augur".into(),
            preload_ng_exe: "preload-ng".into(),
        };
        let (suite, _) = crate::suite::prepared_suite(&opts).unwrap();
        let phases = estimate(&suite, &opts.profiles, &opts);
        let total: f64 = phases.iter().map(|(_, s)| s).sum();
        assert!(total <= 3600.0, "{}", describe(&phases));
        assert!(phases.iter().any(|(n, _)| n.contains("usage day")), "{}", describe(&phases));
        assert!(phases.iter().any(|(n, _)| n.contains("costs")), "{}", describe(&phases));
    }
}
