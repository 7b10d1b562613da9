//! `vidbench disk bench`: the papers' phenomenon measured through the kernel.
//!
//! Phase "interleaved": N threads each read their own file from the start in
//! small reads (64 KiB), all at once, as a server's workers do for N clients.
//! Phase "serialized": one thread reads the same files one after another in
//! large reads (2 MiB), as Libception's daemon does. The page cache is dropped
//! before each phase (the drive's own cache is left as a real one would be).
//! Disk figures come from the mount's counters. Raw rows (one per file and
//! phase) go to `OUT/reads.csv`, the summary to `OUT/summary.json`.

use crate::mount::read_snapshot;
use anyhow::{bail, Context};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::Instant;

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// A mounted vidbench disk.
    pub mountpoint: PathBuf,
    /// Concurrent readers in the interleaved phase (and files read).
    #[arg(long, default_value_t = 32)]
    pub streams: usize,
    /// Read size of the interleaved phase, KiB.
    #[arg(long, default_value_t = 64)]
    pub small_kib: usize,
    /// Read size of the serialized phase, KiB.
    #[arg(long, default_value_t = 2048)]
    pub large_kib: usize,
    /// Bytes read from the start of each file, MiB.
    #[arg(long, default_value_t = 8)]
    pub mib_per_file: u64,
    /// Directory for the raw data (default: /tmp/vidbench-disk-bench-PID).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

fn collect_files(dir: &Path, min_size: u64, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry?;
        let path = entry.path();
        let meta = entry.metadata()?;
        if meta.is_dir() {
            collect_files(&path, min_size, out)?;
        } else if meta.is_file() && meta.len() >= min_size {
            out.push(path);
        }
    }
    Ok(())
}

fn drop_caches() -> anyhow::Result<()> {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3\n").context("dropping the page cache (/proc/sys/vm/drop_caches; needs root)")
}

/// Reads `bytes` of `path` in `chunk`-byte reads; returns (start, end) in s since `t0`.
fn read_file(path: &Path, bytes: u64, chunk: usize, t0: Instant) -> anyhow::Result<(f64, f64)> {
    let start = t0.elapsed().as_secs_f64();
    let mut f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut buf = vec![0u8; chunk];
    let mut done = 0u64;
    while done < bytes {
        let want = chunk.min((bytes - done) as usize);
        let n = f.read(&mut buf[..want]).with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            bail!("{} ended after {done} bytes", path.display());
        }
        done += n as u64;
    }
    Ok((start, t0.elapsed().as_secs_f64()))
}

struct Phase {
    name: &'static str,
    wall_s: f64,
    rows: Vec<(PathBuf, f64, f64)>,
    disk: serde_json::Value,
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let bytes = args.mib_per_file << 20;
    let mut files = Vec::new();
    collect_files(&args.mountpoint, bytes, &mut files)?;
    files.sort();
    if files.len() < args.streams {
        bail!("{} has {} files of at least {} MiB; the benchmark needs {} (lower --mib-per-file or --streams)", args.mountpoint.display(), files.len(), args.mib_per_file, args.streams);
    }
    files.truncate(args.streams);
    let out = args.out.clone().unwrap_or_else(|| PathBuf::from(format!("/tmp/vidbench-disk-bench-{}", std::process::id())));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let before_all = read_snapshot(&args.mountpoint)?;

    let mut phases = Vec::new();
    for (name, chunk, parallel) in [("interleaved", args.small_kib * 1024, true), ("serialized", args.large_kib * 1024, false)] {
        drop_caches()?;
        let before = read_snapshot(&args.mountpoint)?;
        let t0 = Instant::now();
        let rows: Vec<(PathBuf, f64, f64)> = if parallel {
            let barrier = Arc::new(Barrier::new(files.len()));
            let handles: Vec<_> = files
                .iter()
                .cloned()
                .map(|path| {
                    let barrier = barrier.clone();
                    std::thread::spawn(move || {
                        barrier.wait();
                        read_file(&path, bytes, chunk, t0).map(|(s, e)| (path, s, e))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().map_err(|_| anyhow::anyhow!("a reader panicked"))?).collect::<anyhow::Result<_>>()?
        } else {
            files.iter().map(|p| read_file(p, bytes, chunk, t0).map(|(s, e)| (p.clone(), s, e))).collect::<anyhow::Result<_>>()?
        };
        let wall_s = t0.elapsed().as_secs_f64();
        let after = read_snapshot(&args.mountpoint)?;
        let delta = after.total.counters.since(&before.total.counters);
        let rates = delta.rates(after.uptime_s - before.uptime_s);
        phases.push(Phase { name, wall_s, rows, disk: serde_json::json!({"counters": delta, "rates": rates}) });
    }

    let mut csv = std::fs::File::create(out.join("reads.csv"))?;
    writeln!(csv, "phase,file,bytes,start_s,end_s")?;
    for p in &phases {
        for (path, s, e) in &p.rows {
            writeln!(csv, "{},{},{bytes},{s:.6},{e:.6}", p.name, path.display())?;
        }
    }
    let total = (bytes * files.len() as u64) as f64;
    let mbs: Vec<f64> = phases.iter().map(|p| total / p.wall_s / 1e6).collect();
    let summary = serde_json::json!({
        "mountpoint": args.mountpoint,
        "preset": before_all.preset,
        "config": before_all.config,
        "streams": args.streams,
        "small_kib": args.small_kib,
        "large_kib": args.large_kib,
        "bytes_per_file": bytes,
        "interleaved": {"wall_s": phases[0].wall_s, "mb_s": mbs[0], "disk": phases[0].disk},
        "serialized": {"wall_s": phases[1].wall_s, "mb_s": mbs[1], "disk": phases[1].disk},
        "ratio_serialized_over_interleaved": mbs[1] / mbs[0],
    });
    std::fs::write(out.join("summary.json"), serde_json::to_string_pretty(&summary)? + "\n")?;
    println!("preset {}: {} files x {} MiB", before_all.preset, files.len(), args.mib_per_file);
    println!("  interleaved: {} threads, {} KiB reads: {:8.2} MB/s", args.streams, args.small_kib, mbs[0]);
    println!("  serialized:  1 thread, {} KiB reads:  {:8.2} MB/s", args.large_kib, mbs[1]);
    println!("  ratio serialized / interleaved: {:.2} (interleaved gets {:.0} % of serialized)", mbs[1] / mbs[0], mbs[0] / mbs[1] * 100.0);
    println!("  raw data: {}", out.display());
    Ok(())
}
