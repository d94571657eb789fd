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
//!
//! A launch that reached its page cap reading many files, each through (`find | xargs cat` of a
//! tree, a backup, an indexer), is reading data too: [`ForwardRuns::files_read_through`] names
//! the files it read forward, densely and piece by piece, when they hold most of its pages. Its
//! profile keeps what else it used (its programs and libraries): the data, replayed at its next
//! exec, only raced it for its own reads (a cold read of a 2 GiB tree was 8-11 % slower once augur
//! had learned the tree's first 234 MiB as `find`'s start). Backward and strided readers are not
//! among them: the kernel's readahead cannot follow those, and a replay can.

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

/// Fewest separate uses a file of a launch at its page cap is read in for it to be one of the
/// files it reads through (a `cat` of a 1 MiB file reads it in 8; a file used once, in one
/// request, is left in the profile).
pub const MIN_FILE_THROUGH_USES: u64 = 2;

/// Fewest files a launch at its page cap reads through for them to be its data: a tree, not one
/// big file (whose head the launch keeps, [`STREAM_HEAD_PAGES`], when it is a stream at all).
pub const MIN_FILES_THROUGH: usize = 4;

/// The forward run of one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    start: u64,
    end: u64,
    uses: u64,
    /// A use extended it below its start: it was read backward at least once.
    backward: bool,
}

impl Run {
    /// No run.
    pub const NONE: Run = Run { start: 0, end: 0, uses: 0, backward: false };

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

    /// Whether a use extended it below its start (it was read backward).
    pub fn went_backward(&self) -> bool {
        self.backward
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
        let run = self.runs.entry(inode).or_insert(Run { start: pages.start, end: pages.start, uses: 0, backward: false });
        if run.uses > 0 && pages.start >= run.start && end <= run.end {
            // Inside the run: a re-read.
        } else if run.uses == 0
            || (pages.start <= run.end.saturating_add(RUN_GAP_PAGES) && end.saturating_add(RUN_GAP_PAGES) >= run.start)
        {
            if run.uses == 0 {
                *run = Run { start: pages.start, end, uses: 0, backward: false };
            }
            run.backward |= pages.start < run.start;
            run.start = run.start.min(pages.start);
            run.end = run.end.max(end);
            run.uses += 1;
        } else {
            *run = Run { start: pages.start, end, uses: 1, backward: false };
        }
        *run
    }

    /// The files a launch that used `launch_pages` pages in all was reading through, each with
    /// its run's span, when there are at least [`MIN_FILES_THROUGH`] of them and they hold more
    /// than half of those pages; none otherwise. A file is read through when its run only ever
    /// grew forward, in at least [`MIN_FILE_THROUGH_USES`] uses, and the launch used at least
    /// nine tenths of the run's pages and none beyond it (`pages_of`: the pages the launch used
    /// of a file).
    pub fn files_read_through(&self, launch_pages: u64, pages_of: impl Fn(InodeKey) -> u64) -> Vec<(InodeKey, PageRange)> {
        let mut through: Vec<(InodeKey, PageRange)> = Vec::new();
        let mut pages = 0u64;
        for (inode, run) in &self.runs {
            let used = pages_of(*inode);
            let dense = used <= run.pages() && used.saturating_mul(10) >= run.pages().saturating_mul(9);
            if !run.backward && run.uses >= MIN_FILE_THROUGH_USES && used > 0 && dense {
                through.push((*inode, run.span()));
                pages += used;
            }
        }
        if through.len() < MIN_FILES_THROUGH || pages.saturating_mul(2) <= launch_pages {
            return Vec::new();
        }
        through.sort_unstable_by_key(|(inode, _)| *inode);
        through
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
        let run = |pages: u64, uses: u64| Run { start: 0, end: pages, uses, backward: false };
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

    /// The pages used of each file, as the launch tracker's working set counts them.
    fn used_pages(uses: &[(InodeKey, PageRange)]) -> impl Fn(InodeKey) -> u64 + '_ {
        move |inode| {
            let mut seen = crate::model::range::RangeSet::default();
            for (i, r) in uses {
                if *i == inode {
                    seen.insert(*r);
                }
            }
            seen.page_count()
        }
    }

    #[test]
    fn a_tree_reader_at_its_cap_reads_its_files_through_and_its_libraries_are_not_among_them() {
        let file = |ino| InodeKey { dev: 3, ino };
        let lib = InodeKey { dev: 3, ino: 1 };
        let mut uses = vec![(lib, PageRange::new(0, 40)), (lib, PageRange::new(90, 10))];
        // `cat` of four 1 MiB files in 128 KiB reads, the last cut by the cap.
        for ino in 10..14u64 {
            let reads = if ino == 13 { 3 } else { 8 };
            uses.extend((0..reads).map(|i| (file(ino), PageRange::new(i * 32, 32))));
        }
        // A small file read in one request.
        uses.push((file(20), PageRange::new(0, 3)));
        let mut r = ForwardRuns::new();
        for (inode, pages) in &uses {
            r.on_use(*inode, *pages);
        }
        let total = 50 + 3 * 256 + 96 + 3;
        let through = r.files_read_through(total, used_pages(&uses));
        let whole = PageRange::new(0, 256);
        assert_eq!(through, vec![(file(10), whole), (file(11), whole), (file(12), whole), (file(13), PageRange::new(0, 96))]);
        // The same files beside a start that used more than they hold: a start's data.
        assert!(r.files_read_through(2 * total, used_pages(&uses)).is_empty());
        // Fewer files: one big file (or three) is not a tree.
        let few: Vec<_> = uses.iter().copied().filter(|(i, _)| i.ino < 13).collect();
        let mut r = ForwardRuns::new();
        for (inode, pages) in &few {
            r.on_use(*inode, *pages);
        }
        assert!(r.files_read_through(50 + 3 * 256, used_pages(&few)).is_empty());
    }

    #[test]
    fn backward_and_sparse_readers_do_not_read_their_files_through() {
        let mut uses = Vec::new();
        for i in (0..64u64).rev() {
            uses.push((F, PageRange::new(i * 8, 8)));
        }
        for i in 0..64u64 {
            uses.push((G, PageRange::new(i * 16, 2)));
        }
        let mut r = ForwardRuns::new();
        for (inode, pages) in &uses {
            r.on_use(*inode, *pages);
        }
        assert!(r.on_use(F, PageRange::new(0, 1)).went_backward());
        assert!(r.files_read_through(512 + 128, used_pages(&uses)).is_empty());
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
