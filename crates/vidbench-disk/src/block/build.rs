//! Building a drive image: a real mkfs and the real kernel lay the library
//! out, nothing of the file data is stored.
//!
//! 1. The image server runs in capture mode (untimed, writable, sparse: see
//!    `imagefs`), and a loop device with direct I/O is attached read-write to
//!    its `disk.img`.
//! 2. `mkfs.ext4` / `mkfs.xfs` makes the filesystem over the first `fs_bytes`
//!    of the drive (the whole drive, or the library plus slack at the outer
//!    edge) and the kernel mounts it.
//! 3. The library's directories and files are created in the chosen fill
//!    order, each given *written* extents of its full size: first
//!    `fallocate(FALLOC_FL_WRITE_ZEROES)` (Linux 6.17+; it needs the device to
//!    support unmapping write-zeroes, which a loop device over FUSE does not
//!    offer), otherwise a plain `fallocate` (so the allocator sees the whole
//!    file at once, as delayed allocation does for a copy) followed by
//!    direct-I/O writes of zeros, which turn the unwritten extents into
//!    written ones. The zeros cross FUSE but the capture drops them, so they
//!    cost CPU, not memory or disk.
//! 4. After syncfs, FIEMAP gives each file's physical extents, which become
//!    the extent map; unwritten or delayed extents are refused.
//! 5. The filesystem is unmounted (the kernel writes its final metadata), the
//!    loop device detached, and the overlay of non-zero blocks is what remains.
//!
//! Every resource is recorded in the clean-up [`Guard`] before it exists.

use super::image::{BuildFigures, Extent, Image, ImageKey};
use super::imagefs::{ImageFs, Mode, Overlay, IMAGE_FILE};
use super::loopdev;
use super::reaper::{image_inode, Guard, Resource};
use super::FsKind;
use anyhow::{bail, Context};
use std::ffi::CString;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use vidbench_library::Library;

const FALLOC_FL_WRITE_ZEROES: i32 = 0x80;
/// Size of each zero write (direct I/O).
const ZERO_CHUNK: usize = 8 << 20;

/// Runs `mkfs.*` for `fs` on `dev`, sized `fs_bytes`.
fn mkfs(fs: FsKind, dev: &Path, fs_bytes: u64, key: &ImageKey) -> anyhow::Result<String> {
    let program = fs.mkfs();
    let path = loopdev::which(program).with_context(|| format!("{program} is not installed: install the Debian package {} (`apt-get install {}`, or scripts/bootstrap), or use --fs {}", fs.package(), fs.package(), fs.other()))?;
    // A UUID derived from the key: the same inputs give the same filesystem
    // identity and (ext4) directory hash seed, hence the same placement. It
    // is the key's hash as builder version 2 had it: version 3 settled where
    // files land inside the library's region, and keeping the seed keeps the
    // region (a paper-scale library at 193-525 GB) where every record since
    // version 2 has it.
    let seed_key = ImageKey { builder_version: 2, ..key.clone() };
    let h = super::image::fnv1a(seed_key.hash().as_bytes());
    let uuid = format!("{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}", h >> 32, (h >> 16) & 0xffff, h & 0xfff, (h >> 20) & 0xfff, h & 0xffff_ffff_ffff);
    let mut cmd = std::process::Command::new(&path);
    match fs {
        FsKind::Ext4 => {
            // largefile: one inode per MiB (a video library has few, large
            // files); no discard; inode tables and journal written now rather
            // than by a background thread after the mount.
            // hash_seed: ext4 places a new top-level directory (the
            // library's) in the flex group its name hashes to with this seed
            // (find_group_orlov); mke2fs draws it at random otherwise, so two
            // builds of one key put the library in different places on the
            // drive, and seek distances and media rates with it.
            cmd.args(["-F", "-q", "-T", "largefile", "-L", "vidbench", "-U", &uuid, "-E"]);
            cmd.arg(format!("nodiscard,lazy_itable_init=0,lazy_journal_init=0,hash_seed={uuid}"));
            cmd.arg(dev).arg(format!("{}k", fs_bytes / 1024));
        }
        FsKind::Xfs => {
            cmd.args(["-f", "-q", "-K", "-L", "vidbench", "-m", &format!("uuid={uuid}")]);
            cmd.arg("-d").arg(format!("size={fs_bytes}")).arg(dev);
        }
    }
    let out = cmd.output().with_context(|| format!("running {}", path.display()))?;
    if !out.status.success() {
        bail!("{} on {} failed: {}{}", path.display(), dev.display(), String::from_utf8_lossy(&out.stderr).trim(), String::from_utf8_lossy(&out.stdout).trim());
    }
    let version = std::process::Command::new(&path).arg("-V").output().map(|o| {
        let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        text.lines().next().unwrap_or("").trim().to_owned()
    });
    Ok(version.unwrap_or_default())
}

pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_owned()).unwrap_or_default()
}

/// Mounts `dev` at `at` with `fstype` and `data` options.
pub fn mount(dev: &Path, at: &Path, fstype: &str, flags: libc::c_ulong, data: &str) -> std::io::Result<()> {
    let c = |p: &[u8]| CString::new(p).map_err(std::io::Error::other);
    let (d, a, t, o) = (c(dev.as_os_str().as_encoded_bytes())?, c(at.as_os_str().as_encoded_bytes())?, c(fstype.as_bytes())?, c(data.as_bytes())?);
    // SAFETY: valid NUL-terminated strings.
    if unsafe { libc::mount(d.as_ptr(), a.as_ptr(), t.as_ptr(), flags, o.as_ptr() as *const libc::c_void) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// A zeroed buffer aligned for direct I/O.
struct AlignedZeros {
    ptr: *mut u8,
    len: usize,
}

impl AlignedZeros {
    fn new(len: usize) -> AlignedZeros {
        let layout = std::alloc::Layout::from_size_align(len, 4096).expect("valid layout");
        // SAFETY: non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "allocating {len} bytes");
        AlignedZeros { ptr, len }
    }
}

impl Drop for AlignedZeros {
    fn drop(&mut self) {
        // SAFETY: allocated in new() with this layout.
        unsafe { std::alloc::dealloc(self.ptr, std::alloc::Layout::from_size_align(self.len, 4096).expect("valid layout")) }
    }
}

/// How file data gets written extents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Allocation {
    WriteZeroes,
    ZeroWrites,
}

/// Gives `file` (already created, empty) written extents of `size` bytes.
fn allocate(path: &Path, size: u64, how: &mut Option<Allocation>, zeros: &AlignedZeros) -> anyhow::Result<()> {
    if size == 0 {
        return Ok(());
    }
    if how.is_none() || *how == Some(Allocation::WriteZeroes) {
        let f = std::fs::OpenOptions::new().write(true).open(path).with_context(|| format!("opening {}", path.display()))?;
        // SAFETY: fallocate on an open descriptor.
        let rc = unsafe { libc::fallocate(f.as_raw_fd(), FALLOC_FL_WRITE_ZEROES, 0, size as libc::off_t) };
        if rc == 0 {
            *how = Some(Allocation::WriteZeroes);
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EOPNOTSUPP) | Some(libc::EINVAL) if how.is_none() => *how = Some(Allocation::ZeroWrites),
            _ => return Err(err).with_context(|| format!("fallocate(FALLOC_FL_WRITE_ZEROES) of {} bytes on {}", size, path.display())),
        }
    }
    let f = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_DIRECT).open(path).with_context(|| format!("opening {} for direct I/O", path.display()))?;
    // SAFETY: fallocate on an open descriptor; the mode-0 allocation only
    // reserves contiguous space, the writes below make it written.
    if unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, size as libc::off_t) } != 0 {
        let err = std::io::Error::last_os_error();
        return Err(err).with_context(|| format!("allocating {} bytes for {}", size, path.display()));
    }
    let rounded = size.div_ceil(4096) * 4096;
    let mut off = 0u64;
    while off < rounded {
        let n = ((rounded - off) as usize).min(zeros.len);
        // SAFETY: the buffer holds zeros.len bytes; n <= zeros.len.
        let rc = unsafe { libc::pwrite(f.as_raw_fd(), zeros.ptr as *const libc::c_void, n, off as libc::off_t) };
        if rc <= 0 {
            let err = std::io::Error::last_os_error();
            return Err(err).with_context(|| format!("writing zeros at {off} of {}", path.display()));
        }
        off += rc as u64;
    }
    if rounded != size {
        f.set_len(size).with_context(|| format!("truncating {} to {size} bytes", path.display()))?;
    }
    Ok(())
}

