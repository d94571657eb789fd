//! Fuzz target: any bytes fed to the strace log parser (path lookups of `augur trace`) must
//! parse or be skipped, never panic, and every lookup it keeps must be an absolute path.
#![no_main]

use augur_core::model::profile::LookupList;
use augur_os::sense::lookups::parse_strace_log;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut list = LookupList::new();
    parse_strace_log(&text, &mut list);
    for l in list.finish() {
        assert!(l.path.is_absolute());
    }
});
