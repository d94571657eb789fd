//! Acceptance tests of the Debian package and the systemd unit (issue 5): the package is built
//! with the one documented command (`scripts/build-deb`), inspected, checked by
//! `systemd-analyze`, installed for real with `dpkg -i`, used (man pages, bash completion), and
//! purged, which must leave no file and no augur process behind.
//!
//! Runs as root on a scratch machine (CI): it installs the Debian tools it needs, and installs
//! and purges the `augur` package itself, which also deletes `/var/lib/augur` and `/etc/augur`:
//! do not run it where augur is installed for real. It reuses the release binary cargo built for
//! the tests.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
const BIN: &str = env!("CARGO_BIN_EXE_augur");
const UNIT: &str = "/lib/systemd/system/augur.service";
const BOOT_UNIT: &str = "/lib/systemd/system/augur-boot.service";

/// The tests share the dpkg database and the built package: one at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(cmd: &mut Command) -> String {
    String::from_utf8(run(cmd).stdout).unwrap()
}

fn sh(script: &str) -> Output {
    Command::new("sh").arg("-c").arg(script).output().unwrap()
}

/// Installs the Debian package providing `program` unless it is already on PATH.
fn ensure_tool(program: &str, package: &str) {
    if sh(&format!("command -v {program}")).status.success() {
        return;
    }
    let install = || {
        Command::new("apt-get")
            .args(["-o", "DPkg::Lock::Timeout=300", "install", "-y", "--no-install-recommends", package])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
            .unwrap()
    };
    if !install().status.success() {
        run(Command::new("apt-get").arg("update"));
        run(Command::new("apt-get")
            .args(["-o", "DPkg::Lock::Timeout=300", "install", "-y", "--no-install-recommends", package])
            .env("DEBIAN_FRONTEND", "noninteractive"));
    }
    assert!(sh(&format!("command -v {program}")).status.success(), "{program} still missing");
}

/// Builds the package once with the documented command, from the test's release binary.
fn package() -> &'static Path {
    static DEB: OnceLock<PathBuf> = OnceLock::new();
    DEB.get_or_init(|| {
        ensure_tool("dpkg-deb", "dpkg");
        let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("deb");
        let deb =
            stdout(Command::new(Path::new(REPO).join("scripts/build-deb")).env("AUGUR_BIN", BIN).env("AUGUR_DEB_DIR", &out_dir));
        let deb = PathBuf::from(deb.trim());
        assert!(deb.starts_with(&out_dir) && deb.is_file(), "{deb:?}");
        deb
    })
}

/// `dpkg-deb -c`: path -> (mode string, owner/group).
fn contents(deb: &Path) -> BTreeMap<String, (String, String)> {
    stdout(Command::new("dpkg-deb").arg("-c").arg(deb))
        .lines()
        .map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let path = f[5].trim_start_matches('.').trim_end_matches('/').to_string();
            (path, (f[0].to_string(), f[1].to_string()))
        })
        .collect()
}

fn field(deb: &Path, name: &str) -> String {
    stdout(Command::new("dpkg-deb").arg("-f").arg(deb).arg(name)).trim().to_string()
}

