//! Synthetic chains for what cannot run here (systemd-run, flatpak, snap, pkexec), the rules'
//! edge cases, and property tests of the rules' invariants.

use proptest::prelude::*;

use super::*;

/// One process event of a launch, as the tracker would pass it on.
#[derive(Clone, Debug)]
enum Ev {
    Exec {
        pid: u32,
        exe: String,
        argv: Vec<String>,
        pages: u64,
    },
    Fork {
        parent: u32,
        child: u32,
    },
    Exit {
        pid: u32,
    },
    /// A process outside the launch's tree execs (started by PID 1).
    Outside {
        pid: u32,
        exe: String,
        argv: Vec<String>,
        pages: u64,
    },
}

fn exec(pid: u32, exe: &str, argv: &[&str], pages: u64) -> Ev {
    Ev::Exec { pid, exe: exe.into(), argv: words(argv), pages }
}

fn words(w: &[&str]) -> Vec<String> {
    w.iter().map(|s| s.to_string()).collect()
}

fn step(pid: u32, exe: &str, argv: &[String]) -> ExecStep {
    ExecStep {
        pid,
        exe: exe.into(),
        argv: argv.to_vec(),
        cwd: Some("/home/u".into()),
        loader_target: None,
        user: ProcessUser::ROOT,
    }
}

fn user(uid: u32) -> ProcessUser {
    ProcessUser { uid, gid: uid, groups: Vec::new() }
}

fn step_as(uid: u32, pid: u32, exe: &str, argv: &[&str]) -> ExecStep {
    ExecStep { user: user(uid), ..step(pid, exe, &words(argv)) }
}

#[test]
fn a_users_launch_is_learned_under_that_users_key() {
    let l = LaunchIdentity::start(&step_as(1000, 10, "/usr/bin/python3.11", &["python3", "/opt/tool.py"]), 0);
    assert_eq!(l.app().key, "uid=1000:/opt/tool.py");
    assert_eq!(l.app_user().uid, 1000);
    let root = LaunchIdentity::start(&step_as(0, 10, "/usr/bin/python3.11", &["python3", "/opt/tool.py"]), 0);
    assert_eq!(root.app().key, "/opt/tool.py", "root's keys are as they always were");
}

#[test]
fn a_launch_a_user_started_stays_that_users_through_sudo() {
    let mut l = LaunchIdentity::start(&step_as(1000, 10, "/usr/bin/sudo", &["sudo", "gimp"]), 0);
    l.on_fork(10, 11);
    let v = l.on_exec(&step_as(0, 11, "/usr/bin/gimp", &["gimp"]));
    assert_eq!(v, Verdict::Rekeyed { key: "uid=1000:/usr/bin/gimp".into(), why: Choice::Payload });
    assert_eq!(l.app_user().uid, 1000, "root's gimp, started by a user, is never learned as root's");
}

#[test]
fn a_launch_root_started_is_its_applications_users() {
    let mut l = LaunchIdentity::start(&step_as(0, 10, "/usr/bin/su", &["su", "bob", "-c", "gimp"]), 0);
    l.on_fork(10, 11);
    let v = l.on_exec(&step_as(1001, 11, "/usr/bin/gimp", &["gimp"]));
    assert_eq!(v, Verdict::Rekeyed { key: "uid=1001:/usr/bin/gimp".into(), why: Choice::Payload });
    assert_eq!(l.app_user().uid, 1001);
}

#[test]
fn another_users_process_is_never_adopted() {
    let start = step_as(0, 10, "/usr/bin/systemd-run", &["systemd-run", "/usr/bin/foo"]);
    let mut l = LaunchIdentity::start(&start, 0);
    assert_eq!(l.adopt(&step_as(1000, 50, "/usr/bin/foo", &["/usr/bin/foo"]), 1_000), None);
    assert_eq!(l.app().key, "/usr/bin/systemd-run");
    let adopted = l.adopt(&step_as(0, 51, "/usr/bin/foo", &["/usr/bin/foo"]), 1_000);
    assert_eq!(adopted, Some(Verdict::Rekeyed { key: "/usr/bin/foo".into(), why: Choice::Adopted }));
}

