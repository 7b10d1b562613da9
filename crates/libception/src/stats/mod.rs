//! The daemon's counters, counted as events.
//!
//! The receptionist, the connections and the disk workers say what happened
//! (`on_request`, `on_resident_hit`, `on_queued`, `begin_read`, ...) and the
//! methods here decide which counters that moves, so the protocol code reads
//! as the protocol and all counting lives in this file.
//!
//! Counters live in atomics (and two hdrhistograms per disk behind a mutex
//! taken once per queued request and once per read) so that the receptionist
//! and the disk workers update them without contending on one lock.
//! [`Stats::snapshot`] turns them into [`Snapshot`], the JSON document of
//! [`json`]; [`prometheus`] renders the same snapshot as Prometheus text.

mod json;
mod prometheus;

pub use json::{
    ClientSnapshot, DaemonInfo, DiskSnapshot, HistSummary, QueueWaitHistogram, SizeBucket, Snapshot, TotalsSnapshot,
    WorkerSnapshot, STATS_FORMAT,
};
use hdrhistogram::Histogram;
use libception_proto::Op;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// At most this many clients are kept; the oldest disconnected ones go first.
const MAX_CLIENTS_KEPT: usize = 4096;
/// At most this many clients are listed in a snapshot (busiest first), so the
/// JSON always fits in one datagram.
pub const MAX_CLIENTS_LISTED: usize = 256;
const MAX_QUEUE_WAIT_US: u64 = 3_600_000_000;
const MAX_QUEUE_LENGTH: u64 = 10_000_000;
/// Upper bounds of the Prometheus queue-wait histogram, in seconds.
const QUEUE_WAIT_BUCKETS_S: [f64; 12] = [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0];

fn add(c: &AtomicU64, v: u64) {
    c.fetch_add(v, Relaxed);
}

