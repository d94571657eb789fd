//! The early load list: the part of the boot plan a boot needs before its default target, as a
//! plain list of file pieces in load order, for `augur-init`, the small program that loads them
//! before (or beside) the service manager, with nothing but the standard library and this module.
//!
//! It exists because the boot plan file is JSON profiles that only augur's own executable reads
//! (8 MiB, whose loading on a slow disk was most of what `augur-init` cost before systemd could
//! start); this list is read line by line. Format, text:
//!
//! ```text
//! augur-boot-early 1 PAGE_SIZE
//! FIRST_PAGE PAGES SIZE MTIME_NS /absolute/path
//! ```
//!
//! one piece per line in load order, the path last (the rest of the line; a path holding a newline
//! is left out when the list is written). `SIZE` and `MTIME_NS` are the file's identity when its
//! pages were recorded: a file that changed since is not loaded (it is relearned, as the plan's
//! files are).
//!
//! Pure: building, rendering and parsing only; the caller reads and writes the file.

use std::fmt;
use std::path::{Path, PathBuf};

use super::boot::{BootPhase, BootPlan};

/// The first word of the header line.
pub const FORMAT_NAME: &str = "augur-boot-early";
/// The version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// The list's file name, beside the boot plan file in the state's directory.
pub const FILE_NAME: &str = "boot-early.list";
/// Written by `augur-init`'s recorder once it records, with its pid: `augur-boot.service` is
/// skipped when it exists (`ConditionPathExists=!`), so the unit costs the boot nothing then.
pub const INIT_STARTED_MARKER: &str = "/run/augur-init.pid";
/// At most this many pieces are read (a list of the plan's 512 MiB bound in single pages is
/// 131,072): a corrupt or hostile list cannot make the loader allocate without bound.
pub const MAX_PIECES: usize = 1 << 20;

/// Where the early load list of the state at `state_path` is kept: beside it.
pub fn path_beside(state_path: &Path) -> PathBuf {
    state_path.parent().unwrap_or_else(|| Path::new(".")).join(FILE_NAME)
}

/// A run of pages of one file to load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EarlyPiece {
    /// Absolute path.
    pub path: PathBuf,
    /// Size in bytes when recorded.
    pub size: u64,
    /// Modification time in nanoseconds since the epoch when recorded.
    pub mtime_ns: i64,
    /// First page.
    pub first_page: u64,
    /// Pages (at least one).
    pub pages: u64,
}

/// The pieces to load, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EarlyLoadList {
    /// Page size in bytes the pages refer to.
    pub page_size: u64,
    /// Pieces in load order.
    pub pieces: Vec<EarlyPiece>,
}

/// Why a list could not be read (the line, 1-based, and what was wrong).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EarlyListError {
    /// Line number, 1-based (0: the list as a whole).
    pub line: usize,
    /// What was wrong.
    pub detail: String,
}

impl fmt::Display for EarlyListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 { write!(f, "{}", self.detail) } else { write!(f, "line {}: {}", self.line, self.detail) }
    }
}

impl std::error::Error for EarlyListError {}

impl EarlyLoadList {
    /// The plan's phases before `target` (the phase the default target's being reached starts:
    /// a phase holds the pages first used after its target was reached, so these are the pages
    /// the boot used on its way to the default target), in phase order, each phase's files and
    /// ranges in the plan's load order.
    pub fn from_plan(plan: &BootPlan, target: BootPhase) -> EarlyLoadList {
        let mut pieces = Vec::new();
        for phase in plan.phases.iter().filter(|p| p.phase < target) {
            for file in &phase.files {
                for r in &file.ranges {
                    if r.range.len == 0 {
                        continue;
                    }
                    pieces.push(EarlyPiece {
                        path: file.path.clone(),
                        size: file.identity.size,
                        mtime_ns: file.identity.mtime_ns,
                        first_page: r.range.start,
                        pages: r.range.len,
                    });
                }
            }
        }
        EarlyLoadList { page_size: plan.page_size, pieces }
    }

    /// The list with each run of consecutive pieces of one file whose gaps are at most `max_gap`
    /// pages read as one piece (gaps included), so that a disk limited in operations per second
    /// serves it in fewer: on the boot benchmark's (200 a second, 40 MB/s) an operation costs as
    /// much time as about 50 more pages read with its neighbours.
    pub fn coalesced(&self, max_gap: u64) -> EarlyLoadList {
        let mut pieces: Vec<EarlyPiece> = Vec::with_capacity(self.pieces.len());
        for p in &self.pieces {
            if let Some(last) = pieces.last_mut()
                && last.path == p.path
                && last.size == p.size
                && last.mtime_ns == p.mtime_ns
            {
                let end = last.first_page.saturating_add(last.pages);
                let p_end = p.first_page.saturating_add(p.pages);
                if p.first_page >= last.first_page && p.first_page <= end.saturating_add(max_gap) {
                    last.pages = end.max(p_end) - last.first_page;
                    continue;
                }
            }
            pieces.push(p.clone());
        }
        EarlyLoadList { page_size: self.page_size, pieces }
    }

