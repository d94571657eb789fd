//! The file-access context model: which files a workload opens next, learned from the order in
//! which its runs opened files (Kroeger and Long's partitioned context model, extended to
//! predict sequences several opens ahead), each predicted file with the ranges its runs read.
//!
//! Owns learning from opens and reads, the bounds (pruning by count and age under hard caps on
//! nodes per partition, per workload and in all), prediction with confidence, the explanation
//! of what was learned, and the record it is persisted as. It must not read clocks, files or the
//! kernel: the caller hands in paths, identities, page ranges and the time. Pure.
//!
//! Unlike `predict::context` (a context model over application *launches*, with decayed counts),
//! this one models the *files* of one workload, with integer counts Kroeger's way.
//!
//! # The model
//! - A *workload* is one run of an application and all its descendants, keyed by the caller's
//!   key (the daemon: the application key of the run's root process, so a `make` build and its
//!   hundreds of compilers, assemblers and linkers are one sequence). Several runs of the same
//!   key may interleave: each has its own [`RunCursor`].
//! - Its *sequence* is the files the run opens, in the order of their FIRST open in the run,
//!   preceded by a start marker. Re-opens within a run are skipped: the page cache already holds
//!   what the run read once, so they are never worth prefetching, and leaving them out makes a
//!   build's sequence (a source, its headers the first time, the next source...) regular.
//! - A file is identified by its absolute path (a build rewrites its outputs and an editor
//!   replaces what it saves, under new inode numbers); the device and inode last seen are kept,
//!   and a new inode under the same path forgets the ranges learned for the old one (unless the
//!   run reports only each file's first page access, which could not learn them again:
//!   [`FileContextModel::open_first_reads`]).
//! - The trie holds every sequence of 1 to `max_order + 1` consecutive files seen (`max_order`
//!   at most [`MAX_ORDER`]), each node counting how often it was seen. The confidence that `x`
//!   follows context `c` is `count(c x) / count(c)`. No child counts more than its parent.
//! - The trie is *partitioned* by the first file of each sequence: a partition holds at most
//!   `partition_nodes` nodes; when a new node does not fit, every count in the partition is
//!   halved and nodes that reach zero go (with their subtrees), Kroeger's way of keeping what is
//!   frequent. Nodes unseen for `max_age_ms` go; beyond `app_nodes` nodes in a workload, or
//!   `total_nodes` in all, the least recently seen partitions go. A file is kept while a node
//!   names it.
//! - Prediction follows the trie from the longest context of the run's latest files that the
//!   trie knows, several opens deep (each step's context is the previous context and the
//!   predicted file), multiplying confidences, and leaves out files the run already opened.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use super::learn::LearningHistory;
use super::range::{PageRange, RangeSet};

/// The longest context (in files) a model can be built with.
pub const MAX_ORDER: usize = 3;

/// Longest sequence held in the trie: a context and the file that followed it.
const DEPTH: usize = MAX_ORDER + 1;

/// A node's sequence, padded with [`NONE`]: padding sorts before every symbol, so a sequence's
/// extensions follow it in key order.
type Key = [u32; DEPTH];

/// Padding of a [`Key`].
const NONE: u32 = 0;
/// The start of a run (first symbol of the sequences that begin a run).
const START: u32 = 1;
/// The first symbol given to a file.
const FIRST_FILE: u32 = 2;

/// Files a run remembers having opened (to skip re-opens); beyond it, it forgets and starts over.
const MAX_RUN_FILES: usize = 65_536;

/// How big a model may grow and what it learns.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FileContextSettings {
    /// Longest context, in files (1 to [`MAX_ORDER`]).
    pub max_order: usize,
    /// Nodes per partition (the sequences that begin with one file).
    pub partition_nodes: usize,
    /// Nodes per workload.
    pub app_nodes: usize,
    /// Nodes in all workloads together.
    pub total_nodes: usize,
    /// Nodes (and so files) unseen for longer are dropped, in milliseconds.
    pub max_age_ms: u64,
    /// Ranges learned per file (beyond it the closest ones merge, the pages between them
    /// learned too).
    pub max_ranges_per_file: usize,
    /// Pages learned per file (the first ones read): 128 MiB by default, as much as a large
    /// library mapped by a build's tools (LLVM's, 105 MiB) or a compiler's code needs.
    pub max_pages_per_file: u64,
    /// Longer paths are not learned.
    pub max_path_bytes: usize,
}

impl Default for FileContextSettings {
    fn default() -> Self {
        FileContextSettings {
            max_order: MAX_ORDER,
            partition_nodes: 64,
            app_nodes: 8_192,
            total_nodes: 32_768,
            max_age_ms: 60 * 24 * 3600 * 1000,
            max_ranges_per_file: 16,
            max_pages_per_file: 32_768,
            max_path_bytes: 1_024,
        }
    }
}

