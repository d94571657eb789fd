//! Turning (device, inode) pairs from page events into paths: a map fed incrementally by every
//! source that names files (fanotify opens, `/proc/PID/maps` and fds, exec file names), and the
//! assembly of a working set into [`FileProfile`]s with each path re-verified.
//!
//! Pure: `stat` is injected, so it is tested without touching the filesystem. It never walks a
//! filesystem to find an inode.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::fetch::residency::pages_in;
use augur_core::model::profile::{FileIdentity, FileProfile, InodeKey, Unresolved, UsedRange};
use augur_core::model::range::PageRange;

/// How many distinct paths are kept per inode (hard links, renames).
const MAX_PATHS_PER_INODE: usize = 4;

/// Known paths of inodes, newest first.
#[derive(Clone, Debug, Default)]
pub struct PathResolver {
    paths: HashMap<InodeKey, Vec<PathBuf>>,
    /// The identity of each file as its latest open event showed it.
    opened: HashMap<InodeKey, FileIdentity>,
    /// Overlay device -> devices of its layers.
    layers: HashMap<u64, Vec<u64>>,
}

/// The outcome of resolving one inode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// A path that, stat'ed now, is still this inode, with its current identity.
    Resolved { path: PathBuf, identity: FileIdentity },
    /// No source ever named this inode.
    Unknown,
    /// Paths were known but none of them is this inode (any more), or it is not a regular file.
    Moved,
}

impl PathResolver {
    /// An empty resolver.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `path` named `key`. Relative paths are ignored.
    pub fn learn(&mut self, key: InodeKey, path: impl Into<PathBuf>) {
        let path = path.into();
        if !path.is_absolute() {
            return;
        }
        let list = self.paths.entry(key).or_default();
        if let Some(i) = list.iter().position(|p| *p == path) {
            list.remove(i);
        }
        list.insert(0, path);
        list.truncate(MAX_PATHS_PER_INODE);
    }

    /// Records what an open event names: the file's own key and, for a file on an overlay, the
    /// layer keys its pages are traced under.
    pub fn learn_open(&mut self, opened: &super::fanotify::OpenedFile) {
        for alias in &opened.aliases {
            self.learn(*alias, opened.path.clone());
        }
        self.learn(opened.key, opened.path.clone());
        self.opened.insert(opened.key, opened.identity);
    }

    /// True when an open event named this very file already (same inode, size and mtime): an
    /// open of it again names nothing new, unless it was renamed meanwhile (the resolution then
    /// finds it moved). An inode number reused by a new file differs in its mtime.
    pub fn knows_open(&self, identity: &FileIdentity) -> bool {
        self.opened.get(&InodeKey { dev: identity.dev, ino: identity.ino }) == Some(identity)
    }

    /// Records every overlay an [`OpenWatcher`](super::fanotify::OpenWatcher) found, so paths
    /// on them verify their layers' inodes (see [`Self::learn_layers`]).
    pub fn learn_overlays(&mut self, watcher: &super::fanotify::OpenWatcher) {
        for (overlay, layers) in watcher.overlay_layers() {
            self.learn_layers(*overlay, layers);
        }
    }

    /// Records that files seen on `overlay_dev` are cached as the inode of the same number on
    /// one of `layer_devs`, so a path on the overlay verifies an inode key of a layer.
    pub fn learn_layers(&mut self, overlay_dev: u64, layer_devs: &[u64]) {
        self.layers.insert(overlay_dev, layer_devs.to_vec());
    }

    /// True when `stat_dev` (from stat of a path) stands for the inode on `key_dev`: the same
    /// device, or an overlay whose layer it is.
    fn same_device(&self, stat_dev: u64, key_dev: u64) -> bool {
        stat_dev == key_dev || self.layers.get(&stat_dev).is_some_and(|l| l.contains(&key_dev))
    }

    /// The newest path known for `key`, unverified.
    pub fn path_of(&self, key: InodeKey) -> Option<&Path> {
        self.paths.get(&key).and_then(|l| l.first()).map(PathBuf::as_path)
    }

    /// True when some path is known for `key`.
    pub fn knows(&self, key: InodeKey) -> bool {
        self.paths.contains_key(&key)
    }

    /// Forgets `key` (a daemon bounding its memory, or a file known to be gone).
    pub fn forget(&mut self, key: InodeKey) {
        self.paths.remove(&key);
        self.opened.remove(&key);
    }

    /// Inodes with a known path.
    pub fn len(&self) -> usize {
        self.paths.len()
    }