#[test]
fn package_holds_binary_unit_conffile_man_pages_completions_and_docs() {
    let _serial = serial();
    let deb = package();
    let files = contents(deb);
    let expect = |path: &str, mode: &str| {
        let (m, owner) = files.get(path).unwrap_or_else(|| panic!("{path} missing: {files:#?}"));
        assert_eq!(m, mode, "{path}");
        assert_eq!(owner, "root/root", "{path}");
    };
    expect("/usr/bin/augur", "-rwxr-xr-x");
    // The kernel's init= for a boot recorded from before systemd (an opt-in, docs/boot.md).
    expect("/usr/sbin/augur-init", "-rwxr-xr-x");
    expect(UNIT, "-rw-r--r--");
    expect(BOOT_UNIT, "-rw-r--r--");
    expect("/etc/augur/config.toml", "-rw-r--r--");
    expect("/usr/share/man/man1/augur.1.gz", "-rw-r--r--");
    for cmd in ["trace", "prefetch", "daemon", "status", "apps", "forget", "explain"] {
        expect(&format!("/usr/share/man/man1/augur-{cmd}.1.gz"), "-rw-r--r--");
    }
    expect("/usr/share/bash-completion/completions/augur", "-rw-r--r--");
    expect("/usr/share/zsh/vendor-completions/_augur", "-rw-r--r--");
    expect("/usr/share/fish/vendor_completions.d/augur.fish", "-rw-r--r--");
    expect("/usr/share/doc/augur/copyright", "-rw-r--r--");
    expect("/usr/share/doc/augur/changelog.gz", "-rw-r--r--");
    // The benchmarks are their own crate and binary, never shipped.
    assert!(!files.keys().any(|p| p.contains("bench")), "benchmark files in the package: {files:#?}");
    for (path, (mode, _)) in &files {
        if mode.starts_with('d') {
            assert_eq!(mode, "drwxr-xr-x", "{path}");
        }
        assert!(!path.contains("generate"), "hidden command documented: {path}");
    }

    assert_eq!(field(deb, "Package"), "augur");
    let version = stdout(Command::new(BIN).arg("--version"));
    assert_eq!(field(deb, "Version"), version.split_whitespace().nth(1).unwrap());
    let depends = field(deb, "Depends");
    assert!(depends.starts_with("libc6"), "{depends}");

    let info = stdout(Command::new("dpkg-deb").arg("-I").arg(deb));
    for member in ["conffiles", "md5sums", "postinst", "prerm", "postrm"] {
        assert!(info.contains(member), "control member {member} missing:\n{info}");
    }
}

#[test]
fn unit_is_type_notify_restarts_with_back_off_and_is_sandboxed() {
    let _serial = serial();
    let unit = fs::read_to_string(Path::new(REPO).join("packaging/augur.service")).unwrap();
    let keys: Vec<(&str, &str)> =
        unit.lines().filter(|l| !l.starts_with('#') && l.contains('=')).filter_map(|l| l.split_once('=')).collect();
    let value = |k: &str| -> Vec<&str> { keys.iter().filter(|(key, _)| *key == k).map(|(_, v)| *v).collect() };
    for (k, v) in [
        ("Type", "notify"),
        ("ExecStart", "/usr/bin/augur daemon"),
        ("StateDirectory", "augur"),
        ("StateDirectoryMode", "0700"),
        ("RuntimeDirectory", "augur"),
        ("ConfigurationDirectory", "augur"),
        ("Restart", "on-failure"),
        ("RestartSec", "5s"),
        ("StartLimitBurst", "5"),
        ("RestartPreventExitStatus", "2 6 7 8 11"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "read-only"),
        ("NoNewPrivileges", "yes"),
        ("PrivateTmp", "yes"),
        ("ReadWritePaths", "-/sys/kernel/tracing"),
        ("RestrictAddressFamilies", "AF_UNIX AF_NETLINK"),
        ("SystemCallArchitectures", "native"),
        ("MemoryDenyWriteExecute", "yes"),
        ("WantedBy", "multi-user.target"),
    ] {
        assert_eq!(value(k), vec![v], "{k}");
    }
    let caps: Vec<&str> = value("CapabilityBoundingSet")[0].split_whitespace().collect();
    assert_eq!(
        caps,
        ["CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_SYS_PTRACE", "CAP_SYS_ADMIN", "CAP_NET_ADMIN", "CAP_BPF", "CAP_PERFMON"]
    );
    // Each capability kept is explained in the unit and in the README.
    let readme = fs::read_to_string(Path::new(REPO).join("README.md")).unwrap();
    for cap in caps {
        assert!(unit.matches(cap).count() >= 2, "{cap} not explained in the unit");
        assert!(readme.contains(&format!("`{cap}`")), "{cap} not in the README's table");
    }
    assert!(value("SystemCallFilter")[0].starts_with("@system-service"));
    // Tunables read-only by hand: ProtectKernelTunables=yes would make tracefs read-only too.
    assert!(value("ProtectKernelTunables").is_empty(), "tracefs must stay writable");
    assert!(value("ReadOnlyPaths")[0].starts_with("/sys /proc/sys "), "{:?}", value("ReadOnlyPaths"));
    assert!(value("PrivateNetwork").is_empty(), "the proc connector needs the host's network");
    assert!(value("MemoryMax").is_empty(), "page cache is charged to the unit: no limit");

    // The exposure score recorded in the README is what systemd-analyze says today.
    ensure_tool("systemd-analyze", "systemd");
    let security = Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager"])
        .arg(Path::new(REPO).join("packaging/augur.service"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&security.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("Overall exposure level for augur.service"))
        .unwrap_or_else(|| panic!("no score in:\n{text}"));
    let score = line.split(':').nth(1).unwrap().split_whitespace().next().unwrap();
    assert!(
        readme.contains(&format!("Overall exposure level for augur.service: {score}")),
        "README does not record the current exposure {score}"
    );
    assert!(score.parse::<f64>().unwrap() <= 3.0, "exposure {score} above 3.0");
}

/// Serializes installing tests across processes: on a shared machine several test runs may
/// install and purge the one `augur` package at the same time. Held until dropped.
fn machine_lock() -> fs::File {
    let dir = if Path::new("/run/lock").is_dir() { "/run/lock" } else { "/tmp" };
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(Path::new(dir).join("augur-package-test.lock"))
        .unwrap();
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive).unwrap();
    file
}

