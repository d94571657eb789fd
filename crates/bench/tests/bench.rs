//! `augur-bench` end to end, as root (as CI runs it): one round of a real command traced,
//! timed cold, warm and prefetched, with JSON a script can read; and its refusals.
//!
//! Timings are not asserted (the machine is shared): only that the run completes and the report
//! is well formed and consistent.

use std::os::unix::process::CommandExt;
use std::process::{Command, Output};

fn augur() -> Command {
    Command::new(env!("CARGO_BIN_EXE_augur-bench"))
}

fn output(mut cmd: Command) -> Output {
    cmd.output().unwrap()
}

#[test]
fn one_round_traced_and_timed_with_json() {
    let mut cmd = augur();
    cmd.args(["--runs", "1", "--json", "--", "sh", "-c", "echo noise; cat /etc/os-release"]);
    let out = output(cmd);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "augur-bench failed: {stderr}");
    // The command's own output went to /dev/null: stdout is exactly the JSON.
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON only");
    assert_eq!(report["profile"]["source"], "traced");
    assert!(report["profile"]["files"].as_u64().unwrap() >= 2, "{report}");
    let names: Vec<&str> = report["conditions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["cold", "warm", "prefetched"]);
    for c in report["conditions"].as_array().unwrap() {
        assert_eq!(c["elapsed_ms"]["n"], 1, "{c}");
        let run = &c["runs"][0];
        let (e, u, s, w) = (
            run["elapsed_ms"].as_f64().unwrap(),
            run["user_ms"].as_f64().unwrap(),
            run["sys_ms"].as_f64().unwrap(),
            run["io_wait_ms"].as_f64().unwrap(),
        );
        assert!(e > 0.0 && w >= 0.0 && w <= e, "{run}");
        assert!((w - (e - u - s).max(0.0)).abs() < 1.0, "io wait is elapsed - cpu: {run}");
    }
    let replay = &report["conditions"][2]["runs"][0]["replay"];
    assert!(replay["wanted"].as_u64().unwrap() > 0, "{report}");
    let resident = replay["already_resident"].as_u64().unwrap() + replay["loaded"].as_u64().unwrap();
    assert!(resident * 100 >= replay["wanted"].as_u64().unwrap() * 99, "replayed to completion: {replay}");
    // Progress was shown while it ran.
    assert!(stderr.contains("round 1/1"), "{stderr}");
}

#[test]
fn bench_refuses_clearly() {
    let mut cmd = augur();
    cmd.args(["--", "true"]).uid(65534).gid(65534);
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(7), "non-root");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("root"), "{err}");

    let mut cmd = augur();
    cmd.args::<[&str; 0], &str>([]);
    assert_eq!(output(cmd).status.code(), Some(2), "no command");

    let mut cmd = augur();
    cmd.args(["--profile", "/nonexistent/p.json", "--", "true"]);
    assert_eq!(output(cmd).status.code(), Some(3), "missing profile");

    let mut cmd = augur();
    cmd.args(["--runs", "1", "--", "sh", "-c", "exit 4"]);
    let out = output(cmd);
    assert_eq!(out.status.code(), Some(10), "a failing command: {}", String::from_utf8_lossy(&out.stderr));
}
