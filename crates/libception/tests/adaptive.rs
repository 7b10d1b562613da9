//! The daemon with `--prefetch adaptive`: it accepts the option and its
//! parameters (and refuses nonsense), serves sequential streams with a
//! prefetch size that changes as the controller explores, and reports the
//! controller's state in the stats JSON and `libception stat`. Intervals are
//! made short and the busy threshold 0 so that decisions happen within a test;
//! assertions are on what was read and reported, never on timing.

mod common;

use common::*;
use std::collections::BTreeSet;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::{Duration, Instant};

const KIB: u64 = 1 << 10;

#[test]
fn adaptive_daemon_changes_the_prefetch_size_and_reports_its_state() {
    let daemon = Daemon::start(&[
        "--prefetch",
        "adaptive",
        "--adaptive-start",
        "1M",
        "--adaptive-min",
        "512K",
        "--adaptive-max",
        "4M",
        "--adaptive-step",
        "512K",
        "--adaptive-interval",
        "0.3",
        "--adaptive-busy",
        "0",
        "--adaptive-ramp-rate",
        "64M",
        "--adaptive-history",
        "64",
    ]);
    let dir = real_tempdir();
    let files: Vec<_> = (0..4).map(|i| make_file(dir.path(), &format!("video{i}"), 32 * MIB)).collect();
    let handles: Vec<_> = files.iter().map(|f| open_random(f)).collect();
    for f in &files {
        evict(f);
    }
    let mut client = daemon.client();
    let mut positions = vec![0u64; files.len()];
    let mut read_sizes = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    let snapshot = loop {
        for (i, fd) in handles.iter().enumerate() {
            if positions[i] >= 32 * MIB {
                evict(&files[i]);
                positions[i] = 0;
            }
            // A stream asks for 64K where its last prefetch ended.
            let reply = client.fetch(fd.as_raw_fd(), positions[i], 64 * KIB, 0).expect("fetch");
            assert_eq!(reply.status, 0, "fetch at {} of {}", positions[i], files[i].display());
            if reply.bytes_read > 0 {
                read_sizes.insert(reply.bytes_read);
            }
            positions[i] += reply.bytes_read.max(64 * KIB);
        }
        let s = daemon.stats();
        let c = s.controller.as_ref().expect("the adaptive controller reports its state");
        let q = &c.queues[0];
        let measured: BTreeSet<u64> = q.history.iter().filter(|r| r.score.is_some()).map(|r| r.prefetch_bytes).collect();
        if measured.len() >= 3 && read_sizes.len() >= 3 {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the size never changed: reads {read_sizes:?}, history {:#?}\n{}",
            q.history,
            daemon.log_text()
        );
    };
    assert_eq!(snapshot.daemon.prefetch_controller, "adaptive");
    let c = snapshot.controller.as_ref().unwrap();
    assert_eq!(c.name, "adaptive");
    assert_eq!(c.params.step, 512 * KIB);
    assert_eq!(c.queues.len(), 1);
    let q = &c.queues[0];
    assert!(q.disks.len() == 1, "{:?}", q.disks);
    assert!((512 * KIB..=4 * MIB).contains(&q.prefetch_bytes));
    assert!(read_sizes.iter().all(|&b| b <= 4 * MIB), "{read_sizes:?}");
    assert!(q.usage.used_bytes > 0 && q.usage.read_bytes > 0, "{:?}", q.usage);
    assert!(q.intervals >= 3 && !q.scores.is_empty());
    let last = q.last_decision.as_ref().unwrap();
    assert_eq!(Some(last), q.history.last());
    // Block mode: on a block device the score's transactions are the device's.
    let block = q.disks.iter().all(|d| d.split('+').all(|d| std::path::Path::new("/sys/block").join(d).join("stat").exists()));
    for r in q.history.iter().filter(|r| r.score.is_some()) {
        let expected = if block { libception::TransactionSource::Device } else { libception::TransactionSource::Estimate };
        assert_eq!(r.transaction_source, expected, "disks {:?}: {r:?}", q.disks);
        let ratio = r.miss_ratio.unwrap();
        assert!((0.5..=1.5).contains(&ratio), "sequential streams use what they prefetch: {r:?}");
        assert!(r.disk_ms_per_mib.unwrap() > 0.0);
        // Every FETCH asks for 64K: the request floor is the smallest size.
        if let Some(request) = r.request_bytes {
            assert_eq!((request, r.floor_bytes), (64 * KIB, 512 * KIB), "{r:?}");
        }
        assert!(r.disk_ms_per_transaction.unwrap() > 0.0 && r.transactions > 0, "the score's disk time: {r:?}");
        if r.transaction_source == libception::TransactionSource::Estimate {
            assert!(r.transactions >= r.reads, "each read is at least one estimated transaction: {r:?}");
        }
    }
    assert!(q.history.iter().any(|r| r.score.is_some() && r.request_bytes.is_some()), "the missed requests' length: {:#?}", q.history);
    assert!((512 * KIB..=4 * MIB).contains(&snapshot.daemon.prefetch_bytes), "the size in force, not a fixed one");

    // `libception stat` shows it as a table and in the JSON.
    let out = Command::new(BIN).args(["stat", "--socket"]).arg(&daemon.socket).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("adaptive prefetch, worker 0"), "{text}");
    assert!(text.contains("DECISION") && text.contains("FLOOR") && text.contains("explore"), "{text}");
    let out = Command::new(BIN).args(["stat", "--json", "--socket"]).arg(&daemon.socket).output().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let queue = &json["controller"]["queues"][0];
    assert!(queue["history"].as_array().is_some_and(|h| !h.is_empty()), "{json}");
    assert!(queue["last_decision"]["decision"].is_string(), "{json}");
    assert!(queue["score"].is_number(), "{json}");
    for field in ["read_bytes", "used_bytes", "evicted_bytes", "wasted_bytes", "reread_bytes", "eviction_time_sum_s", "eviction_time_lower_sum_s"] {
        assert!(queue["usage"][field].is_number(), "paper 001 Table 1's {field} in the JSON: {json}");
    }
}

