//! Acceptance test of application identity (run as root, as CI does): a desktop application
//! (xterm, on a private Xvfb), a python script and `java -version`, each started through every
//! wrapper and launcher this machine can run, are learned under their own names and replayed at
//! their next launch through the same wrapper.
//!
//! The wrappers: env, nice, ionice, chrt, taskset, nohup, setsid, timeout, stdbuf, sudo, su -c,
//! doas, pkexec, dbus-run-session, dbus-launch, gio launch and gtk-launch (from a .desktop file),
//! sh/bash/dash -c, firejail, bwrap and `ld.so PROGRAM`. What it needs it installs or starts
//! itself (doas's rule for root, a system bus and polkitd for pkexec) and puts back afterwards.
//! systemd-run, flatpak run and snap need a systemd PID 1 or a store this machine does not have;
//! their exec chains are checked from recorded fixtures (`crates/core/tests/fixtures/launcher`).
//! xdg-open needs a desktop environment's MIME defaults; it is checked from its fixture too.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{AUGUR, TestDaemon, install};

/// What the test started or changed on the machine, undone on drop.
#[derive(Default)]
struct Machine {
    xvfb: Option<Child>,
    display: String,
    doas_conf_written: bool,
    system_bus_pid: Option<u32>,
    polkitd: Option<Child>,
}

