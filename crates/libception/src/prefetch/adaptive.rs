//! Paper 001's adaptive prefetch size (`libception daemon --prefetch adaptive`).
//!
//! Three layers, each testable on its own:
//!
//! * [`AdaptiveCore`] is the algorithm of paper 001 section 4.1 as a pure
//!   function of interval measurements: the score `S = disk ms per
//!   transaction x cache-miss ratio` of the size in force is stored, then
//!   compared with the stored scores of the next larger and smaller sizes
//!   (`size ± step`, within `[min, max]`): move to a neighbour that scored
//!   lower; else try an unmeasured neighbour (the larger one when neither is
//!   measured); else the size is a minimum and every stored score but its own
//!   is deflated by `deflation` (the paper's "deflate the past scores"), so
//!   that a rejected size is retried eventually. Each worker's first busy
//!   interval that has a score is a warm-up: nothing is stored or changed,
//!   the eviction jump included (`warm-up`). Its streams and cache are
//!   starting: in eight of the ten adaptive runs recorded by 2026-11-29 its
//!   miss ratio was 0.44-0.86, under the median of the run's later intervals,
//!   and its rate estimate can be several times the streams' (docs/daemon.md).
//!   Stored, it was compared with the first neighbour tried and set the
//!   search's direction. Before that, two thresholds
//!   of the paper: below `busy` (the disk worker's busy fraction) nothing is
//!   adjusted, and when prefetch evictions reach `evict` of the requested
//!   bytes the target jumps to `eviction time x stream rate` (the nearest
//!   size of the step grid): the size a stream consumes before its prefetched
//!   data is evicted. The jump applies only when that size is at least two
//!   steps below the size in force: it exists for memory pressure that the
//!   descent, one step an interval, cannot follow, and at the best size the
//!   paper's own Table 1 already evicts 10 %. One step below is left to the
//!   scores, but the larger neighbour is then not tried (the evidence says
//!   the size is already too large). Without a rate estimate there is no
//!   jump (the paper has no other rule) and the gradient descent carries on.
//!   A size below the *request floor* (the grid size nearest to the median
//!   length of the interval's missed requests) reads what the requests ask,
//!   as every smaller size does: its score is stored, and the target moves
//!   up to the floor (`request-floor`); no descent or jump goes below it.
//! * [`QueueControl`] wraps a core with time: measurement intervals of
//!   `interval`, the gradual change (the size in force moves towards the
//!   target at `ramp_rate` bytes per second, and an interval is measured only
//!   once the ramp is over, so each score belongs to one size), the first
//!   `settle` intervals after a change recorded but not scored (the streams'
//!   prefetches are still moving to the new size: `settle`), the usage
//!   tracker ([`super::tracker`]) and the interval counters, and a history
//!   ring for the stats. Time is a `Duration` since an epoch passed in, so the
//!   tests drive it without sleeping; intervals close lazily on the next call.
//! * [`AdaptivePrefetch`] is the [`PrefetchController`] the daemon runs: one
//!   `QueueControl` per disk worker (paper 001's single prefetcher thread is
//!   one worker), behind one mutex taken for a few hundred nanoseconds per
//!   request and per read.
//!
//! Disk time is busy time per disk transaction in the interval (the paper's
//! iostat "ms per transaction"). When every disk of the worker is a block
//! device with `/sys/block/DEV/stat` ([`crate::diskstat`]), both come from the
//! device, as iostat takes them: the transactions are its reads completed and
//! the busy time its `io_ticks`, deltas over the interval (and the busy
//! fraction is `io_ticks` over the interval too). Otherwise (anonymous
//! devices: FUSE, overlayfs) they are estimated: the worker's busy time, and a
//! read of `n` bytes counts as `ceil(n / transaction)` transactions,
//! `transaction` being the largest I/O the disk is sent (FreeBSD's MAXPHYS,
//! 128 KiB, in the paper). Each interval record says which (`transaction_source`). The miss
//! ratio is disk bytes / requested bytes of the prefetched ranges retired in
//! the interval (see the tracker for what "requested" can and cannot see).
//! With full-size transactions, ms per transaction is proportional to ms per
//! byte read, so the product approaches disk time per byte requested: the
//! paper's score has that property too; the transaction count keeps what it
//! adds (short reads and partial last transactions cost a transaction each).
//!
//! Bitrate: the protocol carries no bitrate, so each file's stream rate is
//! estimated from when a stream comes back after a prefetch (see the
//! tracker). The eviction-time jump uses the median of the files' estimates,
//! each divided by its bitrate factor (or `stream_rate` when given): the rate
//! at which a stream goes through the size in force (the tracker's
//! `jump_rate`). The size in force is the size of the
//! fastest streams (paper 001 section 5: "specify the prefetch size for the
//! highest bitrate"); a file whose rate is below half the reference rate
//! (the 90th percentile of the files' rates) gets `size x factor(rate /
//! reference)` by `scale` (sqrt by default, proportional, or none), never
//! less than `min`. Rates within a factor two of the reference count as the
//! reference's class: the paper uses one size per bitrate, and a single-rate
//! workload must not shrink its sizes because of estimation noise.
//!
//! Start size: `start`, or (paper 001 section 7, after Li et al.) the size
//! whose transfer time equals the average seek time, measured by a short
//! probe of the disk ([`super::probe`]) before the worker's first read.

