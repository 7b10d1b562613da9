//! The prefetch setting of Reception, one type from an experiment file to the
//! daemon's configuration.
//!
//! [`Prefetch`] is either a fixed size in bytes or paper 001's adaptive
//! controller with its [`AdaptiveParams`]. The daemon is configured with it
//! (`libception daemon --prefetch`), and programs that start a daemon
//! (`libception run`, `vidbench run`) render it back into those flags with
//! [`Prefetch::daemon_args`]; parsing those flags gives the same value again
//! (a test in the libception crate holds the two sides together).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// Sizes are whole pages.
const PAGE: u64 = 4096;

/// How far the daemon reads ahead of a missed range.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Prefetch {
    /// Every read is extended to this many bytes (0: exactly the range).
    Fixed(u64),
    /// The size is chosen by paper 001's algorithm.
    Adaptive(AdaptiveParams),
}

impl Prefetch {
    /// Paper 000's default: 2 MiB.
    pub const DEFAULT: Prefetch = Prefetch::Fixed(2 << 20);

    /// The largest prefetch this setting can ask for: the fixed size, or the
    /// adaptive controller's maximum.
    pub fn max_bytes(&self) -> u64 {
        match self {
            Prefetch::Fixed(bytes) => *bytes,
            Prefetch::Adaptive(p) => p.max,
        }
    }

    /// The `libception daemon` flags that configure this setting: `--prefetch N`,
    /// or `--prefetch adaptive` followed by every parameter that differs from
    /// its default.
    pub fn daemon_args(&self) -> Vec<String> {
        let p = match self {
            Prefetch::Fixed(bytes) => return vec!["--prefetch".into(), bytes.to_string()],
            Prefetch::Adaptive(p) => p,
        };
        let d = AdaptiveParams::default();
        let mut args = vec!["--prefetch".to_string(), "adaptive".to_string()];
        let mut put = |flag: &str, value: String| {
            args.push(format!("--adaptive-{flag}"));
            args.push(value);
        };
        if let Some(start) = p.start {
            put("start", start.to_string());
        }
        for (flag, value, default) in [("min", p.min, d.min), ("max", p.max, d.max), ("step", p.step, d.step), ("ramp-rate", p.ramp_rate, d.ramp_rate), ("transaction", p.transaction, d.transaction)] {
            if value != default {
                put(flag, value.to_string());
            }
        }
        for (flag, value, default) in [("interval", p.interval, d.interval), ("waste-after", p.waste_after, d.waste_after)] {
            if value != default {
                put(flag, value.as_secs_f64().to_string());
            }
        }
        for (flag, value, default) in [("deflation", p.deflation, d.deflation), ("busy", p.busy, d.busy), ("evict", p.evict, d.evict)] {
            if value != default {
                put(flag, value.to_string());
            }
        }
        if let Some(rate) = p.stream_rate {
            put("stream-rate", (rate.round() as u64).to_string());
        }
        if p.settle != d.settle {
            put("settle", p.settle.to_string());
        }
        if p.history != d.history {
            put("history", p.history.to_string());
        }
        if p.scale != d.scale {
            put("scale", p.scale.name());
        }
        if !p.probe {
            args.push("--adaptive-no-probe".into());
        }
        args
    }
}

impl Default for Prefetch {
    fn default() -> Self {
        Prefetch::DEFAULT
    }
}

impl fmt::Display for Prefetch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Prefetch::Fixed(bytes) => write!(f, "{bytes}"),
            Prefetch::Adaptive(p) => match p.start {
                Some(start) => write!(f, "adaptive (start {start}, {}..{})", p.min, p.max),
                None if p.probe => write!(f, "adaptive (start probed, {}..{})", p.min, p.max),
                None => write!(f, "adaptive (start {}, {}..{})", DEFAULT_START, p.min, p.max),
            },
        }
    }
}

/// The start size when none is given and the disk probe is off or fails:
/// paper 000's fixed size.
pub const DEFAULT_START: u64 = 2 << 20;

/// How a stream's prefetch size follows its bitrate (paper 001 sections 5
/// and 7.4): the size in force is the size of the fastest streams, and a
/// stream of rate `b` next to a reference rate `B` gets
/// `size x sqrt(b / B)`, `size x b / B`, `size`, or `size x f` for a fixed
/// factor `f` (Fig 10's 0.1, 0.2, 0.45, 0.75 and 1 for SD next to HD).
/// Written and read as its name: `sqrt`, `proportional`, `none`, or the
/// factor as a number in (0, 1].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BitrateScale {
    /// Paper 001's seek-minimising rule (scale 0.45 for SD next to HD).
    #[default]
    Sqrt,
    /// Gill and Bathen's rule (scale 0.2 for SD next to HD).
    Proportional,
    /// One size for every stream.
    None,
    /// A fixed factor for every slower stream, in thousandths (1..=1000).
    Factor(u16),
}

