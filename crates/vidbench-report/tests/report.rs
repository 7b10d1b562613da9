//! Report generation from a small recorded result kept in the repository
//! (`tests/data/quick-mini`: a `vidbench run` of an earlier `quick.toml`, rates
//! 8 and 14 sessions/s, with the per-request CSVs left out), and the trace
//! analysis on the first 300 requests of a real disk trace of vanilla nginx
//! (`tests/data/trace-excerpt.csv`). Checks the tables against the raw files,
//! that every figure with data is a real SVG, and that sections without data say so.

use std::path::{Path, PathBuf};
use vidbench_report::Results;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/quick-mini")
}

#[test]
fn report_from_the_recorded_quick_run() {
    let results = Results::load(&data()).unwrap();
    assert_eq!(results.configs(), ["nginx-vanilla", "nginx-libception", "nginx-kernel-tuned"]);
    assert_eq!(results.runs.len(), 6);
    let out_dir = tempfile::tempdir().unwrap();
    let out = out_dir.path().join("report.md");
    let figures = vidbench_report::write_report(&results, &out).unwrap();
    let md = std::fs::read_to_string(&out).unwrap();

    // Table 3 analogue: one row per configuration, values from result.json.
    for label in ["nginx vanilla", "nginx + Libception (2 MiB)", "nginx, kernel tuning"] {
        assert!(md.lines().any(|l| l.starts_with(&format!("| {label}"))), "no row for {label}:\n{md}");
    }
    let r: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(data().join("runs/nginx-vanilla/rate-8.00-rep0/result.json")).unwrap(),
    )
    .unwrap();
    let tput = format!("{:.2}", r["outcome"]["throughput_mbs"].as_f64().unwrap());
    assert!(md.contains(&tput), "vanilla's recorded {tput} MB/s is not in the report");
    assert!(md.contains("(vs nginx vanilla)"), "no ratio to vanilla");

    // Figures with data exist and are SVG; the ones without data are omitted with a note.
    for f in ["throughput-vs-rate", "failures-vs-rate", "failures-near-threshold", "disk-vs-delivered"] {
        let svg = std::fs::read_to_string(out_dir.path().join(format!("figures/{f}.svg"))).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(svg.contains("<svg") && svg.contains("</svg>"), "{f} is not an SVG");
        assert!(md.contains(&format!("figures/{f}.svg")), "{f} is not linked");
    }
    assert_eq!(figures, 4);
    // On the close-up the threshold line lies a tenth of the way up the
    // plotting area (its axis spans ten thresholds), not on the x axis.
    let svg = std::fs::read_to_string(out_dir.path().join("figures/failures-near-threshold.svg")).unwrap();
    let ys_of = |line: &str| -> Vec<f64> {
        let points = line.split("points=\"").nth(1).map(|p| p.split('"').next().unwrap().to_string());
        match points {
            Some(p) => p.split_whitespace().map(|xy| xy.split(',').nth(1).unwrap().parse().unwrap()).collect(),
            None => ["y1", "y2"].iter().filter_map(|a| line.split(&format!(" {a}=\"")).nth(1)?.split('"').next()?.parse().ok()).collect(),
        }
    };
    let mesh: Vec<f64> = svg.lines().filter(|l| l.starts_with("<line") && (l.contains("opacity=\"0.1\"") || l.contains("opacity=\"0.2\""))).flat_map(ys_of).collect();
    let (top, bottom) = mesh.iter().fold((f64::MAX, f64::MIN), |(t, b), &y| (t.min(y), b.max(y)));
    let threshold_y = svg.lines().find(|l| l.contains("stroke=\"#444444\"")).map(ys_of).expect("a threshold line")[0];
    let height = (bottom - threshold_y) / (bottom - top);
    assert!((0.08..0.12).contains(&height), "threshold at {height} of the plot's height");
    assert!(md.contains("No disk traces"));
    assert!(md.contains("No shim statistics"), "the latency section should say it has no data");
    assert!(md.contains("No wc runs"));
    assert!(md.contains("No prefetch or readahead sweeps"));
    // The setup table lists every run.
    assert_eq!(md.matches("| `runs/").count(), 6);

    // The plain table of the quick start has a line per configuration and rate.
    let table = vidbench_report::rate_table(&results);
    assert_eq!(table.lines().filter(|l| l.starts_with("nginx")).count(), 6, "{table}");
}

#[test]
fn a_directory_that_is_not_results_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let err = Results::load(dir.path()).unwrap_err();
    assert!(format!("{err:#}").contains(&dir.path().display().to_string()), "{err:#}");
}

#[test]
fn sequences_from_a_real_trace() {
    let trace = vidbench_report::read_trace(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/trace-excerpt.csv")).unwrap();
    assert_eq!(trace.len(), 300);
    let seqs = vidbench_report::sequences(&trace);
    assert_eq!(seqs.iter().sum::<u64>(), trace.iter().map(|t| t.bytes).sum::<u64>(), "every byte is in one sequence");
    assert!(seqs.len() > 1 && seqs.len() < trace.len(), "vanilla nginx reads in interleaved short runs: {} sequences", seqs.len());
    let cdf = vidbench_report::bytes_cdf(&seqs);
    assert!((cdf.last().unwrap().1 - 100.0).abs() < 1e-9);
    assert!(cdf.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1), "the CDF is increasing");
}

/// A results directory holding one stepped run of configuration `name`
/// (label `label`) with `steps` as its steps.json; returns the run's
/// directory, to which a test adds samples or a trace before `DONE`.
fn stepped_run(root: &Path, name: &str, label: &str, steps: serde_json::Value) -> PathBuf {
    let run = root.join(format!("runs/{name}/steps-rep0"));
    std::fs::create_dir_all(&run).unwrap();
    let write = |p: &Path, v: serde_json::Value| std::fs::write(p, v.to_string()).unwrap();
    write(&root.join("experiment.json"), serde_json::json!({"name": "t", "configs": [{"name": name}]}));
    write(&run.join("run.json"), serde_json::json!({"config": {"name": name, "label": label, "server": "nginx"}, "steps": true}));
    write(&run.join("result.json"), serde_json::json!({"outcome": {"failure_pct": 0.0, "throughput_mbs": 20.0}}));
    write(&run.join("steps.json"), steps);
    run
}

/// A step with a 90 s window from `from`: its rate, failed % and MB/s only.
fn plain_step(rate: f64, from: f64, failure: f64, mbs: f64) -> serde_json::Value {
    serde_json::json!({"index": 0, "spec": {"rate": rate}, "window_s": [from, from + 90.0], "failure_percent": failure, "throughput_mb_s": mbs})
}

/// A results directory of one finished stepped run per (name, setup.json)
/// pair, each with `steps`, replacing any runs before; returns its report.
fn report_of_runs(root: &Path, steps: &serde_json::Value, setups: &[(&str, serde_json::Value)]) -> String {
    std::fs::remove_dir_all(root.join("runs")).ok();
    for (name, setup) in setups {
        let run = stepped_run(root, name, name, steps.clone());
        std::fs::write(run.join("setup.json"), setup.to_string()).unwrap();
        std::fs::write(run.join("DONE"), "").unwrap();
    }
    let configs: Vec<_> = setups.iter().map(|(n, _)| serde_json::json!({"name": n})).collect();
    std::fs::write(root.join("experiment.json"), serde_json::json!({"name": "t", "configs": configs}).to_string()).unwrap();
    report_md(root)
}

