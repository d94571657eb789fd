//! Loading, attaching and reading augur's BPF programs: [`BpfObserver`] opens the embedded
//! object (CO-RE relocated by libbpf against the running kernel's BTF), configures it, attaches
//! its tracepoints, and hands decoded records to the caller with a bounded amount of work per
//! [`BpfObserver::poll`].
//!
//! Owns the kernel objects (programs, links, maps, ring buffer) for its lifetime: dropping it
//! detaches everything. It must not interpret records beyond decoding them, and it writes only
//! the maps meant for user space: `config` (before attach), `not_follow`, and deletions from
//! `launches`. It never writes a pid filter: the kernel decides what is followed.

use std::collections::VecDeque;
use std::os::fd::{BorrowedFd, RawFd};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use libbpf_rs::{ErrorKind, Link, MapCore, MapFlags, MapType, Object, ObjectBuilder, PrintLevel, RingBuffer, RingBufferBuilder};

use super::error::BpfError;
use super::gate::ClosedLaunches;
use super::record::{self, DecodeError, LaunchId, ObservedEvent};
use crate::sense::tracefs::Tracefs;

/// The compiled BPF object (built by `build.rs` from `observe.bpf.c`).
static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/observe.bpf.o"));

/// The kernel's own BTF, which CO-RE relocation and the BTF tracepoints need.
pub const BTF_PATH: &str = "/sys/kernel/btf/vmlinux";

/// Programs every mode needs: without them the observer does not start. One of
/// [`INSERTION`]'s is needed too.
const REQUIRED: [&str; 3] = ["handle_exec", "handle_fork", "handle_exit"];
/// The page-cache insertion programs, preferred first: the BTF-typed one (no trace record built
/// at each insertion of the machine; a folio argument, 5.16+), else the classic tracepoint's.
/// One of them is loaded.
const INSERTION: [&str; 2] = ["handle_insert_folio", "handle_insert"];
/// The 6.11+ access tracepoints: without them only insertions are seen (insertion mode).
const ACCESS: [&str; 3] = ["handle_get_pages", "handle_map_pages", "handle_fault"];

/// Size of `struct launch_val` (records.h), the `launches` map's value.
const LAUNCH_VAL_SIZE: usize = 56;
/// Offsets in `struct launch_val` of `flags` (u32), `watch_until_ns`, `inserted` and
/// `count_limit` (u64).
const LAUNCH_FLAGS_AT: usize = 24;
const LAUNCH_WATCH_UNTIL_AT: usize = 32;
const LAUNCH_INSERTED_AT: usize = 40;
const LAUNCH_COUNT_LIMIT_AT: usize = 48;
/// `LAUNCH_WATCHED` (records.h).
const LAUNCH_WATCHED: u32 = 2;
/// `LAUNCH_FIRST_READS` (records.h).
const LAUNCH_FIRST_READS: u32 = 4;
/// The slot of `follow_gate` the kernel writes: launches started (observe.bpf.c GATE_CREATED).
const GATE_CREATED: u32 = 0;
/// The slot of `follow_gate` user space writes: launches closed (observe.bpf.c GATE_CLOSED).
const GATE_CLOSED: u32 = 1;
/// How often the launches whose end record was lost are looked for.
const LOST_ENDS_EVERY: Duration = Duration::from_secs(1);

/// Which launches the kernel follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FollowPolicy {
    /// Every exec by a task not yet followed starts a launch, unless its executable is in the
    /// not-followed set ([`BpfObserver::set_not_followed`]). The daemon's mode.
    AllExecs,
    /// Only execs whose parent process is this tgid start a launch (`augur trace`, tests).
    ChildrenOf(u32),
}

