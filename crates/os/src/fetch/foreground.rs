//! Whether other processes are reading from the disks, so that a fetch for later (the daemon's
//! prediction fetch) waits while they do instead of competing with work happening now. The idle
//! I/O class alone does not keep it out of the way: mq-deadline serves an idle request whenever
//! the foreground's queue is momentarily empty, which a sequential reader's leaves it often.
//!
//! Others' reads are the disks' completed read sectors (`/sys/block/*/stat` of devices with a
//! driver: no loop, zram or device-mapper double counting) minus what this thread submitted
//! (`/proc/thread-self/io` `read_bytes`, counted at submission). Over a span, that difference
//! overstates others' reads by at most what this thread had in flight when the span began, which
//! the fetcher tells [`ForegroundReads::wait_turn`] (its window of advised, not yet completed
//! chunks), so the bound it checks never mistakes the fetch's own reads for someone else's.
//!
//! Bytes miss a reader that a disk limited in requests per second holds back (a cgroup's `io.max`:
//! ctags reads 4.5 MiB/s of small files there, less beside a fetch, and waits most of the time).
//! So each look also reads `procs_blocked` of `/proc/stat`, the tasks in I/O wait at that moment
//! (this thread, looking, is never one), at most every [`WAITING_EVERY`]: two of the last four
//! looks that saw one waiting make the disks busy (`augur_core::plan::WaitingLooks`), and a look
//! that saw one is not quiet. The daemon's own exec-time replay counts as a task waiting too: a
//! fetch for later gives way to it as well.
//!
//! While others read it looks again at the intervals `augur_core::plan::QuietWait` gives: they
//! grow while the reading goes on (a minute of someone else's reading costs the fetch thread a
//! few dozen wake-ups, not 600), and the disks are quiet once others read less than 2.5 MiB/s
//! over five short looks in a row (half a second).
//!
//! It reads those files and sleeps; it issues no I/O and decides nothing about what to fetch.
//! The arithmetic ([`others_read`], the parsers) is pure and tested without root.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use augur_core::plan::{QuietWait, WaitingLooks};

use super::prefetcher::CancelFlag;

/// Others reading this much within a span (beyond what this thread may have had in flight) is
/// work happening now: a reader of 4 MiB/s or more.
pub const BUSY_BYTES: u64 = 4 << 20;

/// A span of watching; a quiet one is closed and a new one begun.
pub const SPAN: Duration = Duration::from_secs(1);

/// How long a fetch that starts after a pause watches before it queues anything; also the
/// first interval of a wait (later ones grow while others keep reading: [`QuietWait`]).
pub const POLL: Duration = Duration::from_millis(augur_core::plan::quiet_wait::MIN_POLL_MS);

/// The shortest wait that ends: half a second of quiet looks.
pub const QUIET: Duration = Duration::from_millis(augur_core::plan::quiet_wait::QUIET_MS);

/// `/proc/stat` is read for its `procs_blocked` at most this often (a fetch of a fast disk looks
/// every few milliseconds; the file has a line per CPU and one of every interrupt's count).
pub const WAITING_EVERY: Duration = Duration::from_millis(10);

/// Sectors in `/sys/block/*/stat` are always 512 bytes.
const SECTOR: u64 = 512;

/// Others' reads between two samples: the disks' bytes read minus this thread's, less what this
/// thread had in flight at the first (it may have completed in between); never negative.
pub fn others_read(disk_now: u64, disk_start: u64, own_now: u64, own_start: u64, own_in_flight: u64) -> u64 {
    disk_now.saturating_sub(disk_start).saturating_sub(own_now.saturating_sub(own_start)).saturating_sub(own_in_flight)
}

/// Sectors read, the third field of a block device's `stat` file.
pub fn parse_disk_stat_sectors_read(text: &str) -> Option<u64> {
    text.split_whitespace().nth(2)?.parse().ok()
}

/// `procs_blocked` of `/proc/stat`: the tasks waiting on I/O at this moment.
pub fn parse_procs_blocked(text: &str) -> Option<u32> {
    text.lines().find_map(|l| l.strip_prefix("procs_blocked ")).and_then(|v| v.trim().parse().ok())
}

/// Whether another task waits on I/O now (`procs_blocked` above 0; the calling thread, running,
/// is not counted); `None` when `/proc/stat` cannot be read.
fn others_waiting() -> Option<bool> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    parse_procs_blocked(&text).map(|n| n > 0)
}

