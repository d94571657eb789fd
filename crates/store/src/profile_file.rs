//! The on-disk launch profile format (`*.profile.json`), versioned and documented in
//! `docs/profile-format.md`.
//!
//! Owns serialising a [`LaunchProfile`] to bytes and back, rejecting corrupt or future-version
//! files with typed errors, and writing atomically. It does not decide what goes in a profile.

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Result, StoreError};
use augur_core::model::profile::{
    FileIdentity, FileProfile, LaunchProfile, Lookup, LookupKind, TraceMode, Unresolved, UsedRange,
};
use augur_core::model::range::PageRange;

/// The `format` field every profile carries.
pub const FORMAT_NAME: &str = "augur-launch-profile";
/// The newest version this build writes and reads.
pub const FORMAT_VERSION: u32 = 2;

#[derive(Serialize, Deserialize)]
struct Header {
    format: String,
    version: u32,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireProfile {
    format: String,
    version: u32,
    command: Vec<String>,
    recorded_at: u64,
    page_size: u64,
    mode: TraceMode,
    window_ms: u64,
    unresolved: Unresolved,
    files: Vec<WireFile>,
    /// Version 2: optional (absent when the trace recorded none); never in version 1.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    lookups: Vec<WireLookup>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireLookup {
    path: String,
    kind: LookupKind,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireFile {
    path: String,
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i64,
    /// `[first_page, page_count, first_use_us]` triples in first-use order.
    ranges: Vec<(u64, u64, u64)>,
}

/// Serialises a profile to its JSON text.
pub fn to_bytes(profile: &LaunchProfile) -> Vec<u8> {
    let wire = WireProfile {
        format: FORMAT_NAME.to_string(),
        version: FORMAT_VERSION,
        command: profile.command.clone(),
        recorded_at: profile.recorded_at,
        page_size: profile.page_size,
        mode: profile.mode,
        window_ms: profile.window_ms,
        unresolved: profile.unresolved,
        files: profile
            .files
            .iter()
            .map(|f| WireFile {
                path: f.path.to_string_lossy().into_owned(),
                dev: f.identity.dev,
                ino: f.identity.ino,
                size: f.identity.size,
                mtime_ns: f.identity.mtime_ns,
                ranges: f.ranges.iter().map(|r| (r.range.start, r.range.len, r.first_use_us)).collect(),
            })
            .collect(),
        lookups: profile
            .lookups
            .iter()
            .map(|l| WireLookup { path: l.path.to_string_lossy().into_owned(), kind: l.kind })
            .collect(),
    };
    let mut out = serde_json::to_vec(&wire).unwrap_or_default();
    out.push(b'\n');
    out
}

/// Parses a profile, naming `origin` in errors.
pub fn from_bytes(bytes: &[u8], origin: &Path) -> Result<LaunchProfile> {
    let corrupt = |detail: String| StoreError::corrupt(origin, "profile", detail);
    let header: Header = serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
    if header.format != FORMAT_NAME {
        return Err(corrupt(format!("not an augur launch profile (format {:?})", header.format)));
    }
    StoreError::check_version(origin, "profile", header.version, FORMAT_VERSION)?;
    let wire: WireProfile = serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
    if wire.page_size == 0 || !wire.page_size.is_power_of_two() {
        return Err(corrupt(format!("page size {} is not a power of two", wire.page_size)));
    }
    let mut files = Vec::with_capacity(wire.files.len());
    for f in wire.files {
        if !f.path.starts_with('/') {
            return Err(corrupt(format!("path {:?} is not absolute", f.path)));
        }
        let mut ranges = Vec::with_capacity(f.ranges.len());
        for (start, len, first_use_us) in f.ranges {
            if len == 0 || start.checked_add(len).is_none() {
                return Err(corrupt(format!("{}: invalid range start {start} length {len}", f.path)));
            }
            ranges.push(UsedRange { range: PageRange::new(start, len), first_use_us });
        }
        files.push(FileProfile {
            path: f.path.into(),
            identity: FileIdentity { dev: f.dev, ino: f.ino, size: f.size, mtime_ns: f.mtime_ns },
            ranges,
        });
    }
    if wire.version < 2 && !wire.lookups.is_empty() {
        return Err(corrupt("version 1 profiles have no lookups".into()));
    }
    let mut lookups = Vec::with_capacity(wire.lookups.len());
    for l in wire.lookups {
        if !l.path.starts_with('/') {
            return Err(corrupt(format!("lookup path {:?} is not absolute", l.path)));
        }
        lookups.push(Lookup { path: l.path.into(), kind: l.kind });
    }
    Ok(LaunchProfile {
        command: wire.command,
        recorded_at: wire.recorded_at,
        page_size: wire.page_size,
        mode: wire.mode,
        window_ms: wire.window_ms,
        files,
        unresolved: wire.unresolved,
        lookups,
    })
}

/// Reads and parses the profile at `path`.
pub fn load(path: &Path) -> Result<LaunchProfile> {
    let bytes = fs::read(path).map_err(|e| StoreError::io_at(path, "reading profile", e))?;
    from_bytes(&bytes, path)
}

/// Writes the profile to `path` atomically, mode 0600 (see [`crate::atomic_file`]).
pub fn save(profile: &LaunchProfile, path: &Path) -> Result<()> {
    crate::atomic_file::write_atomically(path, &to_bytes(profile), 0o600)
        .map_err(|e| StoreError::io_at(path, "writing profile", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::FormatError;

    fn sample() -> LaunchProfile {
        LaunchProfile {
            command: vec!["java".into(), "-version".into()],
            recorded_at: 1_700_000_000,
            page_size: 4096,
            mode: TraceMode::Access,
            window_ms: 1234,
            files: vec![FileProfile {
                path: "/usr/lib/jvm/lib/modules".into(),
                identity: FileIdentity { dev: 0xfe00, ino: 42, size: 1 << 20, mtime_ns: -5 },
                ranges: vec![
                    UsedRange { range: PageRange::new(10, 3), first_use_us: 7 },
                    UsedRange { range: PageRange::new(0, 1), first_use_us: 9 },
                ],
            }],
            unresolved: Unresolved { inodes: 2, pages: 17 },
            lookups: Vec::new(),
        }
    }

    #[test]
    fn round_trip() {
        let p = sample();
        let back = from_bytes(&to_bytes(&p), Path::new("x")).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn lookups_round_trip_and_profiles_without_them_still_load() {
        let mut p = sample();
        p.lookups = vec![
            Lookup { path: "/etc/ld.so.preload".into(), kind: LookupKind::Missing },
            Lookup { path: "/usr/share/doc".into(), kind: LookupKind::Dir },
            Lookup { path: "/usr/bin/java".into(), kind: LookupKind::Stat },
        ];
        let bytes = to_bytes(&p);
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.contains(r#"{"path":"/usr/share/doc","kind":"dir"}"#), "{text}");
        assert_eq!(from_bytes(&bytes, Path::new("x")).unwrap(), p);
        // A version 1 profile (written before the field existed) has no "lookups" key at all.
        let old = String::from_utf8(to_bytes(&sample())).unwrap().replace("\"version\":2", "\"version\":1");
        assert!(!old.contains("lookups") && old.contains("\"version\":1"));
        assert_eq!(from_bytes(old.as_bytes(), Path::new("x")).unwrap(), sample());
        let v1_with_lookups = text.replace("\"version\":2", "\"version\":1");
        assert!(matches!(
            from_bytes(v1_with_lookups.as_bytes(), Path::new("p")),
            Err(StoreError::Format(FormatError::Corrupt { .. }))
        ));
        let relative = text.replace("/usr/share/doc", "share/doc");
        assert!(matches!(from_bytes(relative.as_bytes(), Path::new("p")), Err(StoreError::Format(FormatError::Corrupt { .. }))));
        let bad_kind = text.replace(r#""kind":"dir""#, r#""kind":"exec""#);
        assert!(matches!(from_bytes(bad_kind.as_bytes(), Path::new("p")), Err(StoreError::Format(FormatError::Corrupt { .. }))));
    }

    #[test]
    fn future_version_is_its_own_error() {
        let text = String::from_utf8(to_bytes(&sample())).unwrap().replace("\"version\":2", "\"version\":99");
        let err = from_bytes(text.as_bytes(), Path::new("p")).unwrap_err();
        assert!(matches!(err, StoreError::Format(FormatError::UnsupportedVersion { found: 99, .. })), "{err}");
    }

    #[test]
    fn corrupt_inputs_are_rejected() {
        for bad in [&b""[..], b"{", b"[]", b"{\"format\":\"x\",\"version\":1}", b"\xff\xfe"] {
            let err = from_bytes(bad, Path::new("p")).unwrap_err();
            assert!(matches!(err, StoreError::Format(FormatError::Corrupt { .. })), "{err}");
        }
        let text = String::from_utf8(to_bytes(&sample())).unwrap().replace("[10,3,7]", "[10,0,7]");
        assert!(matches!(from_bytes(text.as_bytes(), Path::new("p")), Err(StoreError::Format(FormatError::Corrupt { .. }))));
    }

    #[test]
    fn save_and_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.profile.json");
        save(&sample(), &path).unwrap();
        assert_eq!(load(&path).unwrap(), sample());
        assert!(matches!(load(&dir.path().join("missing")), Err(StoreError::NotFound { .. })));
    }
}