impl FileContextSettings {
    /// The settings with every limit brought into its valid range (order 1 to [`MAX_ORDER`],
    /// partition ≥ 2 nodes, workload ≥ partition, total ≥ workload).
    pub fn normalized(self) -> Self {
        let partition_nodes = self.partition_nodes.max(2);
        let app_nodes = self.app_nodes.max(partition_nodes);
        FileContextSettings {
            max_order: self.max_order.clamp(1, MAX_ORDER),
            partition_nodes,
            app_nodes,
            total_nodes: self.total_nodes.max(app_nodes),
            max_age_ms: self.max_age_ms.max(1),
            max_ranges_per_file: self.max_ranges_per_file.max(1),
            max_pages_per_file: self.max_pages_per_file.max(1),
            max_path_bytes: self.max_path_bytes.max(1),
        }
    }
}

/// One open of a file by a run, as the kernel reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileOpen<'a> {
    /// Absolute path.
    pub path: &'a str,
    /// Device number (`st_dev`).
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
}

/// What became of one open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenLearned {
    /// The run's first open of the file: learned.
    First,
    /// The run opened the file before: skipped.
    Again,
    /// Not learnable (path too long or empty): skipped.
    Skipped,
}

/// A trie node: how often its sequence was seen, and when last.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Node {
    count: u32,
    /// Seconds since the epoch.
    seen_s: u32,
}

/// What is known of one file.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FileEntry {
    path: String,
    dev: u64,
    ino: u64,
    /// The first pages runs read (capped).
    ranges: RangeSet,
    /// Nodes whose sequence names the file (once per position).
    refs: u32,
}

/// One workload's learned sequences.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AppFileContext {
    /// Identifies this model's symbols: a cursor of another generation knows none of them.
    generation: u64,
    next_id: u32,
    files: BTreeMap<u32, FileEntry>,
    ids: BTreeMap<String, u32>,
    nodes: BTreeMap<Key, Node>,
    /// Nodes per partition (first symbol).
    partitions: BTreeMap<u32, u32>,
    runs: u64,
    opens: u64,
    seen_s: u32,
    /// Times counts went down or nodes went (halving, ageing, eviction).
    prunes: u64,
    /// How the workload's runs were learned, for the follow policy (whole or sampled runs): kept
    /// with the model so that a restart does not follow a settled workload whole again.
    learning: LearningHistory,
}

/// Where one run of a workload is in its sequence. Held by the caller, one per run.
#[derive(Clone, Debug)]
pub struct RunCursor {
    app: String,
    generation: u64,
    started: bool,
    /// The run's latest symbols, oldest first (at most [`MAX_ORDER`]), from its start marker.
    history: Vec<u32>,
    /// Files the run opened.
    opened: HashSet<u32>,
}

impl RunCursor {
    /// The workload the run belongs to.
    pub fn app(&self) -> &str {
        &self.app
    }
}

/// A file predicted to be opened by a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FilePrediction {
    /// Absolute path.
    pub path: String,
    /// Device number (`st_dev`) the file was last seen on: a prefetch checks the path still
    /// names that inode (a file replaced since describes other pages).
    pub dev: u64,
    /// Inode number last seen under `path`.
    pub ino: u64,
    /// In how many opens it is expected (1: the next one).
    pub distance: u32,
    /// Probability the run opens it then, from the learned counts (product along the path).
    pub confidence: f64,
    /// The pages runs read first (page indices), in ascending order.
    pub ranges: Vec<PageRange>,
    /// Pages in `ranges`.
    pub pages: u64,
}

/// A learned sequence, for explanations.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LearnedSequence {
    /// The files in order; `(start)` for the start of a run.
    pub files: Vec<String>,
    /// How often it was seen (halved when its partition filled).
    pub count: u32,
    /// `count` over its context's count: how often the context went on with the last file.
    pub confidence: f64,
}

/// Sizes of one workload's model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FileContextStats {
    /// Trie nodes.
    pub nodes: usize,
    /// Partitions (files, and the start of a run, that begin a sequence).
    pub partitions: usize,
    /// Files known.
    pub files: usize,
    /// Pages learned over all files.
    pub pages: u64,
    /// Runs that opened a file, learned.
    pub runs: u64,
    /// First opens learned.
    pub opens: u64,
    /// Estimated heap bytes.
    pub bytes: usize,
}

fn seconds(now_ms: u64) -> u32 {
    u32::try_from(now_ms / 1000).unwrap_or(u32::MAX)
}

fn key_len(key: &Key) -> usize {
    key.iter().position(|&s| s == NONE).unwrap_or(DEPTH)
}

fn key_of(seq: &[u32]) -> Key {
    let mut key = [NONE; DEPTH];
    key[..seq.len()].copy_from_slice(seq);
    key
}

fn parent_of(key: &Key) -> Option<Key> {
    let len = key_len(key);
    (len > 1).then(|| {
        let mut p = *key;
        p[len - 1] = NONE;
        p
    })
}

/// A context's count and its successors with theirs.
type Successors = (u32, Vec<(u32, u32)>);