impl BitrateScale {
    /// The named rules.
    pub const RULES: [BitrateScale; 3] = [BitrateScale::Sqrt, BitrateScale::Proportional, BitrateScale::None];

    /// The name on the command line and in records.
    pub fn name(self) -> String {
        match self {
            BitrateScale::Sqrt => "sqrt".into(),
            BitrateScale::Proportional => "proportional".into(),
            BitrateScale::None => "none".into(),
            BitrateScale::Factor(k) => format!("{}", k as f64 / 1000.0),
        }
    }

    /// The factor for a stream whose rate is `ratio` times the reference
    /// (clamped to `(0, 1]`: no stream gets more than the size in force).
    pub fn factor(self, ratio: f64) -> f64 {
        let r = if ratio.is_finite() { ratio.clamp(0.0, 1.0) } else { 1.0 };
        match self {
            BitrateScale::Sqrt => r.sqrt(),
            BitrateScale::Proportional => r,
            BitrateScale::None => 1.0,
            BitrateScale::Factor(k) => k as f64 / 1000.0,
        }
    }
}

impl std::str::FromStr for BitrateScale {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        if let Some(rule) = BitrateScale::RULES.into_iter().find(|b| b.name().eq_ignore_ascii_case(t)) {
            return Ok(rule);
        }
        match t.parse::<f64>() {
            Ok(f) if f > 0.0 && f <= 1.0 && (f * 1000.0).round() >= 1.0 => Ok(BitrateScale::Factor((f * 1000.0).round() as u16)),
            _ => Err(format!("{s:?} is not a bitrate scale rule (sqrt, proportional, none, or a factor in (0, 1] such as 0.45)")),
        }
    }
}

impl Serialize for BitrateScale {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl<'de> Deserialize<'de> for BitrateScale {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        /// A name, or a number (`scale = 0.45` in TOML).
        struct Rule;
        impl serde::de::Visitor<'_> for Rule {
            type Value = BitrateScale;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a bitrate scale rule: sqrt, proportional, none, or a factor in (0, 1]")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<BitrateScale, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<BitrateScale, E> {
                v.to_string().parse().map_err(E::custom)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<BitrateScale, E> {
                v.to_string().parse().map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<BitrateScale, E> {
                v.to_string().parse().map_err(E::custom)
            }
        }
        d.deserialize_any(Rule)
    }
}

/// Parameters of the algorithm. [`AdaptiveParams::paper`] is paper 001's
/// Table 2 where it gives one; the default differs from it in one setting,
/// `settle` (docs/daemon.md, "Settling"). Fields added after the first
/// recorded runs carry `#[serde(default)]` so that recorded stats documents
/// still parse.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdaptiveParams {
    /// Initial size (the paper's start_size); `None`: measured by the disk
    /// probe (section 7: transfer time = average seek time), or
    /// [`DEFAULT_START`] when the probe is off or fails.
    pub start: Option<u64>,
    /// Probe the disk for the start size when `start` is not given.
    #[serde(default = "yes")]
    pub probe: bool,
    /// Smallest and largest size the controller may choose.
    pub min: u64,
    pub max: u64,
    /// Distance between neighbouring sizes (step_size, 0.5 MB).
    pub step: u64,
    /// Measurement interval (adjust_interval, 180 s).
    pub interval: Duration,
    /// Intervals after each change of size that are recorded but not scored
    /// (default 1; 0 is paper 001's rule, which scores the first). Right
    /// after a change the streams move to the new size together, and the
    /// first interval's miss ratio measures that move as well as the size
    /// (docs/daemon.md, "Settling"). Absent in records made before it (0,
    /// what those runs did), and left out when 0, so they read back the same.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub settle: u32,
    /// Fraction stored scores lose at each minimum (score_deflation_factor, 5 %).
    pub deflation: f64,
    /// Busy fraction of the disk worker below which nothing is adjusted (adjust_busy, 60 %).
    pub busy: f64,
    /// Prefetch-evicted / requested bytes from which the eviction-time jump applies (adjust_evict, 5 %).
    pub evict: f64,
    /// Largest change of the size in force, bytes per second (gradual change).
    pub ramp_rate: u64,
    /// Stream rate for the eviction-time jump, bytes per second (None: estimated).
    pub stream_rate: Option<f64>,
    /// How each stream's size follows its estimated bitrate.
    #[serde(default)]
    pub scale: BitrateScale,
    /// Largest disk transaction, bytes: a read counts as
    /// `ceil(bytes / transaction)` transactions in the score's ms per
    /// transaction (paper 001 measured iostat's transactions, at most
    /// FreeBSD's MAXPHYS of 128 KiB each).
    #[serde(default = "default_transaction")]
    pub transaction: u64,
    /// A prefetched range nobody comes back to within this long counts as wasted.
    pub waste_after: Duration,
    /// Intervals kept in the history ring of the stats.
    pub history: usize,
}