use super::snapshot::{
    ControllerSnapshot, Decision, IntervalRecord, ProbeSnapshot, QueueSnapshot, SizeScore, TransactionSource, UsageTally, WorkerUsage,
};
use crate::diskstat::{self, DeviceSample};
use super::tracker::PrefetchTracker;
use super::probe::ProbeResult;
use super::{page_round, FileKey, PrefetchContext, PrefetchController, ReadObservation, RequestObservation};
use libception_proto::{AdaptiveParams, ParamError, DEFAULT_START};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const MIB: f64 = (1u64 << 20) as f64;
/// Sizes are whole pages.
/// Tracked prefetched ranges per disk worker (about 50 bytes each).
pub const MAX_TRACKED_RANGES: usize = 1 << 16;

/// What one interval measured, the core's only input.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct IntervalMeasurement {
    /// Size in force during the interval.
    pub size: u64,
    /// Busy time of the disk worker / interval length.
    pub busy_fraction: f64,
    /// Disk busy milliseconds per transaction (None: nothing read).
    pub disk_ms_per_transaction: Option<f64>,
    /// Disk bytes / requested bytes (None: nothing confirmed requested).
    pub miss_ratio: Option<f64>,
    /// Prefetch-evicted bytes / requested bytes.
    pub evicted_fraction: f64,
    /// Mean observed prefetch eviction time, seconds.
    pub eviction_time_s: Option<f64>,
    /// Mean stream rate, bytes per second.
    pub stream_rate_bps: Option<f64>,
    /// Median length of the missed requests of the interval (the streams
    /// of the size in force), bytes: a read covers its request whatever the
    /// size, so sizes up to it read the same.
    pub request_bytes: Option<u64>,
}

impl IntervalMeasurement {
    /// Paper 001's score: disk ms per transaction x cache-miss ratio.
    pub fn score(&self) -> Option<f64> {
        match (self.disk_ms_per_transaction, self.miss_ratio) {
            (Some(d), Some(m)) if d.is_finite() && m.is_finite() => Some(d * m),
            _ => None,
        }
    }
}

/// The gradient descent over prefetch sizes, without time.
#[derive(Debug, Clone)]
pub struct AdaptiveCore {
    params: AdaptiveParams,
    /// The size the step grid runs through (the start size).
    origin: u64,
    target: u64,
    /// Stored scores, deflated at every minimum.
    scores: BTreeMap<u64, f64>,
    /// The same scores as measured.
    measured: BTreeMap<u64, f64>,
    /// The last decision was a minimum at this size.
    minimum: Option<u64>,
    /// The warm-up interval is over.
    warmed: bool,
    /// The size of the step grid nearest to the requests' length (0: none
    /// measured): a read covers its request, so every size below it reads
    /// about what it reads.
    floor: u64,
}

