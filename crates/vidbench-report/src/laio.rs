//! Figures of liblaio's benchmarks (paper 002): `vidbench report DIR` on a
//! directory written by `native/bench/laio/run` (getpid.csv, Table 2),
//! `run-openstat` (openstat.csv, Tables 3-4) or `run-httpd` (httpd.csv, the
//! server on the Rice-shaped trace) draws its figures into `DIR/figures/`
//! from the raw CSV: per point the mean over the repetitions with its 95 %
//! confidence interval. The Markdown beside them is the scripts' NOTES.md.

use crate::figures::{self, Chart, Reference, Series};
use anyhow::{bail, Context};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The CSV files the benchmark scripts write, one per script.
const CSVS: [&str; 3] = ["getpid.csv", "openstat.csv", "httpd.csv"];

/// Whether `dir` holds a liblaio benchmark's results (and not an experiment's).
pub fn is_bench_dir(dir: &Path) -> bool {
    !dir.join("experiment.json").exists() && CSVS.iter().any(|f| dir.join(f).is_file())
}

/// One CSV row, by column name.
struct Row<'a> {
    header: &'a csv::StringRecord,
    record: csv::StringRecord,
    /// Where it came from, for errors: FILE:LINE.
    at: String,
}

impl Row<'_> {
    fn text(&self, column: &str) -> anyhow::Result<&str> {
        let i = self.header.iter().position(|h| h == column).with_context(|| format!("{}: no column {column:?}", self.at))?;
        self.record.get(i).with_context(|| format!("{}: no field {column:?}", self.at))
    }

    fn number(&self, column: &str) -> anyhow::Result<f64> {
        let t = self.text(column)?;
        t.trim().parse().with_context(|| format!("{}: {column} is {t:?}, not a number", self.at))
    }
}

