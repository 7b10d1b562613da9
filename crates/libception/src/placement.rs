//! Where a file's bytes lie on its disk, for ordering reads by position
//! (`--queue-order position`): FIEMAP (the `fiemap` crate) maps a file
//! offset to a byte address on the device. Filesystems without it (tmpfs,
//! FUSE, NFS) and extents whose place is not decided yet (delayed
//! allocation) or not on the device (inline data) give none: the read is
//! then ordered as it came.

use std::fs::File;

/// Where `offset` of `file` lies: its device's number and the byte on it,
/// if its filesystem maps it.
pub fn place(file: &File, offset: u64) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let dev = file.metadata().ok()?.dev();
    Some((dev, physical_offset(file, offset)?))
}

/// The device byte address of `offset` in `file`, if its filesystem maps it.
pub fn physical_offset(file: &File, offset: u64) -> Option<u64> {
    let e = *fiemap::extents::<1>(file, offset, 1, 0).ok()?.first()?;
    // A hole before the extent: the extent is the next data, not this offset's place.
    if e.flags & fiemap::EXTENT_NOT_PLACED != 0 || e.logical > offset {
        return None;
    }
    Some(e.physical + (offset - e.logical))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Filesystems that answer FIEMAP with EOPNOTSUPP.
    fn maps_nothing(dir: &std::path::Path) -> bool {
        let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: statfs fills `st` for a NUL-terminated path.
        assert_eq!(unsafe { libc::statfs(path.as_ptr(), &mut st) }, 0);
        const TMPFS_MAGIC: i64 = 0x0102_1994;
        const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;
        matches!(st.f_type as i64, TMPFS_MAGIC | FUSE_SUPER_MAGIC)
    }

    #[test]
    fn a_written_file_maps_to_consecutive_device_bytes_or_to_none_where_nothing_maps() {
        // Beside the sources: on the repository's filesystem, not a tmpfs /tmp.
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let path = dir.path().join("f");
        let mut f = File::create(&path).unwrap();
        f.write_all(&vec![7u8; 1 << 20]).unwrap();
        f.sync_all().unwrap();
        let f = File::open(&path).unwrap();
        let (a, b) = (physical_offset(&f, 0), physical_offset(&f, 8192));
        if maps_nothing(dir.path()) {
            assert_eq!((a, b), (None, None));
            return;
        }
        let a = a.expect("a synced file on a disk filesystem has a place");
        // The first 8 KiB of a 1 MiB file written at once lie in one extent.
        assert_eq!(b, Some(a + 8192));
        assert_eq!(physical_offset(&f, 2 << 20), None, "past the end: no data there");
    }

    #[test]
    fn a_file_on_a_filesystem_without_fiemap_has_no_place() {
        let f = File::open("/proc/self/status").unwrap();
        assert_eq!(physical_offset(&f, 0), None);
    }
}
