//! The disk throttle of the *slow-disk* machine profile: a block-I/O cgroup that limits reads
//! from the root filesystem's disk (read IOPS and bytes per second), into which the suite moves
//! itself so that every process it starts afterwards (workloads, X server, prefetch daemons)
//! runs under the same limit.
//!
//! cgroup v1 `blkio.throttle.read_{iops,bps}_device` where the blkio controller is mounted
//! (hybrid hierarchies), cgroup v2 `io.max` otherwise. Removal is guaranteed by [`Drop`] and by
//! [`remove_leftovers`] at the next start. It knows nothing about what runs inside.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{BenchError, IoContext, Result};
use augur_os::sense::procfs;

/// Name prefix of the cgroups this module creates; the suffix is the owning process id.
pub const CGROUP_PREFIX: &str = "augur-bench-";

/// Read limits applied to the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DiskThrottle {
    /// Read operations per second.
    pub read_iops: u64,
    /// Read bytes per second.
    pub read_bps: u64,
}

impl Default for DiskThrottle {
    /// A spinning disk: 200 read IOPS, 40 MB/s.
    fn default() -> Self {
        DiskThrottle { read_iops: 200, read_bps: 40_000_000 }
    }
}

/// Which cgroup interface carries the throttle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CgroupVersion {
    /// cgroup v1 blkio controller.
    V1Blkio,
    /// cgroup v2 io controller.
    V2Io,
}

/// A throttled cgroup that this process has moved itself into. Dropping it moves every process
/// still inside back to where this process came from and removes the cgroup.
#[derive(Debug)]
pub struct ThrottledCgroup {
    dir: PathBuf,
    origin: PathBuf,
    /// The interface in use.
    pub version: CgroupVersion,
    /// The disk throttled, as "MAJ:MIN".
    pub device: String,
    /// The limits.
    pub limits: DiskThrottle,
}

impl ThrottledCgroup {
    /// Creates the cgroup, sets the limits on the root filesystem's disk and moves this process
    /// into it.
    pub fn enter(limits: DiskThrottle) -> Result<ThrottledCgroup> {
        Self::enter_on(limits, root_disk()?)
    }

    /// Creates the cgroup, sets the limits on `device` ("MAJ:MIN": the loop device of
    /// `augur-bench boot`'s system image) and moves this process into it.
    pub fn enter_on(limits: DiskThrottle, device: String) -> Result<ThrottledCgroup> {
        let (version, hierarchy) = find_hierarchy()?;
        let origin = hierarchy.join(own_cgroup(version)?.trim_start_matches('/'));
        let dir = hierarchy.join(format!("{CGROUP_PREFIX}{}", std::process::id()));
        if !dir.exists() {
            fs::create_dir(&dir).context(|| format!("creating cgroup {}", dir.display()))?;
        }
        // From here on, Drop removes the directory again whatever fails.
        let cgroup = ThrottledCgroup { dir, origin, version, device: device.clone(), limits };
        match version {
            CgroupVersion::V1Blkio => {
                cgroup.write("blkio.throttle.read_iops_device", &format!("{device} {}", limits.read_iops))?;
                cgroup.write("blkio.throttle.read_bps_device", &format!("{device} {}", limits.read_bps))?;
            }
            CgroupVersion::V2Io => {
                cgroup.write("io.max", &format!("{device} riops={} rbps={}", limits.read_iops, limits.read_bps))?;
            }
        }
        cgroup.write("cgroup.procs", &std::process::id().to_string())?;
        Ok(cgroup)
    }

    fn write(&self, file: &str, value: &str) -> Result<()> {
        let path = self.dir.join(file);
        Ok(fs::write(&path, value).context(|| format!("writing `{value}` to {}", path.display()))?)
    }

    /// The cgroup's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The limits as the kernel reports them back (proof that they are set).
    pub fn read_back(&self) -> String {
        let files: &[&str] = match self.version {
            CgroupVersion::V1Blkio => &["blkio.throttle.read_iops_device", "blkio.throttle.read_bps_device"],
            CgroupVersion::V2Io => &["io.max"],
        };
        files
            .iter()
            .map(|f| fs::read_to_string(self.dir.join(f)).unwrap_or_default().trim().to_string())
            .collect::<Vec<_>>()
            .join("; ")
    }
}

impl Drop for ThrottledCgroup {
    fn drop(&mut self) {
        release(&self.dir, &self.origin);
    }
}

/// Where bytes read from disk are counted for what the suite starts: the throttled cgroup's own
/// counter when there is one (every process the suite starts, and nothing else on the
/// machine: v1 `blkio.throttle.io_service_bytes`, v2 `io.stat` `rbytes`), else the whole
/// root disk (`/sys/dev/block/DEV/stat`), which counts every other program's reads too.
#[derive(Debug, Clone)]
pub enum DiskReadCounter {
    /// The suite's throttled cgroup.
    Cgroup {
        /// Its counter file.
        file: PathBuf,
        /// Which interface.
        version: CgroupVersion,
        /// "MAJ:MIN" of the disk.
        device: String,
    },
    /// The whole disk.
    Disk {
        /// "MAJ:MIN".
        device: String,
    },
}

