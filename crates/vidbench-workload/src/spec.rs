//! The workload specification: paper 003's Table 2 as a TOML file.
//!
//! Paper 003 (section 4) separates the parameters expected to stay put for years
//! (what the videos are like: count, popularity, durations, storage) from the
//! ones an experimenter varies (how clients behave: session count, watched
//! fraction, chunking, pacing, client networks, ramp windows). The file mirrors
//! that split with a `[library]` table (stable) and a `[sessions]` table
//! (variable), plus `[warming]` and `[scaling]`. Every key has the papers'
//! default, so an empty file is paper 003's primary workload stored one file per
//! video (the storage papers 000 and 001 use).
//!
//! Parsing is strict: an unknown key is an error naming the key and its line
//! (serde `deny_unknown_fields`), and [`Spec::validate`] checks what the types
//! cannot (monotone CDFs ending at 1, positive rates, shares summing to 1), naming
//! the key and, when it can be found, its line.

use crate::cdf::Cdf;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use vidbench_library::toml_extends::{self, ExtendsError};

/// Why a spec cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("cannot read workload spec {path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
    /// TOML syntax, an unknown key, or a value of the wrong type (the message
    /// from the TOML parser names the line and the key).
    #[error("workload spec {path}: {message}")]
    Parse { path: PathBuf, message: String },
    /// A file that `extends` names cannot be read.
    #[error("workload spec: {0}")]
    Extends(ExtendsError),
    #[error("workload spec {path}{}: {key}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Invalid { path: PathBuf, line: Option<usize>, key: String, message: String },
}

/// A whole workload specification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Spec {
    /// Name of the workload, used for the library's name and in reports.
    pub name: String,
    /// Free text: where the values come from.
    pub description: String,
    /// Seed of every random draw (durations, bitrates, sessions) unless a table
    /// gives its own.
    pub seed: u64,
    pub scaling: Scaling,
    pub library: LibrarySpec,
    pub sessions: SessionSpec,
    pub warming: WarmingSpec,
}

/// What the workload is scaled for. Informational: the summary reports the
/// ratios memory : library : bytes requested so they can be compared with the
/// papers' (paper 000: 8 GB : 260 GB : 118 GB).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Scaling {
    /// Memory limit (MiB) of the server's cgroup the workload is meant for; 0 = not stated.
    pub memory_limit_mib: u64,
    /// How the workload was scaled from the papers'.
    pub note: String,
}

/// The stable parameters: the video library.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LibrarySpec {
    /// Number of videos (paper 003 Table 2: 10,000; papers 000/001: 20,000 SD).
    pub videos: u32,
    /// Zipf exponent of video popularity (0.8 in all three papers).
    pub zipf_alpha: f64,
    /// Video durations in seconds as a CDF table `[[seconds, F], ...]`.
    #[serde(deserialize_with = "cdf_points")]
    pub duration_cdf: Vec<[f64; 2]>,
    /// The this-many most popular videos get the median duration instead of a
    /// random one (paper 003 section 4.1: 2), so the share of requests the cache
    /// can serve depends less on the seed. 0 turns it off.
    pub median_duration_top: u32,
    /// Encoding rate of every video in kbit/s (paper 003: 419; paper 000: 420;
    /// paper 001: 419 SD, 2095 HD). Exclusive with `bitrate_mix`.
    pub bitrate_kbps: Option<u32>,
    /// Mixed bitrates: each entry gets `share` of the videos (exact counts,
    /// randomly assigned).
    pub bitrate_mix: Option<Vec<BitrateShare>>,
    /// `file-per-video` (HTTP range requests; papers 000/001) or `file-per-chunk`
    /// (a whole-file GET per chunk; paper 003).
    pub storage: Storage,
    /// Seed of the placement: which file gets which popularity rank, and the
    /// on-platter order the emulated disk uses. Defaults to `seed`.
    pub placement_seed: Option<u64>,
    /// Top directory of the files in the manifest (`v/00042.mp4`).
    pub directory: String,
}

/// One bitrate of a mix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BitrateShare {
    pub kbps: u32,
    pub share: f64,
}

/// How videos are stored on the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Storage {
    #[default]
    FilePerVideo,
    FilePerChunk,
}

