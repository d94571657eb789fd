//! The system-wide access-pattern watch: loads `pattern.bpf.c` (its own object, apart from the
//! launch observer), which runs the rule of [`augur_core::model::access_pattern`] in the kernel
//! on every page-cache read and sends a [`PatternRecord`] only when a stream's established
//! pattern changes, or when a reader of a pattern asked for has moved
//! [`PatternWatchOptions::progress_pages`] since the stream's last record.
//!
//! Owns the object's programs, links, maps and ring buffer (dropping the watch detaches them) and
//! the decoding of its records. It must not decide anything about a pattern (the engine's
//! `ahead` module does) nor read files.

use std::collections::VecDeque;
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use libbpf_rs::{Link, MapCore, MapFlags, Object, RingBuffer, RingBufferBuilder};

use augur_core::model::access_pattern::{Access, Pattern, PatternRule};

use super::error::BpfError;
use super::observer::{find_map, libbpf_log_tail, load_object, map_err};
use super::record::{u32_at, u64_at};
use crate::sense::event::st_dev_from_kernel;

/// The compiled BPF object (built by `build.rs` from `pattern.bpf.c`).
static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/pattern.bpf.o"));

/// Size of one record (`struct rec_pattern`).
const RECORD_SIZE: usize = 88;

/// How to open the watch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PatternWatchOptions {
    /// The rule's thresholds.
    pub rule: PatternRule,
    /// Movement in pages between progress records of a followed pattern.
    pub progress_pages: u64,
    /// The patterns whose readers get progress records (changes are always sent).
    pub progress_backward: bool,
    /// Strided readers get progress records.
    pub progress_strided: bool,
    /// Forward readers get a progress record each time they moved this many pages (0: none);
    /// a forward stream's first record is its first progress (its establishment is not sent), so
    /// a file read through in less than this costs nothing.
    pub forward_progress_pages: u32,
    /// Forward readers get those progress records.
    pub progress_forward: bool,
    /// Looping readers get those progress records, and changes to or from a loop are sent (a
    /// loop's establishment is sent at the jump back to its start).
    pub progress_loop: bool,
    /// Changes to or from random are sent (the random-access advice follows them).
    pub changes_random: bool,
    /// The process whose reads are not watched (the daemon itself).
    pub own_tgid: u32,
    /// Send every change; otherwise only changes to or from backward or strided (so that a
    /// system full of forward readers wakes nobody).
    pub all_changes: bool,
}

/// What the kernel said about one stream (one task reading one file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PatternRecord {
    /// Thread that read.
    pub tid: u32,
    /// Its process.
    pub tgid: u32,
    /// `CLOCK_MONOTONIC` nanoseconds.
    pub ts_ns: u64,
    /// The file's device (`st_dev` encoding).
    pub dev: u64,
    /// The file's inode.
    pub ino: u64,
    /// The access that caused the record.
    pub access: Access,
    /// The pattern established now (`None`: a stream the kernel knows nothing of, never sent).
    pub pattern: Option<Pattern>,
    /// The pattern before, for a change; for progress, the same as `pattern`.
    pub previous: Option<Pattern>,
    /// A progress record (the reader moved on) rather than a change.
    pub progress: bool,
    /// The file's size in bytes when the record was sent: a rule that wants large files only
    /// passes over a small one without opening it.
    pub size_bytes: u64,
}

/// Why a record could not be decoded (a layout mismatch: never expected).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("pattern record of {0} bytes, expected {RECORD_SIZE}")]
pub struct ShortRecord(pub usize);

fn pattern_from_raw(kind: u32, stride: i64, loop_first: u64, loop_end: u64) -> Option<Pattern> {
    match kind {
        1 => Some(Pattern::Forward),
        2 => Some(Pattern::Backward),
        3 => Some(Pattern::Strided { stride }),
        4 => Some(Pattern::Loop { first: loop_first, end: loop_end }),
        5 => Some(Pattern::Random),
        _ => None,
    }
}

/// Decodes one `struct rec_pattern` (offsets as `pattern_records.h` lays it out).
pub fn decode(b: &[u8]) -> Result<PatternRecord, ShortRecord> {
    if b.len() < RECORD_SIZE {
        return Err(ShortRecord(b.len()));
    }
    let stride = u64_at(b, 40) as i64;
    let (loop_first, loop_end) = (u64_at(b, 48), u64_at(b, 56));
    Ok(PatternRecord {
        tid: u32_at(b, 0),
        tgid: u32_at(b, 4),
        ts_ns: u64_at(b, 8),
        ino: u64_at(b, 16),
        access: Access::new(u64_at(b, 24), u64_at(b, 32)),
        dev: st_dev_from_kernel(u32_at(b, 64)),
        pattern: pattern_from_raw(u32_at(b, 68), stride, loop_first, loop_end),
        previous: pattern_from_raw(u32_at(b, 72), stride, loop_first, loop_end),
        progress: u32_at(b, 76) == PEV_PROGRESS,
        size_bytes: u64_at(b, 80),
    })
}

