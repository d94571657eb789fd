//! The boot plan file (`boot-plan.json` beside the state database): the merged plan of the last
//! boots, written by `augur boot` each time it saves a boot and read at the next boot's start.
//! Loading a boot then needs neither SQLite nor a writable root file system: `augur-init` reads it
//! before the service manager runs, when the root may still be mounted read-only, and merging
//! the stored boots (reading every trace from the database) no longer competes with the boot's
//! first reads.
//!
//! The format: a header line `{"format":"augur-boot-plan","version":1,"boots":N}`, then one
//! launch profile per phase in phase order, each on one line in the profile file format
//! ([`crate::profile_file`], whose checks it reuses) and named `boot:PHASE` by its command. It
//! does not merge boots (`augur_core::model::boot` does) and decides nothing about loading.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};
use augur_core::model::boot::{BootPhase, BootPlan, PhasePlan};

/// The `format` field of the header line.
pub const FORMAT_NAME: &str = "augur-boot-plan";
/// The newest version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// The plan file's name, in the state database's directory.
pub const FILE_NAME: &str = "boot-plan.json";

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    format: String,
    version: u32,
    boots: usize,
}

/// Where the plan of the state at `state_path` is kept.
pub fn path_beside(state_path: &Path) -> PathBuf {
    state_path.parent().unwrap_or_else(|| Path::new(".")).join(FILE_NAME)
}

/// Serialises a plan.
pub fn to_bytes(plan: &BootPlan) -> Vec<u8> {
    let header = Header { format: FORMAT_NAME.to_string(), version: FORMAT_VERSION, boots: plan.boots };
    let mut out = serde_json::to_vec(&header).unwrap_or_default();
    out.push(b'\n');
    for phase in &plan.phases {
        if let Some(profile) = plan.phase_profile(phase.phase) {
            out.extend(crate::profile_file::to_bytes(&profile));
        }
    }
    out
}

/// Parses a plan, naming `origin` in errors: every phase line must be a valid profile named
/// after a phase, the phases in order and each once, all of one page size.
pub fn from_bytes(bytes: &[u8], origin: &Path) -> Result<BootPlan> {
    let corrupt = |detail: String| StoreError::corrupt(origin, "boot plan", detail);
    let mut lines = bytes.split(|b| *b == b'\n').filter(|l| !l.iter().all(u8::is_ascii_whitespace));
    let first = lines.next().ok_or_else(|| corrupt("empty".into()))?;
    let header: Header = serde_json::from_slice(first).map_err(|e| corrupt(format!("header: {e}")))?;
    if header.format != FORMAT_NAME {
        return Err(corrupt(format!("not an augur boot plan (format {:?})", header.format)));
    }
    StoreError::check_version(origin, "boot plan", header.version, FORMAT_VERSION)?;
    let mut plan = BootPlan { page_size: 0, boots: header.boots, phases: Vec::new() };
    for line in lines {
        let profile = crate::profile_file::from_bytes(line, origin)?;
        let name = profile.command.first().and_then(|c| c.strip_prefix("boot:")).unwrap_or_default();
        let phase: BootPhase = name.parse().map_err(|_| corrupt(format!("{:?} names no boot phase", profile.command)))?;
        if plan.phases.last().is_some_and(|p| p.phase >= phase) {
            return Err(corrupt(format!("phase {phase} is out of order or repeated")));
        }
        if plan.page_size != 0 && plan.page_size != profile.page_size {
            return Err(corrupt(format!("phase {phase} has page size {}, not {}", profile.page_size, plan.page_size)));
        }
        plan.page_size = profile.page_size;
        plan.phases.push(PhasePlan { phase, files: profile.files });
    }
    if plan.page_size == 0 {
        // A plan of no phase (no boot recorded any page yet) still says its page size nowhere.
        plan.page_size = 4096;
    }
    Ok(plan)
}