/// Writes the report of the results in `root` to `root/report.md` and
/// returns its text.
fn report_md(root: &Path) -> String {
    let out = root.join("report.md");
    vidbench_report::write_report(&Results::load(root).unwrap(), &out).unwrap();
    std::fs::read_to_string(&out).unwrap()
}

/// A stepped run under Libception whose steps carry the daemon's prefetch
/// window and whose samples.csv the size in force: the report's prefetch
/// table shows each step's figures, and the size-over-time figure is drawn.
#[test]
fn prefetch_windows_and_the_size_over_time() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let step = |rate: f64, from: f64, size: f64, evicted: f64| {
        serde_json::json!({
            "index": 0, "spec": {"rate": rate}, "window_s": [from, from + 90.0], "failure_percent": 0.1, "throughput_mb_s": 40.0,
            "prefetch": {"size_mean_bytes": size, "size_end_bytes": size, "read_mb_s": 50.0, "used_mb_s": 45.0,
                         "evicted_mb_s": evicted, "wasted_mb_s": 0.5, "reread_mb_s": 1.0}
        })
    };
    let mut scaled = step(6.0, 660.0, 3145728.0, 12.5);
    scaled["prefetch"]["scaled_share"] = serde_json::json!(0.5);
    scaled["prefetch"]["scaled_mean_bytes"] = serde_json::json!(1415577.6);
    let run = stepped_run(root, "lib", "nginx + Libception (adaptive)", serde_json::json!([step(5.0, 450.0, 2097152.0, 5.0), scaled]));
    let mut samples = String::from("t_s,disk_bytes,prefetch_bytes\n");
    for k in 0..20 {
        samples.push_str(&format!("{},{},{}\n", k * 5, k * 1000, 2097152 + (k / 10) * 1048576));
    }
    std::fs::write(run.join("samples.csv"), samples).unwrap();
    let config = serde_json::json!({"name": "lib", "label": "nginx + Libception (adaptive)", "server": "nginx", "libception": "full", "promote": true});
    std::fs::write(run.join("run.json"), serde_json::json!({"config": config, "steps": true}).to_string()).unwrap();
    std::fs::write(run.join("DONE"), "").unwrap();

    let results = Results::load(root).unwrap();
    assert_eq!(results.runs.len(), 2, "one entry per step");
    let out = root.join("report/report.md");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    vidbench_report::write_report(&results, &out).unwrap();
    let md = std::fs::read_to_string(&out).unwrap();
    assert!(md.contains("## Prefetching (paper 001 Table 1"), "{md}");
    assert!(md.contains("| nginx + Libception (adaptive) | 5.00 | 2.00 / 2.00 | 50.00 | 45.00 | 1.12 | 5.00 | 0.50 | 1.00 | 10.00 |"), "{md}");
    assert!(md.contains("| nginx + Libception (adaptive) | 6.00 | 3.00 / 3.00 | 50.00 | 45.00 | 1.12 | 12.50 | 0.50 | 1.00 | 25.00 |"), "{md}");
    // Sizes by bitrate: only the window with a scale in force has a row.
    assert!(md.contains("| nginx + Libception (adaptive) | 6.00 | 3.00 | 50.00 | 1.35 |"), "{md}");
    assert!(!md.contains("| nginx + Libception (adaptive) | 5.00 | 2.00 |"), "{md}");
    let svg = std::fs::read_to_string(root.join("report/figures/prefetch-size-over-time.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("nginx + Libception (adaptive)"), "the size figure names its run");
    let setup_rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| `runs/lib/steps-rep0` |")).collect();
    assert_eq!(setup_rows.len(), 1, "the stepped run is one run in the setup table: {setup_rows:?}");
    assert!(setup_rows[0].contains("| nginx | full, promoted |"), "{}", setup_rows[0]);

    // Block mode: the largest request is the loop device's, with the drive's
    // joining limit beside it when that differs.
    let queue = serde_json::json!({"disk": {"block": {"queue": {"max_sectors_kb": 1280, "drive_joins_kb": 16384}}}});
    std::fs::write(run.join("setup.json"), queue.to_string()).unwrap();
    vidbench_report::write_report(&Results::load(root).unwrap(), &out).unwrap();
    let md = std::fs::read_to_string(&out).unwrap();
    let row = md.lines().find(|l| l.starts_with("| `runs/lib/steps-rep0` |")).unwrap();
    assert!(row.contains("| 1280 (drive joins 16384) |"), "{row}");

    // The daemon's reads over the run (its stats at the end, two disks):
    // their mean against the size asked for; none without daemon.json.
    assert!(!md.contains("The daemon's reads over each whole run"), "{md}");
    let fixed = serde_json::json!({"name": "lib", "label": "nginx + Libception (adaptive)", "server": "nginx", "libception": "full", "prefetch_kb": 4096});
    std::fs::write(run.join("run.json"), serde_json::json!({"config": fixed, "steps": true}).to_string()).unwrap();
    let disk = |reads: u64, bytes: u64, buckets: serde_json::Value| serde_json::json!({"name": "d", "reads": reads, "bytes_read": bytes, "reads_by_size": buckets});
    let stats = serde_json::json!({"disks": [
        disk(3, 3 * 2_618_750, serde_json::json!([{"le_bytes": 4194304, "count": 3}])),
        disk(1, 4_194_304, serde_json::json!([{"le_bytes": 4194304, "count": 1}])),
    ]});
    std::fs::write(run.join("daemon.json"), stats.to_string()).unwrap();
    vidbench_report::write_report(&Results::load(root).unwrap(), &out).unwrap();
    let md = std::fs::read_to_string(&out).unwrap();
    // (3 x 2,618,750 + 4,194,304) / 4 = 3,012,636 bytes: 2942 KiB, 0.72 of 4 MiB.
    assert!(md.contains("| lib | `runs/lib/steps-rep0` | 4096 | 4 | 12.1 | 2942 | 0.72 |"), "{md}");
    // A damaged stats file is named, not skipped.
    std::fs::write(run.join("daemon.json"), "{\"disks\": [{\"reads\": 3}]}").unwrap();
    let err = format!("{:#}", vidbench_report::write_report(&Results::load(root).unwrap(), &out).unwrap_err());
    assert!(err.contains("daemon.json") && err.contains("bytes_read"), "{err}");
}

/// A run of the adaptive controller with its `controller.csv` (paper 001
/// Figs 3-4): one figure of the size and the score per interval, and one of
/// the delivered MB/s (in bins of the controller's interval, from the load
/// client's intervals) and the eviction time; a malformed row is an error
/// naming the file and the row.
#[test]
fn the_adaptive_controller_over_time() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let step = serde_json::json!({
        "index": 0, "spec": {"rate": 4.0}, "window_s": [450.0, 540.0], "failure_percent": 0.0, "throughput_mb_s": 30.0,
        "prefetch": {"size_mean_bytes": 4194304.0, "size_end_bytes": 4194304.0, "read_mb_s": 30.0, "used_mb_s": 29.0,
                     "evicted_mb_s": 1.0, "wasted_mb_s": 0.0, "reread_mb_s": 0.0}
    });
    let run = stepped_run(root, "adaptive", "nginx + Libception (adaptive)", serde_json::json!([step]));
    let config = serde_json::json!({"name": "adaptive", "label": "nginx + Libception (adaptive)", "server": "nginx", "libception": "full"});
    std::fs::write(run.join("run.json"), serde_json::json!({"config": config, "steps": true}).to_string()).unwrap();
    // Intervals of 60 s: 8 MiB, then 7.5 after the eviction time showed; the first has no score.
    let mut controller = String::from("t_s,worker,index,length_s,prefetch_bytes,next_bytes,decision,score,eviction_time_estimate_s\n");
    for k in 1..=6u64 {
        let size = if k < 3 { 8 << 20 } else { (15 << 20) / 2 };
        let score = if k == 1 { String::new() } else { format!("{}", 3.0 + k as f64 / 10.0) };
        let decision = match k {
            2 => "warm-up",
            3 => "settle",
            _ => "stay",
        };
        controller.push_str(&format!("{},0,{k},60,{size},{size},{decision},{score},{}\n", 60 * k, 50 + k));
    }
    std::fs::write(run.join("controller.csv"), &controller).unwrap();
    // The load delivered 25 MB/s for 180 s, then 30 MB/s (5 s intervals).
    std::fs::create_dir_all(run.join("load")).unwrap();
    let mut intervals = String::from("start_s,end_s,received_bytes\n");
    for k in 0..72 {
        let mb_s = if k < 36 { 25.0 } else { 30.0 };
        intervals.push_str(&format!("{},{},{}\n", k * 5, k * 5 + 5, mb_s * 5e6));
    }
    std::fs::write(run.join("load/intervals.csv"), intervals).unwrap();
    std::fs::write(run.join("DONE"), "").unwrap();

    let bins = vidbench_report::delivered_mb_s_over_time(&run, 60.0).unwrap();
    assert_eq!(bins, vec![(60.0, 25.0), (120.0, 25.0), (180.0, 25.0), (240.0, 30.0), (300.0, 30.0), (360.0, 30.0)]);
    let got = vidbench_report::controller_intervals(&run).unwrap();
    assert_eq!(got.len(), 6);
    assert_eq!((got[0].score, got[1].score, got[2].prefetch_bytes), (None, Some(3.2), 7864320.0));
    use vidbench_report::Unscored::{Settle, WarmUp};
    assert_eq!(got.iter().map(|i| i.unscored).collect::<Vec<_>>(), [None, Some(WarmUp), Some(Settle), None, None, None]);

    let results = Results::load(root).unwrap();
    let out = root.join("report/report.md");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    vidbench_report::write_report(&results, &out).unwrap();
    let md = std::fs::read_to_string(&out).unwrap();
    assert!(md.contains("figures/controller-adaptive-size-score.svg"), "{md}");
    // The scores by size: 7.5 MiB three times (3.4-3.6, sd 0.1), its first
    // interval settling the change, left out; 8 MiB's one score is the
    // warm-up's, left out; no evicted share in a file without the column.
    assert!(md.contains("| nginx + Libception (adaptive) | 7.5 | 3 | 3.50 | 3 % | 3.40-3.60 | - |"), "{md}");
    assert!(!md.contains("| nginx + Libception (adaptive) | 8.0 |"), "{md}");
    assert!(
        md.contains("all its runs; left out: its warm-up interval, the first busy one it scored after the daemon started, and its settling interval, the first after a change of size)"),
        "{md}"
    );
    assert!(md.contains("figures/controller-adaptive-throughput.svg"), "{md}");
    // Legend entries are text elements of their own (the title also says "score").
    let svg = std::fs::read_to_string(root.join("report/figures/controller-adaptive-size-score.svg")).unwrap();
    let legend = |svg: &str, name: &str| svg.contains(&format!(">\n{name}\n</text>"));
    assert!(legend(&svg, "size in force (MiB)") && legend(&svg, "score"), "{svg}");
    let svg = std::fs::read_to_string(root.join("report/figures/controller-adaptive-throughput.svg")).unwrap();
    assert!(legend(&svg, "delivered MB/s (60 s means)") && legend(&svg, "eviction time, estimate (s)"), "{svg}");

    // A run killed while writing leaves a last line without its newline: left out.
    std::fs::write(run.join("controller.csv"), format!("{controller}420,0,7,6")).unwrap();
    assert_eq!(vidbench_report::controller_intervals(&run).unwrap().len(), 6);
    controller.push_str("420,0,7,60,eight,0,stay,,\n");
    std::fs::write(run.join("controller.csv"), &controller).unwrap();
    let err = format!("{:#}", vidbench_report::write_report(&Results::load(root).unwrap(), &out).unwrap_err());
    assert!(err.contains("controller.csv: row 8: prefetch_bytes is not a number"), "{err}");
}