    /// True when no path is known.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// Resolves `key`, re-verifying each known path with `stat` (which must return `None` for
    /// anything but a regular file): the first path whose device and inode still match wins.
    pub fn resolve(&self, key: InodeKey, mut stat: impl FnMut(&Path) -> Option<FileIdentity>) -> Resolution {
        let Some(list) = self.paths.get(&key) else { return Resolution::Unknown };
        for path in list {
            if let Some(identity) = stat(path)
                && identity.ino == key.ino
                && self.same_device(identity.dev, key.dev)
            {
                return Resolution::Resolved { path: path.clone(), identity };
            }
        }
        Resolution::Moved
    }
}

/// Trims ranges to the file's end (the access events report requested ranges, which may run
/// past EOF) and drops what is left empty.
pub fn clamp_to_size(ranges: &[UsedRange], file_pages: u64) -> Vec<UsedRange> {
    ranges
        .iter()
        .filter_map(|r| {
            let end = r.range.end().min(file_pages);
            (end > r.range.start)
                .then(|| UsedRange { range: PageRange::from_bounds(r.range.start, end), first_use_us: r.first_use_us })
        })
        .collect()
}

/// Turns a working set (inodes in first-use order, see
/// [`WorkingSetBuilder::finish`](augur_core::model::profile::WorkingSetBuilder::finish)) into file
/// profiles in the same order, resolving each inode through `resolver` and `stat`.
///
/// Inodes that stay unresolved, or are not regular files, are counted in [`Unresolved`] with the
/// pages they held (and listed in [`Assembly::unresolved_inodes`]); files whose pages all lie
/// past their end are dropped.
pub fn assemble_files(
    working_set: Vec<(InodeKey, Vec<UsedRange>)>,
    resolver: &PathResolver,
    page_size: u64,
    mut stat: impl FnMut(&Path) -> Option<FileIdentity>,
) -> Assembly {
    let mut files = Vec::new();
    let mut unresolved = Unresolved::default();
    let mut unresolved_inodes = Vec::new();
    for (key, ranges) in working_set {
        match resolver.resolve(key, &mut stat) {
            Resolution::Resolved { path, identity } => {
                let ranges = clamp_to_size(&ranges, pages_in(identity.size, page_size));
                if !ranges.is_empty() {
                    files.push(FileProfile { path, identity, ranges });
                }
            }
            Resolution::Unknown | Resolution::Moved => {
                let pages = ranges.iter().map(|r| r.range.len).sum::<u64>();
                unresolved.inodes += 1;
                unresolved.pages += pages;
                unresolved_inodes.push((key, pages));
            }
        }
    }
    Assembly { files, unresolved, unresolved_inodes }
}

