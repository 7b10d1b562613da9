//! The steady-state protocol's plumbing: the load client plays steps on its
//! own thread while the search (or a fixed list of rates) decides them on the
//! driver's, and a sampler records the disk and the memory cgroup on the load
//! client's clock, so that every figure of a step is over its window.
//!
//! - [`StepChannel`] is the driver's end: `step(rate)` asks the load thread to
//!   play a step and waits for its result; it is a [`Prober`], so the same
//!   search code decides steps of one run or separate runs.
//! - [`ChannelPlan`] is the load thread's end (a [`StepPlan`]).
//! - [`sample`] writes `samples.csv` every sample interval and keeps the
//!   rows in a [`SampleLog`], from which the gate judges whether the page
//!   cache's LRU lists have settled ([`lru_settled`]).
//! - [`StepRecord`] joins a step's load figures with the disk's, the
//!   memory's and (under Libception) the daemon's prefetching over the same
//!   window (a row of the run's `steps.json`).

use crate::cgroup::Role;
use crate::driver::RunChildren;
use crate::experiment::{SteadySection, SAMPLE_INTERVAL_S};
use crate::interrupt;
use crate::search::{Outcome, Prober};
use anyhow::Context;
use libception_proto::shim_stats::Totals;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use vidbench_load::{StepPlan, StepResult, StepSpec};

/// The load thread's end of the channel.
pub struct ChannelPlan {
    results: Sender<StepResult>,
    next: Receiver<Option<StepSpec>>,
    /// The sampler's rows and `run.steady.lru_pct`, when the gate waits
    /// for the LRU lists.
    lru_gate: Option<(SampleLog, f64)>,
}

impl StepPlan for ChannelPlan {
    fn next(&mut self, finished: Option<&StepResult>) -> Option<StepSpec> {
        if let Some(f) = finished {
            if self.results.send(f.clone()).is_err() {
                return None;
            }
        }
        // A closed channel (the driver stopped or failed) ends the run.
        self.next.recv().ok().flatten()
    }

    fn cache_settled(&mut self, t_s: f64) -> Option<bool> {
        let (log, pct) = self.lru_gate.as_ref()?;
        lru_settled(&log.lock().unwrap_or_else(|e| e.into_inner()), t_s, *pct)
    }
}

/// The sampler's rows so far, shared with the gate.
pub type SampleLog = Arc<Mutex<Vec<Sample>>>;

/// How far back the LRU gate looks: the lists must have held still this long.
pub const LRU_SPAN_S: f64 = 120.0;

/// How many seconds of samples the LRU gate averages before it takes a
/// list's range: the kernel moves pages between the lists in batches, and at
/// 2 GiB the settled lists jump by 2.5-5 % of the file pages from one 5 s
/// sample to the next (50-100 MB, about what they jump at 8 GiB), which a
/// range of raw samples read as motion for good: the 2 GiB cells of paper 001
/// waited out `max_settle_s` at every step. Averaged over 30 s, the lists of
/// the recorded runs at 2 and 8 GiB, once first settled, moved more than 2 %
/// in two minutes in at most 2 % of the checks, while the lists' settling (a
/// trend over minutes) is kept (docs/run.md, "The page cache's gate").
pub const LRU_SMOOTH_S: f64 = 30.0;

/// Whether the memory cgroup's file LRU lists have settled at `t_s`: over
/// the [`LRU_SPAN_S`] seconds of `samples` that end one sample interval
/// before `t_s` (the sample at `t_s` itself may or may not be taken yet when
/// the gate asks, so it is never used), neither the active nor the inactive
/// list's [`LRU_SMOOTH_S`] moving average moved (maximum minus minimum) by
/// more than `pct` % of the file pages on both. The averages' centres are
/// 95 s apart at most, so a steady drift of p % in two minutes shows as
/// about 0.8 p %. The cache the warm-up fills starts all inactive, and under
/// kernel readahead the lists reach their steady split only 600-1,150 s in
/// (docs/run.md); a window opened before measures a cache whose inactive
/// list, the one eviction scans, is several times its steady size. `None`
/// when the samples carry no LRU figures (a kernel without them): the gate
/// cannot judge, and goes by the sessions alone. `Some(false)` unless the
/// span is sampled from end to end without a missing sample (the start of a
/// run, or memory.stat unreadable for a while).
pub fn lru_settled(samples: &[Sample], t_s: f64, pct: f64) -> Option<bool> {
    let lists = |s: &Sample| s.active_file_bytes.zip(s.inactive_file_bytes);
    if !samples.iter().any(|s| lists(s).is_some()) {
        return None;
    }
    let end = t_s - SAMPLE_INTERVAL_S;
    let start = end - LRU_SPAN_S;
    let half = SAMPLE_INTERVAL_S / 2.0;
    let span: Vec<(f64, f64, f64)> =
        samples.iter().filter(|s| s.t_s >= start - half && s.t_s <= end + half).filter_map(|s| lists(s).map(|(a, i)| (s.t_s, a, i))).collect();
    let covered = span.first().is_some_and(|f| f.0 <= start + half)
        && span.last().is_some_and(|l| l.0 >= end - half)
        && span.windows(2).all(|w| w[1].0 - w[0].0 <= SAMPLE_INTERVAL_S + half);
    if !covered {
        return Some(false);
    }
    // A run of `width` consecutive samples: LRU_SMOOTH_S seconds at the
    // sample interval (a little more where a sample came late; the span
    // has no longer gap). The averages' centres span LRU_SPAN_S less
    // LRU_SMOOTH_S plus one sample interval (95 s).
    let width = ((LRU_SMOOTH_S / SAMPLE_INTERVAL_S).round() as usize).clamp(1, span.len());
    let range = |list: fn(&(f64, f64, f64)) -> f64| {
        let (lo, hi) = span
            .windows(width)
            .map(|run| run.iter().map(list).sum::<f64>() / width as f64)
            .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
        hi - lo
    };
    let file = span.iter().map(|(_, a, i)| a + i).sum::<f64>() / span.len() as f64;
    let moved = range(|p| p.1).max(range(|p| p.2));
    Some(moved <= pct / 100.0 * file)
}

/// The driver's end of the channel.
pub struct StepChannel {
    next: Sender<Option<StepSpec>>,
    results: Receiver<StepResult>,
    timing: SteadySection,
    played: Vec<StepResult>,
    /// Whether the load thread is still running (checked while waiting).
    load_running: Box<dyn Fn() -> bool + Send>,
    /// Told every step's result as it arrives (progress output).
    report: Box<dyn Fn(&StepResult)>,
}

