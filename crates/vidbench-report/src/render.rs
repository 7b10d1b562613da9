//! The Markdown report: sections in the order of the papers' evaluation, each
//! with its table and SVG figure, or a note when the results hold no data for
//! it. Figures are written beside the report (`figures/*.svg`) and linked
//! relatively, so the report directory can be moved or committed as a whole.

use crate::analysis::{self, Point};
use crate::data::{DiskDelta, Results, Run, Unscored, WindowDrift};
use crate::figures::{line_chart, Chart, Reference, Series};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

/// Bytes in MiB.
fn mib(bytes: f64) -> f64 {
    bytes / (1u64 << 20) as f64
}

fn f1(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into())
}

fn f2(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into())
}

/// A point's confidence interval for a figure's bar: only for a mean over
/// repetitions (a single run's CI is of its samples, not of the rate's result).
fn repeated(p: &Point, ci: f64) -> Option<f64> {
    (p.runs > 1 && ci.is_finite()).then_some(ci)
}

struct Ctx<'a> {
    results: &'a Results,
    fig_dir: &'a Path,
    fig_rel: &'a str,
    md: String,
    figures: usize,
}

impl Ctx<'_> {
    fn figure(&mut self, name: &str, chart: Chart<'_>, series: Vec<Series>) -> anyhow::Result<()> {
        let file = format!("{name}.svg");
        line_chart(&self.fig_dir.join(&file), &chart, &series)?;
        writeln!(self.md, "\n![{}]({}/{file})\n", chart.title, self.fig_rel)?;
        self.figures += 1;
        Ok(())
    }
}

/// The configuration used as the baseline of `config`: the first configuration
/// (in experiment order) of the same server without Libception and with the
/// default readahead.
fn baseline(results: &Results, config: &str) -> Option<String> {
    let c = results.config_json(config);
    let server = c.get("server")?.as_str()?.to_string();
    let default_ra = results.experiment.get("disk").and_then(|d| d.get("read_ahead_kb")).and_then(Value::as_u64).unwrap_or(128);
    results.configs().into_iter().find(|n| {
        let o = results.config_json(n);
        o.get("server").and_then(Value::as_str) == Some(server.as_str())
            && o.get("libception").is_none_or(Value::is_null)
            && o.get("read_ahead_kb").and_then(Value::as_u64) == Some(default_ra)
    })
}

/// The ratio of `config`'s MB/s at its maximum failure-free rate to that of
/// its server's vanilla configuration, and that configuration's name; `best`
/// gives a configuration's MB/s there (None: no failure-free rate).
fn ratio_of_best(results: &Results, config: &str, best: impl Fn(&str) -> Option<f64>) -> Option<(f64, String)> {
    let base = baseline(results, config).filter(|b| b != config)?;
    let (mine, theirs) = (best(config)?, best(&base)?);
    (theirs > 0.0).then(|| (mine / theirs, base))
}

/// Writes the report for `results` into `out` (Markdown) and `out`'s directory
/// (`figures/`). Returns the number of figures drawn.
pub fn write_report(results: &Results, out: &Path) -> anyhow::Result<usize> {
    let dir = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let fig_dir = dir.join("figures");
    std::fs::create_dir_all(&fig_dir)?;
    let mut ctx = Ctx { results, fig_dir: &fig_dir, fig_rel: "figures", md: String::new(), figures: 0 };
    header(&mut ctx)?;
    let configs = results.configs();
    let server_configs: Vec<String> = configs.iter().filter(|c| results.runs_of(c).any(|r| r.kind == "server")).cloned().collect();
    let points: BTreeMap<String, Vec<Point>> = server_configs.iter().map(|c| (c.clone(), analysis::points(results, c))).collect();
    table3(&mut ctx, &server_configs, &points)?;
    versus_rate(&mut ctx, &server_configs, &points)?;
    disk_section(&mut ctx, &server_configs, &points)?;
    steady_section(&mut ctx, &server_configs)?;
    wc_section(&mut ctx, &configs)?;
    trace_section(&mut ctx)?;
    latency_section(&mut ctx)?;
    first_byte_section(&mut ctx, &server_configs)?;
    sweep_section(&mut ctx, &server_configs, &points)?;
    prefetch_section(&mut ctx, &server_configs)?;
    lru_section(&mut ctx, &server_configs)?;
    machine_section(&mut ctx, &server_configs)?;
    setup_section(&mut ctx)?;
    std::fs::write(out, &ctx.md).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", out.display()))?;
    Ok(ctx.figures)
}

