//! Typed events parsed from the text lines of a tracefs `trace_pipe`: page-cache events of the
//! `filemap` system, process exec/fork/exit events of the `sched` system and the inode reads of
//! ext4 (`ext4_load_inode`).
//!
//! Pure: it turns one line of text into one [`TraceLine`] and never touches the kernel. It owns the
//! knowledge of the kernel's print formats (checked against the `format` files of kernel 6.18) and
//! the conversion of the kernel-internal `dev_t` the tracepoints print into the `st_dev` encoding
//! `stat(2)` reports. It must never panic, whatever the input (a fuzz target checks it).

use augur_core::model::profile::InodeKey;
use augur_core::model::range::PageRange;

/// The page-size shift the tracepoints use when they print byte offsets (`index << 12`).
///
/// The filemap print formats hard-code `<< 12`, whatever the machine's page size.
pub const TRACE_PAGE_SHIFT: u32 = 12;

/// Which filemap tracepoint reported a page event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PageEventKind {
    /// `mm_filemap_add_to_page_cache`: a page (folio) entered the page cache.
    Insertion,
    /// `mm_filemap_get_pages`: `read(2)`-style access, hit or miss.
    GetPages,
    /// `mm_filemap_map_pages`: fault-around mapped cached pages into a process.
    MapPages,
    /// `mm_filemap_fault`: a page fault on a file mapping.
    Fault,
}

impl PageEventKind {
    /// True for the access events, which fire on cache hits as well.
    pub fn is_access(self) -> bool {
        !matches!(self, PageEventKind::Insertion)
    }
}

/// A page event: which pages of which inode, by which task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageEvent {
    /// The tracepoint.
    pub kind: PageEventKind,
    /// The device (in `st_dev` encoding) and inode the pages belong to.
    pub inode: InodeKey,
    /// The pages, in page units of [`TRACE_PAGE_SHIFT`].
    pub pages: PageRange,
}

/// What one trace line reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// Pages of a file were inserted or accessed.
    Page(PageEvent),
    /// `sched_process_exec`: `pid` executed `filename` (`old_pid` differs when a non-leader
    /// thread exec'd).
    Exec { filename: String, pid: u32, old_pid: u32 },
    /// `sched_process_fork`: `parent_pid` created `child_pid` (a process or a thread).
    Fork { parent_pid: u32, child_pid: u32, child_comm: String },
    /// `sched_process_exit`: task `pid` exited; `group_dead` when it was the last thread (kernels
    /// that do not print it report `None`).
    Exit { pid: u32, comm: String, group_dead: Option<bool> },
    /// `ext4_load_inode`: the task needed an inode whose inode-table block was not cached, and
    /// ext4 read it (with its inode-table readahead) from disk.
    InodeLoad { inode: InodeKey },
}

/// One parsed event with the task context of its line header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceEvent {
    /// Task id (thread id) of the task the event fired in.
    pub pid: u32,
    /// Thread-group id, when the instance records it (`options/record-tgid`) and knew it.
    pub tgid: Option<u32>,
    /// Timestamp in microseconds of the instance's trace clock.
    pub ts_us: u64,
    /// The event.
    pub kind: EventKind,
}

/// The classification of one line of `trace_pipe` output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceLine {
    /// An event augur understands.
    Event(TraceEvent),
    /// `CPU:N [LOST n EVENTS]`: the ring buffer overflowed and dropped `count` events.
    Lost { cpu: u32, count: u64 },
    /// A well-formed line of an event augur does not use, a comment or an empty line.
    Ignored,
    /// Text that is not a trace line (or an event whose payload does not parse).
    Garbage,
}

/// Running counts of what a stream of lines held, to report lost events and garbage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LineStats {
    /// Events parsed.
    pub events: u64,
    /// Events the kernel reported lost (sum of `[LOST n EVENTS]`).
    pub lost: u64,
    /// Lines that did not parse.
    pub garbage: u64,
}

impl LineStats {
    /// Counts `line` and returns it unchanged.
    pub fn count(&mut self, line: TraceLine) -> TraceLine {
        match &line {
            TraceLine::Event(_) => self.events += 1,
            TraceLine::Lost { count, .. } => self.lost = self.lost.saturating_add(*count),
            TraceLine::Garbage => self.garbage += 1,
            TraceLine::Ignored => {}
        }
        line
    }
}

