//! Boot prefetching, as root (as CI runs it): the early unit passes `systemd-analyze verify` and
//! says what keeps it from delaying the boot; a container booted with systemd starts it before
//! `sysinit.target` and so before every service it serves; and `augur boot`, told its phases by
//! `augur mark`, records a boot into the state and loads the merged plan at the next.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
const BIN: &str = env!("CARGO_BIN_EXE_augur");
const INIT_BIN: &str = env!("CARGO_BIN_EXE_augur-init");

fn unit_text() -> String {
    fs::read_to_string(Path::new(REPO).join("packaging/augur-boot.service")).unwrap()
}

fn values<'a>(unit: &'a str, key: &str) -> Vec<&'a str> {
    unit.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| *k == key)
        .map(|(_, v)| v)
        .collect()
}

#[test]
fn the_boot_unit_verifies_and_is_ordered_before_sysinit_at_idle_priority() {
    common::install("systemd-analyze", "systemd");
    let unit = unit_text();
    for (k, v) in [
        ("DefaultDependencies", "no"),
        ("Type", "exec"),
        ("IOSchedulingClass", "idle"),
        ("Nice", "10"),
        ("WantedBy", "sysinit.target"),
        ("Conflicts", "shutdown.target"),
        ("ExecStart", "/usr/bin/augur boot"),
    ] {
        assert_eq!(values(&unit, k), vec![v], "{k}");
    }
    assert!(values(&unit, "Before")[0].split_whitespace().any(|t| t == "sysinit.target"));
    // Nothing it serves waits for it: it orders itself before, never after, what it serves.
    let after = values(&unit, "After").join(" ");
    for t in ["sysinit.target", "basic.target", "multi-user.target", "graphical.target"] {
        assert!(!after.contains(t), "After={after}");
    }

    // verify checks that ExecStart= exists: the unit as installed, pointing at this build.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("augur-boot.service");
    fs::write(&copy, unit.replace("ExecStart=/usr/bin/augur boot", &format!("ExecStart={BIN} boot"))).unwrap();
    let out = Command::new("systemd-analyze").args(["verify", "--man=no"]).arg(&copy).output().unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "systemd-analyze verify: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A systemd container of this machine's own root file system (read-only, with a throw-away
/// overlay), with this build's `augur` and the boot unit bound in and pulled into the boot.
struct Container {
    nspawn: Child,
    leader: u32,
    root: PathBuf,
}

/// How the container's boot starts.
#[derive(Clone, Copy, PartialEq)]
enum Init {
    /// systemd, as `-b` starts it.
    Systemd,
    /// `augur-init` as PID 1 (the kernel's `init=`), which starts `augur boot` and then systemd.
    AugurInit,
}

impl Container {
    fn boot(config: &Path, unit: &Path, log: &Path, init: Init) -> Container {
        let root = std::env::temp_dir().join(format!("augur-boot-root-{}", std::process::id()));
        fs::create_dir_all(&root).unwrap();
        assert!(Command::new("mount").args(["--bind", "/"]).arg(&root).status().unwrap().success());
        assert!(Command::new("mount").args(["-o", "remount,bind,ro"]).arg(&root).status().unwrap().success());
        let bind = |from: &Path, to: &str| format!("--bind-ro={}:{to}", from.display());
        let init_bind = format!("--bind-ro={INIT_BIN}:/usr/sbin/augur-init");
        let nspawn = Command::new("systemd-nspawn")
            .arg("-D")
            .arg(&root)
            .args(["--volatile=overlay", "--register=no", "--keep-unit", "--console=passive"])
            .arg(format!("--machine=augur-boot-{}", std::process::id()))
            .arg(bind(Path::new(BIN), "/usr/bin/augur"))
            .arg(bind(unit, "/etc/systemd/system/augur-boot.service"))
            .arg(bind(config, "/etc/augur/config.toml"))
            .arg("--bind=/sys/kernel/tracing")
            .args(["--capability=CAP_BPF,CAP_PERFMON", "--system-call-filter=fanotify_init fanotify_mark bpf perf_event_open"])
            .args(match init {
                Init::Systemd => vec!["-b", "--", "systemd.wants=augur-boot.service", "systemd.unit=multi-user.target"],
                // augur-init where the package installs it; `-b`'s kill signal.
                Init::AugurInit => vec!["--kill-signal=SIGRTMIN+3", init_bind.as_str(), "--", "/usr/sbin/augur-init"],
            })
            .stdin(Stdio::null())
            .stdout(fs::File::create(log).unwrap())
            .stderr(fs::File::create(log.with_extension("err")).unwrap())
            .spawn()
            .unwrap();
        let mut leader = 0;
        for _ in 0..100 {
            let out = Command::new("pgrep").args(["-P", &nspawn.id().to_string()]).output().unwrap();
            if let Some(pid) = String::from_utf8_lossy(&out.stdout).lines().next().and_then(|l| l.trim().parse().ok()) {
                leader = pid;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let mut c = Container { nspawn, leader, root };
        assert!(
            c.leader != 0,
            "the container did not start: {}{}",
            fs::read_to_string(log).unwrap_or_default(),
            fs::read_to_string(log.with_extension("err")).unwrap_or_default()
        );
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let state = c.run(&["systemctl", "is-system-running"]);
            if matches!(state.trim(), "running" | "degraded") || Instant::now() > until {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        c
    }

    fn run(&mut self, args: &[&str]) -> String {
        let out = Command::new("nsenter").args(["-t", &self.leader.to_string(), "-a"]).args(args).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn monotonic(&mut self, unit: &str, property: &str) -> u64 {
        let text = self.run(&["systemctl", "show", "--value", "-p", property, unit]);
        text.trim().parse().unwrap_or_else(|_| panic!("{unit} {property}: {text:?}"))
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        // SIGTERM: nspawn asks the container's systemd to power off; then make sure.
        let pid = self.nspawn.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let until = Instant::now() + Duration::from_secs(20);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.nspawn.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if self.leader != 0 {
            let _ = Command::new("kill").args(["-KILL", &self.leader.to_string()]).status();
        }
        let _ = self.nspawn.kill();
        let _ = self.nspawn.wait();
        let _ = Command::new("umount").arg(&self.root).status();
        let _ = fs::remove_dir(&self.root);
    }
}

/// A booted container with the shipped unit and a short recording (the container's boot is
/// quick, and the host's tracefs is shared); its console log is `nspawn.log` in the directory.
fn boot_container(init: Init) -> (tempfile::TempDir, Container) {
    common::install("systemd-nspawn", "systemd-container");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    fs::write(&config, "[boot]\nmax_secs = 10\nafter_session_secs = 2\n").unwrap();
    let unit = dir.path().join("augur-boot.service");
    fs::write(&unit, unit_text()).unwrap();
    let c = Container::boot(&config, &unit, &dir.path().join("nspawn.log"), init);
    (dir, c)
}

#[test]
fn a_container_boot_starts_augur_boot_before_the_services_it_serves() {
    let (_dir, mut c) = boot_container(Init::Systemd);
    let started = c.monotonic("augur-boot.service", "ExecMainStartTimestampMonotonic");
    let sysinit = c.monotonic("sysinit.target", "ActiveEnterTimestampMonotonic");
    assert!(started > 0, "augur-boot.service never started:\n{}", c.run(&["systemctl", "status", "augur-boot.service"]));
    eprintln!("container: augur-boot.service started at {started} us, sysinit.target reached at {sysinit} us");
    assert!(started <= sysinit, "augur-boot started at {started} us, after sysinit.target ({sysinit} us)");
    // Every ordinary service (DefaultDependencies: after sysinit.target) started after it.
    for service in ["systemd-logind.service", "systemd-user-sessions.service"] {
        let at = c.monotonic(service, "ExecMainStartTimestampMonotonic");
        eprintln!("container: {service} started at {at} us");
        if at > 0 {
            assert!(started < at, "{service} started at {at} us, before augur-boot ({started} us)");
        }
    }
    // systemd agrees: sysinit.target is ordered after it.
    let after = c.run(&["systemctl", "list-dependencies", "--after", "--plain", "sysinit.target"]);
    assert!(after.contains("augur-boot.service"), "sysinit.target is not ordered after augur-boot:\n{after}");
    // It followed the boot's phases from systemd's targets and saved the boot when its time was up
    // (max_secs: no session comes in the container).
    let until = Instant::now() + Duration::from_secs(40);
    while c.run(&["systemctl", "is-active", "augur-boot.service"]).trim() == "active" && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(500));
    }
    let journal = c.run(&["journalctl", "-u", "augur-boot.service", "-o", "cat", "--no-pager"]);
    eprintln!("container: augur-boot's journal:\n{journal}");
    assert!(journal.contains("multi-user at"), "{journal}");
    // Each phase began when systemd says it did, however late augur boot looked: sysinit.target
    // was reached before multi-user.target, and the phases say so.
    let phase_at = |name: &str| -> f64 {
        let line = journal.lines().find(|l| l.contains("reached phase")).unwrap_or_default();
        let at = line.split(&format!("{name} at ")).nth(1).and_then(|t| t.split(' ').next()).and_then(|t| t.parse().ok());
        at.unwrap_or_else(|| panic!("no start of {name} in {line:?}"))
    };
    assert!(phase_at("sysinit") < phase_at("multi-user"), "{journal}");
    assert!(journal.contains("boot: recorded"), "{journal}");
}

#[test]
fn augur_init_records_from_before_systemd_which_it_hands_pid_1_to_and_the_unit_steps_aside() {
    let (dir, mut c) = boot_container(Init::AugurInit);
    let log = dir.path().join("nspawn.log");
    // augur-init executed systemd in its own process: PID 1 is systemd, and it booted.
    assert_eq!(c.run(&["cat", "/proc/1/comm"]).trim(), "systemd");
    assert!(c.monotonic("multi-user.target", "ActiveEnterTimestampMonotonic") > 0);
    // The recorder said it records before systemd ran, so the unit was skipped by its condition.
    let marker = c.run(&["cat", "/run/augur-init.pid"]);
    assert!(marker.trim().parse::<u32>().is_ok(), "no /run/augur-init.pid: {marker:?}");
    let condition = c.run(&["systemctl", "show", "--value", "-p", "ConditionResult", "augur-boot.service"]);
    assert_eq!(condition.trim(), "no", "augur-boot.service ran beside augur-init's recorder");
    // The recorder, a child of PID 1, started before systemd did (process start times count in
    // clock ticks since boot, the monotonic clock here: no suspend in a test machine).
    let pid = c.run(&["pgrep", "-f", "augur boot --before-init"]);
    let pid = pid.lines().next().unwrap_or_default().trim().to_string();
    assert!(!pid.is_empty(), "no augur boot in the container");
    let stat = c.run(&["cat", &format!("/proc/{pid}/stat")]);
    let fields: Vec<&str> = stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    assert_eq!(fields.get(1), Some(&"1"), "its parent is not PID 1: {stat}");
    let started_ms = fields[19].parse::<u64>().unwrap() * 10;
    let manager = c.run(&["systemctl", "show", "--value", "-p", "UserspaceTimestampMonotonic"]);
    let systemd_ms = manager.trim().parse::<u64>().unwrap_or_else(|_| panic!("systemd's start: {manager:?}")) / 1000;
    eprintln!("container: augur boot started at {started_ms} ms, systemd at {systemd_ms} ms");
    assert!(started_ms <= systemd_ms + 10, "augur boot started at {started_ms} ms, after systemd ({systemd_ms} ms)");
    // It follows systemd's targets and saves the boot and the next boot's plan when its time is up.
    let until = Instant::now() + Duration::from_secs(40);
    while !c.run(&["pgrep", "-f", "augur boot --before-init"]).trim().is_empty() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(500));
    }
    // Its log: on the console until journald listens, then in the journal.
    let journal = c.run(&["journalctl", "-b", "-t", "augur-boot", "-o", "cat", "--no-pager"]);
    eprintln!("container: augur-boot's journal:\n{journal}");
    assert!(journal.contains("its log goes to the journal from here"), "{journal}");
    assert!(journal.contains("multi-user at"), "{journal}");
    assert!(journal.contains("boot: recorded"), "{journal}");
    let plan = c.run(&["head", "-c", "200", "/var/lib/augur/boot-plan.json"]);
    assert!(plan.starts_with("{\"format\":\"augur-boot-plan\""), "no plan file: {plan:?}");
    // The console, which nspawn hands over when the container stops, has the start.
    drop(c);
    let text = fs::read_to_string(&log).unwrap_or_default();
    assert!(text.contains("INFO boot: started before the init; plan of 0 boots"), "{text}");
    // Run as anything but the kernel's init, augur-init refuses.
    let out = Command::new(INIT_BIN).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("runs as the kernel's init only"));
}

