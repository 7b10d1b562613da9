//! Experiment files: what `vidbench run EXPERIMENT.toml` reads, checked and
//! expanded into the configurations the driver runs.
//!
//! An experiment names a workload (a spec to generate, or a generated
//! directory), the emulated disk, the memory limit of the server's cgroup, how
//! each run is played, which rates to offer (a fixed list, or a search for the
//! maximum failure-free rate) and a list of configurations (`[[config]]`): a
//! server kind with a template from `bench/servers/`, Libception or not, disk
//! overrides and template knobs, or the `wc` disk upper bound.
//!
//! Parsing is two steps. [`schema`]: serde with `deny_unknown_fields` catches
//! syntax, types and unknown keys; the toml crate's error names the line and
//! column. [`expand`]: checks what types cannot (ranges, exclusive keys,
//! duplicate names) and names the key path, e.g. `config[2] ("nginx-lib").prefetch_kb`;
//! list-valued `prefetch_kb` / `read_ahead_kb` expand one `[[config]]` into a
//! sweep of configurations named `<name>-p<kb>` / `<name>-ra<kb>`.
//!
//! This module holds the result, [`Experiment`] and its [`Config`]s, which the
//! driver records in every results directory (`experiment.json`, each run's
//! `run.json` and `setup.json`); their JSON keys are the ones every recorded
//! result has, so old results still resume and report.

mod expand;
mod schema;

pub use libception_proto::{Mode, Prefetch};
use libception_proto::AdaptiveParams;
pub use schema::{DiskMode, DiskSection, ExperimentFile, FillOrder, FsKind, FsSize, PathsSection, RunKind, RunSection, Scheduler, SearchSection, ServerKind, SteadySection, SAMPLE_INTERVAL_S};
pub use schema::{BracketSection, ChaosSection, ReclaimPolicy};
pub use expand::MAX_DISKS;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use vidbench_library::toml_extends::ExtendsError;
use std::path::{Path, PathBuf};

/// A checked experiment with every path resolved and sweeps expanded.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Experiment {
    pub name: String,
    pub description: String,
    /// The file it was read from.
    pub source: PathBuf,
    /// The experiment file to record beside the results: the file as
    /// written, or, when it `extends` another, the merged table
    /// (`vidbench_library::toml_extends`). Not part of `experiment.json`, whose resolved keys are
    /// what a resume compares.
    #[serde(skip)]
    pub file_text: String,
    pub templates: PathBuf,
    pub workload: WorkloadSource,
    pub disk: DiskSection,
    pub memory_limit_bytes: u64,
    pub run: RunSection,
    pub paths: PathsSection,
    pub configs: Vec<Config>,
    /// The file's configurations `--only` left out ([`Experiment::keep_only`]),
    /// in file order: a resume with another `--only` keeps those already
    /// finished in the results' `experiment.json`.
    #[serde(skip)]
    pub omitted: Vec<Config>,
    /// Every configuration's name in file order (set by `keep_only`).
    #[serde(skip)]
    file_order: Vec<String>,
}

/// Where the workload comes from, with an absolute path.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadSource {
    Spec(PathBuf),
    Dir(PathBuf),
}

/// The rate plan of one configuration.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "plan", rename_all = "lowercase")]
pub enum RatePlan {
    /// These rates, each `repetitions` times; with `relative_to`, `rates`
    /// are fractions of that configuration's maximum failure-free rate.
    Fixed {
        rates: Vec<f64>,
        repetitions: u32,
        threshold_pct: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        relative_to: Option<RelativeTo>,
    },
    Search { search: SearchSection, threshold_pct: f64 },
    Bracket { bracket: BracketSection, threshold_pct: f64 },
    /// The `wc` bound has no rate: one run per repetition.
    None { repetitions: u32 },
}

/// Where the maximum failure-free rate comes from that a fixed plan's
/// fractions multiply: the search of configuration `config`, in this
/// experiment's results (it runs earlier in the file) or, with `results`, in
/// that results directory (a committed record, say).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RelativeTo {
    pub config: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<PathBuf>,
}

impl RelativeTo {
    /// The search's answer it names, from `OUT/runs/CONFIG/search.json` of
    /// `results`, or of `own` (this experiment's results directory).
    pub fn max_rate(&self, own: &Path) -> anyhow::Result<f64> {
        let file = self.results.as_deref().unwrap_or(own).join("runs").join(&self.config).join("search.json");
        let text = std::fs::read_to_string(&file).map_err(|e| {
            anyhow::anyhow!("rates relative to `{}` need its maximum failure-free rate, from {}: {e} (its search has not finished there)", self.config, file.display())
        })?;
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{} is not valid JSON: {e}", file.display()))?;
        if v.get("complete") == Some(&serde_json::Value::Bool(false)) {
            tracing::warn!(
                "`{}`'s search stopped at its max_probes before confirming a rate ({}): its answer is the best rate passing so far; raise max_probes and --resume it for a confirmed one",
                self.config,
                file.display()
            );
        }
        match v.get("max_rate") {
            Some(serde_json::Value::Number(n)) => n.as_f64().filter(|r| *r > 0.0).ok_or_else(|| anyhow::anyhow!("{}: max_rate {n} is not a positive rate", file.display())),
            Some(serde_json::Value::Null) => anyhow::bail!("`{}` has no failure-free rate ({}): there is nothing to take fractions of", self.config, file.display()),
            _ => anyhow::bail!("{} has no max_rate: not a search's answer", file.display()),
        }
    }
}

impl RatePlan {
    /// The failure threshold of a plan with rates.
    pub fn threshold_pct(&self) -> Option<f64> {
        match self {
            RatePlan::Fixed { threshold_pct, .. } | RatePlan::Search { threshold_pct, .. } | RatePlan::Bracket { threshold_pct, .. } => {
                Some(*threshold_pct)
            }
            RatePlan::None { .. } => None,
        }
    }
}

/// One configuration after expansion.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Config {
    pub name: String,
    /// The `[[config]]` name it was expanded from.
    pub base: String,
    /// Human label for reports.
    pub label: String,
    pub kind: RunKind,
    pub server: Option<ServerKind>,
    pub template: Option<PathBuf>,
    pub binary: Option<PathBuf>,
    pub libception: Option<Mode>,
    /// How far Libception reads ahead (modes full and prefetch; `None` in the
    /// others). Recorded as the keys `prefetch_kb` and `prefetch_adaptive`.
    #[serde(flatten, with = "recorded_prefetch")]
    pub prefetch: Option<Prefetch>,
    pub read_ahead_kb: u32,
    /// FUSE mode's largest request (`None` in block mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_request_kb: Option<u32>,
    /// Block mode's queue settings (`None` in FUSE mode, or the disk's
    /// default); what the device took is read back into each run's setup.json.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<Scheduler>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sectors_kb: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nr_requests: Option<u32>,
    pub knobs: BTreeMap<String, String>,
    pub rates: RatePlan,
    pub trace: bool,
    /// Daemon kills during the load (`chaos = {...}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chaos: Option<ChaosSection>,
    /// One daemon worker per drive (`--per-disk`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub per_disk: bool,
    /// Prefetched pages promoted to the active LRU list (`--promote`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub promote: bool,
    /// Promoted only once the daemon sees prefetched bytes evicted before
    /// use (`--promote auto`; `promote` is false then).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub promote_auto: bool,
    /// Queued reads taken in disk order (`--queue-order position`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub queue_by_position: bool,
    /// Waiters answered once their own range is read (`--reply range`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reply_by_range: bool,
    /// A fixed size scaled for slower streams (`--prefetch-scale`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefetch_scale: Option<libception_proto::BitrateScale>,
    /// The shim's statistics in any mode (`shim_stats`; track mode always).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shim_stats: bool,
    /// The shim's `LIBCEPTION_PATIENCE_MS` (`patience_ms`; absent: its default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patience_ms: Option<u32>,
    /// Its own minimum ramp (`ramp_s`), replacing `run.steady.ramp_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp_s: Option<f64>,
    /// Its own Apache threads per child (`threads_per_worker`), replacing
    /// `run.threads_per_worker`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads_per_worker: Option<u32>,
    /// Its own server worker processes (`workers`), replacing `run.workers`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<u32>,
}

impl Config {
    /// The steady protocol's timings for this configuration: the
    /// experiment's, with its own ramp when it has one.
    pub fn steady(&self, experiment: Option<SteadySection>) -> Option<SteadySection> {
        experiment.map(|st| SteadySection { ramp_s: self.ramp_s.unwrap_or(st.ramp_s), ..st })
    }

    /// What the daemon is told, when the mode has one: the configured prefetch
    /// (full), or none beyond the requested range (serialize).
    pub fn daemon_prefetch(&self) -> Option<Prefetch> {
        match self.libception? {
            Mode::Serialize => Some(Prefetch::Fixed(0)),
            Mode::Full => Some(self.prefetch.clone().expect("checked: mode full has a prefetch size")),
            Mode::Prefetch | Mode::Track | Mode::Off => None,
        }
    }
}

/// [`Config::prefetch`] as results have always recorded it: `prefetch_kb`
/// (the fixed size in KiB, `null` otherwise) and `prefetch_adaptive` (written
/// only when true, as results from before adaptive prefetching lack it), plus
/// `prefetch_adaptive_params` when the controller's parameters differ from
/// paper 001's ([`AdaptiveParams::paper`], not the daemon's default: records
/// from before the default settled one interval name no parameters for
/// paper 001's).
mod recorded_prefetch {
    use super::{AdaptiveParams, Prefetch};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    struct Keys {
        #[serde(default)]
        prefetch_kb: Option<u32>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        prefetch_adaptive: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prefetch_adaptive_params: Option<AdaptiveParams>,
    }