fn yes() -> bool {
    true
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn default_transaction() -> u64 {
    128 << 10
}

/// The daemon's default: paper 001's parameters, one settling interval.
impl Default for AdaptiveParams {
    fn default() -> Self {
        AdaptiveParams { settle: 1, ..AdaptiveParams::paper() }
    }
}

impl AdaptiveParams {
    /// Paper 001's algorithm as written: its Table 2, its 180 s interval,
    /// the first interval after a change scored (`settle` 0). What every
    /// run recorded before the default settled one interval used when its
    /// record names no parameters.
    pub fn paper() -> Self {
        AdaptiveParams {
            start: None,
            probe: true,
            min: 512 << 10,
            max: 16 << 20,
            step: 512 << 10,
            interval: Duration::from_secs(180),
            settle: 0,
            deflation: 0.05,
            busy: 0.60,
            evict: 0.05,
            ramp_rate: 16 << 10,
            stream_rate: None,
            scale: BitrateScale::Sqrt,
            transaction: default_transaction(),
            waste_after: Duration::from_secs(600),
            history: 32,
        }
    }
}

/// A parameter that makes no sense, named as on the command line.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ParamError {
    #[error("--adaptive-{name} {value}: {why}")]
    Invalid { name: &'static str, value: String, why: &'static str },
}