/// A connected pair of ends; the plan's gate reads `log` when the timing
/// has an LRU gate (`lru_pct`).
pub fn channel(
    timing: SteadySection,
    log: SampleLog,
    load_running: Box<dyn Fn() -> bool + Send>,
    report: Box<dyn Fn(&StepResult)>,
) -> (StepChannel, ChannelPlan) {
    let (next_tx, next_rx) = std::sync::mpsc::channel();
    let (res_tx, res_rx) = std::sync::mpsc::channel();
    let lru_gate = timing.lru_pct.map(|pct| (log, pct));
    (
        StepChannel { next: next_tx, results: res_rx, timing, played: Vec::new(), load_running, report },
        ChannelPlan { results: res_tx, next: next_rx, lru_gate },
    )
}

impl StepChannel {
    /// Plays one step at `rate` (the first with the ramp, later ones with the
    /// settling time, none when the rate is the previous step's: its hold
    /// already played at that rate) and returns its result.
    pub fn step(&mut self, rate: f64) -> anyhow::Result<StepResult> {
        let t = &self.timing;
        let settle_s = match self.played.last() {
            None => t.ramp_s,
            Some(prev) if (prev.spec.rate - rate).abs() < 1e-9 => 0.0,
            Some(_) => t.settle_s,
        };
        let spec = StepSpec {
            rate,
            settle_s,
            measure_s: t.measure_s,
            hold_s: t.hold_s,
            gate_pct: t.gate_pct.unwrap_or(0.0),
            max_settle_s: t.max_settle_s.unwrap_or(0.0),
            // A step at the previous rate continues its steady state.
            join_s: if settle_s > 0.0 { t.join_s.unwrap_or(0.0) } else { 0.0 },
        };
        self.next.send(Some(spec)).map_err(|_| anyhow::anyhow!("the load client stopped before step {}", self.played.len() + 1))?;
        loop {
            interrupt::check()?;
            match self.results.recv_timeout(Duration::from_millis(200)) {
                Ok(r) => {
                    (self.report)(&r);
                    self.played.push(r.clone());
                    return Ok(r);
                }
                Err(RecvTimeoutError::Timeout) if (self.load_running)() => {}
                Err(_) => anyhow::bail!("the load client stopped during step {} (its error follows when the run ends)", self.played.len() + 1),
            }
        }
    }

    /// Tells the load thread that there are no more steps.
    pub fn finish(self) -> Vec<StepResult> {
        let _ = self.next.send(None);
        self.played
    }
}

impl Prober for StepChannel {
    fn probe(&mut self, rate: f64, _repetition: u32) -> anyhow::Result<Outcome> {
        let r = self.step(rate)?;
        outcome(&r)
    }
}

/// A step's result as the search sees it.
pub fn outcome(r: &StepResult) -> anyhow::Result<Outcome> {
    let failure_pct = r.failure_percent.with_context(|| {
        format!(
            "step {} at {:.2} sessions/s: no session arrived in its {} s window; lengthen run.steady.measure_s",
            r.index + 1,
            r.spec.rate,
            r.spec.measure_s
        )
    })?;
    Ok(Outcome { failure_pct, throughput_mbs: r.throughput_mb_s })
}

/// One row of `samples.csv`: counters at `t_s` seconds on the load's clock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub t_s: f64,
    /// The drive's clock at `t_s` (`uptime_s` of `vidbench disk stat`): the
    /// disk trace's times minus this, plus `t_s`, put a request on the load's
    /// clock, so a step's window selects its requests. Absent in files from
    /// before this column.
    #[serde(default)]
    pub disk_uptime_s: Option<f64>,
    /// The emulated drive's own counters (`vidbench disk stat`).
    pub disk_reads: Option<f64>,
    pub disk_bytes: Option<f64>,
    pub disk_busy_s: Option<f64>,
    /// Reads the drive joined to the command before them (block mode above
    /// the loop device's max_sectors_kb); absent in files from before.
    #[serde(default)]
    pub disk_joined: Option<f64>,
    /// Seconds the drive's replies left after their modelled completion,
    /// summed (`reply_late_ns`): a host that starves the drive's process
    /// (another experiment, a build) shows here. Absent in files from before.
    #[serde(default)]
    pub disk_reply_late_s: Option<f64>,
    /// The loop device's `/sys/block/*/stat` (block mode).
    pub block_reads: Option<f64>,
    pub block_read_sectors: Option<f64>,
    pub block_io_ticks_ms: Option<f64>,
    /// The run's memory cgroup: usage and limit hits so far.
    pub memory_bytes: Option<f64>,
    pub memory_limit_hits: Option<f64>,
    /// The cgroup's file LRU lists (bytes on the active and the inactive
    /// list) and, cumulative, bytes of file pages read again after being
    /// evicted (`workingset_refault_file` times the page size). Absent in
    /// files from before these columns.
    #[serde(default)]
    pub active_file_bytes: Option<f64>,
    #[serde(default)]
    pub inactive_file_bytes: Option<f64>,
    #[serde(default)]
    pub refault_file_bytes: Option<f64>,
    /// Kernel memory charged to the cgroup (slab, page-cache tree nodes and
    /// shadow entries): what grows beside the page cache as a run ages.
    /// Absent in files from before this column.
    #[serde(default)]
    pub kernel_bytes: Option<f64>,
    /// CPU seconds so far of the server's and the daemon's cgroups (the
    /// daemon's absent without one). Absent in files from before these columns.
    #[serde(default)]
    pub server_cpu_s: Option<f64>,
    #[serde(default)]
    pub daemon_cpu_s: Option<f64>,
    /// CPU seconds the whole machine has been busy, all CPUs together
    /// (`/proc/stat`: everything but idle and iowait), so a window shows what
    /// else ran beside the run. Absent in files from before this column.
    #[serde(default)]
    pub host_cpu_busy_s: Option<f64>,
    /// Seconds during which some runnable task of the machine waited for a
    /// CPU (`/proc/pressure/cpu`, `some` total), and CPU seconds the
    /// hypervisor took (`/proc/stat` steal): whether the CPUs were short,
    /// not only busy. Absent in files from before these columns and where
    /// the kernel has no pressure information.
    #[serde(default)]
    pub host_cpu_wait_s: Option<f64>,
    #[serde(default)]
    pub host_cpu_steal_s: Option<f64>,
    /// Pages the kernel's global reclaim has scanned since boot
    /// (`/proc/vmstat` pgscan_kswapd + pgscan_direct). Where it grows in a
    /// window, memory outside the run's limit pressed on its page cache
    /// (another experiment, or work beside it outside `scripts/contained`).
    /// Absent in files from before this column.
    #[serde(default)]
    pub global_reclaim_pages: Option<f64>,
    /// The daemon's prefetch size in force (the adaptive controller's first
    /// queue, or the fixed size) and, cumulative, what became of the bytes it
    /// prefetched (paper 001 Table 1: read, used, evicted before use, wasted,
    /// re-read after eviction); none without a daemon.
    pub prefetch_bytes: Option<f64>,
    pub prefetch_read_bytes: Option<f64>,
    pub prefetch_used_bytes: Option<f64>,
    pub prefetch_evicted_bytes: Option<f64>,
    pub prefetch_wasted_bytes: Option<f64>,
    pub prefetch_reread_bytes: Option<f64>,
    /// Cumulative, as the bytes: prefetched ranges found evicted before use,
    /// and the sum of their estimated eviction times (read to eviction,
    /// seconds; paper 001 Table 1). Absent in files from before these columns.
    #[serde(default)]
    pub prefetch_evictions: Option<f64>,
    #[serde(default)]
    pub prefetch_eviction_time_sum_s: Option<f64>,
    /// Cumulative, under a bitrate scale: prefetches scaled down for slower
    /// streams and their bytes (their mean is the size the slower class got),
    /// and those at the size in force. Absent in files from before these
    /// columns, and 0 without a scale.
    #[serde(default)]
    pub prefetch_scaled: Option<f64>,
    #[serde(default)]
    pub prefetch_scaled_bytes: Option<f64>,
    #[serde(default)]
    pub prefetch_full_size: Option<f64>,
    /// Cumulative seconds the server's threads spent blocked on the
    /// daemon's reads (`totals.read_wait_ns`): none without a daemon, and in
    /// files from before this column.
    #[serde(default)]
    pub daemon_read_wait_s: Option<f64>,
    /// Cumulative seconds the daemon's workers spent reading (its disks'
    /// `busy_ns` summed: the residency check of a read's prefix and its
    /// preads, through the whole storage stack), against the drive's own
    /// busy time (`disk_busy_s`). Absent as the column above.
    #[serde(default)]
    pub daemon_read_busy_s: Option<f64>,
}

