//! Fuzz target: any text read as the configuration file (`/etc/augur/config.toml`) must parse and
//! validate or be rejected with an error naming the line, never panic.
#![no_main]

use std::path::Path;

use augur_engine::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(config) = Config::parse(text, Path::new("fuzz.toml")) {
            // What validated is usable: the derived settings never panic.
            let _ = config.learn_settings();
            let _ = config.state_limits();
            let _ = config.window_max();
            let _ = config.quiet();
        }
    }
});
