//! Block mode (`vidbench disk mount --block`): the emulated drive as a real
//! block device under a real filesystem.
//!
//! ```text
//!  MNT (ext4/xfs, ro)            servers read here; the page cache is this fs's
//!   /dev/loopN (ro, dio, rotational=1, scheduler, read_ahead_kb, max_sectors_kb)
//!    RUNTIME/fuse/disk.img        the image server (imagefs, timed mode)
//!     drive model + scheduler      every byte timed at its true LBA
//!      Image: overlay + extent map content generated, metadata real
//! ```
//!
//! The image (`image`) is built once per [`image::ImageKey`] by `build` (a
//! real mkfs and kernel writing into a capture server) and cached, gzip'd, in
//! the image cache; later mounts load it in seconds. The mount process owns
//! everything it sets up and releases it on every exit path: normally, on
//! SIGINT/SIGTERM/SIGHUP, when its parent dies (foreground mode), and, through
//! the `reaper` process, when it is killed outright.
//!
//! `vidbench disk stat|unmount MNT` find a block mount from the mount table:
//! MNT's source is a loop device whose backing file is an image server's
//! `disk.img`, beside which `.vidbench/stats.json` holds the drive's counters.

mod build;
pub mod image;
mod imagefs;
pub mod loopdev;
pub mod reaper;
pub(crate) mod args;

pub use args::{BlockArgs, FillOrder, FsKind, FsSize, Scheduler};

use crate::mount_args::MountArgs;
use crate::model::Drive;
use crate::scheduler::RunningDrive;
use crate::stats::Stats;
use crate::sys;
use anyhow::{bail, Context};
use image::{Image, ImageError, ImageKey};
use imagefs::{ImageFs, Mode, Timed, IMAGE_FILE};
use loopdev::{LoopDev, QueueSettings};
use reaper::{image_inode, Guard, Resource};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use vidbench_library::Library;

/// Largest request the image server takes: the loop device's own cap (1280
/// KiB), so that a loop request reaches the drive whole, where FUSE lets it
/// through; kernels before 6.13 cap a FUSE request at 1024 KiB, and there the
/// loop device gets that cap and the drive joins the pieces of a larger
/// request up to 1280 KiB, as a disk's block layer would have merged them
/// (docs/disk.md, "max_sectors_kb").
fn image_max_request_kib() -> u32 {
    sys::fuse_max_request_kb().min(1280)
}
/// Outstanding direct reads FUSE lets through: more than the block queue holds.
const IMAGE_MAX_BACKGROUND: u16 = 512;

fn default_cache_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(x).join("vidbench/images");
    }
    if let Some(h) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(h).join(".cache/vidbench/images");
    }
    PathBuf::from("/var/cache/vidbench/images")
}

/// Bytes of the filesystem for these options.
fn fs_bytes(args: &BlockArgs, library: &Library, capacity: u64) -> u64 {
    match args.fs_size {
        FsSize::Whole => capacity / (1 << 20) * (1 << 20),
        FsSize::Packed => {
            let data: u64 = library.files.iter().map(|f| f.size.div_ceil(4096) * 4096).sum();
            // Slack for the files, plus room for metadata and a journal/log.
            let want = data + data / 100 * args.fs_slack_pct as u64 + (1 << 30);
            (want.div_ceil(1 << 20) * (1 << 20)).min(capacity / (1 << 20) * (1 << 20))
        }
    }
}

/// The key of the image for this mount.
fn image_key(args: &MountArgs, library: &Library, capacity: u64, uid: u32, gid: u32) -> ImageKey {
    let b = &args.block;
    ImageKey {
        builder_version: image::BUILDER_VERSION,
        library_hash: format!("{:016x}", image::fnv1a(&serde_json::to_vec(library).expect("a library serializes"))),
        library_name: library.name.clone(),
        fs: b.fs.name().into(),
        capacity_bytes: capacity,
        fs_bytes: fs_bytes(b, library, capacity),
        fill_order: match b.fill_order {
            FillOrder::Library => "library".into(),
            FillOrder::Shuffled => "shuffled".into(),
        },
        seed: if b.fill_order == FillOrder::Shuffled { args.seed.unwrap_or(library.placement_seed) } else { 0 },
        uid,
        gid,
    }
}