impl AdaptiveCore {
    pub fn new(params: AdaptiveParams) -> Self {
        let target = start_size(&params);
        AdaptiveCore { params, origin: target, target, scores: BTreeMap::new(), measured: BTreeMap::new(), minimum: None, warmed: false, floor: 0 }
    }

    /// Starts at the probed size `bytes`, rounded to a multiple of the step
    /// within `[min, max]`; ignored once anything was scored (the warm-up
    /// included).
    pub fn set_start(&mut self, bytes: u64) -> u64 {
        if self.scores.is_empty() && !self.warmed {
            let p = &self.params;
            let steps = (bytes as f64 / p.step as f64).round().max(1.0);
            self.target = page_round(steps * p.step as f64).clamp(p.min, p.max);
            self.origin = self.target;
        }
        self.target
    }

    pub fn params(&self) -> &AdaptiveParams {
        &self.params
    }

    /// The size the controller wants in force.
    pub fn target(&self) -> u64 {
        self.target
    }

    /// Stored scores by size.
    pub fn scores(&self) -> &BTreeMap<u64, f64> {
        &self.scores
    }

    fn larger(&self, size: u64) -> Option<u64> {
        let l = size.saturating_add(self.params.step).min(self.params.max);
        (l > size).then_some(l)
    }

    /// The next smaller size, not below the request floor.
    fn smaller(&self, size: u64) -> Option<u64> {
        let s = size.saturating_sub(self.params.step).max(self.params.min).max(self.floor.min(size));
        (s < size).then_some(s)
    }

    /// The request floor in force (0: none measured).
    pub fn floor(&self) -> u64 {
        self.floor
    }

    /// The size of the step grid through `start` nearest to `bytes`, within
    /// `[min, max]`. Nearest, not the largest below: the eviction time is
    /// measured at the size in force, and a smaller size evicts later, so an
    /// estimate is already low and rounding down would bias it twice.
    fn grid_nearest(&self, bytes: f64) -> u64 {
        let p = &self.params;
        let steps = ((bytes - self.origin as f64) / p.step as f64).round();
        let on_grid = self.origin as f64 + steps * p.step as f64;
        page_round(on_grid).clamp(p.min, p.max)
    }

    /// Takes the request floor from an interval's missed requests.
    pub fn note_requests(&mut self, m: &IntervalMeasurement) {
        if let Some(r) = m.request_bytes.filter(|&r| r > 0) {
            self.floor = self.grid_nearest(r as f64);
        }
    }