impl Machine {
    fn prepare() -> Machine {
        for (program, package) in [
            ("Xvfb", "xvfb"),
            ("xterm", "xterm"),
            ("java", "default-jre-headless"),
            ("dbus-run-session", "dbus"),
            ("dbus-launch", "dbus-x11"),
            ("gtk-launch", "libgtk-3-bin"),
            ("gio", "libglib2.0-bin"),
            ("firejail", "firejail"),
            ("bwrap", "bubblewrap"),
            ("doas", "doas"),
            ("sudo", "sudo"),
            ("pkexec", "pkexec"),
            ("chrt", "util-linux"),
        ] {
            install(program, package);
        }
        let mut m = Machine::default();
        // A private X server for xterm (and for gtk-launch, which opens the display).
        let mut x = Command::new("Xvfb")
            .args(["-displayfd", "1", "-screen", "0", "1024x768x24", "-nolisten", "tcp"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut out = x.stdout.take().unwrap();
        let mut number = String::new();
        let mut byte = [0u8; 1];
        while out.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
            number.push(byte[0] as char);
        }
        m.display = format!(":{}", number.trim());
        m.xvfb = Some(x);
        // doas refuses without a rule: allow root, for the test only.
        if !Path::new("/etc/doas.conf").exists() {
            std::fs::write("/etc/doas.conf", "permit nopass root\n").unwrap();
            m.doas_conf_written = true;
        }
        // pkexec asks polkitd on the system bus.
        let bus_up = std::os::unix::net::UnixStream::connect("/run/dbus/system_bus_socket").is_ok();
        if !bus_up {
            std::fs::create_dir_all("/run/dbus").unwrap();
            // Left by a bus that is gone: dbus-daemon refuses to start while its pid file exists.
            let _ = std::fs::remove_file("/run/dbus/system_bus_socket");
            let _ = std::fs::remove_file("/run/dbus/pid");
            let out = Command::new("dbus-daemon").args(["--system", "--fork", "--print-pid"]).output().unwrap();
            assert!(out.status.success(), "starting a system bus: {}", String::from_utf8_lossy(&out.stderr));
            m.system_bus_pid = String::from_utf8_lossy(&out.stdout).trim().parse().ok();
        }
        let polkit_up = Command::new("pgrep").args(["-x", "polkitd"]).status().unwrap().success();
        if !polkit_up {
            m.polkitd = Some(
                Command::new("/usr/lib/polkit-1/polkitd")
                    .arg("--no-debug")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap(),
            );
            std::thread::sleep(Duration::from_secs(1));
        }
        m
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        // What the launches left behind on the test's display (a session bus GLib autolaunched).
        let marker = format!("DISPLAY={}", self.display);
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
            let environ = std::fs::read(e.path().join("environ")).unwrap_or_default();
            if pid != std::process::id() && environ.split(|&b| b == 0).any(|v| v == marker.as_bytes()) {
                let _ = Command::new("kill").arg(pid.to_string()).status();
            }
        }
        for child in [self.xvfb.take(), self.polkitd.take()].into_iter().flatten() {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(pid) = self.system_bus_pid {
            let _ = Command::new("kill").arg(pid.to_string()).status();
            let _ = std::fs::remove_file("/run/dbus/pid");
            let _ = std::fs::remove_file("/run/dbus/system_bus_socket");
        }
        if self.doas_conf_written {
            let _ = std::fs::remove_file("/etc/doas.conf");
        }
    }
}

/// One application of the test: how it is run and the name augur must learn it under.
struct App {
    name: &'static str,
    argv: Vec<String>,
    key: String,
    /// A desktop application: it is left running a moment, then closed.
    window: bool,
}

fn apps(dir: &Path) -> Vec<App> {
    let script = dir.join("tool.py");
    std::fs::write(&script, "import asyncio, email, json, http.client, decimal, xml.dom.minidom\n").unwrap();
    let java = std::fs::canonicalize("/usr/bin/java").unwrap().to_string_lossy().into_owned();
    vec![
        App { name: "java", argv: vec!["/usr/bin/java".into(), "-version".into()], key: java, window: false },
        App {
            name: "python script",
            argv: vec!["/usr/bin/python3".into(), script.to_string_lossy().into_owned()],
            key: script.to_string_lossy().into_owned(),
            window: false,
        },
        App {
            name: "xterm",
            argv: vec!["/usr/bin/xterm".into(), "-title".into(), format!("augur-wrappers-{}", std::process::id())],
            key: "/usr/bin/xterm".into(),
            window: true,
        },
    ]
}

const WRAPPERS: &[&str] = &[
    "env",
    "nice",
    "ionice",
    "chrt",
    "taskset",
    "nohup",
    "setsid",
    "timeout",
    "stdbuf",
    "sudo",
    "su -c",
    "doas",
    "pkexec",
    "dbus-run-session",
    "dbus-launch",
    "gio launch",
    "gtk-launch",
    "sh -c",
    "bash -c",
    "dash -c",
    "firejail",
    "bwrap",
    "ld.so",
];

/// The command that starts `app` through `wrapper`; `desktop_dir` holds the .desktop files.
fn through(wrapper: &str, app: &App, desktop_dir: &Path, display: &str) -> Command {
    let line = app.argv.join(" ");
    let prefix: &[&str] = match wrapper {
        "env" => &["env", "LANG=C"],
        "nice" => &["nice", "-n", "1"],
        "ionice" => &["ionice", "-c", "2", "-n", "7"],
        "chrt" => &["chrt", "-o", "0"],
        "taskset" => &["taskset", "-c", "0"],
        "nohup" => &["nohup"],
        "setsid" => &["setsid"],
        "timeout" => &["timeout", "60"],
        "stdbuf" => &["stdbuf", "-oL"],
        "sudo" => &["sudo"],
        "doas" => &["doas"],
        // pkexec clears the environment: a desktop application gets its display back by `env`,
        // as graphical pkexec launches do.
        "pkexec" if app.window => &["pkexec", "env", "DISPLAY=__DISPLAY__"],
        "pkexec" => &["pkexec"],
        "dbus-run-session" => &["dbus-run-session", "--"],
        "dbus-launch" => &["dbus-launch", "--exit-with-session"],
        "firejail" => &["firejail", "--quiet", "--noprofile"],
        "bwrap" => &["bwrap", "--dev-bind", "/", "/"],
        "ld.so" => &["/lib64/ld-linux-x86-64.so.2"],
        "su -c" | "sh -c" | "bash -c" | "dash -c" => {
            let (program, args) = match wrapper {
                "su -c" => ("su", vec!["-c".to_string(), line, "root".into()]),
                shell => (shell.split(' ').next().unwrap(), vec!["-c".to_string(), line]),
            };
            let mut c = Command::new(program);
            c.args(args);
            return c;
        }
        "gio launch" | "gtk-launch" => {
            let id = format!("augur-test-{}", app.name.replace(' ', "-"));
            let apps_dir = desktop_dir.join("applications");
            std::fs::create_dir_all(&apps_dir).unwrap();
            let file = apps_dir.join(format!("{id}.desktop"));
            std::fs::write(&file, format!("[Desktop Entry]\nType=Application\nName={id}\nExec={line}\nTerminal=false\n"))
                .unwrap();
            let mut c = if wrapper == "gio launch" {
                let mut c = Command::new("gio");
                c.arg("launch").arg(&file);
                c
            } else {
                let mut c = Command::new("gtk-launch");
                c.arg(&id);
                c
            };
            c.env("XDG_DATA_DIRS", format!("{}:/usr/share", desktop_dir.display()));
            return c;
        }
        other => panic!("no wrapper {other}"),
    };
    let mut c = Command::new(prefix[0]);
    c.args(prefix[1..].iter().map(|w| w.replace("__DISPLAY__", display))).args(&app.argv);
    c
}

/// Processes whose command line contains `needle`.
fn processes_with(needle: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle)))
        .collect()
}

