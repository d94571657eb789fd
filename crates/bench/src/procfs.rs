//! The /proc numbers the benchmark suite reports: memory (`/proc/meminfo`), a process's CPU time,
//! resident memory, context switches and disk reads (`/proc/PID/{stat,status,io}` summed over
//! its threads).
//!
//! Read-only: it never changes the system and holds no state.

use std::fs;
use std::path::Path;

use crate::error::{BenchError, IoContext, Result};
use augur_os::fetch::foreground::parse_io_read_bytes;

/// Clock ticks per second for /proc times. Linux fixes USER_HZ at 100 on every architecture
/// augur supports.
pub const TICKS_PER_SEC: f64 = 100.0;

/// One field of /proc/meminfo, in bytes.
pub fn meminfo(field: &str) -> Result<u64> {
    let text = fs::read_to_string("/proc/meminfo").context(|| "reading /proc/meminfo".into())?;
    parse_meminfo(&text, field).ok_or_else(|| BenchError::kernel(format!("/proc/meminfo field {field}"), "absent"))
}

/// Finds `field` (e.g. `MemAvailable`) in meminfo text; values are in kB.
pub fn parse_meminfo(text: &str, field: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (name, rest) = line.split_once(':')?;
        if name.trim() != field {
            return None;
        }
        let kb: u64 = rest.split_whitespace().next()?.parse().ok()?;
        Some(kb * 1024)
    })
}

/// CPU time, memory and I/O of one process at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProcessSample {
    /// user + system CPU time, seconds.
    pub cpu_secs: f64,
    /// Resident set size, bytes.
    pub rss_bytes: u64,
    /// Voluntary + involuntary context switches of all its threads.
    pub context_switches: u64,
    /// Bytes this process caused to be read from storage (`read_bytes` of /proc/PID/io).
    pub read_bytes: u64,
}

/// Samples process `pid`. Fails if it is gone.
pub fn sample(pid: u32) -> Result<ProcessSample> {
    let base = format!("/proc/{pid}");
    let stat = fs::read_to_string(format!("{base}/stat")).context(|| format!("reading {base}/stat"))?;
    let (utime, stime) =
        parse_stat_times(&stat).ok_or_else(|| BenchError::kernel("/proc/PID/stat", format!("unparsable: {stat}")))?;
    let status = fs::read_to_string(format!("{base}/status")).context(|| format!("reading {base}/status"))?;
    let rss_bytes = parse_status_kb(&status, "VmRSS").unwrap_or(0);
    let mut context_switches = 0;
    if let Ok(tasks) = fs::read_dir(format!("{base}/task")) {
        for task in tasks.flatten() {
            if let Ok(s) = fs::read_to_string(task.path().join("status")) {
                context_switches += parse_status_count(&s, "voluntary_ctxt_switches").unwrap_or(0)
                    + parse_status_count(&s, "nonvoluntary_ctxt_switches").unwrap_or(0);
            }
        }
    }
    let read_bytes = fs::read_to_string(format!("{base}/io")).ok().and_then(|io| parse_io_read_bytes(&io)).unwrap_or(0);
    Ok(ProcessSample { cpu_secs: (utime + stime) as f64 / TICKS_PER_SEC, rss_bytes, context_switches, read_bytes })
}

fn stat_fields_after_comm(stat: &str) -> Option<Vec<&str>> {
    let close = stat.rfind(')')?;
    Some(stat.get(close + 1..)?.split_whitespace().collect())
}

/// utime and stime (ticks) from a /proc/PID/stat line; the comm may contain spaces and parens.
pub fn parse_stat_times(stat: &str) -> Option<(u64, u64)> {
    let fields = stat_fields_after_comm(stat)?;
    // After the comm: state(3) ppid(4) ... utime(14) stime(15) -> indices 11 and 12.
    Some((fields.get(11)?.parse().ok()?, fields.get(12)?.parse().ok()?))
}

/// The parent pid from a /proc/PID/stat line.
pub fn parse_stat_ppid(stat: &str) -> Option<u32> {
    stat_fields_after_comm(stat)?.get(1)?.parse().ok()
}

fn parse_status_kb(status: &str, field: &str) -> Option<u64> {
    parse_status_count(status, field).map(|kb| kb * 1024)
}

fn parse_status_count(status: &str, field: &str) -> Option<u64> {
    status.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        if k != field {
            return None;
        }
        v.split_whitespace().next()?.parse().ok()
    })
}

/// The command line of process `pid` as its arguments (empty if gone or a kernel thread).
pub fn cmdline(pid: u32) -> Vec<String> {
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| b.split(|c| *c == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned()).collect())
        .unwrap_or_default()
}

/// Every process id currently in /proc.
pub fn all_pids() -> Vec<u32> {
    fs::read_dir("/proc").map(|d| d.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect()).unwrap_or_default()
}

/// Whether process `pid` exists (and is not a zombie).
pub fn alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat_fields_after_comm(&stat).and_then(|f| f.first().copied()) != Some("Z"),
        Err(_) => false,
    }
}

/// The descendants of `pid` (children, grandchildren, ...), from each process's parent pid.
pub fn descendants(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = all_pids()
        .into_iter()
        .filter_map(|p| {
            let stat = fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            Some((p, parse_stat_ppid(&stat)?))
        })
        .collect();
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(parent) = frontier.pop() {
        for &(p, pp) in &parents {
            if pp == parent && !out.contains(&p) {
                out.push(p);
                frontier.push(p);
            }
        }
    }
    out
}

/// Whether `path` exists (for small checks in messages).
pub fn exists(path: &Path) -> bool {
    path.exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_field_in_bytes() {
        let text = "MemTotal:       24731712 kB\nMemAvailable:   23784280 kB\n";
        assert_eq!(parse_meminfo(text, "MemAvailable"), Some(23784280 * 1024));
        assert_eq!(parse_meminfo(text, "Mem"), None);
    }

    #[test]
    fn stat_times_with_a_hostile_comm() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 30 7 8 20 0 1 0 5 1000 50";
        assert_eq!(parse_stat_times(stat), Some((250, 30)));
        assert_eq!(parse_stat_ppid(stat), Some(1));
    }

    #[test]
    fn io_and_status_fields() {
        assert_eq!(parse_io_read_bytes("rchar: 5\nread_bytes: 4096\n"), Some(4096));
        assert_eq!(parse_status_kb("VmRSS:\t  1200 kB\n", "VmRSS"), Some(1200 * 1024));
    }

    #[test]
    fn samples_this_process() {
        let s = sample(std::process::id()).unwrap();
        assert!(s.rss_bytes > 0);
        assert!(s.context_switches > 0);
    }
}
