//! `vidbench disk`: mount, unmount, stat, presets, model, bench, library.
//!
//! The subcommands that are more than a few lines live in their own modules:
//! `mount` (the mount server and `--daemonize`), `bench`, `drive_args` (which
//! drive a command means); this file dispatches and holds the small ones.

use crate::{bench, sys};
use crate::drive_args::DriveArgs;
use crate::mount::{self, read_snapshot};
use crate::mount_args::MountArgs;
use crate::params;
use anyhow::{bail, Context};
use clap::Subcommand;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use vidbench_library::{SourceTrees, UniformLibrary};

/// Arguments of `vidbench disk`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Mount a library as an emulated disk.
    Mount(Box<MountArgs>),
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
    Model(Box<ModelArgs>),
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
    /// Write a library manifest of N equal files, to test or benchmark the
    /// disk without generating a workload (or identical source trees for the
    /// diff microbenchmark).
    Library(LibraryArgs),
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
pub struct LibraryArgs {
    /// The manifest to write (library.json).
    pub out: PathBuf,
    /// Files (in each tree with --source-trees).
    #[arg(long, default_value_t = 8)]
    pub files: u32,
    /// Size of each file, MiB.
    #[arg(long, default_value_t = 4.0, conflicts_with = "source_trees")]
    pub size_mib: f64,
    /// Sizes that are no multiple of 512 or 4096 (for end-of-file tests), and
    /// the files spread over two directories.
    #[arg(long, conflicts_with = "source_trees")]
    pub odd: bool,
    /// Instead: this many identical source trees t0/, t1/, ... with file sizes
    /// as in paper 000's Fig 19 (Linux 3.7.1), for the diff microbenchmark
    /// (bench/diff/run); the seed draws the sizes.
    #[arg(long, value_name = "COPIES")]
    pub source_trees: Option<u32>,
    #[arg(long, default_value = "disk-test")]
    pub name: String,
    /// The manifest's placement seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
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
        Command::Mount(m) => mount::run(*m),
        Command::Unmount { mountpoint, wait_s } => unmount(&mountpoint, wait_s),
        Command::Stat(s) => stat(s),
        Command::Presets { toml } => list_presets(toml.as_deref()),
        Command::Model(m) => model_figures(*m),
        Command::Bench(b) => bench::run(b),
        Command::BlockReaper { .. } => crate::block::reaper::run_reaper(),
        Command::Library(l) => write_library(&l),
    }
}

fn write_library(args: &LibraryArgs) -> anyhow::Result<()> {
    if !(args.size_mib.is_finite() && args.size_mib > 0.0) {
        bail!("--size-mib must be a positive number of MiB");
    }
    if args.files == 0 {
        bail!("--files must be at least 1");
    }
    let library = if let Some(copies) = args.source_trees {
        if copies == 0 {
            bail!("--source-trees must be at least 1");
        }
        SourceTrees { name: args.name.clone(), files: args.files, copies, seed: args.seed }.build()
    } else {
        UniformLibrary {
            name: args.name.clone(),
            files: args.files,
            file_bytes: (args.size_mib * 1024.0 * 1024.0) as u64,
            odd_sizes: args.odd,
            placement_seed: args.seed,
        }
        .build()
    };
    library.validate().map_err(|m| anyhow::anyhow!("{m}"))?;
    library.save(&args.out)?;
    Ok(())
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
        return crate::block::stat(&b, args.json, args.interval, args.count);
    }
    let first = read_snapshot(&args.mountpoint)?;
    let Some(interval) = args.interval else {
        if args.json {
            println!("{}", serde_json::to_string_pretty(&first)?);
        } else {
            crate::stats::print_rates_header();
            crate::stats::print_rates_line(&first.total.counters.rates(first.uptime_s), first.uptime_s, first.in_flight);
        }
        return Ok(());
    };
    if !(interval.is_finite() && interval > 0.0) {
        bail!("--interval must be a positive number of seconds");
    }
    if !args.json {
        crate::stats::print_rates_header();
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
            crate::stats::print_rates_line(&rates, now.uptime_s, now.in_flight);
        }
        std::io::stdout().flush()?;
        previous = now;
        n += 1;
    }
    Ok(())
}

