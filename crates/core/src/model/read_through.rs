//! Bulk readers among launches: the rule that says when a launch is reading one file through (a
//! `cat` of a big file, a backup, a benchmark's reader, a media player) rather than starting, so
//! the launch observer stops following it and its profile keeps what the start used, not the data
//! streamed after.
//!
//! Pure: the launch's page uses in, a verdict out. It must not decide what the daemon does about a
//! verdict (the engine's launch tracker does) nor how a stream is cached (that is the pattern
//! watch's business).
//!
//! The rule: per file of the launch, the *run* is the span `[start, end)` the launch has read
//! contiguously, in either direction (a use that overlaps the run or lies at most
//! [`RUN_GAP_PAGES`] beyond either end extends it, so forward, backward and short-strided
//! readers all grow one run; a use inside the run changes nothing; any other use starts a new run
//! where it is). A launch is reading a file through once one file's forward run
//! is at least `min_pages` long, was read in at least [`MIN_RUN_USES`] separate uses, **and** is
//! more than half of all the pages the launch used: a start that maps tens of MiB of its program
//! and libraries before it reads a pack file is not one, nor is one huge use (a mapping touched at
//! once), a program of a few hundred pages streaming a data file is.

use std::collections::HashMap;

use super::profile::InodeKey;
use super::range::PageRange;

/// A use this many pages past a run's end still extends it (readahead batches of a forward
/// reader arrive slightly out of order).
pub const RUN_GAP_PAGES: u64 = 32;
/// Files whose runs one launch tracks at most (a launch touching more files is walking a tree:
/// later files are not tracked, and are never taken for a stream).
pub const MAX_FILES: usize = 1_024;

/// Pages of a stream kept in the launch's profile once the rule says it reads the file through
/// (the first ones it read; the kernel's default read-ahead window): the data streamed is not
/// the launch's start, and replaying 8 MiB of it at the next exec raced the reader for its own
/// first reads and left its read-ahead to ramp up again where the replayed pages ended.
pub const STREAM_HEAD_PAGES: u64 = 32;

/// Fewest separate uses a run is read in for it to be a stream (a reader asks for its file
/// piece by piece; a single use of many pages is one mapping touched or one request).
pub const MIN_RUN_USES: u64 = 16;

/// The forward run of one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    start: u64,
    end: u64,
    uses: u64,
}

impl Run {
    /// No run.
    pub const NONE: Run = Run { start: 0, end: 0, uses: 0 };

    /// The pages the run spans, as a range.
    pub fn span(&self) -> PageRange {
        PageRange::new(self.start, self.end - self.start)
    }

    /// Pages the run spans.
    pub fn pages(&self) -> u64 {
        self.end - self.start
    }

    /// Uses that started or extended it.
    pub fn uses(&self) -> u64 {
        self.uses
    }
}

/// The forward runs of a launch's files, and the rule on them.
#[derive(Clone, Debug, Default)]
pub struct ForwardRuns {
    runs: HashMap<InodeKey, Run>,
}

impl ForwardRuns {
    /// No file read yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The launch used `pages` of `inode`; returns that file's forward run now.
    pub fn on_use(&mut self, inode: InodeKey, pages: PageRange) -> Run {
        if pages.len == 0 {
            return self.runs.get(&inode).copied().unwrap_or(Run::NONE);
        }
        let end = pages.start.saturating_add(pages.len);
        if !self.runs.contains_key(&inode) && self.runs.len() >= MAX_FILES {
            return Run::NONE;
        }
        let run = self.runs.entry(inode).or_insert(Run { start: pages.start, end: pages.start, uses: 0 });
        if run.uses > 0 && pages.start >= run.start && end <= run.end {
            // Inside the run: a re-read.
        } else if run.uses == 0
            || (pages.start <= run.end.saturating_add(RUN_GAP_PAGES) && end.saturating_add(RUN_GAP_PAGES) >= run.start)
        {
            if run.uses == 0 {
                *run = Run { start: pages.start, end, uses: 0 };
            }
            run.start = run.start.min(pages.start);
            run.end = run.end.max(end);
            run.uses += 1;
        } else {
            *run = Run { start: pages.start, end, uses: 1 };
        }
        *run
    }

