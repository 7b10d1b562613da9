//! Experiment files: what `vidbench run EXPERIMENT.toml` reads, and its checks.
//!
//! An experiment names a workload (a spec to generate, or a generated
//! directory), the emulated disk, the memory limit of the server's cgroup, how
//! each run is played, which rates to offer (a fixed list, or a search for the
//! maximum failure-free rate) and a list of configurations (`[[config]]`): a
//! server kind with a template from `bench/servers/`, Libception or not, disk
//! overrides and template knobs, or the `wc` disk upper bound.
//!
//! Parsing is two steps. Serde with `deny_unknown_fields` catches syntax, types
//! and unknown keys; the toml crate's error names the line and column. Then
//! [`Experiment::from_file`] checks what types cannot (ranges, exclusive keys,
//! duplicate names) and names the key path, e.g. `config[2] ("nginx-lib").prefetch_kb`.
//! List-valued `prefetch_kb` / `read_ahead_kb` expand one `[[config]]` into a
//! sweep of configurations named `<name>-p<kb>` / `<name>-ra<kb>`.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

/// A whole experiment file, as written.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentFile {
    /// Short name, used in reports.
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Directory of server templates, relative to the experiment file.
    #[serde(default = "default_templates")]
    pub templates: PathBuf,
    pub workload: WorkloadSection,
    pub disk: DiskSection,
    pub memory: MemorySection,
    pub run: RunSection,
    #[serde(default)]
    pub rates: Option<RatesSection>,
    #[serde(default)]
    pub paths: PathsSection,
    #[serde(rename = "config")]
    pub configs: Vec<ConfigSection>,
}

fn default_templates() -> PathBuf {
    PathBuf::from("../servers")
}

/// Where the sessions and the library come from.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSection {
    /// A workload spec to generate into `RESULTS/workload` (relative paths are
    /// relative to the experiment file).
    pub spec: Option<PathBuf>,
    /// A directory already written by `vidbench workload gen`.
    pub dir: Option<PathBuf>,
}

/// The emulated disk every run mounts.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DiskSection {
    /// Drive preset of `vidbench disk mount --preset`.
    pub preset: String,
    /// The mount's readahead (the analogue of `read_ahead_kb`).
    #[serde(default = "default_kb")]
    pub read_ahead_kb: u32,
    /// The largest read the kernel may send (the analogue of `max_sectors_kb`).
    #[serde(default = "default_kb")]
    pub max_request_kb: u32,
    /// Record the disk trace in every run (configurations may override).
    #[serde(default)]
    pub trace: bool,
    /// Extra arguments for `vidbench disk mount`, passed as they are.
    #[serde(default)]
    pub args: Vec<String>,
}

fn default_kb() -> u32 {
    128
}

/// The memory cgroup the server and the daemon share.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySection {
    /// `memory.limit_in_bytes` in MiB.
    pub limit_mb: u64,
}

/// How each run is played.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RunSection {
    /// How long the load offers sessions, in seconds.
    pub duration_s: Option<f64>,
    /// Or how many sessions it starts.
    pub sessions: Option<u64>,
    /// Warm the cache with the workload's warming set before the load.
    #[serde(default = "yes")]
    pub warm: bool,
    /// Value written to /proc/sys/vm/drop_caches before each run (1 or 3; 0 = do not drop).
    #[serde(default = "default_drop")]
    pub drop_caches: u8,
    /// Seed of the load's arrival process; repetition k uses seed + k.
    #[serde(default = "one")]
    pub seed: u64,
    /// TCP port the servers listen on (127.0.0.1).
    #[serde(default = "default_port")]
    pub port: u16,
    /// Worker processes of every server (nginx workers, lighttpd workers,
    /// Apache child processes): the same for all, for fairness.
    #[serde(default = "default_workers")]
    pub workers: u32,
    /// Threads per Apache child process.
    #[serde(default = "default_threads")]
    pub threads_per_worker: u32,
    /// User the servers' workers run as.
    #[serde(default = "default_user")]
    pub user: String,
    /// Seconds to wait for a server to answer before giving up.
    #[serde(default = "default_ready")]
    pub ready_timeout_s: f64,
    /// Seconds to let the system settle after warming, before the load.
    #[serde(default)]
    pub settle_s: f64,
    /// Verify every received byte against the generated content.
    #[serde(default)]
    pub verify: bool,
    /// Cut every session after the request that starts at or after this many
    /// seconds of paced time (a shorter tail for short experiments; the same
    /// cut for every configuration). Absent: sessions as generated.
    pub max_session_s: Option<f64>,
}

