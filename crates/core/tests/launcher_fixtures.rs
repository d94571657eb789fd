//! Replays every launch in `tests/fixtures/launcher/` (recorded with strace on this machine, or synthetic where
//! the wrapper cannot run here) the way the daemon's tracker would feed the launcher rules, and
//! checks the application and learnability each fixture expects.

use std::collections::HashSet;
use std::path::PathBuf;

use augur_core::model::launcher::{ExecStep, Hint, LaunchIdentity, NotLearnable, Outcome, Stability, Verdict};
use serde::Deserialize;

#[derive(Deserialize)]
struct Fixture {
    name: String,
    events: Vec<Event>,
    expect: Expect,
    /// A hint an earlier launch left (see `launcher::Hint`).
    #[serde(default)]
    hint: Option<Hint>,
}

#[derive(Deserialize)]
struct Expect {
    app: String,
    not_learnable: Option<String>,
}

#[derive(Deserialize)]
struct Event {
    t_us: u64,
    #[serde(default)]
    exec: Option<Exec>,
    #[serde(default)]
    fork: Option<Fork>,
    #[serde(default)]
    exit: Option<Exit>,
    /// A process outside the launch's tree execs (systemd-run's command, started by PID 1).
    #[serde(default)]
    outside: Option<Exec>,
}

#[derive(Deserialize)]
struct Exec {
    #[serde(flatten)]
    step: ExecStep,
    /// Pages the program used (recorded fixtures: a proxy, the sizes of the files it opened).
    pages: u64,
}

#[derive(Deserialize)]
struct Fork {
    parent: u32,
    child: u32,
}

#[derive(Deserialize)]
struct Exit {
    pid: u32,
}

/// The tracker's part, reduced to one launch: the first exec starts it, forks of its processes
/// join it, execs of its processes go to `on_exec`, and execs outside it may be adopted.
fn replay(f: &Fixture) -> (Outcome, Vec<Verdict>) {
    let apply_hint = |l: &mut LaunchIdentity| {
        if let Some(h) = &f.hint {
            let (key, argv) = l.hint_lookup();
            if key == h.launcher_key && argv == h.launcher_argv.as_slice() {
                l.expect(h.app_key.clone());
            }
        }
    };
    let mut launch: Option<LaunchIdentity> = None;
    let mut members = HashSet::new();
    let mut verdicts = Vec::new();
    for e in &f.events {
        let now = e.t_us * 1000;
        if let Some(x) = &e.exec {
            match launch.as_mut() {
                None => {
                    let mut l = LaunchIdentity::start(&x.step, now);
                    apply_hint(&mut l);
                    launch = Some(l);
                    members.insert(x.step.pid);
                }
                Some(l) if members.contains(&x.step.pid) => {
                    let v = l.on_exec(&x.step);
                    if matches!(v, Verdict::Rekeyed { .. }) {
                        apply_hint(l);
                    }
                    verdicts.push(v);
                }
                Some(l) => match l.adopt(&x.step, now) {
                    Some(v) => {
                        members.insert(x.step.pid);
                        verdicts.push(v);
                    }
                    None => continue,
                },
            }
            if let Some(v) = launch.as_mut().and_then(|l| l.on_pages(x.step.pid, x.pages)) {
                verdicts.push(v);
            }
        }
        if let Some(x) = &e.outside {
            let l = launch.as_mut().expect("a launch");
            if let Some(v) = l.adopt(&x.step, now) {
                members.insert(x.step.pid);
                verdicts.push(v);
                if let Some(v) = l.on_pages(x.step.pid, x.pages) {
                    verdicts.push(v);
                }
            }
        }
        if let Some(x) = &e.fork
            && members.contains(&x.parent)
        {
            members.insert(x.child);
            launch.as_mut().expect("a launch").on_fork(x.parent, x.child);
        }
        if let Some(x) = &e.exit
            && let Some(l) = launch.as_mut()
        {
            l.on_exit(x.pid);
        }
    }
    (launch.expect("a launch").finish(), verdicts)
}

fn name_of(n: Option<NotLearnable>) -> Option<String> {
    n.map(|n| match n {
        NotLearnable::Ephemeral(Stability::Memfd | Stability::Temporary) => "ephemeral".to_string(),
        NotLearnable::Ephemeral(Stability::Stable) => "stable?".to_string(),
        NotLearnable::WrapperOnly => "wrapper-only".to_string(),
    })
}

fn fixtures() -> Vec<Fixture> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/launcher");
    let mut paths: Vec<_> = std::fs::read_dir(&dir).expect("fixtures/").map(|e| e.expect("entry").path()).collect();
    paths.sort();
    paths
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            serde_json::from_str(&std::fs::read_to_string(&p).expect("read")).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        })
        .collect()
}

