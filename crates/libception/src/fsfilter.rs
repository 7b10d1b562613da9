//! Which filesystems the daemon reads for its clients.
//!
//! By default only files on block-device-backed filesystems (a device number
//! with a non-zero major): what the daemon exists for, a disk with seeks to
//! save. Anonymous devices (major 0) are procfs, sysfs, NFS, FUSE, tmpfs,
//! overlayfs, btrfs...: reading procfs or sysfs as a privileged daemon has
//! side effects, a network or FUSE filesystem can stall a worker forever, and
//! none of them has a disk queue to protect. `--allow-fs TYPE` admits one by
//! its type as in /proc/self/mountinfo (`fuse` admits `fuse.*` too, e.g. the
//! emulated disk's FUSE mode; its block mode is a real block device and
//! needs nothing).
//!
//! The type is found from the descriptor's mount id (statx STATX_MNT_ID) in
//! /proc/self/mountinfo, read again only when an unknown mount id appears;
//! `fstatfs` is never used because a FUSE filesystem answers it in user space.

use std::collections::HashMap;

pub struct FsFilter {
    allow: Vec<String>,
    types: HashMap<u64, String>,
}

/// Why a file is not served.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Serve,
    /// The filesystem type (or "unknown") that is not on the allow list.
    Refuse(String),
}

impl FsFilter {
    pub fn new(allow: Vec<String>) -> Self {
        FsFilter { allow, types: HashMap::new() }
    }

    pub fn check(&mut self, dev_major: u32, mnt_id: u64) -> Verdict {
        if dev_major != 0 {
            return Verdict::Serve;
        }
        if self.allow.is_empty() {
            return Verdict::Refuse(self.fs_type(mnt_id));
        }
        let fs = self.fs_type(mnt_id);
        if allowed(&self.allow, &fs) {
            Verdict::Serve
        } else {
            Verdict::Refuse(fs)
        }
    }

    fn fs_type(&mut self, mnt_id: u64) -> String {
        if mnt_id == 0 {
            return "unknown".into();
        }
        if !self.types.contains_key(&mnt_id) {
            self.types = std::fs::read_to_string("/proc/self/mountinfo").map(|t| parse_mountinfo(&t)).unwrap_or_default();
        }
        self.types.get(&mnt_id).cloned().unwrap_or_else(|| "unknown".into())
    }
}

fn allowed(allow: &[String], fs: &str) -> bool {
    let base = fs.split('.').next().unwrap_or(fs);
    allow.iter().any(|a| a == fs || a == base)
}

/// mount id -> filesystem type, from mountinfo lines
/// `ID PARENT MAJ:MIN ROOT POINT OPTS [OPTIONAL...] - TYPE SOURCE SUPER`.
fn parse_mountinfo(text: &str) -> HashMap<u64, String> {
    text.lines()
        .filter_map(|line| {
            let id = line.split(' ').next()?.parse().ok()?;
            let (_, after) = line.split_once(" - ")?;
            Some((id, after.split(' ').next()?.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_types_and_the_allow_list() {
        let text = "22 1 0:21 / /proc rw,nosuid shared:12 - proc proc rw\n\
                    98 29 0:50 / /mnt/disk rw,nosuid - fuse.vidbench vidbench ro,user_id=0\n\
                    30 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n";
        let m = parse_mountinfo(text);
        assert_eq!(m[&22], "proc");
        assert_eq!(m[&98], "fuse.vidbench");
        assert_eq!(m[&30], "ext4");
        let allow = vec!["fuse".to_string(), "tmpfs".to_string()];
        assert!(allowed(&allow, "fuse.vidbench"));
        assert!(allowed(&allow, "fuse"));
        assert!(allowed(&allow, "tmpfs"));
        assert!(!allowed(&allow, "proc"));
        assert!(!allowed(&allow, "fuseblk"));
    }

    #[test]
    fn block_devices_pass_anonymous_ones_need_the_list() {
        let mut f = FsFilter::new(vec![]);
        assert_eq!(f.check(254, 0), Verdict::Serve);
        assert!(matches!(f.check(0, 0), Verdict::Refuse(_)));
    }
}
