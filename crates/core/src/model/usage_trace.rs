//! Usage traces: which applications a user launched and exited, when, and how large each one's
//! launch working set is — the input of the predictors, the simulator and the trace generator.
//!
//! Owns the versioned line format (`docs/usage-trace-format.md`): one JSON object per line, a
//! header line first, then events in non-decreasing time. Parsing is pure and returns a typed
//! [`TraceError`] naming the line; [`error_at`] adds the file name and maps it to a [`FormatError`].
//! It does not decide what a trace means for prediction, and it never records one itself.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::FormatError;
use crate::model::range::PageRange;

/// The `format` field of every trace header.
pub const FORMAT_NAME: &str = "augur-usage-trace";
/// The newest version this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;

/// What the first line of a trace says about the whole trace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceHeader {
    /// Always [`FORMAT_NAME`].
    pub format: String,
    /// Format version, at most [`FORMAT_VERSION`].
    pub version: u32,
    /// Wall-clock time of the trace's time zero, milliseconds since the Unix epoch (UTC).
    pub start_unix_ms: u64,
    /// Offset of local time from UTC in seconds at the start (time of day is local).
    #[serde(default)]
    pub utc_offset_s: i32,
    /// Page size the working-set ranges are counted in.
    pub page_size: u64,
    /// Free text: where the trace came from (scenario and seed, or host).
    #[serde(default)]
    pub source: String,
}

impl TraceHeader {
    /// A version-1 header.
    pub fn new(start_unix_ms: u64, utc_offset_s: i32, page_size: u64, source: impl Into<String>) -> Self {
        TraceHeader {
            format: FORMAT_NAME.to_string(),
            version: FORMAT_VERSION,
            start_unix_ms,
            utc_offset_s,
            page_size,
            source: source.into(),
        }
    }

    /// Local wall-clock milliseconds (epoch-based, shifted by the UTC offset) of trace time `t_ms`.
    pub fn local_ms(&self, t_ms: u64) -> u64 {
        let offset_ms = i64::from(self.utc_offset_s) * 1000;
        self.start_unix_ms.saturating_add(t_ms).saturating_add_signed(offset_ms)
    }
}

/// The pages of one file an application uses when it starts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileRanges {
    /// The file's path (any string that names the file consistently across applications).
    pub path: String,
    /// `[first_page, page_count]` pairs, in first-use order.
    pub ranges: Vec<(u64, u64)>,
}

impl FileRanges {
    /// The ranges as [`PageRange`]s.
    pub fn page_ranges(&self) -> impl Iterator<Item = PageRange> + '_ {
        self.ranges.iter().map(|&(s, l)| PageRange::new(s, l))
    }
}

/// How large an application's launch working set is: a byte count, or the ranges themselves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkingSet {
    /// Only the size is known; the simulator treats it as one private file.
    Bytes(u64),
    /// The pages, per file, in first-use order (shared files make shared pages).
    Files(Vec<FileRanges>),
}

impl WorkingSet {
    /// Total bytes, counting each declared range once.
    pub fn bytes(&self, page_size: u64) -> u64 {
        match self {
            WorkingSet::Bytes(b) => *b,
            WorkingSet::Files(files) => {
                files.iter().flat_map(|f| f.ranges.iter()).map(|&(_, len)| len.saturating_mul(page_size)).sum()
            }
        }
    }
}

/// Whether an instance started or ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transition {
    /// The instance was started (exec).
    Launch,
    /// The instance ended.
    Exit,
}

/// One line of a trace after the header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UsageEvent {
    /// Declares (or updates) an application's working set; applies to its later launches.
    App { t_ms: u64, app: String, working_set: WorkingSet },
    /// An instance of `app` started or ended at `t_ms`.
    Activity { t_ms: u64, app: String, instance: u64, transition: Transition },
}

impl UsageEvent {
    /// Milliseconds since the trace's time zero.
    pub fn t_ms(&self) -> u64 {
        match self {
            UsageEvent::App { t_ms, .. } | UsageEvent::Activity { t_ms, .. } => *t_ms,
        }
    }

