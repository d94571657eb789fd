//! The stream worker: a thread of the daemon that reads the kernel's pattern records
//! (`augur_os::sense::bpf::PatternWatch`), hands them to the engine's rules
//! (`augur_engine::ahead::AheadStreams`, with the time and the memory pressure,
//! `augur_engine::behind::BehindStreams`, `augur_engine::looping::LoopStreams` and
//! `augur_engine::random_read::RandomReaders`), and carries out their loads ahead of readers,
//! drops behind streams and loops, and random-access advice (`augur_os::fetch::ahead`).
//!
//! It runs apart from the event loop so that following readers never waits for launches,
//! replays or planning, nor they for it; it shares only its counters ([`AheadStatus`]) and a stop
//! flag. It owns no policy: what to load and when is the engine's.

use std::collections::HashMap;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use augur_core::model::access_pattern::{Pattern, PatternRule};
use augur_core::model::range::PageRange;
use augur_core::plan::budget::MemoryPressure;
use augur_engine::ahead::{AheadAction, AheadStreams, Sighting, StreamKey};
use augur_engine::behind::{BehindAction, BehindStreams};
use augur_engine::config::Config;
use augur_engine::looping::{self, LoopAction, LoopStreams};
use augur_engine::random_read::{AccessAdvice, RandomReaders};
use augur_os::fetch::ahead::ReaderFile;
use augur_os::fetch::residency::pages_in;
use augur_os::loop_io::{Wakeup, WakeupHandle};
use augur_os::sense::bpf::{PatternRecord, PatternWatch, PatternWatchOptions};

pub use super::control::AheadStatus;

/// How often memory pressure is read and idle streams are dropped, while any stream is
/// followed (with none, the worker sleeps until a record or a stop wakes it).
const HOUSEKEEPING: Duration = Duration::from_millis(250);
/// Most records handled per poll.
const BATCH: usize = 1024;

/// The running stream worker.
pub struct AheadWorker {
    stop: Arc<AtomicBool>,
    wake: WakeupHandle,
    status: Arc<Mutex<AheadStatus>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for AheadWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AheadWorker").field("status", &self.status()).finish()
    }
}

