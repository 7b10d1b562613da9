//! The FUSE filesystem: the library's files, read-only, timed by the drive.
//!
//! The tree is built once from the manifest (inode = index in `nodes` + 1,
//! root = 1). Reads of library files are handed to the scheduler thread with
//! their reply object and answered at the model's completion time; everything
//! else (lookup, getattr, readdir, the control file) is answered at once.
//!
//! Kernel-facing choices, each needed for the emulation to be faithful:
//! - FOPEN_KEEP_CACHE on every open, or each open would drop the file's pages
//!   from the page cache;
//! - attribute and entry timeouts of a year (nothing ever changes);
//! - max_write = `max_request_kib` so that max_pages lets reads of that size
//!   through, max_background / congestion threshold from the options so that
//!   many readahead requests can be outstanding at once.
//!
//! `/.vidbench/stats.json` is the control file: not listed in the root, a
//! fresh JSON snapshot of the counters on each open (direct I/O, so never
//! cached and its size does not matter).

use crate::scheduler::{Intake, Read};
use crate::stats::Stats;
use fuser::{
    Errno, FileAttr, FileHandle, FileType, FopenFlags, Generation, INodeNo, KernelConfig, LockOwner, OpenAccMode, OpenFlags, ReplyAttr,
    ReplyData, ReplyDirectory, ReplyEntry, ReplyOpen, ReplyStatfs, Request,
};
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use vidbench_library::{content, Library};

const TTL: Duration = Duration::from_secs(365 * 24 * 3600);

/// Kernel-side settings of the mount.
#[derive(Debug, Clone, Copy)]
pub struct KernelSettings {
    pub uid: u32,
    pub gid: u32,
    pub max_request_kib: u32,
    pub max_background: u16,
}

#[derive(Debug)]
enum Node {
    Dir { parent: u64, children: BTreeMap<String, u64>, hidden: Option<u64> },
    File { index: usize },
    StatsFile,
}

/// One library file as the filesystem needs it.
#[derive(Debug, Clone, Copy)]
struct FileInfo {
    id: u32,
    /// Whose bytes it holds (`Video::content_id`).
    content: u32,
    size: u64,
    start_lba: u64,
}

pub struct DiskFs {
    nodes: Vec<Node>,
    files: Vec<FileInfo>,
    intake: Intake,
    stats: Arc<Stats>,
    settings: KernelSettings,
    created: SystemTime,
    capacity_bytes: u64,
    /// Open control files: handle -> the snapshot taken at open.
    control: Mutex<HashMap<u64, Arc<Vec<u8>>>>,
    next_fh: AtomicU64,
}

impl DiskFs {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        library: &Library,
        start_lba: &[u64],
        intake: Intake,
        stats: Arc<Stats>,
        settings: KernelSettings,
        capacity_bytes: u64,
    ) -> DiskFs {
        let mut nodes = vec![Node::Dir { parent: 1, children: BTreeMap::new(), hidden: None }];
        let files: Vec<FileInfo> = library
            .files
            .iter()
            .zip(start_lba)
            .map(|(f, &lba)| FileInfo { id: f.id, content: f.content_id(), size: f.size, start_lba: lba })
            .collect();
        for (index, f) in library.files.iter().enumerate() {
            let mut dir = 1u64;
            let components: Vec<&str> = f.path.split('/').collect();
            for (k, name) in components.iter().enumerate() {
                let last = k + 1 == components.len();
                let existing = match &nodes[dir as usize - 1] {
                    Node::Dir { children, .. } => children.get(*name).copied(),
                    _ => unreachable!("the manifest is validated: no file is also a directory"),
                };
                let child = match existing {
                    Some(ino) => ino,
                    None => {
                        nodes.push(if last { Node::File { index } } else { Node::Dir { parent: dir, children: BTreeMap::new(), hidden: None } });
                        let ino = nodes.len() as u64;
                        if let Node::Dir { children, .. } = &mut nodes[dir as usize - 1] {
                            children.insert((*name).to_owned(), ino);
                        }
                        ino
                    }
                };
                dir = child;
            }
        }
        // The control directory: found by lookup, never listed.
        nodes.push(Node::StatsFile);
        let stats_ino = nodes.len() as u64;
        let mut control_children = BTreeMap::new();
        control_children.insert(crate::stats::STATS_FILE.to_owned(), stats_ino);
        nodes.push(Node::Dir { parent: 1, children: control_children, hidden: None });
        let control_ino = nodes.len() as u64;
        if let Node::Dir { hidden, .. } = &mut nodes[0] {
            *hidden = Some(control_ino);
        }
        DiskFs {
            nodes,
            files,
            intake,
            stats,
            settings,
            created: SystemTime::now(),
            capacity_bytes,
            control: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
        }
    }

    fn node(&self, ino: INodeNo) -> Option<&Node> {
        (ino.0 as usize).checked_sub(1).and_then(|i| self.nodes.get(i))
    }

    fn attr(&self, ino: u64) -> FileAttr {
        let (kind, perm, size) = match &self.nodes[ino as usize - 1] {
            Node::Dir { .. } => (FileType::Directory, 0o555, 0),
            Node::File { index } => (FileType::RegularFile, 0o444, self.files[*index].size),
            Node::StatsFile => (FileType::RegularFile, 0o444, 0),
        };
        file_attr(ino, kind, perm, size, self.created, (self.settings.uid, self.settings.gid))
    }
}

