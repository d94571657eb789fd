//! The control socket: how `augur status`, `augur apps`, `augur forget`, `augur record` and
//! `augur explain` talk to the daemon.
//!
//! One JSON request line per connection, one JSON response line back. The socket is a Unix stream
//! socket with mode 0600 in a 0700 directory, and the daemon also checks the peer's credentials
//! (`SO_PEERCRED`): only root (or the daemon's own user) is answered. Owns the protocol, the
//! client, and the server's socket setup; what the answers hold is the event loop's business.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use augur_core::error::{FormatError, IoContext};
use augur_core::model::record::{AppSummary, LaunchRecord};

/// A request to the daemon.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Health, mode, recent launches.
    Status,
    /// Learned applications.
    Apps,
    /// Recent launch records of one application, newest first.
    Launches { app: String, limit: usize },
    /// Forget one application.
    Forget { app: String },
    /// Forget everything.
    ForgetAll,
    /// The usage trace of what ran since `since_unix_ms` (default: since the daemon started).
    Record { since_unix_ms: Option<u64> },
    /// Why the prediction step predicts what it predicts for `app`, now.
    Explain { app: String },
}

/// Counters of what the daemon observed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventCounts {
    /// Process events received.
    pub process_events: u64,
    /// Page events received (in bpf mode: page records, each the pages of a 64-page chunk new
    /// to a launch).
    pub page_events: u64,
    /// Path lookups received (bpf mode).
    #[serde(default)]
    pub lookup_events: u64,
    /// File opens received from fanotify that named a file (an open of a file named already,
    /// unchanged, is not counted).
    pub open_events: u64,
    /// Page events the kernel reported lost (in bpf mode: every record lost, see
    /// [`StatusReport::lost_by_cause`]).
    pub page_events_lost: u64,
    /// Launches the kernel stopped following because the daemon does not follow them (bpf
    /// mode: replayed-only applications, helpers of launches not followed, windows closed).
    #[serde(default)]
    pub launches_stopped: u64,
    /// Process-event overruns.
    pub process_overruns: u64,
    /// Launches learned since start.
    pub launches_learned: u64,
    /// Launches not learned because they were traced late in their window (tracefs mode; the
    /// eBPF observer follows every launch from its exec).
    #[serde(default)]
    pub launches_traced_late: u64,
    /// Replays run since start.
    pub replays: u64,
    /// Of them, answered without reading: their application's last replay found every page
    /// resident and nothing left the page cache since.
    #[serde(default)]
    pub replays_known_resident: u64,
    /// Times the event loop woke up.
    pub wakeups: u64,
    /// Memory-pressure trigger events (each stops prefetching at once).
    #[serde(default)]
    pub pressure_events: u64,
    /// Planning rounds of the prediction step that decided a plan (0 with prediction off).
    #[serde(default)]
    pub planning_rounds: u64,
    /// Fetches those rounds handed to the prediction worker (a round whose fetch would repeat
    /// the last one, nothing having left the page cache since, sends none).
    #[serde(default)]
    pub prediction_fetches: u64,
    /// Launches replayed but not followed that read many pages their profile lacked, so their
    /// applications are followed again (bpf mode).
    #[serde(default)]
    pub refollowed: u64,
    /// Such launches whose applications were not followed again: their last refollows taught
    /// nothing (bpf mode).
    #[serde(default)]
    pub refollows_held: u64,
    /// Command lines cut to what identity needs (counted in [`StatusReport::drops`]).
    #[serde(default)]
    pub argv_cut: u64,
    /// Exec-time replays not started because the replay queue was full.
    #[serde(default)]
    pub replay_queue_full: u64,
    /// Times the event loop stopped reading page records with more waiting, to serve the other
    /// sources first (the rest is read at the next wake-up, at once).
    #[serde(default)]
    pub page_reads_deferred: u64,
    /// Prefetches of the files followed workload runs were predicted to open next (each one a
    /// few files; issue 22's file-access context model).
    #[serde(default)]
    pub file_prefetches: u64,
    /// Of them, answered without reading, as replays are ([`Self::replays_known_resident`]).
    #[serde(default)]
    pub file_prefetches_known_resident: u64,
    /// Pages those prefetches loaded.
    #[serde(default)]
    pub file_prefetch_pages: u64,
    /// Workload runs of settled workloads followed for the files they open only, not their
    /// pages (bpf mode).
    #[serde(default)]
    pub runs_sampled: u64,
    /// Launches of settled workloads not followed as runs at all: their replay was answered as
    /// all resident (bpf mode).
    #[serde(default)]
    pub runs_skipped_resident: u64,
    /// Of them, those that opened more files than a settled workload may that its model had not
    /// foreseen: their workload's next runs are followed whole again.
    #[serde(default)]
    pub runs_unsettled: u64,
    /// Workload runs followed for the files they open only once they or their launch streamed a
    /// file, or their launch reached the page cap (bpf mode).
    #[serde(default)]
    pub runs_streamed: u64,
}

