//! `vidbench disk`: mount, unmount, stat, presets, model, bench.
//!
//! The mount runs in the foreground by default; `--daemonize` re-executes the
//! same command in a new session with a pipe on which the child reports
//! "ready" (after the mount answers and its readahead is set) or the error
//! that stopped it, so the parent returns only when the mount is usable.

use crate::fs::{DiskFs, KernelSettings, CONTROL_DIR, STATS_FILE};
use crate::layout::{Layout, Placement};
use crate::model::Drive;
use crate::params::{self, DriveFile, DriveKind, DriveParams};
use crate::scheduler::{self, Clock};
use crate::stats::{Snapshot, Stats};
use crate::{bench, sys, trace};
use anyhow::{bail, Context};
use clap::Subcommand;
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use vidbench_library::Library;

/// Environment variable through which a daemonized child gets its ready pipe.
const READY_FD_ENV: &str = "VIDBENCH_DISK_READY_FD";

/// Arguments of `vidbench disk`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Mount a library as an emulated disk.
    Mount(MountArgs),
    /// Unmount an emulated disk and wait for its server to exit.
    Unmount {
        mountpoint: PathBuf,
        /// Seconds to wait for the server to flush its trace and exit.
        #[arg(long, default_value_t = 30.0)]
        wait_s: f64,
    },
    /// Print the counters of a mounted disk, iostat style.
    Stat(StatArgs),
    /// List the drive presets with their parameters.
    Presets {
        /// Print one preset as a TOML drive file, to edit and pass to --config.
        #[arg(long, value_name = "NAME")]
        toml: Option<String>,
    },
    /// Figures of the drive model alone (simulated clock): sequential MB/s at
    /// the outer and inner edge, random 4 KiB IOPS at depth 1 and 32.
    Model(ModelArgs),
    /// The papers' phenomenon through the kernel: N threads each reading its own
    /// file in small reads vs one thread reading the same files in large reads.
    Bench(bench::BenchArgs),
    /// Internal: the clean-up process of a block mount (reads its journal on stdin).
    #[command(hide = true)]
    BlockReaper {
        /// The mount point it guards (for ps and tests only).
        #[arg(long = "for")]
        for_mount: Option<PathBuf>,
    },
}

/// Drive parameter overrides; each replaces the preset's / TOML file's value.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DriveOverrides {
    #[arg(long, value_parser = ["hdd", "ssd"], help_heading = "Drive parameters")]
    pub kind: Option<String>,
    #[arg(long, help_heading = "Drive parameters")]
    pub capacity_gb: Option<f64>,
    #[arg(long, help_heading = "Drive parameters")]
    pub rpm: Option<f64>,
    #[arg(long, help_heading = "Drive parameters")]
    pub heads: Option<u32>,
    #[arg(long, help_heading = "Drive parameters")]
    pub zones: Option<u32>,
    #[arg(long, help_heading = "Drive parameters")]
    pub outer_mb_s: Option<f64>,
    #[arg(long, help_heading = "Drive parameters")]
    pub middle_mb_s: Option<f64>,
    #[arg(long, help_heading = "Drive parameters")]
    pub inner_mb_s: Option<f64>,
    #[arg(long, help_heading = "Drive parameters")]
    pub seek_track_ms: Option<f64>,
    #[arg(long, help_heading = "Drive parameters")]
    pub seek_full_ms: Option<f64>,
    #[arg(long, help_heading = "Drive parameters")]
    pub seek_sqrt_weight: Option<f64>,
    #[arg(long, help_heading = "Drive parameters")]
    pub command_overhead_ms: Option<f64>,
    #[arg(long, help_heading = "Drive parameters")]
    pub interface_mb_s: Option<f64>,
    #[arg(long, help_heading = "Drive parameters")]
    pub cache_segments: Option<u32>,
    #[arg(long, help_heading = "Drive parameters")]
    pub segment_kib: Option<u32>,
    /// NCQ depth (1 = FIFO); default 32.
    #[arg(long = "ncq", help_heading = "Drive parameters")]
    pub ncq_depth: Option<u32>,
    #[arg(long, help_heading = "Drive parameters")]
    pub ncq_aging_ms_per_s: Option<f64>,
    #[arg(long, help_heading = "Drive parameters")]
    pub ncq_max_age_ms: Option<f64>,
    #[arg(long, help_heading = "Drive parameters")]
    pub ssd_read_latency_us: Option<f64>,
    #[arg(long, help_heading = "Drive parameters")]
    pub ssd_parallelism: Option<u32>,
}

/// Which drive: preset, TOML file, overrides.
#[derive(Debug, Clone, clap::Args)]
pub struct DriveArgs {
    /// Drive preset (see `vidbench disk presets`); may come from the TOML file.
    #[arg(long)]
    pub preset: Option<String>,
    /// TOML drive file: `preset = "..."` and any drive parameter.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub overrides: DriveOverrides,
}

