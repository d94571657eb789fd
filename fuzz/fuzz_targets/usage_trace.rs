//! Fuzz target for the usage-trace parser: any input either parses or yields a typed error, and
//! whatever parses survives a round trip through the writer unchanged.
#![no_main]

use augur_core::model::usage_trace::parse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(trace) = parse(data) {
        let text = trace.to_text();
        let again = parse(text.as_bytes()).expect("a written trace parses");
        assert_eq!(again, trace);
    }
});