/// Converts the kernel-internal `dev_t` split the tracepoints print (`major = s_dev >> 20`,
/// `minor = s_dev & 0xfffff`) into the userspace `st_dev` encoding (glibc's `makedev`).
pub fn st_dev_from_parts(major: u32, minor: u32) -> u64 {
    libc::makedev(major, minor)
}

/// Converts a raw kernel `dev_t` (`major << 20 | minor`, as stored in the binary record) into the
/// userspace `st_dev` encoding.
pub fn st_dev_from_kernel(kdev: u32) -> u64 {
    st_dev_from_parts(kdev >> 20, kdev & ((1 << 20) - 1))
}

/// Parses one line of `trace_pipe` (or `trace`) text.
pub fn parse_line(line: &str) -> TraceLine {
    let line = line.trim_end_matches(['\n', '\r']);
    let trimmed = line.trim_start();
    if trimmed.is_empty() || trimmed.starts_with('#') {
        return TraceLine::Ignored;
    }
    if let Some(lost) = parse_lost(trimmed) {
        return lost;
    }
    let Some(header) = parse_header(line) else {
        return TraceLine::Garbage;
    };
    let kind = match header.event {
        "mm_filemap_add_to_page_cache" => parse_insertion(header.payload).map(EventKind::Page),
        "mm_filemap_get_pages" => parse_access(header.payload, PageEventKind::GetPages, true).map(EventKind::Page),
        "mm_filemap_map_pages" => parse_access(header.payload, PageEventKind::MapPages, true).map(EventKind::Page),
        "mm_filemap_fault" => parse_access(header.payload, PageEventKind::Fault, false).map(EventKind::Page),
        "sched_process_exec" => parse_exec(header.payload),
        "sched_process_fork" => parse_fork(header.payload),
        "sched_process_exit" => parse_exit(header.payload),
        "ext4_load_inode" => parse_inode_load(header.payload),
        _ => return TraceLine::Ignored,
    };
    match kind {
        Some(kind) => TraceLine::Event(TraceEvent { pid: header.pid, tgid: header.tgid, ts_us: header.ts_us, kind }),
        None => TraceLine::Garbage,
    }
}

/// `CPU:1 [LOST 123 EVENTS]`
fn parse_lost(s: &str) -> Option<TraceLine> {
    let rest = s.strip_prefix("CPU:")?;
    let (cpu, rest) = rest.split_once(' ')?;
    let count = rest.trim().strip_prefix("[LOST ")?.strip_suffix(" EVENTS]")?;
    Some(TraceLine::Lost { cpu: cpu.parse().ok()?, count: count.parse().ok()? })
}

struct Header<'a> {
    pid: u32,
    tgid: Option<u32>,
    ts_us: u64,
    event: &'a str,
    payload: &'a str,
}

/// A bound on the task name's length (the kernel keeps 15 bytes, `TASK_COMM_LEN - 1`; the bound
/// leaves room for kernels that lengthen it) which limits where the `-PID` separator can be.
const MAX_COMM: usize = 63;

/// Parses `<comm>-<pid> [(<tgid>)] [<cpu>] [<flags>] <secs>.<usecs>: <event>: <payload>`.
///
/// The comm may hold spaces and dashes; it is short (15 bytes, right-aligned in a 16-column
/// field), so the first `-<digits>` followed by a well-formed rest of header is the separator.
fn parse_header(line: &str) -> Option<Header<'_>> {
    let start = line.len() - line.trim_start().len();
    let limit = (start + MAX_COMM + 1).min(line.len());
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate().take(limit + 1).skip(start + 1) {
        if b != b'-' {
            continue;
        }
        if let Some(h) = parse_header_after_comm(&line[i + 1..]) {
            return Some(h);
        }
    }
    None
}

