//! Workload runs followed for their file sequence (issue 22): a run is one launch's root process
//! and all its descendants, followed past its launch window for as long as it keeps opening
//! files (bounded), whose first reads of each file feed the file-access context model
//! ([`augur_core::model::file_context`]); after each learned open the model predicts the files
//! the run opens next, and those not yet asked for in this run are handed out to be prefetched.
//!
//! It owns the runs (their processes, the naming of the inodes they read by the path their
//! thread looked up last, what each run asked for), the model in memory, which workloads changed
//! since they were saved, and the bounds: at most [`MAX_RUNS`] followed at once, each for at most
//! [`RUN_MAX_NS`] and [`RUN_MAX_FILES`] files, and ended once no new file was read for
//! [`RUN_QUIET_NS`]. It must not read clocks, files or the kernel: the engine hands in events and
//! times, and the budget and the prefetch itself are the engine's and the loop's.
//!
//! It also decides *how* each run is followed, by the launches' follow policy
//! ([`FollowPolicy`], over each workload's [`LearningHistory`] of runs): a workload's runs are
//! followed whole while its model is still learning (its latest runs opened files the model did
//! not foresee), then one in a while; the others are *sampled* runs, followed for the files they
//! open only (the kernel sends the first page access of each file, which is all the sequence and
//! its prediction need), and a sampled run that opened many files the model did not foresee makes
//! the next runs followed whole again.

use std::collections::{BTreeSet, HashMap, HashSet};

use augur_core::model::file_context::{FileContextModel, FileContextRecord, FileOpen, FilePrediction, OpenLearned, RunCursor};
use augur_core::model::learn::{LaunchNovelty, LearnSettings, LearningHistory};
use augur_core::model::profile::{InodeKey, Lookup, LookupKind};
use augur_core::model::range::PageRange;
use augur_core::model::read_through::ForwardRuns;
use augur_core::model::user::ProcessUser;

use crate::window::FollowPolicy;

/// Runs followed at once, at most: a launch that starts while this many are followed is followed
/// for its launch window only, as before.
pub const MAX_RUNS: usize = 8;
/// A run ends when it read no file new to it for this long (an interactive program waiting,
/// a server idling): following it longer would cost its events and teach nothing.
pub const RUN_QUIET_NS: u64 = 30_000_000_000;
/// A run ends this long after its start at the latest.
pub const RUN_MAX_NS: u64 = 30 * 60 * 1_000_000_000;
/// A run ends after reading this many files new to it (about what the model's default cap of
/// nodes per workload holds of one sequence).
pub const RUN_MAX_FILES: usize = 2_048;
/// After the run's last process exits, its last records still in flight get this long.
const RUN_EXIT_GRACE_NS: u64 = 200_000_000;
/// How many opens ahead a run's next files are prefetched until its reader's rate and the
/// prefetch's are measured (see [`prefetch_depth`]): far enough that the prefetch, at a lower
/// I/O priority than the reader's, keeps ahead of a reader of small files (a smoke run of the
/// reader benchmark at 8 left it reading 40 % of its data itself).
pub const PREFETCH_DEPTH: usize = 32;
/// The fewest opens ahead a measured run is prefetched: its opens come in bursts (a compiler's
/// headers), which a mean time between them hides.
pub const MIN_DEPTH: usize = 8;
/// The most opens ahead a run is prefetched (a disk slower than its reader: the prefetch never
/// rests; the budget still bounds what it loads).
pub const MAX_DEPTH: usize = 256;
/// Files predicted with a lower confidence are not prefetched.
pub const MIN_CONFIDENCE: f64 = 0.3;
/// A run's reader rate is measured once it opened this many files.
const RATE_MIN_FILES: usize = 8;
/// Until measured, the time from a reader's open to its prefetch being handed to the loader.
const DEFAULT_LAG_NS: u64 = 20_000_000;
/// A prefetch's report says how fast the loader reads once it loaded this many pages.
const FETCH_RATE_MIN_PAGES: u64 = 16;
/// A run's whole learned sequence is handed out at its start in pieces of this many files,
/// then twice as many each, up to [`WHOLE_PIECE_MAX`]: the loader starts on the first files
/// at once, not after checking every file's inode.
const WHOLE_PIECE_FIRST: usize = 8;
/// The largest piece of a whole sequence.
const WHOLE_PIECE_MAX: usize = 256;
/// Inodes a run remembers having named (or failed to), at most; beyond it, it forgets them all.
const MAX_NAMED: usize = 65_536;

/// Files predicted for a run, to be prefetched (the engine checks the budget and hands them on).
#[derive(Clone, Debug, PartialEq)]
pub struct FilePrefetch {
    /// The run's root process.
    pub root: u32,
    /// The workload.
    pub app: String,
    /// The user the run is learned for: only files they may read are loaded.
    pub user: ProcessUser,
    /// The files, nearest first: path, the device and inode learned, and the ranges to load.
    pub files: Vec<FilePrediction>,
    /// When (monotonic ns) the open they were predicted after happened (`None` at the run's
    /// start): how long after it they are loaded is what the depth must cover.
    pub after_open_ns: Option<u64>,
}

impl FilePrefetch {
    /// Pages it asks for.
    pub fn pages(&self) -> u64 {
        self.files.iter().map(|f| f.pages).sum()
    }
}

/// How the kernel is to report a run's pages from now ([`WorkloadRuns::reads_to_change`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunReads {
    /// The run's tasks alive.
    pub tasks: Vec<u32>,
    /// Only the first page access of each file (a sampled run), or every page.
    pub first_reads: bool,
    /// Until when (monotonic ns) the pages it reads from disk still count (0: they do not).
    pub disk_until_ns: u64,
}

/// Why a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunEnd {
    /// Its processes exited.
    Exited,
    /// No new file for [`RUN_QUIET_NS`].
    Quiet,
    /// [`RUN_MAX_NS`] or [`RUN_MAX_FILES`] reached.
    Capped,
    /// The daemon stopped.
    Stopped,
}

/// One followed run.
struct Run {
    root: u32,
    user: ProcessUser,
    cursor: RunCursor,
    /// Tasks (threads and processes) of the run, live ones.
    live: HashSet<u32>,
    started_ns: u64,
    last_file_ns: u64,
    all_exited_ns: Option<u64>,
    /// The path each task looked up last, not yet given to an inode.
    last_lookup: HashMap<u32, String>,
    /// Inodes read by the run: the path they were named by, or `None` (not nameable, left out).
    named: HashMap<InodeKey, Option<String>>,
    /// Files asked for in this run.
    asked: HashSet<String>,
    /// Files the model predicted for this run at any confidence and depth asked, with or without
    /// pages: a file the run opens that is not among them is new to what the model foresees.
    foreseen: HashSet<String>,
    files: usize,
    /// Files learned in this run that were not foreseen.
    novel: usize,
    /// When the run learned its latest file (Unix ms).
    learned_ms: u64,
    /// The workload is settled: the run is a sample, to be followed for its opens only.
    sampled: bool,
    /// The kernel was asked to send only the first page access of each file of the run.
    first_reads: bool,
    /// Counted in [`RunCounts::runs_sampled`].
    counted_sampled: bool,
    /// Its launch stopped being followed at the page cap or reading a file through
    /// ([`Self::pages_streamed`]), or it read a file through itself: followed on for the files it
    /// opens only, like a sample.
    streamed: bool,
    /// Its forward runs per file and the pages it used (page accesses only once any was seen:
    /// an insertion of the same page then is no second use), for the read-through rule.
    forward: ForwardRuns,
    pages_used: u64,
    accesses_seen: bool,
    /// Pages of the files asked for in this run (their mean size is what the loader must read
    /// per open).
    asked_pages: u64,
    /// When the run's first learned open happened (monotonic ns).
    first_open_ns: Option<u64>,
    /// Opens learned since the run's last prediction, which reached `last_depth` opens ahead:
    /// the next one is due once less than three quarters of the depth wanted now is left of
    /// that lead (or at an open that was not predicted), not after every open.
    since_predict: usize,
    last_depth: usize,
    /// Learned opens of files asked for before.
    predicted: usize,
    /// Its workload's whole learned sequence was handed out at its start: predicted again only
    /// after an open off it.
    whole: bool,
    /// Pages the run read from disk (page-cache insertions) until `disk_until_ns`, for a launch
    /// replayed only whose profile is judged by them (0: not counted).
    disk_until_ns: u64,
    disk_pages: u64,
}

