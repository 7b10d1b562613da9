//! The Linux facts the mount depends on: the mount table, the FUSE
//! connection's backing device info (readahead), the max_pages sysctl, and
//! unmounting.

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};

/// One line of /proc/self/mountinfo, the parts used here.
#[derive(Debug, Clone)]
pub struct MountEntry {
    pub major: u32,
    pub minor: u32,
    pub mountpoint: PathBuf,
    pub fstype: String,
    /// The mount's source (a FUSE server's fsname).
    pub source: String,
}

/// A mountinfo field with its `\ooo` escapes decoded.
pub fn unescape(field: &str) -> String {
    // mountinfo escapes space, tab, newline and backslash as \ooo.
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() && bytes[i + 1..i + 4].iter().all(|b| (b'0'..=b'7').contains(b)) {
            let v = (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mount whose mount point is exactly `path` (the last one if stacked).
pub fn mount_at(path: &Path) -> anyhow::Result<Option<MountEntry>> {
    let path = path.canonicalize().with_context(|| format!("mount point {}", path.display()))?;
    let text = std::fs::read_to_string("/proc/self/mountinfo").context("reading /proc/self/mountinfo")?;
    let mut found = None;
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(dash) = fields.iter().position(|f| *f == "-") else { continue };
        if fields.len() < 5 || dash + 1 >= fields.len() {
            continue;
        }
        let Some((major, minor)) = fields[2].split_once(':') else { continue };
        let mountpoint = PathBuf::from(unescape(fields[4]));
        if mountpoint == path {
            found = Some(MountEntry {
                major: major.parse().unwrap_or(0),
                minor: minor.parse().unwrap_or(0),
                mountpoint,
                fstype: fields[dash + 1].to_owned(),
                source: fields.get(dash + 2).map(|s| unescape(s)).unwrap_or_default(),
            });
        }
    }
    Ok(found)
}

fn bdi_read_ahead_path(m: &MountEntry) -> PathBuf {
    PathBuf::from(format!("/sys/class/bdi/{}:{}/read_ahead_kb", m.major, m.minor))
}

/// Sets the mount's readahead window (what `blockdev --setra` does for a disk).
pub fn set_read_ahead_kb(m: &MountEntry, kib: u32) -> anyhow::Result<()> {
    let path = bdi_read_ahead_path(m);
    std::fs::write(&path, format!("{kib}\n")).with_context(|| format!("setting the mount's readahead: writing {kib} to {}", path.display()))
}

pub fn read_ahead_kb(m: &MountEntry) -> anyhow::Result<u32> {
    let path = bdi_read_ahead_path(m);
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    text.trim().parse().with_context(|| format!("parsing {}", path.display()))
}

const MAX_PAGES_LIMIT: &str = "/proc/sys/fs/fuse/max_pages_limit";

/// The largest FUSE request a mount here can be given, KiB: 1024 where the
/// page limit is fixed (kernels before 6.13, no `fs.fuse.max_pages_limit`);
/// else the mount's own cap (16 MiB) where the sysctl can be raised (root,
/// a writable /proc/sys), or the limit it has now (a container, say).
pub fn fuse_max_request_kb() -> u32 {
    const MOUNT_CAP_KB: u32 = 16384; // `vidbench disk mount --max-request-kb`'s range
    let Ok(text) = std::fs::read_to_string(MAX_PAGES_LIMIT) else {
        return 1024;
    };
    let writable = std::fs::OpenOptions::new().write(true).open(MAX_PAGES_LIMIT).is_ok();
    match text.trim().parse::<u32>() {
        Ok(_) if writable => MOUNT_CAP_KB,
        Ok(pages) => pages.saturating_mul(4).min(MOUNT_CAP_KB),
        Err(_) => 1024,
    }
}

/// Makes sure the kernel lets FUSE requests of `pages` pages through; raises
/// `fs.fuse.max_pages_limit` when it is lower (root only). Returns a notice
/// when it changed something.
pub fn ensure_max_pages(pages: u32) -> anyhow::Result<Option<String>> {
    let Ok(text) = std::fs::read_to_string(MAX_PAGES_LIMIT) else {
        // Kernels before 6.13 have a fixed limit of 256 pages (1 MiB).
        if pages > 256 {
            bail!("this kernel caps FUSE requests at 1024 KiB (no {MAX_PAGES_LIMIT}); use --max-request-kb 1024 or less");
        }
        return Ok(None);
    };
    let limit: u32 = text.trim().parse().with_context(|| format!("parsing {MAX_PAGES_LIMIT}"))?;
    if pages <= limit {
        return Ok(None);
    }
    std::fs::write(MAX_PAGES_LIMIT, format!("{pages}\n"))
        .with_context(|| format!("--max-request-kb needs fs.fuse.max_pages_limit >= {pages} (it is {limit}); raising it failed (are you root?)"))?;
    Ok(Some(format!("raised fs.fuse.max_pages_limit from {limit} to {pages} (system-wide, until reboot)")))
}

/// Unmounts a FUSE mount: a plain unmount, or a lazy one when busy, in which
/// case the FUSE connection is also aborted so the server can exit.
pub fn unmount(path: &Path, m: Option<&MountEntry>) -> anyhow::Result<()> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).context("mount point contains a NUL byte")?;
    // SAFETY: umount2 with a valid NUL-terminated path.
    if unsafe { libc::umount2(c.as_ptr(), 0) } == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EBUSY) => {
            // SAFETY: as above.
            if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
                bail!("lazy unmount of {} failed: {}", path.display(), std::io::Error::last_os_error());
            }
            if let Some(m) = m {
                let _ = std::fs::write(format!("/sys/fs/fuse/connections/{}/abort", m.minor), "1\n");
            }
            Ok(())
        }
        Some(libc::EPERM) => {
            // Not root: the setuid helper does it.
            let status = std::process::Command::new("fusermount3").arg("-u").arg(path).status().context("running fusermount3 -u")?;
            if status.success() {
                return Ok(());
            }
            let status = std::process::Command::new("fusermount3").arg("-uz").arg(path).status().context("running fusermount3 -uz")?;
            if status.success() { Ok(()) } else { bail!("fusermount3 could not unmount {}", path.display()) }
        }
        _ => bail!("unmounting {}: {err}", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fuse_request_cap_is_what_a_mount_here_can_be_given() {
        let cap = fuse_max_request_kb();
        assert!(cap.is_multiple_of(4) && (4..=16384).contains(&cap), "{cap}");
        match std::fs::read_to_string(MAX_PAGES_LIMIT) {
            Err(_) => assert_eq!(cap, 1024, "a fixed 256-page limit"),
            Ok(t) => {
                let writable = std::fs::OpenOptions::new().write(true).open(MAX_PAGES_LIMIT).is_ok();
                let now: u32 = t.trim().parse().unwrap();
                assert_eq!(cap, if writable { 16384 } else { (now * 4).min(16384) });
            }
        }
    }

    #[test]
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape("/mnt/a\\040b"), "/mnt/a b");
        assert_eq!(unescape("/plain"), "/plain");
    }

    #[test]
    fn the_root_is_a_mount() {
        let m = mount_at(Path::new("/")).unwrap();
        assert!(m.is_some());
    }
}
