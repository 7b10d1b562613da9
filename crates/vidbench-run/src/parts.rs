//! The finished steps of an interrupted stepped search, kept as parts.
//!
//! A configuration searched by steps of one run (`run.steady.one_run`) spends
//! most of an hour in one run directory, `steps-rep0`. When that run is
//! interrupted (Ctrl-C, the end of a working session) or fails, the steps it
//! finished are complete measurements: each window opened on a settled system
//! and was judged on its own. On `--resume` the directory becomes a part,
//! `steps-partNN` (NN from 01, oldest first), its `steps.json` rebuilt from
//! the load client's `load/steps.json` and `samples.csv` as the driver would
//! have written it, and the search replays the parts' outcomes
//! ([`crate::search::Replay`]) and goes on in a new `steps-rep0` whose first
//! step ramps afresh, as a separate run at that rate does (steps and separate
//! runs were shown to agree: `docs/results/steps-vs-runs-2026-11-25`).
//!
//! An adaptive prefetch controller's state is part of what a step of one run
//! measures: each step finds it where the steps before left it. So the new
//! run of a searched adaptive configuration (without a start size of its
//! own) starts its controller at the size the latest part's controller last
//! decided on ([`continued`]), not from the disk probe: from the probed
//! 1.5 MiB under the 6.63/s a search had reached, a restart lost 1,688
//! sessions in its ramp and its window measured the restart
//! (docs/results/paper001-sd-4g-2026-11-28). Only the size carries over;
//! the controller measures its scores afresh.
//!
//! Fixed schedules are time series (how long the system has run is part of
//! what they measure, and a controller's state with it), so they restart from
//! scratch instead; only searches keep parts.

use crate::driver::{now_unix, RunResult, DONE};
use crate::experiment::{Config, Prefetch, RunKind};
use crate::controller_log::LastTarget;
use libception_proto::AdaptiveParams;
use crate::search::Outcome;
use crate::steady::{self, Sample, StepRecord};
use anyhow::Context;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use vidbench_load::StepResult;

/// Part directories are named this, then two digits.
const PART_PREFIX: &str = "steps-part";

/// Written into a part beside `DONE`: where it came from.
pub const PART_FILE: &str = "part.json";

/// Every `steps-partNN` directory of a configuration, complete or not, with
/// its number.
fn numbered(config_dir: &Path) -> Vec<(u32, PathBuf)> {
    std::fs::read_dir(config_dir)
        .map(|d| d.flatten().filter_map(|e| Some((e.file_name().to_str()?.strip_prefix(PART_PREFIX)?.parse().ok()?, e.path()))).collect())
        .unwrap_or_default()
}

/// The parts of a configuration (complete ones only), oldest first.
pub fn parts(config_dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = numbered(config_dir).into_iter().filter(|(_, p)| p.join(DONE).exists()).collect();
    found.sort();
    found.into_iter().map(|(_, p)| p).collect()
}

