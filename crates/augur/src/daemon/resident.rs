//! Exec-time replays (and workload runs' file prefetches) known to load nothing: when the last
//! replay of the same pages found every one resident (or beyond loading: past a file's end, in a
//! file refused), and nothing has left the page cache wholesale since (no file page reclaimed, no
//! `drop_caches`, nothing dropped behind a reader by the daemon: the count
//! [`augur_os::sense::procfs::VmstatReader::page_cache_drops`] gives), the next one would find them
//! resident again. The loop then answers it at once with the same report instead of opening and
//! probing every file of the profile: a build that execs the compiler hundreds of times a minute
//! costs one replay, not hundreds.
//!
//! It owns only that memory (bounded, each entry trusted for [`MAX_AGE_NS`]); it must not decide
//! whether a launch is replayed (the engine does) nor touch the system.

use std::collections::HashMap;

/// How long a replay that found everything resident is trusted: pages a program drops on purpose
/// (`POSIX_FADV_DONTNEED`, truncation) show in no counter, so the knowledge is kept short.
pub const MAX_AGE_NS: u64 = 60_000_000_000;

/// Between an application and the digest of its files in the key of a file prefetch
/// (`run::file_prefetch_memo_key`): forgetting the application forgets its prefetches too.
pub const FILES_KEY_SEPARATOR: char = '\u{0}';

/// Applications (per user) remembered at most; beyond that the memory starts over.
const MAX_KNOWN: usize = 512;

/// What a replay was asked to load: a profile learned anew, or cut by another budget, differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProfileShape {
    /// Pages of the profile.
    pub pages: u64,
    /// Files of the profile.
    pub files: usize,
    /// Bytes of the profile.
    pub bytes: u64,
}

/// What a replay found, in pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ResidentReport {
    /// Pages the replay wanted.
    pub wanted: u64,
    /// Of them, resident already.
    pub resident: u64,
    /// Of them, pages no replay can load: past the end of their file (a file the program
    /// rewrites, such as a compiler's output), or in a file refused (stale, missing).
    pub unloadable: u64,
}

/// A replay as it started: what it was asked for, for whom, when, and the page-cache drop count
/// then.
#[derive(Clone, Copy, Debug)]
pub struct ReplayStart {
    /// The profile's shape.
    pub shape: ProfileShape,
    /// [`augur_os::sense::procfs::VmstatReader::page_cache_drops`] (with what the daemon dropped)
    /// at its start.
    pub drops: Option<u64>,
    /// Monotonic time of its start.
    pub started_ns: u64,
    /// The user it loads for.
    pub uid: u32,
}

#[derive(Clone, Copy, Debug)]
struct Known {
    shape: ProfileShape,
    drops: u64,
    at_ns: u64,
    report: ResidentReport,
}

/// Replays that found everything resident, by application and user.
#[derive(Debug, Default)]
pub struct ResidentReplays {
    known: HashMap<(String, u32), Known>,
}

impl ResidentReplays {
    /// Nothing known.
    pub fn new() -> Self {
        Self::default()
    }

    /// What the last replay of `app` for `uid` found, when it found everything resident, for a
    /// profile of the same `shape`, less than [`MAX_AGE_NS`] before `now_ns` and with the drop
    /// count `drops` unchanged since: the replay asked for now would find the same.
    pub fn still_resident(
        &self,
        app: &str,
        uid: u32,
        shape: ProfileShape,
        drops: Option<u64>,
        now_ns: u64,
    ) -> Option<ResidentReport> {
        let drops = drops?;
        let k = self.known.get(&(app.to_string(), uid))?;
        (k.shape == shape && k.drops == drops && now_ns.saturating_sub(k.at_ns) < MAX_AGE_NS).then_some(k.report)
    }

    /// A replay of `app` finished: remembered when it ran to its end (`loaded_nothing`: not
    /// stopped, nothing read) and found everything it wanted resident or beyond loading,
    /// forgotten otherwise.
    pub fn finished(&mut self, app: &str, replay: ReplayStart, report: ResidentReport, loaded_nothing: bool) {
        let ReplayStart { shape, drops, started_ns, uid } = replay;
        let key = (app.to_string(), uid);
        match drops.filter(|_| loaded_nothing && report.resident > 0 && report.resident + report.unloadable == report.wanted) {
            Some(drops) => {
                if self.known.len() >= MAX_KNOWN && !self.known.contains_key(&key) {
                    self.known.clear();
                }
                self.known.insert(key, Known { shape, drops, at_ns: started_ns, report });
            }
            None => {
                self.known.remove(&key);
            }
        }
    }

