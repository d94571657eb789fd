//! The path lookups of a traced launch: which paths it opened, stat'ed, probed in vain and
//! listed, for a replay that warms the dentry and inode caches and the directory blocks.
//!
//! The page tracepoints cannot see a lookup, and this kernel has neither kprobes nor eprobes to
//! fetch a syscall's path string, so the command runs under `strace` (when installed), which
//! stops the tracee only at the path-taking syscalls (seccomp-bpf) and writes them to a private
//! log file; [`parse_strace_log`] turns that log into [`LookupList`] entries. Without `strace`
//! nothing extra is recorded and [`LookupSource::describe`] says so.
//!
//! It owns the `strace` command line and the log's parsing (pure, never panics); it does not
//! decide how lookups are replayed (that is `fetch::lookup`).

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use augur_core::model::profile::{Lookup, LookupKind, LookupList};

/// Directories of a search path probed at most (a longer `PATH` is not a launcher's).
const MAX_PATH_DIRS: usize = 64;

/// The lookups of the `PATH` search that found a program (what `execvp` did in the launcher
/// before the program existed, so no trace of the program sees it): `dir/name` in each
/// directory before the one holding it (failed probes), then the one that succeeded.
/// `is_program` says whether a candidate is the program (the caller compares identities). A
/// name with a slash was not searched for, and a search that never finds the program yields
/// nothing (it was started some other way).
pub fn path_search_lookups(name: &OsStr, search_path: &OsStr, is_program: impl Fn(&Path) -> bool) -> Vec<Lookup> {
    use std::os::unix::ffi::OsStrExt;
    if name.is_empty() || name.as_bytes().contains(&b'/') {
        return Vec::new();
    }
    let mut out = Vec::new();
    for dir in search_path.as_bytes().split(|&b| b == b':').take(MAX_PATH_DIRS) {
        if !dir.starts_with(b"/") {
            continue; // the launcher's working directory: not knowable afterwards
        }
        let candidate = Path::new(OsStr::from_bytes(dir)).join(name);
        if is_program(&candidate) {
            out.push(Lookup { path: candidate, kind: LookupKind::Stat });
            return out;
        }
        out.push(Lookup { path: candidate, kind: LookupKind::Missing });
    }
    Vec::new()
}

/// Syscalls whose path is a lookup worth repeating. A `?` lets strace skip names this
/// architecture lacks.
const TRACED_SYSCALLS: &str = "?open,openat,?openat2,?creat,?stat,?lstat,?stat64,?lstat64,?newfstatat,?fstatat64,?statx,\
?access,?faccessat,?faccessat2,?readlink,readlinkat,execve,?execveat,?chdir,?statfs,?getdents,getdents64";

/// Where a trace's lookups come from.
#[derive(Debug)]
pub enum LookupSource {
    /// The command runs under `strace`, logging to `log` (removed on drop).
    Strace {
        /// The strace binary.
        program: PathBuf,
        /// The log file strace writes.
        log: PathBuf,
    },
    /// Lookups are not recorded, for this reason.
    Off(String),
}

impl LookupSource {
    /// Chooses the source: `strace` when `wanted`, installed and the command can be found
    /// (otherwise the plain spawn reports the missing command).
    pub fn choose(wanted: bool, program: &OsStr) -> LookupSource {
        if !wanted {
            return LookupSource::Off("not asked for".into());
        }
        if find_program(program).is_none() {
            return LookupSource::Off("command not found".into());
        }
        let Some(strace) = find_program(OsStr::new("strace")) else {
            return LookupSource::Off("strace is not installed".into());
        };
        let log = std::env::temp_dir().join(format!("augur-lookups-{}.log", std::process::id()));
        let _ = std::fs::remove_file(&log);
        LookupSource::Strace { program: strace, log }
    }

    /// The command line to spawn: `command` itself, or wrapped in strace.
    pub fn command_line(&self, command: &[OsString]) -> Vec<OsString> {
        match self {
            LookupSource::Off(_) => command.to_vec(),
            LookupSource::Strace { program, log } => {
                let mut argv: Vec<OsString> = vec![program.clone().into()];
                for a in ["-f", "-qq", "-xx", "-y", "-s", "4096", "--seccomp-bpf", "-e", "signal=none", "-e"] {
                    argv.push(a.into());
                }
                argv.push(format!("trace={TRACED_SYSCALLS}").into());
                argv.push("-o".into());
                argv.push(log.clone().into());
                argv.push("--".into());
                argv.extend(command.iter().cloned());
                argv
            }
        }
    }

