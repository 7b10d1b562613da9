//! `libception stat`: the daemon's counters as a table or as JSON, once or
//! every `--watch` seconds (busy % and rates are then over the interval).

use libception::human_size;
use libception::{Client, ControllerSnapshot, DiskSnapshot, Snapshot, TransactionSource, WorkerUsage};
use anyhow::{Context, Result};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

pub fn run(socket: &Path, json: bool, watch: Option<f64>) -> Result<()> {
    let mut client = Client::connect(socket).with_context(|| format!("is the daemon running? (socket {})", socket.display()))?;
    client.set_timeout(Some(Duration::from_secs(10)))?;
    let mut previous: Option<Snapshot> = None;
    loop {
        if json {
            let raw = client.stats_json().context("asking the daemon for its counters")?;
            let value: serde_json::Value = serde_json::from_slice(&raw).context("the daemon sent malformed JSON")?;
            println!("{}", serde_json::to_string_pretty(&value)?);
        } else {
            let snap = client.stats().context("asking the daemon for its counters")?;
            if watch.is_some() {
                print!("\x1b[H\x1b[2J");
            }
            print!("{}", render_table(&snap, previous.as_ref()));
            previous = Some(snap);
        }
        std::io::stdout().flush()?;
        match watch {
            Some(secs) => std::thread::sleep(Duration::from_secs_f64(secs.max(0.1))),
            None => return Ok(()),
        }
    }
}

/// `  promote MODE`, and for auto whether it is on yet (nothing from a
/// daemon that predates the field).
fn promotion(mode: &str, since_s: Option<f64>) -> String {
    match (mode, since_s) {
        ("", _) => String::new(),
        ("auto", Some(t)) => format!("  promote auto (on since {t:.0}s)"),
        ("auto", None) => "  promote auto (off so far)".to_string(),
        (m, _) => format!("  promote {m}"),
    }
}

