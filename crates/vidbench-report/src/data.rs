//! Reading a results directory written by `vidbench run` into plain data.
//!
//! Only complete runs (with `DONE`) count. Everything is derived from the raw
//! files of each run: the load client's `summary.json` (failure % and MB/s of
//! the measured window), the disk's counters before and after the load (their
//! difference gives disk MB/s, transactions, ms per transaction, request size),
//! the cgroup's CPU figures, the shim's track-mode histograms and the disk
//! trace. Files are read as JSON values, not the producers' types, so a report
//! can be made from results of an older build as long as the fields exist.

use anyhow::Context;
use libception_proto::shim_stats::Totals;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The drive's request trace of a run (docs/disk.md "Trace").
pub const TRACE_FILE: &str = "disk-trace.csv";
/// Only the requests of the window the report draws from, gzipped
/// ([`crate::write_trace_windows`]): what a committed record keeps in place
/// of the whole trace. Read when the whole trace is absent.
pub const TRACE_WINDOW_FILE: &str = "disk-trace-window.csv.gz";

/// One complete run.
#[derive(Debug, Clone)]
pub struct Run {
    pub dir: PathBuf,
    pub config: String,
    /// The configuration as the driver expanded it (`run.json`'s `config`).
    pub config_json: Value,
    pub kind: String,
    pub rate: Option<f64>,
    pub repetition: u32,
    pub failure_pct: f64,
    pub throughput_mbs: f64,
    /// The load client's own CI of its 5-second samples, when it has one.
    pub sample_ci95_mbs: Option<f64>,
    pub disk: Option<DiskDelta>,
    pub server_cpu_s: Option<f64>,
    pub daemon_cpu_s: Option<f64>,
    pub load_wall_s: Option<f64>,
    pub trace: Option<PathBuf>,
    /// The trace's clock (seconds) at the load's time 0, which puts
    /// `window_s` on the trace (see [`Run::trace_window_ns`]).
    pub trace_offset_s: Option<f64>,
    /// Shim track-mode stats files (one per process).
    pub shim_stats: Vec<PathBuf>,
    pub setup: Value,
    /// A step of a steady-state run: its window on the run's clock, over
    /// which every figure of this run (delivered, disk) was measured. `None`
    /// for a run of the classic protocol, whose disk figures cover the whole
    /// load and whose delivered MB/s covers the measure phase.
    pub window_s: Option<(f64, f64)>,
    /// The daemon's prefetching over the step's window (steady-state steps
    /// of runs under Libception, from steps.json).
    pub prefetch: Option<PrefetchWindow>,
    /// The page cache's LRU lists over the step's window (steady-state
    /// steps recorded since these were sampled).
    pub lru: Option<LruWindow>,
    /// Under the page cache's gate: whether the lists had settled when the
    /// step's window opened (false: the gate's cap opened it).
    pub cache_settled: Option<bool>,
    /// CPUs the whole machine kept busy in the step's window, and the
    /// drive's mean reply lateness (ms per read) there: what else ran beside
    /// the run, and whether it starved the drive (steps recorded since).
    pub host_cpus_busy: Option<f64>,
    pub reply_late_ms: Option<f64>,
    /// Share of the step's window during which some runnable task waited for
    /// a CPU, and the CPUs the hypervisor took (steps recorded since).
    pub host_cpu_wait: Option<f64>,
    pub host_cpus_stolen: Option<f64>,
    /// Pages the kernel's global reclaim scanned in the step's window (steps
    /// recorded since it was sampled): above 0, memory outside the run's
    /// limit took part of its page cache.
    pub global_reclaim_pages: Option<f64>,
    /// Under Libception, the server's threads blocked on the daemon's reads
    /// on average over the step's window (steps recorded since it is sampled).
    pub server_threads_blocked: Option<f64>,
    /// Under Libception, the share of the step's window the daemon's
    /// workers spent reading (steps recorded since it is sampled).
    pub daemon_reading: Option<f64>,
    /// Whether a step's window was steady: its first third against its last
    /// (steady-state steps; each part where the run recorded it).
    pub drift: Option<WindowDrift>,
    /// The server's TCP send buffers over a step's window (runs recorded
    /// since they are sampled through the run, `sockets.jsonl`).
    pub send_buffers: Option<SendBuffers>,
    /// What the shim counted and timed in the server over a step's window
    /// (runs whose shim kept statistics, recorded since it rewrites them
    /// while running: the difference of the `shim.jsonl` lines at the
    /// window's edges).
    pub shim_window: Option<Totals>,
    /// Per client class, the time to first byte of the requests issued in a
    /// step's window (steps recorded since the load client keeps it).
    pub first_byte: BTreeMap<String, vidbench_load::FirstByte>,
}

