//! `augur explain APP --files` end to end: the file-access context model saved in a state is
//! shown (sequences, first opens) as text and JSON, read without writing. No root needed.

use std::process::{Command, Output};

use augur_core::model::file_context::{FileContextModel, FileOpen};
use augur_core::model::range::PageRange;
use augur_store::state::StateStore;

fn augur(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_augur")).args(args).output().unwrap()
}

#[test]
fn explain_files_shows_the_learned_sequences_and_first_opens() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.db");
    let mut model = FileContextModel::default();
    for _ in 0..3 {
        let mut run = model.start_run("/usr/bin/make");
        for f in ["/p/Makefile", "/p/a.c", "/p/a.h", "/p/b.c"] {
            model.open(&mut run, &FileOpen { path: f, dev: 1, ino: 2 }, 1_000);
            model.read(&run, f, PageRange::new(0, 4));
        }
    }
    {
        let (mut s, _) = StateStore::open(&state).unwrap();
        s.save_file_contexts(&model, &["/usr/bin/make"], 5).unwrap();
    }
    let before = std::fs::read(&state).unwrap();
    let s = state.to_str().unwrap();

    let out = augur(&["explain", "/usr/bin/make", "--files", "--state", s]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("3 run(s)"), "{text}");
    assert!(text.contains("/p/Makefile -> /p/a.c"), "{text}");
    assert!(text.contains("#1") && text.contains("#4"), "{text}");

    let out = augur(&["explain", "/usr/bin/make", "--files", "--state", s, "--json", "--depth", "2"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["stats"]["runs"], 3);
    let first: Vec<&str> = v["first_opens"].as_array().unwrap().iter().map(|p| p["path"].as_str().unwrap()).collect();
    assert_eq!(first, ["/p/Makefile", "/p/a.c"]);
    assert_eq!(v["first_opens"][0]["pages"], 4);
    assert!(!v["sequences"].as_array().unwrap().is_empty());

    // Unknown workload, missing state: nothing learned, not an error.
    let out = augur(&["explain", "/usr/bin/ninja", "--files", "--state", s]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("no file sequence learned"));
    let none = dir.path().join("none.db");
    let out = augur(&["explain", "/usr/bin/make", "--files", "--state", none.to_str().unwrap()]);
    assert!(out.status.success());
    assert!(!none.exists(), "explaining creates no state");
    assert_eq!(std::fs::read(&state).unwrap(), before, "explaining writes nothing");
    // --files does not mix with --trace.
    assert_eq!(augur(&["explain", "x", "--files", "--trace", s]).status.code(), Some(2));
}
