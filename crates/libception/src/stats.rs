//! The daemon's counters and their JSON / Prometheus forms.
//!
//! Counters live in atomics (and two hdrhistograms per disk behind a mutex
//! taken once per queued request and once per read) so that the receptionist
//! and the disk workers update them without contending on one lock.
//! [`Stats::snapshot`] turns them into [`Snapshot`], the JSON document that
//! LCP_OP_STATS returns and `libception stat` prints; its format is documented
//! in docs/daemon.md and is what the benchmark driver reads. Bump
//! [`STATS_FORMAT`] when a field changes meaning or disappears.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Version of the JSON document.
pub const STATS_FORMAT: u32 = 1;
/// At most this many clients are kept; the oldest disconnected ones go first.
const MAX_CLIENTS_KEPT: usize = 4096;
/// At most this many clients are listed in a snapshot (busiest first), so the
/// JSON always fits in one datagram.
pub const MAX_CLIENTS_LISTED: usize = 256;
const MAX_QUEUE_WAIT_US: u64 = 3_600_000_000;
const MAX_QUEUE_LENGTH: u64 = 10_000_000;

fn add(c: &AtomicU64, v: u64) {
    c.fetch_add(v, Relaxed);
}

/// Daemon-wide counters.
#[derive(Default)]
pub struct Totals {
    pub connections_accepted: AtomicU64,
    pub connections_open: AtomicI64,
    pub connections_rejected: AtomicU64,
    pub connections_dropped_slow: AtomicU64,
    pub requests_fetch: AtomicU64,
    pub requests_check: AtomicU64,
    pub requests_stats: AtomicU64,
    pub protocol_errors: AtomicU64,
    pub bad_fd_errors: AtomicU64,
    pub cancelled_waiters: AtomicU64,
    pub cancelled_reads: AtomicU64,
    pub residency_check_failures: AtomicU64,
}

/// Per-disk counters. `requests` counts FETCHes for files on the disk;
/// each one is answered as a resident hit, joins an existing read, or queues
/// a new read (`queued`).
pub struct DiskStats {
    pub name: String,
    pub worker: usize,
    devices: Mutex<Vec<String>>,
    pub requests: AtomicU64,
    pub checks: AtomicU64,
    pub resident_hits: AtomicU64,
    pub queued: AtomicU64,
    pub joined: AtomicU64,
    pub cancelled: AtomicU64,
    pub bytes_requested: AtomicU64,
    pub bytes_read: AtomicU64,
    pub reads: AtomicU64,
    pub read_errors: AtomicU64,
    pub busy_ns: AtomicU64,
    pub in_flight: AtomicI64,
    pub max_in_flight: AtomicI64,
    pub queue_length: AtomicI64,
    hists: Mutex<DiskHists>,
}

struct DiskHists {
    /// Reads waiting in the worker's queue (all disks of that worker) when a
    /// read for this disk was queued, not counting it.
    queue_length: Histogram<u64>,
    /// Microseconds from queueing a read to its start.
    queue_wait_us: Histogram<u64>,
    /// Reads by size: index i counts reads of (2^(i-1), 2^i] bytes.
    read_size_log2: [u64; 65],
}

impl DiskStats {
    fn new(name: String, worker: usize) -> Self {
        DiskStats {
            name,
            worker,
            devices: Mutex::new(Vec::new()),
            requests: AtomicU64::new(0),
            checks: AtomicU64::new(0),
            resident_hits: AtomicU64::new(0),
            queued: AtomicU64::new(0),
            joined: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            bytes_requested: AtomicU64::new(0),
            bytes_read: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            read_errors: AtomicU64::new(0),
            busy_ns: AtomicU64::new(0),
            in_flight: AtomicI64::new(0),
            max_in_flight: AtomicI64::new(0),
            queue_length: AtomicI64::new(0),
            hists: Mutex::new(DiskHists {
                queue_length: Histogram::new_with_bounds(1, MAX_QUEUE_LENGTH, 3).expect("valid bounds"),
                queue_wait_us: Histogram::new_with_bounds(1, MAX_QUEUE_WAIT_US, 3).expect("valid bounds"),
                read_size_log2: [0; 65],
            }),
        }
    }

    pub fn add_device(&self, dev: String) {
        let mut d = self.devices.lock().unwrap();
        if !d.contains(&dev) {
            d.push(dev);
        }
    }

    /// A new read was queued behind `ahead` others.
    pub fn record_queued(&self, ahead: usize) {
        add(&self.queued, 1);
        self.queue_length.fetch_add(1, Relaxed);
        self.hists.lock().unwrap().queue_length.saturating_record(ahead as u64);
    }