    /// Takes one interval's measurement of the size in force and decides the
    /// next target.
    pub fn decide(&mut self, m: &IntervalMeasurement) -> Decision {
        self.note_requests(m);
        let p = &self.params;
        if m.busy_fraction < p.busy {
            return Decision::LightLoad;
        }
        let Some(score) = m.score() else { return Decision::NoData };
        if !self.warmed {
            self.warmed = true;
            return Decision::WarmUp;
        }
        let size = m.size;
        self.scores.insert(size, score);
        self.measured.insert(size, score);
        // Below the floor every size reads the request and nothing more: the
        // scores of such sizes differ by noise only, and a descent among
        // them has no gradient to follow (docs/daemon.md, "Request floor").
        if size < self.floor {
            self.target = self.floor;
            self.minimum = None;
            return Decision::RequestFloor;
        }
        // Deflated scores only serve to leave a minimum (the retry of a
        // rejected size); anywhere else the gradient is computed from the
        // scores as measured, so that a retried size that measures worse
        // sends the search back (the paper: "recompute the gradient using the
        // newly measured score") instead of on to stale, deflated sizes.
        let at_minimum = self.minimum.take() == Some(size);
        let table = if at_minimum { &self.scores } else { &self.measured };
        // Set when the eviction evidence says the size in force is already
        // a step too large: the larger neighbour is then not tried.
        let mut no_larger = false;
        if m.evicted_fraction >= p.evict && p.evict.is_finite() {
            // A stream reading at `rate` reaches the end of a prefetch of
            // `p` bytes after p / rate seconds; prefetched data lives about
            // `t` seconds: sizes above t x rate are evicted before use.
            // The jump is for pressure the descent cannot follow (paper 001
            // section 4.1): a target one step below is what one descent
            // step reaches anyway, with a score to back it, so only a
            // target two or more steps below jumps.
            if let (Some(t), Some(rate)) = (m.eviction_time_s, p.stream_rate.or(m.stream_rate_bps)) {
                let evidence = self.grid_nearest(t * rate);
                // Not below the floor: a smaller size would read as much.
                let to = evidence.max(self.floor.min(size));
                if to.saturating_add(2 * p.step) <= size {
                    self.target = to;
                    return Decision::EvictionJump;
                }
                no_larger = evidence < size;
            }
        }
        let neighbours = [self.larger(size).filter(|_| !no_larger), self.smaller(size)];
        let lowest_known = neighbours
            .iter()
            .flatten()
            .filter_map(|&n| table.get(&n).map(|&s| (n, s)))
            .filter(|&(_, s)| s < score)
            .min_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((n, _)) = lowest_known {
            self.target = n;
            return Decision::Descend;
        }
        if let Some(&n) = neighbours.iter().flatten().find(|n| !self.scores.contains_key(n)) {
            self.target = n;
            return Decision::Explore;
        }
        // A minimum: deflate the past scores (every stored score but the
        // one just measured), so that a rejected neighbour is retried once
        // its score has shrunk below this one.
        let keep = 1.0 - p.deflation;
        for (_, v) in self.scores.iter_mut().filter(|(&s, _)| s != size) {
            *v *= keep;
        }
        self.target = size;
        self.minimum = Some(size);
        Decision::Minimum
    }
}

/// The size before any probe or decision: `start`, else the default within
/// `[min, max]`.
fn start_size(p: &AdaptiveParams) -> u64 {
    p.start.unwrap_or(DEFAULT_START.clamp(p.min, p.max))
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// Moving the size in force from `from` (at `since`) to the target.
    Ramping { from: u64, since: Duration },
    /// The target is in force; measuring since `since`.
    Measuring { since: Duration },
}

/// Missed requests whose lengths an interval keeps for its median (the
/// first ones of the interval; an interval of paper 001's 180 s at a few
/// hundred misses a second stays below it).
const MAX_REQUEST_SAMPLES: usize = 1 << 16;

/// The median of `v` (the upper of the two middle values), reordering it.
fn median(v: &mut [u64]) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    let mid = v.len() / 2;
    Some(*v.select_nth_unstable(mid).1)
}

#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    busy: Duration,
    bytes_read: u64,
    reads: u64,
    transactions: u64,
}

/// The device counters when the counters were last reset, and for which disks.
#[derive(Debug, Clone)]
struct DeviceBaseline {
    at: Duration,
    disks: BTreeSet<String>,
    sample: DeviceSample,
}

/// The adaptive state of one disk worker.
#[derive(Debug)]
pub struct QueueControl {
    core: AdaptiveCore,
    tracker: PrefetchTracker,
    phase: Phase,
    counters: Counters,
    /// Lengths of the interval's missed requests on the reference class's
    /// files (at most [`MAX_REQUEST_SAMPLES`]).
    requests: Vec<u64>,
    history: VecDeque<IntervalRecord>,
    intervals: u64,
    usage_total: UsageTally,
    decisions: BTreeMap<&'static str, u64>,
    disks: BTreeSet<String>,
    /// The probe is still to run (no start size given, probe on).
    probe_pending: bool,
    probe: Option<ProbeResult>,
    /// Where `block/DEV/stat` is read (`None`: always estimate).
    sys_root: Option<PathBuf>,
    device: Option<DeviceBaseline>,
    /// Intervals still to pass unscored since the last change of size.
    settling: u32,
}

