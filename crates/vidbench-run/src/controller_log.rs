//! `controller.csv`: every interval the daemon's adaptive prefetch controller
//! closed during a run, on the load's clock (paper 001 Figs 3-4: the size,
//! the score and the eviction time over time).
//!
//! The daemon's stats keep only its last intervals (`history`, 32 by
//! default), fewer than a paper-scale run closes, so the sampler hands every
//! stats document it fetches to a [`ControllerLog`], which appends the
//! intervals it has not written yet. An interval's end is on the daemon's
//! clock (seconds since it started); the document's `daemon.uptime_s` at the
//! load time the document was fetched puts it on the load's. A daemon that
//! restarted (another `daemon.pid`) numbers its intervals from 1 again, and
//! they are written. Intervals that left the ring between two fetches (a
//! stats outage longer than the ring) are counted and warned about. Without
//! an adaptive controller the file is never created.

use anyhow::Context;
use libception::{Decision, IntervalRecord};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One closed interval: a row of `controller.csv` (the daemon's
/// [`IntervalRecord`], flat, on the load's clock, with its worker).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(Deserialize))]
pub struct ControllerRow {
    /// End of the interval, seconds on the load's clock.
    pub t_s: f64,
    /// The disk worker whose controller closed it, and its number there (from 1).
    pub worker: u64,
    pub index: u64,
    pub length_s: f64,
    /// Size in force during the interval, and the target decided at its end.
    pub prefetch_bytes: u64,
    pub next_bytes: u64,
    pub decision: Decision,
    pub busy_fraction: f64,
    /// The worker's reads in the interval and their bytes (their mean is
    /// the size a read actually had: at least the request's length).
    pub reads: u64,
    pub bytes_read: u64,
    /// The score's factors (disk ms per transaction, data read from disk per
    /// data requested) and the score; empty when the interval had none.
    pub disk_ms_per_transaction: Option<f64>,
    pub miss_ratio: Option<f64>,
    pub score: Option<f64>,
    pub evicted_bytes: u64,
    pub evicted_fraction: f64,
    /// Mean prefetch eviction time as discovered (an upper bound), and the
    /// estimate the eviction-time jump uses, seconds.
    pub eviction_time_s: Option<f64>,
    pub eviction_time_estimate_s: Option<f64>,
    pub stream_rate_bps: Option<f64>,
    /// Median length of the interval's missed requests, and the request
    /// floor in force after it (0: none), bytes.
    pub request_bytes: Option<u64>,
    pub floor_bytes: u64,
}

impl ControllerRow {
    /// The row of a worker's interval, `offset_s` being load time minus daemon time.
    fn new(worker: u64, r: &IntervalRecord, offset_s: f64) -> ControllerRow {
        ControllerRow {
            t_s: r.end_s + offset_s,
            worker,
            index: r.index,
            length_s: r.length_s,
            prefetch_bytes: r.prefetch_bytes,
            next_bytes: r.next_bytes,
            decision: r.decision,
            busy_fraction: r.busy_fraction,
            reads: r.reads,
            bytes_read: r.bytes_read,
            disk_ms_per_transaction: r.disk_ms_per_transaction,
            miss_ratio: r.miss_ratio,
            score: r.score,
            evicted_bytes: r.evicted_bytes,
            evicted_fraction: r.evicted_fraction,
            eviction_time_s: r.eviction_time_s,
            eviction_time_estimate_s: r.eviction_time_estimate_s,
            stream_rate_bps: r.stream_rate_bps,
            request_bytes: r.request_bytes,
            floor_bytes: r.floor_bytes,
        }
    }
}

/// The part of a controller queue's stats this log reads.
#[derive(Deserialize)]
struct Queue {
    worker: u64,
    history: Vec<IntervalRecord>,
}

/// Appends to `controller.csv` the intervals each stats document adds.
pub struct ControllerLog {
    path: PathBuf,
    out: Option<csv::Writer<std::fs::File>>,
    /// The last interval written, per worker.
    written: BTreeMap<u64, u64>,
    /// The daemon's pid in the last document: another one is a new daemon.
    pid: Option<u64>,
    /// Intervals that left the daemon's ring before a document showed them.
    pub missed: u64,
}

impl ControllerLog {
    pub fn new(path: &Path) -> ControllerLog {
        ControllerLog { path: path.to_path_buf(), out: None, written: BTreeMap::new(), pid: None, missed: 0 }
    }

    /// Writes the intervals of `stats` (a `libception stat --json` document
    /// fetched at `t_s` on the load's clock) not written before.
    pub fn record(&mut self, t_s: f64, stats: &Value) -> anyhow::Result<()> {
        let (Some(queues), Some(uptime)) = (stats.pointer("/controller/queues"), stats.pointer("/daemon/uptime_s").and_then(Value::as_f64)) else {
            return Ok(());
        };
        let queues = match Vec::<Queue>::deserialize(queues) {
            Ok(q) => q,
            Err(e) => {
                // The daemon of the same build writes them: a bug, not worth the run.
                tracing::warn!("{}: the daemon's controller stats are not as expected ({e}); not logged", self.path.display());
                return Ok(());
            }
        };
        let pid = stats.pointer("/daemon/pid").and_then(Value::as_u64);
        if pid != self.pid {
            self.written.clear();
            self.pid = pid;
        }
        let offset_s = t_s - uptime;
        let mut rows = Vec::new();
        for Queue { worker, history } in queues {
            let last = self.written.get(&worker).copied().unwrap_or(0);
            let new: Vec<ControllerRow> = history.iter().filter(|r| r.index > last).map(|r| ControllerRow::new(worker, r, offset_s)).collect();
            if let Some(first) = new.iter().map(|r| r.index).min() {
                let lost = first - last - 1;
                if lost > 0 {
                    self.missed += lost;
                    tracing::warn!("{}: intervals {}-{} of disk worker {worker} left the daemon's stats before they were read", self.path.display(), last + 1, first - 1);
                }
            }
            if let Some(max) = new.iter().map(|r| r.index).max() {
                self.written.insert(worker, max);
            }
            rows.extend(new);
        }
        if rows.is_empty() {
            return Ok(());
        }
        rows.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
        let path = &self.path;
        if self.out.is_none() {
            self.out = Some(csv::Writer::from_path(path).with_context(|| format!("cannot create {}", path.display()))?);
        }
        let out = self.out.as_mut().expect("created above");
        for row in rows {
            out.serialize(row).with_context(|| format!("cannot write {}", path.display()))?;
        }
        out.flush().with_context(|| format!("cannot write {}", path.display()))?;
        Ok(())
    }
}

/// What a run's `controller.csv` says the controller ended at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastTarget {
    /// No file, or no interval in it.
    Nothing,
    /// The size one disk worker's controller last decided on (`next_bytes`).
    Size(u64),
    /// Several workers' controllers: no single size.
    SeveralWorkers,
}