    /// A queued read left the queue (started or cancelled).
    pub fn record_dequeued(&self) {
        self.queue_length.fetch_sub(1, Relaxed);
    }

    /// A read starts; returns the in-flight count including it.
    pub fn begin_read(&self, queue_wait: Duration) -> i64 {
        let now = self.in_flight.fetch_add(1, Relaxed) + 1;
        self.max_in_flight.fetch_max(now, Relaxed);
        self.hists
            .lock()
            .unwrap()
            .queue_wait_us
            .saturating_record(queue_wait.as_micros().min(u64::MAX as u128) as u64);
        now
    }

    /// A read ended after `busy`, having read `bytes`.
    pub fn end_read(&self, busy: Duration, bytes: u64, ok: bool) {
        self.in_flight.fetch_sub(1, Relaxed);
        add(&self.busy_ns, busy.as_nanos() as u64);
        add(&self.bytes_read, bytes);
        if !ok {
            add(&self.read_errors, 1);
        }
        if bytes > 0 {
            add(&self.reads, 1);
            let bucket = 64 - (bytes - 1).leading_zeros() as usize;
            self.hists.lock().unwrap().read_size_log2[bucket] += 1;
        }
    }
}

/// Per-worker counters; `max_in_flight` is the serialization guarantee.
pub struct WorkerStats {
    pub index: usize,
    pub reads: AtomicU64,
    pub busy_ns: AtomicU64,
    pub in_flight: AtomicI64,
    pub max_in_flight: AtomicI64,
    pub queue_length: AtomicI64,
}

impl WorkerStats {
    pub fn new(index: usize) -> Self {
        WorkerStats {
            index,
            reads: AtomicU64::new(0),
            busy_ns: AtomicU64::new(0),
            in_flight: AtomicI64::new(0),
            max_in_flight: AtomicI64::new(0),
            queue_length: AtomicI64::new(0),
        }
    }
}

/// Per-client (per process) counters.
pub struct ClientStats {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
    pub comm: String,
    pub connections: AtomicU64,
    pub open_connections: AtomicI64,
    pub fetch: AtomicU64,
    pub check: AtomicU64,
    pub stats: AtomicU64,
    pub errors: AtomicU64,
    pub bytes_requested: AtomicU64,
    pub bytes_read: AtomicU64,
    pub resident_hits: AtomicU64,
    pub joined: AtomicU64,
    last_seen_s: AtomicU64,
}

impl ClientStats {
    pub fn touch(&self) {
        self.last_seen_s.store(unix_now_s(), Relaxed);
    }
}

fn unix_now_s() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

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
}

/// All counters of the daemon.
pub struct Stats {
    started: Instant,
    pub totals: Totals,
    disks: RwLock<Vec<Arc<DiskStats>>>,
    workers: RwLock<Vec<Arc<WorkerStats>>>,
    clients: Mutex<HashMap<i32, Arc<ClientStats>>>,
}

impl Default for Stats {
    fn default() -> Self {
        Stats::new()
    }
}

impl Stats {
    pub fn new() -> Self {
        Stats {
            started: Instant::now(),
            totals: Totals::default(),
            disks: RwLock::new(Vec::new()),
            workers: RwLock::new(Vec::new()),
            clients: Mutex::new(HashMap::new()),
        }
    }

    pub fn add_disk(&self, name: String, worker: usize) -> Arc<DiskStats> {
        let d = Arc::new(DiskStats::new(name, worker));
        self.disks.write().unwrap().push(d.clone());
        d
    }

    pub fn add_worker(&self, index: usize) -> Arc<WorkerStats> {
        let w = Arc::new(WorkerStats::new(index));
        self.workers.write().unwrap().push(w.clone());
        w
    }