    /// The application the event is about.
    pub fn app(&self) -> &str {
        match self {
            UsageEvent::App { app, .. } | UsageEvent::Activity { app, .. } => app,
        }
    }
}

/// A whole parsed trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageTrace {
    /// The header line.
    pub header: TraceHeader,
    /// Events in file order (non-decreasing time).
    pub events: Vec<UsageEvent>,
}

impl UsageTrace {
    /// Each application's last declared working set.
    pub fn working_sets(&self) -> BTreeMap<&str, &WorkingSet> {
        let mut out = BTreeMap::new();
        for e in &self.events {
            if let UsageEvent::App { app, working_set, .. } = e {
                out.insert(app.as_str(), working_set);
            }
        }
        out
    }

    /// Time of the last event, in milliseconds since time zero.
    pub fn duration_ms(&self) -> u64 {
        self.events.last().map_or(0, UsageEvent::t_ms)
    }

    /// Number of launch events.
    pub fn launch_count(&self) -> usize {
        self.events.iter().filter(|e| matches!(e, UsageEvent::Activity { transition: Transition::Launch, .. })).count()
    }

    /// The trace as text in the current format.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        out.push_str(&header_line(&self.header));
        out.push('\n');
        for e in &self.events {
            out.push_str(&event_line(e));
            out.push('\n');
        }
        out
    }
}

/// Why a trace could not be parsed. Line numbers are 1-based.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    /// The input holds no header line.
    #[error("empty trace (no header line)")]
    Empty,
    /// The first line is not an augur usage-trace header.
    #[error("line 1: not an augur usage trace: {0}")]
    NotATrace(String),
    /// The trace was written in a newer format version.
    #[error("format version {found} is newer than this augur supports (up to {supported})")]
    FutureVersion { found: u32, supported: u32 },
    /// A line is malformed or contradicts the lines before it.
    #[error("line {line}: {detail}")]
    CorruptLine { line: usize, detail: String },
}

#[derive(Deserialize)]
struct VersionProbe {
    format: String,
    version: u32,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "lowercase", deny_unknown_fields)]
enum WireEvent {
    App {
        t_ms: u64,
        app: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bytes: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        files: Option<Vec<FileRanges>>,
    },
    Launch {
        t_ms: u64,
        app: String,
        instance: u64,
    },
    Exit {
        t_ms: u64,
        app: String,
        instance: u64,
    },
}

fn header_line(h: &TraceHeader) -> String {
    serde_json::to_string(h).unwrap_or_default()
}

/// The JSON line (without newline) for one event.
pub fn event_line(e: &UsageEvent) -> String {
    let wire = match e {
        UsageEvent::App { t_ms, app, working_set } => {
            let (bytes, files) = match working_set {
                WorkingSet::Bytes(b) => (Some(*b), None),
                WorkingSet::Files(f) => (None, Some(f.clone())),
            };
            WireEvent::App { t_ms: *t_ms, app: app.clone(), bytes, files }
        }
        UsageEvent::Activity { t_ms, app, instance, transition: Transition::Launch } => {
            WireEvent::Launch { t_ms: *t_ms, app: app.clone(), instance: *instance }
        }
        UsageEvent::Activity { t_ms, app, instance, transition: Transition::Exit } => {
            WireEvent::Exit { t_ms: *t_ms, app: app.clone(), instance: *instance }
        }
    };
    serde_json::to_string(&wire).unwrap_or_default()
}

/// Checks a parsed event against the lines before it and turns it into a [`UsageEvent`].
#[derive(Default)]
struct Validator {
    last_t: u64,
    running: BTreeSet<(String, u64)>,
    declared: BTreeSet<String>,
}

