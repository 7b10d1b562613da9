//! `vidbench run EXPERIMENT.toml --out RESULTS [--resume]`, and the hidden
//! reader mode the driver starts inside a run's cgroup.

use crate::driver::{self, Driver};
use crate::progress::fmt_duration;
use crate::experiment::{Config, Experiment, Prefetch, RatePlan, ServerKind};
use libception_proto::AdaptiveParams;
use crate::{cgroup, cgroup_probe, estimate, interrupt, reader};
use anyhow::Context;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `vidbench run`.
#[derive(Debug, clap::Args)]
#[command(about = "Run an experiment: servers on the emulated disk, with and without Libception, \
                   searching each configuration's maximum failure-free rate (see docs/run.md)")]
pub struct Args {
    /// The experiment file (TOML), e.g. bench/experiments/quick.toml.
    #[arg(required_unless_present_any = ["internal_read", "probe_cgroup"])]
    pub experiment: Option<PathBuf>,
    /// Results directory (created; refused if it holds results, unless --resume).
    #[arg(long, required_unless_present_any = ["internal_read", "check", "probe_cgroup"])]
    pub out: Option<PathBuf>,
    /// Continue an interrupted experiment: finished runs are kept, the others redone.
    #[arg(long)]
    pub resume: bool,
    /// Run nothing: check the experiment file and what a run needs of the
    /// machine (programs, memory, preset, workload), and print the run plan.
    #[arg(long)]
    pub check: bool,
    /// Run only these configurations (names as `--check` prints them, or the
    /// `[[config]]` name of a sweep), comma-separated. A --resume may name another
    /// list: configurations already finished are kept, whether named or not.
    #[arg(long, value_delimiter = ',', value_name = "NAME,...")]
    pub only: Vec<String>,
    /// Check the cgroups a run would use, with stand-in children instead of
    /// servers: detect the hierarchy (or take VIDBENCH_CGROUP_ROOT), create a
    /// run cgroup, place a CPU-busy child per role, read the counters, tear it
    /// down; prints what was used and seen as JSON. Fails as a run would.
    #[arg(long, conflicts_with_all = ["experiment", "out", "resume", "check"])]
    pub probe_cgroup: bool,
    /// With --probe-cgroup: also set this memory limit (MiB), as every run does.
    #[arg(long, requires = "probe_cgroup", value_name = "MIB")]
    pub probe_limit_mb: Option<u64>,
    #[arg(long, hide = true)]
    pub internal_read: Option<PathBuf>,
    #[arg(long, hide = true)]
    pub internal_mount: Option<PathBuf>,
    #[arg(long, hide = true)]
    pub internal_report: Option<PathBuf>,
    #[arg(long, hide = true)]
    pub internal_deadline_s: Option<f64>,
}

/// Runs `vidbench run`.
pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(list) = &args.internal_read {
        let mount = args.internal_mount.as_ref().context("--internal-read needs --internal-mount")?;
        let report = args.internal_report.as_ref().context("--internal-read needs --internal-report")?;
        let ranges = vidbench_library::session_io::read_warm_list(list)?;
        let r = reader::read_ranges(mount, &ranges, 128, args.internal_deadline_s.map(Duration::from_secs_f64))?;
        std::fs::write(report, serde_json::to_string_pretty(&r)? + "\n")?;
        return Ok(());
    }
    if args.probe_cgroup {
        let report = cgroup_probe::probe(args.probe_limit_mb.map(|mb| mb << 20))?;
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let path = args.experiment.expect("clap requires it");
    let mut exp = Experiment::from_file(&path)?;
    if !args.only.is_empty() {
        exp.keep_only(&args.only).with_context(|| format!("--only for {}", path.display()))?;
    }
    // After --only: the left-out configurations are resolved too, as a
    // resume records the finished ones among them (`Experiment::recorded`).
    if let Some(why) = exp.resolve_disk_mode(vidbench_disk::block::check_support, vidbench_disk::fuse_max_request_kb())? {
        eprintln!("vidbench run: using FUSE mode: block mode is not available here ({why})");
    }
    if args.check {
        unless_reader_left(print_plan(&exp, &mut std::io::stdout().lock()))?;
        driver::preflight(&exp)?;
        return Ok(());
    }
    let out = args.out.expect("clap requires it");
    cgroup::available().map_err(anyhow::Error::msg)?;
    interrupt::install()?;
    raise_fd_limit();
    driver::cleanup_leftovers(&out);
    let result = Driver::new(exp, &out, args.resume).and_then(|mut d| d.run_all().map(|s| (d, s)));
    match result {
        Ok((d, summaries)) => {
            tracing::info!("all runs done; results in {}", d.out.display());
            let mut stdout = std::io::stdout().lock();
            Ok(unless_reader_left(summaries.iter().try_for_each(|s| writeln!(stdout, "{:<28} {}", s.label, s.headline())))?)
        }
        Err(e) if e.is::<interrupt::Interrupted>() || interrupt::requested() => {
            let only = if args.only.is_empty() { String::new() } else { format!(" --only {}", args.only.join(",")) };
            // The cause stays downcastable, so vidbench exits 130 for it.
            Err(anyhow::Error::new(interrupt::Interrupted).context(format!(
                "interrupted: finished runs are kept in {}; continue with `vidbench run {}{only} --out {} --resume`",
                out.display(),
                path.display(),
                out.display()
            )))
        }
        Err(e) => Err(e),
    }
}

