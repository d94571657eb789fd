//! Application identity as a user recognises it: the executable, or for an interpreter the script,
//! jar or module it runs, so that `python3 a.py` and `python3 b.py` are two applications.
//!
//! Pure: it is given what `/proc/PID/exe`, `/proc/PID/cmdline` and `/proc/PID/cwd` said and never
//! reads them itself; paths are normalised lexically, never resolved through the filesystem.

use std::fmt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What `readlink(/proc/PID/exe)` appends when the executable was unlinked or replaced.
const DELETED_SUFFIX: &str = " (deleted)";

/// What an interpreter runs, when it runs something identifiable.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// A script file (python, perl, ruby, node, shells), absolute.
    Script(PathBuf),
    /// `java -jar FILE.jar`, absolute.
    Jar(PathBuf),
    /// `python -m MODULE` or `java -m MODULE[/CLASS]`.
    Module(String),
    /// `java [options] MAIN.CLASS`.
    MainClass(String),
}

/// Which application a process is.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AppIdentity {
    /// The key the application is learned under: the executable path, the script or jar path, or
    /// `EXE -m MODULE` / `EXE MAIN.CLASS`. Stable across runs and across package upgrades.
    /// A launch's identity scopes it with the user the program runs as
    /// ([`crate::model::user::user_key`]: root's are bare, `uid=1000:KEY` else).
    pub key: String,
    /// The executable, without the " (deleted)" suffix.
    pub exe: PathBuf,
    /// True when `/proc/PID/exe` said the executable had been deleted (usually: upgraded).
    pub exe_deleted: bool,
    /// What the interpreter runs, if `exe` is an interpreter running something identifiable.
    pub target: Option<Target>,
}

impl fmt::Display for AppIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key)
    }
}

/// The interpreter families whose argument conventions augur knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Interpreter {
    Python,
    Perl,
    Ruby,
    Node,
    Java,
    Shell,
}

/// Recognises an interpreter from the executable's file name (`python3.12`, `perl5.36`, `nodejs`).
fn interpreter_of(exe: &Path) -> Option<Interpreter> {
    let name = exe.file_name()?.to_str()?;
    let versioned = |base: &str| name.strip_prefix(base).is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit() || c == '.'));
    if versioned("python") || versioned("pypy") || versioned("pypy3") {
        Some(Interpreter::Python)
    } else if versioned("perl") {
        Some(Interpreter::Perl)
    } else if versioned("ruby") {
        Some(Interpreter::Ruby)
    } else if name == "node" || name == "nodejs" {
        Some(Interpreter::Node)
    } else if name == "java" {
        Some(Interpreter::Java)
    } else if matches!(name, "sh" | "bash" | "dash" | "zsh" | "ksh" | "mksh" | "ash") {
        Some(Interpreter::Shell)
    } else {
        None
    }
}

/// Whether [`identify`] reads its `cwd` for `exe`: only an interpreter's script or jar is made
/// absolute against it.
pub fn identity_uses_cwd(exe: &str) -> bool {
    interpreter_of(&strip_deleted(exe).0).is_some()
}

/// Strips the " (deleted)" suffix `/proc/PID/exe` adds; returns the path and whether it was there.
pub fn strip_deleted(exe: &str) -> (PathBuf, bool) {
    match exe.strip_suffix(DELETED_SUFFIX) {
        Some(p) => (PathBuf::from(p), true),
        None => (PathBuf::from(exe), false),
    }
}