impl Run {
    /// Mean time between the run's learned opens so far, once it opened enough files.
    fn open_interval_ns(&self) -> Option<u64> {
        let first = self.first_open_ns?;
        (self.files >= RATE_MIN_FILES).then(|| (self.last_file_ns.saturating_sub(first) / (self.files as u64 - 1)).max(1))
    }

    /// Mean pages of the files asked for so far.
    fn mean_pages_asked(&self) -> Option<u64> {
        (!self.asked.is_empty()).then(|| self.asked_pages / self.asked.len() as u64)
    }
}

/// How many opens ahead of its reader a run's files are prefetched: far enough to hide the
/// disk, no further. A file predicted `d` opens ahead is opened `d × interval_ns` later; its
/// prefetch is handed to the loader `lag_ns` after the open it was predicted at and takes
/// `fetch_ns` (its pages at the loader's measured rate), so `d` must exceed
/// `(lag_ns + fetch_ns) / interval_ns`, taken twice over (the reader's rate varies) and within
/// [`MIN_DEPTH`] and [`MAX_DEPTH`]. A loader slower than the reader (`fetch_ns ≥ interval_ns`)
/// can never get ahead: the most, so that it never rests.
pub fn prefetch_depth(interval_ns: u64, fetch_ns: u64, lag_ns: u64) -> usize {
    if fetch_ns >= interval_ns {
        return MAX_DEPTH;
    }
    let lead = lag_ns.saturating_add(fetch_ns).saturating_mul(2);
    usize::try_from(lead.div_ceil(interval_ns.max(1))).unwrap_or(MAX_DEPTH).clamp(MIN_DEPTH, MAX_DEPTH)
}

/// A moving mean: `old` moved a quarter of the way to `sample`.
fn moving_mean(old: Option<u64>, sample: u64) -> u64 {
    match old {
        Some(old) => old - old / 4 + sample / 4,
        None => sample,
    }
}

/// Counters, for `augur status` and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunCounts {
    /// Runs followed past their window.
    pub runs: u64,
    /// Launches not followed as runs because [`MAX_RUNS`] were.
    pub runs_not_followed: u64,
    /// First reads of a file learned by the model.
    pub files_learned: u64,
    /// Files handed out to be prefetched.
    pub files_predicted: u64,
    /// Runs followed for the files they open only (their workload was settled).
    pub runs_sampled: u64,
    /// Runs followed for the files they open only once they or their launch streamed a file, or
    /// their launch reached the page cap ([`WorkloadRuns::pages_streamed`],
    /// [`WorkloadRuns::set_read_through`]).
    pub runs_streamed: u64,
    /// Runs whose files the model did not foresee, that made their workload's next runs followed
    /// whole again.
    pub runs_unsettled: u64,
    /// Runs whose workload's whole learned sequence was handed out at their start.
    pub runs_whole: u64,
    /// Learned opens of a file asked for before (predicted ahead) in their run.
    pub opens_predicted: u64,
    /// Launches of a settled workload not followed as runs: everything their replay wanted was
    /// resident, and nothing had left the page cache since (`DaemonEngine`'s `skips_run`).
    pub runs_skipped_resident: u64,
}

/// The runs followed and the model they feed. See the module documentation.
#[derive(Default)]
pub struct WorkloadRuns {
    model: FileContextModel,
    runs: Vec<Run>,
    /// Task → index-free owner: the root of its run.
    owner: HashMap<u32, u32>,
    pending: Vec<FilePrefetch>,
    changed: BTreeSet<String>,
    counts: RunCounts,
    /// The follow policy and the share of a run's files that may be new for it to be stable;
    /// `None`: every run is followed whole.
    follow: Option<(FollowPolicy, f64)>,
    /// The loader's time per page loaded, moving mean of the file prefetches' reports (ns).
    fetch_ns_per_page: Option<u64>,
    /// How long after the open they follow prefetches are handed to the loader, moving mean (ns).
    lag_ns: Option<u64>,
    /// A run followed whole that reads one file through this far (pages, by the launches' rule:
    /// [`ForwardRuns::reads_through`]) is streamed; 0: never.
    read_through_pages: u64,
}

/// Paths whose files hold nothing to prefetch (no backing disk) or are throwaway (a compiler's
/// `/tmp/cc*.s`): left out of sequences, so they do not break them on every run.
fn learnable(path: &str) -> bool {
    const NOT: [&str; 5] = ["/proc/", "/sys/", "/dev/", "/run/", "/tmp/"];
    path.starts_with('/') && !NOT.iter().any(|p| path.starts_with(p))
}

impl WorkloadRuns {
    /// No run, an empty model.
    pub fn new() -> Self {
        WorkloadRuns::default()
    }

    /// Takes the model loaded from the state (at the start).
    pub fn set_model(&mut self, model: FileContextModel) {
        self.model = model;
    }

    /// A run followed whole whose reads of one file form a forward run of `pages` that is most of
    /// what it used is followed on for the files it opens only, as when its launch stopped so
    /// ([`Self::pages_streamed`]): the launch of a reader the daemon replays but does not follow
    /// never stops, and its run sent a page record for each of a 1 GiB file's 262,144 pages.
    /// 0: never.
    pub fn set_read_through(&mut self, pages: u64) {
        self.read_through_pages = pages;
    }

    /// Follows runs by `policy` (the launches'): whole until a workload's runs are stable (at most
    /// `stable_new_share` of the files they opened not foreseen by the model), then sampled.
    pub fn set_follow(&mut self, policy: FollowPolicy, stable_new_share: f64) {
        self.follow = Some((policy, stable_new_share));
    }

    /// Whether a run of `app` starting at `now_ms` would be a sample ([`Self::sample`]): its
    /// workload is settled. False without a follow policy (every run is followed whole).
    pub fn is_settled(&self, app: &str, now_ms: u64) -> bool {
        let Some((policy, _)) = self.follow else { return false };
        let history = self.model.app(app).map(|m| m.learning()).unwrap_or_default();
        !policy.follows(&history, now_ms)
    }

    /// A launch of a settled workload was not followed as a run ([`RunCounts::runs_skipped_resident`]).
    pub fn skipped_resident(&mut self) {
        self.counts.runs_skipped_resident += 1;
    }

    /// Decides whether the run rooted at `root`, started (or re-keyed to its application) at
    /// `now_ms` (Unix ms), is a sample of a settled workload, to be followed for the files it
    /// opens only ([`Self::reads_to_change`]): by the follow policy over its workload's runs,
    /// until it learned its first file. True when it is a sample.
    pub fn sample(&mut self, root: u32, now_ms: u64) -> bool {
        if self.follow.is_none() {
            return false;
        }
        let Some(i) = self.runs.iter().position(|r| r.root == root) else { return false };
        if self.runs[i].files == 0 {
            self.runs[i].sampled = self.is_settled(self.runs[i].cursor.app(), now_ms);
        }
        self.runs[i].sampled
    }