/// Replays events: the first exec starts the launch; its pages arrive right after each exec.
fn replay(events: &[Ev]) -> (Outcome, Vec<Verdict>) {
    replay_with(events, None)
}

fn replay_with(events: &[Ev], hint: Option<&Hint>) -> (Outcome, Vec<Verdict>) {
    let mut launch: Option<LaunchIdentity> = None;
    let mut members = std::collections::HashSet::new();
    let mut verdicts = Vec::new();
    let apply_hint = |l: &mut LaunchIdentity| {
        if let Some(h) = hint {
            let (key, argv) = l.hint_lookup();
            if key == h.launcher_key && argv == h.launcher_argv.as_slice() {
                l.expect(h.app_key.clone());
            }
        }
    };
    for (t, ev) in events.iter().enumerate() {
        let now = t as u64 * 1_000_000;
        match ev {
            Ev::Exec { pid, exe, argv, pages } => {
                let s = step(*pid, exe, argv);
                match launch.as_mut() {
                    None => {
                        let mut l = LaunchIdentity::start(&s, now);
                        apply_hint(&mut l);
                        launch = Some(l);
                        members.insert(*pid);
                    }
                    Some(l) if members.contains(pid) => {
                        let v = l.on_exec(&s);
                        if matches!(v, Verdict::Rekeyed { .. }) {
                            apply_hint(l);
                        }
                        verdicts.push(v);
                    }
                    Some(_) => continue,
                }
                if let Some(v) = launch.as_mut().and_then(|l| l.on_pages(*pid, *pages)) {
                    verdicts.push(v);
                }
            }
            Ev::Fork { parent, child } => {
                if members.contains(parent) {
                    members.insert(*child);
                    launch.as_mut().expect("a launch").on_fork(*parent, *child);
                }
            }
            Ev::Exit { pid } => {
                if let Some(l) = launch.as_mut() {
                    l.on_exit(*pid);
                }
            }
            Ev::Outside { pid, exe, argv, pages } => {
                let l = launch.as_mut().expect("a launch");
                if let Some(v) = l.adopt(&step(*pid, exe, argv), now) {
                    members.insert(*pid);
                    verdicts.push(v);
                    if let Some(v) = l.on_pages(*pid, *pages) {
                        verdicts.push(v);
                    }
                }
            }
        }
    }
    (launch.expect("a launch").finish(), verdicts)
}

fn key(events: &[Ev]) -> (String, Option<NotLearnable>) {
    let (o, _) = replay(events);
    (o.app.key, o.not_learnable)
}

#[test]
fn systemd_run_is_started_by_pid_1_and_adopted() {
    // systemd-run asks PID 1 over D-Bus; PID 1 (or systemd-executor) execs the command.
    let ev = [
        exec(10, "/usr/bin/systemd-run", &["systemd-run", "--user", "gedit", "a.txt"], 1500),
        Ev::Outside { pid: 77, exe: "/usr/bin/gedit".into(), argv: words(&["/usr/bin/gedit", "a.txt"]), pages: 30000 },
        Ev::Exit { pid: 10 },
    ];
    let (o, v) = replay(&ev);
    assert_eq!(o.app.key, "/usr/bin/gedit");
    assert_eq!(o.chosen_by, Choice::Adopted);
    assert_eq!(o.not_learnable, None);
    assert_eq!(v, vec![Verdict::Rekeyed { key: "/usr/bin/gedit".into(), why: Choice::Adopted }]);
}