fn parse_header_after_comm(s: &str) -> Option<Header<'_>> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let pid: u32 = s[..digits].parse().ok()?;
    let mut rest = s[digits..].trim_start();
    if rest.len() == s[digits..].len() {
        return None; // the pid must be followed by white space
    }
    let mut tgid = None;
    if let Some(r) = rest.strip_prefix('(') {
        let (inner, after) = r.split_once(')')?;
        let inner = inner.trim();
        if !inner.bytes().all(|b| b == b'-') {
            tgid = Some(inner.parse().ok()?);
        }
        rest = after.trim_start();
    }
    let r = rest.strip_prefix('[')?;
    let (cpu, after) = r.split_once(']')?;
    if cpu.is_empty() || !cpu.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    rest = after.trim_start();
    // Optional irq-info flags column ("d..1." and the like), then the timestamp.
    let (first, after_first) = rest.split_once(' ').unwrap_or((rest, ""));
    let (ts, after_ts) = match first.strip_suffix(':') {
        Some(ts) if is_timestamp(ts) => (ts, after_first),
        _ => {
            let rest2 = after_first.trim_start();
            let (ts, after) = rest2.split_once(": ")?;
            (ts, after)
        }
    };
    let ts_us = parse_timestamp(ts)?;
    let (event, payload) = match after_ts.trim_start().split_once(": ") {
        Some((e, p)) => (e, p),
        None => (after_ts.trim_start().strip_suffix(':')?, ""),
    };
    if event.is_empty() || !event.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return None;
    }
    Some(Header { pid, tgid, ts_us, event, payload })
}

fn is_timestamp(s: &str) -> bool {
    parse_timestamp(s).is_some()
}

/// `349.586241` (seconds.microseconds; some clocks print more or fewer fraction digits, and the
/// counter clocks print a plain integer) to microseconds.
fn parse_timestamp(s: &str) -> Option<u64> {
    let (secs, frac) = s.split_once('.').unwrap_or((s, ""));
    if secs.is_empty() || !secs.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs: u64 = secs.parse().ok()?;
    let mut micros: u64 = 0;
    for i in 0..6 {
        let d = frac.as_bytes().get(i).map_or(0, |b| u64::from(b - b'0'));
        micros = micros * 10 + d;
    }
    secs.checked_mul(1_000_000)?.checked_add(micros)
}

/// Finds `key` (like `ino=`) as a whole word in `s` and returns the text up to the next space.
fn field<'a>(s: &'a str, key: &str) -> Option<&'a str> {
    let mut from = 0;
    while let Some(pos) = s[from..].find(key) {
        let at = from + pos;
        if at == 0 || s.as_bytes()[at - 1] == b' ' {
            let v = &s[at + key.len()..];
            return Some(v.split(' ').next().unwrap_or(""));
        }
        from = at + key.len();
    }
    None
}

/// `254:0` (decimal major:minor as the tracepoints print them) to `st_dev`.
fn parse_dev(s: &str) -> Option<u64> {
    let (major, minor) = s.split_once(':')?;
    let major: u32 = major.parse().ok()?;
    let minor: u32 = minor.parse().ok()?;
    if major >= 1 << 12 || minor >= 1 << 20 {
        return None;
    }
    Some(st_dev_from_parts(major, minor))
}

fn parse_ino(s: &str) -> Option<u64> {
    u64::from_str_radix(s, 16).ok()
}

/// `dev 254:0 ino 3c520 pfn=0x114cc2 ofs=16384 order=0`
fn parse_insertion(p: &str) -> Option<PageEvent> {
    let dev = parse_dev(field(p, "dev ")?)?;
    let ino = parse_ino(field(p, "ino ")?)?;
    let ofs: u64 = field(p, "ofs=")?.parse().ok()?;
    let order: u32 = match field(p, "order=") {
        Some(o) => o.parse().ok()?,
        None => 0, // kernels before large folios print no order
    };
    if order > 30 {
        return None;
    }
    Some(PageEvent {
        kind: PageEventKind::Insertion,
        inode: InodeKey { dev, ino },
        pages: PageRange::new(ofs >> TRACE_PAGE_SHIFT, 1u64 << order),
    })
}