impl QueueControl {
    pub fn new(params: AdaptiveParams, now: Duration) -> Self {
        let tracker = PrefetchTracker::new(params.waste_after, MAX_TRACKED_RANGES);
        let probe_pending = params.start.is_none() && params.probe;
        QueueControl {
            core: AdaptiveCore::new(params),
            tracker,
            phase: Phase::Measuring { since: now },
            counters: Counters::default(),
            requests: Vec::new(),
            history: VecDeque::new(),
            intervals: 0,
            usage_total: UsageTally::default(),
            decisions: BTreeMap::new(),
            disks: BTreeSet::new(),
            probe_pending,
            probe: None,
            sys_root: None,
            device: None,
            settling: 0,
        }
    }

    /// Takes disk transactions and busy time from the devices' counters under
    /// `sys_root` (normally `/sys`) where they exist.
    pub fn with_device_counters(mut self, sys_root: &Path) -> Self {
        self.sys_root = Some(sys_root.to_path_buf());
        self
    }

    /// The worker serves `disk` too. A new disk restarts the device baseline
    /// (the counters of the interval so far covered the other disks only).
    pub fn add_disk(&mut self, disk: &str, now: Duration) {
        if !disk.is_empty() && self.disks.insert(disk.to_string()) {
            self.device = self.device_baseline(now);
        }
    }

    /// The summed counters of the worker's disks, if every one has them.
    fn device_baseline(&self, now: Duration) -> Option<DeviceBaseline> {
        let root = self.sys_root.as_deref()?;
        if self.disks.is_empty() {
            return None;
        }
        let mut sample = DeviceSample::default();
        for d in &self.disks {
            let s = diskstat::sample_in(root, d)?;
            sample.reads += s.reads;
            sample.io_ticks_ms += s.io_ticks_ms;
        }
        Some(DeviceBaseline { at: now, disks: self.disks.clone(), sample })
    }

    fn reset_counters(&mut self, now: Duration) {
        self.counters = Counters::default();
        self.requests.clear();
        self.device = self.device_baseline(now);
    }

    #[cfg(test)]
    pub fn history(&self) -> &VecDeque<IntervalRecord> {
        &self.history
    }

    /// The size in force at `now` (call [`Self::advance`] first).
    pub fn size_at(&self, now: Duration) -> u64 {
        let target = self.core.target();
        match self.phase {
            Phase::Measuring { .. } => target,
            Phase::Ramping { from, since } => {
                let moved = self.core.params().ramp_rate as f64 * now.saturating_sub(since).as_secs_f64();
                let size = if target >= from {
                    (from as f64 + moved).min(target as f64)
                } else {
                    (from as f64 - moved).max(target as f64)
                };
                page_round(size)
            }
        }
    }

    fn ramp_end(&self, from: u64, since: Duration) -> Duration {
        let distance = from.abs_diff(self.core.target()) as f64;
        since + Duration::from_secs_f64(distance / self.core.params().ramp_rate as f64)
    }

    /// Ends a finished ramp and closes a finished interval.
    pub fn advance(&mut self, now: Duration) {
        if let Phase::Ramping { from, since } = self.phase {
            let end = self.ramp_end(from, since);
            if now < end {
                return;
            }
            // What happened during the ramp belongs to no single size. The
            // interval starts where its counters do: at this (lazy) call,
            // not at the ramp's computed end, so that the busy fraction
            // divides the busy time counted by the time it was counted over.
            self.phase = Phase::Measuring { since: now };
            self.reset_counters(now);
            self.tracker.sweep(now);
            let t = self.tracker.take_tally();
            self.usage_total.add(&t);
            self.settling = self.core.params().settle;
        }
        if let Phase::Measuring { since } = self.phase {
            if now.saturating_sub(since) >= self.core.params().interval {
                self.close_interval(since, now);
            }
        }
    }

