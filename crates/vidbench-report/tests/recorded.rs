//! The recorded reports under docs/results/ are what `vidbench report` makes
//! from their raw data today, byte for byte (report.md and every figure), so a
//! change to the report shows up as a deliberate update of the records. The
//! reports were made from the repository root (`vidbench report
//! docs/results/NAME`), whose relative path they quote, so this test runs there.

use std::path::{Path, PathBuf};

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path()).filter(|p| p.is_file()).collect();
    v.sort();
    v
}

#[test]
fn recorded_reports_regenerate_byte_identical() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap();
    std::env::set_current_dir(&root).unwrap();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("docs/results").unwrap().flatten().map(|e| e.path()).collect();
    dirs.retain(|d| d.join("report.md").is_file() && d.join("experiment.json").is_file());
    dirs.sort();
    assert!(dirs.len() >= 5, "expected the recorded experiments of docs/results: {dirs:?}");
    let mut svgs_with_bars = 0;
    for dir in &dirs {
        let results = vidbench_report::Results::load(dir).unwrap_or_else(|e| panic!("{}: {e:#}", dir.display()));
        let out = tempfile::tempdir().unwrap();
        vidbench_report::write_report(&results, &out.path().join("report.md")).unwrap();
        let recorded = std::fs::read(dir.join("report.md")).unwrap();
        assert!(std::fs::read(out.path().join("report.md")).unwrap() == recorded, "{}/report.md differs: regenerate it (vidbench report {})", dir.display(), dir.display());
        let want: Vec<PathBuf> = files(&dir.join("figures"));
        let got: Vec<PathBuf> = files(&out.path().join("figures"));
        let names = |v: &[PathBuf]| v.iter().map(|p| p.file_name().unwrap().to_owned()).collect::<Vec<_>>();
        assert_eq!(names(&got), names(&want), "{}: figures", dir.display());
        for (g, w) in got.iter().zip(&want) {
            let svg = std::fs::read(g).unwrap();
            assert!(svg == std::fs::read(w).unwrap(), "{} differs: regenerate it", w.display());
            let text = String::from_utf8(svg).unwrap();
            // Failure figures carry the experiment's threshold line in the legend.
            if w.ends_with("failures-vs-rate.svg") {
                assert!(text.lines().any(|l| l.trim().starts_with("failure threshold (")), "{}: no threshold line", w.display());
            }
            // CI bars (vertical <line>s in a series colour) are drawn where a rate was repeated.
            if text.lines().any(|l| l.starts_with("<line opacity=\"1\"") && !l.contains("stroke=\"#000000\"") && {
                let x = |k: &str| l.split(&format!(" {k}=\"")).nth(1).and_then(|s| s.split('"').next()).map(str::to_owned);
                x("x1") == x("x2") && x("y1") != x("y2")
            }) {
                svgs_with_bars += 1;
            }
        }
    }
    // table3-2026-11-22 ran 2 repetitions per rate: its figures must show bars.
    assert!(svgs_with_bars >= 3, "no CI bars in the recorded figures ({svgs_with_bars})");
}

/// The figures of the recorded liblaio benchmarks (docs/results/laio/*) are
/// what `vidbench report` draws from their CSV today.
#[test]
fn recorded_laio_figures_regenerate_byte_identical() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results/laio");
    let mut checked = 0;
    for dir in std::fs::read_dir(&root).unwrap().flatten().map(|e| e.path()).filter(|d| vidbench_report::is_laio_bench_dir(d)) {
        let copy = tempfile::tempdir().unwrap();
        for f in files(&dir).into_iter().filter(|f| f.extension().is_some_and(|e| e == "csv")) {
            std::fs::copy(&f, copy.path().join(f.file_name().unwrap())).unwrap();
        }
        vidbench_report::write_laio_figures(copy.path()).unwrap_or_else(|e| panic!("{}: {e:#}", dir.display()));
        let want = files(&dir.join("figures"));
        let got = files(&copy.path().join("figures"));
        assert_eq!(got.len(), want.len(), "{}: figures (regenerate: vidbench report {})", dir.display(), dir.display());
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g.file_name(), w.file_name());
            assert!(std::fs::read(g).unwrap() == std::fs::read(w).unwrap(), "{} differs: regenerate it (vidbench report {})", w.display(), dir.display());
        }
        checked += 1;
    }
    assert!(checked >= 4, "expected the recorded liblaio benchmarks in {}", root.display());
}