/// The prefetch fields of a sample from `libception stat --json`.
fn prefetch_fields(stats: &Value, row: &mut Sample) {
    let size = stats
        .pointer("/controller/queues/0/prefetch_bytes")
        .or_else(|| stats.pointer("/daemon/prefetch_bytes"))
        .and_then(Value::as_f64);
    let usage = stats.get("prefetch_usage").and_then(Value::as_array);
    let total = |key: &str| usage.map(|u| u.iter().filter_map(|w| w.pointer(&format!("/usage/{key}")).and_then(Value::as_f64)).sum());
    row.prefetch_bytes = size;
    row.prefetch_read_bytes = total("read_bytes");
    row.prefetch_used_bytes = total("used_bytes");
    row.prefetch_evicted_bytes = total("evicted_bytes");
    row.prefetch_wasted_bytes = total("wasted_bytes");
    row.prefetch_reread_bytes = total("reread_bytes");
    row.prefetch_evictions = total("evictions");
    row.prefetch_eviction_time_sum_s = total("eviction_time_estimate_sum_s");
    row.prefetch_scaled = total("scaled_prefetches");
    row.prefetch_scaled_bytes = total("scaled_prefetch_bytes");
    row.prefetch_full_size = total("full_prefetches");
    row.daemon_read_wait_s = stats.pointer("/totals/read_wait_ns").and_then(Value::as_f64).map(|ns| ns / 1e9);
    row.daemon_read_busy_s = stats
        .get("disks")
        .and_then(Value::as_array)
        .map(|disks| disks.iter().filter_map(|d| d.get("busy_ns").and_then(Value::as_f64)).sum::<f64>() / 1e9);
}

impl Sample {
    /// The row at `t_s`, and the daemon's stats document when one was read
    /// with the load time it was read at (`epoch` being the load's start).
    fn read(t_s: f64, epoch: Instant, children: &RunChildren<'_>) -> (Sample, Option<(f64, Value)>) {
        let stats = children.disk.stats().unwrap_or(Value::Null);
        let at = |path: &[&str]| path.iter().try_fold(&stats, |v, k| v.get(*k)).and_then(Value::as_f64);
        // A sample with no memory figures rather than no sample (as for the disk).
        let memory = children.cgroup.memory_stats().unwrap_or(Value::Null);
        let cpu = host_cpu_times();
        let mut row = Sample {
            t_s,
            disk_uptime_s: at(&["uptime_s"]),
            disk_reads: at(&["total", "counters", "reads"]),
            disk_bytes: at(&["total", "counters", "bytes"]),
            disk_busy_s: at(&["total", "counters", "busy_ns"]).map(|ns| ns / 1e9),
            disk_joined: at(&["total", "counters", "joined_reads"]),
            disk_reply_late_s: at(&["total", "counters", "reply_late_ns"]).map(|ns| ns / 1e9),
            block_reads: at(&["block_layer", "counters", "reads"]),
            block_read_sectors: at(&["block_layer", "counters", "read_sectors"]),
            block_io_ticks_ms: at(&["block_layer", "counters", "io_ticks_ms"]),
            memory_bytes: memory.get("usage_in_bytes").and_then(Value::as_f64),
            memory_limit_hits: memory.get("failcnt").and_then(Value::as_f64),
            active_file_bytes: memory.pointer("/stat/active_file").and_then(Value::as_f64),
            inactive_file_bytes: memory.pointer("/stat/inactive_file").and_then(Value::as_f64),
            refault_file_bytes: memory.pointer("/stat/workingset_refault_file").and_then(Value::as_f64).map(|pages| pages * page_size()),
            kernel_bytes: memory.get("kernel_bytes").and_then(Value::as_f64),
            // As for the memory: a sample without CPU rather than no sample.
            server_cpu_s: children.cgroup.cpu_usage(Role::Server).ok().flatten(),
            host_cpu_busy_s: cpu.map(|c| c.busy_s),
            host_cpu_wait_s: host_cpu_wait_s(),
            host_cpu_steal_s: cpu.map(|c| c.steal_s),
            global_reclaim_pages: crate::sharing::global_reclaim_scanned().map(|pages| pages as f64),
            ..Sample::default()
        };
        let mut daemon_stats = None;
        if let Some(daemon) = children.daemon {
            row.daemon_cpu_s = children.cgroup.cpu_usage(Role::Daemon).ok().flatten();
            // As for the disk: a sample without these figures rather than
            // none (also while a chaos run's daemon is dead).
            if let Some((at_s, v)) = daemon_stats_at(epoch, daemon) {
                prefetch_fields(&v, &mut row);
                daemon_stats = Some((at_s, v));
            }
        }
        (row, daemon_stats)
    }
}

