//! Turning the kernel's readahead off for the files of random readers (DEAR's temporally
//! clustered and probabilistic patterns): which readers' open files to advise random access, and
//! when to give them readahead back, from the pattern records of the kernel's pattern watch.
//!
//! A small read at a random place reads only the pages it asks for, unless the pages just before
//! it are cached: then the kernel takes it for a sequential stream and reads ahead of it (up to
//! the device's readahead window, and more at the next marked page). A reader of random blocks in
//! a region it has partly read already (a temporal cluster), or around its hottest blocks, gets
//! pages read ahead that it never uses: each a disk read and a page of its cache, which pushes out
//! blocks it will use again. `POSIX_FADV_RANDOM` on its open file makes the kernel read exactly
//! what is asked; the replacement itself (least recently used, DEAR's choice for these patterns)
//! stays the kernel's.
//!
//! The rule, per file a process reads (streams are per thread; the advice is on the process's open
//! files of it, which its threads share):
//! - a stream becoming *random* has its file advised random (once per file);
//! - a stream of that file seen *forward* or *looping* (readahead serves those) gives readahead
//!   back at once; so does the last random stream of it becoming anything else;
//! - at most [`RandomSettings::max_files`] files at once: the least recently advised gets
//!   readahead back for a new one; when the daemon stops, every file advised gets it back
//!   ([`RandomReaders::release_all`]).
//!
//! Pure: sightings in, advice out. It must not open files or call the kernel (the daemon's stream
//! worker and `augur_os::fetch::ahead` do).

use std::collections::{BTreeSet, HashMap};

use augur_core::model::access_pattern::Pattern;

use crate::ahead::{Sighting, StreamKey};

/// One file of one process (the file by device, `st_dev` encoding, and inode).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReaderFileKey {
    /// Process.
    pub tgid: u32,
    /// Device of the file.
    pub dev: u64,
    /// Inode of the file.
    pub ino: u64,
}

impl ReaderFileKey {
    /// The file a stream reads.
    pub fn of(key: StreamKey) -> ReaderFileKey {
        ReaderFileKey { tgid: key.tgid, dev: key.dev, ino: key.ino }
    }
}

/// How many files at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RandomSettings {
    /// Most files advised random at once.
    pub max_files: usize,
}

impl Default for RandomSettings {
    fn default() -> Self {
        RandomSettings { max_files: 64 }
    }
}

/// What the daemon should do: advise random access (`random`) or normal access (readahead back)
/// on the process's open files of this file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccessAdvice {
    /// The file.
    pub file: ReaderFileKey,
    /// Random access (no readahead); `false`: normal access.
    pub random: bool,
}

/// Counters for `augur status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RandomCounts {
    /// Files advised random since start.
    pub files: u64,
    /// Files given readahead back since start.
    pub restored: u64,
}

#[derive(Clone, Debug)]
struct Advised {
    /// Threads whose stream of the file is random.
    random_tids: BTreeSet<u32>,
    /// When it was advised (milliseconds).
    since_ms: u64,
}

/// The files advised random and the rule that decides the advice.
#[derive(Clone, Debug)]
pub struct RandomReaders {
    settings: RandomSettings,
    files: HashMap<ReaderFileKey, Advised>,
    counts: RandomCounts,
}

impl RandomReaders {
    /// Advises nothing yet.
    pub fn new(settings: RandomSettings) -> RandomReaders {
        let settings = RandomSettings { max_files: settings.max_files.max(1) };
        RandomReaders { settings, files: HashMap::new(), counts: RandomCounts::default() }
    }

    /// Files advised random now.
    pub fn advised(&self) -> usize {
        self.files.len()
    }

    /// Counters since start.
    pub fn counts(&self) -> RandomCounts {
        self.counts
    }

    /// Takes one sighting at `now_ms`; returns the advice to give.
    pub fn on_sighting(&mut self, s: &Sighting, now_ms: u64) -> Vec<AccessAdvice> {
        let file = ReaderFileKey::of(s.key);
        let mut out = Vec::new();
        match s.pattern {
            Some(Pattern::Random) => {
                if let Some(a) = self.files.get_mut(&file) {
                    a.random_tids.insert(s.key.tid);
                    return out;
                }
                if self.files.len() >= self.settings.max_files
                    && let Some(oldest) = self.files.iter().min_by_key(|(k, a)| (a.since_ms, **k)).map(|(k, _)| *k)
                {
                    self.files.remove(&oldest);
                    self.counts.restored += 1;
                    out.push(AccessAdvice { file: oldest, random: false });
                }
                self.files.insert(file, Advised { random_tids: BTreeSet::from([s.key.tid]), since_ms: now_ms });
                self.counts.files += 1;
                out.push(AccessAdvice { file, random: true });
            }
            Some(Pattern::Forward | Pattern::Loop { .. }) => {
                if self.files.remove(&file).is_some() {
                    self.counts.restored += 1;
                    out.push(AccessAdvice { file, random: false });
                }
            }
            _ => {
                let last_left =
                    self.files.get_mut(&file).is_some_and(|a| a.random_tids.remove(&s.key.tid) && a.random_tids.is_empty());
                if last_left {
                    self.files.remove(&file);
                    self.counts.restored += 1;
                    out.push(AccessAdvice { file, random: false });
                }
            }
        }
        out
    }

