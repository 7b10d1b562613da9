//! What a prefetch controller reports for the stats document: the types of
//! its `controller` part (docs/daemon.md) and the usage tally they carry.
//!
//! Plain data with serde, importing nothing else of the crate, so that the
//! controller trait (its `snapshot` method), the adaptive
//! controller that fills these in, the tracker that counts the usage and the
//! stats that render them can all depend on it without depending on each
//! other.

use libception_proto::AdaptiveParams;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the core decided at the end of an interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    /// The worker was less busy than `busy`: nothing adjusted.
    LightLoad,
    /// Busy, but no score (nothing read or nothing confirmed requested).
    NoData,
    /// The first scored interval since the controller started: measured,
    /// not stored, nothing adjusted (the cache and the streams are starting).
    WarmUp,
    /// One of the first `settle` intervals after a change of size: measured,
    /// not stored, nothing adjusted (the streams' prefetches are still
    /// moving to the new size).
    Settle,
    /// Prefetch evictions reached `evict`: target set from the eviction time.
    EvictionJump,
    /// A neighbour scored lower: move there.
    Descend,
    /// A neighbour has no score yet: try it.
    Explore,
    /// Both neighbours scored higher: stay, deflate the stored scores.
    Minimum,
    /// The size in force is below the requests' length (it reads what they
    /// ask): up to the grid size nearest to it.
    RequestFloor,
}

/// Where an interval's disk transactions and busy time came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransactionSource {
    /// Estimated: the worker's busy time, reads split at `transaction` bytes
    /// (anonymous devices; and every record written before the field existed).
    #[default]
    Estimate,
    /// The block device's own counters (`/sys/block/DEV/stat`: reads
    /// completed, io_ticks), as iostat reads them.
    Device,
}

/// One closed interval, as listed in the stats history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalRecord {
    /// Interval number, from 1.
    pub index: u64,
    /// End of the interval, seconds since the daemon started.
    pub end_s: f64,
    pub length_s: f64,
    /// Size in force during the interval, and the target decided at its end.
    pub prefetch_bytes: u64,
    pub next_bytes: u64,
    pub decision: Decision,
    pub busy_fraction: f64,
    pub reads: u64,
    pub bytes_read: u64,
    /// Disk busy ms per MiB read (for comparison; not the score's factor).
    pub disk_ms_per_mib: Option<f64>,
    /// Disk transactions and busy ms per transaction: the score's disk-time
    /// factor, from the device's counters or estimated (`transaction_source`).
    #[serde(default)]
    pub transactions: u64,
    #[serde(default)]
    pub transaction_source: TransactionSource,
    #[serde(default)]
    pub disk_ms_per_transaction: Option<f64>,
    pub miss_ratio: Option<f64>,
    pub score: Option<f64>,
    pub used_bytes: u64,
    pub evicted_bytes: u64,
    pub evicted_fraction: f64,
    pub wasted_bytes: u64,
    pub evictions: u64,
    /// Mean eviction time as discovered (upper bound), seconds.
    pub eviction_time_s: Option<f64>,
    /// Mean lower bound of the eviction time (last time the range was seen
    /// resident), and the estimate the eviction-time jump used (the middle
    /// of the bracket), seconds.
    #[serde(default)]
    pub eviction_time_lower_s: Option<f64>,
    #[serde(default)]
    pub eviction_time_estimate_s: Option<f64>,
    pub stream_rate_bps: Option<f64>,
    /// Median length of the interval's missed requests, and the request
    /// floor in force after the interval (the grid size nearest to the last
    /// median measured; 0: none yet).
    #[serde(default)]
    pub request_bytes: Option<u64>,
    #[serde(default)]
    pub floor_bytes: u64,
}

/// Sums over the ranges retired (and requests seen) since the last
/// `PrefetchTracker::take_tally` (in the tracker).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageTally {
    /// Disk bytes of the retired ranges.
    pub read_bytes: u64,
    /// Bytes known requested: confirmed parts of retired ranges, plus resident
    /// requests outside every tracked range.
    pub used_bytes: u64,
    /// Part of `used_bytes` from resident requests outside tracked ranges.
    pub untracked_hit_bytes: u64,
    /// Prefetched bytes found evicted before they were requested.
    pub evicted_bytes: u64,
    /// Ranges retired by an eviction.
    pub evictions: u64,
    /// Sum of the eviction times as discovered (read to the miss that found
    /// the range gone: upper bounds), seconds.
    pub eviction_time_sum_s: f64,
    /// Sum of the eviction times' lower bounds (read to the last time the
    /// range was seen resident), seconds.
    #[serde(default)]
    pub eviction_time_lower_sum_s: f64,
    /// Sum of the estimates: the middle of the bracket where a resident
    /// observation narrowed it, else the discovery time (all the paper's
    /// server observed), seconds.
    #[serde(default)]
    pub eviction_time_estimate_sum_s: f64,
    /// Bytes read again after they had been requested from an earlier read
    /// (paper 001's cache evictions: data evicted between two viewers).
    #[serde(default)]
    pub reread_bytes: u64,
    /// Bytes of ranges retired unconfirmed (never requested, as far as seen).
    pub wasted_bytes: u64,
    /// Ranges retired unconfirmed (aged out or pushed out).
    pub wasted_ranges: u64,
    /// Ranges retired fully used.
    pub consumed_ranges: u64,
    /// Stream-rate samples and their sum, bytes per second.
    pub rate_samples: u64,
    pub rate_sum_bps: f64,
    /// Reads not tracked because `max_ranges` ranges were already tracked.
    pub untracked_reads: u64,
    /// Prefetch sizes handed out under a bitrate scale (paper 001 section
    /// 7.4): at the size in force, and scaled down for a slower class, with
    /// the scaled ones' bytes (their mean is the slower class's size).
    #[serde(default)]
    pub full_prefetches: u64,
    #[serde(default)]
    pub scaled_prefetches: u64,
    #[serde(default)]
    pub scaled_prefetch_bytes: u64,
}

