//! Fuzz target: any text read as `/proc/PID/maps` or bytes read as `/proc/PID/environ` (both
//! written by the process, which names its own files and variables) must parse or be skipped,
//! never panic; every file kept has an absolute path and a non-zero inode.
#![no_main]

use augur_os::sense::procfs::{env_var_in, parse_maps_line};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for line in String::from_utf8_lossy(data).lines() {
        if let Some(f) = parse_maps_line(line) {
            assert!(f.path.is_absolute());
            assert!(f.key.ino != 0);
        }
    }
    let _ = env_var_in(data, "PATH");
});