    /// Whether the launch, having used `launch_pages` pages in all, is reading a file through
    /// now that one of its files has forward run `run` (see the module's rule); `min_pages == 0`
    /// turns the rule off.
    pub fn reads_through(run: Run, launch_pages: u64, min_pages: u64) -> bool {
        min_pages > 0 && run.pages() >= min_pages && run.uses >= MIN_RUN_USES && run.pages().saturating_mul(2) > launch_pages
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const F: InodeKey = InodeKey { dev: 1, ino: 7 };
    const G: InodeKey = InodeKey { dev: 1, ino: 8 };

    #[test]
    fn a_forward_reader_grows_one_run_and_re_reads_change_nothing() {
        let mut r = ForwardRuns::new();
        for i in 0..100 {
            assert_eq!(r.on_use(F, PageRange::new(i * 8, 8)).pages(), (i + 1) * 8);
        }
        // The header read again in the middle of the stream.
        assert_eq!(r.on_use(F, PageRange::new(0, 1)).pages(), 800);
        // Readahead batches slightly ahead of the reader.
        assert_eq!(r.on_use(F, PageRange::new(820, 4)).pages(), 824);
        // Another file does not disturb it.
        assert_eq!(r.on_use(G, PageRange::new(5, 3)).pages(), 3);
        let run = r.on_use(F, PageRange::new(824, 8));
        assert_eq!((run.pages(), run.uses()), (832, 102));
    }

    #[test]
    fn backward_and_short_strided_readers_grow_a_run_long_jumps_do_not() {
        let mut r = ForwardRuns::new();
        let mut run = Run::NONE;
        for i in (0..1000u64).rev() {
            run = r.on_use(F, PageRange::new(i * 8, 8));
        }
        assert_eq!((run.pages(), run.uses()), (8000, 1000), "backward");
        for i in 0..1000u64 {
            run = r.on_use(G, PageRange::new(i * 16, 1));
        }
        assert_eq!(run.pages(), 15_985, "4 KiB every 64 KiB");
        let mut longest = 0;
        for i in 0..1000u64 {
            longest = longest.max(r.on_use(G, PageRange::new(100_000 + i * 100, 8)).pages());
        }
        assert_eq!(longest, 8, "jumps longer than the gap");
    }

    #[test]
    fn the_rule_needs_a_long_run_that_is_most_of_the_launch() {
        let run = |pages: u64, uses: u64| Run { start: 0, end: pages, uses };
        // `cat` of a big file: 300 pages of program and libc, 2,048 pages of data.
        assert!(ForwardRuns::reads_through(run(2048, 64), 2348, 2048));
        // A game that mapped 40 MiB of itself before reading 8 MiB of its pack file.
        assert!(!ForwardRuns::reads_through(run(2048, 64), 12_288, 2048));
        // Short runs (a 4 MiB data file) are a start's data.
        assert!(!ForwardRuns::reads_through(run(1024, 64), 1100, 2048));
        // One use of many pages (a mapping touched at once) is not a stream.
        assert!(!ForwardRuns::reads_through(run(5000, 1), 5000, 2048));
        // Off.
        assert!(!ForwardRuns::reads_through(run(1 << 30, 1 << 20), 1 << 30, 0));
    }

    #[test]
    fn files_beyond_the_limit_are_not_tracked() {
        let mut r = ForwardRuns::new();
        for ino in 0..MAX_FILES as u64 {
            r.on_use(InodeKey { dev: 2, ino }, PageRange::new(0, 1));
        }
        assert_eq!(r.on_use(F, PageRange::new(0, 5000)), Run::NONE);
        assert_eq!(r.on_use(InodeKey { dev: 2, ino: 3 }, PageRange::new(1, 10)).pages(), 11);
    }

    proptest! {
        /// A run never exceeds the span of the pages used, and a purely forward sequence of
        /// contiguous uses makes one run of exactly their total.
        #[test]
        fn runs_are_bounded_by_what_was_used(uses in proptest::collection::vec((0u64..10_000, 1u64..64), 1..200)) {
            let mut r = ForwardRuns::new();
            let lo = uses.iter().map(|u| u.0).min().unwrap();
            let hi = uses.iter().map(|u| u.0 + u.1).max().unwrap();
            for (start, len) in &uses {
                let run = r.on_use(F, PageRange::new(*start, *len)).pages();
                prop_assert!(run >= *len && run <= hi - lo);
            }
            let mut c = ForwardRuns::new();
            let mut at = 0;
            for (_, len) in &uses {
                prop_assert_eq!(c.on_use(G, PageRange::new(at, *len)).pages(), at + len);
                at += len;
            }
        }
    }
}