impl fuser::Filesystem for DiskFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let max_request = self.settings.max_request_kib * 1024;
        if let Err(nearest) = config.set_max_write(max_request) {
            let _ = config.set_max_write(nearest);
        }
        if let Err(nearest) = config.set_max_readahead(max_request) {
            let _ = config.set_max_readahead(nearest);
        }
        let background = self.settings.max_background.max(1);
        let _ = config.set_max_background(background);
        let _ = config.set_congestion_threshold((background as u32 * 3 / 4).max(1) as u16);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let Some(Node::Dir { children, hidden, .. }) = self.node(parent) else {
            return reply.error(Errno::ENOTDIR);
        };
        let name = name.to_string_lossy();
        let found = children.get(name.as_ref()).copied().or(match (hidden, name.as_ref()) {
            (Some(ino), crate::stats::CONTROL_DIR) => Some(*ino),
            _ => None,
        });
        match found {
            Some(ino) => reply.entry(&TTL, &self.attr(ino), Generation(0)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.node(ino) {
            Some(_) => reply.attr(&TTL, &self.attr(ino.0)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if flags.acc_mode() != OpenAccMode::O_RDONLY {
            return reply.error(Errno::EROFS);
        }
        match self.node(ino) {
            Some(Node::File { .. }) => reply.opened(FileHandle(0), FopenFlags::FOPEN_KEEP_CACHE),
            Some(Node::StatsFile) => {
                let mut json = serde_json::to_vec_pretty(&self.stats.snapshot()).expect("a snapshot serializes");
                json.push(b'\n');
                let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
                self.control.lock().expect("control lock").insert(fh, Arc::new(json));
                reply.opened(FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO)
            }
            Some(Node::Dir { .. }) => reply.error(Errno::EISDIR),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.node(ino) {
            Some(Node::File { index }) => {
                let f = self.files[*index];
                if offset >= f.size || size == 0 {
                    return reply.data(&[]);
                }
                let len = (size as u64).min(f.size - offset);
                let first = offset / 512;
                let last = (offset + len).div_ceil(512);
                let read = Read { file_id: f.id, offset, lba: f.start_lba + first, sectors: last - first, len };
                let content = f.content;
                self.intake.read(read, move |data| content::fill(content, offset, data), reply);
            }
            Some(Node::StatsFile) => {
                read_control(&self.control, fh.0, offset, size, reply);
            }
            Some(Node::Dir { .. }) => reply.error(Errno::EISDIR),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: fuser::ReplyEmpty,
    ) {
        if fh.0 != 0 {
            self.control.lock().expect("control lock").remove(&fh.0);
        }
        reply.ok();
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let Some(Node::Dir { parent, children, .. }) = self.node(ino) else {
            return reply.error(Errno::ENOTDIR);
        };
        let fixed = [(ino.0, FileType::Directory, "."), (*parent, FileType::Directory, "..")];
        let entries = fixed.into_iter().chain(children.iter().map(|(name, &child)| {
            let kind = match self.nodes[child as usize - 1] {
                Node::Dir { .. } => FileType::Directory,
                _ => FileType::RegularFile,
            };
            (child, kind, name.as_str())
        }));
        for (i, (child, kind, name)) in entries.enumerate().skip(offset as usize) {
            if reply.add(INodeNo(child), (i + 1) as u64, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let blocks = self.capacity_bytes / 4096;
        reply.statfs(blocks, 0, 0, self.nodes.len() as u64, 0, 4096, 255, 4096);
    }
}

/// The attributes of a node of a read-only emulated-disk filesystem (this one
/// or block mode's image server): every time is `created`, blocks of 512 bytes,
/// directories with two links.
pub(crate) fn file_attr(ino: u64, kind: FileType, perm: u16, size: u64, created: SystemTime, (uid, gid): (u32, u32)) -> FileAttr {
    FileAttr {
        ino: INodeNo(ino),
        size,
        blocks: size.div_ceil(512),
        atime: created,
        mtime: created,
        ctime: created,
        crtime: created,
        kind,
        perm,
        nlink: if kind == FileType::Directory { 2 } else { 1 },
        uid,
        gid,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

/// Answers a read of the stats file from the snapshot taken when handle `fh`
/// was opened, so that a reader sees one consistent document however it
/// splits its reads.
pub(crate) fn read_control(control: &Mutex<HashMap<u64, Arc<Vec<u8>>>>, fh: u64, offset: u64, size: u32, reply: ReplyData) {
    let snapshot = control.lock().expect("control lock").get(&fh).cloned();
    match snapshot {
        Some(bytes) => {
            let start = (offset as usize).min(bytes.len());
            let end = (start + size as usize).min(bytes.len());
            reply.data(&bytes[start..end])
        }
        None => reply.error(Errno::EIO),
    }
}