/// How to open the observer.
#[derive(Clone, Debug)]
pub struct ObserverOptions {
    /// Which execs start a launch.
    pub follow: FollowPolicy,
    /// Record path lookups (opens, stats, access, readlink, exec, chdir).
    pub lookups: bool,
    /// Report each (path, syscall, result) once per launch instead of every call.
    pub dedup_lookups: bool,
    /// Wake the reader once this many bytes wait in the ring buffer; only an exec record wakes it
    /// sooner (the daemon acts on execs at once, and reads its other process events then). The
    /// caller must also poll on a timer, or at every wake-up of its own: records below the
    /// threshold wait for the next poll.
    pub wakeup_bytes: u64,
    /// Most records one [`BpfObserver::poll`] hands out.
    pub max_records_per_poll: usize,
    /// See insertions through the classic tracepoint even where the BTF-typed one loads (what a
    /// kernel before 5.16 gets; for tests of that fallback).
    pub classic_insertion: bool,
}

impl Default for ObserverOptions {
    fn default() -> Self {
        ObserverOptions {
            follow: FollowPolicy::AllExecs,
            lookups: true,
            dedup_lookups: true,
            wakeup_bytes: 256 * 1024,
            max_records_per_poll: 4096,
            classic_insertion: false,
        }
    }
}

/// Records the kernel could not deliver, summed over CPUs since the observer opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LostCounts {
    /// Page or inode-load records dropped because the ring buffer was full.
    pub ringbuf_pages: u64,
    /// Lookup records dropped because the ring buffer was full.
    pub ringbuf_lookups: u64,
    /// Exec/fork/exit/launch-end records dropped because the ring buffer was full.
    pub ringbuf_process: u64,
    /// Tasks not followed because the tasks map was full.
    pub tasks_full: u64,
    /// Execs that did not start a launch because the launches map was full.
    pub launches_full: u64,
    /// Page records sent without dedup because the dedup map could not take an entry.
    pub seen_full: u64,
    /// Access events whose range exceeded 2048 pages: the tail was dropped.
    pub range_clipped: u64,
    /// Lookups whose path could not be read from user memory at syscall exit.
    pub path_fault: u64,
    /// Lookup records sent without dedup because the lookup dedup map failed.
    pub lookup_seen_full: u64,
    /// Records user space could not decode (never expected).
    pub undecodable: u64,
}

impl LostCounts {
    /// Records really lost (not merely sent twice).
    pub fn lost(&self) -> u64 {
        self.ringbuf_pages
            + self.ringbuf_lookups
            + self.ringbuf_process
            + self.tasks_full
            + self.launches_full
            + self.range_clipped
            + self.path_fault
            + self.undecodable
    }

    /// The counters of [`Self::lost`] that are not zero, named, for a report.
    pub fn by_cause(&self) -> Vec<(&'static str, u64)> {
        [
            ("ring buffer full (pages)", self.ringbuf_pages),
            ("ring buffer full (lookups)", self.ringbuf_lookups),
            ("ring buffer full (processes)", self.ringbuf_process),
            ("task map full", self.tasks_full),
            ("launch map full", self.launches_full),
            ("ranges over 2048 pages clipped", self.range_clipped),
            ("lookup paths unreadable", self.path_fault),
            ("undecodable", self.undecodable),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect()
    }
}

/// Which optional tracepoints attached.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attached {
    /// The three access tracepoints (6.11+): hits are seen, not only insertions.
    pub access: bool,
    /// `ext4_load_inode`.
    pub inode_load: bool,
    /// Syscall tracepoints that did not attach (e.g. `open` on arm64, which has none).
    pub missing_syscalls: Vec<String>,
    /// Insertions are seen through the BTF-typed tracepoint (else the classic one).
    pub insertion_btf: bool,
}

/// What the ring-buffer callback shares with [`BpfObserver::poll`].
#[derive(Default)]
struct Inbox {
    events: VecDeque<ObservedEvent>,
    undecodable: u64,
    last_error: Option<DecodeError>,
}