/// Paper 001 Figs 5-6: fixed prefetch sizes expanded from a list and an
/// adaptive configuration; the report puts the adaptive result beside the
/// best fixed size, with the size the controller settled on and whether it
/// reaches the best fixed MB/s minus its CI.
#[test]
fn adaptive_beside_the_best_fixed_size() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // (rate, MB/s, failed %, sample CI, size at the window's end)
    let step = |rate: f64, from: f64, mbs: f64, failed: f64, ci: f64, size: f64| {
        serde_json::json!({"index": 0, "spec": {"rate": rate}, "window_s": [from, from + 90.0], "failure_percent": failed,
                           "throughput_mb_s": mbs, "samples_mb_s": [mbs, ci],
                           "prefetch": {"size_mean_bytes": size, "size_end_bytes": size, "read_mb_s": mbs}})
    };
    let mib = 1048576.0;
    let runs = [
        ("fixed-p1024", serde_json::json!({"base": "fixed", "prefetch_kb": 1024}), vec![step(3.0, 450.0, 25.0, 0.0, 1.0, mib), step(3.5, 600.0, 26.0, 5.0, 1.0, mib)]),
        ("fixed-p4096", serde_json::json!({"base": "fixed", "prefetch_kb": 4096}), vec![step(4.0, 450.0, 32.0, 0.0, 1.5, 4.0 * mib), step(4.5, 600.0, 33.0, 4.0, 1.5, 4.0 * mib)]),
        ("fixed-p8192", serde_json::json!({"base": "fixed", "prefetch_kb": 8192}), vec![step(3.5, 450.0, 30.0, 0.0, 1.0, 8.0 * mib), step(4.0, 600.0, 31.0, 4.0, 1.0, 8.0 * mib)]),
        ("adaptive", serde_json::json!({"prefetch_adaptive": true}), vec![step(4.0, 450.0, 31.0, 0.0, 1.0, 3.5 * mib), step(4.0, 600.0, 31.0, 0.0, 1.0, 3.0 * mib), step(4.5, 750.0, 31.5, 2.0, 1.0, 3.0 * mib)]),
        // Within 5 % of the best (30.4) but below it minus its CI (30.5): does not reach it.
        ("adaptive-low", serde_json::json!({"prefetch_adaptive": true}), vec![step(4.0, 450.0, 30.45, 0.0, 1.0, 6.0 * mib), step(4.5, 600.0, 31.0, 2.0, 1.0, 6.0 * mib)]),
    ];
    for (name, keys, steps) in &runs {
        let run = stepped_run(root, name, name, serde_json::json!(steps));
        let mut config = serde_json::json!({"name": name, "label": name, "server": "nginx", "libception": "full"});
        config.as_object_mut().unwrap().extend(keys.as_object().unwrap().clone());
        std::fs::write(run.join("run.json"), serde_json::json!({"config": config, "steps": true}).to_string()).unwrap();
        std::fs::write(run.join("DONE"), "").unwrap();
    }
    let names: Vec<serde_json::Value> = runs.iter().map(|(n, _, _)| serde_json::json!({"name": n})).collect();
    std::fs::write(root.join("experiment.json"), serde_json::json!({"name": "t", "configs": names}).to_string()).unwrap();

    let results = Results::load(root).unwrap();
    let out = root.join("report/report.md");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    vidbench_report::write_report(&results, &out).unwrap();
    let md = std::fs::read_to_string(&out).unwrap();
    assert!(md.contains("### Adaptive against the best fixed size (paper 001 Figures 5-6)"), "{md}");
    // Best fixed: 4 MiB at 32 +- 1.5; adaptive 31 +- CI of its two windows, settled at 3.25 MiB (3.5 and 3.0).
    let row = md.lines().find(|l| l.starts_with("| fixed | 4096 KiB | 32.00 ± 1.50 | adaptive |")).unwrap_or_else(|| panic!("{md}"));
    assert!(row.ends_with("| 3.25 | -3.1 % | yes |"), "{row}");
    let row = md.lines().find(|l| l.starts_with("| fixed | 4096 KiB | 32.00 ± 1.50 | adaptive-low |")).unwrap_or_else(|| panic!("{md}"));
    assert!(row.ends_with("| 30.45 ± 1.00 | 6.00 | -4.8 % | no |"), "{row}");
}

