//! Fuzz target: any text read as `/proc/PID/mountinfo` (mount points are named by whoever mounts,
//! users' FUSE mounts included) must parse or be skipped, never panic; every mount point kept is
//! absolute.
#![no_main]

use augur_os::sense::fanotify::block_backed_filesystems;
use augur_os::untrusted_path::{is_remote_fstype, parse_mountinfo};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for m in parse_mountinfo(&text) {
        assert!(m.point.is_absolute());
        let _ = is_remote_fstype(&m.fstype);
    }
    let _ = block_backed_filesystems(&text);
});
