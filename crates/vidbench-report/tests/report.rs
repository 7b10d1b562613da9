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
    for f in ["throughput-vs-rate", "failures-vs-rate", "disk-vs-delivered"] {
        let svg = std::fs::read_to_string(out_dir.path().join(format!("figures/{f}.svg"))).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(svg.contains("<svg") && svg.contains("</svg>"), "{f} is not an SVG");
        assert!(md.contains(&format!("figures/{f}.svg")), "{f} is not linked");
    }
    assert_eq!(figures, 3);
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