/// Makes `path` absolute against `cwd` (when given) and removes `.` and `..` lexically.
pub fn absolute(path: &str, cwd: Option<&Path>) -> PathBuf {
    let joined = match cwd {
        Some(cwd) if !path.starts_with('/') => cwd.join(path),
        _ => PathBuf::from(path),
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// What the arguments after the interpreter name say it runs.
enum Parsed {
    Script(String),
    Jar(String),
    Module(String),
    MainClass(String),
    Nothing,
}

/// Python: `-c` runs a string, `-m` a module, `-W`/`-X`/`-Q` take a value, `-` is stdin.
fn parse_python(args: &[String]) -> Parsed {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            return it.next().map_or(Parsed::Nothing, |s| Parsed::Script(s.clone()));
        }
        if a == "-" {
            return Parsed::Nothing;
        }
        if let Some(flags) = a.strip_prefix('-') {
            if flags.starts_with('-') {
                continue; // --long options take no separate value (--check-hash-based-pycs is rare)
            }
            for (i, c) in flags.char_indices() {
                match c {
                    'c' => return Parsed::Nothing,
                    'm' => {
                        let rest = &flags[i + 1..];
                        return if !rest.is_empty() {
                            Parsed::Module(rest.to_string())
                        } else {
                            it.next().map_or(Parsed::Nothing, |m| Parsed::Module(m.clone()))
                        };
                    }
                    'W' | 'X' | 'Q' => {
                        if flags[i + 1..].is_empty() {
                            it.next();
                        }
                        break;
                    }
                    _ => {}
                }
            }
            continue;
        }
        return Parsed::Script(a.clone());
    }
    Parsed::Nothing
}

/// Perl, ruby and node: an inline program flag means no script; some flags take a value.
fn parse_generic(args: &[String], inline: &[&str], with_value: &[&str]) -> Parsed {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            return it.next().map_or(Parsed::Nothing, |s| Parsed::Script(s.clone()));
        }
        if a == "-" {
            return Parsed::Nothing;
        }
        if a.starts_with('-') {
            let flag = a.split('=').next().unwrap_or(a);
            if inline.contains(&flag) || inline.iter().any(|f| f.len() == 2 && a.starts_with(f)) {
                return Parsed::Nothing;
            }
            if with_value.contains(&a.as_str()) {
                it.next();
            }
            continue;
        }
        return Parsed::Script(a.clone());
    }
    Parsed::Nothing
}

/// Java: `-jar FILE`, `-m MODULE`, otherwise the main class after the options.
fn parse_java(args: &[String]) -> Parsed {
    const WITH_VALUE: &[&str] = &[
        "-cp",
        "-classpath",
        "--class-path",
        "-p",
        "--module-path",
        "--add-modules",
        "--add-opens",
        "--add-exports",
        "--add-reads",
        "--limit-modules",
        "--upgrade-module-path",
    ];
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-jar" => return it.next().map_or(Parsed::Nothing, |j| Parsed::Jar(j.clone())),
            "-m" | "--module" => return it.next().map_or(Parsed::Nothing, |m| Parsed::Module(m.clone())),
            s if s.starts_with("--module=") => return Parsed::Module(s["--module=".len()..].to_string()),
            s if WITH_VALUE.contains(&s) => {
                it.next();
            }
            s if s.starts_with('-') => {}
            s => return Parsed::MainClass(s.to_string()),
        }
    }
    Parsed::Nothing
}

/// Shells: `-c` runs a string, `-o OPTION` takes a value, `-s` reads stdin.
fn parse_shell(args: &[String]) -> Parsed {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            return it.next().map_or(Parsed::Nothing, |s| Parsed::Script(s.clone()));
        }
        if a == "-" {
            return Parsed::Nothing;
        }
        if let Some(flags) = a.strip_prefix('-').or_else(|| a.strip_prefix('+')) {
            if flags.starts_with('-') {
                continue; // --norc, --login, ...
            }
            if flags.contains('c') || flags.contains('s') {
                return Parsed::Nothing;
            }
            if flags.ends_with('o') || flags.ends_with('O') {
                it.next();
            }
            continue;
        }
        return Parsed::Script(a.clone());
    }
    Parsed::Nothing
}

