//! `vidbench disk mount`: the mount server in FUSE mode, the start-up of
//! either mode (block mode is served by `block`), and reading the counters of
//! a mount of either mode.
//!
//! The mount runs in the foreground by default; `--daemonize` re-executes the
//! same command in a new session with a pipe on which the child reports
//! "ready" (after the mount answers and its readahead is set) or the error
//! that stopped it, so the parent returns only when the mount is usable.
//!
//! [`serve`] checks the mount point and the kernel (FUSE, max_pages), builds
//! the drive model, the file layout, the scheduler thread and the filesystem,
//! mounts it, sets the mount's readahead, reports "ready" and then waits until
//! the mount goes away (unmount, or SIGINT/SIGTERM, which unmounts). On the
//! way out the scheduler answers what is pending and the trace is flushed.

use crate::fs::{DiskFs, KernelSettings};
use crate::mount_args::MountArgs;
use crate::layout::{Layout, Placement};
use crate::model::Drive;
use crate::scheduler::RunningDrive;
use crate::stats::{self, Snapshot, Stats, CONTROL_DIR};
use crate::sys;
use anyhow::{bail, Context};
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::path::Path;

/// Environment variable through which a daemonized child gets its ready pipe.
const READY_FD_ENV: &str = "VIDBENCH_DISK_READY_FD";

/// Reports readiness (or failure) to a daemonizing parent, or to the terminal.
struct Ready {
    pipe: Option<std::fs::File>,
}

impl Ready {
    fn from_env() -> Ready {
        let pipe = std::env::var(READY_FD_ENV).ok().and_then(|v| v.parse::<i32>().ok()).map(|fd| {
            // SAFETY: the parent passed this descriptor for us alone.
            unsafe { std::fs::File::from_raw_fd(fd) }
        });
        std::env::remove_var(READY_FD_ENV);
        Ready { pipe }
    }
    /// Tells the parent (or the terminal) that the mount is ready.
    fn ready(&mut self, message: &str) {
        match self.pipe.take() {
            Some(mut pipe) => {
                let _ = pipe.write_all(message.as_bytes());
            }
            None => tracing::info!("{}", message.trim_end()),
        }
    }
    /// Tells a daemonizing parent why the mount failed (in the foreground the
    /// error is printed by `vidbench` itself).
    fn failed(&mut self, error: &anyhow::Error) {
        if let Some(mut pipe) = self.pipe.take() {
            let _ = pipe.write_all(format!("error: {error:#}\n").as_bytes());
        }
    }
}

/// Runs `vidbench disk mount`: in the foreground, or in a child that reports
/// on a pipe when `--daemonize` is given.
pub fn run(args: MountArgs) -> anyhow::Result<()> {
    if args.daemonize {
        return daemonize(&args);
    }
    let daemonized = std::env::var_os(READY_FD_ENV).is_some();
    let mut ready = Ready::from_env();
    let served = if args.block.block {
        crate::block::serve(&args, &mut |message| ready.ready(message), daemonized)
    } else {
        serve(&args, &mut |message| ready.ready(message))
    };
    match served {
        Ok(()) => Ok(()),
        Err(e) => {
            ready.failed(&e);
            Err(e)
        }
    }
}

fn daemonize(args: &MountArgs) -> anyhow::Result<()> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().context("finding the vidbench executable")?;
    let child_args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).filter(|a| a != "--daemonize").collect();
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        bail!("creating the ready pipe: {}", std::io::Error::last_os_error());
    }
    let (read_fd, write_fd) = (fds[0], fds[1]);
    let log = match &args.log {
        Some(path) => std::fs::OpenOptions::new().create(true).append(true).open(path).with_context(|| format!("opening log file {}", path.display()))?,
        None => std::fs::OpenOptions::new().write(true).open("/dev/null")?,
    };
    let mut command = std::process::Command::new(exe);
    command.args(child_args).env(READY_FD_ENV, write_fd.to_string()).stdin(std::process::Stdio::null()).stdout(log.try_clone()?).stderr(log);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        command.pre_exec(move || {
            libc::setsid();
            // Keep the write end across exec.
            let flags = libc::fcntl(write_fd, libc::F_GETFD);
            libc::fcntl(write_fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
            Ok(())
        });
    }
    let mut child = command.spawn().context("starting the mount server")?;
    // SAFETY: we own both ends; the write end is closed here so EOF comes when the child closes it.
    unsafe { libc::close(write_fd) };
    let mut pipe = unsafe { std::fs::File::from_raw_fd(read_fd) };
    let mut message = String::new();
    pipe.read_to_string(&mut message).context("waiting for the mount server")?;
    let message = message.trim();
    if let Some(rest) = message.strip_prefix("ready") {
        println!("mounted {} (server pid {}){}", args.mountpoint.display(), child.id(), rest);
        return Ok(());
    }
    let status = child.wait()?;
    if let Some(err) = message.strip_prefix("error: ") {
        bail!("{err}");
    }
    bail!("the mount server exited ({status}) before the mount was ready; run with --foreground or --log FILE to see why")
}

