//! `augur gen-trace`, `augur simulate` and `augur explain --trace` end to end: reproducible
//! traces, a table per scenario and predictor, typed refusals of bad input. No root needed.

use std::process::{Command, Output};

fn augur(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_augur")).args(args).output().unwrap()
}

fn generate(dir: &std::path::Path, scenario: &str, seed: &str, days: &str) -> std::path::PathBuf {
    let path = dir.join(format!("{scenario}-{seed}.jsonl"));
    let out = augur(&["gen-trace", "--scenario", scenario, "--seed", seed, "--days", days, "--output", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    path
}

#[test]
fn traces_are_reproducible_and_simulate_reports_every_predictor() {
    let dir = tempfile::tempdir().unwrap();
    let a = generate(dir.path(), "two-users", "3", "4");
    let b = augur(&["gen-trace", "--scenario", "two-users", "--seed", "3", "--days", "4"]);
    assert_eq!(std::fs::read(&a).unwrap(), b.stdout, "same seed, same bytes");

    let out = augur(&["simulate", "--trace", a.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = report["results"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["predictor"].as_str().unwrap()).collect();
    assert_eq!(names, ["none", "naive", "preload", "augur", "preload-fill", "augur-fill"]);
    for r in rows {
        assert!(r["hits"].as_u64().unwrap() <= r["launches"].as_u64().unwrap());
        assert!(r["wasted_bytes"].as_u64().unwrap() <= r["prefetched_bytes"].as_u64().unwrap());
    }
    assert_eq!(rows[0]["prefetched_bytes"], 0, "none never prefetches");

    let md = augur(&["simulate", "--trace", a.to_str().unwrap(), "--predictor", "ablation", "--budget", "512MiB"]);
    let text = String::from_utf8_lossy(&md.stdout);
    assert!(text.contains("| two-users-3 | 512 |"), "{text}");
    assert!(text.contains("augur-no-sequence"));
}

#[test]
fn explain_from_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    let t = generate(dir.path(), "single-user", "1", "7");
    let out = augur(&["explain", "libreoffice-writer", "--trace", t.to_str().unwrap(), "--json", "--at-ms", "288000000"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let e: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = e["probability"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&p));
    assert!(!e["reasons"].as_array().unwrap().is_empty());
    let out = augur(&["explain", "firefox", "--trace", t.to_str().unwrap(), "--predictor", "preload"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("(preload)"));
}

#[test]
fn bad_input_is_refused_with_distinct_codes() {
    let dir = tempfile::tempdir().unwrap();
    let missing = augur(&["simulate", "--trace", "/nonexistent/t.jsonl"]);
    assert_eq!(missing.status.code(), Some(3));
    let future = dir.path().join("future.jsonl");
    std::fs::write(&future, "{\"format\":\"augur-usage-trace\",\"version\":9,\"start_unix_ms\":0,\"page_size\":4096}\n").unwrap();
    let out = augur(&["simulate", "--trace", future.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(5));
    let corrupt = dir.path().join("corrupt.jsonl");
    std::fs::write(&corrupt, "{\"format\":\"augur-usage-trace\",\"version\":1,\"start_unix_ms\":0,\"page_size\":4096}\n{\"event\":\"exit\",\"t_ms\":1,\"app\":\"a\",\"instance\":1}\n").unwrap();
    let out = augur(&["simulate", "--trace", corrupt.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(4));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("line 2") && stderr.lines().count() == 1, "{stderr}");
    assert_eq!(augur(&["gen-trace", "--scenario", "three-users"]).status.code(), Some(2));
    assert_eq!(augur(&["simulate", "--trace", corrupt.to_str().unwrap(), "--predictor", "oracle"]).status.code(), Some(2));
    // No daemon: one line, its own code.
    let out = augur(&["explain", "gedit", "--socket", dir.path().join("none.sock").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(9));
}

/// A reader that stops early (`augur gen-trace | head -1`) ends the command quietly, by SIGPIPE
/// as other Unix tools end, not with a panic on a failed write.
#[test]
fn a_command_whose_reader_stops_early_ends_quietly() {
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::ExitStatusExt;
    let mut child = Command::new(env!("CARGO_BIN_EXE_augur"))
        .args(["gen-trace", "--scenario", "single-user", "--days", "28"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.contains("augur-usage-trace"), "{first}");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?}", out.status);
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
}
