//! `augur prefetch` end to end, as root (as CI runs it): exactness of what is loaded, stale and
//! non-regular files refused without being read, and the exit codes of bad profiles.
//!
//! Each test evicts only its own files (POSIX_FADV_DONTNEED), so it neither disturbs nor is
//! disturbed by other tests dropping caches, and asserts residency right after its own prefetch.

use std::fs;
use std::io::Write;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use augur_core::model::profile::{FileProfile, LaunchProfile, TraceMode, Unresolved, UsedRange};
use augur_core::model::range::{PageRange, RangeSet};
use augur_os::fetch::open::current_identity;
use augur_os::fetch::{ResidencyProbe, evict_file, page_size};
use augur_store::profile_file;

fn augur() -> Command {
    Command::new(env!("CARGO_BIN_EXE_augur"))
}

/// Runs with a watchdog: a hung augur fails the test instead of hanging CI.
fn run(mut cmd: Command) -> Output {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("augur did not finish within 60 s (blocked?)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn scratch_dir() -> tempfile::TempDir {
    // /var/tmp is on the root file system (tmpfs would keep every page resident).
    tempfile::Builder::new().prefix("augur-prefetch-test").tempdir_in("/var/tmp").unwrap()
}

fn write_file(path: &Path, pages: u64) {
    let ps = page_size();
    let mut f = fs::File::create(path).unwrap();
    let mut block = vec![0u8; ps as usize];
    for p in 0..pages {
        block[..8].copy_from_slice(&p.to_le_bytes());
        f.write_all(&block).unwrap();
    }
    f.sync_all().unwrap();
}

fn evict(path: &Path) {
    let f = fs::File::open(path).unwrap();
    evict_file(f.as_fd()).unwrap();
}

fn resident(path: &Path, range: PageRange) -> RangeSet {
    let f = fs::File::open(path).unwrap();
    ResidencyProbe::new(f.as_fd(), page_size(), true).resident(range).unwrap()
}

fn profile_of(files: Vec<(PathBuf, Vec<PageRange>)>) -> LaunchProfile {
    LaunchProfile {
        command: vec!["test".into()],
        recorded_at: 0,
        page_size: page_size(),
        mode: TraceMode::Access,
        window_ms: 1000,
        files: files
            .into_iter()
            .map(|(path, ranges)| FileProfile {
                identity: current_identity(&path).unwrap(),
                ranges: ranges
                    .into_iter()
                    .enumerate()
                    .map(|(i, range)| UsedRange { range, first_use_us: 100 * i as u64 })
                    .collect(),
                path,
            })
            .collect(),
        unresolved: Unresolved::default(),
        lookups: Vec::new(),
    }
}

fn prefetch_json(profile: &Path) -> serde_json::Value {
    let mut cmd = augur();
    cmd.args(["prefetch", "--json"]).arg(profile);
    let out = run(cmd);
    assert!(out.status.success(), "augur prefetch failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn prefetch_loads_exactly_the_profiled_pages() {
    let dir = scratch_dir();
    let data = dir.path().join("data.bin");
    let total = 4096; // 16 MiB of 4 KiB pages
    write_file(&data, total);
    // Scattered ranges, one longer than a 2 MiB chunk, in a first-use order that is not sorted.
    let ranges = vec![
        PageRange::new(3000, 7),
        PageRange::new(10, 5),
        PageRange::new(1200, 900),
        PageRange::new(400, 1),
        PageRange::new(4000, 96),
    ];
    let wanted: RangeSet = ranges.iter().copied().collect();
    let profile = dir.path().join("p.profile.json");
    profile_file::save(&profile_of(vec![(data.clone(), ranges)]), &profile).unwrap();

    evict(&data);
    let before = resident(&data, PageRange::new(0, total)).page_count();
    assert!(before < 64, "eviction left {before} pages resident");

    let report = prefetch_json(&profile);
    let after = resident(&data, PageRange::new(0, total));
    let got = after.ranges().iter().map(|r| wanted.overlap_count(*r)).sum::<u64>();
    assert!(
        got * 100 >= wanted.page_count() * 99,
        "only {got} of {} profiled pages resident; report {report}",
        wanted.page_count()
    );
    // Exactness: pages away from every range (more than 32 pages from one) stay out.
    let mut far = RangeSet::new();
    far.insert(PageRange::new(0, total));
    for r in wanted.ranges() {
        far.remove(PageRange::from_bounds(r.start.saturating_sub(32), r.end() + 32));
    }
    let far_resident: u64 = after.ranges().iter().map(|r| far.overlap_count(*r)).sum();
    assert!(
        far_resident * 20 < far.page_count(),
        "{far_resident} of {} pages outside the profile were loaded too",
        far.page_count()
    );
    assert_eq!(report["pages"]["wanted"], wanted.page_count());
    let loaded = report["pages"]["loaded"].as_u64().unwrap();
    let already = report["pages"]["already_resident"].as_u64().unwrap();
    assert!((loaded + already) * 100 >= wanted.page_count() * 99, "{report}");
    assert_eq!(report["files"]["fetched"], 1);

    // The table for people names the counts.
    let mut cmd = augur();
    cmd.arg("prefetch").arg(&profile);
    let out = run(cmd);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("already resident") && text.contains("loaded"), "{text}");
}

#[test]
fn stale_file_is_reported_and_never_read() {
    let dir = scratch_dir();
    let data = dir.path().join("lib.so");
    write_file(&data, 256);
    let replaced = dir.path().join("replaced.so");
    write_file(&replaced, 256);
    let profile = dir.path().join("p.profile.json");
    profile_file::save(
        &profile_of(vec![(data.clone(), vec![PageRange::new(0, 256)]), (replaced.clone(), vec![PageRange::new(0, 256)])]),
        &profile,
    )
    .unwrap();

    // Rewritten in place after profiling (new mtime and size) ...
    std::thread::sleep(Duration::from_millis(20));
    write_file(&data, 300);
    // ... and replaced by another file under the same name, as a package upgrade does.
    let new = dir.path().join("new.so");
    write_file(&new, 256);
    fs::rename(&new, &replaced).unwrap();
    evict(&data);
    evict(&replaced);

    let report = prefetch_json(&profile);
    assert_eq!(report["files"]["stale"], 2, "{report}");
    assert_eq!(report["files"]["fetched"], 0, "{report}");
    assert_eq!(report["pages"]["skipped"], 512, "{report}");
    assert_eq!(report["pages"]["loaded"], 0, "{report}");
    let kinds: Vec<&str> = report["problems"].as_array().unwrap().iter().map(|p| p["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, vec!["stale", "stale"]);
    // Never read: nothing of either file came into the cache.
    assert!(resident(&data, PageRange::new(0, 300)).page_count() < 8);
    assert!(resident(&replaced, PageRange::new(0, 256)).page_count() < 8);
}

#[test]
fn fifo_and_device_are_refused_without_blocking() {
    let dir = scratch_dir();
    let fifo = dir.path().join("fifo");
    let status = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(status.success());
    let data = dir.path().join("ok.bin");
    write_file(&data, 16);
    let profile = dir.path().join("p.profile.json");
    profile_file::save(
        &profile_of(vec![
            (fifo.clone(), vec![PageRange::new(0, 4)]),
            (PathBuf::from("/dev/zero"), vec![PageRange::new(0, 4)]),
            (data.clone(), vec![PageRange::new(0, 16)]),
        ]),
        &profile,
    )
    .unwrap();
    evict(&data);
    // A FIFO opened for reading would block until a writer appears; run() fails the test then.
    let report = prefetch_json(&profile);
    assert_eq!(report["files"]["not_regular"], 2, "{report}");
    assert_eq!(report["files"]["fetched"], 1, "{report}");
    assert_eq!(resident(&data, PageRange::new(0, 16)).page_count(), 16);
}

#[test]
fn missing_file_in_profile_is_reported() {
    let dir = scratch_dir();
    let data = dir.path().join("gone.bin");
    write_file(&data, 4);
    let profile = dir.path().join("p.profile.json");
    profile_file::save(&profile_of(vec![(data.clone(), vec![PageRange::new(0, 4)])]), &profile).unwrap();
    fs::remove_file(&data).unwrap();
    let report = prefetch_json(&profile);
    assert_eq!(report["files"]["missing"], 1, "{report}");
    assert_eq!(report["pages"]["skipped"], 4, "{report}");
}

#[test]
fn unprivileged_prefetch_loads_readable_files_and_says_it_cannot_verify() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let dir = scratch_dir();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let data = dir.path().join("shared.bin");
    write_file(&data, 512);
    let secret = dir.path().join("secret.bin");
    write_file(&secret, 8);
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).unwrap();
    let profile = dir.path().join("p.profile.json");
    profile_file::save(
        &profile_of(vec![(data.clone(), vec![PageRange::new(100, 300)]), (secret.clone(), vec![PageRange::new(0, 8)])]),
        &profile,
    )
    .unwrap();
    fs::set_permissions(&profile, fs::Permissions::from_mode(0o644)).unwrap();
    evict(&data);

    let mut cmd = augur();
    cmd.args(["prefetch", "--json"]).arg(&profile).uid(65534).gid(65534);
    let out = run(cmd);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The kernel tells only owners and root about residency: nothing is claimed resident.
    assert_eq!(report["pages"]["already_resident"], 0, "{report}");
    assert_eq!(report["pages"]["unverified"], 300, "{report}");
    assert_eq!(report["files"]["unreadable"], 1, "{report}");
    assert_eq!(report["files"]["unverified"], 1, "{report}");
    // But the pages were really loaded.
    assert!(resident(&data, PageRange::new(100, 300)).page_count() >= 297);
}

/// The foundation's acceptance: trace a real command, drop every cache, prefetch, and find at
/// least 99 % of the profile's pages resident.
#[test]
fn traced_command_replays_to_99_percent_after_dropping_caches() {
    let dir = scratch_dir();
    let data = dir.path().join("input.bin");
    write_file(&data, 2048);
    let profile = dir.path().join("sh.profile.json");
    let script = format!("head -c 3000000 {0} > /dev/null; tail -c 200000 {0} > /dev/null", data.display());
    let mut cmd = augur();
    cmd.args(["trace", "--output"]).arg(&profile).args(["--", "sh", "-c", &script]);
    let out = run(cmd);
    assert!(out.status.success(), "augur trace failed: {}", String::from_utf8_lossy(&out.stderr));
    let traced = profile_file::load(&profile).unwrap();
    assert!(traced.files.iter().any(|f| f.path == data), "the data file is in the profile");
    assert!(traced.files.len() >= 3, "sh, head, tail and their libraries are in the profile");

    std::fs::write("/proc/sys/vm/drop_caches", "3\n").unwrap();
    let report = prefetch_json(&profile);

    let mut wanted = 0u64;
    let mut found = 0u64;
    for f in &traced.files {
        let set = f.page_set();
        wanted += set.page_count();
        let Ok(file) = fs::File::open(&f.path) else { continue };
        let probe = ResidencyProbe::new(file.as_fd(), page_size(), true);
        for r in set.ranges() {
            found += probe.count(*r).unwrap();
        }
    }
    assert!(found * 100 >= wanted * 99, "{found} of {wanted} profiled pages resident after prefetch; report {report}");
    assert_eq!(report["files"]["stale"], 0, "{report}");
}

fn exit_code_of(args: &[&str], profile: Option<&Path>) -> (i32, String) {
    let mut cmd = augur();
    cmd.args(args);
    if let Some(p) = profile {
        cmd.arg(p);
    }
    let out = run(cmd);
    (out.status.code().unwrap(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn bad_profiles_get_one_line_and_distinct_exit_codes() {
    let dir = scratch_dir();
    let (code, err) = exit_code_of(&["prefetch"], Some(&dir.path().join("none.json")));
    assert_eq!(code, 3, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");

    let corrupt = dir.path().join("corrupt.json");
    fs::write(&corrupt, b"{\"format\": \"augur-launch-profile\", \"version\": 1, \"files\": [").unwrap();
    let (code, err) = exit_code_of(&["prefetch"], Some(&corrupt));
    assert_eq!(code, 4, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");

    let future = dir.path().join("future.json");
    let text = String::from_utf8(profile_file::to_bytes(&profile_of(vec![]))).unwrap();
    fs::write(&future, text.replace(&format!("\"version\":{}", profile_file::FORMAT_VERSION), "\"version\":999")).unwrap();
    let (code, err) = exit_code_of(&["prefetch"], Some(&future));
    assert_eq!(code, 5, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");

    let (code, _) = exit_code_of(&["prefetch"], None);
    assert_eq!(code, 2, "no profile is a usage error");
}
