//! The eBPF observer's integration tests: load the real programs (root, kernel with BTF and the 6.11+ filemap access
//! tracepoints), run children and check what the kernel reported. They skip (pass with a note)
//! when not root, so that an unprivileged `cargo test` still runs the unit tests.
//!
//! The child is this test binary re-executed with `AUGUR_BPF_CHILD` set (test `child_helper`),
//! so its syscalls are known exactly.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use augur_core::model::profile::InodeKey as Inode;
use augur_os::sense::bpf::record::chunk_ranges;
use augur_os::sense::bpf::{BpfObserver, FollowPolicy, LaunchId, LookupSyscall, ObservedEvent, ObserverOptions};
use augur_os::sense::event::PageEventKind as PageSource;

/// Page indexes of a chunk bitmap.
fn chunk_pages(chunk: u64, bits: u64) -> impl Iterator<Item = u64> {
    chunk_ranges(chunk, bits).flat_map(|r| r.start..r.end())
}

/// The pages reported per file, exactly (the kernel's dedup may repeat after LRU evictions).
#[derive(Default)]
struct PageSet(BTreeSet<(Inode, u64)>);

impl PageSet {
    fn insert(&mut self, inode: Inode, chunk: u64, bits: u64) {
        self.0.extend(chunk_pages(chunk, bits).map(|p| (inode, p)));
    }
    fn pages(&self, inode: Inode) -> Vec<u64> {
        self.0.iter().filter(|(i, _)| *i == inode).map(|(_, p)| *p).collect()
    }
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
}

const CHILD_ENV: &str = "AUGUR_BPF_CHILD";
const PAGE: u64 = 4096;
/// Pages the child reads, in this order (page 3 twice: the second read must not be reported).
const READ_PAGES: [u64; 4] = [3, 4, 40, 3];

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A 64-page file on /var/tmp (ext4 here, not tmpfs: tmpfs has no filemap events), written,
/// synced and dropped from the page cache so the child's reads are cold.
fn cold_file(dir: &Path, name: &str) -> PathBuf {
    sized_file(dir, name, 64, 0)
}

/// A file of `pages` whole pages and `tail` more bytes, written and dropped from the cache.
fn sized_file(dir: &Path, name: &str, pages: usize, tail: usize) -> PathBuf {
    let path = dir.join(name);
    let mut f = File::create(&path).unwrap();
    let block: Vec<u8> = (0..PAGE).map(|i| (i % 251) as u8).collect();
    for _ in 0..pages {
        f.write_all(&block).unwrap();
    }
    f.write_all(&block[..tail]).unwrap();
    f.sync_all().unwrap();
    // SAFETY: the descriptor is open for the duration of the call.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(rc, 0);
    path
}