    /// Pages over all pieces.
    pub fn page_count(&self) -> u64 {
        self.pieces.iter().map(|p| p.pages).sum()
    }

    /// The list as written to its file. Pieces whose path is relative or holds a newline, which
    /// the format cannot carry, are left out.
    pub fn render(&self) -> String {
        let mut out = format!("{FORMAT_NAME} {FORMAT_VERSION} {}\n", self.page_size);
        for p in self.pieces.iter().filter(|p| representable(&p.path)) {
            out.push_str(&format!("{} {} {} {} {}\n", p.first_page, p.pages, p.size, p.mtime_ns, p.path.display()));
        }
        out
    }

    /// Parses a list: the header must name this format and version and a power-of-two page size;
    /// every piece line five fields, numbers where numbers are, an absolute path, at least one
    /// page, at most [`MAX_PIECES`] pieces.
    pub fn parse(text: &str) -> Result<EarlyLoadList, EarlyListError> {
        let err = |line: usize, detail: String| EarlyListError { line, detail };
        let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
        let (_, header) = lines.next().ok_or_else(|| err(0, "empty".into()))?;
        let mut words = header.split(' ');
        if words.next() != Some(FORMAT_NAME) {
            return Err(err(1, format!("not an augur early load list (header {:?})", truncated(header))));
        }
        let version: u32 = words.next().and_then(|w| w.parse().ok()).ok_or_else(|| err(1, "no version".into()))?;
        if version != FORMAT_VERSION {
            return Err(err(1, format!("version {version}; this augur reads version {FORMAT_VERSION}")));
        }
        let page_size: u64 = words.next().and_then(|w| w.parse().ok()).ok_or_else(|| err(1, "no page size".into()))?;
        if !page_size.is_power_of_two() || !(512..=(1 << 21)).contains(&page_size) || words.next().is_some() {
            return Err(err(1, format!("bad page size or trailing words in {:?}", truncated(header))));
        }
        let mut pieces = Vec::new();
        for (n, line) in lines {
            if line.is_empty() {
                continue;
            }
            if pieces.len() == MAX_PIECES {
                return Err(err(n, format!("more than {MAX_PIECES} pieces")));
            }
            let mut f = line.splitn(5, ' ');
            let mut number =
                |what: &str| f.next().and_then(|w| w.parse::<u64>().ok()).ok_or_else(|| err(n, format!("no {what}")));
            let first_page = number("first page")?;
            let pages = number("page count")?;
            let size = number("size")?;
            let mtime_ns = f.next().and_then(|w| w.parse::<i64>().ok()).ok_or_else(|| err(n, "no modification time".into()))?;
            let path = PathBuf::from(f.next().unwrap_or_default());
            if pages == 0 || first_page.checked_add(pages).is_none() {
                return Err(err(n, format!("bad page range {first_page}+{pages}")));
            }
            if !representable(&path) {
                return Err(err(
                    n,
                    format!("path {:?} is not absolute or holds a carriage return", truncated(&path.display().to_string())),
                ));
            }
            pieces.push(EarlyPiece { path, size, mtime_ns, first_page, pages });
        }
        Ok(EarlyLoadList { page_size, pieces })
    }
}

fn representable(path: &Path) -> bool {
    path.is_absolute() && path.to_str().is_some_and(|s| !s.contains('\n') && !s.contains('\r'))
}

