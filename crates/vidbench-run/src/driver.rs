//! The experiment loop: every configuration, every rate, every repetition, one
//! run each, with progress, resume and clean-up.
//!
//! Results layout (see docs/run.md):
//!
//! ```text
//! OUT/experiment.toml          the experiment file as given (merged when it `extends` another)
//! OUT/experiment.json          the checked, expanded experiment
//! OUT/machine.json             kernel, CPU, packages, git revision
//! OUT/workload/                the generated workload (when a spec is given)
//! OUT/runs/CONFIG/rate-R-repK/ one run: run.json, setup.json, load/, disk-*.json,
//!                              daemon.json, shim/, resources.json, result.json, DONE
//! OUT/runs/CONFIG/wc-repK/     one wc run: wc.json instead of load/
//! OUT/runs/CONFIG/steps-rep0/  a stepped run: every step's window in steps.json
//! OUT/runs/CONFIG/steps-partNN/ an interrupted stepped search's finished steps (parts.rs)
//! OUT/runs/CONFIG/search.json  the search's decisions (search plans)
//! OUT/summary.json             one line per configuration
//! ```
//!
//! A run directory is complete when it holds `DONE` (written last); `--resume`
//! reuses complete runs and redoes incomplete ones, and a search replays its
//! finished runs (and a stepped search the steps it kept) from disk, so it
//! takes the same decisions as before.
//! One run ([`Driver::run_server`]) builds its guards in order (disk, cgroup,
//! daemon, server) and stops them in reverse, on success, error or Ctrl-C alike.

use crate::cgroup::{self, Role, RunCgroup};
use crate::chaos;
use crate::daemon::{Daemon, DaemonOptions};
use crate::disk::{self, BlockOptions, Disk, DiskOptions, Disks};
use crate::estimate::estimate_config_runs;
use crate::resume::{check_resumable, has_finished_runs};
use crate::summary::ConfigSummary;
use crate::experiment::{Config, DiskMode, Experiment, Mode, Prefetch, RatePlan, RelativeTo, RunKind, WorkloadSource};
use crate::interrupt::{self, Interrupted};
use crate::parts;
use crate::process::{tail, Child, Spawn};
use crate::progress::{fmt_duration, Progress};
use crate::reader::{self, ReadReport};
use crate::search::{self, Outcome, Prober, SearchResult};
use crate::steady::{self, StepChannel, StepRecord, StopFlag};
use crate::experiment::SteadySection;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use crate::server::{self, ServerSetup};
use crate::setup;
use crate::sharing::{self, Share};
use anyhow::{bail, Context};
use libception_proto::ShimEnv;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use vidbench_library::session::Session;

/// The marker of a complete run directory.
pub const DONE: &str = "DONE";

/// What a finished run recorded in `result.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResult {
    pub config: String,
    pub kind: RunKind,
    pub rate: Option<f64>,
    pub repetition: u32,
    pub outcome: Outcome,
    pub wall_s: f64,
}

/// The generated (or given) workload files.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadFiles {
    pub dir: PathBuf,
    pub library: PathBuf,
    pub sessions: PathBuf,
    pub warm: Option<PathBuf>,
}

/// The children of one server run that `play` and the sampler read.
pub struct RunChildren<'a> {
    pub disk: &'a Disks,
    pub cgroup: &'a RunCgroup,
    /// The Reception daemon, when the configuration runs one (replaced by a
    /// new one after each kill of a chaos run).
    pub daemon: Option<&'a Mutex<Daemon>>,
}

/// Where the programs are.
#[derive(Debug, Clone, Serialize)]
pub struct Programs {
    pub vidbench: PathBuf,
    pub libception: PathBuf,
    pub shim: PathBuf,
    /// The build directory the defaults above come from.
    pub build: PathBuf,
}

impl Programs {
    /// `[paths]` first, then `$LIBCEPTION_BUILD`, then the build directory this
    /// `vidbench` runs from (`build/bin/vidbench` -> `build/`).
    pub fn find(exp: &Experiment) -> anyhow::Result<Programs> {
        let vidbench = std::env::current_exe().context("cannot find the running vidbench binary")?;
        let build = std::env::var_os("LIBCEPTION_BUILD")
            .map(PathBuf::from)
            .unwrap_or_else(|| vidbench.parent().and_then(Path::parent).map(Path::to_owned).unwrap_or_default());
        Ok(Programs {
            libception: exp.paths.libception.clone().unwrap_or_else(|| build.join("bin/libception")),
            shim: exp.paths.shim.clone().unwrap_or_else(|| default_shim(&build)),
            vidbench,
            build,
        })
    }
}

/// The shim of a build directory (`build/libdeception.so`), or of an
/// installed prefix (`make install`: `PREFIX/bin/vidbench`, `PREFIX/lib/`).
fn default_shim(build: &Path) -> PathBuf {
    let built = build.join("libdeception.so");
    let installed = build.join("lib/libdeception.so");
    if !built.exists() && installed.exists() {
        installed
    } else {
        built
    }
}

/// Rate as it appears in directory names.
pub fn rate_tag(rate: f64) -> String {
    format!("{rate:.2}")
}

/// What a run's start found and did about sharing the machine.
struct RunStart {
    /// Seconds since the epoch.
    started: f64,
    /// `run.drop_caches` asks for a drop (done unless shared).
    dropped: bool,
    company: sharing::Company,
    /// Own files evicted instead of the global drop.
    evicted: Option<usize>,
    /// Global reclaim scanned so far (/proc/vmstat).
    reclaim_scanned: Option<u64>,
}

pub struct Driver {
    pub exp: Experiment,
    pub out: PathBuf,
    pub programs: Programs,
    pub workload: WorkloadFiles,
    sessions: Vec<Session>,
    machine: Value,
    progress: Progress,
    cgroup_counter: u32,
    /// Block mode: the image every run must read (`OUT/image.json`).
    image: Option<Value>,
    /// Block mode, resuming: the image file `OUT/image.json` names, where it
    /// exists, mounted as it is (`--image`) so that a builder version newer
    /// than the experiment's does not stand in another placement.
    resumed_image: Option<PathBuf>,
    /// DAMON's proactive reclaim, turned off until the driver is dropped.
    _reclaim: Option<crate::reclaim::Paused>,
    /// This experiment's registration among those sharing the machine.
    share: Share,
    /// The servers' port: `run.port`, or the next free one when shared.
    port: u16,
}

pub(crate) fn now_unix() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

fn write_json(path: &Path, v: &impl Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(v).expect("JSON values serialize");
    std::fs::write(path, text + "\n").with_context(|| format!("cannot write {}", path.display()))
}

/// Finds DAMON's kdamonds, records them in `machine`, and pauses the running
/// ones unless the experiment keeps them (`reclaim.rs`).
fn pause_proactive_reclaim(exp: &Experiment, machine: &mut Value) -> anyhow::Result<Option<crate::reclaim::Paused>> {
    use crate::experiment::ReclaimPolicy;
    use crate::reclaim::{describe, kdamonds, Paused, Registry, KDAMONDS};
    let registry = Registry::system();
    if exp.run.proactive_reclaim == ReclaimPolicy::Keep && !registry.is_empty() {
        // Measured under the VM's policy: undo what killed benchmarks left off.
        for d in registry.recover().context("cannot undo the proactive-reclaim pauses of killed benchmarks")? {
            eprintln!("vidbench run: turned {} on again: a killed benchmark had left it off", d.display());
        }
    }
    let found = kdamonds(Path::new(KDAMONDS));
    let running: Vec<String> = found.iter().filter(|k| k.state == "on").flat_map(|k| k.schemes.clone()).collect();
    let (paused, action) = match exp.run.proactive_reclaim {
        ReclaimPolicy::Keep if running.is_empty() => (None, "none running".to_string()),
        ReclaimPolicy::Keep => (None, "kept running (proactive_reclaim = \"keep\")".to_string()),
        ReclaimPolicy::Pause if running.is_empty() && registry.is_empty() => (None, "none running".to_string()),
        ReclaimPolicy::Pause => {
            let p = Paused::system().with_context(|| {
                format!("cannot pause DAMON's proactive reclaim ({}): run as root, or set [run] proactive_reclaim = \"keep\" to measure under it", running.join("; "))
            })?;
            let mut action = String::from("paused for the experiment");
            if !p.pause.adopted.is_empty() {
                let names: Vec<String> = p.pause.adopted.iter().map(|d| d.display().to_string()).collect();
                action = format!("paused for the experiment ({} had been left off by a killed benchmark; taken over)", names.join(", "));
            }
            if !running.is_empty() {
                eprintln!("vidbench run: DAMON proactive reclaim paused for the experiment ({}); it is turned on again at the end", running.join("; "));
            }
            (Some(p), action)
        }
    };
    machine["proactive_reclaim"] = describe(&found, &action);
    Ok(paused)
}

/// Checks that every program the experiment needs exists, before anything is set up.
pub fn check_programs(exp: &Experiment, p: &Programs) -> anyhow::Result<()> {
    for c in &exp.configs {
        if let Some(kind) = c.server {
            let bin = server_binary(exp, p, c, kind);
            if !bin.is_file() {
                bail!("configuration {:?}: the {} binary {} does not exist (install it, or set `binary` or [paths])", c.name, kind.name(), bin.display());
            }
        }
        if let Some(mode) = c.libception {
            if !p.shim.is_file() {
                bail!("configuration {:?}: the shim {} does not exist (run `make`, or set [paths].shim)", c.name, p.shim.display());
            }
            if mode.needs_daemon() && !p.libception.is_file() {
                bail!("configuration {:?}: the daemon {} does not exist (run `make`, or set [paths].libception)", c.name, p.libception.display());
            }
        }
    }
    Ok(())
}

/// Memory the machine needs beside the run's cgroup: the load client, the
/// emulated drive's process, the driver and the kernel.
const MEMORY_HEADROOM: u64 = 1 << 30;

/// The machine's memory in bytes, from the text of /proc/meminfo.
fn mem_total(meminfo: &str) -> anyhow::Result<u64> {
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map(|kib| kib * 1024)
        .context("/proc/meminfo has no MemTotal line")
}