/// The send buffers (`ss` skmem `tb`) of the server's established
/// connections, over the snapshots taken in a window: the mean number of
/// connections, the median of the snapshots' medians and the largest buffer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SendBuffers {
    pub connections: f64,
    pub median_bytes: f64,
    pub max_bytes: f64,
}

/// The snapshots of a run's `sockets.jsonl` (one JSON object a line: `t_s`
/// and `send_buffer_bytes` {connections, min, median, max}): (t_s,
/// connections, median, max); none without the file (runs before it). A
/// snapshot without send buffers (no connection was open) is left out; a
/// line that is not such an object is an error naming the file and line.
fn socket_snapshots(run_dir: &Path) -> anyhow::Result<Vec<(f64, f64, f64, f64)>> {
    let path = run_dir.join("sockets.jsonl");
    let Some(text) = complete_lines(&path)? else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let bad = || format!("{}: line {}: not a snapshot of send buffers", path.display(), i + 1);
        let v: Value = serde_json::from_str(line).with_context(bad)?;
        let t = v.get("t_s").and_then(Value::as_f64).with_context(bad)?;
        let Some(b) = v.get("send_buffer_bytes").filter(|b| !b.is_null()) else { continue };
        let n = |k: &str| b.get(k).and_then(Value::as_f64).with_context(bad);
        out.push((t, n("connections")?, n("median")?, n("max")?));
    }
    Ok(out)
}

/// The sums of the shim's statistics a run's sampler took (`shim.jsonl`, one
/// JSON object a line: `t_s` and `totals`); none without the file. A line
/// that is not such an object is an error naming the file and line.
fn shim_snapshots(run_dir: &Path) -> anyhow::Result<Vec<(f64, Totals)>> {
    let path = run_dir.join("shim.jsonl");
    let Some(text) = complete_lines(&path)? else { return Ok(Vec::new()) };
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            #[derive(serde::Deserialize)]
            struct Line {
                t_s: f64,
                totals: Totals,
            }
            let l: Line = serde_json::from_str(line).with_context(|| format!("{}: line {}: not a sum of the shim's statistics", path.display(), i + 1))?;
            Ok((l.t_s, l.totals))
        })
        .collect()
}

/// The shim's counters over `[w0, w1]`: the snapshot at the window's end
/// minus the one at its start, each the one within half the snapshots'
/// spacing (the sample interval) of its edge; `None` when either edge has
/// none.
fn shim_within(snapshots: &[(f64, Totals)], (w0, w1): (f64, f64)) -> Option<Totals> {
    let spacing = snapshots.windows(2).map(|w| w[1].0 - w[0].0).filter(|d| *d > 0.0).min_by(f64::total_cmp)?;
    let at = |t: f64| snapshots.iter().find(|(s, _)| (s - t).abs() < spacing / 2.0).map(|(_, totals)| totals);
    Some(at(w1)?.since(at(w0)?))
}

/// The send buffers over `[w0, w1]` from `snapshots`; `None` when none lies there.
fn send_buffers_within(snapshots: &[(f64, f64, f64, f64)], (w0, w1): (f64, f64)) -> Option<SendBuffers> {
    let inside: Vec<_> = snapshots.iter().filter(|s| s.0 >= w0 && s.0 <= w1).collect();
    if inside.is_empty() {
        return None;
    }
    let mut medians: Vec<f64> = inside.iter().map(|s| s.2).collect();
    medians.sort_by(f64::total_cmp);
    Some(SendBuffers {
        connections: inside.iter().map(|s| s.1).sum::<f64>() / inside.len() as f64,
        median_bytes: medians[medians.len() / 2],
        max_bytes: inside.iter().map(|s| s.3).fold(0.0, f64::max),
    })
}

/// A step's window in thirds: the active sessions (the driver's own count,
/// steps.json), the delivered MB/s (load/intervals.csv) and the disk MB/s
/// (samples.csv), each as (first third, last third). Paper 003's steady
/// state shows as the two ends level.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct WindowDrift {
    pub active_sessions: Option<(f64, f64)>,
    pub delivered_mb_s: Option<(f64, f64)>,
    pub disk_mb_s: Option<(f64, f64)>,
}

impl WindowDrift {
    /// Change from the first third to the last, % of the first.
    pub fn change_pct((first, last): (f64, f64)) -> Option<f64> {
        (first > 0.0).then(|| 100.0 * (last - first) / first)
    }
}

/// Rows `[start_s, end_s, bytes]` of a run's byte counts per sample interval.
type ByteIntervals = Vec<[f64; 3]>;