impl Validator {
    fn accept(&mut self, wire: WireEvent) -> std::result::Result<UsageEvent, String> {
        let event = match wire {
            WireEvent::App { t_ms, app, bytes, files } => {
                let working_set = match (bytes, files) {
                    (Some(b), None) => WorkingSet::Bytes(b),
                    (None, Some(files)) => {
                        for f in &files {
                            if f.path.is_empty() {
                                return Err("empty file path".into());
                            }
                            for &(start, len) in &f.ranges {
                                if len == 0 || start.checked_add(len).is_none() {
                                    return Err(format!("{}: invalid range start {start} length {len}", f.path));
                                }
                            }
                        }
                        WorkingSet::Files(files)
                    }
                    _ => return Err("an app line needs exactly one of `bytes` and `files`".into()),
                };
                self.declared.insert(app.clone());
                UsageEvent::App { t_ms, app, working_set }
            }
            WireEvent::Launch { t_ms, app, instance } => {
                if !self.running.insert((app.clone(), instance)) {
                    return Err(format!("{app} instance {instance} launched while already running"));
                }
                UsageEvent::Activity { t_ms, app, instance, transition: Transition::Launch }
            }
            WireEvent::Exit { t_ms, app, instance } => {
                if !self.running.remove(&(app.clone(), instance)) {
                    return Err(format!("{app} instance {instance} exits but is not running"));
                }
                UsageEvent::Activity { t_ms, app, instance, transition: Transition::Exit }
            }
        };
        if event.app().is_empty() {
            return Err("empty application name".into());
        }
        if event.t_ms() < self.last_t {
            return Err(format!("time {} ms goes back (previous event at {} ms)", event.t_ms(), self.last_t));
        }
        self.last_t = event.t_ms();
        Ok(event)
    }
}