/// Identifies the application a process runs.
///
/// `exe` is what `readlink(/proc/PID/exe)` returned (a " (deleted)" suffix is handled), `argv` the
/// NUL-separated `/proc/PID/cmdline` split into words, `cwd` the process's working directory, used
/// to make relative script paths absolute (when `None`, relative paths are kept as given).
pub fn identify(exe: &str, argv: &[String], cwd: Option<&Path>) -> AppIdentity {
    let (exe_path, exe_deleted) = strip_deleted(exe);
    let args = argv.get(1..).unwrap_or(&[]);
    let parsed = match interpreter_of(&exe_path) {
        Some(Interpreter::Python) => parse_python(args),
        Some(Interpreter::Perl) => parse_generic(args, &["-e", "-E"], &["-I", "-M", "-m"]),
        Some(Interpreter::Ruby) => parse_generic(args, &["-e"], &["-I", "-r", "-C", "-E"]),
        Some(Interpreter::Node) => {
            parse_generic(args, &["-e", "--eval", "-p", "--print"], &["-r", "--require", "--import", "--loader"])
        }
        Some(Interpreter::Java) => parse_java(args),
        Some(Interpreter::Shell) => parse_shell(args),
        None => Parsed::Nothing,
    };
    let exe_str = exe_path.to_string_lossy().into_owned();
    let (key, target) = match parsed {
        Parsed::Nothing => (exe_str, None),
        Parsed::Script(s) if s.is_empty() => (exe_str, None),
        Parsed::Script(s) => {
            let p = absolute(&s, cwd);
            (p.to_string_lossy().into_owned(), Some(Target::Script(p)))
        }
        Parsed::Jar(j) => {
            let p = absolute(&j, cwd);
            (p.to_string_lossy().into_owned(), Some(Target::Jar(p)))
        }
        Parsed::Module(m) => (format!("{exe_str} -m {m}"), Some(Target::Module(m))),
        Parsed::MainClass(c) => (format!("{exe_str} {c}"), Some(Target::MainClass(c))),
    };
    AppIdentity { key, exe: exe_path, exe_deleted, target }
}

/// Splits the raw contents of `/proc/PID/cmdline` (NUL-separated, NUL-terminated) into words.
pub fn split_cmdline(raw: &[u8]) -> Vec<String> {
    let trimmed = raw.strip_suffix(&[0]).unwrap_or(raw);
    if trimmed.is_empty() {
        return Vec::new();
    }
    trimmed.split(|&b| b == 0).map(|w| String::from_utf8_lossy(w).into_owned()).collect()
}

/// Words of a command line kept at most (per launch, per exec of a launch, and in the model).
pub const ARGV_MAX_ARGS: usize = 64;
/// Bytes of one word kept at most (`PATH_MAX`: a script or jar path always fits; a longer word,
/// such as a long class path, is cut and the words after it are still kept).
pub const ARGV_MAX_ARG_BYTES: usize = 4096;
/// Bytes of a command line kept at most, all words together.
pub const ARGV_MAX_BYTES: usize = 8192;
/// Bytes of `/proc/PID/cmdline` worth reading: enough for [`ARGV_MAX_ARGS`] words after a few
/// long ones, so that a command line of megabytes costs no more than this to read.
pub const CMDLINE_READ_MAX: usize = 64 << 10;