#[test]
fn every_recorded_and_synthetic_launch_is_named_after_its_application() {
    let all = fixtures();
    assert!(all.len() >= 70, "fixtures missing: {}", all.len());
    let mut wrong = Vec::new();
    for f in &all {
        let (o, verdicts) = replay(f);
        let got = (o.app.key.clone(), name_of(o.not_learnable));
        let want = (f.expect.app.clone(), f.expect.not_learnable.clone());
        let rekeys: Vec<String> = verdicts
            .iter()
            .filter_map(|v| if let Verdict::Rekeyed { key, why } = v { Some(format!("{why:?}→{key}")) } else { None })
            .collect();
        println!("{:32} {:?} {:?} via [{}]", f.name, o.app.key, o.not_learnable, rekeys.join(", "));
        if got != want {
            wrong.push(format!("{}: got {got:?}, want {want:?}", f.name));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// One test per wrapper, so a failure names it.
macro_rules! fixture_tests {
    ($($test:ident => $name:literal),* $(,)?) => {$(
        #[test]
        fn $test() {
            let f = fixtures().into_iter().find(|f| f.name == $name).expect($name);
            let (o, _) = replay(&f);
            assert_eq!((o.app.key, name_of(o.not_learnable)), (f.expect.app, f.expect.not_learnable));
        }
    )*};
}

fixture_tests! {
    env => "env", nice => "nice", ionice => "ionice", chrt => "chrt", taskset => "taskset", nohup => "nohup",
    setsid => "setsid", setsid_group_leader_forks => "setsid-leader", setsid_f => "setsid-f", setsid_w => "setsid-w",
    timeout => "timeout", timeout_java => "timeout-java", stdbuf => "stdbuf", sudo => "sudo", sudo_u => "sudo-nobody",
    su_c => "su-c", su_login_c => "su-login-c", doas => "doas", pkexec => "pkexec-synthetic",
    dbus_run_session => "dbus-run-session", dbus_run_session_mousepad => "dbus-run-session-mousepad", dbus_launch => "dbus-launch",
    flatpak_run => "flatpak-run-synthetic", snap_run => "snap-run-synthetic", xdg_open => "xdg-open", gio_launch => "gio-launch",
    gtk_launch => "gtk-launch", systemd_run => "systemd-run-synthetic", systemd_run_scope => "systemd-run-scope-synthetic",
    sh_c => "sh-c", dash_c => "dash-c", bash_c => "bash-c", sh_c_exec => "sh-c-exec", sh_c_sequence => "sh-c-seq",
    sh_c_pipe => "sh-c-pipe", firejail => "firejail", bwrap => "bwrap", bwrap_sandbox_path => "bwrap-app", ld_so => "ldso",
    ld_so_java => "ldso-java", libreoffice_writer => "libreoffice-writer", unknown_exec_wrapper => "mywrap",
    unknown_fork_wrapper => "myforkwrap", nested_wrappers => "mywrap-nested", pyenv_shim => "pyenv-shim",
    memfd => "memfd", memfd_first => "memfd-root-synthetic", deleted_temporary => "deleted-temp-root-synthetic",
    deleted_temporary_helper => "deleted-exe", sudo_temporary_payload => "sudo-temp-payload-synthetic",
    mousepad_alone => "direct-mousepad", python_alone => "direct-python", java_alone => "direct-java",
}

// The same launches as the daemon sees them: proc connector events, `/proc` read at each exec
// event (a wrapper that exec'd before the read is not seen at all), no page counts.
fixture_tests! {
    daemon_view_env => "procconn-env", daemon_view_timeout => "procconn-timeout", daemon_view_nice => "procconn-nice", daemon_view_setsid_f => "procconn-setsid-f",
    daemon_view_sudo => "procconn-sudo", daemon_view_su_c => "procconn-su-c", daemon_view_dbus_run_session => "procconn-dbus-run-session",
    daemon_view_sh_c_sequence => "procconn-sh-c-seq", daemon_view_firejail => "procconn-firejail", daemon_view_bwrap => "procconn-bwrap",
    daemon_view_nested => "procconn-mywrap-nested", daemon_view_memfd => "procconn-memfd", daemon_view_ld_so => "procconn-ldso",
    daemon_view_libreoffice_without_pages => "procconn-libreoffice-writer", daemon_view_libreoffice_hinted => "procconn-libreoffice-writer-hinted",
    daemon_view_gio_launch_without_pages => "procconn-gio-launch", daemon_view_gio_launch_hinted => "procconn-gio-launch-hinted",
}