fn yes() -> bool {
    true
}
fn one() -> u64 {
    1
}
fn default_drop() -> u8 {
    3
}
fn default_port() -> u16 {
    8089
}
fn default_workers() -> u32 {
    4
}
fn default_threads() -> u32 {
    64
}
fn default_user() -> String {
    "www-data".into()
}
fn default_ready() -> f64 {
    20.0
}

/// Which session rates to offer.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RatesSection {
    /// Offer exactly these rates (sessions per second), in this order.
    pub fixed: Option<Vec<f64>>,
    /// Or search for the maximum failure-free rate.
    pub search: Option<SearchSection>,
    /// Runs per fixed rate.
    #[serde(default = "one_u32")]
    pub repetitions: u32,
    /// A rate fails when at least this percentage of sessions fail.
    #[serde(default = "default_threshold")]
    pub threshold_pct: f64,
}

fn one_u32() -> u32 {
    1
}
fn default_threshold() -> f64 {
    0.3
}

/// The maximum failure-free rate search: a coarse sweep from `low` to `high`,
/// then bisection down to `resolution`, then `repetitions` runs at the result.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SearchSection {
    pub low: f64,
    pub high: f64,
    #[serde(default = "default_coarse")]
    pub coarse_points: u32,
    pub resolution: f64,
    #[serde(default = "default_reps")]
    pub repetitions: u32,
}

fn default_coarse() -> u32 {
    5
}
fn default_reps() -> u32 {
    3
}

/// Overrides of where the programs live (defaults: Debian paths and the build
/// directory next to the running `vidbench`).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PathsSection {
    pub nginx: Option<PathBuf>,
    pub apache: Option<PathBuf>,
    pub lighttpd: Option<PathBuf>,
    pub libception: Option<PathBuf>,
    pub shim: Option<PathBuf>,
}

/// What a configuration runs.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum RunKind {
    /// A web server under the load.
    #[default]
    Server,
    /// The `wc` upper bound: the workload's chunks read sequentially, videos in random order.
    Wc,
}

/// The web servers the driver knows how to start.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum ServerKind {
    Nginx,
    Apache,
    Lighttpd,
}

impl ServerKind {
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Nginx => "nginx",
            ServerKind::Apache => "apache",
            ServerKind::Lighttpd => "lighttpd",
        }
    }
    pub fn default_template(self) -> &'static str {
        match self {
            ServerKind::Nginx => "nginx.conf",
            ServerKind::Apache => "apache.conf",
            ServerKind::Lighttpd => "lighttpd.conf",
        }
    }
    pub fn default_binary(self) -> &'static str {
        match self {
            ServerKind::Nginx => "/usr/sbin/nginx",
            ServerKind::Apache => "/usr/sbin/apache2",
            ServerKind::Lighttpd => "/usr/sbin/lighttpd",
        }
    }
}

/// Libception's modes (`LIBCEPTION_MODE`); absent means no shim at all.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Full,
    Serialize,
    Prefetch,
    Track,
    Off,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Full => "full",
            Mode::Serialize => "serialize",
            Mode::Prefetch => "prefetch",
            Mode::Track => "track",
            Mode::Off => "off",
        }
    }
    /// Whether the mode talks to the daemon.
    pub fn needs_daemon(self) -> bool {
        matches!(self, Mode::Full | Mode::Serialize)
    }
}

