//! What an exec was, for the engine's [`ExecStep`]: taken from the eBPF observer's record of that
//! very exec when there is one, else read from `/proc`.
//!
//! `/proc` describes the process as it is when the daemon reads it, not as the exec left it: a
//! process that exits quickly is gone, and one that execs again at once (`su -c 'CMD'`: the
//! shell execs CMD) may be read inside its next exec, with the new program's name and no
//! arguments yet (the kernel sets them after swapping the memory). The record, written in the
//! `sched_process_exec` tracepoint, has the program, the credentials and the arguments that exec
//! set. [`ExecNotes`] keeps each record until the connector's message of the same exec is read.
//!
//! It owns the pairing and the reading; it must not decide what an exec means for a launch (the
//! engine's launch identity does).

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};

use augur_core::model::app;
use augur_core::model::launcher::{self, ExecStep};
use augur_core::model::profile::InodeKey;
use augur_core::model::user::ProcessUser;
use augur_os::sense::bpf::record::ExecCredentials;
use augur_os::sense::procfs;

/// A record and the connector's message of one exec are paired only when their kernel times
/// (both `CLOCK_MONOTONIC`, taken microseconds apart in `exec_binprm`) are at most this far
/// apart (ns): a record whose message was lost is never taken for the next exec's.
const PAIRING_NS: u64 = 50_000_000;

/// Records kept unpaired at most (the oldest go first): a message is read within milliseconds
/// unless the connector overran.
const MAX_NOTES: usize = 4096;

/// An exec the eBPF observer reported is awaited from the process events connector this long at
/// most after it happened (monotonic ns): its message was lost (an overrun), or never comes.
pub const EXEC_AWAIT_NS: u64 = 2_000_000_000;

/// What the observer's record of one exec says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecNote {
    /// When the exec happened (kernel monotonic ns).
    pub ts_ns: u64,
    /// The executable's inode.
    pub exe: InodeKey,
    /// The program the kernel ran (`bprm->interp`; empty when longer than the record holds).
    pub interp: PathBuf,
    /// The credentials after the exec.
    pub creds: ExecCredentials,
    /// The arguments, NUL-separated (empty when they could not be read).
    pub args: Vec<u8>,
    /// The arguments were longer than `args`.
    pub args_cut: bool,
}

/// The observer's exec records whose connector message has not been read yet, by process.
/// Observing every exec, the process events connector wakes the loop only while one waits
/// ([`ExecNotes::waiting`]): the kernel writes the record (`sched_process_exec`) just before the
/// connector's message (`proc_exec_connector`), so the loop, woken by the record, may read the
/// connector before the message is there; the connector's forks and exits are otherwise read at
/// the next wake-up, whatever causes it, in their order.
#[derive(Debug, Default)]
pub struct ExecNotes {
    by_pid: HashMap<u32, VecDeque<ExecNote>>,
    len: usize,
}

impl ExecNotes {
    /// The observer reported an exec of process `tgid`.
    pub fn noted(&mut self, tgid: u32, note: ExecNote) {
        if self.len >= MAX_NOTES {
            self.forget_before(note.ts_ns.saturating_sub(PAIRING_NS));
            if self.len >= MAX_NOTES {
                self.by_pid.clear();
                self.len = 0;
            }
        }
        self.by_pid.entry(tgid).or_default().push_back(note);
        self.len += 1;
    }

    /// True when a record of process `tgid`'s exec at `ts_ns` (the connector's time) waits.
    pub fn has(&self, tgid: u32, ts_ns: u64) -> bool {
        self.by_pid.get(&tgid).is_some_and(|q| q.iter().any(|n| n.ts_ns.abs_diff(ts_ns) <= PAIRING_NS))
    }

    /// The record of process `tgid`'s exec the connector reported at `ts_ns`, if the observer
    /// wrote one; records of that process's earlier execs whose message never came are dropped.
    pub fn take(&mut self, tgid: u32, ts_ns: u64) -> Option<ExecNote> {
        let queue = self.by_pid.get_mut(&tgid)?;
        let mut found = None;
        while let Some(n) = queue.pop_front() {
            self.len -= 1;
            if n.ts_ns.abs_diff(ts_ns) <= PAIRING_NS {
                found = Some(n);
                break;
            }
            if n.ts_ns > ts_ns {
                // A later exec's record: keep it for its own message.
                queue.push_front(n);
                self.len += 1;
                break;
            }
        }
        if queue.is_empty() {
            self.by_pid.remove(&tgid);
        }
        found
    }