/// Loads the image from the cache, or builds and caches it; with `--image`,
/// loads that file (built for this key, by any builder version).
fn obtain_image(args: &MountArgs, library: &Library, key: &ImageKey, guard: &mut Guard, check: &dyn Fn() -> anyhow::Result<()>) -> anyhow::Result<(Image, PathBuf, bool)> {
    if let Some(path) = &args.block.image {
        let started = Instant::now();
        let image = Image::load_any_version(path, key).map_err(|e| match e {
            ImageError::Mismatch { field, found, wanted, .. } => anyhow::anyhow!("--image {} is not an image of this mount's drive ({field}: the file has {found}, this mount needs {wanted})", path.display()),
            ImageError::Io { error, .. } => anyhow::anyhow!("--image {}: {error}", path.display()),
            e => anyhow::Error::from(e),
        })?;
        let older = if image.key.builder_version == key.builder_version { String::new() } else { format!(" (builder version {}, this build makes {})", image.key.builder_version, key.builder_version) };
        tracing::info!("image {}{older} loaded in {:.1} s", path.display(), started.elapsed().as_secs_f64());
        return Ok((image, path.clone(), false));
    }
    let dir = args.block.image_cache.clone().unwrap_or_else(default_cache_dir);
    let path = key.cache_path(&dir);
    // Two mounts needing one image (two experiments sharing the machine)
    // build it once: the second waits here, then loads the first's.
    let _lock = lock_image(&dir, &path, check)?;
    if !args.block.rebuild_image && path.exists() {
        let started = Instant::now();
        match Image::load(&path, key) {
            Ok(image) => {
                tracing::info!("image {} loaded in {:.1} s", path.display(), started.elapsed().as_secs_f64());
                return Ok((image, path, false));
            }
            Err(ImageError::Corrupt { reason, .. }) => tracing::warn!("image cache {} is corrupt ({reason}): rebuilding it", path.display()),
            Err(e) => return Err(e.into()),
        }
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating the image cache {} (choose another with --image-cache DIR)", dir.display()))?;
    let probe = dir.join(format!(".probe{}", std::process::id()));
    std::fs::write(&probe, b"").with_context(|| format!("the image cache {} is not writable (choose another with --image-cache DIR)", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    tracing::info!("building the {} image of {} ({} files, {:.1} GB) for a {:.0} GB drive; cached as {}", key.fs, library.name, library.files.len(), library.total_bytes() as f64 / 1e9, key.capacity_bytes as f64 / 1e9, path.display());
    let work = runtime_dir("build", guard)?;
    let image = build::build(library, key, args.block.fs, &work, guard, check)?;
    guard.release(&Resource::Dir(work))?;
    image.save(&path).with_context(|| format!("saving the image to {}", path.display()))?;
    Ok((image, path, true))
}

/// An exclusive lock on `path`'s entry in the image cache, held while the
/// returned file is open; `None` where the cache cannot hold a lock file (a
/// read-only cache is only loaded from, never built into). While another
/// mount holds it (building the image: minutes at paper scale) this says so
/// every 10 s, so that a caller watching the log for progress (`vidbench
/// run` gives up on a mount that is silent for a minute) sees it waiting,
/// and `check` can interrupt the wait.
fn lock_image(dir: &Path, path: &Path, check: &dyn Fn() -> anyhow::Result<()>) -> anyhow::Result<Option<std::fs::File>> {
    use std::os::fd::AsRawFd;
    if std::fs::create_dir_all(dir).is_err() {
        return Ok(None);
    }
    let Some(file_name) = path.file_name() else { return Ok(None) };
    let name = format!(".{}.lock", file_name.to_string_lossy());
    let Ok(f) = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(dir.join(name)) else { return Ok(None) };
    let started = Instant::now();
    let mut said = None::<Instant>;
    loop {
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(Some(f));
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
            tracing::warn!("cannot lock the image cache entry of {} ({err}); going on without the lock", path.display());
            return Ok(None);
        }
        if said.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
            tracing::info!("waiting for another mount to finish building {} ({:.0} s)", path.display(), started.elapsed().as_secs_f64());
            said = Some(Instant::now());
        }
        check()?;
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A fresh runtime directory, recorded before it is created.
fn runtime_dir(kind: &str, guard: &mut Guard) -> anyhow::Result<PathBuf> {
    let root = PathBuf::from(std::env::var_os("VIDBENCH_RUNTIME_DIR").unwrap_or_else(|| "/run/vidbench/block".into()));
    let dir = root.join(format!("{kind}-{}", std::process::id()));
    guard.add(Resource::Dir(dir.clone()));
    if dir.exists() {
        // Left by an earlier process with our pid; only empty directories are removed.
        reaper::release(&Resource::Dir(dir.clone()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating the runtime directory {} (set VIDBENCH_RUNTIME_DIR to use another place)", dir.display()))?;
    Ok(dir)
}

/// Checks that this machine can mount in block mode with `fs`: `/dev/fuse`,
/// loop devices and `losetup`, root, and the filesystem's mkfs (needed to
/// build an image). The error says what is missing and how to get it; callers
/// that can fall back to FUSE mode print it (`vidbench run`, `make demo`).
pub fn check_support(fs: FsKind) -> anyhow::Result<()> {
    if !Path::new("/dev/fuse").exists() {
        bail!("/dev/fuse is missing: block mode serves the drive image through FUSE; load the fuse module (modprobe fuse)");
    }
    loopdev::check_support()?;
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        bail!("block mode needs root (loop devices, mounting a filesystem); run as root or without --block");
    }
    if loopdev::which(fs.mkfs()).is_none() {
        bail!("{} is not installed: install the Debian package {} (`apt-get install {}`, or scripts/bootstrap), or use --fs {}", fs.mkfs(), fs.package(), fs.package(), fs.other());
    }
    Ok(())
}

/// What made the mount process stop.
enum Stop {
    Signal(i32),
    SessionEnded,
}

/// Runs a block-mode mount until it is unmounted or signalled. `ready` tells
/// the caller (or a daemonizing parent) the mount is usable.
pub fn serve(args: &MountArgs, ready: &mut dyn FnMut(&str), daemonized: bool) -> anyhow::Result<()> {
    let (preset_name, params, library) = args.prepare()?;
    let mountpoint = &args.mountpoint;
    let fs = args.block.fs;
    // Fail before setting anything up when something is missing.
    check_support(fs)?;
    let capacity = params.capacity_bytes() / 512 * 512;
    let data: u64 = library.files.iter().map(|f| f.size.div_ceil(4096) * 4096).sum();
    if data + data / 20 > capacity {
        bail!("library {}: {:.1} GB in {} files does not fit on the drive ({:.1} GB) with a filesystem's overhead; choose a larger capacity_gb", args.library.display(), data as f64 / 1e9, library.files.len(), capacity as f64 / 1e9);
    }

    // Signals from here on; a foreground mount also ends with its parent.
    let signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP]).context("installing signal handlers")?;
    let signal_handle = signals.handle();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<Stop>();
    let interrupted = Arc::new(AtomicI32::new(0));
    {
        let stop_tx = stop_tx.clone();
        let interrupted = interrupted.clone();
        let mut signals = signals;
        std::thread::Builder::new().name("vidbench-signals".into()).spawn(move || {
            for signal in signals.forever() {
                interrupted.store(signal, Ordering::SeqCst);
                let _ = stop_tx.send(Stop::Signal(signal));
            }
        })?;
    }
    if !daemonized {
        // SAFETY: prctl(PR_SET_PDEATHSIG) only affects this process.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong, 0, 0, 0);
        }
        // SAFETY: getppid cannot fail.
        if unsafe { libc::getppid() } == 1 {
            bail!("the parent process exited before the mount started");
        }
    }
    let mut guard = Guard::start(&mountpoint.canonicalize()?)?;
    let ctx = Ctx { args, library: &library, preset_name, params, capacity, interrupted: &interrupted, stop_tx, stop_rx };
    let result = run_mount(ctx, &mut guard, ready);
    signal_handle.close();
    let cleanup = guard.release_all();
    result?;
    cleanup
}

struct Ctx<'a> {
    args: &'a MountArgs,
    library: &'a Library,
    preset_name: String,
    params: crate::params::DriveParams,
    capacity: u64,
    interrupted: &'a AtomicI32,
    stop_tx: std::sync::mpsc::Sender<Stop>,
    stop_rx: std::sync::mpsc::Receiver<Stop>,
}

fn run_mount(ctx: Ctx, guard: &mut Guard, ready: &mut dyn FnMut(&str)) -> anyhow::Result<()> {
    let args = ctx.args;
    let fs = args.block.fs;
    let canonical = args.mountpoint.canonicalize()?;
    let interrupted = ctx.interrupted;
    let check = || match interrupted.load(Ordering::SeqCst) {
        0 => Ok(()),
        s => Err(anyhow::anyhow!("interrupted by signal {s} while setting up the block mount of {}", canonical.display())),
    };
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = (args.uid.unwrap_or(unsafe { libc::getuid() }), args.gid.unwrap_or(unsafe { libc::getgid() }));
    let key = image_key(args, ctx.library, ctx.capacity, uid, gid);
    let (image, image_path, built) = obtain_image(args, ctx.library, &key, guard, &check)?;
    check()?;
    let image = Arc::new(image);
    let run_dir = runtime_dir("mount", guard)?;
    let fuse_dir = run_dir.join("fuse");
    std::fs::create_dir_all(&fuse_dir).with_context(|| format!("creating {}", fuse_dir.display()))?;
    let max_request_kib = image_max_request_kib();
    if let Some(notice) = sys::ensure_max_pages(max_request_kib / 4)? {
        tracing::info!("{notice}");
    }

    let drive = Drive::new(&ctx.params);
    let full_stroke = drive.geometry().map_or(0, |g| g.cylinders() - 1);
    let settings = QueueSettings {
        scheduler: Some(args.block.scheduler.name().into()),
        read_ahead_kb: Some(args.read_ahead_kb),
        max_sectors_kb: args.block.max_sectors_kb,
        nr_requests: args.block.nr_requests,
        rotational: ctx.params.kind == crate::params::DriveKind::Hdd,
    };
    let config = serde_json::json!({
        "mode": "block",
        "preset": ctx.preset_name,
        "drive": ctx.params,
        "library": args.library.canonicalize().unwrap_or(args.library.clone()),
        "files": ctx.library.files.len(),
        "library_bytes": ctx.library.total_bytes(),
        "read_ahead_kb": args.read_ahead_kb,
        "uid": uid,
        "gid": gid,
        "trace": args.trace,
        "block": {
            "fs": fs.name(),
            "fs_bytes": key.fs_bytes,
            "fs_size": args.block.fs_size,
            "fill_order": args.block.fill_order,
            "seed": key.seed,
            "image": image_path,
            "image_key_hash": image.key.hash(),
            "image_built_now": built,
            "image_figures": image.figures,
            "image_server": fuse_dir.join(IMAGE_FILE),
            "requested_queue": settings,
        },
    });
    let running = RunningDrive::start(drive, |epoch| Stats::new(epoch, canonical.display().to_string(), ctx.preset_name.clone(), full_stroke, config), args.trace.as_deref())?;
    let device_info = Arc::new(OnceLock::new());
    let imagefs = ImageFs::new(Mode::Timed(Timed { image: image.clone(), intake: running.intake.clone(), stats: running.stats.clone(), device: device_info.clone() }), ctx.capacity, max_request_kib, IMAGE_MAX_BACKGROUND);
    let mut options = fuser::Config::default();
    options.mount_options = vec![
        fuser::MountOption::FSName(imagefs::FSNAME.into()),
        fuser::MountOption::Subtype("image".into()),
        fuser::MountOption::RO,
        fuser::MountOption::NoAtime,
        fuser::MountOption::NoSuid,
        fuser::MountOption::NoDev,
    ];
    options.n_threads = Some(args.fuse_threads as usize);
    options.clone_fd = true;
    let fuse_res = Resource::Fuse(fuse_dir.clone());
    guard.add(fuse_res.clone());
    let session = fuser::Session::new(imagefs, &fuse_dir, &options).with_context(|| format!("mounting the image server on {}", fuse_dir.display()))?;
    let session_thread = {
        let stop_tx = ctx.stop_tx.clone();
        std::thread::Builder::new().name("vidbench-fuse".into()).spawn(move || {
            let r = session.run();
            let _ = stop_tx.send(Stop::SessionEnded);
            r
        })?
    };

    let img = fuse_dir.join(IMAGE_FILE);
    let dev = loopdev::attach(&img, true)?;
    let loop_res = Resource::Loop { dev: dev.name.clone(), backing: img.clone(), inode: image_inode(&img) };
    guard.add(loop_res.clone());
    let join_kb = loopdev::apply(&dev, &settings, max_request_kib)?;
    if let Some(kb) = join_kb {
        running.set_join_limit(kb as u64 * 1024);
    }
    let (major, minor) = dev.dev_numbers()?;
    let mut queue = loopdev::current(&dev);
    queue["drive_joins_kb"] = serde_json::json!(join_kb);
    queue["image_max_request_kb"] = serde_json::json!(max_request_kib);
    // A loop device's counters survive detach and attach: keep where they
    // stood, so that `disk stat` reports this mount's share.
    let stat_at_mount = loopdev::block_stat(&dev)?;
    let _ = device_info.set(serde_json::json!({ "device": dev.name, "dev": format!("{major}:{minor}"), "queue": queue, "stat_at_mount": stat_at_mount }));
    check()?;

    let mount_res = Resource::Mount { at: canonical.clone(), source: dev.dev_path().display().to_string() };
    guard.add(mount_res.clone());
    let flags = libc::MS_RDONLY | libc::MS_NOATIME | libc::MS_NODEV | libc::MS_NOSUID;
    if let Err(e) = build::mount(&dev.dev_path(), &canonical, fs.name(), flags, fs.ro_options()) {
        if e.raw_os_error() == Some(libc::EBUSY) {
            bail!("mounting {} on {}: the mount point is in use (EBUSY): another mount was made there meanwhile; choose another directory or unmount it", dev.dev_path().display(), canonical.display());
        }
        return Err(e).with_context(|| format!("mounting the {} filesystem of {} on {} (read-only, {})", fs.name(), dev.dev_path().display(), canonical.display(), fs.ro_options()));
    }
    ready(&format!(
        "ready: {} on {} ({} files, {:.1} GB, {} on /dev/{} ({major}:{minor}) scheduler {} read_ahead_kb {} max_sectors_kb {}{} nr_requests {}, image {})\n",
        ctx.preset_name,
        canonical.display(),
        ctx.library.files.len(),
        ctx.library.total_bytes() as f64 / 1e9,
        fs.name(),
        dev.name,
        selected_scheduler(queue["scheduler"].as_str().unwrap_or("?")),
        queue["read_ahead_kb"].as_str().unwrap_or("?"),
        queue["max_sectors_kb"].as_str().unwrap_or("?"),
        join_kb.map_or(String::new(), |kb| format!(" (the drive joins contiguous requests up to {kb} KiB)")),
        queue["nr_requests"].as_str().unwrap_or("?"),
        image_path.display()
    ));

    match ctx.stop_rx.recv() {
        Ok(Stop::Signal(s)) => tracing::info!("signal {s}, unmounting {}", canonical.display()),
        Ok(Stop::SessionEnded) => tracing::warn!("the image server of {} was unmounted; unmounting {}", dev.name, canonical.display()),
        Err(_) => {}
    }
    guard.release(&mount_res)?;
    guard.release(&loop_res)?;
    guard.release(&fuse_res)?;
    let served = session_thread.join().map_err(|_| anyhow::anyhow!("the image server panicked"))?;
    running.finish(&canonical)?;
    guard.release(&Resource::Dir(run_dir))?;
    served.with_context(|| format!("image server of {}", canonical.display()))
}

/// How a block mount is found from its mount point.
#[derive(Debug, Clone)]
pub struct BlockMount {
    pub dev: LoopDev,
    /// The image server's control directory (`.vidbench`).
    pub control_dir: PathBuf,
    pub mountpoint: PathBuf,
    /// The filesystem's source in the mount table (`/dev/loopN`).
    pub source: String,
    /// False when the image server is gone (its mount process and the
    /// reaper were both killed): the filesystem, loop device and a dead FUSE
    /// mount are left, and only `unmount` can do anything with them.
    pub alive: bool,
}

/// The block mount at `mountpoint`, if it is one: live (its counters answer)
/// or orphaned (the loop device's backing file is `disk.img` at the root of
/// a vidbench image server's FUSE mount that no longer answers).
pub fn find(mountpoint: &Path) -> Option<BlockMount> {
    let m = sys::mount_at(mountpoint).ok().flatten()?;
    let dev = LoopDev::from_dev_path(&m.source)?;
    let backing = dev.backing_file()?;
    if backing.file_name()? != IMAGE_FILE {
        return None;
    }
    let fuse_dir = backing.parent()?;
    let control_dir = fuse_dir.join(crate::stats::CONTROL_DIR);
    let alive = control_dir.join(crate::stats::STATS_FILE).exists();
    let ours = alive || sys::mount_at(fuse_dir).ok().flatten().is_some_and(|f| f.fstype.starts_with("fuse") && f.source == imagefs::FSNAME);
    ours.then_some(BlockMount { dev, control_dir, mountpoint: m.mountpoint, source: m.source, alive })
}

/// Releases what an orphaned block mount left, in the reaper's order: the
/// filesystem (lazily when busy), the loop device (the kernel detaches it
/// when the last user lets go), the dead image server's FUSE mount and the
/// runtime directory.
fn release_orphan(b: &BlockMount) -> anyhow::Result<()> {
    let fuse_dir = b.control_dir.parent().context("the image server's directory")?.to_path_buf();
    let backing = fuse_dir.join(IMAGE_FILE);
    let resources = [
        Resource::Mount { at: b.mountpoint.clone(), source: b.source.clone() },
        Resource::Loop { dev: b.dev.name.clone(), backing, inode: None },
        Resource::Fuse(fuse_dir.clone()),
    ];
    for r in &resources {
        reaper::release(r).with_context(|| format!("releasing {r:?} of the orphaned block mount at {}", b.mountpoint.display()))?;
    }
    if let Some(runtime) = fuse_dir.parent() {
        if let Err(e) = reaper::release(&Resource::Dir(runtime.to_path_buf())) {
            eprintln!("vidbench disk unmount: left {}: {e:#}", runtime.display());
        }
    }
    println!("unmounted {} (its drive process had died; detached {} and removed its image server's mount)", b.mountpoint.display(), b.dev.name);
    Ok(())
}

/// `vidbench disk unmount MNT` for a block mount: unmounts the filesystem
/// (lazily when busy), then asks the mount process to release the loop device
/// and the image server, and waits for it to exit.
pub fn unmount(b: &BlockMount, wait_s: f64) -> anyhow::Result<()> {
    if !b.alive {
        return release_orphan(b);
    }
    let pid = crate::stats::read_snapshot_in(&b.control_dir).ok().map(|s| s.pid);
    let busy = reaper::unmount_block_fs(&b.mountpoint)?;
    let Some(pid) = pid else {
        bail!("unmounted {}, but its mount process could not be found (the counters of {} do not answer); check `losetup -a` for {}", b.mountpoint.display(), b.control_dir.display(), b.dev.name);
    };
    // SAFETY: kill sends a signal to a pid read from the mount's own counters.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    if busy {
        println!(
            "detached {} (lazy unmount: files are still open there); the drive keeps serving them, and its process (pid {pid}) releases {} and exits once they are closed",
            b.mountpoint.display(),
            b.dev.name
        );
        return Ok(());
    }
    let deadline = Instant::now() + Duration::from_secs_f64(wait_s);
    // SAFETY: kill with signal 0 only probes.
    while unsafe { libc::kill(pid as i32, 0) } == 0 {
        if Instant::now() > deadline {
            bail!("unmounted {}, but its mount process (pid {pid}) is still running after {wait_s} s", b.mountpoint.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    println!("unmounted {} (and detached {})", b.mountpoint.display(), b.dev.name);
    Ok(())
}

/// The drive's snapshot as JSON with the block layer's figures added.
fn with_block_layer(drive: serde_json::Value, block: &loopdev::BlockStat, seconds: f64, dev: &LoopDev) -> serde_json::Value {
    let mut v = drive;
    v["block_layer"] = serde_json::json!({ "counters": block, "rates": block.rates(seconds), "queue": loopdev::current(dev) });
    v
}

fn print_block_line(b: &loopdev::BlockStat, seconds: f64) {
    let r = b.rates(seconds);
    let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
    println!(
        "{:>9} {:>8.1} {:>8.2} {:>8.1} {:>8.1} {:>6.1} {:>6.2} {:>6} {:>10}",
        b.device,
        f("reads_per_s"),
        f("mb_per_s"),
        f("avg_request_kib"),
        f("avg_await_ms"),
        f("util_pct"),
        f("avg_queue_depth"),
        b.in_flight,
        format!("{:.1}%", f("merge_pct"))
    );
}

fn print_block_header() {
    println!("{:>9} {:>8} {:>8} {:>8} {:>8} {:>6} {:>6} {:>6} {:>10}", "device", "r/s", "MB/s", "KiB/r", "await", "util%", "aqu", "queue", "merged");
}

fn print_depth_histogram(h: &[u64]) {
    let total: u64 = h.iter().sum();
    if total == 0 {
        return;
    }
    // Powers of two for reading; the JSON keeps every depth.
    let mut parts = Vec::new();
    let (mut lo, mut hi) = (0usize, 0usize);
    while lo < h.len() {
        let top = hi.min(h.len() - 1);
        let n: u64 = h[lo..=top].iter().sum();
        if n > 0 {
            let label = if top + 1 == h.len() { format!("{lo}+") } else if lo == top { format!("{lo}") } else { format!("{lo}-{top}") };
            parts.push(format!("{label}: {:.1}%", 100.0 * n as f64 / total as f64));
        }
        lo = top + 1;
        hi = (hi + 1) * 2 - 1;
    }
    println!("drive queue depth when each read started: {}", parts.join(", "));
}

/// `vidbench disk stat MNT` for a block mount: the drive's figures (as in FUSE
/// mode) and the block layer's own (`/sys/block/loopN/stat`, `inflight`).
pub fn stat(b: &BlockMount, json: bool, interval: Option<f64>, count: Option<u64>) -> anyhow::Result<()> {
    if !b.alive {
        bail!("the drive behind {} is gone (its process died; {} is left attached); `vidbench disk unmount {}` releases what is left", b.mountpoint.display(), b.dev.name, b.mountpoint.display());
    }
    let snapshot = crate::stats::read_snapshot_in(&b.control_dir)?;
    let block = loopdev::block_stat(&b.dev)?;
    let Some(interval) = interval else {
        // Totals since this mount attached the device.
        let base: loopdev::BlockStat = serde_json::from_value(snapshot.config["block"]["device"]["stat_at_mount"].clone()).unwrap_or_default();
        let block = block.since(&base);
        if json {
            let v = with_block_layer(serde_json::to_value(&snapshot)?, &block, snapshot.uptime_s, &b.dev);
            println!("{}", serde_json::to_string_pretty(&v)?);
        } else {
            println!("drive ({}):", snapshot.preset);
            crate::stats::print_rates_header();
            crate::stats::print_rates_line(&snapshot.total.counters.rates(snapshot.uptime_s), snapshot.uptime_s, snapshot.in_flight);
            print_depth_histogram(&snapshot.total.counters.queue_depth_histogram);
            println!("block layer ({}):", read_knob_or(&b.dev, "scheduler"));
            print_block_header();
            print_block_line(&block, snapshot.uptime_s);
        }
        return Ok(());
    };
    if !(interval.is_finite() && interval > 0.0) {
        bail!("--interval must be a positive number of seconds");
    }
    if !json {
        crate::stats::print_rates_header();
    }
    let (mut previous, mut previous_block) = (snapshot, block);
    let mut n = 0;
    while count.is_none_or(|c| n < c) {
        std::thread::sleep(Duration::from_secs_f64(interval));
        let now = crate::stats::read_snapshot_in(&b.control_dir)?;
        let block_now = loopdev::block_stat(&b.dev)?;
        let delta = now.total.counters.since(&previous.total.counters);
        let seconds = now.uptime_s - previous.uptime_s;
        let rates = delta.rates(seconds);
        let block_delta = block_now.since(&previous_block);
        if json {
            let v = serde_json::json!({"uptime_s": now.uptime_s, "in_flight": now.in_flight, "counters": delta, "rates": rates,
                "block_layer": {"counters": block_delta, "rates": block_delta.rates(seconds)}});
            println!("{v}");
        } else {
            crate::stats::print_rates_line(&rates, now.uptime_s, now.in_flight);
            print_block_line(&block_delta, seconds);
        }
        use std::io::Write;
        std::io::stdout().flush()?;
        previous = now;
        previous_block = block_now;
        n += 1;
    }
    Ok(())
}

fn read_knob_or(dev: &LoopDev, knob: &str) -> String {
    let s = loopdev::read_knob(dev, knob).unwrap_or_default();
    format!("{}, {knob} {}", dev.name, selected_scheduler(&s))
}

/// `none [mq-deadline] kyber` -> `mq-deadline`.
fn selected_scheduler(list: &str) -> &str {
    list.split_whitespace().find(|w| w.starts_with('[')).map_or(list, |w| w.trim_matches(['[', ']']))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        mount: MountArgs,
    }

    fn args(extra: &[&str]) -> MountArgs {
        let mut v = vec!["x", "/mnt", "--library", "lib.json", "--preset", "wd-red-1tb", "--block"];
        v.extend_from_slice(extra);
        Cli::parse_from(v).mount
    }

    fn library(n: u32, size: u64) -> Library {
        use vidbench_library::{Video, MANIFEST_VERSION};
        Library {
            version: MANIFEST_VERSION,
            name: "lib".into(),
            placement_seed: 3,
            files: (0..n).map(|i| Video { id: i, content: None, path: format!("v/{i}"), size, video: i, chunk: None, bitrate_kbps: 400, duration_s: 1.0, rank: 1 + i }).collect(),
        }
    }

    #[test]
    fn packed_filesystems_hold_the_library_plus_slack() {
        let lib = library(100, 1 << 30);
        let cap = 1_000_000_000_000;
        let whole = fs_bytes(&args(&[]).block, &lib, cap);
        assert!(whole <= cap && cap - whole < 1 << 20);
        let packed = fs_bytes(&args(&["--fs-size", "packed", "--fs-slack-pct", "10"]).block, &lib, cap);
        let data = 100u64 << 30;
        assert!(packed >= data + data / 10 && packed < data + data / 10 + (2 << 30), "{packed}");
        assert_eq!(packed % (1 << 20), 0);
    }

    #[test]
    fn the_image_key_follows_every_input() {
        let lib = library(10, 1 << 20);
        let base = image_key(&args(&[]), &lib, 1 << 40, 0, 0);
        let mut other_lib = lib.clone();
        other_lib.files[3].size += 1;
        let variants = [
            image_key(&args(&["--fs", "xfs"]), &lib, 1 << 40, 0, 0),
            image_key(&args(&["--fill-order", "shuffled"]), &lib, 1 << 40, 0, 0),
            image_key(&args(&["--fs-size", "packed"]), &lib, 1 << 40, 0, 0),
            image_key(&args(&[]), &other_lib, 1 << 40, 0, 0),
            image_key(&args(&[]), &lib, 1 << 41, 0, 0),
            image_key(&args(&[]), &lib, 1 << 40, 33, 0),
        ];
        for v in &variants {
            assert_ne!(v.hash(), base.hash(), "{v:?}");
        }
        // The seed matters only to a shuffled fill.
        assert_eq!(image_key(&args(&["--seed", "9"]), &lib, 1 << 40, 0, 0), base);
        assert_ne!(image_key(&args(&["--fill-order", "shuffled", "--seed", "9"]), &lib, 1 << 40, 0, 0), variants[1]);
    }

    #[test]
    fn block_options_need_block() {
        let base = ["x", "/mnt", "--library", "lib.json", "--preset", "wd-red-1tb"];
        for extra in [&["--fs", "xfs"][..], &["--scheduler", "bfq"], &["--max-sectors-kb", "512"], &["--fs-size", "packed"], &["--rebuild-image"]] {
            let v: Vec<&str> = base.iter().copied().chain(extra.iter().copied()).collect();
            assert!(Cli::try_parse_from(&v).is_err(), "{extra:?} accepted without --block");
            let v: Vec<&str> = v.into_iter().chain(["--block"]).collect();
            assert!(Cli::try_parse_from(&v).is_ok(), "{extra:?} refused with --block");
        }
        // The cache directory may come from the environment in FUSE mode too.
        assert!(Cli::try_parse_from(base.iter().copied().chain(["--image-cache", "/c"])).is_ok());
    }

    #[test]
    fn scheduler_names() {
        assert_eq!(selected_scheduler("none [mq-deadline] kyber bfq"), "mq-deadline");
        assert_eq!(selected_scheduler("[none] bfq"), "none");
    }
}
