//! Fuzz target: any bytes fed to the trace_pipe line parser must parse or be rejected, never
//! panic, and every page event it yields must be a non-empty range that does not overflow.
#![no_main]

use augur_os::sense::event::{EventKind, LineStats, TraceLine, parse_line};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut stats = LineStats::default();
    for line in text.split('\n') {
        if let TraceLine::Event(e) = stats.count(parse_line(line)) {
            if let EventKind::Page(p) = e.kind {
                assert!(p.pages.len > 0);
                assert!(p.pages.start.checked_add(p.pages.len).is_some());
            }
        }
    }
});