/// Estimated heap bytes of one trie node (key and counts, B-tree slack taken as twice).
const NODE_BYTES: usize = 2 * (size_of::<Key>() + size_of::<Node>());
/// Estimated heap bytes of one file besides its path and ranges (its entry, its index entry).
const FILE_BYTES: usize = 2 * (size_of::<u32>() + size_of::<FileEntry>()) + 2 * (size_of::<String>() + size_of::<u32>());

impl AppFileContext {
    fn new(generation: u64) -> Self {
        AppFileContext { generation, next_id: FIRST_FILE, ..Default::default() }
    }

    /// How the workload's runs were learned.
    pub fn learning(&self) -> LearningHistory {
        self.learning
    }

    /// Sizes of the model.
    pub fn stats(&self) -> FileContextStats {
        FileContextStats {
            nodes: self.nodes.len(),
            partitions: self.partitions.len(),
            files: self.files.len(),
            pages: self.files.values().map(|f| f.ranges.page_count()).sum(),
            runs: self.runs,
            opens: self.opens,
            bytes: self.bytes(),
        }
    }

    /// Nodes in the trie.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Estimated heap bytes the model holds.
    pub fn bytes(&self) -> usize {
        let files: usize = self.files.values().map(|f| FILE_BYTES + 2 * f.path.len() + size_of_val(f.ranges.ranges())).sum();
        self.nodes.len() * NODE_BYTES + files + self.partitions.len() * 2 * 2 * size_of::<u32>()
    }

    /// When the model last learned something, in milliseconds since the epoch (to a second).
    pub fn last_seen_ms(&self) -> u64 {
        u64::from(self.seen_s) * 1000
    }

    fn name(&self, symbol: u32) -> String {
        if symbol == START {
            "(start)".to_string()
        } else {
            self.files.get(&symbol).map_or_else(|| "?".into(), |f| f.path.clone())
        }
    }

    fn partition_size(&self, first: u32) -> usize {
        self.partitions.get(&first).copied().unwrap_or(0) as usize
    }

    fn insert_node(&mut self, key: Key, node: Node) {
        if self.nodes.insert(key, node).is_none() {
            *self.partitions.entry(key[0]).or_default() += 1;
            for s in &key[..key_len(&key)] {
                if let Some(f) = self.files.get_mut(s) {
                    f.refs += 1;
                }
            }
        }
    }

    /// Removes the nodes `doomed` selects and every node below them; files no node names go.
    /// Returns how many nodes went.
    fn remove_nodes(&mut self, doomed: impl Fn(&Key, &Node) -> bool) -> usize {
        self.remove_nodes_in([NONE; DEPTH]..=[u32::MAX; DEPTH], doomed)
    }

    /// [`Self::remove_nodes`] over the keys in `range` only (their subtrees lie in it).
    fn remove_nodes_in(&mut self, range: std::ops::RangeInclusive<Key>, doomed: impl Fn(&Key, &Node) -> bool) -> usize {
        let mut gone: HashSet<Key> = HashSet::new();
        // Key order puts every sequence before its extensions.
        for (key, node) in self.nodes.range(range) {
            if doomed(key, node) || (!gone.is_empty() && parent_of(key).is_some_and(|p| gone.contains(&p))) {
                gone.insert(*key);
            }
        }
        for key in &gone {
            self.nodes.remove(key);
            if let Some(n) = self.partitions.get_mut(&key[0]) {
                *n -= 1;
                if *n == 0 {
                    self.partitions.remove(&key[0]);
                }
            }
            for s in &key[..key_len(key)] {
                let drop = match self.files.get_mut(s) {
                    Some(f) => {
                        f.refs = f.refs.saturating_sub(1);
                        f.refs == 0
                    }
                    None => false,
                };
                if drop && let Some(f) = self.files.remove(s) {
                    self.ids.remove(&f.path);
                }
            }
        }
        if !gone.is_empty() {
            self.prunes += 1;
        }
        gone.len()
    }

    /// Halves every count of the partition that begins with `first`; nodes reaching zero go.
    fn halve_partition(&mut self, first: u32) {
        let lo = key_of(&[first]);
        let mut hi = [u32::MAX; DEPTH];
        hi[0] = first;
        for node in self.nodes.range_mut(lo..=hi).map(|(_, n)| n) {
            node.count /= 2;
        }
        self.prunes += 1;
        self.remove_nodes_in(lo..=hi, |_, n| n.count == 0);
    }

    /// Counts one more sighting of `key` (whose parent exists), making room in its partition
    /// if it is new. False when making room took its parent away: the caller stops there.
    fn bump(&mut self, key: Key, now_s: u32, s: &FileContextSettings) -> bool {
        let parent = parent_of(&key);
        let cap = match parent {
            None => Some(u32::MAX),
            Some(p) => self.nodes.get(&p).map(|p| p.count),
        };
        if let Some(node) = self.nodes.get_mut(&key) {
            // Never above the parent, never down (a count only goes down when pruned).
            node.count = node.count.saturating_add(1).min(cap.unwrap_or(u32::MAX)).max(node.count);
            node.seen_s = node.seen_s.max(now_s);
            return true;
        }
        while self.partition_size(key[0]) >= s.partition_nodes {
            self.halve_partition(key[0]);
        }
        let cap = match parent {
            None => u32::MAX,
            Some(p) => match self.nodes.get(&p) {
                Some(p) => p.count,
                None => return false,
            },
        };
        self.insert_node(key, Node { count: 1.min(cap), seen_s: now_s });
        true
    }