impl AdaptiveParams {
    pub fn validate(&self) -> Result<(), ParamError> {
        let bad = |name, value: String, why| Err(ParamError::Invalid { name, value, why });
        if self.min < PAGE {
            return bad("min", self.min.to_string(), "must be at least one page (4K)");
        }
        if self.max < self.min {
            return bad("max", self.max.to_string(), "must be at least --adaptive-min");
        }
        if let Some(start) = self.start {
            if start < self.min || start > self.max {
                return bad("start", start.to_string(), "must lie between --adaptive-min and --adaptive-max");
            }
        }
        if self.transaction < 512 {
            return bad("transaction", self.transaction.to_string(), "must be at least one sector (512)");
        }
        if self.step < PAGE {
            return bad("step", self.step.to_string(), "must be at least one page (4K)");
        }
        if self.interval.is_zero() {
            return bad("interval", format!("{:?}", self.interval), "must be positive");
        }
        if !(0.0..1.0).contains(&self.deflation) {
            return bad("deflation", self.deflation.to_string(), "must be a fraction in [0, 1)");
        }
        if !(0.0..=1.0).contains(&self.busy) {
            return bad("busy", self.busy.to_string(), "must be a fraction in [0, 1]");
        }
        if !(self.evict >= 0.0 && self.evict.is_finite()) {
            return bad("evict", self.evict.to_string(), "must be a non-negative fraction");
        }
        if self.ramp_rate == 0 {
            return bad("ramp-rate", "0".into(), "must be positive (bytes per second)");
        }
        if let Some(r) = self.stream_rate {
            if !(r > 0.0 && r.is_finite()) {
                return bad("stream-rate", r.to_string(), "must be positive (bytes per second)");
            }
        }
        if self.waste_after.is_zero() {
            return bad("waste-after", format!("{:?}", self.waste_after), "must be positive");
        }
        if self.history == 0 {
            return bad("history", "0".into(), "must keep at least one interval");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_renders_bytes_and_adaptive_only_what_differs() {
        assert_eq!(Prefetch::Fixed(2 << 20).daemon_args(), ["--prefetch", "2097152"]);
        assert_eq!(Prefetch::Adaptive(AdaptiveParams::default()).daemon_args(), ["--prefetch", "adaptive"]);
        let p = AdaptiveParams { interval: Duration::from_secs(30), busy: 0.5, scale: BitrateScale::None, probe: false, ..AdaptiveParams::default() };
        assert_eq!(
            Prefetch::Adaptive(p).daemon_args(),
            ["--prefetch", "adaptive", "--adaptive-interval", "30", "--adaptive-busy", "0.5", "--adaptive-scale", "none", "--adaptive-no-probe"]
        );
        let p = AdaptiveParams { start: Some(3 << 20), transaction: 1 << 20, ..AdaptiveParams::default() };
        assert_eq!(
            Prefetch::Adaptive(p).daemon_args(),
            ["--prefetch", "adaptive", "--adaptive-start", "3145728", "--adaptive-transaction", "1048576"]
        );
        // Paper 001's rule differs from the daemon's default in its settling.
        assert_eq!(Prefetch::Adaptive(AdaptiveParams::paper()).daemon_args(), ["--prefetch", "adaptive", "--adaptive-settle", "0"]);
        let settling = AdaptiveParams { settle: 3, ..AdaptiveParams::default() };
        assert_eq!(Prefetch::Adaptive(settling).daemon_args(), ["--prefetch", "adaptive", "--adaptive-settle", "3"]);
    }

    #[test]
    fn the_default_is_paper_001_with_one_settling_interval() {
        let (d, paper) = (AdaptiveParams::default(), AdaptiveParams::paper());
        assert_eq!((d.settle, paper.settle), (1, 0));
        assert_eq!(AdaptiveParams { settle: 0, ..d }, paper);
        assert_eq!((paper.interval, paper.step, paper.deflation, paper.busy, paper.evict), (Duration::from_secs(180), 512 << 10, 0.05, 0.60, 0.05), "Table 2");
        paper.validate().unwrap();
        d.validate().unwrap();
    }

    #[test]
    fn scale_rules_follow_paper_001_section_7_4() {
        // HD is 5x SD: sqrt gives 0.45, proportional 0.2, none 1.
        assert!((BitrateScale::Sqrt.factor(0.2) - 0.447).abs() < 1e-3);
        assert_eq!(BitrateScale::Proportional.factor(0.2), 0.2);
        assert_eq!(BitrateScale::None.factor(0.2), 1.0);
        assert_eq!(BitrateScale::Sqrt.factor(3.0), 1.0, "never above the size in force");
        assert_eq!(AdaptiveParams::default().scale, BitrateScale::Sqrt, "paper 001's rule is the default");
        for b in BitrateScale::RULES {
            assert_eq!(b.name().parse::<BitrateScale>(), Ok(b));
        }
        // Fig 10's fixed factors.
        for (text, k) in [("0.1", 100), ("0.2", 200), ("0.45", 450), ("0.75", 750), ("1", 1000)] {
            let b: BitrateScale = text.parse().unwrap();
            assert_eq!(b, BitrateScale::Factor(k));
            assert_eq!(b.name(), text);
            assert_eq!(b.factor(0.2), k as f64 / 1000.0, "a factor does not depend on the rate ratio");
        }
        for bad in ["cube", "0", "-0.5", "1.5", "0.0001", "NaN"] {
            assert!(bad.parse::<BitrateScale>().unwrap_err().contains("a factor in (0, 1]"), "{bad}");
        }
        // Records keep the names; a number reads too.
        assert_eq!(serde_json::to_string(&BitrateScale::Sqrt).unwrap(), "\"sqrt\"");
        assert_eq!(serde_json::to_string(&BitrateScale::Factor(450)).unwrap(), "\"0.45\"");
        assert_eq!(serde_json::from_str::<BitrateScale>("\"proportional\"").unwrap(), BitrateScale::Proportional);
        assert_eq!(serde_json::from_str::<BitrateScale>("0.75").unwrap(), BitrateScale::Factor(750));
        assert_eq!(serde_json::from_str::<BitrateScale>("1").unwrap(), BitrateScale::Factor(1000));
        assert!(serde_json::from_str::<BitrateScale>("true").is_err());
    }

    #[test]
    fn params_recorded_before_the_new_fields_still_parse() {
        let old = r#"{"start":2097152,"min":524288,"max":16777216,"step":524288,"interval":{"secs":180,"nanos":0},
            "deflation":0.05,"busy":0.6,"evict":0.05,"ramp_rate":16384,"stream_rate":null,"bitrate_scaling":false,
            "waste_after":{"secs":600,"nanos":0},"history":32}"#;
        let p: AdaptiveParams = serde_json::from_str(old).unwrap();
        assert_eq!(p.start, Some(2 << 20));
        assert_eq!(p.transaction, 128 << 10);
        assert_eq!(p, AdaptiveParams { start: Some(2 << 20), ..AdaptiveParams::paper() }, "a record from before settling reads as what ran: paper 001's rule");
        // Written back, such a record has no new key.
        let again = serde_json::to_value(&p).unwrap();
        assert!(again.get("settle").is_none(), "{again}");
        let settling = AdaptiveParams { settle: 1, ..p };
        assert_eq!(serde_json::from_value::<AdaptiveParams>(serde_json::to_value(&settling).unwrap()).unwrap(), settling);
    }

    #[test]
    fn the_largest_read_is_the_fixed_size_or_the_adaptive_maximum() {
        assert_eq!(Prefetch::Fixed(4096).max_bytes(), 4096);
        assert_eq!(Prefetch::Adaptive(AdaptiveParams::default()).max_bytes(), 16 << 20);
    }
}