/// Prefetching ahead of backward and strided readers (`[pattern]`), for `augur status`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AheadStatus {
    /// "on", "off: why", "stopped: why".
    pub note: String,
    /// Streams (task, file) followed now.
    pub streams_now: u64,
    /// Streams followed since start.
    pub streams_followed: u64,
    /// Bytes requested ahead of readers since start.
    pub bytes_ahead: u64,
    /// Times a reader caught up and its distance ahead doubled.
    pub windows_grown: u64,
    /// Times following stopped for memory pressure.
    pub pressure_stops: u64,
    /// Pattern records received from the kernel.
    pub records: u64,
    /// Pattern records lost (ring buffer full).
    pub records_lost: u64,
    /// Whether large read-once streams are dropped behind their readers (`[pattern] drop_behind`).
    #[serde(default)]
    pub drop_behind: bool,
    /// Streams (task, file) dropped behind now.
    #[serde(default)]
    pub behind_now: u64,
    /// Streams dropped behind since start.
    #[serde(default)]
    pub behind_streams: u64,
    /// Bytes of passed pages asked to leave the page cache since start (those resident before
    /// the reader came excluded; the kernel also keeps mapped and dirty ones).
    #[serde(default)]
    pub bytes_dropped_behind: u64,
    /// Whether loops larger than their reader's memory keep a resident prefix
    /// (`[pattern] loop_prefix`).
    #[serde(default)]
    pub loop_prefix: bool,
    /// Loops (task, file) treated now.
    #[serde(default)]
    pub loops_now: u64,
    /// Loops treated since start.
    #[serde(default)]
    pub loops_treated: u64,
    /// Bytes of loops' pages beyond their prefix asked to leave the page cache since start.
    #[serde(default)]
    pub bytes_dropped_loops: u64,
    /// Whether random readers' files are advised random access (`[pattern] advise_random`).
    #[serde(default)]
    pub advise_random: bool,
    /// Files (process, file) advised random access now.
    #[serde(default)]
    pub random_now: u64,
    /// Files advised random access since start.
    #[serde(default)]
    pub random_files: u64,
}

/// What `augur status` shows.
/// The read cost the planner was given on this machine, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrefetchRule {
    /// `[predict] read_cost` scaled by the battery and disk factors.
    pub read_cost: f64,
    /// One reason per fact ("disk vda: rotational → full prefetching", "on battery → read cost ×3").
    pub reasons: Vec<String>,
}

/// What the free-memory tier (`[predict] fill_free_memory`) held at the latest planning round,
/// and why.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FillStatus {
    /// Why it holds what it holds ("filling free memory beyond the reserve ...", "idle: ...").
    pub reason: String,
    /// MemFree at the round.
    pub free_bytes: u64,
    /// Bytes kept free.
    pub reserve_bytes: u64,
    /// Bytes it could fill beyond the reserve and the prediction plan.
    pub room_bytes: u64,
    /// Bytes it planned (its applications' replay ranges, within the room).
    pub planned_bytes: u64,
    /// Applications it planned, in fetch order.
    pub apps: Vec<String>,
    /// Bytes it loaded since the daemon started (pages found missing and read).
    pub loaded_bytes: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatusReport {
    /// Daemon process id.
    pub pid: u32,
    /// augur version.
    pub version: String,
    /// Seconds since the daemon started.
    pub uptime_secs: u64,
    /// "ok", or what is degraded.
    pub health: String,
    /// Observation mode name ("bpf", "access", "insertion", "file-only").
    pub mode: String,
    /// What the mode means for the user.
    pub mode_description: String,
    /// The better modes not used, and why ("bpf: no BTF"); empty when the best is in use.
    #[serde(default)]
    pub passed_over: String,
    /// Records the kernel could not deliver, by cause (bpf mode; only causes that lost any).
    #[serde(default)]
    pub lost_by_cause: Vec<(String, u64)>,
    /// What the daemon's bounded queues and lists dropped or cut, by cause (only causes that
    /// dropped any): the bounds are listed in the README (Security).
    #[serde(default)]
    pub drops: Vec<(String, u64)>,
    /// Tracepoints enabled.
    pub tracepoints: Vec<String>,
    /// Applications learned.
    pub apps_learned: u64,
    /// Launch windows open now.
    pub launches_in_progress: u64,
    /// Recent launches, newest first.
    pub recent_launches: Vec<LaunchRecord>,
    /// Resident memory of the daemon in bytes.
    pub rss_bytes: u64,
    /// State database.
    pub state_path: PathBuf,
    /// Configuration file (None: defaults).
    pub config_path: Option<PathBuf>,
    /// Exec-time replay on.
    pub replay_on_exec: bool,
    /// Prediction on.
    pub prediction_enabled: bool,
    /// What prefetching bought over the last day, as observed (`None` with prediction off):
    /// launches predicted and loaded in time, bytes prefetched, used and wasted.
    #[serde(default)]
    pub prefetch_last_day: Option<augur_core::plan::LedgerTotals>,
    /// How much the latest planning round prefetched for the machine it runs on (battery, disk),
    /// and why (`None` with prediction off or before the first round).
    #[serde(default)]
    pub prefetch_rule: Option<PrefetchRule>,
    /// The free-memory tier at the latest planning round (`None` with prediction off or before
    /// the first round).
    #[serde(default)]
    pub fill: Option<FillStatus>,
    /// A prediction fetch (the prediction's plans and the free-memory tier's) is running, or a
    /// round is owed: the daemon's start-up loading is not over while this is true.
    #[serde(default)]
    pub prediction_fetch_busy: bool,
    /// Event counters.
    pub events: EventCounts,
    /// Prefetching ahead of readers (`None`: `[pattern] prefetch_ahead` is off).
    #[serde(default)]
    pub ahead: Option<AheadStatus>,
}

