//! A FUSE file system whose `getattr` sleeps 60 s, used by a launch the daemon follows (the
//! launch holds a file of it open while the daemon closes its window, and its `PATH` starts with
//! a directory on it): the daemon must keep answering `augur status` within a second, whether
//! network and FUSE file systems are skipped (the default) or allowed (each lookup on them is
//! then given up after a time limit). Skipped, it also exits within two seconds of SIGTERM;
//! allowed, it finishes stopping within two seconds, but its process ends only once the file
//! system answers the request a given-up lookup left with it (the kernel waits such requests
//! out, even for a killed process).
//!
//! Needs root; installs `python3-fusepy` (Debian's FUSE binding for Python) when missing.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use augur::daemon::control::{self, Request, Response};
use common::TestDaemon;

/// The Debian interpreter the `python3-fusepy` package installs for.
const PYTHON: &str = "/usr/bin/python3";

/// A FUSE file system: `/data` (1 MiB) and an empty `/bin`; once `MARKER` exists, every
/// `getattr` but the root's sleeps 60 s. Attributes and names are never cached by the kernel.
const SLOW_FS: &str = r#"
import errno, os, stat, sys, time
from fusepy import FUSE, FuseOSError, Operations

MOUNT, MARKER = sys.argv[1], sys.argv[2]
DATA = bytes(range(256)) * 4096

class Slow(Operations):
    def getattr(self, path, fh=None):
        if path != '/' and os.path.exists(MARKER):
            time.sleep(60)
        if path in ('/', '/bin'):
            return dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2)
        if path == '/data':
            return dict(st_mode=stat.S_IFREG | 0o644, st_nlink=1, st_size=len(DATA))
        raise FuseOSError(errno.ENOENT)

    def readdir(self, path, fh):
        return ['.', '..'] + (['data', 'bin'] if path == '/' else [])

    def open(self, path, flags):
        return 0

    def read(self, path, size, offset, fh):
        return DATA[offset:offset + size]

FUSE(Slow(), MOUNT, foreground=True, ro=True, attr_timeout=0, entry_timeout=0, negative_timeout=0)
"#;

/// Installs what the file system needs, once.
fn install_fusepy() {
    let has = || Command::new(PYTHON).args(["-c", "import fusepy"]).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    if has() {
        return;
    }
    let s = Command::new("apt-get")
        .args(["install", "-y", "--no-install-recommends", "python3-fusepy"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .expect("running apt-get");
    assert!(s.success(), "apt-get install python3-fusepy failed");
    assert!(has(), "python3-fusepy installed but `import fusepy` fails");
    if !Path::new("/dev/fuse").exists() {
        let _ = Command::new("modprobe").arg("fuse").status();
    }
    assert!(Path::new("/dev/fuse").exists(), "/dev/fuse missing: the kernel has no FUSE");
}

/// The mounted slow file system; unmounted and stopped on drop.
struct SlowFs {
    server: Child,
    mount: PathBuf,
    marker: PathBuf,
}

impl SlowFs {
    fn mount(dir: &Path) -> SlowFs {
        install_fusepy();
        let script = dir.join("slow_fs.py");
        std::fs::write(&script, SLOW_FS).unwrap();
        let mount = dir.join("mnt");
        std::fs::create_dir_all(&mount).unwrap();
        let marker = dir.join("slow-now");
        let server = Command::new(PYTHON)
            .arg(&script)
            .arg(&mount)
            .arg(&marker)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("slow_fs.log")).unwrap())
            .spawn()
            .unwrap();
        let fs = SlowFs { server, mount, marker };
        let until = Instant::now() + Duration::from_secs(20);
        while !fs.mount.join("data").exists() {
            assert!(Instant::now() < until, "the FUSE file system never mounted: {}", fs.log(dir));
            std::thread::sleep(Duration::from_millis(50));
        }
        let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        assert!(text.lines().any(|l| l.contains(" - fuse")), "no FUSE mount in {text}");
        fs
    }

    fn log(&self, dir: &Path) -> String {
        std::fs::read_to_string(dir.join("slow_fs.log")).unwrap_or_default()
    }
}

