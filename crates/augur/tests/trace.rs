//! `augur trace` end to end, as root (as CI runs it): a small C program compiled here reads a
//! generated file forward and then backward, page by page; the profile must hold every page of
//! that file whether the cache was cold or warm, in every mode, and the tracefs instance must be
//! gone afterwards, even after Ctrl-C.

use std::fs;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use augur_core::model::profile::{LaunchProfile, TraceMode};
use augur_store::profile_file;

const AUGUR: &str = env!("CARGO_BIN_EXE_augur");
const DATA_PAGES: u64 = 1024; // 4 MiB
const TRACEFS_INSTANCES: &str = "/sys/kernel/tracing/instances";

const READER_C: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc < 2) return 2;
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) { perror(argv[1]); return 1; }
    static char buf[65536];
    ssize_t n;
    unsigned long sum = 0;
    while ((n = read(fd, buf, sizeof buf)) > 0) sum += (unsigned char)buf[0];
    off_t size = lseek(fd, 0, SEEK_END);
    for (off_t off = (size - 1) / 4096 * 4096; off >= 0; off -= 4096) {
        if (pread(fd, buf, 4096, off) < 0) { perror("pread"); return 1; }
        sum += (unsigned char)buf[0];
    }
    printf("sum %lu\n", sum);
    return argc > 2 ? 3 : 0;
}
"#;

struct Fixture {
    dir: PathBuf,
    reader: PathBuf,
    data: PathBuf,
}

/// Compiles the reader and writes the data file once per test binary, under the target dir (a
/// block-backed filesystem, which the fanotify marks cover).
fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let dir = base.join(format!("trace-test-{}", std::process::id()));
        // Earlier runs' fixtures (other pids) are of no use any more.
        for old in fs::read_dir(base).unwrap().flatten() {
            if old.file_name().to_string_lossy().starts_with("trace-test-") && old.path() != dir {
                let _ = fs::remove_dir_all(old.path());
            }
        }
        fs::create_dir_all(&dir).unwrap();
        let src = dir.join("reader.c");
        fs::write(&src, READER_C).unwrap();
        let reader = dir.join("augur-test-reader");
        let out = Command::new("cc").arg("-O2").arg("-o").arg(&reader).arg(&src).output().expect("a C compiler (cc) is needed");
        assert!(out.status.success(), "cc failed: {}", String::from_utf8_lossy(&out.stderr));
        let data = dir.join("data.bin");
        let mut f = fs::File::create(&data).unwrap();
        let mut page = vec![0u8; 4096];
        for i in 0..DATA_PAGES {
            page.iter_mut().enumerate().for_each(|(j, b)| *b = (i as usize * 31 + j) as u8);
            f.write_all(&page).unwrap();
        }
        f.sync_all().unwrap();
        Fixture { dir, reader, data }
    })
}

/// Evicts one file from the page cache (politer than dropping every cache on a shared machine).
fn evict(path: &Path) {
    let f = fs::File::open(path).unwrap();
    // SAFETY: a valid fd; POSIX_FADV_DONTNEED only drops clean cached pages.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(rc, 0);
}