/// One value or a list (a sweep).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

/// A prefetch size as written: KiB, or the word `adaptive` (paper 001's
/// controller in the daemon, `libception daemon --prefetch adaptive`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefetchSize {
    Kb(u32),
    Adaptive,
}

impl<'de> Deserialize<'de> for PrefetchSize {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Kb(u32),
            Word(String),
        }
        match Raw::deserialize(d)? {
            Raw::Kb(kb) => Ok(PrefetchSize::Kb(kb)),
            Raw::Word(w) if w == "adaptive" => Ok(PrefetchSize::Adaptive),
            Raw::Word(w) => Err(serde::de::Error::custom(format!("prefetch size {w:?}: give KiB or \"adaptive\""))),
        }
    }
}

impl Serialize for PrefetchSize {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            PrefetchSize::Kb(kb) => s.serialize_u32(*kb),
            PrefetchSize::Adaptive => s.serialize_str("adaptive"),
        }
    }
}

impl<T: Clone> OneOrMany<T> {
    fn values(&self) -> Vec<T> {
        match self {
            OneOrMany::One(v) => vec![v.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

/// One `[[config]]` as written.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigSection {
    pub name: String,
    #[serde(default)]
    pub kind: RunKind,
    pub server: Option<ServerKind>,
    /// Template file name in the templates directory.
    pub template: Option<String>,
    /// Server binary (defaults to the Debian path, or `[paths]`).
    pub binary: Option<PathBuf>,
    pub libception: Option<Mode>,
    pub prefetch_kb: Option<OneOrMany<PrefetchSize>>,
    pub read_ahead_kb: Option<OneOrMany<u32>>,
    pub max_request_kb: Option<u32>,
    /// Template variables (e.g. `aio = "threads"`), checked against the template.
    #[serde(default)]
    pub knobs: BTreeMap<String, String>,
    pub rates: Option<RatesSection>,
    pub trace: Option<bool>,
    /// Name shown in reports (defaults to `name`).
    #[serde(default)]
    pub label: Option<String>,
}

/// A checked experiment with every path resolved and sweeps expanded.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Experiment {
    pub name: String,
    pub description: String,
    /// The file it was read from.
    pub source: PathBuf,
    pub templates: PathBuf,
    pub workload: WorkloadSource,
    pub disk: DiskSection,
    pub memory_limit_bytes: u64,
    pub run: RunSection,
    pub paths: PathsSection,
    pub configs: Vec<Config>,
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
    Fixed { rates: Vec<f64>, repetitions: u32, threshold_pct: f64 },
    Search { search: SearchSection, threshold_pct: f64 },
    /// The `wc` bound has no rate: one run per repetition.
    None { repetitions: u32 },
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
    /// Fixed prefetch size; `None` with `prefetch_adaptive`.
    pub prefetch_kb: Option<u32>,
    /// The daemon sizes its prefetches itself (paper 001). Left out of the JSON
    /// when false so that results written before it existed still resume.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prefetch_adaptive: bool,
    pub read_ahead_kb: u32,
    pub max_request_kb: u32,
    pub knobs: BTreeMap<String, String>,
    pub rates: RatePlan,
    pub trace: bool,
}

/// An experiment file that cannot be used; the message names the file and the key or line.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    #[error("cannot read experiment file {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("experiment file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("experiment file {path}: {key}: {message}")]
    Invalid { path: PathBuf, key: String, message: String },
}

impl Experiment {
    /// Reads, parses and checks an experiment file.
    pub fn from_file(path: &Path) -> Result<Experiment, ExperimentError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ExperimentError::Io { path: path.to_owned(), source })?;
        Self::from_str(&text, path)
    }

    /// Parses and checks experiment text; `path` names it in errors and anchors relative paths.
    pub fn from_str(text: &str, path: &Path) -> Result<Experiment, ExperimentError> {
        let file: ExperimentFile = toml::from_str(text).map_err(|e| ExperimentError::Parse {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let base = path
            .parent()
            .map(|p| if p.as_os_str().is_empty() { Path::new(".") } else { p })
            .unwrap_or(Path::new("."));
        let base = std::fs::canonicalize(base).unwrap_or_else(|_| base.to_owned());
        check(file, path, &base)
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
        self.configs.retain(|c| names.iter().any(|n| n == &c.name || n == &c.base));
        Ok(())
    }
}

fn invalid(path: &Path, key: impl Into<String>, message: impl Into<String>) -> ExperimentError {
    ExperimentError::Invalid { path: path.to_owned(), key: key.into(), message: message.into() }
}

fn check_rates(path: &Path, key: &str, rates: &RatesSection) -> Result<RatePlan, ExperimentError> {
    if !(rates.threshold_pct.is_finite() && rates.threshold_pct > 0.0 && rates.threshold_pct < 100.0) {
        return Err(invalid(path, format!("{key}.threshold_pct"), "must be a percentage above 0 and below 100"));
    }
    if rates.repetitions == 0 {
        return Err(invalid(path, format!("{key}.repetitions"), "must be at least 1"));
    }
    match (&rates.fixed, &rates.search) {
        (Some(_), Some(_)) => Err(invalid(path, key, "give either `fixed` or `search`, not both")),
        (None, None) => Err(invalid(path, key, "give `fixed = [rates...]` or a `search` table")),
        (Some(fixed), None) => {
            if fixed.is_empty() {
                return Err(invalid(path, format!("{key}.fixed"), "is empty"));
            }
            for (i, r) in fixed.iter().enumerate() {
                if !(r.is_finite() && *r > 0.0) {
                    return Err(invalid(path, format!("{key}.fixed[{i}]"), format!("rate {r} must be a positive number of sessions per second")));
                }
            }
            Ok(RatePlan::Fixed { rates: fixed.clone(), repetitions: rates.repetitions, threshold_pct: rates.threshold_pct })
        }
        (None, Some(s)) => {
            let k = format!("{key}.search");
            if !(s.low.is_finite() && s.low > 0.0) {
                return Err(invalid(path, format!("{k}.low"), "must be a positive rate"));
            }
            if !(s.high.is_finite() && s.high > s.low) {
                return Err(invalid(path, format!("{k}.high"), format!("must be above low ({})", s.low)));
            }
            if s.coarse_points < 2 {
                return Err(invalid(path, format!("{k}.coarse_points"), "must be at least 2"));
            }
            if !(s.resolution.is_finite() && s.resolution > 0.0) {
                return Err(invalid(path, format!("{k}.resolution"), "must be a positive rate"));
            }
            if s.repetitions == 0 {
                return Err(invalid(path, format!("{k}.repetitions"), "must be at least 1"));
            }
            Ok(RatePlan::Search { search: *s, threshold_pct: rates.threshold_pct })
        }
    }
}

fn resolve(base: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_owned()
    } else {
        base.join(p)
    }
}

