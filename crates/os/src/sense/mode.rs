//! Which observation mode this kernel allows, best first: the eBPF observer (`bpf`: launches
//! followed in the kernel from their exec, page accesses and path lookups), then the tracefs
//! modes (page access events, page-cache insertions only), then no tracing at all (`file-only`);
//! which tracepoints each tracefs mode enables, and why a better mode was passed over.
//!
//! It only looks at a tracefs `events` directory (injected, so tests use a fake one) and at the
//! `AUGUR_FORCE_MODE` override, and decides when a failed eBPF start falls back; it does not
//! create instances, load programs (its caller's opener does) or read events.

use std::path::Path;

use crate::error::{OsError, Result};
use augur_core::model::profile::TraceMode;

/// Environment variable that forces a degraded mode (`access`, `insertion` or `file-only`; the
/// best one asked for is then required: `bpf` for `augur trace`), so the degraded paths can be
/// exercised on a full kernel.
pub const FORCE_MODE_ENV: &str = "AUGUR_FORCE_MODE";

/// The page-cache insertion tracepoint, present on every kernel augur supports.
pub const INSERTION_EVENT: &str = "filemap/mm_filemap_add_to_page_cache";
/// The access tracepoints (Linux 6.11 and later), which fire on cache hits as well.
pub const ACCESS_EVENTS: [&str; 3] = ["filemap/mm_filemap_get_pages", "filemap/mm_filemap_map_pages", "filemap/mm_filemap_fault"];
/// ext4's inode reads: which inodes a launch needed from disk (metadata its page events do not
/// show). Optional: other file systems, or kernels without it, only lose this.
pub const INODE_LOAD_EVENT: &str = "ext4/ext4_load_inode";
/// Process life-cycle tracepoints used to follow descendants and resolve paths.
pub const PROCESS_EVENTS: [&str; 3] = ["sched/sched_process_exec", "sched/sched_process_fork", "sched/sched_process_exit"];

/// What the kernel offers, as found in an `events` directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelEvents {
    /// The access events present, in [`ACCESS_EVENTS`] order.
    pub access: Vec<&'static str>,
    /// Whether the insertion event is present.
    pub insertion: bool,
    /// The process events present.
    pub process: Vec<&'static str>,
    /// Whether [`INODE_LOAD_EVENT`] is present.
    pub inode_load: bool,
}

impl KernelEvents {
    /// Probes `events_dir` (a tracefs `events` directory); `None` means no tracefs at all.
    pub fn probe(events_dir: Option<&Path>) -> Self {
        let has = |e: &str| events_dir.is_some_and(|d| d.join(e).join("enable").exists());
        KernelEvents {
            access: ACCESS_EVENTS.into_iter().filter(|e| has(e)).collect(),
            insertion: has(INSERTION_EVENT),
            process: PROCESS_EVENTS.into_iter().filter(|e| has(e)).collect(),
            inode_load: has(INODE_LOAD_EVENT),
        }
    }

    /// The best mode these events allow. Access mode needs at least `get_pages` and `map_pages`
    /// (reads and mapped hits); `fault` is used when present.
    pub fn best_mode(&self) -> TraceMode {
        let has_access = |name: &str| self.access.iter().any(|e| e.ends_with(name));
        if self.insertion && has_access("mm_filemap_get_pages") && has_access("mm_filemap_map_pages") {
            TraceMode::Access
        } else if self.insertion {
            TraceMode::Insertion
        } else {
            TraceMode::FileOnly
        }
    }

    /// Why this kernel does not offer `mode` (`None` when it does).
    pub fn missing_for(&self, mode: TraceMode) -> Option<String> {
        let has_access = |name: &str| self.access.iter().any(|e| e.ends_with(name));
        let missing: Vec<&str> = match mode {
            TraceMode::FileOnly => Vec::new(),
            TraceMode::Insertion => [INSERTION_EVENT].into_iter().filter(|_| !self.insertion).collect(),
            TraceMode::Access => [INSERTION_EVENT, ACCESS_EVENTS[0], ACCESS_EVENTS[1]]
                .into_iter()
                .filter(|e| if *e == INSERTION_EVENT { !self.insertion } else { !has_access(e.rsplit('/').next().unwrap_or(e)) })
                .collect(),
        };
        (!missing.is_empty()).then(|| format!("no {}", missing.join(", ")))
    }