/// Cuts `argv` to what identity needs (see [`ARGV_MAX_ARGS`], [`ARGV_MAX_ARG_BYTES`],
/// [`ARGV_MAX_BYTES`]): the first words, each cut at a character boundary. True when anything
/// was cut.
pub fn bound_argv(argv: &mut Vec<String>) -> bool {
    let mut cut = argv.len() > ARGV_MAX_ARGS;
    argv.truncate(ARGV_MAX_ARGS);
    let mut total = 0usize;
    for (i, word) in argv.iter_mut().enumerate() {
        let room = ARGV_MAX_ARG_BYTES.min(ARGV_MAX_BYTES - total);
        if word.len() > room {
            let mut end = room;
            while !word.is_char_boundary(end) {
                end -= 1;
            }
            word.truncate(end);
            cut = true;
        }
        total += word.len();
        if total >= ARGV_MAX_BYTES {
            cut |= i + 1 < argv.len();
            argv.truncate(i + 1);
            break;
        }
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    fn key(exe: &str, words: &[&str], cwd: &str) -> String {
        identify(exe, &argv(words), Some(Path::new(cwd))).key
    }

    #[test]
    fn plain_executable_is_its_path() {
        let id = identify("/usr/bin/ls", &argv(&["ls", "-l", "x"]), Some(Path::new("/home/u")));
        assert_eq!(id.key, "/usr/bin/ls");
        assert_eq!(id.target, None);
        assert!(!id.exe_deleted);
    }

    #[test]
    fn deleted_executable_keeps_its_identity() {
        let id = identify("/usr/bin/gimp (deleted)", &argv(&["gimp"]), None);
        assert_eq!(id.key, "/usr/bin/gimp");
        assert_eq!(id.exe, PathBuf::from("/usr/bin/gimp"));
        assert!(id.exe_deleted);
    }

    #[test]
    fn two_python_scripts_are_two_apps() {
        let a = key("/usr/bin/python3.12", &["python3", "a.py"], "/home/u");
        let b = key("/usr/bin/python3.12", &["python3", "b.py"], "/home/u");
        assert_eq!(a, "/home/u/a.py");
        assert_eq!(b, "/home/u/b.py");
        assert_ne!(a, b);
    }

    #[test]
    fn relative_scripts_resolve_against_cwd_lexically() {
        assert_eq!(key("/usr/bin/python3", &["python3", "../x/./run.py"], "/home/u/src"), "/home/u/x/run.py");
        assert_eq!(key("/usr/bin/bash", &["bash", "./build.sh", "-j4"], "/srv"), "/srv/build.sh");
        assert_eq!(key("/usr/bin/perl", &["perl", "/opt/t.pl"], "/srv"), "/opt/t.pl");
    }

    #[test]
    fn python_options_and_modules() {
        assert_eq!(key("/usr/bin/python3", &["python3", "-u", "-W", "ignore", "s.py"], "/"), "/s.py");
        assert_eq!(key("/usr/bin/python3", &["python3", "-m", "http.server", "80"], "/"), "/usr/bin/python3 -m http.server");
        assert_eq!(key("/usr/bin/python3", &["python3", "-mvenv", "x"], "/"), "/usr/bin/python3 -m venv");
        assert_eq!(key("/usr/bin/python3", &["python3", "-Bm", "pip"], "/"), "/usr/bin/python3 -m pip");
        assert_eq!(key("/usr/bin/python3", &["python3", "-c", "import x"], "/"), "/usr/bin/python3");
        assert_eq!(key("/usr/bin/python3", &["python3", "-Ic", "1"], "/"), "/usr/bin/python3");
        assert_eq!(key("/usr/bin/python3", &["python3"], "/"), "/usr/bin/python3");
        assert_eq!(key("/usr/bin/python3", &["python3", "-"], "/"), "/usr/bin/python3");
    }

    #[test]
    fn shebang_scripts_are_the_script() {
        // The kernel runs `#!/usr/bin/python3 -u` scripts as `python3 -u ./tool args`.
        assert_eq!(key("/usr/bin/python3.11", &["/usr/bin/python3", "-u", "./tool", "--x"], "/w"), "/w/tool");
    }

    #[test]
    fn java_jar_module_and_class() {
        assert_eq!(key("/usr/lib/jvm/bin/java", &["java", "-Xmx1g", "-jar", "app.jar", "a"], "/opt"), "/opt/app.jar");
        assert_eq!(key("/usr/bin/java", &["java", "-cp", "lib/*", "com.x.Main"], "/"), "/usr/bin/java com.x.Main");
        assert_eq!(key("/usr/bin/java", &["java", "-m", "mod/com.x.Main"], "/"), "/usr/bin/java -m mod/com.x.Main");
        assert_eq!(key("/usr/bin/java", &["java", "-version"], "/"), "/usr/bin/java");
    }

    #[test]
    fn perl_ruby_node_inline_programs_are_the_interpreter() {
        assert_eq!(key("/usr/bin/perl", &["perl", "-e", "print 1"], "/"), "/usr/bin/perl");
        assert_eq!(key("/usr/bin/perl", &["perl", "-I", "lib", "t.pl"], "/a"), "/a/t.pl");
        assert_eq!(key("/usr/bin/ruby3.1", &["ruby", "-r", "json", "x.rb"], "/a"), "/a/x.rb");
        assert_eq!(key("/usr/bin/ruby", &["ruby", "-e", "1"], "/a"), "/usr/bin/ruby");
        assert_eq!(key("/usr/bin/node", &["node", "-e", "1"], "/"), "/usr/bin/node");
        assert_eq!(key("/usr/bin/node", &["node", "--eval=1"], "/"), "/usr/bin/node");
        assert_eq!(key("/usr/bin/node", &["node", "--max-old-space-size=99", "srv.js"], "/s"), "/s/srv.js");
        assert_eq!(key("/usr/bin/nodejs", &["node", "-r", "dotenv/config", "srv.js"], "/s"), "/s/srv.js");
    }

    #[test]
    fn shells_scripts_and_commands() {
        assert_eq!(key("/usr/bin/dash", &["sh", "-e", "x.sh"], "/t"), "/t/x.sh");
        assert_eq!(key("/usr/bin/bash", &["bash", "-c", "echo"], "/t"), "/usr/bin/bash");
        assert_eq!(key("/usr/bin/bash", &["bash", "-o", "pipefail", "y.sh"], "/t"), "/t/y.sh");
        assert_eq!(key("/usr/bin/zsh", &["zsh", "--login"], "/t"), "/usr/bin/zsh");
        assert_eq!(key("/usr/bin/bash", &["bash"], "/t"), "/usr/bin/bash");
    }

    #[test]
    fn not_an_interpreter_when_the_name_only_starts_alike() {
        assert_eq!(key("/usr/bin/python-config", &["python-config", "x.py"], "/"), "/usr/bin/python-config");
        assert_eq!(key("/usr/bin/perlbug", &["perlbug", "x"], "/"), "/usr/bin/perlbug");
    }

    #[test]
    fn cmdline_splits_on_nul() {
        assert_eq!(split_cmdline(b"python3\0a.py\0"), argv(&["python3", "a.py"]));
        assert_eq!(split_cmdline(b"x\0\0y\0"), argv(&["x", "", "y"]));
        assert!(split_cmdline(b"").is_empty());
    }

    #[test]
    fn a_huge_command_line_is_cut_to_its_first_words_each_bounded() {
        let mut small = argv(&["python3", "a.py", "x"]);
        assert!(!bound_argv(&mut small));
        assert_eq!(small, argv(&["python3", "a.py", "x"]));
        // 100 KB of arguments: many short words, or one long word before the one that matters.
        let mut many: Vec<String> = (0..10_000).map(|i| format!("arg{i:06}")).collect();
        assert!(bound_argv(&mut many));
        assert_eq!(many.len(), ARGV_MAX_ARGS);
        assert_eq!(many[0], "arg000000");
        let mut long = vec!["java".to_string(), "-cp".to_string(), "é".repeat(50_000), "org.Main".to_string()];
        assert!(bound_argv(&mut long));
        assert!(long[2].len() <= ARGV_MAX_ARG_BYTES && long[2].len() >= ARGV_MAX_ARG_BYTES - 1);
        assert_eq!(long[3], "org.Main", "the words after a long one are kept");
        assert_eq!(identify("/usr/bin/java", &long, None).key, "/usr/bin/java org.Main");
        let mut wide: Vec<String> = (0..10).map(|_| "x".repeat(3000)).collect();
        assert!(bound_argv(&mut wide));
        assert!(wide.iter().map(String::len).sum::<usize>() <= ARGV_MAX_BYTES);
    }
}
