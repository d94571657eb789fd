//! The pid filters of a tracefs instance, written from a thread of their own: `set_event_pid`
//! (the tasks followed) and `set_event_notrace_pid` (tasks no longer followed).
//!
//! The kernel never lets a write pass cheaply. Appending to a list (opened without `O_TRUNC`)
//! puts the new list in force at once but then waits for an RCU-tasks-trace grace period (a
//! third of a second here) before returning; truncating clears the list first, so until the
//! grace period ends *every* task is recorded. So lists only grow: a task stops being followed by
//! joining the notrace list, and the kernel (with `event-fork`) removes exiting tasks from both
//! and adds children to the lists their parent is in. The one truncation left is when a task to
//! follow is already on the notrace list (a child of a task no longer followed): the notrace list
//! is then rewritten without it. A process is written with the threads and processes it has
//! started so far: `event-fork` only adds the tasks created after the write.
//!
//! The daemon's event loop must not stall on any of this, so it hands requests to
//! [`PidFilterWriter`] and goes on; requests made while a write is in progress are coalesced (the
//! latest intent per pid wins). It owns that thread and the two files; it does not decide which
//! pids are followed.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{OsError, Result};
use crate::sense::monotonic_ns;

/// At most this many tasks are written for one process to follow (its threads and descendants).
const MAX_TASKS_PER_PID: usize = 512;
/// Pids whose time in force is kept for the asking, at most (each is taken when its launch ends).
const MAX_IN_FORCE_KEPT: usize = 4_096;

#[derive(Default)]
struct State {
    /// Pid -> follow (true) or stop following (false), latest intent, not yet written.
    wanted: BTreeMap<u32, bool>,
    /// Requests made so far, and of those written (or failed) so far.
    requested: u64,
    done: u64,
    /// A write (and its grace period) is in progress.
    writing: bool,
    stop: bool,
    /// Pid asked to be followed -> monotonic ns just before the write that put it in force.
    in_force_since: BTreeMap<u32, u64>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is plain data: a panic elsewhere cannot leave it half-updated.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The two filter files of one instance.
#[derive(Clone, Debug)]
pub struct FilterFiles {
    /// `set_event_pid`.
    pub follow: PathBuf,
    /// `set_event_notrace_pid`.
    pub notrace: PathBuf,
}

/// Writes pid filter requests in the background. Dropping it finishes the writes asked for and
/// stops the thread.
pub struct PidFilterWriter {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for PidFilterWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PidFilterWriter").finish_non_exhaustive()
    }
}

impl PidFilterWriter {
    /// Starts the writer thread for `files`. A process to follow is written with its threads and
    /// the processes it started so far, read just before the write: the kernel adds only the
    /// tasks created after it (a launcher that started its main thread or a helper before its
    /// pid was in force would otherwise be traced without them).
    pub fn start(files: FilterFiles) -> Result<Self> {
        Self::start_expanding(files, |pid| crate::sense::procfs::task_tree(pid, MAX_TASKS_PER_PID))
    }

    /// [`Self::start`], with `expand` naming the tasks written for a pid to follow.
    fn start_expanding(files: FilterFiles, expand: fn(u32) -> Vec<u32>) -> Result<Self> {
        let shared = Arc::new(Shared::default());
        let theirs = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("augur-pid-filter".into())
            .spawn(move || write_loop(&theirs, &files, expand))
            .map_err(|e| OsError::io("starting the pid filter writer", e))?;
        Ok(PidFilterWriter { shared, thread: Some(thread) })
    }

    /// Asks for `pids` to be followed (or, with `follow` false, no longer); returns at once.
    pub fn request(&self, pids: &[u32], follow: bool) {
        if pids.is_empty() {
            return;
        }
        let mut s = self.shared.lock();
        for &p in pids {
            s.wanted.insert(p, follow);
        }
        s.requested += 1;
        self.shared.changed.notify_all();
    }

    /// True while a write is pending or in progress: a pid asked for now would only be in force
    /// after that write's grace period (up to a third of a second here).
    pub fn is_busy(&self) -> bool {
        let s = self.shared.lock();
        s.writing || !s.wanted.is_empty()
    }

    /// Since when (monotonic ns) `pid`, asked to be followed, has been in the filter: the write
    /// that put it there began then. Forgets it. `None` if it was not written (yet).
    pub fn take_in_force_since(&self, pid: u32) -> Option<u64> {
        self.shared.lock().in_force_since.remove(&pid)
    }

