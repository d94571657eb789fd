//! Fuzz target: any bytes read as the boot plan file (`boot-plan.json` beside the state, read by
//! `augur boot` and `augur-init` at every boot: a corrupt or hand-edited file is outside input)
//! must parse or be rejected with a typed error, never panic; whatever parses survives a round
//! trip through the writer unchanged.
#![no_main]

use std::path::Path;

use augur_store::boot_plan_file::{from_bytes, to_bytes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(plan) = from_bytes(data, Path::new("boot-plan.json")) {
        let again = from_bytes(&to_bytes(&plan), Path::new("again")).expect("a written plan parses");
        assert_eq!(again, plan);
        let _ = plan.page_count();
    }
});