/// At most 80 characters of `s`, for an error message.
fn truncated(s: &str) -> String {
    s.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::boot::PhasePlan;
    use crate::model::profile::{FileIdentity, FileProfile, UsedRange};
    use crate::model::range::PageRange;
    use proptest::prelude::*;

    fn file(path: &str, ranges: &[(u64, u64)]) -> FileProfile {
        FileProfile {
            path: PathBuf::from(path),
            identity: FileIdentity { dev: 1, ino: 2, size: 1 << 20, mtime_ns: -5 },
            ranges: ranges.iter().map(|&(s, l)| UsedRange { range: PageRange::new(s, l), first_use_us: 0 }).collect(),
        }
    }

    fn plan() -> BootPlan {
        let phase = |phase, files| PhasePlan { phase, files };
        BootPlan {
            page_size: 4096,
            boots: 3,
            phases: vec![
                phase(BootPhase::Early, vec![file("/usr/lib/systemd/systemd", &[(0, 10), (40, 2)]), file("/etc/a b", &[(0, 1)])]),
                phase(BootPhase::MultiUser, vec![file("/usr/sbin/cron", &[(3, 4)])]),
                phase(BootPhase::Session, vec![file("/usr/bin/abiword", &[(0, 100)])]),
            ],
        }
    }

    #[test]
    fn the_list_holds_the_phases_before_the_target_in_load_order_and_round_trips() {
        let list = EarlyLoadList::from_plan(&plan(), BootPhase::Graphical);
        let order: Vec<(String, u64)> = list.pieces.iter().map(|p| (p.path.display().to_string(), p.first_page)).collect();
        assert_eq!(
            order,
            [
                ("/usr/lib/systemd/systemd".into(), 0),
                ("/usr/lib/systemd/systemd".into(), 40),
                ("/etc/a b".into(), 0),
                ("/usr/sbin/cron".into(), 3)
            ]
        );
        assert_eq!(list.page_count(), 17);
        assert_eq!(EarlyLoadList::parse(&list.render()), Ok(list));
        // To multi-user.target: what was first used once it was reached (cron) is not in it.
        assert_eq!(EarlyLoadList::from_plan(&plan(), BootPhase::MultiUser).page_count(), 13);
        // Without systemd's targets (the session is the last phase) all but the session's pages.
        assert_eq!(EarlyLoadList::from_plan(&plan(), BootPhase::Session).page_count(), 17);
    }

    #[test]
    fn consecutive_pieces_of_a_file_with_small_gaps_are_read_as_one() {
        let list = EarlyLoadList::from_plan(&plan(), BootPhase::Session);
        let merged = list.coalesced(64);
        let spans: Vec<(u64, u64)> = merged.pieces.iter().map(|p| (p.first_page, p.pages)).collect();
        // systemd's 0..10 and 40..42 (a gap of 30 pages) become 0..42; other files stay apart.
        assert_eq!(spans, [(0, 42), (0, 1), (3, 4)]);
        // A gap wider than allowed, or a piece that goes backwards, starts a new read.
        assert_eq!(list.coalesced(29).pieces.len(), 4);
        let mut back = list.clone();
        back.pieces.swap(0, 1);
        assert_eq!(back.coalesced(64).pieces.len(), 4);
    }

    #[test]
    fn a_path_the_format_cannot_carry_is_left_out() {
        let mut p = plan();
        p.phases[0].files[1].path = PathBuf::from("/etc/new\nline");
        let list = EarlyLoadList::from_plan(&p, BootPhase::Sysinit);
        assert_eq!(EarlyLoadList::parse(&list.render()).unwrap().pieces.len(), 2);
    }

    #[test]
    fn bad_lists_are_refused_with_the_line() {
        let bad = |text: &str| EarlyLoadList::parse(text).unwrap_err();
        assert_eq!(bad("").line, 0);
        assert_eq!(bad("augur-boot-plan 1 4096\n").line, 1);
        assert!(bad("augur-boot-early 2 4096\n").detail.contains("version 2"));
        assert_eq!(bad("augur-boot-early 1 4095\n").line, 1);
        assert_eq!(bad("augur-boot-early 1 4096\n0 1 2 3 /a\nx 1 2 3 /b\n").line, 3);
        assert_eq!(bad("augur-boot-early 1 4096\n0 0 2 3 /a\n").line, 2);
        assert_eq!(bad("augur-boot-early 1 4096\n0 1 2 3 relative\n").line, 2);
        assert_eq!(bad("augur-boot-early 1 4096\n0 1 2\n").line, 2);
        assert_eq!(bad(&format!("augur-boot-early 1 4096\n{} 2 0 0 /a\n", u64::MAX)).line, 2);
        let empty = EarlyLoadList::parse("augur-boot-early 1 4096\n").unwrap();
        assert!(empty.pieces.is_empty());
    }

    proptest! {
        #[test]
        fn any_text_parses_or_is_refused_without_panicking(text in ".{0,200}") {
            let _ = EarlyLoadList::parse(&text);
            let _ = EarlyLoadList::parse(&format!("augur-boot-early 1 4096\n{text}"));
        }

        #[test]
        fn any_representable_list_round_trips(
            pieces in proptest::collection::vec(("/[a-z ]{1,12}", 0u64..1 << 40, 1u64..1 << 20, any::<u64>(), any::<i64>()), 0..20)
        ) {
            let list = EarlyLoadList {
                page_size: 4096,
                pieces: pieces.into_iter().map(|(path, first_page, pages, size, mtime_ns)| EarlyPiece {
                    path: PathBuf::from(path), size, mtime_ns, first_page, pages,
                }).collect(),
            };
            prop_assert_eq!(EarlyLoadList::parse(&list.render()), Ok(list));
        }
    }
}