    /// `app` was learned again or forgotten: its profile may differ (every user's).
    pub fn forget_app(&mut self, app: &str) {
        self.known.retain(|(a, _), _| a.split(FILES_KEY_SEPARATOR).next() != Some(app));
    }

    /// Everything was forgotten.
    pub fn clear(&mut self) {
        self.known.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHAPE: ProfileShape = ProfileShape { pages: 10, files: 2, bytes: 40960 };
    const ALL: ResidentReport = ResidentReport { wanted: 10, resident: 10, unloadable: 0 };

    fn start(started_ns: u64) -> ReplayStart {
        ReplayStart { shape: SHAPE, drops: Some(5), started_ns, uid: 0 }
    }

    #[test]
    fn a_replay_that_found_everything_resident_answers_the_next_while_nothing_was_dropped() {
        let mut r = ResidentReplays::new();
        assert_eq!(r.still_resident("/usr/bin/cc1", 0, SHAPE, Some(5), 0), None, "nothing known yet");
        r.finished("/usr/bin/cc1", start(100), ALL, true);
        assert_eq!(r.still_resident("/usr/bin/cc1", 0, SHAPE, Some(5), 200), Some(ALL));
        assert_eq!(r.still_resident("/usr/bin/cc1", 0, SHAPE, Some(6), 200), None, "pages were dropped since");
        assert_eq!(r.still_resident("/usr/bin/cc1", 0, SHAPE, None, 200), None, "drops unknown");
        assert_eq!(r.still_resident("/usr/bin/cc1", 1000, SHAPE, Some(5), 200), None, "another user");
        let bigger = ProfileShape { pages: 11, ..SHAPE };
        assert_eq!(r.still_resident("/usr/bin/cc1", 0, bigger, Some(5), 200), None, "another profile");
        assert_eq!(r.still_resident("/usr/bin/cc1", 0, SHAPE, Some(5), 100 + MAX_AGE_NS), None, "too old");
    }

    #[test]
    fn pages_past_a_files_end_do_not_keep_a_replay_from_being_remembered() {
        // gcc's replay: 7,596 pages wanted, 7,595 resident, one past the end of the object file
        // the last run rewrote; every replay in a build loop would open all its files again.
        let mut r = ResidentReplays::new();
        let found = ResidentReport { wanted: 10, resident: 9, unloadable: 1 };
        r.finished("/usr/bin/gcc", start(100), found, true);
        assert_eq!(r.still_resident("/usr/bin/gcc", 0, SHAPE, Some(5), 200), Some(found));
    }

    #[test]
    fn a_replay_that_loaded_anything_or_was_stopped_is_not_remembered_and_forgets() {
        let mut r = ResidentReplays::new();
        r.finished("a", start(0), ResidentReport { wanted: 10, resident: 9, unloadable: 0 }, true);
        assert_eq!(r.still_resident("a", 0, SHAPE, Some(5), 1), None);
        r.finished("a", start(0), ResidentReport { wanted: 10, resident: 0, unloadable: 10 }, true);
        assert_eq!(r.still_resident("a", 0, SHAPE, Some(5), 1), None, "nothing resident: nothing known of the cache");
        r.finished("a", start(0), ALL, false);
        assert_eq!(r.still_resident("a", 0, SHAPE, Some(5), 1), None);
        r.finished("a", start(0), ALL, true);
        r.finished("a", start(2), ResidentReport { wanted: 10, resident: 3, unloadable: 0 }, true);
        assert_eq!(r.still_resident("a", 0, SHAPE, Some(5), 3), None, "the later replay loaded pages");
        r.finished("a", start(0), ALL, true);
        r.finished("b", start(0), ALL, true);
        let files = format!("a{FILES_KEY_SEPARATOR}00ff");
        r.finished(&files, start(0), ALL, true);
        r.forget_app("a");
        assert_eq!(r.still_resident("a", 0, SHAPE, Some(5), 1), None, "relearned");
        assert_eq!(r.still_resident(&files, 0, SHAPE, Some(5), 1), None, "its file prefetches too");
        assert_eq!(r.still_resident("b", 0, SHAPE, Some(5), 1), Some(ALL));
        r.clear();
        assert_eq!(r.still_resident("b", 0, SHAPE, Some(5), 1), None);
    }
}
