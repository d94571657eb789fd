//! Fuzz target: any bytes taken from the eBPF ring buffer must decode or be rejected with a typed
//! error, never panic (records carry file names and paths other processes chose).
#![no_main]

use augur_os::sense::bpf::record::decode;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = decode(data);
});