/// `dev=254:0 ino=4fa7d ofs=811008-876543` (inclusive byte range) or `... ofs=122880`.
fn parse_access(p: &str, kind: PageEventKind, ranged: bool) -> Option<PageEvent> {
    let dev = parse_dev(field(p, "dev=")?)?;
    let ino = parse_ino(field(p, "ino=")?)?;
    let ofs = field(p, "ofs=")?;
    let pages = if ranged {
        let (a, b) = ofs.split_once('-')?;
        let first: u64 = a.parse().ok()?;
        let last_byte: u64 = b.parse().ok()?;
        let (first, last) = (first >> TRACE_PAGE_SHIFT, last_byte >> TRACE_PAGE_SHIFT);
        if last < first {
            return None;
        }
        PageRange::from_bounds(first, last.checked_add(1)?)
    } else {
        let at: u64 = ofs.parse().ok()?;
        PageRange::new(at >> TRACE_PAGE_SHIFT, 1)
    };
    Some(PageEvent { kind, inode: InodeKey { dev, ino }, pages })
}

/// Splits `text` at the LAST occurrence of `key` (keys follow free-text values such as comms and
/// file names, which may contain anything, so the last occurrence is the real one).
fn split_last<'a>(text: &'a str, key: &str) -> Option<(&'a str, &'a str)> {
    let at = text.rfind(key)?;
    Some((&text[..at], &text[at + key.len()..]))
}

/// `dev 254,0 ino 395592` (ext4 prints major,minor and a decimal inode number).
fn parse_inode_load(p: &str) -> Option<EventKind> {
    let dev = parse_dev(&field(p, "dev ")?.replacen(',', ":", 1))?;
    let ino: u64 = field(p, "ino ")?.parse().ok()?;
    Some(EventKind::InodeLoad { inode: InodeKey { dev, ino } })
}

/// `filename=/usr/bin/cat pid=6339 old_pid=6339`
fn parse_exec(p: &str) -> Option<EventKind> {
    let rest = p.strip_prefix("filename=")?;
    let (rest, old_pid) = split_last(rest, " old_pid=")?;
    let (filename, pid) = split_last(rest, " pid=")?;
    Some(EventKind::Exec { filename: filename.to_string(), pid: pid.trim().parse().ok()?, old_pid: old_pid.trim().parse().ok()? })
}

/// `comm=sh pid=6338 child_comm=sh child_pid=6339`
fn parse_fork(p: &str) -> Option<EventKind> {
    let rest = p.strip_prefix("comm=")?;
    let (rest, child_pid) = split_last(rest, " child_pid=")?;
    let (rest, child_comm) = split_last(rest, " child_comm=")?;
    let (_comm, parent_pid) = split_last(rest, " pid=")?;
    Some(EventKind::Fork {
        parent_pid: parent_pid.trim().parse().ok()?,
        child_pid: child_pid.trim().parse().ok()?,
        child_comm: child_comm.to_string(),
    })
}

