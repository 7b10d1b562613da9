//! The exposition parsed back as a scraper would: families declared once
//! before their samples, counters named `_total`, histograms cumulative up to
//! `+Inf`, label values that survive escaping.

use super::*;
use crate::stats::{DaemonInfo, Stats};
use libception_proto::Op;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses `{k="v",...}` from the start of `s`; returns the labels and the rest.
fn parse_labels(s: &str) -> (BTreeMap<String, String>, &str) {
    let mut labels = BTreeMap::new();
    let mut rest = s.strip_prefix('{').expect("labels open with {");
    loop {
        if let Some(r) = rest.strip_prefix('}') {
            return (labels, r);
        }
        let (key, r) = rest.split_once("=\"").expect("key=\"value\"");
        let mut value = String::new();
        let mut chars = r.char_indices();
        let end = loop {
            match chars.next().expect("unterminated label value") {
                (_, '\\') => match chars.next().expect("escape at end").1 {
                    '\\' => value.push('\\'),
                    '"' => value.push('"'),
                    'n' => value.push('\n'),
                    other => panic!("unknown escape \\{other}"),
                },
                (i, '"') => break i + 1,
                (_, '\n') => panic!("raw newline in a label value"),
                (_, c) => value.push(c),
            }
        };
        labels.insert(key.to_string(), value);
        rest = &r[end..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

fn parse_value(s: &str) -> f64 {
    match s {
        "NaN" => f64::NAN,
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().unwrap_or_else(|_| panic!("bad sample value {v:?}")),
    }
}

/// Checks the format's rules and returns the samples with the type of their family.
fn parse(text: &str) -> Vec<(Sample, String)> {
    let mut help: HashMap<String, usize> = HashMap::new();
    let mut kind: HashMap<String, String> = HashMap::new();
    let mut samples = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, _) = rest.split_once(' ').expect("HELP name text");
            *help.entry(name.to_string()).or_default() += 1;
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, t) = rest.split_once(' ').expect("TYPE name type");
            assert!(["counter", "gauge", "histogram"].contains(&t), "{line}");
            assert!(kind.insert(name.to_string(), t.to_string()).is_none(), "second TYPE for {name}");
            assert_eq!(help.get(name), Some(&1), "one HELP before the TYPE of {name}");
            continue;
        }
        assert!(!line.starts_with('#'), "unknown comment {line}");
        let name_end = line.find(['{', ' ']).expect("a sample");
        let name = &line[..name_end];
        let (labels, rest) = if line[name_end..].starts_with('{') { parse_labels(&line[name_end..]) } else { (BTreeMap::new(), &line[name_end..]) };
        let value = parse_value(rest.strip_prefix(' ').expect("space before the value"));
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .filter_map(|s| name.strip_suffix(s))
            .find(|f| kind.get(*f).map(String::as_str) == Some("histogram"))
            .unwrap_or(name);
        let t = kind.get(family).unwrap_or_else(|| panic!("sample {name} before its family's TYPE")).clone();
        if t == "counter" {
            assert!(name.ends_with("_total"), "counter {name} does not end in _total");
        }
        samples.push((Sample { name: name.to_string(), labels, value }, t));
    }
    for (name, n) in &help {
        assert_eq!(*n, 1, "{name} has {n} HELP lines");
        assert!(kind.contains_key(name), "{name} has no TYPE");
    }
    samples
}

const ODD_DISK: &str = "we\"ird\\disk\nname";

fn busy_snapshot() -> Snapshot {
    let stats = Stats::new();
    let client = stats.client(std::process::id() as i32, 0, 0);
    stats.on_accepted(&client);
    for name in ["sda", ODD_DISK] {
        let disk = stats.add_disk(name.to_string(), 0);
        for wait_ms in [0, 2, 30, 700, 9000] {
            stats.on_request(&client, Op::Fetch);
            disk.on_fetch();
            disk.on_queued(0);
            disk.on_dequeued();
            disk.begin_read(Duration::from_millis(wait_ms));
            disk.end_read(Duration::from_millis(5), 2 << 20, true);
        }
    }
    let info = DaemonInfo {
        pid: 1,
        version: "1.2.3".into(),
        socket: "/s".into(),
        per_disk: false,
        prefetch_controller: "fixed".into(),
        prefetch_bytes: 2 << 20,
        max_read_bytes: 16 << 20,
        residency_method: "cachestat".into(),
        uptime_s: 0.0,
        promote: String::new(),
        promoting_since_s: None,
        reply: "read".into(),
    };
    stats.snapshot(info)
}

#[test]
fn every_family_is_declared_once_and_counters_end_in_total() {
    let samples = parse(&busy_snapshot().to_prometheus());
    assert!(samples.iter().any(|(s, t)| s.name == "libception_disk_reads_total" && t == "counter"));
    assert!(!samples.iter().any(|(s, _)| s.name.contains("p99") || s.name.contains("microseconds")));
}

