//! What kind of machine augur runs on, as sysfs says: whether it runs on battery now, and whether
//! the disk holding a file is rotational, with its name.
//!
//! It reads sysfs (under a root given for tests) and reports; it must not decide how much to
//! prefetch on battery or on a fast disk (the prediction step's cost model does).

use std::fs;
use std::path::{Path, PathBuf};

/// Where the machine's power comes from now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PowerSource {
    /// Mains power, or no power supply reported at all (a desktop, a server, a VM).
    Mains,
    /// A battery discharging, with no mains supply online.
    Battery,
}

/// The disk a file lives on.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DiskKind {
    /// The whole disk's kernel name (`sda`, `nvme0n1`, `vda`).
    pub name: String,
    /// What `queue/rotational` says (virtual disks often say 1 whatever backs them).
    pub rotational: bool,
}

/// The power source, from `/sys/class/power_supply`.
pub fn power_source() -> PowerSource {
    power_source_in(Path::new("/sys/class/power_supply"))
}

/// The power source, from the power-supply class directory `dir`: on battery when a battery
/// reports "Discharging" and no mains (or USB) supply is online.
pub fn power_source_in(dir: &Path) -> PowerSource {
    let Ok(entries) = fs::read_dir(dir) else { return PowerSource::Mains };
    let mut discharging = false;
    let mut mains_online = false;
    for e in entries.flatten() {
        let p = e.path();
        let read = |name: &str| fs::read_to_string(p.join(name)).map(|s| s.trim().to_string()).unwrap_or_default();
        match read("type").as_str() {
            "Battery" => discharging |= read("status") == "Discharging",
            "Mains" | "USB" | "USB_C" | "USB_PD" => mains_online |= read("online") == "1",
            _ => {}
        }
    }
    if discharging && !mains_online { PowerSource::Battery } else { PowerSource::Mains }
}

/// The disk holding `path`, from `/sys/dev/block`; `None` when it cannot be told (a network or
/// virtual file system, no sysfs).
pub fn disk_of(path: &Path) -> Option<DiskKind> {
    let dev = rustix::fs::stat(path).ok()?.st_dev;
    disk_of_device(Path::new("/sys"), rustix::fs::major(dev), rustix::fs::minor(dev))
}

/// The disk of block device `major:minor` under sysfs root `sys`: the device itself, or the
/// disk a partition belongs to.
pub fn disk_of_device(sys: &Path, major: u32, minor: u32) -> Option<DiskKind> {
    let link = sys.join(format!("dev/block/{major}:{minor}"));
    let device: PathBuf = fs::canonicalize(&link).ok()?;
    // A partition has no queue of its own: its parent directory is the disk.
    let disk = if device.join("partition").exists() { device.parent()?.to_path_buf() } else { device };
    let rotational = fs::read_to_string(disk.join("queue/rotational")).ok()?.trim() == "1";
    let name = disk.file_name()?.to_string_lossy().into_owned();
    Some(DiskKind { name, rotational })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn supply(dir: &Path, name: &str, files: &[(&str, &str)]) {
        let d = dir.join(name);
        fs::create_dir_all(&d).unwrap();
        for (f, v) in files {
            fs::write(d.join(f), format!("{v}\n")).unwrap();
        }
    }

    #[test]
    fn on_battery_only_when_discharging_without_mains() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(power_source_in(&dir.path().join("none")), PowerSource::Mains, "no power-supply class");
        assert_eq!(power_source_in(dir.path()), PowerSource::Mains, "no supply: a desktop or a VM");
        supply(dir.path(), "BAT0", &[("type", "Battery"), ("status", "Discharging")]);
        assert_eq!(power_source_in(dir.path()), PowerSource::Battery);
        supply(dir.path(), "AC", &[("type", "Mains"), ("online", "0")]);
        assert_eq!(power_source_in(dir.path()), PowerSource::Battery, "the charger is unplugged");
        supply(dir.path(), "AC", &[("type", "Mains"), ("online", "1")]);
        assert_eq!(power_source_in(dir.path()), PowerSource::Mains);
        supply(dir.path(), "AC", &[("type", "Mains"), ("online", "0")]);
        supply(dir.path(), "BAT0", &[("type", "Battery"), ("status", "Charging")]);
        assert_eq!(power_source_in(dir.path()), PowerSource::Mains);
    }

    #[test]
    fn a_partition_s_disk_is_its_parent() {
        let sys = tempfile::tempdir().unwrap();
        let disk = sys.path().join("devices/pci0/block/sda");
        fs::create_dir_all(disk.join("queue")).unwrap();
        fs::write(disk.join("queue/rotational"), "1\n").unwrap();
        fs::create_dir_all(disk.join("sda2")).unwrap();
        fs::write(disk.join("sda2/partition"), "2\n").unwrap();
        let nvme = sys.path().join("devices/pci1/nvme/nvme0n1");
        fs::create_dir_all(nvme.join("queue")).unwrap();
        fs::write(nvme.join("queue/rotational"), "0\n").unwrap();
        fs::create_dir_all(sys.path().join("dev/block")).unwrap();
        std::os::unix::fs::symlink(disk.join("sda2"), sys.path().join("dev/block/8:2")).unwrap();
        std::os::unix::fs::symlink(&nvme, sys.path().join("dev/block/259:0")).unwrap();
        assert_eq!(disk_of_device(sys.path(), 8, 2), Some(DiskKind { name: "sda".into(), rotational: true }));
        assert_eq!(disk_of_device(sys.path(), 259, 0), Some(DiskKind { name: "nvme0n1".into(), rotational: false }));
        assert_eq!(disk_of_device(sys.path(), 1, 1), None);
    }

    #[test]
    fn this_machine_s_root_disk_is_told_or_not_without_error() {
        // Whatever the machine: no panic, and a name when there is a disk.
        if let Some(d) = disk_of(Path::new("/")) {
            assert!(!d.name.is_empty());
        }
        let _ = power_source();
    }
}