    /// The symbol of a file, made when new; a new inode under the path forgets its ranges unless
    /// `keep_ranges` (see [`FileContextModel::open_first_reads`]).
    fn intern(&mut self, open: &FileOpen<'_>, keep_ranges: bool) -> Option<u32> {
        if let Some(&id) = self.ids.get(open.path) {
            if let Some(f) = self.files.get_mut(&id)
                && (f.dev, f.ino) != (open.dev, open.ino)
            {
                f.dev = open.dev;
                f.ino = open.ino;
                if !keep_ranges {
                    f.ranges = RangeSet::new();
                }
            }
            return Some(id);
        }
        if self.next_id == u32::MAX {
            return None;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.ids.insert(open.path.to_string(), id);
        self.files.insert(
            id,
            FileEntry { path: open.path.to_string(), dev: open.dev, ino: open.ino, ranges: RangeSet::new(), refs: 0 },
        );
        Some(id)
    }

    /// Learns that the run at `history` (oldest first, from its start marker) opened `id`.
    fn learn(&mut self, history: &[u32], id: u32, now_s: u32, s: &FileContextSettings) {
        // A context is usable from its newest symbol back to the first one the model still knows.
        let known = history.iter().rposition(|h| *h != START && !self.files.contains_key(h)).map_or(0, |i| i + 1);
        let context = &history[known..];
        let longest = context.len().min(s.max_order);
        for k in 0..=longest {
            let mut seq = context[context.len() - k..].to_vec();
            seq.push(id);
            if !self.bump(key_of(&seq), now_s, s) {
                break;
            }
        }
        self.opens += 1;
        self.seen_s = self.seen_s.max(now_s);
    }

    /// Drops the nodes unseen since `oldest_s`.
    fn forget_older_than(&mut self, oldest_s: u32) -> usize {
        self.remove_nodes(|_, n| n.seen_s < oldest_s)
    }

    /// The oldest partition: (root's last sighting, first symbol, nodes).
    fn partitions_by_age(&self) -> Vec<(u32, u32, u32)> {
        self.partitions.iter().map(|(&first, &n)| (self.nodes.get(&key_of(&[first])).map_or(0, |r| r.seen_s), first, n)).collect()
    }

    fn evict_partitions(&mut self, firsts: &HashSet<u32>) -> usize {
        self.remove_nodes(|k, _| firsts.contains(&k[0]))
    }

    /// Removes the least recently seen partitions until at most `target` nodes are left.
    fn shrink_to(&mut self, target: usize) {
        let mut ages = self.partitions_by_age();
        ages.sort();
        let mut doomed = HashSet::new();
        let mut left = self.nodes.len();
        for (_, first, n) in ages {
            if left <= target {
                break;
            }
            doomed.insert(first);
            left -= n as usize;
        }
        self.evict_partitions(&doomed);
    }

    /// Successors of `context` (a node's sequence) with their counts, and the context's count.
    fn successors(&self, context: &[u32]) -> Option<Successors> {
        let node = self.nodes.get(&key_of(context))?;
        let k = context.len();
        if k >= DEPTH {
            return None;
        }
        let lo = key_of(context);
        let mut hi_seq = context.to_vec();
        let last = hi_seq.len() - 1;
        hi_seq[last] = hi_seq[last].saturating_add(1);
        let hi = key_of(&hi_seq);
        let children: Vec<(u32, u32)> = self
            .nodes
            .range(lo..hi)
            .filter(|(key, _)| key_len(key) == k + 1 && key[..k] == *context)
            .map(|(key, n)| (key[k], n.count))
            .collect();
        (!children.is_empty() && node.count > 0).then_some((node.count, children))
    }

    /// The longest suffix of `history` (at most `max_order` long) the trie has successors for.
    fn context_for<'h>(&self, history: &'h [u32], max_order: usize) -> Option<(&'h [u32], Successors)> {
        let longest = history.len().min(max_order);
        (1..=longest).rev().find_map(|k| {
            let c = &history[history.len() - k..];
            self.successors(c).map(|found| (c, found))
        })
    }

