//! Fuzz target: any bytes read as a block device's `stat` or a `/proc/*/io` file must parse or be
//! rejected, never panic; the arithmetic on what they yield never overflows.
#![no_main]

use augur_os::fetch::foreground::{others_read, parse_disk_stat_sectors_read, parse_io_read_bytes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let sectors = parse_disk_stat_sectors_read(&text).unwrap_or(0);
    let own = parse_io_read_bytes(&text).unwrap_or(0);
    let _ = others_read(sectors.saturating_mul(512), own, own, sectors, u64::MAX);
    let _ = others_read(u64::MAX, 0, own, sectors, own);
});