const PEV_PROGRESS: u32 = 2;

/// What the ring-buffer callback shares with [`PatternWatch::poll`].
#[derive(Default)]
struct Inbox {
    records: VecDeque<PatternRecord>,
    undecodable: u64,
}

/// The loaded and attached pattern programs.
pub struct PatternWatch {
    // Field order is drop order: the ring buffer and links go before the object owning the maps.
    ring: RingBuffer<'static>,
    inbox: Arc<Mutex<Inbox>>,
    links: Vec<Link>,
    obj: Object,
}

impl std::fmt::Debug for PatternWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PatternWatch").field("links", &self.links.len()).finish()
    }
}

impl PatternWatch {
    /// Loads and attaches the programs (both the read and the fault tracepoint, 6.11+). Fails
    /// like [`super::BpfObserver::open`]: [`BpfError::is_unavailable`] when this machine cannot
    /// run them.
    pub fn open(options: PatternWatchOptions) -> Result<PatternWatch, BpfError> {
        let obj = load_object(OBJECT, &[])?;

        let mut mask = 0u32;
        if options.progress_backward {
            mask |= 1 << 2;
        }
        if options.progress_strided {
            mask |= 1 << 3;
        }
        if options.forward_progress_pages > 0 && options.progress_forward {
            mask |= 1 << 1;
        }
        let mut change_mask = if options.all_changes { u32::MAX } else { (1 << 2) | (1 << 3) };
        if options.forward_progress_pages > 0 && options.progress_loop {
            mask |= 1 << 4;
            change_mask |= 1 << 4;
        }
        if options.changes_random {
            change_mask |= 1 << 5;
        }
        let mut cfg = Vec::with_capacity(32);
        cfg.extend_from_slice(&options.rule.establish.max(1).to_ne_bytes());
        cfg.extend_from_slice(&options.rule.random_after.max(1).to_ne_bytes());
        cfg.extend_from_slice(&options.progress_pages.to_ne_bytes());
        cfg.extend_from_slice(&mask.to_ne_bytes());
        cfg.extend_from_slice(&options.own_tgid.to_ne_bytes());
        cfg.extend_from_slice(&change_mask.to_ne_bytes());
        cfg.extend_from_slice(&options.forward_progress_pages.to_ne_bytes());
        find_map(&obj, "pattern_config")?.update(&0u32.to_ne_bytes(), &cfg, MapFlags::ANY).map_err(map_err("pattern_config"))?;

        let inbox = Arc::new(Mutex::new(Inbox::default()));
        let sink = Arc::clone(&inbox);
        let events = find_map(&obj, "pattern_events")?;
        let mut builder = RingBufferBuilder::new();
        builder
            .add(&events, move |data: &[u8]| {
                let mut inbox = sink.lock().unwrap_or_else(|e| e.into_inner());
                match decode(data) {
                    Ok(r) => inbox.records.push_back(r),
                    Err(_) => inbox.undecodable += 1,
                }
                0
            })
            .map_err(|e| BpfError::RingBuffer(e.to_string()))?;
        let ring = builder.build().map_err(|e| BpfError::RingBuffer(e.to_string()))?;

        let mut links = Vec::new();
        for prog in obj.progs_mut() {
            let name = prog.name().to_string_lossy().into_owned();
            let link =
                prog.attach().map_err(|e| BpfError::Attach { program: name, message: format!("{e}\n{}", libbpf_log_tail()) })?;
            links.push(link);
        }
        Ok(PatternWatch { ring, inbox, links, obj })
    }

