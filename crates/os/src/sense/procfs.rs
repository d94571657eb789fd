//! What `/proc` says about processes, memory and files: the files a process maps
//! (`/proc/PID/maps` carries device and inode), the files it holds open (`/proc/PID/fd`), its
//! parent, children and descendants, whether it still runs, the user it runs as, its command line, one of its
//! environment variables, its CPU time, memory and I/O; `/proc/meminfo` fields; and the identity
//! (`stat`) of a path. The one reader of these files for the daemon, `augur trace` and the
//! benchmarks; the text is parsed by `augur_core::proc_text`.
//!
//! Reads only; it never walks a filesystem. Processes vanish at any time, so every reader
//! returns what it could get rather than failing (but for [`meminfo`] and [`sample`], whose
//! callers need the figure).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use augur_core::model::profile::{FileIdentity, InodeKey};
use augur_core::proc_text;

use crate::error::{IoContext, OsError, Result};
use crate::fetch::foreground::parse_io_read_bytes;
use crate::untrusted_path::{self, Symlinks};

use super::event::st_dev_from_parts;

/// A file a process maps or holds open, as `/proc` names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcFile {
    /// Device (in `st_dev` encoding) and inode.
    pub key: InodeKey,
    /// The path `/proc` printed.
    pub path: PathBuf,
}

/// The value of environment variable `name` that process `pid` started with, if readable.
pub fn env_var(pid: u32, name: &str) -> Option<std::ffi::OsString> {
    let raw = fs::read(format!("/proc/{pid}/environ")).ok()?;
    env_var_in(&raw, name)
}

/// `name`'s value in a NUL-separated `NAME=value` block (the first one, as `getenv` finds it).
pub fn env_var_in(environ: &[u8], name: &str) -> Option<std::ffi::OsString> {
    use std::os::unix::ffi::OsStrExt;
    environ.split(|&b| b == 0).find_map(|entry| {
        let value = entry.strip_prefix(name.as_bytes())?.strip_prefix(b"=")?;
        Some(std::ffi::OsStr::from_bytes(value).to_os_string())
    })
}

/// Parses one `/proc/PID/maps` line; `None` for anonymous, special or deleted mappings.
///
/// `7f1c2a000000-7f1c2a022000 r--p 00000000 fe:00 1316915    /usr/lib/x86_64-linux-gnu/libc.so.6`
pub fn parse_maps_line(line: &str) -> Option<ProcFile> {
    let mut rest = line;
    let mut next = || -> Option<&str> {
        let t = rest.trim_start();
        let end = t.find(' ').unwrap_or(t.len());
        let (word, after) = t.split_at(end);
        rest = after;
        Some(word).filter(|w| !w.is_empty())
    };
    let _range = next()?;
    let _perms = next()?;
    let _offset = next()?;
    let dev = next()?;
    let ino: u64 = next()?.parse().ok()?;
    let path = rest.trim_start();
    if ino == 0 || !path.starts_with('/') || path.ends_with(" (deleted)") {
        return None;
    }
    let (major, minor) = dev.split_once(':')?;
    let dev = st_dev_from_parts(u32::from_str_radix(major, 16).ok()?, u32::from_str_radix(minor, 16).ok()?);
    Some(ProcFile { key: InodeKey { dev, ino }, path: PathBuf::from(path) })
}

/// The files `pid` maps, deduplicated, in the order of its maps.
pub fn mapped_files(pid: u32) -> Vec<ProcFile> {
    let Ok(text) = fs::read_to_string(format!("/proc/{pid}/maps")) else { return Vec::new() };
    let mut out: Vec<ProcFile> = Vec::new();
    for f in text.lines().filter_map(parse_maps_line) {
        if !out.iter().any(|o| o.key == f.key) {
            out.push(f);
        }
    }
    out
}

/// The regular files `pid` holds open, with their identity.
pub fn open_files(pid: u32) -> Vec<(ProcFile, FileIdentity)> {
    let dir = PathBuf::from(format!("/proc/{pid}/fd"));
    let Ok(entries) = fs::read_dir(&dir) else { return Vec::new() };
    let mut out = Vec::new();
    let mut mounts = untrusted_path::OpenFileMounts::of(pid);
    for entry in entries.flatten() {
        let link = entry.path();
        let Ok(target) = fs::read_link(&link) else { continue };
        if !target.is_absolute() || target.to_string_lossy().ends_with(" (deleted)") {
            continue;
        }
        // A file on a network or FUSE mount is passed over by its mount id, before anything asks
        // its file system; stat through the magic link then reaches the open file itself,
        // whatever its path now is, without asking the file system to refresh its attributes.
        if !mounts.is_local(&entry.file_name()) {
            continue;
        }
        let Some(identity) = untrusted_path::open_file_identity(&link) else { continue };
        out.push((ProcFile { key: InodeKey { dev: identity.dev, ino: identity.ino }, path: target }, identity));
    }
    out
}