#[test]
fn adoption_needs_a_known_wrapper_and_a_carried_command() {
    let outside = |argv: &[&str]| Ev::Outside { pid: 77, exe: "/usr/bin/gedit".into(), argv: words(argv), pages: 30000 };
    // Through an exec-through wrapper first.
    let ev = [
        exec(10, "/usr/bin/env", &["env", "systemd-run", "gedit"], 500),
        exec(10, "/usr/bin/systemd-run", &["systemd-run", "gedit"], 1500),
        outside(&["gedit"]),
    ];
    assert_eq!(key(&ev).0, "/usr/bin/gedit");
    // An application that is not a wrapper adopts nothing: a second `gedit` started elsewhere.
    let ev = [exec(10, "/usr/bin/gedit", &["gedit"], 30000), outside(&["gedit"])];
    assert_eq!(replay(&ev).1, vec![]);
    // Nor does a wrapper for a command it does not carry.
    let ev = [exec(10, "/usr/bin/systemd-run", &["systemd-run", "gedit", "a.txt"], 1500), outside(&["gedit", "b.txt"])];
    assert_eq!(replay(&ev).1, vec![]);
}

#[test]
fn systemd_run_whose_command_is_never_seen_is_not_learned() {
    let ev = [exec(10, "/usr/bin/systemd-run", &["systemd-run", "gedit"], 1500), exec(11, "/usr/bin/true", &["true"], 1)];
    // `true` is some other process's: not adopted (not carried), so systemd-run stays, alone.
    assert_eq!(key(&ev), ("/usr/bin/systemd-run".into(), None));
    let ev = [
        exec(10, "/usr/bin/systemd-run", &["systemd-run", "gedit"], 1500),
        Ev::Fork { parent: 10, child: 11 },
        exec(11, "/usr/bin/busctl", &["busctl", "x"], 10),
    ];
    assert_eq!(key(&ev), ("/usr/bin/systemd-run".into(), Some(NotLearnable::WrapperOnly)));
}

#[test]
fn systemd_run_scope_execs_in_place() {
    let ev = [
        exec(10, "/usr/bin/systemd-run", &["systemd-run", "--scope", "gedit"], 1500),
        exec(10, "/usr/bin/gedit", &["gedit"], 30000),
    ];
    assert_eq!(key(&ev), ("/usr/bin/gedit".into(), None));
}

#[test]
fn flatpak_run_execs_bwrap_which_forks_the_app() {
    // flatpak-run.c execvpe()s bwrap; bwrap forks (pid 1 of the sandbox), which forks the app.
    let ev = [
        exec(
            10,
            "/usr/bin/flatpak",
            &["/usr/bin/flatpak", "run", "--branch=stable", "--command=gedit", "org.gnome.gedit", "a.txt"],
            4000,
        ),
        exec(10, "/usr/bin/bwrap", &["bwrap", "--args", "40", "gedit", "a.txt"], 700),
        Ev::Fork { parent: 10, child: 11 },
        Ev::Fork { parent: 11, child: 12 },
        exec(12, "/app/bin/gedit", &["gedit", "a.txt"], 30000),
    ];
    assert_eq!(key(&ev), ("/app/bin/gedit".into(), None));
}

#[test]
fn snap_run_execs_through_snap_confine_and_snap_exec() {
    let ev = [
        exec(10, "/usr/bin/snap", &["snap", "run", "hello"], 9000),
        exec(
            10,
            "/usr/lib/snapd/snap-confine",
            &["/usr/lib/snapd/snap-confine", "snap.hello.hello", "/usr/lib/snapd/snap-exec", "hello"],
            500,
        ),
        exec(10, "/usr/lib/snapd/snap-exec", &["/usr/lib/snapd/snap-exec", "hello"], 800),
        exec(10, "/snap/hello/20/bin/hello", &["/snap/hello/20/bin/hello"], 100),
    ];
    assert_eq!(key(&ev), ("/snap/hello/current/bin/hello".into(), None));
}

#[test]
fn a_wrapper_is_provisional_until_it_hands_off() {
    let mut l = LaunchIdentity::start(&step(10, "/usr/bin/timeout", &words(&["timeout", "5", "gedit"])), 0);
    assert!(l.provisional());
    l.on_fork(10, 11);
    assert_eq!(
        l.on_exec(&step(11, "/usr/bin/gedit", &words(&["gedit"]))),
        Verdict::Rekeyed { key: "/usr/bin/gedit".into(), why: Choice::Payload }
    );
    assert!(!l.provisional());
    assert_eq!(l.app_pid(), 11);
    assert!(!LaunchIdentity::start(&step(10, "/usr/bin/gedit", &words(&["gedit"])), 0).provisional());
}