/// `dpkg ARGS`, waiting while another dpkg or apt holds the dpkg lock.
fn dpkg(args: &[&str]) -> Output {
    for _ in 0..300 {
        let out = Command::new("dpkg").args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.success() || !err.contains("lock") {
            return out;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!("dpkg {args:?}: the dpkg lock stayed taken");
}

/// Purges the package on drop, so that a failing assertion leaves the machine clean.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = dpkg(&["--purge", "augur"]);
    }
}

/// Starts `/usr/bin/augur daemon` by hand, as a user would without systemd, with its stderr a
/// pipe nobody reads and that is already full: whatever the daemon does first that logs, it stays
/// blocked there, alive, until something stops it. Returns the child and the pipe's read end.
fn hand_started_daemon() -> (Child, OwnedFd) {
    let (read, write) = rustix::pipe::pipe().unwrap();
    rustix::fs::fcntl_setfl(&write, rustix::fs::OFlags::NONBLOCK).unwrap();
    let chunk = [b'x'; 4096];
    loop {
        match rustix::io::write(&write, &chunk) {
            Ok(_) => continue,
            Err(rustix::io::Errno::AGAIN) => break,
            Err(e) => panic!("filling pipe: {e}"),
        }
    }
    rustix::fs::fcntl_setfl(&write, rustix::fs::OFlags::empty()).unwrap();
    let child = Command::new("/usr/bin/augur")
        .arg("daemon")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(write))
        .spawn()
        .unwrap();
    (child, read)
}

/// PIDs whose executable is the packaged augur, even if the file was since removed.
fn packaged_augur_pids() -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(exe) = fs::read_link(entry.path().join("exe")) else { continue };
        let exe = exe.to_string_lossy().into_owned();
        if exe == "/usr/bin/augur" || exe == "/usr/bin/augur (deleted)" {
            pids.push(pid);
        }
    }
    pids
}