/// The daemon's stats document and the load time it was read at (the
/// middle of the request: a sample may be late, and the controller's
/// interval ends are put on the load's clock from this time).
fn daemon_stats_at(epoch: Instant, daemon: &Mutex<crate::daemon::Daemon>) -> Option<(f64, Value)> {
    let before = epoch.elapsed().as_secs_f64();
    let stats = daemon.lock().unwrap_or_else(|e| e.into_inner()).stats().ok()?;
    Some(((before + epoch.elapsed().as_secs_f64()) / 2.0, stats))
}

fn page_size() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 { size as f64 } else { 4096.0 }
}

/// How often the server's send buffers are looked at (`sockets.jsonl`): one
/// `ss` over some hundred connections takes milliseconds; six snapshots
/// fall in a 90 s window.
const SOCKETS_EVERY_S: f64 = 15.0;

/// Samples every sample interval from `epoch` until `stop`, writing each row
/// to `path` and appending it to `log` as it is taken; every
/// `SOCKETS_EVERY_S` appends the send buffers of the server's connections
/// on `port` (count, min, median, max bytes) as a line of `sockets.jsonl`
/// beside `path`, for the report's windows; where the server's shim writes
/// statistics (`shim/` beside `path`), every sample appends their sum over
/// the server's processes (`Totals`) to `shim.jsonl`, so that a window's
/// calls and latencies are the difference of the lines at its edges; an
/// adaptive controller's intervals go to `controller.csv` beside it as they
/// close ([`crate::controller_log`]).
pub fn sample(epoch: Instant, children: &RunChildren<'_>, port: u16, path: &Path, log: &SampleLog, stop: &AtomicBool) -> anyhow::Result<()> {
    let mut out = csv::Writer::from_path(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut controller = crate::controller_log::ControllerLog::new(&path.with_file_name("controller.csv"));
    let mut k = 0u32;
    // Samples between two looks at the send buffers.
    let sockets_every = (SOCKETS_EVERY_S / SAMPLE_INTERVAL_S).round().max(1.0) as u32;
    // The shim's statistics files, rewritten every second (driver::shim_env),
    // and those found unreadable (warned about once each).
    let shim_dir = path.with_file_name("shim");
    let mut warned = std::collections::HashSet::new();
    while !stop.load(Ordering::Relaxed) {
        let at = epoch + Duration::from_secs_f64(SAMPLE_INTERVAL_S) * k;
        let now = Instant::now();
        if now < at {
            std::thread::sleep((at - now).min(Duration::from_millis(200)));
            continue;
        }
        let (row, daemon_stats) = Sample::read(k as f64 * SAMPLE_INTERVAL_S, epoch, children);
        if let Some((at_s, stats)) = &daemon_stats {
            controller.record(*at_s, stats)?;
        }
        out.serialize(row).and_then(|_| out.flush().map_err(Into::into)).with_context(|| format!("cannot write {}", path.display()))?;
        log.lock().unwrap_or_else(|e| e.into_inner()).push(row);
        if shim_dir.is_dir() {
            let (totals, skipped) = Totals::read_dir(&shim_dir);
            for s in skipped.into_iter().filter(|s| warned.insert(s.path.clone())) {
                tracing::warn!("{}: left out of shim.jsonl: {}", s.path.display(), s.reason);
            }
            append_line(&path.with_file_name("shim.jsonl"), &serde_json::json!({"t_s": row.t_s, "totals": totals}))?;
        }
        if k > 0 && k.is_multiple_of(sockets_every) {
            if let Some(buffers) = crate::setup::send_buffers(port) {
                append_line(&path.with_file_name("sockets.jsonl"), &serde_json::json!({"t_s": row.t_s, "send_buffer_bytes": buffers}))?;
            }
        }
        k += 1;
    }
    // The intervals closed since the last sample, before the daemon stops.
    if let Some((at_s, stats)) = children.daemon.and_then(|d| daemon_stats_at(epoch, d)) {
        controller.record(at_s, &stats)?;
    }
    Ok(())
}

/// Appends `value` as one line of the JSON-lines file at `file`.
fn append_line(file: &Path, value: &Value) -> anyhow::Result<()> {
    let line = value.to_string() + "\n";
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()))
        .with_context(|| format!("cannot write {}", file.display()))
}

/// What the disk did over a window, from the samples at its edges.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DiskWindow {
    pub seconds: f64,
    pub reads: f64,
    /// Of `reads`, those joined to the command before them: the drive's
    /// transactions are `reads - joined`.
    #[serde(default)]
    pub joined: f64,
    pub bytes: f64,
    pub busy_s: f64,
    pub mb_s: f64,
    pub block_reads: Option<f64>,
    pub block_mb_s: Option<f64>,
    /// Mean lateness of the drive's replies in the window, ms per read
    /// (none in records from before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_late_ms: Option<f64>,
}

/// A step of a steady-state run: the load's figures and the disk's and the
/// memory's over the same window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    #[serde(flatten)]
    pub load: StepResult,
    pub disk: Option<DiskWindow>,
    /// Bytes the drive read per byte delivered to clients, in the window.
    pub disk_bytes_per_delivered_byte: Option<f64>,
    /// Mean memory cgroup usage over the window, and limit hits in it.
    pub memory_mean_bytes: Option<f64>,
    pub memory_limit_hits: Option<f64>,
    /// The daemon's prefetching over the window (runs under Libception).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefetch: Option<PrefetchWindow>,
    /// The page cache's LRU lists over the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lru: Option<LruWindow>,
    /// CPU seconds the server's and the daemon's cgroups used in the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemon_cpu_s: Option<f64>,
    /// CPUs the whole machine kept busy on average in the window (what ran
    /// beside the run included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cpus_busy: Option<f64>,
    /// Share of the window during which some runnable task of the machine
    /// waited for a CPU (0-1), and the CPUs the hypervisor took on average.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cpu_wait: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cpus_stolen: Option<f64>,
    /// Pages the kernel's global reclaim scanned in the window: above 0, the
    /// run's page cache was not its own limit's alone to decide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_reclaim_pages: Option<f64>,
    /// Under Libception: the server's threads blocked on the daemon's reads,
    /// on average over the window (from the daemon's `read_wait_ns`). Of a
    /// server with W single-threaded workers, that many of the W serve no
    /// connection meanwhile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_threads_blocked: Option<f64>,
    /// Under Libception: the share of the window (0-1) the daemon's workers
    /// spent reading. One worker serializes a disk's reads, so near 1 it is
    /// the limit, whatever the drive's own busy share (`disk.busy_s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemon_reading: Option<f64>,
}

