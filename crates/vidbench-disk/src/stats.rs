//! Disk counters in the manner of iostat, totals and the last whole second.
//!
//! The scheduler thread records every completion (at its completion time);
//! readers take a snapshot. Raw sums are kept (reads, bytes, busy ns, ...) and
//! rates are derived at snapshot time, so `vidbench disk stat` can subtract two
//! snapshots to get any interval. One mutex guards everything: one writer at
//! most a few thousand times a second, readers rarely.
//!
//! The JSON written to `MOUNT/.vidbench/stats.json` is [`Snapshot`]; its
//! fields are documented in docs/disk.md.

use crate::model::{Completion, Outcome};
use serde::{Deserialize, Serialize};
use anyhow::Context;
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

/// Name of the hidden control directory where a mount publishes its counters
/// (at the root of a FUSE mount; beside the image of a block mount).
pub const CONTROL_DIR: &str = ".vidbench";
/// The counters, as JSON, inside [`CONTROL_DIR`].
pub const STATS_FILE: &str = "stats.json";

/// Reads the counters a mount publishes in its control directory `control`.
pub fn read_snapshot_in(control: &Path) -> anyhow::Result<Snapshot> {
    let path = control.join(STATS_FILE);
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// The header of `vidbench disk stat`'s table of drive figures.
pub(crate) fn print_rates_header() {
    println!("{:>9} {:>8} {:>8} {:>8} {:>8} {:>6} {:>6} {:>6} {:>6} {:>10}", "time_s", "r/s", "MB/s", "KiB/r", "ms/t", "busy%", "aqu", "hit%", "queue", "seek_cyl");
}

/// One row of that table.
pub(crate) fn print_rates_line(r: &Rates, uptime: f64, in_flight: u64) {
    println!(
        "{:>9.1} {:>8.1} {:>8.2} {:>8.1} {:>8.2} {:>6.1} {:>6.2} {:>6.1} {:>6} {:>10.0}",
        uptime, r.reads_per_s, r.mb_per_s, r.avg_request_kib, r.ms_per_transaction, r.busy_pct, r.avg_queue_depth, r.cache_hit_pct, in_flight, r.avg_seek_cylinders
    );
}

/// Seek histogram buckets: 0 cylinders, 1, 2-3, 4-7, ..., 2^22 and beyond.
pub const SEEK_BUCKETS: usize = 24;

/// Raw sums over an interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    /// Completed read transactions.
    pub reads: u64,
    pub bytes: u64,
    /// Time the drive was serving at least one command, ns.
    pub busy_ns: u64,
    /// Sum over reads of (end - start): drive service time, ns.
    pub service_ns: u64,
    /// Sum over reads of (end - arrival): time in the drive incl. queueing, ns.
    /// Divided by the interval it is the average queue depth.
    pub response_ns: u64,
    /// Reads served wholly from the drive's cache.
    pub cache_hits: u64,
    /// Reads that continued the stream under the head (no positioning).
    pub stream_reads: u64,
    /// Reads that needed positioning.
    pub positioned_reads: u64,
    /// Reads served inside the command of the read before them on the
    /// platter (joined requests; block mode above the loop device's
    /// max_sectors_kb, docs/disk.md).
    #[serde(default)]
    pub joined_reads: u64,
    /// Sum of seek distances, cylinders.
    pub seek_cylinders: u64,
    /// Reads by seek distance: bucket 0 = no seek, bucket k = 2^(k-1) ..= 2^k - 1 cylinders.
    pub seek_histogram: Vec<u64>,
    /// Sum over reads of how late the reply left after the model's completion
    /// time (host cost of the emulation, not part of the drive's timeline), ns.
    #[serde(default)]
    pub reply_late_ns: u64,
    /// Reads by the number of requests in the drive when they started
    /// (queued and in service, this one included): index d = depth d, the
    /// last index = that depth or more. Shows the concurrency reaching the drive.
    #[serde(default)]
    pub queue_depth_histogram: Vec<u64>,
}

/// Buckets of the queue-depth histogram: depths 0..=63 and 64 or more.
pub const DEPTH_BUCKETS: usize = 65;