/// The human-readable table. With `previous`, busy % and throughput are over
/// the interval since it; otherwise since the daemon started.
pub fn render_table(s: &Snapshot, previous: Option<&Snapshot>) -> String {
    let mut out = String::new();
    let d = &s.daemon;
    out.push_str(&format!(
        "libception daemon pid {} up {:.0}s  socket {}  prefetch {} ({})  workers {}{}  residency {}{}{}\n",
        d.pid,
        d.uptime_s,
        d.socket,
        human_size(d.prefetch_bytes),
        d.prefetch_controller,
        s.workers.len(),
        if d.per_disk { " (per disk)" } else { " (shared)" },
        d.residency_method,
        promotion(d.promote.as_str(), d.promoting_since_s),
        if d.reply.is_empty() { String::new() } else { format!("  reply by {}", d.reply) }
    ));
    let t = &s.totals;
    out.push_str(&format!(
        "connections open {} accepted {} rejected {} dropped-slow {}  requests fetch {} check {} stats {}  errors proto {} fd {}  cancelled {}\n\n",
        t.connections_open, t.connections_accepted, t.connections_rejected, t.connections_dropped_slow,
        t.requests_fetch, t.requests_check, t.requests_stats, t.protocol_errors, t.bad_fd_errors, t.cancelled_waiters
    ));
    let prev: HashMap<&str, &DiskSnapshot> =
        previous.map(|p| p.disks.iter().map(|d| (d.name.as_str(), d)).collect()).unwrap_or_default();
    let window = previous.map(|p| s.daemon.uptime_s - p.daemon.uptime_s).unwrap_or(s.daemon.uptime_s).max(1e-9);
    out.push_str(&format!(
        "{:<14} {:>3} {:>9} {:>8} {:>7} {:>8} {:>8} {:>9} {:>9} {:>9} {:>6} {:>5} {:>5} {:>9} {:>9}\n",
        "DISK", "WRK", "REQUESTS", "HITS", "JOINED", "QUEUED", "READS", "ASKED", "READ", "READ/s", "BUSY%", "MAXIF", "QLEN", "WAITp50", "WAITp99"
    ));
    for disk in &s.disks {
        let p = prev.get(disk.name.as_str());
        let busy = disk.busy_ns - p.map(|p| p.busy_ns).unwrap_or(0);
        let read = disk.bytes_read - p.map(|p| p.bytes_read).unwrap_or(0);
        out.push_str(&format!(
            "{:<14} {:>3} {:>9} {:>8} {:>7} {:>8} {:>8} {:>9} {:>9} {:>9} {:>5.1} {:>5} {:>5} {:>7}us {:>7}us\n",
            disk.name,
            disk.worker,
            disk.requests,
            disk.resident_hits,
            disk.joined,
            disk.queued,
            disk.reads,
            human_size(disk.bytes_requested),
            human_size(disk.bytes_read),
            human_size((read as f64 / window) as u64),
            100.0 * busy as f64 / 1e9 / window,
            disk.max_in_flight,
            disk.queue_length,
            disk.queue_wait_us.p50,
            disk.queue_wait_us.p99
        ));
        if !disk.reads_by_size.is_empty() {
            let sizes: Vec<String> = disk.reads_by_size.iter().map(|b| format!("<={}:{}", human_size(b.le_bytes), b.count)).collect();
            out.push_str(&format!("{:<14} reads by size {}\n", "", sizes.join(" ")));
        }
    }
    if !s.prefetch_usage.is_empty() {
        out.push_str(&render_usage(&s.daemon.prefetch_controller, &s.prefetch_usage));
    }
    if let Some(c) = &s.controller {
        out.push_str(&render_controller(c));
    }
    if !s.clients.is_empty() {
        // BLOCKED: the client's threads waiting on a read, on average over
        // the interval (since the previous snapshot, or the daemon's start).
        let prev_wait: HashMap<i32, u64> =
            previous.map(|p| p.clients.iter().map(|c| (c.pid, c.read_wait_ns)).collect()).unwrap_or_default();
        out.push_str(&format!(
            "\n{:>8} {:>6} {:<16} {:>5} {:>9} {:>9} {:>8} {:>7} {:>9} {:>9} {:>6} {:>7}\n",
            "PID", "UID", "COMM", "CONNS", "REQUESTS", "FETCH", "HITS", "JOINED", "ASKED", "READ", "ERRORS", "BLOCKED"
        ));
        for c in s.clients.iter().take(20) {
            let waited = c.read_wait_ns.saturating_sub(prev_wait.get(&c.pid).copied().unwrap_or(0));
            out.push_str(&format!(
                "{:>8} {:>6} {:<16} {:>5} {:>9} {:>9} {:>8} {:>7} {:>9} {:>9} {:>6} {:>7.2}\n",
                c.pid, c.uid, c.comm, c.open_connections, c.requests, c.fetch, c.resident_hits, c.joined,
                human_size(c.bytes_requested), human_size(c.bytes_read), c.errors, waited as f64 / 1e9 / window
            ));
        }
        if s.clients_total > 20 {
            out.push_str(&format!("... {} clients in all\n", s.clients_total));
        }
    }
    out
}