/// Steps that carry the cgroup's LRU lists: the page-cache table shows each
/// window's lists and its refaults as a share of what the drive read, and
/// marks a window the gate's cap opened on moving lists; steps without them
/// (records from before) leave the section out.
#[test]
fn lru_windows_in_the_page_cache_table() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let gib = (1u64 << 30) as f64;
    let step = |from: f64, lru: serde_json::Value, cache_settled: Option<bool>| {
        serde_json::json!({
            "index": 0, "spec": {"rate": 4.7}, "window_s": [from, from + 90.0], "failure_percent": 0.0, "throughput_mb_s": 40.0,
            "disk": {"seconds": 90.0, "reads": 900.0, "bytes": 4.5e9, "busy_s": 60.0}, "lru": lru, "cache_settled": cache_settled
        })
    };
    let lru = |active: f64, inactive: f64, refault: f64| serde_json::json!({"active_file_mean_bytes": active * gib, "inactive_file_mean_bytes": inactive * gib, "refault_mb_s": refault});
    let steps = [step(450.0, lru(3.5, 4.5, 5.0), Some(false)), step(1200.0, lru(7.0, 0.875, 25.0), Some(true))];
    let run = stepped_run(root, "k", "nginx, kernel tuning", serde_json::json!(steps));
    std::fs::write(run.join("DONE"), "").unwrap();
    let out = root.join("report/report.md");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    vidbench_report::write_report(&Results::load(root).unwrap(), &out).unwrap();
    let md = std::fs::read_to_string(&out).unwrap();
    assert!(md.contains("## Page cache: the LRU lists"), "{md}");
    assert!(md.contains("| nginx, kernel tuning | 4.70 | 450-540 *lists moving* | 3.50 | 4.50 | 5.00 | 10.00 |"), "{md}");
    assert!(md.contains("| nginx, kernel tuning | 4.70 | 1200-1290 | 7.00 | 0.88 | 25.00 | 50.00 |"), "{md}");

    let older = tempfile::tempdir().unwrap();
    let run = stepped_run(older.path(), "k", "nginx, kernel tuning", serde_json::json!([step(450.0, serde_json::Value::Null, None)]));
    std::fs::write(run.join("DONE"), "").unwrap();
    assert!(!report_md(older.path()).contains("## Page cache"));

    // Windows with the cgroup's kernel memory sampled get its column; one
    // without it shows a dash there.
    let kernel = tempfile::tempdir().unwrap();
    let mut with_kernel = lru(7.0, 0.875, 25.0);
    with_kernel["kernel_mean_bytes"] = serde_json::json!(130.0 * 1048576.0);
    let steps = [step(450.0, lru(3.5, 4.5, 5.0), Some(true)), step(1200.0, with_kernel, Some(true))];
    let run = stepped_run(kernel.path(), "k", "nginx, kernel tuning", serde_json::json!(steps));
    std::fs::write(run.join("DONE"), "").unwrap();
    let md = report_md(kernel.path());
    assert!(md.contains("| refaults % of disk read | kernel MiB |"), "{md}");
    assert!(md.contains("| nginx, kernel tuning | 4.70 | 1200-1290 | 7.00 | 0.88 | 25.00 | 50.00 | 130.00 |"), "{md}");
    assert!(md.contains("| nginx, kernel tuning | 4.70 | 450-540 | 3.50 | 4.50 | 5.00 | 10.00 | - |"), "{md}");
}

/// Each window's first third against its last (paper 003's steady state,
/// shown): the active sessions from steps.json, the delivered MB/s from the
/// load client's intervals, the disk MB/s from the drive's cumulative
/// counter in samples.csv; a record with none of them has no such section.
#[test]
fn each_window_shows_whether_it_was_steady() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let step = serde_json::json!({
        "index": 0, "spec": {"rate": 4.7}, "window_s": [300.0, 390.0], "failure_percent": 0.0, "throughput_mb_s": 21.0,
        "active_sessions": {"mean": 610.0, "first_third": 600.0, "last_third": 630.0}
    });
    let run = stepped_run(root, "v", "nginx by default", serde_json::json!([step]));
    std::fs::create_dir_all(run.join("load")).unwrap();
    // Delivered: 20 MB/s until 345 s, then 22; disk: 30 MB/s throughout.
    let mut intervals = String::from("start_s,end_s,received_bytes\n");
    let mut samples = String::from("t_s,disk_bytes\n");
    for k in 0..80u32 {
        let t = f64::from(k) * 5.0;
        let mb_s = if t < 345.0 { 20.0 } else { 22.0 };
        intervals.push_str(&format!("{t},{},{}\n", t + 5.0, mb_s * 5e6));
        samples.push_str(&format!("{t},{}\n", t * 30e6));
    }
    std::fs::write(run.join("load/intervals.csv"), intervals).unwrap();
    std::fs::write(run.join("samples.csv"), samples).unwrap();
    std::fs::write(run.join("DONE"), "").unwrap();
    let md = report_md(root);
    assert!(md.contains("## Steady state over each window"), "{md}");
    assert!(md.contains("| nginx by default | 4.70 | 300-390 | 600 → 630 | 5.00 | 20.00 → 22.00 | 10.00 | 30.00 → 30.00 | 0.00 |"), "{md}");

    let older = tempfile::tempdir().unwrap();
    let step = serde_json::json!({"index": 0, "spec": {"rate": 4.7}, "window_s": [300.0, 390.0], "failure_percent": 0.0, "throughput_mb_s": 21.0});
    let run = stepped_run(older.path(), "v", "nginx by default", serde_json::json!([step]));
    std::fs::write(run.join("DONE"), "").unwrap();
    assert!(!report_md(older.path()).contains("## Steady state over each window"));
}

/// Steps that carry the server's CPU seconds over their window: the per-rate
/// table gives the server's CPU % of the window (not of the whole run).
#[test]
fn server_cpu_over_each_window() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let step = |rate: f64, from: f64, cpu: Option<f64>| {
        serde_json::json!({
            "index": 0, "spec": {"rate": rate}, "window_s": [from, from + 90.0], "failure_percent": 0.0, "throughput_mb_s": 20.0,
            "server_cpu_s": cpu
        })
    };
    let run = stepped_run(root, "a", "Apache", serde_json::json!([step(2.8, 450.0, Some(45.0)), step(2.9, 600.0, Some(72.0)), step(3.0, 750.0, None)]));
    std::fs::write(run.join("DONE"), "").unwrap();
    let md = report_md(root);
    assert!(md.contains("| Apache | 2.80 | 1 | 20.00 | 0.00 | 0.00 | 0.00 | 50.00 |"), "{md}");
    assert!(md.contains("| Apache | 2.90 | 1 | 20.00 | 0.00 | 0.00 | 0.00 | 80.00 |"), "{md}");
    assert!(md.contains("| Apache | 3.00 | 1 | 20.00 | 0.00 | 0.00 | 0.00 | - |"), "{md}");
}