    /// Waits until every request made so far is written; false on timeout.
    pub fn settle(&self, timeout: Duration) -> bool {
        let until = Instant::now() + timeout;
        let mut s = self.shared.lock();
        let target = s.requested;
        while s.done < target {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            s = self.shared.changed.wait_timeout(s, left).map_or_else(|p| p.into_inner().0, |(g, _)| g);
        }
        true
    }
}

fn write_loop(shared: &Shared, files: &FilterFiles, expand: fn(u32) -> Vec<u32>) {
    loop {
        let (wanted, generation) = {
            let mut s = shared.lock();
            while s.wanted.is_empty() && !s.stop {
                s = shared.changed.wait(s).unwrap_or_else(|p| p.into_inner());
            }
            if s.wanted.is_empty() {
                return;
            }
            s.writing = true;
            (std::mem::take(&mut s.wanted), s.requested)
        };
        let asked: Vec<u32> = wanted.iter().filter(|(_, f)| **f).map(|(p, _)| *p).collect();
        let mut follow: Vec<u32> = Vec::new();
        for &pid in &asked {
            for task in expand(pid) {
                if !follow.contains(&task) {
                    follow.push(task);
                }
            }
        }
        let stop: Vec<u32> = wanted.iter().filter(|(_, f)| !**f).map(|(p, _)| *p).collect();
        let written = apply(files, &follow, &stop);
        let mut s = shared.lock();
        match written {
            Ok(Some(since)) => {
                if s.in_force_since.len() + asked.len() > MAX_IN_FORCE_KEPT {
                    s.in_force_since.clear();
                }
                // A pid written again (its launch re-exec'd) has been in force since the first.
                for &p in &asked {
                    s.in_force_since.entry(p).or_insert(since);
                }
            }
            Ok(None) => {}
            Err(e) => tracing::warn!("updating the traced processes ({} followed, {} not): {e}", follow.len(), stop.len()),
        }
        s.done = generation;
        s.writing = false;
        shared.changed.notify_all();
    }
}

/// Writes both lists, the tasks to follow first (a launch starting now must not wait out the
/// grace period of the tasks let go); returns when (monotonic ns) the follow list was appended.
fn apply(files: &FilterFiles, follow: &[u32], stop: &[u32]) -> io::Result<Option<u64>> {
    let mut since = None;
    if !follow.is_empty() {
        let notrace = read_pids(&files.notrace)?;
        if follow.iter().any(|p| notrace.contains(p)) {
            let keep: Vec<u32> = notrace.into_iter().filter(|p| !follow.contains(p)).collect();
            replace(&files.notrace, &keep)?;
        }
        since = Some(monotonic_ns());
        append(&files.follow, follow)?;
    }
    if !stop.is_empty() {
        append(&files.notrace, stop)?;
    }
    Ok(since)
}

fn list(pids: &[u32]) -> String {
    pids.iter().map(u32::to_string).collect::<Vec<_>>().join(" ")
}

/// Adds to the list: in force at once (the write then waits out a grace period).
fn append(path: &Path, pids: &[u32]) -> io::Result<()> {
    OpenOptions::new().write(true).open(path)?.write_all(list(pids).as_bytes())
}

/// Replaces the list (cleared while a grace period passes, then `pids`).
fn replace(path: &Path, pids: &[u32]) -> io::Result<()> {
    let mut f = OpenOptions::new().write(true).truncate(true).open(path)?;
    if pids.is_empty() { Ok(()) } else { f.write_all(list(pids).as_bytes()) }
}

fn read_pids(path: &Path) -> io::Result<Vec<u32>> {
    Ok(fs::read_to_string(path)?.split_whitespace().filter_map(|w| w.parse().ok()).collect())
}