/// Checks that the machine has room for the experiment's memory limit
/// (`meminfo`: the text of /proc/meminfo): under a limit the machine cannot
/// give, the page cache would be bounded by the machine instead, and the run
/// would not measure the setup it records.
pub fn check_memory(exp: &Experiment, meminfo: &str) -> anyhow::Result<()> {
    let (total, need) = (mem_total(meminfo)?, exp.memory_limit_bytes + MEMORY_HEADROOM);
    if total < need {
        bail!(
            "the experiment limits server and daemon to {} MiB, and the load client, the emulated drive and the kernel need about {} MiB more, \
             but this machine has {} MiB: its own memory, not the limit, would bound the page cache. Use a machine with at least {} MiB, \
             or an experiment with a smaller memory.limit_mb",
            exp.memory_limit_bytes >> 20,
            MEMORY_HEADROOM >> 20,
            total >> 20,
            need >> 20,
        );
    }
    Ok(())
}

fn server_binary(exp: &Experiment, p: &Programs, c: &Config, kind: crate::experiment::ServerKind) -> PathBuf {
    use crate::experiment::ServerKind::*;
    c.binary.clone().unwrap_or_else(|| {
        let configured = match kind {
            Nginx => exp.paths.nginx.clone(),
            Apache => exp.paths.apache.clone(),
            Lighttpd => exp.paths.lighttpd.clone(),
            Laio => exp.paths.laio.clone(),
        };
        configured.unwrap_or_else(|| kind.default_binary(&p.build))
    })
}

/// What an experiment needs from the machine and the files it names, checked
/// before anything is set up (and by `vidbench run --check`): the programs,
/// the memory, the drive preset, the workload, and the results that
/// `relative_to` reads from another record. Returns the programs and the
/// text of /proc/meminfo, which a run goes on to use.
pub fn preflight(exp: &Experiment) -> anyhow::Result<(Programs, String)> {
    let programs = Programs::find(exp)?;
    check_programs(exp, &programs)?;
    let meminfo = std::fs::read_to_string("/proc/meminfo").context("cannot read /proc/meminfo")?;
    check_memory(exp, &meminfo)?;
    vidbench_disk::preset(&exp.disk.preset).with_context(|| format!("{}: disk.preset", exp.source.display()))?;
    match &exp.workload {
        WorkloadSource::Spec(spec) => {
            let out = Command::new(&programs.vidbench).args(["workload", "check"]).arg(spec).output().context("cannot run vidbench workload check")?;
            if !out.status.success() {
                bail!("{}: workload.spec: {}", exp.source.display(), String::from_utf8_lossy(&out.stderr).trim().trim_start_matches("vidbench: "));
            }
        }
        WorkloadSource::Dir(dir) => {
            for f in ["library.json", "sessions.jsonl"] {
                if !dir.join(f).is_file() {
                    bail!("{}: workload.dir: {} has no {f} (generate it with `vidbench workload gen`)", exp.source.display(), dir.display());
                }
            }
        }
    }
    for c in &exp.configs {
        // A relative_to of this experiment's own results is read once its search has run.
        if let RatePlan::Fixed { relative_to: Some(r @ RelativeTo { results: Some(_), .. }), .. } = &c.rates {
            r.max_rate(Path::new("")).with_context(|| format!("configuration `{}`", c.name))?;
        }
    }
    Ok((programs, meminfo))
}

impl Driver {
    /// Prepares the results directory and the workload.
    pub fn new(exp: Experiment, out: &Path, resume: bool) -> anyhow::Result<Driver> {
        let (programs, meminfo) = preflight(&exp)?;
        let exists = out.is_dir() && std::fs::read_dir(out)?.next().is_some();
        if exists && !resume {
            bail!("results directory {} already holds results: pass --resume to continue it, or choose another --out", out.display());
        }
        std::fs::create_dir_all(out.join("runs")).with_context(|| format!("cannot create {}", out.display()))?;
        let out = std::fs::canonicalize(out)?;
        let share = Share::join(&out, exp.memory_limit_bytes, MEMORY_HEADROOM, exp.run.port, exp.run.proactive_reclaim, mem_total(&meminfo)?)?;
        let company = share.company(cgroup::other_driver_pids());
        if !company.alone() {
            let mut list: Vec<String> = company.registered.iter().map(|o| format!("pid {} writing to {} (port {})", o.pid, o.out.display(), o.port)).collect();
            list.extend(company.unregistered_pids.iter().map(|p| format!("pid {p} (a driver from before the registry, seen by its run cgroup)")));
            eprintln!(
                "vidbench run: sharing the machine with {}: server port {}; the global drop_caches is skipped while another experiment runs (each run's drive is a fresh mount, so its page cache starts empty)",
                list.join(", "),
                share.port()
            );
        } else if share.port() != exp.run.port {
            eprintln!("vidbench run: port {} is in use: the servers listen on {}", exp.run.port, share.port());
        }
        let stored = out.join("experiment.json");
        let recorded = exp.recorded(|name| has_finished_runs(&out, name));
        if resume && stored.exists() {
            let old: Value = serde_json::from_str(&std::fs::read_to_string(&stored)?).context("experiment.json of the results is not JSON")?;
            check_resumable(&old, &recorded, &out)?;
        }
        std::fs::write(out.join("experiment.toml"), &exp.file_text).with_context(|| format!("cannot write the experiment file into {}", out.display()))?;
        // The experiment's own key order unless finished configurations left
        // out by --only had to be added.
        if recorded == serde_json::to_value(&exp)? {
            write_json(&stored, &exp)?;
        } else {
            write_json(&stored, &recorded)?;
        }
        let mut workload = prepare_workload(&exp, &out, &programs)?;
        let mut sessions = vidbench_library::session_io::read_sessions(&workload.sessions)?;
        if let Some(max) = exp.run.max_session_s {
            truncate_sessions(&mut sessions, max);
        }
        if exp.disk.count > 1 {
            divide_between_drives(&mut sessions, &mut workload, exp.disk.count, exp.run.seed, &out)?;
        }
        vidbench_library::Library::load(&workload.library)?;
        let mut machine = setup::machine(exp.source.parent().unwrap_or(Path::new(".")));
        let reclaim = pause_proactive_reclaim(&exp, &mut machine)?;
        write_json(&out.join("machine.json"), &machine)?;
        let estimate_total = exp.configs.iter().map(|c| estimate_config_runs(&exp, c)).sum();
        Ok(Driver {
            exp,
            out,
            programs,
            workload,
            sessions,
            machine,
            progress: Progress::new(estimate_total),
            cgroup_counter: 0,
            image: None,
            resumed_image: None,
            _reclaim: reclaim,
            port: share.port(),
            share,
        })
    }

    /// The servers' document root: the drive's mount point, or the
    /// directory of the drives' mount points (`[disk] count`).
    fn mount_point(&self) -> PathBuf {
        self.out.join("mnt")
    }

    /// Where each drive is mounted.
    fn drive_mounts(&self) -> Vec<PathBuf> {
        disk::drive_mounts(&self.mount_point(), self.exp.disk.count)
    }

    /// Runs every configuration; returns the per-configuration summary.
    pub fn run_all(&mut self) -> anyhow::Result<Vec<ConfigSummary>> {
        self.check_relative_rates()?;
        self.prepare_image()?;
        let mut summaries = Vec::new();
        let configs = self.exp.configs.clone();
        for (i, cfg) in configs.iter().enumerate() {
            let before = self.progress.done();
            let s = self.run_config(cfg)?;
            // Replace the estimate of this configuration with what it took.
            self.progress.correct_estimate(estimate_config_runs(&self.exp, cfg), self.progress.done() - before);
            self.progress.printer().line(&format!("vidbench run: configuration {} of {} ({}) done: {}", i + 1, configs.len(), cfg.name, s.headline()));
            summaries.push(s);
            write_json(&self.out.join("summary.json"), &summaries)?;
        }
        self.progress.finish();
        Ok(summaries)
    }

    /// Before anything runs: every plan relative to a configuration of this
    /// experiment finds it among those to run (`--only`) or finished here.
    fn check_relative_rates(&self) -> anyhow::Result<()> {
        for cfg in &self.exp.configs {
            let RatePlan::Fixed { relative_to: Some(r @ RelativeTo { results: None, .. }), .. } = &cfg.rates else { continue };
            if !self.exp.configs.iter().any(|c| c.name == r.config) {
                r.max_rate(&self.out).with_context(|| format!("configuration `{}` (add `{}` to --only)", cfg.name, r.config))?;
            }
        }
        Ok(())
    }

    fn run_config(&mut self, cfg: &Config) -> anyhow::Result<ConfigSummary> {
        let dir = self.out.join("runs").join(&cfg.name);
        std::fs::create_dir_all(&dir)?;
        if let Some(timing) = cfg.steady(self.exp.run.steady).filter(|t| t.one_run && cfg.kind == RunKind::Server) {
            return self.run_stepped(cfg, timing);
        }
        match cfg.rates.clone() {
            RatePlan::Fixed { rates, repetitions, threshold_pct, relative_to } => {
                let mut points = Vec::new();
                for rate in self.fixed_rates(cfg, &rates, relative_to.as_ref())? {
                    let mut outcomes = Vec::new();
                    for rep in 0..repetitions {
                        outcomes.push(self.probe(cfg, Some(rate), rep)?);
                    }
                    points.push((rate, outcomes));
                }
                Ok(ConfigSummary::from_points(cfg, threshold_pct, &points))
            }
            RatePlan::Search { search, threshold_pct } => {
                let mut prober = ConfigProber { driver: self, cfg };
                let result = search::find_max_failure_free(&search, threshold_pct, &mut prober)?;
                write_json(&dir.join("search.json"), &result)?;
                Ok(ConfigSummary::from_search(cfg, threshold_pct, &result))
            }
            RatePlan::Bracket { bracket, threshold_pct } => {
                let mut prober = ConfigProber { driver: self, cfg };
                let result = search::bracket_max_failure_free(&bracket, threshold_pct, &mut prober)?;
                write_json(&dir.join("search.json"), &result)?;
                Ok(ConfigSummary::from_search(cfg, threshold_pct, &result))
            }
            RatePlan::None { repetitions } => {
                let mut outcomes = Vec::new();
                for rep in 0..repetitions {
                    outcomes.push(self.probe(cfg, None, rep)?);
                }
                Ok(ConfigSummary::from_points(cfg, 100.0, &[(0.0, outcomes)]))
            }
        }
    }

