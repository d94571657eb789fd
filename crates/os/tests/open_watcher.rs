//! fanotify's open watcher against the real kernel (root): what an exec-only watcher reports,
//! and that a program it named is not reported again until it changes or the marks are dropped.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use augur_os::sense::fanotify::{OpenScope, OpenWatcher, OpenedFile};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The execs of `program` (by inode) the watcher reports within `wait`, naming each.
fn execs_of(w: &mut OpenWatcher, program: &Path, wait: Duration) -> usize {
    let ino = std::fs::metadata(program).unwrap().ino();
    let mut n = 0;
    let start = Instant::now();
    while start.elapsed() < wait {
        w.read_some_unknown(usize::MAX, |_| false, |f: OpenedFile| n += usize::from(f.exec && f.key.ino == ino)).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    n
}

fn run(program: &Path) {
    assert!(Command::new(program).status().unwrap().success());
}

#[test]
fn an_exec_only_watcher_reports_a_program_once_until_it_changes_or_the_marks_are_dropped() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    // A program of our own on ext4 (/var/tmp), so no other process execs it meanwhile.
    let dir = PathBuf::from(format!("/var/tmp/augur-os-fanotify-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let program = dir.join("true");
    std::fs::copy(std::fs::canonicalize("/bin/true").unwrap(), &program).unwrap();
    let mut w = OpenWatcher::new(false, OpenScope::ExecsOnly).unwrap();
    let wait = Duration::from_millis(300);

    run(&program);
    assert_eq!(execs_of(&mut w, &program, wait), 1, "the first exec is reported");
    run(&program);
    run(&program);
    assert_eq!(execs_of(&mut w, &program, wait), 0, "a named program is not reported again");

    // A write clears the mark: the changed program is named again.
    let bytes = std::fs::read(&program).unwrap();
    std::fs::write(&program, &bytes).unwrap();
    run(&program);
    assert_eq!(execs_of(&mut w, &program, wait), 1, "a modified program is reported again");

    // Dropping the marks reports every program again.
    run(&program);
    assert_eq!(execs_of(&mut w, &program, wait), 0);
    w.report_again();
    run(&program);
    assert_eq!(execs_of(&mut w, &program, wait), 1, "reported again once the marks were dropped");
    let _ = std::fs::remove_dir_all(&dir);
}
