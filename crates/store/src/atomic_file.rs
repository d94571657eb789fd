//! Writing a file so that readers (and a crash) see either its old content or its complete new
//! content, and nobody's symbolic link can redirect the write: the one way augur writes a file
//! (profiles, exported and generated traces, man pages and completions).
//!
//! The new content goes to a fresh temporary file beside the target, created with
//! `O_CREAT | O_EXCL | O_NOFOLLOW` under a name nobody can predict (a name that exists, a planted
//! symbolic link included, is never opened: another is chosen), is flushed to disk (`fsync`),
//! renamed over the target (a rename replaces a symbolic link at the target, never follows it),
//! and the directory is flushed so that the rename itself survives a crash. A failure removes the
//! temporary file and leaves the target as it was.
//!
//! It does not write the SQLite state, whose own journal does this job.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Temporary names tried before giving up (each one is new and unpredictable, so more than one
/// is only needed when someone plants files on purpose).
const MAX_ATTEMPTS: u32 = 16;

/// A file being written; it replaces its target only at [`AtomicFile::commit`]. Dropped without
/// a commit, it removes its temporary file and the target keeps its old content.
#[derive(Debug)]
pub struct AtomicFile {
    file: File,
    tmp: PathBuf,
    target: PathBuf,
    committed: bool,
}

/// Writes `bytes` to `path` atomically; a created file gets `mode` (less the umask).
pub fn write_atomically(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let mut f = AtomicFile::create(path, mode)?;
    f.write_all(bytes)?;
    f.commit()
}

impl AtomicFile {
    /// Starts writing a new version of `path`; the file gets `mode` (less the umask).
    pub fn create(path: &Path, mode: u32) -> io::Result<AtomicFile> {
        let mut last = None;
        for _ in 0..MAX_ATTEMPTS {
            let tmp = temporary_name(path)?;
            match Self::create_at(path, &tmp, mode) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                other => return other,
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no temporary name could be created")))
    }

    /// Starts writing `path` through the temporary file `tmp`, which must not exist.
    fn create_at(path: &Path, tmp: &Path, mode: u32) -> io::Result<AtomicFile> {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(tmp)?;
        Ok(AtomicFile { file, tmp: tmp.to_path_buf(), target: path.to_path_buf(), committed: false })
    }

    /// Flushes the new content to disk and puts it in place of the target.
    pub fn commit(mut self) -> io::Result<()> {
        self.file.flush()?;
        self.file.sync_all()?;
        fs::rename(&self.tmp, &self.target)?;
        self.committed = true;
        sync_directory(&self.target)
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// A new temporary name beside `path`: `.NAME.PID.NANOS.COUNT.tmp`.
fn temporary_name(path: &Path) -> io::Result<PathBuf> {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name to write"))?;
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let mut tmp = std::ffi::OsString::from(".");
    tmp.push(name);
    tmp.push(format!(".{}.{nanos:08x}.{}.tmp", std::process::id(), COUNT.fetch_add(1, Ordering::Relaxed)));
    Ok(path.with_file_name(tmp))
}

/// Flushes the directory holding `path`, so a rename in it survives a crash.
fn sync_directory(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_replaces_the_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.json");
        fs::write(&path, b"old").unwrap();
        write_atomically(&path, b"new", 0o600).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1, "only the target is left");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn a_symlink_planted_at_the_target_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, b"precious").unwrap();
        let path = dir.path().join("out");
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        write_atomically(&path, b"new", 0o644).unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
        assert!(fs::symlink_metadata(&path).unwrap().file_type().is_file());
        assert_eq!(fs::read(&path).unwrap(), b"new");
    }

    #[test]
    fn a_symlink_planted_at_the_temporary_name_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, b"precious").unwrap();
        let path = dir.path().join("out");
        let tmp = temporary_name(&path).unwrap();
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        let err = AtomicFile::create_at(&path, &tmp, 0o644).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        // A dangling link too (O_EXCL never follows; O_NOFOLLOW on top of it).
        let dangling = dir.path().join(".out.dangling.tmp");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
        assert!(AtomicFile::create_at(&path, &dangling, 0o644).is_err());
        assert!(!dir.path().join("nowhere").exists());
        // The public path picks another name and succeeds.
        write_atomically(&path, b"new", 0o644).unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
        assert_eq!(fs::read(&path).unwrap(), b"new");
    }

    #[test]
    fn a_crash_before_the_rename_leaves_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        fs::write(&path, b"old").unwrap();
        let mut f = AtomicFile::create(&path, 0o644).unwrap();
        f.write_all(b"half of the new").unwrap();
        // A crash runs no destructor: the temporary file stays, the target is untouched.
        std::mem::forget(f);
        assert_eq!(fs::read(&path).unwrap(), b"old");
        // An error (a drop without commit) removes the temporary file too.
        let mut f = AtomicFile::create(&path, 0o644).unwrap();
        f.write_all(b"new").unwrap();
        drop(f);
        assert_eq!(fs::read(&path).unwrap(), b"old");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2, "the target and the crashed write's temporary");
    }

    #[test]
    fn temporary_names_differ_and_stay_beside_the_target() {
        let a = temporary_name(Path::new("/x/y/out")).unwrap();
        let b = temporary_name(Path::new("/x/y/out")).unwrap();
        assert_ne!(a, b);
        assert_eq!(a.parent(), Some(Path::new("/x/y")));
        assert!(a.file_name().unwrap().to_str().unwrap().starts_with(".out."));
        assert!(temporary_name(Path::new("/")).is_err());
    }
}