/// MB/s over the sample intervals lying inside `[from, to]` (a second of
/// slack for the samplers' jitter); `None` when none does.
fn mb_s_within(rows: &[[f64; 3]], from: f64, to: f64) -> Option<f64> {
    let (bytes, secs) = rows
        .iter()
        .filter(|[a, b, _]| *a >= from - 1.0 && *b <= to + 1.0 && b > a)
        .fold((0.0, 0.0), |(n, t), [a, b, bytes]| (n + bytes, t + (b - a)));
    (secs > 0.0).then(|| bytes / secs / 1e6)
}

/// (first third, last third) of `window` in MB/s.
fn thirds(rows: &[[f64; 3]], (w0, w1): (f64, f64)) -> Option<(f64, f64)> {
    let third = (w1 - w0) / 3.0;
    Some((mb_s_within(rows, w0, w0 + third)?, mb_s_within(rows, w1 - third, w1)?))
}

impl Run {
    /// The seconds the CPU figures cover: a step's window, or the load's
    /// wall time of a classic run.
    pub fn cpu_span_s(&self) -> Option<f64> {
        match self.window_s {
            Some((a, b)) => Some(b - a),
            None => self.load_wall_s,
        }
        .filter(|w| *w > 0.0)
    }

    /// A step's window on the trace's clock (ns since the drive's mount):
    /// the requests the drive started while the step was measured. `None`
    /// for a run of the classic protocol or one whose drive clock is unknown.
    pub fn trace_window_ns(&self) -> Option<(u64, u64)> {
        let (w0, w1) = self.window_s?;
        let off = self.trace_offset_s?;
        let ns = |s: f64| ((s + off) * 1e9).max(0.0) as u64;
        Some((ns(w0), ns(w1)))
    }
}

/// The memory cgroup's file LRU lists over a window (a step's `lru` in
/// steps.json): mean bytes on each list, MB/s of file pages read again
/// after eviction.
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize)]
pub struct LruWindow {
    pub active_file_mean_bytes: f64,
    pub inactive_file_mean_bytes: f64,
    pub refault_mb_s: Option<f64>,
    /// Mean kernel memory charged to the cgroup (absent before it was sampled).
    #[serde(default)]
    pub kernel_mean_bytes: Option<f64>,
}

/// Paper 001 Table 1 over a window: the prefetch size in force and what
/// became of the prefetched bytes, in MB/s (a step's `prefetch` in
/// steps.json).
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize)]
pub struct PrefetchWindow {
    pub size_mean_bytes: f64,
    pub size_end_bytes: f64,
    pub read_mb_s: Option<f64>,
    pub used_mb_s: Option<f64>,
    pub evicted_mb_s: Option<f64>,
    pub wasted_mb_s: Option<f64>,
    pub reread_mb_s: Option<f64>,
    /// Mean estimated eviction time of what was evicted in the window, s.
    #[serde(default)]
    pub eviction_time_s: Option<f64>,
    /// Under a bitrate scale: the share of prefetches scaled down for slower
    /// streams and their mean size (steps recorded since).
    #[serde(default)]
    pub scaled_share: Option<f64>,
    #[serde(default)]
    pub scaled_mean_bytes: Option<f64>,
}

/// The daemon's prefetch size in force over a stepped run, from its
/// samples.csv: (seconds on the load's clock, bytes); empty when the run
/// sampled no daemon.
pub fn prefetch_size_samples(run_dir: &Path) -> anyhow::Result<Vec<(f64, f64)>> {
    sample_column(run_dir, "prefetch_bytes")
}

/// The reads the daemon made over a whole run, from its stats document at
/// the run's end (`daemon.json`, every disk summed): how many, their bytes,
/// and how many fell in each size bucket (`reads_by_size`: reads of
/// (le_bytes/2, le_bytes]). `None` for a run without a daemon; a damaged
/// file is an error naming it.
#[derive(Debug, Clone, PartialEq)]
pub struct DaemonReads {
    pub reads: u64,
    pub bytes: u64,
    pub by_size: Vec<(u64, u64)>,
}

pub fn daemon_reads(run_dir: &Path) -> anyhow::Result<Option<DaemonReads>> {
    let path = run_dir.join("daemon.json");
    let Some(doc) = read_optional_json(&path)? else {
        return Ok(None);
    };
    let disks = doc.get("disks").and_then(Value::as_array).with_context(|| format!("{}: no `disks` list", path.display()))?;
    let mut out = DaemonReads { reads: 0, bytes: 0, by_size: Vec::new() };
    let mut buckets: BTreeMap<u64, u64> = BTreeMap::new();
    for d in disks {
        let field = |k: &str| d.get(k).and_then(Value::as_u64).with_context(|| format!("{}: a disk without `{k}`", path.display()));
        out.reads += field("reads")?;
        out.bytes += field("bytes_read")?;
        for b in d.get("reads_by_size").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]) {
            let (Some(le), Some(n)) = (b.get("le_bytes").and_then(Value::as_u64), b.get("count").and_then(Value::as_u64)) else {
                anyhow::bail!("{}: a `reads_by_size` entry without `le_bytes` and `count`: {b}", path.display());
            };
            *buckets.entry(le).or_default() += n;
        }
    }
    out.by_size = buckets.into_iter().collect();
    Ok(Some(out))
}

