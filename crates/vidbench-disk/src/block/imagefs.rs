//! The image server: a FUSE filesystem holding one file, `disk.img`, the
//! whole emulated drive (byte offset = LBA * 512), for a loop device to sit on.
//!
//! Two modes share the tree (root, `disk.img`, the hidden `.vidbench/stats.json`):
//! - **capture** (building an image): `disk.img` is writable and untimed.
//!   Writes land in a sparse overlay that keeps only 4 KiB blocks that are
//!   not all zeros; an all-zero write, a hole punch or a zero-range removes
//!   blocks, so an unstored block reads as zeros. This is what lets a real
//!   mkfs and the kernel build a 1 TB filesystem in a few MB of memory.
//! - **timed** (a block-mode mount): `disk.img` is read-only; every read is
//!   generated from the [`Image`] and handed to the drive scheduler with its
//!   true position, exactly like a library file's read in FUSE mode, so the
//!   model times metadata and data alike. The trace names the library file
//!   (and file offset) the read starts in, or file id 4294967295 with the
//!   image offset for metadata and free space.
//!
//! The capture overlay is one mutex-guarded map: writes come from the loop
//! device's workers a few hundred at a time, and lock hold times are a
//! memcpy of at most one request.

use super::image::{Image, BLOCK};
use crate::scheduler::{Intake, Read};
use crate::stats::Stats;
use fuser::{
    Errno, FileAttr, FileHandle, FileType, FopenFlags, Generation, INodeNo, KernelConfig, LockOwner, OpenAccMode, OpenFlags, ReplyAttr,
    ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyWrite, Request, WriteFlags,
};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// Name of the image file at the root of the image server.
pub const IMAGE_FILE: &str = "disk.img";
/// fsname of the image server's mounts (in /proc/mounts).
pub const FSNAME: &str = "vidbench-image";
/// File id the trace gives to reads outside every library file.
pub const NO_FILE: u32 = u32::MAX;

const ROOT: u64 = 1;
const IMG: u64 = 2;
const CONTROL: u64 = 3;
const STATS: u64 = 4;
const TTL: Duration = Duration::from_secs(365 * 24 * 3600);

/// The sparse overlay of a capture.
#[derive(Debug, Default)]
pub struct Overlay {
    pub blocks: HashMap<u64, Box<[u8]>>,
    /// Bytes written / zero bytes dropped, for the build's figures.
    pub written_bytes: u64,
    pub fallocated_bytes: u64,
}

/// Whether `data` is all zeros (word at a time).
pub fn is_zero(data: &[u8]) -> bool {
    // SAFETY: u128 has no invalid bit patterns; align_to only reinterprets.
    let (head, body, tail) = unsafe { data.align_to::<u128>() };
    head.iter().all(|&b| b == 0) && body.chunks(16).all(|c| c.iter().fold(0, |a, &w| a | w) == 0) && tail.iter().all(|&b| b == 0)
}