    /// Gives every file advised random its readahead back (the daemon is stopping).
    pub fn release_all(&mut self) -> Vec<AccessAdvice> {
        let mut files: Vec<ReaderFileKey> = self.files.drain().map(|(k, _)| k).collect();
        files.sort();
        self.counts.restored += files.len() as u64;
        files.into_iter().map(|file| AccessAdvice { file, random: false }).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use augur_core::model::access_pattern::Access;

    const K: StreamKey = StreamKey { tgid: 7, tid: 7, dev: 1, ino: 9 };

    fn seen(key: StreamKey, pattern: Option<Pattern>) -> Sighting {
        Sighting { key, access: Access { start: 0, len: 1 }, pattern }
    }

    fn advice(key: StreamKey, random: bool) -> Vec<AccessAdvice> {
        vec![AccessAdvice { file: ReaderFileKey::of(key), random }]
    }

    #[test]
    fn a_random_reader_is_advised_once_and_a_forward_one_gets_readahead_back() {
        let mut r = RandomReaders::new(RandomSettings::default());
        assert_eq!(r.on_sighting(&seen(K, Some(Pattern::Random)), 0), advice(K, true));
        // A second random thread of the same process and file: the file is advised already.
        let other_thread = StreamKey { tid: 8, ..K };
        assert!(r.on_sighting(&seen(other_thread, Some(Pattern::Random)), 1).is_empty());
        assert_eq!(r.advised(), 1);
        // One of them reads forward: readahead serves it, the file gets it back at once.
        assert_eq!(r.on_sighting(&seen(other_thread, Some(Pattern::Forward)), 2), advice(K, false));
        assert_eq!(r.advised(), 0);
        // Readers of files never advised change nothing.
        assert!(r.on_sighting(&seen(K, Some(Pattern::Forward)), 3).is_empty());
        assert!(r.on_sighting(&seen(K, Some(Pattern::Backward)), 3).is_empty());
        assert_eq!(r.counts(), RandomCounts { files: 1, restored: 1 });
    }

    #[test]
    fn readahead_comes_back_when_the_last_random_stream_of_a_file_stops_being_random() {
        let mut r = RandomReaders::new(RandomSettings::default());
        let t8 = StreamKey { tid: 8, ..K };
        r.on_sighting(&seen(K, Some(Pattern::Random)), 0);
        r.on_sighting(&seen(t8, Some(Pattern::Random)), 0);
        assert!(r.on_sighting(&seen(K, Some(Pattern::Strided { stride: 9 })), 1).is_empty(), "thread 8 is still random");
        assert_eq!(r.on_sighting(&seen(t8, Some(Pattern::Backward)), 2), advice(K, false));
        // A loop is served by readahead too.
        r.on_sighting(&seen(K, Some(Pattern::Random)), 3);
        assert_eq!(r.on_sighting(&seen(t8, Some(Pattern::Loop { first: 0, end: 10 })), 4), advice(K, false));
    }

    #[test]
    fn surplus_files_and_stopping_give_readahead_back() {
        let mut r = RandomReaders::new(RandomSettings { max_files: 2 });
        for ino in 0..3u64 {
            let key = StreamKey { ino, ..K };
            let out = r.on_sighting(&seen(key, Some(Pattern::Random)), ino);
            if ino == 2 {
                let oldest = StreamKey { ino: 0, ..K };
                assert_eq!(out, [advice(oldest, false), advice(key, true)].concat());
            }
        }
        assert_eq!(r.advised(), 2);
        let released = r.release_all();
        assert_eq!(released, [advice(StreamKey { ino: 1, ..K }, false), advice(StreamKey { ino: 2, ..K }, false)].concat());
        assert_eq!(r.advised(), 0);
        assert_eq!(r.counts(), RandomCounts { files: 3, restored: 3 });
    }
}
