//! The prefetcher: loads a [`FetchPlan`] into the page cache to completion, skipping what is
//! resident, and reports what happened, verified page by page afterwards.
//!
//! Owns the run: opening (with the refusal rules of [`super::open`]), the residency survey, the
//! order, the chunked and windowed I/O, cancellation between chunks, verification, and the I/O
//! priority for the duration. It decides nothing about *what* to fetch.

use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use augur_core::model::range::{PageRange, RangeSet};

use super::device::{DeviceInfo, DeviceTable, physical_offset};
use super::load::{CompletionMethod, advise, complete, disable_readahead};
use super::open::{OpenedFile, Refusal, open_profiled};
use super::priority::{IoPriority, PriorityGuard};
use super::request::{FetchPlan, Order, OrderPolicy, Request, order_by_first_use, order_by_location};
use super::residency::{ResidencyProbe, mincore_reports_page_cache, pages_in};
use super::schedule::{Chunk, MAX_CHUNK_BYTES, Step, WindowSchedule, chunk_pages, split_requests};

/// A fetch that yields to foreground reads looks at the disks before every this many files it
/// opens to survey, and lookups it walks: each may read an inode or a directory from disk.
const SURVEY_LOOK_EVERY: usize = 8;

/// How a fetch runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchOptions {
    /// I/O class for the duration of the fetch (restored afterwards).
    pub priority: IoPriority,
    /// Request order.
    pub order: OrderPolicy,
    /// Largest chunk per call, capped at 2 MiB and at the device's readahead limit.
    pub max_chunk_bytes: u64,
    /// Bytes advised ahead of the synchronous cursor at most.
    pub window_bytes: u64,
    /// Files kept open at once at most.
    pub max_open_files: usize,
    /// Wait while other processes read from the disks (a fetch for later; see
    /// [`super::foreground`]).
    pub yield_to_foreground: bool,
    /// When above 0, the fetch fills free memory only: before each chunk it reads MemFree
    /// (/proc/meminfo) and stops when the chunk would leave less than this many bytes free, so
    /// it never makes the kernel push anything out for it (the free-memory tier).
    #[serde(default)]
    pub keep_free_bytes: u64,
    /// Keep the plan's resident pages: mark each used once more (a page the kernel saw used
    /// twice moves to its active list, and is pushed out after what was used once), so that
    /// what was prefetched for a predicted launch is not aged out before it (see
    /// `augur_core::plan::KEEP_GAP_MS`). Costs CPU only: about 45 ms per resident GiB.
    #[serde(default)]
    pub keep_resident: bool,
}

impl Default for FetchOptions {
    fn default() -> Self {
        FetchOptions {
            priority: IoPriority::Idle,
            order: OrderPolicy::Auto,
            max_chunk_bytes: MAX_CHUNK_BYTES,
            window_bytes: 32 << 20,
            max_open_files: 256,
            yield_to_foreground: false,
            keep_free_bytes: 0,
            keep_resident: false,
        }
    }
}

/// Tells a running fetch to stop. It is checked between chunks, so a fetch stops within the
/// time one chunk (at most 2 MiB) takes to read.
#[derive(Clone, Debug, Default)]
pub struct CancelFlag(Arc<CancelInner>);

/// The flag, and what a thread waiting for it sleeps on ([`CancelFlag::wait_timeout`]).
#[derive(Debug, Default)]
struct CancelInner {
    raised: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
}

impl CancelFlag {
    /// A flag that is not raised.
    pub fn new() -> Self {
        Self::default()
    }

    /// Raises the flag, waking a thread in [`CancelFlag::wait_timeout`].
    pub fn cancel(&self) {
        self.0.raised.store(true, AtomicOrdering::Relaxed);
        // Taken so that a waiter between its check and its sleep cannot miss the wake-up.
        let _held = self.0.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.0.wake.notify_all();
    }

    /// True once raised.
    pub fn is_cancelled(&self) -> bool {
        self.0.raised.load(AtomicOrdering::Relaxed)
    }

    /// Sleeps `limit`, or less when the flag is raised meanwhile: a thread that waits for
    /// something else (quiet disks) stops at once when its work is cancelled, without waking up
    /// to look at the flag. Returns true when the flag is raised.
    pub fn wait_timeout(&self, limit: std::time::Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut held = self.0.lock.lock().unwrap_or_else(|e| e.into_inner());
        while !self.is_cancelled() {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            held = match self.0.wake.wait_timeout(held, deadline - now) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
        true
    }
}

/// Page counts of a fetch.
/// `wanted = already_resident + loaded + unverified + failed + skipped + not_attempted`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageCounts {
    /// Pages the plan asked for.
    pub wanted: u64,
    /// Already in the cache before the fetch.
    pub already_resident: u64,
    /// Brought in by the fetch and found resident when verified.
    pub loaded: u64,
    /// Read, but the kernel would not say whether they are resident (an unprivileged caller and
    /// a file it does not own; see [`super::residency`]).
    pub unverified: u64,
    /// Attempted but not resident when verified (read errors, beyond end of file, evicted).
    pub failed: u64,
    /// In files that were refused (stale, missing, not regular, unreadable).
    pub skipped: u64,
    /// Not attempted because the fetch was cancelled.
    pub not_attempted: u64,
}