    /// Drops the records of execs before `ts_ns` (their messages were lost).
    pub fn forget_before(&mut self, ts_ns: u64) {
        let mut len = 0;
        self.by_pid.retain(|_, q| {
            q.retain(|n| n.ts_ns >= ts_ns);
            len += q.len();
            !q.is_empty()
        });
        self.len = len;
    }

    /// True while a record waits for its message; forgets those of execs more than
    /// [`EXEC_AWAIT_NS`] before `now_ns`.
    pub fn waiting(&mut self, now_ns: u64) -> bool {
        self.forget_before(now_ns.saturating_sub(EXEC_AWAIT_NS));
        self.len > 0
    }

    /// Records waiting.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.len
    }
}

/// The user the credentials stand for, as [`ProcessUser::from_status`] reads it (the effective
/// uid when the real one is root). The supplementary groups are the record's; when it could not
/// hold them all, `/proc`'s (`from_proc`, read only then) if it still describes the same user,
/// else none (reading on its behalf then grants less, never more).
fn user_from(creds: &ExecCredentials, from_proc: impl FnOnce() -> Option<ProcessUser>) -> ProcessUser {
    let uid = if creds.uid != 0 { creds.uid } else { creds.euid };
    let groups = match &creds.groups {
        Some(groups) => groups.clone(),
        None => from_proc().filter(|u| u.uid == uid && u.gid == creds.gid).map(|u| u.groups).unwrap_or_default(),
    };
    ProcessUser { uid, gid: creds.gid, groups }
}

/// How long a program's resolved path is trusted ([`ExeNames`]), monotonic ns: a rename of
/// the very same file shows after this long at most.
const EXE_NAME_MAX_AGE_NS: u64 = 60_000_000_000;

/// Programs whose paths are remembered at most.
const MAX_EXE_NAMES: usize = 256;

/// The paths the programs that exec'd resolved to, by the name the kernel ran them by and their
/// inode: a build that execs the compiler thousands of times resolves its path once a minute,
/// not at every exec. An entry holds only while the record names the same inode (a program
/// replaced, or a link pointed elsewhere, names another).
#[derive(Debug, Default)]
pub struct ExeNames {
    by_name: HashMap<(PathBuf, InodeKey), (String, u64)>,
}

impl ExeNames {
    fn get(&self, interp: &Path, exe: InodeKey, now_ns: u64) -> Option<&str> {
        let (path, at) = self.by_name.get(&(interp.to_path_buf(), exe))?;
        (now_ns.saturating_sub(*at) < EXE_NAME_MAX_AGE_NS).then_some(path.as_str())
    }

    fn put(&mut self, interp: &Path, exe: InodeKey, path: String, now_ns: u64) {
        if self.by_name.len() >= MAX_EXE_NAMES {
            self.by_name.retain(|_, (_, at)| now_ns.saturating_sub(*at) < EXE_NAME_MAX_AGE_NS);
            if self.by_name.len() >= MAX_EXE_NAMES {
                self.by_name.clear();
            }
        }
        self.by_name.insert((interp.to_path_buf(), exe), (path, now_ns));
    }
}

/// The arguments to use: the record's, unless they were cut and `/proc`'s (`proc_raw`, read
/// now) continue them, or the record has none.
fn args_from<'a>(note: &'a ExecNote, proc_raw: impl FnOnce() -> Option<Vec<u8>>) -> (std::borrow::Cow<'a, [u8]>, bool) {
    if note.args.is_empty() {
        return match proc_raw() {
            Some(raw) => (raw.into(), false),
            None => (Vec::new().into(), false),
        };
    }
    if note.args_cut
        && let Some(raw) = proc_raw()
        && raw.len() > note.args.len()
        && raw.starts_with(&note.args)
    {
        return (raw.into(), false);
    }
    (note.args.as_slice().into(), note.args_cut)
}

