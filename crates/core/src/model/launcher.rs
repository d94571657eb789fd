//! Which exec of a launch is the application, decided as the launch's process events arrive, and
//! whether that identity may be learned.
//!
//! A launch starts with one exec and grows by forks and execs of its processes. Its application
//! starts as that first program and is re-keyed when the evidence says the current one only
//! started another:
//!
//! 1. **exec-through**: the application's own process execs another program (`env`, `nice`,
//!    `sudo`'s or `pkexec`'s in-place exec, `sh -c 'exec x'`, a `exec "$@"` script, `flatpak` →
//!    `bwrap`, snap's chain). The new program is the application.
//! 2. **payload**: a child of the application execs a command the application's command line
//!    carries: the tail of its argv (`timeout 10 CMD`, `dbus-run-session -- CMD`, `firejail CMD`,
//!    a script that runs `"$@"`) or a simple command of a shell string (`sh -c 'a; b'`,
//!    `su -c 'CMD'`). Later payload children of the same wrapper replace it when they use more
//!    pages (`sh -c 'sleep 1; gimp'`).
//! 3. **dominance**: a program forked by the application that uses at least [`DOMINANT_MIN_PAGES`]
//!    new pages and [`DOMINANCE_FACTOR`] times the application's, and was given the application's
//!    arguments (`oosplash --writer` → `soffice.bin --writer --splash-pipe=5`). Below a known
//!    launcher (`xdg-open`, `gtk-launch`, `gio launch`) the first descendant (session helpers
//!    aside) to reach [`DOMINANT_MIN_PAGES`] is taken, whatever the launcher itself used; and
//!    the command a pass-through descendant of the launcher carries is taken at its exec
//!    (`gio-launch-desktop CMD`, GLib's step between a launcher and a desktop file's Exec line).
//! 4. **expected**: a program a previous launch of the same launcher found by dominance (see
//!    [`Hint`]) is taken as soon as it is exec'd, so its profile is replayed at its exec.
//! 5. **adopted**: a process outside the launch's tree (started by PID 1 for `systemd-run`) that
//!    execs the command a known wrapper carries, shortly after the launch started.
//!
//! A memfd or throwaway executable ([`Stability`]) can be the application by rules 1 and 2 (`sudo
//! /tmp/tmp.X/installer`); the launch is then not learned. It is never taken by dominance (an
//! AppImage's runtime stays the application over its `/tmp/.mount_*/AppRun`), and a program that
//! re-executes itself from a memfd (same argv, runc-style) stays the application. No rule re-keys a
//! launch to a session helper (dbus-daemon, at-spi). A known wrapper or launcher that is still the application when the
//! launch ends after starting something else is not learned either (its application was not seen).
//!
//! Pure: it is handed what the proc connector and `/proc` said and the pages each process used;
//! no I/O, no clock. It must not decide which processes belong to the launch (the tracker's
//! pid→launch map does) nor keep pages: a re-key changes the name the launch is learned under,
//! and everything the launch used before it stays with the launch.

pub mod command;
pub mod migration;
pub mod program;

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::model::app::AppIdentity;
use crate::model::user::ProcessUser;
use command::carries;
pub use program::{
    ExecStep, KnownRole, Program, Stability, loader_program, program_of, program_uses_cwd, starts_only_its_application,
};

/// Fewest new pages (16 MiB) a forked program must use to be taken for the application by
/// dominance: below that it is a helper (`file`, `xprop`, `dbus-daemon`).
pub const DOMINANT_MIN_PAGES: u64 = 4096;
/// How many times the application's pages a forked program must use to be taken for it.
pub const DOMINANCE_FACTOR: u64 = 4;
/// How long after a launch started a process outside its tree may still be its payload.
pub const ADOPT_WINDOW_NS: u64 = 2_000_000_000;