    /// Files a run at `history` is expected to open within `depth` opens, leaving out `opened`,
    /// at confidence `min_confidence` or more, best `max_files` (nearest first, then likeliest).
    /// `pending`: the run's own latest open is already counted in its contexts, not yet followed
    /// by anything; it is left out of their counts.
    #[allow(clippy::too_many_arguments)]
    fn predict_after(
        &self,
        history: &[u32],
        pending: bool,
        opened: &HashSet<u32>,
        depth: usize,
        min_confidence: f64,
        max_files: usize,
        max_order: usize,
    ) -> Vec<FilePrediction> {
        let mut best: BTreeMap<u32, (u32, f64)> = BTreeMap::new();
        let mut frontier: Vec<(Vec<u32>, f64)> = vec![(history.to_vec(), 1.0)];
        let beam = max_files.max(1);
        for distance in 1..=depth as u32 {
            let mut next: Vec<(Vec<u32>, f64)> = Vec::new();
            for (h, p) in &frontier {
                let Some((context, (n, children))) = self.context_for(h, max_order) else { continue };
                let n = if distance == 1 && pending { n.saturating_sub(1).max(1) } else { n };
                for (x, c) in children {
                    let q = p * (f64::from(c) / f64::from(n)).min(1.0);
                    if q < min_confidence || x == START {
                        continue;
                    }
                    let mut h2 = context.to_vec();
                    h2.push(x);
                    if h2.len() > max_order {
                        h2.remove(0);
                    }
                    next.push((h2, q));
                    if opened.contains(&x) || history.contains(&x) {
                        continue;
                    }
                    let e = best.entry(x).or_insert((distance, q));
                    if q > e.1 {
                        e.1 = q;
                    }
                }
            }
            next.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            next.truncate(beam);
            if next.is_empty() {
                break;
            }
            frontier = next;
        }
        let mut out: Vec<FilePrediction> = best
            .into_iter()
            .filter_map(|(id, (distance, confidence))| {
                let f = self.files.get(&id)?;
                Some(FilePrediction {
                    path: f.path.clone(),
                    dev: f.dev,
                    ino: f.ino,
                    distance,
                    confidence,
                    ranges: f.ranges.ranges().to_vec(),
                    pages: f.ranges.page_count(),
                })
            })
            .collect();
        out.sort_by(|a, b| {
            a.distance.cmp(&b.distance).then(b.confidence.total_cmp(&a.confidence)).then_with(|| a.path.cmp(&b.path))
        });
        out.truncate(max_files);
        out
    }

    /// The files a run opens, in learned order, at most `max_files`: from the start of a run,
    /// at each step the likeliest next file of the longest context the trie knows that is not
    /// on the way already (Kroeger's most likely path, each file once); where the path ends, the
    /// files it did not reach follow in the order they were first seen. Each file's
    /// `confidence` is its step's (1 for those after the path), `distance` its place.
    pub fn learned_sequence(&self, max_files: usize, max_order: usize) -> Vec<FilePrediction> {
        let mut order: Vec<(u32, f64)> = Vec::new();
        let mut on_way: HashSet<u32> = HashSet::new();
        let mut history = vec![START];
        while order.len() < max_files {
            let longest = history.len().min(max_order.max(1));
            let step = (1..=longest).rev().find_map(|k| {
                let (n, children) = self.successors(&history[history.len() - k..])?;
                let (x, c) = children
                    .into_iter()
                    .filter(|(x, _)| *x != START && !on_way.contains(x))
                    .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))?;
                Some((x, (f64::from(c) / f64::from(n)).min(1.0)))
            });
            let Some((x, confidence)) = step else { break };
            on_way.insert(x);
            order.push((x, confidence));
            history.push(x);
            if history.len() > MAX_ORDER {
                history.remove(0);
            }
        }
        // Symbols are given in the order files were first seen.
        for &id in self.files.keys() {
            if order.len() >= max_files {
                break;
            }
            if on_way.insert(id) {
                order.push((id, 1.0));
            }
        }
        order
            .into_iter()
            .filter_map(|(id, confidence)| self.files.get(&id).map(|f| (f, confidence)))
            .enumerate()
            .map(|(i, (f, confidence))| FilePrediction {
                path: f.path.clone(),
                dev: f.dev,
                ino: f.ino,
                distance: u32::try_from(i + 1).unwrap_or(u32::MAX),
                confidence,
                ranges: f.ranges.ranges().to_vec(),
                pages: f.ranges.page_count(),
            })
            .collect()
    }

    /// What a run is expected to open first (the first `depth` opens).
    pub fn predict_start(&self, depth: usize, min_confidence: f64, max_files: usize) -> Vec<FilePrediction> {
        self.predict_after(&[START], false, &HashSet::new(), depth, min_confidence, max_files, MAX_ORDER)
    }

    /// The `n` most often seen sequences of two files or more (longest first among equals).
    pub fn top_sequences(&self, n: usize) -> Vec<LearnedSequence> {
        let mut seqs: Vec<(&Key, &Node)> = self.nodes.iter().filter(|(k, _)| key_len(k) >= 2).collect();
        seqs.sort_by(|a, b| b.1.count.cmp(&a.1.count).then(key_len(b.0).cmp(&key_len(a.0))).then(a.0.cmp(b.0)));
        seqs.into_iter()
            .take(n)
            .map(|(k, node)| {
                let parent = parent_of(k).and_then(|p| self.nodes.get(&p)).map_or(0, |p| p.count);
                LearnedSequence {
                    files: k[..key_len(k)].iter().map(|s| self.name(*s)).collect(),
                    count: node.count,
                    confidence: if parent > 0 { f64::from(node.count) / f64::from(parent) } else { 0.0 },
                }
            })
            .collect()
    }

    /// Learns pages `range` of file `id` as read, within the per-file caps: beyond the range
    /// cap the closest ranges merge (the pages between them are learned too: a prefetch reads a
    /// little more, in fewer requests, rather than leave out what a program scattered over a
    /// large file, a compiler's or a library's mapped code); a read that would take the file
    /// past its page cap is learned only as far as the cap.
    fn learn_read(&mut self, id: u32, range: PageRange, s: &FileContextSettings) {
        let Some(f) = self.files.get_mut(&id) else { return };
        if f.ranges.page_count() >= s.max_pages_per_file || range.is_empty() {
            return;
        }
        for piece in f.ranges.missing_from(range) {
            let room = s.max_pages_per_file.saturating_sub(f.ranges.page_count());
            if room == 0 {
                break;
            }
            let mut next = f.ranges.clone();
            next.insert(PageRange::new(piece.start, piece.len.min(room)));
            next.fill_smallest_gaps(s.max_ranges_per_file);
            if next.page_count() > s.max_pages_per_file {
                break;
            }
            f.ranges = next;
        }
    }
}