/// The physical extents of `path` (bytes on the filesystem's device), clipped
/// to the file's size.
pub fn fiemap(path: &Path, size: u64) -> anyhow::Result<Vec<(u64, u64, u64)>> {
    let f = std::fs::File::open(path).with_context(|| format!("opening {} for FIEMAP", path.display()))?;
    let mut out = Vec::new();
    let mut start = 0u64;
    loop {
        let extents = ::fiemap::extents::<64>(&f, start, u64::MAX - start, ::fiemap::FLAG_SYNC).with_context(|| format!("FIEMAP of {}", path.display()))?;
        if extents.is_empty() {
            break;
        }
        let mut last = false;
        for e in &extents {
            if e.flags & ::fiemap::EXTENT_NOT_PLACED != 0 {
                bail!("{}: extent at file offset {} has flags {:#x} (delayed, inline or unknown position): cannot map it to the drive", path.display(), e.logical, e.flags);
            }
            if e.flags & ::fiemap::EXTENT_UNWRITTEN != 0 {
                bail!("{}: extent at file offset {} is unwritten: the filesystem would read it as zeros without asking the drive", path.display(), e.logical);
            }
            if e.logical < size {
                out.push((e.logical, e.physical, e.length.min(size - e.logical)));
            }
            start = e.logical + e.length;
            last |= e.flags & ::fiemap::EXTENT_LAST != 0;
        }
        if last || start >= size {
            break;
        }
    }
    let covered: u64 = out.iter().map(|e| e.2).sum();
    if covered != size {
        bail!("{}: FIEMAP maps {covered} of its {size} bytes (holes?): every byte of a library file must be on the drive", path.display());
    }
    Ok(out)
}

/// The order in which files are created.
pub fn fill_order(library: &Library, shuffled: bool, seed: u64) -> Vec<usize> {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let mut order: Vec<usize> = (0..library.files.len()).collect();
    if shuffled {
        order.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed));
    }
    order
}

