//! `libception stat`: the daemon's counters as a table or as JSON, once or
//! every `--watch` seconds (busy % and rates are then over the interval).

use crate::client::Client;
use crate::size::human;
use crate::stats::Snapshot;
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

/// The human-readable table. With `previous`, busy % and throughput are over
/// the interval since it; otherwise since the daemon started.
pub fn render_table(s: &Snapshot, previous: Option<&Snapshot>) -> String {
    let mut out = String::new();
    let d = &s.daemon;
    out.push_str(&format!(
        "libception daemon pid {} up {:.0}s  socket {}  prefetch {} ({})  workers {}{}  residency {}\n",
        d.pid,
        d.uptime_s,
        d.socket,
        human(d.prefetch_bytes),
        d.prefetch_controller,
        s.workers.len(),
        if d.per_disk { " (per disk)" } else { " (shared)" },
        d.residency_method
    ));
    let t = &s.totals;
    out.push_str(&format!(
        "connections open {} accepted {} rejected {} dropped-slow {}  requests fetch {} check {} stats {}  errors proto {} fd {}  cancelled {}\n\n",
        t.connections_open, t.connections_accepted, t.connections_rejected, t.connections_dropped_slow,
        t.requests_fetch, t.requests_check, t.requests_stats, t.protocol_errors, t.bad_fd_errors, t.cancelled_waiters
    ));
    let prev: HashMap<&str, &crate::stats::DiskSnapshot> =
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
            human(disk.bytes_requested),
            human(disk.bytes_read),
            human((read as f64 / window) as u64),
            100.0 * busy as f64 / 1e9 / window,
            disk.max_in_flight,
            disk.queue_length,
            disk.queue_wait_us.p50,
            disk.queue_wait_us.p99
        ));
        if !disk.reads_by_size.is_empty() {
            let sizes: Vec<String> = disk.reads_by_size.iter().map(|b| format!("<={}:{}", human(b.le_bytes), b.count)).collect();
            out.push_str(&format!("{:<14} reads by size {}\n", "", sizes.join(" ")));
        }
    }
    if !s.clients.is_empty() {
        out.push_str(&format!(
            "\n{:>8} {:>6} {:<16} {:>5} {:>9} {:>9} {:>8} {:>7} {:>9} {:>9} {:>6}\n",
            "PID", "UID", "COMM", "CONNS", "REQUESTS", "FETCH", "HITS", "JOINED", "ASKED", "READ", "ERRORS"
        ));
        for c in s.clients.iter().take(20) {
            out.push_str(&format!(
                "{:>8} {:>6} {:<16} {:>5} {:>9} {:>9} {:>8} {:>7} {:>9} {:>9} {:>6}\n",
                c.pid, c.uid, c.comm, c.open_connections, c.requests, c.fetch, c.resident_hits, c.joined,
                human(c.bytes_requested), human(c.bytes_read), c.errors
            ));
        }
        if s.clients_total > 20 {
            out.push_str(&format!("... {} clients in all\n", s.clients_total));
        }
    }
    out
}
