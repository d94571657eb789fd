//! Fuzz target: any bytes read as the early load list (`boot-early.list` beside the state, read by
//! `augur-init` before the service manager at every boot: a corrupt or hand-edited file is outside
//! input) must parse or be refused with an error naming the line, never panic; whatever parses
//! survives a round trip through the writer unchanged.
#![no_main]

use augur_core::model::early_load::EarlyLoadList;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(list) = EarlyLoadList::parse(text) {
        let again = EarlyLoadList::parse(&list.render()).expect("a written list parses");
        assert_eq!(again, list);
        let _ = list.page_count();
    }
});