    /// The client record for a peer process, created on first sight.
    pub fn client(&self, pid: i32, uid: u32, gid: u32) -> Arc<ClientStats> {
        let mut clients = self.clients.lock().unwrap();
        if let Some(c) = clients.get(&pid) {
            if c.uid == uid && c.gid == gid {
                return c.clone();
            }
        }
        if clients.len() >= MAX_CLIENTS_KEPT {
            let oldest = clients
                .values()
                .filter(|c| c.open_connections.load(Relaxed) <= 0)
                .min_by_key(|c| c.last_seen_s.load(Relaxed))
                .map(|c| c.pid);
            if let Some(pid) = oldest {
                clients.remove(&pid);
            }
        }
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|s| s.trim_end().to_string())
            .unwrap_or_default();
        let c = Arc::new(ClientStats {
            pid,
            uid,
            gid,
            comm,
            connections: AtomicU64::new(0),
            open_connections: AtomicI64::new(0),
            fetch: AtomicU64::new(0),
            check: AtomicU64::new(0),
            stats: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            bytes_requested: AtomicU64::new(0),
            bytes_read: AtomicU64::new(0),
            resident_hits: AtomicU64::new(0),
            joined: AtomicU64::new(0),
            last_seen_s: AtomicU64::new(unix_now_s()),
        });
        clients.insert(pid, c.clone());
        c
    }

    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// A consistent-enough copy of every counter (each value is read once;
    /// values change concurrently, so sums across fields may differ by the
    /// requests in progress).
    pub fn snapshot(&self, mut info: DaemonInfo) -> Snapshot {
        info.uptime_s = self.uptime().as_secs_f64();
        let t = &self.totals;
        let ld = |a: &AtomicU64| a.load(Relaxed);
        let totals = TotalsSnapshot {
            connections_accepted: ld(&t.connections_accepted),
            connections_open: t.connections_open.load(Relaxed).max(0) as u64,
            connections_rejected: ld(&t.connections_rejected),
            connections_dropped_slow: ld(&t.connections_dropped_slow),
            requests_fetch: ld(&t.requests_fetch),
            requests_check: ld(&t.requests_check),
            requests_stats: ld(&t.requests_stats),
            protocol_errors: ld(&t.protocol_errors),
            bad_fd_errors: ld(&t.bad_fd_errors),
            cancelled_waiters: ld(&t.cancelled_waiters),
            cancelled_reads: ld(&t.cancelled_reads),
            residency_check_failures: ld(&t.residency_check_failures),
        };
        let workers = self
            .workers
            .read()
            .unwrap()
            .iter()
            .map(|w| WorkerSnapshot {
                index: w.index,
                reads: ld(&w.reads),
                busy_ns: ld(&w.busy_ns),
                in_flight: w.in_flight.load(Relaxed),
                max_in_flight: w.max_in_flight.load(Relaxed),
                queue_length: w.queue_length.load(Relaxed).max(0) as u64,
            })
            .collect();
        let disks = self
            .disks
            .read()
            .unwrap()
            .iter()
            .map(|d| {
                let h = d.hists.lock().unwrap();
                let reads_by_size = h
                    .read_size_log2
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| **n > 0)
                    .map(|(i, n)| SizeBucket {
                        le_bytes: if i == 64 { u64::MAX } else { 1u64 << i },
                        count: *n,
                    })
                    .collect();
                DiskSnapshot {
                    name: d.name.clone(),
                    devices: d.devices.lock().unwrap().clone(),
                    worker: d.worker,
                    requests: ld(&d.requests),
                    checks: ld(&d.checks),
                    resident_hits: ld(&d.resident_hits),
                    queued: ld(&d.queued),
                    joined: ld(&d.joined),
                    cancelled: ld(&d.cancelled),
                    bytes_requested: ld(&d.bytes_requested),
                    bytes_read: ld(&d.bytes_read),
                    reads: ld(&d.reads),
                    read_errors: ld(&d.read_errors),
                    busy_ns: ld(&d.busy_ns),
                    in_flight: d.in_flight.load(Relaxed),
                    max_in_flight: d.max_in_flight.load(Relaxed),
                    queue_length: d.queue_length.load(Relaxed).max(0) as u64,
                    queue_length_hist: HistSummary::of(&h.queue_length),
                    queue_wait_us: HistSummary::of(&h.queue_wait_us),
                    reads_by_size,
                }
            })
            .collect();
        let clients_all: Vec<Arc<ClientStats>> = self.clients.lock().unwrap().values().cloned().collect();
        let clients_total = clients_all.len();
        let mut clients: Vec<ClientSnapshot> = clients_all
            .iter()
            .map(|c| ClientSnapshot {
                pid: c.pid,
                uid: c.uid,
                gid: c.gid,
                comm: c.comm.clone(),
                connections: ld(&c.connections),
                open_connections: c.open_connections.load(Relaxed).max(0) as u64,
                requests: ld(&c.fetch) + ld(&c.check) + ld(&c.stats),
                fetch: ld(&c.fetch),
                check: ld(&c.check),
                stats: ld(&c.stats),
                errors: ld(&c.errors),
                bytes_requested: ld(&c.bytes_requested),
                bytes_read: ld(&c.bytes_read),
                resident_hits: ld(&c.resident_hits),
                joined: ld(&c.joined),
                last_seen_unix_s: c.last_seen_s.load(Relaxed),
            })
            .collect();
        clients.sort_by(|a, b| b.requests.cmp(&a.requests).then(a.pid.cmp(&b.pid)));
        clients.truncate(MAX_CLIENTS_LISTED);
        Snapshot {
            format: STATS_FORMAT,
            daemon: info,
            totals,
            workers,
            disks,
            clients,
            clients_total,
            controller: None,
        }
    }
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
    fn of(h: &Histogram<u64>) -> Self {
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
    pub reads: u64,
    pub read_errors: u64,
    pub busy_ns: u64,
    pub in_flight: i64,
    pub max_in_flight: i64,
    pub queue_length: u64,
    pub queue_length_hist: HistSummary,
    pub queue_wait_us: HistSummary,
    pub reads_by_size: Vec<SizeBucket>,
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
    /// The prefetch controller's own state (the adaptive controller only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<crate::prefetch::ControllerSnapshot>,
}

