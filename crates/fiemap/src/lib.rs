//! Where a file's bytes lie on its device: the `FS_IOC_FIEMAP` ioctl (ext4,
//! xfs, btrfs and most disk filesystems; tmpfs, FUSE and NFS answer
//! `EOPNOTSUPP`). The daemon orders reads by the place of their first byte
//! (`libception/src/placement.rs`); the emulated disk maps every extent of a
//! library file to the drive when it builds an image.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// `_IOWR('f', 11, struct fiemap)`.
const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
/// Flush the file's dirty data first, so that delayed extents get a place.
pub const FLAG_SYNC: u32 = 0x1;

/// Extent flags (`fe_flags`).
pub const EXTENT_LAST: u32 = 0x1;
pub const EXTENT_UNKNOWN: u32 = 0x2;
pub const EXTENT_DELALLOC: u32 = 0x4;
pub const EXTENT_ENCODED: u32 = 0x8;
pub const EXTENT_DATA_ENCRYPTED: u32 = 0x80;
pub const EXTENT_DATA_INLINE: u32 = 0x200;
pub const EXTENT_DATA_TAIL: u32 = 0x400;
pub const EXTENT_UNWRITTEN: u32 = 0x800;
/// Flags under which `physical` is not where the bytes are on the device.
pub const EXTENT_NOT_PLACED: u32 = EXTENT_UNKNOWN | EXTENT_DELALLOC | EXTENT_ENCODED | EXTENT_DATA_ENCRYPTED | EXTENT_DATA_INLINE | EXTENT_DATA_TAIL;

/// One extent: `length` bytes at file offset `logical` lie at device byte
/// `physical`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Extent {
    pub logical: u64,
    pub physical: u64,
    pub length: u64,
    reserved64: [u64; 2],
    pub flags: u32,
    reserved: [u32; 3],
}

/// `struct fiemap` with room for `N` extents.
#[repr(C)]
struct Fiemap<const N: usize> {
    start: u64,
    length: u64,
    flags: u32,
    mapped_extents: u32,
    extent_count: u32,
    reserved: u32,
    extents: [Extent; N],
}

/// Extents of `file` overlapping `[start, start + length)`, at most `N`
/// (fewer than `N` or one flagged [`EXTENT_LAST`]: there are no more), with
/// `flags` (0 or [`FLAG_SYNC`]).
pub fn extents<const N: usize>(file: &File, start: u64, length: u64, flags: u32) -> io::Result<Vec<Extent>> {
    let mut map = Fiemap::<N> { start, length, flags, mapped_extents: 0, extent_count: N as u32, reserved: 0, extents: [Extent::default(); N] };
    // SAFETY: FS_IOC_FIEMAP reads and writes one `struct fiemap` with room
    // for `extent_count` extents, which `map` is.
    if unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP as _, &mut map as *mut Fiemap<N>) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(map.extents[..(map.mapped_extents as usize).min(N)].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_synced_file_is_mapped_whole_or_the_filesystem_says_it_cannot() {
        // Beside the sources: on the repository's filesystem, not a tmpfs /tmp.
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let path = dir.path().join("f");
        let mut f = File::create(&path).unwrap();
        f.write_all(&vec![1u8; 3 << 20]).unwrap();
        f.sync_all().unwrap();
        let f = File::open(&path).unwrap();
        match extents::<16>(&f, 0, u64::MAX, FLAG_SYNC) {
            Ok(e) => {
                assert!(!e.is_empty() && e[0].logical == 0, "{e:?}");
                assert_eq!(e.iter().map(|x| x.length).sum::<u64>(), 3 << 20, "{e:?}");
                assert!(e.last().unwrap().flags & EXTENT_LAST != 0, "{e:?}");
                assert!(e.iter().all(|x| x.flags & EXTENT_NOT_PLACED == 0), "{e:?}");
            }
            Err(err) => assert_eq!(err.raw_os_error(), Some(libc::EOPNOTSUPP), "{err}"),
        }
        // Past the end: no extent.
        if let Ok(e) = extents::<1>(&f, 8 << 20, 1, 0) {
            assert!(e.is_empty(), "{e:?}");
        }
    }

    #[test]
    fn a_file_without_a_device_is_not_mapped() {
        let f = File::open("/proc/self/status").unwrap();
        assert!(extents::<1>(&f, 0, 1, 0).map_or(true, |e| e.is_empty()));
    }
}