#[test]
fn pkexec_execs_in_place() {
    let ev =
        [exec(10, "/usr/bin/pkexec", &["pkexec", "gparted"], 3000), exec(10, "/usr/sbin/gparted", &["/usr/sbin/gparted"], 20000)];
    assert_eq!(key(&ev), ("/usr/sbin/gparted".into(), None));
}

#[test]
fn a_build_stays_the_build_tool() {
    let mut ev = vec![exec(10, "/usr/bin/make", &["make"], 400)];
    for (i, f) in ["a", "b", "c"].iter().enumerate() {
        let sh = 20 + i as u32 * 3;
        ev.push(Ev::Fork { parent: 10, child: sh });
        let cmd = format!("cc -c {f}.c");
        ev.push(exec(sh, "/usr/bin/dash", &["/bin/sh", "-c", &cmd], 100));
        ev.push(exec(sh, "/usr/bin/x86_64-linux-gnu-gcc-12", &["cc", "-c", &format!("{f}.c")], 300));
        ev.push(Ev::Fork { parent: sh, child: sh + 1 });
        ev.push(exec(sh + 1, "/usr/lib/gcc/x86_64-linux-gnu/12/cc1", &["cc1", &format!("{f}.c")], 20000));
    }
    assert_eq!(key(&ev), ("/usr/bin/make".into(), None));
}

#[test]
fn a_script_that_runs_a_big_tool_stays_the_script() {
    let ev = [
        exec(10, "/usr/bin/python3.11", &["python3", "build.py", "--release"], 2700),
        Ev::Fork { parent: 10, child: 11 },
        exec(11, "/root/.cargo/bin/cargo", &["cargo", "build"], 90000),
    ];
    assert_eq!(key(&ev), ("/home/u/build.py".into(), None));
}

#[test]
fn shell_string_sequences_take_the_payload_that_uses_most_pages() {
    let seq = |second_pages| {
        [
            exec(10, "/usr/bin/dash", &["sh", "-c", "sleep 1; gimp img.png"], 500),
            Ev::Fork { parent: 10, child: 11 },
            exec(11, "/usr/bin/sleep", &["sleep", "1"], 80),
            Ev::Exit { pid: 11 },
            Ev::Fork { parent: 10, child: 12 },
            exec(12, "/usr/bin/gimp-2.10", &["gimp", "img.png"], second_pages),
        ]
    };
    assert_eq!(key(&seq(60000)).0, "/usr/bin/gimp-2.10");
    assert_eq!(key(&seq(10)).0, "/usr/bin/sleep", "the later command used fewer pages");
}