/// File counts of a fetch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileCounts {
    /// Files the plan named.
    pub wanted: u64,
    /// Opened and fetched.
    pub fetched: u64,
    /// Changed since traced: skipped, never read.
    pub stale: u64,
    /// No longer there.
    pub missing: u64,
    /// Not regular files: never opened for reading.
    pub not_regular: u64,
    /// Could not be opened (permissions, I/O error), or not readable by the user the pages were
    /// for ([`super::request::FetchPlan::for_user`]).
    pub unreadable: u64,
    /// Fetched without a way to verify residency (not owned by an unprivileged caller).
    pub unverified: u64,
    /// Opened, but reading failed part-way or the file changed during the fetch (counted in
    /// `fetched` too).
    pub read_errors: u64,
}

/// Why one file was not (fully) fetched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProblemKind {
    /// Identity changed since the trace.
    Stale,
    /// Gone.
    Missing,
    /// Not a regular file.
    NotRegular,
    /// Not openable.
    Unreadable,
    /// Reading failed part-way.
    ReadError,
}

/// One file that was refused or failed, with the reason.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileProblem {
    /// Path as the profile names it.
    pub path: PathBuf,
    /// The class of problem.
    pub kind: ProblemKind,
    /// Details for people.
    pub detail: String,
}

/// What a fetch did, verified afterwards with `mincore`/`cachestat`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FetchReport {
    /// Page size of every page count.
    pub page_size: u64,
    /// Order the requests were issued in.
    pub order: Order,
    /// I/O class asked for.
    pub priority: IoPriority,
    /// Whether that class could be set.
    pub priority_applied: bool,
    /// Pages.
    pub pages: PageCounts,
    /// Files.
    pub files: FileCounts,
    /// Bytes brought into the cache (loaded pages × page size).
    pub bytes_read: u64,
    /// The fetch was stopped by its [`CancelFlag`].
    pub cancelled: bool,
    /// Wall-clock time the fetch took, in milliseconds.
    pub elapsed_ms: f64,
    /// Files refused or failed, with reasons.
    pub problems: Vec<FileProblem>,
    /// Path lookups of the plan repeated before loading (stat'ed or listed); none when every page
    /// of the plan was resident.
    #[serde(default)]
    pub lookups_replayed: u64,
    /// Milliseconds spent waiting for other processes' reads to end.
    #[serde(default)]
    pub foreground_wait_ms: f64,
    /// The fetch stopped because free memory reached [`FetchOptions::keep_free_bytes`] (then
    /// `cancelled` is set too).
    #[serde(default)]
    pub stopped_at_free_reserve: bool,
    /// Resident pages marked used again ([`FetchOptions::keep_resident`]).
    #[serde(default)]
    pub kept_pages: u64,
}

impl FetchReport {
    /// Share of the wanted pages resident after the fetch (`already_resident + loaded`), 0..=1.
    pub fn resident_share(&self) -> f64 {
        if self.pages.wanted == 0 {
            1.0
        } else {
            (self.pages.already_resident + self.pages.loaded) as f64 / self.pages.wanted as f64
        }
    }
}

struct FileState {
    opened: Option<OpenedFile>,
    usable: bool,
    missing: RangeSet,
    attempted: RangeSet,
    remaining_chunks: usize,
    device: DeviceInfo,
    verified: bool,
    unverifiable: bool,
}

thread_local! {
    /// This thread's watch on others' reads, kept between fetches (see `yield_to_foreground`).
    static FOREGROUND: std::cell::RefCell<Option<super::foreground::ForegroundReads>> = const { std::cell::RefCell::new(None) };
}

/// Loads plans into the page cache. Cheap to create; one fetch at a time per thread (the I/O
/// priority is the calling thread's).
#[derive(Clone, Debug, Default)]
pub struct Prefetcher {
    options: FetchOptions,
}

struct Run<'p> {
    plan: &'p FetchPlan,
    ps: u64,
    states: Vec<FileState>,
    open_queue: VecDeque<usize>,
    open_count: usize,
    max_open: usize,
    report: FetchReport,
    completion: CompletionMethod,
    scratch: Vec<u8>,
}