/// The parent pid of `pid`, from `/proc/PID/stat` (the comm field may hold anything, so the
/// fields are read after its closing parenthesis).
pub fn parent_of(pid: u32) -> Option<u32> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    proc_text::stat_ppid(&text)
}

/// True when `pid` descends from (or is) `ancestor`, judged from the live process tree.
pub fn descends_from(pid: u32, ancestor: u32) -> bool {
    let mut cur = pid;
    for _ in 0..64 {
        if cur == ancestor {
            return true;
        }
        match parent_of(cur) {
            Some(p) if p != 0 && p != cur => cur = p,
            _ => return false,
        }
    }
    false
}

/// Every process id currently in `/proc`.
pub fn all_pids() -> Vec<u32> {
    fs::read_dir("/proc").map(|d| d.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect()).unwrap_or_default()
}

/// The live processes whose parent is `pid` (a scan of `/proc`).
pub fn children_of(pid: u32) -> Vec<u32> {
    all_pids().into_iter().filter(|&p| parent_of(p) == Some(pid)).collect()
}

/// The descendants of `pid` (children, grandchildren, ...), from one scan of each process's
/// parent pid.
pub fn descendants(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = all_pids().into_iter().filter_map(|p| Some((p, parent_of(p)?))).collect();
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(parent) = frontier.pop() {
        for &(p, pp) in &parents {
            if pp == parent && !out.contains(&p) {
                out.push(p);
                frontier.push(p);
            }
        }
    }
    out
}

/// The user process `pid` runs as (`/proc/PID/status`), if it still runs.
pub fn user_of(pid: u32) -> Option<augur_core::model::user::ProcessUser> {
    augur_core::model::user::ProcessUser::from_status(&fs::read_to_string(format!("/proc/{pid}/status")).ok()?)
}

/// The command line of process `pid` as its arguments (empty if gone or a kernel thread).
pub fn cmdline(pid: u32) -> Vec<String> {
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| b.split(|c| *c == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned()).collect())
        .unwrap_or_default()
}

/// The tasks of `pid` and of the processes it started so far, threads included: `pid` first,
/// then each `/proc/P/task/T` and, through `/proc/P/task/T/children`, each descendant's, at most
/// `cap` in all. A process that is gone yields `pid` alone.
pub fn task_tree(pid: u32, cap: usize) -> Vec<u32> {
    let mut tasks = vec![pid];
    let mut processes = vec![pid];
    let mut next = 0;
    while next < processes.len() && tasks.len() < cap {
        let process = processes[next];
        next += 1;
        let Ok(dir) = fs::read_dir(format!("/proc/{process}/task")) else { continue };
        for tid in dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()) {
            if !tasks.contains(&tid) && tasks.len() < cap {
                tasks.push(tid);
            }
            let children = fs::read_to_string(format!("/proc/{process}/task/{tid}/children")).unwrap_or_default();
            for child in children.split_whitespace().filter_map(|w| w.parse::<u32>().ok()) {
                if !processes.contains(&child) {
                    processes.push(child);
                }
                if !tasks.contains(&child) && tasks.len() < cap {
                    tasks.push(child);
                }
            }
        }
    }
    tasks
}

/// True while process `pid` runs: `/proc/PID` exists and it is not a zombie. A zombie has
/// exited (its memory maps and open files are gone, it runs no more); only its exit status waits
/// for its parent.
pub fn is_alive(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| !proc_text::stat_has_exited(&stat))
}

/// The working directory of process `pid` now (`None`: it exited, or may not be read).
pub fn cwd_of(pid: u32) -> Option<std::path::PathBuf> {
    fs::read_link(format!("/proc/{pid}/cwd")).ok()
}

/// One field of `/proc/meminfo` (e.g. `MemAvailable`), in bytes.
pub fn meminfo(field: &str) -> Result<u64> {
    let text = fs::read_to_string("/proc/meminfo").context(|| "reading /proc/meminfo".into())?;
    proc_text::kb_field_bytes(&text, field)
        .ok_or_else(|| OsError::KernelFeature { feature: format!("/proc/meminfo field {field}"), detail: "absent".into() })
}