/// The models of every workload, within the bounds of its settings.
#[derive(Clone, Debug)]
pub struct FileContextModel {
    settings: FileContextSettings,
    apps: BTreeMap<String, AppFileContext>,
    nodes: usize,
    generations: u64,
    prunes: u64,
}

impl Default for FileContextModel {
    fn default() -> Self {
        FileContextModel::new(FileContextSettings::default())
    }
}

impl FileContextModel {
    /// An empty model.
    pub fn new(settings: FileContextSettings) -> Self {
        FileContextModel { settings: settings.normalized(), apps: BTreeMap::new(), nodes: 0, generations: 0, prunes: 0 }
    }

    /// The settings in force (normalized).
    pub fn settings(&self) -> &FileContextSettings {
        &self.settings
    }

    /// The model of workload `app`, if it learned anything.
    pub fn app(&self, app: &str) -> Option<&AppFileContext> {
        self.apps.get(app)
    }

    /// Records how workload `app`'s runs were learned; false when the model holds no such
    /// workload (nothing to keep it with).
    pub fn set_learning(&mut self, app: &str, learning: LearningHistory) -> bool {
        match self.apps.get_mut(app) {
            Some(m) => {
                m.learning = learning;
                true
            }
            None => false,
        }
    }

    /// Every workload's model, by key.
    pub fn apps(&self) -> impl Iterator<Item = (&str, &AppFileContext)> {
        self.apps.iter().map(|(k, a)| (k.as_str(), a))
    }

    /// Nodes over all workloads.
    pub fn node_count(&self) -> usize {
        self.nodes
    }

    /// Estimated heap bytes of all workloads' models.
    pub fn bytes(&self) -> usize {
        self.apps.iter().map(|(k, a)| a.bytes() + 2 * (k.len() + size_of::<String>() + size_of::<AppFileContext>())).sum()
    }

    /// How many times something was pruned (halved, aged out or evicted): counts only go down
    /// when this moves.
    pub fn prunes(&self) -> u64 {
        self.prunes
    }

    /// A cursor for a new run of workload `app`.
    pub fn start_run(&self, app: &str) -> RunCursor {
        RunCursor {
            app: app.to_string(),
            generation: self.apps.get(app).map_or(0, |a| a.generation),
            started: false,
            history: Vec::new(),
            opened: HashSet::new(),
        }
    }

    fn recount(&mut self) {
        self.nodes = self.apps.values().map(|a| a.nodes.len()).sum();
    }

    /// Learns one open by the run at `cursor`, at `now_ms` (milliseconds since the epoch).
    pub fn open(&mut self, cursor: &mut RunCursor, open: &FileOpen<'_>, now_ms: u64) -> OpenLearned {
        self.learn_open(cursor, open, now_ms, false)
    }

    /// Learns one open as [`Self::open`] does, by a run whose reads are known only by their first
    /// page access in each file (a sampled run): a new inode under the path keeps the ranges
    /// learned for the old one, which such a run could not learn again (a file rewritten, an
    /// object rebuilt or a source edited, mostly holds the same pages), instead of leaving the
    /// file one page until a run is followed whole again.
    pub fn open_first_reads(&mut self, cursor: &mut RunCursor, open: &FileOpen<'_>, now_ms: u64) -> OpenLearned {
        self.learn_open(cursor, open, now_ms, true)
    }