impl Prefetcher {
    /// A prefetcher with `options`.
    pub fn new(options: FetchOptions) -> Self {
        Prefetcher { options }
    }

    /// The options in use.
    pub fn options(&self) -> &FetchOptions {
        &self.options
    }

    /// Loads every page of `plan` that is not resident, then verifies. Never fails as a whole:
    /// files that cannot be fetched are counted and listed in the report.
    pub fn fetch(&self, plan: &FetchPlan, cancel: &CancelFlag) -> FetchReport {
        let started = Instant::now();
        let guard = PriorityGuard::set(self.options.priority);
        let priority_applied = guard.is_ok();
        if let Err(e) = &guard {
            tracing::warn!("could not set I/O priority {}: {e}", self.options.priority.name());
        }
        let ps = plan.page_size();
        let mut run = Run {
            plan,
            ps,
            states: Vec::with_capacity(plan.files().len()),
            open_queue: VecDeque::new(),
            open_count: 0,
            max_open: self.options.max_open_files.max(1),
            report: FetchReport {
                page_size: ps,
                order: Order::FirstUse,
                priority: self.options.priority,
                priority_applied,
                pages: PageCounts { wanted: plan.page_count(), ..Default::default() },
                files: FileCounts { wanted: plan.files().len() as u64, ..Default::default() },
                bytes_read: 0,
                cancelled: false,
                elapsed_ms: 0.0,
                problems: Vec::new(),
                lookups_replayed: 0,
                foreground_wait_ms: 0.0,
                stopped_at_free_reserve: false,
                kept_pages: 0,
            },
            completion: CompletionMethod::Populate,
            scratch: Vec::new(),
        };
        // The watch lives on the fetching thread, so a fetch that replaces another goes on from
        // what the last one had in flight and its back-off instead of starting blind; it earns
        // its full window again (`distrust`). It watches the survey and the walks too: after the
        // page cache was dropped, opening a plan's files and walking its lookups read inodes and
        // directories, a request each on the disk, and the free-memory tier's plan holds
        // thousands of files (beside ctags on the small slow machine, the tier that loaded
        // little still made it 17-22 % slower).
        let mut foreground = if self.options.yield_to_foreground {
            FOREGROUND
                .with(|f| f.borrow_mut().take())
                .map(|mut f| {
                    f.distrust();
                    f
                })
                .or_else(super::foreground::ForegroundReads::start)
        } else {
            None
        };
        let mut devices = DeviceTable::new();
        let (mut requests, locations, any_rotational) =
            run.survey(&mut devices, self.options.order, self.options.keep_resident, cancel, foreground.as_mut());
        // The walks before the loads, so that the program's failed probes find their negative
        // dentries; only when something was missing: a plan whose pages are all resident ran
        // recently (or was loaded), and its walks would only cost the daemon CPU (a warm exec's
        // replay spent a third of its time on them).
        if !requests.is_empty() {
            for some in plan.lookups().chunks(SURVEY_LOOK_EVERY) {
                if let Some(f) = foreground.as_mut() {
                    run.wait_turn(f, cancel, 0);
                }
                if cancel.is_cancelled() {
                    break;
                }
                run.report.lookups_replayed += super::lookup::replay_lookups(some, cancel).replayed;
            }
        }
        let order = match self.options.order {
            OrderPolicy::FirstUse => Order::FirstUse,
            OrderPolicy::Physical => Order::Physical,
            OrderPolicy::Auto if any_rotational => Order::Physical,
            OrderPolicy::Auto => Order::FirstUse,
        };
        run.report.order = order;
        match order {
            Order::FirstUse => order_by_first_use(&mut requests),
            Order::Physical => order_by_location(&mut requests, |r| locations.get(&(r.file, r.range.start)).copied().flatten()),
        }
        let max_chunk = self.options.max_chunk_bytes;
        let chunks = split_requests(&requests, |f| chunk_pages(max_chunk, run.states[f].device.readahead_limit, ps));
        for c in &chunks {
            run.states[c.file].remaining_chunks += 1;
        }
        run.load(&chunks, self.options.window_bytes, self.options.keep_free_bytes, cancel, foreground.as_mut());
        if let Some(f) = foreground {
            FOREGROUND.with(|slot| *slot.borrow_mut() = Some(f));
        }
        run.finish();
        drop(guard);
        let mut report = run.report;
        report.bytes_read = report.pages.loaded * ps;
        report.elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
        report
    }
}

type Locations = std::collections::HashMap<(usize, u64), Option<(u64, u64)>>;