/// The steps the interrupted `run` finished, in order, with the disk's and
/// the memory's figures over each window; stops at the first step without a
/// measured session (the search could not have taken it). Empty when the
/// load client finished none. Also the time of the last sample taken.
fn finished_steps(run: &Path) -> anyhow::Result<(Vec<StepRecord>, Option<f64>)> {
    let path = run.join("load/steps.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), None)),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let steps: Vec<StepResult> = serde_json::from_str(&text).with_context(|| format!("{} is not a list of steps", path.display()))?;
    // The sampler flushes every row; a row cut by a crash ends the list.
    let samples: Vec<Sample> = match csv::Reader::from_path(run.join("samples.csv")) {
        Ok(mut r) => r.deserialize().map_while(Result::ok).collect(),
        Err(_) => Vec::new(),
    };
    let records = steps.into_iter().take_while(|s| s.failure_percent.is_some()).map(|s| StepRecord::new(s, &samples)).collect();
    Ok((records, samples.last().map(|s| s.t_s)))
}

/// The configuration the next run of a searched configuration runs: for an
/// adaptive controller without a start size of its own, `cfg` with the start
/// at the size the latest part's `controller.csv` last decided on, and that
/// size. `None` when nothing carries over: another prefetch, a start given,
/// no part with a logged decision, or a latest one whose controllers were
/// several (one per disk worker: no single size). A `controller.csv` that
/// cannot be read carries nothing either (the warning names it): it does not
/// touch the steps the search replays, so it must not stop the resume.
pub fn continued(config_dir: &Path, cfg: &Config) -> Option<(Config, u64)> {
    let Some(Prefetch::Adaptive(params)) = &cfg.prefetch else { return None };
    if params.start.is_some() {
        return None;
    }
    for part in parts(config_dir).iter().rev() {
        let path = part.join("controller.csv");
        match crate::controller_log::last_target(&path) {
            Ok(LastTarget::Nothing) => continue,
            Ok(LastTarget::Size(size)) => {
                let mut next = cfg.clone();
                next.prefetch = Some(Prefetch::Adaptive(AdaptiveParams { start: Some(size), ..params.clone() }));
                return Some((next, size));
            }
            Ok(LastTarget::SeveralWorkers) => return None,
            Err(e) => {
                tracing::warn!("{e:#}; the controller starts from the disk probe");
                return None;
            }
        }
    }
    None
}

/// What became of an interrupted stepped run.
#[derive(Debug, PartialEq)]
pub enum Keep {
    /// Its finished steps are the configuration's part in this directory.
    Part(PathBuf),
    /// It finished no step: nothing to keep.
    NoStep,
    /// It ran other settings of the configuration (or another seed) than
    /// the experiment now gives: its steps cannot stand for this one.
    Changed,
    /// Its steps were judged by the load client's verdict before build
    /// a144130 (the measured sessions' share alone, no
    /// `measured_failure_percent`): replayed beside today's verdicts they
    /// would mix two rules.
    OlderVerdict,
}

/// Whether two configurations (as experiment.json records them) run the
/// same settings: equal but for a bracketing search's `max_probes`, which
/// bounds how long the search may go on and changes no measurement (raising
/// it continues a search its budget cut).
pub fn same_settings(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(bracket) = v.pointer_mut("/rates/bracket").and_then(Value::as_object_mut) {
            bracket.remove("max_probes");
        }
        v
    };
    strip(a) == strip(b)
}

/// The configuration and seed a run recorded in its `run.json`.
fn identity(run: &Path) -> anyhow::Result<(Value, Value)> {
    let path = run.join("run.json");
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let v: Value = serde_json::from_str(&text).with_context(|| format!("{} is not valid JSON", path.display()))?;
    Ok((v.get("config").cloned().unwrap_or(Value::Null), v.get("seed").cloned().unwrap_or(Value::Null)))
}

/// The number the next part takes: one above every `steps-partNN` there is,
/// complete or not, so that no name is reused.
fn next_part(config_dir: &Path) -> u32 {
    numbered(config_dir).into_iter().map(|(n, _)| n).max().unwrap_or(0) + 1
}

/// Turns the interrupted stepped run `run` into the configuration's next
/// part when it finished a step under the settings the experiment gives now
/// (`config`, the configuration as experiment.json records it, and `seed`).
/// The part is complete like any run: `steps.json`, `result.json` (the last
/// step's outcome; `wall_s` the load's time until its last sample) and
/// `setup.json` (written when the load started) beside the run's raw files,
/// `part.json`, then `DONE`, and only then the rename: a run directory
/// holding `part.json` is a part whose rename was cut, which
/// [`finish_cut_keep`] completes. An error leaves `run` as it was.
pub fn keep(config_dir: &Path, run: &Path, config: &Value, seed: u64) -> anyhow::Result<Keep> {
    let (records, last_sample_s) = finished_steps(run)?;
    let Some(last) = records.last() else { return Ok(Keep::NoStep) };
    let (ran, ran_seed) = identity(run)?;
    if !same_settings(&ran, config) || ran_seed != json!(seed) {
        return Ok(Keep::Changed);
    }
    if records.iter().any(|r| r.load.measured_failure_percent.is_none()) {
        return Ok(Keep::OlderVerdict);
    }
    let write = |name: &str, text: String| std::fs::write(run.join(name), text).with_context(|| format!("cannot write {}", run.join(name).display()));
    write("steps.json", serde_json::to_string_pretty(&records)? + "\n")?;
    let last_sample_s = last_sample_s.unwrap_or(last.load.window_s.1);
    let name = config.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
    let kind: RunKind = config
        .get("kind")
        .cloned()
        .map(serde_json::from_value)
        .transpose()
        .with_context(|| format!("{}: the configuration's kind is not one vidbench knows", run.join("run.json").display()))?
        .unwrap_or_default();
    let outcome = steady::outcome(&last.load)?;
    let result = RunResult { config: name, kind, rate: None, repetition: 0, outcome, wall_s: last_sample_s };
    write("result.json", serde_json::to_string_pretty(&result)? + "\n")?;
    write(
        PART_FILE,
        serde_json::to_string_pretty(&json!({
            "kept_from": run.file_name().and_then(|n| n.to_str()),
            "steps": records.len(),
            "interrupted_after_s": last_sample_s,
            "kept_unix_s": now_unix(),
            "why": "an interrupted stepped search; its finished steps stand, and the search went on after them in a new run",
        }))? + "\n",
    )?;
    write(DONE, format!("{}\n", now_unix()))?;
    finish_cut_keep(config_dir, run).map(Keep::Part)
}