    /// A fixed plan's rates: as given, or its fractions times the maximum
    /// failure-free rate they are relative to (said on the progress output).
    fn fixed_rates(&self, cfg: &Config, rates: &[f64], relative_to: Option<&RelativeTo>) -> anyhow::Result<Vec<f64>> {
        let Some(r) = relative_to else { return Ok(rates.to_vec()) };
        let max = r.max_rate(&self.out).with_context(|| format!("configuration `{}`", cfg.name))?;
        let played: Vec<f64> = rates.iter().map(|f| search::round_rate(f * max)).collect();
        let from = r.results.as_ref().map_or(String::new(), |d| format!(" in {}", d.display()));
        self.progress.printer().line(&format!(
            "{}: rates {} sessions/s, {} of `{}`'s maximum failure-free rate {max:.2}{from}",
            cfg.name,
            played.iter().map(|r| format!("{r:.2}")).collect::<Vec<_>>().join(", "),
            rates.iter().map(|f| format!("{:.0} %", f * 100.0)).collect::<Vec<_>>().join(", "),
            r.config
        ));
        if let Some(f) = rates.iter().zip(&played).find(|(_, r)| **r <= 0.0).map(|(f, _)| f) {
            bail!("configuration `{}`: the fraction {f} of {max:.2} sessions/s rounds to no rate at all (1/100 session/s is the least)", cfg.name);
        }
        Ok(played)
    }

    fn run_dir(&self, cfg: &Config, rate: Option<f64>, rep: u32) -> PathBuf {
        let name = match rate {
            Some(r) => format!("rate-{}-rep{rep}", rate_tag(r)),
            None => format!("wc-rep{rep}"),
        };
        self.out.join("runs").join(&cfg.name).join(name)
    }

    /// One run, or its recorded result when it is complete.
    pub fn probe(&mut self, cfg: &Config, rate: Option<f64>, rep: u32) -> anyhow::Result<Outcome> {
        interrupt::check()?;
        let dir = self.run_dir(cfg, rate, rep);
        if dir.join(DONE).exists() {
            let r: RunResult = serde_json::from_str(&std::fs::read_to_string(dir.join("result.json"))?)
                .with_context(|| format!("{} is not a run result", dir.join("result.json").display()))?;
            self.progress.recalled_run();
            return Ok(r.outcome);
        }
        if dir.exists() {
            std::fs::remove_dir_all(&dir).with_context(|| format!("cannot remove the incomplete run {}", dir.display()))?;
        }
        std::fs::create_dir_all(&dir)?;
        let what = match rate {
            Some(r) => format!("{} at {r:.2} sessions/s, repetition {}", cfg.name, rep + 1),
            None => format!("{} (wc upper bound), repetition {}", cfg.name, rep + 1),
        };
        self.progress.start_run(&what);
        let started = Instant::now();
        let started_unix = now_unix();
        write_json(
            &dir.join("run.json"),
            &json!({"experiment": self.exp.name, "config": cfg, "rate": rate, "repetition": rep, "seed": self.exp.run.seed + rep as u64, "started_unix_s": started_unix}),
        )?;
        let outcome = match cfg.kind {
            RunKind::Server => self.run_server(cfg, rate.expect("server runs have a rate"), rep, &dir),
            RunKind::Wc => self.run_wc(cfg, rep, &dir),
        };
        let outcome = match outcome {
            Ok(o) => o,
            Err(e) => {
                let _ = std::fs::write(dir.join("error.txt"), format!("{e:#}\n"));
                return Err(e.context(format!("run {} failed (its files are in {})", what, dir.display())));
            }
        };
        let wall_s = started.elapsed().as_secs_f64();
        write_json(&dir.join("result.json"), &RunResult { config: cfg.name.clone(), kind: cfg.kind, rate, repetition: rep, outcome, wall_s })?;
        std::fs::write(dir.join(DONE), format!("{}\n", now_unix()))?;
        self.progress.finished_run(wall_s);
        self.progress.printer().line(&format!(
            "    -> {:.2} MB/s delivered, {:.2} % sessions failed ({})",
            outcome.throughput_mbs,
            outcome.failure_pct,
            fmt_duration(wall_s)
        ));
        Ok(outcome)
    }

    /// Drops the page cache before a run (`run.drop_caches`), unless
    /// another experiment shares the machine (`sharing`); returns what
    /// [`Driver::sharing_record`] needs when the run ends.
    fn drop_caches(&self) -> anyhow::Result<RunStart> {
        let level = self.exp.run.drop_caches;
        let started = now_unix();
        let company = self.share.drop_unless_shared(cgroup::other_driver_pids, || {
            if level == 0 {
                return Ok(());
            }
            unsafe { libc::sync() };
            std::fs::write("/proc/sys/vm/drop_caches", level.to_string()).context("cannot write /proc/sys/vm/drop_caches (needs root)")
        })?;
        let evicted = (!company.alone()).then(|| self.evict_own_files());
        Ok(RunStart { started, dropped: level != 0, company, evicted, reclaim_scanned: sharing::global_reclaim_scanned() })
    }

    /// Drops this experiment's own files from the page cache (results and
    /// workload), which the skipped global drop would have: on a shared
    /// machine they would pile up outside every memory limit.
    fn evict_own_files(&self) -> usize {
        let mut n = sharing::evict_own_files(&self.out);
        if !self.workload.dir.starts_with(&self.out) {
            n += sharing::evict_own_files(&self.workload.dir);
        }
        n
    }

    /// setup.json's `sharing` at the end of a run: what its start found and
    /// did, and the experiments that ran beside it at any time since.
    fn sharing_record(&self, start: RunStart) -> Value {
        let c = &start.company;
        let mut overlapped: Vec<String> = self.share.overlapping(start.started).into_iter().map(|p| p.display().to_string()).collect();
        overlapped.extend(c.registered.iter().map(|o| o.out.display().to_string()));
        overlapped.extend(c.unregistered_pids.iter().map(|p| format!("unregistered driver pid {p}")));
        overlapped.sort();
        overlapped.dedup();
        let evicted_at_end = (!overlapped.is_empty()).then(|| self.evict_own_files());
        json!({
            "drop_caches": match (start.dropped, c.alone()) {
                (false, _) => "off",
                (true, true) => "done",
                (true, false) => "skipped: the machine is shared, the drive is a fresh mount",
            },
            "port": self.port,
            "shared_with": c.registered,
            "unregistered_drivers": c.unregistered_pids,
            "own_files_evicted": start.evicted,
            "own_files_evicted_at_end": evicted_at_end,
            "global_reclaim_pages_scanned": start.reclaim_scanned.zip(sharing::global_reclaim_scanned()).map(|(a, b)| b.saturating_sub(a)),
            "overlapped": overlapped,
        })
    }

    fn new_cgroup(&mut self) -> anyhow::Result<RunCgroup> {
        self.cgroup_counter += 1;
        RunCgroup::create(&format!("{}-{}", std::process::id(), self.cgroup_counter), self.exp.memory_limit_bytes)
    }

    fn disk_options(&self, cfg: &Config, dir: &Path) -> DiskOptions {
        let mut opts = self.base_disk_options();
        opts.read_ahead_kb = cfg.read_ahead_kb;
        opts.max_request_kb = cfg.max_request_kb;
        if let Some(b) = &mut opts.block {
            b.scheduler = cfg.scheduler;
            b.max_sectors_kb = cfg.max_sectors_kb;
            b.nr_requests = cfg.nr_requests;
        }
        opts.trace = cfg.trace.then(|| dir.join("disk-trace.csv"));
        opts
    }

    /// The disk without a configuration's settings: what the image depends on.
    fn base_disk_options(&self) -> DiskOptions {
        let d = &self.exp.disk;
        DiskOptions {
            library: self.workload.library.clone(),
            preset: d.preset.clone(),
            read_ahead_kb: d.read_ahead_kb,
            max_request_kb: d.max_request_kb,
            block: (d.mode == DiskMode::Block).then(|| BlockOptions {
                fs: d.fs.unwrap_or_default(),
                fs_size: d.fs_size,
                fs_slack_pct: d.fs_slack_pct,
                fill_order: d.fill_order,
                fill_seed: d.fill_seed,
                image_cache: d.image_cache.clone(),
                image: self.resumed_image.clone(),
                scheduler: d.scheduler,
                max_sectors_kb: d.max_sectors_kb,
                nr_requests: d.nr_requests,
            }),
            trace: None,
            extra_args: d.args.clone(),
        }
    }

    /// Block mode: builds (or finds in the cache) the experiment's image
    /// before anything is timed, by mounting once and unmounting, and records
    /// its key and placement in `OUT/image.json`. Every run then checks that
    /// it reads the same image, so all configurations see one placement. A
    /// resumed experiment must find the image it started with.
    fn prepare_image(&mut self) -> anyhow::Result<()> {
        if self.exp.disk.mode != DiskMode::Block {
            return Ok(());
        }
        let path = self.out.join("image.json");
        let old: Option<Value> = match std::fs::read_to_string(&path) {
            Ok(text) => Some(serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?),
            Err(_) => None,
        };
        self.resumed_image = old.as_ref().and_then(|o| o["image"].as_str()).map(PathBuf::from).filter(|p| p.is_file());
        let opts = self.base_disk_options();
        self.progress.printer().line("vidbench run: block mode: building or loading the disk image (the first mount of a library builds it: seconds for small ones, minutes at paper scale)");
        let started = Instant::now();
        let mut disk = Disk::mount(&self.programs.vidbench, &self.drive_mounts()[0], &opts, &self.out.join("image.log"))?;
        let stats = disk.stats()?;
        disk.unmount()?;
        let block = &stats["config"]["block"];
        let image = json!({
            "image": block["image"],
            "image_key_hash": block["image_key_hash"],
            "image_figures": block["image_figures"],
            "built_now": block["image_built_now"],
            "fs": block["fs"],
            "fs_size": block["fs_size"],
            "fill_order": block["fill_order"],
            "seed": block["seed"],
            "first_mount_s": started.elapsed().as_secs_f64(),
            "command": disk.command,
        });
        if image["image_key_hash"].as_str().is_none() {
            bail!("vidbench disk stat gave no config.block.image_key_hash for the block mount (log {})", self.out.join("image.log").display());
        }
        if let Some(old) = &old {
            if let Some(why) = image_differs(old, &image) {
                bail!("cannot resume {}: the disk image is not the one its runs read ({why}; the image cache was rebuilt or changed, or {} is gone): start a new --out, or put the image its runs read back in place", self.out.display(), old["image"]);
            }
        } else {
            write_json(&path, &image)?;
        }
        self.progress.printer().line(&format!(
            "vidbench run: image {} ({}), library at {:.1}-{:.1} GB of the drive, ready in {}",
            image["image_key_hash"].as_str().unwrap_or("?"),
            if image["built_now"] == true { "built now" } else { "from the cache" },
            image["image_figures"]["data_first_byte"].as_f64().unwrap_or(0.0) / 1e9,
            image["image_figures"]["data_end_byte"].as_f64().unwrap_or(0.0) / 1e9,
            fmt_duration(started.elapsed().as_secs_f64())
        ));
        self.image = Some(image);
        Ok(())
    }