impl AheadWorker {
    /// Starts the worker when `[pattern] prefetch_ahead`, `drop_behind`, `loop_prefix` or
    /// `advise_random` is on (`None` otherwise). The pattern watch is loaded in the thread; if the kernel refuses it, the worker
    /// ends and its status says why.
    pub fn start(config: &Config, page_size: u64) -> Option<AheadWorker> {
        let p = &config.pattern;
        if !p.prefetch_ahead && !p.drop_behind && !p.loop_prefix && !p.advise_random {
            return None;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let status = Arc::new(Mutex::new(AheadStatus {
            note: "starting".into(),
            drop_behind: config.pattern.drop_behind,
            loop_prefix: config.pattern.loop_prefix,
            advise_random: config.pattern.advise_random,
            ..AheadStatus::default()
        }));
        let streams = AheadStreams::new(config.ahead_settings(page_size));
        let behind = config.pattern.drop_behind.then(|| BehindStreams::new(config.behind_settings(page_size)));
        let loops = config.pattern.loop_prefix.then(|| LoopStreams::new(config.loop_settings(page_size)));
        let random = config.pattern.advise_random.then(|| RandomReaders::new(config.random_settings()));
        let ahead = config.pattern.prefetch_ahead;
        let options = PatternWatchOptions {
            rule: PatternRule { establish: config.pattern.establish_accesses, ..PatternRule::default() },
            // Progress about every quarter of the first distance ahead.
            progress_pages: (streams.settings().initial_pages / 4).max(1),
            progress_backward: ahead,
            progress_strided: ahead,
            forward_progress_pages: config.forward_progress_pages(page_size),
            progress_forward: config.pattern.drop_behind,
            progress_loop: config.pattern.loop_prefix,
            changes_random: config.pattern.advise_random,
            own_tgid: std::process::id(),
            all_changes: false,
        };
        let (wakeup, wake) = match Wakeup::new().and_then(|w| w.handle().map(|h| (w, h))) {
            Ok(pair) => pair,
            Err(e) => {
                tracing::warn!("cannot start the stream worker: {e}");
                return None;
            }
        };
        let stop_percent = config.predict.pressure_stop_percent;
        let (s, st) = (Arc::clone(&stop), Arc::clone(&status));
        let spawned = std::thread::Builder::new().name("augur-ahead".into()).spawn(move || {
            run(
                options,
                Rules { ahead: ahead.then_some(streams), behind, loops, random },
                page_size,
                stop_percent,
                &wakeup,
                &s,
                &st,
            )
        });
        match spawned {
            Ok(thread) => Some(AheadWorker { stop, wake, status, thread: Some(thread) }),
            Err(e) => {
                tracing::warn!("cannot start the stream worker: {e}");
                None
            }
        }
    }

    /// Its counters now.
    pub fn status(&self) -> AheadStatus {
        self.status.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Asks the thread to stop and detach the programs, without waiting (detaching takes about
    /// an RCU grace period): [`Self::stop`] or dropping then waits for it.
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.wake.wake();
    }

    /// Stops the thread and waits until the programs are detached (as dropping does).
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for AheadWorker {
    fn drop(&mut self) {
        self.request_stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The engine's rules the worker runs: loading ahead of readers, dropping behind streams,
/// keeping loops' prefixes, advising random readers' files (each `None` when off).
struct Rules {
    ahead: Option<AheadStreams>,
    behind: Option<BehindStreams>,
    loops: Option<LoopStreams>,
    random: Option<RandomReaders>,
}

fn run(
    options: PatternWatchOptions,
    rules: Rules,
    page_size: u64,
    stop_percent: f64,
    wakeup: &Wakeup,
    stop: &AtomicBool,
    status: &Mutex<AheadStatus>,
) {
    let set_note = |note: String| status.lock().unwrap_or_else(|e| e.into_inner()).note = note;
    let mut watch = match PatternWatch::open(options) {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!("access patterns are not watched: {e}");
            set_note(format!("off: {}", e.reason()));
            return;
        }
    };
    // Loading parsed the kernel's BTF in this thread's heap: give that memory back.
    augur_os::loop_io::release_free_heap();
    let Rules { ahead: mut streams, mut behind, mut loops, mut random } = rules;
    tracing::info!(
        "access patterns watched: {}, {}, {}",
        if streams.is_some() { "loading ahead of backward and strided readers" } else { "not loading ahead of readers" },
        if behind.is_some() { "dropping large read-once streams behind their readers" } else { "not dropping streams behind" },
        if loops.is_some() { "keeping a resident prefix of loops larger than memory" } else { "leaving loops to the kernel" }
    );
    if random.is_some() {
        tracing::info!("random readers' files are advised random access (no readahead)");
    }
    set_note("on".into());
    let started = Instant::now();
    let pressure_path = PathBuf::from("/proc/pressure/memory");
    let mut files: HashMap<StreamKey, Option<ReaderFile>> = HashMap::new();
    let mut behind_files: HashMap<StreamKey, ReaderFile> = HashMap::new();
    let mut loop_files: HashMap<StreamKey, ReaderFile> = HashMap::new();
    let mut last_housekeeping = Instant::now();
    let mut records = 0u64;
    let mut bytes_ahead = 0u64;
    let mut lost = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let busy = streams.as_ref().is_some_and(|s| s.followed() > 0 || s.pressure())
            || behind.as_ref().is_some_and(|b| b.known() > 0)
            || loops.as_ref().is_some_and(|l| l.known() > 0);
        let timeout = busy.then_some(HOUSEKEEPING);
        if watch.wait(Some(wakeup.as_fd()), timeout) {
            wakeup.clear();
        }
        let mut batch: Vec<PatternRecord> = Vec::new();
        if let Err(e) = watch.poll(BATCH, |r| batch.push(r)) {
            tracing::warn!("reading pattern records: {e}; no longer loading ahead of readers");
            set_note(format!("stopped: {e}"));
            break;
        }
        let now_ms = started.elapsed().as_millis() as u64;
        let mut actions = Vec::new();
        let mut behind_actions = Vec::new();
        let mut loop_actions = Vec::new();
        let mut advice = Vec::new();
        for r in &batch {
            records += 1;
            let key = StreamKey { tgid: r.tgid, tid: r.tid, dev: r.dev, ino: r.ino };
            if !r.progress && r.pattern != r.previous {
                tracing::debug!(
                    "pid {} tid {} inode {}:{}: {} -> {}",
                    r.tgid,
                    r.tid,
                    r.dev,
                    r.ino,
                    r.previous.map_or("new", |p| p.name()),
                    r.pattern.map_or("none", |p| p.name())
                );
            }
            let sighting = Sighting { key, access: r.access, pattern: r.pattern };
            if let Some(streams) = streams.as_mut() {
                actions.extend(streams.on_sighting(&sighting, now_ms));
            }
            // A forward reader of a file too small to be dropped behind is passed over without
            // opening its file (each launch's libraries and headers are read forward).
            if let Some(behind) = behind.as_mut()
                && (r.pattern != Some(Pattern::Forward) || behind.wants(pages_in(r.size_bytes, page_size)))
            {
                behind_actions.extend(behind.on_sighting(&sighting, now_ms));
            }
            if let Some(loops) = loops.as_mut() {
                loop_actions.extend(loops.on_sighting(&sighting, now_ms));
            }
            if let Some(random) = random.as_mut() {
                advice.extend(random.on_sighting(&sighting, now_ms));
            }
        }
        if busy && last_housekeeping.elapsed() >= HOUSEKEEPING {
            last_housekeeping = Instant::now();
            if let Some(streams) = streams.as_mut() {
                let high = std::fs::read_to_string(&pressure_path)
                    .ok()
                    .as_deref()
                    .and_then(MemoryPressure::from_psi)
                    .is_some_and(|p| p.some_avg10 >= stop_percent);
                actions.extend(streams.set_pressure(high));
                actions.extend(streams.expire(now_ms));
            }
            if let Some(behind) = behind.as_mut() {
                behind_actions.extend(behind.expire(now_ms));
            }
            if let Some(loops) = loops.as_mut() {
                loop_actions.extend(loops.expire(now_ms));
            }
            lost = watch.lost().unwrap_or(lost);
        }
        for a in actions {
            match a {
                AheadAction::Load { key, ranges } => {
                    let file = files.entry(key).or_insert_with(|| match ReaderFile::open(key.tgid, key.dev, key.ino) {
                        Ok(f) => f,
                        Err(e) => {
                            tracing::debug!("opening the file of pid {} inode {}: {e}", key.tgid, key.ino);
                            None
                        }
                    });
                    let Some(file) = file else { continue };
                    match file.load(&ranges, page_size) {
                        Ok(()) => bytes_ahead += ranges.iter().map(|r| r.len * page_size).sum::<u64>(),
                        Err(e) => tracing::debug!("loading ahead in inode {}: {e}", key.ino),
                    }
                }
                AheadAction::Drop { key } => {
                    files.remove(&key);
                }
            }
        }
        if let Some(behind) = behind.as_mut() {
            carry_out_behind(behind, behind_actions, &mut behind_files, page_size);
        }
        if let Some(loops) = loops.as_mut() {
            carry_out_loops(loops, loop_actions, &mut loop_files, page_size);
        }
        carry_out_advice(advice);
        let mut s = status.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(streams) = streams.as_ref() {
            let c = streams.counts();
            s.streams_now = streams.followed() as u64;
            s.streams_followed = c.streams_followed;
            s.windows_grown = c.grown;
            s.pressure_stops = c.pressure_stops;
        }
        if let Some(behind) = behind.as_ref() {
            let c = behind.counts();
            s.behind_now = behind.dropping() as u64;
            s.behind_streams = c.streams;
            s.bytes_dropped_behind = c.pages_dropped.saturating_mul(page_size);
        }
        if let Some(loops) = loops.as_ref() {
            let c = loops.counts();
            s.loops_now = loops.treated() as u64;
            s.loops_treated = c.loops;
            s.bytes_dropped_loops = c.pages_dropped.saturating_mul(page_size);
        }
        if let Some(random) = random.as_ref() {
            s.random_now = random.advised() as u64;
            s.random_files = random.counts().files;
        }
        s.bytes_ahead = bytes_ahead;
        s.records = records;
        s.records_lost = lost;
    }
    // Readahead back for every file still advised random: nothing follows their readers now.
    if let Some(random) = random.as_mut() {
        carry_out_advice(random.release_all());
    }
    watch.close();
}

/// Carries out the random-access advice on readers' open files.
fn carry_out_advice(advice: Vec<AccessAdvice>) {
    for AccessAdvice { file, random } in advice {
        let what = if random { "random access (no readahead)" } else { "normal access (readahead back)" };
        match augur_os::fetch::ahead::advise_reader_access(file.tgid, file.dev, file.ino, random) {
            Ok(n) => tracing::debug!("pid {} inode {}: {what} advised on {n} open files", file.tgid, file.ino),
            Err(e) => tracing::debug!("pid {} inode {}: advising {what}: {e}", file.tgid, file.ino),
        }
    }
}

/// Carries out the drop-behind rule's actions (and the actions its answers to `Examine` call
/// for): the file is opened once per stream, its size and the pages resident ahead of the reader
/// reported, passed ranges dropped.
fn carry_out_behind(
    behind: &mut BehindStreams,
    actions: Vec<BehindAction>,
    files: &mut HashMap<StreamKey, ReaderFile>,
    page_size: u64,
) {
    let mut queue: std::collections::VecDeque<BehindAction> = actions.into();
    while let Some(a) = queue.pop_front() {
        match a {
            BehindAction::Examine { key, from } => {
                let file = match ReaderFile::open(key.tgid, key.dev, key.ino) {
                    Ok(f) => f,
                    Err(e) => {
                        tracing::debug!("opening the file of pid {} inode {}: {e}", key.tgid, key.ino);
                        None
                    }
                };
                let answer = file.and_then(|f| {
                    let pages = f.pages(page_size).ok()?;
                    if !behind.wants(pages) {
                        return Some((None, pages, Default::default()));
                    }
                    // Pages resident ahead of the reader now were there before it: someone else's.
                    // When residency cannot be known, nothing is dropped.
                    let resident = f.resident(PageRange::from_bounds(from, pages), page_size).ok()??;
                    Some((Some(f), pages, resident))
                });
                match answer {
                    Some((f, pages, resident)) => {
                        let free = f.is_some().then(|| free_for(key.tgid, page_size)).flatten();
                        if let Some(f) = f {
                            tracing::debug!(
                                "pid {} reads inode {} through from page {from}; {} pages free for it",
                                key.tgid,
                                key.ino,
                                free.map_or_else(|| "unknown".to_string(), |p| p.to_string())
                            );
                            files.insert(key, f);
                        }
                        queue.extend(behind.examined(key, Some(pages), resident, free));
                    }
                    None => queue.extend(behind.examined(key, None, Default::default(), None)),
                }
            }
            BehindAction::Drop { key, ranges } => match files.get(&key) {
                Some(f) => match f.drop_cached(&ranges, page_size) {
                    Ok(()) => tracing::trace!("dropped {ranges:?} behind the reader of inode {}", key.ino),
                    Err(e) => tracing::debug!("dropping pages behind the reader of inode {}: {e}", key.ino),
                },
                None => tracing::debug!("inode {} has no file open to drop pages behind its reader", key.ino),
            },
            BehindAction::Forget { key } => {
                files.remove(&key);
            }
        }
    }
}

/// The pages process `tgid` could still fill without anything being evicted: the room left under
/// its memory cgroups, at most the machine's free memory (`None`: not known).
fn free_for(tgid: u32, page_size: u64) -> Option<u64> {
    let free = augur_os::sense::procfs::meminfo("MemFree").ok()?;
    let room = augur_os::sense::procfs::memory_cgroup_room(tgid).map_or(free, |room| room.min(free));
    Some(room / page_size.max(1))
}

/// Carries out the loop rule's actions: the file is opened once per loop, the memory its reader
/// can have reported (the loop's pages cached now plus the room left under its memory cgroups,
/// or what the machine has available), the passed pages beyond the prefix dropped.
fn carry_out_loops(
    loops: &mut LoopStreams,
    actions: Vec<LoopAction>,
    files: &mut HashMap<StreamKey, ReaderFile>,
    page_size: u64,
) {
    let mut queue: std::collections::VecDeque<LoopAction> = actions.into();
    while let Some(a) = queue.pop_front() {
        match a {
            LoopAction::Examine { key } => {
                let file = match ReaderFile::open(key.tgid, key.dev, key.ino) {
                    Ok(f) => f,
                    Err(e) => {
                        tracing::debug!("opening the file of pid {} inode {}: {e}", key.tgid, key.ino);
                        None
                    }
                };
                let memory = file.as_ref().and_then(|f| {
                    let range = loops.range(key)?;
                    let cached = f.resident(range, page_size).ok()??.page_count();
                    let available = augur_os::sense::procfs::meminfo("MemAvailable").ok()? / page_size.max(1);
                    let room = augur_os::sense::procfs::memory_cgroup_room(key.tgid).map(|b| b / page_size.max(1));
                    Some(looping::memory_for_loop(room, available, cached))
                });
                if let (Some(f), Some(m)) = (file, memory) {
                    tracing::debug!(
                        "pid {} loops over {:?} of inode {}, can have {m} pages",
                        key.tgid,
                        loops.range(key),
                        key.ino
                    );
                    files.insert(key, f);
                }
                queue.extend(loops.examined(key, memory));
            }
            LoopAction::Drop { key, ranges } => match files.get(&key) {
                Some(f) => match f.drop_cached(&ranges, page_size) {
                    Ok(()) => tracing::trace!("dropped {ranges:?} of the loop over inode {}", key.ino),
                    Err(e) => tracing::debug!("dropping pages of the loop over inode {}: {e}", key.ino),
                },
                None => tracing::debug!("inode {} has no file open to drop its loop's pages", key.ino),
            },
            LoopAction::Forget { key } => {
                files.remove(&key);
            }
        }
    }
}
