//! How a fetch for later waits for other processes to stop reading the disks (the prediction
//! fetch and the free-memory tier yield to foreground readers, `augur-os::fetch::foreground`):
//! when to look again, and when the disks count as quiet.
//!
//! The wait looks at the disks' read counters, sleeps, and looks again. Looking every 100 ms
//! while a reader goes on for a minute (a backup, a build, preload-ng reading 2 GiB beside augur
//! at start) woke the fetch thread 600 times for nothing: what it learns at each look is only
//! "still busy". So the interval doubles after every busy look, up to [`MAX_POLL_MS`], and drops
//! back to [`MIN_POLL_MS`] at the first quiet one, so that the end of the reading is confirmed
//! quickly. The disks are quiet once others read less than [`QUIET_BYTES_PER_SEC`] over
//! [`QUIET_MS`] of short looks in a row (a throttled reader's requests complete in bursts, with empty
//! looks between). A fetch therefore resumes at most [`MAX_POLL_MS`] + [`QUIET_MS`] after the
//! reading ended: nothing for a prefetch of what is launched minutes later.
//!
//! Bytes alone miss a reader the disk holds back. On a disk limited in requests per second (a
//! cgroup's `io.max`, a spinning disk), a reader of small files gets a few MiB/s and spends its
//! time waiting; a fetch beside it takes requests from it and makes it slower still, so that it
//! reads even less and looks quieter (ctags on the small slow machine: 4.5 MiB/s alone). So a
//! look also says whether another task was waiting on the disks at that moment (`procs_blocked`:
//! tasks in I/O wait, this thread never among them as it looks). A look that saw one waiting is
//! not quiet, and [`WaitingLooks`] tells when two of the last four looks saw one: the disks are
//! busy then, whatever the bytes.
//!
//! Pure: the caller reads the counters and sleeps.

/// The first interval, and the interval after a quiet look.
pub const MIN_POLL_MS: u64 = 100;

/// The longest interval between two looks while others keep reading.
pub const MAX_POLL_MS: u64 = 1600;

/// Others reading less than this per second (2.5 MiB/s) is a quiet disk.
pub const QUIET_BYTES_PER_SEC: u64 = 2560 << 10;

/// Quiet looks in a row covering this long end the wait (each counted for at most
/// [`MIN_POLL_MS`]: five looks at least).
pub const QUIET_MS: u64 = 500;

/// One wait for quiet disks: feed it what others read since the last look and how long that
/// was, sleep what it says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuietWait {
    interval_ms: u64,
    quiet_ms: u64,
    looks: u32,
}

impl Default for QuietWait {
    fn default() -> Self {
        QuietWait::new()
    }
}

impl QuietWait {
    /// A wait that begins now (the disks were just seen busy).
    pub fn new() -> QuietWait {
        QuietWait { interval_ms: MIN_POLL_MS, quiet_ms: 0, looks: 0 }
    }

    /// A new wait going on from this one, which was cancelled while others still read: the
    /// interval it had reached, but no quiet time (the looks before the gap say nothing of now).
    pub fn resumed(&self) -> QuietWait {
        QuietWait { interval_ms: self.interval_ms, quiet_ms: 0, looks: 0 }
    }

    /// How long to sleep before the next look.
    pub fn next_sleep_ms(&self) -> u64 {
        self.interval_ms
    }

    /// Looks taken so far.
    pub fn looks(&self) -> u32 {
        self.looks
    }

    /// Whether `bytes` read by others over `elapsed_ms` is a quiet look.
    pub fn is_quiet(bytes: u64, elapsed_ms: u64) -> bool {
        // At least one minimum interval's allowance: a look that came early is not busier.
        let allowed = QUIET_BYTES_PER_SEC.saturating_mul(elapsed_ms.max(MIN_POLL_MS)) / 1000;
        bytes < allowed
    }

    /// Takes a look: others read `bytes` over the `elapsed_ms` since the last, and another task
    /// was (`waiting`) or was not waiting on the disks at the look. Returns true when the disks
    /// are quiet and the wait is over.
    pub fn look(&mut self, bytes: u64, elapsed_ms: u64, waiting: bool) -> bool {
        self.looks = self.looks.saturating_add(1);
        if !waiting && QuietWait::is_quiet(bytes, elapsed_ms) {
            // A long look counts as one short one: its average may hide a burst, so the end of
            // the reading is confirmed by short looks.
            self.quiet_ms = self.quiet_ms.saturating_add(elapsed_ms.min(MIN_POLL_MS));
            self.interval_ms = MIN_POLL_MS;
        } else {
            self.quiet_ms = 0;
            self.interval_ms = self.interval_ms.saturating_mul(2).min(MAX_POLL_MS);
        }
        self.quiet_ms >= QUIET_MS
    }
}

/// The fetch's last [`WaitingLooks::WINDOW`] looks at whether another task was waiting on the
/// disks: [`WaitingLooks::BUSY_LOOKS`] of them that saw one is a reader the disk holds back, busy
/// whatever it reads. Looks, not a span's time: beside such a reader each of the fetch's chunks
/// takes a few hundred milliseconds, so a span of a second holds two or three looks (ctags on
/// the small slow machine), and a share judged per span never had enough of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitingLooks {
    /// One bit per look, the latest lowest.
    recent: u8,
}

impl WaitingLooks {
    /// Looks remembered.
    pub const WINDOW: u32 = 4;
    /// Looks of the window that saw a task waiting, at least, for the disks to be busy: one
    /// task's brief wait (a page fault, a journal commit) is not a reader.
    pub const BUSY_LOOKS: u32 = 2;

    /// Counts a look, forgetting the oldest beyond the window.
    pub fn look(&mut self, waiting: bool) {
        self.recent = ((self.recent << 1) | u8::from(waiting)) & ((1 << Self::WINDOW) - 1);
    }