    /// The disk half of a run's setup.json: options, command line, and in block
    /// mode the settings the device took (read back by `vidbench disk stat`)
    /// and the image, which must be the experiment's, checked on every drive.
    /// Several drives: the first's figures, plus `count`, each drive's device
    /// and mount point, and how files were divided between them. Refuses a
    /// drive process inside the run's memory cgroup and records their pids.
    fn disk_setup(&self, opts: &DiskOptions, disks: &Disks, cgroup: &RunCgroup, stats: &Value) -> anyhow::Result<Value> {
        // The drive model's memory is the emulator's, not the server's: it
        // must not count against the limit (it was started before the cgroup).
        if let Some(pid) = disks.pids().into_iter().find(|&pid| cgroup.holds(pid)) {
            bail!("the emulated drive's process (pid {pid}) is in the run's memory cgroup {}: its memory would count against the server's limit", cgroup.dir().display());
        }
        let mut v = json!({"mode": self.exp.disk.mode.name(), "options": opts, "command": disks.command(), "pids_outside_run_cgroup": disks.pids()});
        let drives: Vec<&Value> = match stats.get("drives").and_then(Value::as_array) {
            Some(each) => each.iter().collect(),
            None => vec![stats],
        };
        if let Some(image) = &self.image {
            for (k, drive) in drives.iter().enumerate() {
                let block = &drive["config"]["block"];
                let recorded = json!({"image_key_hash": block["image_key_hash"], "image_figures": block["image_figures"]});
                if let Some(why) = image_differs(image, &recorded) {
                    bail!("this run's disk image (drive {k}) is not the experiment's ({why}): every configuration must read the same placement; was the image cache changed during the experiment?");
                }
                check_queue(opts, &effective_queue(&block["device"]["queue"]))?;
            }
            let block = &stats["config"]["block"];
            v["block"] = json!({
                "device": block["device"]["device"],
                "dev": block["device"]["dev"],
                "queue": effective_queue(&block["device"]["queue"]),
                "queue_raw": block["device"]["queue"],
                "image": block["image"],
                "image_key_hash": block["image_key_hash"],
                "image_figures": block["image_figures"],
                "fs": block["fs"],
                "fs_size": block["fs_size"],
                "fill_order": block["fill_order"],
            });
        } else {
            v["effective"] = json!({"read_ahead_kb": stats["config"]["read_ahead_kb"], "max_request_kb": stats["config"]["max_request_kb"]});
        }
        if drives.len() > 1 {
            v["count"] = json!(drives.len());
            v["drives"] = drives
                .iter()
                .zip(&disks.drives)
                .map(|(d, disk)| json!({"mount": disk.mount, "device": d["config"]["block"]["device"]["device"], "dev": d["config"]["block"]["device"]["dev"]}))
                .collect();
            v["division"] = json!(format!(
                "each library file on one drive: /dK/PATH with K = splitmix64(fnv1a(PATH) ^ {}) mod {}",
                self.exp.run.seed,
                drives.len()
            ));
        }
        Ok(v)
    }