    /// The tracepoints to enable for `mode` (empty for [`TraceMode::FileOnly`]).
    pub fn events_for(&self, mode: TraceMode) -> Vec<&'static str> {
        let mut out = Vec::new();
        match mode {
            TraceMode::FileOnly => return out,
            TraceMode::Access => out.extend(self.access.iter().copied()),
            TraceMode::Insertion => {}
        }
        out.push(INSERTION_EVENT);
        out.extend(self.process.iter().copied());
        if self.inode_load {
            out.push(INODE_LOAD_EVENT);
        }
        out
    }
}

/// Parses a mode name as the override and the CLI accept it.
pub fn parse_mode(name: &str) -> Option<TraceMode> {
    match name.trim().to_ascii_lowercase().as_str() {
        "access" => Some(TraceMode::Access),
        "insertion" | "insertions" => Some(TraceMode::Insertion),
        "file-only" | "fileonly" | "file_only" | "file" => Some(TraceMode::FileOnly),
        _ => None,
    }
}

/// The short name of a mode, as written in profiles and accepted by [`parse_mode`].
pub fn mode_name(mode: TraceMode) -> &'static str {
    match mode {
        TraceMode::Access => "access",
        TraceMode::Insertion => "insertion",
        TraceMode::FileOnly => "file-only",
    }
}

/// Chooses the mode: the best available, or `requested` when given. A request can only degrade:
/// asking for more than the kernel has fails with [`OsError::KernelFeature`].
pub fn select_mode(available: TraceMode, requested: Option<TraceMode>) -> Result<TraceMode> {
    let rank = |m: TraceMode| match m {
        TraceMode::Access => 2,
        TraceMode::Insertion => 1,
        TraceMode::FileOnly => 0,
    };
    match requested {
        None => Ok(available),
        Some(want) if rank(want) <= rank(available) => Ok(want),
        Some(want) => Err(OsError::KernelFeature {
            feature: format!("the tracepoints of {} mode", mode_name(want)),
            detail: format!("this kernel allows {} mode at best", mode_name(available)),
        }),
    }
}

/// How `augur trace` observes a command, best first. The profile records what its pages mean
/// ([`ObservationMode::profile_mode`]), not how they were observed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ObservationMode {
    /// The eBPF observer: the launch followed in the kernel from its exec, page accesses (or
    /// insertions on kernels before 6.11) and path lookups, without tracefs instances or strace.
    Bpf,
    /// A tracefs mode.
    Tracefs(TraceMode),
}

impl ObservationMode {
    /// Every mode, best first.
    pub const ALL: [ObservationMode; 4] = [
        ObservationMode::Bpf,
        ObservationMode::Tracefs(TraceMode::Access),
        ObservationMode::Tracefs(TraceMode::Insertion),
        ObservationMode::Tracefs(TraceMode::FileOnly),
    ];

    /// The short name, as printed and accepted by [`parse_observation_mode`].
    pub fn name(self) -> &'static str {
        match self {
            ObservationMode::Bpf => "bpf",
            ObservationMode::Tracefs(m) => mode_name(m),
        }
    }

    /// Higher is better.
    fn rank(self) -> u8 {
        match self {
            ObservationMode::Bpf => 3,
            ObservationMode::Tracefs(TraceMode::Access) => 2,
            ObservationMode::Tracefs(TraceMode::Insertion) => 1,
            ObservationMode::Tracefs(TraceMode::FileOnly) => 0,
        }
    }

    /// True when `self` is better than `other`.
    pub fn is_better_than(self, other: ObservationMode) -> bool {
        self.rank() > other.rank()
    }

    /// What observing in this mode sees, for people; `pages` is what its pages mean (for
    /// [`ObservationMode::Bpf`], access events where the kernel has them, else insertions).
    pub fn describe(self, pages: TraceMode) -> String {
        match self {
            ObservationMode::Bpf => format!("eBPF, followed from exec: {}", pages.describe()),
            ObservationMode::Tracefs(m) => m.describe().to_string(),
        }
    }

    /// The tracefs mode, `None` for [`ObservationMode::Bpf`].
    pub fn tracefs(self) -> Option<TraceMode> {
        match self {
            ObservationMode::Bpf => None,
            ObservationMode::Tracefs(m) => Some(m),
        }
    }
}