fn header(ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
    let e = &ctx.results.experiment;
    let name = e.get("name").and_then(Value::as_str).unwrap_or("?");
    writeln!(ctx.md, "# vidbench report: {name}\n")?;
    if let Some(d) = e.get("description").and_then(Value::as_str).filter(|d| !d.is_empty()) {
        writeln!(ctx.md, "{d}\n")?;
    }
    writeln!(
        ctx.md,
        "Made by `vidbench report` from the raw results in `{}` only ({} complete runs{}). \
         MB means 10^6 bytes; rates are session arrivals per second.\n",
        ctx.results.dir.display(),
        ctx.results.runs.len(),
        if ctx.results.incomplete.is_empty() { String::new() } else { format!(", {} incomplete runs ignored", ctx.results.incomplete.len()) }
    )?;
    if !ctx.results.unfinished.is_empty() {
        writeln!(
            ctx.md,
            "**Searches not finished**: {} (only the steps kept from interrupted runs; their rows are what those steps give, not a search's answer).\n",
            ctx.results.unfinished.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
        )?;
    }
    let m = &ctx.results.machine;
    let s = |k: &str| m.get(k).map(|v| v.to_string().trim_matches('"').to_string()).unwrap_or_else(|| "?".into());
    let run_builds: std::collections::BTreeSet<&str> = ctx.results.runs.iter().filter_map(|r| r.setup["machine"]["vidbench_build"].as_str()).collect();
    let build = m.get("vidbench_build").and_then(Value::as_str).map_or(String::new(), |b| {
        let spread = if run_builds.len() > 1 { format!(" (the runs used {} builds: \"Setup of every run\")", run_builds.len()) } else { String::new() };
        format!("; vidbench built from {b}{spread}")
    });
    writeln!(ctx.md, "Machine: {} CPUs ({}), {} kB RAM, kernel {}, {}; git {}{}{build}.\n", s("cpus"), s("cpu_model"), s("mem_total_kb"), s("kernel"), s("os_release"), s("git_commit"), if m.get("git_dirty").and_then(Value::as_bool) == Some(true) { " (with local changes)" } else { "" })?;
    if let Some(p) = m.get("packages").and_then(Value::as_object) {
        let list: Vec<String> = p.iter().map(|(k, v)| format!("{k} {}", v.as_str().unwrap_or("?"))).collect();
        writeln!(ctx.md, "Packages: {}.\n", list.join(", "))?;
    }
    let run = e.get("run").cloned().unwrap_or(Value::Null);
    // Configurations with a count of their own say so in the setup table.
    let own_workers = e.get("configs").and_then(Value::as_array).is_some_and(|cs| cs.iter().any(|c| c.get("workers").is_some()));
    writeln!(
        ctx.md,
        "Disk preset `{}`, memory limit {} MiB, workers {}{}, {}, warm-up {}, max session {}.\n",
        e.get("disk").and_then(|d| d.get("preset")).and_then(Value::as_str).unwrap_or("?"),
        e.get("memory_limit_bytes").and_then(Value::as_u64).unwrap_or(0) >> 20,
        run.get("workers").unwrap_or(&Value::Null),
        if own_workers { " (where a configuration has no count of its own: \"Setup of every run\")" } else { "" },
        match (run.get("duration_s").and_then(Value::as_f64), run.get("sessions").and_then(Value::as_u64), run.get("steady").filter(|s| !s.is_null())) {
            (Some(d), _, _) => format!("{d} s of arrivals per run"),
            (_, Some(n), _) => format!("{n} sessions per run"),
            (_, _, Some(st)) => {
                let f = |k: &str| st.get(k).and_then(Value::as_f64).map_or("?".to_owned(), |v| format!("{v}"));
                // Optional keys: absent (or 0) turns the mechanism off.
                let optional = |k: &str, on: &dyn Fn(f64) -> String, off: &str| st.get(k).and_then(Value::as_f64).filter(|&v| v > 0.0).map_or(off.to_owned(), on);
                format!(
                    "steady state (ramp {} s, settling {} s after a change of rate, windows of {} s, hold {} s, {}, {}{})",
                    f("ramp_s"),
                    f("settle_s"),
                    f("measure_s"),
                    f("hold_s"),
                    optional("gate_pct", &|v| format!("gate {v} %"), "no settling gate"),
                    optional("join_s", &|v| format!("joins over {v} s"), "no population joins"),
                    run.get("warm_fill_pct").and_then(Value::as_f64).map_or(String::new(), |p| format!(", cache filled to {p} % first"))
                )
            }
            _ => "?".into(),
        },
        run.get("warm").and_then(Value::as_bool).map_or("?", |w| if w { "on" } else { "off" }),
        run.get("max_session_s").and_then(Value::as_f64).map_or("as generated".to_string(), |m| format!("{m} s")),
    )?;
    let own_ramps: Vec<String> = e
        .get("configs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| Some(format!("{} {} s", c.get("name")?.as_str()?, c.get("ramp_s")?.as_f64()?)))
        .collect();
    if !own_ramps.is_empty() {
        writeln!(ctx.md, "A ramp of its own (the minimum before the first window, in place of the experiment's): {}.\n", own_ramps.join(", "))?;
    }
    Ok(())
}

fn table3(ctx: &mut Ctx<'_>, configs: &[String], points: &BTreeMap<String, Vec<Point>>) -> anyhow::Result<()> {
    writeln!(ctx.md, "## Maximum failure-free throughput (paper 000 Table 3)\n")?;
    if configs.is_empty() {
        writeln!(ctx.md, "_No server runs in these results._\n")?;
        return Ok(());
    }
    writeln!(
        ctx.md,
        "The highest offered rate at which the failed share stayed below the threshold (of the measured sessions; for a \
         step that records `measured_failure_percent`, its verdict, which also counts the sessions in progress and the \
         population: docs/run.md), the MB/s delivered there \
         (mean of its runs, with the 95 % confidence interval over repetitions, or of the load's 5-second samples for a \
         single run), and the ratio to the same server's vanilla configuration. `>=` marks a maximum that no failing \
         rate bounds from above (the true maximum may be higher).\n"
    )?;
    writeln!(ctx.md, "| configuration | max failure-free rate | MB/s delivered | 95 % CI | failed % | disk MB/s | disk bytes per delivered byte | ratio to vanilla | runs |")?;
    writeln!(ctx.md, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")?;
    let best: BTreeMap<&String, (Option<Point>, bool)> = configs
        .iter()
        .map(|c| {
            let (b, bounded) = analysis::best_point(&points[c], ctx.results.threshold(c), ctx.results.search_answer(c));
            (c, (b.cloned(), bounded))
        })
        .collect();
    for c in configs {
        let (b, bounded) = &best[c];
        let label = ctx.results.label(c);
        let ratio = ratio_of_best(ctx.results, c, |n| best.get(&n.to_string())?.0.as_ref().map(|p| p.throughput_mbs))
            .map(|(r, base)| format!("{r:.2} (vs {})", ctx.results.label(&base)));
        match b {
            Some(p) => writeln!(
                ctx.md,
                "| {label} | {}{:.2} | {:.2} | ± {:.2} | {:.2} | {} | {} | {} | {} |",
                if *bounded { "" } else { ">= " },
                p.rate,
                p.throughput_mbs,
                p.throughput_ci,
                p.failure_pct,
                f2(p.disk_mbs),
                // Only where disk and delivered cover one window (a classic
                // run's disk covers the whole load, its delivered the measure phase).
                f2(p.disk_per_delivered().filter(|_| p.one_window)),
                ratio.unwrap_or_else(|| "-".into()),
                p.runs
            )?,
            None => writeln!(
                ctx.md,
                "| {label} | none (every rate ≥ {} % failed) | - | - | - | - | - | - | {} |",
                ctx.results.threshold(c),
                points[c].iter().map(|p| p.runs).sum::<usize>()
            )?,
        }
    }
    writeln!(ctx.md)?;
    Ok(())
}

fn versus_rate(ctx: &mut Ctx<'_>, configs: &[String], points: &BTreeMap<String, Vec<Point>>) -> anyhow::Result<()> {
    writeln!(ctx.md, "## Throughput and failed sessions against offered rate (paper 003 Figures 8-11)\n")?;
    if configs.is_empty() {
        writeln!(ctx.md, "_No server runs: figure omitted._\n")?;
        return Ok(());
    }
    let series = |f: fn(&Point) -> (f64, f64)| -> Vec<Series> {
        configs
            .iter()
            .enumerate()
            .map(|(i, c)| Series {
                name: ctx.results.label(c),
                points: points[c].iter().map(|p| (p.rate, f(p).0)).collect(),
                ci: points[c].iter().map(|p| repeated(p, f(p).1)).collect(),
                style: i,
                points_only: false,
            })
            .collect()
    };
    let tput = series(|p| (p.throughput_mbs, p.throughput_ci));
    let fail = series(|p| (p.failure_pct, p.failure_ci));
    // The threshold each configuration was searched with (the experiment's, not a constant).
    let mut thresholds: Vec<f64> = configs.iter().map(|c| ctx.results.threshold(c)).collect();
    thresholds.sort_by(f64::total_cmp);
    thresholds.dedup();
    let references: Vec<Reference> = thresholds.into_iter().map(|t| Reference { y: t, name: format!("failure threshold ({t} %)") }).collect();
    ctx.figure("throughput-vs-rate", Chart { title: "Delivered throughput", x_label: "offered rate (sessions/s)", y_label: "MB/s", log_x: false, log_y: false, y_range: None, references: Vec::new() }, tput)?;
    // On a 0-100 % axis the threshold (0.3 %) lies on the x axis itself; the
    // same points again on an axis of ten thresholds, where it shows.
    // (A threshold of 0 would leave no axis: then 1 %.)
    let top = references.iter().map(|r| r.y).fold(0.0, f64::max);
    let zoom = if top > 0.0 { 10.0 * top } else { 1.0 };
    let (near, near_references) = (fail.clone(), references.clone());
    ctx.figure("failures-vs-rate", Chart { title: "Failed sessions", x_label: "offered rate (sessions/s)", y_label: "failed % (a step: its verdict)", log_x: false, log_y: false, y_range: None, references }, fail)?;
    ctx.figure(
        "failures-near-threshold",
        Chart { title: "Failed sessions near the threshold (points above the top are cut)", x_label: "offered rate (sessions/s)", y_label: "failed % (a step: its verdict)", log_x: false, log_y: false, y_range: Some((0.0, zoom)), references: near_references },
        near,
    )?;
    writeln!(ctx.md, "Bars: 95 % confidence interval over the repetitions of a rate (points run once have none).\n")?;
    per_rate_table(ctx, configs, points, &["runs", "MB/s", "± CI", "failed %", "± CI", "server CPU %"], |p| {
        vec![
            p.runs.to_string(),
            format!("{:.2}", p.throughput_mbs),
            format!("{:.2}", p.throughput_ci),
            format!("{:.2}", p.failure_pct),
            format!("{:.2}", p.failure_ci),
            f2(p.server_cpu_pct),
        ]
    })?;
    Ok(())
}

/// A Markdown table with a row per configuration and rate: the configuration's
/// label, the rate, then `columns` (right-aligned) filled by `cells`.
fn per_rate_table<'c>(
    ctx: &mut Ctx<'_>,
    configs: impl IntoIterator<Item = &'c String>,
    points: &BTreeMap<String, Vec<Point>>,
    columns: &[&str],
    cells: impl Fn(&Point) -> Vec<String>,
) -> anyhow::Result<()> {
    writeln!(ctx.md, "| configuration | rate | {} |", columns.join(" | "))?;
    writeln!(ctx.md, "|---|---:|{}", "---:|".repeat(columns.len()))?;
    for c in configs {
        for p in &points[c] {
            writeln!(ctx.md, "| {} | {:.2} | {} |", ctx.results.label(c), p.rate, cells(p).join(" | "))?;
        }
    }
    writeln!(ctx.md)?;
    Ok(())
}

fn disk_section(ctx: &mut Ctx<'_>, configs: &[String], points: &BTreeMap<String, Vec<Point>>) -> anyhow::Result<()> {
    writeln!(ctx.md, "## Disk throughput beside delivered throughput (paper 000 Figures 7-8, Table 2)\n")?;
    let with_disk: Vec<&String> = configs.iter().filter(|c| points[*c].iter().any(|p| p.disk_mbs.is_some())).collect();
    if with_disk.is_empty() {
        writeln!(ctx.md, "_No disk counters in these results: figure and table omitted._\n")?;
        return Ok(());
    }
    let mut series = Vec::new();
    for c in &with_disk {
        let label = ctx.results.label(c);
        // The configuration's style in every figure: its index among the server configurations.
        let style = configs.iter().position(|x| x == *c).unwrap_or(0);
        series.push(Series {
            name: format!("{label} delivered"),
            points: points[*c].iter().map(|p| (p.rate, p.throughput_mbs)).collect(),
            ci: points[*c].iter().map(|p| repeated(p, p.throughput_ci)).collect(),
            style,
            points_only: false,
        });
        series.push(Series {
            name: format!("{label} disk"),
            points: points[*c].iter().filter_map(|p| Some((p.rate, p.disk_mbs?))).collect(),
            ci: Vec::new(),
            style,
            points_only: true,
        });
    }
    ctx.figure("disk-vs-delivered", Chart { title: "Disk (hollow markers) and delivered (lines) throughput", x_label: "offered rate (sessions/s)", y_label: "MB/s", log_x: false, log_y: false, y_range: None, references: Vec::new() }, series)?;
    writeln!(
        ctx.md,
        "Disk figures come from the emulated disk's own counters: over a step's measured window in steady-state runs, the window of the delivered figure beside them; over the whole load in runs of the classic protocol, whose delivered figure covers the measure phase only. iostat's definitions: ms per transaction = busy time / transactions. \
         Delivered above disk means cache hits; disk above delivered means prefetched data evicted before use.\n"
    )?;
    per_rate_table(ctx, with_disk, points, &["disk MB/s", "delivered MB/s", "ms/transaction", "request KiB", "disk busy %"], |p| {
        vec![f2(p.disk_mbs), format!("{:.2}", p.throughput_mbs), f2(p.ms_per_transaction), f2(p.request_kib), f2(p.busy_pct)]
    })?;
    Ok(())
}

fn wc_section(ctx: &mut Ctx<'_>, configs: &[String]) -> anyhow::Result<()> {
    let wc: Vec<&String> = configs.iter().filter(|c| ctx.results.runs_of(c).any(|r| r.kind == "wc")).collect();
    writeln!(ctx.md, "## The `wc` upper bound (paper 003 section 8.1)\n")?;
    if wc.is_empty() {
        writeln!(ctx.md, "_No wc runs in these results._\n")?;
        return Ok(());
    }
    writeln!(ctx.md, "The workload's requested chunks read sequentially, videos in random order, straight from the emulated disk.\n")?;
    writeln!(ctx.md, "| configuration | runs | read MB/s | ms/transaction | request KiB | disk busy % |")?;
    writeln!(ctx.md, "|---|---:|---:|---:|---:|---:|")?;
    for c in wc {
        let runs: Vec<&Run> = ctx.results.runs_of(c).collect();
        let t: Vec<f64> = runs.iter().map(|r| r.throughput_mbs).collect();
        let d = |f: fn(&crate::data::DiskDelta) -> f64| {
            let v: Vec<f64> = runs.iter().filter_map(|r| r.disk.as_ref().map(f)).collect();
            (!v.is_empty()).then(|| vidbench_stats::mean(&v))
        };
        writeln!(
            ctx.md,
            "| {} | {} | {:.2} | {} | {} | {} |",
            ctx.results.label(c),
            runs.len(),
            vidbench_stats::mean(&t),
            f2(d(|x| x.ms_per_transaction())),
            f2(d(|x| x.request_kib())),
            f2(d(|x| x.busy_pct()))
        )?;
    }
    writeln!(ctx.md)?;
    Ok(())
}

/// The traced run each configuration's trace figures come from: for a
/// steady-state experiment, the first window at the maximum failure-free rate
/// (else the highest rate traced); for the classic protocol, the highest rate
/// traced, over its whole load.
fn traced_run<'a>(results: &'a Results, config: &str) -> Option<&'a Run> {
    window_run(results, config, |r| r.trace.is_some())
}