    /// The runs whose pages the kernel must send otherwise from now: a sampled run is followed
    /// for the first read of each file only while none of its tasks is in a launch followed to
    /// learn its start (`learning(tasks)`), else for every page. Each with its live tasks (for the
    /// kernel), whether only first reads are wanted, and until when (monotonic ns) its disk reads
    /// still count (0: not counted).
    pub fn reads_to_change(&mut self, learning: impl Fn(&HashSet<u32>) -> bool) -> Vec<RunReads> {
        let mut out = Vec::new();
        for run in &mut self.runs {
            let first_reads = (run.sampled || run.streamed) && !learning(&run.live);
            if first_reads == run.first_reads {
                continue;
            }
            run.first_reads = first_reads;
            if first_reads && run.sampled && !run.counted_sampled {
                run.counted_sampled = true;
                self.counts.runs_sampled += 1;
            }
            let mut tasks: Vec<u32> = run.live.iter().copied().collect();
            tasks.sort_unstable();
            out.push(RunReads { tasks, first_reads, disk_until_ns: run.disk_until_ns });
        }
        out
    }

    /// The launch whose processes are `tasks` stopped being followed at its page cap or while
    /// reading a file through: the runs holding them are followed on for the files they open
    /// only ([`Self::reads_to_change`]). Every page of a stream would reach the daemon otherwise
    /// (a reader of 1 GiB: 262,144 page records per run), to learn ranges no prefetch loads.
    pub fn pages_streamed(&mut self, tasks: &[u32]) {
        for run in &mut self.runs {
            if !run.streamed && tasks.iter().any(|t| run.live.contains(t)) {
                run.streamed = true;
                self.counts.runs_streamed += 1;
            }
        }
    }

    /// The model.
    pub fn model(&self) -> &FileContextModel {
        &self.model
    }

    /// Counters since the start.
    pub fn counts(&self) -> RunCounts {
        self.counts
    }

    /// Runs followed now.
    pub fn len(&self) -> usize {
        self.runs.len()
    }

    /// True when no run is followed.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Whether task `tid` belongs to a run followed now (the kernel must keep following it).
    pub fn holds(&self, tid: u32) -> bool {
        self.owner.contains_key(&tid)
    }

    fn run_of(&mut self, tid: u32) -> Option<&mut Run> {
        let root = *self.owner.get(&tid)?;
        self.runs.iter_mut().find(|r| r.root == root)
    }

    /// Starts following a run of workload `app` from its root process `root` at `now_ns`, for
    /// `user`; its predicted first files are handed out at once. False when `root` is in a run
    /// already or [`MAX_RUNS`] are followed.
    pub fn start(&mut self, root: u32, app: &str, user: ProcessUser, now_ns: u64) -> bool {
        if self.owner.contains_key(&root) {
            return false;
        }
        if self.runs.len() >= MAX_RUNS {
            self.counts.runs_not_followed += 1;
            return false;
        }
        let cursor = self.model.start_run(app);
        self.owner.insert(root, root);
        self.counts.runs += 1;
        let mut run = Run {
            root,
            user,
            cursor,
            live: HashSet::from([root]),
            started_ns: now_ns,
            last_file_ns: now_ns,
            all_exited_ns: None,
            last_lookup: HashMap::new(),
            named: HashMap::new(),
            asked: HashSet::new(),
            foreseen: HashSet::new(),
            files: 0,
            novel: 0,
            learned_ms: 0,
            sampled: false,
            first_reads: false,
            counted_sampled: false,
            streamed: false,
            forward: ForwardRuns::new(),
            pages_used: 0,
            accesses_seen: false,
            asked_pages: 0,
            first_open_ns: None,
            since_predict: 0,
            last_depth: 0,
            predicted: 0,
            whole: false,
            disk_until_ns: 0,
            disk_pages: 0,
        };
        let depth = self.depth(&run);
        predict(&self.model, &mut run, depth, None, &mut self.pending, &mut self.counts);
        self.runs.push(run);
        true
    }

    /// At the start of the run rooted at `root` (before it learned a file): when its workload's
    /// whole learned sequence takes at most `max_pages`, hands it all out at once, in learned
    /// order, in place of the files predicted at the start, rather than wait for the opens to
    /// predict them (a short run, a build or an indexer, opens hundreds of files a second: a
    /// prediction after each open comes too late). True when it did.
    pub fn load_whole(&mut self, root: u32, max_pages: u64) -> bool {
        let Some(run) = self.runs.iter_mut().find(|r| r.root == root) else { return false };
        if run.files > 0 || run.whole {
            return false;
        }
        let sequence = self.model.learned_sequence(run.cursor.app(), RUN_MAX_FILES);
        let files: Vec<FilePrediction> = sequence.iter().filter(|f| f.pages > 0).cloned().collect();
        let pages: u64 = files.iter().map(|f| f.pages).sum();
        if files.is_empty() || pages > max_pages {
            return false;
        }
        // Every file of the sequence is foreseen by this run: a run handed its whole sequence is
        // not predicted again along it, and what it opens off it is new to the model.
        run.foreseen.extend(sequence.into_iter().map(|f| f.path));
        let replaced: Vec<FilePrefetch> = self.pending.iter().filter(|p| p.root == root).cloned().collect();
        self.pending.retain(|p| p.root != root);
        let replaced_files: u64 = replaced.iter().map(|p| p.files.len() as u64).sum();
        self.counts.files_predicted = self.counts.files_predicted.saturating_sub(replaced_files) + files.len() as u64;
        self.counts.runs_whole += 1;
        run.asked.clear();
        run.asked_pages = pages;
        run.asked.extend(files.iter().map(|f| f.path.clone()));
        run.whole = true;
        let mut rest = files.into_iter().peekable();
        let mut piece = WHOLE_PIECE_FIRST;
        while rest.peek().is_some() {
            let files: Vec<FilePrediction> = rest.by_ref().take(piece).collect();
            self.pending.push(FilePrefetch {
                root,
                app: run.cursor.app().to_string(),
                user: run.user.clone(),
                files,
                after_open_ns: None,
            });
            piece = (piece * 2).min(WHOLE_PIECE_MAX);
        }
        true
    }

    /// How many opens ahead `run`'s files are prefetched now: [`prefetch_depth`] once its
    /// reader's rate and the loader's are measured, [`PREFETCH_DEPTH`] until then.
    fn depth(&self, run: &Run) -> usize {
        let (Some(interval), Some(per_page), Some(pages)) =
            (run.open_interval_ns(), self.fetch_ns_per_page, run.mean_pages_asked())
        else {
            return PREFETCH_DEPTH;
        };
        prefetch_depth(interval, per_page.saturating_mul(pages), self.lag_ns.unwrap_or(DEFAULT_LAG_NS))
    }

    /// A file prefetch loaded `pages_loaded` pages in `busy_ns` of the loader's time: how fast
    /// the loader reads, for the depth of the runs' prefetches.
    pub fn prefetch_done(&mut self, pages_loaded: u64, busy_ns: u64) {
        if pages_loaded >= FETCH_RATE_MIN_PAGES {
            self.fetch_ns_per_page = Some(moving_mean(self.fetch_ns_per_page, busy_ns / pages_loaded));
        }
    }

    /// A prefetch predicted after an open waited `lag_ns` from that open until the loader began
    /// on it (the kernel's report reaching the daemon, the loop, the loader's queue).
    pub fn prefetch_lag(&mut self, lag_ns: u64) {
        self.lag_ns = Some(moving_mean(self.lag_ns, lag_ns));
    }

    /// The launch whose root is `root`, followed as a run, was found to be of application `app`
    /// (a wrapper's payload): its run is of `app` from now, if it learned no file yet. True when
    /// `root` roots a run (re-keyed or not).
    pub fn rekey(&mut self, root: u32, app: &str) -> bool {
        let Some(run) = self.runs.iter_mut().find(|r| r.root == root) else { return false };
        if run.files == 0 && run.cursor.app() != app {
            run.cursor = self.model.start_run(app);
            run.asked.clear();
            run.foreseen.clear();
            run.asked_pages = 0;
            run.whole = false;
            self.pending.retain(|p| p.root != root);
            predict(&self.model, run, PREFETCH_DEPTH, None, &mut self.pending, &mut self.counts);
        }
        true
    }