impl Run<'_> {
    /// Waits while others read from the disks (`f`, the foreground watch; `own_in_flight`: what
    /// this fetch has queued that may land meanwhile), the wait counted in the report.
    fn wait_turn(&mut self, f: &mut super::foreground::ForegroundReads, cancel: &CancelFlag, own_in_flight: u64) {
        self.report.foreground_wait_ms += f.wait_turn(cancel, own_in_flight).as_secs_f64() * 1000.0;
    }

    fn problem(&mut self, file: usize, kind: ProblemKind, detail: String) {
        self.report.problems.push(FileProblem { path: self.plan.files()[file].path.clone(), kind, detail });
    }

    fn refuse(&mut self, file: usize, refusal: Refusal) {
        let (kind, detail) = match &refusal {
            Refusal::Missing => {
                self.report.files.missing += 1;
                (ProblemKind::Missing, "no such file".to_string())
            }
            Refusal::NotRegular(t) => {
                self.report.files.not_regular += 1;
                (ProblemKind::NotRegular, format!("not a regular file ({t})"))
            }
            Refusal::Stale(why) => {
                self.report.files.stale += 1;
                (ProblemKind::Stale, why.clone())
            }
            Refusal::Unreadable(why) => {
                self.report.files.unreadable += 1;
                (ProblemKind::Unreadable, why.clone())
            }
            Refusal::NotPermitted(_) => {
                self.report.files.unreadable += 1;
                (ProblemKind::Unreadable, refusal.to_string())
            }
        };
        self.problem(file, kind, detail);
    }

    /// Opens every file, counts what is resident (and with `keep`, marks it used again), and
    /// lists the requests for the rest.
    fn survey(
        &mut self,
        devices: &mut DeviceTable,
        policy: OrderPolicy,
        keep: bool,
        cancel: &CancelFlag,
        mut foreground: Option<&mut super::foreground::ForegroundReads>,
    ) -> (Vec<Request>, Locations, bool) {
        let mut requests = Vec::new();
        let mut locations = Locations::new();
        let mut any_rotational = false;
        for (i, pf) in self.plan.files().iter().enumerate() {
            if i % SURVEY_LOOK_EVERY == 0 {
                if let Some(f) = foreground.as_deref_mut() {
                    self.wait_turn(f, cancel, 0);
                }
            }
            let mut state = FileState {
                opened: None,
                usable: false,
                missing: RangeSet::new(),
                attempted: RangeSet::new(),
                remaining_chunks: 0,
                device: DeviceInfo::unknown(),
                verified: false,
                unverifiable: false,
            };
            if cancel.is_cancelled() {
                self.report.pages.not_attempted += pf.page_count();
                state.verified = true;
                self.states.push(state);
                continue;
            }
            let opened = match open_profiled(&pf.path, &pf.identity, self.plan.reader()) {
                Ok(o) => o,
                Err(refusal) => {
                    self.report.pages.skipped += pf.page_count();
                    self.refuse(i, refusal);
                    state.verified = true;
                    self.states.push(state);
                    continue;
                }
            };
            self.report.files.fetched += 1;
            let wanted_all = pf.page_set();
            let mut wanted = wanted_all.clone();
            wanted.remove(PageRange::from_bounds(pages_in(opened.identity.size, self.ps), u64::MAX));
            // Pages beyond the end of the (unchanged) file cannot be cached.
            self.report.pages.failed += wanted_all.page_count() - wanted.page_count();
            let probe = ResidencyProbe::new(opened.fd.as_fd(), self.ps, mincore_reports_page_cache(opened.owner_uid));
            state.unverifiable = !probe.is_available();
            if state.unverifiable {
                self.report.files.unverified += 1;
            }
            let resident = match probe.resident_of(&wanted) {
                Ok(r) => r,
                Err(_) if state.unverifiable => RangeSet::new(),
                Err(e) => {
                    tracing::debug!("{}: residency unknown ({e}); fetching all of it", pf.path.display());
                    RangeSet::new()
                }
            };
            let resident_count = resident.page_count();
            self.report.pages.already_resident += resident_count;
            if keep && resident_count > 0 {
                self.keep(opened.fd.as_fd(), &resident, cancel);
            }
            let mut missing = wanted;
            for r in resident.ranges() {
                missing.remove(*r);
            }
            state.device = devices.info(opened.identity.dev);
            state.usable = true;
            if missing.is_empty() {
                state.verified = true;
                self.states.push(state);
                continue;
            }
            let _ = disable_readahead(opened.fd.as_fd());
            let locate = policy == OrderPolicy::Physical || (policy == OrderPolicy::Auto && state.device.rotational);
            any_rotational |= state.device.rotational;
            for used in &pf.ranges {
                for piece in missing.ranges().iter().filter_map(|m| m.intersect(&used.range)) {
                    let req = Request { file: i, range: piece, first_use_us: used.first_use_us };
                    if locate {
                        let loc = physical_offset(opened.fd.as_fd(), piece.start * self.ps, piece.len * self.ps)
                            .ok()
                            .flatten()
                            .map(|phys| (opened.identity.dev, phys));
                        locations.insert((i, piece.start), loc);
                    }
                    requests.push(req);
                }
            }
            state.missing = missing;
            if self.open_count < self.max_open {
                state.opened = Some(opened);
                self.open_count += 1;
                self.open_queue.push_back(i);
            }
            self.states.push(state);
        }
        (requests, locations, any_rotational)
    }

    /// Marks the `resident` pages of `fd` used once more, in chunks of at most 2 MiB, stopping
    /// between chunks when `cancel` is raised. Completing a resident chunk reads nothing: it is
    /// the completion's own access that counts (`MADV_POPULATE_READ` touches every page it
    /// maps; `pread` marks every page it copies). A page pushed out since the survey is read
    /// back, exactly (read-ahead is off), as the plan wants it anyway.
    fn keep(&mut self, fd: BorrowedFd<'_>, resident: &RangeSet, cancel: &CancelFlag) {
        let _ = disable_readahead(fd);
        let chunk = (MAX_CHUNK_BYTES / self.ps).max(1);
        for piece in resident.ranges().iter().flat_map(|r| r.chunks(chunk)) {
            if cancel.is_cancelled() {
                return;
            }
            match complete(fd, piece, self.ps, &mut self.completion, &mut self.scratch) {
                Ok(()) => self.report.kept_pages += piece.len,
                Err(e) => {
                    tracing::debug!("keeping resident pages: {e}");
                    return;
                }
            }
        }
    }

    /// Makes sure file `i` is open, reopening (and rechecking its identity) if it was closed to
    /// stay within the open-file budget. False when it cannot be used any more.
    fn ensure_open(&mut self, i: usize) -> bool {
        if !self.states[i].usable {
            return false;
        }
        if self.states[i].opened.is_some() {
            return true;
        }
        while self.open_count >= self.max_open {
            let Some(victim) = self.open_queue.pop_front() else { break };
            if victim != i && self.states[victim].opened.take().is_some() {
                self.open_count -= 1;
            }
        }
        let pf = &self.plan.files()[i];
        match open_profiled(&pf.path, &pf.identity, self.plan.reader()) {
            Ok(o) => {
                let _ = disable_readahead(o.fd.as_fd());
                self.states[i].opened = Some(o);
                self.open_count += 1;
                self.open_queue.push_back(i);
                true
            }
            Err(refusal) => {
                // Changed while we were fetching: what was not loaded yet fails, nothing is read.
                self.states[i].usable = false;
                self.problem(i, ProblemKind::ReadError, format!("changed during the fetch: {refusal}"));
                false
            }
        }
    }

    fn close(&mut self, i: usize) {
        if self.states[i].opened.take().is_some() {
            self.open_count -= 1;
        }
    }

    fn load(
        &mut self,
        chunks: &[Chunk],
        window: u64,
        keep_free: u64,
        cancel: &CancelFlag,
        mut foreground: Option<&mut super::foreground::ForegroundReads>,
    ) {
        let sizes = chunks.iter().map(|c| c.range.len * self.ps).collect();
        let mut schedule = WindowSchedule::new(sizes, window);
        loop {
            // Until the watch trusts the disks to be quiet, one chunk at a time: what it queues
            // before it notices a reader is what it takes from that reader.
            if let Some(f) = foreground.as_deref() {
                schedule.set_window(if f.trusted() { window } else { 0 });
            }
            let Some(step) = schedule.next() else { break };
            match step {
                Step::Advise(k) => {
                    let c = chunks[k];
                    // Free memory only: what is in flight, this chunk included, must land in
                    // memory that holds nothing, above the reserve (MemFree re-read each chunk).
                    if keep_free > 0 && !free_memory_above(keep_free.saturating_add(schedule.in_flight())) {
                        self.report.cancelled = true;
                        self.report.stopped_at_free_reserve = true;
                        return;
                    }
                    if let Some(f) = foreground.as_deref_mut() {
                        // What is in flight besides this chunk may land while it watches.
                        self.wait_turn(f, cancel, schedule.in_flight() - c.range.len * self.ps);
                        if cancel.is_cancelled() {
                            self.report.cancelled = true;
                            return;
                        }
                    }
                    if self.ensure_open(c.file) {
                        if let Some(o) = &self.states[c.file].opened {
                            let _ = advise(o.fd.as_fd(), c.range, self.ps);
                        }
                    }
                }
                Step::Complete(k) => {
                    if cancel.is_cancelled() {
                        self.report.cancelled = true;
                        return;
                    }
                    let c = chunks[k];
                    if self.ensure_open(c.file) {
                        if let Some(o) = &self.states[c.file].opened {
                            if let Err(e) = complete(o.fd.as_fd(), c.range, self.ps, &mut self.completion, &mut self.scratch) {
                                let detail = format!("reading pages {}..{}: {e}", c.range.start, c.range.end());
                                self.problem(c.file, ProblemKind::ReadError, detail);
                            }
                        }
                    }
                    let state = &mut self.states[c.file];
                    state.attempted.insert(c.range);
                    state.remaining_chunks -= 1;
                    if state.remaining_chunks == 0 {
                        self.verify(c.file);
                        self.close(c.file);
                    }
                }
            }
        }
    }

    /// Counts, for file `i`, which missing pages are now resident.
    fn verify(&mut self, i: usize) {
        if self.states[i].verified {
            return;
        }
        self.states[i].verified = true;
        let missing = std::mem::take(&mut self.states[i].missing);
        if self.states[i].unverifiable {
            let attempted = self.states[i].attempted.clone();
            let tried: u64 = missing.ranges().iter().map(|r| attempted.overlap_count(*r)).sum();
            self.report.pages.unverified += tried;
            let untried = missing.page_count() - tried;
            if self.report.cancelled {
                self.report.pages.not_attempted += untried;
            } else {
                self.report.pages.failed += untried;
            }
            return;
        }
        let now_resident = if self.ensure_open(i) {
            let o = self.states[i].opened.as_ref().map(|o| (o.fd.as_fd(), o.owner_uid));
            o.and_then(|(fd, owner)| {
                ResidencyProbe::new(fd, self.ps, mincore_reports_page_cache(owner)).resident_of(&missing).ok()
            })
            .unwrap_or_default()
        } else {
            RangeSet::new()
        };
        let loaded = now_resident.page_count();
        let attempted = &self.states[i].attempted;
        let mut not_loaded_attempted = 0;
        let mut not_loaded_unattempted = 0;
        for r in missing.ranges() {
            for gap in now_resident.missing_from(*r) {
                let tried = attempted.overlap_count(gap);
                not_loaded_attempted += tried;
                not_loaded_unattempted += gap.len - tried;
            }
        }
        self.report.pages.loaded += loaded;
        self.report.pages.failed += not_loaded_attempted;
        if self.report.cancelled {
            self.report.pages.not_attempted += not_loaded_unattempted;
        } else {
            self.report.pages.failed += not_loaded_unattempted;
        }
    }

    fn finish(&mut self) {
        for i in 0..self.states.len() {
            if !self.states[i].verified {
                self.verify(i);
            }
            self.close(i);
        }
        let read_errors: std::collections::HashSet<&PathBuf> =
            self.report.problems.iter().filter(|p| p.kind == ProblemKind::ReadError).map(|p| &p.path).collect();
        self.report.files.read_errors = read_errors.len() as u64;
    }
}