#[test]
fn an_ephemeral_application_is_not_learned() {
    // A memfd exec'd first: nothing stable to name the launch.
    let ev = [exec(10, "/memfd:sealed-91173221a7ea (deleted)", &["x"], 500)];
    assert_eq!(key(&ev).1, Some(NotLearnable::Ephemeral(Stability::Memfd)));
    // runc-style: a program re-execs itself from a memfd: the creator stays the application.
    let ev = [
        exec(10, "/usr/sbin/runc", &["runc", "run", "c1"], 3000),
        exec(10, "/memfd:runc_cloned:/proc/self/exe (deleted)", &["runc", "run", "c1"], 100),
    ];
    assert_eq!(key(&ev), ("/usr/sbin/runc".into(), None));
    // A wrapper whose payload is a throwaway file: not learned (and not as sudo).
    let ev = [
        exec(10, "/usr/bin/sudo", &["sudo", "/tmp/tmp.Ab3dE6fG/install.bin", "--quiet"], 1600),
        Ev::Fork { parent: 10, child: 11 },
        exec(11, "/tmp/tmp.Ab3dE6fG/install.bin", &["/tmp/tmp.Ab3dE6fG/install.bin", "--quiet"], 9000),
    ];
    assert_eq!(key(&ev), ("/tmp/tmp.Ab3dE6fG/install.bin".into(), Some(NotLearnable::Ephemeral(Stability::Temporary))));
    // ... and what a throwaway program execs in place is the application again.
    let ev = [
        exec(10, "/usr/bin/sudo", &["sudo", "/tmp/tmp.Ab3dE6fG/run", "gedit"], 1600),
        Ev::Fork { parent: 10, child: 11 },
        exec(11, "/tmp/tmp.Ab3dE6fG/run", &["/tmp/tmp.Ab3dE6fG/run", "gedit"], 100),
        exec(11, "/usr/bin/gedit", &["gedit"], 30000),
    ];
    assert_eq!(key(&ev), ("/usr/bin/gedit".into(), None));
    // A program that starts a throwaway helper keeps its identity (AppImage runtime → AppRun).
    let ev = [
        exec(10, "/home/u/Apps/Foo.AppImage", &["/home/u/Apps/Foo.AppImage"], 500),
        Ev::Fork { parent: 10, child: 11 },
        exec(11, "/tmp/.mount_FooAbC123/AppRun", &["/tmp/.mount_FooAbC123/AppRun"], 50000),
    ];
    assert_eq!(key(&ev), ("/home/u/Apps/Foo.AppImage".into(), None));
}

#[test]
fn a_launcher_whose_application_was_not_seen_is_not_learned() {
    // xdg-open handing the file to an application started by D-Bus activation (not a child).
    let ev = [
        exec(10, "/usr/bin/dash", &["/bin/sh", "/usr/bin/xdg-open", "a.pdf"], 500),
        Ev::Fork { parent: 10, child: 11 },
        exec(11, "/usr/bin/gdbus", &["gdbus", "call", "--session"], 900),
    ];
    assert_eq!(key(&ev), ("/usr/bin/xdg-open".into(), Some(NotLearnable::WrapperOnly)));
    // A wrapper with nothing to start is an application (`sudo -l`).
    assert_eq!(key(&[exec(10, "/usr/bin/sudo", &["sudo", "-l"], 1600)]), ("/usr/bin/sudo".into(), None));
}

#[test]
fn a_hint_from_dominance_makes_the_next_launch_rekey_at_the_exec() {
    let ev = [
        exec(10, "/usr/bin/dash", &["/bin/sh", "/usr/bin/libreoffice", "--writer"], 300),
        exec(10, "/usr/lib/libreoffice/program/oosplash", &["/usr/lib/libreoffice/program/oosplash", "--writer"], 2000),
        Ev::Fork { parent: 10, child: 11 },
        exec(
            11,
            "/usr/lib/libreoffice/program/soffice.bin",
            &["/usr/lib/libreoffice/program/soffice.bin", "--writer", "--splash-pipe=5"],
            89000,
        ),
    ];
    let (first, v) = replay(&ev);
    assert_eq!(first.chosen_by, Choice::Dominant);
    assert_eq!(
        v,
        vec![
            Verdict::Rekeyed { key: "/usr/lib/libreoffice/program/oosplash".into(), why: Choice::Exec },
            Verdict::Helper,
            Verdict::Rekeyed { key: "/usr/lib/libreoffice/program/soffice.bin".into(), why: Choice::Dominant }
        ]
    );
    // The launcher, then the script its process ran before it: the next launch expects
    // soffice.bin from its first exec, so its profile can be replayed there.
    let launchers: Vec<_> = first.hints.iter().map(|h| (h.launcher_key.as_str(), h.launcher_argv.len())).collect();
    assert_eq!(launchers, [("/usr/lib/libreoffice/program/oosplash", 2), ("/usr/bin/libreoffice", 3)]);
    assert!(first.hints.iter().all(|h| h.app_key == "/usr/lib/libreoffice/program/soffice.bin"));
    for hint in &first.hints {
        let (second, v) = replay_with(&ev, Some(hint));
        assert_eq!(second.app.key, "/usr/lib/libreoffice/program/soffice.bin");
        assert_eq!(
            v.last(),
            Some(&Verdict::Rekeyed { key: "/usr/lib/libreoffice/program/soffice.bin".into(), why: Choice::Expected })
        );
    }
}