    fn close_interval(&mut self, since: Duration, now: Duration) {
        self.tracker.sweep(now);
        let tally = self.tracker.take_tally();
        self.usage_total.add(&tally);
        let c = std::mem::take(&mut self.counters);
        // The end of this interval's device counters is the next one's start.
        let end = self.device_baseline(now);
        let device = match (self.device.take(), &end) {
            (Some(start), Some(end)) if start.disks == end.disks => {
                end.sample.since(&start.sample).map(|d| (d, now.saturating_sub(start.at)))
            }
            _ => None,
        };
        self.device = end;
        let length = now.saturating_sub(since).as_secs_f64().max(1e-9);
        // (busy ms, over how many seconds, transactions, source)
        let (busy_ms, busy_over, transactions, source) = match device {
            Some((d, over)) => (d.io_ticks_ms as f64, over.as_secs_f64().max(1e-9), d.reads, TransactionSource::Device),
            None => (c.busy.as_secs_f64() * 1e3, length, c.transactions, TransactionSource::Estimate),
        };
        let size = self.core.target();
        let m = IntervalMeasurement {
            size,
            busy_fraction: busy_ms / 1e3 / busy_over,
            disk_ms_per_transaction: (transactions > 0).then(|| busy_ms / transactions as f64),
            miss_ratio: tally.miss_ratio(),
            evicted_fraction: if tally.used_bytes > 0 {
                tally.evicted_bytes as f64 / tally.used_bytes as f64
            } else if tally.evicted_bytes > 0 {
                f64::INFINITY
            } else {
                0.0
            },
            eviction_time_s: tally.mean_eviction_time_estimate_s(),
            stream_rate_bps: self.tracker.jump_rate(self.core.params().scale).or(tally.mean_rate_bps()),
            request_bytes: median(&mut self.requests),
        };
        self.requests.clear();
        // The first intervals at a new size measure the streams moving to it
        // (docs/daemon.md, "Settling"): recorded, neither stored nor compared.
        let decision = if self.settling > 0 {
            self.settling -= 1;
            self.core.note_requests(&m);
            Decision::Settle
        } else {
            self.core.decide(&m)
        };
        self.intervals += 1;
        *self.decisions.entry(decision_name(decision)).or_default() += 1;
        let record = IntervalRecord {
            index: self.intervals,
            end_s: now.as_secs_f64(),
            length_s: length,
            prefetch_bytes: size,
            next_bytes: self.core.target(),
            decision,
            busy_fraction: m.busy_fraction,
            reads: c.reads,
            bytes_read: c.bytes_read,
            disk_ms_per_mib: (c.bytes_read > 0).then(|| c.busy.as_secs_f64() * 1e3 / (c.bytes_read as f64 / MIB)),
            transactions,
            transaction_source: source,
            disk_ms_per_transaction: m.disk_ms_per_transaction,
            miss_ratio: m.miss_ratio,
            score: m.score(),
            used_bytes: tally.used_bytes,
            evicted_bytes: tally.evicted_bytes,
            evicted_fraction: if m.evicted_fraction.is_finite() { m.evicted_fraction } else { f64::MAX },
            wasted_bytes: tally.wasted_bytes,
            evictions: tally.evictions,
            eviction_time_s: tally.mean_eviction_time_s(),
            eviction_time_lower_s: tally.mean_eviction_time_lower_s(),
            eviction_time_estimate_s: m.eviction_time_s,
            stream_rate_bps: m.stream_rate_bps,
            request_bytes: m.request_bytes,
            floor_bytes: self.core.floor(),
        };
        tracing::info!(
            interval = record.index,
            prefetch = size,
            next = record.next_bytes,
            decision = decision_name(decision),
            busy = format!("{:.2}", m.busy_fraction),
            score = ?m.score(),
            miss_ratio = ?m.miss_ratio,
            evicted_fraction = format!("{:.3}", m.evicted_fraction),
            "adaptive prefetch interval closed"
        );
        if self.history.len() >= self.core.params().history {
            self.history.pop_front();
        }
        self.history.push_back(record);
        self.phase = if self.core.target() != size {
            Phase::Ramping { from: size, since: now }
        } else {
            Phase::Measuring { since: now }
        };
    }