/// Whether MemFree (/proc/meminfo) is at least `bytes`; an unreadable figure counts as not.
fn free_memory_above(bytes: u64) -> bool {
    crate::sense::procfs::meminfo("MemFree").is_ok_and(|free| free >= bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fetch::open::current_identity;
    use crate::fetch::residency::{evict_file, page_size};
    use augur_core::model::profile::UsedRange;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_wait_on_the_cancel_flag_ends_when_it_is_raised_or_at_its_limit() {
        let flag = CancelFlag::new();
        let t = Instant::now();
        assert!(!flag.wait_timeout(std::time::Duration::from_millis(30)));
        assert!(t.elapsed() >= std::time::Duration::from_millis(30));
        let raiser = flag.clone();
        let t = Instant::now();
        let h = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            raiser.cancel();
        });
        assert!(flag.wait_timeout(std::time::Duration::from_secs(10)));
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "not woken by the cancel");
        h.join().unwrap();
        assert!(flag.wait_timeout(std::time::Duration::from_secs(10)), "a raised flag returns at once");
    }

    fn file_with_plan(pages: u64, ranges: &[(u64, u64)]) -> (tempfile::NamedTempFile, FetchPlan) {
        let ps = page_size();
        let mut f = tempfile::NamedTempFile::new_in("/var/tmp").unwrap();
        f.write_all(&vec![3u8; (pages * ps) as usize]).unwrap();
        f.as_file().sync_all().unwrap();
        let id = current_identity(f.path()).unwrap();
        let used: Vec<UsedRange> = ranges
            .iter()
            .enumerate()
            .map(|(i, &(s, l))| UsedRange { range: PageRange::new(s, l), first_use_us: i as u64 })
            .collect();
        let mut plan = FetchPlan::new(ps);
        plan.add_file(f.path().to_path_buf(), id, &used, ps);
        (f, plan)
    }

    #[test]
    fn fetch_loads_and_accounts_every_page() {
        let (f, plan) = file_with_plan(2048, &[(5, 3), (100, 700), (2000, 100)]);
        evict_file(f.as_file().as_fd()).unwrap();
        let report =
            Prefetcher::new(FetchOptions { order: OrderPolicy::FirstUse, ..Default::default() }).fetch(&plan, &CancelFlag::new());
        let p = report.pages;
        // 2000..2100 runs past the end of the 2048-page file: 52 pages cannot exist.
        assert_eq!(p.wanted, 803);
        assert_eq!(p.already_resident + p.loaded + p.unverified + p.failed + p.skipped + p.not_attempted, p.wanted);
        assert_eq!(p.failed, 52, "{report:?}");
        assert_eq!(p.already_resident + p.loaded, 751, "{report:?}");
        assert_eq!(report.files.fetched, 1);
        // A second fetch finds everything resident and loads nothing.
        let again = Prefetcher::default().fetch(&plan, &CancelFlag::new());
        assert_eq!(again.pages.already_resident, 751);
        assert_eq!(again.pages.loaded, 0);
    }

    /// (pages on the active LRU list, pages with the referenced flag) of the first `pages` of
    /// `file`, from /proc/kpageflags (root). The pages are mapped at random (no recency from the
    /// mapping) and read through plain memory accesses, which fault them in without marking
    /// them used.
    fn lru_flags(file: &std::fs::File, pages: u64) -> (u64, u64) {
        use std::io::{Read, Seek, SeekFrom};
        let ps = page_size();
        let len = (pages * ps) as usize;
        // SAFETY: a fresh read-only shared mapping of a file this test owns and never truncates;
        // it is only read within its length, then unmapped below.
        let addr = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), 0) };
        assert_ne!(addr, libc::MAP_FAILED);
        // SAFETY: addr/len are the mapping just made; MADV_RANDOM changes no contents.
        assert_eq!(unsafe { libc::madvise(addr, len, libc::MADV_RANDOM) }, 0);
        let mut pagemap = std::fs::File::open("/proc/self/pagemap").unwrap();
        let mut kpageflags = std::fs::File::open("/proc/kpageflags").unwrap();
        let (mut active, mut referenced) = (0, 0);
        for i in 0..pages {
            // SAFETY: within the mapping; the file is longer than it, so the read cannot fault.
            unsafe { std::ptr::read_volatile((addr as *const u8).add((i * ps) as usize)) };
            let mut entry = [0u8; 8];
            pagemap.seek(SeekFrom::Start((addr as u64 / ps + i) * 8)).unwrap();
            pagemap.read_exact(&mut entry).unwrap();
            let entry = u64::from_ne_bytes(entry);
            assert!(entry >> 63 == 1, "page {i} not present");
            let mut flags = [0u8; 8];
            kpageflags.seek(SeekFrom::Start((entry & ((1 << 55) - 1)) * 8)).unwrap();
            kpageflags.read_exact(&mut flags).unwrap();
            let flags = u64::from_ne_bytes(flags);
            referenced += (flags >> 2) & 1; // KPF_REFERENCED
            active += (flags >> 6) & 1; // KPF_ACTIVE
        }
        // SAFETY: exactly the mapping made above; nothing refers into it any more.
        unsafe { libc::munmap(addr, len) };
        (active, referenced)
    }

    #[test]
    fn keeping_moves_prefetched_pages_to_the_active_list_and_a_plain_fetch_does_not() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: /proc/kpageflags needs root (CI runs this as root)");
            return;
        }
        const PAGES: u64 = 512;
        let (f, plan) = file_with_plan(PAGES, &[(0, PAGES)]);
        evict_file(f.as_file().as_fd()).unwrap();
        let loaded = Prefetcher::default().fetch(&plan, &CancelFlag::new());
        assert_eq!(loaded.pages.loaded, PAGES, "{loaded:?}");
        assert_eq!(loaded.kept_pages, 0);
        // Read once by the fetch: referenced, on the inactive list, the first to be pushed out.
        let (active, referenced) = lru_flags(f.as_file(), PAGES);
        assert!(active < PAGES / 4 && referenced > PAGES * 3 / 4, "after the fetch: {active} active, {referenced} referenced");
        // A plain fetch of the resident plan leaves them as they are.
        let plain = Prefetcher::default().fetch(&plan, &CancelFlag::new());
        assert_eq!((plain.pages.already_resident, plain.kept_pages), (PAGES, 0));
        let (active, _) = lru_flags(f.as_file(), PAGES);
        assert!(active < PAGES / 4, "after a plain fetch: {active} active");
        // Keeping marks them used a second time: the kernel moves them to the active list (a
        // few may still sit in a per-CPU batch).
        let kept = Prefetcher::new(FetchOptions { keep_resident: true, ..Default::default() }).fetch(&plan, &CancelFlag::new());
        assert_eq!((kept.pages.already_resident, kept.pages.loaded, kept.kept_pages), (PAGES, 0, PAGES), "{kept:?}");
        let (active, _) = lru_flags(f.as_file(), PAGES);
        assert!(active > PAGES * 3 / 4, "after keeping: {active} of {PAGES} active");
    }

    #[test]
    fn path_lookups_are_replayed_only_when_pages_were_missing() {
        use augur_core::model::profile::{Lookup, LookupKind};
        let (f, mut plan) = file_with_plan(64, &[(0, 64)]);
        plan.add_lookup(Lookup { path: "/nonexistent/augur-prefetcher-test".into(), kind: LookupKind::Missing });
        evict_file(f.as_file().as_fd()).unwrap();
        let cold = Prefetcher::default().fetch(&plan, &CancelFlag::new());
        assert_eq!(cold.pages.loaded + cold.pages.unverified, 64, "{cold:?}");
        assert_eq!(cold.lookups_replayed, 1, "a cold plan's walks are replayed");
        let warm = Prefetcher::default().fetch(&plan, &CancelFlag::new());
        assert_eq!(warm.pages.already_resident, 64, "{warm:?}");
        assert_eq!(warm.lookups_replayed, 0, "a plan whose pages are all resident walks nothing");
    }

    #[test]
    fn a_fetch_of_free_memory_only_stops_at_the_reserve_and_loads_nothing_beyond_it() {
        let (f, plan) = file_with_plan(512, &[(0, 512)]);
        evict_file(f.as_file().as_fd()).unwrap();
        // A reserve no machine has free: not one chunk is read.
        let options = FetchOptions { keep_free_bytes: u64::MAX / 2, ..Default::default() };
        let report = Prefetcher::new(options).fetch(&plan, &CancelFlag::new());
        assert!(report.cancelled && report.stopped_at_free_reserve, "{report:?}");
        assert_eq!(report.pages.loaded, 0, "{report:?}");
        let p = report.pages;
        assert_eq!(p.already_resident + p.loaded + p.unverified + p.failed + p.skipped + p.not_attempted, p.wanted);
        // A reserve of one page is always there: the whole file is read.
        let report =
            Prefetcher::new(FetchOptions { keep_free_bytes: 4096, ..Default::default() }).fetch(&plan, &CancelFlag::new());
        assert!(!report.cancelled && !report.stopped_at_free_reserve, "{report:?}");
        assert_eq!(report.pages.already_resident + report.pages.loaded, 512, "{report:?}");
    }

    #[test]
    fn cancel_from_another_thread_stops_between_chunks() {
        use crate::fetch::residency::cachestat;
        // 128 MiB: 64 chunks of 2 MiB. Another thread raises the flag once the first pages are
        // in; if the whole fetch wins that race (a very loaded machine), evict and try again.
        let (f, plan) = file_with_plan(32768, &[(0, 32768)]);
        let mut stopped = None;
        for _ in 0..5 {
            evict_file(f.as_file().as_fd()).unwrap();
            let cancel = CancelFlag::new();
            let done = CancelFlag::new();
            let watcher = {
                let (cancel, done) = (cancel.clone(), done.clone());
                let file = f.reopen().unwrap();
                std::thread::spawn(move || {
                    let ps = page_size();
                    while !done.is_cancelled()
                        && cachestat(file.as_fd(), PageRange::new(0, 32768), ps).unwrap().unwrap().cached == 0
                    {
                        std::thread::yield_now();
                    }
                    cancel.cancel();
                })
            };
            let report = Prefetcher::default().fetch(&plan, &cancel);
            done.cancel();
            watcher.join().unwrap();
            if report.cancelled {
                stopped = Some(report);
                break;
            }
        }
        let report = stopped.expect("the fetch was never cancelled in 5 attempts");
        let p = report.pages;
        assert!(p.not_attempted > 0, "{report:?}");
        assert_eq!(p.already_resident + p.loaded + p.unverified + p.failed + p.skipped + p.not_attempted, p.wanted);
    }

    #[test]
    fn cancelled_fetch_attempts_nothing() {
        let (f, plan) = file_with_plan(64, &[(0, 64)]);
        evict_file(f.as_file().as_fd()).unwrap();
        let cancel = CancelFlag::new();
        cancel.cancel();
        let report = Prefetcher::default().fetch(&plan, &cancel);
        assert_eq!(report.pages.not_attempted, 64);
        assert_eq!(report.pages.loaded, 0);
    }
}