impl DriveArgs {
    /// Preset, then TOML, then command line; validated.
    pub fn resolve(&self) -> anyhow::Result<(String, DriveParams)> {
        let file = match &self.config {
            Some(path) => Some((DriveFile::load(path)?, path.clone())),
            None => None,
        };
        let name = self
            .preset
            .clone()
            .or_else(|| file.as_ref().and_then(|(f, _)| f.preset.clone()))
            .context("no drive given: use --preset NAME (see `vidbench disk presets`) or a --config file with preset = \"NAME\"")?;
        let mut p = params::preset(&name)?.params;
        if let Some((file, path)) = &file {
            p = file.apply(&p, path)?;
        }
        let o = &self.overrides;
        macro_rules! set {
            ($($field:ident),*) => { $( if let Some(v) = o.$field { p.$field = v; } )* };
        }
        set!(capacity_gb, rpm, heads, zones, outer_mb_s, middle_mb_s, inner_mb_s, seek_track_ms, seek_full_ms, seek_sqrt_weight, command_overhead_ms, interface_mb_s, cache_segments, segment_kib, ncq_depth, ncq_aging_ms_per_s, ncq_max_age_ms, ssd_read_latency_us, ssd_parallelism);
        if let Some(kind) = &o.kind {
            p.kind = if kind == "ssd" { DriveKind::Ssd } else { DriveKind::Hdd };
        }
        p.validate().with_context(|| match &self.config {
            Some(path) => format!("drive {name} with {} and the command line", path.display()),
            None => format!("drive {name} with the command line"),
        })?;
        Ok((name, p))
    }
}

#[derive(Debug, clap::Args)]
pub struct MountArgs {
    /// Existing empty directory to mount on.
    pub mountpoint: PathBuf,
    /// Library manifest (library.json, written by `vidbench workload gen`).
    #[arg(long)]
    pub library: PathBuf,
    #[command(flatten)]
    pub drive: DriveArgs,
    /// Stay attached to the terminal (the default).
    #[arg(long, conflicts_with = "daemonize")]
    pub foreground: bool,
    /// Run in the background; return once the mount is ready.
    #[arg(long)]
    pub daemonize: bool,
    /// Where a daemonized server writes its messages.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Write every disk request to this CSV file (flushed at unmount).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Owner of the files (default: the caller).
    #[arg(long)]
    pub uid: Option<u32>,
    /// Group of the files (default: the caller's).
    #[arg(long)]
    pub gid: Option<u32>,
    /// The mount's readahead window, KiB (/sys/class/bdi/MAJ:MIN/read_ahead_kb).
    #[arg(long, default_value_t = 128)]
    pub read_ahead_kb: u32,
    /// Largest read the kernel may send, KiB (FUSE max_pages); above 1024 the
    /// sysctl fs.fuse.max_pages_limit is raised.
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(4..=16384))]
    pub max_request_kb: u32,
    /// Asynchronous (readahead) requests the kernel keeps outstanding.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_background: u16,
    /// Order of the files on the platter.
    #[arg(long, value_enum, default_value_t = Placement::Random)]
    pub placement: Placement,
    /// Seed of the random placement (default: the manifest's placement_seed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Threads reading FUSE requests.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub fuse_threads: u32,
    #[command(flatten)]
    pub block: crate::block::BlockArgs,
}

#[derive(Debug, clap::Args)]
pub struct StatArgs {
    pub mountpoint: PathBuf,
    /// Print JSON (the whole snapshot, or one interval per line with --interval).
    #[arg(long)]
    pub json: bool,
    /// Print the figures of each interval of S seconds until interrupted.
    #[arg(long, value_name = "S")]
    pub interval: Option<f64>,
    /// Stop after this many intervals.
    #[arg(long)]
    pub count: Option<u64>,
}

#[derive(Debug, clap::Args)]
pub struct ModelArgs {
    #[command(flatten)]
    pub drive: DriveArgs,
    /// Also write the figures as JSON to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Runs `vidbench disk`.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        Command::Mount(m) => mount(m),
        Command::Unmount { mountpoint, wait_s } => unmount(&mountpoint, wait_s),
        Command::Stat(s) => stat(s),
        Command::Presets { toml } => list_presets(toml.as_deref()),
        Command::Model(m) => model_figures(m),
        Command::Bench(b) => bench::run(b),
        Command::BlockReaper { .. } => crate::block::reaper::run_reaper(),
    }
}