/// Serves `args.library` on `args.mountpoint` until it is unmounted or a
/// signal comes; `ready` is told once the mount answers and its readahead is
/// set (the message starts with "ready").
pub(crate) fn serve(args: &MountArgs, ready: &mut dyn FnMut(&str)) -> anyhow::Result<()> {
    let (preset_name, params, library) = args.prepare()?;
    let mountpoint = &args.mountpoint;
    if !args.max_request_kb.is_multiple_of(4) {
        bail!("--max-request-kb {} must be a multiple of 4 (pages)", args.max_request_kb);
    }
    if let Some(notice) = sys::ensure_max_pages(args.max_request_kb / 4)? {
        tracing::info!("{notice}");
    }
    let drive = Drive::new(&params);
    let seed = args.seed.unwrap_or(library.placement_seed);
    let layout = Layout::new(&library, drive.total_sectors(), args.placement, seed).map_err(|m| anyhow::anyhow!("library {}: {m}", args.library.display()))?;
    let full_stroke = drive.geometry().map_or(0, |g| g.cylinders() - 1);
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = (args.uid.unwrap_or(unsafe { libc::getuid() }), args.gid.unwrap_or(unsafe { libc::getgid() }));
    let canonical = mountpoint.canonicalize()?;
    let config = serde_json::json!({
        "preset": preset_name,
        "drive": params,
        "library": args.library.canonicalize().unwrap_or(args.library.clone()),
        "files": library.files.len(),
        "library_bytes": library.total_bytes(),
        "placement": args.placement,
        "seed": seed,
        "read_ahead_kb": args.read_ahead_kb,
        "max_request_kb": args.max_request_kb,
        "max_background": args.max_background,
        "uid": uid,
        "gid": gid,
        "trace": args.trace,
    });

    let running = RunningDrive::start(drive, |epoch| Stats::new(epoch, canonical.display().to_string(), preset_name.clone(), full_stroke, config), args.trace.as_deref())?;
    // Signals are caught from here on; they are acted upon once the session exists.
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM]).context("installing signal handlers")?;

    let fs = DiskFs::new(
        &library,
        &layout.start_lba,
        running.intake.clone(),
        running.stats.clone(),
        KernelSettings { uid, gid, max_request_kib: args.max_request_kb, max_background: args.max_background },
        params.capacity_bytes(),
    );
    let mut options = fuser::Config::default();
    options.mount_options = vec![
        fuser::MountOption::FSName("vidbench".into()),
        fuser::MountOption::Subtype("vidbench".into()),
        fuser::MountOption::RO,
        fuser::MountOption::NoAtime,
        fuser::MountOption::NoSuid,
        fuser::MountOption::NoDev,
        fuser::MountOption::DefaultPermissions,
    ];
    options.acl = fuser::SessionACL::All;
    options.n_threads = Some(args.fuse_threads as usize);
    options.clone_fd = true;
    let session = fuser::Session::new(fs, &canonical, &options).with_context(|| format!("mounting FUSE on {}", canonical.display()))?;
    let session_thread = std::thread::Builder::new().name("vidbench-fuse".into()).spawn(move || session.run())?;

    let entry = sys::mount_at(&canonical)?.with_context(|| format!("the mount on {} is not in the mount table", canonical.display()))?;
    let setup = sys::set_read_ahead_kb(&entry, args.read_ahead_kb).and_then(|()| {
        let now = sys::read_ahead_kb(&entry)?;
        if now != args.read_ahead_kb {
            bail!("the kernel set the mount's read_ahead_kb to {now}, not {}", args.read_ahead_kb);
        }
        Ok(())
    });
    if let Err(e) = setup {
        let _ = sys::unmount(&canonical, Some(&entry));
        let _ = session_thread.join();
        return Err(e);
    }
    {
        let canonical = canonical.clone();
        let entry = entry.clone();
        std::thread::Builder::new().name("vidbench-signals".into()).spawn(move || {
            if let Some(signal) = signals.forever().next() {
                tracing::info!("signal {signal}, unmounting {}", canonical.display());
                if let Err(e) = sys::unmount(&canonical, Some(&entry)) {
                    tracing::error!("{e:#}");
                }
            }
        })?;
    }
    ready(&format!(
        "ready: {} on {} ({} files, {:.1} GB, {} placement, device {}:{}, read_ahead_kb {})\n",
        preset_name,
        canonical.display(),
        library.files.len(),
        library.total_bytes() as f64 / 1e9,
        match args.placement {
            Placement::Random => "random",
            Placement::Sequential => "sequential",
        },
        entry.major,
        entry.minor,
        args.read_ahead_kb
    ));

    let result = session_thread.join().map_err(|_| anyhow::anyhow!("the FUSE session panicked"))?;
    // The filesystem (and its job sender) is gone.
    running.finish(&canonical)?;
    result.with_context(|| format!("FUSE session on {}", canonical.display()))
}

/// The counters of the disk mounted at `mountpoint`, from outside (`vidbench
/// disk stat`, `bench`, the experiment driver's figures): FUSE mode publishes
/// them in the mount itself, block mode beside its image server.
pub fn read_snapshot(mountpoint: &Path) -> anyhow::Result<Snapshot> {
    let control = crate::block::find(mountpoint).map_or_else(|| mountpoint.join(CONTROL_DIR), |b| b.control_dir);
    stats::read_snapshot_in(&control).with_context(|| format!("is {} a vidbench disk mount?", mountpoint.display()))
}