/// The daemon's answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Response {
    /// Answer to [`Request::Status`].
    Status(Box<StatusReport>),
    /// Answer to [`Request::Apps`].
    Apps { apps: Vec<AppSummary> },
    /// Answer to [`Request::Launches`].
    Launches { launches: Vec<LaunchRecord> },
    /// Answer to the forget requests: how many applications were forgotten.
    Forgot { apps: u64 },
    /// Answer to [`Request::Record`]: the trace's text (`docs/usage-trace-format.md`).
    Trace { text: String },
    /// Answer to [`Request::Explain`].
    Explanation { predictor: String, app: String, probability: f64, reasons: Vec<String> },
    /// The request failed.
    Error { message: String },
}

/// Sends `request` to the daemon listening on `socket` and returns its answer.
pub fn request(socket: &Path, request: &Request) -> Result<Response> {
    let mut stream = match UnixStream::connect(socket) {
        Ok(s) => s,
        Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused) => {
            return Err(Error::NoDaemon { socket: socket.to_path_buf() });
        }
        Err(e) => return Err(Error::io_at(socket, "connecting to the daemon at", e)),
    };
    let doing = || format!("talking to the daemon at {}", socket.display());
    stream.set_read_timeout(Some(Duration::from_secs(10))).context(doing)?;
    stream.set_write_timeout(Some(Duration::from_secs(10))).context(doing)?;
    let mut line = serde_json::to_string(request).map_err(|e| Error::io("encoding request", std::io::Error::other(e)))?;
    line.push('\n');
    stream.write_all(line.as_bytes()).context(doing)?;
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer).context(doing)?;
    if answer.is_empty() {
        return Err(Error::io(doing(), std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "no answer")));
    }
    serde_json::from_str(&answer).map_err(|e| {
        Error::from(FormatError::Corrupt { path: socket.to_path_buf(), what: "daemon answer", detail: e.to_string() })
    })
}

/// Creates the listening socket: parent directory 0700 when created, a stale socket replaced, the
/// socket itself 0600 and the daemon's from its creation. It is bound in a fresh private (0700)
/// directory beside its path, made 0600 there (nobody else can reach it), and renamed into place:
/// there is no moment when it exists at its path with the mode `bind` gave it (from the umask),
/// and no process-wide umask change. Fails when another daemon answers on it.
pub fn listen(socket: &Path) -> Result<UnixListener> {
    let dir = match socket.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d.to_path_buf(),
        None => PathBuf::from("."),
    };
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| Error::io_at(&dir, "creating socket directory", e))?;
    }
    if socket.exists() && UnixStream::connect(socket).is_ok() {
        return Err(Error::DaemonAlreadyRunning { socket: socket.to_path_buf() });
    }
    let name = socket.file_name().map_or_else(|| "augur.sock".into(), |n| n.to_string_lossy().into_owned());
    let private = dir.join(format!(".{name}.{}.new", std::process::id()));
    // One left by a daemon of the same pid that died here: only a directory of ours is removed.
    if std::fs::symlink_metadata(&private).is_ok_and(|m| m.is_dir()) {
        let _ = std::fs::remove_dir_all(&private);
    }
    std::fs::DirBuilder::new().mode(0o700).create(&private).map_err(|e| Error::io_at(&private, "creating", e))?;
    let bound = (|| -> Result<UnixListener> {
        let inner = private.join("s");
        let listener = UnixListener::bind(&inner).map_err(|e| Error::io_at(socket, "listening on", e))?;
        std::fs::set_permissions(&inner, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| Error::io_at(socket, "securing", e))?;
        // Replaces a stale socket at once.
        std::fs::rename(&inner, socket).map_err(|e| Error::io_at(socket, "putting in place", e))?;
        Ok(listener)
    })();
    let _ = std::fs::remove_dir_all(&private);
    let listener = bound?;
    listener.set_nonblocking(true).context(|| format!("configuring {}", socket.display()))?;
    Ok(listener)
}