    /// Task `child` was created by process `parent`: part of `parent`'s run, if it has one.
    pub fn on_fork(&mut self, parent: u32, child: u32) {
        let Some(&root) = self.owner.get(&parent) else { return };
        if let Some(run) = self.runs.iter_mut().find(|r| r.root == root) {
            run.live.insert(child);
            run.all_exited_ns = None;
            self.owner.insert(child, root);
        }
    }

    /// Task `tid` exited at `now_ns`.
    pub fn on_exit(&mut self, tid: u32, now_ns: u64) {
        let Some(run) = self.run_of(tid) else { return };
        run.live.remove(&tid);
        run.last_lookup.remove(&tid);
        if run.live.is_empty() {
            run.all_exited_ns = Some(now_ns);
        }
    }

    /// Task `tid` looked up a path: the next inode it reads that its run has not named yet is
    /// taken to be that file (an open is followed by its reads).
    pub fn on_lookup(&mut self, tid: u32, lookup: &Lookup) {
        if lookup.kind != LookupKind::Stat {
            return;
        }
        let Some(run) = self.run_of(tid) else { return };
        match lookup.path.to_str() {
            Some(p) => {
                run.last_lookup.insert(tid, p.to_string());
            }
            None => {
                run.last_lookup.remove(&tid);
            }
        }
    }

    /// Task `tid` emptied or created `inode` for writing: what the run reads of it from then on
    /// is its own output (a linker reading back what it wrote, an assembler's object read by
    /// the archiver), not a file of its sequence to prefetch.
    pub fn on_output(&mut self, tid: u32, inode: InodeKey) {
        let Some(run) = self.run_of(tid) else { return };
        if run.named.len() >= MAX_NAMED {
            run.named.clear();
        }
        run.named.insert(inode, None);
    }

    /// Counts the pages the run rooted at `root` reads from disk until `until_ns` (its launch
    /// was replayed only: what it reads beyond its profile says whether the profile lacks pages,
    /// as the kernel's count of a watched launch would).
    pub fn count_disk_reads(&mut self, root: u32, until_ns: u64) {
        if let Some(run) = self.runs.iter_mut().find(|r| r.root == root) {
            run.disk_until_ns = until_ns;
        }
    }

    /// Adds `pages` the kernel counted the run rooted at `root` reading from disk (followed for
    /// its first reads, it sends no page record for them), if they are counted.
    pub fn add_disk_reads(&mut self, root: u32, pages: u64) {
        if let Some(run) = self.runs.iter_mut().find(|r| r.root == root && r.disk_until_ns > 0) {
            run.disk_pages = run.disk_pages.saturating_add(pages);
        }
    }

    /// The pages the run rooted at `root` read from disk while they were counted, if they were.
    pub fn disk_reads(&self, root: u32) -> Option<u64> {
        self.runs.iter().find(|r| r.root == root && r.disk_until_ns > 0).map(|r| r.disk_pages)
    }

    /// Task `tid` used (`read`: read from disk) `pages` of `inode` at `ts_ns` (`now_ms`: the wall
    /// clock then). The first read of an inode in the run is the file's open in its sequence,
    /// learned, and followed by a prediction; every read teaches the file's ranges.
    pub fn on_page(&mut self, tid: u32, ts_ns: u64, read: bool, inode: InodeKey, pages: PageRange, now_ms: u64) {
        let Some(&root) = self.owner.get(&tid) else { return };
        let Some(i) = self.runs.iter().position(|r| r.root == root) else { return };
        let depth = self.depth(&self.runs[i]);
        let run = &mut self.runs[i];
        if read && ts_ns <= run.disk_until_ns {
            run.disk_pages += pages.len;
        }
        run.accesses_seen |= !read;
        if !run.streamed && !run.first_reads && self.read_through_pages > 0 && (!read || !run.accesses_seen) {
            let forward = run.forward.on_use(inode, pages);
            run.pages_used += pages.len;
            if ForwardRuns::reads_through(forward, run.pages_used, self.read_through_pages) {
                run.streamed = true;
                run.forward = ForwardRuns::new();
                self.counts.runs_streamed += 1;
            }
        }
        if let Some(known) = run.named.get(&inode) {
            if let Some(path) = known {
                self.model.read(&run.cursor, path, pages);
            }
            return;
        }
        if run.named.len() >= MAX_NAMED {
            run.named.clear();
        }
        let path = run.last_lookup.remove(&tid).filter(|p| learnable(p));
        run.named.insert(inode, path.clone());
        let Some(path) = path else { return };
        let open = FileOpen { path: &path, dev: inode.dev, ino: inode.ino };
        // A sample sees each file's first page only: it must not take a rewritten file's learned
        // ranges down to that page.
        let learned = if run.first_reads {
            self.model.open_first_reads(&mut run.cursor, &open, now_ms)
        } else {
            self.model.open(&mut run.cursor, &open, now_ms)
        };
        if learned != OpenLearned::First {
            return;
        }
        self.model.read(&run.cursor, &path, pages);
        run.files += 1;
        if !run.foreseen.contains(&path) {
            run.novel += 1;
        }
        run.learned_ms = now_ms;
        run.first_open_ns.get_or_insert(ts_ns);
        run.last_file_ns = run.last_file_ns.max(ts_ns);
        run.since_predict += 1;
        // An open nothing predicted: the run left the way predicted, what follows is new.
        let predicted = !run.asked.insert(path);
        self.counts.files_learned += 1;
        self.counts.opens_predicted += u64::from(predicted);
        run.predicted += usize::from(predicted);
        self.changed.insert(run.cursor.app().to_string());
        let lead_left = run.last_depth.saturating_sub(run.since_predict);
        let due = !predicted || (!run.whole && lead_left * 4 <= depth * 3);
        if due {
            predict(&self.model, run, depth, Some(ts_ns), &mut self.pending, &mut self.counts);
        }
    }

    /// The files predicted since the last call, to be prefetched: one [`FilePrefetch`] per run.
    pub fn take_prefetches(&mut self) -> Vec<FilePrefetch> {
        std::mem::take(&mut self.pending)
    }

    /// The files of `p` were not prefetched after all (the prefetch queue was full): the run
    /// asks for them again at its next prediction that names them.
    pub fn not_prefetched(&mut self, p: &FilePrefetch) {
        if let Some(run) = self.runs.iter_mut().find(|r| r.root == p.root) {
            for f in &p.files {
                if run.asked.remove(&f.path) {
                    run.asked_pages = run.asked_pages.saturating_sub(f.pages);
                }
            }
            // What it still needs comes from its predictions again, at its next open.
            run.whole = false;
            run.since_predict = usize::MAX / 8;
        }
    }

    fn deadline_of(r: &Run) -> u64 {
        let quiet = r.last_file_ns.saturating_add(RUN_QUIET_NS);
        let cap = r.started_ns.saturating_add(RUN_MAX_NS);
        let exited = r.all_exited_ns.map_or(u64::MAX, |t| t.saturating_add(RUN_EXIT_GRACE_NS));
        quiet.min(cap).min(exited)
    }

    /// When the next run ends (monotonic ns), if any is followed.
    pub fn next_deadline(&self) -> Option<u64> {
        self.runs.iter().map(Self::deadline_of).min()
    }

    /// Ends the runs whose time is up at `now_ns` (or that read [`RUN_MAX_FILES`] files): returns
    /// each one's workload, why it ended, and its tasks still alive (the kernel may stop following
    /// them).
    pub fn expire(&mut self, now_ns: u64) -> Vec<(String, RunEnd, Vec<u32>)> {
        let mut ended = Vec::new();
        let mut i = 0;
        while i < self.runs.len() {
            let r = &self.runs[i];
            let why = if r.all_exited_ns.is_some_and(|t| t.saturating_add(RUN_EXIT_GRACE_NS) <= now_ns) {
                Some(RunEnd::Exited)
            } else if r.files >= RUN_MAX_FILES || r.started_ns.saturating_add(RUN_MAX_NS) <= now_ns {
                Some(RunEnd::Capped)
            } else if r.last_file_ns.saturating_add(RUN_QUIET_NS) <= now_ns {
                Some(RunEnd::Quiet)
            } else {
                None
            };
            match why {
                Some(why) => ended.push(self.end(i, why)),
                None => i += 1,
            }
        }
        ended
    }