/// Session arrival process. Only Poisson (paper 003 section 4.2); the load
/// client draws the arrival times at the rate it is asked to offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Arrivals {
    #[default]
    Poisson,
}

/// The variable parameters: the clients.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionSpec {
    /// Number of sessions (paper 003: 7,200; paper 000: 14,400).
    pub count: u32,
    pub arrivals: Arrivals,
    /// A session rate (sessions/s) the workload is meant to be played at, for the
    /// summary's run-time and load estimates. The load client's `--rate` decides.
    pub nominal_rate_per_s: Option<f64>,
    /// Seed of the sessions; defaults to `seed`. Changing it keeps the library.
    pub seed: Option<u64>,
    /// Fraction of the video's bytes a session downloads, as a CDF table
    /// `[[fraction, F], ...]` (paper 003 Figure 3). Rounded up to whole chunks.
    #[serde(deserialize_with = "cdf_points")]
    pub watched_fraction_cdf: Vec<[f64; 2]>,
    /// Playing time of one chunk in seconds (10: Apple HLS). The chunk size in
    /// bytes is `bitrate * chunk_duration_s / 8` (0.5 MB at 419 kbit/s).
    pub chunk_duration_s: f64,
    /// Deadline of each request's whole response in seconds (10).
    pub timeout_s: f64,
    /// Requests issued back to back at the start of a session (3: filling the
    /// playout buffer).
    pub unpaced_initial_requests: u32,
    /// Later requests start one chunk duration after the previous one started.
    /// false: every request is issued when the previous one completes.
    pub pacing: bool,
    /// Sessions at the start of the file left out of the measurement.
    pub ramp_up: u32,
    /// Sessions at the end of the file left out of the measurement.
    pub ramp_down: u32,
    /// Client network classes; each session draws one by share.
    pub classes: Vec<ClientClass>,
}

/// A client network: download bandwidth and one-way delay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientClass {
    pub name: String,
    /// Download bandwidth in Mbit/s (10^6 bit/s).
    pub rate_mbps: f64,
    /// One-way delay in milliseconds, added in each direction.
    #[serde(default = "default_delay_ms")]
    pub delay_ms: u32,
    pub share: f64,
}

/// A CDF table: pairs `[x, F]`, exactly two numbers each (a fixed-size
/// array would drop a third element without a word).
fn cdf_points<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<[f64; 2]>, D::Error> {
    let rows = Vec::<Vec<f64>>::deserialize(d)?;
    rows.iter()
        .enumerate()
        .map(|(i, row)| match row[..] {
            [x, f] => Ok([x, f]),
            _ => Err(serde::de::Error::custom(format!("point {i} has {} numbers; a CDF point is [x, F]", row.len()))),
        })
        .collect()
}

/// Cache warming before a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WarmingSpec {
    /// Number of most popular chunks in `warm.txt` (paper 003 Table 2: 3,500);
    /// 0 writes an empty list.
    pub chunks: u32,
}

fn default_delay_ms() -> u32 {
    50
}

/// Video durations (seconds) after paper 003 Figure 2, from the YouTube
/// measurements of Finamore et al. (IMC 2011). The figure's data points are not
/// published; this table follows its described shape (a bulk of short videos, a
/// peak near 200 s for music videos, a jump at YouTube's former 10-minute limit, a
/// thin tail) and is calibrated so the generated workload matches paper 003
/// Table 3: mean 260 s (the table's unique videos average 258.7 s), median 210 s.
pub const DEFAULT_DURATION_CDF: [[f64; 2]; 15] = [
    [5.0, 0.0],
    [30.0, 0.05],
    [60.0, 0.11],
    [120.0, 0.24],
    [180.0, 0.38],
    [200.0, 0.47],
    [220.0, 0.53],
    [260.0, 0.61],
    [300.0, 0.68],
    [400.0, 0.80],
    [500.0, 0.875],
    [580.0, 0.92],
    [600.0, 0.975],
    [900.0, 0.993],
    [1800.0, 1.0],
];

