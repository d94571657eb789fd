//! Turns the observer's lookup records into the absolute paths of a [`LookupList`]: a record
//! carries the path as the program passed it, so relative paths are joined to the process's
//! working directory (followed through `chdir` records, inherited at fork) or to the directory a
//! descriptor was opened on (followed through successful opens, inherited at fork), and a
//! `getdents64` record names its directory by descriptor only.
//!
//! Pure: records in, lookups out. What cannot be made absolute is counted, never guessed. It does
//! not decide how lookups are replayed (`fetch::lookup`) or which launch they belong to.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use augur_core::model::profile::{LookupKind, LookupList};

use super::record::{LookupSyscall, ObservedEvent};

/// Reads the working directory of a process (by tgid), when it is still there.
pub type CwdReader = fn(u32) -> Option<PathBuf>;

/// The working directories and directory descriptors of the processes of one launch (or of all
/// the launches fed to it: processes are told apart by tgid).
#[derive(Debug, Default)]
pub struct LookupPaths {
    /// The working directory of a process not seen yet (the launch's first process inherits it
    /// from whoever started it); `None` when unknown.
    initial_cwd: Option<PathBuf>,
    /// Where to read `initial_cwd` from when the first lookup needs it (most launches make
    /// none relative to it: reading it at every exec cost the daemon a `readlink` each).
    deferred: Option<(u32, CwdReader)>,
    cwd: HashMap<u32, PathBuf>,
    fds: HashMap<(u32, i32), PathBuf>,
    /// Lookups that could not be made absolute (relative to an unknown directory, truncated, or
    /// a listing of an unknown descriptor).
    pub skipped: u64,
}

fn is_open(syscall: LookupSyscall) -> bool {
    matches!(syscall, LookupSyscall::Open | LookupSyscall::Openat | LookupSyscall::Openat2 | LookupSyscall::Creat)
}

impl LookupPaths {
    /// Follows processes whose first one starts in `initial_cwd`.
    pub fn new(initial_cwd: Option<PathBuf>) -> Self {
        LookupPaths { initial_cwd, ..Default::default() }
    }

    /// Follows processes whose first one, `tgid`, starts in the working directory `read` gives
    /// for it, asked once, when a lookup first needs it.
    pub fn deferred(tgid: u32, read: CwdReader) -> Self {
        LookupPaths { deferred: Some((tgid, read)), ..Default::default() }
    }

    /// Whether `event` makes a path absolute from the working directory of a process that has
    /// none of its own yet (so from the initial one).
    fn needs_initial_cwd(&self, event: &ObservedEvent) -> bool {
        let relative_to_cwd = |tgid: u32, dirfd: Option<i32>, path: &Path| {
            !path.as_os_str().is_empty()
                && !path.is_absolute()
                && matches!(dirfd, None | Some(libc::AT_FDCWD))
                && !self.cwd.contains_key(&tgid)
        };
        match event {
            ObservedEvent::Exec { task, filename, .. } => relative_to_cwd(task.tgid, None, filename),
            // A process leaving the initial directory: read it while it may still be there.
            ObservedEvent::Lookup { task, syscall: LookupSyscall::Chdir, .. } => !self.cwd.contains_key(&task.tgid),
            ObservedEvent::Lookup { task, dirfd, path, truncated: false, .. } => relative_to_cwd(task.tgid, *dirfd, path),
            _ => false,
        }
    }

    fn cwd_of(&self, tgid: u32) -> Option<&Path> {
        self.cwd.get(&tgid).or(self.initial_cwd.as_ref()).map(PathBuf::as_path)
    }

    fn absolute(&self, tgid: u32, dirfd: Option<i32>, path: &Path) -> Option<PathBuf> {
        if path.is_absolute() {
            return Some(path.to_path_buf());
        }
        let base = match dirfd {
            None | Some(libc::AT_FDCWD) => self.cwd_of(tgid)?,
            Some(fd) => self.fds.get(&(tgid, fd))?,
        };
        base.is_absolute().then(|| base.join(path))
    }

    /// Takes one record of a confirmed launch; lookups go into `list`, process records update the
    /// working directories and descriptors.
    pub fn on_event(&mut self, event: &ObservedEvent, list: &mut LookupList) {
        self.on_event_each(event, |path, kind| list.record(path, kind));
    }

