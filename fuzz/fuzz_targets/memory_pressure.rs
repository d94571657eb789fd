//! Fuzz target: any text read as `/proc/pressure/memory` or `/proc/meminfo` must parse or be
//! rejected, never panic, and what parses is a finite figure.
#![no_main]

use augur_core::plan::{MemoryPressure, MemorySnapshot};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Some(p) = MemoryPressure::from_psi(&text) {
        assert!(!p.some_avg10.is_nan());
    }
    let _ = MemorySnapshot::from_meminfo(&text);
});