/// The run of `config` a one-window figure draws from, among those `has`
/// data for: the first window at the maximum failure-free rate (the tables'
/// window), else the highest rate.
fn window_run<'a>(results: &'a Results, config: &str, has: impl Fn(&Run) -> bool) -> Option<&'a Run> {
    let with = || results.runs.iter().filter(|r| r.config == config && has(r));
    let points = analysis::points(results, config);
    let best = analysis::best_point(&points, results.threshold(config), results.search_answer(config)).0;
    best.and_then(|b| with().filter(|r| r.rate == Some(b.rate) && r.window_s.is_some()).min_by_key(|r| r.repetition))
        .or_else(|| with().max_by(|a, b| a.rate.unwrap_or(0.0).total_cmp(&b.rate.unwrap_or(0.0))))
}

/// Writes, beside each whole trace the report draws from with a window,
/// `disk-trace-window.csv.gz`: the trace's header and the requests that
/// started inside that window, the only ones the report reads from it. A
/// record keeps that file instead of the whole trace (tens of MB per run)
/// and reports the same. Returns the files written.
pub fn write_trace_windows(results: &Results) -> anyhow::Result<Vec<std::path::PathBuf>> {
    use anyhow::Context;
    let mut written = Vec::new();
    for config in results.configs() {
        let Some(r) = traced_run(results, &config) else { continue };
        let (Some(trace), Some((from, to))) = (r.trace.as_ref(), r.trace_window_ns()) else { continue };
        if !trace.ends_with(crate::data::TRACE_FILE) {
            continue; // already a window trace
        }
        let text = analysis::read_trace_text(trace)?;
        let mut lines = text.lines();
        let header = lines.next().with_context(|| format!("{}: empty trace", trace.display()))?;
        let start = header.split(',').position(|h| h == "start_ns").with_context(|| format!("{}: no column start_ns", trace.display()))?;
        let out = trace.with_file_name(crate::data::TRACE_WINDOW_FILE);
        let file = std::fs::File::create(&out).with_context(|| format!("cannot create {}", out.display()))?;
        let mut gz = flate2::write::GzEncoder::new(std::io::BufWriter::new(file), flate2::Compression::best());
        let mut write = |line: &str| std::io::Write::write_all(&mut gz, line.as_bytes()).and_then(|_| std::io::Write::write_all(&mut gz, b"\n"));
        write(header)?;
        for (i, line) in lines.enumerate() {
            let t: u64 = line.split(',').nth(start).and_then(|x| x.parse().ok()).with_context(|| format!("{}:{}: bad start_ns", trace.display(), i + 2))?;
            if (from..to).contains(&t) {
                write(line)?;
            }
        }
        let mut buffered = gz.finish()?;
        std::io::Write::flush(&mut buffered).with_context(|| format!("cannot write {}", out.display()))?;
        written.push(out);
    }
    Ok(written)
}