impl Drop for SlowFs {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.marker);
        let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// Asks for the status; returns how long the answer took.
fn timed_status(socket: &Path) -> Duration {
    let t = Instant::now();
    match control::request(socket, &Request::Status) {
        Ok(Response::Status(_)) => {}
        other => panic!("status failed: {other:?}"),
    }
    t.elapsed()
}

/// Runs the launch, keeps asking for the status while the daemon follows it and closes its
/// window, then stops the daemon; asserts the times.
fn launch_on_slow_fs_keeps_daemon_responsive(network_filesystems: bool) {
    let work = tempfile::tempdir().unwrap();
    let fs = SlowFs::mount(work.path());
    let config = format!("[launch]\nquiet_ms = 500\nmin_pages = 1\n[learn]\nnetwork_filesystems = {network_filesystems}\n");
    let mut daemon = TestDaemon::start(&config);
    // The launch reads the FUSE file through fd 3 (fast still), makes the file system slow, and
    // execs `sleep` (argv0 "sleep", found on a PATH whose first directory is on the slow file
    // system) with fd 3 still open: the daemon's PATH probe and its look at the open files
    // would both reach the sleeping getattr.
    let app = work.path().join("launch.sh");
    std::fs::write(
        &app,
        format!(
            "#!/bin/bash\nexec 3< {mnt}/data\ncat <&3 > /dev/null\ntouch {marker}\nPATH={mnt}/bin:/usr/bin:/bin exec -a sleep /usr/bin/sleep 6\n",
            mnt = fs.mount.display(),
            marker = fs.marker.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&app, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut launch = Command::new(&app).spawn().unwrap();
    let started = Instant::now();
    let mut slowest = Duration::ZERO;
    let mut asked = 0;
    while started.elapsed() < Duration::from_secs(8) {
        let took = timed_status(&daemon.socket());
        slowest = slowest.max(took);
        asked += 1;
        assert!(took < Duration::from_secs(1), "status took {took:?} during the launch: {}", daemon.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(fs.marker.exists(), "the launch never made the file system slow");
    let _ = launch.wait();
    eprintln!("{asked} status requests, the slowest took {slowest:?}");
    // The daemon did follow the launch to its end (it is not responsive for having missed it).
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        match control::request(&daemon.socket(), &Request::Status) {
            Ok(Response::Status(s)) if !s.recent_launches.is_empty() => break,
            Ok(_) => {}
            Err(e) => panic!("status failed: {e}"),
        }
        assert!(Instant::now() < until, "the launch was never recorded: {}", daemon.log());
        std::thread::sleep(Duration::from_millis(100));
    }

    let mut child = daemon.child.take().unwrap();
    let t = Instant::now();
    // SAFETY (test): kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    if network_filesystems {
        // A lookup given up on is still a request the FUSE process has taken, and the kernel
        // waits such a request out even for a killed process: the daemon finishes stopping in
        // time, but its process ends only when the file system answers (or goes away).
        while !daemon.log().contains("INFO stopped") {
            assert!(t.elapsed() < Duration::from_secs(2), "daemon did not stop within 2 s: {}", daemon.log());
            std::thread::sleep(Duration::from_millis(10));
        }
        eprintln!("daemon stopped its work in {:?}", t.elapsed());
        drop(fs);
    }
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("daemon still running 10 s after SIGTERM: {}", daemon.log());
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = t.elapsed();
    eprintln!("daemon exited in {took:?} ({status})");
    if !network_filesystems {
        assert!(took < Duration::from_secs(2), "daemon took {took:?} to stop: {}", daemon.log());
    }
    assert!(status.success(), "daemon failed: {}", daemon.log());
}

#[test]
fn a_hung_fuse_file_system_delays_neither_status_nor_stop_when_skipped() {
    launch_on_slow_fs_keeps_daemon_responsive(false);
}

#[test]
fn a_hung_fuse_file_system_delays_neither_status_nor_stop_when_allowed() {
    launch_on_slow_fs_keeps_daemon_responsive(true);
}