#[test]
fn dominance_needs_the_floor_the_factor_and_the_arguments() {
    let launch = |child: &[&str], app_pages, child_pages| {
        [
            exec(10, "/usr/bin/viewer", &["viewer", "doc.pdf"], app_pages),
            Ev::Fork { parent: 10, child: 11 },
            exec(11, "/usr/lib/viewer/render", child, child_pages),
        ]
    };
    let render = "/usr/lib/viewer/render".to_string();
    assert_eq!(key(&launch(&["render", "doc.pdf"], 20000, 90000)).0, render);
    assert_eq!(key(&launch(&["render", "doc.pdf"], 20000, 70000)).0, "/usr/bin/viewer", "under 4x the app's pages");
    assert_eq!(key(&launch(&["render", "other.pdf"], 500, 90000)).0, "/usr/bin/viewer", "not given the app's arguments");
    assert_eq!(key(&launch(&["render", "doc.pdf"], 0, DOMINANT_MIN_PAGES - 1)).0, "/usr/bin/viewer", "under the floor");
}

#[test]
fn an_application_is_not_taken_over_by_its_helpers() {
    // mousepad's own children (dbus autolaunch) use far fewer pages than it.
    let ev = [
        exec(10, "/usr/bin/mousepad", &["mousepad", "x.txt"], 60000),
        Ev::Fork { parent: 10, child: 11 },
        exec(11, "/usr/bin/dbus-launch", &["dbus-launch", "--autolaunch=3d12", "--binary-syntax"], 1800),
        Ev::Fork { parent: 11, child: 12 },
        exec(12, "/usr/bin/dbus-daemon", &["/usr/bin/dbus-daemon", "--fork", "--session"], 2100),
    ];
    assert_eq!(key(&ev), ("/usr/bin/mousepad".into(), None));
}

// ---- properties ----

/// A generated launch: programs are neutral names (no known role), pages per exec.
#[derive(Clone, Debug)]
struct Gen {
    events: Vec<Ev>,
}

fn arb_program() -> impl Strategy<Value = (String, Vec<String>)> {
    (0..8u8, proptest::collection::vec(prop_oneof![Just("-v"), Just("a.txt"), Just("--x"), Just("b")], 0..3)).prop_map(
        |(i, args)| {
            let exe = match i {
                6 => "/tmp/tmp.Q1w2E3r4/prog6".to_string(),
                7 => "/memfd:prog7-91173221a7ea (deleted)".to_string(),
                _ => format!("/usr/bin/prog{i}"),
            };
            let mut argv = vec![format!("prog{i}")];
            argv.extend(args.into_iter().map(String::from));
            (exe, argv)
        },
    )
}

/// Operations on a growing process tree: 0 fork, 1 exec, 2 exit; `who` picks a live process.
fn arb_launch() -> impl Strategy<Value = Gen> {
    (
        arb_program(),
        0..20_000u64,
        proptest::collection::vec((0..3u8, any::<prop::sample::Index>(), arb_program(), 0..30_000u64), 0..12),
    )
        .prop_map(|((exe, argv), pages, ops)| {
            let mut events = vec![Ev::Exec { pid: 100, exe, argv, pages }];
            let mut live = vec![100u32];
            let mut next = 101u32;
            for (op, who, (exe, argv), pages) in ops {
                if live.is_empty() {
                    break;
                }
                let pid = live[who.index(live.len())];
                match op {
                    0 => {
                        events.push(Ev::Fork { parent: pid, child: next });
                        live.push(next);
                        next += 1;
                    }
                    1 => events.push(Ev::Exec { pid, exe, argv, pages }),
                    _ => {
                        events.push(Ev::Exit { pid });
                        live.retain(|&p| p != pid);
                    }
                }
            }
            Gen { events }
        })
}