/// `read_bytes` of a `/proc/*/io` file.
pub fn parse_io_read_bytes(text: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        (name.trim() == "read_bytes").then(|| value.trim().parse().ok()).flatten()
    })
}

/// Counters at one moment: bytes the disks read, bytes this thread submitted.
#[derive(Clone, Copy, Debug)]
struct Sample {
    disk: u64,
    own: u64,
}

/// The span being watched: where it began and what this thread had in flight then.
#[derive(Clone, Copy, Debug)]
struct Span {
    start: Sample,
    at: Instant,
    in_flight: u64,
}

/// Watches the disks for reads by others. Create it on the thread that fetches and keep it there
/// between fetches.
#[derive(Debug)]
pub struct ForegroundReads {
    disks: Vec<PathBuf>,
    span: Span,
    /// A whole span passed without others reading: the fetch may queue its full window.
    trusted: bool,
    /// The last wait was cancelled before the disks were quiet: the next fetch waits first.
    still_busy: bool,
    /// That wait's back-off, which the next wait goes on with: a round that replaces a waiting
    /// fetch every second or two must not bring back looks every 100 ms.
    resume: Option<QuietWait>,
    /// What the fetch had in flight at its last look: a fetch that replaces it may find it
    /// still landing.
    last_in_flight: u64,
    /// The last looks at tasks waiting on I/O (across spans: beside a reader the disk holds back,
    /// a span holds few looks).
    waiting: WaitingLooks,
    /// When `/proc/stat` was last read.
    waiting_at: Option<Instant>,
}