    /// Ends every run (shutdown). A run whose processes all exited is complete, its last records
    /// waiting out their grace only: it ends as exited and is learned like one (a daemon stopped
    /// right after a program's run, as a benchmark stops it, otherwise never counted that run,
    /// and followed the program's runs whole forever); the others are cut short, not learned.
    pub fn end_all(&mut self) -> Vec<(String, RunEnd, Vec<u32>)> {
        (0..self.runs.len())
            .rev()
            .map(|i| {
                let why = if self.runs[i].all_exited_ns.is_some() { RunEnd::Exited } else { RunEnd::Stopped };
                self.end(i, why)
            })
            .collect()
    }

    fn end(&mut self, i: usize, why: RunEnd) -> (String, RunEnd, Vec<u32>) {
        let r = self.runs.swap_remove(i);
        tracing::debug!(
            "workload run {} of {}: {} files opened, {} of them asked for ahead ({} asked for, {} pages; whole sequence: {}; last depth {}; mean {} us between opens)",
            r.root,
            r.cursor.app(),
            r.files,
            r.predicted,
            r.asked.len(),
            r.asked_pages,
            r.whole,
            r.last_depth,
            r.open_interval_ns().unwrap_or(0) / 1000
        );
        self.owner.retain(|_, root| *root != r.root);
        if why != RunEnd::Stopped {
            self.learned(&r);
        }
        let mut live: Vec<u32> = r.live.into_iter().collect();
        live.sort_unstable();
        (r.cursor.app().to_string(), why, live)
    }

    /// True when some workload's model changed since the last [`take_changed`](Self::take_changed).
    pub fn has_changes(&self) -> bool {
        !self.changed.is_empty()
    }

    /// The workloads learned from since the last call, each with its record to save, or `None`
    /// when the model dropped it since (to be deleted from the state).
    pub fn take_changed(&mut self) -> Vec<(String, Option<FileContextRecord>)> {
        std::mem::take(&mut self.changed)
            .into_iter()
            .map(|app| {
                let record = self.model.app(&app).map(|m| m.record());
                (app, record)
            })
            .collect()
    }

    /// Drops what was unseen for longer than the model's age limit at `now_ms` (a workload's
    /// learning history goes with its model).
    pub fn prune(&mut self, now_ms: u64) {
        self.model.prune(now_ms);
    }

    /// The learning history of `app`'s runs (`None`: the model holds no such workload), kept and
    /// saved with its model, so that a restart does not follow a settled workload whole again.
    pub fn history(&self, app: &str) -> Option<LearningHistory> {
        self.model.app(app).map(|m| m.learning())
    }

    /// Counts the ended run `r` in its workload's learning history: a run followed whole as a
    /// learned launch is (stable when at most the policy's share of the files it opened was not
    /// foreseen); a sampled one only when it was not stable, which unsettles the workload (its
    /// next runs are followed whole), as a sampled launch that read pages its profile lacked does.
    fn learned(&mut self, r: &Run) {
        let Some((_, share)) = self.follow else { return };
        if r.files == 0 {
            return;
        }
        let novelty = LaunchNovelty { pages: r.files as u64, new_pages: r.novel as u64 };
        let app = r.cursor.app();
        let stable = novelty.is_stable(share);
        if r.sampled && stable {
            return;
        }
        let Some(mut h) = self.history(app) else { return };
        if r.sampled {
            h.stable_streak = 0;
            self.counts.runs_unsettled += 1;
        } else {
            let settings = LearnSettings { stable_new_share: share, ..LearnSettings::default() };
            h = h.after(r.learned_ms, novelty, &settings);
        }
        if self.model.set_learning(app, h) {
            self.changed.insert(app.to_string());
        }
    }
}

