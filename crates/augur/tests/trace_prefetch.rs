//! The foundation's round trip, as root (as CI runs it): trace a real command, drop every cache,
//! prefetch its profile, and check with mincore(2) that at least 99 % of the profile's pages are
//! resident right after the prefetch.

use std::fs;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;

use augur_core::model::profile::{FileProfile, TraceMode};
use augur_store::profile_file;

const AUGUR: &str = env!("CARGO_BIN_EXE_augur");

/// Pages of `file`'s profiled ranges that mincore reports resident, and how many were asked.
fn resident_pages(file: &FileProfile, page_size: u64) -> (u64, u64) {
    let wanted: u64 = file.page_count();
    let Ok(f) = fs::File::open(&file.path) else { return (0, wanted) };
    let len = f.metadata().unwrap().len();
    if len == 0 {
        return (0, wanted);
    }
    // SAFETY: a read-only shared mapping of a file we hold open; unmapped below, never accessed.
    let addr = unsafe { libc::mmap(std::ptr::null_mut(), len as usize, libc::PROT_READ, libc::MAP_SHARED, f.as_raw_fd(), 0) };
    assert_ne!(addr, libc::MAP_FAILED, "mmap {}", file.path.display());
    let pages = len.div_ceil(page_size) as usize;
    let mut vec = vec![0u8; pages];
    // SAFETY: `addr` maps `len` bytes; `vec` has one byte per page of it.
    let rc = unsafe { libc::mincore(addr, len as usize, vec.as_mut_ptr()) };
    assert_eq!(rc, 0);
    // SAFETY: unmapping exactly what was mapped.
    unsafe { libc::munmap(addr, len as usize) };
    let mut resident = 0;
    for r in &file.ranges {
        for p in r.range.start..r.range.end() {
            if vec.get(p as usize).is_some_and(|b| b & 1 == 1) {
                resident += 1;
            }
        }
    }
    (resident, wanted)
}

#[test]
fn traced_pages_are_resident_after_drop_caches_and_prefetch() {
    let dir = tempfile::tempdir().unwrap();
    let profile_path = dir.path().join("python3.profile.json");
    let out = Command::new(AUGUR)
        .args([
            "trace",
            "--output",
            profile_path.to_str().unwrap(),
            "--",
            "python3",
            "-c",
            "import asyncio, email, json, http.client",
        ])
        .env_remove("AUGUR_FORCE_MODE")
        .output()
        .unwrap();
    assert!(out.status.success(), "trace: {}", String::from_utf8_lossy(&out.stderr));
    let profile = profile_file::load(&profile_path).unwrap();
    assert_eq!(profile.mode, TraceMode::Access);
    assert!(
        profile.files.len() > 20 && profile.page_count() > 500,
        "a python start touches many files: {} files, {} pages",
        profile.files.len(),
        profile.page_count()
    );
    assert!(
        profile
            .files
            .iter()
            .any(|f| f.path.to_string_lossy().ends_with("json/__init__.py")
                || f.path.to_string_lossy().contains("json/__pycache__"))
    );

    // Drop every clean page-cache page.
    assert!(Command::new("sync").status().unwrap().success());
    fs::write("/proc/sys/vm/drop_caches", "3").unwrap();

    let out = Command::new(AUGUR).args(["prefetch", profile_path.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "prefetch: {}", String::from_utf8_lossy(&out.stderr));

    let (mut resident, mut wanted) = (0, 0);
    let mut worst = Vec::new();
    for f in &profile.files {
        let (r, w) = resident_pages(f, profile.page_size);
        resident += r;
        wanted += w;
        if r < w {
            worst.push((w - r, f.path.clone()));
        }
    }
    worst.sort();
    worst.reverse();
    let share = resident as f64 / wanted as f64;
    eprintln!("{resident} of {wanted} profiled pages resident after prefetch ({:.2} %)", share * 100.0);
    assert!(
        share >= 0.99,
        "only {resident} of {wanted} profiled pages resident ({:.1} %); most missing: {:?}",
        share * 100.0,
        &worst[..worst.len().min(5)]
    );
    assert!(Path::new(&profile_path).exists());
}

/// strace records the lookups; install it when the machine lacks it (as CI's clean image may).
fn ensure_strace() {
    let found = |p: &str| Path::new(p).join("strace").exists();
    if ["/usr/bin", "/bin", "/usr/local/bin"].iter().any(|p| found(p)) {
        return;
    }
    let _ = Command::new("apt-get").args(["install", "-y", "-q", "strace"]).env("DEBIAN_FRONTEND", "noninteractive").status();
    assert!(found("/usr/bin"), "strace is needed to record path lookups and could not be installed");
}

/// The lookups of a shell script in `mode` (bpf: by the kernel; access: under strace), named by
/// `source` in the summary.
fn failed_lookups_and_listed_directories_are_recorded_and_replayed(mode: &str, source: &str) {
    use augur_core::model::profile::LookupKind;
    if mode != "bpf" {
        ensure_strace();
    }
    let dir = tempfile::tempdir().unwrap();
    let profile_path = dir.path().join("sh.profile.json");
    let script = "ls /usr/share/doc >/dev/null; test -e /nonexistent/augur-lookup-test/x; exit 0";
    let out = Command::new(AUGUR)
        .args(["trace", "--output", profile_path.to_str().unwrap(), "--", "sh", "-c", script])
        .env("AUGUR_FORCE_MODE", mode)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "trace: {stderr}");
    assert!(stderr.contains(&format!("path lookups recorded with {source}")), "{stderr}");
    let profile = profile_file::load(&profile_path).unwrap();
    let kind_of = |p: &str| profile.lookups.iter().find(|l| l.path == Path::new(p)).map(|l| l.kind);
    assert_eq!(kind_of("/usr/share/doc"), Some(LookupKind::Dir), "{:?}", profile.lookups);
    assert_eq!(kind_of("/nonexistent/augur-lookup-test/x"), Some(LookupKind::Missing), "{:?}", profile.lookups);
    // The wrapper's own binary is not part of the command's working set.
    assert!(
        !profile.files.iter().any(|f| f.path.ends_with("strace")),
        "{:?}",
        profile.files.iter().map(|f| &f.path).collect::<Vec<_>>()
    );
    assert!(profile.files.iter().any(|f| f.path.ends_with("ls")));

    fs::write("/proc/sys/vm/drop_caches", "3").unwrap();
    let out = Command::new(AUGUR).args(["prefetch", "--json", profile_path.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "prefetch: {}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let replayed = json["lookups_replayed"].as_u64().unwrap();
    assert_eq!(replayed, profile.lookups.len() as u64, "{json}");
    assert!(replayed >= 2);

    // Asked not to, the trace records no lookups and says so.
    let out = Command::new(AUGUR)
        .args(["trace", "--no-lookups", "--output", profile_path.to_str().unwrap(), "--", "sh", "-c", script])
        .env("AUGUR_FORCE_MODE", mode)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("path lookups not recorded (not asked for)"), "{stderr}");
    assert!(profile_file::load(&profile_path).unwrap().lookups.is_empty());
}

#[test]
fn failed_lookups_and_listed_directories_are_recorded_by_bpf_and_replayed() {
    failed_lookups_and_listed_directories_are_recorded_and_replayed("bpf", "bpf");
}

#[test]
fn failed_lookups_and_listed_directories_are_recorded_under_strace_and_replayed() {
    failed_lookups_and_listed_directories_are_recorded_and_replayed("access", "strace");
}