/// Parses a mode name as `augur trace --mode` and `AUGUR_FORCE_MODE` accept it: `bpf` (or
/// `ebpf`) and the tracefs modes of [`parse_mode`].
pub fn parse_observation_mode(name: &str) -> Option<ObservationMode> {
    match name.trim().to_ascii_lowercase().as_str() {
        "bpf" | "ebpf" => Some(ObservationMode::Bpf),
        other => parse_mode(other).map(ObservationMode::Tracefs),
    }
}

/// Reads [`FORCE_MODE_ENV`] as `augur trace` does; an unknown value is a usage error.
pub fn forced_observation_mode_from_env() -> Result<Option<ObservationMode>> {
    match std::env::var(FORCE_MODE_ENV) {
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) => parse_observation_mode(&v).map(Some).ok_or(OsError::BadEnvironment {
            variable: FORCE_MODE_ENV,
            value: v,
            expected: "bpf, access, insertion or file-only",
        }),
        Err(_) => Ok(None),
    }
}

/// The eBPF step of the degrade chain every observer shares (`augur trace`, the daemon): unless
/// a tracefs mode was `requested`, `open` is tried; when it fails because this machine cannot run
/// BPF programs and bpf mode was not required, the reason is noted in `passed_over` and `None`
/// says to fall back to tracefs. A required bpf mode that cannot start is an error.
pub fn open_bpf_unless_degraded<T>(
    requested: Option<ObservationMode>,
    passed_over: &mut PassedOver,
    open: impl FnOnce() -> std::result::Result<T, super::bpf::BpfError>,
) -> Result<Option<T>> {
    match requested {
        None | Some(ObservationMode::Bpf) => match open() {
            Ok(t) => Ok(Some(t)),
            Err(e) if requested.is_none() && e.is_unavailable() => {
                tracing::debug!("eBPF observation unavailable, falling back to tracefs: {e}");
                passed_over.add(ObservationMode::Bpf, e.reason());
                Ok(None)
            }
            Err(e) => Err(e.into()),
        },
        Some(m) => {
            passed_over.add(ObservationMode::Bpf, format!("--mode/{FORCE_MODE_ENV} asked for {}", m.name()));
            Ok(None)
        }
    }
}

/// The better modes a run passed over and why, for every command that reports its mode:
/// `bpf: no BTF; access: forced to insertion`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PassedOver(pub Vec<(ObservationMode, String)>);

impl PassedOver {
    /// Notes that `mode` was not used, for `why`.
    pub fn add(&mut self, mode: ObservationMode, why: impl Into<String>) {
        if !self.0.iter().any(|(m, _)| *m == mode) {
            self.0.push((mode, why.into()));
        }
    }

    /// Keeps only the modes better than `used` (a mode is never passed over for a worse one).
    pub fn better_than(mut self, used: ObservationMode) -> Self {
        self.0.retain(|(m, _)| m.is_better_than(used));
        self.0.sort_by_key(|(m, _)| std::cmp::Reverse(m.rank()));
        self
    }

    /// True when nothing better was passed over.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Display for PassedOver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|(m, why)| format!("{}: {why}", m.name())).collect();
        f.write_str(&parts.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_events(names: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for n in names {
            let d = dir.path().join(n);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("enable"), "0\n").unwrap();
        }
        dir
    }

    #[test]
    fn full_kernel_gets_access_mode_and_all_events() {
        let mut all: Vec<&str> = ACCESS_EVENTS.to_vec();
        all.push(INSERTION_EVENT);
        all.extend(PROCESS_EVENTS);
        let dir = fake_events(&all);
        let k = KernelEvents::probe(Some(dir.path()));
        assert_eq!(k.best_mode(), TraceMode::Access);
        assert_eq!(k.events_for(TraceMode::Access).len(), 7);
        assert_eq!(
            k.events_for(TraceMode::Insertion),
            vec![INSERTION_EVENT, PROCESS_EVENTS[0], PROCESS_EVENTS[1], PROCESS_EVENTS[2]]
        );
        assert!(k.events_for(TraceMode::FileOnly).is_empty());
        assert!(!k.inode_load);
    }