    /// Bytes to read for a request on `file` at `now`.
    pub fn prefetch_for(&mut self, file: FileKey, now: Duration) -> u64 {
        self.advance(now);
        let size = self.size_at(now);
        let p = self.core.params();
        self.tracker.scaled_size(file, size, p.min, p.scale)
    }

    /// Starts at the size the disk probe measured (before any interval was
    /// scored); returns the target.
    pub fn set_start(&mut self, bytes: u64, now: Duration) -> u64 {
        self.advance(now);
        let before = self.core.target();
        let to = self.core.set_start(bytes);
        if to != before && self.intervals == 0 {
            // The probe runs before the first read: nothing measured yet.
            self.phase = Phase::Measuring { since: now };
            self.reset_counters(now);
        }
        to
    }

    pub fn observe_request(&mut self, file: FileKey, offset: u64, end: u64, resident_to: u64, now: Duration) {
        self.advance(now);
        // A miss's length sets the request floor, if its stream gets the
        // size in force (not a smaller bitrate-scaled one).
        // (Not while ramping: those would be dropped at the ramp's end.)
        if resident_to < end
            && end > offset
            && matches!(self.phase, Phase::Measuring { .. })
            && self.requests.len() < MAX_REQUEST_SAMPLES
            && self.tracker.in_reference_class(file, self.core.params().scale)
        {
            self.requests.push(end - offset);
        }
        self.tracker.record_request(file, offset, end, resident_to, now);
    }

    /// A read of `[read_start, end)` for a plan `[start, ..)` whose client
    /// part ends at `want_end` took `busy`.
    #[allow(clippy::too_many_arguments)]
    pub fn observe_read(&mut self, file: FileKey, start: u64, want_end: u64, read_start: u64, end: u64, busy: Duration, now: Duration) {
        self.advance(now);
        self.counters.busy += busy;
        let bytes = end.saturating_sub(read_start);
        self.counters.bytes_read += bytes;
        if bytes > 0 {
            self.counters.reads += 1;
            self.counters.transactions += bytes.div_ceil(self.core.params().transaction);
        }
        self.tracker.record_read(file, start, want_end, read_start, end, now);
    }

    fn snapshot(&self, worker: usize, now: Duration) -> QueueSnapshot {
        let (phase, phase_since) = match self.phase {
            Phase::Ramping { since, .. } => ("ramping", since),
            Phase::Measuring { since } => ("measuring", since),
        };
        QueueSnapshot {
            worker,
            disks: self.disks.iter().cloned().collect(),
            prefetch_bytes: self.size_at(now),
            target_bytes: self.core.target(),
            phase: phase.to_string(),
            phase_since_s: phase_since.as_secs_f64(),
            intervals: self.intervals,
            score: self.history.back().and_then(|r| r.score),
            last_decision: self.history.back().cloned(),
            decisions: self.decisions.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            scores: self.core.scores().iter().map(|(&bytes, &score)| SizeScore { bytes, score }).collect(),
            tracked_ranges: self.tracker.tracked() as u64,
            usage: self.usage_total,
            probe: self.probe.map(|p| ProbeSnapshot {
                access_ms: p.access.as_secs_f64() * 1e3,
                transfer_bps: p.transfer_bps,
                start_bytes: p.start_bytes,
                source: p.source,
            }),
            history: self.history.iter().cloned().collect(),
        }
    }
}

fn decision_name(d: Decision) -> &'static str {
    match d {
        Decision::LightLoad => "light-load",
        Decision::NoData => "no-data",
        Decision::WarmUp => "warm-up",
        Decision::Settle => "settle",
        Decision::EvictionJump => "eviction-jump",
        Decision::Descend => "descend",
        Decision::Explore => "explore",
        Decision::Minimum => "minimum",
        Decision::RequestFloor => "request-floor",
    }
}

/// Paper 001's controller for the daemon.
pub struct AdaptivePrefetch {
    params: AdaptiveParams,
    /// Where the devices' counters are read (`/sys`).
    sys_root: PathBuf,
    epoch: Instant,
    queues: Mutex<BTreeMap<usize, QueueControl>>,
}

