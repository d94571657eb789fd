//! Decoding of the binary ring-buffer records `observe.bpf.c` sends (layouts in `records.h`)
//! into typed [`ObservedEvent`]s, and the page-chunk arithmetic of the kernel's dedup bitmaps.
//!
//! Pure: bytes in, values out. It never touches the kernel and never panics, whatever the input
//! (a short or unknown record is a [`DecodeError`]). It must stay in step with `records.h`.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use augur_core::model::profile::InodeKey;
use augur_core::model::range::PageRange;

use crate::sense::event::{PageEventKind, st_dev_from_kernel};

/// Record layout version shared with `records.h` (`RECORD_ABI`).
pub const RECORD_ABI: u32 = 3;
/// Pages per dedup chunk (`1 << CHUNK_SHIFT`): one 64-bit bitmap.
pub const CHUNK_SHIFT: u32 = 6;
/// Longest path a record carries, NUL included (`MAX_PATH`).
pub const MAX_PATH: usize = 4096;

const HDR: usize = 32;
const REC_EXEC: u32 = 1;
const REC_FORK: u32 = 2;
const REC_EXIT: u32 = 3;
const REC_PAGES: u32 = 4;
const REC_LOOKUP: u32 = 5;
const REC_INODE_LOAD: u32 = 6;
const REC_LAUNCH_END: u32 = 7;
const EXEC_NEW_LAUNCH: u32 = 1;
/// Bytes of an exec's interpreter path a record carries, NUL included (`EXEC_INTERP_MAX`).
const EXEC_INTERP_MAX: usize = 256;
/// Bytes of an exec's arguments a record carries (`EXEC_ARGS_MAX`).
pub const EXEC_ARGS_MAX: usize = 2048;
/// Byte offset of the credentials in an exec record.
const EXEC_CRED_AT: usize = HDR + 8 + 4 * 4 + 16;
/// Supplementary groups an exec record carries at most (`EXEC_GROUPS_MAX`).
const EXEC_GROUPS_MAX: usize = 32;
/// Byte offset of the group count in an exec record.
const EXEC_NGROUPS_AT: usize = EXEC_CRED_AT + 6 * 4;
/// Byte offset of the interpreter path in an exec record.
const EXEC_INTERP_AT: usize = EXEC_NGROUPS_AT + 8 + EXEC_GROUPS_MAX * 4;
/// Byte offset of the arguments in an exec record.
const EXEC_ARGS_AT: usize = EXEC_INTERP_AT + EXEC_INTERP_MAX;
/// Byte offset of the file name in an exec record (`EXEC_HDR_SIZE`).
const EXEC_NAME_AT: usize = EXEC_ARGS_AT + EXEC_ARGS_MAX + 8;
/// Byte offset of the path in a lookup record (`LOOKUP_HDR_SIZE`).
const LOOKUP_PATH_AT: usize = HDR + 8 + 4 * 4 + 8 + 8;

/// A followed launch, as numbered by the kernel program (from 1, per loaded observer).
pub type LaunchId = u64;

/// Why a record could not be decoded (a version mismatch or a bug: never expected).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Fewer bytes than the record's kind needs.
    #[error("record of kind {kind} is {len} bytes, shorter than its layout")]
    Short { kind: u32, len: usize },
    /// A kind this decoder does not know.
    #[error("unknown record kind {0}")]
    UnknownKind(u32),
}

/// Which task an event happened in, when, and in which launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskContext {
    /// Thread id.
    pub tid: u32,
    /// Process id (thread-group id).
    pub tgid: u32,
    /// `CLOCK_MONOTONIC` nanoseconds.
    pub ts_ns: u64,
    /// The launch the task follows.
    pub launch: LaunchId,
}

/// The tracepoint kind of a page record (`records.h` `PAGE_SRC_*`), in the type tracefs events use.
fn page_kind_from_raw(v: u32) -> PageEventKind {
    match v {
        0 => PageEventKind::Insertion,
        1 => PageEventKind::GetPages,
        2 => PageEventKind::MapPages,
        _ => PageEventKind::Fault,
    }
}