#[test]
fn installed_package_documents_completes_verifies_and_purges_without_leftovers() {
    let _serial = serial();
    let deb = package();
    ensure_tool("systemd-analyze", "systemd");
    ensure_tool("man", "man-db");
    ensure_tool("deb-systemd-helper", "init-system-helpers");

    let _machine = machine_lock();
    let _ = dpkg(&["--purge", "augur"]);
    let installed = Installed;
    let install = dpkg(&["-i", deb.to_str().unwrap()]);
    assert!(install.status.success(), "dpkg -i: {}", String::from_utf8_lossy(&install.stderr));

    // Enabled the way Debian enables services (a symlink, also valid where systemd is not running
    // yet); started only where systemd is PID 1.
    let wants = Path::new("/etc/systemd/system/multi-user.target.wants/augur.service");
    assert_eq!(fs::read_link(wants).unwrap(), Path::new(UNIT));
    let boot_wants = Path::new("/etc/systemd/system/sysinit.target.wants/augur-boot.service");
    assert_eq!(fs::read_link(boot_wants).unwrap(), Path::new(BOOT_UNIT));
    let conffiles = stdout(Command::new("dpkg-query").args(["-W", "-f=${Conffiles}", "augur"]));
    assert!(conffiles.contains("/etc/augur/config.toml"), "{conffiles}");

    // The installed unit passes systemd-analyze verify without a single warning.
    let verify = Command::new("systemd-analyze").args(["verify", "--man=no", UNIT, BOOT_UNIT]).output().unwrap();
    assert!(
        verify.status.success() && verify.stdout.is_empty() && verify.stderr.is_empty(),
        "systemd-analyze verify: {}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );

    // `man augur` and a subcommand's page render.
    for (page, needle) in [("augur", "augur-daemon(1)"), ("augur-daemon", "augur-daemon")] {
        let text = stdout(Command::new("man").arg(page).env("MANPAGER", "cat").env("MANWIDTH", "100"));
        assert!(text.contains(needle), "man {page}:\n{text}");
    }

    // The bash completion loads, directly and through bash-completion's on-demand loader.
    let complete =
        stdout(Command::new("bash").args(["-c", "source /usr/share/bash-completion/completions/augur && complete -p augur"]));
    assert!(complete.contains("-F _augur") && complete.trim_end().ends_with(" augur"), "{complete}");
    let words = stdout(Command::new("bash").args([
        "-c",
        "source /usr/share/bash-completion/completions/augur; \
         COMP_WORDS=(augur st); COMP_CWORD=1; COMP_LINE='augur st'; COMP_POINT=8; \
         _augur augur st augur; printf '%s\\n' \"${COMPREPLY[@]}\"",
    ]));
    assert_eq!(words.split_whitespace().collect::<Vec<_>>(), ["status"], "{words}");
    ensure_tool_file("/usr/share/bash-completion/bash_completion", "bash-completion");
    let loaded = stdout(
        Command::new("bash")
            .args(["-c", "source /usr/share/bash-completion/bash_completion; _completion_loader augur; complete -p augur"]),
    );
    assert!(loaded.contains("-F _augur"), "{loaded}");

    // What augur learned lives in /var/lib/augur; purge must remove it with the configuration.
    fs::create_dir_all("/var/lib/augur").unwrap();
    fs::File::create("/var/lib/augur/learned-by-test").unwrap().write_all(b"x").unwrap();

    // Removal leaves no process behind, even a daemon started by hand and stuck.
    let (mut daemon, stderr_pipe) = hand_started_daemon();
    let started = Instant::now();
    while !packaged_augur_pids().contains(&daemon.id()) {
        assert!(started.elapsed() < Duration::from_secs(10), "hand-started daemon never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    let purge = dpkg(&["--purge", "augur"]);
    assert!(purge.status.success(), "dpkg --purge: {}", String::from_utf8_lossy(&purge.stderr));
    let said = String::from_utf8_lossy(&purge.stderr);
    assert!(said.contains(&format!("stopping augur daemon (pid {})", daemon.id())), "{said}");
    // It is gone (reaped here: a zombie would still be listed), however it ended.
    daemon.wait().unwrap();
    drop(stderr_pipe);
    assert!(packaged_augur_pids().is_empty(), "augur processes left: {:?}", packaged_augur_pids());

    for gone in ["/usr/bin/augur", UNIT, "/etc/augur", "/var/lib/augur", "/usr/share/man/man1/augur.1.gz"] {
        assert!(!Path::new(gone).exists(), "{gone} survived the purge");
    }
    assert!(fs::symlink_metadata("/usr/sbin/augur-init").is_err(), "/usr/sbin/augur-init survived the purge");
    assert!(fs::symlink_metadata(wants).is_err(), "enable symlink survived the purge");
    assert!(fs::symlink_metadata(boot_wants).is_err(), "augur-boot's enable symlink survived the purge");
    drop(installed);
}

/// Installs `package` unless `file` exists.
fn ensure_tool_file(file: &str, package: &str) {
    if !Path::new(file).exists() {
        run(Command::new("apt-get")
            .args(["-o", "DPkg::Lock::Timeout=300", "install", "-y", "--no-install-recommends", package])
            .env("DEBIAN_FRONTEND", "noninteractive"));
    }
}