    /// The descriptor that becomes readable when records wait.
    pub fn fd(&self) -> BorrowedFd<'_> {
        let raw: RawFd = self.ring.epoll_fd();
        // SAFETY: the epoll descriptor is owned by `self.ring`, which lives as long as `self`
        // and closes it only when dropped, so it stays open for the borrow's lifetime.
        unsafe { BorrowedFd::borrow_raw(raw) }
    }

    /// Waits up to `timeout` (`None`: without limit) for records, or for `also` to become
    /// readable (a wakeup from another thread); true when something is ready.
    pub fn wait(&self, also: Option<BorrowedFd<'_>>, timeout: Option<Duration>) -> bool {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        let timeout = timeout.map(|t| Timespec { tv_sec: t.as_secs() as i64, tv_nsec: i64::from(t.subsec_nanos()) });
        let mut fds = vec![PollFd::from_borrowed_fd(self.fd(), PollFlags::IN)];
        if let Some(fd) = also {
            fds.push(PollFd::from_borrowed_fd(fd, PollFlags::IN));
        }
        matches!(poll(&mut fds, timeout.as_ref()), Ok(n) if n > 0)
    }

    /// Hands the caller at most `max` waiting records without blocking; returns how many.
    pub fn poll(&mut self, max: usize, mut f: impl FnMut(PatternRecord)) -> Result<usize, BpfError> {
        let rc = self.ring.consume_raw_n(max.max(1));
        if rc < 0 {
            return Err(BpfError::RingBuffer(std::io::Error::from_raw_os_error(-rc).to_string()));
        }
        let batch: Vec<PatternRecord> = {
            let mut inbox = self.inbox.lock().unwrap_or_else(|e| e.into_inner());
            let n = inbox.records.len().min(max.max(1));
            inbox.records.drain(..n).collect()
        };
        let n = batch.len();
        batch.into_iter().for_each(&mut f);
        Ok(n)
    }

    /// Records lost: dropped in the kernel (ring buffer full) or undecodable.
    pub fn lost(&self) -> Result<u64, BpfError> {
        let map = find_map(&self.obj, "pattern_lost")?;
        let per_cpu = map.lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY).map_err(map_err("pattern_lost"))?;
        let mut sum = 0u64;
        for v in per_cpu.into_iter().flatten() {
            if v.len() >= 8 {
                sum += u64_at(&v, 0);
            }
        }
        Ok(sum + self.inbox.lock().unwrap_or_else(|e| e.into_inner()).undecodable)
    }

    /// How many streams (task, file) thread `tid` has in the kernel's map now (walks the map: for
    /// diagnostics and tests).
    pub fn streams_of(&self, tid: u32) -> Result<usize, BpfError> {
        let map = find_map(&self.obj, "streams")?;
        Ok(map.keys().filter(|k| k.get(..4) == Some(&tid.to_ne_bytes()[..])).count())
    }

    /// Detaches everything, the links in parallel (see [`super::BpfObserver::close`]).
    pub fn close(self) {
        let PatternWatch { ring, inbox, links, obj } = self;
        drop(ring);
        std::thread::scope(|scope| {
            for link in links {
                scope.spawn(move || drop(link));
            }
        });
        drop(inbox);
        drop(obj);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: u32, prev: u32, event: u32) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&7u32.to_ne_bytes());
        b.extend_from_slice(&5u32.to_ne_bytes());
        b.extend_from_slice(&99u64.to_ne_bytes());
        b.extend_from_slice(&1234u64.to_ne_bytes());
        b.extend_from_slice(&500u64.to_ne_bytes());
        b.extend_from_slice(&8u64.to_ne_bytes());
        b.extend_from_slice(&(-16i64).to_ne_bytes());
        b.extend_from_slice(&0u64.to_ne_bytes());
        b.extend_from_slice(&0u64.to_ne_bytes());
        b.extend_from_slice(&((254u32 << 20) | 1).to_ne_bytes());
        b.extend_from_slice(&kind.to_ne_bytes());
        b.extend_from_slice(&prev.to_ne_bytes());
        b.extend_from_slice(&event.to_ne_bytes());
        b.extend_from_slice(&(1u64 << 30).to_ne_bytes());
        b
    }

    #[test]
    fn records_decode_at_the_header_offsets() {
        let r = decode(&record(3, 2, 1)).unwrap();
        assert_eq!((r.tid, r.tgid, r.ts_ns, r.ino), (7, 5, 99, 1234));
        assert_eq!(r.access, Access::new(500, 8));
        assert_eq!(r.dev, crate::sense::event::st_dev_from_parts(254, 1));
        assert_eq!(r.pattern, Some(Pattern::Strided { stride: -16 }));
        assert_eq!(r.previous, Some(Pattern::Backward));
        assert!(!r.progress);
        assert_eq!(r.size_bytes, 1 << 30);
        assert!(decode(&record(2, 2, 2)).unwrap().progress);
        assert_eq!(decode(&record(0, 0, 1)).unwrap().previous, None);
        assert_eq!(decode(&[0u8; 87]), Err(ShortRecord(87)));
    }
}