/// A loaded and attached set of observation programs.
pub struct BpfObserver {
    // Field order is drop order: the ring buffer and links go before the object owning the maps.
    ring: RingBuffer<'static>,
    inbox: Arc<Mutex<Inbox>>,
    links: Vec<Link>,
    obj: Object,
    attached: Attached,
    max_per_poll: usize,
    /// The launches counted closed for the kernel's follow gate.
    gate: Mutex<ClosedLaunches>,
    /// When `ends_lost` was last read.
    lost_ends_read: Instant,
}

impl std::fmt::Debug for BpfObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BpfObserver").field("links", &self.links.len()).field("attached", &self.attached).finish()
    }
}

/// libbpf's last messages, kept to explain a load failure (libbpf prints nothing itself).
static LIBBPF_LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());

pub(super) fn libbpf_print(level: PrintLevel, msg: String) {
    if level == PrintLevel::Debug {
        return;
    }
    let mut log = LIBBPF_LOG.lock().unwrap_or_else(|e| e.into_inner());
    if log.len() >= 64 {
        log.remove(0);
    }
    log.push(msg.trim_end().to_string());
}

pub(super) fn libbpf_log_tail() -> String {
    let log = LIBBPF_LOG.lock().unwrap_or_else(|e| e.into_inner());
    let start = log.len().saturating_sub(12);
    log[start..].join("\n")
}

pub(super) fn load_error(e: libbpf_rs::Error) -> BpfError {
    let detail = format!("{e}\n{}", libbpf_log_tail());
    if e.kind() == ErrorKind::PermissionDenied { BpfError::PermissionDenied(detail) } else { BpfError::Load(detail) }
}

pub(super) fn map_err(map: &'static str) -> impl Fn(libbpf_rs::Error) -> BpfError {
    move |e| BpfError::Map { map, message: e.to_string() }
}

/// Opens and loads a compiled BPF object (CO-RE relocated against the running kernel's BTF),
/// after checking what every augur program needs: BTF, and tracefs, through whose ids libbpf
/// attaches classic tracepoints (it mounts it nowhere itself: `Tracefs::locate` mounts it when
/// absent). Errors are [`BpfError::is_unavailable`] when this machine cannot run it.
///
/// Its plain hash maps allocate their entries as they are inserted (`BPF_F_NO_PREALLOC`), not
/// all at the load: preallocated, the observer's held 4.4 MiB of kernel memory, charged to the
/// daemon's memory cgroup, for entries mostly never used (it follows a few hundred tasks, not
/// 32,768). A kernel that refuses them in tracing programs (before 6.1, built with PREEMPT_RT)
/// gets them preallocated. LRU maps are always preallocated.
pub(super) fn load_object(object: &'static [u8], skip: &[&str]) -> Result<Object, BpfError> {
    if !Path::new(BTF_PATH).exists() {
        return Err(BpfError::NoBtf);
    }
    let tracefs = Tracefs::locate().map_err(|e| BpfError::NoTracefs(e.to_string()))?;
    libbpf_rs::set_print(Some((PrintLevel::Info, libbpf_print)));
    load_object_in(object, skip, &tracefs, true).or_else(|e| {
        tracing::debug!("the BPF object did not load with hash maps allocated on demand ({e}): preallocated instead");
        load_object_in(object, skip, &tracefs, false)
    })
}

/// `BPF_F_NO_PREALLOC` of the kernel's `union bpf_attr` map flags.
const BPF_F_NO_PREALLOC: u32 = 1;