/// One interval an adaptive prefetch controller closed (a row of the run's
/// `controller.csv`, written by the driver's sampler): its end on the load's
/// clock, the disk worker, the size in force, and the score and the mean
/// prefetch eviction time (the estimate the controller's jump uses: the
/// middle of the bracket between last seen resident and found evicted) when
/// the interval had them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ControllerInterval {
    pub t_s: f64,
    pub worker: u64,
    pub prefetch_bytes: f64,
    pub score: Option<f64>,
    pub eviction_estimate_s: Option<f64>,
    /// Prefetched bytes evicted before use over those requested in the
    /// interval (absent in files from before the column).
    pub evicted_fraction: Option<f64>,
    /// Why the controller measured the interval without storing its score
    /// (the `decision` column), if it did not store it.
    pub unscored: Option<Unscored>,
}

/// An interval whose score the controller left out of its descent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unscored {
    /// Its warm-up: the first busy interval after a daemon start.
    WarmUp,
    /// The first interval after a change of size, which measures the
    /// transition between the two sizes.
    Settle,
}

/// The adaptive controller's intervals of a run, in file order; empty
/// without `controller.csv` (no adaptive controller, or an older run). A
/// last line without its newline (a run killed while writing) is left out;
/// any other malformed row is an error naming the file and the row.
pub fn controller_intervals(run_dir: &Path) -> anyhow::Result<Vec<ControllerInterval>> {
    let path = run_dir.join("controller.csv");
    let Some(text) = complete_lines(&path)? else { return Ok(Vec::new()) };
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let headers = reader.headers().with_context(|| format!("{}: no header", path.display()))?.clone();
    let col = |name: &str| headers.iter().position(|h| h == name).with_context(|| format!("{}: no column {name}", path.display()));
    let (t, worker, size, score, eviction) = (col("t_s")?, col("worker")?, col("prefetch_bytes")?, col("score")?, col("eviction_time_estimate_s")?);
    let evicted = headers.iter().position(|h| h == "evicted_fraction");
    let decision = headers.iter().position(|h| h == "decision");
    let mut out = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let row = i + 2;
        let record = record.with_context(|| format!("{}: row {row}", path.display()))?;
        let number = |c: usize, name: &str| -> anyhow::Result<f64> {
            record.get(c).and_then(|v| v.parse().ok()).with_context(|| format!("{}: row {row}: {name} is not a number", path.display()))
        };
        let optional = |c: usize, name: &str| -> anyhow::Result<Option<f64>> {
            match record.get(c) {
                Some("") | None => Ok(None),
                Some(_) => number(c, name).map(Some),
            }
        };
        out.push(ControllerInterval {
            t_s: number(t, "t_s")?,
            worker: number(worker, "worker")? as u64,
            prefetch_bytes: number(size, "prefetch_bytes")?,
            score: optional(score, "score")?,
            eviction_estimate_s: optional(eviction, "eviction_time_estimate_s")?,
            evicted_fraction: evicted.map(|c| optional(c, "evicted_fraction")).transpose()?.flatten(),
            unscored: match decision.and_then(|c| record.get(c)) {
                Some("warm-up") => Some(Unscored::WarmUp),
                Some("settle") => Some(Unscored::Settle),
                _ => None,
            },
        });
    }
    Ok(out)
}

/// Delivered MB/s of a run over bins of `bin_s` seconds of the load's clock,
/// from the load client's `load/intervals.csv` (bytes received per sample
/// interval): (end of the bin, MB/s), bins with no interval left out; empty
/// without the file.
pub fn delivered_mb_s_over_time(run_dir: &Path, bin_s: f64) -> anyhow::Result<Vec<(f64, f64)>> {
    let mut bins: BTreeMap<u64, (f64, f64)> = BTreeMap::new(); // bin -> (bytes, seconds)
    for [a, b, n] in numeric_columns(&run_dir.join("load").join("intervals.csv"), ["start_s", "end_s", "received_bytes"])? {
        if b <= a {
            continue;
        }
        let e = bins.entry((a / bin_s).floor() as u64).or_default();
        e.0 += n;
        e.1 += b - a;
    }
    Ok(bins.into_iter().map(|(k, (n, secs))| ((k + 1) as f64 * bin_s, n / secs / 1e6)).collect())
}