/// Asks the model what `run` opens within `depth` opens (after its open at `after_open_ns`, if
/// any) and hands out the files it has not asked for yet.
fn predict(
    model: &FileContextModel,
    run: &mut Run,
    depth: usize,
    after_open_ns: Option<u64>,
    pending: &mut Vec<FilePrefetch>,
    counts: &mut RunCounts,
) {
    run.since_predict = 0;
    run.last_depth = depth;
    let predicted = model.predict(&run.cursor, depth, MIN_CONFIDENCE, depth);
    for f in &predicted {
        if !run.foreseen.contains(&f.path) {
            run.foreseen.insert(f.path.clone());
        }
    }
    let files: Vec<FilePrediction> = predicted.into_iter().filter(|f| f.pages > 0 && !run.asked.contains(&f.path)).collect();
    if files.is_empty() {
        return;
    }
    for f in &files {
        run.asked.insert(f.path.clone());
        run.asked_pages += f.pages;
    }
    counts.files_predicted += files.len() as u64;
    // One prefetch per run between two sleeps: the files predicted after each of its opens since
    // (after the pieces of its whole sequence, if those are still waiting).
    match pending.iter_mut().rev().find(|p| p.root == run.root) {
        Some(p) => p.files.extend(files),
        None => pending.push(FilePrefetch {
            root: run.root,
            app: run.cursor.app().to_string(),
            user: run.user.clone(),
            files,
            after_open_ns,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    const S: u64 = 1_000_000_000;

    fn user() -> ProcessUser {
        ProcessUser::without_groups(0)
    }

    fn lookup(path: &str) -> Lookup {
        Lookup { path: PathBuf::from(path), kind: LookupKind::Stat }
    }

    /// Task `tid` of a run opens `path` (inode `ino`) and reads its first page at `t`.
    fn open(runs: &mut WorkloadRuns, tid: u32, path: &str, ino: u64, t: u64) {
        runs.on_lookup(tid, &lookup(path));
        runs.on_page(tid, t, false, InodeKey { dev: 8, ino }, PageRange::new(0, 2), t / 1_000_000);
    }

    fn asked(p: &[FilePrefetch]) -> Vec<String> {
        p.iter().flat_map(|f| f.files.iter().map(|x| x.path.clone())).collect()
    }

    /// `root` forks a short child for each of `files`, 10 ms apart from `t0`, which opens it and
    /// exits; `after` sees the runs after each.
    fn open_by_children(runs: &mut WorkloadRuns, root: u32, files: &[&str], t0: u64, mut after: impl FnMut(&mut WorkloadRuns)) {
        for (i, f) in files.iter().enumerate() {
            let child = root + 1 + i as u32;
            let t = t0 + (i as u64 + 1) * 10_000_000;
            runs.on_fork(root, child);
            open(runs, child, f, 100 + i as u64, t);
            runs.on_exit(child, t + 1);
            after(runs);
        }
    }

    /// One run of `app` rooted at `root`, opening `files` in order, each by a short child
    /// process of its own (a build's compilers), then exiting.
    fn build_run(runs: &mut WorkloadRuns, root: u32, files: &[&str], t0: u64) -> Vec<String> {
        assert!(runs.start(root, "/usr/bin/make", user(), t0));
        let mut got = asked(&runs.take_prefetches());
        open_by_children(runs, root, files, t0, |runs| got.extend(asked(&runs.take_prefetches())));
        runs.on_exit(root, t0 + S);
        let ended = runs.expire(t0 + 2 * S);
        assert_eq!(ended.len(), 1);
        assert_eq!(ended[0].1, RunEnd::Exited);
        got
    }

    #[test]
    fn a_sequence_across_short_processes_is_learned_and_prefetched_ahead_once() {
        let files: Vec<String> = (0..20).map(|i| format!("/src/f{i}.c")).collect();
        let files: Vec<&str> = files.iter().map(String::as_str).collect();
        let mut runs = WorkloadRuns::new();
        assert!(build_run(&mut runs, 1000, &files, 0).is_empty(), "nothing known on the first run");
        assert_eq!(runs.counts().files_learned, 20);
        let second = build_run(&mut runs, 2000, &files, 100 * S);
        // Every file but the first is predicted before it is opened, each once.
        let mut sorted = second.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), second.len(), "each file asked for once per run: {second:?}");
        assert!(second.contains(&"/src/f0.c".to_string()), "the first file is predicted at the start");
        for f in &files[1..] {
            assert!(second.contains(&f.to_string()), "{f} predicted");
        }
        // The first prediction (at the run's start) reaches PREFETCH_DEPTH files ahead.
        assert!(runs.is_empty());
    }

    #[test]
    fn the_depth_hides_the_loader_behind_the_reader_and_no_further() {
        const MS: u64 = 1_000_000;
        // The reader benchmark on a fast disk: a file every 45 ms, loaded in 1 ms, handed out
        // 20 ms after the open: a few files ahead are enough.
        assert_eq!(prefetch_depth(45 * MS, MS, 20 * MS), MIN_DEPTH);
        // An indexer: a file every millisecond: 2 × 20.1 ms of lead is 41 files.
        assert_eq!(prefetch_depth(MS, MS / 10, 20 * MS), 41);
        // A loader slower than the reader can never get ahead: as far as allowed.
        assert_eq!(prefetch_depth(10 * MS, 10 * MS, 0), MAX_DEPTH);
        assert_eq!(prefetch_depth(10 * MS, 30 * MS, 0), MAX_DEPTH);
        // A very fast reader: no further than the most.
        assert_eq!(prefetch_depth(MS / 100, MS / 1000, 20 * MS), MAX_DEPTH);
        assert_eq!(prefetch_depth(0, 0, 0), MAX_DEPTH, "opens all at once");
    }

    /// A run of `app` rooted at `root` opening `files` in order, one every `every_ns` from
    /// `t0`, by its root process; `after_open` is called after each open with its index.
    fn paced_run(
        runs: &mut WorkloadRuns,
        root: u32,
        files: &[String],
        t0: u64,
        every_ns: u64,
        mut after_open: impl FnMut(&mut WorkloadRuns, usize),
    ) {
        assert!(runs.start(root, "/usr/bin/reader", user(), t0));
        for (i, f) in files.iter().enumerate() {
            open(runs, root, f, 100 + i as u64, t0 + (i as u64 + 1) * every_ns);
            after_open(runs, i);
        }
        runs.on_exit(root, t0 + S);
        runs.expire(u64::MAX / 2);
    }

    /// The farthest file (by its place in `files`) asked for after each open of a second run
    /// paced at `every_ns`, with the loader measured at `fetch_ns_per_page` per page.
    fn lead_after_each_open(files: &[String], every_ns: u64, fetch_ns_per_page: u64) -> Vec<usize> {
        let mut runs = WorkloadRuns::new();
        paced_run(&mut runs, 1, files, 0, every_ns, |_, _| {});
        runs.take_prefetches();
        runs.prefetch_done(1_000, 1_000 * fetch_ns_per_page);
        runs.prefetch_lag(5_000_000);
        let mut farthest = 0;
        let mut leads = Vec::new();
        paced_run(&mut runs, 2, files, 100 * S, every_ns, |runs, i| {
            for f in asked(&runs.take_prefetches()) {
                farthest = farthest.max(files.iter().position(|x| *x == f).unwrap());
            }
            leads.push(farthest.saturating_sub(i));
        });
        leads
    }

    #[test]
    fn a_run_is_prefetched_as_far_ahead_as_its_reader_and_the_loader_need() {
        let files: Vec<String> = (0..200).map(|i| format!("/data/f{i:03}")).collect();
        // A file every 10 ms, 2 pages each. A loader at 1 µs a page: 2 × (5 ms + 2 µs) of lead
        // is a file or two: once measured, the lead falls from the first 32 to a handful.
        let fast = lead_after_each_open(&files, 10_000_000, 1_000);
        assert!(fast[0] >= PREFETCH_DEPTH - 1, "{fast:?}");
        assert!(fast[100..190].iter().all(|&l| (MIN_DEPTH - 1..=MIN_DEPTH + 1).contains(&l)), "{fast:?}");
        // A loader at 10 ms a page cannot keep up with a 2-page file every 10 ms: as far ahead
        // as allowed, and the whole sequence is asked for within the first opens.
        let slow = lead_after_each_open(&files, 10_000_000, 10_000_000);
        assert!(slow[20] >= 150, "{slow:?}");
        assert_eq!(slow[20] + 20, files.len() - 1, "every file asked for: {slow:?}");
    }

    #[test]
    fn a_small_learned_sequence_is_handed_out_whole_at_the_start_in_pieces() {
        let files: Vec<String> = (0..40).map(|i| format!("/src/f{i:02}.c")).collect();
        let mut runs = WorkloadRuns::new();
        paced_run(&mut runs, 1, &files, 0, 1_000_000, |_, _| {});
        assert!(runs.start(2, "/usr/bin/reader", user(), 10 * S));
        // 40 files of 2 pages: more than 79 pages allowed is needed.
        assert!(!runs.load_whole(2, 79));
        assert!(runs.load_whole(2, 80));
        assert!(!runs.load_whole(2, 80), "once");
        let pieces = runs.take_prefetches();
        assert_eq!(pieces.iter().map(|p| p.files.len()).collect::<Vec<_>>(), [8, 16, 16], "the first piece small");
        assert_eq!(asked(&pieces), files, "every file, in learned order, in place of the start's prediction");
        assert!(pieces.iter().all(|p| p.after_open_ns.is_none()), "predicted after no open");
        assert_eq!(runs.counts().runs_whole, 1);
        assert_eq!(runs.counts().files_predicted, 40);
        // Opens along it ask for nothing more; an open off it is followed by a prediction.
        for (i, f) in files.iter().take(10).enumerate() {
            open(&mut runs, 2, f, 100 + i as u64, 11 * S + i as u64);
        }
        assert!(runs.take_prefetches().is_empty());
        open(&mut runs, 2, "/src/new.c", 999, 12 * S);
        assert!(runs.take_prefetches().is_empty(), "nothing new to ask for: the rest was asked for");
        // Pieces the loader could not queue come back through predictions.
        let mut runs = WorkloadRuns::new();
        paced_run(&mut runs, 1, &files, 0, 1_000_000, |_, _| {});
        assert!(runs.start(2, "/usr/bin/reader", user(), 10 * S));
        assert!(runs.load_whole(2, u64::MAX));
        for p in runs.take_prefetches() {
            runs.not_prefetched(&p);
        }
        open(&mut runs, 2, &files[0], 100, 11 * S);
        assert_eq!(asked(&runs.take_prefetches()), files[1..=PREFETCH_DEPTH].to_vec());
        // A run that learned a file already is not handed its whole sequence.
        assert!(!runs.load_whole(2, u64::MAX));
    }

    #[test]
    fn reads_of_unnamed_inodes_and_throwaway_files_are_left_out() {
        let mut runs = WorkloadRuns::new();
        assert!(runs.start(1, "/usr/bin/cc", user(), 0));
        // A page of an inode no lookup named (an fd inherited), and a /tmp file.
        runs.on_page(1, 1, true, InodeKey { dev: 8, ino: 5 }, PageRange::new(0, 1), 0);
        assert_eq!(runs.disk_reads(1), None, "not counted");
        runs.count_disk_reads(1, 10);
        runs.on_page(1, 5, true, InodeKey { dev: 8, ino: 9 }, PageRange::new(0, 3), 0);
        runs.on_page(1, 6, false, InodeKey { dev: 8, ino: 9 }, PageRange::new(3, 3), 0);
        runs.on_page(1, 11, true, InodeKey { dev: 8, ino: 9 }, PageRange::new(6, 3), 0);
        assert_eq!(runs.disk_reads(1), Some(3), "read from disk within the count's time");
        open(&mut runs, 1, "/tmp/cc123.s", 6, 2);
        open(&mut runs, 1, "/src/a.c", 7, 3);
        assert_eq!(runs.counts().files_learned, 1);
        // /var/tmp is kept across reboots, on disk: its files are learned.
        open(&mut runs, 1, "/var/tmp/data", 8, 4);
        assert_eq!(runs.counts().files_learned, 2);
        let changed = runs.take_changed();
        assert_eq!(changed.len(), 1);
        assert_eq!(changed[0].0, "/usr/bin/cc");
        assert_eq!(changed[0].1.as_ref().unwrap().files.len(), 2);
        assert!(runs.take_changed().is_empty());
    }

    #[test]
    fn a_file_a_run_emptied_for_writing_is_not_learned_from_its_reads() {
        let mut runs = WorkloadRuns::new();
        assert!(runs.start(1, "/usr/bin/ld", user(), 0));
        open(&mut runs, 1, "/src/main.o", 7, 1);
        // The output is opened with O_TRUNC, then read back: not a file of the sequence.
        runs.on_lookup(1, &lookup("/src/out/big"));
        runs.on_output(1, InodeKey { dev: 8, ino: 8 });
        runs.on_page(1, 3, false, InodeKey { dev: 8, ino: 8 }, PageRange::new(0, 2), 0);
        runs.on_page(1, 4, false, InodeKey { dev: 8, ino: 8 }, PageRange::new(2, 200), 0);
        open(&mut runs, 1, "/usr/lib/libc.a", 9, 5);
        assert_eq!(runs.counts().files_learned, 2);
        let changed = runs.take_changed();
        let files = &changed[0].1.as_ref().unwrap().files;
        assert!(files.iter().all(|f| f.path != "/src/out/big"), "{files:?}");
    }

    #[test]
    fn a_run_is_rekeyed_to_its_application_until_it_learned_a_file() {
        let mut runs = WorkloadRuns::new();
        assert!(runs.start(1, "/bin/sh", user(), 0));
        assert!(runs.rekey(1, "/usr/bin/python3"));
        open(&mut runs, 1, "/src/a.py", 7, 3);
        assert!(runs.rekey(1, "/usr/bin/other"), "the run keeps its application once it learned");
        assert!(!runs.rekey(2, "/usr/bin/other"), "no such run");
        let changed = runs.take_changed();
        assert_eq!(changed.iter().map(|(a, _)| a.as_str()).collect::<Vec<_>>(), vec!["/usr/bin/python3"]);
    }

    /// One run of `make` rooted at `root` at `t0` opening `files` as [`build_run`] does, sampled
    /// as the engine asks; whether it was a sample (then followed for its first reads, once).
    fn sampled_run(runs: &mut WorkloadRuns, root: u32, files: &[&str], t0: u64) -> bool {
        assert!(runs.start(root, "/usr/bin/make", user(), t0));
        let sampled = runs.sample(root, t0 / 1_000_000);
        if sampled {
            let taken = runs.reads_to_change(|_| true);
            assert!(taken.is_empty(), "not while a task's launch is followed to learn its start: {taken:?}");
            let taken = runs.reads_to_change(|_| false);
            assert_eq!(taken, vec![RunReads { tasks: vec![root], first_reads: true, disk_until_ns: 0 }]);
            assert!(runs.reads_to_change(|_| false).is_empty(), "asked once");
        } else {
            assert!(runs.reads_to_change(|_| false).is_empty());
        }
        open_by_children(runs, root, files, t0, |_| {});
        runs.take_prefetches();
        runs.on_exit(root, t0 + S);
        assert_eq!(runs.expire(t0 + 2 * S).len(), 1);
        sampled
    }

    /// No run yet, followed by the launches' default policy (whole for the first three runs,
    /// then sampled once two in a row are stable; one in an hour refollowed), 5 % new files
    /// allowed in a stable run.
    fn followed_runs() -> WorkloadRuns {
        let policy =
            FollowPolicy { first_launches: 3, stable_launches: 2, max_unstable_launches: 8, refollow_after_ms: 3_600_000 };
        let mut runs = WorkloadRuns::new();
        runs.set_follow(policy, 0.05);
        runs
    }

    #[test]
    fn a_sample_gets_the_whole_sequence_finds_it_foreseen_and_keeps_a_rewritten_file_s_ranges() {
        let mut runs = followed_runs();
        let files: Vec<String> = (0..40).map(|i| format!("/src/f{i:02}.c")).collect();
        // One run of make at `t0`, handed its whole sequence at its start when `whole`; each file
        // read in 8 pages (a sample's kernel sends only the first access: 2 pages), the first
        // one under inode `first_ino`. Whether it was a sample.
        let one = |runs: &mut WorkloadRuns, root: u32, t0: u64, whole: bool, first_ino: u64| {
            assert!(runs.start(root, "/usr/bin/make", user(), t0));
            assert_eq!(runs.load_whole(root, u64::MAX), whole);
            let sampled = runs.sample(root, t0 / 1_000_000);
            let reads = runs.reads_to_change(|_| false);
            assert_eq!(reads.len(), usize::from(sampled));
            let mut handed = runs.take_prefetches();
            for (i, f) in files.iter().enumerate() {
                let t = t0 + (i as u64 + 1) * 10_000_000;
                let ino = if i == 0 { first_ino } else { 100 + i as u64 };
                open(runs, root, f, ino, t);
                if !sampled {
                    runs.on_page(root, t, true, InodeKey { dev: 8, ino }, PageRange::new(2, 6), t / 1_000_000);
                }
            }
            handed.extend(runs.take_prefetches());
            runs.on_exit(root, t0 + S);
            assert_eq!(runs.expire(t0 + 2 * S).len(), 1);
            (sampled, handed)
        };
        for n in 0..3u32 {
            let (sampled, _) = one(&mut runs, 1000 * (n + 1), u64::from(n) * 100 * S, n > 0, 100);
            assert!(!sampled, "run {n} followed whole");
        }
        // Runs along their whole sequence, never predicted again, opened nothing unforeseen.
        let h = runs.history("/usr/bin/make").unwrap();
        assert_eq!((h.learned, h.stable_streak), (3, 2));
        // The settled workload's next run is a sample, handed the whole sequence at its start as a
        // run followed whole is; its first file was rewritten (a new inode, its first access only).
        let (sampled, handed) = one(&mut runs, 4000, 300 * S, true, 999);
        assert!(sampled);
        assert_eq!(asked(&handed), files, "the whole sequence, in learned order");
        assert!(handed.iter().flat_map(|p| &p.files).all(|f| f.ranges == [PageRange::new(0, 8)]), "{handed:?}");
        assert_eq!((runs.counts().runs_sampled, runs.counts().runs_unsettled), (1, 0), "a foreseen sample");
        // The sample did not take the rewritten file down to the page it saw: the next run gets
        // its learned ranges, under the new inode.
        let (sampled, handed) = one(&mut runs, 5000, 400 * S, true, 999);
        assert!(sampled);
        let first = &handed[0].files[0];
        assert_eq!((first.path.as_str(), first.ino, first.ranges.clone()), ("/src/f00.c", 999, vec![PageRange::new(0, 8)]));
    }

    #[test]
    fn a_workload_is_followed_whole_until_its_runs_are_foreseen_then_sampled_and_unsettled_by_unforeseen_files() {
        let mut runs = followed_runs();
        let more: Vec<String> = (0..40).map(|i| format!("/src/f{i}.c")).collect();
        let more: Vec<&str> = more.iter().map(String::as_str).collect();
        let files = &more[..20];
        let sampled: Vec<bool> = (0..4).map(|n| sampled_run(&mut runs, 1000 * (n + 1), files, u64::from(n) * 100 * S)).collect();
        assert_eq!(sampled, [false, false, false, true], "the first three followed whole, then settled");
        let h = runs.history("/usr/bin/make").unwrap();
        assert_eq!((h.learned, h.stable_streak, h.unstable_streak), (3, 2, 0), "a foreseen sample leaves it settled");
        assert_eq!(runs.counts().runs_sampled, 1);
        assert_eq!(runs.counts().files_learned, 80, "a sample still learns the files it opens");
        // A sample opening 20 files the model did not foresee (half its files) unsettles it.
        assert!(sampled_run(&mut runs, 5000, &more, 400 * S));
        assert_eq!(runs.counts().runs_unsettled, 1);
        assert_eq!(runs.history("/usr/bin/make").unwrap().stable_streak, 0);
        // Followed whole until two runs in a row are foreseen again, then sampled.
        let sampled: Vec<bool> = (5..8).map(|n| sampled_run(&mut runs, 1000 * (n + 1), &more, u64::from(n) * 100 * S)).collect();
        assert_eq!(sampled, [false, false, true]);
        // One run in the refollow interval is followed whole.
        assert!(!sampled_run(&mut runs, 9000, &more, 700 * S + 3_600 * S));
        // Without a follow policy, every run is followed whole.
        let mut whole = WorkloadRuns::new();
        assert!(!(0..5).any(|n| sampled_run(&mut whole, 1000 * (n + 1), files, u64::from(n) * 100 * S)));
    }

    #[test]
    fn a_settled_workload_is_still_sampled_after_its_model_is_saved_and_loaded_again() {
        let mut runs = followed_runs();
        let files: Vec<String> = (0..20).map(|i| format!("/src/f{i}.c")).collect();
        let files: Vec<&str> = files.iter().map(String::as_str).collect();
        for n in 0..3u32 {
            assert!(!sampled_run(&mut runs, 1000 * (n + 1), &files, u64::from(n) * 100 * S));
        }
        let settled = runs.history("/usr/bin/make").unwrap();
        // What the daemon saves, read back into a fresh daemon's runs (a restart).
        let mut model = FileContextModel::default();
        for (app, record) in runs.take_changed() {
            let record = record.expect("the workload is held");
            assert_eq!(record.learning, settled, "the record carries the history");
            model.insert(&app, &record);
        }
        let mut restarted = followed_runs();
        restarted.set_model(model);
        assert_eq!(restarted.history("/usr/bin/make"), Some(settled));
        assert!(sampled_run(&mut restarted, 4000, &files, 300 * S), "a settled workload's run after a restart is a sample");
    }

    #[test]
    fn a_run_that_exited_is_learned_at_a_shutdown_and_one_still_running_is_not() {
        let files = ["/src/a.c", "/src/b.c"];
        let mut runs = followed_runs();
        for (root, t0, exits) in [(100, 0, true), (200, 100 * S, false)] {
            assert!(runs.start(root, "/usr/bin/make", user(), t0));
            for (i, f) in files.iter().enumerate() {
                let t = t0 + (i as u64 + 1) * 10_000_000;
                open(&mut runs, root, f, 10 + i as u64, t);
                runs.on_page(root, t, true, InodeKey { dev: 8, ino: 10 + i as u64 }, PageRange::new(0, 4), t / 1_000_000);
            }
            if exits {
                runs.on_exit(root, t0 + S);
            }
            // The daemon stops before the exited run's grace passed.
            let ended = runs.end_all();
            let want = if exits { RunEnd::Exited } else { RunEnd::Stopped };
            assert_eq!(ended.iter().map(|(_, why, _)| *why).collect::<Vec<_>>(), vec![want]);
        }
        assert_eq!(runs.history("/usr/bin/make").map(|h| h.learned), Some(1), "the exited run only");
    }

    #[test]
    fn a_streamed_run_is_followed_for_its_first_reads_until_it_ends() {
        let mut runs = WorkloadRuns::new();
        assert!(runs.start(100, "/usr/bin/reader", user(), 0));
        runs.on_fork(100, 101);
        assert!(runs.reads_to_change(|_| false).is_empty(), "followed whole");
        runs.pages_streamed(&[999]);
        assert!(runs.reads_to_change(|_| false).is_empty(), "another launch's processes");
        runs.pages_streamed(&[101]);
        assert!(runs.reads_to_change(|_| true).is_empty(), "not while a launch learns its start");
        let reads = runs.reads_to_change(|_| false);
        assert_eq!(reads.len(), 1);
        assert!(reads[0].first_reads && reads[0].tasks == vec![100, 101], "{:?}", reads[0].tasks);
        runs.pages_streamed(&[100]);
        assert_eq!(runs.counts().runs_streamed, 1, "counted once");
        assert_eq!(runs.counts().runs_sampled, 0, "not a sample");
    }

    #[test]
    fn a_run_followed_whole_that_reads_a_file_through_is_followed_on_for_its_opens_only() {
        let mut runs = WorkloadRuns::new();
        runs.set_read_through(2048);
        assert!(runs.start(100, "/usr/bin/reader", user(), 0));
        let exe = InodeKey { dev: 1, ino: 1 };
        let data = InodeKey { dev: 1, ino: 2 };
        // The program's own pages, then 8 MiB of the data file in 4 KiB reads, each page
        // inserted and accessed.
        runs.on_page(100, 1, false, exe, PageRange::new(0, 300), 0);
        for p in 0..2047 {
            runs.on_page(100, 2 + p, true, data, PageRange::new(p, 1), 0);
            runs.on_page(100, 2 + p, false, data, PageRange::new(p, 1), 0);
        }
        assert!(runs.reads_to_change(|_| false).is_empty(), "not 8 MiB yet");
        runs.on_page(100, 3000, false, data, PageRange::new(2047, 1), 0);
        let reads = runs.reads_to_change(|_| false);
        assert_eq!(reads.len(), 1);
        assert!(reads[0].first_reads && reads[0].tasks == vec![100], "{reads:?}");
        assert_eq!(runs.counts().runs_streamed, 1);
    }

    #[test]
    fn a_run_reading_many_files_is_no_stream_and_the_rule_can_be_off() {
        for (pages, files) in [(2048, 64u64), (0, 1)] {
            let mut runs = WorkloadRuns::new();
            runs.set_read_through(pages);
            assert!(runs.start(100, "/usr/bin/ld", user(), 0));
            // 64 object files of 128 pages each read in order (a link), or one file (rule off).
            for f in 0..files {
                let inode = InodeKey { dev: 1, ino: 10 + f };
                for p in 0..(8192 / files) {
                    runs.on_page(100, p, false, inode, PageRange::new(p, 1), 0);
                }
            }
            assert!(runs.reads_to_change(|_| false).is_empty(), "{pages} {files}");
            assert_eq!(runs.counts().runs_streamed, 0);
        }
    }

    #[test]
    fn runs_are_bounded_in_number_and_end_when_quiet() {
        let mut runs = WorkloadRuns::new();
        for i in 0..MAX_RUNS as u32 {
            assert!(runs.start(10 + i, "/usr/bin/x", user(), 0));
        }
        assert!(!runs.start(99, "/usr/bin/x", user(), 0));
        assert_eq!(runs.counts().runs_not_followed, 1);
        assert!(runs.holds(10));
        runs.on_fork(10, 500);
        assert!(runs.holds(500));
        assert_eq!(runs.next_deadline(), Some(RUN_QUIET_NS));
        assert!(runs.expire(RUN_QUIET_NS - 1).is_empty());
        let ended = runs.expire(RUN_QUIET_NS);
        assert_eq!(ended.len(), MAX_RUNS);
        assert!(ended.iter().all(|(_, why, _)| *why == RunEnd::Quiet));
        assert!(ended.iter().any(|(_, _, live)| live == &vec![10, 500]));
        assert!(!runs.holds(500) && runs.is_empty());
    }
}