/// The syscall of a path lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LookupSyscall {
    Open,
    Openat,
    Openat2,
    Creat,
    Stat,
    Lstat,
    Newfstatat,
    Statx,
    Access,
    Faccessat,
    Faccessat2,
    Readlink,
    Readlinkat,
    Execve,
    Execveat,
    Chdir,
    Statfs,
    /// `getdents64`: a directory listing of `dirfd` (the path is empty).
    Getdents64,
    /// A number this decoder does not know (newer kernel program).
    Other(u32),
}

impl LookupSyscall {
    fn from_raw(v: u32) -> LookupSyscall {
        use LookupSyscall::*;
        match v {
            1 => Open,
            2 => Openat,
            3 => Openat2,
            4 => Creat,
            5 => Stat,
            6 => Lstat,
            7 => Newfstatat,
            8 => Statx,
            9 => Access,
            10 => Faccessat,
            11 => Faccessat2,
            12 => Readlink,
            13 => Readlinkat,
            14 => Execve,
            15 => Execveat,
            16 => Chdir,
            17 => Statfs,
            18 => Getdents64,
            n => Other(n),
        }
    }

    /// Whether the syscall takes a directory descriptor the path is relative to.
    pub fn is_at(self) -> bool {
        use LookupSyscall::*;
        matches!(self, Openat | Openat2 | Newfstatat | Statx | Faccessat | Faccessat2 | Readlinkat | Execveat | Getdents64)
    }

    /// The syscall's name.
    pub fn name(self) -> &'static str {
        use LookupSyscall::*;
        match self {
            Open => "open",
            Openat => "openat",
            Openat2 => "openat2",
            Creat => "creat",
            Stat => "stat",
            Lstat => "lstat",
            Newfstatat => "newfstatat",
            Statx => "statx",
            Access => "access",
            Faccessat => "faccessat",
            Faccessat2 => "faccessat2",
            Readlink => "readlink",
            Readlinkat => "readlinkat",
            Execve => "execve",
            Execveat => "execveat",
            Chdir => "chdir",
            Statfs => "statfs",
            Getdents64 => "getdents64",
            Other(_) => "?",
        }
    }
}

/// The ids a process runs with after an exec (a set-user-ID program changed the effective one).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExecCredentials {
    /// The real user id.
    pub uid: u32,
    /// The effective user id.
    pub euid: u32,
    /// The real group id.
    pub gid: u32,
    /// The supplementary groups; `None` when there were more than the record holds or they
    /// could not be read.
    pub groups: Option<Vec<u32>>,
}

/// One record from the kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ObservedEvent {
    /// A followed task executed a program (`sched_process_exec`); `task.tid == task.tgid`.
    Exec {
        task: TaskContext,
        /// The thread id before exec (differs when a non-leader thread exec'd).
        old_tid: u32,
        /// The parent process (`real_parent`).
        parent_tgid: u32,
        /// The executable's inode.
        exe: InodeKey,
        /// This exec started `task.launch` (else the task already followed it).
        new_launch: bool,
        /// `comm` after exec.
        comm: String,
        /// The file name as passed to exec (`bprm->filename`, may be relative or `/dev/fd/N`).
        filename: PathBuf,
        /// The program the kernel ran (`bprm->interp`): `filename` for a binary, the `#!` line's
        /// interpreter for a script (at most 255 bytes; empty if longer or unreadable).
        interp: PathBuf,
        /// The credentials after the exec.
        creds: ExecCredentials,
        /// The new program's arguments as it sees them (NUL-separated, as `/proc/PID/cmdline`),
        /// at most [`EXEC_ARGS_MAX`] bytes; empty when they could not be read.
        args: Vec<u8>,
        /// The arguments were longer than `args`.
        args_cut: bool,
    },
    /// A followed process created a process (threads are followed but not reported).
    Fork { task: TaskContext, child_tid: u32, child_tgid: u32 },
    /// The last thread of a followed process exited.
    Exit { task: TaskContext, exit_code: i32 },
    /// The launch's last followed task exited; the kernel forgot the launch.
    LaunchEnd {
        launch: LaunchId,
        ts_ns: u64,
        /// The process whose exec started it.
        root_tgid: u32,
        /// Followed for its first reads: the pages its tasks read from disk while they were
        /// counted (the kernel sent no page record for them); 0 otherwise.
        disk_pages: u64,
    },
    /// Pages of one 64-page chunk of a file, new to the launch for their class (access or
    /// insertion).
    Pages { task: TaskContext, inode: InodeKey, source: PageEventKind, chunk: u64, bits: u64 },
    /// ext4 read the inode from disk for the launch (first time per launch).
    InodeLoad { task: TaskContext, inode: InodeKey },
    /// A path-taking syscall and its result.
    Lookup {
        task: TaskContext,
        syscall: LookupSyscall,
        /// The syscall's return: `>= 0` success, `< 0` minus the errno.
        ret: i64,
        /// The directory descriptor of an `*at` call (`AT_FDCWD` for the working directory);
        /// `None` for the calls without one.
        dirfd: Option<i32>,
        /// Open flags or `AT_*` flags.
        flags: u32,
        /// The path as the program passed it (relative paths are relative to `dirfd` or the
        /// task's working directory at the time, which the record does not carry).
        path: PathBuf,
        /// The path filled the record's buffer and may have been cut.
        truncated: bool,
        /// A successful open: the file it returned (read from the task's descriptor table at the
        /// syscall's exit), which names the inode the launch's page records mention.
        opened: Option<InodeKey>,
    },
}