impl Counters {
    fn add(&mut self, c: &Completion, bytes: u64, busy_ns: u64, late_ns: u64) {
        self.reads += 1;
        self.reply_late_ns += late_ns;
        self.bytes += bytes;
        self.busy_ns += busy_ns;
        self.response_ns += c.end_ns - c.arrival_ns;
        match c.outcome {
            Outcome::Hit => self.cache_hits += 1,
            Outcome::Stream => self.stream_reads += 1,
            Outcome::Miss => self.positioned_reads += 1,
            Outcome::Joined => self.joined_reads += 1,
        }
        // A joined read is part of the command before it: the command's
        // service, seek and queue depth are counted once, with that read.
        if c.outcome == Outcome::Joined {
            return;
        }
        self.service_ns += c.end_ns - c.start_ns;
        self.seek_cylinders += c.seek_cylinders;
        if self.seek_histogram.len() < SEEK_BUCKETS {
            self.seek_histogram.resize(SEEK_BUCKETS, 0);
        }
        self.seek_histogram[seek_bucket(c.seek_cylinders)] += 1;
        if self.queue_depth_histogram.len() < DEPTH_BUCKETS {
            self.queue_depth_histogram.resize(DEPTH_BUCKETS, 0);
        }
        self.queue_depth_histogram[(c.queue_depth as usize).min(DEPTH_BUCKETS - 1)] += 1;
    }

    /// `self - earlier`, field by field.
    pub fn since(&self, earlier: &Counters) -> Counters {
        let hist = (0..SEEK_BUCKETS)
            .map(|i| self.seek_histogram.get(i).copied().unwrap_or(0) - earlier.seek_histogram.get(i).copied().unwrap_or(0))
            .collect();
        Counters {
            reads: self.reads - earlier.reads,
            bytes: self.bytes - earlier.bytes,
            busy_ns: self.busy_ns - earlier.busy_ns,
            service_ns: self.service_ns - earlier.service_ns,
            response_ns: self.response_ns - earlier.response_ns,
            cache_hits: self.cache_hits - earlier.cache_hits,
            stream_reads: self.stream_reads - earlier.stream_reads,
            positioned_reads: self.positioned_reads - earlier.positioned_reads,
            joined_reads: self.joined_reads - earlier.joined_reads,
            seek_cylinders: self.seek_cylinders - earlier.seek_cylinders,
            seek_histogram: hist,
            reply_late_ns: self.reply_late_ns - earlier.reply_late_ns,
            queue_depth_histogram: (0..DEPTH_BUCKETS)
                .map(|i| self.queue_depth_histogram.get(i).copied().unwrap_or(0) - earlier.queue_depth_histogram.get(i).copied().unwrap_or(0))
                .collect(),
        }
    }

    /// Commands the drive served: reads, the joined ones counted with the
    /// command they rode in (a disk's transactions, as iostat counts them).
    pub fn commands(&self) -> u64 {
        self.reads - self.joined_reads
    }

    /// Rates over an interval of `seconds`. Per-transaction figures are per
    /// command; response time and lateness per read.
    pub fn rates(&self, seconds: f64) -> Rates {
        let per_read = |x: u64| if self.reads == 0 { 0.0 } else { x as f64 / self.reads as f64 };
        let commands = self.commands();
        let per_command = |x: u64| if commands == 0 { 0.0 } else { x as f64 / commands as f64 };
        let secs = seconds.max(1e-9);
        Rates {
            seconds,
            reads_per_s: commands as f64 / secs,
            mb_per_s: self.bytes as f64 / secs / 1e6,
            avg_request_kib: per_command(self.bytes) / 1024.0,
            ms_per_transaction: per_command(self.busy_ns) / 1e6,
            avg_service_ms: per_command(self.service_ns) / 1e6,
            avg_response_ms: per_read(self.response_ns) / 1e6,
            busy_pct: (self.busy_ns as f64 / 1e9 / secs * 100.0).min(100.0),
            avg_queue_depth: self.response_ns as f64 / 1e9 / secs,
            cache_hit_pct: per_command(self.cache_hits) * 100.0,
            avg_seek_cylinders: per_command(self.seek_cylinders),
            avg_reply_late_ms: per_read(self.reply_late_ns) / 1e6,
        }
    }
}

/// The bucket of a seek distance.
pub fn seek_bucket(cylinders: u64) -> usize {
    ((64 - cylinders.leading_zeros()) as usize).min(SEEK_BUCKETS - 1)
}