    /// As [`on_event`](Self::on_event), but hands the record's lookup (at most one) to `record`
    /// instead of a list (the daemon gives each to the launch its process belongs to).
    pub fn on_event_each(&mut self, event: &ObservedEvent, mut record: impl FnMut(PathBuf, LookupKind)) {
        if self.deferred.is_some()
            && self.needs_initial_cwd(event)
            && let Some((tgid, read)) = self.deferred.take()
        {
            self.initial_cwd = read(tgid);
        }
        match event {
            ObservedEvent::Fork { task, child_tgid, .. } if *child_tgid != task.tgid => {
                // A parent still in the initial directory leaves its child there too.
                if let Some(cwd) = self.cwd.get(&task.tgid).cloned() {
                    self.cwd.insert(*child_tgid, cwd);
                }
                let inherited: Vec<_> =
                    self.fds.iter().filter(|((tgid, _), _)| *tgid == task.tgid).map(|((_, fd), p)| (*fd, p.clone())).collect();
                for (fd, path) in inherited {
                    self.fds.insert((*child_tgid, fd), path);
                }
            }
            // The successful exec has no lookup record (the path's memory is gone by then).
            ObservedEvent::Exec { task, filename, .. } => match self.absolute(task.tgid, None, filename) {
                Some(path) => record(path, LookupKind::Stat),
                None => self.skipped += 1,
            },
            ObservedEvent::Exit { task, .. } => {
                self.cwd.remove(&task.tgid);
                self.fds.retain(|(tgid, _), _| *tgid != task.tgid);
            }
            ObservedEvent::Lookup { task, syscall, ret, dirfd, path, truncated, .. } => {
                if *truncated {
                    self.skipped += 1;
                    return;
                }
                if path.as_os_str().is_empty() {
                    if *syscall == LookupSyscall::Getdents64 {
                        match dirfd.and_then(|fd| self.fds.get(&(task.tgid, fd))) {
                            Some(dir) => record(dir.clone(), LookupKind::Dir),
                            None => self.skipped += 1,
                        }
                    }
                    return; // AT_EMPTY_PATH: a call on the descriptor, no lookup
                }
                let Some(abs) = self.absolute(task.tgid, *dirfd, path) else {
                    self.skipped += 1;
                    return;
                };
                if *ret >= 0 {
                    if is_open(*syscall) {
                        self.fds.insert((task.tgid, *ret as i32), abs.clone());
                    } else if *syscall == LookupSyscall::Chdir {
                        self.cwd.insert(task.tgid, abs.clone());
                    }
                }
                let kind = match -*ret {
                    e if e == i64::from(libc::ENOENT) || e == i64::from(libc::ENOTDIR) => LookupKind::Missing,
                    _ => LookupKind::Stat,
                };
                record(abs, kind);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use augur_core::model::profile::{InodeKey, Lookup};

    use super::*;
    use crate::sense::bpf::record::TaskContext;

    fn task(tgid: u32) -> TaskContext {
        TaskContext { tid: tgid, tgid, ts_ns: 0, launch: 1 }
    }

    fn lookup(tgid: u32, syscall: LookupSyscall, ret: i64, dirfd: Option<i32>, path: &str) -> ObservedEvent {
        ObservedEvent::Lookup {
            task: task(tgid),
            syscall,
            ret,
            dirfd,
            flags: 0,
            path: path.into(),
            truncated: false,
            opened: None,
        }
    }

    fn l(path: &str, kind: LookupKind) -> Lookup {
        Lookup { path: path.into(), kind }
    }

    #[test]
    fn relative_paths_follow_cwd_chdir_fork_and_descriptors() {
        let mut paths = LookupPaths::new(Some("/home/u".into()));
        let mut list = LookupList::new();
        let at = Some(libc::AT_FDCWD);
        let events = [
            lookup(5, LookupSyscall::Access, -2, None, "/etc/ld.so.preload"),
            lookup(5, LookupSyscall::Newfstatat, -20, at, "notes/x"),
            lookup(5, LookupSyscall::Openat, 3, at, "/usr/share"),
            lookup(5, LookupSyscall::Getdents64, 40, Some(3), ""),
            lookup(5, LookupSyscall::Chdir, 0, None, "/srv"),
            ObservedEvent::Fork { task: task(5), child_tid: 6, child_tgid: 6 },
            lookup(6, LookupSyscall::Openat, 4, Some(3), "doc"),
            lookup(6, LookupSyscall::Stat, 0, None, "data"),
            lookup(6, LookupSyscall::Getdents64, 40, Some(9), ""),
            lookup(6, LookupSyscall::Newfstatat, 0, Some(4), ""),
            ObservedEvent::Exec {
                task: task(6),
                old_tid: 6,
                parent_tgid: 5,
                exe: InodeKey { dev: 1, ino: 1 },
                new_launch: false,
                comm: "tool".into(),
                filename: "bin/tool".into(),
                interp: "bin/tool".into(),
                creds: Default::default(),
                args: b"bin/tool\0".to_vec(),
                args_cut: false,
            },
        ];
        for e in &events {
            paths.on_event(e, &mut list);
        }
        assert_eq!(
            list.finish(),
            vec![
                l("/etc/ld.so.preload", LookupKind::Missing),
                l("/home/u/notes/x", LookupKind::Missing),
                l("/usr/share", LookupKind::Dir),
                l("/srv", LookupKind::Stat),
                l("/usr/share/doc", LookupKind::Stat),
                l("/srv/data", LookupKind::Stat),
                l("/srv/bin/tool", LookupKind::Stat),
            ]
        );
        assert_eq!(paths.skipped, 1, "the listing of an unknown descriptor");
    }

    #[test]
    fn without_a_known_directory_relative_paths_are_skipped() {
        let mut paths = LookupPaths::new(None);
        let mut list = LookupList::new();
        paths.on_event(&lookup(5, LookupSyscall::Stat, 0, None, "rel"), &mut list);
        let truncated = ObservedEvent::Lookup {
            task: task(5),
            syscall: LookupSyscall::Stat,
            ret: 0,
            dirfd: None,
            flags: 0,
            path: "/a".into(),
            truncated: true,
            opened: None,
        };
        paths.on_event(&truncated, &mut list);
        assert!(list.is_empty());
        assert_eq!(paths.skipped, 2);
    }

    static CWD_READS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

    fn home_of(tgid: u32) -> Option<PathBuf> {
        assert_eq!(tgid, 5, "the launch's first process");
        CWD_READS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some("/home/u".into())
    }

    #[test]
    fn the_initial_directory_is_read_once_and_only_when_a_lookup_needs_it() {
        let mut paths = LookupPaths::deferred(5, home_of);
        let mut list = LookupList::new();
        let at = Some(libc::AT_FDCWD);
        paths.on_event(&lookup(5, LookupSyscall::Openat, 3, at, "/usr/share"), &mut list);
        paths.on_event(&ObservedEvent::Fork { task: task(5), child_tid: 6, child_tgid: 6 }, &mut list);
        paths.on_event(&lookup(6, LookupSyscall::Openat, 4, Some(3), "doc"), &mut list);
        assert_eq!(CWD_READS.load(std::sync::atomic::Ordering::Relaxed), 0, "no lookup relative to it yet");
        paths.on_event(&lookup(6, LookupSyscall::Stat, 0, at, "notes"), &mut list);
        paths.on_event(&lookup(5, LookupSyscall::Stat, 0, None, "data"), &mut list);
        assert_eq!(CWD_READS.load(std::sync::atomic::Ordering::Relaxed), 1);
        assert_eq!(
            list.finish(),
            vec![
                l("/usr/share", LookupKind::Stat),
                l("/usr/share/doc", LookupKind::Stat),
                l("/home/u/notes", LookupKind::Stat),
                l("/home/u/data", LookupKind::Stat),
            ]
        );
        // A chdir reads it first: the process may be about to leave it.
        let mut paths = LookupPaths::deferred(5, home_of);
        paths.on_event(&lookup(5, LookupSyscall::Chdir, 0, None, "/srv"), &mut LookupList::new());
        assert_eq!(CWD_READS.load(std::sync::atomic::Ordering::Relaxed), 2);
    }
}