impl DiskReadCounter {
    /// The counter of `cgroup` when given, else of the root disk.
    pub fn new(cgroup: Option<&ThrottledCgroup>) -> Result<DiskReadCounter> {
        Ok(match cgroup {
            Some(c) => DiskReadCounter::Cgroup {
                file: c.dir.join(match c.version {
                    CgroupVersion::V1Blkio => "blkio.throttle.io_service_bytes",
                    CgroupVersion::V2Io => "io.stat",
                }),
                version: c.version,
                device: c.device.clone(),
            },
            None => DiskReadCounter::Disk { device: root_disk()? },
        })
    }

    /// Bytes read so far.
    pub fn bytes(&self) -> Result<u64> {
        match self {
            DiskReadCounter::Cgroup { file, version, device } => {
                let text = fs::read_to_string(file).context(|| format!("reading {}", file.display()))?;
                Ok(cgroup_read_bytes(&text, *version, device))
            }
            DiskReadCounter::Disk { device } => Ok(crate::page_cache::disk_sectors_read(device)? * 512),
        }
    }

    /// What it counts, for the report.
    pub fn describe(&self) -> String {
        match self {
            DiskReadCounter::Cgroup { file, .. } => format!(
                "the suite's cgroup ({}: the workloads and the prefetcher, nothing else)",
                file.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default()
            ),
            DiskReadCounter::Disk { device } => {
                format!("the whole root disk {device} (/sys/dev/block/{device}/stat: every program on the machine)")
            }
        }
    }
}

/// Bytes read from `device` in a cgroup's counter file: v1 `blkio.throttle.io_service_bytes`
/// ("MAJ:MIN Read N" lines), v2 `io.stat` ("MAJ:MIN rbytes=N ..."). 0 when the device has no
/// line yet (nothing read).
pub fn cgroup_read_bytes(text: &str, version: CgroupVersion, device: &str) -> u64 {
    cgroup_read_counter(text, version, device, "rbytes=")
}

/// Reads from `device` in a cgroup's counter file, as [`cgroup_read_bytes`] parses it: v1 files
/// hold one counter each ("MAJ:MIN Read N" lines: `blkio.throttle.io_service_bytes` bytes,
/// `blkio.throttle.io_serviced` I/Os), v2 `io.stat` holds all of them and `v2_key` (`rbytes=`,
/// `rios=`) says which.
pub fn cgroup_read_counter(text: &str, version: CgroupVersion, device: &str, v2_key: &str) -> u64 {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            if f.next()? != device {
                return None;
            }
            match version {
                CgroupVersion::V1Blkio => (f.next()? == "Read").then(|| f.next()?.parse::<u64>().ok()).flatten(),
                CgroupVersion::V2Io => f.find_map(|kv| kv.strip_prefix(v2_key)?.parse::<u64>().ok()),
            }
        })
        .sum()
}

/// Moves every process in `dir` to `origin`, then removes `dir`.
fn release(dir: &Path, origin: &Path) {
    for _ in 0..20 {
        let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        let mut any = false;
        for pid in procs.split_whitespace() {
            any = true;
            let _ = fs::write(origin.join("cgroup.procs"), pid);
        }
        if fs::remove_dir(dir).is_ok() || !dir.exists() {
            return;
        }
        if !any {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
    tracing::warn!("could not remove cgroup {}", dir.display());
}

/// Removes throttle cgroups left by runs whose process is gone. Returns how many it removed.
pub fn remove_leftovers() -> usize {
    let Ok((version, hierarchy)) = find_hierarchy() else {
        return 0;
    };
    let origin = own_cgroup(version).map(|c| hierarchy.join(c.trim_start_matches('/'))).unwrap_or(hierarchy.clone());
    let mut removed = 0;
    for dir in leftover_candidates(&hierarchy) {
        let owner = dir
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix(CGROUP_PREFIX))
            .and_then(|p| p.parse::<u32>().ok());
        if owner.is_some_and(|p| p != std::process::id() && procfs::is_alive(p)) {
            continue;
        }
        release(&dir, &origin);
        if !dir.exists() {
            removed += 1;
        }
    }
    removed
}

/// Throttle cgroups that exist now, whoever owns them (for checks that cleanup worked).
pub fn existing() -> Vec<PathBuf> {
    match find_hierarchy() {
        Ok((_, hierarchy)) => leftover_candidates(&hierarchy),
        Err(_) => Vec::new(),
    }
}

fn leftover_candidates(hierarchy: &Path) -> Vec<PathBuf> {
    fs::read_dir(hierarchy)
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with(CGROUP_PREFIX)))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// The cgroup hierarchy to use: a mounted v1 blkio controller, else v2 with `io` available.
pub fn find_hierarchy() -> Result<(CgroupVersion, PathBuf)> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").context(|| "reading /proc/self/mountinfo".into())?;
    let mounts = parse_cgroup_mounts(&mountinfo);
    if let Some((_, path)) = mounts.iter().find(|(opts, _)| opts.split(',').any(|o| o == "blkio")) {
        return Ok((CgroupVersion::V1Blkio, PathBuf::from(path)));
    }
    if let Some((_, path)) = mounts.iter().find(|(opts, _)| opts == "cgroup2") {
        let controllers = fs::read_to_string(Path::new(path).join("cgroup.controllers")).unwrap_or_default();
        if controllers.split_whitespace().any(|c| c == "io") {
            let _ = fs::write(Path::new(path).join("cgroup.subtree_control"), "+io");
            return Ok((CgroupVersion::V2Io, PathBuf::from(path)));
        }
    }
    Err(BenchError::kernel(
        "a block-I/O cgroup controller",
        "neither cgroup v1 blkio nor cgroup v2 io is available for the slow-disk profile",
    ))
}