/// What [`assemble_files`] produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assembly {
    /// Resolved files in first-use order.
    pub files: Vec<FileProfile>,
    /// Totals of what stayed unresolved.
    pub unresolved: Unresolved,
    /// Each unresolved inode with its page count, in first-use order.
    pub unresolved_inodes: Vec<(InodeKey, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const K1: InodeKey = InodeKey { dev: 65024, ino: 11 };
    const K2: InodeKey = InodeKey { dev: 65024, ino: 22 };
    const META: InodeKey = InodeKey { dev: 3, ino: 0xfe00000 };

    fn id(key: InodeKey, size: u64) -> FileIdentity {
        FileIdentity { dev: key.dev, ino: key.ino, size, mtime_ns: 5 }
    }

    fn fake_fs(path: &Path) -> Option<FileIdentity> {
        match path.to_str()? {
            "/a" => Some(id(K1, 10 * 4096)),
            "/b-new" => Some(id(K2, 4097)),
            "/b-old" => Some(id(InodeKey { dev: 65024, ino: 999 }, 1)), // replaced since
            _ => None,
        }
    }

    fn used(start: u64, len: u64, at: u64) -> UsedRange {
        UsedRange { range: PageRange::new(start, len), first_use_us: at }
    }

    #[test]
    fn an_open_of_a_file_named_already_is_known_unless_the_inode_is_a_new_file() {
        let mut r = PathResolver::new();
        let opened = |identity: FileIdentity, path: &str| super::super::fanotify::OpenedFile {
            pid: 1,
            key: InodeKey { dev: identity.dev, ino: identity.ino },
            identity,
            path: path.into(),
            exec: false,
            aliases: Vec::new(),
        };
        assert!(!r.knows_open(&id(K1, 10)));
        r.learn_open(&opened(id(K1, 10), "/a"));
        assert!(r.knows_open(&id(K1, 10)));
        assert!(!r.knows_open(&id(K1, 11)), "another size: the inode holds another file now");
        assert!(!r.knows_open(&FileIdentity { mtime_ns: 6, ..id(K1, 10) }), "written since");
        r.learn(K2, "/b-new");
        assert!(!r.knows_open(&id(K2, 4097)), "named by another source, not by an open");
    }

    #[test]
    fn newest_matching_path_wins_and_identity_is_reverified() {
        let mut r = PathResolver::new();
        r.learn(K2, "/b-new");
        r.learn(K2, "/b-old");
        assert_eq!(r.path_of(K2), Some(Path::new("/b-old")));
        assert_eq!(r.resolve(K2, fake_fs), Resolution::Resolved { path: "/b-new".into(), identity: id(K2, 4097) });
        r.learn(K1, "relative/ignored");
        assert_eq!(r.resolve(K1, fake_fs), Resolution::Unknown);
        r.learn(K1, "/nowhere");
        assert_eq!(r.resolve(K1, fake_fs), Resolution::Moved);
        r.forget(K1);
        assert!(!r.knows(K1));
    }

    #[test]
    fn overlay_paths_verify_layer_inodes() {
        const OVL_DEV: u64 = 39;
        let layer_key = InodeKey { dev: 65024, ino: 5 };
        let through_overlay =
            |p: &Path| (p == Path::new("/ovl/f")).then_some(FileIdentity { dev: OVL_DEV, ino: 5, size: 1, mtime_ns: 0 });
        let mut r = PathResolver::new();
        r.learn(layer_key, "/ovl/f");
        assert_eq!(r.resolve(layer_key, through_overlay), Resolution::Moved, "unknown overlay: device differs");
        r.learn_layers(OVL_DEV, &[65024]);
        assert!(matches!(r.resolve(layer_key, through_overlay), Resolution::Resolved { .. }));
        assert_eq!(r.resolve(InodeKey { dev: 65024, ino: 6 }, through_overlay), Resolution::Unknown);
    }

    #[test]
    fn paths_per_inode_are_bounded() {
        let mut r = PathResolver::new();
        for i in 0..10 {
            r.learn(K1, format!("/p{i}"));
        }
        r.learn(K1, "/p9");
        assert_eq!(r.paths[&K1].len(), MAX_PATHS_PER_INODE);
        assert_eq!(r.path_of(K1), Some(Path::new("/p9")));
    }

    #[test]
    fn assembly_keeps_order_clamps_to_eof_and_counts_unresolved() {
        let mut r = PathResolver::new();
        r.learn(K1, "/a");
        r.learn(K2, "/b-new");
        let ws = vec![
            (K2, vec![used(0, 32, 1)]),    // 4097 bytes: 2 pages
            (META, vec![used(100, 3, 2)]), // block-device metadata: never resolvable
            (K1, vec![used(8, 4, 3), used(0, 2, 4), used(20, 1, 5)]),
            (InodeKey { dev: 65024, ino: 77 }, vec![used(0, 1, 6)]),
        ];
        let Assembly { files, unresolved, unresolved_inodes } = assemble_files(ws, &r, 4096, fake_fs);
        assert_eq!(unresolved_inodes, vec![(META, 3), (InodeKey { dev: 65024, ino: 77 }, 1)]);
        assert_eq!(files.iter().map(|f| f.path.to_str().unwrap()).collect::<Vec<_>>(), vec!["/b-new", "/a"]);
        assert_eq!(files[0].ranges, vec![used(0, 2, 1)]);
        assert_eq!(files[1].ranges, vec![used(8, 2, 3), used(0, 2, 4)]);
        assert_eq!(files[1].identity, id(K1, 40960));
        assert_eq!(unresolved, Unresolved { inodes: 2, pages: 4 });
    }

    #[test]
    fn empty_files_are_dropped() {
        let mut r = PathResolver::new();
        r.learn(K1, "/a");
        let Assembly { files, unresolved, .. } = assemble_files(vec![(K1, vec![used(10, 5, 0)])], &r, 4096, fake_fs);
        assert!(files.is_empty());
        assert_eq!(unresolved, Unresolved::default());
        assert_eq!(pages_in(0, 4096), 0);
        assert_eq!(pages_in(1, 4096), 1);
        assert_eq!(pages_in(8192, 4096), 2);
    }
}