    /// The wrapper program, when the command runs under one.
    pub fn program(&self) -> Option<&Path> {
        match self {
            LookupSource::Strace { program, .. } => Some(program),
            LookupSource::Off(_) => None,
        }
    }

    /// True when the spawned process is a wrapper whose own page events are not the command's.
    pub fn wraps(&self) -> bool {
        matches!(self, LookupSource::Strace { .. })
    }

    /// Reads the log into `list`; returns the parse counts (zero when off or unreadable).
    pub fn collect(&self, list: &mut LookupList) -> LogStats {
        match self {
            LookupSource::Off(_) => LogStats::default(),
            LookupSource::Strace { log, .. } => match std::fs::read(log) {
                Ok(bytes) => parse_strace_log(&String::from_utf8_lossy(&bytes), list),
                Err(e) => {
                    tracing::warn!("reading the lookup log {}: {e}", log.display());
                    LogStats::default()
                }
            },
        }
    }

    /// One phrase for the trace's report line.
    pub fn describe(&self) -> String {
        match self {
            LookupSource::Off(why) => format!("path lookups not recorded ({why})"),
            LookupSource::Strace { .. } => "path lookups recorded with strace".into(),
        }
    }
}

impl Drop for LookupSource {
    fn drop(&mut self) {
        if let LookupSource::Strace { log, .. } = self {
            let _ = std::fs::remove_file(log);
        }
    }
}

/// `program` as `execvp` would find it: a path containing `/` as is, else the first executable
/// regular file of that name on `PATH`.
fn find_program(program: &OsStr) -> Option<PathBuf> {
    let is_exe = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if program.is_empty() {
        return None;
    }
    if program.as_encoded_bytes().contains(&b'/') {
        let p = PathBuf::from(program);
        return is_exe(&p).then_some(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path).map(|d| d.join(program)).find(|p| is_exe(p))
}

/// Counts of what a log held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogStats {
    /// Calls recorded as lookups.
    pub lookups: u64,
    /// Calls whose path could not be made absolute (relative without a known directory,
    /// truncated strings, fds that are not paths).
    pub unresolved: u64,
}

/// Parses an `strace -f -xx -y` log (one call per line, `PID  name(args) = result`, calls split
/// across lines as `<unfinished ...>` / `<... name resumed>`) into `list`.
pub fn parse_strace_log(text: &str, list: &mut LookupList) -> LogStats {
    let mut stats = LogStats::default();
    let mut pending: HashMap<&str, String> = HashMap::new();
    for line in text.lines() {
        let line = line.trim_end();
        let (pid, rest) = match line.split_once(' ') {
            Some((p, r)) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => (p, r.trim_start()),
            _ => ("", line),
        };
        let call = if let Some(head) = rest.strip_suffix("<unfinished ...>") {
            pending.insert(pid, head.trim_end().to_string());
            continue;
        } else if let Some(resumed) = rest.strip_prefix("<... ") {
            let Some((_, tail)) = resumed.split_once(" resumed>") else { continue };
            let Some(head) = pending.remove(pid) else { continue };
            let sep = if head.ends_with('(') || tail.starts_with(')') || tail.starts_with(',') { "" } else { ", " };
            format!("{head}{sep}{tail}")
        } else {
            rest.to_string()
        };
        match parse_call(&call) {
            Some(Call::Lookup { path, kind }) => {
                stats.lookups += 1;
                list.record(path, kind);
            }
            Some(Call::Unresolved) => stats.unresolved += 1,
            None => {}
        }
    }
    stats
}

#[derive(Debug, PartialEq, Eq)]
enum Call {
    Lookup { path: PathBuf, kind: LookupKind },
    Unresolved,
}

