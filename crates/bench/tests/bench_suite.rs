//! End to end (as root, as CI runs): `augur-bench --suite` on a tiny suite under the as-is and
//! slow-disk profiles writes its outputs and leaves no cgroup or balloon behind; the
//! small-memory profile's balloon really lowers MemAvailable and is removed when the run is
//! interrupted with SIGINT; a peer whose binary is missing is reported as not measured (progress
//! and report) while the rest is measured; a window workload started from a .desktop file by
//! `gtk-launch` (which exits at once) is timed to its window and closed without leftovers; a
//! measurement that timed out is not repeated in later runs; a non-root user is refused with exit
//! code 7.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn augur() -> &'static str {
    env!("CARGO_BIN_EXE_augur-bench")
}

/// Throttle cgroups and balloons owned by suite process `owner`.
fn leftovers(owner: u32) -> (Vec<String>, Vec<String>) {
    let cgroups: Vec<String> = ["/sys/fs/cgroup/blkio", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flat_map(|d| d.flatten())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n == &format!("augur-bench-{owner}"))
        .collect();
    let balloons: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(" balloon ") && c.contains(&format!("--owner {owner} ")))
        .collect();
    (cgroups, balloons)
}

fn mem_available() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    let line = text.lines().find(|l| l.starts_with("MemAvailable:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// Bytes locked (VmLck) by the balloon of suite process `owner`.
fn locked_by_balloon(owner: u32) -> u64 {
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(" balloon ") && cmd.contains(&format!("--owner {owner} ")) {
            let status = std::fs::read_to_string(e.path().join("status")).unwrap_or_default();
            if let Some(l) = status.lines().find(|l| l.starts_with("VmLck:")) {
                return l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024;
            }
        }
    }
    0
}

fn write_suite(dir: &Path, command: &str) -> std::path::PathBuf {
    write_suite_with(dir, command, r#"["cold", "warm"]"#)
}

fn write_suite_with(dir: &Path, command: &str, conditions: &str) -> std::path::PathBuf {
    let suite = dir.join("suite.toml");
    std::fs::write(
        &suite,
        format!("runs = 1\ntraining_secs = 0\nconditions = {conditions}\n[[workload]]\nname = \"tiny\"\ncommand = {command}\n"),
    )
    .unwrap();
    suite
}

/// `augur-bench --suite SUITE ARGS --skip-day --skip-cost`, writing to `dir`/out with its cache
/// in `dir`/cache.
fn suite_run(suite: &Path, dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(augur());
    c.arg("--suite").arg(suite).args(args).args(["--skip-day", "--skip-cost", "--output-dir"]);
    c.arg(dir.join("out")).arg("--cache-dir").arg(dir.join("cache"));
    c
}

#[test]
fn tiny_suite_as_is_and_slow_disk_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let suite = write_suite(dir.path(), r#"["sh", "-c", "ls /usr/bin > /dev/null"]"#);
    let out = dir.path().join("out");
    let mut child =
        suite_run(&suite, dir.path(), &["--machine", "as-is", "--machine", "slow-disk"]).stdout(Stdio::null()).spawn().unwrap();
    let pid = child.id();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("suite.json")).unwrap()).unwrap();
    let profiles = json["profiles"].as_array().unwrap();
    assert_eq!(profiles.len(), 2);
    assert_eq!(profiles[0]["machine"]["profile"], "as-is");
    assert_eq!(profiles[1]["machine"]["profile"], "slow-disk");
    let read_back = profiles[1]["machine"]["throttle_read_back"].as_str().unwrap();
    assert!(read_back.contains(" 200") && read_back.contains(" 40000000"), "{read_back}");
    for p in profiles {
        let conds = p["workloads"][0]["conditions"].as_array().unwrap();
        assert_eq!(conds.len(), 2);
        for c in conds {
            assert_eq!(c["status"], "measured", "{c}");
            assert_eq!(c["samples"].as_array().unwrap().len(), 1);
        }
    }
    let md = std::fs::read_to_string(out.join("suite.md")).unwrap();
    assert!(md.contains("## Profile `slow-disk`") && md.contains("| tiny |"), "{md}");
    let svg = std::fs::read_to_string(out.join("suite.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("tiny"));
    assert_eq!(leftovers(pid), (vec![], vec![]), "cgroup or balloon left behind");
}

#[test]
fn missing_peer_is_reported_not_measured_and_the_suite_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let suite = write_suite_with(dir.path(), r#"["true"]"#, r#"["cold", "warm", "preload-ng"]"#);
    let out = dir.path().join("out");
    let missing = dir.path().join("no-such-dir/preload-ng");
    let run = suite_run(&suite, dir.path(), &["--machine", "as-is"]).env("PRELOAD_NG_BIN", &missing).output().unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{err}");
    let line = format!("preload-ng: not measured (binary not found at {}; run scripts/bench-setup)", missing.display());
    assert!(err.contains(&line), "{err}");
    let md = std::fs::read_to_string(out.join("suite.md")).unwrap();
    assert!(md.contains(&format!("- {line}")), "{md}");
    assert!(md.contains("| workload | cold | warm |") && !md.contains("| preload-ng |"), "{md}");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("suite.json")).unwrap()).unwrap();
    let conds = json["profiles"][0]["workloads"][0]["conditions"].as_array().unwrap();
    assert_eq!(conds.iter().map(|c| c["status"].as_str().unwrap()).collect::<Vec<_>>(), ["measured", "measured", "unavailable"]);
}