    fn learn_open(&mut self, cursor: &mut RunCursor, open: &FileOpen<'_>, now_ms: u64, keep_ranges: bool) -> OpenLearned {
        if open.path.is_empty() || open.path.len() > self.settings.max_path_bytes {
            return OpenLearned::Skipped;
        }
        let s = self.settings;
        let now_s = seconds(now_ms);
        if !self.apps.contains_key(&cursor.app) {
            self.generations += 1;
            self.apps.insert(cursor.app.clone(), AppFileContext::new(self.generations));
        }
        let Some(app) = self.apps.get_mut(&cursor.app) else { return OpenLearned::Skipped };
        if cursor.generation != app.generation {
            // The workload's model was dropped and made anew since the run began: its symbols
            // name other files now.
            cursor.generation = app.generation;
            cursor.history.clear();
            cursor.opened.clear();
            cursor.started = false;
        }
        let prunes_before = app.prunes;
        if !cursor.started {
            cursor.started = true;
            app.forget_older_than(now_s.saturating_sub(seconds(s.max_age_ms)));
            app.bump(key_of(&[START]), now_s, &s);
            app.runs += 1;
            cursor.history = vec![START];
        }
        let Some(id) = app.intern(open, keep_ranges) else {
            return OpenLearned::Skipped;
        };
        if !cursor.opened.insert(id) {
            return OpenLearned::Again;
        }
        if cursor.opened.len() > MAX_RUN_FILES {
            cursor.opened.clear();
            cursor.opened.insert(id);
        }
        app.learn(&cursor.history, id, now_s, &s);
        cursor.history.push(id);
        if cursor.history.len() > MAX_ORDER {
            cursor.history.remove(0);
        }
        if app.nodes.len() > s.app_nodes {
            app.shrink_to(s.app_nodes - s.app_nodes / 16);
        }
        let pruned = app.prunes != prunes_before;
        self.recount();
        if self.nodes > s.total_nodes {
            self.evict_globally();
        } else if pruned {
            self.prunes += 1;
        }
        OpenLearned::First
    }

    /// Learns that the run at `cursor` read pages `range` of `path` (a file it opened).
    pub fn read(&mut self, cursor: &RunCursor, path: &str, range: PageRange) {
        let s = self.settings;
        let Some(app) = self.apps.get_mut(&cursor.app) else { return };
        if app.generation != cursor.generation {
            return;
        }
        let Some(&id) = app.ids.get(path) else { return };
        if cursor.opened.contains(&id) {
            app.learn_read(id, range, &s);
        }
    }

    /// Files the run at `cursor` is expected to open within `depth` opens, with confidence
    /// `min_confidence` or more, at most `max_files` (nearest first, then likeliest), without
    /// those it opened already.
    pub fn predict(&self, cursor: &RunCursor, depth: usize, min_confidence: f64, max_files: usize) -> Vec<FilePrediction> {
        let Some(app) = self.apps.get(&cursor.app) else { return Vec::new() };
        if cursor.generation != app.generation || !cursor.started {
            return app.predict_after(
                &[START],
                false,
                &HashSet::new(),
                depth,
                min_confidence,
                max_files,
                self.settings.max_order,
            );
        }
        app.predict_after(&cursor.history, true, &cursor.opened, depth, min_confidence, max_files, self.settings.max_order)
    }

    /// The files a run of workload `app` opens, in learned order, at most `max_files` (see
    /// [`AppFileContext::learned_sequence`]); none when nothing was learned of it.
    pub fn learned_sequence(&self, app: &str, max_files: usize) -> Vec<FilePrediction> {
        self.apps.get(app).map_or_else(Vec::new, |a| a.learned_sequence(max_files, self.settings.max_order))
    }

    /// Drops what was unseen for longer than the settings' age at `now_ms`, and workloads left
    /// empty.
    pub fn prune(&mut self, now_ms: u64) {
        let oldest = seconds(now_ms).saturating_sub(seconds(self.settings.max_age_ms));
        let mut removed = 0;
        for app in self.apps.values_mut() {
            removed += app.forget_older_than(oldest);
        }
        let before = self.apps.len();
        self.apps.retain(|_, a| !a.nodes.is_empty());
        if removed > 0 || self.apps.len() != before {
            self.prunes += 1;
        }
        self.recount();
    }

    /// Removes the least recently seen partitions of all workloads until the total is back
    /// under 15/16 of its cap; workloads left empty go.
    fn evict_globally(&mut self) {
        let target = self.settings.total_nodes - self.settings.total_nodes / 16;
        let mut all: Vec<(u32, String, u32, u32)> = Vec::new();
        for (key, app) in &self.apps {
            for (seen, first, n) in app.partitions_by_age() {
                all.push((seen, key.clone(), first, n));
            }
        }
        all.sort();
        let mut doomed: BTreeMap<String, HashSet<u32>> = BTreeMap::new();
        let mut left = self.nodes;
        for (_, app, first, n) in all {
            if left <= target {
                break;
            }
            doomed.entry(app).or_default().insert(first);
            left -= n as usize;
        }
        for (key, firsts) in doomed {
            if let Some(app) = self.apps.get_mut(&key) {
                app.evict_partitions(&firsts);
            }
        }
        self.apps.retain(|_, a| !a.nodes.is_empty());
        self.prunes += 1;
        self.recount();
    }

    /// Forgets workload `app`; true when it was known.
    pub fn forget(&mut self, app: &str) -> bool {
        let known = self.apps.remove(app).is_some();
        self.recount();
        known
    }