/// One complete call: `name(args) = result`.
fn parse_call(call: &str) -> Option<Call> {
    let open = call.find('(')?;
    let name = &call[..open];
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return None;
    }
    let close = call.rfind(") = ")?;
    if close < open {
        return None;
    }
    let args = split_args(&call[open + 1..close]);
    let result = call[close + 4..].trim();
    if name == "getdents64" || name == "getdents" {
        let fd_path = args.first().and_then(|a| decoration(a));
        return Some(match fd_path {
            Some(p) if p.is_absolute() => Call::Lookup { path: p, kind: LookupKind::Dir },
            _ => Call::Unresolved,
        });
    }
    let at = args.iter().position(|a| a.starts_with('"'))?;
    let raw = args[at];
    if raw.ends_with("...") {
        return Some(Call::Unresolved); // truncated by strace
    }
    let text = unescape(raw.strip_prefix('"')?.strip_suffix('"')?)?;
    if text.is_empty() {
        return None; // AT_EMPTY_PATH: a call on the fd, no lookup
    }
    let path = PathBuf::from(OsString::from_vec(text));
    let path = if path.is_absolute() {
        path
    } else {
        match at.checked_sub(1).and_then(|i| decoration(args[i])) {
            Some(base) if base.is_absolute() => base.join(path),
            _ => return Some(Call::Unresolved),
        }
    };
    let errno = result.strip_prefix("-1 ").map(|r| r.split_whitespace().next().unwrap_or(""));
    let kind = match errno {
        Some("ENOENT" | "ENOTDIR") => LookupKind::Missing,
        _ => LookupKind::Stat,
    };
    Some(Call::Lookup { path, kind })
}

/// Top-level arguments of an argument list (commas inside strings, brackets and braces do not
/// split).
fn split_args(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut in_string = false;
    let mut escaped = false;
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'(' | b'[' | b'{' | b'<' => depth += 1,
            b')' | b']' | b'}' | b'>' => depth -= 1,
            b',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    let last = s[start..].trim();
    if !last.is_empty() {
        out.push(last);
    }
    out
}

/// The path strace's `-y` appends to an fd: `3<\x2f...>` or `AT_FDCWD<\x2f...>`.
fn decoration(arg: &str) -> Option<PathBuf> {
    let (_, inner) = arg.split_once('<')?;
    let inner = inner.strip_suffix('>')?;
    Some(PathBuf::from(OsString::from_vec(unescape(inner)?)))
}