/// The program's path from the record: the interpreter the kernel ran, made absolute against
/// `cwd` and resolved through its links, if it still names the exec's inode. A descriptor's name
/// (`/dev/fd/N`, fexecve) never does: it is not looked up.
fn exe_from(note: &ExecNote, cwd: Option<&Path>) -> Option<String> {
    let interp = note.interp.to_str()?;
    if interp.is_empty() || interp.starts_with("/dev/fd/") || interp.starts_with("/proc/") {
        return None;
    }
    let path = app::absolute(interp, cwd);
    let canonical = augur_os::untrusted_path::canonical(&path)?;
    let id = procfs::identity_of(&canonical)?;
    (id.dev == note.exe.dev && id.ino == note.exe.ino).then(|| canonical.to_string_lossy().into_owned())
}

/// Reads at most [`app::CMDLINE_READ_MAX`] bytes (and one more, to tell a cut) of process
/// `tgid`'s command line.
fn proc_cmdline(tgid: u32) -> Option<Vec<u8>> {
    use std::io::Read;
    let f = std::fs::File::open(format!("/proc/{tgid}/cmdline")).ok()?;
    let mut raw = Vec::new();
    f.take(app::CMDLINE_READ_MAX as u64 + 1).read_to_end(&mut raw).ok()?;
    Some(raw)
}

/// What process `tgid`'s exec was and the user it runs as, from `note` (the observer's record of
/// that exec) where it has it, else from `/proc` as it is now; for `ld.so PROGRAM`, PROGRAM
/// resolved through its symlinks. The program's path is resolved once a minute per program
/// (`names`, at `now_ns`). The command line is kept only as far as identity needs
/// ([`app::bound_argv`]). `None` when neither says what ran or as whom (a process gone without
/// a record: its user unknown, it is never taken for root).
pub fn exec_step_of(tgid: u32, note: Option<&ExecNote>, names: &mut ExeNames, now_ns: u64) -> Option<ExecRead> {
    // The working directory is read only when something identity uses is relative to it (most
    // execs name their program and arguments absolutely, or not as paths at all).
    let mut cwd_read: Option<Option<PathBuf>> = None;
    let mut cwd = || cwd_read.get_or_insert_with(|| procfs::cwd_of(tgid)).clone();
    let (exe, exe_inode, user, raw, read_cut) = match note {
        Some(note) => {
            // Remembered for a minute from when it was resolved, not from its last use.
            let known = names.get(&note.interp, note.exe, now_ns).map(str::to_string);
            let resolved = known.or_else(|| {
                let exe = exe_from(note, cwd().as_deref())?;
                names.put(&note.interp, note.exe, exe.clone(), now_ns);
                Some(exe)
            });
            let (exe, exe_inode) = match resolved {
                Some(exe) => (exe, Some(note.exe)),
                None => (std::fs::read_link(format!("/proc/{tgid}/exe")).ok()?.to_string_lossy().into_owned(), None),
            };
            let user = user_from(&note.creds, || procfs::user_of(tgid));
            let (raw, cut) = args_from(note, || proc_cmdline(tgid));
            (exe, exe_inode, user, raw.into_owned(), cut)
        }
        None => {
            let exe = std::fs::read_link(format!("/proc/{tgid}/exe")).ok()?.to_string_lossy().into_owned();
            let user = procfs::user_of(tgid)?;
            (exe, None, user, proc_cmdline(tgid).unwrap_or_default(), false)
        }
    };
    let read_cut = read_cut || raw.len() > app::CMDLINE_READ_MAX;
    let raw = &raw[..raw.len().min(app::CMDLINE_READ_MAX)];
    let mut argv = app::split_cmdline(raw);
    let cut = app::bound_argv(&mut argv) || read_cut;
    // Identity reads it for an interpreter's script and the loader's program only: a compiler
    // run on relative files in a loop (`gcc -c a.c`) costs no readlink per exec.
    let cwd = if relative_words(&argv) && launcher::program_uses_cwd(&exe, &argv) { cwd() } else { cwd_read.flatten() };
    let loader_target = launcher::loader_program(&exe, &argv).and_then(|i| {
        let program = app::absolute(&argv[i], cwd.as_deref());
        augur_os::untrusted_path::canonical(&program).map(|p| p.to_string_lossy().into_owned())
    });
    Some(ExecRead { step: ExecStep { pid: tgid, exe, argv, cwd, loader_target, user }, argv_cut: cut, exe_inode })
}

