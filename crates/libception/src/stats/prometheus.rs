//! The stats snapshot as Prometheus text (exposition format 0.0.4), served by
//! `libception daemon --prometheus ADDR` at `/metrics`.
//!
//! Conventions kept here, and checked by the tests below: every family has one
//! `# HELP` and one `# TYPE` line before its samples; counters end in
//! `_total`; durations are `_seconds` (a histogram with cumulative buckets
//! ending in `+Inf`, `_sum` and `_count`, never a precomputed percentile);
//! label values are escaped (backslash, double quote, newline);
//! `libception_build_info{version="..."} 1` says which daemon answers.
//!
//! A small encoder rather than the `prometheus-client` crate: that crate
//! writes OpenMetrics only (`# EOF`, counter families named without
//! `_total`), while this endpoint serves the 0.0.4 text format it always has,
//! rendered from a snapshot rather than from live registered metrics.

use super::json::{DiskSnapshot, QueueWaitHistogram, Snapshot};
use crate::prefetch::{QueueSnapshot, WorkerUsage};
use std::fmt::{self, Write};

const PREFIX: &str = "libception_";

/// A sample value: counters and sizes as exact integers, the rest as floats
/// in the format's spelling (`NaN`, `+Inf`, `-Inf`).
#[derive(Debug, Clone, Copy)]
enum Value {
    Int(i128),
    Float(f64),
}

impl From<u64> for Value {
    fn from(v: u64) -> Value {
        Value::Int(v.into())
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::Int(v.into())
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Float(v)
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Value::Int(v) => write!(f, "{v}"),
            Value::Float(v) if v.is_nan() => f.write_str("NaN"),
            Value::Float(v) if v == f64::INFINITY => f.write_str("+Inf"),
            Value::Float(v) if v == f64::NEG_INFINITY => f.write_str("-Inf"),
            Value::Float(v) => write!(f, "{v}"),
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// A label value with `\`, `"` and newline escaped.
fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// `{a="x",b="y"}`, or nothing without labels.
fn label_set(labels: &[(&str, &str)]) -> String {
    if labels.is_empty() {
        return String::new();
    }
    let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape_label(v))).collect();
    format!("{{{}}}", pairs.join(","))
}

#[derive(Default)]
struct Exposition {
    out: String,
}

impl Exposition {
    /// Starts a family: its HELP and TYPE lines. HELP text escapes `\` and
    /// newline as the format asks.
    fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let kind = match kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        };
        let _ = write!(self.out, "# HELP {PREFIX}{name} {help}\n# TYPE {PREFIX}{name} {kind}\n");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Into<Value>) {
        let _ = writeln!(self.out, "{PREFIX}{name}{} {}", label_set(labels), value.into());
    }

    /// A family with one unlabelled sample.
    fn single(&mut self, name: &str, kind: Kind, help: &str, value: impl Into<Value>) {
        self.family(name, kind, help);
        self.sample(name, &[], value);
    }

    /// A family with one sample per row.
    fn metric<T>(&mut self, name: &str, kind: Kind, help: &str, rows: impl IntoIterator<Item = T>, sample: impl Fn(&T) -> (Vec<(&'static str, String)>, Value)) {
        self.family(name, kind, help);
        for row in rows {
            let (labels, value) = sample(&row);
            let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
            self.sample(name, &labels, value);
        }
    }

    /// One histogram's `_bucket`, `_sum` and `_count` samples.
    fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: &QueueWaitHistogram) {
        for (le, count) in &h.buckets {
            let le = Value::Float(*le).to_string();
            let labels: Vec<(&str, &str)> = labels.iter().copied().chain([("le", le.as_str())]).collect();
            self.sample(&format!("{name}_bucket"), &labels, *count);
        }
        let all: Vec<(&str, &str)> = labels.iter().copied().chain([("le", "+Inf")]).collect();
        self.sample(&format!("{name}_bucket"), &all, h.count);
        self.sample(&format!("{name}_sum"), labels, h.sum);
        self.sample(&format!("{name}_count"), labels, h.count);
    }
}