/// The memory cgroup's file LRU lists over a step's window: mean bytes on
/// the active and the inactive list, and MB/s of file pages read again
/// after eviction (of what the drive read, the share that had been in the
/// cache before). A window opened before the lists have reached their
/// steady split (a page cache filled by the warm-up starts all inactive)
/// shows it here.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LruWindow {
    pub active_file_mean_bytes: f64,
    pub inactive_file_mean_bytes: f64,
    pub refault_mb_s: Option<f64>,
    /// Mean kernel memory charged to the cgroup over the window (absent
    /// where the kernel does not account it apart, and in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_mean_bytes: Option<f64>,
}

/// Paper 001 Table 1 over a step's window: the prefetch size in force
/// (its mean over the window's samples, and its value at the end) and MB/s
/// of prefetched bytes read, used, evicted before use, wasted and re-read.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PrefetchWindow {
    pub size_mean_bytes: f64,
    pub size_end_bytes: f64,
    pub read_mb_s: Option<f64>,
    pub used_mb_s: Option<f64>,
    pub evicted_mb_s: Option<f64>,
    pub wasted_mb_s: Option<f64>,
    pub reread_mb_s: Option<f64>,
    /// Mean estimated eviction time of the ranges found evicted in the
    /// window, seconds (none when none was).
    #[serde(default)]
    pub eviction_time_s: Option<f64>,
    /// Under a bitrate scale: the share of the window's prefetches scaled
    /// down for slower streams, and their mean size (none without a scale
    /// or with nothing scaled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaled_share: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaled_mean_bytes: Option<f64>,
}

impl StepRecord {
    pub fn new(load: StepResult, samples: &[Sample]) -> StepRecord {
        let (a, b) = load.window_s;
        let edge = |t: f64| samples.iter().find(|s| (s.t_s - t).abs() < SAMPLE_INTERVAL_S / 2.0);
        let (first, last) = (edge(a), edge(b));
        let delta = |f: fn(&Sample) -> Option<f64>| Some(f(last?)? - f(first?)?);
        let seconds = b - a;
        let disk = delta(|s| s.disk_bytes).map(|bytes| DiskWindow {
            seconds,
            reads: delta(|s| s.disk_reads).unwrap_or(0.0),
            joined: delta(|s| s.disk_joined).unwrap_or(0.0),
            bytes,
            busy_s: delta(|s| s.disk_busy_s).unwrap_or(0.0),
            mb_s: bytes / 1e6 / seconds,
            block_reads: delta(|s| s.block_reads),
            block_mb_s: delta(|s| s.block_read_sectors).map(|sectors| sectors * 512.0 / 1e6 / seconds),
            reply_late_ms: delta(|s| s.disk_reply_late_s).zip(delta(|s| s.disk_reads)).filter(|(_, n)| *n > 0.0).map(|(late, n)| late * 1e3 / n),
        });
        // The mean of a column over the samples inside the window.
        let mean = |f: fn(&Sample) -> Option<f64>| {
            let v: Vec<f64> = samples.iter().filter(|s| s.t_s >= a - 1e-6 && s.t_s <= b + 1e-6).filter_map(f).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        let delivered = load.throughput_mb_s;
        let mb_s = |f: fn(&Sample) -> Option<f64>| delta(f).map(|bytes| bytes / 1e6 / seconds);
        let prefetch = last.and_then(|l| l.prefetch_bytes).zip(mean(|s| s.prefetch_bytes)).map(|(end, size_mean)| PrefetchWindow {
            size_mean_bytes: size_mean,
            size_end_bytes: end,
            read_mb_s: mb_s(|s| s.prefetch_read_bytes),
            used_mb_s: mb_s(|s| s.prefetch_used_bytes),
            evicted_mb_s: mb_s(|s| s.prefetch_evicted_bytes),
            wasted_mb_s: mb_s(|s| s.prefetch_wasted_bytes),
            reread_mb_s: mb_s(|s| s.prefetch_reread_bytes),
            eviction_time_s: delta(|s| s.prefetch_eviction_time_sum_s).zip(delta(|s| s.prefetch_evictions)).filter(|(_, n)| *n > 0.0).map(|(sum, n)| sum / n),
            scaled_share: delta(|s| s.prefetch_scaled)
                .zip(delta(|s| s.prefetch_full_size))
                .filter(|(scaled, full)| scaled + full > 0.0)
                .map(|(scaled, full)| scaled / (scaled + full)),
            scaled_mean_bytes: delta(|s| s.prefetch_scaled_bytes).zip(delta(|s| s.prefetch_scaled)).filter(|(_, n)| *n > 0.0).map(|(b, n)| b / n),
        });
        let lru = match (mean(|s| s.active_file_bytes), mean(|s| s.inactive_file_bytes)) {
            (Some(active), Some(inactive)) => Some(LruWindow {
                active_file_mean_bytes: active,
                inactive_file_mean_bytes: inactive,
                refault_mb_s: mb_s(|s| s.refault_file_bytes),
                kernel_mean_bytes: mean(|s| s.kernel_bytes),
            }),
            _ => None,
        };
        StepRecord {
            lru,
            prefetch,
            server_cpu_s: delta(|s| s.server_cpu_s),
            daemon_cpu_s: delta(|s| s.daemon_cpu_s),
            host_cpus_busy: delta(|s| s.host_cpu_busy_s).map(|busy| busy / seconds),
            host_cpu_wait: delta(|s| s.host_cpu_wait_s).map(|wait| wait / seconds),
            host_cpus_stolen: delta(|s| s.host_cpu_steal_s).map(|steal| steal / seconds),
            global_reclaim_pages: delta(|s| s.global_reclaim_pages),
            server_threads_blocked: delta(|s| s.daemon_read_wait_s).map(|wait| wait / seconds),
            daemon_reading: delta(|s| s.daemon_read_busy_s).map(|busy| busy / seconds),
            disk_bytes_per_delivered_byte: disk.filter(|_| delivered > 0.0).map(|d| d.mb_s / delivered),
            disk,
            memory_mean_bytes: mean(|s| s.memory_bytes),
            memory_limit_hits: delta(|s| s.memory_limit_hits),
            load,
        }
    }
}

/// CPU seconds of the whole machine since boot, all CPUs together, from
/// the first line of `/proc/stat` (clock ticks of `sysconf(_SC_CLK_TCK)`).
#[derive(Debug, Clone, Copy, PartialEq)]
struct HostCpuTimes {
    /// Busy: everything but idle and iowait.
    busy_s: f64,
    /// Taken by the hypervisor (steal).
    steal_s: f64,
}

/// One read of `/proc/stat`; None where it cannot be read.
fn host_cpu_times() -> Option<HostCpuTimes> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    // SAFETY: sysconf has no preconditions.
    let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (ticks_per_s > 0).then_some(())?;
    parse_host_cpu_times(text.lines().next()?, ticks_per_s as f64)
}

