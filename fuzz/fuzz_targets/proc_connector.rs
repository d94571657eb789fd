//! Fuzz target: any bytes received on the process-events netlink socket must parse or be
//! skipped, never panic.
#![no_main]

use augur_os::sense::proc_connector::parse_datagram;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let d = parse_datagram(data);
    // At most one event per 16-byte netlink header.
    assert!(d.events.len() <= data.len() / 16);
});