/// The plan at `path`; `None` when there is none yet.
pub fn read(path: &Path) -> Result<Option<BootPlan>> {
    match fs::read(path) {
        Ok(bytes) => from_bytes(&bytes, path).map(Some),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io_at(path, "reading the boot plan", e)),
    }
}

/// Writes the plan to `path` atomically, mode 0600 (see [`crate::atomic_file`]).
pub fn write(path: &Path, plan: &BootPlan) -> Result<()> {
    crate::atomic_file::write_atomically(path, &to_bytes(plan), 0o600)
        .map_err(|e| StoreError::io_at(path, "writing the boot plan", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::FormatError;
    use augur_core::model::profile::{FileIdentity, FileProfile, UsedRange};
    use augur_core::model::range::PageRange;

    fn file(path: &str, start: u64, len: u64) -> FileProfile {
        FileProfile {
            path: path.into(),
            identity: FileIdentity { dev: 1, ino: start + 1, size: 1 << 20, mtime_ns: 5 },
            ranges: vec![UsedRange { range: PageRange::new(start, len), first_use_us: start * 10 }],
        }
    }

    fn sample() -> BootPlan {
        BootPlan {
            page_size: 4096,
            boots: 3,
            phases: vec![
                PhasePlan { phase: BootPhase::Early, files: vec![file("/lib/systemd/systemd", 0, 40), file("/etc/fstab", 0, 1)] },
                PhasePlan { phase: BootPhase::Session, files: vec![file("/usr/bin/abiword", 3, 9)] },
            ],
        }
    }

    fn is_corrupt(r: Result<BootPlan>) -> bool {
        matches!(r, Err(StoreError::Format(FormatError::Corrupt { .. })))
    }

    #[test]
    fn a_plan_round_trips_and_lives_beside_the_state() {
        assert_eq!(from_bytes(&to_bytes(&sample()), Path::new("p")).unwrap(), sample());
        let empty = BootPlan { page_size: 4096, boots: 0, phases: Vec::new() };
        assert_eq!(from_bytes(&to_bytes(&empty), Path::new("p")).unwrap(), empty);
        assert_eq!(path_beside(Path::new("/var/lib/augur/state.db")), Path::new("/var/lib/augur/boot-plan.json"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        assert_eq!(read(&path).unwrap(), None, "no plan yet is no error");
        write(&path, &sample()).unwrap();
        assert_eq!(read(&path).unwrap(), Some(sample()));
    }

    #[test]
    fn corrupt_plans_are_refused_with_their_own_error() {
        let text = String::from_utf8(to_bytes(&sample())).unwrap();
        for bad in [
            String::new(),
            "{".into(),
            text.replace("augur-boot-plan", "augur-launch-profile"),
            text.replace("\"version\":1,\"boots\"", "\"version\":0,\"boots\""),
            text.replace("boot:session", "boot:lunch"),
            text.replace("boot:session", "boot:early"),
            text.replace("[3,9,30]", "[3,0,30]"),
            text.replace("/usr/bin/abiword", "usr/bin/abiword"),
            text.replace("\"page_size\":4096,\"mode\":\"access\",\"window_ms\":0,\"unresolved\":{\"inodes\":0,\"pages\":0},\"files\":[{\"path\":\"/usr", "\"page_size\":8192,\"mode\":\"access\",\"window_ms\":0,\"unresolved\":{\"inodes\":0,\"pages\":0},\"files\":[{\"path\":\"/usr"),
        ] {
            assert!(is_corrupt(from_bytes(bad.as_bytes(), Path::new("p"))), "accepted: {bad}");
        }
        let future = text.replace("\"version\":1,\"boots\"", "\"version\":9,\"boots\"");
        assert!(matches!(
            from_bytes(future.as_bytes(), Path::new("p")),
            Err(StoreError::Format(FormatError::UnsupportedVersion { found: 9, .. }))
        ));
    }
}