/// Steps that carry the machine's busy CPUs and the drive's reply lateness
/// get a row each in the machine table; results from before have no table.
#[test]
fn the_machine_beside_each_window() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let step = |from: f64, host: Option<f64>, late: Option<f64>, reclaim: Option<f64>| {
        serde_json::json!({
            "index": 0, "spec": {"rate": 4.87}, "window_s": [from, from + 90.0], "failure_percent": 0.0, "throughput_mb_s": 39.0,
            "server_cpu_s": 9.0, "daemon_cpu_s": 4.5, "host_cpus_busy": host, "global_reclaim_pages": reclaim,
            "disk": {"seconds": 90.0, "reads": 9000.0, "bytes": 4.9e9, "busy_s": 80.0, "reply_late_ms": late}
        })
    };
    let run = stepped_run(
        root,
        "l",
        "nginx + Libception",
        serde_json::json!([step(1200.0, Some(1.25), Some(0.24), Some(1500.0)), step(1320.0, None, None, None), step(1440.0, Some(1.0), Some(0.2), Some(0.0))]),
    );
    // Send buffers every 15 s: the window's snapshots (1200-1290 s) only; a
    // line cut by a killed run is left out.
    let snapshot = |t: f64, median: u64, max: u64| serde_json::json!({"t_s": t, "send_buffer_bytes": {"connections": 600, "min": 4096, "median": median, "max": max}}).to_string();
    let lines = [snapshot(1185.0, 9 << 20, 9 << 20), snapshot(1200.0, 1 << 20, 4 << 20), snapshot(1215.0, 2 << 20, 3 << 20), snapshot(1230.0, 3 << 20, 4 << 20)];
    std::fs::write(run.join("sockets.jsonl"), lines.join("\n") + "\n{\"t_s\": 124").unwrap();
    std::fs::write(run.join("DONE"), "").unwrap();
    let md = report_md(root);
    assert!(md.contains("## The machine beside each window"), "{md}");
    assert!(md.contains("| nginx + Libception | 4.87 | 1200-1290 | 1.25 | 0.10 | 0.05 | 0.24 | 2048 / 4096 | 1500 |"), "{md}");
    assert!(md.contains("| nginx + Libception | 4.87 | 1440-1530 | 1.00 | 0.10 | 0.05 | 0.20 | - | 0 |"), "{md}");
    assert!(md.contains("**Global reclaim reached 1 window(s)**"), "the window it reached is named in a count: {md}");
    assert!(!md.contains("| nginx + Libception | 4.87 | 1320-1410 |"), "a window without the machine's figures has no row: {md}");
    assert!(!md.contains("vidbench built from"), "no build recorded, none reported: {md}");
    std::fs::write(root.join("machine.json"), serde_json::json!({"cpus": 2, "git_commit": "abc", "vidbench_build": "def-dirty"}).to_string()).unwrap();
    let md = report_md(root);
    assert!(md.contains("git abc; vidbench built from def-dirty."), "{md}");

    // The report of one finished run of the given steps, in a new directory.
    let report_of = |steps: serde_json::Value| {
        let dir = tempfile::tempdir().unwrap();
        let run = stepped_run(dir.path(), "l", "nginx + Libception", steps);
        std::fs::write(run.join("DONE"), "").unwrap();
        report_md(dir.path())
    };
    assert!(!report_of(serde_json::json!([step(1200.0, None, None, None)])).contains("## The machine"));

    // Windows recorded before global reclaim was sampled: no such column.
    let md = report_of(serde_json::json!([step(1200.0, Some(1.25), Some(0.24), None)]));
    assert!(md.contains("| nginx + Libception | 4.87 | 1200-1290 | 1.25 | 0.10 | 0.05 | 0.24 | - |\n") && !md.contains("global reclaim"), "{md}");
    assert!(!md.contains("CPU wait"), "windows from before the CPU wait was sampled: no such column: {md}");

    // Windows with the CPU pressure and steal: two more columns.
    let mut with_wait = step(1200.0, Some(1.25), Some(0.24), Some(0.0));
    with_wait["host_cpu_wait"] = serde_json::json!(0.354);
    with_wait["host_cpus_stolen"] = serde_json::json!(0.02);
    let md = report_of(serde_json::json!([with_wait]));
    assert!(md.contains("| machine CPUs busy | CPU wait % | stolen CPUs | server CPUs |"), "{md}");
    assert!(md.contains("| nginx + Libception | 4.87 | 1200-1290 | 1.25 | 35.4 | 0.02 | 0.10 | 0.05 | 0.24 | - | 0 |"), "{md}");
    assert!(!md.contains("threads blocked"), "windows from before the daemon's wait was sampled: no such column: {md}");

    // Windows with the server's threads blocked on the daemon and the
    // daemon's reading share: two more columns.
    let mut with_blocked = step(1200.0, Some(1.25), Some(0.24), Some(0.0));
    with_blocked["server_threads_blocked"] = serde_json::json!(3.104);
    with_blocked["daemon_reading"] = serde_json::json!(0.9412);
    let md = report_of(serde_json::json!([with_blocked]));
    assert!(md.contains("| global reclaim pages | server threads blocked | daemon reading % |"), "{md}");
    assert!(md.contains("| nginx + Libception | 4.87 | 1200-1290 | 1.25 | 0.10 | 0.05 | 0.24 | - | 0 | 3.10 | 94.1 |"), "{md}");
}

/// A stepped run whose shim kept statistics through it: the sendfile CDF is
/// the window's (the difference of the `shim.jsonl` lines at its edges), not
/// the whole life in the per-process files, and the report says which.
#[test]
fn sendfile_latency_over_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let step = serde_json::json!({"index": 0, "spec": {"rate": 2.0}, "window_s": [100.0, 190.0], "failure_percent": 0.0, "throughput_mb_s": 20.0});
    let run = stepped_run(root, "t", "nginx (track)", serde_json::json!([step]));
    // The whole life: 1,000 slow calls of the ramp (2^24 ns) and the window's.
    let file = |slow: u64, fast: u64| {
        serde_json::json!({"pid": 7, "at_exit": true, "functions": {"sendfile64": {
            "calls": slow + fast, "bytes": 1, "hits": 0, "misses": 0, "unknown": 0, "errors": 0,
            "latency_ns": {"16777216": slow, "65536": fast}}}})
    };
    std::fs::create_dir_all(run.join("shim")).unwrap();
    std::fs::write(run.join("shim/stats-7.json"), file(1000, 300).to_string()).unwrap();
    // Sums every 5 s; the window (100-190 s) saw 300 fast calls and no slow one.
    let line = |t: f64, fast: u64| {
        let totals = serde_json::json!({"processes": 1, "functions": {"sendfile64": {
            "calls": 1000 + fast, "bytes": 1, "hits": 0, "misses": 0, "unknown": 0, "errors": 0,
            "latency_ns": {"16777216": 1000, "65536": fast}}}});
        serde_json::json!({"t_s": t, "totals": totals}).to_string()
    };
    let lines: Vec<String> = (0..=40).map(|k| line(k as f64 * 5.0, if k < 20 { 0 } else if k >= 38 { 300 } else { (k as u64 - 20) * 300 / 18 })).collect();
    std::fs::write(run.join("shim.jsonl"), lines.join("\n") + "\n").unwrap();
    std::fs::write(run.join("DONE"), "").unwrap();
    let results = Results::load(root).unwrap();
    let window = results.runs[0].shim_window.as_ref().expect("a window from shim.jsonl");
    assert_eq!(window.functions["sendfile64"].calls, 300);
    assert_eq!(window.latency_of("sendfile"), [(65536, 300)]);
    let md = report_md(root);
    assert!(md.contains("| nginx (track) | 300 | the window 100-190 s"), "{md}");
    let svg = std::fs::read_to_string(root.join("figures/sendfile-latency-cdf.svg")).unwrap();
    assert!(svg.contains("nginx (track)"), "the figure is drawn");

    // Without shim.jsonl (records from before): the processes' whole lives.
    std::fs::remove_file(run.join("shim.jsonl")).unwrap();
    let results = Results::load(root).unwrap();
    assert!(results.runs[0].shim_window.is_none());
    let md = report_md(root);
    assert!(md.contains("From the shim's per-process latency histograms") && !md.contains("| calls counted |"), "{md}");

    // A damaged line is named.
    std::fs::write(run.join("shim.jsonl"), format!("{}\ngarbage\n", line(0.0, 0))).unwrap();
    let err = format!("{:#}", Results::load(root).map(|_| ()).unwrap_err());
    assert!(err.contains("shim.jsonl") && err.contains("line 2"), "{err}");
}