/// [`load_object`]'s load, its hash maps allocated on demand when `on_demand`.
fn load_object_in(object: &'static [u8], skip: &[&str], tracefs: &Tracefs, on_demand: bool) -> Result<Object, BpfError> {
    let mut open = ObjectBuilder::default().open_memory(object).map_err(load_error)?;
    if on_demand {
        for mut map in open.maps_mut().filter(|m| m.map_type() == MapType::Hash) {
            let flags = map.map_flags() | BPF_F_NO_PREALLOC;
            map.set_map_flags(flags).map_err(load_error)?;
        }
    }
    // A BTF tracepoint this kernel does not have would fail the whole load: such a program is
    // not loaded, and its attach then fails like a classic tracepoint's that is missing.
    // So are the programs `skip` names.
    for mut prog in open.progs_mut() {
        let section = prog.section().to_string_lossy().into_owned();
        let missing = section.strip_prefix("tp_btf/").is_some_and(|event| !has_event(tracefs, event));
        if missing || skip.contains(&prog.name().to_string_lossy().as_ref()) {
            prog.set_autoload(false);
        }
    }
    open.load().map_err(load_error)
}

/// Whether the kernel has tracepoint `name` (in any tracefs event group).
fn has_event(tracefs: &Tracefs, name: &str) -> bool {
    std::fs::read_dir(tracefs.events_dir()).is_ok_and(|groups| groups.flatten().any(|g| g.path().join(name).is_dir()))
}

impl BpfObserver {
    /// Loads and attaches the programs. Fails with an error whose
    /// [`is_unavailable`](BpfError::is_unavailable) is true when this machine cannot run them
    /// (no BTF, no privilege, no tracefs, kernel refuses), so the caller can fall back to tracefs.
    pub fn open(options: ObserverOptions) -> Result<BpfObserver, BpfError> {
        // The BTF-typed insertion program first; a kernel that cannot load it (its tracepoint
        // takes a struct page before 5.16) gets the classic one.
        let preferred = (!options.classic_insertion).then(|| load_object(OBJECT, &INSERTION[1..]));
        let (obj, insertion) = match preferred {
            Some(Ok(obj)) => (obj, INSERTION[0]),
            other => {
                if let Some(Err(e)) = other {
                    tracing::debug!("the BTF-typed insertion program did not load ({e}): the classic tracepoint's instead");
                }
                (load_object(OBJECT, &INSERTION[..1])?, INSERTION[1])
            }
        };

        let mut cfg = Vec::with_capacity(24);
        let (mode, trigger) = match options.follow {
            FollowPolicy::AllExecs => (0u32, 0u32),
            FollowPolicy::ChildrenOf(tgid) => (1, tgid),
        };
        for v in [mode, trigger, u32::from(options.lookups), u32::from(options.dedup_lookups)] {
            cfg.extend_from_slice(&v.to_ne_bytes());
        }
        cfg.extend_from_slice(&options.wakeup_bytes.to_ne_bytes());
        find_map(&obj, "config")?.update(&0u32.to_ne_bytes(), &cfg, MapFlags::ANY).map_err(map_err("config"))?;

        let inbox = Arc::new(Mutex::new(Inbox::default()));
        let sink = Arc::clone(&inbox);
        let events = find_map(&obj, "events")?;
        let mut builder = RingBufferBuilder::new();
        builder
            .add(&events, move |data: &[u8]| {
                let mut inbox = sink.lock().unwrap_or_else(|e| e.into_inner());
                match record::decode(data) {
                    Ok(ev) => inbox.events.push_back(ev),
                    Err(e) => {
                        inbox.undecodable += 1;
                        inbox.last_error = Some(e);
                    }
                }
                0
            })
            .map_err(|e| BpfError::RingBuffer(e.to_string()))?;
        let ring = builder.build().map_err(|e| BpfError::RingBuffer(e.to_string()))?;

        let mut links = Vec::new();
        let mut attached = Attached::default();
        let mut access_ok = 0;
        for prog in obj.progs_mut() {
            let name = prog.name().to_string_lossy().into_owned();
            match prog.attach() {
                Ok(link) => {
                    if ACCESS.contains(&name.as_str()) {
                        access_ok += 1;
                    }
                    if name == "handle_inode_load" {
                        attached.inode_load = true;
                    }
                    if name == INSERTION[0] {
                        attached.insertion_btf = true;
                    }
                    links.push((name, link));
                }
                Err(e) if REQUIRED.contains(&name.as_str()) || name == insertion => {
                    let message = format!("{e}\n{}", libbpf_log_tail());
                    return Err(if e.kind() == ErrorKind::PermissionDenied {
                        BpfError::PermissionDenied(message)
                    } else {
                        BpfError::Attach { program: name, message }
                    });
                }
                Err(_) => {
                    if let Some(sys) = name.strip_prefix("enter_") {
                        attached.missing_syscalls.push(sys.to_string());
                    }
                }
            }
        }
        attached.access = access_ok == ACCESS.len();
        if !attached.access {
            // A partial set would mix modes: keep insertions only.
            links.retain(|(name, _)| !ACCESS.contains(&name.as_str()));
        }
        let links = links.into_iter().map(|(_, link)| link).collect();
        Ok(BpfObserver {
            ring,
            inbox,
            links,
            obj,
            attached,
            max_per_poll: options.max_records_per_poll.max(1),
            gate: Mutex::new(ClosedLaunches::default()),
            lost_ends_read: Instant::now(),
        })
    }

