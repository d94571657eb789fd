//! Fuzz target: any bytes read as a launch profile file (`augur prefetch` reads files a user
//! hands it) must parse or be rejected with a typed error, never panic; whatever parses survives
//! a round trip through the writer unchanged.
#![no_main]

use std::path::Path;

use augur_store::profile_file::{from_bytes, to_bytes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(profile) = from_bytes(data, Path::new("fuzz.profile.json")) {
        let again = from_bytes(&to_bytes(&profile), Path::new("again")).expect("a written profile parses");
        assert_eq!(again, profile);
    }
});