    pub fn serialize<S: Serializer>(prefetch: &Option<Prefetch>, s: S) -> Result<S::Ok, S::Error> {
        let keys = match prefetch {
            None => Keys { prefetch_kb: None, prefetch_adaptive: false, prefetch_adaptive_params: None },
            Some(Prefetch::Fixed(bytes)) => {
                Keys { prefetch_kb: Some((bytes / 1024) as u32), prefetch_adaptive: false, prefetch_adaptive_params: None }
            }
            Some(Prefetch::Adaptive(p)) => Keys {
                prefetch_kb: None,
                prefetch_adaptive: true,
                prefetch_adaptive_params: (*p != AdaptiveParams::paper()).then(|| p.clone()),
            },
        };
        keys.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Prefetch>, D::Error> {
        let keys = Keys::deserialize(d)?;
        Ok(match (keys.prefetch_adaptive, keys.prefetch_kb) {
            (true, _) => Some(Prefetch::Adaptive(keys.prefetch_adaptive_params.unwrap_or_else(AdaptiveParams::paper))),
            (false, Some(kb)) => Some(Prefetch::Fixed(u64::from(kb) * 1024)),
            (false, None) => None,
        })
    }
}

/// An experiment file that cannot be used; the message names the file and the key or line.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    #[error("cannot read experiment file {path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
    /// A file that `extends` names cannot be read.
    #[error("experiment file: {0}")]
    Extends(ExtendsError),
    #[error("experiment file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("experiment file {path}: {key}: {message}")]
    Invalid { path: PathBuf, key: String, message: String },
}

impl Experiment {
    /// Apache's threads per child for configuration `c`: its own count, else the run's.
    pub fn apache_threads(&self, c: &Config) -> u32 {
        c.threads_per_worker.unwrap_or(self.run.threads_per_worker)
    }

    /// Server worker processes for configuration `c`: its own count, else the run's.
    pub fn workers(&self, c: &Config) -> u32 {
        c.workers.unwrap_or(self.run.workers)
    }

    /// Reads, parses and checks an experiment file.
    pub fn from_file(path: &Path) -> Result<Experiment, ExperimentError> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| ExperimentError::Io { path: path.to_owned(), error })?;
        Self::from_str(&text, path)
    }

    /// Parses and checks experiment text; `path` names it in errors and anchors relative paths.
    pub fn from_str(text: &str, path: &Path) -> Result<Experiment, ExperimentError> {
        let resolved = vidbench_library::toml_extends::resolve(text, path).map_err(|e| match e {
            e @ ExtendsError::Io { .. } => ExperimentError::Extends(e),
            ExtendsError::Parse { path, message } => ExperimentError::Parse { path, message },
        })?;
        let file: ExperimentFile = resolved.deserialize(text).map_err(|message| ExperimentError::Parse { path: path.to_owned(), message })?;
        let base = path
            .parent()
            .map(|p| if p.as_os_str().is_empty() { Path::new(".") } else { p })
            .unwrap_or(Path::new("."));
        let base = std::fs::canonicalize(base).unwrap_or_else(|_| base.to_owned());
        let mut exp = expand::expand(file, path, &base)?;
        exp.file_text = resolved.record_text(text);
        Ok(exp)
    }

    /// Fixes the disk mode before anything runs: `auto` becomes block mode
    /// when `support` (the disk's check for the experiment's filesystem)
    /// passes and FUSE mode otherwise; `block` needs it to pass. The other
    /// mode's keys are then dropped, so `experiment.json` and every run record
    /// only what was used. In FUSE mode a `max_sectors_kb` (kernel tuning's
    /// large requests) becomes the FUSE request cap, `max_request_kb`, bounded
    /// by `fuse_cap_kb` (what this kernel lets FUSE requests grow to), so a
    /// fallback keeps what a configuration tunes. Returns the reason for
    /// falling back to FUSE mode.
    pub fn resolve_disk_mode(&mut self, support: impl FnOnce(FsKind) -> anyhow::Result<()>, fuse_cap_kb: u32) -> anyhow::Result<Option<String>> {
        let fs = self.disk.fs.unwrap_or_default();
        let (mode, fallback) = match self.disk.mode {
            DiskMode::Fuse => (DiskMode::Fuse, None),
            DiskMode::Block => {
                support(fs).map_err(|e| anyhow::anyhow!("experiment {:?} asks for [disk] mode = \"block\", but {e:#} (or set mode = \"auto\" to fall back to FUSE mode)", self.name))?;
                (DiskMode::Block, None)
            }
            DiskMode::Auto => match support(fs) {
                Ok(()) => (DiskMode::Block, None),
                Err(e) => (DiskMode::Fuse, Some(format!("{e:#}"))),
            },
        };
        self.disk.mode = mode;
        match mode {
            DiskMode::Block => {
                self.disk.max_request_kb = None;
                for c in self.configs.iter_mut().chain(self.omitted.iter_mut()) {
                    c.max_request_kb = None;
                }
            }
            _ => {
                let d = &mut self.disk;
                // FUSE requests are whole pages, at least one.
                let as_request = |sectors: Option<u32>| sectors.map(|kb| (kb.min(fuse_cap_kb) / 4 * 4).max(4));
                let kb = *d.max_request_kb.get_or_insert(as_request(d.max_sectors_kb).unwrap_or(expand::DEFAULT_MAX_REQUEST_KB));
                (d.fs, d.fs_size, d.fs_slack_pct, d.fill_order, d.fill_seed, d.image_cache) = (None, None, None, None, None, None);
                (d.scheduler, d.max_sectors_kb, d.nr_requests) = (None, None, None);
                for c in self.configs.iter_mut().chain(self.omitted.iter_mut()) {
                    c.max_request_kb.get_or_insert(as_request(c.max_sectors_kb).unwrap_or(kb));
                    (c.scheduler, c.max_sectors_kb, c.nr_requests) = (None, None, None);
                }
            }
        }
        Ok(fallback)
    }

    /// What a results directory's `experiment.json` records: the experiment,
    /// whose configurations are those run now and, of those `--only` left
    /// out, the ones with finished runs there (`finished`), in file order. So
    /// a directory filled by runs with different `--only` lists describes
    /// every configuration it holds, and a resume checks their settings.
    pub fn recorded(&self, finished: impl Fn(&str) -> bool) -> serde_json::Value {
        let mut v = serde_json::to_value(self).expect("an experiment serializes");
        let done: Vec<&Config> = self.omitted.iter().filter(|c| finished(&c.name)).collect();
        if !done.is_empty() {
            let all = self.configs.iter().chain(done);
            let position = |c: &&Config| self.file_order.iter().position(|n| *n == c.name);
            let mut configs: Vec<&Config> = all.collect();
            configs.sort_by_key(position);
            v["configs"] = serde_json::to_value(configs).expect("configurations serialize");
        }
        v
    }

    /// The configuration named `name`.
    pub fn config(&self, name: &str) -> Option<&Config> {
        self.configs.iter().find(|c| c.name == name)
    }

    /// Keeps the configurations named in `names` (a configuration's name, or the
    /// `[[config]]` name it was expanded from), in file order. Every name must
    /// match something.
    pub fn keep_only(&mut self, names: &[String]) -> anyhow::Result<()> {
        for n in names {
            if !self.configs.iter().any(|c| &c.name == n || &c.base == n) {
                let known: Vec<&str> = self.configs.iter().map(|c| c.name.as_str()).collect();
                anyhow::bail!("no configuration {n:?} in experiment {:?} (it has: {})", self.name, known.join(", "));
            }
        }
        if self.file_order.is_empty() {
            self.file_order = self.configs.iter().map(|c| c.name.clone()).collect();
        }
        let kept = |c: &Config| names.iter().any(|n| n == &c.name || n == &c.base);
        let (keep, omit): (Vec<Config>, Vec<Config>) = std::mem::take(&mut self.configs).into_iter().partition(|c| kept(c));
        self.configs = keep;
        self.omitted.extend(omit);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("servers")).unwrap();
        std::fs::write(dir.path().join("servers/nginx.conf"), "listen {{port}};\n").unwrap();
        dir
    }

    const GOOD: &str = r#"