/// Runs `app` through `wrapper` once, to its exit (or, for a window, for two seconds, then
/// closes it); an error says what went wrong.
fn run_once(wrapper: &str, app: &App, desktop_dir: &Path, display: &str) -> Result<(), String> {
    let mut cmd = through(wrapper, app, desktop_dir, display);
    cmd.env("DISPLAY", display).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = cmd.spawn().map_err(|e| format!("cannot start: {e}"))?;
    if app.window {
        std::thread::sleep(Duration::from_secs(2));
        let title = &app.argv[2];
        if processes_with(title).is_empty() {
            let _ = child.kill();
            let _ = child.wait();
            return Err("the application was not running after 2 s".into());
        }
        for pid in processes_with(title) {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    }
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            // A window application killed by the test ends its wrapper with a signal's status.
            return if status.success() || app.window { Ok(()) } else { Err(format!("exited with {status}")) };
        }
        if Instant::now() >= until {
            let _ = child.kill();
            return Err("did not finish within 60 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn java_a_python_script_and_a_desktop_application_are_learned_through_every_wrapper_and_replayed() {
    let machine = Machine::prepare();
    let d = TestDaemon::start("[launch]\nquiet_ms = 1500\nfollow_first_launches = 100\n");
    // On disk (not a tmpfs), and not under /var/tmp, which firejail replaces with its own.
    let dir = tempfile::tempdir_in("/opt").unwrap();
    let desktop_dir = dir.path().join("share");
    let apps = apps(dir.path());
    let mut failures = Vec::new();
    let mut passed = 0;
    for wrapper in WRAPPERS {
        for app in &apps {
            if *wrapper == "ld.so" && app.name == "java" {
                // java finds its runtime from /proc/self/exe, which is then the loader: it cannot
                // start this way at all (exit 127), so there is nothing to learn.
                assert!(run_once(wrapper, app, &desktop_dir, &machine.display).is_err(), "java now runs under ld.so: learn it");
                continue;
            }
            // Each wrapper starts from nothing learned about the application.
            let forget = Command::new(AUGUR).args(["forget", &app.key, "--socket"]).arg(d.socket()).output().unwrap();
            let err = String::from_utf8_lossy(&forget.stderr);
            assert!(forget.status.success() || err.contains("has not learned"), "forget: {err}");
            let mut outcome = Vec::new();
            for n in 1..=2 {
                if let Err(e) = run_once(wrapper, app, &desktop_dir, &machine.display) {
                    outcome.push(format!("launch {n}: {e}"));
                    break;
                }
                match d.launches_within(&app.key, n, Duration::from_secs(20)) {
                    None => outcome.push(format!("launch {n} not learned under {}", app.key)),
                    Some(recs) => {
                        let r = &recs[n - 1];
                        if n == 1 && r.pages_expected != 0 {
                            outcome.push(format!("launch 1 replayed {} pages of a forgotten profile", r.pages_expected));
                        }
                        if n == 2 && r.pages_expected < 64 {
                            outcome.push(format!("launch 2 replayed only {} pages", r.pages_expected));
                        }
                        if r.pages_used < 64 {
                            outcome.push(format!("launch {n} learned only {} pages", r.pages_used));
                        }
                    }
                }
                if !outcome.is_empty() {
                    break;
                }
            }
            if outcome.is_empty() {
                passed += 1;
                println!("{wrapper} {}: learned as {} and replayed", app.name, app.key);
            } else {
                failures.push(format!("{wrapper} {}: {}", app.name, outcome.join("; ")));
            }
        }
    }
    // No wrapper was learned as an application.
    let out = Command::new(AUGUR).arg("apps").arg("--socket").arg(d.socket()).output().unwrap();
    let listed = String::from_utf8_lossy(&out.stdout);
    // Each wrapper's program name, and the programs they start on the side.
    let mut wrapper_names: Vec<&str> = WRAPPERS.iter().map(|w| w.split(' ').next().unwrap()).collect();
    wrapper_names.extend(["dbus-daemon", "gio-launch-desktop", "ld-linux-x86-64.so.2"]);
    // The paths of wrappers learned as applications: what the daemon logged of them is shown.
    let mut learned_wrappers: Vec<String> = Vec::new();
    for line in listed.lines() {
        let name = line.rsplit('/').next().unwrap_or("");
        if wrapper_names.contains(&name) {
            failures.push(format!("a wrapper was learned as an application: {line}"));
            learned_wrappers.extend(line.split_whitespace().last().map(str::to_string));
        }
    }
    drop(machine);
    println!("{passed} of {} wrapper and application pairs learned and replayed", WRAPPERS.len() * apps.len() - 1);
    if !failures.is_empty() {
        let keys: Vec<PathBuf> = apps.iter().map(|a| PathBuf::from(&a.key)).collect();
        let log = d.log();
        for line in log.lines().filter(|l| learned_wrappers.iter().any(|w| l.contains(w.as_str()))).take(100) {
            println!("daemon (wrapper learned): {line}");
        }
        for line in log.lines().filter(|l| keys.iter().any(|k| l.contains(&*k.to_string_lossy()))).take(200) {
            println!("daemon: {line}");
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
