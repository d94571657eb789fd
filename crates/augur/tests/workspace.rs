//! The workspace's trust lines, checked from `cargo metadata` and the crates' roots (no root
//! needed): the shipped `augur` binary does not link the benchmark crate, the pure crates depend
//! on nothing that does I/O, and every crate but `augur-os` forbids unsafe code.

use std::path::Path;
use std::process::Command;

const WORKSPACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn metadata() -> serde_json::Value {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(WORKSPACE)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The package's normal (not dev, not build) dependencies that are workspace crates.
fn workspace_deps(meta: &serde_json::Value, package: &str) -> Vec<String> {
    let pkg = meta["packages"].as_array().unwrap().iter().find(|p| p["name"] == package).unwrap();
    pkg["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["kind"].is_null() && d["name"].as_str().unwrap().starts_with("augur"))
        .map(|d| d["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_workspace_has_the_crates_of_the_architecture() {
    let meta = metadata();
    let mut names: Vec<&str> = meta["packages"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(names, ["augur", "augur-bench", "augur-core", "augur-engine", "augur-os", "augur-store"]);
}

#[test]
fn dependencies_follow_the_trust_lines() {
    let meta = metadata();
    let mut augur = workspace_deps(&meta, "augur");
    augur.sort_unstable();
    assert_eq!(augur, ["augur-core", "augur-engine", "augur-os", "augur-store"], "the shipped binary must not link augur-bench");
    assert!(workspace_deps(&meta, "augur-core").is_empty());
    assert_eq!(workspace_deps(&meta, "augur-engine"), ["augur-core"]);
    assert_eq!(workspace_deps(&meta, "augur-store"), ["augur-core"]);
    assert_eq!(workspace_deps(&meta, "augur-os"), ["augur-core"]);
}

#[test]
fn every_crate_but_the_os_one_forbids_unsafe_code() {
    for (krate, roots) in [
        ("core", &["src/lib.rs"][..]),
        ("engine", &["src/lib.rs"]),
        ("store", &["src/lib.rs"]),
        ("augur", &["src/lib.rs", "src/main.rs"]),
        ("bench", &["src/lib.rs", "src/main.rs"]),
    ] {
        for root in roots {
            let path = Path::new(WORKSPACE).join("crates").join(krate).join(root);
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(text.contains("#![forbid(unsafe_code)]"), "{} does not forbid unsafe code", path.display());
        }
    }
}

#[test]
fn every_unsafe_block_in_the_os_crate_says_why_it_is_sound() {
    let mut missing = Vec::new();
    visit(&Path::new(WORKSPACE).join("crates/os/src"), &mut |path, text| {
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if !(code.contains("unsafe {") || code.trim_start().starts_with("unsafe {")) {
                continue;
            }
            // The SAFETY comment stands on one of the few lines above the block (or the statement
            // that holds it).
            let above = &lines[i.saturating_sub(6)..=i];
            if !above.iter().any(|l| l.contains("SAFETY:")) {
                missing.push(format!("{}:{}", path.display(), i + 1));
            }
        }
    });
    assert!(missing.is_empty(), "unsafe blocks without a `// SAFETY:` comment: {missing:#?}");
}

fn visit(dir: &Path, f: &mut dyn FnMut(&Path, &str)) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            visit(&path, f);
        } else if path.extension().is_some_and(|e| e == "rs") {
            f(&path, &std::fs::read_to_string(&path).unwrap());
        }
    }
}
