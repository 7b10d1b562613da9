//! Which physical disk holds a file: `st_dev` -> `/sys/dev/block/MAJ:MIN` ->
//! whole disk.
//!
//! * A partition (its sysfs directory has a `partition` file) belongs to its
//!   parent directory's disk.
//! * A stacked device (dm, md: a non-empty `slaves/` directory) belongs to the
//!   disks under it, resolved recursively; a device over several disks gets a
//!   queue of its own named after all of them (`sda+sdb`), because one read
//!   may touch each of them.
//! * Anonymous devices (major 0: FUSE, overlayfs, btrfs subvolumes, tmpfs) and
//!   devices missing from sysfs are their own disk: nothing better is known.
//!
//! The result names the queue a read goes to; the receptionist caches it per
//! `st_dev` so sysfs is read once per device.

use std::path::{Path, PathBuf};

/// Deepest stack of dm/md devices followed before giving up.
const MAX_STACK_DEPTH: usize = 8;

/// The whole disk (or set of disks) a device number maps to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskIdentity {
    /// Queue name: `vda`, `loop0`, `sda+sdb`, `anon-0:45`, `dev-8:99`.
    pub name: String,
    /// Whether this is an anonymous (major 0) device.
    pub anonymous: bool,
}

/// `(major, minor)` of a `st_dev`.
pub fn split_dev(dev: u64) -> (u32, u32) {
    (libc::major(dev as libc::dev_t), libc::minor(dev as libc::dev_t))
}

/// Maps a `st_dev` to its disk, reading sysfs under `sys_root` (normally `/sys`).
pub fn disk_of_dev_in(sys_root: &Path, dev: u64) -> DiskIdentity {
    let (major, minor) = split_dev(dev);
    if major == 0 {
        return DiskIdentity {
            name: format!("anon-{major}:{minor}"),
            anonymous: true,
        };
    }
    let link = sys_root.join(format!("dev/block/{major}:{minor}"));
    match std::fs::canonicalize(&link) {
        Ok(dir) => {
            let mut names = Vec::new();
            whole_disks(sys_root, &dir, 0, &mut names);
            names.sort();
            names.dedup();
            if names.is_empty() {
                DiskIdentity {
                    name: format!("dev-{major}:{minor}"),
                    anonymous: false,
                }
            } else {
                DiskIdentity {
                    name: names.join("+"),
                    anonymous: false,
                }
            }
        }
        Err(_) => DiskIdentity {
            name: format!("dev-{major}:{minor}"),
            anonymous: false,
        },
    }
}

/// Maps a `st_dev` to its disk using the real `/sys`.
pub fn disk_of_dev(dev: u64) -> DiskIdentity {
    disk_of_dev_in(Path::new("/sys"), dev)
}

fn whole_disks(sys_root: &Path, dev_dir: &Path, depth: usize, out: &mut Vec<String>) {
    let disk_dir: PathBuf = if dev_dir.join("partition").exists() {
        match dev_dir.parent() {
            Some(p) => p.to_path_buf(),
            None => return,
        }
    } else {
        dev_dir.to_path_buf()
    };
    let slaves: Vec<String> = std::fs::read_dir(disk_dir.join("slaves"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    if slaves.is_empty() || depth >= MAX_STACK_DEPTH {
        if let Some(name) = disk_dir.file_name() {
            out.push(name.to_string_lossy().into_owned());
        }
        return;
    }
    for slave in slaves {
        match std::fs::canonicalize(sys_root.join("class/block").join(&slave)) {
            Ok(dir) => whole_disks(sys_root, &dir, depth + 1, out),
            Err(_) => out.push(slave),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, MetadataExt};

    /// Builds a fake sysfs: sda with partition sda1, sdb, and dm-0 over sda1+sdb,
    /// md0 over dm-0 only.
    fn fake_sys() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        let dev = r.join("devices/pci/block");
        for d in ["sda/sda1", "sdb", "dm-0/slaves", "md0/slaves"] {
            std::fs::create_dir_all(dev.join(d)).unwrap();
        }
        std::fs::write(dev.join("sda/sda1/partition"), "1\n").unwrap();
        std::fs::create_dir_all(r.join("dev/block")).unwrap();
        std::fs::create_dir_all(r.join("class/block")).unwrap();
        for (num, path) in [("8:0", "sda"), ("8:1", "sda/sda1"), ("8:16", "sdb"), ("254:0", "dm-0"), ("9:0", "md0")] {
            symlink(dev.join(path), r.join("dev/block").join(num)).unwrap();
            let name = Path::new(path).file_name().unwrap();
            symlink(dev.join(path), r.join("class/block").join(name)).unwrap();
        }
        symlink(dev.join("sda/sda1"), dev.join("dm-0/slaves/sda1")).unwrap();
        symlink(dev.join("sdb"), dev.join("dm-0/slaves/sdb")).unwrap();
        symlink(dev.join("dm-0"), dev.join("md0/slaves/dm-0")).unwrap();
        t
    }

    fn mk(major: u32, minor: u32) -> u64 {
        libc::makedev(major, minor)
    }

    #[test]
    fn partitions_stacks_and_anonymous_devices() {
        let sys = fake_sys();
        let r = sys.path();
        assert_eq!(disk_of_dev_in(r, mk(8, 0)).name, "sda");
        assert_eq!(disk_of_dev_in(r, mk(8, 1)).name, "sda");
        assert_eq!(disk_of_dev_in(r, mk(8, 16)).name, "sdb");
        assert_eq!(disk_of_dev_in(r, mk(254, 0)).name, "sda+sdb");
        assert_eq!(disk_of_dev_in(r, mk(9, 0)).name, "sda+sdb");
        assert_eq!(disk_of_dev_in(r, mk(8, 99)).name, "dev-8:99");
        let anon = disk_of_dev_in(r, mk(0, 45));
        assert_eq!(anon.name, "anon-0:45");
        assert!(anon.anonymous);
    }

    #[test]
    fn a_real_file_maps_to_a_real_block_device_or_anon() {
        let dev = std::fs::metadata(std::env::temp_dir()).unwrap().dev();
        let id = disk_of_dev(dev);
        let (major, _) = split_dev(dev);
        if major == 0 {
            assert!(id.anonymous);
        } else {
            assert!(Path::new("/sys/class/block").join(id.name.split('+').next().unwrap()).exists(), "{id:?}");
        }
    }
}
