//! Integration test of `augur daemon` (run as root, as CI does): an application started through a
//! wrapper (`env`, `timeout 5`, `sh -c`, `nice`, `setsid`, `dbus-run-session --`, `ld.so`) is learned under
//! its own name, never the wrapper's, and its next launch through the wrapper replays its profile.
//!
//! One daemon with its own state, socket and configuration in a temporary directory; the daemon
//! sees every exec of the machine, so only what the test launched is asserted on.

use std::path::Path;
use std::process::Command;

mod common;
use common::{AUGUR, TestDaemon, install, make_app};

/// How each wrapper is asked to run the application `script`.
fn through(wrapper: &str, script: &Path) -> Command {
    let words: &[&str] = match wrapper {
        "env" => &["env", "LANG=C"],
        "timeout" => &["timeout", "5"],
        "nice" => &["nice", "-n", "1"],
        "setsid" => &["setsid"],
        "dbus-run-session" => &["dbus-run-session", "--"],
        // The loader running the shell that runs the script.
        "ld.so" => &["/lib64/ld-linux-x86-64.so.2", "/bin/sh"],
        "sh -c" => {
            let mut c = Command::new("sh");
            c.arg("-c").arg(format!("{} --quiet", script.display()));
            return c;
        }
        other => panic!("no wrapper {other}"),
    };
    let mut c = Command::new(words[0]);
    c.args(&words[1..]).arg(script);
    c
}

#[test]
fn applications_started_through_wrappers_are_learned_under_their_own_name_and_replayed() {
    install("dbus-run-session", "dbus");
    install("timeout", "coreutils");
    install("setsid", "util-linux");
    // Every launch followed: both launches through each wrapper must be recorded.
    let d = TestDaemon::start("[launch]\nquiet_ms = 1500\nfollow_first_launches = 100\n");
    let wrappers = ["env", "timeout", "sh -c", "nice", "setsid", "dbus-run-session", "ld.so"];
    let mut keys = Vec::new();
    let mut dirs = Vec::new();
    for wrapper in wrappers {
        let appdir = tempfile::tempdir_in("/var/tmp").unwrap();
        let script = make_app(appdir.path());
        let key = script.to_string_lossy().into_owned();
        let s = through(wrapper, &script).status().unwrap();
        assert!(s.success(), "{wrapper} {key}");
        let first = d.wait_launches(&key, 1).remove(0);
        let s = through(wrapper, &script).status().unwrap();
        assert!(s.success(), "{wrapper} {key}");
        let second = d.wait_launches(&key, 2).remove(1);
        for line in d.log().lines().filter(|l| l.contains(&key)) {
            println!("daemon: {line}");
        }
        println!("{wrapper}: first {first:?}");
        println!("{wrapper}: second {second:?}");
        assert!(first.pages_used >= 8192, "{wrapper}: the first launch used only {} pages", first.pages_used);
        assert_eq!(first.pages_expected, 0, "{wrapper}: nothing to replay the first time");
        assert!(
            second.pages_expected >= 8192,
            "{wrapper}: the second launch through the wrapper replayed {} pages of the application's profile",
            second.pages_expected
        );
        keys.push((wrapper, key));
        dirs.push(appdir);
    }
    // `augur apps` lists each application under its own name, and no wrapper.
    let out = Command::new(AUGUR).arg("apps").arg("--socket").arg(d.socket()).output().unwrap();
    let apps = String::from_utf8_lossy(&out.stdout);
    println!("augur apps:\n{apps}");
    assert!(out.status.success(), "augur apps: {}", String::from_utf8_lossy(&out.stderr));
    for (wrapper, key) in &keys {
        assert!(apps.lines().any(|l| l.ends_with(&format!("  {key}"))), "{wrapper}: {key} not listed");
    }
    let wrapper_names = ["env", "timeout", "nice", "setsid", "dbus-run-session", "dbus-daemon", "ld-linux-x86-64.so.2"];
    for line in apps.lines() {
        let name = line.rsplit('/').next().unwrap_or("");
        assert!(!wrapper_names.contains(&name), "a wrapper was learned as an application: {line}");
    }
}

/// The daemon stopped while a wrapper runs its application to the end: when it reads the
/// process events, both processes are gone, and what each exec ran is taken from the kernel's
/// record of that exec (written in the exec tracepoint), not from `/proc`, which then says
/// nothing (or, for a process that exec'd again meanwhile, describes the later exec).
#[test]
fn a_wrapped_launch_over_before_the_daemon_reads_its_events_is_learned_under_its_own_name() {
    let d = TestDaemon::start("[launch]\nquiet_ms = 1500\nfollow_first_launches = 100\n");
    let appdir = tempfile::tempdir_in("/var/tmp").unwrap();
    let script = make_app(appdir.path());
    let key = script.to_string_lossy().into_owned();
    let signal = |sig: &str| assert!(Command::new("kill").args([sig, &d.pid().to_string()]).status().unwrap().success());
    signal("-STOP");
    let s = through("env", &script).status();
    signal("-CONT");
    assert!(s.unwrap().success(), "env {key}");
    let first = d.wait_launches(&key, 1).remove(0);
    println!("first {first:?}");
    assert!(first.pages_used >= 8192, "the launch learned only {} pages", first.pages_used);
}