/// The launch's first program.
fn root_argv(g: &Gen) -> Vec<String> {
    match &g.events[0] {
        Ev::Exec { argv, .. } => argv.clone(),
        _ => unreachable!(),
    }
}

/// Renumbers pids so that a wrapper can take pid 100.
fn shifted(events: &[Ev], by: u32) -> Vec<Ev> {
    events
        .iter()
        .map(|e| match e.clone() {
            Ev::Exec { pid, exe, argv, pages } => Ev::Exec { pid: pid + by, exe, argv, pages },
            Ev::Fork { parent, child } => Ev::Fork { parent: parent + by, child: child + by },
            Ev::Exit { pid } => Ev::Exit { pid: pid + by },
            Ev::Outside { pid, exe, argv, pages } => Ev::Outside { pid: pid + by, exe, argv, pages },
        })
        .collect()
}

/// What is learned: the application's key, or nothing.
fn decision(events: &[Ev]) -> Option<String> {
    let (o, _) = replay(events);
    o.not_learnable.is_none().then_some(o.app.key)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    /// An exec-through wrapper in front (known or not: `env`, a `exec "$@"` script) never changes
    /// the application or whether it is learned.
    #[test]
    fn an_exec_wrapper_in_front_changes_nothing(g in arb_launch(), known in any::<bool>(), wrapper_pages in 0..3000u64) {
        let mut argv = if known { vec!["env".to_string()] } else { vec!["/bin/sh".to_string(), "/usr/local/bin/mywrap".to_string()] };
        argv.extend(root_argv(&g));
        let exe = if known { "/usr/bin/env" } else { "/usr/bin/dash" };
        let mut wrapped = vec![Ev::Exec { pid: 100, exe: exe.into(), argv, pages: wrapper_pages }];
        wrapped.extend(g.events.iter().cloned());
        prop_assert_eq!(decision(&wrapped), decision(&g.events));
    }

    /// A wrapper that forks the program and waits (`timeout`, `sudo`, a script running `"$@"`)
    /// never changes the application or whether it is learned.
    #[test]
    fn a_fork_and_wait_wrapper_in_front_changes_nothing(g in arb_launch(), known in any::<bool>(), wrapper_pages in 0..3000u64) {
        let mut argv = if known { vec!["timeout".to_string(), "10".to_string()] } else { vec!["/bin/sh".to_string(), "/usr/local/bin/myforkwrap".to_string()] };
        argv.extend(root_argv(&g));
        let exe = if known { "/usr/bin/timeout" } else { "/usr/bin/dash" };
        let mut wrapped = vec![Ev::Exec { pid: 50, exe: exe.into(), argv, pages: wrapper_pages }, Ev::Fork { parent: 50, child: 100 }];
        wrapped.extend(g.events.iter().cloned());
        wrapped.push(Ev::Exit { pid: 50 });
        prop_assert_eq!(decision(&wrapped), decision(&g.events));
    }

    /// Nesting wrappers (exec-through inside fork-and-wait) changes nothing either.
    #[test]
    fn nested_wrappers_change_nothing(g in arb_launch()) {
        let inner = shifted(&g.events, 0);
        let mut argv = vec!["nice".to_string(), "timeout".to_string(), "5".to_string()];
        argv.extend(root_argv(&g));
        let mut wrapped = vec![
            Ev::Exec { pid: 40, exe: "/usr/bin/nice".into(), argv: argv.clone(), pages: 500 },
            Ev::Exec { pid: 40, exe: "/usr/bin/timeout".into(), argv: argv[1..].to_vec(), pages: 500 },
            Ev::Fork { parent: 40, child: 100 },
        ];
        wrapped.extend(inner);
        prop_assert_eq!(decision(&wrapped), decision(&g.events));
    }

    /// A small helper that the application did not ask for (not carried, fewer than the dominance
    /// floor of pages) never changes the decision.
    #[test]
    fn a_small_unasked_helper_changes_nothing(g in arb_launch(), at in any::<prop::sample::Index>(), pages in 0..DOMINANT_MIN_PAGES) {
        let mut with = g.events.clone();
        let i = 1 + at.index(with.len());
        let parent = 100; // the root process, alive or not: its fork is then ignored or joins
        with.insert(i.min(with.len()), Ev::Fork { parent, child: 9000 });
        with.insert((i + 1).min(with.len()), Ev::Exec { pid: 9000, exe: "/usr/bin/helper-x".into(), argv: vec!["helper-x".into(), "--quiet-zz".into()], pages });
        prop_assert_eq!(decision(&with), decision(&g.events));
    }

    /// The application is always a program of the launch, stable when it is learned, and the
    /// decision is the same when replayed again.
    #[test]
    fn the_application_is_one_of_the_launch_programs(g in arb_launch()) {
        let (o, _) = replay(&g.events);
        if o.not_learnable.is_none() {
            prop_assert!(!o.app.key.starts_with("/memfd:") && !o.app.key.starts_with("/tmp/"));
        }
        let keys: Vec<String> = g.events.iter().filter_map(|e| match e {
            Ev::Exec { pid, exe, argv, .. } => Some(program_of(&step(*pid, exe, argv)).identity.key),
            _ => None,
        }).collect();
        prop_assert!(keys.contains(&o.app.key));
        prop_assert_eq!(replay(&g.events).0, o);
    }
}