#[test]
fn build_info_names_the_version() {
    let samples = parse(&busy_snapshot().to_prometheus());
    let (info, t) = samples.iter().find(|(s, _)| s.name == "libception_build_info").expect("build_info");
    assert_eq!((info.labels.get("version").map(String::as_str), info.value, t.as_str()), (Some("1.2.3"), 1.0, "gauge"));
}

#[test]
fn label_values_are_escaped_and_read_back_unchanged() {
    let text = busy_snapshot().to_prometheus();
    assert!(text.contains(r#"disk="we\"ird\\disk\nname""#), "{text}");
    let samples = parse(&text);
    let reads: Vec<_> = samples.iter().filter(|(s, _)| s.name == "libception_disk_reads_total").map(|(s, _)| s.labels["disk"].clone()).collect();
    assert_eq!(reads, ["sda", ODD_DISK]);
    assert_eq!(escape_label("a\\b\"c\nd"), r#"a\\b\"c\nd"#);
}

#[test]
fn queue_wait_is_a_cumulative_seconds_histogram_ending_in_inf() {
    let samples = parse(&busy_snapshot().to_prometheus());
    for disk in ["sda", ODD_DISK] {
        let of = |name: &str| -> Vec<&Sample> {
            samples.iter().map(|(s, _)| s).filter(|s| s.name == name && s.labels["disk"] == disk).collect()
        };
        let buckets = of("libception_disk_queue_wait_seconds_bucket");
        let bounds: Vec<f64> = buckets.iter().map(|s| parse_value(&s.labels["le"])).collect();
        assert!(bounds.windows(2).all(|w| w[0] < w[1]), "{bounds:?}");
        assert_eq!(bounds.last(), Some(&f64::INFINITY));
        let counts: Vec<f64> = buckets.iter().map(|s| s.value).collect();
        assert!(counts.windows(2).all(|w| w[0] <= w[1]), "cumulative: {counts:?}");
        let count = of("libception_disk_queue_wait_seconds_count")[0].value;
        assert_eq!((count, *counts.last().unwrap()), (5.0, 5.0));
        let le = |bound: f64| buckets[bounds.iter().position(|b| *b == bound).unwrap()].value;
        assert_eq!((le(0.001), le(0.05), le(1.0), le(5.0)), (1.0, 3.0, 4.0, 4.0), "waits of 0, 2, 30, 700, 9000 ms");
        let sum = of("libception_disk_queue_wait_seconds_sum")[0].value;
        assert!((sum - 9.732).abs() < 1e-9, "{sum}");
    }
}

#[test]
fn special_floats_use_the_formats_spelling() {
    assert_eq!(Value::Float(f64::NAN).to_string(), "NaN");
    assert_eq!(Value::Float(f64::INFINITY).to_string(), "+Inf");
    assert_eq!(Value::Float(f64::NEG_INFINITY).to_string(), "-Inf");
    assert_eq!(Value::Int(u64::MAX.into()).to_string(), u64::MAX.to_string());
}

/// Paper 001 Table 1 per disk worker, whatever the controller: the fixed
/// size has no `controller` part but reports its usage.
#[test]
fn prefetch_usage_is_exported_per_worker_for_the_fixed_controller() {
    let mut snap = busy_snapshot();
    let usage = crate::prefetch::UsageTally { used_bytes: 3 << 20, read_bytes: 4 << 20, evicted_bytes: 1 << 20, evictions: 1, eviction_time_sum_s: 50.0, reread_bytes: 2 << 20, ..Default::default() };
    snap.prefetch_usage = vec![crate::prefetch::WorkerUsage { worker: 0, disks: vec!["sda".into()], tracked_ranges: 2, usage }];
    assert!(snap.controller.is_none());
    let samples = parse(&snap.to_prometheus());
    let value = |name: &str| samples.iter().find(|(s, _)| s.name == name && s.labels["worker"] == "0").map(|(s, _)| s.value);
    assert_eq!(value("libception_prefetch_used_bytes_total"), Some((3 << 20) as f64));
    assert_eq!(value("libception_prefetch_read_bytes_total"), Some((4 << 20) as f64));
    assert_eq!(value("libception_prefetch_evicted_bytes_total"), Some((1 << 20) as f64));
    assert_eq!(value("libception_prefetch_reread_bytes_total"), Some((2 << 20) as f64));
    assert_eq!(value("libception_prefetch_wasted_bytes_total"), Some(0.0));
    assert_eq!(value("libception_prefetch_eviction_time_upper_seconds_total"), Some(50.0));
    assert_eq!(value("libception_prefetch_tracked_ranges"), Some(2.0));
}