name = "t"
templates = "servers"
[workload]
spec = "small.toml"
[disk]
preset = "wd-red-1tb"
[memory]
limit_mb = 256
[run]
duration_s = 60
[rates]
fixed = [10, 20]
[[config]]
name = "vanilla"
server = "nginx"
[[config]]
name = "lib"
server = "nginx"
libception = "full"
prefetch_kb = [1024, 2048]
[[config]]
name = "wc"
kind = "wc"
"#;

    /// Each experiment text is refused with an error that mentions its string.
    fn assert_refused<'a>(cases: impl IntoIterator<Item = (String, &'a str)>) {
        for (text, want) in cases {
            let err = parse(&text).unwrap_err().to_string();
            assert!(err.contains(want), "{err:?} should mention {want:?}");
        }
    }

    fn parse(text: &str) -> Result<Experiment, ExperimentError> {
        let dir = write_dir();
        let path = dir.path().join("e.toml");
        std::fs::write(&path, text).unwrap();
        Experiment::from_file(&path)
    }

    #[test]
    fn a_knob_the_template_does_not_declare_is_refused_before_any_run() {
        let dir = write_dir();
        std::fs::write(dir.path().join("servers/nginx.conf"), "# knob: aio = off\nlisten {{port}};\naio {{aio}};\n").unwrap();
        let path = dir.path().join("e.toml");
        let with_knobs = |knobs: &str| GOOD.replace("name = \"vanilla\"\nserver = \"nginx\"", &format!("name = \"vanilla\"\nserver = \"nginx\"\nknobs = {knobs}"));
        std::fs::write(&path, with_knobs("{ aio = \"threads\" }")).unwrap();
        Experiment::from_file(&path).unwrap();
        std::fs::write(&path, with_knobs("{ aoi = \"threads\" }")).unwrap();
        let err = Experiment::from_file(&path).unwrap_err().to_string();
        assert!(err.contains("config[0] (\"vanilla\").knobs") && err.contains("\"aoi\" is not declared") && err.contains("aio"), "{err}");
        // A placeholder the driver does not fill is found as early.
        std::fs::write(dir.path().join("servers/nginx.conf"), "listen {{prot}};\n").unwrap();
        std::fs::write(&path, GOOD).unwrap();
        let err = Experiment::from_file(&path).unwrap_err().to_string();
        assert!(err.contains("config[0] (\"vanilla\").template") && err.contains("{{prot}}") && err.contains("nginx.conf"), "{err}");
    }

    #[test]
    fn a_missing_template_names_the_templates_directory() {
        let dir = write_dir();
        let path = dir.path().join("e.toml");
        std::fs::write(&path, GOOD.replace("templates = \"servers\"\n", "")).unwrap();
        let err = Experiment::from_file(&path).unwrap_err().to_string();
        assert!(err.contains("config[0] (\"vanilla\").template") && err.contains("top-level `templates`"), "{err}");
    }

    #[test]
    fn a_file_extending_another_runs_the_merged_keys_and_records_them() {
        let dir = write_dir();
        std::fs::write(dir.path().join("base.toml"), GOOD).unwrap();
        let path = dir.path().join("small-memory.toml");
        std::fs::write(&path, "extends = \"base.toml\"\nname = \"t-2g\"\n[memory]\nlimit_mb = 2048\n").unwrap();
        let e = Experiment::from_file(&path).unwrap();
        assert_eq!((e.name.as_str(), e.memory_limit_bytes), ("t-2g", 2048 << 20));
        let base = Experiment::from_file(&dir.path().join("base.toml")).unwrap();
        assert_eq!((e.workload.clone(), e.configs.len()), (base.workload.clone(), base.configs.len()));
        assert_eq!(base.file_text, GOOD, "a file that extends nothing is recorded as written");
        // The recorded text is the merged file: it parses alone to the same experiment.
        let recorded = dir.path().join("recorded.toml");
        std::fs::write(&recorded, &e.file_text).unwrap();
        let again = Experiment::from_file(&recorded).unwrap();
        assert_eq!(serde_json::to_value(&again).unwrap()["configs"], serde_json::to_value(&e).unwrap()["configs"]);
        assert_eq!(again.memory_limit_bytes, e.memory_limit_bytes);
        // A type error in a merged file names the key and the base.
        std::fs::write(&path, "extends = \"base.toml\"\nname = \"t-2g\"\n[memory]\nlimit_mb = \"lots\"\n").unwrap();
        let err = Experiment::from_file(&path).unwrap_err().to_string();
        assert!(err.contains("small-memory.toml") && err.contains("limit_mb") && err.contains("base.toml"), "{err}");
    }

    #[test]
    fn a_good_file_expands_sweeps_and_resolves_paths() {
        let e = parse(GOOD).unwrap();
        let names: Vec<_> = e.configs.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["vanilla", "lib-p1024", "lib-p2048", "wc"]);
        assert_eq!(e.config("lib-p2048").unwrap().prefetch, Some(Prefetch::Fixed(2048 << 10)));
        assert_eq!(e.config("lib-p2048").unwrap().base, "lib");
        assert!(matches!(&e.workload, WorkloadSource::Spec(p) if p.ends_with("small.toml") && p.is_absolute()));
        assert_eq!(e.memory_limit_bytes, 256 << 20);
        assert!(matches!(e.config("wc").unwrap().rates, RatePlan::None { repetitions: 1 }));
        assert!(matches!(&e.config("vanilla").unwrap().rates, RatePlan::Fixed { rates, .. } if rates == &[10.0, 20.0]));
    }

    #[test]
    fn adaptive_prefetch_joins_a_sweep_and_needs_the_daemon() {
        let e = parse(&GOOD.replace("prefetch_kb = [1024, 2048]", "prefetch_kb = [2048, \"adaptive\"]")).unwrap();
        let adaptive = e.config("lib-padaptive").unwrap();
        assert_eq!(adaptive.prefetch, Some(Prefetch::Adaptive(AdaptiveParams::default())));
        assert_eq!(e.config("lib-p2048").unwrap().prefetch, Some(Prefetch::Fixed(2048 << 10)));
        let err = parse(&GOOD.replace("libception = \"full\"\nprefetch_kb = [1024, 2048]", "libception = \"prefetch\"\nprefetch_kb = \"adaptive\"")).unwrap_err().to_string();
        assert!(err.contains("config[1] (\"lib\").prefetch_kb") && err.contains("mode full"), "{err}");
        let err = parse(&GOOD.replace("prefetch_kb = [1024, 2048]", "prefetch_kb = \"big\"")).unwrap_err().to_string();
        assert!(err.contains("big") && err.contains("line 21"), "{err}");
    }

    #[test]
    fn chaos_needs_a_daemon_and_a_period_longer_than_the_restart() {
        let lib = "libception = \"full\"\nprefetch_kb = [1024, 2048]";
        let e = parse(&GOOD.replace(lib, &format!("{lib}\nchaos = {{ kill_every_s = 5 }}"))).unwrap();
        let chaos = e.config("lib-p2048").unwrap().chaos.unwrap();
        assert_eq!((chaos.kill_every_s, chaos.restart_after_s), (5.0, 1.0));
        assert_eq!(e.config("vanilla").unwrap().chaos, None);
        let err = parse(&GOOD.replace(lib, &format!("{lib}\nchaos = {{ kill_every_s = 1, restart_after_s = 2 }}"))).unwrap_err().to_string();
        assert!(err.contains("config[1] (\"lib\").chaos.kill_every_s") && err.contains("longer than restart_after_s"), "{err}");
        let err = parse(&GOOD.replace(lib, "libception = \"prefetch\"\nprefetch_kb = 2048\nchaos = { kill_every_s = 5 }")).unwrap_err().to_string();
        assert!(err.contains("chaos") && err.contains("needs the daemon"), "{err}");
        let err = parse(&GOOD.replace(lib, &format!("{lib}\nchaos = {{ kill_every = 5 }}"))).unwrap_err().to_string();
        assert!(err.contains("kill_every"), "{err}");
    }

    #[test]
    fn per_disk_promote_and_queue_order_need_a_daemon_and_shim_stats_a_shim() {
        let lib = "libception = \"full\"\nprefetch_kb = [1024, 2048]";
        let e = parse(&GOOD.replace(lib, &format!("{lib}\nper_disk = true\npromote = true\nqueue_by_position = true\nreply_by_range = true\nshim_stats = true"))).unwrap();
        let c = e.config("lib-p2048").unwrap();
        assert!(c.per_disk && c.promote && c.queue_by_position && c.reply_by_range && c.shim_stats);
        let args = crate::daemon::daemon_args(std::path::Path::new("/s"), &libception_proto::Prefetch::Fixed(1 << 21), "www-data", crate::daemon::DaemonOptions::of(c));
        assert!(args.windows(2).any(|w| w == ["--queue-order", "position"]) && args.iter().any(|a| a == "--promote"), "{args:?}");
        assert!(args.windows(2).any(|w| w == ["--reply", "range"]), "{args:?}");
        let v = e.config("vanilla").unwrap();
        assert!(!v.per_disk && !v.promote && !v.queue_by_position && !v.reply_by_range && !v.shim_stats);
        let json = serde_json::to_value(v).unwrap();
        for key in ["per_disk", "promote", "queue_by_position", "reply_by_range", "shim_stats"] {
            assert!(json.get(key).is_none(), "{key} unset, not recorded (resumed results compare configs): {json}");
        }
        for key in ["per_disk", "promote", "queue_by_position", "reply_by_range"] {
            let err = parse(&GOOD.replace(lib, &format!("libception = \"prefetch\"\nprefetch_kb = 2048\n{key} = true"))).unwrap_err().to_string();
            assert!(err.contains(key) && err.contains("needs the daemon"), "{err}");
        }
        let err = parse(&GOOD.replace(lib, "libception = \"off\"\nshim_stats = true")).unwrap_err().to_string();
        assert!(err.contains("shim_stats") && err.contains("needs the shim"), "{err}");
    }

    #[test]
    fn threads_per_worker_is_apaches_and_recorded_only_when_set() {
        let apache = "[[config]]\nname = \"apache\"\nserver = \"apache\"\ntemplate = \"nginx.conf\"\nthreads_per_worker = 256\n";
        let e = parse(&format!("{GOOD}\n{apache}")).unwrap();
        assert_eq!(e.config("apache").unwrap().threads_per_worker, Some(256));
        let json = serde_json::to_value(e.config("vanilla").unwrap()).unwrap();
        assert!(json.get("threads_per_worker").is_none(), "unset, not recorded (resumed results compare configs): {json}");
        let err = parse(&format!("{GOOD}\n{}", apache.replace("256", "0"))).unwrap_err().to_string();
        assert!(err.contains("threads_per_worker") && err.contains("between 1 and 4096"), "{err}");
        let err = parse(&format!("{GOOD}\n{}", apache.replace("server = \"apache\"", "server = \"nginx\""))).unwrap_err().to_string();
        assert!(err.contains("config[") && err.contains("threads_per_worker") && err.contains("Apache only"), "{err}");
    }

    #[test]
    fn a_configuration_may_have_its_own_worker_count() {
        let own = "[[config]]\nname = \"lighttpd\"\nserver = \"lighttpd\"\ntemplate = \"nginx.conf\"\nworkers = 16\n";
        let e = parse(&format!("{GOOD}\n{own}")).unwrap();
        assert_eq!(e.workers(e.config("lighttpd").unwrap()), 16);
        assert_eq!(e.workers(e.config("vanilla").unwrap()), e.run.workers, "the others keep run.workers");
        let json = serde_json::to_value(e.config("vanilla").unwrap()).unwrap();
        assert!(json.get("workers").is_none(), "unset, not recorded (resumed results compare configs): {json}");
        assert_eq!(serde_json::to_value(e.config("lighttpd").unwrap()).unwrap()["workers"], 16);
        for bad in ["0", "1025"] {
            let err = parse(&format!("{GOOD}\n{}", own.replace("= 16", &format!("= {bad}")))).unwrap_err().to_string();
            assert!(err.contains("config[") && err.contains("workers") && err.contains("between 1 and 1024"), "{bad}: {err}");
        }
        let err = parse(&GOOD.replace("kind = \"wc\"", "kind = \"wc\"\nworkers = 16")).unwrap_err().to_string();
        assert!(err.contains("workers") && err.contains("server configurations only"), "{err}");
        let err = parse(&GOOD.replace("duration_s = 60", "duration_s = 60\nworkers = 0")).unwrap_err().to_string();
        assert!(err.contains("run.workers") && err.contains("between 1 and 1024"), "{err}");
    }

    #[test]
    fn promote_auto_is_its_own_setting() {
        let lib = "libception = \"full\"\nprefetch_kb = [1024, 2048]";
        let e = parse(&GOOD.replace(lib, &format!("{lib}\npromote = \"auto\""))).unwrap();
        let c = e.config("lib-p2048").unwrap();
        assert!(c.promote_auto && !c.promote);
        let args = crate::daemon::daemon_args(std::path::Path::new("/s"), &libception_proto::Prefetch::Fixed(1 << 21), "www-data", crate::daemon::DaemonOptions::of(c));
        assert!(args.windows(2).any(|w| w == ["--promote", "auto"]), "{args:?}");
        // Configurations without it record nothing new (resumes compare them).
        let e = parse(&GOOD.replace(lib, &format!("{lib}\npromote = false"))).unwrap();
        let json = serde_json::to_value(e.config("lib-p2048").unwrap()).unwrap();
        assert!(json.get("promote").is_none() && json.get("promote_auto").is_none(), "{json}");
        for bad in ["\"sometimes\"", "3"] {
            let err = parse(&GOOD.replace(lib, &format!("{lib}\npromote = {bad}"))).unwrap_err().to_string();
            assert!(err.contains("promote") && err.contains("expected true, false or \"auto\""), "{bad}: {err}");
        }
        let err = parse(&GOOD.replace(lib, "libception = \"prefetch\"\nprefetch_kb = 2048\npromote = \"auto\"")).unwrap_err().to_string();
        assert!(err.contains("promote") && err.contains("needs the daemon"), "{err}");
    }

    #[test]
    fn a_fixed_size_takes_a_bitrate_scale_for_the_daemon() {
        let lib = "libception = \"full\"\nprefetch_kb = [1024, 2048]";
        let e = parse(&GOOD.replace(lib, "libception = \"full\"\nprefetch_kb = 6144\nprefetch_scale = 0.45")).unwrap();
        let c = e.config("lib").unwrap();
        assert_eq!(c.prefetch_scale, Some(libception_proto::BitrateScale::Factor(450)));
        let args = crate::daemon::daemon_args(Path::new("/s"), &c.daemon_prefetch().unwrap(), "www-data", crate::daemon::DaemonOptions::of(c)).join(" ");
        assert!(args.contains("--prefetch 6291456") && args.contains("--prefetch-scale 0.45"), "{args}");
        assert_eq!(serde_json::to_value(c).unwrap()["prefetch_scale"], "0.45");
        assert!(serde_json::to_value(e.config("vanilla").unwrap()).unwrap().get("prefetch_scale").is_none(), "unset, not recorded");
        let e = parse(&GOOD.replace(lib, "libception = \"full\"\nprefetch_kb = 6144\nprefetch_scale = \"sqrt\"")).unwrap();
        assert_eq!(e.config("lib").unwrap().prefetch_scale, Some(libception_proto::BitrateScale::Sqrt));
        for bad in [
            "libception = \"full\"\nprefetch_kb = \"adaptive\"\nprefetch_scale = 0.45",
            "libception = \"serialize\"\nprefetch_scale = 0.45",
            "libception = \"track\"\nprefetch_scale = 0.45",
        ] {
            let err = parse(&GOOD.replace(lib, bad)).unwrap_err().to_string();
            assert!(err.contains("prefetch_scale") && err.contains("adaptive.scale"), "{bad}: {err}");
        }
        let err = parse(&GOOD.replace(lib, "libception = \"full\"\nprefetch_kb = 6144\nprefetch_scale = 3")).unwrap_err().to_string();
        assert!(err.contains("a factor in (0, 1]"), "{err}");
    }

    #[test]
    fn only_keeps_named_configurations_and_sweeps() {
        let mut e = parse(GOOD).unwrap();
        e.keep_only(&["lib".into(), "wc".into()]).unwrap();
        let names: Vec<_> = e.configs.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["lib-p1024", "lib-p2048", "wc"]);
        let mut e = parse(GOOD).unwrap();
        e.keep_only(&["lib-p2048".into()]).unwrap();
        assert_eq!(e.configs.len(), 1);
        let err = parse(GOOD).unwrap().keep_only(&["vanila".into()]).unwrap_err().to_string();
        assert!(err.contains("\"vanila\"") && err.contains("vanilla, lib-p1024"), "{err}");
    }

    #[test]
    fn the_recorded_experiment_keeps_finished_configurations_only_left_out() {
        let names = |v: &serde_json::Value| -> Vec<String> { v["configs"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap().to_string()).collect() };
        let mut e = parse(GOOD).unwrap();
        assert_eq!(names(&e.recorded(|_| true)), ["vanilla", "lib-p1024", "lib-p2048", "wc"], "without --only: the file's");
        e.keep_only(&["lib-p2048".into()]).unwrap();
        assert_eq!(names(&e.recorded(|_| false)), ["lib-p2048"], "nothing else finished: what runs now");
        // vanilla and wc finished in an earlier run with another --only: kept, in file order.
        assert_eq!(names(&e.recorded(|n| n == "vanilla" || n == "wc")), ["vanilla", "lib-p2048", "wc"]);
        let vanilla = e.omitted.iter().find(|c| c.name == "vanilla").unwrap();
        assert_eq!(e.recorded(|_| true)["configs"][0], serde_json::to_value(vanilla).unwrap(), "with its settings, for a resume to compare");
    }

    #[test]
    fn configurations_left_out_by_only_are_resolved_to_the_disk_mode_too() {
        // A resume records the finished ones; they must read as an earlier
        // run of the same mode recorded them.
        let auto = GOOD
            .replace("preset = \"wd-red-1tb\"", "preset = \"wd-red-1tb\"\nmode = \"auto\"\nmax_request_kb = 256")
            .replace("name = \"vanilla\"\nserver = \"nginx\"", "name = \"vanilla\"\nserver = \"nginx\"\nmax_sectors_kb = 16384\nread_ahead_kb = 2048");
        let vanilla = |block: bool| {
            let mut e = parse(&auto).unwrap();
            e.keep_only(&["lib".into()]).unwrap();
            e.resolve_disk_mode(|_| if block { Ok(()) } else { anyhow::bail!("no loop devices here") }, 16384).unwrap();
            let recorded = e.recorded(|n| n == "vanilla");
            let v = recorded["configs"].as_array().unwrap().iter().find(|c| c["name"] == "vanilla").cloned().unwrap();
            (v.get("max_request_kb").cloned(), v.get("max_sectors_kb").cloned())
        };
        assert_eq!(vanilla(true), (None, Some(serde_json::json!(16384))), "block mode: no FUSE cap from [disk]");
        assert_eq!(vanilla(false), (Some(serde_json::json!(16384)), None), "FUSE mode: the cap, no block keys");
    }

    #[test]
    fn unknown_keys_name_the_key_and_line() {
        let text = GOOD.replace("[memory]\nlimit_mb = 256", "[memory]\nlimit_mb = 256\nlimit_gb = 1");
        let err = parse(&text).unwrap_err().to_string();
        assert!(err.contains("limit_gb"), "{err}");
        assert!(err.contains("line 10"), "{err}");
        assert!(err.contains("e.toml"), "{err}");
    }

    #[test]
    fn adaptive_parameters_reach_the_daemon_and_the_record() {
        let text = GOOD.replace(
            "prefetch_kb = [1024, 2048]",
            "prefetch_kb = [2048, \"adaptive\"]\nadaptive = { interval_s = 30, settle = 0, start_kb = 1024, scale = \"none\", ramp_rate_kb = 64, stream_rate_kb = 52.5, waste_after_s = 120 }",
        );
        let e = parse(&text).unwrap();
        let Some(Prefetch::Adaptive(p)) = e.config("lib-padaptive").unwrap().prefetch.clone() else { panic!("adaptive") };
        assert_eq!((p.interval.as_secs(), p.start, p.scale), (30, Some(1 << 20), libception_proto::BitrateScale::None));
        assert_eq!((p.ramp_rate, p.stream_rate, p.waste_after.as_secs(), p.settle), (64 << 10, Some(52.5 * 1024.0), 120, 0));
        let args = e.config("lib-padaptive").unwrap().daemon_prefetch().unwrap().daemon_args().join(" ");
        for want in ["--adaptive-interval 30", "--adaptive-start 1048576", "--adaptive-scale none", "--adaptive-ramp-rate 65536", "--adaptive-stream-rate 53760", "--adaptive-waste-after 120", "--adaptive-settle 0"] {
            assert!(args.contains(want), "{want} missing from {args}");
        }
        // Recorded and read back whole; the fixed size of the sweep is untouched.
        let cfg = e.config("lib-padaptive").unwrap();
        let back: Config = serde_json::from_value(serde_json::to_value(cfg).unwrap()).unwrap();
        assert_eq!(back.prefetch, cfg.prefetch);
        assert_eq!(e.config("lib-p2048").unwrap().prefetch, Some(Prefetch::Fixed(2048 << 10)));
        for (bad, want) in [
            ("interval_s = 0.5", "adaptive.interval_s"),
            ("waste_after_s = 0", "adaptive.waste_after_s"),
            ("stream_rate_kb = -1", "adaptive.stream_rate_kb"),
            ("ramp_rate_kb = 0", "adaptive.ramp_rate_kb"),
            ("busy = 2", "adaptive.busy"),
            ("min_kb = 4096, max_kb = 1024", "min_kb <= start_kb <= max_kb"),
            ("interval_s = -5", "adaptive.interval_s"),
            ("interval_s = inf", "adaptive.interval_s"),
            ("interval_s = 1e20", "adaptive.interval_s"),
            ("stream_rate_kb = 1e308", "adaptive.stream_rate_kb"),
            ("waste_after_s = nan", "adaptive.waste_after_s"),
            ("deflation = 1", "adaptive.deflation"),
            ("min_kb = 2", "adaptive.min_kb"),
            ("step_kb = 1", "adaptive.step_kb"),
            ("transaction_kb = 0", "adaptive.transaction_kb"),
            ("speed = 1", "speed"),
        ] {
            let err = parse(&GOOD.replace("prefetch_kb = [1024, 2048]", &format!("prefetch_kb = \"adaptive\"\nadaptive = {{ {bad} }}")))
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{err:?} should mention {want:?}");
        }
        let err = parse(&GOOD.replace("prefetch_kb = [1024, 2048]", "prefetch_kb = 2048\nadaptive = { interval_s = 30 }")).unwrap_err().to_string();
        assert!(err.contains("only with prefetch_kb = \"adaptive\""), "{err}");
    }

    #[test]
    fn a_configurations_own_rates_inherit_the_top_level_threshold_unless_they_set_one() {
        let text = GOOD.replace("fixed = [10, 20]", "fixed = [10, 20]\nthreshold_pct = 1.5").replace(
            "name = \"vanilla\"\nserver = \"nginx\"",
            "name = \"vanilla\"\nserver = \"nginx\"\nrates = { bracket = { start = 2.0 } }",
        );
        let threshold = |e: &Experiment, name: &str| e.config(name).unwrap().rates.threshold_pct();
        let e = parse(&text).unwrap();
        assert_eq!((threshold(&e, "vanilla"), threshold(&e, "lib-p1024")), (Some(1.5), Some(1.5)));
        let e = parse(&text.replace("start = 2.0 }", "start = 2.0 }, threshold_pct = 0.5")).unwrap();
        assert_eq!((threshold(&e, "vanilla"), threshold(&e, "lib-p1024")), (Some(0.5), Some(1.5)));
        let e = parse(&text.replace("threshold_pct = 1.5", "")).unwrap();
        assert_eq!((threshold(&e, "vanilla"), threshold(&e, "lib-p1024")), (Some(0.3), Some(0.3)), "paper 003's 0.3 % by default");
    }

    #[test]
    fn the_steady_protocol_and_the_bracketing_search_parse_and_are_checked() {
        let steady = "duration_s = 60";
        let good = GOOD
            .replace(steady, "steady = { ramp_s = 300, settle_s = 90, measure_s = 120, hold_s = 60 }")
            .replace("fixed = [10, 20]", "bracket = { start = 3.0 }");
        let e = parse(&good).unwrap();
        let st = e.run.steady.unwrap();
        assert_eq!((st.ramp_s, st.settle_s, st.measure_s, st.hold_s, st.one_run), (300.0, 90.0, 120.0, 60.0, true));
        let RatePlan::Bracket { bracket, threshold_pct } = e.config("vanilla").unwrap().rates else { panic!("a bracketing plan") };
        assert_eq!((bracket.start, bracket.step_pct, bracket.resolution_pct, bracket.repetitions), (3.0, 20.0, 5.0, 3));
        assert_eq!(threshold_pct, 0.3);
        let cases = [
            (good.replace("measure_s = 120", "measure_s = 122"), "run.steady.measure_s"),
            (good.replace("ramp_s = 300", "ramp_s = 0"), "run.steady.ramp_s"),
            (good.replace("steady = {", "duration_s = 5\nsteady = {"), "run.steady"),
            (good.replace("steady = {", "max_session_s = 50\nsteady = {"), "run.max_session_s"),
            (good.replace("start = 3.0", "start = 3.0, resolution_pct = 30"), "rates.bracket.resolution_pct"),
            (good.replace("start = 3.0", "start = 3.0, repetitions = 3, max_probes = 5"), "rates.bracket.max_probes"),
            (good.replace("bracket = { start = 3.0 }", "bracket = { start = 3.0 }\nfixed = [1]"), "exactly one of"),
            (good.replace("hold_s = 60 }", "hold_s = 60, gate_pct = 3 }"), "needs both gate_pct and max_settle_s"),
            (good.replace("hold_s = 60 }", "hold_s = 60, gate_pct = 0, max_settle_s = 600 }"), "run.steady.gate_pct"),
            (good.replace("hold_s = 60 }", "hold_s = 60, gate_pct = 3, max_settle_s = 200 }"), "run.steady.max_settle_s"),
            (good.replace("hold_s = 60 }", "hold_s = 60, gate_pct = 3, max_settle_s = 602 }"), "run.steady.max_settle_s"),
            (good.replace("hold_s = 60 }", "hold_s = 60, lru_pct = 2 }"), "run.steady.lru_pct"),
            (good.replace("hold_s = 60 }", "hold_s = 60, gate_pct = 3, max_settle_s = 900, lru_pct = 0 }"), "run.steady.lru_pct"),
            (good.replace("hold_s = 60 }", "hold_s = 60, gate_pct = 3, max_settle_s = 900, lru_pct = 100 }"), "run.steady.lru_pct"),
            (good.replace("hold_s = 60 }", "hold_s = 60, join_s = 120 }"), "run.steady.join_s"),
            (good.replace("hold_s = 60 }", "hold_s = 60, join_s = 0 }"), "run.steady.join_s"),
        ];
        let matched = parse(&good.replace("hold_s = 60 }", "hold_s = 60, join_s = 30 }")).unwrap();
        assert_eq!(matched.run.steady.unwrap().join_s, Some(30.0));
        let gated = parse(&good.replace("hold_s = 60 }", "hold_s = 60, gate_pct = 3, max_settle_s = 900, lru_pct = 2 }")).unwrap();
        let st = gated.run.steady.unwrap();
        assert_eq!((st.gate_pct, st.max_settle_s, st.lru_pct), (Some(3.0), Some(900.0), Some(2.0)));
        assert_refused(cases);
    }

    #[test]
    fn rates_relative_to_a_search_are_fractions_of_its_answer() {
        let searched = GOOD.replace(
            "name = \"vanilla\"\nserver = \"nginx\"",
            "name = \"vanilla\"\nserver = \"nginx\"\nrates = { bracket = { start = 2, step_pct = 20, resolution_pct = 5, repetitions = 3, max_probes = 14 } }",
        );
        let relative = searched.replace(
            "prefetch_kb = [1024, 2048]",
            "prefetch_kb = [1024, 2048]\nrates = { fixed = [0.8, 1.0], relative_to = { config = \"vanilla\" }, repetitions = 3 }",
        );
        let e = parse(&relative).unwrap();
        let want = RelativeTo { config: "vanilla".into(), results: None };
        assert!(matches!(&e.config("lib-p1024").unwrap().rates, RatePlan::Fixed { rates, repetitions: 3, relative_to: Some(r), .. } if rates == &[0.8, 1.0] && *r == want));
        // A plan without it is recorded as before (resumed results compare it).
        let plain = serde_json::to_value(&parse(GOOD).unwrap().config("vanilla").unwrap().rates).unwrap();
        assert_eq!(plain, serde_json::json!({"plan": "fixed", "rates": [10.0, 20.0], "repetitions": 1, "threshold_pct": 0.3}));

        // The answer is read from the search's search.json.
        let out = tempfile::tempdir().unwrap();
        let search = out.path().join("runs/vanilla/search.json");
        let err = want.max_rate(out.path()).unwrap_err().to_string();
        assert!(err.contains("has not finished") && err.contains("runs/vanilla/search.json"), "{err}");
        std::fs::create_dir_all(search.parent().unwrap()).unwrap();
        std::fs::write(&search, r#"{"max_rate": 2.77, "steps": []}"#).unwrap();
        assert_eq!(want.max_rate(out.path()).unwrap(), 2.77);
        std::fs::write(&search, r#"{"max_rate": null, "steps": []}"#).unwrap();
        assert!(want.max_rate(out.path()).unwrap_err().to_string().contains("no failure-free rate"));
        std::fs::write(&search, "{\"max_rate\": ").unwrap();
        assert!(want.max_rate(out.path()).unwrap_err().to_string().contains("not valid JSON"));

        // Another results directory (relative to the experiment file) must hold the search.
        let dir = write_dir();
        std::fs::create_dir_all(dir.path().join("rec/runs/vanilla")).unwrap();
        std::fs::write(dir.path().join("rec/runs/vanilla/search.json"), r#"{"max_rate": 3.0}"#).unwrap();
        let elsewhere = GOOD.replace("fixed = [10, 20]", "fixed = [1.0]\nrelative_to = { config = \"vanilla\", results = \"rec\" }");
        std::fs::write(dir.path().join("e.toml"), &elsewhere).unwrap();
        let e = Experiment::from_file(&dir.path().join("e.toml")).unwrap();
        let RatePlan::Fixed { relative_to: Some(r), .. } = &e.config("vanilla").unwrap().rates else { panic!("not relative") };
        assert_eq!(r.results.as_deref(), Some(dir.path().join("rec").as_path()));
        assert_eq!(r.max_rate(Path::new("/nonexistent")).unwrap(), 3.0);

        assert_refused([
            (relative.replace("config = \"vanilla\"", "config = \"nobody\""), "`nobody` is not a configuration before `lib-p1024`"),
            (GOOD.replace("fixed = [10, 20]", "fixed = [0.5]\nrelative_to = { config = \"lib-p1024\" }"), "is not a configuration before `vanilla`"),
            (relative.replace("rates = { bracket = { start = 2, step_pct = 20, resolution_pct = 5, repetitions = 3, max_probes = 14 } }", ""), "`vanilla` does not search"),
            (relative.replace("fixed = [0.8, 1.0]", "fixed = [0.8, 5.0]"), "fixed[1]"),
            (GOOD.replace("fixed = [10, 20]", "bracket = { start = 2, step_pct = 20, resolution_pct = 5, repetitions = 3, max_probes = 14 }\nrelative_to = { config = \"vanilla\" }"), "rates.relative_to: goes with `fixed"),
            (GOOD.replace("fixed = [10, 20]", "fixed = [1.0]\nrelative_to = { config = \"vanilla\", results = \"nowhere\" }"), "no finished search of `vanilla`"),
        ]);
    }

    /// Sizes and times beyond any machine or run are refused by key: a
    /// limit of 2^44 MiB used to wrap to a 0-byte cgroup limit, and a time
    /// of 1e300 s to reach a panicking Duration conversion mid-run.
    #[test]
    fn absurd_sizes_and_times_are_refused() {
        let steady = GOOD.replace("duration_s = 60", "steady = { ramp_s = 300, settle_s = 90, measure_s = 120, hold_s = 60 }");
        assert_refused([
            (GOOD.replace("limit_mb = 256", "limit_mb = 17592186044416"), "memory.limit_mb: 17592186044416 MiB is more than any machine has"),
            (GOOD.replace("limit_mb = 256", "limit_mb = 9223372036854775807"), "memory.limit_mb"),
            (GOOD.replace("duration_s = 60", "duration_s = 1e300"), "run.duration_s"),
            (GOOD.replace("duration_s = 60", "duration_s = 60\nready_timeout_s = 1e300"), "run.ready_timeout_s"),
            (GOOD.replace("duration_s = 60", "duration_s = 60\nsettle_s = 1e300"), "run.settle_s"),
            (steady.replace("ramp_s = 300", "ramp_s = 1e300"), "run.steady.ramp_s"),
            (steady.replace("hold_s = 60", "hold_s = 1e12"), "run.steady.hold_s"),
        ]);
        assert_eq!(parse(&GOOD.replace("limit_mb = 256", "limit_mb = 67108864")).unwrap().memory_limit_bytes, 64 << 40);
    }

    #[test]
    fn a_configuration_s_own_ramp_replaces_the_experiment_s_for_it_alone() {
        let gated = GOOD
            .replace("duration_s = 60", "steady = { ramp_s = 300, settle_s = 90, measure_s = 120, hold_s = 60, gate_pct = 3, max_settle_s = 900, join_s = 30 }")
            .replace("name = \"vanilla\"\nserver = \"nginx\"", "name = \"vanilla\"\nserver = \"nginx\"\nramp_s = 600");
        let e = parse(&gated).unwrap();
        let own = e.config("vanilla").unwrap().steady(e.run.steady).unwrap();
        assert_eq!((own.ramp_s, own.settle_s, own.max_settle_s, own.join_s), (600.0, 90.0, Some(900.0), Some(30.0)));
        let other = e.config("lib-p1024").unwrap().steady(e.run.steady).unwrap();
        assert_eq!(other, e.run.steady.unwrap(), "a configuration without its own ramp keeps the experiment's timings");
        // Recorded with the configuration (experiment.json), absent otherwise.
        let recorded = serde_json::to_value(e.config("vanilla").unwrap()).unwrap();
        assert_eq!(recorded["ramp_s"], 600.0);
        assert!(serde_json::to_value(e.config("lib-p1024").unwrap()).unwrap().get("ramp_s").is_none());
        let cases = [
            (gated.replace("ramp_s = 600", "ramp_s = 602"), "config[0] (\"vanilla\").ramp_s"),
            (gated.replace("ramp_s = 600", "ramp_s = 0"), "config[0] (\"vanilla\").ramp_s"),
            (gated.replace("ramp_s = 600", "ramp_s = 1200"), "config[0] (\"vanilla\").ramp_s: 1200 s in place of run.steady.ramp_s fails run.steady.max_settle_s"),
            (gated.replace("ramp_s = 600", "ramp_s = 25"), "fails run.steady.join_s"),
            (GOOD.replace("name = \"vanilla\"\nserver = \"nginx\"", "name = \"vanilla\"\nserver = \"nginx\"\nramp_s = 600"), "needs the steady protocol"),
        ];
        assert_refused(cases);
    }

    #[test]
    fn the_shim_s_patience_is_for_a_mode_with_a_daemon() {
        // The shim's patience, for a mode with a daemon only.
        let patient = GOOD.replace("prefetch_kb = [1024, 2048]", "prefetch_kb = 2048\npatience_ms = 0");
        assert_eq!(parse(&patient).unwrap().config("lib").unwrap().patience_ms, Some(0));
        assert_refused([(
            GOOD.replace("name = \"vanilla\"\nserver = \"nginx\"", "name = \"vanilla\"\nserver = \"nginx\"\npatience_ms = 10"),
            "config[0] (\"vanilla\").patience_ms",
        )]);
    }

    #[test]
    fn bad_values_name_the_key() {
        let cases = [
            (GOOD.replace("fixed = [10, 20]", "fixed = [10, -2]"), "rates.fixed[1]"),
            (GOOD.replace("fixed = [10, 20]", "fixed = []"), "rates.fixed"),
            (GOOD.replace("duration_s = 60", "duration_s = 60\nsessions = 5"), "run"),
            (GOOD.replace("prefetch_kb = [1024, 2048]\n", ""), "config[1] (\"lib\").prefetch_kb"),
            (GOOD.replace("server = \"nginx\"\nlibception", "libception"), "config[1] (\"lib\").server"),
            (GOOD.replace("name = \"lib\"", "name = \"vanilla\"").replace("prefetch_kb = [1024, 2048]", "prefetch_kb = 2048"), "used twice"),
            (GOOD.replace("kind = \"wc\"", "kind = \"wc\"\nserver = \"nginx\""), "config[2] (\"wc\").server"),
            (GOOD.replace("server = \"nginx\"\n[[config]]\nname = \"lib\"", "server = \"nginx\"\ntemplate = \"nope.conf\"\n[[config]]\nname = \"lib\""), "nope.conf"),
            (GOOD.replace("spec = \"small.toml\"", "spec = \"a\"\ndir = \"b\""), "workload"),
            (GOOD.replace("limit_mb = 256", "limit_mb = 1"), "memory.limit_mb"),
            (GOOD.replace("fixed = [10, 20]", "search = { low = 10, high = 5, resolution = 1 }"), "rates.search.high"),
            (GOOD.replace("fixed = [10, 20]", "fixed = [1]\nthreshold_pct = 0"), "rates.threshold_pct"),
            (GOOD.replace("duration_s = 60", "duration_s = 60\nwarm_fill_pct = 0"), "run.warm_fill_pct"),
            (GOOD.replace("duration_s = 60", "duration_s = 60\nwarm_fill_pct = 101"), "run.warm_fill_pct"),
        ];
        assert_eq!(parse(&GOOD.replace("duration_s = 60", "duration_s = 60\nwarm_fill_pct = 90")).unwrap().run.warm_fill_pct, Some(90.0));
        assert_refused(cases);
    }

    #[test]
    fn wrong_types_and_enums_name_the_line() {
        let err = parse(&GOOD.replace("server = \"nginx\"\n[[config]]\nname = \"lib\"", "server = \"iis\"\n[[config]]\nname = \"lib\"")).unwrap_err().to_string();
        assert!(err.contains("iis") && err.contains("line 16"), "{err}");
        let err = parse(&GOOD.replace("duration_s = 60", "duration_s = \"long\"")).unwrap_err().to_string();
        assert!(err.contains("line 11"), "{err}");
    }

    /// Every `run.json` / `setup.json` under `dir`, two levels below `runs/`.
    fn recorded_runs(dir: &Path) -> Vec<PathBuf> {
        let mut files = Vec::new();
        for config in std::fs::read_dir(dir.join("runs")).into_iter().flatten().flatten() {
            for run in std::fs::read_dir(config.path()).into_iter().flatten().flatten() {
                files.extend(["run.json", "setup.json"].map(|f| run.path().join(f)).into_iter().filter(|f| f.is_file()));
            }
        }
        files
    }

    fn results_dirs() -> Vec<PathBuf> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("docs/results")).unwrap().flatten().map(|e| e.path()).collect();
        dirs.push(root.join("crates/vidbench-report/tests/data/quick-mini"));
        dirs.retain(|d| d.join("experiment.json").is_file());
        dirs
    }

    #[test]
    fn recorded_results_load_and_record_the_same_keys_again() {
        let mut runs = 0;
        for dir in results_dirs() {
            // experiment.json: what --resume compares against the experiment file.
            let text = std::fs::read_to_string(dir.join("experiment.json")).unwrap();
            let recorded: serde_json::Value = serde_json::from_str(&text).unwrap();
            let exp: Experiment = serde_json::from_value(recorded.clone()).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            assert_eq!(serde_json::to_value(&exp).unwrap()["configs"], recorded["configs"], "{}", dir.display());
            // --resume compares `disk` too: FUSE results record it as before block mode.
            assert_eq!(serde_json::to_value(&exp).unwrap()["disk"], recorded["disk"], "{}", dir.display());
            for file in recorded_runs(&dir) {
                let recorded: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
                let config: Config = serde_json::from_value(recorded["config"].clone()).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
                let kb = recorded["config"]["prefetch_kb"].as_u64();
                if recorded["config"]["prefetch_adaptive"] == true {
                    let Some(Prefetch::Adaptive(p)) = &config.prefetch else { panic!("{}: adaptive, read as {:?}", file.display(), config.prefetch) };
                    // The parameters are recorded when they differ from paper 001's.
                    match &recorded["config"]["prefetch_adaptive_params"] {
                        serde_json::Value::Null => assert_eq!(*p, AdaptiveParams::paper(), "{}", file.display()),
                        params => assert_eq!(&serde_json::to_value(p).unwrap(), params, "{}", file.display()),
                    }
                } else {
                    assert_eq!(config.prefetch, kb.map(|kb| Prefetch::Fixed(kb << 10)), "{}", file.display());
                }
                assert_eq!(serde_json::to_value(&config).unwrap(), recorded["config"], "{}", file.display());
                runs += 1;
            }
        }
        assert!(runs >= 20, "expected the recorded runs of docs/results, found {runs}");
    }

    #[test]
    fn adaptive_prefetch_is_recorded_as_a_flag() {
        let e = parse(&GOOD.replace("prefetch_kb = [1024, 2048]", "prefetch_kb = [2048, \"adaptive\"]")).unwrap();
        let recorded = serde_json::to_value(e.config("lib-padaptive").unwrap()).unwrap();
        assert_eq!(recorded["prefetch_kb"], serde_json::Value::Null);
        assert_eq!(recorded["prefetch_adaptive"], true);
        let fixed = serde_json::to_value(e.config("lib-p2048").unwrap()).unwrap();
        assert_eq!(fixed["prefetch_kb"], 2048);
        assert!(fixed.get("prefetch_adaptive").is_none(), "left out when false, as results before it lack it");
        // The daemon's default settles one interval, which paper 001 does
        // not: recorded, as every parameter that differs from the paper's.
        assert_eq!(recorded["prefetch_adaptive_params"]["settle"], 1);
        let back: Config = serde_json::from_value(recorded).unwrap();
        assert_eq!(back.prefetch, Some(Prefetch::Adaptive(AdaptiveParams::default())));
        // A record naming no parameters ran paper 001's (made before the default settled).
        let mut old = serde_json::to_value(e.config("lib-padaptive").unwrap()).unwrap();
        old.as_object_mut().unwrap().remove("prefetch_adaptive_params");
        let back: Config = serde_json::from_value(old).unwrap();
        assert_eq!(back.prefetch, Some(Prefetch::Adaptive(AdaptiveParams::paper())));
    }

    /// GOOD in block mode, with `extra` added to `[disk]`.
    fn block(extra: &str) -> String {
        GOOD.replace("preset = \"wd-red-1tb\"", &format!("preset = \"wd-red-1tb\"\nmode = \"block\"\n{extra}"))
    }

    #[test]
    fn block_keys_parse_expand_into_sweeps_and_default_per_config() {
        let text = block("fs = \"xfs\"\nfs_size = \"packed\"\nfs_slack_pct = 20\nfill_order = \"shuffled\"\nfill_seed = 7\nimage_cache = \"images\"\nnr_requests = 64")
            .replace("name = \"vanilla\"\nserver = \"nginx\"", "name = \"vanilla\"\nserver = \"nginx\"\nscheduler = [\"mq-deadline\", \"bfq\"]\nmax_sectors_kb = [512, 1280]\nread_ahead_kb = 2048");
        let e = parse(&text).unwrap();
        let names: Vec<_> = e.configs.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["vanilla-mq-deadline-ms512", "vanilla-mq-deadline-ms1280", "vanilla-bfq-ms512", "vanilla-bfq-ms1280", "lib-p1024", "lib-p2048", "wc"]);
        let c = e.config("vanilla-bfq-ms512").unwrap();
        assert_eq!((c.scheduler, c.max_sectors_kb, c.nr_requests, c.read_ahead_kb, c.max_request_kb), (Some(Scheduler::Bfq), Some(512), Some(64), 2048, None));
        assert_eq!(c.base, "vanilla");
        let lib = e.config("lib-p1024").unwrap();
        assert_eq!((lib.scheduler, lib.max_sectors_kb, lib.nr_requests), (None, None, Some(64)), "[disk] values apply to every configuration");
        assert_eq!(e.disk.mode, DiskMode::Block);
        assert_eq!((e.disk.fs, e.disk.fs_size, e.disk.fill_order, e.disk.fill_seed), (Some(FsKind::Xfs), Some(FsSize::Packed), Some(FillOrder::Shuffled), Some(7)));
        let cache = e.disk.image_cache.clone().unwrap();
        assert!(cache.is_absolute() && cache.ends_with("images"), "{}", cache.display());
        // Recorded: the new keys where set, none of FUSE mode's.
        let recorded = serde_json::to_value(c).unwrap();
        assert_eq!(recorded["scheduler"], "bfq");
        assert_eq!(recorded["max_sectors_kb"], 512);
        assert!(recorded.get("max_request_kb").is_none());
        let back: Config = serde_json::from_value(recorded.clone()).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), recorded);
    }

    #[test]
    fn max_sectors_kb_is_bounded_by_a_sata_disk_and_a_page() {
        let c = parse(&block("").replace("name = \"vanilla\"\nserver = \"nginx\"", "name = \"vanilla\"\nserver = \"nginx\"\nmax_sectors_kb = 16384")).unwrap();
        assert_eq!(c.configs[0].max_sectors_kb, Some(16384), "above the loop cap the drive joins");
        let err = parse(&block("").replace("name = \"vanilla\"\nserver = \"nginx\"", "name = \"vanilla\"\nserver = \"nginx\"\nmax_sectors_kb = 32768")).unwrap_err().to_string();
        assert!(err.contains("config[0] (\"vanilla\").max_sectors_kb") && err.contains("above 32767 KiB") && err.contains("SATA"), "{err}");
        assert!(parse(&block("max_sectors_kb = 1280")).is_ok());
        let err = parse(&block("max_sectors_kb = 2")).unwrap_err().to_string();
        assert!(err.contains("disk.max_sectors_kb") && err.contains("page"), "{err}");
    }

    #[test]
    fn keys_of_the_other_mode_are_refused() {
        let vanilla = "name = \"vanilla\"\nserver = \"nginx\"";
        let cases = [
            (GOOD.replace("preset = \"wd-red-1tb\"", "preset = \"wd-red-1tb\"\nscheduler = \"bfq\""), "disk.scheduler: only applies to block mode"),
            (GOOD.replace("preset = \"wd-red-1tb\"", "preset = \"wd-red-1tb\"\nmode = \"fuse\"\nfs = \"xfs\""), "disk.fs: only applies to block mode"),
            (GOOD.replace(vanilla, &format!("{vanilla}\nmax_sectors_kb = 1280")), "config[0] (\"vanilla\").max_sectors_kb: only applies to block mode"),
            (GOOD.replace(vanilla, &format!("{vanilla}\nnr_requests = 64")), "config[0] (\"vanilla\").nr_requests: only applies to block mode"),
            (block("max_request_kb = 1024"), "disk.max_request_kb: only applies to FUSE mode"),
            (block("").replace(vanilla, &format!("{vanilla}\nmax_request_kb = 1024")), "config[0] (\"vanilla\").max_request_kb: only applies to FUSE mode"),
            (block("fs_slack_pct = 5"), "disk.fs_slack_pct: only applies to fs_size = \"packed\""),
            (block("fill_seed = 5"), "disk.fill_seed: only applies to fill_order = \"shuffled\""),
            (block("nr_requests = 1"), "disk.nr_requests: 1 is out of range"),
            (block("args = [\"--max-sectors-kb=64\"]"), "disk.args: --max-sectors-kb=64 is set by the driver"),
            (
                GOOD.replace("preset = \"wd-red-1tb\"", "preset = \"wd-red-1tb\"\nmode = \"auto\"").replace(vanilla, &format!("{vanilla}\nscheduler = [\"none\", \"bfq\"]")),
                "config[0] (\"vanilla\").scheduler: a sweep of a block-only key needs [disk] mode = \"block\"",
            ),
        ];
        assert_refused(cases);
        let err = parse(&block("scheduler = \"cfq\"")).unwrap_err().to_string();
        assert!(err.contains("cfq") && err.contains("line "), "{err}");
    }

    #[test]
    fn files_without_a_mode_are_fuse_mode_and_record_the_same_disk_as_before() {
        let e = parse(GOOD).unwrap();
        assert_eq!(e.disk.mode, DiskMode::Fuse);
        assert_eq!(e.config("vanilla").unwrap().max_request_kb, Some(128));
        let disk = serde_json::to_value(&e.disk).unwrap();
        let keys: Vec<&str> = disk.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["args", "max_request_kb", "preset", "read_ahead_kb", "trace"], "the keys results before block mode have");
        assert_eq!(serde_json::to_value(e.config("vanilla").unwrap()).unwrap()["max_request_kb"], 128);
    }

    #[test]
    fn auto_mode_resolves_to_block_or_falls_back_to_fuse_with_the_reason() {
        let auto = GOOD
            .replace("preset = \"wd-red-1tb\"", "preset = \"wd-red-1tb\"\nmode = \"auto\"\nfs = \"xfs\"\nmax_request_kb = 256")
            .replace("name = \"vanilla\"\nserver = \"nginx\"", "name = \"vanilla\"\nserver = \"nginx\"\nmax_request_kb = 1024\nmax_sectors_kb = 1280");
        let mut e = parse(&auto).unwrap();
        let mut asked = None;
        let fallback = e.resolve_disk_mode(
            |fs| {
                asked = Some(fs);
                Ok(())
            },
            1024,
        );
        assert_eq!(fallback.unwrap(), None);
        assert_eq!(asked, Some(FsKind::Xfs), "the support check is for the experiment's filesystem");
        assert_eq!(e.disk.mode, DiskMode::Block);
        assert_eq!(e.disk.max_request_kb, None);
        let v = e.config("vanilla").unwrap();
        assert_eq!((v.max_request_kb, v.max_sectors_kb), (None, Some(1280)));

        let mut e = parse(&auto).unwrap();
        let why = e.resolve_disk_mode(|_| anyhow::bail!("no loop devices here"), 1024).unwrap();
        assert_eq!(why.as_deref(), Some("no loop devices here"));
        assert_eq!(e.disk.mode, DiskMode::Fuse);
        assert_eq!((e.disk.fs, e.disk.max_request_kb), (None, Some(256)));
        let v = e.config("vanilla").unwrap();
        assert_eq!((v.max_request_kb, v.max_sectors_kb), (Some(1024), None));
        assert_eq!(e.config("lib-p1024").unwrap().max_request_kb, Some(256));
        assert!(serde_json::to_value(&e).unwrap().to_string().find("max_sectors_kb").is_none(), "FUSE results record no block keys");

        let mut e = parse(&block("")).unwrap();
        let err = e.resolve_disk_mode(|_| anyhow::bail!("no loop devices here"), 1024).unwrap_err().to_string();
        assert!(err.contains("mode = \"block\"") && err.contains("no loop devices here") && err.contains("\"auto\""), "{err}");
        let mut e = parse(GOOD).unwrap();
        assert_eq!(e.resolve_disk_mode(|_| panic!("FUSE mode needs no check"), 1024).unwrap(), None);
    }

    #[test]
    fn a_fallback_to_fuse_mode_keeps_kernel_tunings_large_requests_as_far_as_fuse_allows() {
        // Kernel tuning at paper 000's 16 MB, a configuration at the disk's
        // setting, one with its own FUSE cap: what each reads in one request
        // must survive the fallback, not become FUSE's default 128 KiB.
        let auto = GOOD
            .replace("preset = \"wd-red-1tb\"", "preset = \"wd-red-1tb\"\nmode = \"auto\"\nmax_sectors_kb = 512")
            .replace("name = \"vanilla\"\nserver = \"nginx\"", "name = \"vanilla\"\nserver = \"nginx\"\nmax_sectors_kb = 16384\nread_ahead_kb = 2048")
            .replace("name = \"lib\"\nserver = \"nginx\"", "name = \"lib\"\nserver = \"nginx\"\nmax_request_kb = 256");
        let request_kb = |cap: u32| {
            let mut e = parse(&auto).unwrap();
            e.resolve_disk_mode(|_| anyhow::bail!("no loop devices here"), cap).unwrap();
            assert!(e.configs.iter().all(|c| c.max_sectors_kb.is_none()));
            (e.disk.max_request_kb, e.config("vanilla").unwrap().max_request_kb, e.config("lib-p1024").unwrap().max_request_kb)
        };
        assert_eq!(request_kb(16384), (Some(512), Some(16384), Some(256)));
        assert_eq!(request_kb(1024), (Some(512), Some(1024), Some(256)), "bounded by the kernel's FUSE limit");
        // FUSE requests are whole pages.
        let mut e = parse(&auto.replace("max_sectors_kb = 16384", "max_sectors_kb = 1022")).unwrap();
        e.resolve_disk_mode(|_| anyhow::bail!("no loop devices here"), 16384).unwrap();
        assert_eq!(e.config("vanilla").unwrap().max_request_kb, Some(1020));
        // With no max_sectors_kb anywhere, FUSE mode's default as before.
        let mut e = parse(&GOOD.replace("preset = \"wd-red-1tb\"", "preset = \"wd-red-1tb\"\nmode = \"auto\"")).unwrap();
        e.resolve_disk_mode(|_| anyhow::bail!("no loop devices here"), 1024).unwrap();
        assert_eq!((e.disk.max_request_kb, e.config("vanilla").unwrap().max_request_kb), (Some(128), Some(128)));
    }

    #[test]
    fn files_read_beside_table_3_share_its_testbed_and_protocol() {
        // Their rows are compared with Table 3's, so every setting but the
        // configurations and their start rates must be table3-paper's.
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/experiments");
        let load = |name: &str| Experiment::from_file(&dir.join(format!("{name}.toml"))).unwrap_or_else(|e| panic!("{e}"));
        fn json<T: serde::Serialize>(v: &T) -> serde_json::Value {
            serde_json::to_value(v).unwrap()
        }
        let table3 = load("table3-paper");
        let search = |e: &Experiment, c: &Config| match c.rates {
            RatePlan::Bracket { bracket, threshold_pct } => (bracket.step_pct, bracket.resolution_pct, bracket.repetitions, bracket.max_probes, threshold_pct),
            ref other => panic!("{}: {} does not bracket: {other:?}", e.name, c.name),
        };
        let protocol = search(&table3, &table3.configs[0]);
        for name in ["table3-operator", "promotion", "promotion-auto", "queue-order", "laio-video", "lighttpd-gap", "fig17-sendfile"] {
            let e = load(name);
            assert_eq!(json(&e.workload), json(&table3.workload), "{name}: workload");
            assert_eq!(json(&e.disk), json(&table3.disk), "{name}: [disk]");
            assert_eq!(e.memory_limit_bytes, table3.memory_limit_bytes, "{name}: memory");
            let (mut run, mut table3_run) = (json(&e.run), json(&table3.run));
            // Fig 17 measures each rate in a run of its own (one window).
            run["steady"].as_object_mut().map(|s| s.remove("one_run"));
            table3_run["steady"].as_object_mut().map(|s| s.remove("one_run"));
            assert_eq!(run, table3_run, "{name}: [run]");
            for c in &e.configs {
                assert_eq!(c.ramp_s, None, "{name}: {} has a ramp of its own", c.name);
                if name != "fig17-sendfile" {
                    assert_eq!(search(&e, c), protocol, "{name}: {}'s search", c.name);
                }
            }
        }
    }

    #[test]
    fn the_bundled_experiments_are_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/experiments");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let e = Experiment::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
                // Block mode where supported; block mode only where the
                // experiment sweeps what only a block layer has.
                match e.disk.mode {
                    DiskMode::Auto => {}
                    DiskMode::Block => assert!(
                        e.configs.iter().any(|c| c.scheduler.is_some() || c.max_sectors_kb.is_some()),
                        "{}: block mode without a block-only key: use mode = \"auto\"",
                        path.display()
                    ),
                    DiskMode::Fuse => panic!("{}: FUSE mode only: use mode = \"auto\"", path.display()),
                }
                for c in e.configs.iter().filter(|c| c.max_request_kb == Some(1024)) {
                    assert_eq!(c.max_sectors_kb, Some(16384), "{}: {} is kernel-tuned in both modes", path.display(), c.name);
                }
                // A readahead window larger than 1280 KiB at max_sectors_kb
                // 1280 is split by the loop device: kernel tuning is 16384,
                // except where an experiment repeats a run recorded before.
                const RECORDED_AT_1280: &[&str] = &["steady-check-kernel", "first-window-kernel"];
                for c in e.configs.iter().filter(|c| c.max_sectors_kb == Some(1280) && c.read_ahead_kb > 1280) {
                    assert!(RECORDED_AT_1280.contains(&e.name.as_str()), "{}: {} splits its {} KiB readahead at 1280 KiB: give max_sectors_kb = 16384", path.display(), c.name, c.read_ahead_kb);
                }
                seen += 1;
            }
        }
        assert!(seen >= 4, "expected the four bundled experiments in {}", dir.display());
    }
}