fn wait_exit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let until = Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(Instant::now() < until, "augur boot did not stop in {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn augur_boot_records_a_boot_in_the_phases_marked_and_loads_its_plan_the_next_time() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    let state = dir.path().join("state.db");
    let marks = dir.path().join("phase");
    fs::write(&config, "[boot]\nmax_secs = 20\nafter_session_secs = 1\n").unwrap();
    // A file this "boot" reads in its basic phase, on the disk.
    let data = Path::new(REPO).join("target").join(format!("augur-boot-data-{}", std::process::id()));
    fs::write(&data, vec![7u8; 1 << 20]).unwrap();

    let boot = |log: &Path| -> Child {
        Command::new(BIN)
            .args(["boot", "--config"])
            .arg(&config)
            .arg("--state")
            .arg(&state)
            .arg("--marks")
            .arg(&marks)
            .stderr(fs::File::create(log).unwrap())
            .spawn()
            .unwrap()
    };
    let mark = |phase: &str| {
        let s = Command::new(BIN).args(["mark", phase, "--marks"]).arg(&marks).status().unwrap();
        assert!(s.success());
    };
    for round in 0..2 {
        let _ = fs::remove_file(&marks);
        common::drop_caches();
        let log = dir.path().join(format!("boot-{round}.log"));
        let mut child = boot(&log);
        std::thread::sleep(Duration::from_millis(1500));
        mark("sysinit");
        mark("basic");
        // augur boot looks at the marks twice a second, later on a loaded machine.
        std::thread::sleep(Duration::from_millis(1500));
        let read = fs::read(&data).unwrap();
        assert_eq!(read.len(), 1 << 20);
        std::thread::sleep(Duration::from_millis(600));
        mark("session");
        let status = wait_exit(&mut child, Duration::from_secs(30));
        let text = fs::read_to_string(&log).unwrap();
        assert!(status.success(), "augur boot failed:\n{text}");
        assert!(text.contains("boot: recorded"), "{text}");
        if round == 1 {
            // The second boot loaded the first one's basic phase, which holds the file read then.
            assert!(text.contains("boot: plan of 1 boots"), "{text}");
            assert!(text.contains("boot: phase basic:"), "{text}");
        }
    }
    // The state holds both boots; the data file's pages are planned for the basic phase.
    let history = augur_store::state::read_boot_history(&state).unwrap();
    assert_eq!(history.traces.len(), 2);
    let plan = history.plan(&Default::default());
    let basic = plan.phase(augur_core::model::boot::BootPhase::Basic).expect("a basic phase");
    let canonical = fs::canonicalize(&data).unwrap();
    let found: Vec<_> = history
        .traces
        .iter()
        .map(|t| (t.phases.clone(), t.files.iter().filter(|f| f.path == canonical).cloned().collect::<Vec<_>>()))
        .collect();
    assert!(basic.files.iter().any(|f| f.path == canonical), "{canonical:?} in the boots: {found:?}");
    // `augur mark` refuses what is no phase.
    let bad = Command::new(BIN).args(["mark", "lunch", "--marks"]).arg(&marks).output().unwrap();
    assert_eq!(bad.status.code(), Some(2), "{}", String::from_utf8_lossy(&bad.stderr));
    let _ = fs::remove_file(&data);
}