impl Overlay {
    /// Applies a write at `offset`.
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        self.written_bytes += data.len() as u64;
        let end = offset + data.len() as u64;
        let mut block = offset / BLOCK;
        while block * BLOCK < end {
            let from = (block * BLOCK).max(offset);
            let to = ((block + 1) * BLOCK).min(end);
            let part = &data[(from - offset) as usize..(to - offset) as usize];
            if to - from == BLOCK {
                if is_zero(part) {
                    self.blocks.remove(&block);
                } else {
                    self.blocks.insert(block, part.into());
                }
            } else {
                let zero = is_zero(part);
                match self.blocks.get_mut(&block) {
                    Some(b) => {
                        b[(from - block * BLOCK) as usize..(to - block * BLOCK) as usize].copy_from_slice(part);
                        if zero && is_zero(b) {
                            self.blocks.remove(&block);
                        }
                    }
                    None if zero => {}
                    None => {
                        let mut b = vec![0u8; BLOCK as usize].into_boxed_slice();
                        b[(from - block * BLOCK) as usize..(to - block * BLOCK) as usize].copy_from_slice(part);
                        self.blocks.insert(block, b);
                    }
                }
            }
            block += 1;
        }
    }

    /// Makes `[offset, offset + len)` read as zeros.
    pub fn zero(&mut self, offset: u64, len: u64) {
        self.fallocated_bytes += len;
        let end = offset + len;
        let first_whole = offset.div_ceil(BLOCK);
        let last_whole = end / BLOCK;
        if last_whole > first_whole && last_whole - first_whole > self.blocks.len() as u64 {
            self.blocks.retain(|b, _| *b < first_whole || *b >= last_whole);
        } else {
            for b in first_whole..last_whole.max(first_whole) {
                self.blocks.remove(&b);
            }
        }
        // Partial blocks at either end.
        for (from, to) in [(offset, end.min(first_whole * BLOCK)), ((last_whole * BLOCK).max(offset), end)] {
            if from < to {
                let block = from / BLOCK;
                if let Some(b) = self.blocks.get_mut(&block) {
                    b[(from - block * BLOCK) as usize..(to - block * BLOCK) as usize].fill(0);
                    if is_zero(b) {
                        self.blocks.remove(&block);
                    }
                }
            }
        }
    }

    pub fn read(&self, offset: u64, buf: &mut [u8]) {
        buf.fill(0);
        let end = offset + buf.len() as u64;
        let mut block = offset / BLOCK;
        while block * BLOCK < end {
            if let Some(bytes) = self.blocks.get(&block) {
                let from = (block * BLOCK).max(offset);
                let to = ((block + 1) * BLOCK).min(end);
                buf[(from - offset) as usize..(to - offset) as usize].copy_from_slice(&bytes[(from - block * BLOCK) as usize..(to - block * BLOCK) as usize]);
            }
            block += 1;
        }
    }
}

/// The timed side: the image and the drive's queue.
pub struct Timed {
    pub image: Arc<Image>,
    pub intake: Intake,
    pub stats: Arc<Stats>,
    /// The loop device over this server, once attached (added to stats.json).
    pub device: Arc<std::sync::OnceLock<serde_json::Value>>,
}

pub enum Mode {
    Capture(Arc<Mutex<Overlay>>),
    Timed(Timed),
}

pub struct ImageFs {
    mode: Mode,
    capacity: u64,
    max_request_kib: u32,
    max_background: u16,
    created: SystemTime,
    control: Mutex<HashMap<u64, Arc<Vec<u8>>>>,
    next_fh: AtomicU64,
}

impl ImageFs {
    pub fn new(mode: Mode, capacity: u64, max_request_kib: u32, max_background: u16) -> ImageFs {
        ImageFs { mode, capacity, max_request_kib, max_background, created: SystemTime::now(), control: Mutex::new(HashMap::new()), next_fh: AtomicU64::new(1) }
    }

    fn writable(&self) -> bool {
        matches!(self.mode, Mode::Capture(_))
    }

    fn attr(&self, ino: u64) -> Option<FileAttr> {
        let (kind, perm, size) = match ino {
            ROOT | CONTROL => (FileType::Directory, 0o555, 0),
            IMG => (FileType::RegularFile, if self.writable() { 0o600 } else { 0o400 }, self.capacity),
            STATS => (FileType::RegularFile, 0o444, 0),
            _ => return None,
        };
        // SAFETY: getuid/getgid cannot fail.
        Some(crate::fs::file_attr(ino, kind, perm, size, self.created, unsafe { (libc::getuid(), libc::getgid()) }))
    }
}