/// A stepped run with a disk trace: the trace figures and table take the
/// requests of the first window at the maximum failure-free rate, put on the
/// trace's clock by the samples' `disk_uptime_s`, not the whole run's.
#[test]
fn trace_figures_cover_the_window_at_the_result_rate() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let step = |rate: f64, from: f64, failed: f64| {
        serde_json::json!({"index": 0, "spec": {"rate": rate}, "window_s": [from, from + 90.0], "failure_percent": failed, "throughput_mb_s": 20.0})
    };
    // 2.5/s fails, 2.0/s passes (the result); its window is 450-540 s.
    let run = stepped_run(root, "ng", "nginx", serde_json::json!([step(2.5, 300.0, 10.0), step(2.0, 450.0, 0.0)]));
    // The drive was mounted 100 s before the load's time 0.
    let mut samples = String::from("t_s,disk_uptime_s\n");
    for k in 0..120 {
        samples.push_str(&format!("{},{}\n", k * 5, k * 5 + 100));
    }
    std::fs::write(run.join("samples.csv"), samples).unwrap();
    // Requests every 10 s of the load's clock from 0 to 600 s: 128 KiB
    // requests inside 450-540 s (9 of them), 4 KiB ones elsewhere.
    let mut trace = String::from("arrival_ns,start_ns,end_ns,file_id,offset,bytes,lba,outcome,seek_cylinders,queue_depth\n");
    for k in 0..60u64 {
        let t = k * 10;
        let start = (t + 100) * 1_000_000_000;
        let bytes = if (450..540).contains(&t) { 131072 } else { 4096 };
        trace.push_str(&format!("{start},{start},{},0,0,{bytes},{},miss,0,1\n", start + 1000, k * 100_000));
    }
    std::fs::write(run.join("disk-trace.csv"), trace).unwrap();
    std::fs::write(run.join("DONE"), "").unwrap();

    let results = Results::load(root).unwrap();
    let out = root.join("report/report.md");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    vidbench_report::write_report(&results, &out).unwrap();
    let md = std::fs::read_to_string(&out).unwrap();
    assert!(md.contains("| nginx @ 2.00/s | 450-540 s | 9 | 128.0 | 9 | 100.0 | 100.0 | 0.0 | 9 | 128 | 0 | 0 |"), "{md}");
    let svg = std::fs::read_to_string(root.join("report/figures/request-size-cdf.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("nginx @ 2.00/s"), "the request-size figure names its run");

    // The window's requests alone, gzipped: the same report without the whole trace.
    let written = vidbench_report::write_trace_windows(&results).unwrap();
    assert_eq!(written, [run.join("disk-trace-window.csv.gz")]);
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(std::fs::File::open(&written[0]).unwrap()), &mut text).unwrap();
    assert_eq!(text.lines().count(), 1 + 9, "the header and the window's 9 requests: {text}");
    assert!(text.lines().skip(1).all(|l| l.contains(",131072,")), "{text}");
    std::fs::remove_file(run.join("disk-trace.csv")).unwrap();
    let again = root.join("again/report.md");
    std::fs::create_dir_all(again.parent().unwrap()).unwrap();
    vidbench_report::write_report(&Results::load(root).unwrap(), &again).unwrap();
    assert_eq!(std::fs::read_to_string(&again).unwrap(), md);
    // A window trace is not windowed again.
    assert!(vidbench_report::write_trace_windows(&Results::load(root).unwrap()).unwrap().is_empty());
}

/// A search resumed in parts: the steps of `steps-part01` (the interrupted
/// run's finished ones) and of `steps-rep0` (the run that went on after
/// them) are one configuration's steps, a rate's steps its repetitions in
/// the order played, whichever directory holds them.
#[test]
fn a_search_resumed_in_parts_is_read_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let step = plain_step;
    let last = stepped_run(root, "srv", "nginx", serde_json::json!([step(5.0, 1300.0, 0.0, 41.0), step(5.5, 1500.0, 2.0, 43.0)]));
    std::fs::write(last.join("DONE"), "").unwrap();
    let part = root.join("runs/srv/steps-part01");
    std::fs::create_dir_all(&part).unwrap();
    for f in ["run.json", "result.json"] {
        std::fs::copy(last.join(f), part.join(f)).unwrap();
    }
    std::fs::write(part.join("steps.json"), serde_json::json!([step(4.0, 1300.0, 0.0, 33.0), step(5.0, 1500.0, 0.1, 40.0)]).to_string()).unwrap();
    std::fs::write(part.join("DONE"), "").unwrap();

    let results = Results::load(root).unwrap();
    let played: Vec<(f64, u32, f64)> = results.runs.iter().map(|r| (r.rate.unwrap(), r.repetition, r.throughput_mbs)).collect();
    assert_eq!(played, vec![(4.0, 0, 33.0), (5.0, 0, 40.0), (5.0, 1, 41.0), (5.5, 0, 43.0)]);
    let at_5 = &results.by_rate("srv")[&vidbench_report::RateKey(5.0)];
    assert_eq!(at_5.len(), 2, "both parts' steps at 5.0 are its repetitions");
    let out = root.join("report/report.md");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    vidbench_report::write_report(&results, &out).unwrap();
    let md = std::fs::read_to_string(&out).unwrap();
    for d in ["runs/srv/steps-part01", "runs/srv/steps-rep0"] {
        assert_eq!(md.matches(&format!("| `{d}` |")).count(), 1, "{d} is one row of the setup table:\n{md}");
    }
    assert!(results.unfinished.is_empty() && !md.contains("Searches not finished"), "the search went on to its end");

    // Before the resume: the part alone is an unfinished search, and says so.
    std::fs::remove_dir_all(&last).unwrap();
    let results = Results::load(root).unwrap();
    assert_eq!(results.unfinished, ["srv"]);
    vidbench_report::write_report(&results, &out).unwrap();
    assert!(std::fs::read_to_string(&out).unwrap().contains("**Searches not finished**: `srv`"));
}