fn trace_section(ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
    writeln!(ctx.md, "## Sequentiality of disk access (paper 000 Figures 2-6)\n")?;
    let order = ctx.results.configs();
    let chosen: Vec<(&String, &Run)> = order.iter().filter_map(|c| Some((c, traced_run(ctx.results, c)?))).collect();
    if chosen.is_empty() {
        writeln!(ctx.md, "_No disk traces in these results (set `trace = true` on the disk or a configuration): figures omitted._\n")?;
        return Ok(());
    }
    writeln!(
        ctx.md,
        "Per configuration, the requests the drive served in one window: in a steady-state experiment the first window at the \
         maximum failure-free rate (the same window as the tables), else the whole load of the highest rate traced.\n"
    )?;
    let mut cdf = Vec::new();
    let mut sizes = Vec::new();
    let mut pattern = Vec::new();
    let mut rows = Vec::new();
    let mut preceded_rows = Vec::new();
    for (name, r) in chosen {
        let whole = analysis::read_trace(r.trace.as_ref().expect("filtered"))?;
        let (trace, span) = match r.trace_window_ns() {
            Some(w) => (analysis::in_window(&whole, w), r.window_s.map(|(a, b)| format!("{a:.0}-{b:.0} s")).unwrap_or_default()),
            None => (&whole[..], "whole load".to_owned()),
        };
        let seqs = analysis::sequences(trace);
        let label = format!("{}{}", ctx.results.label(name), r.rate.map(|x| format!(" @ {x:.2}/s")).unwrap_or_default());
        let c = analysis::bytes_cdf(&seqs);
        let at = |kib: f64| c.iter().take_while(|p| p.0 <= kib).last().map_or(0.0, |p| p.1);
        // Requests as the disk counts them: a joined command is one.
        let commands = analysis::commands(trace);
        let bytes: u64 = trace.iter().map(|t| t.bytes).sum();
        let mean_kib = bytes as f64 / commands.len().max(1) as f64 / 1024.0;
        let p = analysis::positionings(trace);
        let pct = |a: f64, b: f64| if b > 0.0 { format!("{:.0}", 100.0 * a / b) } else { "-".into() };
        rows.push(format!(
            "| {label} | {span} | {} | {mean_kib:.1} | {} | {:.1} | {:.1} | {:.1} | {} | {:.0} | {} | {} |",
            commands.len(),
            seqs.len(),
            at(128.0),
            at(576.0),
            100.0 - at(1920.0),
            p.positionings,
            bytes as f64 / p.positionings.max(1) as f64 / 1024.0,
            pct(p.follow_ups() as f64, p.positionings as f64),
            pct(p.follow_up_busy_ns as f64, commands.iter().map(|t| t.end_ns.saturating_sub(t.start_ns)).sum::<u64>() as f64),
        ));
        let c100 = |n: usize| format!("{:.1}", n as f64 * 1e8 / bytes.max(1) as f64);
        let g = p.preceded;
        preceded_rows.push(format!(
            "| {label} | {} | {} | {} | {} | {} | {} | {} |",
            c100(p.positionings),
            c100(g.first),
            c100(g.queued),
            c100(g.under_1_ms),
            c100(g.under_5_ms),
            c100(g.under_100_ms),
            c100(g.later)
        ));
        let style = order.iter().position(|x| x == name).unwrap_or(0);
        cdf.push(Series::line(label.clone(), style, c));
        sizes.push(Series::line(label.clone(), style, analysis::request_size_cdf(&commands)));
        pattern.push(Series {
            name: label,
            points: trace.iter().take(250).enumerate().map(|(i, t)| (i as f64, t.lba as f64)).collect(),
            ci: Vec::new(),
            style,
            points_only: true,
        });
    }
    ctx.figure("sequence-cdf", Chart { title: "Bytes read in sequences of adjacent requests", x_label: "sequence length (KiB, log)", y_label: "% of bytes read", log_x: true, log_y: false, y_range: Some((0.0, 100.0)), references: Vec::new() }, cdf)?;
    writeln!(
        ctx.md,
        "| run | window | disk requests | mean request KiB | sequences | % bytes in sequences ≤ 128 KiB | ≤ 576 KiB | % bytes in sequences > 1920 KiB \
         | positionings | KiB read per positioning | % follow-ups | % of drive time in follow-ups |"
    )?;
    writeln!(ctx.md, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")?;
    for r in rows {
        writeln!(ctx.md, "{r}")?;
    }
    writeln!(ctx.md)?;
    writeln!(
        ctx.md,
        "A positioning is a request the drive had to seek and wait for (trace outcome `miss`). A follow-up is a positioning \
         that continues a file where one of its reads had ended less than {} ms before it arrived: the reader asked at once, \
         but the drive had started another queued request, so the head left and came back (an idling scheduler such as bfq \
         waits for such requests instead).\n",
        analysis::FOLLOW_UP_NS / 1_000_000
    )?;
    writeln!(
        ctx.md,
        "Positionings per 100 MB read, by the read each continues (the latest read of the same file to arrive before it \
         that ends where it begins):\n\n\
         | run | positionings | first read of a file or range | queued behind the read it continues | < 1 ms after it ended \
         | 1-5 ms | 5-100 ms | 100 ms or more |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|"
    )?;
    for r in preceded_rows {
        writeln!(ctx.md, "{r}")?;
    }
    writeln!(
        ctx.md,
        "\nOn one drive model, a reader that asks for the next piece of a file later after the last one ended shows here as \
         more positionings in the short gaps; \"queued\" ones arrived while the read they continue was still waiting or under \
         way, and the drive served another request in between.\n"
    )?;
    ctx.figure("request-size-cdf", Chart { title: "Disk request sizes", x_label: "request size (KiB, log)", y_label: "% of requests", log_x: true, log_y: false, y_range: Some((0.0, 100.0)), references: Vec::new() }, sizes)?;
    ctx.figure("access-pattern", Chart { title: "Access pattern: first 250 disk requests of the window", x_label: "transaction number", y_label: "logical block address", log_x: false, log_y: false, y_range: None, references: Vec::new() }, pattern)?;
    Ok(())
}

fn latency_section(ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
    writeln!(ctx.md, "## sendfile latency (paper 000 Figure 17)\n")?;
    // Per configuration: the histogram over one window where the run
    // recorded the shim's statistics through it, else over the server
    // processes' whole lives (records from before).
    let mut whole: BTreeMap<String, Vec<std::path::PathBuf>> = BTreeMap::new();
    for r in ctx.results.runs.iter().filter(|r| !r.shim_stats.is_empty()) {
        whole.entry(r.config.clone()).or_default().extend(r.shim_stats.iter().cloned());
    }
    let mut series = Vec::new();
    let mut windows = Vec::new();
    for (c, files) in &whole {
        let (hist, window) = match window_run(ctx.results, c, |r| r.shim_window.is_some()) {
            Some(r) => (r.shim_window.as_ref().map(|w| w.latency_of("sendfile")).unwrap_or_default(), r.window_s),
            None => (analysis::sendfile_histogram(files)?, None),
        };
        if hist.is_empty() {
            continue;
        }
        let style = ctx.results.configs().iter().position(|x| x == c).unwrap_or(0);
        series.push(Series::line(ctx.results.label(c), style, analysis::histogram_cdf(&hist)));
        windows.push((c, window, hist.iter().map(|(_, n)| n).sum::<u64>()));
    }
    if series.is_empty() {
        writeln!(ctx.md, "_No shim statistics with sendfile calls (configurations in track mode or with `shim_stats = true` record them): figure omitted._\n")?;
        return Ok(());
    }
    writeln!(ctx.md, "From the shim's per-process latency histograms (power-of-two buckets; a point is the fraction of calls at most that long).\n")?;
    if windows.iter().any(|(_, w, _)| w.is_some()) {
        writeln!(ctx.md, "| configuration | calls counted | over |\n|---|---:|---|")?;
        for (c, window, calls) in &windows {
            let over = match window {
                Some((a, b)) => format!("the window {a:.0}-{b:.0} s at the maximum failure-free rate (else the highest)"),
                None => "the server processes' whole lives (no statistics through the run)".to_string(),
            };
            writeln!(ctx.md, "| {} | {calls} | {over} |", ctx.results.label(c))?;
        }
        writeln!(ctx.md)?;
    }
    ctx.figure("sendfile-latency-cdf", Chart { title: "sendfile call latency", x_label: "latency (ms, log)", y_label: "% of calls", log_x: true, log_y: false, y_range: Some((0.0, 100.0)), references: Vec::new() }, series)?;
    Ok(())
}

fn sweep_section(ctx: &mut Ctx<'_>, configs: &[String], points: &BTreeMap<String, Vec<Point>>) -> anyhow::Result<()> {
    writeln!(ctx.md, "## Prefetch and readahead sweeps (paper 000 Figures 12-16)\n")?;
    // Group expanded configurations by their [[config]] base, noting which
    // sweep prefetch sizes (the others sweep read_ahead_kb).
    let mut groups: BTreeMap<String, (bool, Vec<(f64, String)>)> = BTreeMap::new();
    for c in configs {
        let Some(run) = ctx.results.runs_of(c).next() else { continue };
        let (base, prefetch, ra) = analysis::sweep_key(run);
        if base == *c {
            continue; // not expanded from a list
        }
        let by_prefetch = c.contains("-p");
        if let Some(x) = if by_prefetch { prefetch } else { ra } {
            let group = groups.entry(base).or_insert((by_prefetch, Vec::new()));
            group.1.push((x, c.clone()));
        }
    }
    if groups.is_empty() {
        writeln!(ctx.md, "_No prefetch or readahead sweeps in these results: figure omitted._\n")?;
        return Ok(());
    }
    let mut series = Vec::new();
    // Each prefetch sweep's best point per size, for the adaptive comparison.
    let mut prefetch_sweeps = Vec::new();
    for (style, (base, (by_prefetch, mut members))) in groups.into_iter().enumerate() {
        members.sort_by(|a, b| a.0.total_cmp(&b.0));
        let best: Vec<(f64, String, Point)> = members
            .into_iter()
            .filter_map(|(x, c)| {
                let p = analysis::best_point(&points[&c], ctx.results.threshold(&c), ctx.results.search_answer(&c)).0?.clone();
                Some((x, c, p))
            })
            .collect();
        series.push(Series {
            name: base.clone(),
            points: best.iter().map(|(x, _, p)| (*x, p.throughput_mbs)).collect(),
            ci: best.iter().map(|(_, _, p)| repeated(p, p.throughput_ci)).collect(),
            style,
            points_only: false,
        });
        if by_prefetch {
            prefetch_sweeps.push((base, best));
        }
    }
    ctx.figure("sweeps", Chart { title: "Maximum failure-free throughput by size", x_label: "prefetch or read_ahead size (KiB, log)", y_label: "MB/s", log_x: true, log_y: false, y_range: None, references: Vec::new() }, series)?;
    adaptive_table(ctx, configs, points, &prefetch_sweeps)
}

/// Paper 001 Figs 5-6's comparison: each adaptive configuration against the
/// best of each sweep of fixed prefetch sizes: their maximum failure-free
/// MB/s with the 95 % CI, the best size and the size the controller settled
/// on (at the end of its windows at its result rate), and whether the
/// adaptive result reaches the best fixed one minus its CI (issue 12's
/// acceptance; paper 001 asks for 5 %).
/// A swept configuration's base name and, per size, the size (KiB), the
/// expanded configuration's name and its maximum failure-free point.
type Sweep = (String, Vec<(f64, String, Point)>);

fn adaptive_table(ctx: &mut Ctx<'_>, configs: &[String], points: &BTreeMap<String, Vec<Point>>, sweeps: &[Sweep]) -> anyhow::Result<()> {
    let adaptive: Vec<&String> = configs
        .iter()
        .filter(|c| ctx.results.runs_of(c).next().is_some_and(|r| r.config_json.get("prefetch_adaptive").and_then(Value::as_bool) == Some(true)))
        .collect();
    let server = |c: &String| ctx.results.config_json(c).get("server").and_then(Value::as_str).map(str::to_string);
    if adaptive.is_empty() || sweeps.is_empty() {
        return Ok(());
    }
    let best_of = |c: &String| analysis::best_point(&points[c], ctx.results.threshold(c), ctx.results.search_answer(c)).0.cloned();
    let ci = |p: &Point| Some(p.throughput_ci).filter(|c| c.is_finite() && *c > 0.0);
    let pm = |p: &Point| match ci(p) {
        Some(c) => format!("{:.2} ± {:.2}", p.throughput_mbs, c),
        None => format!("{:.2}", p.throughput_mbs),
    };
    writeln!(ctx.md, "### Adaptive against the best fixed size (paper 001 Figures 5-6)\n")?;
    writeln!(
        ctx.md,
        "Maximum failure-free MB/s with its 95 % CI (over repetitions, or over the window's samples for one window). The adaptive size is \
         the controller's size at the end of its windows at its result rate (mean over them). It reaches the best fixed size when its MB/s is \
         at least the best fixed MB/s minus that CI.\n"
    )?;
    writeln!(ctx.md, "| sweep | best fixed size | its MB/s | adaptive configuration | its MB/s | size it settled on (MiB) | difference | reaches the best fixed |")?;
    writeln!(ctx.md, "|---|---:|---:|---|---:|---:|---:|---|")?;
    for (base, members) in sweeps {
        let Some((best_kb, first, best)) = members.iter().max_by(|a, b| a.2.throughput_mbs.total_cmp(&b.2.throughput_mbs)) else { continue };
        let sweep_server = server(first);
        for a in adaptive.iter().filter(|a| server(a) == sweep_server) {
            let label = ctx.results.label(a);
            let Some(ap) = best_of(a) else {
                writeln!(ctx.md, "| {base} | {best_kb:.0} KiB | {} | {label} | no failure-free rate | | | no |", pm(best))?;
                continue;
            };
            let sizes: Vec<f64> = ctx
                .results
                .runs_of(a)
                .filter(|r| r.rate.is_some_and(|x| (x - ap.rate).abs() < 1e-9))
                .filter_map(|r| r.prefetch.map(|p| p.size_end_bytes))
                .collect();
            let settled = match sizes.is_empty() {
                true => "-".to_string(),
                false => format!("{:.2}", mib(sizes.iter().sum::<f64>() / sizes.len() as f64)),
            };
            let diff = match best.throughput_mbs > 0.0 {
                true => format!("{:+.1} %", 100.0 * (ap.throughput_mbs - best.throughput_mbs) / best.throughput_mbs),
                false => "-".to_string(),
            };
            let reaches = if ap.throughput_mbs >= best.throughput_mbs - ci(best).unwrap_or(0.0) { "yes" } else { "no" };
            writeln!(ctx.md, "| {base} | {best_kb:.0} KiB | {} | {label} | {} | {settled} | {diff} | {reaches} |", pm(best), pm(&ap))?;
        }
    }
    writeln!(ctx.md)?;
    Ok(())
}

/// The configurations with runs that `has` a per-window figure, each with
/// those runs in the order of their windows.
/// Per measured window and client class, how long the requests issued in
/// the window waited for their first byte (the load client's figures). A
/// class whose link needs most of its deadline for a chunk is the first to
/// fail when the server is slow to start answering.
fn first_byte_section(ctx: &mut Ctx<'_>, configs: &[String]) -> anyhow::Result<()> {
    let with = windows_with(ctx, configs, |r| !r.first_byte.is_empty());
    if with.is_empty() {
        return Ok(());
    }
    writeln!(ctx.md, "## Time to first byte per client class\n")?;
    writeln!(
        ctx.md,
        "Per measured window and client class: the requests issued in the window, those that ended without a body byte (a \
         timeout or an error before any data; not in the percentiles), and the others' time from sending the request to its \
         first body byte, ms (the load client's clock: the class's one-way delay is in it). A class's deadline less the time \
         its link needs for a chunk is what the server may take before the first byte; a failing window shows which class ran \
         out of it (steps recorded since the load client keeps these figures).\n"
    )?;
    writeln!(ctx.md, "| configuration | rate | window s | failed % | class | requests | no byte | p50 ms | p90 ms | p99 ms | max ms |")?;
    writeln!(ctx.md, "|---|---:|---|---:|---|---:|---:|---:|---:|---:|---:|")?;
    for (c, runs) in &with {
        for r in runs {
            let window = r.window_s.map(|(a, b)| format!("{a:.0}-{b:.0}")).unwrap_or_default();
            for (class, f) in &r.first_byte {
                let cells = [
                    window.clone(),
                    format!("{:.2}", r.failure_pct),
                    class.clone(),
                    f.requests.to_string(),
                    f.without_first_byte.to_string(),
                    format!("{:.0}", f.p50_ms),
                    format!("{:.0}", f.p90_ms),
                    format!("{:.0}", f.p99_ms),
                    format!("{:.0}", f.max_ms),
                ];
                window_row(ctx, c, r, &cells)?;
            }
        }
    }
    writeln!(ctx.md)?;
    Ok(())
}

fn windows_with<'a, 'c>(ctx: &Ctx<'a>, configs: &'c [String], has: fn(&Run) -> bool) -> Vec<(&'c String, Vec<&'a Run>)> {
    configs
        .iter()
        .map(|c| {
            let mut runs: Vec<&Run> = ctx.results.runs.iter().filter(|r| r.config == *c && has(r)).collect();
            // Each run directory has its own clock (a resumed search's parts).
            runs.sort_by(|a, b| a.dir.cmp(&b.dir).then(a.window_s.map(|w| w.0).unwrap_or(0.0).total_cmp(&b.window_s.map(|w| w.0).unwrap_or(0.0))));
            (c, runs)
        })
        .filter(|(_, runs)| !runs.is_empty())
        .collect()
}

/// Paper 003's steady state, shown rather than assumed: per measured window,
/// the active sessions, the delivered and the disk MB/s in its first third
/// against its last. A window whose load was still ramping up or whose cache
/// was still filling shows as a trend between the two.
fn steady_section(ctx: &mut Ctx<'_>, configs: &[String]) -> anyhow::Result<()> {
    let with = windows_with(ctx, configs, |r| r.drift.is_some());
    if with.is_empty() {
        return Ok(());
    }
    writeln!(ctx.md, "## Steady state over each window
")?;
    writeln!(
        ctx.md,
        "Per measured window, its first third against its last: the active sessions (the load client's count), the delivered \
         MB/s (the load client's 5-second intervals) and the disk MB/s (the drive's counters, sampled every 5 s), with the \
         change in % of the first third. Every figure of a window in the tables above is over the whole window. A third of a \
         90 s window holds six 5-second samples: single samples of the delivered MB/s spread by about 5 % (standard deviation) \
         on the paper-scale testbed, a third's mean by about 2 %, so changes of a few % are sampling noise; the three moving \
         together in one direction is a window off steady state.\n"
    )?;
    writeln!(ctx.md, "| configuration | rate | window s | active sessions | change % | delivered MB/s | change % | disk MB/s | change % |")?;
    writeln!(ctx.md, "|---|---:|---|---:|---:|---:|---:|---:|---:|")?;
    let ends = |v: Option<(f64, f64)>, digits: usize| v.map_or("-".to_string(), |(a, b)| format!("{a:.digits$} → {b:.digits$}"));
    let change = |v: Option<(f64, f64)>| f2(v.and_then(WindowDrift::change_pct));
    for (c, runs) in &with {
        for r in runs {
            let d = r.drift.expect("filtered");
            let window = r.window_s.map(|(a, b)| format!("{a:.0}-{b:.0}")).unwrap_or_default();
            let cells = [
                window,
                ends(d.active_sessions, 0),
                change(d.active_sessions),
                ends(d.delivered_mb_s, 2),
                change(d.delivered_mb_s),
                ends(d.disk_mb_s, 2),
                change(d.disk_mb_s),
            ];
            window_row(ctx, c, r, &cells)?;
        }
    }
    writeln!(ctx.md)?;
    Ok(())
}

/// The page cache per measured window: how much sat on the active and the
/// inactive file list, and how much of what the drive read had been in the
/// cache before (refaults). Prefetched data waits on the inactive list
/// until it is sent; a small list evicts it first.
fn lru_section(ctx: &mut Ctx<'_>, configs: &[String]) -> anyhow::Result<()> {
    let with = windows_with(ctx, configs, |r| r.lru.is_some());
    if with.is_empty() {
        return Ok(());
    }
    writeln!(ctx.md, "## Page cache: the LRU lists\n")?;
    writeln!(
        ctx.md,
        "Per measured window, from the memory cgroup's `memory.stat` sampled with the disk: the mean size of the active and the \
         inactive file list, and the file pages read again after their eviction (`workingset_refault_file`), in MB/s and as a share \
         of what the drive read in the window. A window marked *lists moving* opened at the settling gate's cap with the \
         lists still moving (`run.steady.lru_pct`, docs/run.md).\n"
    )?;
    // Kernel memory (slab, page-cache tree nodes, shadow entries) where it was sampled.
    let kernel = with.iter().flat_map(|(_, runs)| runs).any(|r| r.lru.is_some_and(|l| l.kernel_mean_bytes.is_some()));
    let (kernel_head, kernel_rule) = if kernel { (" kernel MiB |", "---:|") } else { ("", "") };
    writeln!(ctx.md, "| configuration | rate | window s | active GiB | inactive GiB | refaults MB/s | refaults % of disk read |{kernel_head}")?;
    writeln!(ctx.md, "|---|---:|---|---:|---:|---:|---:|{kernel_rule}")?;
    let gib = |b: f64| b / (1u64 << 30) as f64;
    for (c, runs) in &with {
        for r in runs {
            let l = r.lru.expect("filtered");
            let disk_mb_s = r.disk.as_ref().map(DiskDelta::mb_per_s);
            let share = l.refault_mb_s.zip(disk_mb_s).filter(|(_, d)| *d > 0.0).map(|(f, d)| 100.0 * f / d);
            let moving = if r.cache_settled == Some(false) { " *lists moving*" } else { "" };
            let window = r.window_s.map(|(a, b)| format!("{a:.0}-{b:.0}{moving}")).unwrap_or_default();
            let mut cells = vec![window, format!("{:.2}", gib(l.active_file_mean_bytes)), format!("{:.2}", gib(l.inactive_file_mean_bytes)), f2(l.refault_mb_s), f2(share)];
            if kernel {
                cells.push(f2(l.kernel_mean_bytes.map(mib)));
            }
            window_row(ctx, c, r, &cells)?;
        }
    }
    writeln!(ctx.md)?;
    Ok(())
}

/// One row of a per-window table: the configuration's label and the step's
/// rate, then `cells`.
fn window_row(ctx: &mut Ctx<'_>, config: &str, r: &Run, cells: &[String]) -> anyhow::Result<()> {
    writeln!(ctx.md, "| {} | {:.2} | {} |", ctx.results.label(config), r.rate.unwrap_or(0.0), cells.join(" | "))?;
    Ok(())
}

/// What the machine did beside each window: the CPUs it kept busy (the
/// run's own server and daemon, and whatever else ran, such as a second
/// experiment) and how late the emulated drive's replies left. A drive
/// process starved by the host answers late and slows every configuration
/// on it; this table shows whether a window was measured on a crowded host,
/// and whether the kernel's global reclaim took part of the run's page cache.
fn machine_section(ctx: &mut Ctx<'_>, configs: &[String]) -> anyhow::Result<()> {
    let with = windows_with(ctx, configs, |r| r.host_cpus_busy.is_some());
    if with.is_empty() {
        return Ok(());
    }
    // Runs recorded before it was sampled have no reclaim figure: no column then.
    let reclaim_sampled = with.iter().any(|(_, runs)| runs.iter().any(|r| r.global_reclaim_pages.is_some()));
    // Nor a CPU-wait figure (and where the kernel has no pressure information).
    let wait_sampled = with.iter().any(|(_, runs)| runs.iter().any(|r| r.host_cpu_wait.is_some()));
    // Nor, before it was sampled or without Libception, a blocked figure.
    let blocked_sampled = with.iter().any(|(_, runs)| runs.iter().any(|r| r.server_threads_blocked.is_some()));
    let reading_sampled = with.iter().any(|(_, runs)| runs.iter().any(|r| r.daemon_reading.is_some()));
    let cpus = ctx.results.machine.get("cpus").and_then(Value::as_u64);
    writeln!(ctx.md, "## The machine beside each window\n")?;
    writeln!(
        ctx.md,
        "Per measured window: the CPUs the whole machine kept busy on average (`/proc/stat`, every CPU of the host; {}){}, the run's server and daemon \
         (their cgroups' CPU), and the emulated drive's mean reply lateness, ms per read past the modelled completion \
         (docs/run.md, \"Two experiments at once\"); and the server's TCP send buffers over the window (`ss` skmem `tb` of its \
         established connections every 15 s: the median of the snapshots' medians and the largest, KiB; the kernel grows them \
         by its autotuning, `tcp_wmem` in each run's setup.json; runs recorded since they are sampled){}{}{}.\n",
        cpus.map_or("the run saw an unknown number".to_string(), |n| format!("the run could use {n}")),
        if wait_sampled {
            "; the share of the window in which some runnable task waited for a CPU (`/proc/pressure/cpu`, `some`: the CPUs were \
             short, not only busy) and the CPUs the hypervisor took (steal; runs recorded since they are sampled)"
        } else {
            ""
        },
        if reclaim_sampled {
            "; and the pages the kernel's global reclaim scanned in the window (`/proc/vmstat` pgscan_kswapd + pgscan_direct; \
             above 0, memory outside the run's limit took part of its page cache: another experiment, or work beside it outside \
             `scripts/contained`; runs recorded since it is sampled)"
        } else {
            ""
        },
        if blocked_sampled {
            "; and under Libception the server's threads blocked on the daemon's reads, on average over the window (the daemon's \
             `read_wait_ns`: each FETCH that waited for a read, from its arrival to its reply): of a server with W single-threaded \
             workers, that many serve none of their connections meanwhile"
        } else {
            ""
        },
        if reading_sampled {
            "; and the share of the window the daemon's workers spent reading (their residency checks and preads through the \
             whole storage stack): one worker serializes a disk's reads, so near 100 % it is the limit, whatever the drive's own \
             busy share"
        } else {
            ""
        }
    )?;
    let (reclaim_head, reclaim_rule) = if reclaim_sampled { (" global reclaim pages |", "---:|") } else { ("", "") };
    let (wait_head, wait_rule) = if wait_sampled { (" CPU wait % | stolen CPUs |", "---:|---:|") } else { ("", "") };
    let (blocked_head, blocked_rule) = if blocked_sampled { (" server threads blocked |", "---:|") } else { ("", "") };
    let (reading_head, reading_rule) = if reading_sampled { (" daemon reading % |", "---:|") } else { ("", "") };
    writeln!(
        ctx.md,
        "| configuration | rate | window s | machine CPUs busy |{wait_head} server CPUs | daemon CPUs | drive reply late ms | send buffer KiB, median / max |{reclaim_head}{blocked_head}{reading_head}"
    )?;
    writeln!(ctx.md, "|---|---:|---|---:|{wait_rule}---:|---:|---:|---:|{reclaim_rule}{blocked_rule}{reading_rule}")?;
    let mut reclaimed = 0;
    for (c, runs) in &with {
        for r in runs {
            let per_s = |cpu_s: Option<f64>| cpu_s.zip(r.cpu_span_s()).map(|(c, w)| c / w);
            let window = r.window_s.map(|(a, b)| format!("{a:.0}-{b:.0}")).unwrap_or_default();
            let buffers = r.send_buffers.map_or("-".to_string(), |b| format!("{:.0} / {:.0}", b.median_bytes / 1024.0, b.max_bytes / 1024.0));
            let mut cells = vec![window, f2(r.host_cpus_busy)];
            if wait_sampled {
                cells.push(f1(r.host_cpu_wait.map(|w| 100.0 * w)));
                cells.push(f2(r.host_cpus_stolen));
            }
            cells.extend([f2(per_s(r.server_cpu_s)), f2(per_s(r.daemon_cpu_s)), f2(r.reply_late_ms), buffers]);
            if reclaim_sampled {
                cells.push(r.global_reclaim_pages.map_or("-".to_string(), |p| format!("{p:.0}")));
            }
            if blocked_sampled {
                cells.push(f2(r.server_threads_blocked));
            }
            if reading_sampled {
                cells.push(f1(r.daemon_reading.map(|b| 100.0 * b)));
            }
            reclaimed += usize::from(r.global_reclaim_pages.is_some_and(|p| p > 0.0));
            window_row(ctx, c, r, &cells)?;
        }
    }
    writeln!(ctx.md)?;
    if reclaimed > 0 {
        writeln!(
            ctx.md,
            "**Global reclaim reached {reclaimed} window(s)**: their page cache was not their memory limit's alone, and their verdicts may owe to it.\n"
        )?;
    }
    Ok(())
}

/// Paper 001's view of prefetching: per step of a run under Libception, the
/// size in force and what became of the prefetched bytes (Table 1's
/// metrics, Figs 5-6's eviction MB/s), and the size over time (Figs 3-4).
fn prefetch_section(ctx: &mut Ctx<'_>, configs: &[String]) -> anyhow::Result<()> {
    let with = windows_with(ctx, configs, |r| r.prefetch.is_some());
    if with.is_empty() {
        return Ok(());
    }
    writeln!(ctx.md, "## Prefetching (paper 001 Table 1, Figures 3-6)
")?;
    writeln!(
        ctx.md,
        "Per measured window of a run under Libception, from the daemon's counters sampled with the disk's: the prefetch size in force \
         (mean over the window, and at its end), and the prefetched bytes read, used by a request, evicted before use, wasted \
         (never used) and read again after their eviction, in MB/s over the same window; the eviction time is the mean, over the \
         ranges found evicted in the window, of the estimated time from their read to their eviction (docs/daemon.md). \
         *Used / delivered* checks the daemon's estimate of the bytes requested (it sees only the requests the shim \
         forwards, and infers the rest) against the load client's delivered bytes, every request counted: the factor by which \
         the miss ratio in the adaptive controller's score is off.\n"
    )?;
    writeln!(ctx.md, "| configuration | rate | size MiB (mean / end) | read MB/s | used MB/s | used / delivered | evicted MB/s | wasted MB/s | re-read MB/s | evicted % of read | eviction time s |")?;
    writeln!(ctx.md, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")?;
    for (c, runs) in &with {
        for r in runs {
            let p = r.prefetch.expect("filtered");
            let evicted_pct = p.evicted_mb_s.zip(p.read_mb_s).filter(|(_, read)| *read > 0.0).map(|(e, read)| 100.0 * e / read);
            let cells = [
                format!("{:.2} / {:.2}", mib(p.size_mean_bytes), mib(p.size_end_bytes)),
                f2(p.read_mb_s),
                f2(p.used_mb_s),
                f2(p.used_mb_s.filter(|_| r.throughput_mbs > 0.0).map(|u| u / r.throughput_mbs)),
                f2(p.evicted_mb_s),
                f2(p.wasted_mb_s),
                f2(p.reread_mb_s),
                f2(evicted_pct),
                p.eviction_time_s.map_or("-".into(), |s| format!("{s:.1}")),
            ];
            window_row(ctx, c, r, &cells)?;
        }
    }
    writeln!(ctx.md)?;
    // Per-bitrate sizes (paper 001 section 7.4), where a scale was in force.
    let scaled: Vec<(&String, &Run)> = with.iter().flat_map(|(c, runs)| runs.iter().map(move |r| (*c, *r))).filter(|(_, r)| r.prefetch.is_some_and(|p| p.scaled_share.is_some())).collect();
    if !scaled.is_empty() {
        writeln!(ctx.md, "Sizes by bitrate, where a scale was in force (`prefetch_scale`, or the adaptive controller's `scale`): the share of the window's prefetches scaled down for slower streams and the mean size they got, beside the size in force.\n")?;
        writeln!(ctx.md, "| configuration | rate | size in force MiB | scaled % of prefetches | scaled mean MiB |")?;
        writeln!(ctx.md, "|---|---:|---:|---:|---:|")?;
        for (c, r) in scaled {
            let p = r.prefetch.expect("filtered");
            let cells = [format!("{:.2}", mib(p.size_mean_bytes)), f2(p.scaled_share.map(|s| 100.0 * s)), f2(p.scaled_mean_bytes.map(mib))];
            window_row(ctx, c, r, &cells)?;
        }
        writeln!(ctx.md)?;
    }
    // The size over time, one line per run directory (a stepped run is one).
    let mut series = Vec::new();
    for (c, runs) in &with {
        let style = configs.iter().position(|x| x == *c).unwrap_or(0);
        for (dir, part) in run_dirs(runs) {
            let points: Vec<(f64, f64)> = crate::data::prefetch_size_samples(dir)?.into_iter().map(|(t, b)| (t, mib(b))).collect();
            if points.len() > 1 {
                let name = match part {
                    None => ctx.results.label(c),
                    Some(d) => format!("{} ({d})", ctx.results.label(c)),
                };
                series.push(Series::line(name, style, points));
            }
        }
    }
    if !series.is_empty() {
        ctx.figure(
            "prefetch-size-over-time",
            Chart { title: "Prefetch size in force over the run", x_label: "time since the load started (s)", y_label: "MiB", log_x: false, log_y: false, y_range: None, references: Vec::new() },
            series,
        )?;
    }
    daemon_reads_table(ctx, &with)?;
    controller_scores(ctx, &with)?;
    controller_figures(ctx, configs, &with)
}

/// The daemon's reads over each whole run (its stats at the end): how many
/// and their mean size against the prefetch size asked for. A read brings
/// the prefetch size but at the end of a file; before 2026-11-29 a stream's
/// miss past the range read before was planned from its request, and reads
/// came out whole chunks only (docs/daemon.md), which this shows.
fn daemon_reads_table(ctx: &mut Ctx<'_>, with: &[(&String, Vec<&Run>)]) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    for (c, runs) in with {
        let Some(first) = runs.first() else { continue };
        let prefetch_kb = first.config_json.get("prefetch_kb").and_then(Value::as_u64).filter(|_| first.config_json.get("prefetch_adaptive").and_then(Value::as_bool) != Some(true));
        for (dir, _) in run_dirs(runs) {
            let Some(d) = crate::data::daemon_reads(dir)? else { continue };
            let mean = (d.reads > 0).then(|| d.bytes as f64 / d.reads as f64);
            let rel = dir.strip_prefix(&ctx.results.dir).unwrap_or(dir).display().to_string();
            rows.push(format!(
                "| {c} | `{rel}` | {} | {} | {:.1} | {} | {} |",
                prefetch_kb.map_or("adaptive".to_string(), |k| k.to_string()),
                d.reads,
                d.bytes as f64 / 1e6,
                mean.map_or("-".into(), |m| format!("{:.0}", m / 1024.0)),
                mean.zip(prefetch_kb).map_or("-".into(), |(m, k)| format!("{:.2}", m / (k as f64 * 1024.0))),
            ));
        }
    }
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(
        ctx.md,
        "The daemon's reads over each whole run (`daemon.json`, its stats at the run's end, every disk): how many, the MB they \
         brought, and their mean size against the prefetch size asked for. A read brings the prefetch size but at the end of a \
         file; runs before 2026-11-29 planned a stream's miss past the range read before from its request, so their reads \
         came out whole chunks only (docs/daemon.md, \"Reads, prefetch and joining\").\n"
    )?;
    writeln!(ctx.md, "| configuration | run | prefetch KiB | reads | MB read | mean read KiB | mean read / prefetch size |")?;
    writeln!(ctx.md, "|---|---|---:|---:|---:|---:|---:|")?;
    for r in rows {
        writeln!(ctx.md, "{r}")?;
    }
    writeln!(ctx.md)?;
    Ok(())
}

/// Every score an adaptive controller measured but its warm-up intervals
/// (which start with the streams) and settling ones (which follow a change
/// of size), by the size it measured:
/// how many intervals, their mean, spread and range, and the evicted share
/// (its eviction-time jump acts from `evict`). Whether one interval's score
/// can tell neighbouring sizes apart shows here: their means differ by less
/// than one score's spread when it cannot.
fn controller_scores(ctx: &mut Ctx<'_>, with: &[(&String, Vec<&Run>)]) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    let (mut warm_ups, mut settles) = (0, 0);
    for (c, runs) in with {
        let mut by_size: BTreeMap<u64, Vec<(f64, Option<f64>)>> = BTreeMap::new();
        for (dir, _) in run_dirs(runs) {
            for i in crate::data::controller_intervals(dir)? {
                match i.unscored {
                    Some(Unscored::WarmUp) => {
                        warm_ups += 1;
                        continue;
                    }
                    Some(Unscored::Settle) => {
                        settles += usize::from(i.score.is_some());
                        continue;
                    }
                    None => {}
                }
                if let Some(score) = i.score {
                    by_size.entry(i.prefetch_bytes as u64).or_default().push((score, i.evicted_fraction));
                }
            }
        }
        for (size, v) in by_size {
            let scores: Vec<f64> = v.iter().map(|(s, _)| *s).collect();
            let n = scores.len() as f64;
            let mean = scores.iter().sum::<f64>() / n;
            let sd = if scores.len() > 1 { (scores.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt() } else { f64::NAN };
            let evicted: Vec<f64> = v.iter().filter_map(|(_, e)| *e).collect();
            let (lo, hi) = scores.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), s| (a.min(*s), b.max(*s)));
            rows.push(format!(
                "| {} | {:.1} | {} | {mean:.2} | {} | {lo:.2}-{hi:.2} | {} |",
                ctx.results.label(c),
                mib(size as f64),
                scores.len(),
                if sd.is_finite() { format!("{:.0} %", 100.0 * sd / mean) } else { "-".into() },
                if evicted.is_empty() { "-".into() } else { format!("{:.1} %", 100.0 * evicted.iter().sum::<f64>() / evicted.len() as f64) },
            ));
        }
    }
    if rows.is_empty() {
        return Ok(());
    }
    let warm = match warm_ups {
        0 => String::new(),
        1 => "; left out: its warm-up interval, the first busy one it scored after the daemon started".to_string(),
        n => format!("; left out: its {n} warm-up intervals, each disk worker's first busy one it scored after a daemon start"),
    };
    let settling = match settles {
        0 => String::new(),
        1 => "its settling interval, the first after a change of size".to_string(),
        n => format!("its {n} settling intervals, those after each change of size"),
    };
    let warm = match (settling.is_empty(), warm.is_empty()) {
        (true, _) => warm,
        (false, true) => format!("; left out: {settling}"),
        (false, false) => format!("{warm}, and {settling}"),
    };
    writeln!(ctx.md, "Scores the adaptive controller measured, by size (`controller.csv`, every interval it scored, all its runs{warm}): the spread is the standard deviation over the mean; neighbouring sizes whose means differ by less than it are not told apart by one interval. Evicted: prefetched bytes evicted before use over those requested, the mean of the intervals (the eviction jump acts from the controller's `evict`).\n")?;
    writeln!(ctx.md, "| configuration | size MiB | intervals | mean score | spread | range | evicted |\n|---|---:|---:|---:|---:|---|---:|")?;
    for r in rows {
        writeln!(ctx.md, "{r}")?;
    }
    writeln!(ctx.md)?;
    Ok(())
}

/// Paper 001 Figs 3-4 for every run of an adaptive controller: the size in
/// force and the score per interval, and beside them the delivered MB/s (in
/// bins of the run's controller interval) and the mean prefetch eviction time.
fn controller_figures(ctx: &mut Ctx<'_>, configs: &[String], with: &[(&String, Vec<&Run>)]) -> anyhow::Result<()> {
    for (c, runs) in with {
        let style = configs.iter().position(|x| x == *c).unwrap_or(0);
        for (dir, part) in run_dirs(runs) {
            let mut by_worker: BTreeMap<u64, Vec<crate::data::ControllerInterval>> = BTreeMap::new();
            for i in crate::data::controller_intervals(dir)? {
                by_worker.entry(i.worker).or_default().push(i);
            }
            if by_worker.is_empty() {
                continue;
            }
            let (name, label) = match part {
                None => (format!("controller-{c}"), ctx.results.label(c)),
                Some(d) => (format!("controller-{c}-{d}"), format!("{} ({d})", ctx.results.label(c))),
            };
            let several = by_worker.len() > 1;
            let (mut left, mut right, mut gaps) = (Vec::new(), Vec::new(), Vec::new());
            for (k, (w, intervals)) in by_worker.iter().enumerate() {
                let suffix = if several { format!(", worker {w}") } else { String::new() };
                let line = |name: &str, style: usize, value: fn(&crate::data::ControllerInterval) -> Option<f64>| {
                    Series::line(format!("{name}{suffix}"), style, intervals.iter().filter_map(|i| Some((i.t_s, value(i)?))).collect())
                };
                left.push(line("size in force (MiB)", style + 2 * k, |i| Some(mib(i.prefetch_bytes))));
                left.push(line("score", style + 2 * k + 1, |i| i.score));
                right.push(line("eviction time, estimate (s)", style + 2 * k + 1, |i| i.eviction_estimate_s));
                gaps.extend(intervals.windows(2).map(|p| p[1].t_s - p[0].t_s).filter(|g| *g > 0.0));
            }
            // Bins as long as the controller's intervals (their median spacing).
            gaps.sort_by(f64::total_cmp);
            let bin_s = gaps.get(gaps.len() / 2).copied().unwrap_or(60.0).max(5.0);
            right.insert(0, Series::line(format!("delivered MB/s ({bin_s:.0} s means)"), style, crate::data::delivered_mb_s_over_time(dir, bin_s)?));
            left.retain(|s| !s.points.is_empty());
            right.retain(|s| !s.points.is_empty());
            let x_label = "time since the load started (s)";
            let title = format!("Adaptive controller, {label}: size and score");
            ctx.figure(&format!("{name}-size-score"), Chart { title: &title, x_label, y_label: "MiB / score (disk ms per transaction x miss ratio)", log_x: false, log_y: false, y_range: None, references: Vec::new() }, left)?;
            if !right.is_empty() {
                let title = format!("Adaptive controller, {label}: throughput, eviction time");
                ctx.figure(&format!("{name}-throughput"), Chart { title: &title, x_label, y_label: "MB/s / s", log_x: false, log_y: false, y_range: None, references: Vec::new() }, right)?;
            }
        }
    }
    Ok(())
}

/// The run directories of one configuration's runs, in order (a stepped run
/// is one directory for all its steps; a resumed search has several), each
/// with its name when there are several, to tell their lines apart.
fn run_dirs<'a>(runs: &[&'a Run]) -> Vec<(&'a Path, Option<&'a str>)> {
    let mut dirs: Vec<&Path> = runs.iter().map(|r| r.dir.as_path()).collect();
    dirs.dedup();
    let several = dirs.len() > 1;
    dirs.into_iter().map(|d| (d, several.then(|| d.file_name().and_then(|n| n.to_str()).unwrap_or("run")))).collect()
}