/// The fixed default keeps its document's `controller` absent but reports
/// paper 001 Table 1 (`prefetch_usage`) like the adaptive controller.
#[test]
fn the_fixed_default_reports_usage_but_no_controller_state() {
    let daemon = Daemon::start(&[]);
    let s = daemon.stats();
    assert_eq!(s.daemon.prefetch_controller, "fixed");
    assert_eq!(s.daemon.prefetch_bytes, 2 * MIB);
    assert!(s.controller.is_none());
    let dir = real_tempdir();
    let file = make_file(dir.path(), "video", 8 * MIB);
    let fd = open_random(&file);
    evict(&file);
    let mut client = daemon.client();
    // A stream asks for 64K at the start of each 2M prefetch: the follow-up
    // at 2M confirms the first range, the others stay tracked.
    for offset in [0, 2 * MIB, 4 * MIB] {
        let reply = client.fetch(fd.as_raw_fd(), offset, 64 * KIB, 0).expect("fetch");
        assert_eq!((reply.status, reply.bytes_read), (0, 2 * MIB), "fetch at {offset}");
    }
    let s = daemon.stats();
    assert_eq!(s.prefetch_usage.len(), 1, "{:?}", s.prefetch_usage);
    let w = &s.prefetch_usage[0];
    assert_eq!((w.usage.read_bytes, w.usage.used_bytes, w.usage.consumed_ranges), (4 * MIB, 4 * MIB, 2), "{w:?}");
    assert_eq!(w.tracked_ranges, 1);

    let raw = daemon.client().stats_json().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&raw).unwrap();
    assert!(json.get("controller").is_none(), "the fixed controller has no state of its own");
    for field in ["read_bytes", "used_bytes", "evicted_bytes", "wasted_bytes", "reread_bytes", "eviction_time_sum_s"] {
        assert!(json["prefetch_usage"][0]["usage"][field].is_number(), "paper 001 Table 1's {field} in the JSON: {json}");
    }
    let out = Command::new(BIN).args(["stat", "--socket"]).arg(&daemon.socket).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("fixed prefetch, worker 0") && text.contains("requested 4.0M"), "{text}");
}

#[test]
fn bad_adaptive_options_are_refused_by_name() {
    daemon_refuses(&["--adaptive-step", "1M"], "--adaptive-* options need --prefetch adaptive");
    daemon_refuses(&["--prefetch", "adaptive", "--adaptive-min", "8M", "--adaptive-max", "4M"], "--adaptive-max");
    daemon_refuses(&["--prefetch", "adaptive", "--adaptive-start", "64M"], "--adaptive-start");
    daemon_refuses(&["--prefetch", "adaptive", "--adaptive-deflation", "100%"], "--adaptive-deflation");
    daemon_refuses(&["--prefetch", "adaptive", "--adaptive-interval", "0"], "--adaptive-interval");
    daemon_refuses(&["--prefetch", "sometimes"], "adaptive");
}