/// Which drive image each run read: one sentence for one build, one line per
/// build (with its runs) when runs read several, the placement digest where
/// the setup has it; nothing for runs without a block-mode image.
#[test]
fn the_drive_image_each_run_read() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let step = serde_json::json!([{"index": 0, "spec": {"rate": 3.0}, "window_s": [450.0, 540.0], "failure_percent": 0.0, "throughput_mb_s": 20.0}]);
    let image = |first: f64, placement: Option<&str>| {
        let mut figures = serde_json::json!({"data_first_byte": first, "data_end_byte": 504.8e9, "extents": 20000, "overlay_blocks": 13686});
        if let Some(p) = placement {
            figures["placement"] = serde_json::json!(p);
        }
        serde_json::json!({"disk": {"block": {"image_key_hash": "1c23cbbd15805c7c", "image_figures": figures}}})
    };
    let report = |setups: &[(&str, serde_json::Value)]| report_of_runs(root, &step, setups);
    let md = report(&[("a", image(193.3e9, Some("171f582824e9a78f"))), ("b", image(193.3e9, Some("171f582824e9a78f")))]);
    assert!(md.contains("Drive image (block mode): every run read image `1c23cbbd15805c7c`, library at 193.3-504.8 GB, placement digest `171f582824e9a78f`."), "{md}");
    let md = report(&[("a", image(193.3e9, Some("171f582824e9a78f"))), ("b", image(193.3e9, None))]);
    assert!(md.contains("the runs read 2 builds"), "{md}");
    assert!(md.contains("- image `1c23cbbd15805c7c`, library at 193.3-504.8 GB, placement digest `171f582824e9a78f`: `runs/a/steps-rep0`"), "{md}");
    assert!(md.contains("no placement digest (before builder version 3): 20000 extents, 13686 metadata blocks: `runs/b/steps-rep0`"), "{md}");
    std::fs::remove_dir_all(root.join("runs")).unwrap();
    let md = report(&[("a", serde_json::json!({"disk": {"mode": "fuse"}}))]);
    assert!(!md.contains("Drive image"), "{md}");
}

/// Which build of vidbench ran each run: one sentence when all ran one, a
/// line per build with its runs when a result spans builds (halves merged,
/// a search resumed on a later build), and the header says it spans them.
#[test]
fn the_build_each_run_ran() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let step = serde_json::json!([{"index": 0, "spec": {"rate": 3.0}, "window_s": [450.0, 540.0], "failure_percent": 0.0, "throughput_mb_s": 20.0}]);
    let a = "054ebbf46c17d072e9d9dfe69a704b42f6e490ab";
    let b = "9ba02151076dd39a80dcc9f3d0047b401f9dc265";
    let machine = |build: &str| serde_json::json!({"machine": {"vidbench_build": build, "git_commit": build.trim_end_matches("-dirty"), "git_dirty": true}});
    std::fs::write(root.join("machine.json"), machine(a)["machine"].to_string()).unwrap();
    let report = |setups: &[(&str, serde_json::Value)]| report_of_runs(root, &step, setups);
    // A dirty checkout is not a dirty build: only the build's own mark counts.
    let md = report(&[("x", machine(a)), ("y", machine(a))]);
    assert!(md.contains("Build: every run ran vidbench built from `054ebbf46c17`."), "{md}");
    assert!(!md.contains("built with local changes"), "{md}");
    assert!(!md.contains("builds: \"Setup"), "{md}");
    let md = report(&[("x", machine(a)), ("y", machine(&format!("{b}-dirty"))), ("z", machine(a))]);
    assert!(md.contains(&format!("vidbench built from {a} (the runs used 2 builds: \"Setup of every run\")")), "{md}");
    assert!(md.contains("the runs ran 2 builds of vidbench"), "{md}");
    assert!(md.contains("- `054ebbf46c17`: `runs/x/steps-rep0`, `runs/z/steps-rep0`"), "{md}");
    assert!(md.contains("- `9ba02151076d` (built with local changes): `runs/y/steps-rep0`"), "{md}");
    // Runs recorded before the build was: their checkout, said to be one.
    let md = report(&[("x", serde_json::json!({"machine": {"git_commit": a}}))]);
    assert!(md.contains("every run ran vidbench built from checkout `054ebbf46c17` (build not recorded)"), "{md}");
}

/// The setup table names a configuration's own worker count beside its
/// server (Table 3 gives servers the counts they are tuned to); a server on
/// the experiment's count is named alone, Apache always with its pool.
#[test]
fn a_configurations_own_worker_count_is_shown() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let step = serde_json::json!([{"index": 0, "spec": {"rate": 3.0}, "window_s": [450.0, 540.0], "failure_percent": 0.0, "throughput_mb_s": 20.0}]);
    report_of_runs(root, &step, &[("own", serde_json::json!({})), ("run-wide", serde_json::json!({})), ("apache", serde_json::json!({}))]);
    let config = |name: &str, extra: serde_json::Value| {
        let mut c = serde_json::json!({"name": name, "label": name, "server": if name == "apache" { "apache" } else { "lighttpd" }});
        c.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let run = serde_json::json!({"config": c, "steps": true});
        std::fs::write(root.join(format!("runs/{name}/steps-rep0/run.json")), run.to_string()).unwrap();
    };
    config("own", serde_json::json!({"workers": 16}));
    config("run-wide", serde_json::json!({}));
    config("apache", serde_json::json!({"workers": 8, "threads_per_worker": 256}));
    let experiment = serde_json::json!({"name": "t", "run": {"workers": 4, "threads_per_worker": 64},
        "configs": [{"name": "own", "workers": 16}, {"name": "run-wide"}, {"name": "apache", "workers": 8}]});
    std::fs::write(root.join("experiment.json"), experiment.to_string()).unwrap();
    let md = report_md(root);
    assert!(md.contains("| `runs/own/steps-rep0` | lighttpd (16 workers) |"), "{md}");
    assert!(md.contains("| `runs/run-wide/steps-rep0` | lighttpd |"), "{md}");
    assert!(md.contains("| `runs/apache/steps-rep0` | apache (8 x 256 threads) |"), "{md}");
    assert!(md.contains("workers 4 (where a configuration has no count of its own: \"Setup of every run\")"), "{md}");
    // Without a count of its own anywhere, the experiment's is every server's.
    let plain = serde_json::json!({"name": "t", "run": {"workers": 4}, "configs": [{"name": "run-wide"}]});
    std::fs::write(root.join("experiment.json"), plain.to_string()).unwrap();
    std::fs::remove_dir_all(root.join("runs/own")).unwrap();
    std::fs::remove_dir_all(root.join("runs/apache")).unwrap();
    let md = report_md(root);
    assert!(md.contains("workers 4, ") && !md.contains("no count of its own"), "{md}");
}

