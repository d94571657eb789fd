//! One exec seen alone: which application it would be (augur's `app::identify`, plus `ld.so
//! PROGRAM` and snap revisions), whether that identity is stable across launches, what commands
//! its command line carries and how a wrapper would have named it, and its role when it is a
//! well-known wrapper, launcher or session helper.
//!
//! Owns the per-exec facts only. It must not look at other execs of the launch (that is
//! `launcher`'s) nor read `/proc` or the filesystem: the daemon hands in what they said.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::command::{base_name, carried_commands, shell_c_string, shell_commands};
use crate::model::app::{self, AppIdentity, Target};
use crate::model::user::{ProcessUser, user_key};

/// What the daemon read for one exec: the proc connector's exec event and `/proc/PID/*` then.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecStep {
    /// The process (tgid) that exec'd.
    pub pid: u32,
    /// `readlink(/proc/PID/exe)`, " (deleted)" suffix included when the kernel added it.
    pub exe: String,
    /// `/proc/PID/cmdline` split on NUL.
    pub argv: Vec<String>,
    /// `readlink(/proc/PID/cwd)`, if it could be read.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// For `ld.so PROGRAM`: PROGRAM resolved through symlinks by the daemon (`realpath`), so that
    /// `ld.so /usr/bin/python3` and `/usr/bin/python3` (→ python3.11) get one key. See
    /// [`loader_program`].
    #[serde(default)]
    pub loader_target: Option<String>,
    /// The user the process runs as (`/proc/PID/status`): the application key is that user's
    /// ([`crate::model::user::user_key`]). Root when not recorded.
    #[serde(default)]
    pub user: ProcessUser,
}

/// Whether an identity names the same thing at the next launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stability {
    /// A path that the next launch runs again.
    Stable,
    /// The executable lives in a memfd (`/memfd:NAME (deleted)`): there is no file to prefetch
    /// and the name is the creator's choice, often random.
    Memfd,
    /// A throwaway executable: in a temporary directory and deleted, or in a randomly named one
    /// (`/tmp/tmp.Ab3dE6fG/prog`, `/tmp/_MEI12345/`, `/tmp/.mount_AppXyZ12/`).
    Temporary,
}

/// What a well-known program does, when it is one (the general rules do not need this; it
/// catches what they cannot see, see `launcher`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KnownRole {
    /// Runs the command it was given, in place or as a child (env, nice, timeout, sudo, sh -c, ...).
    PassThrough,
    /// Starts an application its arguments name only indirectly (a file, a desktop id).
    Launcher,
    /// A per-session service started on the side (dbus-daemon, at-spi, dconf): never the application.
    SessionHelper,
}

/// One exec, identified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    /// The application this exec would be on its own.
    pub identity: AppIdentity,
    /// Whether `identity` is worth learning.
    pub stability: Stability,
    /// How a wrapper would have asked for this program: each is a word list, program first.
    pub invocations: Vec<Vec<String>>,
    /// The commands this program's own command line carries (what it may start).
    pub carried: Vec<Vec<String>>,
    /// Its role when it is a well-known program.
    pub role: Option<KnownRole>,
    /// The argv, as read (for `ld.so PROGRAM ARGS`: `PROGRAM ARGS`).
    pub argv: Vec<String>,
    /// The arguments the program was given: after the script for a script, after argv[0] else.
    pub args: Vec<String>,
}

