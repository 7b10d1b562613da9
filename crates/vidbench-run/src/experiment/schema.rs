//! The experiment file as written: the TOML tables of `vidbench run
//! EXPERIMENT.toml` as serde types, with their defaults.
//!
//! `deny_unknown_fields` everywhere, so a misspelt key is an error that names
//! its line (the toml crate's message). What types cannot say (ranges,
//! exclusive keys, names used twice) is checked in [`super::expand`].

use libception_proto::{AdaptiveParams, Mode, Prefetch};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
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
///
/// `mode` chooses FUSE mode (the default, what files without the key always
/// meant) or block mode (loop device + real filesystem, docs/disk.md "Block
/// mode"); `auto` is block mode where the machine supports it and FUSE mode
/// otherwise, resolved once when the driver starts
/// ([`crate::Experiment::resolve_disk_mode`]), so results never record `auto`.
/// Keys of one mode are refused in the other (in `auto` both may be given,
/// and the resolved mode's are used). New keys are left out of the recorded
/// JSON when unset, so older results record the same `disk` again.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DiskSection {
    #[serde(default, skip_serializing_if = "DiskMode::is_fuse")]
    pub mode: DiskMode,
    /// Drive preset of `vidbench disk mount --preset`.
    pub preset: String,
    /// The readahead of the mount (FUSE) or the device (block: `read_ahead_kb`).
    #[serde(default = "default_kb")]
    pub read_ahead_kb: u32,
    /// FUSE mode: the largest read the kernel may send (FUSE `max_pages`, the
    /// analogue of `max_sectors_kb`); 128 when unset in FUSE mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_request_kb: Option<u32>,
    /// Block mode: filesystem on the drive (default ext4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs: Option<FsKind>,
    /// Block mode: how much of the drive the filesystem covers (default whole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_size: Option<FsSize>,
    /// Block mode: free space of a packed filesystem, percent of the library.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_slack_pct: Option<u32>,
    /// Block mode: order in which the image builder writes the files (default library).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fill_order: Option<FillOrder>,
    /// Block mode: seed of a shuffled fill order (default: the manifest's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fill_seed: Option<u64>,
    /// Block mode: directory of built images (relative to the experiment
    /// file; default: the disk's own cache, `vidbench disk mount --image-cache`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_cache: Option<PathBuf>,
    /// Block mode: I/O scheduler of the device (default mq-deadline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<Scheduler>,
    /// Block mode: `max_sectors_kb` of the device (4..=32767; above the loop
    /// device's 1280 the emulated drive joins; default the kernel's, 1280 here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sectors_kb: Option<u32>,
    /// Block mode: `nr_requests` of the device (default the scheduler's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nr_requests: Option<u32>,
    /// Record the disk trace in every run (configurations may override).
    #[serde(default)]
    pub trace: bool,
    /// Drives (paper 000 section 7): each a mount of the same library at
    /// `RESULTS/mnt/dK`, every video served from one of them only (a seeded
    /// draw per file); 1 (default) mounts at `RESULTS/mnt` as always.
    #[serde(default = "one_disk", skip_serializing_if = "is_one")]
    pub count: u32,
    /// Extra arguments for `vidbench disk mount`, passed as they are.
    #[serde(default)]
    pub args: Vec<String>,
}

/// `[disk] mode`.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum DiskMode {
    /// The FUSE filesystem of `vidbench disk mount`.
    #[default]
    Fuse,
    /// `vidbench disk mount --block`.
    Block,
    /// Block where supported, else FUSE (resolved when the driver starts).
    Auto,
}

impl DiskMode {
    pub fn is_fuse(&self) -> bool {
        *self == DiskMode::Fuse
    }
    pub fn name(self) -> &'static str {
        match self {
            DiskMode::Fuse => "fuse",
            DiskMode::Block => "block",
            DiskMode::Auto => "auto",
        }
    }
}

/// The block-mode choices (`fs`, `fs_size`, `fill_order`, `scheduler`) are the
/// disk's own types, so an experiment file names them as `vidbench disk mount`
/// does.
pub use vidbench_disk::block::{FillOrder, FsKind, FsSize, Scheduler};

fn one_disk() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
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
    /// Then fill the cache to this percentage of the memory limit with the
    /// ranges the sessions request most, read in file order (`reader.rs`,
    /// `fill_list`): the drive reads them nearly sequentially, several times
    /// faster than the load fills the cache, so a steady-state window can
    /// open sooner. Absent = no fill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm_fill_pct: Option<f64>,
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
    /// The steady-state protocol (`docs/run.md`): measured windows after a
    /// ramp, full sessions, every MB/s over the window. Replaces
    /// `duration_s`, `sessions` and `max_session_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady: Option<SteadySection>,
    /// DAMON's proactive reclaim (a kdamond paging out memory untouched for a
    /// while) during the experiment: turned off and on again at the end
    /// (`pause`, the default), or left running (`keep`). See `reclaim.rs`.
    #[serde(default, skip_serializing_if = "ReclaimPolicy::is_pause")]
    pub proactive_reclaim: ReclaimPolicy,
}

