//! The errors of the eBPF observation layer, shaped for augur's degrade chain
//! (eBPF → tracefs → file-only): [`BpfError::is_unavailable`] tells the caller to fall back.
//!
//! Owns error classification only; it must not log, retry or decide the fallback itself. A
//! [`BpfError`] converts into the OS layer's [`OsError`] (an unavailable observer is a missing
//! kernel feature).

use crate::error::OsError;

/// Why the eBPF observer could not start or an operation on it failed.
#[derive(Debug, thiserror::Error)]
pub enum BpfError {
    /// The kernel exposes no BTF (`CONFIG_DEBUG_INFO_BTF`), which CO-RE and BTF tracepoints need.
    #[error("eBPF unavailable: the kernel has no BTF at /sys/kernel/btf/vmlinux (CONFIG_DEBUG_INFO_BTF); fall back to tracefs")]
    NoBtf,
    /// Not allowed to load BPF programs (not root, no CAP_BPF + CAP_PERFMON, or lockdown).
    #[error("eBPF unavailable: not permitted to load BPF programs (needs root or CAP_BPF+CAP_PERFMON+CAP_SYS_RESOURCE): {0}")]
    PermissionDenied(String),
    /// tracefs, which the classic tracepoints are attached through, is missing.
    #[error("eBPF unavailable: tracefs is not mounted at /sys/kernel/tracing and could not be mounted: {0}")]
    NoTracefs(String),
    /// The kernel rejected the programs (verifier, missing helper or map type, CO-RE relocation).
    #[error("eBPF unavailable: the kernel refused augur's BPF programs: {0}")]
    Load(String),
    /// A tracepoint every mode needs (exec, fork, exit, page-cache insertion) could not be
    /// attached.
    #[error("eBPF unavailable: attaching {program} failed: {message}")]
    Attach { program: String, message: String },
    /// A map read or write failed after a successful start.
    #[error("BPF map {map}: {message}")]
    Map { map: &'static str, message: String },
    /// The ring buffer could not be set up or polled.
    #[error("BPF ring buffer: {0}")]
    RingBuffer(String),
    /// A device number that the kernel's `dev_t` encoding cannot hold.
    #[error("device {0:#x} cannot be expressed as a kernel dev_t")]
    BadDevice(u64),
}

impl BpfError {
    /// A few words saying why eBPF observation is not in use, for the mode line of a report
    /// (`no BTF`, `bpf(2) refused: EPERM`, ...). The full text (with libbpf's last messages) is
    /// the `Display` form.
    pub fn reason(&self) -> String {
        match self {
            BpfError::NoBtf => "no BTF".into(),
            BpfError::PermissionDenied(_) => "bpf(2) refused: EPERM".into(),
            BpfError::NoTracefs(_) => "no tracefs".into(),
            BpfError::Load(detail) => format!("the kernel refused the programs: {}", first_line(detail)),
            BpfError::Attach { program, .. } => format!("attaching {program} failed"),
            BpfError::Map { map, .. } => format!("BPF map {map} failed"),
            BpfError::RingBuffer(_) => "the BPF ring buffer failed".into(),
            BpfError::BadDevice(_) => "bad device number".into(),
        }
    }

    /// True when eBPF observation cannot work on this machine or with these privileges, so the
    /// caller should fall back to tracefs; false for errors of a running observer.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            BpfError::NoBtf
                | BpfError::PermissionDenied(_)
                | BpfError::NoTracefs(_)
                | BpfError::Load(_)
                | BpfError::Attach { .. }
        )
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

impl From<BpfError> for OsError {
    fn from(e: BpfError) -> OsError {
        if e.is_unavailable() {
            OsError::KernelFeature { feature: "eBPF observation".into(), detail: e.to_string() }
        } else {
            OsError::io("eBPF observer", std::io::Error::other(e.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unavailable_errors_are_missing_kernel_features_with_short_reasons() {
        let e = BpfError::PermissionDenied("Operation not permitted (os error 1)\nlibbpf: ...".into());
        assert!(e.is_unavailable());
        assert_eq!(e.reason(), "bpf(2) refused: EPERM");
        assert_eq!(BpfError::NoBtf.reason(), "no BTF");
        assert!(matches!(OsError::from(e), OsError::KernelFeature { .. }));
        let running = BpfError::Map { map: "lost", message: "x".into() };
        assert!(!running.is_unavailable());
        assert!(matches!(OsError::from(running), OsError::Io(_)));
    }
}