/// Whether `run` is a part whose rename to `steps-partNN` did not happen
/// (the driver was killed between [`keep`]'s `DONE` and its rename).
pub fn is_cut_keep(run: &Path) -> bool {
    run.join(PART_FILE).exists() && run.join(DONE).exists()
}

/// Turns the finished run `run` of a search that its `max_probes` cut into
/// the configuration's next part, so that a search given more probes goes on
/// after its steps (`run` is complete: it only gains `part.json`).
pub fn keep_cut_search(config_dir: &Path, run: &Path, probes: usize) -> anyhow::Result<PathBuf> {
    let path = run.join(PART_FILE);
    let why = json!({
        "kept_from": run.file_name().and_then(|n| n.to_str()),
        "probes": probes,
        "kept_unix_s": now_unix(),
        "why": "a search its max_probes cut before it confirmed a rate; max_probes was raised and the search went on after these steps in a new run",
    });
    std::fs::write(&path, serde_json::to_string_pretty(&why)? + "\n").with_context(|| format!("cannot write {}", path.display()))?;
    finish_cut_keep(config_dir, run)
}

/// Renames the kept run `run` to the configuration's next part.
pub fn finish_cut_keep(config_dir: &Path, run: &Path) -> anyhow::Result<PathBuf> {
    let part = config_dir.join(format!("{PART_PREFIX}{:02}", next_part(config_dir)));
    std::fs::rename(run, &part).with_context(|| format!("cannot rename {} to {}", run.display(), part.display()))?;
    Ok(part)
}

/// The kept steps of every part of a configuration, oldest first.
#[derive(Debug, Default)]
pub struct Kept {
    pub records: Vec<StepRecord>,
    /// (rate, outcome) of each, as a resumed search replays them.
    pub outcomes: Vec<(f64, Outcome)>,
}