    /// Adds a workload's model read back from its record (replacing any), within the bounds.
    pub fn insert(&mut self, app: &str, record: &FileContextRecord) {
        self.generations += 1;
        let model = AppFileContext::from_record(record, &self.settings, self.generations);
        if model.nodes.is_empty() {
            self.apps.remove(app);
        } else {
            self.apps.insert(app.to_string(), model);
        }
        self.recount();
        if self.nodes > self.settings.total_nodes {
            self.evict_globally();
        }
    }
}

/// One file of a persisted model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    /// The file's symbol in the record's sequences.
    pub id: u32,
    /// Absolute path.
    pub path: String,
    /// Device number last seen.
    pub dev: u64,
    /// Inode number last seen.
    pub ino: u64,
    /// Pages learned, `[start, len]` each.
    pub ranges: Vec<[u64; 2]>,
}

/// A workload's model as persisted: its files and its trie nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileContextRecord {
    /// Runs learned.
    pub runs: u64,
    /// First opens learned.
    pub opens: u64,
    /// The next symbol a new file gets.
    pub next_id: u32,
    /// Files.
    pub files: Vec<FileRecord>,
    /// Nodes: the sequence (1 = the start of a run, other numbers files' ids), the count and
    /// the last sighting in seconds since the epoch.
    pub nodes: Vec<(Vec<u32>, u32, u32)>,
    /// How its runs were learned (absent from records saved before it was kept: none).
    #[serde(default)]
    pub learning: LearningHistory,
}

impl AppFileContext {
    /// The record to persist.
    pub fn record(&self) -> FileContextRecord {
        FileContextRecord {
            learning: self.learning,
            runs: self.runs,
            opens: self.opens,
            next_id: self.next_id,
            files: self
                .files
                .iter()
                .map(|(&id, f)| FileRecord {
                    id,
                    path: f.path.clone(),
                    dev: f.dev,
                    ino: f.ino,
                    ranges: f.ranges.ranges().iter().map(|r| [r.start, r.len]).collect(),
                })
                .collect(),
            nodes: self.nodes.iter().map(|(k, n)| (k[..key_len(k)].to_vec(), n.count, n.seen_s)).collect(),
        }
    }

    /// The model a record describes, repaired to hold the invariants under `settings`:
    /// sequences over unknown files, longer than the order allows, without their parent or
    /// with a zero count are dropped, counts are capped by their parent's, and the caps hold.
    fn from_record(record: &FileContextRecord, s: &FileContextSettings, generation: u64) -> Self {
        let mut m = AppFileContext::new(generation);
        m.runs = record.runs;
        m.opens = record.opens;
        m.learning = record.learning;
        for f in &record.files {
            if f.id < FIRST_FILE || f.id == u32::MAX || f.path.is_empty() || f.path.len() > s.max_path_bytes {
                continue;
            }
            if m.files.contains_key(&f.id) || m.ids.contains_key(&f.path) {
                continue;
            }
            m.ids.insert(f.path.clone(), f.id);
            m.files.insert(f.id, FileEntry { path: f.path.clone(), dev: f.dev, ino: f.ino, ranges: RangeSet::new(), refs: 0 });
            for &[start, len] in &f.ranges {
                m.learn_read(f.id, PageRange::new(start, len), s);
            }
        }
        m.next_id = record.next_id.max(m.files.keys().next_back().map_or(FIRST_FILE, |id| id + 1));
        let mut nodes: Vec<&(Vec<u32>, u32, u32)> = record
            .nodes
            .iter()
            .filter(|(seq, count, _)| {
                !seq.is_empty()
                    && seq.len() <= s.max_order + 1
                    && *count > 0
                    && seq.iter().enumerate().all(|(i, x)| (*x == START && i == 0) || (*x != START && m.files.contains_key(x)))
            })
            .collect();
        nodes.sort_by(|a, b| a.0.len().cmp(&b.0.len()).then(a.0.cmp(&b.0)));
        for (seq, count, seen_s) in nodes {
            let key = key_of(seq);
            if m.nodes.contains_key(&key) {
                continue;
            }
            let cap = match parent_of(&key) {
                None => u32::MAX,
                Some(p) => match m.nodes.get(&p) {
                    Some(p) => p.count,
                    None => continue,
                },
            };
            if m.partition_size(key[0]) >= s.partition_nodes {
                continue;
            }
            m.insert_node(key, Node { count: (*count).min(cap), seen_s: *seen_s });
            m.seen_s = m.seen_s.max(*seen_s);
        }
        // Files no sequence names are not kept.
        let unnamed: Vec<u32> = m.files.iter().filter(|(_, f)| f.refs == 0).map(|(id, _)| *id).collect();
        for id in unnamed {
            if let Some(f) = m.files.remove(&id) {
                m.ids.remove(&f.path);
            }
        }
        if m.nodes.len() > s.app_nodes {
            m.shrink_to(s.app_nodes);
        }
        m
    }
}

#[cfg(test)]
mod tests;