#[test]
fn a_script_s_file_reading_child_is_not_its_application() {
    // `app.sh` (no arguments) runs `cat data/part*`: cat does the reading, the script is the app.
    let script = |child: &[&str]| {
        [
            exec(10, "/usr/bin/dash", &["/bin/sh", "/home/u/app.sh"], 30),
            Ev::Fork { parent: 10, child: 11 },
            exec(11, "/usr/bin/cat", child, 8200),
        ]
    };
    assert_eq!(key(&script(&["cat", "/home/u/data/part0", "/home/u/data/part1"])), ("/home/u/app.sh".into(), None));
    // A launcher script without arguments whose child is given options only is still seen through.
    assert_eq!(key(&script(&["cat", "--show-all"])), ("/usr/bin/cat".into(), None));
}

#[test]
fn below_gio_launch_the_first_program_is_the_application_even_when_gio_launch_desktop_was_not_seen() {
    // The daemon reads /proc late: gio-launch-desktop has already exec'd the Exec line.
    let late = [
        exec(10, "/usr/bin/gio", &["gio", "launch", "/usr/share/applications/t.desktop"], 900),
        Ev::Fork { parent: 10, child: 11 },
        exec(11, "/usr/bin/dbus-launch", &["dbus-launch", "--autolaunch=1", "--binary-syntax"], 300),
        Ev::Fork { parent: 10, child: 12 },
        exec(12, "/usr/bin/python3.11", &["/usr/bin/python3", "/opt/t/tool.py"], 100),
    ];
    assert_eq!(key(&late), ("/opt/t/tool.py".into(), None));
    // Seen in time, through gio-launch-desktop, and under gtk-launch: the same.
    let seen = [
        exec(10, "/usr/bin/gtk-launch", &["gtk-launch", "t"], 900),
        Ev::Fork { parent: 10, child: 12 },
        exec(12, "/usr/lib/x86_64-linux-gnu/glib-2.0/gio-launch-desktop", &["gio-launch-desktop", "/usr/bin/xterm"], 10),
        exec(12, "/usr/bin/xterm", &["/usr/bin/xterm"], 100),
    ];
    assert_eq!(key(&seen), ("/usr/bin/xterm".into(), None));
    // xdg-open runs helpers of its own first: they are not taken for the application.
    let script = [
        exec(10, "/usr/bin/dash", &["/bin/sh", "/usr/bin/xdg-open", "a.txt"], 500),
        Ev::Fork { parent: 10, child: 11 },
        exec(11, "/usr/bin/xdg-mime", &["xdg-mime", "query", "filetype", "a.txt"], 200),
    ];
    assert_ne!(key(&script).0, "/usr/bin/xdg-mime");
}