/// Whether a word of `argv` may be a path relative to the working directory (a program or a
/// script named relatively, an option's relative file): any word but an absolute path, a bare
/// program name in `argv[0]` and an option without a `/` in it.
fn relative_words(argv: &[String]) -> bool {
    let relative = |w: &String| !(w.starts_with('/') || (w.starts_with('-') && !w.contains('/')));
    argv.first().is_some_and(|w| w.contains('/') && !w.starts_with('/')) || argv.iter().skip(1).any(relative)
}

/// What [`exec_step_of`] found.
#[derive(Debug)]
pub struct ExecRead {
    /// The exec.
    pub step: ExecStep,
    /// Its command line was cut.
    pub argv_cut: bool,
    /// The inode of `step.exe` when the record named it (else look it up).
    pub exe_inode: Option<InodeKey>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn note(ts_ns: u64, args: &[u8]) -> ExecNote {
        ExecNote {
            ts_ns,
            exe: InodeKey { dev: 1, ino: 2 },
            interp: "/usr/bin/x".into(),
            creds: ExecCredentials::default(),
            args: args.to_vec(),
            args_cut: false,
        }
    }

    #[test]
    fn a_record_is_paired_with_the_message_of_its_own_exec() {
        let mut n = ExecNotes::default();
        // A wrapper's process execs twice (su's child: bash, then CMD in place).
        n.noted(7, note(100 * MS, b"bash\0-c\0CMD\0"));
        n.noted(7, note(101 * MS, b"CMD\0"));
        assert!(n.has(7, 100 * MS));
        assert_eq!(n.take(7, 100 * MS).unwrap().args, b"bash\0-c\0CMD\0");
        assert_eq!(n.take(7, 101 * MS).unwrap().args, b"CMD\0");
        assert_eq!((n.take(7, 102 * MS), n.len()), (None, 0));
    }

    #[test]
    fn a_record_whose_message_was_lost_is_not_taken_for_a_later_exec() {
        let mut n = ExecNotes::default();
        n.noted(7, note(100 * MS, b"old\0"));
        n.noted(7, note(900 * MS, b"new\0"));
        assert!(!n.has(7, 500 * MS));
        // A message with no record of its own (an exec the observer left out): nothing, and the
        // later record stays for its message.
        assert_eq!(n.take(7, 500 * MS), None);
        assert_eq!(n.len(), 1);
        assert_eq!(n.take(7, 900 * MS).unwrap().args, b"new\0");
        n.noted(8, note(100 * MS, b"a\0"));
        n.forget_before(200 * MS);
        assert_eq!(n.len(), 0);
    }

    #[test]
    fn the_connector_is_awaited_while_a_record_waits_for_its_message_and_not_longer() {
        let mut n = ExecNotes::default();
        assert!(!n.waiting(MS));
        // The record first, the connector's message after (the kernel's order).
        n.noted(10, note(MS, b"a\0"));
        assert!(n.waiting(2 * MS));
        assert!(n.take(10, MS).is_some());
        assert!(!n.waiting(2 * MS));
        // Two execs of one process (a wrapper's exec in place), one message read so far.
        n.noted(12, note(4 * MS, b"sh\0"));
        n.noted(12, note(5 * MS, b"x\0"));
        assert!(n.take(12, 4 * MS).is_some());
        assert!(n.waiting(6 * MS));
        assert!(n.take(12, 5 * MS).is_some());
        assert!(!n.waiting(6 * MS));
        // A message that never comes (lost in an overrun): awaited for a bounded time.
        n.noted(20, note(10 * MS, b"y\0"));
        assert!(n.waiting(10 * MS + EXEC_AWAIT_NS - 1));
        assert!(!n.waiting(10 * MS + EXEC_AWAIT_NS + 1));
        assert_eq!(n.len(), 0);
    }

    #[test]
    fn records_kept_unpaired_are_bounded() {
        let mut n = ExecNotes::default();
        for pid in 0..(MAX_NOTES as u32 + 10) {
            n.noted(pid, note(u64::from(pid) * 100 * MS, b"x\0"));
        }
        assert!(n.len() <= MAX_NOTES);
        assert!(n.has(MAX_NOTES as u32 + 9, (MAX_NOTES as u64 + 9) * 100 * MS));
    }