/// Fraction of a video's bytes downloaded per session after paper 003 Figure 3
/// (Finamore et al.): many sessions stop early (most of the mass below 20 %),
/// about a third download the whole video. Calibrated so that 7,200 sessions
/// with 0.5 MB chunks give paper 003 Table 3's 14.6 requests and 146 s per
/// session. Mean 0.548.
pub const DEFAULT_WATCHED_FRACTION_CDF: [[f64; 2]; 12] = [
    [0.0, 0.0],
    [0.1, 0.185],
    [0.2, 0.305],
    [0.3, 0.385],
    [0.4, 0.445],
    [0.5, 0.495],
    [0.6, 0.535],
    [0.7, 0.575],
    [0.8, 0.605],
    [0.9, 0.635],
    [0.99, 0.665],
    [1.0, 1.0],
];

impl Default for Spec {
    fn default() -> Self {
        Spec {
            name: "workload".into(),
            description: String::new(),
            seed: 1,
            scaling: Scaling::default(),
            library: LibrarySpec::default(),
            sessions: SessionSpec::default(),
            warming: WarmingSpec::default(),
        }
    }
}

impl Default for LibrarySpec {
    fn default() -> Self {
        LibrarySpec {
            videos: 10_000,
            zipf_alpha: 0.8,
            duration_cdf: DEFAULT_DURATION_CDF.to_vec(),
            median_duration_top: 2,
            bitrate_kbps: None,
            bitrate_mix: None,
            storage: Storage::FilePerVideo,
            placement_seed: None,
            directory: "v".into(),
        }
    }
}

impl Default for SessionSpec {
    fn default() -> Self {
        SessionSpec {
            count: 7_200,
            arrivals: Arrivals::Poisson,
            nominal_rate_per_s: None,
            seed: None,
            watched_fraction_cdf: DEFAULT_WATCHED_FRACTION_CDF.to_vec(),
            chunk_duration_s: 10.0,
            timeout_s: 10.0,
            unpaced_initial_requests: 3,
            pacing: true,
            // Paper 003 section 7.1: 200 and 100 sessions per httperf instance, 12
            // instances of 600 sessions: a third of the sessions ramp up, a sixth ramp down.
            ramp_up: 2_400,
            ramp_down: 1_200,
            classes: default_classes(),
        }
    }
}

impl Default for WarmingSpec {
    fn default() -> Self {
        WarmingSpec { chunks: 3_500 }
    }
}

/// Paper 003 Table 1 as configured on its 12 clients: 5 at 10 Mbit/s, 5 at 3.5,
/// 2 at 1, all with 50 ms one-way delay.
pub fn default_classes() -> Vec<ClientClass> {
    let class = |name: &str, rate_mbps, share| ClientClass { name: name.into(), rate_mbps, delay_ms: 50, share };
    vec![class("high", 10.0, 5.0 / 12.0), class("broadband", 3.5, 5.0 / 12.0), class("medium", 1.0, 2.0 / 12.0)]
}

/// Paper 003's SD bitrate, the default.
pub const DEFAULT_BITRATE_KBPS: u32 = 419;

/// Tolerance on shares summing to 1 (specs are written with 3-4 decimals).
const SHARE_TOLERANCE: f64 = 1e-3;

/// Bounds on what one spec may ask for: far above any paper's workload (the
/// largest, paper 000's, has 20,000 videos of at most a few hours and 14,400
/// sessions), and low enough that generation never asks for more memory
/// than a machine has, or overflows a time.
const MAX_VIDEOS: u32 = 10_000_000;
const MAX_SESSIONS: u32 = 10_000_000;
const MAX_DURATION_S: f64 = 7.0 * 86400.0;
const MAX_CHUNKS_PER_VIDEO: f64 = 1_000_000.0;
const MAX_TIMEOUT_S: f64 = 30.0 * 86400.0;

/// A spec that passed validation, with its tables turned into distributions.
#[derive(Debug, Clone)]
pub struct Validated {
    pub spec: Spec,
    pub durations: Cdf,
    pub watched_fraction: Cdf,
    /// `(kbps, share)` with shares normalized to sum to 1.
    pub bitrates: Vec<(u32, f64)>,
}

impl Validated {
    pub fn library_seed(&self) -> u64 {
        self.spec.seed
    }
    pub fn placement_seed(&self) -> u64 {
        self.spec.library.placement_seed.unwrap_or(self.spec.seed)
    }
    pub fn session_seed(&self) -> u64 {
        self.spec.sessions.seed.unwrap_or(self.spec.seed)
    }
    /// Bytes of one chunk of a video encoded at `kbps`.
    pub fn chunk_bytes(&self, kbps: u32) -> u64 {
        chunk_bytes(kbps, self.spec.sessions.chunk_duration_s)
    }
}