fn test_dir(tag: &str) -> PathBuf {
    let d = PathBuf::from(format!("/var/tmp/augur-os-bpf-test-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn inode_of(p: &Path) -> Inode {
    let m = std::fs::metadata(p).unwrap();
    Inode { dev: m.dev(), ino: m.ino() }
}

fn open_observer() -> BpfObserver {
    BpfObserver::open(ObserverOptions { follow: FollowPolicy::ChildrenOf(std::process::id()), ..ObserverOptions::default() })
        .expect("loading the BPF programs")
}

/// Polls until `done` says so (or 20 s pass), keeping every record.
fn collect(obs: &mut BpfObserver, mut done: impl FnMut(&[ObservedEvent]) -> bool) -> Vec<ObservedEvent> {
    let mut all = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        obs.wait(Duration::from_millis(50));
        while obs.poll(|e| all.push(e)).unwrap() > 0 {}
        if done(&all) {
            return all;
        }
    }
    panic!("timed out; got {} records", all.len());
}

/// The launch the exec of process `pid` started.
fn launch_of(events: &[ObservedEvent], pid: u32) -> Option<LaunchId> {
    events.iter().find_map(|e| match e {
        ObservedEvent::Exec { task, new_launch: true, .. } if task.tgid == pid => Some(task.launch),
        _ => None,
    })
}

fn ended(events: &[ObservedEvent], launch: LaunchId) -> bool {
    events.iter().any(|e| matches!(e, ObservedEvent::LaunchEnd { launch: l, .. } if *l == launch))
}

/// The pages of `inode` the records say were inserted into the page cache, in order.
fn inserted_pages(events: &[ObservedEvent], inode: Inode) -> Vec<u64> {
    let mut inserted = PageSet::default();
    for e in events {
        if let ObservedEvent::Pages { inode: i, source: PageSource::Insertion, chunk, bits, .. } = e
            && *i == inode
        {
            inserted.insert(*i, *chunk, *bits);
        }
    }
    inserted.pages(inode)
}

/// Not a test of its own: the child process of `reports_exact_pages_and_failed_lookup`.
#[test]
fn child_helper() {
    let Ok(path) = std::env::var(CHILD_ENV) else { return };
    let missing = format!("{path}.does-not-exist");
    assert!(std::fs::metadata(&missing).is_err());
    let f = File::open(&path).unwrap();
    // SAFETY: the descriptor is open for the duration of the call.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    let mut buf = vec![0u8; PAGE as usize];
    for p in READ_PAGES {
        f.read_exact_at(&mut buf, p * PAGE).unwrap();
    }
}

#[test]
fn reports_exact_pages_and_failed_lookup() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let dir = test_dir("pages");
    let data = cold_file(&dir, "data");
    let file = inode_of(&data);
    let mut obs = open_observer();
    assert!(obs.attached().access, "the 6.11+ access tracepoints did not attach");

    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(&exe)
        .args(["--exact", "child_helper", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, &data)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let events = collect(&mut obs, |ev| launch_of(ev, pid).is_some_and(|l| ended(ev, l)));
    assert!(child.wait().unwrap().success());
    let launch = launch_of(&events, pid).unwrap();
    let mine: Vec<&ObservedEvent> = events.iter().filter(|e| e.launch() == launch).collect();

    // The exec record names the test binary and starts the launch, with what the exec set: the
    // program the kernel ran, the arguments as the child sees them, and the credentials.
    let exec = mine.iter().find(|e| matches!(e, ObservedEvent::Exec { .. })).unwrap();
    let ObservedEvent::Exec { exe: exe_inode, parent_tgid, interp, args, args_cut, creds, .. } = exec else { unreachable!() };
    assert_eq!(*exe_inode, inode_of(&exe));
    assert_eq!(*parent_tgid, std::process::id());
    assert_eq!(interp, &exe);
    let mut argv = Vec::new();
    for word in [exe.as_os_str().as_bytes(), &b"--exact"[..], b"child_helper", b"--nocapture", b"--test-threads=1"] {
        argv.extend_from_slice(word);
        argv.push(0);
    }
    assert_eq!((args, *args_cut), (&argv, false), "{}", String::from_utf8_lossy(args));
    // SAFETY: getuid/getgid/getgroups read this process's credentials into a buffer of the size given.
    let (uid, gid, groups) = unsafe {
        let mut g = vec![0 as libc::gid_t; 256];
        let n = libc::getgroups(g.len() as i32, g.as_mut_ptr());
        g.truncate(n.max(0) as usize);
        (libc::getuid(), libc::getgid(), g)
    };
    assert_eq!((creds.uid, creds.euid, creds.gid), (uid, uid, gid));
    if groups.len() <= 32 {
        assert_eq!(creds.groups.as_deref(), Some(groups.as_slice()));
    }

    // Exactly the pages read, each reported once as accessed and once as inserted (cold).
    let (mut accessed, mut inserted) = (PageSet::default(), PageSet::default());
    let mut access_records = 0;
    for e in &mine {
        if let ObservedEvent::Pages { inode, source, chunk, bits, .. } = e {
            if *inode != file {
                continue;
            }
            if source.is_access() {
                assert_eq!(*source, PageSource::GetPages);
                access_records += chunk_pages(*chunk, *bits).count();
                accessed.insert(*inode, *chunk, *bits);
            } else {
                inserted.insert(*inode, *chunk, *bits);
            }
        }
    }
    assert_eq!(accessed.pages(file), vec![3, 4, 40]);
    assert_eq!(access_records, 3, "page 3 was read twice but must be reported once");
    assert_eq!(inserted.pages(file), vec![3, 4, 40], "the file was cold: each read page came from disk");

    // Failed lookups: the child's own, and ld.so's first one (its first path syscall after exec).
    let failed: BTreeSet<(PathBuf, i64)> = mine
        .iter()
        .filter_map(|e| match e {
            ObservedEvent::Lookup { path, ret, .. } if *ret < 0 => Some((path.clone(), *ret)),
            _ => None,
        })
        .collect();
    let missing = PathBuf::from(format!("{}.does-not-exist", data.display()));
    assert!(failed.contains(&(missing, -(libc::ENOENT as i64))), "failed lookups: {failed:?}");
    if !Path::new("/etc/ld.so.preload").exists() {
        let first = mine.iter().find_map(|e| match e {
            ObservedEvent::Lookup { path, ret, syscall, .. } if *syscall != LookupSyscall::Execve => Some((path.clone(), *ret)),
            _ => None,
        });
        assert_eq!(first, Some((PathBuf::from("/etc/ld.so.preload"), -(libc::ENOENT as i64))));
    }
    let opened = mine.iter().find_map(|e| match e {
        ObservedEvent::Lookup { path, ret, opened, .. } if *path == data && *ret >= 0 => Some(*opened),
        _ => None,
    });
    assert_eq!(opened, Some(Some(file)), "the successful open of the data file is reported with the file it returned");
    let failed_opens_name_nothing =
        mine.iter().all(|e| !matches!(e, ObservedEvent::Lookup { ret, opened: Some(_), .. } if *ret < 0));
    assert!(failed_opens_name_nothing);

    let lost = obs.stats().unwrap();
    assert_eq!(lost.lost(), 0, "{lost:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn forks_are_followed_and_stop_following_stops() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let dir = test_dir("stop");
    let (a, b) = (cold_file(&dir, "a"), cold_file(&dir, "b"));
    let (ia, ib) = (inode_of(&a), inode_of(&b));
    let mut obs = open_observer();
    let script = format!("cat {} >/dev/null; read x; cat {} >/dev/null", a.display(), b.display());
    let mut child = Command::new("/bin/sh").args(["-c", &script]).stdin(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    let saw = |ev: &[ObservedEvent], f: Inode| ev.iter().any(|e| matches!(e, ObservedEvent::Pages { inode, .. } if *inode == f));
    // The forked cat (a grandchild of this process) is in the shell's launch.
    let events = collect(&mut obs, |ev| {
        launch_of(ev, pid).is_some() && saw(ev, ia) && ev.iter().any(|e| matches!(e, ObservedEvent::Exit { .. }))
    });
    let launch = launch_of(&events, pid).unwrap();
    let cat_exec = events.iter().any(|e| matches!(e, ObservedEvent::Exec { task, new_launch: false, filename, .. } if task.launch == launch && filename.ends_with("cat")));
    assert!(cat_exec, "the shell's child exec'd cat inside the launch");
    assert!(events.iter().any(|e| matches!(e, ObservedEvent::Fork { task, .. } if task.launch == launch && task.tgid == pid)));

    assert!(obs.stop_following(launch).unwrap());
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(child.wait().unwrap().success());
    std::thread::sleep(Duration::from_millis(200));
    let mut after = Vec::new();
    while obs.poll(|e| after.push(e)).unwrap() > 0 {}
    assert!(!saw(&after, ib), "b was read after the launch was stopped: {after:?}");
    assert!(!after.iter().any(|e| e.launch() == launch && matches!(e, ObservedEvent::Exec { .. })));
    assert!(!obs.stop_following(launch).unwrap(), "already stopped");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_follow_gate_is_open_only_while_a_launch_is_followed_and_counts_each_end_once() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let dir = test_dir("gate");
    let a = cold_file(&dir, "a");
    let mut obs = open_observer();
    assert_eq!(obs.gate_open(), Some(false), "no launch yet");
    // A launch followed, then watched: the gate closes at the watch.
    let script = format!("read x; cat {} >/dev/null", a.display());
    let mut child = Command::new("/bin/sh").args(["-c", &script]).stdin(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    let events = collect(&mut obs, |ev| launch_of(ev, pid).is_some());
    let watched = launch_of(&events, pid).unwrap();
    assert_eq!(obs.gate_open(), Some(true), "a launch is followed");
    assert!(obs.watch(watched, augur_os::sense::monotonic_ns() + 10_000_000_000, 0).unwrap());
    assert_eq!(obs.gate_open(), Some(false), "a watched launch needs no read program");
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(child.wait().unwrap().success());
    // A second launch, followed to its end: the watched one's end record came in meanwhile,
    // and had it been counted again the counts would differ now.
    let mut other = Command::new("/bin/sh").args(["-c", "exit 0"]).spawn().unwrap();
    let other_pid = other.id();
    assert!(other.wait().unwrap().success());
    collect(&mut obs, |ev| launch_of(ev, other_pid).is_some_and(|l| ended(ev, l)));
    // Reading the watched launch's count forgets it, once more a way its end is heard of.
    obs.take_watched(watched).unwrap();
    assert_eq!(obs.gate_open(), Some(false), "every launch closed once");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `sh -c SCRIPT` (which starts with `read x`, so that it waits until its launch is known)
/// and, when `limit` is given, watches its launch with that limit: the pages it counted as read
/// from disk.
fn watched_count(obs: &mut BpfObserver, script: &str, limit: Option<u64>) -> Option<u64> {
    let mut child = Command::new("/bin/sh").args(["-c", script]).stdin(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    let events = collect(obs, |ev| launch_of(ev, pid).is_some());
    let launch = launch_of(&events, pid).unwrap();
    if let Some(limit) = limit {
        assert!(obs.watch(launch, augur_os::sense::monotonic_ns() + 10_000_000_000, limit).unwrap());
    }
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(child.wait().unwrap().success());
    limit.map(|_| obs.take_watched(launch).unwrap().expect("still known"))
}

#[test]
fn a_watched_launch_counts_its_disk_reads_until_its_limit_and_then_no_more() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let dir = test_dir("watch-limit");
    let mut obs = open_observer();
    // Two readers of 8 MiB each, cold: one watched without a limit, one with a limit of 16 pages.
    let mut counts = Vec::new();
    for (name, limit) in [("unlimited", 0u64), ("limited", 16)] {
        let file = sized_file(&dir, name, 2048, 0);
        // `true` last, so that the shell forks `cat` rather than becoming it.
        let script = format!("read x; cat {} >/dev/null; true", file.display());
        counts.push(watched_count(&mut obs, &script, Some(limit)).unwrap());
    }
    // `cat`, forked by the watched shell, read the whole file from disk: all of it is counted.
    assert!(counts[0] >= 2048, "unlimited: {counts:?}");
    // Counting stopped at the first insertion at or past the limit (a folio holds at most 2 MiB).
    assert!(counts[1] >= 16 && counts[1] < 16 + 512, "limited: {counts:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_watched_launch_does_not_count_the_pages_it_writes_as_read_from_disk() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let dir = test_dir("watch-written");
    let mut obs = open_observer();
    let (new, holed) = (dir.join("new"), dir.join("holed"));
    // 8 MiB appended to a new file, then a file made 8 MiB long by its last page and written
    // into below its end (a linker writes its output at the sections' offsets): 4,096 pages
    // inserted by writes, none read from disk.
    let script = format!(
        "read x; head -c 8388608 /dev/zero > {new}; dd if=/dev/zero of={holed} bs=4096 seek=2047 count=1 status=none; \
         dd if=/dev/zero of={holed} bs=4096 count=2047 conv=notrunc status=none; true",
        new = new.display(),
        holed = holed.display()
    );
    // Once not watched, so that the programs it runs are in the page cache.
    watched_count(&mut obs, &script, None);
    let _ = std::fs::remove_file(&new);
    let _ = std::fs::remove_file(&holed);
    let count = watched_count(&mut obs, &script, Some(0)).unwrap();
    assert_eq!(std::fs::metadata(&holed).unwrap().len(), 8 << 20);
    assert!(count < 64, "{count} pages counted as read from disk");

    // A copy reads its source from disk (`cp` uses copy_file_range): those pages count.
    let source = sized_file(&dir, "source", 2048, 0);
    let script = format!("read x; cp {} {}/copy; true", source.display(), dir.display());
    let count = watched_count(&mut obs, &script, Some(0)).unwrap();
    assert!(count >= 2048, "a copy's source: {count} pages counted");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn not_followed_executables_start_no_launch() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let mut obs = open_observer();
    let true_bin = std::fs::canonicalize("/bin/true").unwrap();
    let t = inode_of(&true_bin);
    obs.set_not_followed(t.dev, t.ino, true).unwrap();
    let excluded = Command::new(&true_bin).spawn().unwrap();
    let excluded_pid = excluded.id();
    let mut excluded = excluded;
    assert!(excluded.wait().unwrap().success());
    // A followed child afterwards is the barrier: once its launch ended, the excluded one is
    // in the ring buffer if it was ever there.
    let mut other = Command::new("/bin/sh").args(["-c", "exit 0"]).spawn().unwrap();
    let other_pid = other.id();
    assert!(other.wait().unwrap().success());
    let events = collect(&mut obs, |ev| launch_of(ev, other_pid).is_some_and(|l| ended(ev, l)));
    assert_eq!(launch_of(&events, excluded_pid), None, "an excluded exec started a launch");
    assert!(!events.iter().any(|e| matches!(e, ObservedEvent::Exec { task, .. } if task.tgid == excluded_pid)));
    obs.set_not_followed(t.dev, t.ino, false).unwrap();
}

#[test]
fn reading_a_file_twice_reports_its_pages_once() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let dir = test_dir("twice");
    let a = cold_file(&dir, "a");
    let ia = inode_of(&a);
    let mut obs = open_observer();
    let script = format!("cat {0} >/dev/null; cat {0} >/dev/null; cat {0} >/dev/null", a.display());
    let mut child = Command::new("/bin/sh").args(["-c", &script]).spawn().unwrap();
    let pid = child.id();
    assert!(child.wait().unwrap().success());
    let events = collect(&mut obs, |ev| launch_of(ev, pid).is_some_and(|l| ended(ev, l)));
    let launch = launch_of(&events, pid).unwrap();
    let mut access_bits = 0;
    let mut set = PageSet::default();
    for e in &events {
        if let ObservedEvent::Pages { task, inode, source, chunk, bits } = e {
            if task.launch == launch && *inode == ia && source.is_access() {
                access_bits += bits.count_ones();
                set.insert(*inode, *chunk, *bits);
            }
        }
    }
    // cat reads 128 KiB at a time: get_pages covers the whole request (32 pages), past EOF too.
    assert!(set.pages(ia).starts_with(&(0..64).collect::<Vec<_>>()), "{:?}", set.pages(ia));
    assert_eq!(u64::from(access_bits), set.len(), "a page was reported twice");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_launch_followed_for_its_first_reads_counts_what_it_reads_from_disk_without_recording_it() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let dir = test_dir("first-reads");
    let (a, b) = (cold_file(&dir, "a"), cold_file(&dir, "b"));
    let (ia, ib) = (inode_of(&a), inode_of(&b));
    let mut obs = open_observer();
    let script = format!("read x; cat {} >/dev/null; read y; cat {} >/dev/null", a.display(), b.display());
    let mut child = Command::new("/bin/sh").args(["-c", &script]).stdin(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    let mut events = collect(&mut obs, |ev| launch_of(ev, pid).is_some());
    let launch = launch_of(&events, pid).unwrap();
    let until_ns = augur_os::sense::monotonic_ns() + 20_000_000_000;
    assert!(obs.first_reads_only(launch, true, until_ns).unwrap());
    assert_eq!(obs.first_reads_disk_pages(launch).unwrap(), Some(0));
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    let accessed = |ev: &[ObservedEvent], f: Inode| {
        ev.iter()
            .any(|e| matches!(e, ObservedEvent::Pages { inode, source, .. } if *inode == f && *source != PageSource::Insertion))
    };
    events.extend(collect(&mut obs, |ev| accessed(ev, ia)));
    // While it runs, the map holds what it read from disk so far: all of a, cold.
    let start = Instant::now();
    while obs.first_reads_disk_pages(launch).unwrap().unwrap_or(0) < 64 {
        assert!(start.elapsed() < Duration::from_secs(10), "a's 64 pages were not counted");
        std::thread::sleep(Duration::from_millis(20));
    }
    stdin.write_all(b"go\n").unwrap();
    drop(stdin);
    assert!(child.wait().unwrap().success());
    events.extend(collect(&mut obs, |ev| ended(ev, launch)));
    let ours: Vec<&ObservedEvent> = events.iter().filter(|e| e.launch() == launch).collect();
    assert!(
        !ours.iter().any(|e| matches!(e, ObservedEvent::Pages { source: PageSource::Insertion, .. })),
        "an insertion was recorded: {ours:?}"
    );
    assert!(accessed(&events, ib), "b's first read was not recorded");
    for f in [ia, ib] {
        let n = ours.iter().filter(|e| matches!(e, ObservedEvent::Pages { inode, .. } if *inode == f)).count();
        assert_eq!(n, 1, "one record of the first read of each file, not {n}");
    }
    let end = ours.iter().find_map(|e| match e {
        ObservedEvent::LaunchEnd { root_tgid, disk_pages, .. } => Some((*root_tgid, *disk_pages)),
        _ => None,
    });
    let (root, disk_pages) = end.expect("the launch's end");
    assert_eq!(root, pid);
    assert!(disk_pages >= 128, "a and b were read cold: {disk_pages} pages counted");
    assert_eq!(obs.first_reads_disk_pages(launch).unwrap(), None, "ended: the kernel forgot it");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_first_read_one_page_short_of_the_end_stands_for_the_whole_file() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    // stdio's fread of a whole file: the whole pages in one read, the partial last page in a
    // second, which a launch followed for its first reads does not record.
    let dir = test_dir("first-read-tail");
    let whole = sized_file(&dir, "whole", 3, 2048); // pages 0..=3; its first read: 0..=2
    let part = sized_file(&dir, "part", 5, 2048); // pages 0..=5; its first read: 0..=2 as well
    let (iw, ip) = (inode_of(&whole), inode_of(&part));
    let mut obs = open_observer();
    let script = format!(
        "read x; for f in {} {}; do dd if=$f of=/dev/null bs={} count=1 status=none; done",
        whole.display(),
        part.display(),
        3 * PAGE
    );
    let mut child = Command::new("/bin/sh").args(["-c", &script]).stdin(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    let mut events = collect(&mut obs, |ev| launch_of(ev, pid).is_some());
    let launch = launch_of(&events, pid).unwrap();
    assert!(obs.first_reads_only(launch, true, 0).unwrap());
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    drop(stdin);
    assert!(child.wait().unwrap().success());
    events.extend(collect(&mut obs, |ev| ended(ev, launch)));
    let mut set = PageSet::default();
    for e in &events {
        if let ObservedEvent::Pages { task, inode, source, chunk, bits } = e {
            if task.launch == launch && source.is_access() {
                set.insert(*inode, *chunk, *bits);
            }
        }
    }
    assert_eq!(set.pages(iw), vec![0, 1, 2, 3], "the whole file, its tail page included");
    assert_eq!(set.pages(ip), vec![0, 1, 2], "a read two pages short of the end is what it read");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_cold_sequential_read_reports_every_page_it_inserted_large_folios_included() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let dir = test_dir("sequential");
    // 32 MiB: readahead's windows grow to large folios (orders up to 8 or 9 on 6.18's ext4).
    let file = dir.join("seq");
    let pages = 8192u64;
    {
        let mut f = File::create(&file).unwrap();
        let block: Vec<u8> = (0..PAGE * 64).map(|i| (i % 253) as u8).collect();
        for _ in 0..pages / 64 {
            f.write_all(&block).unwrap();
        }
        f.sync_all().unwrap();
        // SAFETY: the descriptor is open for the duration of the call.
        assert_eq!(unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) }, 0);
    }
    let inode = inode_of(&file);
    let mut obs = open_observer();
    let mut child = Command::new("/bin/cat").arg(&file).stdout(Stdio::null()).spawn().unwrap();
    let pid = child.id();
    assert!(child.wait().unwrap().success());
    let events = collect(&mut obs, |ev| launch_of(ev, pid).is_some_and(|l| ended(ev, l)));
    let inserted = inserted_pages(&events, inode);
    // Readahead inserts this file in large folios where the file system has them (ext4 on 6.16+):
    // each folio's pages are reported, no more.
    let got = inserted;
    assert_eq!(got.len() as u64, pages, "every page read cold, once: {} of {pages}", got.len());
    assert_eq!(got, (0..pages).collect::<Vec<u64>>());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The classic insertion tracepoint (what kernels before 5.16 get) reports what the BTF-typed
/// one does.
#[test]
fn the_classic_insertion_program_reports_the_same_pages() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let dir = test_dir("classic");
    let file = cold_file(&dir, "c");
    let inode = inode_of(&file);
    let options = ObserverOptions {
        follow: FollowPolicy::ChildrenOf(std::process::id()),
        classic_insertion: true,
        ..ObserverOptions::default()
    };
    let mut obs = BpfObserver::open(options).expect("loading the BPF programs");
    assert!(!obs.attached().insertion_btf);
    assert!(open_observer().attached().insertion_btf, "this kernel loads the BTF-typed one");
    let mut child = Command::new("/bin/cat").arg(&file).stdout(Stdio::null()).spawn().unwrap();
    let pid = child.id();
    assert!(child.wait().unwrap().success());
    let events = collect(&mut obs, |ev| launch_of(ev, pid).is_some_and(|l| ended(ev, l)));
    let inserted = inserted_pages(&events, inode);
    assert_eq!(inserted, (0..64).collect::<Vec<u64>>());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Lookups are deduplicated per launch by a hash of the path: a path looked up again is reported
/// once, and paths that share all but their last bytes (prefixes of one another, paths one word
/// or one byte apart, looked up in either order) are each reported once.
#[test]
fn each_distinct_lookup_is_reported_once() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let dir = test_dir("lookups");
    let names = ["abcdefghijklmnopq", "abcdefgh", "abcdefghi", "abc", "zyxwvutsrqponmlk", "abd"];
    let paths: Vec<PathBuf> = names.iter().map(|n| dir.join(n)).collect();
    let mut obs = open_observer();
    // Each path tested twice, in one order then the other, so that a path's second lookup follows
    // another path than its first did (`[ -e P ]` is one stat of P in sh, failing).
    let script: String =
        paths.iter().chain(paths.iter().rev()).map(|p| format!("[ -e '{}' ]; ", p.display())).collect::<String>() + "true";
    let mut child = Command::new("/bin/sh").args(["-c", &script]).spawn().unwrap();
    let pid = child.id();
    assert!(child.wait().unwrap().success());
    let events = collect(&mut obs, |ev| launch_of(ev, pid).is_some_and(|l| ended(ev, l)));
    let launch = launch_of(&events, pid).unwrap();
    for p in &paths {
        let n = events
            .iter()
            .filter(|e| matches!(e, ObservedEvent::Lookup { task, path, .. } if task.launch == launch && path == p))
            .count();
        assert_eq!(n, 1, "{} reported {n} times", p.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