impl UsageTally {
    pub fn add(&mut self, o: &UsageTally) {
        self.read_bytes += o.read_bytes;
        self.used_bytes += o.used_bytes;
        self.untracked_hit_bytes += o.untracked_hit_bytes;
        self.evicted_bytes += o.evicted_bytes;
        self.evictions += o.evictions;
        self.eviction_time_sum_s += o.eviction_time_sum_s;
        self.eviction_time_lower_sum_s += o.eviction_time_lower_sum_s;
        self.eviction_time_estimate_sum_s += o.eviction_time_estimate_sum_s;
        self.reread_bytes += o.reread_bytes;
        self.wasted_bytes += o.wasted_bytes;
        self.wasted_ranges += o.wasted_ranges;
        self.consumed_ranges += o.consumed_ranges;
        self.rate_samples += o.rate_samples;
        self.rate_sum_bps += o.rate_sum_bps;
        self.untracked_reads += o.untracked_reads;
        self.full_prefetches += o.full_prefetches;
        self.scaled_prefetches += o.scaled_prefetches;
        self.scaled_prefetch_bytes += o.scaled_prefetch_bytes;
    }

    /// Disk bytes / requested bytes (paper 001's cache-miss ratio), if anything
    /// was confirmed requested.
    pub fn miss_ratio(&self) -> Option<f64> {
        (self.used_bytes > 0).then(|| self.read_bytes as f64 / self.used_bytes as f64)
    }

    /// Mean eviction time as discovered (an upper bound), seconds.
    pub fn mean_eviction_time_s(&self) -> Option<f64> {
        (self.evictions > 0).then(|| self.eviction_time_sum_s / self.evictions as f64)
    }

    /// Mean lower bound of the eviction time, seconds.
    pub fn mean_eviction_time_lower_s(&self) -> Option<f64> {
        (self.evictions > 0).then(|| self.eviction_time_lower_sum_s / self.evictions as f64)
    }

    /// Mean estimate of the eviction time, seconds (see the tracker).
    pub fn mean_eviction_time_estimate_s(&self) -> Option<f64> {
        (self.evictions > 0).then(|| self.eviction_time_estimate_sum_s / self.evictions as f64)
    }

    /// Mean stream rate, bytes per second.
    pub fn mean_rate_bps(&self) -> Option<f64> {
        (self.rate_samples > 0).then(|| self.rate_sum_bps / self.rate_samples as f64)
    }
}

/// A stored score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeScore {
    pub bytes: u64,
    pub score: f64,
}

/// The state of one disk worker's controller, for the stats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueSnapshot {
    pub worker: usize,
    /// Disk queues this worker has served.
    pub disks: Vec<String>,
    /// Size in force now, and the size it is moving to.
    pub prefetch_bytes: u64,
    pub target_bytes: u64,
    /// `measuring` (target in force) or `ramping` (moving towards it), since when.
    pub phase: String,
    pub phase_since_s: f64,
    /// Intervals closed, and how many ended in each decision.
    pub intervals: u64,
    pub decisions: BTreeMap<String, u64>,
    /// Score of the last closed interval.
    pub score: Option<f64>,
    pub last_decision: Option<IntervalRecord>,
    /// Stored (possibly deflated) score per size.
    pub scores: Vec<SizeScore>,
    pub tracked_ranges: u64,
    /// Cumulative usage since start (paper 001 Table 1's evicted and wasted bytes).
    pub usage: UsageTally,
    /// What the start-up disk probe measured (absent: not run or no result).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeSnapshot>,
    /// The last `history` intervals, oldest first.
    pub history: Vec<IntervalRecord>,
}

/// What the probe's reads spanned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProbeSource {
    /// The file the worker was about to read.
    #[default]
    File,
    /// The whole block device, read with O_DIRECT.
    Device,
}

/// The start-up disk probe's measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeSnapshot {
    /// Mean time of a small read (seek + rotation), ms.
    pub access_ms: f64,
    /// Transfer rate, bytes per second.
    pub transfer_bps: f64,
    /// access x rate: the start size before rounding to the step.
    pub start_bytes: u64,
    /// What the reads spanned: the whole device or the file (older documents: file).
    #[serde(default)]
    pub source: ProbeSource,
}

/// What became of one disk worker's prefetched bytes, cumulative since start
/// (paper 001 Table 1): every controller reports it, the stats document's
/// `prefetch_usage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerUsage {
    pub worker: usize,
    /// Disk queues this worker has served.
    pub disks: Vec<String>,
    /// Prefetched ranges whose fate is still open.
    pub tracked_ranges: u64,
    pub usage: UsageTally,
}

/// The controller's part of the stats document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControllerSnapshot {
    pub name: String,
    pub params: AdaptiveParams,
    pub queues: Vec<QueueSnapshot>,
}

