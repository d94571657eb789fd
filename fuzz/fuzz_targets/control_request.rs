//! Fuzz target: any line received on the control socket must parse as a request or be refused,
//! never panic; whatever parses survives a round trip through the encoder unchanged.
#![no_main]

use augur::daemon::control::Request;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let line = String::from_utf8_lossy(data);
    if let Ok(request) = serde_json::from_str::<Request>(&line) {
        let text = serde_json::to_string(&request).expect("a request encodes");
        let again: Request = serde_json::from_str(&text).expect("an encoded request parses");
        assert_eq!(again, request);
    }
});
