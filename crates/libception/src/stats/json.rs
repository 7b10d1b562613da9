//! The JSON document of LCP_OP_STATS: what `libception stat --json` prints
//! and the benchmark driver reads. Its format is documented in
//! docs/daemon.md; bump [`STATS_FORMAT`] when a field changes meaning or
//! disappears.
//!
//! Plain data with serde: `Stats::snapshot` fills it in from the
//! counters, the `prometheus` module renders it as Prometheus text.

use hdrhistogram::Histogram;
use crate::prefetch::{ControllerSnapshot, PrefetchController, WorkerUsage};
use serde::{Deserialize, Serialize};

/// Version of the JSON document.
pub const STATS_FORMAT: u32 = 1;

/// Static facts about the running daemon, included in every snapshot.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DaemonInfo {
    pub pid: u32,
    pub version: String,
    pub socket: String,
    pub per_disk: bool,
    pub prefetch_controller: String,
    pub prefetch_bytes: u64,
    pub max_read_bytes: u64,
    pub residency_method: String,
    pub uptime_s: f64,
    /// `--promote`: off, on or auto.
    #[serde(default)]
    pub promote: String,
    /// Uptime at which the workers began promoting (`None`: they do not).
    #[serde(default)]
    pub promoting_since_s: Option<f64>,
    /// `--reply`: when waiting clients are answered, `read` or `range`
    /// (empty in documents of daemons before it, which answered at the read's end).
    #[serde(default)]
    pub reply: String,
}

/// Summary of an hdrhistogram.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HistSummary {
    pub count: u64,
    pub min: u64,
    pub mean: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub max: u64,
}

impl HistSummary {
    pub(super) fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return HistSummary { count: 0, min: 0, mean: 0.0, p50: 0, p90: 0, p99: 0, max: 0 };
        }
        HistSummary {
            count: h.len(),
            min: h.min(),
            mean: h.mean(),
            p50: h.value_at_quantile(0.5),
            p90: h.value_at_quantile(0.9),
            p99: h.value_at_quantile(0.99),
            max: h.max(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SizeBucket {
    /// Upper bound (inclusive); the bucket holds reads of (le_bytes/2, le_bytes].
    pub le_bytes: u64,
    pub count: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TotalsSnapshot {
    pub connections_accepted: u64,
    pub connections_open: u64,
    pub connections_rejected: u64,
    pub connections_dropped_slow: u64,
    pub requests_fetch: u64,
    pub requests_check: u64,
    pub requests_stats: u64,
    pub protocol_errors: u64,
    pub bad_fd_errors: u64,
    pub cancelled_waiters: u64,
    pub cancelled_reads: u64,
    pub residency_check_failures: u64,
    /// CHECKs and FETCHes answered without residency information (untrusted peer, foreign file).
    #[serde(default)]
    pub residency_concealed: u64,
    /// The clients' `read_wait_ns` summed, including clients no longer listed.
    #[serde(default)]
    pub read_wait_ns: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerSnapshot {
    pub index: usize,
    pub reads: u64,
    pub busy_ns: u64,
    pub in_flight: i64,
    pub max_in_flight: i64,
    pub queue_length: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DiskSnapshot {
    pub name: String,
    pub devices: Vec<String>,
    pub worker: usize,
    pub requests: u64,
    pub checks: u64,
    pub resident_hits: u64,
    pub queued: u64,
    pub joined: u64,
    pub cancelled: u64,
    pub bytes_requested: u64,
    pub bytes_read: u64,
    /// Bytes read a second time from the cache to activate them (`--promote`).
    #[serde(default)]
    pub bytes_promoted: u64,
    pub reads: u64,
    pub read_errors: u64,
    pub busy_ns: u64,
    pub in_flight: i64,
    pub max_in_flight: i64,
    pub queue_length: u64,
    pub queue_length_hist: HistSummary,
    pub queue_wait_us: HistSummary,
    pub reads_by_size: Vec<SizeBucket>,
    /// The queue wait as a Prometheus histogram; not part of the JSON
    /// document, which has the summary `queue_wait_us`.
    #[serde(skip)]
    pub queue_wait_seconds: QueueWaitHistogram,
}

/// A histogram in Prometheus's shape: cumulative counts at upper bounds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueWaitHistogram {
    /// (upper bound in seconds, observations at most that long), bounds ascending.
    pub buckets: Vec<(f64, u64)>,
    pub count: u64,
    /// Sum of the observations, seconds.
    pub sum: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClientSnapshot {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
    pub comm: String,
    pub connections: u64,
    pub open_connections: u64,
    pub requests: u64,
    pub fetch: u64,
    pub check: u64,
    pub stats: u64,
    pub errors: u64,
    pub bytes_requested: u64,
    pub bytes_read: u64,
    pub resident_hits: u64,
    pub joined: u64,
    /// Nanoseconds the client's FETCHes that waited for a read spent from
    /// queueing it (or joining one) to the reply, summed: over an interval, its
    /// growth divided by the interval is the mean number of the client's
    /// threads blocked on the daemon. Absent in documents of daemons before it.
    #[serde(default)]
    pub read_wait_ns: u64,
    pub last_seen_unix_s: u64,
}

/// The JSON document of LCP_OP_STATS.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Snapshot {
    pub format: u32,
    pub daemon: DaemonInfo,
    pub totals: TotalsSnapshot,
    pub workers: Vec<WorkerSnapshot>,
    pub disks: Vec<DiskSnapshot>,
    pub clients: Vec<ClientSnapshot>,
    pub clients_total: usize,
    /// What became of the prefetched bytes per disk worker, cumulative
    /// (paper 001 Table 1; every controller).
    #[serde(default)]
    pub prefetch_usage: Vec<WorkerUsage>,
    /// The prefetch controller's own state (the adaptive controller only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<ControllerSnapshot>,
}

impl Snapshot {
    /// Adds what the prefetch controller reports: its usage and its state.
    pub fn add_controller(&mut self, c: &dyn PrefetchController) {
        self.prefetch_usage = c.usage();
        self.controller = c.snapshot();
    }

    /// What a peer the operator does not trust may see (docs/daemon.md,
    /// "Who learns what is resident"): its own uid's clients, and no count
    /// that follows from what was resident. A hit, a read, a join, a
    /// cancelled queued read, a refusal after a check, the controller's
    /// state, promotion's start, every disk's and worker's counters all
    /// move with misses.
    pub fn conceal_for(&mut self, uid: u32) {
        self.clients.retain(|c| c.uid == uid);
        for c in &mut self.clients {
            c.bytes_read = 0;
            c.resident_hits = 0;
            c.joined = 0;
            c.read_wait_ns = 0;
        }
        self.clients_total = self.clients.len();
        self.totals.cancelled_waiters = 0;
        self.totals.cancelled_reads = 0;
        self.totals.read_wait_ns = 0;
        // Others' refusals include those of peers charged after their check.
        self.totals.bad_fd_errors = 0;
        // `--promote auto` starts on the share of prefetched bytes evicted.
        self.daemon.promoting_since_s = None;
        self.workers.clear();
        self.disks.clear();
        self.prefetch_usage.clear();
        if self.controller.take().is_some() {
            // The adaptive controller's current size moves with the misses.
            self.daemon.prefetch_bytes = 0;
        }
    }
}

