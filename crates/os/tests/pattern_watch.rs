//! The pattern watch's integration test: loads the real `pattern.bpf.c` (root, BTF, the 6.11+
//! filemap tracepoints), reads three files forward, backward and strided from this process, and
//! checks that the kernel established each pattern, once, and sent progress for the backward
//! reader; and that with the daemon's setting a forward reader sends nothing. Skips (passes with a note) when not root.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use augur_core::model::access_pattern::{Pattern, PatternRule};
use augur_os::sense::bpf::{PatternRecord, PatternWatch, PatternWatchOptions};

const PAGE: u64 = 4096;
const PAGES: u64 = 512;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A file on /var/tmp (not tmpfs: tmpfs has no filemap events), dropped from the page cache.
fn cold_file(dir: &Path, name: &str) -> (PathBuf, u64) {
    let path = dir.join(name);
    let mut f = File::create(&path).unwrap();
    let block = vec![7u8; PAGE as usize];
    for _ in 0..PAGES {
        f.write_all(&block).unwrap();
    }
    f.sync_all().unwrap();
    // SAFETY: fadvise on an open descriptor has no memory-safety preconditions.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    let ino = f.metadata().unwrap().ino();
    (path, ino)
}

fn read_pages(path: &Path, pages: impl Iterator<Item = u64>) {
    let f = File::open(path).unwrap();
    // SAFETY: as above.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    let mut buf = vec![0u8; PAGE as usize];
    for p in pages {
        f.read_exact_at(&mut buf, p * PAGE).unwrap();
    }
}

/// The watch's options: progress every 64 pages for backward and strided readers; every change
/// of pattern reported when `all_changes`, else those to or from backward and strided only.
fn options(all_changes: bool) -> PatternWatchOptions {
    PatternWatchOptions {
        rule: PatternRule::default(),
        progress_pages: 64,
        progress_backward: true,
        progress_strided: true,
        forward_progress_pages: 0,
        progress_forward: false,
        progress_loop: false,
        changes_random: false,
        own_tgid: 0,
        all_changes,
    }
}

#[test]
fn forward_backward_and_strided_readers_are_classified_in_the_kernel() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let dir = PathBuf::from(format!("/var/tmp/augur-pattern-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (fwd, fwd_ino) = cold_file(&dir, "forward");
    let (bwd, bwd_ino) = cold_file(&dir, "backward");
    let (strided, strided_ino) = cold_file(&dir, "strided");

    let options = options(true);
    let mut watch = PatternWatch::open(options).expect("the pattern watch loads");
    // The daemon's setting: changes to or from backward and strided only.
    let mut quiet = PatternWatch::open(PatternWatchOptions { all_changes: false, ..options }).expect("a second watch loads");
    read_pages(&fwd, 0..PAGES);
    read_pages(&bwd, (0..PAGES).rev());
    read_pages(&strided, (0..PAGES / 16).map(|i| i * 16));
    let mut records: Vec<PatternRecord> = Vec::new();
    watch.wait(None, Some(Duration::from_millis(200)));
    while watch.poll(4096, |r| records.push(r)).unwrap() > 0 {}
    assert_eq!(watch.lost().unwrap(), 0);
    watch.close();
    let mut quiet_records: Vec<PatternRecord> = Vec::new();
    while quiet.poll(4096, |r| quiet_records.push(r)).unwrap() > 0 {}
    quiet.close();
    assert!(quiet_records.iter().all(|r| r.ino != fwd_ino), "a forward reader woke the daemon");
    assert!(quiet_records.iter().any(|r| r.ino == bwd_ino && !r.progress));
    std::fs::remove_dir_all(&dir).unwrap();

    let of = |ino: u64| records.iter().filter(|r| r.ino == ino).copied().collect::<Vec<_>>();
    let changes = |ino: u64| of(ino).iter().filter(|r| !r.progress).map(|r| r.pattern).collect::<Vec<_>>();
    assert_eq!(changes(fwd_ino), vec![Some(Pattern::Forward)]);
    assert_eq!(changes(bwd_ino), vec![Some(Pattern::Backward)]);
    assert_eq!(changes(strided_ino), vec![Some(Pattern::Strided { stride: 16 })]);
    assert!(of(fwd_ino).iter().all(|r| !r.progress), "no progress for forward readers");
    let progress = of(bwd_ino).iter().filter(|r| r.progress).count() as u64;
    assert!((PAGES / 64 - 2..=PAGES / 64).contains(&progress), "{progress} progress records");
    assert!(of(bwd_ino).iter().all(|r| r.tgid == std::process::id()));
}

#[test]
fn a_file_read_whole_in_one_access_leaves_no_stream_but_one_read_in_parts_does() {
    if !is_root() {
        eprintln!("skipped: needs root");
        return;
    }
    let dir = PathBuf::from(format!("/var/tmp/augur-pattern-whole-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let small: Vec<PathBuf> = (0..16)
        .map(|i| {
            let path = dir.join(format!("small{i}"));
            std::fs::write(&path, vec![3u8; 3 * PAGE as usize]).unwrap();
            path
        })
        .collect();
    let (parts, _) = cold_file(&dir, "parts");
    let options = options(false);
    let watch = PatternWatch::open(options).expect("the pattern watch loads");
    // SAFETY: gettid has no preconditions and cannot fail.
    let tid = unsafe { libc::gettid() } as u32;
    let before = watch.streams_of(tid).unwrap();
    let mut buf = vec![0u8; 3 * PAGE as usize];
    for path in &small {
        File::open(path).unwrap().read_exact_at(&mut buf, 0).unwrap();
    }
    assert_eq!(watch.streams_of(tid).unwrap(), before, "a whole-file read made a stream");
    read_pages(&parts, 0..2);
    assert_eq!(watch.streams_of(tid).unwrap(), before + 1, "a file read in parts has its stream");
    watch.close();
    std::fs::remove_dir_all(&dir).unwrap();
}