/// Undoes strace's C-style escapes (`\xNN`, octal, `\n` and friends).
fn unescape(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len() / 4 + 1);
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let c = *b.get(i + 1)?;
        i += 2;
        match c {
            b'x' => {
                let hex = s.get(i..i + 2)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b'0'..=b'7' => {
                let mut v = u32::from(c - b'0');
                let mut n = 1;
                while n < 3 && i < b.len() && (b'0'..=b'7').contains(&b[i]) {
                    v = v * 8 + u32::from(b[i] - b'0');
                    i += 1;
                    n += 1;
                }
                out.push(u8::try_from(v).ok()?);
            }
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'v' => out.push(0x0b),
            b'f' => out.push(0x0c),
            other => out.push(other),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use augur_core::model::profile::Lookup;

    fn hex(s: &str) -> String {
        s.bytes().map(|b| format!("\\x{b:02x}")).collect()
    }

    fn parse(text: &str) -> (Vec<Lookup>, LogStats) {
        let mut list = LookupList::new();
        let stats = parse_strace_log(text, &mut list);
        (list.finish(), stats)
    }

    fn l(path: &str, kind: LookupKind) -> Lookup {
        Lookup { path: path.into(), kind }
    }

    #[test]
    fn a_path_search_probes_each_directory_before_the_programs() {
        let found = |p: &Path| p == Path::new("/usr/bin/xterm");
        let got = path_search_lookups(OsStr::new("xterm"), OsStr::new("/usr/local/bin:rel:/usr/sbin:/usr/bin:/bin"), found);
        let want = [
            ("/usr/local/bin/xterm", LookupKind::Missing),
            ("/usr/sbin/xterm", LookupKind::Missing),
            ("/usr/bin/xterm", LookupKind::Stat),
        ];
        assert_eq!(got.iter().map(|l| (l.path.to_str().unwrap(), l.kind)).collect::<Vec<_>>(), want);
        assert!(path_search_lookups(OsStr::new("./xterm"), OsStr::new("/usr/bin"), |_| true).is_empty());
        assert!(path_search_lookups(OsStr::new("xterm"), OsStr::new("/opt:/srv"), found).is_empty());
        assert!(path_search_lookups(OsStr::new(""), OsStr::new("/usr/bin"), |_| true).is_empty());
    }

    #[test]
    fn opens_failed_probes_and_listings_are_read() {
        let log = format!(
            "6457  access(\"{}\", R_OK) = -1 ENOENT (No such file or directory)\n\
             6457  openat(AT_FDCWD<{}>, \"{}\", O_RDONLY|O_CLOEXEC) = 3<{}>\n\
             6457  newfstatat(3<{}>, \"\", {{st_mode=S_IFREG|0644, st_size=40203, ...}}, AT_EMPTY_PATH) = 0\n\
             6458  openat(AT_FDCWD<{}>, \"{}\", O_RDONLY|O_NONBLOCK|O_CLOEXEC|O_DIRECTORY) = 3<{}>\n\
             6458  getdents64(3<{}>, 0x5557df85c2a0 /* 891 entries */, 32768) = 32752\n\
             6459  newfstatat(AT_FDCWD<{}>, \"{}\", 0x7ffee0328e30, 0) = -1 ENOTDIR (Not a directory)\n\
             6459  +++ exited with 1 +++\n",
            hex("/etc/ld.so.preload"),
            hex("/tmp"),
            hex("/etc/ld.so.cache"),
            hex("/etc/ld.so.cache"),
            hex("/etc/ld.so.cache"),
            hex("/usr"),
            hex("share/doc"),
            hex("/usr/share/doc"),
            hex("/usr/share/doc"),
            hex("/"),
            hex("etc/passwd/x"),
        );
        let (got, stats) = parse(&log);
        assert_eq!(
            got,
            vec![
                l("/etc/ld.so.preload", LookupKind::Missing),
                l("/etc/ld.so.cache", LookupKind::Stat),
                l("/usr/share/doc", LookupKind::Dir),
                l("/etc/passwd/x", LookupKind::Missing),
            ]
        );
        assert_eq!(stats, LogStats { lookups: 5, unresolved: 0 });
    }

    #[test]
    fn split_calls_are_joined_and_unresolvable_ones_counted() {
        let log = format!(
            "10  newfstatat(AT_FDCWD<{}>, \"{}\", <unfinished ...>\n\
             11  execve(\"{}\", [\"{}\"], 0x7ffc /* 3 vars */) = 0\n\
             10  <... newfstatat resumed>0x7ffe, 0) = -1 ENOENT (No such file or directory)\n\
             12  stat(\"{}\", 0x7ffe) = 0\n\
             12  getdents64(4<{}>, 0x55 /* 2 entries */, 32768) = 48\n\
             12  openat(AT_FDCWD<{}>, \"{}\"..., O_RDONLY) = -1 ENAMETOOLONG (File name too long)\n\
             garbage ( without = sense\n",
            hex("/w"),
            hex("a b,c"),
            hex("/bin/true"),
            hex("true"),
            hex("relative"),
            hex("pipe:[1]"),
            hex("/"),
            hex("long"),
        );
        let (got, stats) = parse(&log);
        assert_eq!(got, vec![l("/bin/true", LookupKind::Stat), l("/w/a b,c", LookupKind::Missing)]);
        assert_eq!(stats, LogStats { lookups: 2, unresolved: 3 });
    }

    #[test]
    fn escapes_are_undone() {
        assert_eq!(unescape(r"\x2f\x61").unwrap(), b"/a");
        assert_eq!(unescape(r#"a\nb\\c\"\101\0"#).unwrap(), b"a\nb\\c\"A\0");
        assert_eq!(unescape(r"\x4"), None);
        assert_eq!(unescape("\\"), None);
    }

    #[test]
    fn strace_wraps_the_command_and_off_leaves_it_alone() {
        let cmd: Vec<OsString> = vec!["true".into(), "x".into()];
        let off = LookupSource::Off("test".into());
        assert_eq!(off.command_line(&cmd), cmd);
        assert!(!off.wraps());
        let on = LookupSource::Strace { program: "/usr/bin/strace".into(), log: "/nonexistent/augur-test.log".into() };
        let argv = on.command_line(&cmd);
        assert_eq!(argv[0], OsString::from("/usr/bin/strace"));
        assert_eq!(&argv[argv.len() - 3..], &[OsString::from("--"), "true".into(), "x".into()]);
        assert!(on.wraps());
    }

    #[test]
    fn arbitrary_text_never_panics() {
        for s in [
            "",
            "(",
            ") = ",
            "1 a(\"\\x",
            "1 a(\"\\",
            "x(<) = 0",
            "getdents64() = 0",
            "<... a resumed>",
            "1 <... a resumed>) = 0",
        ] {
            parse(s);
        }
    }
}