/// Bytes of `seconds` of video at `kbps` (rounded to the nearest byte, at least 1).
pub fn chunk_bytes(kbps: u32, seconds: f64) -> u64 {
    ((kbps as f64 * 1000.0 * seconds / 8.0).round() as u64).max(1)
}

impl Spec {
    /// Reads, parses and validates a spec file.
    pub fn load(path: &Path) -> Result<Validated, SpecError> {
        let text =
            std::fs::read_to_string(path).map_err(|error| SpecError::Io { path: path.to_owned(), error })?;
        Spec::parse(&text, path)
    }

    /// Parses and validates spec text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &Path) -> Result<Validated, SpecError> {
        Self::parse_recorded(text, origin).map(|(v, _)| v)
    }

    /// Parses and validates spec text that may `extends = "base.toml"`
    /// another spec in its directory (`vidbench_library::toml_extends`);
    /// also returns the text to record beside a generated workload: `text`
    /// itself, or the merged spec when it extends one.
    pub fn parse_recorded(text: &str, origin: &Path) -> Result<(Validated, String), SpecError> {
        let resolved = toml_extends::resolve(text, origin).map_err(|e| match e {
            e @ ExtendsError::Io { .. } => SpecError::Extends(e),
            ExtendsError::Parse { path, message } => SpecError::Parse { path, message },
        })?;
        let merged = resolved.merged();
        let spec: Spec = resolved.deserialize(text).map_err(|message| SpecError::Parse { path: origin.to_owned(), message })?;
        let recorded = resolved.record_text(text);
        let validated = spec.validate().map_err(|(key, message)| SpecError::Invalid {
            path: origin.to_owned(),
            // A key of a merged spec may sit in any file of the chain.
            line: if merged { None } else { locate_key(text, &key) },
            key,
            message,
        })?;
        Ok((validated, recorded))
    }

    /// Checks the values; the error is `(key, what is wrong)`.
    pub fn validate(self) -> Result<Validated, (String, String)> {
        let err = |key: &str, message: String| Err((key.to_owned(), message));
        let lib = &self.library;
        let ses = &self.sessions;
        if self.name.is_empty() || self.name.contains(['/', '\n']) {
            return err("name", format!("{:?} must be non-empty, one line, without '/'", self.name));
        }
        if lib.videos == 0 || lib.videos > MAX_VIDEOS {
            return err("library.videos", format!("{} must be from 1 to {MAX_VIDEOS}", lib.videos));
        }
        if !(lib.zipf_alpha.is_finite() && lib.zipf_alpha >= 0.0) {
            return err("library.zipf_alpha", format!("{} must be a number >= 0 (0 = uniform)", lib.zipf_alpha));
        }
        let durations = Cdf::new(&lib.duration_cdf).map_err(|m| ("library.duration_cdf".to_owned(), m))?;
        if durations.min() < 0.0 || (durations.min() == 0.0 && durations.points()[0].1 > 0.0) {
            return err("library.duration_cdf", "durations must be positive (no probability on 0 s)".into());
        }
        if durations.max() > MAX_DURATION_S {
            return err("library.duration_cdf", format!("{} s is longer than a video may be (at most {MAX_DURATION_S} s, a week)", durations.max()));
        }
        if lib.median_duration_top > lib.videos {
            return err(
                "library.median_duration_top",
                format!("{} is more than the {} videos", lib.median_duration_top, lib.videos),
            );
        }
        let bitrates = match (&lib.bitrate_kbps, &lib.bitrate_mix) {
            (Some(_), Some(_)) => {
                return err("library.bitrate_mix", "give either bitrate_kbps or bitrate_mix, not both".into())
            }
            (Some(0), None) => return err("library.bitrate_kbps", "must be at least 1 kbit/s".into()),
            (Some(k), None) => vec![(*k, 1.0)],
            (None, None) => vec![(DEFAULT_BITRATE_KBPS, 1.0)],
            (None, Some(mix)) => {
                if mix.is_empty() {
                    return err("library.bitrate_mix", "is empty".into());
                }
                for (i, b) in mix.iter().enumerate() {
                    if b.kbps == 0 {
                        return err(&format!("library.bitrate_mix[{i}].kbps"), "must be at least 1 kbit/s".into());
                    }
                    check_share(&format!("library.bitrate_mix[{i}].share"), b.share)?;
                }
                let shares: Vec<f64> = mix.iter().map(|b| b.share).collect();
                check_share_sum("library.bitrate_mix", &shares)?;
                let total: f64 = shares.iter().sum();
                mix.iter().map(|b| (b.kbps, b.share / total)).collect()
            }
        };
        if lib.directory.is_empty()
            || lib.directory.starts_with('/')
            || lib.directory.split('/').any(|c| c.is_empty() || c == "." || c == "..")
            || lib.directory.contains(char::is_whitespace)
        {
            return err("library.directory", format!("{:?} must be a relative path without spaces, . or ..", lib.directory));
        }

        if ses.count == 0 || ses.count > MAX_SESSIONS {
            return err("sessions.count", format!("{} must be from 1 to {MAX_SESSIONS}", ses.count));
        }
        if let Some(rate) = ses.nominal_rate_per_s {
            if !(rate.is_finite() && rate > 0.0) {
                return err("sessions.nominal_rate_per_s", format!("{rate} must be a positive rate"));
            }
        }
        let watched_fraction =
            Cdf::new(&ses.watched_fraction_cdf).map_err(|m| ("sessions.watched_fraction_cdf".to_owned(), m))?;
        if watched_fraction.min() < 0.0 || watched_fraction.max() > 1.0 {
            return err("sessions.watched_fraction_cdf", "fractions must be between 0 and 1".into());
        }
        if !(ses.chunk_duration_s.is_finite() && ses.chunk_duration_s > 0.0) {
            return err("sessions.chunk_duration_s", format!("{} must be a positive number of seconds", ses.chunk_duration_s));
        }
        if durations.max() / ses.chunk_duration_s > MAX_CHUNKS_PER_VIDEO {
            return err(
                "sessions.chunk_duration_s",
                format!(
                    "{} s cuts the longest video ({} s) into more than {MAX_CHUNKS_PER_VIDEO} chunks (requests of a session)",
                    ses.chunk_duration_s,
                    durations.max()
                ),
            );
        }
        if !(ses.timeout_s.is_finite() && ses.timeout_s > 0.0 && ses.timeout_s <= MAX_TIMEOUT_S) {
            return err("sessions.timeout_s", format!("{} must be a positive number of seconds up to {MAX_TIMEOUT_S} (30 days)", ses.timeout_s));
        }
        if ses.ramp_up as u64 + ses.ramp_down as u64 >= ses.count as u64 {
            return err(
                "sessions.ramp_up",
                format!(
                    "ramp_up ({}) + ramp_down ({}) leave no measured session out of {}",
                    ses.ramp_up, ses.ramp_down, ses.count
                ),
            );
        }
        if ses.classes.is_empty() {
            return err("sessions.classes", "needs at least one client class".into());
        }
        for (i, c) in ses.classes.iter().enumerate() {
            if c.name.is_empty() || c.name.contains(|ch: char| ch.is_whitespace() || ch == '=') {
                return err(&format!("sessions.classes[{i}].name"), format!("{:?} must be one word without '='", c.name));
            }
            if ses.classes[..i].iter().any(|o| o.name == c.name) {
                return err(&format!("sessions.classes[{i}].name"), format!("{:?} is used twice", c.name));
            }
            if !(c.rate_mbps.is_finite() && c.rate_mbps >= 0.0) {
                return err(
                    &format!("sessions.classes[{i}].rate_mbps"),
                    format!("{} must be a rate >= 0 (0 = uncapped)", c.rate_mbps),
                );
            }
            check_share(&format!("sessions.classes[{i}].share"), c.share)?;
        }
        let shares: Vec<f64> = ses.classes.iter().map(|c| c.share).collect();
        check_share_sum("sessions.classes", &shares)?;
        check_classes_receive_a_chunk(ses, &bitrates)?;
        Ok(Validated { spec: self, durations, watched_fraction, bitrates })
    }
}