/// The text of a file a run appends to line by line, without a last line
/// that has no newline (cut by a killed run); `None` when there is no such
/// file (an older run, or one that had nothing to write there).
fn complete_lines(path: &Path) -> anyhow::Result<Option<String>> {
    let mut text = match std::fs::read_to_string(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        r => r.with_context(|| format!("cannot read {}", path.display()))?,
    };
    if !text.ends_with('\n') {
        text.truncate(text.rfind('\n').map_or(0, |i| i + 1));
    }
    Ok(Some(text))
}

/// The rows of a CSV file that have a value in every one of `columns`, those
/// values in that order; empty without the file or one of the columns (an
/// older run). An empty cell means no value that row (the sampler had
/// nothing to read); a row of the wrong length or a cell that is not a
/// number is an error naming the file, row and column, so that a damaged
/// file never quietly thins a figure.
fn numeric_columns<const N: usize>(path: &Path, columns: [&str; N]) -> anyhow::Result<Vec<[f64; N]>> {
    let Some(text) = complete_lines(path)? else { return Ok(Vec::new()) };
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let headers = reader.headers().with_context(|| format!("{}: no header", path.display()))?.clone();
    let Some(at) = columns.iter().map(|c| headers.iter().position(|h| h == *c)).collect::<Option<Vec<usize>>>() else { return Ok(Vec::new()) };
    let mut rows = Vec::new();
    'rows: for (i, record) in reader.records().enumerate() {
        let row = i + 2;
        let record = record.with_context(|| format!("{}: row {row}", path.display()))?;
        let mut values = [0.0; N];
        for (v, (&c, name)) in values.iter_mut().zip(at.iter().zip(columns)) {
            match record.get(c) {
                None | Some("") => continue 'rows,
                Some(cell) => *v = cell.parse().with_context(|| format!("{}: row {row}: {name} is not a number: {cell:?}", path.display()))?,
            }
        }
        rows.push(values);
    }
    Ok(rows)
}

/// One column of a stepped run's samples.csv against the load's clock:
/// (t_s, value) for the rows that have a value; empty without the file or
/// the column.
fn sample_column(run_dir: &Path, column: &str) -> anyhow::Result<Vec<(f64, f64)>> {
    Ok(numeric_columns(&run_dir.join("samples.csv"), ["t_s", column])?.into_iter().map(|[t, v]| (t, v)).collect())
}

/// The drive's clock (seconds since its mount, the trace's clock) at the
/// load's time 0: from the samples' `disk_uptime_s` where they have it (the
/// median of the differences, immune to a late sample), else the drive's
/// `uptime_s` read just before the load started (`disk-before.json`; a few
/// milliseconds early).
fn trace_offset_s(run_dir: &Path, disk_before: Option<&Value>) -> anyhow::Result<Option<f64>> {
    let mut d: Vec<f64> = sample_column(run_dir, "disk_uptime_s")?.into_iter().map(|(t, up)| up - t).collect();
    if !d.is_empty() {
        d.sort_by(f64::total_cmp);
        return Ok(Some(d[d.len() / 2]));
    }
    Ok(disk_before.and_then(|b| b.get("uptime_s")?.as_f64()))
}

/// What the disk did during the load (after minus before).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DiskDelta {
    pub seconds: f64,
    pub reads: f64,
    /// Of `reads`, those the drive joined to the command before them.
    pub joined: f64,
    pub bytes: f64,
    pub busy_s: f64,
}

impl DiskDelta {
    pub fn mb_per_s(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes / 1e6 / self.seconds
        } else {
            0.0
        }
    }
    /// The drive's transactions: commands, a joined read riding in one.
    pub fn transactions(&self) -> f64 {
        self.reads - self.joined
    }
    /// iostat's ms per transaction: busy time over transactions (paper 000 Table 2).
    pub fn ms_per_transaction(&self) -> f64 {
        if self.transactions() > 0.0 {
            self.busy_s * 1000.0 / self.transactions()
        } else {
            0.0
        }
    }
    pub fn request_kib(&self) -> f64 {
        if self.transactions() > 0.0 {
            self.bytes / 1024.0 / self.transactions()
        } else {
            0.0
        }
    }
    pub fn busy_pct(&self) -> f64 {
        if self.seconds > 0.0 {
            100.0 * self.busy_s / self.seconds
        } else {
            0.0
        }
    }
}

/// A whole results directory.
#[derive(Debug, Clone)]
pub struct Results {
    pub dir: PathBuf,
    pub experiment: Value,
    pub machine: Value,
    /// Configuration names in experiment order.
    pub order: Vec<String>,
    pub runs: Vec<Run>,
    /// Run directories without DONE (interrupted or failed), for the record.
    pub incomplete: Vec<PathBuf>,
    /// Configurations whose stepped search has only kept parts
    /// (`steps-partNN`) and no finished run: their search is not over.
    pub unfinished: Vec<String>,
}