fn check_kb(path: &Path, key: &str, v: u32, max: u32) -> Result<(), ExperimentError> {
    if v == 0 || v > max {
        return Err(invalid(path, key, format!("{v} KiB is out of range (1..={max})")));
    }
    Ok(())
}

fn check(file: ExperimentFile, path: &Path, base: &Path) -> Result<Experiment, ExperimentError> {
    let name_ok = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
    if !name_ok(&file.name) {
        return Err(invalid(path, "name", "must be non-empty and use only letters, digits, '-', '_' and '.'"));
    }
    let workload = match (&file.workload.spec, &file.workload.dir) {
        (Some(s), None) => WorkloadSource::Spec(resolve(base, s)),
        (None, Some(d)) => WorkloadSource::Dir(resolve(base, d)),
        _ => return Err(invalid(path, "workload", "give exactly one of `spec` (a spec to generate) or `dir` (a generated workload)")),
    };
    if file.disk.preset.is_empty() {
        return Err(invalid(path, "disk.preset", "is empty"));
    }
    check_kb(path, "disk.read_ahead_kb", file.disk.read_ahead_kb, 1 << 20)?;
    check_kb(path, "disk.max_request_kb", file.disk.max_request_kb, 1 << 20)?;
    if file.memory.limit_mb < 16 {
        return Err(invalid(path, "memory.limit_mb", format!("{} MiB is too small to run a server (at least 16)", file.memory.limit_mb)));
    }
    let run = &file.run;
    match (run.duration_s, run.sessions) {
        (Some(d), None) if d.is_finite() && d > 0.0 => {}
        (Some(_), None) => return Err(invalid(path, "run.duration_s", "must be a positive number of seconds")),
        (None, Some(n)) if n > 0 => {}
        (None, Some(_)) => return Err(invalid(path, "run.sessions", "must be at least 1")),
        _ => return Err(invalid(path, "run", "give exactly one of `duration_s` or `sessions`")),
    }
    if !matches!(run.drop_caches, 0..=3) {
        return Err(invalid(path, "run.drop_caches", "must be 0 (do not drop), 1, 2 or 3"));
    }
    if run.port == 0 {
        return Err(invalid(path, "run.port", "must be a TCP port above 0"));
    }
    if run.workers == 0 || run.workers > 1024 {
        return Err(invalid(path, "run.workers", "must be between 1 and 1024"));
    }
    if run.threads_per_worker == 0 || run.threads_per_worker > 4096 {
        return Err(invalid(path, "run.threads_per_worker", "must be between 1 and 4096"));
    }
    if !(run.ready_timeout_s.is_finite() && run.ready_timeout_s > 0.0) {
        return Err(invalid(path, "run.ready_timeout_s", "must be a positive number of seconds"));
    }
    if !(run.settle_s.is_finite() && run.settle_s >= 0.0) {
        return Err(invalid(path, "run.settle_s", "must be zero or more seconds"));
    }
    if run.max_session_s.is_some_and(|m| !(m.is_finite() && m > 0.0)) {
        return Err(invalid(path, "run.max_session_s", "must be a positive number of seconds"));
    }
    if run.user.is_empty() {
        return Err(invalid(path, "run.user", "is empty"));
    }
    let default_plan = match &file.rates {
        Some(r) => Some(check_rates(path, "rates", r)?),
        None => None,
    };
    if file.configs.is_empty() {
        return Err(invalid(path, "config", "the experiment has no [[config]]"));
    }
    let templates = resolve(base, &file.templates);
    let mut configs = Vec::new();
    let mut names = HashSet::new();
    for (i, c) in file.configs.iter().enumerate() {
        let key = format!("config[{i}] ({:?})", c.name);
        if !name_ok(&c.name) {
            return Err(invalid(path, format!("config[{i}].name"), "must be non-empty and use only letters, digits, '-', '_' and '.'"));
        }
        let plan = match (&c.rates, &default_plan, c.kind) {
            (_, _, RunKind::Wc) => {
                let reps = c.rates.as_ref().map(|r| r.repetitions).unwrap_or(1);
                if c.rates.as_ref().is_some_and(|r| r.fixed.is_some() || r.search.is_some()) {
                    return Err(invalid(path, format!("{key}.rates"), "a wc configuration has no rates (only `repetitions`)"));
                }
                if reps == 0 {
                    return Err(invalid(path, format!("{key}.rates.repetitions"), "must be at least 1"));
                }
                RatePlan::None { repetitions: reps }
            }
            (Some(r), _, _) => check_rates(path, &format!("{key}.rates"), r)?,
            (None, Some(p), _) => p.clone(),
            (None, None, _) => return Err(invalid(path, format!("{key}.rates"), "no rates here and no top-level [rates]")),
        };
        let (server, template) = match c.kind {
            RunKind::Server => {
                let Some(server) = c.server else {
                    return Err(invalid(path, format!("{key}.server"), "is missing (nginx, apache or lighttpd)"));
                };
                let t = templates.join(c.template.as_deref().unwrap_or(server.default_template()));
                if !t.is_file() {
                    return Err(invalid(path, format!("{key}.template"), format!("template {} does not exist", t.display())));
                }
                (Some(server), Some(t))
            }
            RunKind::Wc => {
                for (k, set) in [
                    ("server", c.server.is_some()),
                    ("template", c.template.is_some()),
                    ("binary", c.binary.is_some()),
                    ("libception", c.libception.is_some()),
                    ("prefetch_kb", c.prefetch_kb.is_some()),
                    ("knobs", !c.knobs.is_empty()),
                ] {
                    if set {
                        return Err(invalid(path, format!("{key}.{k}"), "does not apply to a wc configuration"));
                    }
                }
                (None, None)
            }
        };
        match (c.libception, &c.prefetch_kb) {
            (Some(Mode::Full | Mode::Prefetch), None) => {
                return Err(invalid(path, format!("{key}.prefetch_kb"), "is needed by libception modes full and prefetch"))
            }
            (None | Some(Mode::Track | Mode::Off | Mode::Serialize), Some(_)) => {
                return Err(invalid(path, format!("{key}.prefetch_kb"), "only applies to libception modes full and prefetch"))
            }
            _ => {}
        }
        let prefetches: Vec<Option<PrefetchSize>> = match &c.prefetch_kb {
            None => vec![None],
            Some(p) => p.values().into_iter().map(Some).collect(),
        };
        if c.libception != Some(Mode::Full) && prefetches.contains(&Some(PrefetchSize::Adaptive)) {
            return Err(invalid(path, format!("{key}.prefetch_kb"), "\"adaptive\" needs the daemon: libception mode full"));
        }
        let read_aheads = c.read_ahead_kb.as_ref().map(|r| r.values()).unwrap_or_else(|| vec![file.disk.read_ahead_kb]);
        if prefetches.is_empty() || read_aheads.is_empty() {
            return Err(invalid(path, key, "an empty list in prefetch_kb or read_ahead_kb"));
        }
        for p in prefetches.iter().flatten() {
            if let PrefetchSize::Kb(kb) = p {
                check_kb(path, &format!("{key}.prefetch_kb"), *kb, 1 << 20)?;
            }
        }
        for r in &read_aheads {
            check_kb(path, &format!("{key}.read_ahead_kb"), *r, 1 << 20)?;
        }
        let max_request_kb = c.max_request_kb.unwrap_or(file.disk.max_request_kb);
        check_kb(path, &format!("{key}.max_request_kb"), max_request_kb, 1 << 20)?;
        for k in c.knobs.keys() {
            if k.is_empty() || !k.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_') {
                return Err(invalid(path, format!("{key}.knobs.{k}"), "knob names use letters, digits and '_'"));
            }
        }
        let sweep_p = prefetches.len() > 1;
        let sweep_r = read_aheads.len() > 1;
        for p in &prefetches {
            for r in &read_aheads {
                let mut name = c.name.clone();
                match p {
                    Some(PrefetchSize::Kb(kb)) if sweep_p => name.push_str(&format!("-p{kb}")),
                    Some(PrefetchSize::Adaptive) if sweep_p => name.push_str("-padaptive"),
                    _ => {}
                }
                if sweep_r {
                    name.push_str(&format!("-ra{r}"));
                }
                if !names.insert(name.clone()) {
                    return Err(invalid(path, format!("{key}.name"), format!("configuration name {name:?} is used twice")));
                }
                configs.push(Config {
                    label: c.label.clone().unwrap_or_else(|| name.clone()),
                    name,
                    base: c.name.clone(),
                    kind: c.kind,
                    server,
                    template: template.clone(),
                    binary: c.binary.clone().map(|b| resolve(base, &b)),
                    libception: c.libception,
                    prefetch_kb: match p {
                        Some(PrefetchSize::Kb(kb)) => Some(*kb),
                        _ => None,
                    },
                    prefetch_adaptive: *p == Some(PrefetchSize::Adaptive),
                    read_ahead_kb: *r,
                    max_request_kb,
                    knobs: c.knobs.clone(),
                    rates: plan.clone(),
                    trace: c.trace.unwrap_or(file.disk.trace),
                });
            }
        }
    }
    Ok(Experiment {
        name: file.name,
        description: file.description,
        source: resolve(&std::env::current_dir().unwrap_or_default(), path),
        templates,
        workload,
        disk: file.disk,
        memory_limit_bytes: file.memory.limit_mb * 1024 * 1024,
        run: file.run,
        paths: file.paths,
        configs,
    })
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

    fn parse(text: &str) -> Result<Experiment, ExperimentError> {
        let dir = write_dir();
        let path = dir.path().join("e.toml");
        std::fs::write(&path, text).unwrap();
        Experiment::from_file(&path)
    }

    #[test]
    fn a_good_file_expands_sweeps_and_resolves_paths() {
        let e = parse(GOOD).unwrap();
        let names: Vec<_> = e.configs.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["vanilla", "lib-p1024", "lib-p2048", "wc"]);
        assert_eq!(e.config("lib-p2048").unwrap().prefetch_kb, Some(2048));
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
        assert!(adaptive.prefetch_adaptive);
        assert_eq!(adaptive.prefetch_kb, None);
        assert!(!e.config("lib-p2048").unwrap().prefetch_adaptive);
        let err = parse(&GOOD.replace("libception = \"full\"\nprefetch_kb = [1024, 2048]", "libception = \"prefetch\"\nprefetch_kb = \"adaptive\"")).unwrap_err().to_string();
        assert!(err.contains("config[1] (\"lib\").prefetch_kb") && err.contains("mode full"), "{err}");
        let err = parse(&GOOD.replace("prefetch_kb = [1024, 2048]", "prefetch_kb = \"big\"")).unwrap_err().to_string();
        assert!(err.contains("big") && err.contains("line 21"), "{err}");
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
    fn unknown_keys_name_the_key_and_line() {
        let text = GOOD.replace("[memory]\nlimit_mb = 256", "[memory]\nlimit_mb = 256\nlimit_gb = 1");
        let err = parse(&text).unwrap_err().to_string();
        assert!(err.contains("limit_gb"), "{err}");
        assert!(err.contains("line 10"), "{err}");
        assert!(err.contains("e.toml"), "{err}");
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
        ];
        for (text, want) in cases {
            let err = parse(&text).unwrap_err().to_string();
            assert!(err.contains(want), "{err:?} should mention {want:?}");
        }
    }

    #[test]
    fn wrong_types_and_enums_name_the_line() {
        let err = parse(&GOOD.replace("server = \"nginx\"\n[[config]]\nname = \"lib\"", "server = \"iis\"\n[[config]]\nname = \"lib\"")).unwrap_err().to_string();
        assert!(err.contains("iis") && err.contains("line 16"), "{err}");
        let err = parse(&GOOD.replace("duration_s = 60", "duration_s = \"long\"")).unwrap_err().to_string();
        assert!(err.contains("line 11"), "{err}");
    }

    #[test]
    fn the_bundled_experiments_are_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/experiments");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                Experiment::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
                seen += 1;
            }
        }
        assert!(seen >= 4, "expected the four bundled experiments in {}", dir.display());
    }
}