fn nanos(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

/// `Snap { field: src.field.load(), ..., rest }`: a snapshot struct whose
/// listed fields are the same-named counters of `src`, each read once.
macro_rules! load {
    ($snap:ident from $src:expr; $($field:ident),+ ; $($rest:tt)*) => {
        $snap { $($field: $src.$field.load(Relaxed),)+ $($rest)* }
    };
}

/// Daemon-wide counters.
#[derive(Default)]
pub struct Totals {
    connections_accepted: AtomicU64,
    connections_open: AtomicI64,
    connections_rejected: AtomicU64,
    connections_dropped_slow: AtomicU64,
    requests_fetch: AtomicU64,
    requests_check: AtomicU64,
    requests_stats: AtomicU64,
    protocol_errors: AtomicU64,
    bad_fd_errors: AtomicU64,
    cancelled_waiters: AtomicU64,
    cancelled_reads: AtomicU64,
    residency_check_failures: AtomicU64,
    residency_concealed: AtomicU64,
    read_wait_ns: AtomicU64,
}

/// Per-disk counters. `requests` counts FETCHes for files on the disk;
/// each one is answered as a resident hit, joins an existing read, or queues
/// a new read (`queued`).
pub struct DiskStats {
    pub name: String,
    pub worker: usize,
    devices: Mutex<Vec<String>>,
    requests: AtomicU64,
    checks: AtomicU64,
    resident_hits: AtomicU64,
    queued: AtomicU64,
    joined: AtomicU64,
    cancelled: AtomicU64,
    bytes_requested: AtomicU64,
    bytes_read: AtomicU64,
    bytes_promoted: AtomicU64,
    reads: AtomicU64,
    read_errors: AtomicU64,
    busy_ns: AtomicU64,
    queue_wait_ns: AtomicU64,
    in_flight: AtomicI64,
    max_in_flight: AtomicI64,
    queue_length: AtomicI64,
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
            bytes_promoted: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            read_errors: AtomicU64::new(0),
            busy_ns: AtomicU64::new(0),
            queue_wait_ns: AtomicU64::new(0),
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

    /// A device (`major:minor`) was found to live on this disk.
    pub fn add_device(&self, dev: String) {
        let mut d = self.devices.lock().unwrap();
        if !d.contains(&dev) {
            d.push(dev);
        }
    }

    /// A CHECK for a file on this disk.
    pub fn on_check(&self) {
        add(&self.checks, 1);
    }

    /// A FETCH for a file on this disk.
    pub fn on_fetch(&self) {
        add(&self.requests, 1);
    }

    /// `client` asked for `bytes` of a file on this disk that a read may
    /// have to bring in.
    pub fn on_requested(&self, client: &ClientStats, bytes: u64) {
        add(&self.bytes_requested, bytes);
        add(&client.bytes_requested, bytes);
    }

    /// A FETCH of `client` was answered as already resident.
    pub fn on_resident_hit(&self, client: &ClientStats) {
        add(&self.resident_hits, 1);
        add(&client.resident_hits, 1);
    }

    /// A FETCH of `client` joined a queued or in-flight read.
    pub fn on_joined(&self, client: &ClientStats) {
        add(&self.joined, 1);
        add(&client.joined, 1);
    }

    /// A new read was queued behind `ahead` others.
    pub fn on_queued(&self, ahead: usize) {
        add(&self.queued, 1);
        self.queue_length.fetch_add(1, Relaxed);
        self.hists.lock().unwrap().queue_length.saturating_record(ahead as u64);
    }

    /// A queued read left the queue to start.
    pub fn on_dequeued(&self) {
        self.queue_length.fetch_sub(1, Relaxed);
    }

    /// A queued read was dropped because every client waiting for it left.
    pub fn on_cancelled(&self) {
        self.on_dequeued();
        add(&self.cancelled, 1);
    }

    /// A read starts after `queue_wait` in the queue.
    pub fn begin_read(&self, queue_wait: Duration) {
        let now = self.in_flight.fetch_add(1, Relaxed) + 1;
        self.max_in_flight.fetch_max(now, Relaxed);
        add(&self.queue_wait_ns, nanos(queue_wait));
        self.hists
            .lock()
            .unwrap()
            .queue_wait_us
            .saturating_record(queue_wait.as_micros().min(u64::MAX as u128) as u64);
    }

    /// A read ended after `busy`, having read `bytes`.
    pub fn end_read(&self, busy: Duration, bytes: u64, ok: bool) {
        self.in_flight.fetch_sub(1, Relaxed);
        add(&self.busy_ns, nanos(busy));
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

    /// `bytes` of a read were read again from the cache (promotion).
    pub fn on_promoted(&self, bytes: u64) {
        add(&self.bytes_promoted, bytes);
    }

    fn snapshot(&self) -> DiskSnapshot {
        let h = self.hists.lock().unwrap();
        let reads_by_size = h
            .read_size_log2
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| SizeBucket { le_bytes: if i == 64 { u64::MAX } else { 1u64 << i }, count: *n })
            .collect();
        let queue_wait = &h.queue_wait_us;
        let queue_wait_seconds = QueueWaitHistogram {
            buckets: QUEUE_WAIT_BUCKETS_S
                .iter()
                .map(|&le| (le, if queue_wait.is_empty() { 0 } else { queue_wait.count_between(0, (le * 1e6) as u64) }))
                .collect(),
            count: queue_wait.len(),
            sum: self.queue_wait_ns.load(Relaxed) as f64 / 1e9,
        };
        load!(DiskSnapshot from self;
            requests, checks, resident_hits, queued, joined, cancelled, bytes_requested, bytes_read, bytes_promoted, reads,
            read_errors, busy_ns, in_flight, max_in_flight;
            name: self.name.clone(),
            devices: self.devices.lock().unwrap().clone(),
            worker: self.worker,
            queue_length: self.queue_length.load(Relaxed).max(0) as u64,
            queue_length_hist: HistSummary::of(&h.queue_length),
            queue_wait_us: HistSummary::of(queue_wait),
            reads_by_size,
            queue_wait_seconds,
        )
    }
}

/// Per-worker counters; `max_in_flight` is the serialization guarantee.
pub struct WorkerStats {
    pub index: usize,
    reads: AtomicU64,
    busy_ns: AtomicU64,
    in_flight: AtomicI64,
    max_in_flight: AtomicI64,
    queue_length: AtomicI64,
}

impl WorkerStats {
    fn new(index: usize) -> Self {
        WorkerStats {
            index,
            reads: AtomicU64::new(0),
            busy_ns: AtomicU64::new(0),
            in_flight: AtomicI64::new(0),
            max_in_flight: AtomicI64::new(0),
            queue_length: AtomicI64::new(0),
        }
    }

    /// A read joined the worker's queue.
    pub fn on_queued(&self) {
        self.queue_length.fetch_add(1, Relaxed);
    }

    /// A read left the queue (started or cancelled).
    pub fn on_dequeued(&self) {
        self.queue_length.fetch_sub(1, Relaxed);
    }

    /// Reads waiting now.
    pub fn queue_length(&self) -> usize {
        self.queue_length.load(Relaxed).max(0) as usize
    }

    /// A read starts.
    pub fn begin_read(&self) {
        let now = self.in_flight.fetch_add(1, Relaxed) + 1;
        self.max_in_flight.fetch_max(now, Relaxed);
    }

    /// A read ended after `busy`, having read `bytes`.
    pub fn end_read(&self, busy: Duration, bytes: u64) {
        self.in_flight.fetch_sub(1, Relaxed);
        add(&self.busy_ns, nanos(busy));
        if bytes > 0 {
            add(&self.reads, 1);
        }
    }

    fn snapshot(&self) -> WorkerSnapshot {
        load!(WorkerSnapshot from self; reads, busy_ns, in_flight, max_in_flight;
            index: self.index,
            queue_length: self.queue_length() as u64,
        )
    }
}

/// Per-client (per process) counters.
pub struct ClientStats {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
    pub comm: String,
    connections: AtomicU64,
    open_connections: AtomicI64,
    fetch: AtomicU64,
    check: AtomicU64,
    stats: AtomicU64,
    errors: AtomicU64,
    bytes_requested: AtomicU64,
    bytes_read: AtomicU64,
    resident_hits: AtomicU64,
    joined: AtomicU64,
    read_wait_ns: AtomicU64,
    last_seen_s: AtomicU64,
}

impl ClientStats {
    /// The client was heard from.
    pub fn touch(&self) {
        self.last_seen_s.store(unix_now_s(), Relaxed);
    }

    /// One of the client's requests was refused with an error reply.
    pub fn on_refused(&self) {
        add(&self.errors, 1);
    }

    /// A read the client asked for first brought in `bytes`.
    pub fn on_read(&self, bytes: u64) {
        add(&self.bytes_read, bytes);
    }

    fn snapshot(&self) -> ClientSnapshot {
        let s = load!(ClientSnapshot from self;
            connections, fetch, check, stats, errors, bytes_requested, bytes_read, resident_hits, joined, read_wait_ns;
            pid: self.pid,
            uid: self.uid,
            gid: self.gid,
            comm: self.comm.clone(),
            open_connections: self.open_connections.load(Relaxed).max(0) as u64,
            requests: 0,
            last_seen_unix_s: self.last_seen_s.load(Relaxed),
        );
        ClientSnapshot { requests: s.fetch + s.check + s.stats, ..s }
    }
}

fn unix_now_s() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// All counters of the daemon.
pub struct Stats {
    started: Instant,
    totals: Totals,
    disks: RwLock<Vec<Arc<DiskStats>>>,
    workers: RwLock<Vec<Arc<WorkerStats>>>,
    clients: Mutex<HashMap<i32, Arc<ClientStats>>>,
    /// `--promote`'s mode and whether the workers promote now, with the
    /// uptime at which they started (`promotion.rs`).
    promotion: Mutex<(String, Option<f64>)>,
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
            promotion: Mutex::new(("off".to_string(), None)),
        }
    }

    /// Records `--promote`'s mode and whether the workers promote (the
    /// uptime of the first call that says they do is kept).
    pub fn set_promotion(&self, mode: &str, active: bool) {
        let mut p = self.promotion.lock().unwrap();
        p.0 = mode.to_string();
        p.1 = if active { p.1.or(Some(self.uptime().as_secs_f64())) } else { None };
    }

    /// The mode and whether the workers promote now.
    #[cfg(test)]
    pub fn promotion(&self) -> (String, bool) {
        let p = self.promotion.lock().unwrap();
        (p.0.clone(), p.1.is_some())
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
            read_wait_ns: AtomicU64::new(0),
            last_seen_s: AtomicU64::new(unix_now_s()),
        });
        clients.insert(pid, c.clone());
        c
    }

    /// A FETCH of `client` that waited for a read (queued or joined) was
    /// answered `waited` after it did so: the time one of the client's
    /// threads spent blocked on the daemon.
    pub fn on_answered(&self, client: &ClientStats, waited: Duration) {
        add(&self.totals.read_wait_ns, nanos(waited));
        add(&client.read_wait_ns, nanos(waited));
    }

    /// A connection was turned away (no credentials, or not on the allow lists).
    pub fn on_rejected(&self) {
        add(&self.totals.connections_rejected, 1);
    }

    /// A connection of `client` was accepted and is being served.
    pub fn on_accepted(&self, client: &ClientStats) {
        add(&self.totals.connections_accepted, 1);
        self.totals.connections_open.fetch_add(1, Relaxed);
        add(&client.connections, 1);
        client.open_connections.fetch_add(1, Relaxed);
        client.touch();
    }

    /// A connection of `client` closed; `waiters` of its requests and
    /// `reads` only it waited for were cancelled.
    pub fn on_closed(&self, client: &ClientStats, waiters: usize, reads: usize) {
        add(&self.totals.cancelled_waiters, waiters as u64);
        add(&self.totals.cancelled_reads, reads as u64);
        self.totals.connections_open.fetch_sub(1, Relaxed);
        client.open_connections.fetch_sub(1, Relaxed);
    }

    /// A connection was dropped because it did not read its replies.
    pub fn on_dropped_slow(&self) {
        add(&self.totals.connections_dropped_slow, 1);
    }

    /// A datagram that is not a valid request.
    pub fn on_protocol_error(&self) {
        add(&self.totals.protocol_errors, 1);
    }

    /// A valid request of `client`.
    pub fn on_request(&self, client: &ClientStats, op: Op) {
        let (total, own) = match op {
            Op::Fetch => (&self.totals.requests_fetch, &client.fetch),
            Op::Check => (&self.totals.requests_check, &client.check),
            Op::Stats => (&self.totals.requests_stats, &client.stats),
        };
        add(total, 1);
        add(own, 1);
    }

    /// A request came with the wrong descriptors, or one that cannot be served.
    pub fn on_bad_fd(&self) {
        add(&self.totals.bad_fd_errors, 1);
    }

    /// The daemon could not check residency (the range counts as not resident).
    pub fn on_residency_check_failed(&self) {
        add(&self.totals.residency_check_failures, 1);
    }

    /// A CHECK or FETCH answered without residency information: the peer
    /// may not learn it (`trust.rs`).
    pub fn on_concealed(&self) {
        add(&self.totals.residency_concealed, 1);
    }

    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// A consistent-enough copy of every counter (each value is read once;
    /// values change concurrently, so sums across fields may differ by the
    /// requests in progress).
    pub fn snapshot(&self, mut info: DaemonInfo) -> Snapshot {
        info.uptime_s = self.uptime().as_secs_f64();
        (info.promote, info.promoting_since_s) = self.promotion.lock().unwrap().clone();
        let t = &self.totals;
        let totals = load!(TotalsSnapshot from t;
            connections_accepted, connections_rejected, connections_dropped_slow, requests_fetch, requests_check,
            requests_stats, protocol_errors, bad_fd_errors, cancelled_waiters, cancelled_reads, residency_check_failures,
            residency_concealed, read_wait_ns;
            connections_open: t.connections_open.load(Relaxed).max(0) as u64,
        );
        let workers = self.workers.read().unwrap().iter().map(|w| w.snapshot()).collect();
        let disks = self.disks.read().unwrap().iter().map(|d| d.snapshot()).collect();
        let clients_all: Vec<Arc<ClientStats>> = self.clients.lock().unwrap().values().cloned().collect();
        let clients_total = clients_all.len();
        let mut clients: Vec<ClientSnapshot> = clients_all.iter().map(|c| c.snapshot()).collect();
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
            prefetch_usage: Vec::new(),
            controller: None,
        }
    }
}