/// A damaged run file is an error that names it, never a report that quietly
/// reads the run another way: a cut steps.json used to turn a stepped run
/// into a classic one (whole-run disk figures beside windowed ones), an
/// empty one dropped the configuration, and a bad CSV cell thinned a figure.
#[test]
fn damaged_run_files_are_named_not_skipped() {
    let step = serde_json::json!({"index": 0, "spec": {"rate": 4.2}, "window_s": [600.0, 690.0], "failure_percent": 0.0, "throughput_mb_s": 30.0});
    let fresh = || {
        let dir = tempfile::tempdir().unwrap();
        let run = stepped_run(dir.path(), "v", "nginx", serde_json::json!([step.clone()]));
        std::fs::write(run.join("DONE"), "").unwrap();
        (dir, run)
    };

    let (dir, _) = fresh();
    report_md(dir.path()); // the intact run reports
    let (_intact, run) = fresh();
    let steps = std::fs::read_to_string(run.join("steps.json")).unwrap();
    // (a file, relative to the run's directory, its damaged text, words the error must have)
    let cases: [(&str, &str, &[&str]); 7] = [
        ("steps.json", &steps[..steps.len() / 2], &["steps.json", "not valid JSON"]),
        ("steps.json", "[]", &["steps.json", "no step"]),
        ("resources.json", "{\"server_cpu_s\": ", &["resources.json", "not valid JSON"]),
        ("load/intervals.csv", "start_s,end_s,received_bytes\n600,605,1000\n605,610,1O00\n", &["intervals.csv", "row 3: received_bytes is not a number"]),
        ("samples.csv", "t_s,disk_bytes\n600,1\n605,2,3\n", &["samples.csv", "row 3"]),
        ("sockets.jsonl", "{\"t_s\": 600, \"send_buffer_bytes\": null}\ngarbage\n{\"t_s\": 615}\n", &["sockets.jsonl", "line 2"]),
        ("../../../experiment.json", "null", &["experiment.json", "not an experiment"]),
    ];
    for (file, text, words) in cases {
        let (dir, run) = fresh();
        std::fs::create_dir_all(run.join(file).parent().unwrap()).unwrap();
        std::fs::write(run.join(file), text).unwrap();
        let err = format!("{:#}", Results::load(dir.path()).map(|_| ()).unwrap_err());
        assert!(words.iter().all(|w| err.contains(w)), "{file}: expected {words:?} in: {err}");
    }

    // What a killed run leaves is not damage: a last line without its
    // newline is left out, and empty cells are rows without that value.
    let (dir, run) = fresh();
    std::fs::write(run.join("samples.csv"), "t_s,disk_bytes,prefetch_bytes\n600,1,\n605,2,\n61").unwrap();
    std::fs::create_dir_all(run.join("load")).unwrap();
    std::fs::write(run.join("load/intervals.csv"), "start_s,end_s,received_bytes\n600,605,1000\n605,6").unwrap();
    report_md(dir.path());
}

/// Stepped searches probe different rates for each configuration, so
/// table.txt's per-rate ratio stays empty for them; its maximum lines carry
/// the ratio of the MB/s at each configuration's own maximum to its server's
/// vanilla configuration's.
#[test]
fn the_plain_table_compares_maxima_of_stepped_searches() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let step = plain_step;
    let runs = [
        ("v", serde_json::json!({}), vec![step(2.75, 1200.0, 0.0, 22.0), step(2.89, 1380.0, 0.0, 23.13), step(3.03, 1560.0, 8.0, 24.0)]),
        ("l", serde_json::json!({"libception": "full"}), vec![step(4.7, 1200.0, 0.0, 38.4), step(4.87, 1380.0, 0.0, 39.11), step(5.11, 1560.0, 18.0, 39.4)]),
    ];
    for (name, keys, steps) in &runs {
        let run = stepped_run(root, name, name, serde_json::json!(steps));
        let mut config = serde_json::json!({"name": name, "label": name, "server": "nginx", "read_ahead_kb": 128});
        config.as_object_mut().unwrap().extend(keys.as_object().unwrap().clone());
        std::fs::write(run.join("run.json"), serde_json::json!({"config": config, "steps": true}).to_string()).unwrap();
        std::fs::write(run.join("DONE"), "").unwrap();
    }
    std::fs::write(root.join("experiment.json"), serde_json::json!({"name": "t", "configs": [{"name": "v"}, {"name": "l"}]}).to_string()).unwrap();
    let table = vidbench_report::rate_table(&Results::load(root).unwrap());
    let per_rate: Vec<&str> = table.lines().filter(|l| l.starts_with("l ")).collect();
    assert_eq!(per_rate.len(), 3, "{table}");
    assert!(per_rate.iter().all(|l| l.ends_with(" -")), "no vanilla step at these rates:\n{table}");
    let max_line = |c: &str| table.lines().find(|l| l.starts_with(&format!("max failure-free: {c} "))).unwrap_or_else(|| panic!("{table}")).to_string();
    assert!(max_line("l").ends_with("4.87/s, 39.11 MB/s, 1.69x v"), "{table}");
    assert!(max_line("v").ends_with("2.89/s, 23.13 MB/s"), "vanilla has no ratio to itself:\n{table}");
}

/// Steps that carry the load client's time to first byte get a row per
/// client class; steps from before have no such section.
#[test]
fn the_time_to_first_byte_per_class_of_each_window() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut failing = plain_step(1.56, 1200.0, 5.85, 55.3);
    failing["first_byte"] = serde_json::json!({
        "broadband": {"requests": 837, "without_first_byte": 3, "p50_ms": 330.4, "p90_ms": 1580.0, "p99_ms": 4250.2, "max_ms": 4810.0},
        "high": {"requests": 900, "without_first_byte": 0, "p50_ms": 320.0, "p90_ms": 1500.0, "p99_ms": 4100.0, "max_ms": 4700.0}
    });
    let run = stepped_run(root, "l", "nginx + Libception", serde_json::json!([plain_step(1.30, 1000.0, 0.0, 51.0), failing]));
    std::fs::write(run.join("DONE"), "").unwrap();
    let md = report_md(root);
    assert!(md.contains("## Time to first byte per client class"), "{md}");
    assert!(md.contains("| nginx + Libception | 1.56 | 1200-1290 | 5.85 | broadband | 837 | 3 | 330 | 1580 | 4250 | 4810 |"), "{md}");
    assert!(md.contains("| nginx + Libception | 1.56 | 1200-1290 | 5.85 | high | 900 | 0 | 320 | 1500 | 4100 | 4700 |"), "{md}");
    assert!(!md.contains("| nginx + Libception | 1.30 | 1000-1090 | 0.00 |"), "a window without the figures has no row: {md}");

    let older = tempfile::tempdir().unwrap();
    let run = stepped_run(older.path(), "l", "nginx + Libception", serde_json::json!([plain_step(1.30, 1000.0, 0.0, 51.0)]));
    std::fs::write(run.join("DONE"), "").unwrap();
    assert!(!report_md(older.path()).contains("Time to first byte"));
}

/// The setup line names the steady-state protocol's optional mechanisms as
/// off when an experiment leaves them out, and their values when it sets them.
#[test]
fn the_setup_line_says_which_steady_state_mechanisms_were_on() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let run = stepped_run(root, "v", "vanilla", serde_json::json!([plain_step(1.0, 100.0, 0.0, 10.0)]));
    std::fs::write(run.join("DONE"), "").unwrap();
    let with = |steady: serde_json::Value| {
        let e = serde_json::json!({"name": "t", "configs": [{"name": "v"}], "run": {"workers": 4, "steady": steady}});
        std::fs::write(root.join("experiment.json"), e.to_string()).unwrap();
        report_md(root)
    };
    let bare = with(serde_json::json!({"ramp_s": 600.0, "settle_s": 60.0, "measure_s": 90.0, "hold_s": 10.0}));
    assert!(bare.contains("hold 10 s, no settling gate, no population joins)"), "{bare}");
    let full = with(serde_json::json!({"ramp_s": 600.0, "settle_s": 60.0, "measure_s": 90.0, "hold_s": 10.0, "gate_pct": 3.0, "join_s": 30.0}));
    assert!(full.contains("hold 10 s, gate 3 %, joins over 30 s)"), "{full}");
}