impl Drop for PidFilterWriter {
    fn drop(&mut self) {
        {
            let mut s = self.shared.lock();
            s.stop = true;
            self.shared.changed.notify_all();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plain files stand in for the tracefs ones: an append without `O_TRUNC` overwrites from
    /// the start here, so the tests look at what was written last to each.
    fn files(dir: &Path) -> FilterFiles {
        let f = FilterFiles { follow: dir.join("set_event_pid"), notrace: dir.join("set_event_notrace_pid") };
        fs::write(&f.follow, "").unwrap();
        fs::write(&f.notrace, "").unwrap();
        f
    }

    #[test]
    fn the_latest_intent_per_pid_is_written_and_settle_waits_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let f = files(dir.path());
        let w = PidFilterWriter::start_expanding(f.clone(), |p| vec![p]).unwrap();
        // One request naming 5 twice: the later intent wins.
        let mut s = w.shared.lock();
        s.wanted.insert(5, true);
        s.wanted.insert(7, true);
        s.wanted.insert(5, false);
        s.requested += 1;
        w.shared.changed.notify_all();
        drop(s);
        assert!(w.settle(Duration::from_secs(5)));
        assert!(!w.is_busy());
        assert_eq!(fs::read_to_string(&f.follow).unwrap(), "7");
        assert_eq!(fs::read_to_string(&f.notrace).unwrap(), "5");
        // When 7 came into force is known once; 5 was let go.
        let since = w.take_in_force_since(7).expect("7 was written");
        assert!(since <= monotonic_ns());
        assert_eq!(w.take_in_force_since(7), None);
        assert_eq!(w.take_in_force_since(5), None);
    }

    #[test]
    fn a_process_is_followed_with_the_tasks_it_started_before_the_write() {
        let dir = tempfile::tempdir().unwrap();
        let f = files(dir.path());
        let w = PidFilterWriter::start_expanding(f.clone(), |p| if p == 5 { vec![5, 6, 8] } else { vec![p, 6] }).unwrap();
        w.request(&[5, 9], true);
        assert!(w.settle(Duration::from_secs(5)));
        assert_eq!(fs::read_to_string(&f.follow).unwrap(), "5 6 8 9");
    }

    /// As root, on a real instance: a process is followed with the child it started before.
    #[test]
    fn a_real_filter_holds_the_children_started_before_it_was_written() {
        use crate::sense::tracefs::{InstanceOptions, TraceInstance, Tracefs};
        let tracefs = Tracefs::locate().unwrap();
        let options = InstanceOptions { buffer_kb_per_cpu: Some(64), ..Default::default() };
        let instance = TraceInstance::create(&tracefs, "pidfilter-test", &options).unwrap();
        let mut launcher = std::process::Command::new("sh").args(["-c", "sleep 30 & wait"]).spawn().unwrap();
        let pid = launcher.id();
        let until = Instant::now() + Duration::from_secs(10);
        let child = loop {
            let children = fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
            if let Some(c) = children.split_whitespace().find_map(|w| w.parse::<u32>().ok()) {
                break c;
            }
            assert!(Instant::now() < until, "sh never started its child");
            std::thread::sleep(Duration::from_millis(10));
        };
        let files = FilterFiles { follow: instance.pid_filter_path(), notrace: instance.notrace_filter_path() };
        let w = PidFilterWriter::start(files.clone()).unwrap();
        w.request(&[pid], true);
        assert!(w.settle(Duration::from_secs(10)));
        let listed = read_pids(&files.follow).unwrap();
        let _ = launcher.kill();
        let _ = launcher.wait();
        let _ = std::process::Command::new("kill").arg(child.to_string()).status();
        assert!(listed.contains(&pid) && listed.contains(&child), "filter {listed:?} lacks {pid} or its child {child}");
        assert!(w.take_in_force_since(pid).is_some());
    }

    #[test]
    fn following_a_task_on_the_notrace_list_takes_it_off() {
        let dir = tempfile::tempdir().unwrap();
        let f = files(dir.path());
        fs::write(&f.notrace, "3 9 12").unwrap();
        let w = PidFilterWriter::start_expanding(f.clone(), |p| vec![p]).unwrap();
        w.request(&[9], true);
        assert!(w.settle(Duration::from_secs(5)));
        assert_eq!(fs::read_to_string(&f.notrace).unwrap(), "3 12");
        assert_eq!(fs::read_to_string(&f.follow).unwrap(), "9");
        drop(w);
    }

    #[test]
    fn requests_are_written_before_the_thread_stops_and_failures_do_not_hang() {
        let dir = tempfile::tempdir().unwrap();
        let f = files(dir.path());
        let w = PidFilterWriter::start_expanding(f.clone(), |p| vec![p]).unwrap();
        w.request(&[4], false);
        drop(w);
        assert_eq!(fs::read_to_string(&f.notrace).unwrap(), "4");

        let gone = FilterFiles { follow: dir.path().join("no/such"), notrace: dir.path().join("no/such2") };
        let w = PidFilterWriter::start_expanding(gone, |p| vec![p]).unwrap();
        w.request(&[1], true);
        assert!(w.settle(Duration::from_secs(5)));
    }
}