    /// Reads `list` under the mount from a child inside `cgroup`.
    fn read_in_cgroup(&self, cgroup: &RunCgroup, list: &Path, report: &Path, deadline_s: Option<f64>) -> anyhow::Result<ReadReport> {
        let mut command = Command::new(&self.programs.vidbench);
        command.args(["run", "--internal-read"]).arg(list).arg("--internal-mount").arg(self.mount_point()).arg("--internal-report").arg(report);
        if let Some(d) = deadline_s {
            command.arg("--internal-deadline-s").arg(d.to_string());
        }
        let log = report.with_extension("log");
        let out = std::fs::File::create(&log)?;
        command.stdin(Stdio::null()).stdout(out.try_clone()?).stderr(out);
        let mut child = Child::spawn(Spawn {
            name: "reader",
            command,
            attach: Some(cgroup.attach(Role::Reader)?),
            stop_signal: libc::SIGKILL,
            death_signal: libc::SIGKILL,
        })?;
        loop {
            interrupt::check()?;
            if let Some(status) = child.exited() {
                if !status.success() {
                    bail!("the reader failed ({status}): {}", tail(&log, 10));
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let text = std::fs::read_to_string(report).with_context(|| format!("the reader wrote no {}", report.display()))?;
        Ok(serde_json::from_str(&text)?)
    }

    /// The workload's warming set, when the experiment warms with it.
    fn warm_list(&self) -> Option<&Path> {
        self.workload.warm.as_deref().filter(|_| self.exp.run.warm)
    }

    /// Fills the cache to `pct` % of the memory limit (`run.warm_fill_pct`)
    /// with the ranges the sessions request most, in file order, read by a
    /// child inside `cgroup`; what it read and the cache before and after
    /// are returned for setup.json.
    fn fill_cache(&self, cgroup: &RunCgroup, pct: f64, dir: &Path) -> anyhow::Result<Value> {
        let usage = || -> anyhow::Result<u64> { cgroup.memory_usage()?.context("the memory cgroup reports no usage") };
        let before = usage()?;
        let target = (self.exp.memory_limit_bytes as f64 * pct / 100.0) as u64;
        let already = match self.warm_list() {
            Some(list) => vidbench_library::session_io::read_warm_list(list)?,
            None => Vec::new(),
        };
        let list = reader::fill_list(&self.sessions, &already, target.saturating_sub(before));
        let list_path = dir.join("warm-fill.txt");
        let header = format!("cache fill to {pct} % of the memory limit: the most requested ranges after the warming set, in file order");
        vidbench_library::session_io::write_warm_list(&list_path, &header, &list)?;
        let report = self.read_in_cgroup(cgroup, &list_path, &dir.join("warm-fill.json"), None)?;
        let after = usage()?;
        self.progress.printer().line(&format!(
            "    cache filled to {:.2} GB of {:.2} GB in {:.0} s ({:.0} MB/s from the drive)",
            after as f64 / 1e9,
            self.exp.memory_limit_bytes as f64 / 1e9,
            report.seconds,
            report.mb_per_s
        ));
        Ok(json!({"target_pct": pct, "target_bytes": target, "cache_before_bytes": before, "cache_after_bytes": after, "read": report}))
    }

    fn run_server(&mut self, cfg: &Config, rate: f64, rep: u32, dir: &Path) -> anyhow::Result<Outcome> {
        if let Some(timing) = cfg.steady(self.exp.run.steady) {
            // One rate in its own run: ramp, window and hold.
            let steps = self.serve(cfg, rep, dir, json!(rate), |d, children| {
                d.play_steady(children, timing, rep, dir, |ch| ch.step(rate).map(|_| ()))
            })?;
            let step = steps.1.first().context("the run played no step")?;
            return steady::outcome(&step.load);
        }
        let summary = self.serve(cfg, rep, dir, json!(rate), |d, _| d.play_load(rate, rep, &dir.join("load")))?;
        let failure_pct = summary["failure_percent"].as_f64().context("the load measured no session (failure_percent is null): the run is too short for its ramp-up and ramp-down")?;
        let throughput_mbs = summary["throughput_mb_s"].as_f64().unwrap_or(0.0);
        Ok(Outcome { failure_pct, throughput_mbs })
    }

    /// One server run: disk, cgroup, daemon, server and warm-up, then `play`
    /// (the load), then everything recorded and stopped in reverse order.
    /// `rates` is what setup.json records as the run's rate(s).
    fn serve<T>(
        &mut self,
        cfg: &Config,
        rep: u32,
        dir: &Path,
        rates: Value,
        play: impl FnOnce(&Driver, &RunChildren<'_>) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let kind = cfg.server.expect("checked: server configurations name a server");
        let sharing = self.drop_caches()?;
        let disk_opts = self.disk_options(cfg, dir);
        let mut disk = Disks::mount(&self.programs.vidbench, &self.drive_mounts(), &disk_opts, &dir.join("disk.log"))?;
        let cgroup = self.new_cgroup()?;
        let daemon = match cfg.daemon_prefetch() {
            Some(prefetch) => Some(Daemon::start(&self.programs.libception, &dir.join("daemon.sock"), &prefetch, &self.exp.run.user, DaemonOptions::of(cfg), &dir.join("daemon.log"), &cgroup)?),
            None => None,
        };
        let env = match cfg.libception {
            Some(mode) => shim_env(cfg, mode, &self.programs, daemon.as_ref().map(|d| d.socket.as_path()), dir)?,
            None => Vec::new(),
        };
        // Shared with the sampler and, in chaos runs, the thread that kills
        // and restarts it.
        let daemon = daemon.map(Mutex::new);
        let binary = server_binary(&self.exp, &self.programs, cfg, kind);
        let template = cfg.template.clone().expect("checked: server configurations have a template");
        let setup = ServerSetup {
            kind,
            template: &template,
            binary: &binary,
            run_dir: dir,
            docroot: &self.mount_point(),
            port: self.port,
            workers: self.exp.workers(cfg),
            threads_per_worker: self.exp.apache_threads(cfg),
            user: &self.exp.run.user,
            knobs: &cfg.knobs,
            env: env.clone(),
        };
        let mut srv = server::start(&setup, &cgroup)?;
        server::wait_ready(&mut srv, self.port, Duration::from_secs_f64(self.exp.run.ready_timeout_s))?;
        let warm = match self.warm_list() {
            Some(list) => Some(self.read_in_cgroup(&cgroup, list, &dir.join("warm.json"), None)?),
            None => None,
        };
        let warm_fill = match self.exp.run.warm_fill_pct {
            Some(pct) => Some(self.fill_cache(&cgroup, pct, dir)?),
            None => None,
        };
        interrupt::sleep(Duration::from_secs_f64(self.exp.run.settle_s))?;

        let disk_before = disk.stats()?;
        write_json(&dir.join("disk-before.json"), &disk_before)?;
        let disk_setup = self.disk_setup(&disk_opts, &disk, &cgroup, &disk_before)?;
        // Written now and again at the end with what only the end knows
        // (`sharing`, `chaos_kills`), so that an interrupted run keeps it
        // (a stepped search's kept steps are reported with it).
        let mut setup_json = json!({
            "machine": self.machine,
            "experiment": {"name": self.exp.name, "source": self.exp.source, "description": self.exp.description},
            "config": cfg,
            "rate": rates,
            "repetition": rep,
            "load_seed": self.exp.run.seed + rep as u64,
            "run": self.exp.run,
            "memory_limit_bytes": self.exp.memory_limit_bytes,
            "disk": disk_setup,
            "network": setup::network(),
            "daemon_command": daemon_command(cfg, &self.programs, dir, &self.exp.run.user),
            "server": {"kind": kind.name(), "binary": binary, "template": template, "config": srv.config_path, "knobs": srv.knobs, "env": env},
            "workload": self.workload,
            "warm": warm,
            "warm_fill": warm_fill,
            "chaos_kills": null,
            "sharing": null,
        });
        write_json(&dir.join("setup.json"), &setup_json)?;
        let cpu_before = (cgroup.cpu_seconds(Role::Server), cgroup.cpu_seconds(Role::Daemon));
        let load_started = Instant::now();
        let children = RunChildren { disk: &disk, cgroup: &cgroup, daemon: daemon.as_ref() };
        let (played, chaos_kills) = match (cfg.chaos, daemon.as_ref()) {
            (Some(chaos), Some(d)) => chaos::during(chaos, d, &cgroup, &dir.join("chaos.csv"), || play(self, &children)).map(|(p, k)| (p, Some(k)))?,
            _ => (play(self, &children)?, None),
        };
        let daemon = daemon.map(|d| d.into_inner().unwrap_or_else(|e| e.into_inner()));
        let load_wall = load_started.elapsed().as_secs_f64();
        let disk_after = disk.stats()?;
        write_json(&dir.join("disk-after.json"), &disk_after)?;
        let cpu_after = (cgroup.cpu_seconds(Role::Server), cgroup.cpu_seconds(Role::Daemon));
        let memory = cgroup.memory_stats()?;
        if let Some(d) = &daemon {
            match d.stats() {
                Ok(v) => write_json(&dir.join("daemon.json"), &v)?,
                Err(e) => self.progress.printer().line(&format!("vidbench run: warning: no daemon counters for this run: {e:#}")),
            }
        }
        let server_alive = srv.child.exited().is_none();
        let server_status = srv.child.stop(Duration::from_secs(15));
        if let Some(mut d) = daemon {
            d.child.stop(Duration::from_secs(10));
        }
        let diff = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| b - a);
        write_json(
            &dir.join("resources.json"),
            &json!({
                "load_wall_s": load_wall,
                "server_cpu_s": diff(cpu_before.0, cpu_after.0),
                "daemon_cpu_s": diff(cpu_before.1, cpu_after.1),
                "server_cpu_total_s": cgroup.cpu_seconds(Role::Server),
                "daemon_cpu_total_s": cgroup.cpu_seconds(Role::Daemon),
                "reader_cpu_total_s": cgroup.cpu_seconds(Role::Reader),
                "memory_cgroup": memory,
                "cgroup": cgroup.describe(),
                "server_alive_after_load": server_alive,
                "server_exit": server_status.to_string(),
            }),
        )?;
        drop(cgroup);
        setup_json["chaos_kills"] = json!(chaos_kills);
        setup_json["sharing"] = self.sharing_record(sharing);
        write_json(&dir.join("setup.json"), &setup_json)?;
        disk.unmount()?;
        Ok(played)
    }

    /// Plays the load on a thread so that Ctrl-C is noticed while it runs.
    fn play_load(&self, rate: f64, rep: u32, out: &Path) -> anyhow::Result<Value> {
        let mut config = self.load_config(rate, rep, out)?;
        config.stop = match (self.exp.run.duration_s, self.exp.run.sessions) {
            (Some(d), _) => vidbench_load::Stop::Duration(d),
            (None, Some(n)) => vidbench_load::Stop::Sessions(n),
            (None, None) => unreachable!("checked: duration or sessions"),
        };
        let sessions = self.sessions.clone();
        let printer = self.progress.printer();
        let handle = std::thread::Builder::new().name("load".into()).spawn(move || {
            vidbench_load::play(config, sessions, &mut |p| printer.line(&format!("    load {p}"))).map(|s| serde_json::to_value(&s).expect("summary serializes"))
        })?;
        let mut interrupted_at: Option<Instant> = None;
        loop {
            if handle.is_finished() {
                break;
            }
            if interrupt::requested() {
                // The load client stops on SIGINT itself; give it a moment, then abandon it.
                let at = *interrupted_at.get_or_insert_with(Instant::now);
                if at.elapsed() > Duration::from_secs(15) {
                    return Err(Interrupted.into());
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let summary = handle.join().map_err(|_| anyhow::anyhow!("the load client panicked"))??;
        interrupt::check()?;
        Ok(summary)
    }

    /// The load client's settings common to both protocols.
    fn load_config(&self, rate: f64, rep: u32, out: &Path) -> anyhow::Result<vidbench_load::LoadConfig> {
        let mut config = vidbench_load::LoadConfig::new(format!("http://127.0.0.1:{}", self.port), rate, out);
        config.seed = self.exp.run.seed + rep as u64;
        config.handle_interrupt = true;
        config.interval_s = crate::experiment::SAMPLE_INTERVAL_S;
        config.sessions_source = Some(self.workload.sessions.display().to_string());
        if self.exp.run.verify {
            config.verify = Some(vidbench_library::Library::load(&self.workload.library)?);
        }
        Ok(config)
    }

    /// Plays a steady-state run: the load client on its own thread plays the
    /// steps `drive` asks for through the channel, the sampler records the
    /// disk and the cgroup beside it. Returns what `drive` returned and every
    /// step with the disk's and the memory's figures over its window (also
    /// written to DIR/steps.json).
    fn play_steady<R>(
        &self,
        children: &RunChildren<'_>,
        timing: SteadySection,
        rep: u32,
        dir: &Path,
        drive: impl FnOnce(&mut StepChannel) -> anyhow::Result<R>,
    ) -> anyhow::Result<(R, Vec<StepRecord>)> {
        let mut config = self.load_config(1.0, rep, &dir.join("load"))?;
        let epoch = Instant::now();
        config.epoch = Some(epoch);
        let stop = AtomicBool::new(false);
        let load_done = Arc::new(AtomicBool::new(false));
        let sessions = self.sessions.clone();
        let printer = self.progress.printer();
        let running = load_done.clone();
        let say = self.progress.printer();
        let report = Box::new(move |r: &vidbench_load::StepResult| {
            let settling = match r.gap_pct {
                Some(gap) => format!(
                    "; window after {:.0} s of settling, {:.1} % of the steady-state sessions {}{}{}",
                    r.settled_s,
                    gap.abs(),
                    if gap >= 0.0 { "missing" } else { "in excess" },
                    match r.cache_settled {
                        Some(true) => ", page cache settled",
                        Some(false) => ", page cache still moving",
                        None => "",
                    },
                    if r.settled { "" } else { " (NOT settled: the cap ended the settling)" }
                ),
                None => String::new(),
            };
            let matched = match r.matched {
                Some(m) => format!(
                    "; population matched: {} sessions in progress added ({} failed ones resumed), {} withdrawn, {} resumed after failing before the window",
                    m.added, m.replaced, m.withdrawn, m.repaired
                ),
                None => String::new(),
            };
            let in_progress = match (r.measured_failure_percent, r.population_percent) {
                (Some(_), Some(p)) => format!(
                    ", {} of {} in progress failed, {p:.0} % of the steady-state population in play{}",
                    r.in_progress_failed,
                    r.in_progress_sessions,
                    match (r.population_held, r.spec.gate_pct > 0.0) {
                        (Some(false), true) => " (NOT held: the share missing counts as failed)",
                        (Some(false), false) => " (short of it: recorded, not judged without the gate)",
                        _ => "",
                    }
                ),
                (Some(_), None) => format!(", {} of {} in progress failed", r.in_progress_failed, r.in_progress_sessions),
                _ => String::new(),
            };
            say.line(&format!(
                "    step {} at {:.2} sessions/s: {:.2} MB/s delivered, {} of {} measured sessions failed{in_progress}{settling}{matched}",
                r.index + 1,
                r.spec.rate,
                r.throughput_mb_s,
                r.sessions_failed,
                r.sessions_measured
            ))
        });
        let log = steady::SampleLog::default();
        let (mut channel, mut plan) = steady::channel(timing, log.clone(), Box::new(move || !running.load(Ordering::Relaxed)), report);
        let (driven, summary, sampled) = std::thread::scope(|scope| {
            let _stop_sampler = StopFlag(&stop);
            let sampler = scope.spawn(|| steady::sample(epoch, children, self.port, &dir.join("samples.csv"), &log, &stop));
            let load = scope.spawn(move || {
                let r = vidbench_load::play_steps(config, sessions, &mut plan, &mut |p| printer.line(&format!("    load {p}")));
                load_done.store(true, Ordering::Relaxed);
                r
            });
            let driven = drive(&mut channel);
            channel.finish();
            let summary = load.join();
            stop.store(true, Ordering::Relaxed);
            (driven, summary, sampler.join())
        });
        let summary = summary.map_err(|_| anyhow::anyhow!("the load client panicked"))?;
        // An interruption is reported as such; otherwise the load client's
        // own error is the cause of the driver's "the load client stopped".
        if let Err(e) = &driven {
            if e.downcast_ref::<Interrupted>().is_some() || summary.is_ok() {
                return Err(driven.err().expect("checked"));
            }
        }
        let summary = summary.context("the load client failed")?;
        let driven = driven?;
        sampled.map_err(|_| anyhow::anyhow!("the sampler panicked"))??;
        let samples = std::mem::take(&mut *log.lock().unwrap_or_else(|e| e.into_inner()));
        let records: Vec<StepRecord> = summary.steps.into_iter().map(|s| StepRecord::new(s, &samples)).collect();
        write_json(&dir.join("steps.json"), &records)?;
        Ok((driven, records))
    }

    /// A configuration whose probes are steps of one run (`run.steady.one_run`).
    fn run_stepped(&mut self, cfg: &Config, timing: SteadySection) -> anyhow::Result<ConfigSummary> {
        interrupt::check()?;
        let cdir = self.out.join("runs").join(&cfg.name);
        let dir = cdir.join("steps-rep0");
        let threshold_pct = cfg.rates.threshold_pct().unwrap_or(0.3);
        if parts::is_cut_keep(&dir) {
            let part = parts::finish_cut_keep(&cdir, &dir)?;
            self.progress.printer().line(&format!("{}: the interrupted run's finished steps are kept in {}", cfg.name, part.display()));
        }
        if dir.join(DONE).exists() {
            let search: Option<SearchResult> = match std::fs::read_to_string(cdir.join("search.json")) {
                Ok(text) => Some(serde_json::from_str(&text).with_context(|| format!("{} is not a search result", cdir.join("search.json").display()))?),
                Err(_) => None,
            };
            // A search its max_probes cut goes on if it may now probe more.
            let budget = match &cfg.rates {
                RatePlan::Bracket { bracket, .. } => Some(bracket.max_probes as usize),
                _ => None,
            };
            match (&search, budget) {
                (Some(s), Some(budget)) if !s.complete && budget > s.steps.len() => {
                    let part = parts::keep_cut_search(&cdir, &dir, s.steps.len())?;
                    self.progress.printer().line(&format!(
                        "{}: its search stopped at {} probes (max_probes) before confirming a rate; it goes on to at most {budget} after them (its steps kept in {})",
                        cfg.name,
                        s.steps.len(),
                        part.display()
                    ));
                }
                _ => {
                    self.progress.recalled_run();
                    let records: Vec<StepRecord> = serde_json::from_str(&std::fs::read_to_string(dir.join("steps.json"))?)
                        .with_context(|| format!("{} is not a list of steps", dir.join("steps.json").display()))?;
                    return match search {
                        Some(s) => Ok(ConfigSummary::from_search(cfg, threshold_pct, &s)),
                        None => Ok(ConfigSummary::from_points(cfg, threshold_pct, &steps_by_rate(&records)?)),
                    };
                }
            }
        }
        // A search keeps the finished steps of an interrupted run as a part
        // and goes on after them; a fixed schedule starts again.
        let searching = matches!(cfg.rates, RatePlan::Search { .. } | RatePlan::Bracket { .. });
        let identity = serde_json::to_value(cfg)?;
        let seed = self.exp.run.seed;
        if dir.exists() {
            let kept = match searching {
                true => parts::keep(&cdir, &dir, &identity, seed).with_context(|| {
                    format!("cannot keep the finished steps of {} (fix that, or remove it to start `{}` again)", dir.display(), cfg.name)
                })?,
                false => parts::Keep::NoStep,
            };
            let say = |what: String| self.progress.printer().line(&format!("{}: {what}", cfg.name));
            match kept {
                parts::Keep::Part(part) => say(format!("the interrupted run's finished steps are kept in {}", part.display())),
                parts::Keep::Changed => say("the interrupted run ran other settings than the experiment gives now: its steps are not kept".into()),
                parts::Keep::OlderVerdict => say("the interrupted run's steps were judged by an older verdict (the measured sessions alone): they are not kept".into()),
                parts::Keep::NoStep => {}
            }
            if dir.exists() {
                std::fs::remove_dir_all(&dir).with_context(|| format!("cannot remove the incomplete run {}", dir.display()))?;
            }
        }
        let parts::Kept { records: mut earlier, outcomes: recorded } =
            if searching { parts::recorded(&cdir, &identity, seed)? } else { Default::default() };
        let plan = cfg.rates.clone();
        let search = |prober: &mut dyn Prober| match &plan {
            RatePlan::Search { search, threshold_pct } => search::find_max_failure_free(search, *threshold_pct, prober),
            RatePlan::Bracket { bracket, threshold_pct } => search::bracket_max_failure_free(bracket, *threshold_pct, prober),
            _ => unreachable!("only searches replay steps"),
        };
        // Whether the parts alone finish the search (interrupted between its
        // last step and the end of the run).
        let remove_parts = || {
            let parts: Vec<String> = parts::parts(&cdir).iter().map(|p| p.display().to_string()).collect();
            format!("cannot resume the search of `{}` from its kept steps (remove {} to search from scratch)", cfg.name, parts.join(", "))
        };
        let finished_by_parts = match recorded.is_empty() {
            true => None,
            false => match search::Replay::replay_all(&recorded, search) {
                Ok(r) => Some(r),
                Err(e) if e.is::<search::ReplayExhausted>() => {
                    let next = e.downcast_ref::<search::ReplayExhausted>().map_or(0.0, |x| x.next_rate);
                    self.progress.printer().line(&format!(
                        "{}: the search goes on after the {} steps of its earlier parts, at {next:.2} sessions/s after a new ramp",
                        cfg.name,
                        recorded.len()
                    ));
                    None
                }
                Err(e) => return Err(e.context(remove_parts())),
            },
        };
        let fixed = match &cfg.rates {
            RatePlan::Fixed { rates, relative_to, .. } => self.fixed_rates(cfg, rates, relative_to.as_ref())?,
            _ => Vec::new(),
        };
        // An adaptive controller goes on from the size its last part ended at.
        let carried = match finished_by_parts {
            None if searching => parts::continued(&cdir, cfg),
            _ => None,
        };
        if let Some((_, size)) = &carried {
            self.progress.printer().line(&format!(
                "{}: its controller starts at {:.2} MiB, the size its earlier part ended at (docs/run.md, \"Resume\")",
                cfg.name,
                *size as f64 / (1u64 << 20) as f64
            ));
        }
        let run_cfg = carried.as_ref().map_or(cfg, |(c, _)| c);
        std::fs::create_dir_all(&dir)?;
        let what = format!("{}, every rate a step of one run", cfg.name);
        self.progress.start_run(&what);
        let started = Instant::now();
        let continues: Vec<String> = parts::parts(&cdir).iter().filter_map(|p| Some(p.file_name()?.to_str()?.to_string())).collect();
        write_json(
            &dir.join("run.json"),
            &json!({"experiment": self.exp.name, "config": cfg, "rate": null, "steps": true, "repetition": 0, "seed": self.exp.run.seed,
                    "started_unix_s": now_unix(), "continues": continues, "replayed_steps": recorded.len(), "fixed_rates": fixed,
                    "controller_start_bytes": carried.as_ref().map(|(_, size)| size)}),
        )?;
        let played = match finished_by_parts {
            Some(r) => write_json(&dir.join("steps.json"), &Vec::<StepRecord>::new()).map(|_| (Some(r), Vec::new())),
            None => self.serve(run_cfg, 0, &dir, json!("steps"), |d, children| {
                d.play_steady(children, timing, 0, &dir, |ch| match &plan {
                    RatePlan::Fixed { repetitions, .. } => {
                        for rate in &fixed {
                            for _ in 0..*repetitions {
                                ch.step(*rate)?;
                            }
                        }
                        Ok(None)
                    }
                    RatePlan::None { .. } => unreachable!("wc configurations have no rates"),
                    _ => search(&mut search::Replay::new(&recorded, Some(ch as &mut dyn Prober))).map(Some),
                })
            }),
        };
        let (search_result, records) = match played {
            Ok((r, records)) => {
                earlier.extend(records);
                (r, earlier)
            }
            Err(e) => {
                let _ = std::fs::write(dir.join("error.txt"), format!("{e:#}\n"));
                return Err(e.context(format!("run {} failed (its files are in {})", what, dir.display())));
            }
        };
        let summary = match &search_result {
            Some(r) => {
                write_json(&cdir.join("search.json"), r)?;
                ConfigSummary::from_search(cfg, threshold_pct, r)
            }
            None => ConfigSummary::from_points(cfg, threshold_pct, &steps_by_rate(&records)?),
        };
        let wall_s = started.elapsed().as_secs_f64();
        let outcome = Outcome { failure_pct: summary.failure_pct.unwrap_or(100.0), throughput_mbs: summary.throughput_mbs.unwrap_or(0.0) };
        write_json(&dir.join("result.json"), &RunResult { config: cfg.name.clone(), kind: cfg.kind, rate: summary.max_failure_free_rate, repetition: 0, outcome, wall_s })?;
        std::fs::write(dir.join(DONE), format!("{}\n", now_unix()))?;
        self.progress.finished_run(wall_s);
        Ok(summary)
    }

    fn run_wc(&mut self, cfg: &Config, rep: u32, dir: &Path) -> anyhow::Result<Outcome> {
        let sharing = self.drop_caches()?;
        let list = reader::wc_list(&self.sessions, self.exp.run.seed + rep as u64);
        let list_path = dir.join("wc-list.txt");
        vidbench_library::session_io::write_warm_list(&list_path, "wc upper bound: requested chunks, sequential per video, videos in random order", &list)?;
        let disk_opts = self.disk_options(cfg, dir);
        let mut disk = Disks::mount(&self.programs.vidbench, &self.drive_mounts(), &disk_opts, &dir.join("disk.log"))?;
        let cgroup = self.new_cgroup()?;
        let disk_before = disk.stats()?;
        write_json(&dir.join("disk-before.json"), &disk_before)?;
        let disk_setup = self.disk_setup(&disk_opts, &disk, &cgroup, &disk_before)?;
        let report = self.read_in_cgroup(&cgroup, &list_path, &dir.join("wc.json"), self.exp.run.duration_s)?;
        let disk_after = disk.stats()?;
        write_json(&dir.join("disk-after.json"), &disk_after)?;
        write_json(
            &dir.join("resources.json"),
            &json!({"reader_cpu_total_s": cgroup.cpu_seconds(Role::Reader), "memory_cgroup": cgroup.memory_stats()?, "cgroup": cgroup.describe()}),
        )?;
        drop(cgroup);
        write_json(
            &dir.join("setup.json"),
            &json!({
                "machine": self.machine,
                "experiment": {"name": self.exp.name, "source": self.exp.source},
                "config": cfg,
                "repetition": rep,
                "order_seed": self.exp.run.seed + rep as u64,
                "memory_limit_bytes": self.exp.memory_limit_bytes,
                "disk": disk_setup,
                "workload": self.workload,
                "sharing": self.sharing_record(sharing),
            }),
        )?;
        disk.unmount()?;
        Ok(Outcome { failure_pct: 0.0, throughput_mbs: report.mb_per_s })
    }
}

/// Why two image records (`OUT/image.json`, a run's stats) name different
/// images: the key, or where the library lies (builds of one key before
/// builder version 3 placed it differently). The placement digest decides
/// where both records have it (older ones do not); the extent figures always.
fn image_differs(a: &Value, b: &Value) -> Option<String> {
    if a["image_key_hash"] != b["image_key_hash"] {
        return Some(format!("image key {} versus {}", a["image_key_hash"], b["image_key_hash"]));
    }
    for k in ["data_first_byte", "data_end_byte", "extents", "placement"] {
        let (x, y) = (&a["image_figures"][k], &b["image_figures"][k]);
        if x != y && !(k == "placement" && (x.is_null() || y.is_null())) {
            return Some(format!("image_figures.{k} {x} versus {y}"));
        }
    }
    None
}

/// The queue settings of `vidbench disk stat --json` (sysfs strings) as
/// values: numbers, and the scheduler in use (the bracketed one).
fn effective_queue(raw: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for (k, v) in raw.as_object().into_iter().flatten() {
        let text = v.as_str().map(str::trim);
        let value = match (k.as_str(), text) {
            ("scheduler", Some(t)) => t.split_whitespace().find(|w| w.starts_with('[')).map(|w| json!(w.trim_matches(['[', ']']))).unwrap_or(json!(t)),
            (_, Some(t)) => t.parse::<u64>().map(|n| json!(n)).unwrap_or(json!(t)),
            _ => v.clone(),
        };
        out.insert(k.clone(), value);
    }
    Value::Object(out)
}

/// Checks that the device took what was asked (the mount refuses values it
/// cannot take, so a difference means the device was changed under us).
fn check_queue(opts: &DiskOptions, queue: &Value) -> anyhow::Result<()> {
    let b = opts.block.as_ref().expect("block mode");
    let mut want = vec![("read_ahead_kb", json!(opts.read_ahead_kb))];
    want.extend(b.scheduler.map(|s| ("scheduler", json!(s.name()))));
    // The largest request the device passes whole: its own cap, and the image
    // server's where the mount records it (1024 KiB under kernels before 6.13).
    let whole = queue["max_hw_sectors_kb"].as_u64().map(|hw| queue["image_max_request_kb"].as_u64().map_or(hw, |image| hw.min(image)));
    match b.max_sectors_kb {
        // Above that cap the device keeps the cap and the drive joins.
        Some(v) if whole.is_some_and(|whole| u64::from(v) > whole) => {
            want.push(("max_sectors_kb", json!(whole)));
            want.push(("drive_joins_kb", json!(v)));
        }
        Some(v) => want.push(("max_sectors_kb", json!(v))),
        None => {}
    }
    want.extend(b.nr_requests.map(|v| ("nr_requests", json!(v))));
    for (k, v) in want {
        if queue[k] != v && k == "drive_joins_kb" {
            bail!("max_sectors_kb {v} is above the loop device's cap but the mount's drive joins requests up to {} KiB, not {v} (a vidbench older than the experiment?)", queue[k]);
        }
        if queue[k] != v {
            bail!("the loop device has {k} = {}, not the configured {v} (queue/{k} was changed outside the run?)", queue[k]);
        }
    }
    Ok(())
}

/// How often a server's shim rewrites its statistics file in a run: a small
/// part of the sample interval, and one write of a few KB a second per
/// process.
const SHIM_STATS_INTERVAL_MS: u64 = 1000;

/// The server's environment under the shim in `mode`: only what the mode
/// reads (`ShimEnv`); track mode, and any mode with `shim_stats`, writes its
/// statistics into `dir/shim/`. The driver's own `LD_PRELOAD`, if any, is not
/// passed on.
fn shim_env(cfg: &Config, mode: Mode, programs: &Programs, daemon_socket: Option<&Path>, dir: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let mut shim = ShimEnv::new(&programs.shim, mode);
    shim.socket = daemon_socket.map(Path::to_owned);
    shim.prefetch = cfg.prefetch.as_ref().map(Prefetch::max_bytes);
    shim.patience_ms = cfg.patience_ms.map(u64::from);
    if mode == Mode::Track || cfg.shim_stats {
        // Workers run unprivileged: the stats directory must be theirs to write.
        let shim_dir = dir.join("shim");
        std::fs::create_dir_all(&shim_dir)?;
        std::fs::set_permissions(&shim_dir, std::os::unix::fs::PermissionsExt::from_mode(0o777))?;
        shim.stats = Some(shim_dir.join("stats-%p.json"));
        // Rewritten while running, so that the sampler can take a window's
        // figures from them (steady::sample, shim.jsonl).
        shim.stats_interval_ms = Some(SHIM_STATS_INTERVAL_MS);
    }
    Ok(shim.vars(None).into_iter().map(|(k, v)| (k.to_string(), v.to_string_lossy().into_owned())).collect())
}

/// The daemon's command line for setup.json (none when the mode has no daemon).
fn daemon_command(cfg: &Config, p: &Programs, dir: &Path, server_user: &str) -> Option<Vec<String>> {
    let prefetch = cfg.daemon_prefetch()?;
    let mut command = vec![p.libception.display().to_string()];
    command.extend(crate::daemon::daemon_args(&dir.join("daemon.sock"), &prefetch, server_user, DaemonOptions::of(cfg)));
    Some(command)
}

/// Several drives (`[disk] count`): every request and the warming list name
/// the drive that serves the file ([`disk::path_on_drive`]); the warming
/// list so divided is `OUT/warm-drives.txt`.
fn divide_between_drives(sessions: &mut [Session], workload: &mut WorkloadFiles, count: u32, seed: u64, out: &Path) -> anyhow::Result<()> {
    for r in sessions.iter_mut().flat_map(|s| s.requests.iter_mut()) {
        r.path = disk::path_on_drive(&r.path, count, seed);
    }
    if let Some(warm) = &workload.warm {
        let mut ranges = vidbench_library::session_io::read_warm_list(warm)?;
        for r in &mut ranges {
            r.path = disk::path_on_drive(&r.path, count, seed);
        }
        let divided = out.join("warm-drives.txt");
        let header = format!("{}, each file under the drive that serves it ({count} drives)", warm.display());
        vidbench_library::session_io::write_warm_list(&divided, &header, &ranges)?;
        workload.warm = Some(divided);
    }
    Ok(())
}

/// Keeps the requests of each session that start before `max_s` seconds of
/// paced time (unpaced requests count as starting at once).
pub fn truncate_sessions(sessions: &mut [Session], max_s: f64) {
    for s in sessions {
        let mut at = 0.0;
        let mut keep = 0;
        for r in &s.requests {
            at += r.pace_s.unwrap_or(0.0);
            if at >= max_s && keep > 0 {
                break;
            }
            keep += 1;
        }
        s.requests.truncate(keep);
    }
}

/// The outcomes of a stepped run grouped by rate, in the order first played.
fn steps_by_rate(records: &[StepRecord]) -> anyhow::Result<Vec<(f64, Vec<Outcome>)>> {
    let mut points: Vec<(f64, Vec<Outcome>)> = Vec::new();
    for r in records {
        let o = steady::outcome(&r.load)?;
        match points.iter_mut().find(|(rate, _)| (*rate - r.load.spec.rate).abs() < 1e-9) {
            Some((_, v)) => v.push(o),
            None => points.push((r.load.spec.rate, vec![o])),
        }
    }
    Ok(points)
}

struct ConfigProber<'a> {
    driver: &'a mut Driver,
    cfg: &'a Config,
}

impl Prober for ConfigProber<'_> {
    fn probe(&mut self, rate: f64, repetition: u32) -> anyhow::Result<Outcome> {
        self.driver.probe(self.cfg, Some(rate), repetition)
    }
}

/// Generates the workload into OUT/workload (or uses the given directory).
fn prepare_workload(exp: &Experiment, out: &Path, programs: &Programs) -> anyhow::Result<WorkloadFiles> {
    let dir = match &exp.workload {
        WorkloadSource::Dir(d) => d.clone(),
        WorkloadSource::Spec(spec) => {
            let dir = out.join("workload");
            if !dir.join("library.json").exists() || !dir.join("sessions.jsonl").exists() {
                if dir.exists() {
                    std::fs::remove_dir_all(&dir)?;
                }
                tracing::info!("generating the workload from {} into {}", spec.display(), dir.display());
                let status = Command::new(&programs.vidbench)
                    .args(["workload", "gen"])
                    .arg(spec)
                    .arg("--out")
                    .arg(&dir)
                    .status()
                    .context("cannot run vidbench workload gen")?;
                if !status.success() {
                    bail!("vidbench workload gen {} failed ({status})", spec.display());
                }
            }
            dir
        }
    };
    let library = dir.join("library.json");
    let sessions = dir.join("sessions.jsonl");
    for f in [&library, &sessions] {
        if !f.is_file() {
            bail!("the workload directory {} has no {}", dir.display(), f.file_name().unwrap().to_string_lossy());
        }
    }
    let warm = Some(dir.join("warm.txt")).filter(|w| w.is_file());
    Ok(WorkloadFiles { dir, library, sessions, warm })
}

/// Removes what a killed driver may have left: stale cgroups and a mount under OUT/mnt.
pub fn cleanup_leftovers(out: &Path) {
    for name in cgroup::cleanup_stale() {
        tracing::warn!("removed the stale cgroup {name} of a driver that is gone");
    }
    // A live experiment's mounts are not leftovers: a second driver on its
    // directory leaves them alone (and `Driver::new` refuses it).
    if let Some(pid) = std::fs::canonicalize(out).ok().and_then(|o| sharing::writer_of(&o)) {
        tracing::warn!("{} is in use by experiment pid {pid}: its mounts are left alone", out.display());
        return;
    }
    let mnt = out.join("mnt");
    let drives = (0..crate::experiment::MAX_DISKS).map(|k| mnt.join(format!("d{k}")));
    for m in std::iter::once(mnt.clone()).chain(drives).filter(|m| disk::is_mounted(m)) {
        tracing::warn!("releasing the stale disk mounted at {}", m.display());
        let vidbench = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("vidbench"));
        disk::release_stale(&vidbench, &m);
    }
}

/// Whether results started as `old` (their experiment.json) may be continued
/// as `new`: the testbed (`disk`, `run`, memory, workload) must be the same,
/// and so must every configuration with a finished run under `out`; a
/// configuration without one may change, go, or be added (an experiment in
/// progress gains a configuration without its finished ones running again).
#[cfg(test)]
mod tests {
    use super::*;

    fn experiment() -> Experiment {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("nginx.conf"), "").unwrap();
        let text = r#"
name = "t"
templates = "."
[workload]
dir = "w"
[disk]
preset = "wd-red-1tb"
[memory]
limit_mb = 256
[run]
duration_s = 10
[rates]
fixed = [1]
[[config]]
name = "lib"
server = "nginx"
libception = "full"
prefetch_kb = [2048, "adaptive"]
[[config]]
name = "ser"
server = "nginx"
libception = "serialize"
[[config]]
name = "vanilla"
server = "nginx"
[[config]]
name = "inproc"
server = "nginx"
libception = "prefetch"
prefetch_kb = 512
[[config]]
name = "track"
server = "nginx"
libception = "track"
"#;
        Experiment::from_str(text, &dir.path().join("e.toml")).unwrap()
    }

    fn configs() -> Vec<Config> {
        experiment().configs
    }

    #[test]
    fn an_experiment_whose_memory_limit_the_machine_cannot_give_is_refused() {
        let exp = experiment(); // 256 MiB
        check_memory(&exp, "MemTotal:        2097152 kB\nMemFree: 1 kB\n").unwrap();
        let err = check_memory(&exp, "MemFree: 1 kB\nMemTotal:  1048576 kB\n").unwrap_err().to_string();
        assert!(err.contains("256 MiB") && err.contains("this machine has 1024 MiB") && err.contains("at least 1280 MiB"), "{err}");
        assert!(check_memory(&exp, "MemFree: 1 kB\n").unwrap_err().to_string().contains("MemTotal"));
    }

    #[test]
    fn the_device_queue_is_recorded_as_values_and_checked() {
        let raw = json!({"scheduler": "none [mq-deadline] kyber bfq", "read_ahead_kb": "2048", "max_sectors_kb": "1280", "nr_requests": "256", "rotational": "1"});
        let q = effective_queue(&raw);
        assert_eq!(q, json!({"scheduler": "mq-deadline", "read_ahead_kb": 2048, "max_sectors_kb": 1280, "nr_requests": 256, "rotational": 1}));
        let mut opts = DiskOptions {
            library: "l".into(),
            preset: "p".into(),
            read_ahead_kb: 2048,
            max_request_kb: None,
            block: Some(BlockOptions { scheduler: Some(crate::experiment::Scheduler::MqDeadline), max_sectors_kb: Some(1280), ..Default::default() }),
            trace: None,
            extra_args: vec![],
        };
        check_queue(&opts, &q).unwrap();
        opts.block.as_mut().unwrap().nr_requests = Some(64);
        let err = check_queue(&opts, &q).unwrap_err().to_string();
        assert!(err.contains("nr_requests = 256") && err.contains("64"), "{err}");
        opts.block.as_mut().unwrap().nr_requests = None;
        opts.read_ahead_kb = 128;
        assert!(check_queue(&opts, &q).is_err());
    }

    /// Block-mode disk options with this readahead and max_sectors_kb.
    fn block_disk(read_ahead_kb: u32, max_sectors_kb: u32) -> DiskOptions {
        DiskOptions {
            library: "l".into(),
            preset: "p".into(),
            read_ahead_kb,
            max_request_kb: None,
            block: Some(BlockOptions { max_sectors_kb: Some(max_sectors_kb), ..Default::default() }),
            trace: None,
            extra_args: vec![],
        }
    }

    #[test]
    fn max_sectors_above_the_loop_cap_is_checked_as_the_drive_joining() {
        let raw = json!({"scheduler": "[mq-deadline] none", "read_ahead_kb": "2048", "max_sectors_kb": "1280", "max_hw_sectors_kb": "1280", "drive_joins_kb": 16384});
        let opts = block_disk(2048, 16384);
        check_queue(&opts, &effective_queue(&raw)).unwrap();
        let mut no_join = raw.clone();
        no_join["drive_joins_kb"] = Value::Null;
        let err = check_queue(&opts, &effective_queue(&no_join)).unwrap_err().to_string();
        assert!(err.contains("joins requests up to null KiB, not 16384"), "{err}");
        let mut wrong_cap = raw;
        wrong_cap["max_sectors_kb"] = json!("512");
        assert!(check_queue(&opts, &effective_queue(&wrong_cap)).unwrap_err().to_string().contains("max_sectors_kb = 512"));
    }

    #[test]
    fn the_shim_is_found_in_a_build_and_in_an_installed_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path();
        assert_eq!(default_shim(prefix), prefix.join("libdeception.so"), "neither: the build's path, which the run's check names");
        std::fs::create_dir_all(prefix.join("lib")).unwrap();
        std::fs::write(prefix.join("lib/libdeception.so"), "").unwrap();
        assert_eq!(default_shim(prefix), prefix.join("lib/libdeception.so"));
        std::fs::write(prefix.join("libdeception.so"), "").unwrap();
        assert_eq!(default_shim(prefix), prefix.join("libdeception.so"), "a build directory comes first");
    }

    #[test]
    fn under_a_1024_kib_fuse_cap_the_device_takes_that_cap_and_the_drive_joins() {
        // Kernels before 6.13: the image server takes 1024 KiB, so the kernel's
        // default of 1280 KiB, asked for, is joined by the drive.
        let raw = json!({"scheduler": "[mq-deadline] none", "read_ahead_kb": "128", "max_sectors_kb": "1024", "max_hw_sectors_kb": "1280", "image_max_request_kb": 1024, "drive_joins_kb": 1280});
        let mut opts = block_disk(128, 1280);
        check_queue(&opts, &effective_queue(&raw)).unwrap();
        opts.block.as_mut().unwrap().max_sectors_kb = Some(512);
        let err = check_queue(&opts, &effective_queue(&raw)).unwrap_err().to_string();
        assert!(err.contains("max_sectors_kb = 1024, not the configured 512"), "{err}");
        // Where the device takes 1280 KiB whole, 1280 is not joined.
        let mut whole = raw.clone();
        whole["image_max_request_kb"] = json!(1280);
        opts.block.as_mut().unwrap().max_sectors_kb = Some(1280);
        assert!(check_queue(&opts, &effective_queue(&whole)).unwrap_err().to_string().contains("max_sectors_kb = 1024, not the configured 1280"));
    }

    #[test]
    fn a_run_on_another_image_or_placement_is_told_apart() {
        let image = json!({"image_key_hash": "ab", "image_figures": {"data_first_byte": 1, "data_end_byte": 9, "extents": 4}, "built_now": true});
        let same = json!({"image_key_hash": "ab", "image_figures": {"data_first_byte": 1, "data_end_byte": 9, "extents": 4, "build_seconds": 3.0}});
        assert_eq!(image_differs(&image, &same), None);
        let moved = json!({"image_key_hash": "ab", "image_figures": {"data_first_byte": 5, "data_end_byte": 13, "extents": 4}});
        assert!(image_differs(&image, &moved).unwrap().contains("data_first_byte"));
        let other = json!({"image_key_hash": "cd", "image_figures": image["image_figures"]});
        assert!(image_differs(&image, &other).unwrap().contains("image key"));
        // Same extent figures, files elsewhere: the placement digest tells.
        let mut digested = same.clone();
        digested["image_figures"]["placement"] = json!("00aa");
        assert_eq!(image_differs(&image, &digested), None, "a record without the digest is judged by the figures");
        let mut shuffled = digested.clone();
        shuffled["image_figures"]["placement"] = json!("00bb");
        assert!(image_differs(&digested, &shuffled).unwrap().contains("placement"));
        assert_eq!(image_differs(&digested, &digested.clone()), None);
    }

    #[test]
    fn the_daemon_gets_the_configured_prefetch() {
        let programs = Programs { vidbench: "vb".into(), libception: "/bin/libception".into(), shim: "s.so".into(), build: "/b".into() };
        let dir = Path::new("/r");
        let command = |name: &str| {
            let cfg = configs().into_iter().find(|c| c.name == name).unwrap();
            daemon_command(&cfg, &programs, dir, "www-data")
        };
        let tail = |name: &str| command(name).unwrap()[8..].join(" ");
        assert_eq!(
            command("lib-p2048").unwrap()[..8].join(" "),
            "/bin/libception daemon --socket /r/daemon.sock --allow-fs fuse --trust-uid www-data",
            "the server's user may learn residency (its shim asks about files it does not own)"
        );
        assert_eq!(tail("lib-p2048"), "--prefetch 2097152");
        assert_eq!(tail("lib-padaptive"), "--prefetch adaptive");
        assert_eq!(tail("ser"), "--prefetch 0");
        assert_eq!(command("vanilla"), None);
        assert_eq!(command("inproc"), None);
    }

    #[test]
    fn the_server_gets_only_the_shim_settings_its_mode_reads() {
        let programs = Programs { vidbench: "vb".into(), libception: "/bin/libception".into(), shim: "/b/libdeception.so".into(), build: "/b".into() };
        let dir = tempfile::tempdir().unwrap();
        let env = |name: &str| {
            let cfg = configs().into_iter().find(|c| c.name == name).unwrap();
            let socket = dir.path().join("daemon.sock");
            let socket = cfg.daemon_prefetch().map(|_| socket.as_path());
            let vars = shim_env(&cfg, cfg.libception.unwrap(), &programs, socket, dir.path()).unwrap();
            vars.into_iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ").replace(&dir.path().display().to_string(), "RUN")
        };
        assert_eq!(env("lib-p2048"), "LD_PRELOAD=/b/libdeception.so LIBCEPTION_MODE=full LIBCEPTION_SOCKET=RUN/daemon.sock");
        assert_eq!(env("ser"), "LD_PRELOAD=/b/libdeception.so LIBCEPTION_MODE=serialize LIBCEPTION_SOCKET=RUN/daemon.sock");
        assert_eq!(env("inproc"), "LD_PRELOAD=/b/libdeception.so LIBCEPTION_MODE=prefetch LIBCEPTION_PREFETCH=524288");
        assert_eq!(env("track"), "LD_PRELOAD=/b/libdeception.so LIBCEPTION_MODE=track LIBCEPTION_STATS=RUN/shim/stats-%p.json LIBCEPTION_STATS_INTERVAL_MS=1000");
        assert!(dir.path().join("shim").is_dir());
        // shim_stats: full mode writes them too.
        let mut cfg = configs().into_iter().find(|c| c.name == "lib-p2048").unwrap();
        cfg.shim_stats = true;
        let vars = shim_env(&cfg, Mode::Full, &programs, Some(&dir.path().join("daemon.sock")), dir.path()).unwrap();
        assert!(vars.iter().any(|(k, v)| k == "LIBCEPTION_STATS" && v.ends_with("shim/stats-%p.json")), "{vars:?}");
        // patience_ms reaches the shim.
        cfg.patience_ms = Some(0);
        let vars = shim_env(&cfg, Mode::Full, &programs, Some(&dir.path().join("daemon.sock")), dir.path()).unwrap();
        assert!(vars.iter().any(|(k, v)| k == "LIBCEPTION_PATIENCE_MS" && v == "0"), "{vars:?}");
    }

}