impl Snapshot {
    /// Prometheus text exposition (format 0.0.4).
    pub fn to_prometheus(&self) -> String {
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, rows: Vec<(String, String)>| {
            out.push_str(&format!("# HELP libception_{name} {help}\n# TYPE libception_{name} {kind}\n"));
            for (labels, value) in rows {
                out.push_str(&format!("libception_{name}{labels} {value}\n"));
            }
        };
        let t = &self.totals;
        metric("uptime_seconds", "gauge", "Seconds since the daemon started.", vec![(String::new(), format!("{}", self.daemon.uptime_s))]);
        metric("prefetch_bytes", "gauge", "Prefetch size in force.", vec![(String::new(), self.daemon.prefetch_bytes.to_string())]);
        metric("connections_open", "gauge", "Open client connections.", vec![(String::new(), t.connections_open.to_string())]);
        let totals: BTreeMap<&str, u64> = BTreeMap::from([
            ("connections_accepted_total", t.connections_accepted),
            ("connections_rejected_total", t.connections_rejected),
            ("connections_dropped_slow_total", t.connections_dropped_slow),
            ("protocol_errors_total", t.protocol_errors),
            ("bad_fd_errors_total", t.bad_fd_errors),
            ("cancelled_waiters_total", t.cancelled_waiters),
        ]);
        for (name, v) in totals {
            metric(name, "counter", "Daemon-wide counter (see docs/daemon.md).", vec![(String::new(), v.to_string())]);
        }
        metric(
            "requests_total",
            "counter",
            "Requests by op.",
            vec![
                ("{op=\"fetch\"}".into(), t.requests_fetch.to_string()),
                ("{op=\"check\"}".into(), t.requests_check.to_string()),
                ("{op=\"stats\"}".into(), t.requests_stats.to_string()),
            ],
        );
        type DiskField = fn(&DiskSnapshot) -> String;
        let per_disk: [(&str, &str, &str, DiskField); 12] = [
            ("disk_requests_total", "counter", "FETCH requests for files on the disk.", |d| d.requests.to_string()),
            ("disk_resident_hits_total", "counter", "FETCHes answered as already resident.", |d| d.resident_hits.to_string()),
            ("disk_queued_total", "counter", "Reads queued.", |d| d.queued.to_string()),
            ("disk_joined_total", "counter", "FETCHes that joined a queued or in-flight read.", |d| d.joined.to_string()),
            ("disk_bytes_requested_total", "counter", "Bytes clients asked for.", |d| d.bytes_requested.to_string()),
            ("disk_bytes_read_total", "counter", "Bytes the daemon read.", |d| d.bytes_read.to_string()),
            ("disk_reads_total", "counter", "Reads done.", |d| d.reads.to_string()),
            ("disk_read_errors_total", "counter", "Reads that failed.", |d| d.read_errors.to_string()),
            ("disk_busy_seconds_total", "counter", "Time spent reading.", |d| format!("{}", d.busy_ns as f64 / 1e9)),
            ("disk_queue_length", "gauge", "Reads waiting now.", |d| d.queue_length.to_string()),
            ("disk_max_in_flight", "gauge", "Most reads ever in flight at once (1 = serialized).", |d| d.max_in_flight.to_string()),
            ("disk_queue_wait_p99_microseconds", "gauge", "99th percentile queue wait.", |d| d.queue_wait_us.p99.to_string()),
        ];
        for (name, kind, help, f) in per_disk {
            let rows = self
                .disks
                .iter()
                .map(|d| (format!("{{disk=\"{}\"}}", d.name.replace('"', "")), f(d)))
                .collect();
            metric(name, kind, help, rows);
        }
        if let Some(c) = &self.controller {
            c.write_prometheus(&mut metric);
        }
        out
    }
}