impl fuser::Filesystem for ImageFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let max_request = self.max_request_kib * 1024;
        if let Err(nearest) = config.set_max_write(max_request) {
            let _ = config.set_max_write(nearest);
        }
        if let Err(nearest) = config.set_max_readahead(max_request) {
            let _ = config.set_max_readahead(nearest);
        }
        let background = self.max_background.max(1);
        let _ = config.set_max_background(background);
        let _ = config.set_congestion_threshold((background as u32 * 3 / 4).max(1) as u16);
        // The loop device's direct I/O is asynchronous: let several of its
        // requests be outstanding at once, as on a real queue.
        let _ = config.add_capabilities(fuser::InitFlags::FUSE_ASYNC_DIO);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let found = match (parent.0, name.to_str()) {
            (ROOT, Some(IMAGE_FILE)) => Some(IMG),
            (ROOT, Some(crate::stats::CONTROL_DIR)) if !self.writable() => Some(CONTROL),
            (CONTROL, Some(crate::stats::STATS_FILE)) => Some(STATS),
            _ => None,
        };
        match found.and_then(|ino| self.attr(ino)) {
            Some(attr) => reply.entry(&TTL, &attr, Generation(0)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr(ino.0) {
            Some(attr) => reply.attr(&TTL, &attr),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<fuser::TimeOrNow>,
        _mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // The drive's size is fixed; timestamps are not kept.
        if size.is_some_and(|s| s != self.capacity) {
            return reply.error(Errno::EPERM);
        }
        match self.attr(ino.0) {
            Some(attr) => reply.attr(&TTL, &attr),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match ino.0 {
            IMG => {
                if flags.acc_mode() != OpenAccMode::O_RDONLY && !self.writable() {
                    return reply.error(Errno::EROFS);
                }
                reply.opened(FileHandle(0), FopenFlags::FOPEN_KEEP_CACHE)
            }
            STATS => {
                let Mode::Timed(t) = &self.mode else { return reply.error(Errno::ENOENT) };
                let mut snapshot = t.stats.snapshot();
                if let Some(device) = t.device.get() {
                    snapshot.config["block"]["device"] = device.clone();
                }
                let mut json = serde_json::to_vec_pretty(&snapshot).expect("a snapshot serializes");
                json.push(b'\n');
                let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
                self.control.lock().expect("control lock").insert(fh, Arc::new(json));
                reply.opened(FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO)
            }
            ROOT | CONTROL => reply.error(Errno::EISDIR),
            _ => reply.error(Errno::ENOENT),
        }
    }

    fn read(&self, _req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, size: u32, _flags: OpenFlags, _lock: Option<LockOwner>, reply: ReplyData) {
        match ino.0 {
            IMG => {
                if offset >= self.capacity || size == 0 {
                    return reply.data(&[]);
                }
                let len = (size as u64).min(self.capacity - offset);
                match &self.mode {
                    Mode::Capture(overlay) => {
                        let mut data = vec![0u8; len as usize];
                        overlay.lock().expect("overlay lock").read(offset, &mut data);
                        reply.data(&data)
                    }
                    Mode::Timed(t) => {
                        let (file_id, file_offset) = match t.image.extent_at(offset) {
                            Some(e) => (e.file_id, e.file_offset + (offset - e.image_offset)),
                            None => (NO_FILE, offset),
                        };
                        let first = offset / 512;
                        let last = (offset + len).div_ceil(512);
                        let read = Read { file_id, offset: file_offset, lba: first, sectors: last - first, len };
                        let image = t.image.clone();
                        t.intake.read(read, move |data| image.read_at(offset, data), reply);
                    }
                }
            }
            STATS => {
                crate::fs::read_control(&self.control, fh.0, offset, size, reply);
            }
            ROOT | CONTROL => reply.error(Errno::EISDIR),
            _ => reply.error(Errno::ENOENT),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let Mode::Capture(overlay) = &self.mode else { return reply.error(Errno::EROFS) };
        if ino.0 != IMG {
            return reply.error(Errno::EBADF);
        }
        if offset.checked_add(data.len() as u64).is_none_or(|end| end > self.capacity) {
            return reply.error(Errno::ENOSPC);
        }
        overlay.lock().expect("overlay lock").write(offset, data);
        reply.written(data.len() as u32)
    }

    fn fallocate(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, length: u64, mode: i32, reply: ReplyEmpty) {
        let Mode::Capture(overlay) = &self.mode else { return reply.error(Errno::EROFS) };
        if ino.0 != IMG {
            return reply.error(Errno::EBADF);
        }
        let end = offset.saturating_add(length).min(self.capacity);
        // Plain allocation changes nothing: every block of the drive exists.
        if mode & (libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_ZERO_RANGE | 0x80) != 0 && end > offset {
            overlay.lock().expect("overlay lock").zero(offset, end - offset);
        }
        reply.ok()
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        reply.ok()
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        reply.ok()
    }

    fn release(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, _lock_owner: Option<LockOwner>, _flush: bool, reply: ReplyEmpty) {
        if fh.0 != 0 {
            self.control.lock().expect("control lock").remove(&fh.0);
        }
        reply.ok();
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let entries: &[(u64, FileType, &str)] = match ino.0 {
            ROOT => &[(ROOT, FileType::Directory, "."), (ROOT, FileType::Directory, ".."), (IMG, FileType::RegularFile, IMAGE_FILE)],
            CONTROL => &[(CONTROL, FileType::Directory, "."), (ROOT, FileType::Directory, ".."), (STATS, FileType::RegularFile, crate::stats::STATS_FILE)],
            _ => return reply.error(Errno::ENOTDIR),
        };
        for (i, (child, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*child), (i + 1) as u64, *kind, name) {
                break;
            }
        }
        reply.ok();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlay_keeps_only_nonzero_blocks() {
        let mut o = Overlay::default();
        o.write(0, &vec![0u8; 1 << 20]);
        assert!(o.blocks.is_empty(), "zero writes store nothing");
        let mut data = vec![0u8; 3 * BLOCK as usize];
        data[5000] = 7;
        o.write(BLOCK, &data);
        assert_eq!(o.blocks.keys().copied().collect::<Vec<_>>(), vec![2]);
        // A partial write into an unstored block.
        o.write(10 * BLOCK + 100, &[1, 2, 3]);
        let mut buf = [9u8; 6];
        o.read(10 * BLOCK + 99, &mut buf);
        assert_eq!(buf, [0, 1, 2, 3, 0, 0]);
        // Zeroing a partial block that becomes all zero removes it.
        o.write(10 * BLOCK + 100, &[0, 0, 0]);
        assert!(!o.blocks.contains_key(&10));
        // A later zero write over a stored block removes it.
        o.write(2 * BLOCK, &vec![0u8; BLOCK as usize]);
        assert!(o.blocks.is_empty());
        // Hole punch / zero range, whole and partial blocks.
        o.write(0, &vec![0xffu8; 4 * BLOCK as usize]);
        o.zero(BLOCK / 2, 2 * BLOCK);
        let mut all = vec![0u8; 4 * BLOCK as usize];
        o.read(0, &mut all);
        for (i, b) in all.iter().enumerate() {
            let zeroed = (BLOCK / 2..BLOCK / 2 + 2 * BLOCK).contains(&(i as u64));
            assert_eq!(*b, if zeroed { 0 } else { 0xff }, "byte {i}");
        }
        assert_eq!(o.blocks.len(), 3, "block 1 went entirely, 0 and 2 keep their other half");
        // A huge range (the whole drive, as mkfs discards it) is cheap and complete.
        o.zero(0, 1 << 40);
        assert!(o.blocks.is_empty());
    }

    #[test]
    fn zero_detection() {
        let mut v = vec![0u8; 4099];
        assert!(is_zero(&v[1..]));
        v[4098] = 1;
        assert!(!is_zero(&v[1..]));
        v[4098] = 0;
        v[2048] = 1;
        assert!(!is_zero(&v[3..]));
        assert!(is_zero(&[]));
    }
}