/// Wrappers that run the command they are given (its words are the tail of their argv).
const PASS_THROUGH: &[&str] = &[
    // GLib's helper between a launcher (`gio launch`, `gtk-launch`) and the Exec line it starts.
    "gio-launch-desktop",
    "env",
    "nice",
    "ionice",
    "chrt",
    "taskset",
    "nohup",
    "setsid",
    "timeout",
    "stdbuf",
    "sudo",
    "su",
    "runuser",
    "pkexec",
    "doas",
    "dbus-run-session",
    "dbus-launch",
    "firejail",
    "bwrap",
    "flatpak",
    "flatpak-spawn",
    "snap",
    "snap-confine",
    "snap-exec",
    "systemd-run",
    "unshare",
    "nsenter",
    "chroot",
    "prlimit",
    "numactl",
    "cgexec",
    "time",
    "xvfb-run",
    "torsocks",
    "proxychains",
    "proxychains4",
    "gamemoderun",
    "prime-run",
    "primusrun",
    "optirun",
    "mangohud",
    "catchsegv",
    "trickle",
    "cpulimit",
];
/// Launchers whose arguments name the application indirectly (a file, a URL, a desktop id).
const LAUNCHERS: &[&str] = &[
    "xdg-open",
    "gtk-launch",
    "exo-open",
    "kioclient",
    "kioclient5",
    "kde-open",
    "kde-open5",
    "dex",
    "gnome-open",
    "mimeopen",
    "see",
    "run-mailcap",
];
/// Whether `program` is a launcher that starts exactly one program, the application its
/// arguments name (`gio launch x.desktop`, `gio open FILE`, `gtk-launch ID`: GLib spawns the
/// desktop entry's Exec line and nothing else), unlike a script launcher (`xdg-open`) that runs
/// helpers of its own first.
pub fn starts_only_its_application(program: &Program) -> bool {
    let name = Path::new(&program.identity.key).file_name().and_then(|n| n.to_str());
    program.role == Some(KnownRole::Launcher) && matches!(name, Some("gio" | "gtk-launch"))
}

/// Whether an executable of this file name starts other programs for a living: a pass-through
/// wrapper or a launcher (`gio` counts: its `launch` and `open` are launchers). Old state learned
/// under such a name is dropped ([`super::migration`]).
pub(super) fn starts_other_programs(name: &str) -> bool {
    PASS_THROUGH.contains(&name) || LAUNCHERS.contains(&name) || name == "gio"
}

/// Per-session services a launch starts on the side.
const SESSION_HELPERS: &[&str] = &[
    "dbus-daemon",
    "dbus-broker",
    "at-spi-bus-launcher",
    "at-spi2-registryd",
    "dconf-service",
    "gvfsd",
    "gvfsd-fuse",
    "xdg-desktop-portal",
    "xdg-document-portal",
    "xdg-permission-store",
    "gnome-keyring-daemon",
    "pulseaudio",
    "pipewire",
    "wireplumber",
    "ibus-daemon",
    "fcitx5",
    "kwalletd5",
    "kwalletd6",
];

/// Temporary directories whose executables are suspect.
const TEMPORARY_DIRS: &[&str] = &["/tmp/", "/var/tmp/", "/dev/shm/", "/run/user/"];

/// Identifies one exec, under the key of the user it runs as ([`ExecStep::user`]).
pub fn program_of(step: &ExecStep) -> Program {
    let cwd = step.cwd.as_deref();
    let (identity, loader_args) = match loader_program(&step.exe, &step.argv) {
        Some(i) => {
            let args = step.argv[i..].to_vec();
            let exe = match &step.loader_target {
                Some(t) => t.clone(),
                None => app::absolute(&step.argv[i], cwd).to_string_lossy().into_owned(),
            };
            (app::identify(&exe, &args, cwd), Some(args))
        }
        None => (app::identify(&step.exe, &step.argv, cwd), None),
    };
    let mut identity = without_snap_revision(identity);
    let stability = stability_of(&step.exe, &identity);
    identity.key = user_key(step.user.uid, &identity.key);
    let argv = loader_args.clone().unwrap_or_else(|| step.argv.clone());
    let mut invocations = vec![argv.clone()];
    let mut args = argv.get(1..).unwrap_or(&[]).to_vec();
    if let Some(Target::Script(script)) = &identity.target
        && let Some(name) = script.file_name().and_then(|n| n.to_str())
        && let Some(j) = argv.iter().skip(1).position(|w| base_name(w) == name)
    {
        // `#!/bin/sh` scripts: the kernel made argv `sh SCRIPT ARGS`, the wrapper said `SCRIPT ARGS`.
        invocations.push(argv[j + 1..].to_vec());
        args = argv[j + 2..].to_vec();
    }
    let c_string = if shell_like(&identity.exe) { shell_c_string(&argv) } else { None };
    if let Some(c) = c_string {
        invocations.extend(shell_commands(c));
    }
    let role = role_of(&identity, &argv, c_string.is_some());
    Program { carried: carried_commands(&argv), identity, stability, invocations, role, argv, args }
}