impl AdaptivePrefetch {
    pub fn new(params: AdaptiveParams) -> Result<Self, ParamError> {
        params.validate()?;
        Self::with_sys_root(params, Path::new("/sys"))
    }

    /// Reads the devices' counters under `sys_root` instead of `/sys`.
    pub fn with_sys_root(params: AdaptiveParams, sys_root: &Path) -> Result<Self, ParamError> {
        params.validate()?;
        Ok(AdaptivePrefetch { params, sys_root: sys_root.to_path_buf(), epoch: Instant::now(), queues: Mutex::new(BTreeMap::new()) })
    }

    fn with_queue<T>(&self, worker: usize, disk: &str, f: impl FnOnce(&mut QueueControl, Duration) -> T) -> T {
        let now = self.epoch.elapsed();
        let mut queues = self.queues.lock().unwrap();
        let q = queues
            .entry(worker)
            .or_insert_with(|| QueueControl::new(self.params.clone(), now).with_device_counters(&self.sys_root));
        if !disk.is_empty() && !q.disks.contains(disk) {
            q.add_disk(disk, now);
        }
        f(q, now)
    }
}

impl PrefetchController for AdaptivePrefetch {
    fn name(&self) -> &'static str {
        "adaptive"
    }

    fn prefetch_bytes(&self, ctx: &PrefetchContext<'_>) -> u64 {
        self.with_queue(ctx.worker, ctx.disk, |q, now| q.prefetch_for(ctx.file, now))
    }

    fn observe_request(&self, obs: &RequestObservation<'_>) {
        self.with_queue(obs.worker, obs.disk, |q, now| q.observe_request(obs.file, obs.offset, obs.end, obs.resident_to, now));
    }

    fn observe_read(&self, obs: &ReadObservation<'_>) {
        let end = obs.read_end();
        self.with_queue(obs.worker, obs.disk, |q, now| {
            q.observe_read(obs.file, obs.plan.start, obs.plan.want_end, obs.read_start, end, obs.busy, now)
        });
    }

    fn wants_probe(&self, worker: usize) -> bool {
        self.with_queue(worker, "", |q, _| std::mem::take(&mut q.probe_pending))
    }

    fn observe_probe(&self, worker: usize, disk: &str, result: Option<ProbeResult>) {
        self.with_queue(worker, disk, |q, now| {
            q.probe = result;
            if let Some(r) = result {
                let to = q.set_start(r.start_bytes, now);
                tracing::info!(worker, measured = r.start_bytes, start = to, "adaptive prefetch starts at the probed size");
            }
        });
    }

    fn current_bytes(&self, disk: &str) -> u64 {
        let now = self.epoch.elapsed();
        let mut queues = self.queues.lock().unwrap();
        let q = if disk.is_empty() {
            queues.values_mut().next()
        } else {
            queues.values_mut().find(|q| q.disks.contains(disk))
        };
        match q {
            Some(q) => {
                q.advance(now);
                q.size_at(now)
            }
            None => start_size(&self.params),
        }
    }

    fn usage(&self) -> Vec<WorkerUsage> {
        let now = self.epoch.elapsed();
        let mut queues = self.queues.lock().unwrap();
        queues
            .iter_mut()
            .map(|(&worker, q)| {
                q.advance(now);
                // Up to now: what the interval in progress counted too.
                let mut total = q.usage_total;
                total.add(&q.tracker.pending());
                q.tracker.report(worker, &q.disks, total)
            })
            .collect()
    }

    fn snapshot(&self) -> Option<ControllerSnapshot> {
        let now = self.epoch.elapsed();
        let mut queues = self.queues.lock().unwrap();
        let queues = queues
            .iter_mut()
            .map(|(&worker, q)| {
                q.advance(now);
                q.snapshot(worker, now)
            })
            .collect();
        Some(ControllerSnapshot { name: "adaptive".into(), params: self.params.clone(), queues })
    }
}

#[cfg(test)]
mod tests;