/// Parses a whole trace from text.
pub fn parse(text: &[u8]) -> std::result::Result<UsageTrace, TraceError> {
    let text = std::str::from_utf8(text).map_err(|e| {
        let line = text[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() + 1;
        TraceError::CorruptLine { line, detail: "not UTF-8".into() }
    })?;
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let (_, first) = lines.next().ok_or(TraceError::Empty)?;
    let header = parse_header(first)?;
    let mut validator = Validator::default();
    let mut events = Vec::new();
    for (i, line) in lines {
        let corrupt = |detail: String| TraceError::CorruptLine { line: i + 1, detail };
        let wire: WireEvent = serde_json::from_str(line).map_err(|e| corrupt(e.to_string()))?;
        events.push(validator.accept(wire).map_err(corrupt)?);
    }
    Ok(UsageTrace { header, events })
}

fn parse_header(line: &str) -> std::result::Result<TraceHeader, TraceError> {
    let probe: VersionProbe = serde_json::from_str(line).map_err(|e| TraceError::NotATrace(e.to_string()))?;
    if probe.format != FORMAT_NAME {
        return Err(TraceError::NotATrace(format!("format {:?}", probe.format)));
    }
    if probe.version > FORMAT_VERSION {
        return Err(TraceError::FutureVersion { found: probe.version, supported: FORMAT_VERSION });
    }
    if probe.version == 0 {
        return Err(TraceError::CorruptLine { line: 1, detail: "version 0 does not exist".into() });
    }
    let header: TraceHeader =
        serde_json::from_str(line).map_err(|e| TraceError::CorruptLine { line: 1, detail: e.to_string() })?;
    if header.page_size == 0 || !header.page_size.is_power_of_two() {
        return Err(TraceError::CorruptLine { line: 1, detail: format!("page size {} is not a power of two", header.page_size) });
    }
    Ok(header)
}

/// Names the file a parse error came from: a newer format version or a corrupt trace.
pub fn error_at(path: &Path, err: TraceError) -> FormatError {
    match err {
        TraceError::FutureVersion { found, supported } => {
            FormatError::UnsupportedVersion { path: path.to_path_buf(), what: "usage trace", found, supported }
        }
        other => FormatError::Corrupt { path: path.to_path_buf(), what: "usage trace", detail: other.to_string() },
    }
}

/// Writes `trace` to `out` in the current format.
pub fn write_to(trace: &UsageTrace, out: &mut dyn Write) -> std::io::Result<()> {
    let mut text = String::with_capacity(64 * (trace.events.len() + 1));
    let _ = writeln!(text, "{}", header_line(&trace.header));
    for e in &trace.events {
        let _ = writeln!(text, "{}", event_line(e));
    }
    out.write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> UsageTrace {
        UsageTrace {
            header: TraceHeader::new(1_700_000_000_000, 3600, 4096, "test"),
            events: vec![
                UsageEvent::App { t_ms: 0, app: "mail".into(), working_set: WorkingSet::Bytes(50 << 20) },
                UsageEvent::App {
                    t_ms: 0,
                    app: "web".into(),
                    working_set: WorkingSet::Files(vec![FileRanges {
                        path: "/usr/lib/libgtk".into(),
                        ranges: vec![(0, 10), (20, 5)],
                    }]),
                },
                UsageEvent::Activity { t_ms: 10, app: "mail".into(), instance: 1, transition: Transition::Launch },
                UsageEvent::Activity { t_ms: 20, app: "web".into(), instance: 2, transition: Transition::Launch },
                UsageEvent::Activity { t_ms: 30, app: "mail".into(), instance: 1, transition: Transition::Exit },
            ],
        }
    }

    #[test]
    fn round_trips() {
        let t = sample();
        let text = t.to_text();
        assert_eq!(parse(text.as_bytes()).unwrap(), t);
        let mut buf = Vec::new();
        write_to(&t, &mut buf).unwrap();
        assert_eq!(buf, text.as_bytes());
        assert_eq!(t.working_sets()["web"].bytes(4096), 15 * 4096);
        assert_eq!(t.launch_count(), 2);
    }

    #[test]
    fn local_time_applies_offset() {
        let h = TraceHeader::new(1000, -1, 4096, "");
        assert_eq!(h.local_ms(500), 500);
    }

    #[test]
    fn future_version_is_typed() {
        let text = r#"{"format":"augur-usage-trace","version":7,"start_unix_ms":0,"page_size":4096}"#;
        assert_eq!(parse(text.as_bytes()), Err(TraceError::FutureVersion { found: 7, supported: 1 }));
        let e = error_at(Path::new("x"), parse(text.as_bytes()).unwrap_err());
        assert!(matches!(e, FormatError::UnsupportedVersion { found: 7, supported: 1, .. }), "{e}");
    }

    #[test]
    fn corrupt_lines_are_named() {
        let mut text = sample().to_text();
        text.push_str("{\"event\":\"launch\",\"t_ms\":40}\n");
        match parse(text.as_bytes()) {
            Err(TraceError::CorruptLine { line, .. }) => assert_eq!(line, 7),
            other => panic!("{other:?}"),
        }
        let e = error_at(Path::new("t.jsonl"), parse(text.as_bytes()).unwrap_err());
        assert!(matches!(e, FormatError::Corrupt { .. }), "{e}");
        assert!(e.to_string().contains("line 7"), "{e}");
    }

    #[test]
    fn contradictions_are_rejected() {
        let h = header_line(&TraceHeader::new(0, 0, 4096, ""));
        let cases = [
            // Exit of an instance that never started.
            r#"{"event":"exit","t_ms":5,"app":"a","instance":1}"#.to_string(),
            // Time going back.
            r#"{"event":"launch","t_ms":5,"app":"a","instance":1}
{"event":"launch","t_ms":4,"app":"b","instance":2}"#
                .to_string(),
            // Double launch of one instance.
            r#"{"event":"launch","t_ms":5,"app":"a","instance":1}
{"event":"launch","t_ms":6,"app":"a","instance":1}"#
                .to_string(),
            // App line with both forms.
            r#"{"event":"app","t_ms":0,"app":"a","bytes":1,"files":[]}"#.to_string(),
            // Empty range.
            r#"{"event":"app","t_ms":0,"app":"a","files":[{"path":"/x","ranges":[[0,0]]}]}"#.to_string(),
            // Unknown event.
            r#"{"event":"nap","t_ms":0,"app":"a"}"#.to_string(),
        ];
        for c in cases {
            let text = format!("{h}\n{c}\n");
            assert!(matches!(parse(text.as_bytes()), Err(TraceError::CorruptLine { .. })), "{c}");
        }
    }

    #[test]
    fn foreign_and_empty_inputs() {
        assert_eq!(parse(b""), Err(TraceError::Empty));
        assert!(matches!(parse(b"{\"format\":\"other\",\"version\":1}"), Err(TraceError::NotATrace(_))));
        assert!(matches!(parse(b"\xff\xfe"), Err(TraceError::CorruptLine { line: 1, .. })));
    }
}