/// Whether [`program_of`] uses [`ExecStep::cwd`] for an exec of `exe` with `argv`: for an
/// interpreter (its script or jar) and the loader run as a program (its program), never for
/// another program, whose working directory the daemon then need not read.
pub fn program_uses_cwd(exe: &str, argv: &[String]) -> bool {
    app::identity_uses_cwd(exe) || loader_program(exe, argv).is_some()
}

/// For the dynamic loader run as a program (`/lib64/ld-linux-x86-64.so.2 [OPTIONS] PROGRAM ARGS`):
/// the index in `argv` of PROGRAM. None when `exe` is not the loader or it runs no program
/// (`--list`, `--verify`, `--help`). The daemon resolves `argv[i]` and hands it back in
/// [`ExecStep::loader_target`].
pub fn loader_program(exe: &str, argv: &[String]) -> Option<usize> {
    let (path, _) = app::strip_deleted(exe);
    let name = path.file_name()?.to_str()?;
    let loader = name == "ld.so" || (name.starts_with("ld-") && name.contains(".so"));
    if !loader {
        return None;
    }
    const WITH_VALUE: &[&str] = &[
        "--library-path",
        "--inhibit-rpath",
        "--audit",
        "--preload",
        "--argv0",
        "--glibc-hwcaps-prepend",
        "--glibc-hwcaps-mask",
    ];
    let mut i = 1;
    while let Some(a) = argv.get(i) {
        match a.as_str() {
            "--list" | "--verify" | "--help" | "--version" | "--list-tunables" | "--list-diagnostics" => return None,
            "--" => return (i + 1 < argv.len()).then_some(i + 1),
            s if WITH_VALUE.contains(&s) => i += 2,
            s if s.starts_with("--") => i += 1,
            _ => return Some(i),
        }
    }
    None
}

/// `/snap/NAME/REVISION/...` → `/snap/NAME/current/...`: a snap's revision changes at each refresh.
fn without_snap_revision(mut id: AppIdentity) -> AppIdentity {
    fn fix(p: &str) -> String {
        let parts: Vec<&str> = p.splitn(5, '/').collect();
        if parts.len() >= 4 && parts[0].is_empty() && parts[1] == "snap" {
            let rev = parts[3];
            let digits = rev.strip_prefix('x').unwrap_or(rev);
            if !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()) {
                let mut out: Vec<&str> = parts.clone();
                out[3] = "current";
                return out.join("/");
            }
        }
        p.to_string()
    }
    id.key = fix(&id.key);
    id.exe = PathBuf::from(fix(&id.exe.to_string_lossy()));
    id.target = id.target.map(|t| match t {
        Target::Script(p) => Target::Script(PathBuf::from(fix(&p.to_string_lossy()))),
        Target::Jar(p) => Target::Jar(PathBuf::from(fix(&p.to_string_lossy()))),
        other => other,
    });
    id
}

/// Whether the exec'd file (and the script it runs) will be there, under the same name, next time.
fn stability_of(exe: &str, id: &AppIdentity) -> Stability {
    if exe.starts_with("/memfd:") {
        return Stability::Memfd;
    }
    let throwaway = |p: &Path, deleted: bool| {
        let s = p.to_string_lossy();
        let in_temporary = TEMPORARY_DIRS.iter().any(|d| s.starts_with(d));
        in_temporary && (deleted || p.components().any(|c| random_name(&c.as_os_str().to_string_lossy())))
    };
    let script_throwaway = match &id.target {
        Some(Target::Script(p) | Target::Jar(p)) => throwaway(p, false),
        _ => false,
    };
    if throwaway(&id.exe, id.exe_deleted) || script_throwaway { Stability::Temporary } else { Stability::Stable }
}