/// Reads the page-cache drop count ([`VmstatReader::page_cache_drops`]) again and again through
/// one open `/proc/vmstat` (the kernel writes the whole file at each read from its start;
/// opening it anew each time cost as much again).
#[derive(Debug, Default)]
pub struct VmstatReader {
    file: Option<fs::File>,
    text: Vec<u8>,
}

impl VmstatReader {
    /// Nothing opened yet (at the first reading).
    pub fn new() -> Self {
        Self::default()
    }

    /// A count that grows whenever the kernel may have dropped pages from the page cache
    /// wholesale: file pages reclaimed (`pgsteal_file`, or `pgsteal_kswapd + pgsteal_direct`
    /// before 5.8) plus the `drop_caches` writes (`drop_pagecache`, `drop_slab`) of
    /// `/proc/vmstat`. While it stays the same, pages found resident are still resident, except
    /// those a program dropped on purpose (`POSIX_FADV_DONTNEED`, truncation), which no counter
    /// shows. `None` without `/proc/vmstat`.
    pub fn page_cache_drops(&mut self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        if self.file.is_none() {
            self.file = fs::File::open("/proc/vmstat").ok();
        }
        let file = self.file.as_ref()?;
        self.text.clear();
        let mut chunk = [0u8; 8192];
        loop {
            match file.read_at(&mut chunk, self.text.len() as u64) {
                Ok(0) => break,
                Ok(n) => self.text.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.file = None;
                    return None;
                }
            }
        }
        page_cache_drops_in(std::str::from_utf8(&self.text).ok()?)
    }
}

/// [`VmstatReader::page_cache_drops`] from the text of `/proc/vmstat`.
pub fn page_cache_drops_in(text: &str) -> Option<u64> {
    use augur_core::plan::cost::EvictionCounters;
    let [file, kswapd, direct, refault_file, refault, drop_pagecache, drop_slab] = proc_text::vmstat_values(
        text,
        [
            EvictionCounters::VMSTAT_NAMES[0],
            EvictionCounters::VMSTAT_NAMES[1],
            EvictionCounters::VMSTAT_NAMES[2],
            EvictionCounters::VMSTAT_NAMES[3],
            EvictionCounters::VMSTAT_NAMES[4],
            "drop_pagecache",
            "drop_slab",
        ],
    );
    let evicted = EvictionCounters::from_values([file, kswapd, direct, refault_file, refault])?.evicted;
    Some(evicted + drop_pagecache.unwrap_or(0) + drop_slab.unwrap_or(0))
}

/// The memory process `pid` could still fill under its memory cgroups without any of them
/// reclaiming: the least, over its cgroup and every cgroup above it that sets a limit, of the
/// limit less the usage (a usage that cannot be read leaves no room). `None`: no limit, or it
/// cannot be read.
pub fn memory_cgroup_room(pid: u32) -> Option<u64> {
    memory_cgroup_headroom(pid).map(|h| h.free)
}

/// What process `pid`'s memory cgroups leave it, free and available
/// ([`CgroupHeadroom`](augur_core::plan::CgroupHeadroom)), the least over its cgroup and every
/// cgroup above it that sets a limit. `None`: no limit, or it cannot be read.
pub fn memory_cgroup_headroom(pid: u32) -> Option<augur_core::plan::CgroupHeadroom> {
    memory_cgroup_headrooms(pid).into_iter().reduce(|a, b| a.least(b))
}

/// The headroom of each of process `pid`'s memory cgroups that sets a limit (its own and every
/// one above it, in cgroup v1's memory hierarchy and the unified one): the limit, the usage and
/// the file pages of its `memory.stat` (v1's hierarchical `total_` counts where present).
fn memory_cgroup_headrooms(pid: u32) -> Vec<augur_core::plan::CgroupHeadroom> {
    let Ok(text) = fs::read_to_string(format!("/proc/{pid}/cgroup")) else { return Vec::new() };
    let (v1, v2) = proc_text::memory_cgroup_paths(&text);
    let mut places: Vec<(PathBuf, &str, &str)> = Vec::new();
    if let Some(p) = v1 {
        places.push((
            Path::new("/sys/fs/cgroup/memory").join(p.trim_start_matches('/')),
            "memory.limit_in_bytes",
            "memory.usage_in_bytes",
        ));
    }
    if let Some(p) = v2 {
        for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
            places.push((Path::new(root).join(p.trim_start_matches('/')), "memory.max", "memory.current"));
        }
    }
    let mut headrooms = Vec::new();
    for (dir, limit_file, usage_file) in places {
        let mut at = Some(dir.as_path());
        while let Some(d) = at {
            if let Some(v) = fs::read_to_string(d.join(limit_file)).ok().as_deref().and_then(proc_text::memory_limit_value) {
                let usage = fs::read_to_string(d.join(usage_file)).ok().as_deref().and_then(proc_text::memory_limit_value);
                let file = fs::read_to_string(d.join("memory.stat")).ok().map_or(0, |stat| proc_text::cgroup_file_bytes(&stat));
                headrooms.push(augur_core::plan::CgroupHeadroom::of(v, usage, file));
            }
            if d.as_os_str().len() <= "/sys/fs/cgroup".len() {
                break;
            }
            at = d.parent();
        }
    }
    headrooms
}

