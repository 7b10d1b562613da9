//! A FUSE filesystem that stops answering: one file, `f`, whose lookup and
//! open are answered, and whose attribute requests and reads are held
//! unanswered once `hang()` is called, as a hostile user's own FUSE mount
//! would. Attribute and entry timeouts are 0, so an `fstat` of an open
//! descriptor asks the server again and waits for it. `Drop` answers every
//! held request (EIO) and unmounts.
//!
//! It is also a gate for ordering tests: after `hold_reads()` only reads are
//! held (attributes answered), `release()` answers them (zeros) and lets
//! later reads through, and `read_log()` lists the offset of every read the
//! kernel sent, in arrival order: the order a reader issued them.

use fuser::{Errno, FileAttr, FileHandle, FileType, FopenFlags, Generation, INodeNo, LockOwner, OpenFlags, ReplyAttr, ReplyData, ReplyEntry, ReplyOpen, Request};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

const FILE_INO: u64 = 2;
const SIZE: u64 = 1 << 20;

#[derive(Default)]
struct Held {
    attrs: Vec<ReplyAttr>,
    reads: Vec<(u32, ReplyData)>,
    /// Offsets of every read received, in order.
    log: Vec<u64>,
}

struct HangFs {
    hanging: Arc<AtomicBool>,
    holding_reads: Arc<AtomicBool>,
    held: Arc<Mutex<Held>>,
}

fn attr(ino: u64) -> FileAttr {
    let dir = ino == 1;
    FileAttr {
        ino: INodeNo(ino),
        size: if dir { 0 } else { SIZE },
        blocks: 0,
        atime: SystemTime::UNIX_EPOCH,
        mtime: SystemTime::UNIX_EPOCH,
        ctime: SystemTime::UNIX_EPOCH,
        crtime: SystemTime::UNIX_EPOCH,
        kind: if dir { FileType::Directory } else { FileType::RegularFile },
        perm: if dir { 0o755 } else { 0o644 },
        nlink: 1,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

impl fuser::Filesystem for HangFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if parent.0 == 1 && name == "f" {
            reply.entry(&Duration::ZERO, &attr(FILE_INO), Generation(0));
        } else {
            reply.error(Errno::ENOENT);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        if self.hanging.load(Ordering::SeqCst) {
            self.held.lock().unwrap().attrs.push(reply);
        } else {
            reply.attr(&Duration::ZERO, &attr(ino.0));
        }
    }

    fn open(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let mut held = self.held.lock().unwrap();
        held.log.push(offset);
        let size = size.min(SIZE.saturating_sub(offset) as u32);
        if self.hanging.load(Ordering::SeqCst) || self.holding_reads.load(Ordering::SeqCst) {
            held.reads.push((size, reply));
        } else {
            reply.data(&vec![0u8; size as usize]);
        }
    }
}

pub struct HangMount {
    pub dir: tempfile::TempDir,
    hanging: Arc<AtomicBool>,
    holding_reads: Arc<AtomicBool>,
    held: Arc<Mutex<Held>>,
    session: Option<fuser::BackgroundSession>,
}

impl HangMount {
    /// Mounts it on a fresh directory (needs root or fusermount3).
    pub fn mount() -> std::io::Result<HangMount> {
        let dir = tempfile::tempdir()?;
        let hanging = Arc::new(AtomicBool::new(false));
        let holding_reads = Arc::new(AtomicBool::new(false));
        let held = Arc::new(Mutex::new(Held::default()));
        let fs = HangFs { hanging: hanging.clone(), holding_reads: holding_reads.clone(), held: held.clone() };
        let mut cfg = fuser::Config::default();
        cfg.mount_options = vec![fuser::MountOption::FSName("hang".into()), fuser::MountOption::Subtype("hang".into())];
        cfg.acl = fuser::SessionACL::All;
        let session = fuser::Session::new(fs, dir.path(), &cfg)?.spawn()?;
        Ok(HangMount { dir, hanging, holding_reads, held, session: Some(session) })
    }

    pub fn file(&self) -> PathBuf {
        self.dir.path().join("f")
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// From now on attribute requests and reads are never answered.
    pub fn hang(&self) {
        self.hanging.store(true, Ordering::SeqCst);
    }

    /// From now on reads (only) wait until `release()`.
    pub fn hold_reads(&self) {
        self.holding_reads.store(true, Ordering::SeqCst);
    }

    /// Answers the held reads, in order, and lets later reads through.
    pub fn release(&self) {
        self.holding_reads.store(false, Ordering::SeqCst);
        let reads = std::mem::take(&mut self.held.lock().unwrap().reads);
        for (size, reply) in reads {
            reply.data(&vec![0u8; size as usize]);
        }
    }

    /// Offsets of every read received so far, in arrival order.
    pub fn read_log(&self) -> Vec<u64> {
        self.held.lock().unwrap().log.clone()
    }

    /// Requests held so far (attributes, reads).
    pub fn held(&self) -> (usize, usize) {
        let h = self.held.lock().unwrap();
        (h.attrs.len(), h.reads.len())
    }
}

impl Drop for HangMount {
    fn drop(&mut self) {
        self.hanging.store(false, Ordering::SeqCst);
        let held = std::mem::take(&mut *self.held.lock().unwrap());
        drop(held); // unanswered replies answer EIO when dropped
        if let Some(s) = self.session.take() {
            let _ = s.umount_and_join();
        }
        // If the unmount did not happen (a descriptor still open on it, e.g.
        // in a daemon being stopped), detach the mount rather than leave a
        // dead FUSE mount behind once this process exits. Fails harmlessly
        // (EINVAL) when it is already gone, or without the privilege.
        if let Ok(path) = std::ffi::CString::new(self.dir.path().as_os_str().as_encoded_bytes()) {
            // SAFETY: a NUL-terminated path that outlives the call.
            unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) };
        }
    }
}