fn read_json(path: &Path) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not valid JSON", path.display()))
}

/// A run file that older runs, or runs of another kind, do not have: `None`
/// only when it does not exist. One that is there but cannot be read or is
/// not JSON is an error naming it: a damaged file must not turn a run into
/// one without it (a stepped run read as a classic one, say).
fn read_optional_json(path: &Path) -> anyhow::Result<Option<Value>> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        _ => read_json(path).map(Some),
    }
}

/// Uptime, reads, joined reads, bytes and busy seconds of a snapshot.
fn counters(v: &Value) -> Option<[f64; 5]> {
    let c = v.get("total")?.get("counters")?;
    Some([
        v.get("uptime_s")?.as_f64()?,
        c.get("reads")?.as_f64()?,
        // Absent in snapshots from before joining existed.
        c.get("joined_reads").and_then(Value::as_f64).unwrap_or(0.0),
        c.get("bytes")?.as_f64()?,
        c.get("busy_ns")?.as_f64()? / 1e9,
    ])
}

/// The disk's activity between two `vidbench disk stat --json` snapshots.
pub fn disk_delta(before: &Value, after: &Value) -> Option<DiskDelta> {
    let [t0, r0, j0, b0, u0] = counters(before)?;
    let [t1, r1, j1, b1, u1] = counters(after)?;
    Some(DiskDelta { seconds: t1 - t0, reads: r1 - r0, joined: j1 - j0, bytes: b1 - b0, busy_s: u1 - u0 })
}

fn load_run(dir: &Path) -> anyhow::Result<Vec<Run>> {
    let run = read_json(&dir.join("run.json"))?;
    let result = read_json(&dir.join("result.json"))?;
    let config_json = run.get("config").cloned().unwrap_or(Value::Null);
    let config = config_json.get("name").and_then(Value::as_str).context("run.json has no config.name")?.to_string();
    let kind = config_json.get("kind").and_then(Value::as_str).unwrap_or("server").to_string();
    let outcome = result.get("outcome").context("result.json has no outcome")?;
    let summary = read_optional_json(&dir.join("load/summary.json"))?;
    let resources = read_optional_json(&dir.join("resources.json"))?;
    let disk_before = read_optional_json(&dir.join("disk-before.json"))?;
    let disk = match (&disk_before, read_optional_json(&dir.join("disk-after.json"))?) {
        (Some(b), Some(a)) => disk_delta(b, &a),
        _ => None,
    };
    let res = |k: &str| resources.as_ref().and_then(|r| r.get(k)).and_then(Value::as_f64);
    let mut shim_stats: Vec<PathBuf> = std::fs::read_dir(dir.join("shim"))
        .map(|rd| rd.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "json")).collect())
        .unwrap_or_default();
    shim_stats.sort();
    let base = Run {
        dir: dir.to_owned(),
        config,
        config_json,
        kind,
        rate: run.get("rate").and_then(Value::as_f64),
        repetition: run.get("repetition").and_then(Value::as_u64).unwrap_or(0) as u32,
        failure_pct: outcome.get("failure_pct").and_then(Value::as_f64).context("result.json has no failure_pct")?,
        throughput_mbs: outcome.get("throughput_mbs").and_then(Value::as_f64).context("result.json has no throughput_mbs")?,
        sample_ci95_mbs: summary.as_ref().and_then(|s| s.get("samples")?.get("ci95_mb_s")?.as_f64()),
        disk,
        server_cpu_s: res("server_cpu_s"),
        daemon_cpu_s: res("daemon_cpu_s"),
        load_wall_s: res("load_wall_s"),
        trace: [TRACE_FILE, TRACE_WINDOW_FILE].iter().map(|f| dir.join(f)).find(|p| p.is_file()),
        trace_offset_s: trace_offset_s(dir, disk_before.as_ref())?,
        shim_stats,
        setup: read_optional_json(&dir.join("setup.json"))?.unwrap_or(Value::Null),
        window_s: None,
        prefetch: None,
        lru: None,
        cache_settled: None,
        host_cpus_busy: None,
        reply_late_ms: None,
        host_cpu_wait: None,
        host_cpus_stolen: None,
        global_reclaim_pages: None,
        server_threads_blocked: None,
        daemon_reading: None,
        drift: None,
        send_buffers: None,
        shim_window: None,
        first_byte: BTreeMap::new(),
    };
    match read_optional_json(&dir.join("steps.json"))? {
        Some(steps) => expand_steps(base, &steps).with_context(|| format!("{} is not a list of steps", dir.join("steps.json").display())),
        None => Ok(vec![base]),
    }
}