/// Why the application is the program it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Choice {
    /// It is the launch's first program.
    Start,
    /// The previous application exec'd it in place.
    Exec,
    /// The previous application carried its command.
    Payload,
    /// It used most of the launch's pages, given the previous application's arguments.
    Dominant,
    /// A hint from an earlier launch named it.
    Expected,
    /// Started outside the launch's tree with the command the previous application carried.
    Adopted,
}

/// What an exec meant for the launch's identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The launch is now of this application (replay its profile; pages so far stay).
    Rekeyed { key: String, why: Choice },
    /// A helper of the launch: the application does not change.
    Helper,
}

/// Why a launch must not be learned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NotLearnable {
    /// The application's executable is a memfd or a throwaway file.
    Ephemeral(Stability),
    /// A known wrapper or launcher is still the application although it started other programs:
    /// the program that did the work was not seen (D-Bus activated, started by PID 1 too late).
    WrapperOnly,
}

/// A launcher's learned successor: the next launch of `launcher_key` with `launcher_argv` expects
/// `app_key` (the daemon keeps these beside the profiles and calls [`LaunchIdentity::expect`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hint {
    pub launcher_key: String,
    pub launcher_argv: Vec<String>,
    pub app_key: String,
}

/// The decision when the launch's window closed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The application the launch is learned under.
    pub app: AppIdentity,
    /// How it was chosen.
    pub chosen_by: Choice,
    /// Why it must not be learned, if so.
    pub not_learnable: Option<NotLearnable>,
    /// Hints for the next launch of the same launcher, when dominance chose the application: one
    /// for the launcher and one for each program its process ran before it (`libreoffice`'s
    /// script before `oosplash`), so the next launch expects the application from its first exec.
    pub hints: Vec<Hint>,
}

/// How a node's process came to run it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Via {
    Root,
    /// Its process ran the parent node before (same pid).
    Exec,
    /// Its process was forked from one running the parent node.
    Fork,
    /// Started outside the tree (see [`Choice::Adopted`]).
    Outside,
}

/// One exec of the launch.
#[derive(Debug)]
struct Node {
    program: Program,
    /// The user the program is learned for (see [`LaunchIdentity::on_exec`]).
    user: ProcessUser,
    pid: u32,
    parent: Option<usize>,
    via: Via,
    /// Pages new to the launch this program used.
    pages: u64,
}

/// The identity of one launch in progress.
#[derive(Debug)]
pub struct LaunchIdentity {
    nodes: Vec<Node>,
    /// Which node each task (pid or tid) runs now.
    running: HashMap<u32, usize>,
    app: usize,
    chosen_by: Choice,
    /// Wrappers seen through by their payload: their later payload children may compete.
    wrappers: Vec<usize>,
    /// Payload children of a seen-through wrapper that are not (yet) the application.
    contenders: Vec<usize>,
    /// The application before dominance chose another (it is the hint's launcher).
    before_dominance: Option<usize>,
    expected: Option<String>,
    started_ns: u64,
}

impl LaunchIdentity {
    /// A launch starts: `step` is an exec of a process outside every launch, at `now_ns`.
    pub fn start(step: &ExecStep, now_ns: u64) -> Self {
        let node =
            Node { program: program_of(step), user: step.user.clone(), pid: step.pid, parent: None, via: Via::Root, pages: 0 };
        LaunchIdentity {
            nodes: vec![node],
            running: HashMap::from([(step.pid, 0)]),
            app: 0,
            chosen_by: Choice::Start,
            wrappers: Vec::new(),
            contenders: Vec::new(),
            before_dominance: None,
            expected: None,
            started_ns: now_ns,
        }
    }

    /// The application as decided so far.
    pub fn app(&self) -> &AppIdentity {
        &self.nodes[self.app].program.identity
    }

    /// The process that runs (or last ran) the application: the launch's instance for the
    /// running-apps view, and the process whose re-exec relabels the launch.
    pub fn app_pid(&self) -> u32 {
        self.nodes[self.app].pid
    }

    /// The user the application as decided so far is learned for (its key is that user's): its
    /// exec-time replay reads only files this user may read.
    pub fn app_user(&self) -> &ProcessUser {
        &self.nodes[self.app].user
    }