#[test]
fn a_measurement_that_timed_out_is_not_repeated_in_later_runs() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite.toml");
    std::fs::write(
        &suite,
        "runs = 1\ntraining_secs = 0\nconditions = [\"cold\"]\n[[workload]]\nname = \"slow\"\ncommand = [\"sleep\", \"5\"]\ntimeout_secs = 1\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let started = Instant::now();
    let run = suite_run(&suite, dir.path(), &["--machine", "as-is", "--runs", "3"]).output().unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{err}");
    assert!(err.contains("run 1/3: slow cold: failed: sleep 5: did not finish within 1 s"), "{err}");
    assert!(err.contains("run 2/3: slow cold: not repeated (timed out in run 1)"), "{err}");
    assert!(err.contains("run 3/3: slow cold: not repeated (timed out in run 1)"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(60), "{err}");
    let md = std::fs::read_to_string(out.join("suite.md")).unwrap();
    assert!(md.contains("did not finish within 1 s (run 1; not repeated in later runs)"), "{md}");
}

/// Makes sure `program` is installed (Debian package `package`).
fn install(program: &str, package: &str) {
    if Command::new("sh").arg("-c").arg(format!("command -v {program}")).status().unwrap().success() {
        return;
    }
    let s =
        Command::new("apt-get").args(["install", "-y", "-q", package]).env("DEBIAN_FRONTEND", "noninteractive").status().unwrap();
    assert!(s.success(), "installing {package}");
}

/// Live processes whose command line contains `needle`.
fn processes_with(needle: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(needle))
        .collect()
}

#[test]
fn a_desktop_file_launch_is_timed_to_its_window_and_closed_without_leftovers() {
    install("Xvfb", "xvfb");
    install("xterm", "xterm");
    install("gtk-launch", "libgtk-3-bin");
    let dir = tempfile::tempdir().unwrap();
    let title = format!("augur-bench-desktop-{}", std::process::id());
    let apps = dir.path().join("data/applications");
    std::fs::create_dir_all(&apps).unwrap();
    std::fs::write(
        apps.join("augur-bench-tiny.desktop"),
        format!("[Desktop Entry]\nType=Application\nName=tiny\nExec=xterm -title {title}\n"),
    )
    .unwrap();
    let suite = dir.path().join("suite.toml");
    std::fs::write(
        &suite,
        format!(
            "runs = 1\ntraining_secs = 0\nconditions = [\"cold\", \"warm\"]\n[[workload]]\nname = \"tiny\"\n\
             command = [\"gtk-launch\", \"augur-bench-tiny\"]\nready = \"window\"\n\
             env = {{ XDG_DATA_DIRS = \"{}:/usr/share\" }}\n",
            dir.path().join("data").display()
        ),
    )
    .unwrap();
    let out = dir.path().join("out");
    let run = suite_run(&suite, dir.path(), &["--machine", "as-is"]).output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("suite.json")).unwrap()).unwrap();
    for c in json["profiles"][0]["workloads"][0]["conditions"].as_array().unwrap() {
        assert_eq!(c["status"], "measured", "{c}");
    }
    // gtk-launch exited at once and xterm was not its child when closed: the launch's marker
    // found it.
    assert_eq!(processes_with(&title), Vec::<String>::new(), "the application was left running");
}

#[test]
fn interrupted_small_memory_slow_disk_run_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let suite = write_suite(dir.path(), r#"["sleep", "3"]"#);
    let before = mem_available();
    // Leave all but 512 MiB available, so the balloon is quick and harmless to others.
    let leave = before - (512 << 20);
    let leave = leave.to_string();
    let mut child =
        suite_run(&suite, dir.path(), &["--machine", "small-memory+slow-disk", "--runs", "5", "--leave-available", &leave])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let mut lines = stderr.lines();
    let mut applied = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if line.contains("run 1/5: tiny cold") {
            break;
        }
        if line.contains("balloon") {
            applied = Some(line);
        }
    }
    let applied = applied.expect("the profile was applied");
    assert!(applied.contains("MemAvailable"), "{applied}");
    // While it runs: a balloon process exists and holds memory; the suite is in a cgroup.
    let pid = child.id();
    let (cgroups, balloons) = leftovers(pid);
    assert_eq!(balloons.len(), 1, "{balloons:?}");
    assert_eq!(cgroups.len(), 1, "{cgroups:?}");
    assert!(locked_by_balloon(pid) >= 256 << 20, "the balloon holds no locked memory");
    rustix::process::kill_process(rustix::process::Pid::from_raw(child.id() as i32).unwrap(), rustix::process::Signal::INT)
        .unwrap();
    let rest: Vec<String> = lines.map_while(|l| l.ok()).collect();
    let status = child.wait().unwrap();
    assert!(!status.success());
    assert!(rest.iter().any(|l| l.contains("interrupted")), "{rest:?}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while leftovers(pid) != (vec![], vec![]) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(leftovers(pid), (vec![], vec![]), "cgroup or balloon left behind after SIGINT");
}

#[test]
fn refuses_non_root_with_one_line_and_exit_7() {
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", augur(), "--suite", "/nonexistent.toml"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("needs root"), "{err}");
}