fn list_presets(toml_of: Option<&str>) -> anyhow::Result<()> {
    if let Some(name) = toml_of {
        let p = params::preset(name)?;
        print!("# {}: {}\npreset = {:?}\n{}", p.name, p.description, p.name, toml::to_string(&p.params)?);
        return Ok(());
    }
    for p in params::presets() {
        println!("{}\n  {}", p.name, p.description);
        for line in toml::to_string(&p.params)?.lines() {
            println!("    {line}");
        }
        println!("  reference: {}", serde_json::to_string(&p.reference)?);
        println!();
    }
    Ok(())
}

fn model_figures(args: ModelArgs) -> anyhow::Result<()> {
    use crate::model::sim;
    let (name, p) = args.drive.resolve()?;
    let n = p.capacity_bytes() / crate::model::SECTOR;
    let outer = sim::sequential_reads(&p, 0, 2000, 128 * 1024, 30_000).mb_per_s();
    let inner = sim::sequential_reads(&p, n - 600_000, 2000, 128 * 1024, 30_000).mb_per_s();
    let qd1 = sim::random_reads(&p, 1, 4000, 4096, 1);
    let qd32 = sim::random_reads(&p, 32, 8000, 4096, 1);
    let figures = serde_json::json!({
        "preset": name,
        "sequential_outer_mb_s": outer,
        "sequential_inner_mb_s": inner,
        "random_4k_qd1_iops": qd1.iops(),
        "random_4k_qd1_ms": qd1.mean_service_ms(),
        "random_4k_qd32_iops": qd32.iops(),
        "params": p,
    });
    println!("{name} (model, simulated clock)");
    println!("  sequential 128 KiB reads, outer edge: {outer:8.1} MB/s");
    println!("  sequential 128 KiB reads, inner edge: {inner:8.1} MB/s");
    println!("  random 4 KiB reads, depth 1:  {:8.1} IOPS ({:.2} ms each)", qd1.iops(), qd1.mean_service_ms());
    println!("  random 4 KiB reads, depth 32: {:8.1} IOPS (x{:.2})", qd32.iops(), qd32.iops() / qd1.iops());
    if let Some(out) = args.out {
        std::fs::write(&out, serde_json::to_string_pretty(&figures)? + "\n").with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(())
}

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
            None => eprint!("vidbench disk: {message}"),
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

fn mount(args: MountArgs) -> anyhow::Result<()> {
    if args.daemonize {
        return daemonize(&args);
    }
    let daemonized = std::env::var_os(READY_FD_ENV).is_some();
    let mut ready = Ready::from_env();
    let served = if args.block.block { crate::block::serve(&args, &mut |m| ready.ready(m), daemonized) } else { serve(&args, &mut ready) };
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

fn serve(args: &MountArgs, ready: &mut Ready) -> anyhow::Result<()> {
    let (preset_name, params) = args.drive.resolve()?;
    let library = Library::load(&args.library).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mountpoint = &args.mountpoint;
    let meta = std::fs::metadata(mountpoint).with_context(|| format!("mount point {} does not exist or cannot be reached", mountpoint.display()))?;
    if !meta.is_dir() {
        bail!("mount point {} is not a directory", mountpoint.display());
    }
    if let Some(m) = sys::mount_at(mountpoint)? {
        bail!("{} is already a mount point ({}, device {}:{}); unmount it first (`vidbench disk unmount {}`)", mountpoint.display(), m.fstype, m.major, m.minor, mountpoint.display());
    }
    if !Path::new("/dev/fuse").exists() {
        bail!("/dev/fuse is missing: load the fuse module (modprobe fuse) or run where FUSE is available");
    }
    if args.max_request_kb % 4 != 0 {
        bail!("--max-request-kb {} must be a multiple of 4 (pages)", args.max_request_kb);
    }
    if let Some(notice) = sys::ensure_max_pages(args.max_request_kb / 4)? {
        eprintln!("vidbench disk: {notice}");
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

    let tracer = match &args.trace {
        Some(path) => Some(trace::Tracer::start(path)?),
        None => None,
    };
    let clock = Clock { epoch: Instant::now() };
    let stats = Arc::new(Stats::new(clock.epoch, canonical.display().to_string(), preset_name.clone(), full_stroke, config));
    let (job_tx, job_rx) = std::sync::mpsc::channel();
    let scheduler = {
        let stats = stats.clone();
        let trace_tx = tracer.as_ref().map(|t| t.sender.clone());
        std::thread::Builder::new().name("vidbench-drive".into()).spawn(move || scheduler::run(drive, clock, job_rx, stats, trace_tx))?
    };
    // Signals are caught from here on; they are acted upon once the session exists.
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM]).context("installing signal handlers")?;

    let fs = DiskFs::new(
        &library,
        &layout.start_lba,
        job_tx,
        clock,
        stats.clone(),
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
                eprintln!("vidbench disk: signal {signal}, unmounting {}", canonical.display());
                if let Err(e) = sys::unmount(&canonical, Some(&entry)) {
                    eprintln!("vidbench disk: {e:#}");
                }
            }
        })?;
    }
    ready.ready(&format!(
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
    // The filesystem (and its job sender) is gone: the scheduler answers what
    // is pending and stops; then the trace is flushed.
    scheduler.join().map_err(|_| anyhow::anyhow!("the drive scheduler panicked"))?;
    let snapshot = stats.snapshot();
    if let Some(t) = tracer {
        let rows = t.finish()?;
        eprintln!("vidbench disk: trace: {rows} requests written");
    }
    eprintln!(
        "vidbench disk: unmounted {}: {} reads, {:.1} MB, {:.1} MB/s over {:.1} s",
        canonical.display(),
        snapshot.total.counters.reads,
        snapshot.total.counters.bytes as f64 / 1e6,
        snapshot.total.rates.mb_per_s,
        snapshot.uptime_s
    );
    result.with_context(|| format!("FUSE session on {}", canonical.display()))
}

/// Reads `MOUNT/.vidbench/stats.json`.
pub fn read_snapshot(mountpoint: &Path) -> anyhow::Result<Snapshot> {
    let control = crate::block::find(mountpoint).map_or_else(|| mountpoint.join(CONTROL_DIR), |b| b.control_dir);
    let path = control.join(STATS_FILE);
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {} (is {} a vidbench disk mount?)", path.display(), mountpoint.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

fn unmount(mountpoint: &Path, wait_s: f64) -> anyhow::Result<()> {
    if let Some(b) = crate::block::find(mountpoint) {
        return crate::block::unmount(&b, wait_s);
    }
    let entry = sys::mount_at(mountpoint)?.with_context(|| format!("{} is not a mount point", mountpoint.display()))?;
    if !(entry.fstype.starts_with("fuse") && entry.source == "vidbench") {
        bail!("{} is a {} mount of {:?}, not a vidbench disk; refusing to unmount it", mountpoint.display(), entry.fstype, entry.source);
    }
    let pid = read_snapshot(mountpoint).ok().map(|s| s.pid);
    sys::unmount(&entry.mountpoint, Some(&entry))?;
    if let Some(pid) = pid {
        let deadline = Instant::now() + Duration::from_secs_f64(wait_s);
        // SAFETY: kill with signal 0 only probes.
        while unsafe { libc::kill(pid as i32, 0) } == 0 {
            if Instant::now() > deadline {
                bail!("unmounted {}, but its server (pid {pid}) is still running after {wait_s} s", mountpoint.display());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    println!("unmounted {}", mountpoint.display());
    Ok(())
}

fn stat(args: StatArgs) -> anyhow::Result<()> {
    if let Some(b) = crate::block::find(&args.mountpoint) {
        return crate::block::stat(&args, &b);
    }
    let first = read_snapshot(&args.mountpoint)?;
    let Some(interval) = args.interval else {
        if args.json {
            println!("{}", serde_json::to_string_pretty(&first)?);
        } else {
            print_header();
            print_line(&first.total.counters.rates(first.uptime_s), first.uptime_s, first.in_flight);
        }
        return Ok(());
    };
    if !(interval.is_finite() && interval > 0.0) {
        bail!("--interval must be a positive number of seconds");
    }
    if !args.json {
        print_header();
    }
    let mut previous = first;
    let mut n = 0;
    while args.count.is_none_or(|c| n < c) {
        std::thread::sleep(Duration::from_secs_f64(interval));
        let now = read_snapshot(&args.mountpoint)?;
        let delta = now.total.counters.since(&previous.total.counters);
        let seconds = now.uptime_s - previous.uptime_s;
        let rates = delta.rates(seconds);
        if args.json {
            println!("{}", serde_json::json!({"uptime_s": now.uptime_s, "in_flight": now.in_flight, "counters": delta, "rates": rates}));
        } else {
            print_line(&rates, now.uptime_s, now.in_flight);
        }
        std::io::stdout().flush()?;
        previous = now;
        n += 1;
    }
    Ok(())
}

pub(crate) fn print_header() {
    println!("{:>9} {:>8} {:>8} {:>8} {:>8} {:>6} {:>6} {:>6} {:>6} {:>10}", "time_s", "r/s", "MB/s", "KiB/r", "ms/t", "busy%", "aqu", "hit%", "queue", "seek_cyl");
}

pub(crate) fn print_line(r: &crate::stats::Rates, uptime: f64, in_flight: u64) {
    println!(
        "{:>9.1} {:>8.1} {:>8.2} {:>8.1} {:>8.2} {:>6.1} {:>6.2} {:>6.1} {:>6} {:>10.0}",
        uptime, r.reads_per_s, r.mb_per_s, r.avg_request_kib, r.ms_per_transaction, r.busy_pct, r.avg_queue_depth, r.cache_hit_pct, in_flight, r.avg_seek_cylinders
    );
}