/// The size the controller logged in `path` last decided on. A last line
/// cut by a killed run is left out; a damaged row before it is an error
/// naming the file and the row.
pub fn last_target(path: &Path) -> anyhow::Result<LastTarget> {
    let mut reader = match csv::Reader::from_path(path) {
        Ok(r) => r,
        Err(e) if matches!(e.kind(), csv::ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::NotFound) => return Ok(LastTarget::Nothing),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    #[derive(Deserialize)]
    struct Row {
        worker: u64,
        next_bytes: u64,
    }
    let mut workers = std::collections::BTreeSet::new();
    let mut last = None;
    let mut cut = None;
    for (i, row) in reader.deserialize::<Row>().enumerate() {
        if let Some(cut_row) = cut {
            anyhow::bail!("{}: row {cut_row} is not a controller interval (a short row before others)", path.display());
        }
        match row {
            Ok(r) => {
                workers.insert(r.worker);
                last = Some(r.next_bytes);
            }
            Err(e) if matches!(e.kind(), csv::ErrorKind::UnequalLengths { .. }) => cut = Some(i + 2),
            Err(e) => return Err(e).with_context(|| format!("{}: row {} is not a controller interval", path.display(), i + 2)),
        }
    }
    Ok(match (workers.len(), last) {
        (0, _) | (_, None) => LastTarget::Nothing,
        (1, Some(size)) => LastTarget::Size(size),
        _ => LastTarget::SeveralWorkers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(path: &Path) -> Vec<ControllerRow> {
        csv::Reader::from_path(path).unwrap().deserialize().map(Result::unwrap).collect()
    }

    /// An interval as the daemon's stats list it (`IntervalRecord`).
    fn record(index: u64, end_s: f64, size: u64, score: Option<f64>) -> Value {
        json!({"index": index, "end_s": end_s, "length_s": 60.0, "prefetch_bytes": size, "next_bytes": size + 524288,
               "decision": "descend", "busy_fraction": 0.9, "reads": 2, "bytes_read": 1000, "disk_ms_per_transaction": 8.0,
               "miss_ratio": 0.5, "score": score, "used_bytes": 900, "evicted_bytes": 10, "evicted_fraction": 0.01,
               "wasted_bytes": 0, "evictions": 1, "eviction_time_s": 50.0, "eviction_time_estimate_s": 40.0, "stream_rate_bps": 52500.0})
    }
    fn stats_of(pid: u64, uptime: f64, workers: &[(u64, Vec<Value>)]) -> Value {
        let queues: Vec<Value> = workers.iter().map(|(w, h)| json!({"worker": w, "history": h})).collect();
        json!({"daemon": {"pid": pid, "uptime_s": uptime}, "controller": {"queues": queues}})
    }
    fn stats(uptime: f64, workers: &[(u64, Vec<Value>)]) -> Value {
        stats_of(100, uptime, workers)
    }

    #[test]
    fn every_interval_is_written_once_on_the_loads_clock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("controller.csv");
        let mut log = ControllerLog::new(&path);
        // Fixed-size daemon (no controller) and a controller with no interval yet: no file.
        log.record(5.0, &json!({"daemon": {"uptime_s": 7.0}})).unwrap();
        log.record(10.0, &stats(12.0, &[(0, vec![])])).unwrap();
        assert!(!path.exists());
        // The daemon started 2 s before the load: its 60 s is the load's 58 s.
        log.record(60.0, &stats(62.0, &[(0, vec![record(1, 60.0, 2097152, None)])])).unwrap();
        // The ring still holds interval 1 when interval 2 (and worker 1's first) close.
        log.record(125.0, &stats(127.0, &[(0, vec![record(1, 60.0, 2097152, None), record(2, 120.0, 2621440, Some(4.0))]), (1, vec![record(1, 121.0, 2097152, Some(5.0))])]))
            .unwrap();
        let rows = read(&path);
        let got: Vec<(u64, u64, f64)> = rows.iter().map(|r| (r.worker, r.index, r.t_s)).collect();
        assert_eq!(got, [(0, 1, 58.0), (0, 2, 118.0), (1, 1, 119.0)]);
        assert_eq!(rows[0].score, None);
        assert_eq!(rows[1].score, Some(4.0));
        assert_eq!((rows[1].prefetch_bytes, rows[1].next_bytes, rows[1].decision), (2621440, 3145728, Decision::Descend));
        assert_eq!(rows[1].eviction_time_estimate_s, Some(40.0));
        assert_eq!((rows[1].request_bytes, rows[1].floor_bytes), (None, 0), "a daemon from before the request floor");
        // The request floor's columns, from a daemon that has them.
        let mut with_floor = record(3, 180.0, 2621440, Some(4.0));
        with_floor["request_bytes"] = json!(2618750);
        with_floor["floor_bytes"] = json!(2621440);
        log.record(185.0, &stats(187.0, &[(0, vec![with_floor])])).unwrap();
        let rows = read(&path);
        assert_eq!((rows[3].request_bytes, rows[3].floor_bytes), (Some(2618750), 2621440));
        assert_eq!((rows[3].reads, rows[3].bytes_read), (2, 1000));
    }

    #[test]
    fn a_restarted_daemon_numbers_from_one_again_and_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("controller.csv");
        let mut log = ControllerLog::new(&path);
        log.record(130.0, &stats_of(100, 130.0, &[(0, vec![record(1, 60.0, 2097152, Some(3.0)), record(2, 120.0, 2097152, Some(3.5))])])).unwrap();
        // Killed and restarted at load time 140 s: uptime 65 s at 205 s.
        log.record(205.0, &stats_of(200, 65.0, &[(0, vec![record(1, 60.0, 2097152, Some(6.0))])])).unwrap();
        // Killed again at 210 s: the next daemon is older (70 s) than the last
        // one was, and its pid tells it apart.
        log.record(280.0, &stats_of(300, 70.0, &[(0, vec![record(1, 61.0, 2097152, Some(7.0))])])).unwrap();
        let rows = read(&path);
        let got: Vec<(u64, f64)> = rows.iter().map(|r| (r.index, r.t_s)).collect();
        assert_eq!(got, [(1, 60.0), (2, 120.0), (1, 200.0), (1, 271.0)]);
        assert_eq!(log.missed, 0);
    }

    #[test]
    fn the_last_target_is_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("controller.csv");
        assert_eq!(last_target(&path).unwrap(), LastTarget::Nothing, "no file");
        let mut log = ControllerLog::new(&path);
        log.record(130.0, &stats(130.0, &[(0, vec![record(1, 60.0, 2097152, Some(3.0)), record(2, 120.0, 2621440, Some(3.5))])])).unwrap();
        assert_eq!(last_target(&path).unwrap(), LastTarget::Size(3145728));
        let text = std::fs::read_to_string(&path).unwrap();
        let header = text.lines().next().unwrap();
        std::fs::write(&path, format!("{header}\n")).unwrap();
        assert_eq!(last_target(&path).unwrap(), LastTarget::Nothing, "header only");
        // A last line cut by a killed run is left out.
        std::fs::write(&path, format!("{text}190.0,0,3,60.0,31457")).unwrap();
        assert_eq!(last_target(&path).unwrap(), LastTarget::Size(3145728));
        // A short row with rows after it, or a damaged one, is named.
        let rows: Vec<&str> = text.lines().collect();
        std::fs::write(&path, format!("{}\n190.0,0,3\n{}\n", rows[..2].join("\n"), rows[2])).unwrap();
        let err = format!("{:#}", last_target(&path).unwrap_err());
        assert!(err.contains("controller.csv") && err.contains("row 3"), "{err}");
        let columns = header.split(',').count();
        let damaged = format!("190.0,0,3,60.0,3145728,many{}", ",".repeat(columns - 6));
        std::fs::write(&path, format!("{text}{damaged}\n")).unwrap();
        let err = format!("{:#}", last_target(&path).unwrap_err());
        assert!(err.contains("controller.csv") && err.contains("row 4"), "{err}");
        // Two workers' controllers: no single size.
        let mut two = ControllerLog::new(&path);
        two.record(125.0, &stats(127.0, &[(0, vec![record(1, 60.0, 2097152, None)]), (1, vec![record(1, 121.0, 2097152, Some(5.0))])])).unwrap();
        assert_eq!(last_target(&path).unwrap(), LastTarget::SeveralWorkers);
    }

    #[test]
    fn intervals_that_left_the_ring_unread_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("controller.csv");
        let mut log = ControllerLog::new(&path);
        log.record(60.0, &stats(60.0, &[(0, vec![record(1, 60.0, 2097152, None)])])).unwrap();
        // A ring of two after an outage: intervals 2 and 3 are gone.
        log.record(300.0, &stats(300.0, &[(0, vec![record(4, 240.0, 2097152, Some(3.0)), record(5, 300.0, 2097152, Some(3.1))])])).unwrap();
        assert_eq!(read(&path).iter().map(|r| r.index).collect::<Vec<_>>(), [1, 4, 5]);
        assert_eq!(log.missed, 2);
    }
}