fn augur(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(AUGUR);
    cmd.args(args).env_remove("AUGUR_FORCE_MODE");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn trace_reader(name: &str, extra: &[&str], envs: &[(&str, &str)]) -> (LaunchProfile, Output) {
    let fx = fixture();
    let out_path = fx.dir.join(format!("{name}.profile.json"));
    let _ = fs::remove_file(&out_path);
    let mut args = vec!["trace", "--output", out_path.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", fx.reader.to_str().unwrap(), fx.data.to_str().unwrap()]);
    let out = augur(&args, envs);
    assert!(out.status.success(), "augur trace failed: {}", String::from_utf8_lossy(&out.stderr));
    (profile_file::load(&out_path).unwrap(), out)
}

fn pages_of(profile: &LaunchProfile, path: &Path) -> u64 {
    let f =
        profile.files.iter().find(|f| f.path == path).unwrap_or_else(|| panic!("{} missing from the profile", path.display()));
    f.page_set().page_count()
}

fn our_instances_left() -> Vec<String> {
    // Instances of finished augur processes must be gone; names end in the owner's pid.
    fs::read_dir(TRACEFS_INSTANCES)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("augur-"))
        .filter(|n| {
            n.rsplit('-')
                .next()
                .and_then(|p| p.parse::<u32>().ok())
                .is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
        })
        .collect()
}

/// Cold then warm traces of the reader in `mode` (`None`: the default, bpf on this kernel).
fn cold_and_warm_traces_hold_every_page(mode: Option<&str>, name: &str) {
    let fx = fixture();
    let envs: Vec<(&str, &str)> = mode.map(|m| ("AUGUR_FORCE_MODE", m)).into_iter().collect();
    evict(&fx.data);
    let (cold, out) = trace_reader(&format!("cold-{name}"), &[], &envs);
    assert_eq!(cold.mode, TraceMode::Access, "bpf and access modes both record access events");
    assert_eq!(pages_of(&cold, &fx.data), DATA_PAGES, "cold trace");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("sum "), "the command's stdout passes through");
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(summary.contains(&format!(" in {name} mode")) && summary.contains("lost events: 0"), "{summary}");
    if mode.is_some() {
        assert!(summary.contains("better modes not used: bpf: --mode/AUGUR_FORCE_MODE asked for access"), "{summary}");
    } else {
        assert!(!summary.contains("better modes not used"), "{summary}");
    }

    // The file is cached now: only the access events can see the reads.
    let (warm, _) = trace_reader(&format!("warm-{name}"), &[], &envs);
    assert_eq!(pages_of(&warm, &fx.data), DATA_PAGES, "warm trace must be as complete as the cold one");
    let reader = warm.files.iter().find(|f| f.path == fx.reader).expect("the executable itself is in the profile");
    let meta = fs::metadata(&fx.reader).unwrap();
    assert_eq!((reader.identity.ino, reader.identity.size), (std::os::unix::fs::MetadataExt::ino(&meta), meta.len()));

    // Files are in first-use order; the forward read makes the data file's ranges ascending.
    let firsts: Vec<u64> = warm.files.iter().map(|f| f.first_use_us()).collect();
    assert!(firsts.windows(2).all(|w| w[0] <= w[1]), "{firsts:?}");
    let data = warm.files.iter().find(|f| f.path == fx.data).unwrap();
    assert_eq!(data.ranges[0].range.start, 0);
    assert!(warm.window_ms < 60_000);
    assert!(our_instances_left().is_empty(), "{:?}", our_instances_left());
}

#[test]
fn cold_and_warm_traces_hold_every_page_in_bpf_mode() {
    cold_and_warm_traces_hold_every_page(None, "bpf");
}

#[test]
fn cold_and_warm_traces_hold_every_page_and_leave_no_instance_in_access_mode() {
    cold_and_warm_traces_hold_every_page(Some("access"), "access");
}

#[test]
fn a_file_the_command_writes_and_reads_back_is_not_in_its_profile() {
    let fx = fixture();
    let out_path = fx.dir.join("writer.profile.json");
    let output = fx.dir.join("writer-output.bin");
    let _ = fs::remove_file(&out_path);
    let _ = fs::remove_file(&output);
    evict(&fx.data);
    // Reads its input, writes 1 MiB of output and reads it back (a linker relocating its output).
    let script = format!(
        "cat {data} > /dev/null; head -c 1048576 /dev/zero > {out}; cat {out} > /dev/null",
        data = fx.data.display(),
        out = output.display()
    );
    let out = augur(&["trace", "--output", out_path.to_str().unwrap(), "--", "/bin/sh", "-c", &script], &[]);
    assert!(out.status.success(), "augur trace failed: {}", String::from_utf8_lossy(&out.stderr));
    let p = profile_file::load(&out_path).unwrap();
    assert_eq!(p.mode, TraceMode::Access);
    assert_eq!(pages_of(&p, &fx.data), DATA_PAGES);
    assert!(
        p.files.iter().all(|f| f.path != output),
        "its output was learned: {:?}",
        p.files.iter().map(|f| &f.path).collect::<Vec<_>>()
    );
    let _ = fs::remove_file(&output);
}