/// The kept steps of every part of the configuration, each part checked to
/// have run `config` with `seed` (a part of other settings is an error
/// naming it: the resume's own checks refuse to change a configuration with
/// a finished run, so only an edited results directory gets here).
pub fn recorded(config_dir: &Path, config: &Value, seed: u64) -> anyhow::Result<Kept> {
    let mut records = Vec::new();
    for part in parts(config_dir) {
        let (ran, ran_seed) = identity(&part)?;
        if !same_settings(&ran, config) || ran_seed != json!(seed) {
            anyhow::bail!("{} ran other settings of `{}` than the experiment gives now: remove it", part.display(), config.get("name").and_then(Value::as_str).unwrap_or("?"));
        }
        let path = part.join("steps.json");
        let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let steps: Vec<StepRecord> = serde_json::from_str(&text).with_context(|| format!("{} is not a list of steps", path.display()))?;
        if steps.iter().any(|r| r.load.measured_failure_percent.is_none()) {
            anyhow::bail!("{} holds steps judged by an older verdict (no measured_failure_percent): remove it", part.display());
        }
        records.extend(steps);
    }
    let outcomes = records.iter().map(|r| Ok((r.load.spec.rate, steady::outcome(&r.load)?))).collect::<anyhow::Result<_>>()?;
    Ok(Kept { records, outcomes })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(index: u32, rate: f64, window: (f64, f64), failure: Option<f64>) -> Value {
        json!({
            "index": index,
            "spec": {"rate": rate, "settle_s": 10.0, "measure_s": window.1 - window.0, "hold_s": 5.0, "gate_pct": 0.0, "max_settle_s": 0.0, "join_s": 0.0},
            "start_s": window.0 - 10.0,
            "window_s": [window.0, window.1],
            "end_s": window.1 + 5.0,
            "sessions_started": 30,
            "sessions_measured": 20,
            "sessions_failed": 0,
            "failed_by_cause": {},
            "failure_percent": failure,
            "measured_failure_percent": failure,
            "throughput_mb_s": 10.0 * rate,
            "received_mb_s": null,
            "samples_mb_s": [null, null],
            "samples": 0,
            "active_sessions": null,
            "settled_s": 10.0,
        })
    }

    fn config() -> Value {
        json!({"name": "srv", "kind": "server", "server": "nginx"})
    }

    /// An interrupted run directory of `config()` with seed 1: two finished
    /// steps (`failures` their failure %) and the samples of 60 s, the disk
    /// reading 1 MB a second, the last row cut by the interruption.
    fn interrupted(dir: &Path, failures: [Option<f64>; 2]) {
        std::fs::create_dir_all(dir.join("load")).unwrap();
        std::fs::write(dir.join("run.json"), json!({"config": config(), "seed": 1, "steps": true}).to_string()).unwrap();
        let steps = json!([step(0, 2.0, (10.0, 20.0), failures[0]), step(1, 2.4, (30.0, 40.0), failures[1])]);
        std::fs::write(dir.join("load/steps.json"), steps.to_string()).unwrap();
        let mut w = csv::Writer::from_path(dir.join("samples.csv")).unwrap();
        for k in 0..=60 {
            let t = k as f64;
            w.serialize(Sample { t_s: t, disk_bytes: Some(t * 1e6), ..Sample::default() }).unwrap();
        }
        w.flush().unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(dir.join("samples.csv")).unwrap();
        std::io::Write::write_all(&mut f, b"61.0,6").unwrap();
    }

    /// Configuration `a` of an experiment in `dir`: nginx under Libception
    /// with `prefetch` (and `adaptive`, when given) as its keys.
    fn libception_config(dir: &Path, keys: &str) -> Config {
        std::fs::create_dir_all(dir.join("servers")).unwrap();
        std::fs::write(dir.join("servers/nginx.conf"), "listen {{port}};\n").unwrap();
        let text = format!(
            "name = \"t\"\ntemplates = \"servers\"\n[workload]\nspec = \"small.toml\"\n[disk]\npreset = \"wd-red-1tb\"\n[memory]\nlimit_mb = 256\n\
             [run]\nduration_s = 60\n[rates]\nfixed = [10]\n[[config]]\nname = \"a\"\nserver = \"nginx\"\nlibception = \"full\"\n{keys}\n"
        );
        crate::experiment::Experiment::from_str(&text, &dir.join("e.toml")).unwrap().config("a").unwrap().clone()
    }

    fn finished_part(cdir: &Path, n: u32, controller: Option<&str>) {
        let part = cdir.join(format!("{PART_PREFIX}{n:02}"));
        std::fs::create_dir_all(&part).unwrap();
        std::fs::write(part.join(DONE), "1\n").unwrap();
        if let Some(rows) = controller {
            std::fs::write(part.join("controller.csv"), format!("t_s,worker,index,prefetch_bytes,next_bytes\n{rows}")).unwrap();
        }
    }

    #[test]
    fn an_adaptive_controller_goes_on_from_the_size_its_last_part_ended_at() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = libception_config(tmp.path(), "prefetch_kb = \"adaptive\"");
        let cdir = tmp.path().join("runs/a");
        std::fs::create_dir_all(&cdir).unwrap();
        assert!(continued(&cdir, &cfg).is_none(), "no part yet");
        finished_part(&cdir, 1, Some("60,0,1,1572864,2097152\n120,0,2,2097152,3670016\n"));
        // A later part that closed no interval: the one before it counts.
        finished_part(&cdir, 2, None);
        let (next, size) = continued(&cdir, &cfg).unwrap();
        assert_eq!(size, 3670016);
        let Some(Prefetch::Adaptive(p)) = &next.prefetch else { panic!("{:?}", next.prefetch) };
        let Some(Prefetch::Adaptive(was)) = &cfg.prefetch else { panic!() };
        assert_eq!(p, &AdaptiveParams { start: Some(3670016), ..was.clone() });
        assert_eq!(next.name, cfg.name);
        finished_part(&cdir, 3, Some("60,0,1,3670016,3145728\n"));
        assert_eq!(continued(&cdir, &cfg).unwrap().1, 3145728, "the latest part");
        // An unfinished part (no DONE) is not read.
        std::fs::create_dir_all(cdir.join("steps-part04")).unwrap();
        std::fs::write(cdir.join("steps-part04/controller.csv"), "t_s,worker,index,prefetch_bytes,next_bytes\n60,0,1,1,524288\n").unwrap();
        assert_eq!(continued(&cdir, &cfg).unwrap().1, 3145728);
        // A latest part of two workers' controllers stops the search for a
        // size; a damaged file gives none (and no error: the resume goes on).
        finished_part(&cdir, 5, Some("60,0,1,3670016,2097152\n61,1,1,3670016,4194304\n"));
        assert!(continued(&cdir, &cfg).is_none());
        finished_part(&cdir, 6, Some("60,0,1,3670016,many\n"));
        assert!(continued(&cdir, &cfg).is_none());
        // A start of its own, or a fixed size: nothing carries over.
        let started = libception_config(tmp.path(), "prefetch_kb = \"adaptive\"\nadaptive = { start_kb = 8192 }");
        assert!(continued(&cdir, &started).is_none());
        let fixed = libception_config(tmp.path(), "prefetch_kb = 4096");
        assert!(continued(&cdir, &fixed).is_none());
    }

    #[test]
    fn settings_are_the_same_whatever_the_probe_budget() {
        let with = |probes: u32, start: f64| json!({"name": "srv", "rates": {"plan": "bracket", "bracket": {"start": start, "max_probes": probes}, "threshold_pct": 0.3}});
        assert!(same_settings(&with(14, 4.7), &with(20, 4.7)));
        assert!(!same_settings(&with(14, 4.7), &with(14, 5.0)));
        assert!(same_settings(&config(), &config()));
        assert!(!same_settings(&config(), &json!({"name": "srv", "kind": "server", "server": "apache"})));
    }

    #[test]
    fn a_cut_search_becomes_the_next_part() {
        let tmp = tempfile::tempdir().unwrap();
        let cdir = tmp.path().join("runs/srv");
        std::fs::create_dir_all(cdir.join("steps-part01")).unwrap();
        let run = cdir.join("steps-rep0");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(run.join(DONE), "1\n").unwrap();
        let part = keep_cut_search(&cdir, &run, 14).unwrap();
        assert_eq!(part, cdir.join("steps-part02"));
        assert!(!run.exists() && part.join(DONE).exists());
        let why: Value = serde_json::from_str(&std::fs::read_to_string(part.join(PART_FILE)).unwrap()).unwrap();
        assert_eq!((why["probes"].as_u64(), why["kept_from"].as_str()), (Some(14), Some("steps-rep0")));
    }

    #[test]
    fn an_interrupted_search_keeps_its_finished_steps_as_numbered_parts() {
        let tmp = tempfile::tempdir().unwrap();
        let cdir = tmp.path();
        let run = cdir.join("steps-rep0");
        interrupted(&run, [Some(0.0), Some(1.5)]);
        let part = cdir.join("steps-part01");
        assert_eq!(keep(cdir, &run, &config(), 1).unwrap(), Keep::Part(part.clone()));
        assert!(!run.exists() && part.join(DONE).exists() && part.join(PART_FILE).exists());
        let Kept { records, outcomes } = recorded(cdir, &config(), 1).unwrap();
        assert_eq!(outcomes, vec![(2.0, Outcome { failure_pct: 0.0, throughput_mbs: 20.0 }), (2.4, Outcome { failure_pct: 1.5, throughput_mbs: 24.0 })]);
        // The disk's figures over each window, as the driver computes them.
        let disk = records[1].disk.expect("disk window");
        assert!((disk.mb_s - 1.0).abs() < 1e-9, "{disk:?}");
        assert_eq!(records[1].disk_bytes_per_delivered_byte, Some(1.0 / 24.0));
        let result: RunResult = serde_json::from_str(&std::fs::read_to_string(part.join("result.json")).unwrap()).unwrap();
        assert_eq!((result.config.as_str(), result.rate, result.outcome.failure_pct, result.wall_s), ("srv", None, 1.5, 60.0));

        // A second interruption becomes the second part; both replay in order.
        interrupted(&run, [Some(0.1), Some(0.2)]);
        assert_eq!(keep(cdir, &run, &config(), 1).unwrap(), Keep::Part(cdir.join("steps-part02")));
        let outcomes = recorded(cdir, &config(), 1).unwrap().outcomes;
        assert_eq!(outcomes.iter().map(|o| o.1.failure_pct).collect::<Vec<_>>(), vec![0.0, 1.5, 0.1, 0.2]);
        // Another seed or other settings cannot replay them.
        let err = recorded(cdir, &config(), 2).unwrap_err();
        assert!(err.to_string().contains("steps-part01") && err.to_string().contains("remove it"), "{err}");
    }

    #[test]
    fn a_keep_cut_before_its_rename_is_completed_and_no_name_is_reused() {
        let tmp = tempfile::tempdir().unwrap();
        let cdir = tmp.path();
        // A directory in the way of part 01 (left by hand, incomplete).
        std::fs::create_dir_all(cdir.join("steps-part01")).unwrap();
        let run = cdir.join("steps-rep0");
        interrupted(&run, [Some(0.0), Some(0.0)]);
        // Everything of a keep but the rename.
        std::fs::write(run.join(PART_FILE), "{}").unwrap();
        std::fs::write(run.join("steps.json"), "[]").unwrap();
        std::fs::write(run.join(DONE), "").unwrap();
        assert!(is_cut_keep(&run));
        assert_eq!(finish_cut_keep(cdir, &run).unwrap(), cdir.join("steps-part02"));
        assert_eq!(parts(cdir), vec![cdir.join("steps-part02")], "only complete parts count");
        // A finished run is not a cut keep.
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(run.join(DONE), "").unwrap();
        assert!(!is_cut_keep(&run));
    }

    #[test]
    fn a_run_without_a_finished_step_or_of_other_settings_or_verdict_is_not_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let run = tmp.path().join("steps-rep0");
        std::fs::create_dir_all(run.join("load")).unwrap();
        // Interrupted during its ramp: the load client wrote no steps.
        assert_eq!(keep(tmp.path(), &run, &config(), 1).unwrap(), Keep::NoStep);
        // A first step without a measured session ends the list there.
        interrupted(&run, [None, Some(0.0)]);
        assert_eq!(keep(tmp.path(), &run, &config(), 1).unwrap(), Keep::NoStep);
        // Steps of other settings, or of another seed, do not stand for these.
        interrupted(&run, [Some(0.0), Some(0.0)]);
        let edited = json!({"name": "srv", "kind": "server", "server": "nginx", "prefetch_kb": 4096});
        assert_eq!(keep(tmp.path(), &run, &edited, 1).unwrap(), Keep::Changed);
        assert_eq!(keep(tmp.path(), &run, &config(), 2).unwrap(), Keep::Changed);
        // Steps judged by the older verdict (the measured share alone) neither.
        let steps = std::fs::read_to_string(run.join("load/steps.json")).unwrap().replace("\"measured_failure_percent\":0.0,", "");
        std::fs::write(run.join("load/steps.json"), steps).unwrap();
        assert_eq!(keep(tmp.path(), &run, &config(), 1).unwrap(), Keep::OlderVerdict);
        assert!(parts(tmp.path()).is_empty() && run.exists());
        // A corrupt list is an error naming the file, and the run stays.
        std::fs::write(run.join("load/steps.json"), "[{\"index\": 0,").unwrap();
        let err = keep(tmp.path(), &run, &config(), 1).unwrap_err();
        assert!(format!("{err:#}").contains("load/steps.json"), "{err:#}");
        assert!(run.join("load/steps.json").exists());
    }
}