/// True when the peer of `stream` is root or runs as the daemon's own user.
pub fn peer_allowed(stream: &UnixStream) -> bool {
    augur_os::privilege::peer_is_root_or_same_user(stream)
}

/// Reads one request from an accepted connection (with a short timeout so a silent client cannot
/// stall the daemon).
pub fn read_request(stream: &UnixStream) -> std::result::Result<Request, String> {
    stream.set_nonblocking(false).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(Duration::from_millis(500))).map_err(|e| e.to_string())?;
    stream.set_write_timeout(Some(Duration::from_millis(500))).map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).map_err(|e| e.to_string())?;
    serde_json::from_str(&line).map_err(|e| format!("bad request: {e}"))
}

/// Writes one response line.
pub fn write_response(mut stream: &UnixStream, response: &Response) -> std::io::Result<()> {
    let mut line = serde_json::to_string(response).map_err(std::io::Error::other)?;
    line.push('\n');
    stream.write_all(line.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_round_trips() {
        for r in [
            Request::Status,
            Request::Apps,
            Request::Forget { app: "/usr/bin/x".into() },
            Request::ForgetAll,
            Request::Record { since_unix_ms: Some(5) },
            Request::Explain { app: "a".into() },
        ] {
            let text = serde_json::to_string(&r).unwrap();
            assert_eq!(serde_json::from_str::<Request>(&text).unwrap(), r);
        }
        assert_eq!(serde_json::to_string(&Request::Forget { app: "a".into() }).unwrap(), r#"{"op":"forget","app":"a"}"#);
    }

    #[test]
    fn no_daemon_is_a_typed_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = request(&dir.path().join("none.sock"), &Request::Status).unwrap_err();
        assert_eq!(err.exit_code(), crate::error::exit::NO_DAEMON);
    }

    #[test]
    fn socket_is_private_and_answers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run/augur.sock");
        let listener = listen(&path).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(path.parent().unwrap()).unwrap().permissions().mode() & 0o777, 0o700);
        let server = std::thread::spawn(move || {
            listener.set_nonblocking(false).unwrap();
            let (s, _) = listener.accept().unwrap();
            assert!(peer_allowed(&s));
            assert_eq!(read_request(&s).unwrap(), Request::ForgetAll);
            write_response(&s, &Response::Forgot { apps: 3 }).unwrap();
        });
        assert_eq!(request(&path, &Request::ForgetAll).unwrap(), Response::Forgot { apps: 3 });
        server.join().unwrap();
        // A second daemon on the same socket is refused only while the first answers.
        drop(listen(&path).unwrap());
    }

    #[test]
    fn the_socket_never_exists_at_its_path_with_a_wider_mode_than_0600() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("augur.sock");
        // A stale socket is replaced. A socket is bound with the mode the umask leaves (0755
        // under the usual 022): the path must never show it.
        drop(UnixListener::bind(&path).unwrap());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let watcher = {
            let (path, stop) = (path.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut seen = std::collections::BTreeSet::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if let Ok(m) = std::fs::symlink_metadata(&path) {
                        seen.insert(m.permissions().mode() & 0o777);
                    }
                }
                seen
            })
        };
        for _ in 0..50 {
            drop(listen(&path).unwrap());
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let seen = watcher.join().unwrap();
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![0o600], "modes seen at the socket's path");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(leftovers, vec![std::ffi::OsString::from("augur.sock")], "no private directory left");
    }

    #[test]
    fn a_second_daemon_is_refused_with_its_own_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("augur.sock");
        let _first = listen(&path).unwrap();
        let err = listen(&path).unwrap_err();
        assert!(matches!(err, Error::DaemonAlreadyRunning { .. }), "{err}");
        assert_eq!(err.exit_code(), crate::error::exit::DAEMON_RUNNING);
    }
}