#[test]
fn insertion_mode_records_a_cold_start() {
    let fx = fixture();
    evict(&fx.data);
    let (p, out) = trace_reader("insertion", &[], &[("AUGUR_FORCE_MODE", "insertion")]);
    assert_eq!(p.mode, TraceMode::Insertion);
    assert_eq!(pages_of(&p, &fx.data), DATA_PAGES);
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(summary.contains("insertion mode"), "{summary}");
    assert!(summary.contains("better modes not used: bpf: --mode/AUGUR_FORCE_MODE asked for insertion; access: "), "{summary}");
    // The flag does the same as the environment variable.
    evict(&fx.data);
    let (p, _) = trace_reader("insertion-flag", &["--mode", "insertion"], &[]);
    assert_eq!((p.mode, pages_of(&p, &fx.data)), (TraceMode::Insertion, DATA_PAGES));
}

#[test]
fn file_only_mode_records_whole_files() {
    let fx = fixture();
    let (p, out) = trace_reader("file-only", &[], &[("AUGUR_FORCE_MODE", "file-only")]);
    assert_eq!(p.mode, TraceMode::FileOnly);
    assert!(String::from_utf8_lossy(&out.stderr).contains("in file-only mode"));
    assert_eq!(pages_of(&p, &fx.data), DATA_PAGES);
    assert!(p.files.iter().any(|f| f.path == fx.reader), "the exec'd file is seen by FAN_OPEN_EXEC");
}

#[test]
fn a_failing_command_still_gets_its_profile() {
    let fx = fixture();
    let out_path = fx.dir.join("failing.profile.json");
    let out = augur(
        &["trace", "-o", out_path.to_str().unwrap(), "--", fx.reader.to_str().unwrap(), fx.data.to_str().unwrap(), "fail"],
        &[],
    );
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("exited with status 3; the profile was written anyway"));
    assert_eq!(pages_of(&profile_file::load(&out_path).unwrap(), &fx.data), DATA_PAGES);
}