/// Every capped client class must be able to receive the largest chunk
/// within the deadline, or it fails every session whatever the server does and
/// no maximum failure-free rate exists. The worst request is a session's first
/// (or one after the server closed the connection): its deadline runs from when
/// it is issued, so it pays the TCP handshake (two one-way delays), the request
/// going out and the response being seen (two more), plus the chunk's bytes at
/// the class's rate (as `vidbench load` plays it). The unpaced initial requests
/// do not share a deadline: each is issued when the previous response is
/// complete and has its own `timeout_s`, so one chunk per deadline is the bound.
fn check_classes_receive_a_chunk(ses: &SessionSpec, bitrates: &[(u32, f64)]) -> Result<(), (String, String)> {
    /// One-way delays inside the first request's deadline: SYN, SYN-ACK, request, response.
    const FIRST_REQUEST_DELAYS: u64 = 4;
    let Some(kbps) = bitrates.iter().map(|&(k, _)| k).max() else { return Ok(()) };
    let chunk = chunk_bytes(kbps, ses.chunk_duration_s);
    for (i, c) in ses.classes.iter().enumerate() {
        let delays_ms = FIRST_REQUEST_DELAYS * u64::from(c.delay_ms);
        let latency = delays_ms as f64 / 1e3;
        // An uncapped class (rate 0) receives at the server's speed: only its delay counts.
        let transfer = if c.rate_mbps == 0.0 { 0.0 } else { chunk as f64 * 8.0 / (c.rate_mbps * 1e6) };
        let seconds = transfer + latency;
        if seconds > ses.timeout_s {
            let (key, needed) = if latency < ses.timeout_s {
                ("rate_mbps", format!("raise its rate to at least {:.2} Mbit/s", chunk as f64 * 8.0 / 1e6 / (ses.timeout_s - latency)))
            } else {
                ("delay_ms", "its delay alone exceeds the deadline: lower delay_ms".to_owned())
            };
            return Err((
                format!("sessions.classes[{i}].{key}"),
                format!(
                    "class {:?} at {} Mbit/s needs {seconds:.2} s for a session's first request: one {chunk}-byte chunk ({kbps} kbit/s x {} s) \
                     plus {} ms of connection handshake and round trip ({FIRST_REQUEST_DELAYS} x {} ms), more than the {} s deadline \
                     (sessions.timeout_s): every such session would fail whatever the server does; {needed} or drop the class",
                    c.name,
                    c.rate_mbps,
                    ses.chunk_duration_s,
                    delays_ms,
                    c.delay_ms,
                    ses.timeout_s,
                ),
            ));
        }
    }
    Ok(())
}