/// Reads `path` and calls `each` on every row.
fn read_rows(path: &Path, mut each: impl FnMut(&Row<'_>) -> anyhow::Result<()>) -> anyhow::Result<usize> {
    let mut reader = csv::Reader::from_path(path).with_context(|| format!("cannot read {}", path.display()))?;
    let header = reader.headers().with_context(|| format!("{}: no header line", path.display()))?.clone();
    let mut count = 0;
    for (i, record) in reader.records().enumerate() {
        let record = record.with_context(|| format!("{}:{}: malformed row", path.display(), i + 2))?;
        each(&Row { header: &header, record, at: format!("{}:{}", path.display(), i + 2) })?;
        count += 1;
    }
    if count == 0 {
        bail!("{}: no measurements", path.display());
    }
    Ok(count)
}

/// Repetitions of one point, by series name and x.
type Points = BTreeMap<String, BTreeMap<u64, Vec<f64>>>;

/// The points of each series: x, mean and CI half-width.
fn series(points: &Points, order: &[&str]) -> Vec<Series> {
    let mut names: Vec<&String> = points.keys().collect();
    names.sort_by_key(|n| order.iter().position(|o| n.starts_with(o)).unwrap_or(order.len()));
    names
        .into_iter()
        .enumerate()
        .map(|(style, name)| {
            let (pts, ci) = points[name]
                .iter()
                .map(|(x, v)| {
                    let (mean, ci) = vidbench_stats::mean_ci95(v);
                    ((*x as f64, mean.unwrap_or(0.0)), ci)
                })
                .unzip();
            Series { name: name.clone(), points: pts, ci, style, points_only: false }
        })
        .collect()
}

fn mean(v: &[f64]) -> f64 {
    vidbench_stats::mean(v)
}

/// Table 2: calls through the eager back end over the calls outstanding,
/// with the direct and lazy times as reference lines.
fn getpid(dir: &Path, out: &Path) -> anyhow::Result<PathBuf> {
    let mut eager: Points = BTreeMap::new();
    let (mut direct, mut lazy, mut calls) = (Vec::new(), Vec::new(), 0.0);
    read_rows(&dir.join("getpid.csv"), |r| {
        let seconds = r.number("seconds")?;
        calls = r.number("calls")?;
        match (r.text("mode")?, r.text("backend")?) {
            ("direct", _) => direct.push(seconds),
            (_, "lazy") => lazy.push(seconds),
            (_, "eager") => eager.entry("eager (a helper thread per call)".into()).or_default().entry(r.number("outstanding")? as u64).or_default().push(seconds),
            (mode, backend) => bail!("{}: unknown mode {mode:?} / backend {backend:?}", r.at),
        }
        Ok(())
    })?;
    let mut references = Vec::new();
    if !direct.is_empty() {
        references.push(Reference { y: mean(&direct), name: format!("direct: {:.3} s", mean(&direct)) });
    }
    if !lazy.is_empty() {
        references.push(Reference { y: mean(&lazy), name: format!("lazy (io_uring, inline): {:.3} s", mean(&lazy)) });
    }
    let title = format!("{calls:.0} getpid calls (paper 002 Table 2)");
    let path = out.join("getpid.svg");
    let chart = Chart { title: &title, x_label: "calls outstanding (eager)", y_label: "seconds (log)", log_x: true, log_y: true, y_range: None, references };
    figures::line_chart(&path, &chart, &series(&eager, &[]))?;
    Ok(path)
}

/// Tables 3-4: seconds over the trace against N (threads, or operations
/// outstanding), one figure per cache state and workload.
fn openstat(dir: &Path, out: &Path) -> anyhow::Result<Vec<PathBuf>> {
    // (read, state) -> points
    let mut figures: BTreeMap<(bool, String), Points> = BTreeMap::new();
    read_rows(&dir.join("openstat.csv"), |r| {
        let name = match (r.text("mode")?, r.text("backend")?) {
            ("threads", _) => "N threads, blocking calls".to_owned(),
            ("laio", backend @ ("lazy" | "eager")) => format!("one thread, liblaio {backend}, N outstanding"),
            (mode, backend) => bail!("{}: unknown mode {mode:?} / backend {backend:?}", r.at),
        };
        let key = (r.number("read")? != 0.0, r.text("state")?.to_owned());
        figures.entry(key).or_default().entry(name).or_default().entry(r.number("n")? as u64).or_default().push(r.number("seconds")?);
        Ok(())
    })?;
    let mut paths = Vec::new();
    for ((read, state), points) in &figures {
        let (what, table) = if *read { ("open + stat + read", 4) } else { ("open + stat", 3) };
        let title = format!("{what} over the trace, {state} cache (paper 002 Table {table})");
        let path = out.join(format!("openstat{}-{state}.svg", if *read { "-read" } else { "" }));
        let chart = Chart { title: &title, x_label: "N (threads, or operations outstanding)", y_label: "seconds (log)", log_x: true, log_y: true, y_range: None, references: Vec::new() };
        figures::line_chart(&path, &chart, &series(points, &["N threads", "one thread, liblaio lazy", "one thread, liblaio eager"]))?;
        paths.push(path);
    }
    Ok(paths)
}

/// The server: MB/s against the number of clients, per cache state.
fn httpd(dir: &Path, out: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut figures: BTreeMap<String, Points> = BTreeMap::new();
    read_rows(&dir.join("httpd.csv"), |r| {
        let server = r.text("server")?.to_owned();
        figures.entry(r.text("state")?.to_owned()).or_default().entry(server).or_default().entry(r.number("clients")? as u64).or_default().push(r.number("mb_s")?);
        Ok(())
    })?;
    let mut paths = Vec::new();
    for (state, points) in &figures {
        let title = format!("Servers replaying the trace, {state} cache");
        let path = out.join(format!("httpd-{state}.svg"));
        let chart = Chart { title: &title, x_label: "clients (keep-alive connections)", y_label: "MB/s", log_x: true, log_y: false, y_range: None, references: Vec::new() };
        figures::line_chart(&path, &chart, &series(points, &["nginx", "laio:lazy", "laio:eager"]))?;
        paths.push(path);
    }
    Ok(paths)
}

/// Draws the figures of every benchmark CSV in `dir` into `dir/figures/`.
pub fn write_figures(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let out = dir.join("figures");
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let mut paths = Vec::new();
    if dir.join("getpid.csv").is_file() {
        paths.push(getpid(dir, &out)?);
    }
    if dir.join("openstat.csv").is_file() {
        paths.extend(openstat(dir, &out)?);
    }
    if dir.join("httpd.csv").is_file() {
        paths.extend(httpd(dir, &out)?);
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getpid_draws_eager_over_outstanding_and_the_others_as_references() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("getpid.csv"),
            "rep,mode,backend,outstanding,calls,seconds,inline,background\n\
             1,direct,none,1,1000,0.10,1000,0\n2,direct,none,1,1000,0.12,1000,0\n\
             1,laio,lazy,1,1000,0.13,1000,0\n\
             1,laio,eager,1,1000,16.0,0,1000\n2,laio,eager,1,1000,18.0,0,1000\n1,laio,eager,10,1000,9.0,0,1000\n",
        )
        .unwrap();
        assert!(is_bench_dir(dir.path()));
        let paths = write_figures(dir.path()).unwrap();
        assert_eq!(paths, [dir.path().join("figures/getpid.svg")]);
        let svg = std::fs::read_to_string(&paths[0]).unwrap();
        for text in ["1000 getpid calls", "direct: 0.110 s", "lazy (io_uring, inline): 0.130 s", "eager (a helper thread per call)"] {
            assert!(svg.contains(text), "{text} missing");
        }
    }

    #[test]
    fn openstat_and_httpd_draw_one_figure_per_state_and_workload() {
        let dir = tempfile::tempdir().unwrap();
        let mut csv = String::from("rep,state,mode,backend,n,read,requests,bytes,seconds,calls,background\n");
        for (state, read) in [("cold", 0), ("warm", 0), ("cold", 1)] {
            for (mode, backend) in [("threads", "none"), ("laio", "lazy"), ("laio", "eager")] {
                for n in [1, 10, 100] {
                    csv += &format!("1,{state},{mode},{backend},{n},{read},10,0,{}.5,0,0\n", n);
                }
            }
        }
        std::fs::write(dir.path().join("openstat.csv"), csv).unwrap();
        std::fs::write(
            dir.path().join("httpd.csv"),
            "rep,server,clients,state,seconds,mb_s,requests_per_s,response_p50_ms,response_p99_ms,completed,failed,requests,background_share\n\
             1,nginx,100,cold,10,14.9,1,1,1,100,0,10,\n1,laio:lazy,100,cold,10,41.3,1,1,1,100,0,10,0.03\n",
        )
        .unwrap();
        let names: Vec<String> = write_figures(dir.path()).unwrap().iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(names, ["openstat-cold.svg", "openstat-warm.svg", "openstat-read-cold.svg", "httpd-cold.svg"]);
        let svg = std::fs::read_to_string(dir.path().join("figures/openstat-read-cold.svg")).unwrap();
        assert!(svg.contains("Table 4") && svg.contains("N threads, blocking calls") && svg.contains("liblaio eager"));
    }

    #[test]
    fn bad_rows_are_named_by_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("getpid.csv"), "rep,mode,backend,outstanding,calls,seconds\n1,direct,none,1,1000,fast\n").unwrap();
        let err = format!("{:#}", write_figures(dir.path()).unwrap_err());
        assert!(err.contains("getpid.csv:2") && err.contains("seconds is \"fast\""), "{err}");
        std::fs::write(dir.path().join("getpid.csv"), "rep,mode,backend,outstanding,calls,seconds\n").unwrap();
        assert!(format!("{:#}", write_figures(dir.path()).unwrap_err()).contains("no measurements"));
        std::fs::write(dir.path().join("getpid.csv"), "rep,mode,backend,outstanding,calls,seconds\n1,magic,none,1,1000,1.0\n").unwrap();
        assert!(format!("{:#}", write_figures(dir.path()).unwrap_err()).contains("unknown mode \"magic\""));
        std::fs::write(dir.path().join("experiment.json"), "{}").unwrap();
        assert!(!is_bench_dir(dir.path()), "an experiment's results are reported as such");
    }
}