/// Ctrl-C during a trace in `mode`: exit code 130, the profile written, no tracefs instance left.
fn ctrl_c_ends_the_trace(mode: &str) {
    let fx = fixture();
    let out_path = fx.dir.join(format!("interrupted-{mode}.profile.json"));
    let _ = fs::remove_file(&out_path);
    let child = Command::new(AUGUR)
        .args(["trace", "-o", out_path.to_str().unwrap(), "--", "sleep", "30"])
        .env("AUGUR_FORCE_MODE", mode)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let name = format!("augur-trace-{}", child.id());
    let until = Instant::now() + Duration::from_secs(10);
    while mode != "bpf" && !Path::new(TRACEFS_INSTANCES).join(&name).exists() {
        assert!(Instant::now() < until, "instance {name} never appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Wait until the traced `sleep` runs (a descendant of augur that has exec'd: its child, or
    // its grandchild under the lookup recorder).
    let augur_pid = child.id();
    while !fs::read_dir("/proc").unwrap().flatten().any(|e| {
        let stat = fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let pid = e.file_name().to_str().and_then(|n| n.parse().ok()).unwrap_or(0);
        stat.contains("(sleep) ") && augur_os::sense::procfs::descends_from(pid, augur_pid)
    }) {
        assert!(Instant::now() < until, "the traced command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!Path::new(TRACEFS_INSTANCES).join(&name).exists(), "instance left behind");
    let p = profile_file::load(&out_path).unwrap();
    assert!(p.files.iter().any(|f| f.path.ends_with("sleep")), "{:?}", p.files.iter().map(|f| &f.path).collect::<Vec<_>>());
}

#[test]
fn ctrl_c_ends_the_trace_and_removes_the_instance() {
    ctrl_c_ends_the_trace("access");
}

#[test]
fn ctrl_c_ends_a_bpf_trace() {
    ctrl_c_ends_the_trace("bpf");
}

#[test]
fn stale_instances_of_dead_processes_are_cleaned_up() {
    // PID_MAX_LIMIT is 4194304, so no process can own this one.
    let stale = Path::new(TRACEFS_INSTANCES).join("augur-trace-4194304");
    let _ = fs::create_dir(&stale);
    assert!(stale.exists());
    let (_, _) = trace_reader("after-stale", &[], &[("AUGUR_FORCE_MODE", "access")]);
    assert!(!stale.exists());
}

#[test]
fn cli_errors_have_their_exit_codes() {
    let out = augur(&["trace"], &[]);
    assert_eq!(out.status.code(), Some(2), "no command");
    let out = augur(&["trace", "--"], &[]);
    assert_eq!(out.status.code(), Some(2), "no command after --");
    let out = augur(&["trace", "--window", "0", "--", "true"], &[]);
    assert_eq!(out.status.code(), Some(2), "bad window");
    let out = augur(&["trace", "-o", "/nonexistent-dir/x.json", "--", "/nonexistent/cmd"], &[]);
    assert_eq!(out.status.code(), Some(10), "{}", String::from_utf8_lossy(&out.stderr));
    let out = augur(&["trace", "--mode", "bogus", "--", "true"], &[]);
    assert_eq!(out.status.code(), Some(2));

    // A copy nobody can execute, wherever the checkout lives (its parents may be private).
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("augur-nonroot-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
    let copy = dir.join("augur");
    fs::copy(AUGUR, &copy).unwrap();
    fs::set_permissions(&copy, fs::Permissions::from_mode(0o755)).unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&copy)
        .args(["trace", "--", "true"])
        .output()
        .expect("setpriv (util-linux) is needed");
    assert_eq!(out.status.code(), Some(7), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stderr.contains("needs root"));
    fs::remove_dir_all(&dir).unwrap();
}

/// This thread's id (the pid filter and `event-fork` work on tasks).
fn own_tid() -> u32 {
    let link = fs::read_link("/proc/thread-self").unwrap();
    link.file_name().unwrap().to_str().unwrap().parse().unwrap()
}

/// The API the daemon builds on: a watch of followed processes records nothing of a process
/// nobody follows; once a task is followed, it sees its child's exec, page events (with its
/// pid) and exit, and the open watcher names the inode incrementally; unfollowed again, nothing.
#[test]
fn a_followed_watch_reports_pages_and_lifecycle_of_followed_processes_only() {
    use augur_core::model::profile::InodeKey;
    use augur_core::model::range::RangeSet;
    use augur_os::sense::event::EventKind;
    use augur_os::sense::fanotify::{OpenScope, OpenWatcher};
    use augur_os::sense::resolve::{PathResolver, Resolution};
    use augur_os::sense::tracefs::InstanceOptions;
    use augur_os::sense::watch::{ModeChoice, PageWatch, WatchScope};
    use std::os::unix::fs::MetadataExt;

    let fx = fixture();
    let meta = fs::metadata(&fx.data).unwrap();
    let data_key = InodeKey { dev: meta.dev(), ino: meta.ino() };
    let choice = ModeChoice { requested: None, degrade_to_file_only: true };
    let mut watch = PageWatch::open("test", &WatchScope::Followed, choice, &InstanceOptions::default()).unwrap();
    assert_eq!(watch.mode(), TraceMode::Access);
    let instance_dir = watch.instance().unwrap().dir().to_path_buf();
    let mut opens = OpenWatcher::new(false, OpenScope::Every).unwrap();
    watch.start().unwrap();

    // Nobody followed: the kernel records none of the reader's events.
    let unseen = |watch: &mut PageWatch| {
        let mut child = Command::new(&fx.reader).arg(&fx.data).stdout(Stdio::null()).spawn().unwrap();
        let pid = child.id();
        assert!(child.wait().unwrap().success());
        std::thread::sleep(Duration::from_millis(200));
        let mut seen = 0;
        watch
            .read(100_000, |e| match e.kind {
                EventKind::Page(pe) if pe.inode == data_key => seen += 1,
                EventKind::Exec { pid: p, .. } | EventKind::Exit { pid: p, .. } if p == pid => seen += 1,
                _ => {}
            })
            .unwrap();
        assert_eq!(seen, 0, "events of a process nobody follows were recorded");
    };
    unseen(&mut watch);

    watch.follow(&[own_tid()]);
    assert!(watch.settle(Duration::from_secs(10)));
    let mut child = Command::new(&fx.reader).arg(&fx.data).stdout(Stdio::null()).spawn().unwrap();
    let pid = child.id();
    assert!(child.wait().unwrap().success());

    let (mut exec, mut exit, mut pages, mut foreign_tgid) = (false, false, RangeSet::new(), 0);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(exec && exit && pages.page_count() == DATA_PAGES) {
        assert!(Instant::now() < deadline, "exec {exec} exit {exit} pages {}", pages.page_count());
        {
            let fd = watch.fd().unwrap().unwrap();
            let mut fds = [rustix::event::PollFd::new(&fd, rustix::event::PollFlags::IN)];
            let timeout = rustix::time::Timespec { tv_sec: 1, tv_nsec: 0 };
            let _ = rustix::event::poll(&mut fds, Some(&timeout));
        }
        watch
            .read(100_000, |e| match e.kind {
                EventKind::Exec { filename, pid: p, .. } if p == pid => exec = Path::new(&filename) == fx.reader,
                EventKind::Exit { pid: p, .. } if p == pid => exit = true,
                EventKind::Page(pe) if pe.inode == data_key => {
                    pages.insert(pe.pages);
                    // The reader is single-threaded, so its thread id is its pid. (The tgid
                    // column comes from the kernel's saved-tgid table, which can be stale for a
                    // recycled pid; the daemon attributes by thread id for that reason.)
                    if e.pid != pid {
                        foreign_tgid += 1;
                    }
                }
                _ => {}
            })
            .unwrap();
    }
    assert_eq!(foreign_tgid, 0, "every page event of the data file carries the reader's pid");

    watch.unfollow(&[own_tid()]);
    assert!(watch.settle(Duration::from_secs(10)));
    unseen(&mut watch);

    let mut resolver = PathResolver::new();
    opens.read_available(|f| resolver.learn(f.key, f.path)).unwrap();
    let resolved = resolver.resolve(data_key, augur_os::sense::procfs::identity_of);
    assert!(matches!(resolved, Resolution::Resolved { ref path, .. } if *path == fx.data), "{resolved:?}");

    watch.close().unwrap();
    assert!(!instance_dir.exists());
}

/// On an overlay the page cache (and so the tracepoints) holds the layer's inode while stat of
/// the path reports the overlay's device: the profile must still name the overlay path.
#[test]
fn files_read_through_an_overlay_are_resolved() {
    let fx = fixture();
    let base = fx.dir.join("ovl");
    let _ = Command::new("umount").arg(base.join("merged")).output();
    let _ = fs::remove_dir_all(&base);
    for d in ["lower", "upper", "work", "merged"] {
        fs::create_dir_all(base.join(d)).unwrap();
    }
    fs::copy(&fx.data, base.join("lower/data.bin")).unwrap();
    let opts = format!(
        "lowerdir={},upperdir={},workdir={}",
        base.join("lower").display(),
        base.join("upper").display(),
        base.join("work").display()
    );
    let st = Command::new("mount").args(["-t", "overlay", "overlay", "-o", &opts]).arg(base.join("merged")).status().unwrap();
    assert!(st.success(), "mounting an overlay");
    let merged_data = base.join("merged/data.bin");
    let out_path = fx.dir.join("overlay.profile.json");
    let out = augur(
        &["trace", "-o", out_path.to_str().unwrap(), "--", fx.reader.to_str().unwrap(), merged_data.to_str().unwrap()],
        &[],
    );
    let umount = Command::new("umount").arg(base.join("merged")).status().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(umount.success());
    let p = profile_file::load(&out_path).unwrap();
    assert_eq!(pages_of(&p, &merged_data), DATA_PAGES, "{:?}", p.unresolved);
    fs::remove_dir_all(&base).unwrap();
}

/// A kernel without tracefs, simulated in a private mount namespace where /sys/kernel is an empty
/// tmpfs: exit code 8 with one line, unless file-only mode is asked for.
#[test]
fn without_tracefs_trace_fails_with_exit_8_unless_file_only() {
    let fx = fixture();
    let out_path = fx.dir.join("no-tracefs.profile.json");
    let script = format!(
        "mount -t tmpfs none /sys/kernel || exit 99; {augur} trace -o {out} -- true; echo \"rc=$?\"; {augur} trace --mode file-only -o {out} -- {reader} {data} >/dev/null; echo \"rc=$?\"",
        augur = AUGUR,
        out = out_path.display(),
        reader = fx.reader.display(),
        data = fx.data.display()
    );
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .output()
        .expect("unshare (util-linux) is needed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stdout.lines().collect::<Vec<_>>(), vec!["rc=8", "rc=0"], "{stderr}");
    let first = stderr.lines().next().unwrap();
    assert!(first.starts_with("augur: kernel lacks tracefs") && first.contains("--mode file-only"), "{first}");
    let p = profile_file::load(&out_path).unwrap();
    assert_eq!((p.mode, pages_of(&p, &fx.data)), (TraceMode::FileOnly, DATA_PAGES));
}

const PROBE_C: &str = r#"
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc < 3) return 2;
    struct stat st;
    if (stat(argv[2], &st) == 0) return 4;
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) { perror(argv[1]); return 1; }
    posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
    static char buf[4096];
    const off_t pages[] = {3, 4, 40, 3};
    for (int i = 0; i < 4; i++)
        if (pread(fd, buf, sizeof buf, pages[i] * 4096) != sizeof buf) { perror("pread"); return 1; }
    return 0;
}
"#;

/// bpf mode, with no strace anywhere on PATH: a child reading pages 3, 4, 40 (and 3 again) of a
/// cold 64-page file on ext4 (/var/tmp) after a failed stat gets exactly those pages, the failed
/// lookup, and ld.so's first lookup (its first path syscall after exec), all from the kernel.
#[test]
fn bpf_mode_records_exact_pages_and_failed_lookups_without_strace() {
    use augur_core::model::profile::LookupKind;
    let dir = PathBuf::from(format!("/var/tmp/augur-trace-bpf-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    let src = dir.join("probe.c");
    fs::write(&src, PROBE_C).unwrap();
    let probe = dir.join("augur-test-probe");
    let out = Command::new("cc").arg("-O2").arg("-o").arg(&probe).arg(&src).output().expect("a C compiler (cc) is needed");
    assert!(out.status.success(), "cc failed: {}", String::from_utf8_lossy(&out.stderr));
    let data = dir.join("pages.bin");
    let mut f = fs::File::create(&data).unwrap();
    for i in 0..64u8 {
        f.write_all(&[i; 4096]).unwrap();
    }
    f.sync_all().unwrap();
    drop(f);
    evict(&data);
    let missing = dir.join("does-not-exist");
    let out_path = dir.join("probe.profile.json");

    for forced in [None, Some("bpf")] {
        evict(&data);
        let mut cmd = Command::new(AUGUR);
        cmd.args(["trace", "-o", out_path.to_str().unwrap(), "--"])
            .arg(&probe)
            .arg(&data)
            .arg(&missing)
            .env_remove("AUGUR_FORCE_MODE")
            .env("PATH", "/nonexistent");
        if let Some(m) = forced {
            cmd.args(["--mode", m]);
            cmd.env("AUGUR_FORCE_MODE", m);
        }
        let out = cmd.output().unwrap();
        let summary = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{summary}");
        assert!(summary.contains(" in bpf mode") && summary.contains("lost events: 0"), "{summary}");
        assert!(summary.contains("path lookups recorded with bpf"), "{summary}");
        let p = profile_file::load(&out_path).unwrap();
        assert_eq!(p.mode, TraceMode::Access);
        let file = p.files.iter().find(|f| f.path == data).expect("the data file is in the profile");
        let pages: Vec<u64> = file.ranges.iter().flat_map(|r| r.range.start..r.range.end()).collect();
        assert_eq!(pages, vec![3, 4, 40], "exactly the pages read, in first-use order");
        let kinds: Vec<(&Path, LookupKind)> = p.lookups.iter().map(|l| (l.path.as_path(), l.kind)).collect();
        assert_eq!(kinds.first(), Some(&(probe.as_path(), LookupKind::Stat)), "the exec first: {kinds:?}");
        assert_eq!(
            kinds.get(1),
            Some(&(Path::new("/etc/ld.so.preload"), LookupKind::Missing)),
            "then the first path syscall after exec (ld.so's): {kinds:?}"
        );
        assert!(kinds.contains(&(missing.as_path(), LookupKind::Missing)), "{kinds:?}");
        assert!(kinds.contains(&(data.as_path(), LookupKind::Stat)), "{kinds:?}");
    }
    let _ = fs::remove_dir_all(&dir);
}