    /// Whether the application as decided so far could be learned under its key (not a memfd
    /// or throwaway executable): the daemon replays and follows-by-key only such applications.
    pub fn app_stable(&self) -> bool {
        self.nodes[self.app].program.stability == Stability::Stable
    }

    /// True while the application is a known wrapper or launcher that has not handed off yet:
    /// the daemon should not report an application launch (or replay a profile) for it yet.
    pub fn provisional(&self) -> bool {
        matches!(self.nodes[self.app].program.role, Some(KnownRole::PassThrough | KnownRole::Launcher))
    }

    /// Execs recorded so far (each keeps its program's command line).
    pub fn exec_count(&self) -> usize {
        self.nodes.len()
    }

    /// How the application was chosen.
    pub fn chosen_by(&self) -> Choice {
        self.chosen_by
    }

    /// The application's key and argv, to look a [`Hint`] up with.
    pub fn hint_lookup(&self) -> (&str, &[String]) {
        let p = &self.nodes[self.app].program;
        (&p.identity.key, &p.argv)
    }

    /// An earlier launch of the current application found `app_key` by dominance: take it as
    /// soon as a descendant execs it.
    pub fn expect(&mut self, app_key: String) {
        self.expected = Some(app_key);
    }

    /// Task `parent` of the launch created `child` (a process or a thread).
    pub fn on_fork(&mut self, parent: u32, child: u32) {
        if let Some(&n) = self.running.get(&parent) {
            self.running.insert(child, n);
        }
    }

    /// Task `pid` exited.
    pub fn on_exit(&mut self, pid: u32) {
        self.running.remove(&pid);
    }

    /// A process of the launch exec'd. A launch a user other than root started stays that
    /// user's whatever its programs run as (`sudo CMD`: CMD is learned as the user's, never as
    /// root's, and only replayed with files the user may read); a launch root started is
    /// learned for the user its application runs as (`su USER -c CMD`: the user's).
    pub fn on_exec(&mut self, step: &ExecStep) -> Verdict {
        let (parent, via) = match self.running.get(&step.pid) {
            Some(&p) if self.nodes[p].pid == step.pid => (Some(p), Via::Exec),
            Some(&p) => (Some(p), Via::Fork),
            None => (None, Via::Fork),
        };
        let n = self.push(step, parent, via);
        let program = &self.nodes[n].program;
        let helper = program.role == Some(KnownRole::SessionHelper);
        let from_app = parent == Some(self.app);
        if program.stability != Stability::Stable
            && via == Via::Exec
            && from_app
            && self.nodes[self.app].program.argv == program.argv
        {
            // The application re-executes itself from a memfd or a temporary copy: it stays.
            return Verdict::Helper;
        }
        if self.expected.as_deref() == Some(program.identity.key.as_str()) && self.descends(n, self.app) {
            return self.rekey(n, Choice::Expected);
        }
        if from_app && via == Via::Exec {
            return self.rekey(n, Choice::Exec);
        }
        if from_app && !helper && self.carried_by(self.app, n) {
            return self.rekey(n, Choice::Payload);
        }
        // Below `gio launch` or `gtk-launch`, the first program other than a session helper or a
        // wrapper is the application, however few pages it uses: they start nothing else. (The
        // daemon may see gio-launch-desktop's exec already as the program it exec'd.)
        if !helper
            && starts_only_its_application(&self.nodes[self.app].program)
            && self.descends(n, self.app)
            && !matches!(self.nodes[n].program.role, Some(KnownRole::PassThrough | KnownRole::Launcher))
        {
            return self.rekey(n, Choice::Payload);
        }
        // Below a known launcher, the command a pass-through descendant carries is the
        // application, however few pages it uses (`gio launch x.desktop` → gio-launch-desktop →
        // the desktop file's Exec line).
        if let Some(p) = parent
            && !helper
            && self.nodes[self.app].program.role == Some(KnownRole::Launcher)
            && self.nodes[p].program.role == Some(KnownRole::PassThrough)
            && p != self.app
            && self.descends(p, self.app)
            && self.carried_by(p, n)
        {
            return self.rekey(n, Choice::Payload);
        }
        match parent {
            // A contender exec'ing in place stays a contender (`sh -c` child → its program).
            Some(p) if via == Via::Exec && self.contenders.contains(&p) => {
                self.contenders.retain(|&c| c != p);
                self.contenders.push(n);
            }
            Some(p) if !helper && self.wrappers.contains(&p) && self.carried_by(p, n) => self.contenders.push(n),
            _ => {}
        }
        Verdict::Helper
    }