impl ForegroundReads {
    /// Starts watching; `None` when the kernel exposes no disk or thread I/O counters.
    pub fn start() -> Option<ForegroundReads> {
        let disks: Vec<PathBuf> = std::fs::read_dir("/sys/block")
            .ok()?
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.join("device").exists() && p.join("stat").exists())
            .collect();
        if disks.is_empty() {
            return None;
        }
        let mut reads = ForegroundReads {
            disks,
            span: Span { start: Sample { disk: 0, own: 0 }, at: Instant::now(), in_flight: 0 },
            trusted: false,
            still_busy: false,
            resume: None,
            last_in_flight: 0,
            waiting: WaitingLooks::default(),
            waiting_at: None,
        };
        reads.span.start = reads.sample()?;
        Some(reads)
    }

    fn sample(&self) -> Option<Sample> {
        let mut disk = 0u64;
        for d in &self.disks {
            let text = std::fs::read_to_string(d.join("stat")).ok()?;
            disk = disk.saturating_add(parse_disk_stat_sectors_read(&text)?.saturating_mul(SECTOR));
        }
        let own = parse_io_read_bytes(&std::fs::read_to_string("/proc/thread-self/io").ok()?)?;
        Some(Sample { disk, own })
    }

    fn begin_span(&mut self, start: Sample, in_flight: u64) {
        self.span = Span { start, at: Instant::now(), in_flight };
        self.trusted = false;
    }

    /// Counts a look at the tasks waiting on I/O, unless the last was less than [`WAITING_EVERY`]
    /// ago.
    fn look_at_waiting(&mut self) {
        if self.waiting_at.is_some_and(|t| t.elapsed() < WAITING_EVERY) {
            return;
        }
        self.waiting_at = Some(Instant::now());
        if let Some(w) = others_waiting() {
            self.waiting.look(w);
        }
    }

    /// A new fetch begins on this thread (a newer plan replaced the last one, or one follows a
    /// pause): it is watched afresh, one chunk at a time until a whole [`SPAN`] passed without
    /// others reading. A new plan comes from something that happened (a launch, an exit, the
    /// page cache dropped), often work that reads now: a fetch that went on with the full window
    /// it had earned before took hundreds of MiB from a reader that started with it (a file
    /// tree read right after `drop_caches`, docs/fetching.md).
    /// After a pause (a stale span) the first look replaces the span itself, watching for a
    /// [`POLL`] before the fetch queues anything; that is left to it.
    pub fn distrust(&mut self) {
        if self.stale() {
            self.trusted = false;
            return;
        }
        if let Some(now) = self.sample() {
            self.begin_span(now, self.last_in_flight);
        }
    }

    /// The span is older than two [`SPAN`]s (the fetch paused) and no wait was left unfinished.
    fn stale(&self) -> bool {
        self.span.at.elapsed() > 2 * SPAN && !self.still_busy
    }

    /// Whether a whole [`SPAN`] passed without others reading since the last wait or pause:
    /// until then the fetch queues one chunk at a time.
    pub fn trusted(&self) -> bool {
        self.trusted
    }

    /// Called before the fetch queues more, with the bytes it has advised and not completed
    /// (`in_flight`). Returns at once when others read little in the current span; otherwise
    /// waits, looking at the growing intervals of [`QuietWait`], until the disks are quiet or
    /// `cancel` is set. A span older
    /// than two [`SPAN`]s (the fetch paused) is replaced by a fresh one watched for one [`POLL`]
    /// first, so a fetch that starts while something reads queues nothing; after a wait that was
    /// cancelled before the disks were quiet (a newer plan), the next call waits at once. Returns
    /// the wait.
    pub fn wait_turn(&mut self, cancel: &CancelFlag, in_flight: u64) -> Duration {
        self.last_in_flight = in_flight;
        let started = Instant::now();
        let stale = self.stale();
        if stale {
            let Some(now) = self.sample() else { return Duration::ZERO };
            self.begin_span(now, in_flight);
            std::thread::sleep(POLL);
        }
        let Some(now) = self.sample() else { return Duration::ZERO };
        self.look_at_waiting();
        let s = self.span;
        let others = others_read(now.disk, s.start.disk, now.own, s.start.own, s.in_flight);
        if others < BUSY_BYTES && !self.waiting.busy() && !self.still_busy {
            if s.at.elapsed() >= SPAN {
                self.begin_span(now, in_flight);
                self.trusted = true;
            }
            return if stale { started.elapsed() } else { Duration::ZERO };
        }
        tracing::debug!(
            "others read {} KiB in the last {} ms{}: fetch waits",
            others >> 10,
            s.at.elapsed().as_millis(),
            if self.waiting.busy() { ", a task waiting on the disks at two of the last four looks" } else { "" }
        );
        let mut last = now;
        let mut last_at = Instant::now();
        // Each look's own completions come out of what was in flight when the wait began.
        let mut own_left = in_flight;
        let mut wait = self.resume.take().map_or_else(QuietWait::new, |w| w.resumed());
        let mut quiet = false;
        while !cancel.is_cancelled() && !quiet {
            cancel.wait_timeout(Duration::from_millis(wait.next_sleep_ms()));
            if cancel.is_cancelled() {
                break;
            }
            let Some(s) = self.sample() else { break };
            let elapsed_ms = u64::try_from(last_at.elapsed().as_millis()).unwrap_or(u64::MAX);
            last_at = Instant::now();
            let raw = others_read(s.disk, last.disk, s.own, last.own, 0);
            let mine = raw.min(own_left);
            own_left -= mine;
            quiet = wait.look(raw - mine, elapsed_ms, others_waiting().unwrap_or(false));
            last = s;
        }
        self.begin_span(last, own_left);
        self.still_busy = !quiet;
        if quiet {
            self.waiting.clear();
        } else {
            self.resume = Some(wait);
        }
        let waited = started.elapsed();
        tracing::debug!(
            "fetch waited {} ms for others' reads{}",
            waited.as_millis(),
            if cancel.is_cancelled() { " (cancelled)" } else { "" }
        );
        waited
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn others_reads_are_the_disks_minus_our_own_and_never_negative() {
        assert_eq!(others_read(1000, 100, 500, 0, 0), 400);
        assert_eq!(others_read(1000, 100, 500, 0, 300), 100, "what we had in flight may have landed");
        assert_eq!(others_read(1000, 100, 5000, 0, 0), 0);
        assert_eq!(others_read(50, 100, 0, 0, 0), 0, "a counter reset reads as nothing");
    }

    #[test]
    fn disk_stat_and_io_files_are_parsed_and_garbage_is_refused() {
        let stat = " 4194082  3282557 2021101890 11385448   581835   168075 206237688  2344908        0  1754628 13815076";
        assert_eq!(parse_disk_stat_sectors_read(stat), Some(2021101890));
        assert_eq!(parse_disk_stat_sectors_read("1 2"), None);
        assert_eq!(parse_disk_stat_sectors_read("1 2 x"), None);
        let io = "rchar: 10\nwchar: 0\nsyscr: 1\nsyscw: 0\nread_bytes: 4096\nwrite_bytes: 0\ncancelled_write_bytes: 0\n";
        assert_eq!(parse_io_read_bytes(io), Some(4096));
        assert_eq!(parse_io_read_bytes("read_bytes: -1\n"), None);
        assert_eq!(parse_io_read_bytes(""), None);
        let stat = "cpu  1 2 3\nintr 5 6 7\nprocs_running 3\nprocs_blocked 2\nsoftirq 1 2\n";
        assert_eq!(parse_procs_blocked(stat), Some(2));
        assert_eq!(parse_procs_blocked("procs_blocked x\n"), None);
        assert_eq!(parse_procs_blocked("procs_running 1\n"), None);
        assert!(others_waiting().is_some(), "/proc/stat has procs_blocked");
    }

    #[test]
    fn a_quiet_disk_costs_no_wait_and_a_cancelled_wait_returns() {
        let Some(mut reads) = ForegroundReads::start() else {
            panic!("no /sys/block disk with a driver and stat here");
        };
        // Nothing else reads in between: no wait.
        assert_eq!(reads.wait_turn(&CancelFlag::new(), 0), Duration::ZERO);
        // Pretend others read a lot in this span: a cancelled wait returns at once.
        reads.span.start.disk = reads.span.start.disk.saturating_sub(BUSY_BYTES + 1);
        let cancel = CancelFlag::new();
        cancel.cancel();
        assert!(reads.wait_turn(&cancel, 0) < POLL);
        // The disks were never seen quiet: the next call (a newer fetch) waits until they are.
        assert!(reads.wait_turn(&CancelFlag::new(), 0) >= QUIET);
        // What this thread had in flight is not taken for someone else's reads.
        reads.span.start.disk = reads.span.start.disk.saturating_sub(BUSY_BYTES + 1);
        reads.span.in_flight = 2 * BUSY_BYTES;
        assert_eq!(reads.wait_turn(&CancelFlag::new(), 0), Duration::ZERO);
    }

    #[test]
    fn a_new_fetch_is_watched_afresh_one_chunk_at_a_time() {
        let Some(mut reads) = ForegroundReads::start() else {
            panic!("no /sys/block disk with a driver and stat here");
        };
        // A whole quiet span earned the full window ...
        reads.span.at = Instant::now().checked_sub(SPAN).unwrap_or_else(Instant::now);
        assert_eq!(reads.wait_turn(&CancelFlag::new(), 3 << 20), Duration::ZERO);
        assert!(reads.trusted());
        // ... which a new fetch does not inherit; what the last one had in flight is still
        // allowed for, so its landing is not taken for someone else's reads.
        reads.distrust();
        assert!(!reads.trusted());
        assert_eq!(reads.span.in_flight, 3 << 20);
        assert!(reads.span.at.elapsed() < SPAN);
        // After a pause, the new fetch's first look still watches before it queues anything.
        reads.span.at = Instant::now().checked_sub(3 * SPAN).unwrap_or_else(Instant::now);
        reads.distrust();
        assert!(!reads.trusted());
        assert!(reads.wait_turn(&CancelFlag::new(), 0) >= POLL, "a fetch after a pause queued at once");
    }

    #[test]
    fn reads_by_another_thread_make_it_wait_until_the_disk_is_quiet() {
        use std::io::Write;
        use std::os::fd::AsFd;
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let path = dir.path().join("data");
        let mut f = std::fs::File::create(&path).unwrap();
        let block = vec![7u8; 1 << 20];
        for _ in 0..64 {
            f.write_all(&block).unwrap();
        }
        f.sync_all().unwrap();
        crate::fetch::evict_file(f.as_fd()).unwrap();
        let mut reads = ForegroundReads::start().unwrap();
        let reader = std::thread::spawn(move || std::fs::read(&path).unwrap().len());
        assert_eq!(reader.join().unwrap(), 64 << 20);
        // 64 MiB read by another thread within the span: it waits, then the disk is quiet.
        let waited = reads.wait_turn(&CancelFlag::new(), 0);
        assert!(waited >= POLL, "did not wait: {waited:?}");
        assert!(waited < Duration::from_secs(5), "waited {waited:?} on a quiet disk");
        // A new span starts after the wait: nothing more to wait for.
        assert_eq!(reads.wait_turn(&CancelFlag::new(), 0), Duration::ZERO);
    }

    #[test]
    fn a_fetch_starting_after_a_pause_watches_first() {
        let Some(mut reads) = ForegroundReads::start() else {
            panic!("no /sys/block disk with a driver and stat here");
        };
        reads.span.at = Instant::now() - 3 * SPAN;
        let waited = reads.wait_turn(&CancelFlag::new(), 0);
        assert!(waited >= POLL, "a stale span was trusted: {waited:?}");
    }
}