/// Derived figures, iostat style.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    pub seconds: f64,
    /// Commands per second ([`Counters::commands`]; reads unless joined).
    pub reads_per_s: f64,
    pub mb_per_s: f64,
    pub avg_request_kib: f64,
    /// Busy time per transaction (paper 000's ms/t: 1000 * busy / transactions).
    pub ms_per_transaction: f64,
    pub avg_service_ms: f64,
    /// Arrival to completion (iostat's r_await).
    pub avg_response_ms: f64,
    pub busy_pct: f64,
    /// Time-averaged requests in the drive (iostat's aqu-sz).
    pub avg_queue_depth: f64,
    pub cache_hit_pct: f64,
    pub avg_seek_cylinders: f64,
    /// Mean delay between the model's completion time and the reply, ms.
    #[serde(default)]
    pub avg_reply_late_ms: f64,
}

/// One interval: raw sums and the rates derived from them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Interval {
    pub counters: Counters,
    pub rates: Rates,
}

/// The content of `stats.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Snapshot {
    /// Format version of this document.
    pub format: u32,
    /// Seconds since the mount (the model's clock, also the trace's time base / 1e9).
    pub uptime_s: f64,
    pub pid: u32,
    pub mountpoint: String,
    pub preset: String,
    /// Requests handed to the drive and not yet completed.
    pub in_flight: u64,
    /// Cylinders of a full stroke, for reading the seek histogram.
    pub full_stroke_cylinders: u64,
    /// Upper bound (cylinders) of each histogram bucket; the last is open-ended.
    pub seek_bucket_max_cylinders: Vec<u64>,
    /// Since the mount.
    pub total: Interval,
    /// The last whole second of the mount's clock (zero when it was idle).
    pub last_second: Interval,
    /// Effective drive parameters and mount settings.
    pub config: serde_json::Value,
}

/// Format version of [`Snapshot`].
pub const SNAPSHOT_FORMAT: u32 = 1;

#[derive(Debug, Default)]
struct Inner {
    total: Counters,
    /// Total at the start of the second `second`.
    second_start: Counters,
    second: u64,
    last_second: Counters,
    /// End of the last busy period, for the busy-time union (ns).
    busy_until: u64,
    in_flight: u64,
}

/// The live counters of one mount.
#[derive(Debug)]
pub struct Stats {
    epoch: Instant,
    inner: Mutex<Inner>,
    pub mountpoint: String,
    pub preset: String,
    pub full_stroke_cylinders: u64,
    pub config: serde_json::Value,
}

impl Stats {
    pub fn new(epoch: Instant, mountpoint: String, preset: String, full_stroke_cylinders: u64, config: serde_json::Value) -> Stats {
        Stats { epoch, inner: Mutex::new(Inner::default()), mountpoint, preset, full_stroke_cylinders, config }
    }

    fn roll(inner: &mut Inner, now_ns: u64) {
        let second = now_ns / 1_000_000_000;
        if second > inner.second {
            inner.last_second = if second == inner.second + 1 { inner.total.since(&inner.second_start) } else { Counters::default() };
            inner.second_start = inner.total.clone();
            inner.second = second;
        }
    }

    /// A request reached the drive.
    pub fn submitted(&self) {
        self.inner.lock().expect("stats lock").in_flight += 1;
    }

    /// Records a completion of `bytes` (the bytes returned; the model counts
    /// whole sectors); `now_ns` is the model clock when it is reported.
    pub fn record(&self, c: &Completion, bytes: u64, now_ns: u64, late_ns: u64) {
        let mut inner = self.inner.lock().expect("stats lock");
        Self::roll(&mut inner, now_ns);
        // Busy time is the union of service intervals (several overlap on an SSD).
        let from = c.start_ns.max(inner.busy_until);
        let busy = c.end_ns.saturating_sub(from);
        inner.busy_until = inner.busy_until.max(c.end_ns);
        inner.total.add(c, bytes, busy, late_ns);
        inner.in_flight = inner.in_flight.saturating_sub(1);
    }