impl ObservedEvent {
    /// The file a successful open emptied or made for writing (`O_TRUNC`, `O_CREAT | O_EXCL`,
    /// `O_TMPFILE`, `creat`): whatever the launch reads of it afterwards is what it wrote itself
    /// (a linker reads its output back to relocate it), pages no later launch needs from disk,
    /// since that one empties the file again. `None` for any other event or open (`openat2`'s
    /// flags are in a structure the record does not carry).
    pub fn output_opened(&self) -> Option<InodeKey> {
        let ObservedEvent::Lookup { syscall, ret, flags, opened: Some(inode), .. } = self else { return None };
        if *ret < 0 {
            return None;
        }
        let flags = *flags as i32;
        let writes = flags & libc::O_ACCMODE != libc::O_RDONLY;
        let empties = flags & libc::O_TRUNC != 0
            || flags & (libc::O_CREAT | libc::O_EXCL) == libc::O_CREAT | libc::O_EXCL
            || flags & libc::O_TMPFILE == libc::O_TMPFILE;
        match syscall {
            LookupSyscall::Creat => Some(*inode),
            LookupSyscall::Open | LookupSyscall::Openat if writes && empties => Some(*inode),
            _ => None,
        }
    }

    /// The task the event happened in (`None` for a launch's end, which has none).
    pub fn task(&self) -> Option<&TaskContext> {
        match self {
            ObservedEvent::Exec { task, .. }
            | ObservedEvent::Fork { task, .. }
            | ObservedEvent::Exit { task, .. }
            | ObservedEvent::Pages { task, .. }
            | ObservedEvent::InodeLoad { task, .. }
            | ObservedEvent::Lookup { task, .. } => Some(task),
            ObservedEvent::LaunchEnd { .. } => None,
        }
    }

    /// The launch the event belongs to.
    pub fn launch(&self) -> LaunchId {
        match self {
            ObservedEvent::Exec { task, .. }
            | ObservedEvent::Fork { task, .. }
            | ObservedEvent::Exit { task, .. }
            | ObservedEvent::Pages { task, .. }
            | ObservedEvent::InodeLoad { task, .. }
            | ObservedEvent::Lookup { task, .. } => task.launch,
            ObservedEvent::LaunchEnd { launch, .. } => *launch,
        }
    }
}

/// Converts an `st_dev` to the kernel-internal `dev_t` (`major << 20 | minor`), the key the
/// kernel program compares. Devices whose numbers do not fit (major ≥ 4096 or minor ≥ 2^20)
/// cannot exist in the kernel encoding; they map to `None`.
pub fn kernel_dev_from_st(dev: u64) -> Option<u32> {
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    (major < (1 << 12) && minor < (1 << 20)).then_some((major << 20) | minor)
}

/// The runs of consecutive pages a chunk bitmap stands for, in increasing order.
pub fn chunk_ranges(chunk: u64, bits: u64) -> impl Iterator<Item = PageRange> {
    let base = chunk << CHUNK_SHIFT;
    let mut rest = bits;
    let mut at = 0u64;
    std::iter::from_fn(move || {
        if rest == 0 {
            return None;
        }
        let skip = u64::from(rest.trailing_zeros());
        rest >>= skip;
        let len = u64::from(rest.trailing_ones());
        rest = if len == 64 { 0 } else { rest >> len };
        let start = base + at + skip;
        at += skip + len;
        Some(PageRange::new(start, len))
    })
}