/// (super options or "cgroup2", mount point) of each cgroup mount in mountinfo text.
pub fn parse_cgroup_mounts(mountinfo: &str) -> Vec<(String, String)> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mut r = right.split_whitespace();
            let fstype = r.next()?;
            let _source = r.next()?;
            let super_opts = r.next().unwrap_or("");
            let mount_point = left.split_whitespace().nth(4)?.to_string();
            match fstype {
                "cgroup" => Some((super_opts.to_string(), mount_point)),
                "cgroup2" => Some(("cgroup2".to_string(), mount_point)),
                _ => None,
            }
        })
        .collect()
}

/// This process's cgroup path in the given hierarchy (from /proc/self/cgroup).
fn own_cgroup(version: CgroupVersion) -> Result<String> {
    let text = fs::read_to_string("/proc/self/cgroup").context(|| "reading /proc/self/cgroup".into())?;
    text.lines()
        .find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let matches = match version {
                CgroupVersion::V1Blkio => controllers.split(',').any(|c| c == "blkio"),
                CgroupVersion::V2Io => controllers.is_empty(),
            };
            matches.then(|| path.to_string())
        })
        .ok_or_else(|| BenchError::kernel("/proc/self/cgroup", "no entry for the io controller"))
}

/// "MAJ:MIN" of the whole disk under the root filesystem (a partition is mapped to its disk,
/// since the block throttle applies to disks).
pub fn root_disk() -> Result<String> {
    disk_of(Path::new("/"))
}

/// "MAJ:MIN" of the whole disk under the file system holding `path` (a partition is mapped to
/// its disk).
pub fn disk_of(path: &Path) -> Result<String> {
    let st = rustix::fs::stat(path).map_err(|e| BenchError::io(format!("stat {}", path.display()), e.into()))?;
    let (major, minor) = (rustix::fs::major(st.st_dev), rustix::fs::minor(st.st_dev));
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    if sys.join("partition").exists() {
        if let Ok(dev) = fs::read_to_string(sys.join("../dev")) {
            return Ok(dev.trim().to_string());
        }
    }
    if !sys.exists() {
        return Err(BenchError::kernel(
            "a block device under /",
            format!("{} is on device {major}:{minor}, which is not a block device (tmpfs, overlay?)", path.display()),
        ));
    }
    Ok(format!("{major}:{minor}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_cgroup_mounts() {
        let text = "35 26 0:30 / /sys/fs/cgroup/blkio rw,relatime shared:15 - cgroup cgroup rw,blkio\n\
                    30 26 0:26 / /sys/fs/cgroup/unified rw,relatime shared:10 - cgroup2 cgroup2 rw\n\
                    22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n";
        let m = parse_cgroup_mounts(text);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0], ("rw,blkio".to_string(), "/sys/fs/cgroup/blkio".to_string()));
        assert_eq!(m[1].0, "cgroup2");
    }

    #[test]
    fn cgroup_read_counters() {
        let v1 = "254:0 Read 4096000\n254:0 Write 8192\n254:0 Sync 1\n253:0 Read 7\nTotal 4104193\n";
        assert_eq!(cgroup_read_bytes(v1, CgroupVersion::V1Blkio, "254:0"), 4_096_000);
        let v2 = "254:0 rbytes=1048576 wbytes=0 rios=12 wios=0 dbytes=0 dios=0\n253:0 rbytes=5\n";
        assert_eq!(cgroup_read_bytes(v2, CgroupVersion::V2Io, "254:0"), 1_048_576);
        assert_eq!(cgroup_read_bytes("", CgroupVersion::V2Io, "254:0"), 0);
        assert_eq!(cgroup_read_counter(v2, CgroupVersion::V2Io, "254:0", "rios="), 12);
        let v1_ios = "254:0 Read 250\n254:0 Write 3\nTotal 253\n";
        assert_eq!(cgroup_read_counter(v1_ios, CgroupVersion::V1Blkio, "254:0", "rios="), 250);
    }
}