    /// At least [`Self::BUSY_LOOKS`] of the last [`Self::WINDOW`] looks saw a task waiting.
    pub fn busy(&self) -> bool {
        self.recent.count_ones() >= Self::BUSY_LOOKS
    }

    /// Forgets every look (the disks were just seen quiet).
    pub fn clear(&mut self) {
        self.recent = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a wait against `reads(t_ms)` (bytes others read in the look ending at t), each look
    /// taking exactly the sleep asked for; returns (looks, ms waited).
    fn simulate(reads: impl Fn(u64) -> u64) -> (u32, u64) {
        let mut w = QuietWait::new();
        let mut t = 0;
        loop {
            let dt = w.next_sleep_ms();
            t += dt;
            if w.look(reads(t), dt, false) {
                return (w.looks(), t);
            }
            assert!(t < 3_600_000, "never quiet");
        }
    }

    #[test]
    fn a_quiet_disk_ends_the_wait_after_half_a_second_of_short_looks() {
        assert_eq!(simulate(|_| 0), (5, 500));
    }

    #[test]
    fn a_long_reader_costs_few_looks_and_the_end_is_seen_soon() {
        // 100 MiB/s for 60 s, then nothing.
        let (looks, waited) = simulate(|t| if t <= 60_000 { 100 << 20 } else { 0 });
        assert!(looks < 60, "{looks} looks for one minute of reading (every 100 ms: 600)");
        assert!(waited >= 60_000 + QUIET_MS, "ended while the reader read: {waited}");
        assert!(waited <= 60_000 + MAX_POLL_MS + QUIET_MS, "noticed the end late: {waited}");
    }

    #[test]
    fn the_interval_doubles_while_busy_and_drops_at_a_quiet_look() {
        let mut w = QuietWait::new();
        let mut seen = Vec::new();
        for _ in 0..6 {
            seen.push(w.next_sleep_ms());
            assert!(!w.look(64 << 20, w.next_sleep_ms(), false));
        }
        assert_eq!(seen, vec![100, 200, 400, 800, 1600, 1600]);
        assert!(!w.look(0, 1600, false), "one quiet look is not enough...");
        assert_eq!(w.next_sleep_ms(), MIN_POLL_MS, "...and the next comes soon");
    }

    #[test]
    fn a_resumed_wait_keeps_its_interval_but_not_its_quiet_time() {
        let mut w = QuietWait::new();
        for _ in 0..4 {
            w.look(64 << 20, w.next_sleep_ms(), false);
        }
        assert_eq!(w.next_sleep_ms(), 1600);
        let r = w.resumed();
        assert_eq!(r.next_sleep_ms(), 1600);
        let mut q = QuietWait::new();
        q.look(0, 100, false);
        q.look(0, 100, false);
        let mut r = q.resumed();
        for _ in 0..4 {
            assert!(!r.look(0, 100, false), "quiet looks before the gap counted");
        }
        assert!(r.look(0, 100, false));
    }

    #[test]
    fn a_busy_look_resets_the_quiet_time() {
        let mut w = QuietWait::new();
        assert!(!w.look(0, 100, false));
        assert!(!w.look(0, 100, false));
        assert!(!w.look(1 << 20, 100, false), "1 MiB in 100 ms is a reader of 10 MiB/s");
        for _ in 0..4 {
            assert!(!w.look(0, 100, false));
        }
        assert!(w.look(0, 100, false));
    }

    #[test]
    fn quiet_is_a_rate_not_a_count_per_look() {
        // A trickle of 256 KiB over 1.6 s is quiet; the same in 100 ms is not (2.5 MiB/s).
        assert!(QuietWait::is_quiet(256 << 10, 1600));
        assert!(!QuietWait::is_quiet(256 << 10, 100));
        assert!(QuietWait::is_quiet(255 << 10, 100));
        // A look that came early gets the minimum allowance.
        assert!(QuietWait::is_quiet(200 << 10, 0));
    }

    #[test]
    fn a_bursty_reader_keeps_it_waiting() {
        // A throttled reader completing 1 MiB every 300 ms: busy at least once every 300 ms.
        let mut w = QuietWait::new();
        let mut t = 0u64;
        for _ in 0..200 {
            let dt = w.next_sleep_ms();
            let before = t / 300;
            t += dt;
            let bursts = t / 300 - before;
            assert!(!w.look(bursts << 20, dt, false), "quiet declared at {t} ms while the reader goes on");
        }
    }

    #[test]
    fn a_look_with_another_task_waiting_is_never_quiet() {
        let mut w = QuietWait::new();
        for _ in 0..20 {
            assert!(!w.look(0, 100, true), "a reader the disk holds back reads little and waits");
        }
        for _ in 0..4 {
            assert!(!w.look(0, 100, false));
        }
        assert!(w.look(0, 100, false), "five quiet looks in a row end the wait");
    }

    #[test]
    fn two_of_the_last_four_looks_with_a_task_waiting_are_busy() {
        let mut s = WaitingLooks::default();
        s.look(true);
        assert!(!s.busy(), "one look with a task waiting is not enough");
        s.look(true);
        assert!(s.busy(), "two in a row: a span of a second beside a held-back reader has two or three looks");
        for _ in 0..3 {
            s.look(false);
        }
        assert!(!s.busy(), "the older looks are forgotten");
        let mut q = WaitingLooks::default();
        for i in 0..40 {
            q.look(i % 5 == 0);
            assert!(!q.busy(), "a task waiting now and then (a journal commit) is not a reader");
        }
        s.look(true);
        s.look(true);
        s.clear();
        assert!(!s.busy());
    }
}