/// `comm=cat pid=6339 prio=120 group_dead=true` (older kernels stop after `prio`).
fn parse_exit(p: &str) -> Option<EventKind> {
    let rest = p.strip_prefix("comm=")?;
    let (rest, group_dead) = match split_last(rest, " group_dead=") {
        Some((r, g)) => (
            r,
            Some(match g.trim() {
                "true" | "1" => true,
                "false" | "0" => false,
                _ => return None,
            }),
        ),
        None => (rest, None),
    };
    let (rest, prio) = split_last(rest, " prio=")?;
    let _: i32 = prio.trim().parse().ok()?;
    let (comm, pid) = split_last(rest, " pid=")?;
    Some(EventKind::Exit { pid: pid.trim().parse().ok()?, comm: comm.to_string(), group_dead })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT_DEV: u64 = 0xfe00; // 254:0 as stat reports it

    fn event(line: &str) -> TraceEvent {
        match parse_line(line) {
            TraceLine::Event(e) => e,
            other => panic!("{line:?} parsed as {other:?}"),
        }
    }

    fn page(line: &str) -> PageEvent {
        match event(line).kind {
            EventKind::Page(p) => p,
            other => panic!("{other:?}"),
        }
    }

    // Lines below were captured on this project's VM (kernel 6.18) from an instance's trace.

    #[test]
    fn map_pages_prints_an_inclusive_byte_range() {
        let l = "              sh-6338    [000] .....   349.589178: mm_filemap_map_pages: dev=254:0 ino=4fa7d ofs=811008-876543";
        let e = event(l);
        assert_eq!((e.pid, e.tgid, e.ts_us), (6338, None, 349_589_178));
        let p = page(l);
        assert_eq!(p.kind, PageEventKind::MapPages);
        assert_eq!(p.inode, InodeKey { dev: ROOT_DEV, ino: 0x4fa7d });
        assert_eq!(p.pages, PageRange::new(198, 16));
    }

    #[test]
    fn get_pages_single_page() {
        let p = page("             cat-10266   [000] .....   422.668074: mm_filemap_get_pages: dev=254:0 ino=2ae ofs=0-4095");
        assert_eq!((p.kind, p.inode.ino, p.pages), (PageEventKind::GetPages, 0x2ae, PageRange::new(0, 1)));
    }

    #[test]
    fn fault_is_one_page() {
        let p = page("              sh-6338    [001] .....   349.590004: mm_filemap_fault: dev=254:0 ino=3c520 ofs=122880");
        assert_eq!((p.kind, p.pages), (PageEventKind::Fault, PageRange::new(30, 1)));
        assert!(p.kind.is_access());
    }

    #[test]
    fn insertion_covers_its_folio_order() {
        let p = page(
            "              sh-6338    [001] .....   349.590964: mm_filemap_add_to_page_cache: dev 254:0 ino 3c520 pfn=0x114cc2 ofs=16384 order=0",
        );
        assert_eq!(
            (p.kind, p.inode, p.pages),
            (PageEventKind::Insertion, InodeKey { dev: ROOT_DEV, ino: 0x3c520 }, PageRange::new(4, 1))
        );
        let p = page(
            "              sh-6338    [001] .....   349.590964: mm_filemap_add_to_page_cache: dev 254:0 ino 3c520 pfn=0x114cc2 ofs=65536 order=2",
        );
        assert_eq!(p.pages, PageRange::new(16, 4));
        assert!(!p.kind.is_access());
    }

    #[test]
    fn block_device_metadata_pages_parse_with_their_pseudo_device() {
        let p = page(
            "              sh-6338    [000] .....   349.589358: mm_filemap_add_to_page_cache: dev 0:3 ino fe00000 pfn=0x132238 ofs=756658176 order=0",
        );
        assert_eq!(p.inode, InodeKey { dev: libc::makedev(0, 3), ino: 0xfe00000 });
    }

    #[test]
    fn inode_loads_parse_with_their_device_and_decimal_inode() {
        let e = event("           xterm-3380    [001] .....  64838.473650: ext4_load_inode: dev 254,0 ino 395592");
        assert_eq!(e.kind, EventKind::InodeLoad { inode: InodeKey { dev: st_dev_from_parts(254, 0), ino: 395_592 } });
        for bad in ["dev 254 ino 1", "dev 254,0 ino 1f", "ino 1", "dev 254,0"] {
            let line = format!("  x-1 [000] ..... 1.000000: ext4_load_inode: {bad}");
            assert_eq!(parse_line(&line), TraceLine::Garbage, "{bad}");
        }
    }

    #[test]
    fn device_conversion_matches_stat_encoding() {
        assert_eq!(st_dev_from_parts(254, 0), 65024);
        assert_eq!(st_dev_from_kernel(254 << 20), 65024);
        assert_eq!(st_dev_from_kernel((259 << 20) | 300), libc::makedev(259, 300));
        // Large minors use the split glibc encoding.
        assert_eq!(st_dev_from_parts(8, 300), 0x10_082c);
    }

    #[test]
    fn process_events() {
        let e = event(
            "              sh-6338    [001] .....   349.590037: sched_process_exec: filename=/usr/bin/sh pid=6338 old_pid=6338",
        );
        assert_eq!(e.kind, EventKind::Exec { filename: "/usr/bin/sh".into(), pid: 6338, old_pid: 6338 });
        let e = event(
            "            bash-6335    [001] .....   349.586241: sched_process_fork: comm=bash pid=6335 child_comm=bash child_pid=6338",
        );
        assert_eq!(e.kind, EventKind::Fork { parent_pid: 6335, child_pid: 6338, child_comm: "bash".into() });
        let e = event(
            "             cat-6339    [001] .....   349.592745: sched_process_exit: comm=cat pid=6339 prio=120 group_dead=true",
        );
        assert_eq!(e.kind, EventKind::Exit { pid: 6339, comm: "cat".into(), group_dead: Some(true) });
        let e = event("             cat-6339    [001] d..2.   349.592745: sched_process_exit: comm=cat pid=6339 prio=120");
        assert_eq!(e.kind, EventKind::Exit { pid: 6339, comm: "cat".into(), group_dead: None });
    }

    #[test]
    fn record_tgid_column() {
        let e = event(
            "            bash-6335    (   6335) [001] .....   349.586241: sched_process_fork: comm=bash pid=6335 child_comm=bash child_pid=6338",
        );
        assert_eq!(e.tgid, Some(6335));
        let e = event(
            "              sh-6338    (-------) [000] .....   349.589178: mm_filemap_map_pages: dev=254:0 ino=4fa7d ofs=811008-876543",
        );
        assert_eq!((e.pid, e.tgid), (6338, None));
    }

    #[test]
    fn comms_with_spaces_and_dashes() {
        let e = event("  Web Content-12-4711    [001] .....   10.000001: mm_filemap_fault: dev=254:0 ino=1 ofs=0");
        assert_eq!((e.pid, e.ts_us), (4711, 10_000_001));
        let e = event(
            "<...>-99 [000] ..... 5.5: sched_process_fork: comm=a b pid=9 c pid=99 child_comm=x child_pid=7 y child_pid=100",
        );
        assert_eq!(e.kind, EventKind::Fork { parent_pid: 99, child_pid: 100, child_comm: "x child_pid=7 y".into() });
        assert_eq!(e.ts_us, 5_500_000);
        let e = event("  my-prog-1-2-33 [1] 1.000001: sched_process_exec: filename=/opt/a pid=1 b pid=33 old_pid=33");
        assert_eq!((e.pid, e.kind), (33, EventKind::Exec { filename: "/opt/a pid=1 b".into(), pid: 33, old_pid: 33 }));
    }

    #[test]
    fn lost_events_are_reported() {
        assert_eq!(parse_line("CPU:1 [LOST 123 EVENTS]\n"), TraceLine::Lost { cpu: 1, count: 123 });
        let mut stats = LineStats::default();
        for l in ["CPU:0 [LOST 5 EVENTS]", "CPU:1 [LOST 7 EVENTS]", "junk", "# comment", ""] {
            stats.count(parse_line(l));
        }
        assert_eq!(stats, LineStats { events: 0, lost: 12, garbage: 1 });
    }

    #[test]
    fn other_events_are_ignored_and_garbage_is_flagged() {
        assert_eq!(parse_line("  sh-1 [000] ..... 1.000000: sched_switch: prev_comm=a"), TraceLine::Ignored);
        for bad in [
            "hello world",
            "  sh-1 [000] ..... 1.000000: mm_filemap_fault: dev=254:0 ino=zz ofs=0",
            "  sh-1 [000] ..... 1.000000: mm_filemap_get_pages: dev=254:0 ino=1 ofs=8192-4095",
            "  sh-1 [000] ..... 1.000000: mm_filemap_add_to_page_cache: dev 254:0 ino 1 ofs=0 order=99",
            "  sh-1 [000] ..... x.y: mm_filemap_fault: dev=254:0 ino=1 ofs=0",
            "  sh-1 [000] ..... 1.000000: mm_filemap_fault: dev=9999:0 ino=1 ofs=0",
            "  sh-1 [000] ..... 1.000000: sched_process_exec: filename=/x",
            "  sh- [000] ..... 1.000000: sched_process_exec: filename=/x pid=1 old_pid=1",
            "CPU:x [LOST 1 EVENTS]",
            "\u{0}\u{ffff}-1 [0",
        ] {
            assert_eq!(parse_line(bad), TraceLine::Garbage, "{bad:?}");
        }
    }

    #[test]
    fn huge_offsets_do_not_overflow() {
        let p = page("  a-1 [000] ..... 1.000000: mm_filemap_get_pages: dev=254:0 ino=1 ofs=0-18446744073709551615");
        assert_eq!(p.pages, PageRange::new(0, (u64::MAX >> 12) + 1));
    }
}
