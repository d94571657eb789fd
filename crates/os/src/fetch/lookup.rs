//! Replays a profile's path lookups before its pages are loaded, so the dentry cache (positive
//! and negative entries), the inode cache and the directory and inode-table blocks are warm when
//! the program walks the same paths: a `stat` of each path (a failed one leaves the negative
//! dentry the program's own probe would have created) and a listing of each directory the
//! program listed.
//!
//! It only stats and reads directories: it never opens anything but a directory (`O_DIRECTORY`
//! guarantees that), never writes, never executes. The paths are what a traced program looked up,
//! so each walk follows their symbolic links but stays on the path's mount and skips network and
//! FUSE file systems ([`crate::untrusted_path`]). It does not choose which lookups to replay (the
//! plan does).

use rustix::fs::{Dir, OFlags};

use crate::untrusted_path::{self, Symlinks};

use augur_core::model::profile::{Lookup, LookupKind};

use super::prefetcher::CancelFlag;

/// Entries read from one directory at most: a listing is about warming its blocks, and a huge
/// directory is not worth more than this.
const MAX_ENTRIES_PER_DIR: usize = 100_000;

/// What a replay did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LookupCounts {
    /// Lookups repeated (stat'ed or listed), whatever they found.
    pub replayed: u64,
    /// Of those, directories listed.
    pub listed: u64,
}

/// Repeats `lookups` in order until done or cancelled.
pub fn replay_lookups(lookups: &[Lookup], cancel: &CancelFlag) -> LookupCounts {
    let mut counts = LookupCounts::default();
    for l in lookups {
        if cancel.is_cancelled() {
            break;
        }
        match l.kind {
            LookupKind::Stat | LookupKind::Missing => {
                // The outcome does not matter: success or ENOENT, the walk is now cached.
                let _ = untrusted_path::walk(&l.path, Symlinks::Follow);
            }
            LookupKind::Dir => {
                if list_directory(l) {
                    counts.listed += 1;
                } else {
                    let _ = untrusted_path::walk(&l.path, Symlinks::Follow);
                }
            }
        }
        counts.replayed += 1;
    }
    counts
}

/// Reads the entries of a directory (and so its blocks and the dentries of its names).
fn list_directory(l: &Lookup) -> bool {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NONBLOCK | OFlags::NOCTTY;
    let Ok(fd) = untrusted_path::open(&l.path, flags, Symlinks::Follow) else { return false };
    let Ok(mut dir) = Dir::new(fd) else { return false };
    let mut n = 0;
    while let Some(entry) = dir.read() {
        if entry.is_err() {
            break;
        }
        n += 1;
        if n >= MAX_ENTRIES_PER_DIR {
            break;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_missing_paths_and_lists_directories() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), b"x").unwrap();
        let lookups = vec![
            Lookup { path: dir.path().join("f"), kind: LookupKind::Stat },
            Lookup { path: dir.path().join("nope/x"), kind: LookupKind::Missing },
            Lookup { path: dir.path().to_path_buf(), kind: LookupKind::Dir },
            // Listed as a directory but a file now: stat'ed, never opened.
            Lookup { path: dir.path().join("f"), kind: LookupKind::Dir },
        ];
        let got = replay_lookups(&lookups, &CancelFlag::new());
        assert_eq!(got, LookupCounts { replayed: 4, listed: 1 });
    }

    #[test]
    fn a_raised_flag_stops_the_replay() {
        let cancel = CancelFlag::new();
        cancel.cancel();
        let lookups = vec![Lookup { path: "/".into(), kind: LookupKind::Dir }];
        assert_eq!(replay_lookups(&lookups, &cancel), LookupCounts::default());
    }
}
