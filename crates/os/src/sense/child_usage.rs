//! What the kernel accounted to a finished child process: CPU time, page faults, blocks read
//! (`wait4(2)`'s `struct rusage`), for measuring start-up as Kroeger and Long did
//! (I/O wait = elapsed − (user + sys)).
//!
//! A thin OS wrapper: it reaps one child and reports; it does not time or judge.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};
use std::time::Duration;

/// Resources a child and the descendants it waited for used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChildUsage {
    /// CPU time in user mode.
    pub user: Duration,
    /// CPU time in the kernel.
    pub system: Duration,
    /// Page faults that needed I/O.
    pub major_faults: u64,
    /// Page faults served from memory.
    pub minor_faults: u64,
    /// 512-byte blocks the file systems read for it.
    pub blocks_in: u64,
    /// Peak resident set in KiB.
    pub max_rss_kib: u64,
}

fn timeval(tv: libc::timeval) -> Duration {
    Duration::from_secs(tv.tv_sec.max(0) as u64) + Duration::from_micros(tv.tv_usec.max(0) as u64)
}

/// Waits for `child` to exit and returns its status with its resource usage. Takes the child by
/// value: once reaped here it must not be waited for again.
pub fn wait_with_usage(child: Child) -> io::Result<(ExitStatus, ChildUsage)> {
    let pid = child.id() as libc::pid_t;
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: an all-zero rusage is a valid value of this plain C struct.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: status and usage are valid, exclusively borrowed out-parameters for the call;
        // pid is our own unreaped child, so no other process can be reaped by mistake.
        let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if rc == pid {
            let u = ChildUsage {
                user: timeval(usage.ru_utime),
                system: timeval(usage.ru_stime),
                major_faults: usage.ru_majflt.max(0) as u64,
                minor_faults: usage.ru_minflt.max(0) as u64,
                blocks_in: usage.ru_inblock.max(0) as u64,
                max_rss_kib: usage.ru_maxrss.max(0) as u64,
            };
            return Ok((ExitStatus::from_raw(status), u));
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn reports_status_and_cpu_time() {
        let child = Command::new("sh").args(["-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; exit 3"]).spawn().unwrap();
        let (status, usage) = wait_with_usage(child).unwrap();
        assert_eq!(status.code(), Some(3));
        assert!(usage.user + usage.system > Duration::ZERO);
        assert!(usage.max_rss_kib > 0);
    }
}