fn parse_host_cpu_times(cpu_line: &str, ticks_per_s: f64) -> Option<HostCpuTimes> {
    let mut fields = cpu_line.split_whitespace();
    (fields.next()? == "cpu").then_some(())?;
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    let ticks: Vec<f64> = fields.take(8).map(str::parse).collect::<Result<_, _>>().ok()?;
    (ticks.len() == 8).then(|| HostCpuTimes {
        busy_s: (ticks.iter().sum::<f64>() - ticks[3] - ticks[4]) / ticks_per_s,
        steal_s: ticks[7] / ticks_per_s,
    })
}

/// Seconds since boot during which some runnable task waited for a CPU:
/// `/proc/pressure/cpu`'s `some` total (microseconds). None without PSI
/// (a kernel built without it, or booted with `psi=0`).
fn host_cpu_wait_s() -> Option<f64> {
    parse_cpu_pressure_some_s(&std::fs::read_to_string("/proc/pressure/cpu").ok()?)
}

fn parse_cpu_pressure_some_s(text: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    let total = line.split_whitespace().find_map(|f| f.strip_prefix("total="))?;
    Some(total.parse::<f64>().ok()? / 1e6)
}

/// Stops the sampler when dropped, whatever way the run ends (a panic of
/// the driver's thread included, so that the thread scope can join it).
pub struct StopFlag<'a>(pub &'a AtomicBool);