/// Builds the image of `library` under `key`, using `work` (a fresh
/// directory) for the capture mounts.
pub fn build(library: &Library, key: &ImageKey, fs: FsKind, work: &Path, guard: &mut Guard, check: &dyn Fn() -> anyhow::Result<()>) -> anyhow::Result<Image> {
    let started = Instant::now();
    let fuse_dir = work.join("capture");
    let fs_dir = work.join("fs");
    for d in [&fuse_dir, &fs_dir] {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    // The capture server.
    let overlay = Arc::new(Mutex::new(Overlay::default()));
    let imagefs = ImageFs::new(Mode::Capture(overlay.clone()), key.capacity_bytes, 1024, 64);
    let mut options = fuser::Config::default();
    options.mount_options = vec![fuser::MountOption::FSName(super::imagefs::FSNAME.into()), fuser::MountOption::Subtype("capture".into()), fuser::MountOption::RW, fuser::MountOption::NoAtime];
    options.n_threads = Some(2);
    options.clone_fd = true;
    guard.add(Resource::Fuse(fuse_dir.clone()));
    let session = fuser::Session::new(imagefs, &fuse_dir, &options).with_context(|| format!("mounting the capture image server on {}", fuse_dir.display()))?;
    let session_thread = std::thread::Builder::new().name("vidbench-capture".into()).spawn(move || session.run())?;
    let result = populate(library, key, fs, &fuse_dir, &fs_dir, guard, &overlay, started, check);
    // Whatever happened, the capture server goes away, after the filesystem
    // and the loop device over it (an error may have left them).
    let capture = Resource::Fuse(fuse_dir.clone());
    let fuse = guard.release_newer_than(&capture).and_then(|()| guard.release(&capture));
    let _ = session_thread.join();
    let image = result?;
    fuse.context("unmounting the capture image server")?;
    Ok(image)
}

#[allow(clippy::too_many_arguments)]
fn populate(library: &Library, key: &ImageKey, fs: FsKind, fuse_dir: &Path, fs_dir: &Path, guard: &mut Guard, overlay: &Arc<Mutex<Overlay>>, started: Instant, check: &dyn Fn() -> anyhow::Result<()>) -> anyhow::Result<Image> {
    let img = fuse_dir.join(IMAGE_FILE);
    let dev = loopdev::attach(&img, false).with_context(|| "attaching the capture image to a loop device".to_string())?;
    let loop_res = Resource::Loop { dev: dev.name.clone(), backing: img.clone(), inode: image_inode(&img) };
    guard.add(loop_res.clone());
    let mkfs_version = mkfs(fs, &dev.dev_path(), key.fs_bytes, key)?;
    let mount_res = Resource::Mount { at: fs_dir.to_owned(), source: dev.dev_path().display().to_string() };
    guard.add(mount_res.clone());
    mount(&dev.dev_path(), fs_dir, fs.name(), libc::MS_NOATIME, fs.build_options()).with_context(|| format!("mounting the new {} on {} at {}", fs.name(), dev.dev_path().display(), fs_dir.display()))?;

    let order = fill_order(library, key.fill_order == "shuffled", key.seed);
    let zeros = AlignedZeros::new(ZERO_CHUNK);
    let mut how = None;
    let total = library.total_bytes();
    let mut done_bytes = 0u64;
    let mut last_report = Instant::now();
    for (n, &i) in order.iter().enumerate() {
        check()?;
        let f = &library.files[i];
        let path = fs_dir.join(&f.path);
        if let Some(parent) = path.parent() {
            if !parent.exists() {
                std::fs::create_dir_all(parent).with_context(|| format!("creating directory {}", parent.display()))?;
            }
        }
        std::fs::OpenOptions::new().write(true).create_new(true).open(&path).with_context(|| format!("creating {}", path.display()))?;
        allocate(&path, f.size, &mut how, &zeros)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).with_context(|| format!("chmod {}", path.display()))?;
        std::os::unix::fs::chown(&path, Some(key.uid), Some(key.gid)).with_context(|| format!("chown {}", path.display()))?;
        done_bytes += f.size;
        if last_report.elapsed().as_secs_f64() > 10.0 {
            tracing::info!(
                "building the {} image: {}/{} files, {:.1}/{:.1} GB, {:.0} s",
                fs.name(),
                n + 1,
                order.len(),
                done_bytes as f64 / 1e9,
                total as f64 / 1e9,
                started.elapsed().as_secs_f64()
            );
            last_report = Instant::now();
        }
    }
    // Directories: read-only for everyone but root, as a served tree.
    let root = std::fs::File::open(fs_dir).with_context(|| format!("opening {}", fs_dir.display()))?;
    // SAFETY: syncfs on an open descriptor.
    if unsafe { libc::syncfs(root.as_raw_fd()) } != 0 {
        return Err(std::io::Error::last_os_error()).context("syncfs of the new filesystem");
    }
    let mut extents = Vec::new();
    let mut first = u64::MAX;
    let mut end = 0u64;
    for f in &library.files {
        for (logical, physical, len) in fiemap(&fs_dir.join(&f.path), f.size)? {
            first = first.min(physical);
            end = end.max(physical + len);
            extents.push(Extent { image_offset: physical, len, file_id: f.content_id(), file_offset: logical });
        }
    }
    drop(root);
    guard.release(&mount_res).context("unmounting the new filesystem")?;
    guard.release(&loop_res).context("detaching the capture loop device")?;
    let (blocks, written) = {
        let mut o = overlay.lock().expect("overlay lock");
        (std::mem::take(&mut o.blocks), o.written_bytes)
    };
    let figures = BuildFigures {
        build_seconds: started.elapsed().as_secs_f64(),
        allocation: match how {
            Some(Allocation::WriteZeroes) => "write-zeroes".into(),
            _ => "zero-writes".into(),
        },
        files: library.files.len() as u64,
        extents: extents.len() as u64,
        overlay_blocks: blocks.len() as u64,
        data_first_byte: if first == u64::MAX { 0 } else { first },
        data_end_byte: end,
        mkfs: mkfs_version,
        kernel: kernel_release(),
        placement: String::new(), // Image::new digests the extents
    };
    let (mut image, dropped) = Image::new(key.clone(), figures, blocks, extents).context("assembling the extent map")?;
    image.figures.overlay_blocks = image.overlay_blocks() as u64;
    tracing::info!(
        "built the {} image in {:.1} s: {} files in {} extents between {:.1} and {:.1} GB of the drive, {} metadata blocks ({:.1} MB) kept, {} dropped, {:.1} GB written through the capture ({})",
        fs.name(),
        image.figures.build_seconds,
        image.figures.files,
        image.figures.extents,
        image.figures.data_first_byte as f64 / 1e9,
        image.figures.data_end_byte as f64 / 1e9,
        image.overlay_blocks(),
        image.overlay_blocks() as f64 * 4096.0 / 1e6,
        dropped,
        written as f64 / 1e9,
        image.figures.allocation
    );
    Ok(image)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn library(n: usize) -> Library {
        use vidbench_library::{Video, MANIFEST_VERSION};
        Library {
            version: MANIFEST_VERSION,
            name: "t".into(),
            placement_seed: 1,
            files: (0..n).map(|i| Video { id: i as u32, content: None, path: format!("v/{i}"), size: 1000, video: i as u32, chunk: None, bitrate_kbps: 400, duration_s: 1.0, rank: 1 + i as u32 }).collect(),
        }
    }

    #[test]
    fn fill_order_is_the_library_or_a_seeded_permutation() {
        let lib = library(50);
        assert_eq!(fill_order(&lib, false, 7), (0..50).collect::<Vec<_>>());
        let a = fill_order(&lib, true, 7);
        assert_eq!(a, fill_order(&lib, true, 7), "same seed, same order");
        assert_ne!(a, fill_order(&lib, true, 8), "the seed chooses");
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>(), "a permutation");
    }

    /// FIEMAP on the test binary's filesystem (the target directory, a disk
    /// filesystem: tmpfs, where /tmp may be, has no FIEMAP).
    fn scratch() -> tempfile::TempDir {
        let deps = std::env::current_exe().unwrap().parent().unwrap().to_owned();
        tempfile::tempdir_in(deps).unwrap()
    }

    #[test]
    fn fiemap_maps_every_byte_of_a_written_file() {
        let dir = scratch();
        let path = dir.path().join("f");
        let size = 3 * 1024 * 1024 + 123;
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&vec![1u8; size]).unwrap();
        f.sync_all().unwrap();
        let extents = fiemap(&path, size as u64).unwrap();
        assert_eq!(extents.iter().map(|e| e.2).sum::<u64>(), size as u64);
        assert_eq!(extents[0].0, 0);
        for w in extents.windows(2) {
            assert_eq!(w[0].0 + w[0].2, w[1].0, "logically contiguous");
        }
        assert!(extents.iter().all(|e| e.1 % 4096 == 0), "physical offsets are block aligned");
    }

    #[test]
    fn fiemap_refuses_unwritten_extents_and_holes() {
        let dir = scratch();
        let path = dir.path().join("u");
        let f = std::fs::File::create(&path).unwrap();
        // SAFETY: fallocate on an open descriptor.
        let rc = unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, 1 << 20) };
        if rc == 0 {
            let err = fiemap(&path, 1 << 20).unwrap_err().to_string();
            assert!(err.contains("unwritten"), "{err}");
        }
        let hole = dir.path().join("h");
        let f = std::fs::File::create(&hole).unwrap();
        f.set_len(1 << 20).unwrap();
        let err = fiemap(&hole, 1 << 20).unwrap_err().to_string();
        assert!(err.contains("maps 0 of"), "{err}");
    }
}