/// Clock ticks per second of `/proc` times. Linux fixes USER_HZ at 100 on every architecture
/// augur supports.
pub const TICKS_PER_SEC: f64 = 100.0;

/// CPU time, memory and I/O of one process at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProcessSample {
    /// user + system CPU time, seconds.
    pub cpu_secs: f64,
    /// Resident set size, bytes.
    pub rss_bytes: u64,
    /// Voluntary + involuntary context switches of all its threads.
    pub context_switches: u64,
    /// Bytes this process caused to be read from storage (`read_bytes` of /proc/PID/io).
    pub read_bytes: u64,
}

/// Samples process `pid` (`/proc/PID/{stat,status,io}`, context switches summed over its
/// threads). Fails if it is gone.
pub fn sample(pid: u32) -> Result<ProcessSample> {
    let base = format!("/proc/{pid}");
    let stat = fs::read_to_string(format!("{base}/stat")).context(|| format!("reading {base}/stat"))?;
    let (utime, stime) = proc_text::stat_cpu_ticks(&stat)
        .ok_or_else(|| OsError::KernelFeature { feature: "/proc/PID/stat".into(), detail: format!("unparsable: {stat}") })?;
    let status = fs::read_to_string(format!("{base}/status")).context(|| format!("reading {base}/status"))?;
    let rss_bytes = proc_text::kb_field_bytes(&status, "VmRSS").unwrap_or(0);
    let mut context_switches = 0;
    if let Ok(tasks) = fs::read_dir(format!("{base}/task")) {
        for task in tasks.flatten() {
            if let Ok(s) = fs::read_to_string(task.path().join("status")) {
                context_switches += proc_text::field_value(&s, "voluntary_ctxt_switches").unwrap_or(0)
                    + proc_text::field_value(&s, "nonvoluntary_ctxt_switches").unwrap_or(0);
            }
        }
    }
    let read_bytes = fs::read_to_string(format!("{base}/io")).ok().and_then(|io| parse_io_read_bytes(&io)).unwrap_or(0);
    Ok(ProcessSample { cpu_secs: (utime + stime) as f64 / TICKS_PER_SEC, rss_bytes, context_switches, read_bytes })
}

/// The identity of a regular file at `path`, which another process named; `None` for anything
/// else, or when it cannot be looked up safely. Symbolic links are followed as long as they stay
/// on the path's mount, and network and FUSE file systems are skipped unless allowed (see
/// [`crate::untrusted_path`]).
pub fn identity_of(path: &Path) -> Option<FileIdentity> {
    crate::untrusted_path::identity(path, Symlinks::Follow)
}