/// What became of the prefetched bytes, per disk worker (paper 001 Table 1),
/// for any controller.
pub fn render_usage(controller: &str, workers: &[WorkerUsage]) -> String {
    let mut out = String::new();
    let opt = |v: Option<f64>, digits: usize| v.map_or("-".to_string(), |v| format!("{v:.digits$}"));
    for w in workers {
        let u = &w.usage;
        let share = |b: u64| if u.used_bytes > 0 { format!("{:.1}%", 100.0 * b as f64 / u.used_bytes as f64) } else { "-".into() };
        out.push_str(&format!(
            "\n{controller} prefetch, worker {} ({}): read {} requested {} evicted-before-use {} ({}) wasted {} ({}) re-read {} ({})  tracked {}  miss ratio {}\n",
            w.worker,
            w.disks.join(", "),
            human_size(u.read_bytes),
            human_size(u.used_bytes),
            human_size(u.evicted_bytes),
            share(u.evicted_bytes),
            human_size(u.wasted_bytes),
            share(u.wasted_bytes),
            human_size(u.reread_bytes),
            share(u.reread_bytes),
            w.tracked_ranges,
            opt(u.miss_ratio(), 2)
        ));
        if u.scaled_prefetches > 0 || u.full_prefetches > 0 {
            let mean = (u.scaled_prefetches > 0).then(|| human_size(u.scaled_prefetch_bytes / u.scaled_prefetches));
            out.push_str(&format!(
                "  bitrate scale: {} prefetches at the size in force, {} scaled down for slower streams (mean {})\n",
                u.full_prefetches,
                u.scaled_prefetches,
                mean.as_deref().unwrap_or("-"),
            ));
        }
        if u.evictions > 0 {
            out.push_str(&format!(
                "  eviction time: {} evictions, between {} s and {} s after the read, estimate {} s\n",
                u.evictions,
                opt(u.mean_eviction_time_lower_s(), 1),
                opt(u.mean_eviction_time_s(), 1),
                opt(u.mean_eviction_time_estimate_s(), 1),
            ));
        }
    }
    out
}

/// Rows of the adaptive controller's history shown by the table.
const HISTORY_ROWS: usize = 8;

/// The adaptive controller's state: per disk worker, the size in force and
/// the last intervals (the usage is [`render_usage`]'s).
pub fn render_controller(c: &ControllerSnapshot) -> String {
    let mut out = String::new();
    let opt = |v: Option<f64>, digits: usize| v.map_or("-".to_string(), |v| format!("{v:.digits$}"));
    for q in &c.queues {
        let decisions: Vec<String> = q.decisions.iter().map(|(k, v)| format!("{k} {v}")).collect();
        out.push_str(&format!(
            "\n{} prefetch, worker {} ({}): {} in force, target {} ({} since {:.0}s)  score {}  intervals {} ({})\n",
            c.name,
            q.worker,
            q.disks.join(", "),
            human_size(q.prefetch_bytes),
            human_size(q.target_bytes),
            q.phase,
            q.phase_since_s,
            opt(q.score, 2),
            q.intervals,
            decisions.join(", ")
        ));
        if q.history.is_empty() {
            continue;
        }
        out.push_str(&format!(
            "  {:>5} {:>8} {:>7} {:>7} {:>7} {:<13} {:>6} {:>8} {:<8} {:>6} {:>8} {:>7} {:>7} {:>9}\n",
            "#", "END_S", "SIZE", "NEXT", "FLOOR", "DECISION", "BUSY%", "MS/TXN", "TXN_SRC", "MISS", "SCORE", "EVICT%", "EVICT_T", "RATE/s"
        ));
        for r in q.history.iter().rev().take(HISTORY_ROWS).rev() {
            out.push_str(&format!(
                "  {:>5} {:>8.0} {:>7} {:>7} {:>7} {:<13} {:>6.1} {:>8} {:<8} {:>6} {:>8} {:>7.1} {:>7} {:>9}\n",
                r.index,
                r.end_s,
                human_size(r.prefetch_bytes),
                human_size(r.next_bytes),
                if r.floor_bytes > 0 { human_size(r.floor_bytes) } else { "-".to_string() },
                serde_json::to_value(r.decision).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default(),
                100.0 * r.busy_fraction,
                opt(r.disk_ms_per_transaction, 2),
                match r.transaction_source {
                    TransactionSource::Device => "device",
                    TransactionSource::Estimate => "estimate",
                },
                opt(r.miss_ratio, 2),
                opt(r.score, 2),
                100.0 * r.evicted_fraction.min(100.0),
                opt(r.eviction_time_estimate_s.or(r.eviction_time_s), 1),
                r.stream_rate_bps.map_or("-".to_string(), |b| human_size(b as u64)),
            ));
        }
    }
    out
}