type DiskField = fn(&DiskSnapshot) -> Value;
type QueueField = fn(&QueueSnapshot) -> Value;
type UsageField = fn(&WorkerUsage) -> Value;

impl Snapshot {
    /// Prometheus text exposition (format 0.0.4).
    pub fn to_prometheus(&self) -> String {
        let mut e = Exposition::default();
        e.metric("build_info", Kind::Gauge, "The daemon's version; always 1.", [()], |_| {
            (vec![("version", self.daemon.version.clone())], Value::Int(1))
        });
        e.single("uptime_seconds", Kind::Gauge, "Seconds since the daemon started.", self.daemon.uptime_s);
        e.single("prefetch_bytes", Kind::Gauge, "Prefetch size in force.", self.daemon.prefetch_bytes);
        e.single(
            "promoting",
            Kind::Gauge,
            "1 while the disk workers promote what they read (--promote on, or auto once prefetched bytes were evicted before use).",
            u64::from(self.daemon.promoting_since_s.is_some()),
        );
        let t = &self.totals;
        e.single("connections_open", Kind::Gauge, "Open client connections.", t.connections_open);
        let totals: [(&str, &str, u64); 9] = [
            ("connections_accepted_total", "Client connections accepted.", t.connections_accepted),
            ("connections_rejected_total", "Client connections refused by credentials or the allow lists.", t.connections_rejected),
            ("connections_dropped_slow_total", "Connections dropped because the client did not read its replies.", t.connections_dropped_slow),
            ("protocol_errors_total", "Datagrams that were not a valid request.", t.protocol_errors),
            ("bad_fd_errors_total", "Requests with missing, extra or unusable descriptors.", t.bad_fd_errors),
            ("cancelled_waiters_total", "Requests cancelled because their client disconnected.", t.cancelled_waiters),
            ("cancelled_reads_total", "Queued reads dropped because every waiting client disconnected.", t.cancelled_reads),
            ("residency_check_failures_total", "Residency checks that failed (counted as not resident).", t.residency_check_failures),
            ("residency_concealed_total", "Requests answered without residency information (peer not trusted, file not its own).", t.residency_concealed),
        ];
        for (name, help, value) in totals {
            e.single(name, Kind::Counter, help, value);
        }
        e.single(
            "read_wait_seconds_total",
            Kind::Counter,
            "Time FETCHes that waited for a read spent from queueing (or joining) a read to the reply, summed: its rate is the mean number of client threads blocked on the daemon.",
            t.read_wait_ns as f64 / 1e9,
        );
        let by_op = [("fetch", t.requests_fetch), ("check", t.requests_check), ("stats", t.requests_stats)];
        e.metric("requests_total", Kind::Counter, "Requests by op.", by_op, |(op, n)| (vec![("op", op.to_string())], (*n).into()));

        let per_disk: [(&str, Kind, &str, DiskField); 12] = [
            ("disk_requests_total", Kind::Counter, "FETCH requests for files on the disk.", |d| d.requests.into()),
            ("disk_resident_hits_total", Kind::Counter, "FETCHes answered as already resident.", |d| d.resident_hits.into()),
            ("disk_queued_total", Kind::Counter, "Reads queued.", |d| d.queued.into()),
            ("disk_joined_total", Kind::Counter, "FETCHes that joined a queued or in-flight read.", |d| d.joined.into()),
            ("disk_bytes_requested_total", Kind::Counter, "Bytes clients asked for.", |d| d.bytes_requested.into()),
            ("disk_bytes_read_total", Kind::Counter, "Bytes the daemon read.", |d| d.bytes_read.into()),
            ("disk_bytes_promoted_total", Kind::Counter, "Bytes read again from the cache to activate them (--promote).", |d| d.bytes_promoted.into()),
            ("disk_reads_total", Kind::Counter, "Reads done.", |d| d.reads.into()),
            ("disk_read_errors_total", Kind::Counter, "Reads that failed.", |d| d.read_errors.into()),
            ("disk_busy_seconds_total", Kind::Counter, "Time spent reading.", |d| (d.busy_ns as f64 / 1e9).into()),
            ("disk_queue_length", Kind::Gauge, "Reads waiting now.", |d| d.queue_length.into()),
            ("disk_max_in_flight", Kind::Gauge, "Most reads ever in flight at once (1 = serialized).", |d| d.max_in_flight.into()),
        ];
        for (name, kind, help, field) in per_disk {
            e.metric(name, kind, help, &self.disks, |d| (vec![("disk", d.name.clone())], field(d)));
        }
        e.family("disk_queue_wait_seconds", Kind::Histogram, "Time reads waited in the queue before they started.");
        for d in &self.disks {
            e.histogram("disk_queue_wait_seconds", &[("disk", &d.name)], &d.queue_wait_seconds);
        }

        let per_worker: [(&str, Kind, &str, UsageField); 13] = [
            ("prefetch_used_bytes_total", Kind::Counter, "Prefetched or cached bytes known requested (paper 001 Table 1: requested).", |u| u.usage.used_bytes.into()),
            ("prefetch_read_bytes_total", Kind::Counter, "Disk bytes of the retired prefetched ranges (paper 001 Table 1: disk).", |u| u.usage.read_bytes.into()),
            ("prefetch_evicted_bytes_total", Kind::Counter, "Prefetched bytes evicted before they were requested.", |u| u.usage.evicted_bytes.into()),
            ("prefetch_wasted_bytes_total", Kind::Counter, "Prefetched bytes never requested before aging out.", |u| u.usage.wasted_bytes.into()),
            ("prefetch_reread_bytes_total", Kind::Counter, "Bytes read again after they had been requested (cache evictions).", |u| u.usage.reread_bytes.into()),
            ("prefetch_evictions_total", Kind::Counter, "Prefetched ranges found evicted before use.", |u| u.usage.evictions.into()),
            ("prefetch_eviction_time_upper_seconds_total", Kind::Counter, "Sum over evictions of read-to-discovery time (upper bound).", |u| u.usage.eviction_time_sum_s.into()),
            ("prefetch_eviction_time_lower_seconds_total", Kind::Counter, "Sum over evictions of read-to-last-seen-resident time (lower bound).", |u| u.usage.eviction_time_lower_sum_s.into()),
            ("prefetch_eviction_time_estimate_seconds_total", Kind::Counter, "Sum over evictions of the eviction-time estimate.", |u| u.usage.eviction_time_estimate_sum_s.into()),
            ("prefetch_full_size_total", Kind::Counter, "Prefetches at the size in force under a bitrate scale.", |u| u.usage.full_prefetches.into()),
            ("prefetch_scaled_total", Kind::Counter, "Prefetches scaled down for a slower stream (paper 001 section 7.4).", |u| u.usage.scaled_prefetches.into()),
            ("prefetch_scaled_bytes_total", Kind::Counter, "Sizes of the scaled-down prefetches, summed.", |u| u.usage.scaled_prefetch_bytes.into()),
            ("prefetch_tracked_ranges", Kind::Gauge, "Prefetched ranges whose fate is still open.", |u| u.tracked_ranges.into()),
        ];
        for (name, kind, help, field) in per_worker {
            e.metric(name, kind, help, &self.prefetch_usage, |u| (vec![("worker", u.worker.to_string())], field(u)));
        }

        if let Some(c) = &self.controller {
            let per_queue: [(&str, Kind, &str, QueueField); 4] = [
                ("adaptive_prefetch_bytes", Kind::Gauge, "Prefetch size in force per disk worker.", |q| q.prefetch_bytes.into()),
                ("adaptive_target_bytes", Kind::Gauge, "Prefetch size the controller is moving to.", |q| q.target_bytes.into()),
                ("adaptive_score", Kind::Gauge, "Score of the last interval (disk ms per transaction x miss ratio).", |q| q.score.unwrap_or(f64::NAN).into()),
                ("adaptive_intervals_total", Kind::Counter, "Measurement intervals closed.", |q| q.intervals.into()),
            ];
            for (name, kind, help, field) in per_queue {
                e.metric(name, kind, help, &c.queues, |q| (vec![("worker", q.worker.to_string())], field(q)));
            }
        }
        e.out
    }
}

#[cfg(test)]
mod tests;
