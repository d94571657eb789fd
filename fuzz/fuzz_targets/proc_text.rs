//! Fuzz target: any text read as `/proc/PID/stat`, `/proc/PID/status`, `/proc/meminfo`,
//! `/proc/vmstat`, `/proc/PID/cgroup` or a cgroup's memory limit (a process names itself, so its
//! `comm` may hold anything) must parse or be rejected, never panic.
#![no_main]

use augur_core::proc_text;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = proc_text::stat_state(&text);
    let _ = proc_text::stat_has_exited(&text);
    let _ = proc_text::stat_ppid(&text);
    let _ = proc_text::stat_cpu_ticks(&text);
    let _ = proc_text::field_value(&text, "VmRSS");
    let _ = proc_text::kb_field_bytes(&text, "MemAvailable");
    let _ = proc_text::vmstat_value(&text, "pgsteal_file");
    let _ = proc_text::memory_cgroup_paths(&text);
    let _ = proc_text::memory_limit_value(&text);
});