/// A steady-state run as one entry per step (`steps.json`, written by the
/// driver): rate, failure %, delivered and disk figures of the step's window
/// (repeated rates are numbered as repetitions by [`Results::load`], across
/// the directories of a search resumed in parts). The run's own CPU figures
/// cover the whole run, not a window, so a step has CPU only from its own
/// window's samples.
fn expand_steps(base: Run, steps: &Value) -> anyhow::Result<Vec<Run>> {
    let mut runs: Vec<Run> = Vec::new();
    let delivered: ByteIntervals = numeric_columns(&base.dir.join("load").join("intervals.csv"), ["start_s", "end_s", "received_bytes"])?;
    // The drive's counter is cumulative: each sample's increase over the previous one.
    let sockets = socket_snapshots(&base.dir)?;
    let shim = shim_snapshots(&base.dir)?;
    // (A counter that went back, or a value that is not finite, gives no interval.)
    let disk_read: ByteIntervals = sample_column(&base.dir, "disk_bytes")?
        .windows(2)
        .filter(|w| w[1].1.is_finite() && w[0].1.is_finite() && w[1].1 >= w[0].1)
        .map(|w| [w[0].0, w[1].0, w[1].1 - w[0].1])
        .collect();
    let steps = steps.as_array().context("not an array")?;
    if steps.is_empty() {
        // The driver writes the file after a step's window, never empty.
        anyhow::bail!("it holds no step");
    }
    for step in steps {
        let f = |path: &[&str]| path.iter().try_fold(step, |v, k| v.get(*k)).and_then(Value::as_f64);
        let rate = f(&["spec", "rate"]).context("a step has no spec.rate")?;
        let window = step.get("window_s").and_then(Value::as_array).context("a step has no window_s")?;
        let end = |i: usize| window.get(i).and_then(Value::as_f64).context("a step's window_s is not [start, end]");
        let window = (end(0)?, end(1)?);
        let disk = step.get("disk").filter(|d| !d.is_null()).map(|_| DiskDelta {
            seconds: f(&["disk", "seconds"]).unwrap_or(0.0),
            reads: f(&["disk", "reads"]).unwrap_or(0.0),
            joined: f(&["disk", "joined"]).unwrap_or(0.0),
            bytes: f(&["disk", "bytes"]).unwrap_or(0.0),
            busy_s: f(&["disk", "busy_s"]).unwrap_or(0.0),
        });
        runs.push(Run {
            rate: Some(rate),
            // A step without a measured session has no failure figure; the
            // driver refuses such steps, so this is only an old or edited file.
            failure_pct: f(&["failure_percent"]).context("a step has no failure_percent")?,
            throughput_mbs: f(&["throughput_mb_s"]).context("a step has no throughput_mb_s")?,
            sample_ci95_mbs: step.get("samples_mb_s").and_then(|s| s.get(1)).and_then(Value::as_f64),
            disk,
            // CPU over the step's window (steps recorded since it was sampled).
            server_cpu_s: f(&["server_cpu_s"]),
            daemon_cpu_s: f(&["daemon_cpu_s"]),
            window_s: Some(window),
            prefetch: step.get("prefetch").and_then(|p| serde_json::from_value(p.clone()).ok()),
            lru: step.get("lru").and_then(|p| serde_json::from_value(p.clone()).ok()),
            cache_settled: step.get("cache_settled").and_then(Value::as_bool),
            host_cpus_busy: f(&["host_cpus_busy"]),
            reply_late_ms: f(&["disk", "reply_late_ms"]),
            host_cpu_wait: f(&["host_cpu_wait"]),
            host_cpus_stolen: f(&["host_cpus_stolen"]),
            global_reclaim_pages: f(&["global_reclaim_pages"]),
            server_threads_blocked: f(&["server_threads_blocked"]),
            daemon_reading: f(&["daemon_reading"]),
            drift: Some(WindowDrift {
                active_sessions: f(&["active_sessions", "first_third"]).zip(f(&["active_sessions", "last_third"])),
                delivered_mb_s: thirds(&delivered, window),
                disk_mb_s: thirds(&disk_read, window),
            })
            .filter(|d| *d != WindowDrift::default()),
            send_buffers: send_buffers_within(&sockets, window),
            shim_window: shim_within(&shim, window),
            first_byte: step.get("first_byte").and_then(|v| serde_json::from_value(v.clone()).ok()).unwrap_or_default(),
            ..base.clone()
        });
    }
    Ok(runs)
}