    /// Detaches everything, as dropping does, but closes the links in parallel: each detach of a
    /// classic tracepoint waits for an RCU grace period, and concurrent waits share one, so this
    /// takes about one grace period instead of one per link.
    pub fn close(self) {
        let BpfObserver { ring, inbox, links, obj, .. } = self;
        drop(ring);
        std::thread::scope(|scope| {
            for link in links {
                scope.spawn(move || drop(link));
            }
        });
        drop(inbox);
        drop(obj);
    }

    /// The descriptor that becomes readable when records wait (an epoll descriptor; add it to
    /// the daemon's epoll set with `EPOLLIN`). Records below the wakeup threshold do not make it
    /// readable: poll on a timer too.
    pub fn fd(&self) -> BorrowedFd<'_> {
        let raw: RawFd = self.ring.epoll_fd();
        // SAFETY: the epoll descriptor is owned by `self.ring`, which lives as long as `self`
        // and closes it only when dropped, so it stays open for the borrow's lifetime.
        unsafe { BorrowedFd::borrow_raw(raw) }
    }

    /// Waits up to `timeout` for [`fd`](Self::fd) to become readable; true when it did.
    pub fn wait(&self, timeout: Duration) -> bool {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        let timeout = Timespec { tv_sec: timeout.as_secs() as i64, tv_nsec: i64::from(timeout.subsec_nanos()) };
        let mut fds = [PollFd::from_borrowed_fd(self.fd(), PollFlags::IN)];
        matches!(poll(&mut fds, Some(&timeout)), Ok(n) if n > 0)
    }

    /// Hands the caller at most `max_records_per_poll` records that are waiting, without
    /// blocking; returns how many it handed. Call again while it returns the maximum.
    pub fn poll(&mut self, mut f: impl FnMut(ObservedEvent)) -> Result<usize, BpfError> {
        let want = {
            let inbox = self.inbox.lock().unwrap_or_else(|e| e.into_inner());
            self.max_per_poll.saturating_sub(inbox.events.len())
        };
        if want > 0 {
            let rc = self.ring.consume_raw_n(want);
            if rc < 0 {
                return Err(BpfError::RingBuffer(std::io::Error::from_raw_os_error(-rc).to_string()));
            }
        }
        let batch: Vec<ObservedEvent> = {
            let mut inbox = self.inbox.lock().unwrap_or_else(|e| e.into_inner());
            let n = inbox.events.len().min(self.max_per_poll);
            inbox.events.drain(..n).collect()
        };
        let n = batch.len();
        for event in batch {
            if let ObservedEvent::LaunchEnd { launch, .. } = event {
                self.close_for_gate(launch);
            }
            f(event);
        }
        if self.lost_ends_read.elapsed() >= LOST_ENDS_EVERY {
            self.lost_ends_read = Instant::now();
            self.close_lost_ends();
        }
        Ok(n)
    }

    /// Counts `launch` closed for the kernel's follow gate (once: [`ClosedLaunches`]) and writes
    /// the count, under the lock so that writes never go backwards. Call only once the kernel
    /// no longer follows it (it ended, was deleted, or is watched).
    fn close_for_gate(&self, launch: LaunchId) {
        let mut gate = self.gate.lock().unwrap_or_else(|e| e.into_inner());
        if !gate.close(launch) {
            return;
        }
        let written = find_map(&self.obj, "follow_gate").and_then(|m| {
            m.update(&GATE_CLOSED.to_ne_bytes(), &gate.count().to_ne_bytes(), MapFlags::ANY).map_err(map_err("follow_gate"))
        });
        if let Err(e) = written {
            // The gate then stays open: reads cost a task lookup, nothing is missed.
            tracing::debug!("{e}");
        }
    }

    /// Counts closed the launches the kernel forgot without room for their end record.
    fn close_lost_ends(&self) {
        let Ok(map) = find_map(&self.obj, "ends_lost") else { return };
        let keys: Vec<Vec<u8>> = map.keys().collect();
        for key in keys {
            let Ok(id) = <[u8; 8]>::try_from(key.as_slice()) else { continue };
            if map.delete(&key).is_ok() {
                self.close_for_gate(u64::from_ne_bytes(id));
            }
        }
    }

    /// Whether the kernel's follow gate is open: some launch it started is not yet counted
    /// closed (`None` when the gate cannot be read).
    pub fn gate_open(&self) -> Option<bool> {
        let map = find_map(&self.obj, "follow_gate").ok()?;
        let slot = |k: u32| -> Option<u64> {
            let v = map.lookup(&k.to_ne_bytes(), MapFlags::ANY).ok()??;
            Some(u64::from_ne_bytes(v.as_slice().try_into().ok()?))
        };
        Some(slot(GATE_CREATED)? != slot(GATE_CLOSED)?)
    }

    /// Stops following `launch`: its tasks leave the followed set the next time they trigger an
    /// event (so a later exec by one of them can start a new launch). Returns false when the
    /// kernel no longer knew the launch (it ended or was stopped already).
    pub fn stop_following(&self, launch: LaunchId) -> Result<bool, BpfError> {
        match find_map(&self.obj, "launches")?.delete(&launch.to_ne_bytes()) {
            Ok(()) => {
                self.close_for_gate(launch);
                Ok(true)
            }
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(map_err("launches")(e)),
        }
    }

    /// Stops following `launch` but has the kernel count the pages its tasks (and the children
    /// they fork) insert into the page cache — read from disk — until `until_ns`
    /// (CLOCK_MONOTONIC) or until the count reaches `count_limit` (0: no limit), whichever comes
    /// first: no record is sent for it any more. Returns false when the kernel no longer knew
    /// the launch. The count is read, and the launch forgotten, by
    /// [`take_watched`](Self::take_watched).
    pub fn watch(&self, launch: LaunchId, until_ns: u64, count_limit: u64) -> Result<bool, BpfError> {
        let watched = self.update_launch(launch, |value| {
            let flags = record::u32_at(value, LAUNCH_FLAGS_AT) | LAUNCH_WATCHED;
            value[LAUNCH_FLAGS_AT..LAUNCH_FLAGS_AT + 4].copy_from_slice(&flags.to_ne_bytes());
            value[LAUNCH_WATCH_UNTIL_AT..LAUNCH_WATCH_UNTIL_AT + 8].copy_from_slice(&until_ns.to_ne_bytes());
            value[LAUNCH_INSERTED_AT..LAUNCH_INSERTED_AT + 8].copy_from_slice(&0u64.to_ne_bytes());
            value[LAUNCH_COUNT_LIMIT_AT..LAUNCH_COUNT_LIMIT_AT + 8].copy_from_slice(&count_limit.to_ne_bytes());
            true
        })?;
        if watched {
            // Its tasks need the insertion programs only, which the gate does not close.
            self.close_for_gate(launch);
        }
        Ok(watched)
    }

    /// Keeps following `launch` but (`on`) has the kernel record only the first page access of
    /// each file its tasks read (with their lookups, forks, execs and exits, as before), their
    /// page-cache insertions only until `until_ns` (CLOCK_MONOTONIC), and no inode load: a run
    /// of a workload whose file order is learned is followed for the files it opens, not for
    /// their pages; or (`!on`) every page again. Returns false when the kernel no longer knew the
    /// launch (or watches it).
    pub fn first_reads_only(&self, launch: LaunchId, on: bool, until_ns: u64) -> Result<bool, BpfError> {
        self.update_launch(launch, |value| {
            let flags = record::u32_at(value, LAUNCH_FLAGS_AT);
            if flags & LAUNCH_WATCHED != 0 {
                return false;
            }
            let flags = if on { flags | LAUNCH_FIRST_READS } else { flags & !LAUNCH_FIRST_READS };
            value[LAUNCH_FLAGS_AT..LAUNCH_FLAGS_AT + 4].copy_from_slice(&flags.to_ne_bytes());
            value[LAUNCH_WATCH_UNTIL_AT..LAUNCH_WATCH_UNTIL_AT + 8].copy_from_slice(&until_ns.to_ne_bytes());
            true
        })
    }

    /// Rewrites the kernel's record of `launch` in place: `change` edits its value and says
    /// whether to write it back. Returns false when the kernel no longer knew the launch (or
    /// `change` declined).
    fn update_launch(&self, launch: LaunchId, change: impl FnOnce(&mut [u8]) -> bool) -> Result<bool, BpfError> {
        let Some(mut value) = self.launch_value(launch)? else { return Ok(false) };
        if value.len() != LAUNCH_VAL_SIZE {
            let message = format!("a value of {} bytes, not {LAUNCH_VAL_SIZE}", value.len());
            return Err(BpfError::Map { map: "launches", message });
        }
        if !change(&mut value) {
            return Ok(false);
        }
        match find_map(&self.obj, "launches")?.update(&launch.to_ne_bytes(), &value, MapFlags::EXIST) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(map_err("launches")(e)),
        }
    }

    /// The pages a watched `launch` read from disk, and forgets it; `None` when the kernel no
    /// longer knew it.
    pub fn take_watched(&self, launch: LaunchId) -> Result<Option<u64>, BpfError> {
        let Some(value) = self.launch_value(launch)? else { return Ok(None) };
        let inserted = (value.len() == LAUNCH_VAL_SIZE).then(|| record::u64_at(&value, LAUNCH_INSERTED_AT));
        match find_map(&self.obj, "launches")?.delete(&launch.to_ne_bytes()) {
            Err(e) if e.kind() != ErrorKind::NotFound => return Err(map_err("launches")(e)),
            Err(_) => {}
            Ok(()) => self.close_for_gate(launch),
        }
        Ok(inserted)
    }

    /// The pages `launch`, followed for its first reads, read from disk so far while they were
    /// counted ([`first_reads_only`](Self::first_reads_only)); `None` when the kernel no longer
    /// knows it (it ended: its end record carried the count) or it is not followed so.
    pub fn first_reads_disk_pages(&self, launch: LaunchId) -> Result<Option<u64>, BpfError> {
        let Some(value) = self.launch_value(launch)? else { return Ok(None) };
        if value.len() != LAUNCH_VAL_SIZE || record::u32_at(&value, LAUNCH_FLAGS_AT) & LAUNCH_FIRST_READS == 0 {
            return Ok(None);
        }
        Ok(Some(record::u64_at(&value, LAUNCH_INSERTED_AT)))
    }

    /// The kernel's value of `launch` in the `launches` map, as bytes; `None` when it forgot it.
    fn launch_value(&self, launch: LaunchId) -> Result<Option<Vec<u8>>, BpfError> {
        find_map(&self.obj, "launches")?.lookup(&launch.to_ne_bytes(), MapFlags::ANY).map_err(map_err("launches"))
    }

    /// The launch task `tid` follows now, as the kernel's task map says (`None` when the task is
    /// not followed, or its launch was stopped and the task not yet dropped: then
    /// [`stop_following`](Self::stop_following) finds nothing to stop).
    pub fn launch_of(&self, tid: u32) -> Result<Option<LaunchId>, BpfError> {
        let value = find_map(&self.obj, "tasks")?.lookup(&tid.to_ne_bytes(), MapFlags::ANY).map_err(map_err("tasks"))?;
        Ok(value.and_then(|v| {
            v.get(..8).map(|b| {
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                u64::from_ne_bytes(a)
            })
        }))
    }

    /// Adds (`true`) or removes an executable, by the `st_dev` and inode `stat(2)` reports, from
    /// the set whose execs never start a launch. An exec by a task already followed stays in its
    /// launch whatever the executable.
    pub fn set_not_followed(&self, dev: u64, ino: u64, not_followed: bool) -> Result<(), BpfError> {
        let kdev = record::kernel_dev_from_st(dev).ok_or(BpfError::BadDevice(dev))?;
        let mut key = Vec::with_capacity(16);
        key.extend_from_slice(&ino.to_ne_bytes());
        key.extend_from_slice(&kdev.to_ne_bytes());
        key.extend_from_slice(&0u32.to_ne_bytes());
        let map = find_map(&self.obj, "not_follow")?;
        if not_followed {
            map.update(&key, &[1u8], MapFlags::ANY).map_err(map_err("not_follow"))
        } else {
            match map.delete(&key) {
                Err(e) if e.kind() != ErrorKind::NotFound => Err(map_err("not_follow")(e)),
                _ => Ok(()),
            }
        }
    }

    /// The lost-record counters, summed over CPUs.
    pub fn stats(&self) -> Result<LostCounts, BpfError> {
        let map = find_map(&self.obj, "lost")?;
        let mut sums = [0u64; 10];
        for (i, sum) in sums.iter_mut().enumerate() {
            let per_cpu = map.lookup_percpu(&(i as u32).to_ne_bytes(), MapFlags::ANY).map_err(map_err("lost"))?;
            for v in per_cpu.into_iter().flatten() {
                let mut a = [0u8; 8];
                if v.len() >= 8 {
                    a.copy_from_slice(&v[..8]);
                }
                *sum += u64::from_ne_bytes(a);
            }
        }
        let undecodable = self.inbox.lock().unwrap_or_else(|e| e.into_inner()).undecodable;
        Ok(LostCounts {
            ringbuf_pages: sums[0],
            ringbuf_lookups: sums[1],
            ringbuf_process: sums[2],
            tasks_full: sums[3],
            launches_full: sums[4],
            seen_full: sums[5],
            range_clipped: sums[7],
            path_fault: sums[8],
            lookup_seen_full: sums[9],
            undecodable,
        })
    }

    /// Which optional tracepoints are attached.
    pub fn attached(&self) -> &Attached {
        &self.attached
    }

    /// How many tasks the kernel follows now (walks the map: for diagnostics and tests).
    pub fn followed_tasks(&self) -> Result<usize, BpfError> {
        Ok(find_map(&self.obj, "tasks")?.keys().count())
    }
}

pub(super) fn find_map<'a>(obj: &'a Object, name: &'static str) -> Result<libbpf_rs::Map<'a>, BpfError> {
    obj.maps().find(|m| m.name() == name).ok_or_else(|| BpfError::Load(format!("the BPF object has no map {name}")))
}