/// What the driver does with DAMON's proactive reclaim.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ReclaimPolicy {
    #[default]
    Pause,
    Keep,
}

impl ReclaimPolicy {
    fn is_pause(&self) -> bool {
        *self == ReclaimPolicy::Pause
    }

    /// The value in the experiment file.
    pub fn name(self) -> &'static str {
        match self {
            ReclaimPolicy::Pause => "pause",
            ReclaimPolicy::Keep => "keep",
        }
    }
}

/// Timing of the steady-state protocol, in seconds (each a multiple of the
/// 5-second sample interval, so that the load's and the disk's samples share
/// the window's edges).
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SteadySection {
    /// Arrivals at the first rate of a run before its first window, from an
    /// idle server with a warmed cache.
    pub ramp_s: f64,
    /// Arrivals at a new rate before its window, in a run that changes rate.
    pub settle_s: f64,
    /// The measured window.
    pub measure_s: f64,
    /// After the window at the same rate: failures of the window's sessions
    /// up to the end of the hold still count.
    pub hold_s: f64,
    /// Probe every rate of a configuration as a step of one run (true), or
    /// each in its own run with its own ramp (false).
    #[serde(default = "yes")]
    pub one_run: bool,
    /// The settling gate (docs/run.md): `ramp_s` and `settle_s` become
    /// minimums and a window opens only when at most this percentage of the
    /// steady-state sessions at its rate are missing or in excess, after
    /// earlier rates and failed sessions; absent = no gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_pct: Option<f64>,
    /// With the gate: the longest ramp or settling before a window opens
    /// anyway (the step then records that it did not settle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_settle_s: Option<f64>,
    /// With the gate: the page cache must have settled as well, neither of
    /// the memory cgroup's file LRU lists (averaged over 30 s) moving by more
    /// than this percentage of its file pages over the last two minutes
    /// (`steady::lru_settled`); absent = the sessions alone decide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lru_pct: Option<f64>,
    /// Population matching (docs/run.md): at the start of every step that
    /// changes rate, make the sessions in play a sample of the new rate's
    /// steady state (sessions in progress added, joining over this many
    /// seconds, or sessions withdrawn), instead of waiting for the arrivals
    /// to build it up; absent = no matching. At most `settle_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join_s: Option<f64>,
}

/// The load's sample interval, seconds; the steady-state timings are multiples of it.
pub const SAMPLE_INTERVAL_S: f64 = 5.0;

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
    /// Or search by bracketing from a start rate in relative steps (the
    /// steady-state protocol's search; see `search.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bracket: Option<BracketSection>,
    /// With `fixed`: its values are fractions of this configuration's
    /// maximum failure-free rate (a search run before, here or in another
    /// results directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relative_to: Option<super::RelativeTo>,
    /// Runs per fixed rate.
    #[serde(default = "one_u32")]
    pub repetitions: u32,
    /// A rate fails when at least this percentage of sessions fail; a
    /// configuration's own `rates` inherit the top-level value, else 0.3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold_pct: Option<f64>,
}

fn one_u32() -> u32 {
    1
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

/// The bracketing search: from `start`, steps of `step_pct` until the outcome
/// flips, bisection down to `resolution_pct`, then `repetitions` outcomes at
/// the result and at the failing rate above it; at most `max_probes` probes.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BracketSection {
    pub start: f64,
    #[serde(default = "default_step_pct")]
    pub step_pct: f64,
    #[serde(default = "default_resolution_pct")]
    pub resolution_pct: f64,
    #[serde(default = "default_reps")]
    pub repetitions: u32,
    #[serde(default = "default_max_probes")]
    pub max_probes: u32,
}

fn default_step_pct() -> f64 {
    20.0
}
fn default_resolution_pct() -> f64 {
    5.0
}
fn default_max_probes() -> u32 {
    16
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
    /// laio-httpd; default: `bin/laio-httpd` of the build directory.
    pub laio: Option<PathBuf>,
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
    /// laio-httpd (native/laio-httpd): the event-driven server on liblaio.
    Laio,
}