impl Results {
    pub fn load(dir: &Path) -> anyhow::Result<Results> {
        let experiment = read_json(&dir.join("experiment.json"))
            .with_context(|| format!("{} does not look like a results directory of vidbench run", dir.display()))?;
        if !experiment.is_object() {
            anyhow::bail!("{} is not an experiment (a JSON object)", dir.join("experiment.json").display());
        }
        let machine = read_optional_json(&dir.join("machine.json"))?.unwrap_or(Value::Null);
        let order: Vec<String> = experiment
            .get("configs")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|c| c.get("name")?.as_str().map(String::from)).collect())
            .unwrap_or_default();
        let mut runs = Vec::new();
        let mut incomplete = Vec::new();
        let runs_dir = dir.join("runs");
        let mut config_dirs: Vec<PathBuf> = std::fs::read_dir(&runs_dir)
            .with_context(|| format!("cannot list {}", runs_dir.display()))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        config_dirs.sort();
        let mut unfinished = Vec::new();
        for cdir in config_dirs {
            let name = |p: &Path| p.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
            let part = |p: &Path| name(p).starts_with("steps-part") && p.join("DONE").exists();
            if std::fs::read_dir(&cdir)?.flatten().any(|e| part(&e.path())) && !cdir.join("steps-rep0/DONE").exists() {
                unfinished.push(name(&cdir));
            }
            let mut run_dirs: Vec<PathBuf> = std::fs::read_dir(&cdir)?.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
            run_dirs.sort();
            for rdir in run_dirs {
                if rdir.join("DONE").exists() {
                    runs.extend(load_run(&rdir).with_context(|| format!("run {}", rdir.display()))?);
                } else {
                    incomplete.push(rdir);
                }
            }
        }
        // A stepped run's steps at one rate are its repetitions, in the
        // order played: the parts of a resumed search (`steps-partNN`) sort
        // before the run that went on after them (`steps-rep0`). Separate
        // runs keep the repetition their run.json gives.
        let stepped = |r: &Run| r.dir.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("steps-"));
        let mut played: BTreeMap<(String, RateKey), u32> = BTreeMap::new();
        for r in runs.iter_mut().filter(|r| stepped(r)) {
            let n = played.entry((r.config.clone(), RateKey(r.rate.unwrap_or(0.0)))).or_insert(0);
            r.repetition = *n;
            *n += 1;
        }
        Ok(Results { dir: dir.to_owned(), experiment, machine, order, runs, incomplete, unfinished })
    }

    /// Configuration names with runs, in experiment order.
    pub fn configs(&self) -> Vec<String> {
        let mut names: Vec<String> = self.order.iter().filter(|n| self.runs.iter().any(|r| &r.config == *n)).cloned().collect();
        for r in &self.runs {
            if !names.contains(&r.config) {
                names.push(r.config.clone());
            }
        }
        names
    }

    pub fn runs_of<'a>(&'a self, config: &'a str) -> impl Iterator<Item = &'a Run> + 'a {
        self.runs.iter().filter(move |r| r.config == config)
    }

    /// The configuration's JSON (from any of its runs).
    pub fn config_json(&self, config: &str) -> Value {
        self.runs_of(config).next().map(|r| r.config_json.clone()).unwrap_or(Value::Null)
    }

    pub fn label(&self, config: &str) -> String {
        self.config_json(config).get("label").and_then(Value::as_str).unwrap_or(config).to_string()
    }

    /// A search's own answer (`runs/CONFIG/search.json`): the maximum
    /// failure-free rate and the lowest failing rate above it, when the
    /// driver searched. Its rule (repetitions on both sides) is stricter
    /// than "the highest rate whose mean passed", so it wins where present.
    pub fn search_answer(&self, config: &str) -> Option<(Option<f64>, Option<f64>)> {
        let text = std::fs::read_to_string(self.dir.join("runs").join(config).join("search.json")).ok()?;
        let v: Value = serde_json::from_str(&text).ok()?;
        Some((v.get("max_rate").and_then(Value::as_f64), v.get("first_failing_rate").and_then(Value::as_f64)))
    }

    /// The failure threshold of the configuration's rate plan (default 0.3 %).
    pub fn threshold(&self, config: &str) -> f64 {
        self.config_json(config).get("rates").and_then(|r| r.get("threshold_pct")).and_then(Value::as_f64).unwrap_or(0.3)
    }

    /// Runs of a configuration grouped by rate, ascending.
    pub fn by_rate<'a>(&'a self, config: &str) -> BTreeMap<RateKey, Vec<&'a Run>> {
        let mut m: BTreeMap<RateKey, Vec<&'a Run>> = BTreeMap::new();
        for r in self.runs.iter().filter(|r| r.config == config) {
            m.entry(RateKey(r.rate.unwrap_or(0.0))).or_default().push(r);
        }
        m
    }
}

/// A rate usable as a map key (rates are rounded to 1/100 by the driver).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateKey(pub f64);
impl Eq for RateKey {}
impl PartialOrd for RateKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for RateKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}