    /// Task `pid` of the launch used `new_pages` pages new to the launch.
    pub fn on_pages(&mut self, pid: u32, new_pages: u64) -> Option<Verdict> {
        let &n = self.running.get(&pid)?;
        self.nodes[n].pages += new_pages;
        if n == self.app {
            return None;
        }
        let node = &self.nodes[n];
        if node.program.role == Some(KnownRole::SessionHelper) {
            return None;
        }
        let app_pages = self.nodes[self.app].pages;
        if self.contenders.contains(&n) && node.pages > app_pages {
            self.contenders.retain(|&c| c != n);
            return Some(self.rekey(n, Choice::Payload));
        }
        if node.pages < DOMINANT_MIN_PAGES || node.program.stability != Stability::Stable {
            return None;
        }
        // A known launcher's own pages say nothing (gtk-launch loads GTK to read a desktop file).
        let launcher = self.nodes[self.app].program.role == Some(KnownRole::Launcher) && self.descends(n, self.app);
        let direct = node.pages >= DOMINANCE_FACTOR.saturating_mul(app_pages)
            && self.forked_from(n) == Some(self.app)
            && self.given_the_arguments(n);
        if direct || launcher {
            self.before_dominance = Some(self.app);
            return Some(self.rekey(n, Choice::Dominant));
        }
        None
    }

    /// A process outside every launch's tree exec'd at `now_ns`: if this launch's application is
    /// a known wrapper or launcher that carries the command, the launch started at most
    /// [`ADOPT_WINDOW_NS`] ago and nothing of it ran the command yet, that process is this
    /// launch's application (`systemd-run CMD`: PID 1 starts CMD). The tracker then maps
    /// `step.pid` to this launch. The known list is needed here: no process tree links the two.
    pub fn adopt(&mut self, step: &ExecStep, now_ns: u64) -> Option<Verdict> {
        let app = &self.nodes[self.app].program;
        let wrapper = matches!(app.role, Some(KnownRole::PassThrough | KnownRole::Launcher));
        let not_handed_off = matches!(self.chosen_by, Choice::Start | Choice::Exec);
        if !wrapper || !not_handed_off || now_ns.saturating_sub(self.started_ns) > ADOPT_WINDOW_NS {
            return None;
        }
        // A process of another user is never taken into a launch: it would learn that user's
        // pages under this launch's key, or this launch's under that user's.
        if step.user.uid != self.nodes[self.app].user.uid {
            return None;
        }
        let program = program_of(step);
        let carried = program.invocations.iter().any(|inv| inv != &app.argv && carries(&app.carried, inv));
        if program.stability != Stability::Stable || !carried {
            return None;
        }
        let n = self.push(step, Some(self.app), Via::Outside);
        Some(self.rekey(n, Choice::Adopted))
    }