/// A [`FileIdentity`] from metadata already obtained.
pub fn identity_from_metadata(m: &fs::Metadata) -> FileIdentity {
    FileIdentity {
        dev: m.dev(),
        ino: m.ino(),
        size: m.size(),
        mtime_ns: m.mtime().saturating_mul(1_000_000_000).saturating_add(m.mtime_nsec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_cache_drops_count_reclaimed_file_pages_and_drop_caches_writes() {
        let v = "pgsteal_kswapd 7\npgsteal_direct 3\npgsteal_file 9\nworkingset_refault_file 2\ndrop_pagecache 4\ndrop_slab 1\n";
        assert_eq!(page_cache_drops_in(v), Some(14));
        let old = "pgsteal_kswapd 7\npgsteal_direct 3\nworkingset_refault 2\n";
        assert_eq!(page_cache_drops_in(old), Some(10));
        assert_eq!(page_cache_drops_in("nr_free_pages 5\n"), None);
        assert!(VmstatReader::new().page_cache_drops().is_some());
    }

    #[test]
    fn the_reader_reads_vmstat_whole_each_time_through_one_descriptor() {
        let mut r = VmstatReader::new();
        let first = r.page_cache_drops().expect("/proc/vmstat");
        let again = r.page_cache_drops().expect("read again from its start");
        assert!(again >= first);
        assert!(VmstatReader::new().page_cache_drops().is_some_and(|d| d >= again), "a fresh open reads the same count");
        assert!(r.text.len() > 1000, "the whole file, {} bytes", r.text.len());
    }

    #[test]
    fn environment_variables_are_found_whole_and_first() {
        let env = b"XPATH=/no\0PATH=/usr/bin:/bin\0PATH=/late\0EMPTY=\0";
        assert_eq!(env_var_in(env, "PATH").unwrap(), "/usr/bin:/bin");
        assert_eq!(env_var_in(env, "EMPTY").unwrap(), "");
        assert_eq!(env_var_in(env, "PAT"), None);
        assert_eq!(env_var_in(b"", "PATH"), None);
        assert!(env_var(std::process::id(), "AUGUR_NO_SUCH_VARIABLE").is_none());
    }

    #[test]
    fn a_task_tree_holds_the_threads_and_the_children_started_so_far() {
        let me = std::process::id();
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let waiter = std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_millis(500)));
        let tree = task_tree(me, 4096);
        assert_eq!(tree[0], me);
        let tid = rustix::thread::gettid().as_raw_nonzero().get() as u32;
        assert!(tree.contains(&tid), "{tree:?} lacks this thread {tid}");
        assert!(tree.contains(&child.id()), "{tree:?} lacks the child {}", child.id());
        assert_eq!(task_tree(me, 2).len(), 2);
        let _ = child.kill();
        let _ = child.wait();
        let _ = waiter.join();
        assert_eq!(task_tree(u32::MAX - 1, 10), vec![u32::MAX - 1]);
    }

    #[test]
    fn maps_lines() {
        let f = parse_maps_line(
            "7f1c2a000000-7f1c2a022000 r--p 00000000 fe:00 1316915                    /usr/lib/x86_64-linux-gnu/libc.so.6",
        )
        .unwrap();
        assert_eq!(f.key, InodeKey { dev: 65024, ino: 1316915 });
        assert_eq!(f.path, PathBuf::from("/usr/lib/x86_64-linux-gnu/libc.so.6"));
        let f = parse_maps_line("7f00-7f01 r--p 00000000 103:02 7   /opt/my app/lib x.so").unwrap();
        assert_eq!((f.key.dev, f.path.to_str().unwrap()), (libc::makedev(0x103, 2), "/opt/my app/lib x.so"));
        assert_eq!(parse_maps_line("7ffd-7ffe rw-p 00000000 00:00 0                          [stack]"), None);
        assert_eq!(parse_maps_line("7f00-7f01 r--p 00000000 fe:00 12 /tmp/gone (deleted)"), None);
        assert_eq!(parse_maps_line("garbage"), None);
        assert_eq!(parse_maps_line(""), None);
    }

    #[test]
    fn a_zombie_is_not_alive_and_a_reaped_process_is_gone() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Not yet reaped: a zombie once it has exited.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while is_alive(pid) && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(Path::new(&format!("/proc/{pid}")).exists(), "still to be reaped");
        assert!(!is_alive(pid), "a zombie has exited");
        child.wait().unwrap();
        assert!(!is_alive(pid));
        assert!(!children_of(std::process::id()).contains(&pid));
    }

    #[test]
    fn samples_and_meminfo_of_this_machine() {
        let s = sample(std::process::id()).unwrap();
        assert!(s.rss_bytes > 0 && s.context_switches > 0, "{s:?}");
        assert!(meminfo("MemTotal").unwrap() > 0);
        assert!(matches!(meminfo("NoSuchField"), Err(OsError::KernelFeature { .. })));
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        assert!(descendants(std::process::id()).contains(&child.id()));
        assert_eq!(cmdline(child.id()), ["sleep", "30"]);
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn own_process_is_visible() {
        let me = std::process::id();
        assert!(is_alive(me));
        assert!(descends_from(me, me));
        assert!(descends_from(me, 1) || parent_of(me).is_some());
        let exe = std::env::current_exe().unwrap();
        let id = identity_of(&exe).unwrap();
        assert!(mapped_files(me).iter().any(|f| f.key == InodeKey { dev: id.dev, ino: id.ino }));
        let file = std::fs::File::open(&exe).unwrap();
        assert!(open_files(me).iter().any(|(f, _)| f.key.ino == id.ino));
        drop(file);
        assert_eq!(identity_of(Path::new("/")), None, "directories are not regular files");
    }
}