/// Stdout closed early (`vidbench run X --check | head`) is not an error: the
/// reader has what it wanted. SIGPIPE stays ignored, as Rust sets it, because
/// the driver writes to its children's pipes and must see EPIPE there.
fn unless_reader_left(written: std::io::Result<()>) -> std::io::Result<()> {
    match written {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// What an adaptive controller's parameters change from paper 001's, the
/// ones an experiment sets most (start size, interval, gradual change, the
/// bitrate scale rule) spelled out.
fn adaptive_summary(p: &AdaptiveParams) -> String {
    let d = AdaptiveParams::paper();
    let mut parts = Vec::new();
    if p.start != d.start {
        parts.push(p.start.map_or("start probed".to_string(), |b| format!("from {} KiB", b / 1024)));
    }
    if p.interval != d.interval {
        parts.push(format!("every {} s", p.interval.as_secs_f64()));
    }
    if p.ramp_rate != d.ramp_rate {
        parts.push(format!("moving at most {} KiB/s", p.ramp_rate / 1024));
    }
    if p.scale != d.scale {
        parts.push(format!("slower streams' size scaled by {}", p.scale.name()));
    }
    match p.settle {
        0 => {}
        1 => parts.push("one settling interval after each change".into()),
        n => parts.push(format!("{n} settling intervals after each change")),
    }
    let others = AdaptiveParams { start: d.start, interval: d.interval, ramp_rate: d.ramp_rate, scale: d.scale, settle: d.settle, ..p.clone() } != d;
    if others {
        parts.push("other parameters changed (experiment.json)".into());
    }
    if parts.is_empty() { String::new() } else { format!(" {}", parts.join(", ")) }
}

fn print_plan(exp: &Experiment, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "experiment {:?}: {} configurations, about {} runs, disk {} in {} mode{}; {}",
        exp.name,
        exp.configs.len(),
        exp.configs.iter().map(|c| estimate::estimate_config_runs(exp, c)).sum::<usize>(),
        exp.disk.preset,
        exp.disk.mode.name(),
        if exp.disk.count > 1 { format!(", {} drives (each file on one)", exp.disk.count) } else { String::new() },
        machine_time_summary(exp)
    )?;
    for c in &exp.configs {
        let what = match (c.server, c.libception) {
            (Some(s), Some(m)) => format!("{} under Libception ({}{})", s.name(), m.name(), match &c.prefetch {
                Some(Prefetch::Adaptive(p)) => format!(", prefetch adaptive{}", adaptive_summary(p)),
                Some(Prefetch::Fixed(bytes)) => format!(", prefetch {} KiB", bytes / 1024),
                None => String::new(),
            }),
            (Some(s), None) => format!("{} vanilla", s.name()),
            (None, _) => "wc upper bound".into(),
        };
        let what = match c.server {
            Some(ServerKind::Apache) => {
                format!("{what}, {} x {} threads", exp.workers(c), exp.apache_threads(c))
            }
            Some(_) if c.workers.is_some() => format!("{what}, {} workers", exp.workers(c)),
            _ => what,
        };
        let what = match c.chaos {
            Some(k) => format!("{what}, daemon SIGKILLed every {} s and restarted {} s later", k.kill_every_s, k.restart_after_s),
            None => what,
        };
        let what = if c.per_disk { format!("{what}, one daemon worker per drive") } else { what };
        let what = if c.promote { format!("{what}, prefetched pages promoted") } else { what };
        let what = if c.promote_auto { format!("{what}, prefetched pages promoted once evicted before use") } else { what };
        let what = if c.queue_by_position { format!("{what}, queued reads in disk order") } else { what };
        let what = if c.reply_by_range { format!("{what}, waiters answered once their range is read") } else { what };
        let what = match c.prefetch_scale {
            Some(scale) => format!("{what}, slower streams' size scaled by {}", scale.name()),
            None => what,
        };
        let what = match c.patience_ms {
            Some(ms) => format!("{what}, shim patience {ms} ms"),
            None => what,
        };
        let what = match c.ramp_s {
            Some(r) => format!("{what}, a ramp of its own of at least {r} s"),
            None => what,
        };
        let what = match c.knobs.is_empty() {
            true => what,
            false => format!("{what}, {}", c.knobs.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")),
        };
        let plan = match &c.rates {
            RatePlan::Fixed { rates, repetitions, relative_to: None, .. } => format!("rates {rates:?} x {repetitions}"),
            RatePlan::Fixed { rates, repetitions, relative_to: Some(r), .. } => format!(
                "{} of `{}`'s maximum failure-free rate{} x {repetitions}",
                rates.iter().map(|f| format!("{:.0} %", f * 100.0)).collect::<Vec<_>>().join(", "),
                r.config,
                r.results.as_ref().map_or(String::new(), |d| format!(" in {}", d.display()))
            ),
            RatePlan::Search { search, threshold_pct } => format!(
                "search {}..{} (resolution {}, {} repetitions, threshold {threshold_pct} %)",
                search.low, search.high, search.resolution, search.repetitions
            ),
            RatePlan::Bracket { bracket: b, threshold_pct } => format!(
                "bracketing search from {} in {} % steps to {} % (x{} at the result and above, at most {} probes, threshold {threshold_pct} %)",
                b.start, b.step_pct, b.resolution_pct, b.repetitions, b.max_probes
            ),
            RatePlan::None { repetitions } => format!("{repetitions} run(s)"),
        };
        let time = estimate::estimate_config_seconds(exp, c).map_or(String::new(), |s| format!("; about {}", fmt_duration(s)));
        writeln!(out, "  {:<24} {what}; {}; {plan}{time}", c.name, queue_summary(c))?;
    }
    Ok(())
}

/// The experiment's machine time as `--check` states it: the sum of the
/// configurations the steady protocol times, naming those it cannot.
fn machine_time_summary(exp: &Experiment) -> String {
    let estimates: Vec<_> = exp.configs.iter().map(|c| (c, estimate::estimate_config_seconds(exp, c))).collect();
    let known: f64 = estimates.iter().filter_map(|(_, s)| *s).sum();
    let unknown: Vec<&str> = estimates.iter().filter(|(_, s)| s.is_none()).map(|(c, _)| c.name.as_str()).collect();
    match (known > 0.0, unknown.is_empty()) {
        (true, true) => format!("machine time about {} (a lower estimate)", fmt_duration(known)),
        (true, false) => format!(
            "machine time about {} (a lower estimate) plus {} (not timed by the steady protocol)",
            fmt_duration(known),
            unknown.join(", ")
        ),
        (false, _) => "machine time not estimated (no configuration runs the steady protocol)".to_string(),
    }
}

/// A configuration's kernel settings for the disk, as `--check` prints them.
fn queue_summary(c: &Config) -> String {
    let mut s = format!("read_ahead {} KiB", c.read_ahead_kb);
    if let Some(kb) = c.max_request_kb {
        s.push_str(&format!(", max request {kb} KiB"));
    }
    if let Some(kb) = c.max_sectors_kb {
        s.push_str(&format!(", max_sectors {kb} KiB"));
    }
    if let Some(sched) = c.scheduler {
        s.push_str(&format!(", scheduler {}", sched.name()));
    }
    if let Some(n) = c.nr_requests {
        s.push_str(&format!(", nr_requests {n}"));
    }
    s
}

/// Servers and the load client hold a socket per session: raise the open-file
/// limit (inherited by the servers) as far as root may.
fn raise_fd_limit() {
    let want: libc::rlim_t = 1 << 16;
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < want {
            let raised = libc::rlimit { rlim_cur: want, rlim_max: lim.rlim_max.max(want) };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) != 0 {
                let soft = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
                libc::setrlimit(libc::RLIMIT_NOFILE, &soft);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stdout of `vidbench run X --check | head -1` once head has exited.
    struct ClosedPipe;

    impl Write for ClosedPipe {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A bundled experiment file, by name.
    fn bundled(name: &str) -> Experiment {
        Experiment::from_file(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/experiments").join(name)).unwrap()
    }

    /// What `--check` prints for `exp`.
    fn plan_of(exp: &Experiment) -> String {
        let mut plan = Vec::new();
        print_plan(exp, &mut plan).unwrap();
        String::from_utf8(plan).unwrap()
    }

    #[test]
    fn the_plan_names_each_configurations_server_knobs() {
        let plan = plan_of(&bundled("lighttpd-gap.toml"));
        assert!(plan.contains("nginx vanilla, sendfile_max_chunk 256k;"), "{plan}");
        // Apache's pool: Table 3 gives its rows 4 x 256 threads of their own.
        let plan = plan_of(&bundled("table3-paper.toml"));
        assert!(plan.contains("apache vanilla, 4 x 256 threads, sendfile On;"), "{plan}");
        // lighttpd's own worker count (16, the run's 4 for nginx) is named;
        // a server on the experiment's count is not.
        assert!(plan.contains("lighttpd vanilla, 16 workers"), "{plan}");
        assert!(plan.contains("prefetch 2048 KiB), 16 workers"), "{plan}");
        assert!(plan.lines().filter(|l| l.contains("nginx")).all(|l| !l.contains("workers")), "{plan}");
        let plan = plan_of(&bundled("promotion.toml"));
        assert!(plan.contains("4 x 64 threads"), "the experiment's count where a configuration sets none: {plan}");
        // The adaptive controller's scale rule, where it differs from the
        // square root, is named, and nothing else is said to have changed.
        let plan = plan_of(&bundled("paper001-mixed.toml"));
        let line = |name: &str| plan.lines().find(|l| l.trim_start().starts_with(&format!("{name} "))).unwrap().to_string();
        assert!(line("adaptive-proportional").contains("moving at most 48 KiB/s, slower streams' size scaled by proportional, one settling"), "{plan}");
        assert!(line("adaptive-none").contains("slower streams' size scaled by none, one settling interval after each change)"), "{plan}");
        assert!(!line("adaptive").contains("scaled by"), "{plan}");
        // Settling is named where it departs from paper 001's rule (the
        // daemon's default), and paper 001's rule is not.
        assert!(line("adaptive").contains("every 60 s, moving at most 48 KiB/s, one settling interval after each change)"), "{plan}");
        assert_eq!(adaptive_summary(&AdaptiveParams::paper()), "");
        assert_eq!(adaptive_summary(&AdaptiveParams { settle: 2, ..AdaptiveParams::paper() }), " 2 settling intervals after each change");
    }

    #[test]
    fn the_plan_states_machine_time_from_the_steady_protocol() {
        let exp = bundled("table3-paper.toml");
        let plan = plan_of(&exp);
        // A search of 9 windows at 5 rates: setup 60 s, ramp 1,200 s, a
        // window and hold of 120 s, 4 rates settling 60 s each, 4 repetitions.
        let search = 60.0 + 1200.0 + 120.0 + 4.0 * 180.0 + 4.0 * 120.0;
        assert_eq!(estimate::estimate_config_seconds(&exp, &exp.configs[0]), Some(search));
        assert!(plan.lines().nth(1).unwrap().ends_with("; about 43m00s"), "{plan}");
        let total = fmt_duration(8.0 * search);
        assert!(plan.lines().next().unwrap().ends_with(&format!("machine time about {total} (a lower estimate) plus wc (not timed by the steady protocol)")), "{plan}");
        let wc = exp.configs.iter().find(|c| c.name == "wc").unwrap();
        assert_eq!(estimate::estimate_config_seconds(&exp, wc), None);

        // Rates in separate runs: each its own setup, ramp and window.
        let mut apart = exp.clone();
        apart.run.steady.as_mut().unwrap().one_run = false;
        assert_eq!(estimate::estimate_config_seconds(&apart, &apart.configs[0]), Some(9.0 * (60.0 + 1200.0 + 120.0)));
        // Without the steady protocol the sessions' length decides: no estimate.
        let mut plain = exp.clone();
        plain.run.steady = None;
        assert!(plan_of(&plain).lines().next().unwrap().ends_with("machine time not estimated (no configuration runs the steady protocol)"));
    }

    #[test]
    fn a_closed_stdout_ends_the_plan_quietly() {
        let exp = bundled("quick.toml");
        assert!(plan_of(&exp).starts_with("experiment \"quick\""));
        assert!(print_plan(&exp, &mut ClosedPipe).is_err());
        assert!(unless_reader_left(print_plan(&exp, &mut ClosedPipe)).is_ok());
        let full: std::io::Result<()> = Err(std::io::ErrorKind::StorageFull.into());
        assert!(unless_reader_left(full).is_err(), "other write errors still count");
    }
}