/// The largest request the drive was sent, KiB: in block mode the loop
/// device's `max_sectors_kb` as the run found it (setup.json's block queue),
/// with the emulated drive's joining limit when that differs; in FUSE mode
/// the configuration's `max_request_kb` (FUSE `max_pages`).
fn max_request(config: &Value, setup: &Value) -> String {
    let queue = setup.get("disk").and_then(|d| d.get("block")).and_then(|b| b.get("queue"));
    match queue.and_then(|q| q.get("max_sectors_kb")).and_then(Value::as_u64) {
        Some(max) => match queue.and_then(|q| q.get("drive_joins_kb")).and_then(Value::as_u64) {
            Some(joins) if joins != max => format!("{max} (drive joins {joins})"),
            _ => max.to_string(),
        },
        None => config.get("max_request_kb").filter(|v| !v.is_null()).map_or("-".into(), |v| v.to_string()),
    }
}

fn setup_section(ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
    writeln!(ctx.md, "## Setup of every run\n")?;
    writeln!(ctx.md, "Each run directory holds `setup.json` (machine, packages, every parameter, seeds, the commands and the rendered server configuration) next to its raw data.\n")?;
    writeln!(ctx.md, "| run | server | Libception | prefetch KiB | read_ahead KiB | max request KiB | knobs | load seed | wall s |")?;
    writeln!(ctx.md, "|---|---|---|---:|---:|---:|---|---:|---:|")?;
    // A stepped run is one directory holding every step: listed once.
    let mut listed = std::collections::BTreeSet::new();
    for r in ctx.results.runs.iter().filter(|r| listed.insert(r.dir.clone())) {
        let c = &r.config_json;
        let s = |k: &str| c.get(k).filter(|v| !v.is_null()).map(|v| v.to_string().trim_matches('"').to_string()).unwrap_or_else(|| "-".into());
        let flag = |k: &str, words: &'static str| if c.get(k).and_then(Value::as_bool) == Some(true) { words } else { "" };
        let libception = format!("{}{}{}{}", s("libception"), flag("promote", ", promoted"), flag("promote_auto", ", promoted when evicted"), flag("per_disk", ", per disk"));
        let knobs = r
            .setup
            .get("server")
            .and_then(|s| s.get("knobs"))
            .and_then(Value::as_object)
            .map(|k| k.iter().map(|(a, b)| format!("{a}={}", b.as_str().unwrap_or("?"))).collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|| "-".into());
        let rel = r.dir.strip_prefix(&ctx.results.dir).unwrap_or(&r.dir).display().to_string();
        // Apache's pool: its children x threads; another server's worker
        // count when the configuration has its own (each the
        // configuration's own count, else the experiment's).
        let run = ctx.results.experiment.get("run");
        let setting = |k: &str| c.get(k).or(run.and_then(|r| r.get(k)));
        let server = match (s("server").as_str(), setting("workers"), setting("threads_per_worker")) {
            ("apache", Some(w), Some(t)) => format!("apache ({w} x {t} threads)"),
            (name, _, _) => match c.get("workers") {
                Some(w) => format!("{name} ({w} workers)"),
                None => name.to_owned(),
            },
        };
        writeln!(
            ctx.md,
            "| `{rel}` | {server} | {} | {} | {} | {} | {knobs} | {} | {} |",
            libception,
            s("prefetch_kb"),
            s("read_ahead_kb"),
            max_request(c, &r.setup),
            r.setup.get("load_seed").or(r.setup.get("order_seed")).map(|v| v.to_string()).unwrap_or_else(|| "-".into()),
            r.load_wall_s.map(|w| format!("{w:.0}")).unwrap_or_else(|| "-".into()),
        )?;
    }
    writeln!(ctx.md)?;
    vidbench_builds(ctx)?;
    drive_images(ctx)?;
    // Records from before machine sharing have no `sharing` key: nothing printed.
    let shared: Vec<String> = ctx
        .results
        .runs
        .iter()
        .filter_map(|r| {
            let sharing = r.setup.get("sharing")?;
            let names: Vec<String> = sharing.get("overlapped")?.as_array()?.iter().filter_map(|o| o.as_str().map(str::to_string)).collect();
            (!names.is_empty()).then_some(())?;
            let reclaim = match sharing.get("global_reclaim_pages_scanned").and_then(Value::as_u64) {
                Some(0) => String::new(),
                Some(n) => format!("; the kernel's global reclaim scanned {n} pages during it"),
                None => "; global reclaim not recorded".to_string(),
            };
            Some(format!("`{}` (with {}{reclaim})", r.dir.strip_prefix(&ctx.results.dir).unwrap_or(&r.dir).display(), names.join(", ")))
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    if !shared.is_empty() {
        writeln!(
            ctx.md,
            "Runs that shared the machine with another experiment for some or all of their time (docs/run.md, \"Two experiments at once\"): {}.\n",
            shared.join(", ")
        )?;
    }
    if !ctx.results.incomplete.is_empty() {
        writeln!(ctx.md, "Incomplete runs (no `DONE`; interrupted or failed, see their `error.txt`):\n")?;
        for d in &ctx.results.incomplete {
            writeln!(ctx.md, "- `{}`", d.strip_prefix(&ctx.results.dir).unwrap_or(d).display())?;
        }
        writeln!(ctx.md)?;
    }
    Ok(())
}

/// Run directories grouped by a property of their setup (runs without it
/// left out), in the results' order within each group.
fn runs_by(ctx: &Ctx<'_>, key: impl Fn(&Value) -> Option<String>) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut groups: std::collections::BTreeMap<String, Vec<String>> = std::collections::BTreeMap::new();
    let mut listed = std::collections::BTreeSet::new();
    for r in ctx.results.runs.iter().filter(|r| listed.insert(r.dir.clone())) {
        if let Some(k) = key(&r.setup) {
            groups.entry(k).or_default().push(format!("`{}`", r.dir.strip_prefix(&ctx.results.dir).unwrap_or(&r.dir).display()));
        }
    }
    groups
}

/// Which build of vidbench (and so of the shim and daemon it installs) ran
/// each run: one sentence when every run ran one, else one line per build
/// naming its runs. A result merged from halves or resumed across sessions
/// may span builds; the header's build is only the results directory's own.
fn vidbench_builds(ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
    let builds = runs_by(ctx, |setup| {
        let m = &setup["machine"];
        // Runs from before the build was recorded name only their checkout.
        let Some(build) = m["vidbench_build"].as_str() else {
            return m["git_commit"].as_str().map(|c| format!("checkout `{}` (build not recorded)", &c[..c.len().min(12)]));
        };
        let commit = build.trim_end_matches("-dirty");
        Some(format!("`{}`{}", &commit[..commit.len().min(12)], if commit.len() < build.len() { " (built with local changes)" } else { "" }))
    });
    let n = builds.len();
    write_groups(ctx, &builds, |one| format!("Build: every run ran vidbench built from {one}."), &format!("Builds: the runs ran {n} builds of vidbench (each run's `setup.json`, `machine.vidbench_build`):"), "")
}

/// Runs grouped by [`runs_by`]: nothing for no group, the sentence `one`
/// makes for a single one, else `many` and a line per group (`prefix`, the
/// group, its runs).
fn write_groups(ctx: &mut Ctx<'_>, groups: &std::collections::BTreeMap<String, Vec<String>>, one: impl Fn(&str) -> String, many: &str, prefix: &str) -> anyhow::Result<()> {
    match groups.len() {
        0 => {}
        1 => writeln!(ctx.md, "{}\n", one(groups.keys().next().expect("one group")))?,
        _ => {
            writeln!(ctx.md, "{many}\n")?;
            for (group, runs) in groups {
                writeln!(ctx.md, "- {prefix}{group}: {}", runs.join(", "))?;
            }
            writeln!(ctx.md)?;
        }
    }
    Ok(())
}

/// Which drive image (block mode) each run read: one sentence when every run
/// read one build, else one line per build naming its runs, since builds
/// before builder version 3 placed the library differently
/// (docs/disk.md, "Placement"). Nothing for FUSE-mode records.
fn drive_images(ctx: &mut Ctx<'_>) -> anyhow::Result<()> {
    let builds = runs_by(ctx, |setup| {
        let block = &setup["disk"]["block"];
        let key = block["image_key_hash"].as_str()?;
        let f = &block["image_figures"];
        let gb = |k: &str| f[k].as_f64().map(|b| format!("{:.1}", b / 1e9)).unwrap_or_else(|| "?".into());
        let placement = match f["placement"].as_str() {
            Some(d) => format!("placement digest `{d}`"),
            None => format!("no placement digest (before builder version 3): {} extents, {} metadata blocks", f["extents"], f["overlay_blocks"]),
        };
        Some(format!("`{key}`, library at {}-{} GB, {placement}", gb("data_first_byte"), gb("data_end_byte")))
    });
    let n = builds.len();
    write_groups(ctx, &builds, |one| format!("Drive image (block mode): every run read image {one}."), &format!("Drive images (block mode): the runs read {n} builds, which may place the library's files differently (docs/disk.md, \"Placement\"):"), "image ")
}

/// A plain-text table, one line per configuration and rate: delivered MB/s,
/// failed %, disk MB/s, ms per transaction and the ratio of delivered MB/s to
/// the same server's vanilla configuration at the same rate; then each
/// configuration's maximum failure-free rate, with the ratio of its MB/s there
/// to the vanilla configuration's at its own.
pub fn rate_table(results: &Results) -> String {
    let mut out = String::new();
    let configs: Vec<String> = results.configs().into_iter().filter(|c| results.runs_of(c).any(|r| r.kind == "server")).collect();
    let points: BTreeMap<String, Vec<Point>> = configs.iter().map(|c| (c.clone(), analysis::points(results, c))).collect();
    let width = configs.iter().map(|c| results.label(c).len()).max().unwrap_or(13).max(13);
    let _ = writeln!(
        out,
        "{:<width$}  {:>6}  {:>10}  {:>8}  {:>8}  {:>9}  {:>7}  {:>11}",
        "configuration", "rate/s", "deliv MB/s", "failed %", "disk MB/s", "disk/deliv", "ms/t", "x vanilla"
    );
    let mut windows = (false, false);
    for c in &configs {
        let base = baseline(results, c);
        for p in &points[c] {
            let ratio = base.as_ref().filter(|b| *b != c).and_then(|b| {
                let bp = points.get(b)?.iter().find(|q| (q.rate - p.rate).abs() < 1e-9)?;
                (bp.throughput_mbs > 0.0).then(|| format!("{:.2}", p.throughput_mbs / bp.throughput_mbs))
            });
            if p.one_window {
                windows.0 = true;
            } else {
                windows.1 = true;
            }
            let _ = writeln!(
                out,
                "{:<width$}  {:>6.2}  {:>10.2}  {:>8.2}  {:>8}  {:>9}  {:>7}  {:>11}",
                results.label(c),
                p.rate,
                p.throughput_mbs,
                p.failure_pct,
                f2(p.disk_mbs),
                f2(p.disk_per_delivered()),
                f2(p.ms_per_transaction),
                ratio.unwrap_or_else(|| "-".into())
            );
        }
    }
    if windows.0 {
        let _ = writeln!(out, "windows: steady-state steps: every column over the step's measured window");
    }
    if windows.1 {
        let _ = writeln!(out, "windows: classic runs: delivered MB/s over the measure phase, disk columns over the whole load (not the same window)");
    }
    for (c, s) in results.configs().iter().filter_map(|c| Some((c, results.runs_of(c).find(|r| r.kind == "wc")?))) {
        let _ = writeln!(out, "{:<width$}  {:>6}  {:>10.2}  (wc upper bound: disk read sequentially)", results.label(c), "-", s.throughput_mbs);
    }
    let best: BTreeMap<&String, (Option<&Point>, bool)> =
        configs.iter().map(|c| (c, analysis::best_point(&points[c], results.threshold(c), results.search_answer(c)))).collect();
    for c in &configs {
        let _ = match best[c] {
            (Some(p), bounded) => {
                // Searched rates differ between configurations, so the
                // per-rate column stays empty for them; the maxima compare.
                let ratio = ratio_of_best(results, c, |n| best.get(&n.to_string())?.0.map(|p| p.throughput_mbs))
                    .map(|(r, base)| format!(", {r:.2}x {}", results.label(&base)))
                    .unwrap_or_default();
                writeln!(out, "max failure-free: {:<width$} {}{:.2}/s, {:.2} MB/s{ratio}", results.label(c), if bounded { "" } else { ">= " }, p.rate, p.throughput_mbs)
            }
            (None, _) => writeln!(out, "max failure-free: {:<width$} none of the rates tried", results.label(c)),
        };
    }
    out
}