    #[test]
    fn the_user_is_the_records_and_takes_procs_groups_only_when_the_record_lacks_them() {
        let creds = ExecCredentials { uid: 0, euid: 1000, gid: 100, groups: Some(vec![27, 44]) };
        let want = ProcessUser { uid: 1000, gid: 100, groups: vec![27, 44] };
        assert_eq!(user_from(&creds, || panic!("the record has the groups: /proc is not read")), want);
        let creds = ExecCredentials { groups: None, ..creds };
        let proc_user = ProcessUser { uid: 1000, gid: 100, groups: vec![27] };
        assert_eq!(user_from(&creds, || Some(proc_user.clone())), ProcessUser { uid: 1000, gid: 100, groups: vec![27] });
        // /proc already describes another exec (su's target user, say): its groups are not taken.
        let other = ProcessUser { uid: 0, gid: 0, groups: vec![0] };
        assert_eq!(user_from(&creds, || Some(other)), ProcessUser { uid: 1000, gid: 100, groups: vec![] });
        let real = ExecCredentials { uid: 1000, euid: 0, gid: 100, groups: None };
        assert_eq!(user_from(&real, || None).uid, 1000);
    }

    #[test]
    fn a_programs_path_is_remembered_for_its_inode_and_for_a_minute() {
        let mut names = ExeNames::default();
        let (cc, inode) = (Path::new("/usr/bin/cc"), InodeKey { dev: 1, ino: 2 });
        names.put(cc, inode, "/usr/bin/x86_64-linux-gnu-gcc-12".into(), 0);
        assert_eq!(names.get(cc, inode, 1_000), Some("/usr/bin/x86_64-linux-gnu-gcc-12"));
        // Another file under the name (an upgrade, a link changed): not this entry.
        assert_eq!(names.get(cc, InodeKey { dev: 1, ino: 3 }, 1_000), None);
        assert_eq!(names.get(cc, inode, EXE_NAME_MAX_AGE_NS), None);
        for i in 0..(MAX_EXE_NAMES as u64 + 5) {
            names.put(Path::new(&format!("/bin/p{i}")), InodeKey { dev: 1, ino: i }, "p".into(), 10);
        }
        assert!(names.by_name.len() <= MAX_EXE_NAMES);
    }

    #[test]
    fn the_records_arguments_are_used_unless_cut_and_continued_by_proc() {
        let mut n = note(0, b"java\0-cp\0a.jar");
        let (args, cut) = args_from(&n, || panic!("not cut: /proc is not read"));
        assert_eq!((&*args, cut), (&b"java\0-cp\0a.jar"[..], false));
        n.args_cut = true;
        let (args, cut) = args_from(&n, || Some(b"java\0-cp\0a.jar:b.jar\0Main\0".to_vec()));
        assert_eq!((&*args, cut), (&b"java\0-cp\0a.jar:b.jar\0Main\0"[..], false));
        // /proc now shows another exec's arguments (or none): the record's, cut.
        let (args, cut) = args_from(&n, || Some(Vec::new()));
        assert_eq!((&*args, cut), (&b"java\0-cp\0a.jar"[..], true));
        // No arguments in the record: /proc's.
        let empty = note(0, b"");
        let (args, _) = args_from(&empty, || Some(b"ls\0".to_vec()));
        assert_eq!(&*args, b"ls\0");
    }
    #[test]
    fn the_working_directory_is_wanted_only_for_words_that_may_be_relative_paths() {
        let argv = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        assert!(!relative_words(&argv(&["java", "-version"])));
        assert!(!relative_words(&argv(&["gcc", "-c", "/w/hello.c", "-o", "/w/hello.o"])));
        assert!(!relative_words(&argv(&["/usr/bin/env"])));
        assert!(relative_words(&argv(&["python3", "script.py"])));
        assert!(relative_words(&argv(&["./configure", "--prefix=/usr"])));
        assert!(relative_words(&argv(&["tool", "--file=data/x"])));
        assert!(relative_words(&argv(&["sh", "-c", "exec gedit"])));
    }
}