impl ServerKind {
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Nginx => "nginx",
            ServerKind::Apache => "apache",
            ServerKind::Lighttpd => "lighttpd",
            ServerKind::Laio => "laio",
        }
    }
    pub fn default_template(self) -> &'static str {
        match self {
            ServerKind::Nginx => "nginx.conf",
            ServerKind::Apache => "apache.conf",
            ServerKind::Lighttpd => "lighttpd.conf",
            ServerKind::Laio => "laio.conf",
        }
    }
    /// Where the binary is when neither the configuration nor `[paths]` says:
    /// Debian's servers in /usr/sbin, laio-httpd in the build directory.
    pub fn default_binary(self, build: &Path) -> PathBuf {
        match self {
            ServerKind::Nginx => PathBuf::from("/usr/sbin/nginx"),
            ServerKind::Apache => PathBuf::from("/usr/sbin/apache2"),
            ServerKind::Lighttpd => PathBuf::from("/usr/sbin/lighttpd"),
            ServerKind::Laio => build.join("bin/laio-httpd"),
        }
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

/// The adaptive controller's parameters an experiment may set (the daemon's
/// `--adaptive-*` flags; absent keys keep the daemon's defaults, paper 001's
/// values but for `settle`). An experiment
/// shorter than the paper's 3,900 s scales `interval_s` down so that the
/// controller still makes its decisions (docs/run.md, "Adaptive prefetching").
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AdaptiveSection {
    pub interval_s: Option<f64>,
    /// Intervals after each change of size recorded but not scored (absent:
    /// the daemon's default, 1; 0 is paper 001's rule).
    pub settle: Option<u32>,
    pub start_kb: Option<u32>,
    pub probe: Option<bool>,
    pub min_kb: Option<u32>,
    pub max_kb: Option<u32>,
    pub step_kb: Option<u32>,
    pub deflation: Option<f64>,
    pub busy: Option<f64>,
    pub evict: Option<f64>,
    pub scale: Option<libception_proto::BitrateScale>,
    pub transaction_kb: Option<u32>,
    /// Gradual change: largest change of the size in force, KiB per second.
    pub ramp_rate_kb: Option<u32>,
    /// Stream rate for the eviction-time jump, KiB per second (absent: estimated).
    pub stream_rate_kb: Option<f64>,
    /// Seconds after which a prefetched range nobody came back to is wasted.
    pub waste_after_s: Option<f64>,
}

impl AdaptiveSection {
    /// The daemon's default parameters with these changes.
    pub fn params(&self) -> AdaptiveParams {
        let d = AdaptiveParams::default();
        let kb = |v: Option<u32>, default: u64| v.map_or(default, |kb| u64::from(kb) * 1024);
        AdaptiveParams {
            start: self.start_kb.map(|kb| u64::from(kb) * 1024).or(d.start),
            probe: self.probe.unwrap_or(d.probe),
            min: kb(self.min_kb, d.min),
            max: kb(self.max_kb, d.max),
            step: kb(self.step_kb, d.step),
            interval: self.interval_s.map_or(d.interval, std::time::Duration::from_secs_f64),
            settle: self.settle.unwrap_or(d.settle),
            deflation: self.deflation.unwrap_or(d.deflation),
            busy: self.busy.unwrap_or(d.busy),
            evict: self.evict.unwrap_or(d.evict),
            scale: self.scale.unwrap_or(d.scale),
            transaction: kb(self.transaction_kb, d.transaction),
            ramp_rate: kb(self.ramp_rate_kb, d.ramp_rate),
            stream_rate: self.stream_rate_kb.map(|kb| kb * 1024.0).or(d.stream_rate),
            waste_after: self.waste_after_s.map_or(d.waste_after, std::time::Duration::from_secs_f64),
            ..d
        }
    }
}

impl PrefetchSize {
    /// The daemon's setting: KiB as bytes, or the adaptive controller with
    /// `adaptive`'s parameters.
    pub fn to_prefetch(self, adaptive: &AdaptiveParams) -> Prefetch {
        match self {
            PrefetchSize::Kb(kb) => Prefetch::Fixed(u64::from(kb) * 1024),
            PrefetchSize::Adaptive => Prefetch::Adaptive(adaptive.clone()),
        }
    }

    /// The suffix of a sweep's configuration names: `-p2048`, `-padaptive`.
    pub fn name_suffix(self) -> String {
        match self {
            PrefetchSize::Kb(kb) => format!("-p{kb}"),
            PrefetchSize::Adaptive => "-padaptive".into(),
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
    /// The values in order; one value is a list of one.
    pub fn values(&self) -> Vec<T> {
        match self {
            OneOrMany::One(v) => vec![v.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

/// `promote = true | false | "auto"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromoteSetting {
    Always(bool),
    Auto,
}

impl Serialize for PromoteSetting {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            PromoteSetting::Always(b) => s.serialize_bool(*b),
            PromoteSetting::Auto => s.serialize_str("auto"),
        }
    }
}

impl<'de> Deserialize<'de> for PromoteSetting {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = PromoteSetting;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("true, false or \"auto\"")
            }
            fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<PromoteSetting, E> {
                Ok(PromoteSetting::Always(b))
            }
            fn visit_str<E: serde::de::Error>(self, w: &str) -> Result<PromoteSetting, E> {
                match w {
                    "auto" => Ok(PromoteSetting::Auto),
                    _ => Err(E::invalid_value(serde::de::Unexpected::Str(w), &self)),
                }
            }
        }
        d.deserialize_any(V)
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
    /// Parameters of the adaptive controller (`prefetch_kb = "adaptive"`).
    pub adaptive: Option<AdaptiveSection>,
    pub read_ahead_kb: Option<OneOrMany<u32>>,
    /// FUSE mode only.
    pub max_request_kb: Option<u32>,
    /// Block mode only: the device's I/O scheduler(s), `max_sectors_kb`,
    /// `nr_requests`; a list is a sweep, like `read_ahead_kb`.
    pub scheduler: Option<OneOrMany<Scheduler>>,
    pub max_sectors_kb: Option<OneOrMany<u32>>,
    pub nr_requests: Option<OneOrMany<u32>>,
    /// Template variables (e.g. `aio = "threads"`), checked against the template.
    #[serde(default)]
    pub knobs: BTreeMap<String, String>,
    pub rates: Option<RatesSection>,
    pub trace: Option<bool>,
    /// Name shown in reports (defaults to `name`).
    #[serde(default)]
    pub label: Option<String>,
    /// Kill the daemon during the load and start it again (issue 13's chaos
    /// benchmark); needs a mode with a daemon.
    pub chaos: Option<ChaosSection>,
    /// The daemon serializes each drive on its own worker (`libception daemon
    /// --per-disk`) instead of one worker for all; needs a mode with a daemon.
    pub per_disk: Option<bool>,
    /// The daemon reads each range a second time from the cache so that its
    /// pages start on the active LRU list (`libception daemon --promote`):
    /// `true`, `false`, or `"auto"` (from the first window in which the
    /// daemon saw prefetched bytes evicted before use); needs a mode with a
    /// daemon.
    pub promote: Option<PromoteSetting>,
    /// The daemon takes each disk's queued reads in disk order, sweeping
    /// upwards, instead of as they came (`libception daemon --queue-order
    /// position`); needs a mode with a daemon.
    pub queue_by_position: Option<bool>,
    /// The daemon answers each client waiting on a read once its own range
    /// is read, not at the read's end (`libception daemon --reply range`);
    /// needs a mode with a daemon.
    pub reply_by_range: Option<bool>,
    /// With a fixed `prefetch_kb` under the daemon: a slower stream's size
    /// follows its estimated bitrate by this rule or factor (`libception
    /// daemon --prefetch-scale`; paper 001 Fig 10). The adaptive controller
    /// takes `adaptive.scale` instead.
    pub prefetch_scale: Option<libception_proto::BitrateScale>,
    /// The shim writes its statistics (call latency histograms: paper 000
    /// Fig 17) in any mode, not only in track mode; needs the shim.
    pub shim_stats: Option<bool>,
    /// The shim's patience (`LIBCEPTION_PATIENCE_MS`): how long a thread keeps
    /// waiting while the daemon answers the server's other threads; absent =
    /// the shim's default. Needs a mode with a daemon.
    pub patience_ms: Option<u32>,
    /// Threads per Apache child process for this configuration, in place of
    /// `run.threads_per_worker` (Apache only).
    pub threads_per_worker: Option<u32>,
    /// Worker processes of this configuration's server, in place of
    /// `run.workers` (servers only): each server with the count it is
    /// tuned to, the same by default and under Libception (docs/run.md,
    /// "Worker processes and threads").
    pub workers: Option<u32>,
    /// This configuration's minimum ramp before its first window, in place
    /// of `run.steady.ramp_s` (docs/run.md, "A ramp of its own"): a
    /// configuration whose page cache passes its transition burst later
    /// than the others' waits for it without lengthening every run.
    pub ramp_s: Option<f64>,
}

/// `chaos = { kill_every_s = 5, restart_after_s = 1 }`: every `kill_every_s`
/// seconds of load the daemon gets SIGKILL, and `restart_after_s` later a new
/// one starts on the same socket, as systemd's `Restart=always` with
/// `RestartSec=` would start it (dist/systemd/libception.service).
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ChaosSection {
    pub kill_every_s: f64,
    #[serde(default = "default_restart_after_s")]
    pub restart_after_s: f64,
}

fn default_restart_after_s() -> f64 {
    1.0
}