    /// The decision, when the launch's window closed.
    pub fn finish(&self) -> Outcome {
        let app = &self.nodes[self.app];
        let started_others = self.nodes.iter().enumerate().any(|(i, _)| i != self.app && self.descends(i, self.app));
        let not_learnable = if app.program.stability != Stability::Stable {
            Some(NotLearnable::Ephemeral(app.program.stability))
        } else if matches!(app.program.role, Some(KnownRole::PassThrough | KnownRole::Launcher)) && started_others {
            Some(NotLearnable::WrapperOnly)
        } else {
            None
        };
        let mut hints = Vec::new();
        let mut launcher = self.before_dominance.filter(|_| self.chosen_by == Choice::Dominant);
        while let Some(l) = launcher {
            let node = &self.nodes[l];
            if node.program.stability == Stability::Stable {
                hints.push(Hint {
                    launcher_key: node.program.identity.key.clone(),
                    launcher_argv: node.program.argv.clone(),
                    app_key: app.program.identity.key.clone(),
                });
            }
            launcher = node.parent.filter(|_| node.via == Via::Exec);
        }
        Outcome { app: app.program.identity.clone(), chosen_by: self.chosen_by, not_learnable, hints }
    }

    /// The user an exec of this launch is learned for: the user who started the launch when
    /// that is not root, else the user the exec runs as.
    fn launch_user(&self, step: &ExecStep) -> ProcessUser {
        match self.nodes.first() {
            Some(starter) if !starter.user.is_root() => starter.user.clone(),
            _ => step.user.clone(),
        }
    }

    fn push(&mut self, step: &ExecStep, parent: Option<usize>, via: Via) -> usize {
        let user = self.launch_user(step);
        let program =
            if user == step.user { program_of(step) } else { program_of(&ExecStep { user: user.clone(), ..step.clone() }) };
        self.nodes.push(Node { program, user, pid: step.pid, parent, via, pages: 0 });
        let n = self.nodes.len() - 1;
        self.running.insert(step.pid, n);
        n
    }

    fn rekey(&mut self, n: usize, why: Choice) -> Verdict {
        if why == Choice::Payload && !self.wrappers.contains(&self.app) && self.nodes[n].parent == Some(self.app) {
            self.wrappers.push(self.app);
        }
        self.app = n;
        self.chosen_by = why;
        Verdict::Rekeyed { key: self.nodes[n].program.identity.key.clone(), why }
    }

    /// Whether node `a`'s command line carries node `n`'s command.
    fn carried_by(&self, a: usize, n: usize) -> bool {
        let carried = &self.nodes[a].program.carried;
        self.nodes[n].program.invocations.iter().any(|inv| carries(carried, inv))
    }

    /// Whether `n` is `ancestor` or runs in a process descending from one that ran it.
    fn descends(&self, mut n: usize, ancestor: usize) -> bool {
        loop {
            if n == ancestor {
                return true;
            }
            match self.nodes[n].parent {
                Some(p) => n = p,
                None => return false,
            }
        }
    }

    /// The program whose process forked `n`'s process (exec'd predecessors in the same process
    /// are skipped).
    fn forked_from(&self, mut n: usize) -> Option<usize> {
        loop {
            let node = &self.nodes[n];
            match node.via {
                Via::Exec => n = node.parent?,
                Via::Fork => return node.parent,
                Via::Root | Via::Outside => return None,
            }
        }
    }

    /// Whether `n` was given every argument of the application's command (`oosplash --writer`
    /// → `soffice.bin --writer ...`). For an application without arguments: whether `n` was
    /// given options only (`oosplash` → `soffice.bin --splash-pipe=5`; a script's `cat FILES`
    /// works for the script and is not the application) and is the only program it forked that
    /// reached [`DOMINANT_MIN_PAGES`] (a build tool's jobs are many).
    fn given_the_arguments(&self, n: usize) -> bool {
        let args = &self.nodes[self.app].program.args;
        if !args.is_empty() {
            let child_args = self.nodes[n].program.argv.get(1..).unwrap_or(&[]);
            return args.iter().all(|a| child_args.contains(a));
        }
        if !self.nodes[n].program.args.iter().all(|a| a.starts_with('-')) {
            return false;
        }
        !self.nodes.iter().enumerate().any(|(i, node)| {
            i != n && node.pages >= DOMINANT_MIN_PAGES && self.forked_from(i) == Some(self.app) && !self.descends(n, i)
        })
    }
}

#[cfg(test)]
mod tests;