    pub fn snapshot(&self) -> Snapshot {
        let now_ns = self.epoch.elapsed().as_nanos() as u64;
        let mut inner = self.inner.lock().expect("stats lock");
        Self::roll(&mut inner, now_ns);
        let total = inner.total.clone();
        let last = inner.last_second.clone();
        let in_flight = inner.in_flight;
        drop(inner);
        Snapshot {
            format: SNAPSHOT_FORMAT,
            uptime_s: now_ns as f64 / 1e9,
            pid: std::process::id(),
            mountpoint: self.mountpoint.clone(),
            preset: self.preset.clone(),
            in_flight,
            full_stroke_cylinders: self.full_stroke_cylinders,
            seek_bucket_max_cylinders: (0..SEEK_BUCKETS).map(|k| if k == SEEK_BUCKETS - 1 { u64::MAX } else if k == 0 { 0 } else { (1u64 << k) - 1 }).collect(),
            total: Interval { rates: total.rates(now_ns as f64 / 1e9), counters: total },
            last_second: Interval { rates: last.rates(1.0), counters: last },
            config: self.config.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn completion(start: u64, end: u64, outcome: Outcome, seek: u64) -> Completion {
        Completion { id: 0, arrival_ns: start, start_ns: start, end_ns: end, lba: 0, sectors: 256, outcome, seek_cylinders: seek, queue_depth: 1 }
    }

    #[test]
    fn counters_add_up_and_rates_follow() {
        let s = Stats::new(Instant::now(), "/m".into(), "p".into(), 1000, serde_json::Value::Null);
        s.record(&completion(0, 10_000_000, Outcome::Miss, 500), 131072, 10_000_000, 0);
        s.record(&completion(10_000_000, 11_000_000, Outcome::Stream, 0), 131072, 11_000_000, 0);
        s.record(&completion(11_000_000, 11_100_000, Outcome::Hit, 0), 131072, 11_100_000, 0);
        let snap = s.snapshot();
        let t = &snap.total.counters;
        assert_eq!((t.reads, t.bytes, t.cache_hits, t.stream_reads, t.positioned_reads), (3, 3 * 131072, 1, 1, 1));
        assert_eq!(t.busy_ns, 11_100_000);
        assert_eq!(t.seek_histogram[seek_bucket(500)], 1);
        assert_eq!(t.seek_histogram[0], 2);
        assert_eq!(t.queue_depth_histogram[1], 3, "each read started alone in the drive");
        assert_eq!(seek_bucket(1), 1);
        assert_eq!(seek_bucket(3), 2);
        assert_eq!(seek_bucket(4), 3);
        let r = t.rates(1.0);
        assert!((r.ms_per_transaction - 3.7).abs() < 1e-9);
        assert!((r.avg_request_kib - 128.0).abs() < 1e-9);
        // JSON round trip, as `vidbench disk stat` reads it.
        let back: Snapshot = serde_json::from_str(&serde_json::to_string(&snap).unwrap()).unwrap();
        assert_eq!(&back.total.counters, t);
    }

    #[test]
    fn overlapping_service_counts_busy_once() {
        let s = Stats::new(Instant::now(), "/m".into(), "p".into(), 1, serde_json::Value::Null);
        s.record(&completion(0, 100, Outcome::Miss, 0), 131072, 100, 0);
        s.record(&completion(50, 150, Outcome::Miss, 0), 131072, 150, 0);
        assert_eq!(s.snapshot().total.counters.busy_ns, 150);
    }

    #[test]
    fn a_joined_command_is_one_transaction() {
        // 1280 + 768 KiB served as one 10 ms command, then a 4 ms command.
        let s = Stats::new(Instant::now(), "/m".into(), "p".into(), 1000, serde_json::Value::Null);
        s.record(&completion(0, 10_000_000, Outcome::Miss, 500), 1280 << 10, 10_000_000, 0);
        s.record(&completion(0, 10_000_000, Outcome::Joined, 0), 768 << 10, 10_000_000, 0);
        s.record(&completion(10_000_000, 14_000_000, Outcome::Miss, 20), 1024 << 10, 14_000_000, 0);
        let t = s.snapshot().total.counters;
        assert_eq!((t.reads, t.joined_reads, t.commands(), t.positioned_reads), (3, 1, 2, 2));
        assert_eq!((t.busy_ns, t.service_ns), (14_000_000, 14_000_000), "the command's time once");
        assert_eq!(t.seek_histogram.iter().sum::<u64>(), 2);
        assert_eq!(t.queue_depth_histogram.iter().sum::<u64>(), 2);
        let r = t.rates(1.0);
        assert!((r.ms_per_transaction - 7.0).abs() < 1e-9, "{}", r.ms_per_transaction);
        assert!((r.avg_request_kib - 1536.0).abs() < 1e-9, "{}", r.avg_request_kib);
        assert!((r.reads_per_s - 2.0).abs() < 1e-9);
    }
}