impl Drop for StopFlag<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_step(window: (f64, f64), mb_s: f64) -> StepResult {
        StepResult {
            index: 0,
            spec: StepSpec { rate: 1.0, settle_s: window.0, measure_s: window.1 - window.0, hold_s: 5.0, gate_pct: 0.0, max_settle_s: 0.0, join_s: 0.0 },
            start_s: 0.0,
            window_s: window,
            end_s: window.1 + 5.0,
            sessions_started: 10,
            sessions_measured: 5,
            sessions_failed: 0,
            failed_by_cause: Default::default(),
            failure_percent: Some(0.0),
            measured_failure_percent: Some(0.0),
            in_progress_sessions: 12,
            in_progress_failed: 0,
            first_byte: Default::default(),
            in_progress_failure_percent: Some(0.0),
            population_percent: None,
            population_held: None,
            throughput_mb_s: mb_s,
            received_mb_s: Some(mb_s),
            samples_mb_s: (Some(mb_s), None),
            samples: 2,
            active_sessions: None,
            settled_s: window.0,
            gap_pct: None,
            settled: true,
            cache_settled: None,
            matched: None,
        }
    }

    /// Samples every 5 s of lists that follow `lists(t)` = (active, inactive) GiB.
    fn lru_samples(until_s: f64, lists: impl Fn(f64) -> (f64, f64)) -> Vec<Sample> {
        (0..=(until_s / 5.0) as u32)
            .map(|k| {
                let t = k as f64 * 5.0;
                let (a, i) = lists(t);
                Sample { t_s: t, active_file_bytes: Some(a * 1073741824.0), inactive_file_bytes: Some(i * 1073741824.0), ..Sample::default() }
            })
            .collect()
    }

    #[test]
    fn the_lru_gate_waits_for_both_lists_to_hold_still() {
        // As nginx with kernel tuning on the paper-scale testbed: the cache
        // fills to 8 GiB all inactive, then pages move to the active list
        // until the split is 7.0 / 0.9 GiB at 1,100 s, with 0.3 % noise after.
        let shape = |t: f64| {
            let filled = (t / 450.0).min(1.0) * 7.9;
            let active = (t / 1100.0).min(1.0) * 7.0;
            let noise = if ((t / 5.0) as u32).is_multiple_of(2) { 0.02 } else { -0.02 };
            (active, filled - active + noise)
        };
        let samples = lru_samples(1500.0, shape);
        let first = (24..300).map(|k| k as f64 * 5.0).find(|&t| lru_settled(&samples, t, 2.0) == Some(true));
        // The lists stop at 1,100 s; the gate opens once the 30 s averages
        // over the two minutes ending one interval before the check hold
        // less motion than 2 % of 7.9 GiB (0.16 GiB, what the active list
        // moves in 25 s): the first average of the span must be that close
        // to 7.0 GiB, at 1,190 s.
        let first = first.expect("the lists settle");
        assert!((1185.0..=1195.0).contains(&first), "first settled at {first}");
        assert_eq!(lru_settled(&samples, 1500.0, 2.0), Some(true));
        // The inactive list's peak, the same at both ends of the span while
        // the active list holds still: its range, not its ends, counts.
        let peak = |t: f64| (5.0, 3.0 - (t - 450.0).abs() / 100.0);
        assert_eq!(lru_settled(&lru_samples(600.0, peak), 515.0, 2.0), Some(false));
        // Fewer than two minutes sampled: not settled yet, however still.
        assert_eq!(lru_settled(&lru_samples(110.0, |_| (7.0, 0.9)), 115.0, 2.0), Some(false));
        assert_eq!(lru_settled(&lru_samples(120.0, |_| (7.0, 0.9)), 125.0, 2.0), Some(true));
        // The sample at the check's own time is not used: lists that moved
        // only there do not count yet.
        let mut late = lru_samples(300.0, |_| (7.0, 0.9));
        late.last_mut().unwrap().active_file_bytes = Some(5.0 * 1073741824.0);
        assert_eq!(lru_settled(&late, 300.0, 2.0), Some(true));
        assert_eq!(lru_settled(&late, 305.0, 2.0), Some(false));
        // A missing stretch at the span's start or in its middle: not judged settled.
        for (from, to) in [(150.0, 200.0), (220.0, 260.0)] {
            let mut gappy = lru_samples(300.0, |_| (7.0, 0.9));
            gappy.retain(|s| s.t_s < from || s.t_s > to);
            assert_eq!(lru_settled(&gappy, 300.0, 2.0), Some(false), "a gap from {from} to {to} s");
            // Samples without the figures are as good as missing.
            let mut blank = lru_samples(300.0, |_| (7.0, 0.9));
            blank.iter_mut().filter(|s| s.t_s >= from && s.t_s <= to).for_each(|s| s.inactive_file_bytes = None);
            assert_eq!(lru_settled(&blank, 300.0, 2.0), Some(false), "no figures from {from} to {to} s");
        }
        // Settled lists at 2 GiB whose samples jump by 5 % of the file pages
        // as the kernel moves pages between them in batches: settled; the
        // same jumps on top of a drift of 3 % in two minutes: not.
        let jumpy = |drift: f64| move |t: f64| {
            let jump = 0.05 * (t * 1.7).sin() + drift * t;
            (1.5 + jump, 0.48 - jump)
        };
        for t in [300.0, 600.0, 900.0] {
            assert_eq!(lru_settled(&lru_samples(1000.0, jumpy(0.0)), t, 2.0), Some(true), "jumps alone at {t} s");
            assert_eq!(lru_settled(&lru_samples(1000.0, jumpy(0.0005)), t, 2.0), Some(false), "a drift at {t} s");
        }
        // No LRU figures at all (a kernel without them): the gate cannot judge.
        let bare: Vec<Sample> = (0..100).map(|k| Sample { t_s: k as f64 * 5.0, ..Sample::default() }).collect();
        assert_eq!(lru_settled(&bare, 300.0, 2.0), None);
    }

    #[test]
    fn the_plan_answers_the_gate_only_with_an_lru_gate() {
        let timing = |lru_pct| SteadySection { ramp_s: 30.0, settle_s: 10.0, measure_s: 20.0, hold_s: 5.0, one_run: true, gate_pct: Some(3.0), max_settle_s: Some(60.0), lru_pct, join_s: None };
        let log = SampleLog::default();
        log.lock().unwrap().extend(lru_samples(300.0, |t| (t / 100.0, 1.0)));
        let (_ch, mut plan) = channel(timing(None), log.clone(), Box::new(|| true), Box::new(|_| ()));
        assert_eq!(plan.cache_settled(300.0), None);
        let (_ch, mut plan) = channel(timing(Some(2.0)), log.clone(), Box::new(|| true), Box::new(|_| ()));
        assert_eq!(plan.cache_settled(300.0), Some(false));
        log.lock().unwrap().extend(lru_samples(600.0, |_| (3.0, 1.0)).into_iter().filter(|s| s.t_s > 300.0));
        assert_eq!(plan.cache_settled(600.0), Some(true));
    }

    #[test]
    fn a_step_record_takes_disk_and_memory_over_the_load_window() {
        // The disk reads 10 MB/s before the window and 30 MB/s inside it.
        let samples: Vec<Sample> = (0..8)
            .map(|k| {
                let t = k as f64 * 5.0;
                let bytes = if t <= 10.0 { t * 10e6 } else { 100e6 + (t - 10.0) * 30e6 };
                Sample {
                    t_s: t,
                    disk_reads: Some(t),
                    disk_bytes: Some(bytes),
                    disk_busy_s: Some(t / 2.0),
                    block_read_sectors: Some(bytes / 512.0),
                    memory_bytes: Some(if t < 10.0 { 0.0 } else { 1000.0 }),
                    memory_limit_hits: Some(k as f64),
                    // The active list grows by 100 bytes a sample and the
                    // inactive one shrinks as much; 2 MB/s are refaults.
                    active_file_bytes: Some(100.0 * k as f64),
                    inactive_file_bytes: Some(1000.0 - 100.0 * k as f64),
                    refault_file_bytes: Some(t * 2e6),
                    // Kernel memory grows by 10 bytes a sample.
                    kernel_bytes: Some(10.0 * k as f64),
                    // The server uses 1.5 cores, the daemon a tenth of one.
                    server_cpu_s: Some(1.5 * t),
                    daemon_cpu_s: Some(0.1 * t),
                    // The machine keeps 1.8 CPUs busy; each read's reply
                    // leaves 0.25 ms late.
                    host_cpu_busy_s: Some(1000.0 + 1.8 * t),
                    // Some task waits for a CPU 30 % of the time; the
                    // hypervisor takes 0.05 CPUs.
                    host_cpu_wait_s: Some(50.0 + 0.3 * t),
                    host_cpu_steal_s: Some(2.0 + 0.05 * t),
                    disk_reply_late_s: Some(t * 0.25e-3),
                    // Global reclaim scans 50 pages a second from 20 s on.
                    global_reclaim_pages: Some(7.0 + 50.0 * (t - 20.0).max(0.0)),
                    // 2.5 of the server's threads wait on the daemon.
                    daemon_read_wait_s: Some(2.5 * t),
                    // Its worker reads 90 % of the time.
                    daemon_read_busy_s: Some(0.9 * t),
                    ..Sample::default()
                }
            })
            .collect();
        let r = StepRecord::new(load_step((10.0, 30.0), 20.0), &samples);
        assert!((r.server_cpu_s.unwrap() - 30.0).abs() < 1e-9 && (r.daemon_cpu_s.unwrap() - 2.0).abs() < 1e-9);
        assert!((r.host_cpus_busy.unwrap() - 1.8).abs() < 1e-9);
        assert!((r.host_cpu_wait.unwrap() - 0.3).abs() < 1e-9);
        assert!((r.host_cpus_stolen.unwrap() - 0.05).abs() < 1e-9);
        assert_eq!(r.global_reclaim_pages, Some(500.0), "scanned from 20 to 30 s");
        assert!((r.server_threads_blocked.unwrap() - 2.5).abs() < 1e-9);
        assert!((r.daemon_reading.unwrap() - 0.9).abs() < 1e-9);
        assert_eq!(StepRecord::new(load_step((5.0, 20.0), 20.0), &samples).global_reclaim_pages, Some(0.0));
        let d = r.disk.unwrap();
        assert!((d.reply_late_ms.unwrap() - 0.25).abs() < 1e-9);
        assert_eq!((d.seconds, d.reads, d.busy_s), (20.0, 20.0, 10.0));
        assert!((d.mb_s - 30.0).abs() < 1e-9);
        assert!((d.block_mb_s.unwrap() - 30.0).abs() < 1e-9);
        assert!((r.disk_bytes_per_delivered_byte.unwrap() - 1.5).abs() < 1e-9);
        assert_eq!(r.memory_mean_bytes, Some(1000.0));
        assert_eq!(r.memory_limit_hits, Some(4.0));
        // Samples 2 to 6 (10 to 30 s) inside the window.
        let lru = r.lru.expect("the cgroup's lists were sampled");
        assert_eq!((lru.active_file_mean_bytes, lru.inactive_file_mean_bytes), (400.0, 600.0));
        assert!((lru.refault_mb_s.unwrap() - 2.0).abs() < 1e-9);
        assert_eq!(lru.kernel_mean_bytes, Some(40.0));
        // No sample at an edge: no disk figure rather than a wrong one.
        assert_eq!(StepRecord::new(load_step((10.0, 60.0), 20.0), &samples).disk, None);
    }

    #[test]
    fn the_machines_busy_cpu_time_is_proc_stats_first_line_without_idle_and_iowait() {
        // user nice system idle iowait irq softirq steal guest guest_nice, in ticks.
        assert_eq!(parse_host_cpu_times("cpu  1000 50 300 9000 200 10 40 100 0 0", 100.0).map(|c| c.busy_s), Some(15.0));
        assert_eq!(parse_host_cpu_times("cpu0 1 2 3 4 5 6 7 8", 100.0), None, "a CPU's line, not the machine's");
        assert_eq!(parse_host_cpu_times("cpu  1 2 3", 100.0), None, "too few fields");
        assert_eq!(parse_host_cpu_times("cpu  1 2 x 4 5 6 7 8", 100.0), None);
        assert!(host_cpu_times().is_some_and(|c| c.busy_s > 0.0), "this machine's /proc/stat");
    }

    #[test]
    fn cpu_wait_is_the_some_line_of_the_cpu_pressure_and_steal_the_eighth_tick() {
        let psi = "some avg10=35.64 avg60=34.52 avg300=30.22 total=4527005728\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(parse_cpu_pressure_some_s(psi), Some(4527.005728));
        assert_eq!(parse_cpu_pressure_some_s("full avg10=0.00 total=5\n"), None, "no some line");
        assert_eq!(parse_cpu_pressure_some_s("some avg10=1.00 total=x\n"), None);
        assert_eq!(parse_host_cpu_times("cpu  1000 50 300 9000 200 10 40 100 0 0", 100.0).map(|c| c.steal_s), Some(1.0));
        assert_eq!(parse_host_cpu_times("cpu  1 2 3", 100.0).map(|c| c.steal_s), None);
        assert!(host_cpu_times().is_some_and(|c| c.steal_s >= 0.0), "this machine's /proc/stat");
    }

    #[test]
    fn a_step_record_takes_the_daemons_prefetching_over_the_window() {
        // The size in force moves from 2 MiB to 3 MiB inside the window; the
        // daemon reads 8 MB/s, of which 1 MB/s is evicted before use: two
        // ranges a second, each 12 s after its read (the first worker), and
        // one a second 6 s after (the second).
        let stats = |size: f64, t: f64| {
            serde_json::json!({
                "daemon": {"prefetch_bytes": 2097152},
                "controller": {"queues": [{"prefetch_bytes": size}]},
                "prefetch_usage": [
                    {"usage": {"read_bytes": t * 6e6, "used_bytes": t * 5e6, "evicted_bytes": t * 1e6, "wasted_bytes": 0.0, "reread_bytes": t * 0.5e6,
                               "evictions": t * 2.0, "eviction_time_estimate_sum_s": t * 24.0}},
                    {"usage": {"read_bytes": t * 2e6, "used_bytes": t * 2e6, "evicted_bytes": 0.0, "wasted_bytes": 0.0, "reread_bytes": 0.0,
                               "evictions": t, "eviction_time_estimate_sum_s": t * 6.0,
                               "full_prefetches": t * 3.0, "scaled_prefetches": t, "scaled_prefetch_bytes": t * 943718.0}}
                ]
            })
        };
        let samples: Vec<Sample> = (0..8)
            .map(|k| {
                let t = k as f64 * 5.0;
                let mut row = Sample { t_s: t, ..Sample::default() };
                prefetch_fields(&stats(if t < 20.0 { 2097152.0 } else { 3145728.0 }, t), &mut row);
                row
            })
            .collect();
        let p = StepRecord::new(load_step((10.0, 30.0), 20.0), &samples).prefetch.expect("a daemon was sampled");
        assert_eq!(p.size_end_bytes, 3145728.0);
        // Samples at 10, 15 (2 MiB) and 20, 25, 30 (3 MiB).
        assert!((p.size_mean_bytes - (2.0 * 2097152.0 + 3.0 * 3145728.0) / 5.0).abs() < 1e-6);
        assert!((p.read_mb_s.unwrap() - 8.0).abs() < 1e-9);
        assert!((p.used_mb_s.unwrap() - 7.0).abs() < 1e-9);
        assert!((p.evicted_mb_s.unwrap() - 1.0).abs() < 1e-9);
        assert!((p.reread_mb_s.unwrap() - 0.5).abs() < 1e-9);
        assert!((p.eviction_time_s.unwrap() - 10.0).abs() < 1e-9, "(2 x 12 + 6) / 3 s: {:?}", p.eviction_time_s);
        // Under a bitrate scale (the second worker): a quarter of its prefetches scaled, to 0.9 MiB.
        assert!((p.scaled_share.unwrap() - 0.25).abs() < 1e-9, "{:?}", p.scaled_share);
        assert!((p.scaled_mean_bytes.unwrap() - 943718.0).abs() < 1e-6);
        // A fixed-size daemon without a controller: its size.
        let mut row = Sample::default();
        prefetch_fields(&serde_json::json!({"daemon": {"prefetch_bytes": 4194304}, "prefetch_usage": []}), &mut row);
        assert_eq!(row.prefetch_bytes, Some(4194304.0));
        // No daemon: no prefetch figures.
        let plain: Vec<Sample> = (0..8).map(|k| Sample { t_s: k as f64 * 5.0, ..Sample::default() }).collect();
        assert_eq!(StepRecord::new(load_step((10.0, 30.0), 20.0), &plain).prefetch, None);
    }

    #[test]
    fn the_channel_hands_steps_and_results_across_threads() {
        let timing = SteadySection { ramp_s: 30.0, settle_s: 10.0, measure_s: 20.0, hold_s: 5.0, one_run: true, gate_pct: None, max_settle_s: None, lru_pct: None, join_s: None };
        let reported = std::rc::Rc::new(std::cell::Cell::new(0));
        let count = reported.clone();
        let (mut driver_end, mut plan) = channel(timing, SampleLog::default(), Box::new(|| true), Box::new(move |_| count.set(count.get() + 1)));
        let load = std::thread::spawn(move || {
            let mut seen = Vec::new();
            let mut last: Option<StepResult> = None;
            while let Some(spec) = plan.next(last.as_ref()) {
                seen.push(spec);
                last = Some(StepResult { spec, index: seen.len() - 1, ..load_step((0.0, 1.0), spec.rate) });
            }
            seen
        });
        let a = driver_end.step(2.0).unwrap();
        let b = driver_end.probe(3.0, 0).unwrap();
        driver_end.probe(3.0, 1).unwrap();
        driver_end.probe(2.0, 1).unwrap();
        assert_eq!((a.spec.rate, b.throughput_mbs), (2.0, 3.0));
        assert_eq!(driver_end.finish().len(), 4);
        assert_eq!(reported.get(), 4);
        let seen = load.join().unwrap();
        // The ramp first, a settling after each change of rate, none when the rate stays.
        assert_eq!(seen.iter().map(|s| (s.rate, s.settle_s)).collect::<Vec<_>>(), [(2.0, 30.0), (3.0, 10.0), (3.0, 0.0), (2.0, 10.0)]);
    }
}