fn check_share(key: &str, share: f64) -> Result<(), (String, String)> {
    if share.is_finite() && (0.0..=1.0).contains(&share) {
        Ok(())
    } else {
        Err((key.to_owned(), format!("{share} must be between 0 and 1")))
    }
}

fn check_share_sum(key: &str, shares: &[f64]) -> Result<(), (String, String)> {
    let sum: f64 = shares.iter().sum();
    if (sum - 1.0).abs() > SHARE_TOLERANCE {
        return Err((key.to_owned(), format!("shares sum to {sum}, not 1")));
    }
    Ok(())
}

/// Finds the line of a key like `sessions.classes[1].share` in the TOML text, or
/// of its closest enclosing key that is there; `None` when even that is not
/// written out (a default value).
pub fn locate_key(text: &str, key: &str) -> Option<usize> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let mut item = doc.as_item();
    let mut best = None;
    for segment in key.split('.') {
        let (name, indices) = match segment.find('[') {
            Some(at) => (&segment[..at], &segment[at..]),
            None => (segment, ""),
        };
        let Some(next) = item.get(name) else {
            break;
        };
        item = next;
        best = item.span().or(best);
        for index in indices.split(['[', ']']).filter(|s| !s.is_empty()) {
            let Some(next) = index.parse::<usize>().ok().and_then(|i| item.get(i)) else {
                return best.map(|span: std::ops::Range<usize>| line_of(text, span.start));
            };
            item = next;
            best = item.span().or(best);
        }
    }
    best.map(|span| line_of(text, span.start))
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].bytes().filter(|&b| b == b'\n').count() + 1
}