    #[test]
    fn inode_loads_are_traced_where_ext4_offers_them_in_every_tracing_mode() {
        let dir = fake_events(&[INSERTION_EVENT, INODE_LOAD_EVENT]);
        let k = KernelEvents::probe(Some(dir.path()));
        assert!(k.inode_load);
        assert_eq!(k.events_for(TraceMode::Insertion), vec![INSERTION_EVENT, INODE_LOAD_EVENT]);
        assert!(k.events_for(TraceMode::FileOnly).is_empty());
    }

    #[test]
    fn old_kernel_degrades_to_insertions() {
        let dir = fake_events(&[INSERTION_EVENT, "filemap/mm_filemap_fault", PROCESS_EVENTS[0]]);
        let k = KernelEvents::probe(Some(dir.path()));
        assert_eq!(k.best_mode(), TraceMode::Insertion);
        assert_eq!(KernelEvents::probe(Some(fake_events(&[]).path())).best_mode(), TraceMode::FileOnly);
        assert_eq!(KernelEvents::probe(None).best_mode(), TraceMode::FileOnly);
    }

    #[test]
    fn overrides_only_degrade() {
        assert_eq!(select_mode(TraceMode::Access, None).unwrap(), TraceMode::Access);
        assert_eq!(select_mode(TraceMode::Access, Some(TraceMode::Insertion)).unwrap(), TraceMode::Insertion);
        assert_eq!(select_mode(TraceMode::Insertion, Some(TraceMode::FileOnly)).unwrap(), TraceMode::FileOnly);
        let err = select_mode(TraceMode::Insertion, Some(TraceMode::Access)).unwrap_err();
        assert!(matches!(err, OsError::KernelFeature { .. }), "{err}");
    }

    #[test]
    fn missing_events_are_named() {
        let dir = fake_events(&[INSERTION_EVENT, "filemap/mm_filemap_fault"]);
        let k = KernelEvents::probe(Some(dir.path()));
        assert_eq!(k.missing_for(TraceMode::Insertion), None);
        assert_eq!(
            k.missing_for(TraceMode::Access).as_deref(),
            Some("no filemap/mm_filemap_get_pages, filemap/mm_filemap_map_pages")
        );
        let none = KernelEvents::probe(None);
        assert_eq!(none.missing_for(TraceMode::Insertion).as_deref(), Some("no filemap/mm_filemap_add_to_page_cache"));
        assert_eq!(none.missing_for(TraceMode::FileOnly), None);
    }

    #[test]
    fn observation_modes_parse_rank_and_explain_what_was_passed_over() {
        for m in ObservationMode::ALL {
            assert_eq!(parse_observation_mode(m.name()), Some(m));
        }
        assert_eq!(parse_observation_mode("eBPF"), Some(ObservationMode::Bpf));
        assert_eq!(parse_observation_mode("bogus"), None);
        assert!(ObservationMode::ALL.windows(2).all(|w| w[0].is_better_than(w[1])));
        let insertion = ObservationMode::Tracefs(TraceMode::Insertion);
        let mut p = PassedOver::default();
        p.add(ObservationMode::Tracefs(TraceMode::Access), "forced");
        p.add(ObservationMode::Bpf, "no BTF");
        p.add(ObservationMode::Tracefs(TraceMode::FileOnly), "never shown");
        assert_eq!(p.better_than(insertion).to_string(), "bpf: no BTF; access: forced");
    }

    #[test]
    fn mode_names_round_trip() {
        for m in [TraceMode::Access, TraceMode::Insertion, TraceMode::FileOnly] {
            assert_eq!(parse_mode(mode_name(m)), Some(m));
        }
        assert_eq!(parse_mode("bogus"), None);
    }
}