/// A path component made to be unique: `tmp.Ab3dE6fG` (mktemp), `_MEI123456` (PyInstaller),
/// `.mount_AppXyZ12` (AppImage), or a name ending in 8+ hex digits (`sealed-91173221a7ea`).
pub fn random_name(c: &str) -> bool {
    if ["tmp.", "_MEI", ".mount_"].iter().any(|p| c.starts_with(p) && c.len() >= p.len() + 6) {
        return true;
    }
    let tail = c.rsplit(['-', '_', '.']).next().unwrap_or(c);
    tail.len() >= 8 && tail.chars().all(|ch| ch.is_ascii_hexdigit()) && tail.chars().any(|ch| ch.is_ascii_digit())
}

fn shell_like(exe: &Path) -> bool {
    matches!(exe.file_name().and_then(|n| n.to_str()), Some("sh" | "bash" | "dash" | "zsh" | "ksh" | "mksh" | "ash"))
}

fn role_of(id: &AppIdentity, argv: &[String], shell_c: bool) -> Option<KnownRole> {
    if shell_c {
        return Some(KnownRole::PassThrough);
    }
    // A script launcher (`xdg-open` is a shell script) is named by its script.
    let name = Path::new(&id.key).file_name().and_then(|n| n.to_str())?;
    let arg = |w: &str| argv.iter().skip(1).any(|a| a == w || a.starts_with(&format!("{w}=")));
    if name == "dbus-launch" && arg("--autolaunch") {
        Some(KnownRole::SessionHelper)
    } else if name == "gio" && argv.get(1).is_some_and(|a| a == "launch" || a == "open") {
        Some(KnownRole::Launcher)
    } else if PASS_THROUGH.contains(&name) {
        Some(KnownRole::PassThrough)
    } else if LAUNCHERS.contains(&name) {
        Some(KnownRole::Launcher)
    } else if SESSION_HELPERS.contains(&name) {
        Some(KnownRole::SessionHelper)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(exe: &str, argv: &[&str]) -> ExecStep {
        ExecStep {
            pid: 1,
            exe: exe.into(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            cwd: Some("/home/u".into()),
            loader_target: None,
            user: ProcessUser::ROOT,
        }
    }

    #[test]
    fn only_an_interpreter_or_the_loader_is_identified_by_its_working_directory() {
        let execs: &[(&str, &[&str])] = &[
            ("/usr/bin/gcc", &["gcc", "-c", "a.c", "-o", "a.o"]),
            ("/usr/libexec/gcc/x86_64-linux-gnu/12/cc1", &["cc1", "-quiet", "a.c", "-o", "x.s"]),
            ("/usr/bin/env", &["env", "FOO=1", "./run"]),
            ("/usr/bin/timeout", &["timeout", "5", "bin/tool", "x"]),
            ("/usr/bin/python3", &["python3", "tool.py"]),
            ("/usr/bin/java", &["java", "-jar", "app.jar"]),
            ("/usr/bin/bash", &["bash", "script.sh"]),
            ("/lib64/ld-linux-x86-64.so.2", &["ld.so", "bin/tool"]),
        ];
        for (exe, argv) in execs {
            let with = program_of(&step(exe, argv));
            let without = program_of(&ExecStep { cwd: None, ..step(exe, argv) });
            let argv: Vec<String> = argv.iter().map(|w| w.to_string()).collect();
            if program_uses_cwd(exe, &argv) {
                assert_ne!(with, without, "{exe} {argv:?} names a relative script or program");
            } else {
                assert_eq!(with, without, "{exe} {argv:?}: its working directory need not be read");
            }
        }
        let uses: Vec<bool> = execs
            .iter()
            .map(|(exe, argv)| program_uses_cwd(exe, &argv.iter().map(|w| w.to_string()).collect::<Vec<_>>()))
            .collect();
        assert_eq!(uses, [false, false, false, false, true, true, true, true]);
    }

    #[test]
    fn the_loader_runs_its_program() {
        let p = program_of(&step(
            "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
            &["/lib64/ld-linux-x86-64.so.2", "/usr/bin/gedit", "a.txt"],
        ));
        assert_eq!(p.identity.key, "/usr/bin/gedit");
        let p = program_of(&step("/lib64/ld-linux-x86-64.so.2", &["ld.so", "--library-path", "/x", "/usr/bin/python3", "s.py"]));
        assert_eq!(p.identity.key, "/home/u/s.py");
        let mut s = step("/lib64/ld-linux-x86-64.so.2", &["ld.so", "bin/tool"]);
        s.loader_target = Some("/opt/tool/bin/tool-1.2".into());
        assert_eq!(program_of(&s).identity.key, "/opt/tool/bin/tool-1.2");
        assert_eq!(
            program_of(&step("/lib64/ld-linux-x86-64.so.2", &["ld.so", "--list", "/bin/ls"])).identity.key,
            "/lib64/ld-linux-x86-64.so.2"
        );
        assert_eq!(loader_program("/usr/bin/ldd", &[]), None);
    }

    #[test]
    fn snap_revisions_are_not_part_of_the_name() {
        let p = program_of(&step("/snap/firefox/4173/usr/lib/firefox/firefox", &["firefox"]));
        assert_eq!(p.identity.key, "/snap/firefox/current/usr/lib/firefox/firefox");
        let p = program_of(&step("/snap/core22/x2/usr/bin/python3.10", &["python3", "/snap/tool/12/bin/run.py"]));
        assert_eq!(p.identity.key, "/snap/tool/current/bin/run.py");
    }

    #[test]
    fn stability() {
        assert_eq!(program_of(&step("/memfd:sealed-91173221a7ea (deleted)", &["x"])).stability, Stability::Memfd);
        assert_eq!(program_of(&step("/tmp/tmp.MD6Szv1a/prog", &["prog"])).stability, Stability::Temporary);
        assert_eq!(program_of(&step("/tmp/build/prog (deleted)", &["prog"])).stability, Stability::Temporary);
        assert_eq!(program_of(&step("/tmp/.mount_FooAppXyZ12/AppRun", &["AppRun"])).stability, Stability::Temporary);
        assert_eq!(
            program_of(&step("/usr/bin/python3", &["python3", "/tmp/tmp.Xy12ab9Q/run.py"])).stability,
            Stability::Temporary
        );
        assert_eq!(program_of(&step("/tmp/build/prog", &["prog"])).stability, Stability::Stable, "a build output is run again");
        assert_eq!(
            program_of(&step("/usr/bin/gimp (deleted)", &["gimp"])).stability,
            Stability::Stable,
            "upgraded, not throwaway"
        );
        assert_eq!(program_of(&step("/usr/bin/python3", &["python3", "/tmp/script.py"])).stability, Stability::Stable);
    }

    #[test]
    fn roles_and_invocations() {
        let p = program_of(&step("/usr/bin/dash", &["/bin/sh", "/usr/bin/xdg-open", "/tmp/x.txt"]));
        assert_eq!(p.role, Some(KnownRole::Launcher));
        assert_eq!(p.invocations[1], vec!["/usr/bin/xdg-open".to_string(), "/tmp/x.txt".into()]);
        assert_eq!(program_of(&step("/usr/bin/dash", &["sh", "-c", "a; b"])).role, Some(KnownRole::PassThrough));
        assert_eq!(program_of(&step("/usr/bin/bash", &["bash", "build.sh"])).role, None);
        assert_eq!(
            program_of(&step("/usr/bin/dbus-launch", &["dbus-launch", "--autolaunch=1f"])).role,
            Some(KnownRole::SessionHelper)
        );
        assert_eq!(program_of(&step("/usr/bin/dbus-launch", &["dbus-launch", "gedit"])).role, Some(KnownRole::PassThrough));
        assert_eq!(program_of(&step("/usr/bin/gio", &["gio", "launch", "a.desktop"])).role, Some(KnownRole::Launcher));
        assert_eq!(program_of(&step("/usr/bin/gio", &["gio", "mount", "-l"])).role, None);
    }
}