/// The little-endian `u32` at byte `at` of a record (records.h: all fields little-endian).
pub(super) fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

/// The little-endian `u64` at byte `at` of a record.
pub(super) fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Bytes up to the first NUL, at most `max`, from `at` (clipped to the record).
fn cstr_at(b: &[u8], at: usize, max: usize) -> &[u8] {
    let tail = b.get(at..).unwrap_or(&[]);
    let tail = &tail[..tail.len().min(max)];
    let end = tail.iter().position(|&c| c == 0).unwrap_or(tail.len());
    &tail[..end]
}

/// Decodes one ring-buffer record.
pub fn decode(b: &[u8]) -> Result<ObservedEvent, DecodeError> {
    if b.len() < HDR {
        return Err(DecodeError::Short { kind: 0, len: b.len() });
    }
    let kind = u32_at(b, 0);
    let task = TaskContext { tid: u32_at(b, 4), tgid: u32_at(b, 8), ts_ns: u64_at(b, 16), launch: u64_at(b, 24) };
    let need = |n: usize| if b.len() < n { Err(DecodeError::Short { kind, len: b.len() }) } else { Ok(()) };
    match kind {
        REC_EXEC => {
            need(EXEC_NAME_AT)?;
            let exe = InodeKey { ino: u64_at(b, HDR), dev: st_dev_from_kernel(u32_at(b, HDR + 8)) };
            let name_len = u32_at(b, EXEC_NAME_AT - 8) as usize;
            let name = cstr_at(b, EXEC_NAME_AT, name_len);
            let interp_len = u32_at(b, EXEC_CRED_AT + 20) as usize;
            let interp = cstr_at(b, EXEC_INTERP_AT, interp_len.min(EXEC_INTERP_MAX - 1));
            let args_len = (u32_at(b, EXEC_CRED_AT + 12) as usize).min(EXEC_ARGS_MAX);
            let args_total = u32_at(b, EXEC_CRED_AT + 16) as usize;
            let ngroups = u32_at(b, EXEC_NGROUPS_AT) as usize;
            Ok(ObservedEvent::Exec {
                task,
                old_tid: u32_at(b, HDR + 12),
                parent_tgid: u32_at(b, HDR + 16),
                new_launch: u32_at(b, HDR + 20) & EXEC_NEW_LAUNCH != 0,
                exe,
                comm: String::from_utf8_lossy(cstr_at(b, HDR + 24, 16)).into_owned(),
                filename: PathBuf::from(OsString::from_vec(name.to_vec())),
                interp: PathBuf::from(OsString::from_vec(interp.to_vec())),
                creds: ExecCredentials {
                    uid: u32_at(b, EXEC_CRED_AT),
                    euid: u32_at(b, EXEC_CRED_AT + 4),
                    gid: u32_at(b, EXEC_CRED_AT + 8),
                    groups: (ngroups <= EXEC_GROUPS_MAX)
                        .then(|| (0..ngroups).map(|i| u32_at(b, EXEC_NGROUPS_AT + 8 + 4 * i)).collect()),
                },
                args: b[EXEC_ARGS_AT..EXEC_ARGS_AT + args_len].to_vec(),
                args_cut: args_len > 0 && args_total > args_len,
            })
        }
        REC_FORK => {
            need(HDR + 8)?;
            Ok(ObservedEvent::Fork { task, child_tid: u32_at(b, HDR), child_tgid: u32_at(b, HDR + 4) })
        }
        REC_EXIT => {
            need(HDR + 8)?;
            Ok(ObservedEvent::Exit { task, exit_code: u32_at(b, HDR) as i32 })
        }
        REC_LAUNCH_END => {
            need(HDR + 16)?;
            Ok(ObservedEvent::LaunchEnd {
                launch: task.launch,
                ts_ns: task.ts_ns,
                disk_pages: u64_at(b, HDR),
                root_tgid: u32_at(b, HDR + 8),
            })
        }
        REC_PAGES => {
            need(HDR + 32)?;
            Ok(ObservedEvent::Pages {
                task,
                inode: InodeKey { ino: u64_at(b, HDR), dev: st_dev_from_kernel(u32_at(b, HDR + 24)) },
                chunk: u64_at(b, HDR + 8),
                bits: u64_at(b, HDR + 16),
                source: page_kind_from_raw(u32_at(b, HDR + 28)),
            })
        }
        REC_INODE_LOAD => {
            need(HDR + 16)?;
            Ok(ObservedEvent::InodeLoad {
                task,
                inode: InodeKey { ino: u64_at(b, HDR), dev: st_dev_from_kernel(u32_at(b, HDR + 8)) },
            })
        }
        REC_LOOKUP => {
            need(LOOKUP_PATH_AT)?;
            let syscall = LookupSyscall::from_raw(u32_at(b, HDR + 8));
            let path_len = u32_at(b, HDR + 20) as usize;
            let path = cstr_at(b, LOOKUP_PATH_AT, path_len);
            Ok(ObservedEvent::Lookup {
                task,
                ret: u64_at(b, HDR) as i64,
                syscall,
                dirfd: syscall.is_at().then_some(u32_at(b, HDR + 12) as i32),
                flags: u32_at(b, HDR + 16),
                truncated: path_len >= MAX_PATH - 1,
                path: PathBuf::from(OsString::from_vec(path.to_vec())),
                opened: match u64_at(b, HDR + 24) {
                    0 => None,
                    ino => Some(InodeKey { ino, dev: st_dev_from_kernel(u32_at(b, HDR + 32)) }),
                },
            })
        }
        other => Err(DecodeError::UnknownKind(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr(kind: u32, size: u32) -> Vec<u8> {
        let mut b = Vec::new();
        for v in [kind, 101, 100, size] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&5_000u64.to_le_bytes());
        b.extend_from_slice(&7u64.to_le_bytes());
        b
    }

    const KDEV_254_1: u32 = (254 << 20) | 1;

    #[test]
    fn decodes_pages() {
        let mut b = hdr(REC_PAGES, 64);
        b.extend_from_slice(&1234u64.to_le_bytes());
        b.extend_from_slice(&3u64.to_le_bytes());
        b.extend_from_slice(&0b1011u64.to_le_bytes());
        b.extend_from_slice(&KDEV_254_1.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        let ev = decode(&b).unwrap();
        let ObservedEvent::Pages { task, inode, source, chunk, bits } = ev else { panic!("{ev:?}") };
        assert_eq!(task, TaskContext { tid: 101, tgid: 100, ts_ns: 5_000, launch: 7 });
        assert_eq!(inode, InodeKey { dev: libc::makedev(254, 1), ino: 1234 });
        assert_eq!(source, PageEventKind::Insertion);
        assert_eq!(chunk_ranges(chunk, bits).collect::<Vec<_>>(), vec![PageRange::new(192, 2), PageRange::new(195, 1)]);
    }

    #[test]
    fn decodes_a_launch_end_with_what_it_read_from_disk() {
        let mut b = hdr(REC_LAUNCH_END, 48);
        b.extend_from_slice(&4096u64.to_le_bytes());
        b.extend_from_slice(&100u32.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        let ev = decode(&b).unwrap();
        assert_eq!(ev, ObservedEvent::LaunchEnd { launch: 7, ts_ns: 5_000, root_tgid: 100, disk_pages: 4096 });
        assert!(ev.task().is_none());
        assert!(matches!(decode(&hdr(REC_LAUNCH_END, 32)), Err(DecodeError::Short { .. })), "an ABI 2 record");
    }

    #[test]
    fn decodes_lookup_with_failure_and_path() {
        let mut b = hdr(REC_LOOKUP, 0);
        b.extend_from_slice(&(-2i64).to_le_bytes());
        b.extend_from_slice(&7u32.to_le_bytes()); // newfstatat
        b.extend_from_slice(&(-100i32).to_le_bytes());
        b.extend_from_slice(&0x100u32.to_le_bytes());
        b.extend_from_slice(&9u32.to_le_bytes());
        b.extend_from_slice(&[0; 16]); // no file opened
        b.extend_from_slice(b"/nonexist\0\0\0\0\0\0\0");
        let ev = decode(&b).unwrap();
        assert_eq!(
            ev,
            ObservedEvent::Lookup {
                task: TaskContext { tid: 101, tgid: 100, ts_ns: 5_000, launch: 7 },
                syscall: LookupSyscall::Newfstatat,
                ret: -2,
                dirfd: Some(libc::AT_FDCWD),
                flags: 0x100,
                path: PathBuf::from("/nonexist"),
                truncated: false,
                opened: None,
            }
        );
    }

    #[test]
    fn decodes_the_file_an_open_returned() {
        let mut b = hdr(REC_LOOKUP, 0);
        b.extend_from_slice(&3i64.to_le_bytes());
        b.extend_from_slice(&2u32.to_le_bytes()); // openat
        b.extend_from_slice(&(-100i32).to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&6u32.to_le_bytes());
        b.extend_from_slice(&4321u64.to_le_bytes());
        b.extend_from_slice(&KDEV_254_1.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(b"/etc/x\0\0");
        let ev = decode(&b).unwrap();
        let ObservedEvent::Lookup { opened, path, ret, .. } = ev else { panic!("{ev:?}") };
        assert_eq!((path, ret), (PathBuf::from("/etc/x"), 3));
        assert_eq!(opened, Some(InodeKey { dev: libc::makedev(254, 1), ino: 4321 }));
    }

    #[test]
    fn an_open_that_empties_or_creates_a_file_for_writing_names_an_output() {
        let file = InodeKey { dev: libc::makedev(254, 1), ino: 4321 };
        let open = |syscall, ret, flags: i32| ObservedEvent::Lookup {
            task: TaskContext { tid: 101, tgid: 100, ts_ns: 5_000, launch: 7 },
            syscall,
            ret,
            dirfd: None,
            flags: flags as u32,
            path: PathBuf::from("/out/big"),
            truncated: false,
            opened: (ret >= 0).then_some(file),
        };
        use LookupSyscall::*;
        // What `ld` does with its output, what `fopen(path, "w")` does, a new file, an unnamed one.
        assert_eq!(open(Openat, 3, libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC).output_opened(), Some(file));
        assert_eq!(open(Open, 3, libc::O_WRONLY | libc::O_TRUNC).output_opened(), Some(file));
        assert_eq!(open(Openat, 3, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL).output_opened(), Some(file));
        assert_eq!(open(Openat, 3, libc::O_RDWR | libc::O_TMPFILE).output_opened(), Some(file));
        assert_eq!(open(Creat, 3, 0).output_opened(), Some(file));
        // Reading, appending, updating in place (a database), a directory, a failed open.
        assert_eq!(open(Openat, 3, libc::O_RDONLY).output_opened(), None);
        assert_eq!(open(Openat, 3, libc::O_RDONLY | libc::O_TRUNC).output_opened(), None);
        assert_eq!(open(Openat, 3, libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND).output_opened(), None);
        assert_eq!(open(Openat, 3, libc::O_RDWR | libc::O_CREAT).output_opened(), None);
        assert_eq!(open(Openat, 3, libc::O_RDONLY | libc::O_DIRECTORY).output_opened(), None);
        assert_eq!(open(Openat, -13, libc::O_WRONLY | libc::O_TRUNC).output_opened(), None);
        assert_eq!(open(Newfstatat, 0, libc::O_TRUNC | libc::O_WRONLY).output_opened(), None);
    }

    /// An exec record of `/bin/cat` (interpreter `interp`, arguments `args` of `args_total`
    /// bytes in all, `ngroups` supplementary groups: 10, 11, ...) as the kernel program writes it.
    fn exec_record(interp: &[u8], args: &[u8], args_total: u32, ngroups: u32) -> Vec<u8> {
        let mut b = hdr(REC_EXEC, 0);
        b.extend_from_slice(&77u64.to_le_bytes());
        b.extend_from_slice(&KDEV_254_1.to_le_bytes());
        for v in [99u32, 50, 1] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let mut comm = [0u8; 16];
        comm[..3].copy_from_slice(b"cat");
        b.extend_from_slice(&comm);
        for v in [1000u32, 0, 100, args.len() as u32, args_total, interp.len() as u32, ngroups, 0] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        for g in 0..EXEC_GROUPS_MAX as u32 {
            b.extend_from_slice(&(if g < ngroups { 10 + g } else { 0 }).to_le_bytes());
        }
        let mut interp_field = vec![0u8; EXEC_INTERP_MAX];
        interp_field[..interp.len()].copy_from_slice(interp);
        b.extend_from_slice(&interp_field);
        let mut args_field = vec![0u8; EXEC_ARGS_MAX];
        args_field[..args.len()].copy_from_slice(args);
        b.extend_from_slice(&args_field);
        assert_eq!(b.len(), EXEC_NAME_AT - 8, "the layout records.h asserts");
        b.extend_from_slice(&8u32.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(b"/bin/cat\0garbage");
        b
    }

    #[test]
    fn decodes_exec() {
        let ev = decode(&exec_record(b"/bin/cat", b"cat\0-n\0/etc/hosts\0", 18, 2)).unwrap();
        let ObservedEvent::Exec { old_tid, parent_tgid, exe, new_launch, comm, filename, interp, creds, args, args_cut, .. } = ev
        else {
            panic!()
        };
        assert_eq!((old_tid, parent_tgid, new_launch), (99, 50, true));
        assert_eq!(exe, InodeKey { dev: libc::makedev(254, 1), ino: 77 });
        assert_eq!(comm, "cat");
        assert_eq!(filename, PathBuf::from("/bin/cat"));
        assert_eq!(interp, PathBuf::from("/bin/cat"));
        assert_eq!(creds, ExecCredentials { uid: 1000, euid: 0, gid: 100, groups: Some(vec![10, 11]) });
        assert_eq!((args.as_slice(), args_cut), (&b"cat\0-n\0/etc/hosts\0"[..], false));
    }

    #[test]
    fn an_exec_record_says_when_its_arguments_were_cut_or_unread() {
        let ObservedEvent::Exec { args, args_cut, .. } = decode(&exec_record(b"", b"java\0-cp\0", 5000, 0)).unwrap() else {
            panic!()
        };
        assert_eq!((args.len(), args_cut), (9, true));
        let ObservedEvent::Exec { args, args_cut, interp, creds, .. } = decode(&exec_record(b"", b"", 30, 40)).unwrap() else {
            panic!()
        };
        assert_eq!((args.len(), args_cut, interp), (0, false, PathBuf::new()));
        // More groups than the record holds (or unreadable): none taken from it.
        assert_eq!(creds.groups, None);
    }

    #[test]
    fn short_and_unknown_records_are_errors_not_panics() {
        assert!(decode(&[]).is_err());
        for kind in 0..10 {
            let b = hdr(kind, 32);
            let _ = decode(&b);
            for cut in 0..b.len() {
                let _ = decode(&b[..cut]);
            }
        }
        assert_eq!(decode(&hdr(99, 32)), Err(DecodeError::UnknownKind(99)));
        assert!(matches!(decode(&hdr(REC_PAGES, 32)), Err(DecodeError::Short { .. })));
    }

    #[test]
    fn chunk_ranges_are_the_runs_of_set_bits() {
        assert_eq!(chunk_ranges(0, 0).count(), 0);
        assert_eq!(chunk_ranges(0, u64::MAX).collect::<Vec<_>>(), vec![PageRange::new(0, 64)]);
        assert_eq!(chunk_ranges(2, 1 << 63 | 0b110).collect::<Vec<_>>(), vec![PageRange::new(129, 2), PageRange::new(191, 1)]);
    }

    proptest::proptest! {
        #[test]
        fn chunk_ranges_cover_exactly_the_set_bits(chunk in 0u64..(1 << 40), bits: u64) {
            let mut pages = Vec::new();
            for r in chunk_ranges(chunk, bits) {
                proptest::prop_assert!(r.len > 0);
                pages.extend(r.start..r.start + r.len);
            }
            let want: Vec<u64> = (0..64).filter(|i| bits & (1 << i) != 0).map(|i| (chunk << CHUNK_SHIFT) + i).collect();
            proptest::prop_assert_eq!(pages, want);
        }
    }

    #[test]
    fn dev_round_trip() {
        for (ma, mi) in [(0, 0), (8, 1), (254, 0), (259, 3), (4095, (1 << 20) - 1)] {
            let st = libc::makedev(ma, mi);
            let k = kernel_dev_from_st(st).unwrap();
            assert_eq!(k, (ma << 20) | mi);
            assert_eq!(st_dev_from_kernel(k), st);
        }
        assert_eq!(kernel_dev_from_st(libc::makedev(5000, 0)), None);
    }
}
