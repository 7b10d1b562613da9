//! Drive parameters: the presets, the TOML file format and the reference
//! figures each preset is checked against.
//!
//! A drive is fully described by [`DriveParams`]. The effective parameters of a
//! mount are built in layers: a named preset, then the keys of a TOML file,
//! then command-line overrides (see `cli`). Every field can be set at every
//! layer; [`DriveParams::validate`] runs on the result, so a bad value is
//! reported once, with the field's name.
//!
//! Units are the ones datasheets use: decimal GB and MB/s, milliseconds.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Hard disk (zoned platter, one actuator) or solid-state drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DriveKind {
    Hdd,
    Ssd,
}

/// Everything the drive model needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DriveParams {
    pub kind: DriveKind,
    /// Capacity in decimal GB (10^9 bytes).
    pub capacity_gb: f64,
    /// Spindle speed (HDD).
    pub rpm: f64,
    /// Recording surfaces: tracks per cylinder (HDD).
    pub heads: u32,
    /// Number of recording zones, each an equal share of the LBA space (HDD).
    pub zones: u32,
    /// Media rate at the outer edge (LBA 0), the middle LBA and the inner edge, MB/s.
    pub outer_mb_s: f64,
    pub middle_mb_s: f64,
    pub inner_mb_s: f64,
    /// Seek time for a distance of one cylinder, ms.
    pub seek_track_ms: f64,
    /// Seek time across all cylinders, ms (settle included, rotation excluded).
    pub seek_full_ms: f64,
    /// Shape of the seek curve between the two: seek(x) = track + (full - track) *
    /// (w * sqrt(x) + (1 - w) * x), x = distance / full stroke. w = 1 is the pure
    /// square-root curve, w = 0 linear; real drives are in between (sqrt for short
    /// seeks where the arm accelerates, linear for long coasting seeks).
    pub seek_sqrt_weight: f64,
    /// Controller time per command (decode, cache lookup, status), ms.
    pub command_overhead_ms: f64,
    /// Host interface rate for data served from the drive's cache, MB/s.
    pub interface_mb_s: f64,
    /// Read cache: number of segments (independent read-ahead buffers).
    pub cache_segments: u32,
    /// Size of one segment: how far the drive reads ahead after a read while idle, KiB.
    pub segment_kib: u32,
    /// Commands the drive accepts at once (NCQ/TCQ depth); 1 = FIFO, no reordering.
    pub ncq_depth: u32,
    /// Aged shortest-positioning-time-first: a queued command's positioning time
    /// is credited this many ms per second it has waited, so old commands win
    /// ties with nearby new ones (0 = pure SPTF).
    pub ncq_aging_ms_per_s: f64,
    /// A queued command older than this is served next whatever its position, ms.
    pub ncq_max_age_ms: f64,
    /// SSD: latency of one flash read before its data moves, microseconds.
    pub ssd_read_latency_us: f64,
    /// SSD: commands served at the same time (channels x dies).
    pub ssd_parallelism: u32,
}

/// Published figures a preset must reproduce (tests check them).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reference {
    /// Where the figures come from.
    pub source: &'static str,
    /// Average random read seek, ms (datasheet, or derived where stated).
    pub avg_seek_ms: Option<f64>,
    /// FreeBSD `diskinfo -t` full / half / quarter stroke figures (they include
    /// rotational latency and command overhead), ms.
    pub diskinfo_strokes_ms: Option<[f64; 3]>,
}

/// A named drive.
#[derive(Debug, Clone)]
pub struct Preset {
    pub name: &'static str,
    pub description: &'static str,
    pub params: DriveParams,
    pub reference: Reference,
}

/// What the hard-disk presets share: 32 zones, the same NCQ queue and aging,
/// no SSD figures. The drive-specific fields are zero here and every hard-disk
/// preset sets each of them.
const HDD_BASE: DriveParams = DriveParams {
    kind: DriveKind::Hdd,
    capacity_gb: 0.0,
    rpm: 0.0,
    heads: 0,
    zones: 32,
    outer_mb_s: 0.0,
    middle_mb_s: 0.0,
    inner_mb_s: 0.0,
    seek_track_ms: 0.0,
    seek_full_ms: 0.0,
    seek_sqrt_weight: 0.0,
    command_overhead_ms: 0.0,
    interface_mb_s: 0.0,
    cache_segments: 0,
    segment_kib: 0,
    ncq_depth: 32,
    ncq_aging_ms_per_s: 10.0,
    ncq_max_age_ms: 2000.0,
    ssd_read_latency_us: 0.0,
    ssd_parallelism: 1,
};

/// The built-in presets. How the published figures map to the parameters is
/// explained in docs/disk.md ("Presets").
pub fn presets() -> Vec<Preset> {
    vec![
        Preset {
            name: "wd-red-1tb",
            description: "Western Digital Red WD10EFRX, 1 TB, 5400 rpm, SATA 6 Gb/s, 64 MB cache (paper 000 Linux server, paper 001)",
            params: DriveParams {
                capacity_gb: 1000.2,
                rpm: 5400.0,
                heads: 4,
                outer_mb_s: 133.0,
                middle_mb_s: 115.0,
                inner_mb_s: 67.0,
                seek_track_ms: 2.0,
                seek_full_ms: 26.74,
                seek_sqrt_weight: 0.82,
                command_overhead_ms: 0.3,
                interface_mb_s: 600.0,
                cache_segments: 16,
                segment_kib: 4096,
                ..HDD_BASE
            },
            reference: Reference {
                source: "paper 000 Table 1 (diskinfo); WD publishes no seek time, average seek derived from the Table 1 curve (HD Tune-style access time ~20 ms)",
                avg_seek_ms: Some(14.1),
                diskinfo_strokes_ms: Some([32.6, 23.1, 18.9]),
            },
        },
        Preset {
            name: "hp-146g-10k",
            description: "HP 146 GB 10,000 rpm 2.5-inch SAS, 16 MB cache (paper 000 FreeBSD server)",
            params: DriveParams {
                capacity_gb: 146.8,
                rpm: 10000.0,
                heads: 6,
                outer_mb_s: 122.0,
                middle_mb_s: 107.0,
                inner_mb_s: 73.0,
                seek_track_ms: 1.0,
                seek_full_ms: 7.3,
                seek_sqrt_weight: 0.68,
                command_overhead_ms: 0.2,
                interface_mb_s: 300.0,
                cache_segments: 8,
                segment_kib: 2048,
                ..HDD_BASE
            },
            reference: Reference {
                source: "paper 000 Table 1 (diskinfo); average seek 3.9 ms as on 10k 2.5-inch SAS datasheets of the period",
                avg_seek_ms: Some(3.9),
                diskinfo_strokes_ms: Some([10.5, 8.0, 6.8]),
            },
        },
        Preset {
            name: "st1000dm003",
            description: "Seagate Barracuda ST1000DM003, 1 TB, 7200 rpm, SATA 6 Gb/s, 64 MB cache (paper 001 comparison drive)",
            params: DriveParams {
                capacity_gb: 1000.2,
                rpm: 7200.0,
                heads: 2,
                outer_mb_s: 210.0,
                middle_mb_s: 175.0,
                inner_mb_s: 105.0,
                seek_track_ms: 1.0,
                seek_full_ms: 17.3,
                seek_sqrt_weight: 0.68,
                command_overhead_ms: 0.2,
                interface_mb_s: 600.0,
                cache_segments: 16,
                segment_kib: 4096,
                ..HDD_BASE
            },
            reference: Reference {
                source: "Seagate Barracuda 7200.14 datasheet: 210 MB/s max sustained, average read seek < 8.5 ms; inner rate ~half as measured on this family",
                avg_seek_ms: Some(8.5),
                diskinfo_strokes_ms: None,
            },
        },
        Preset {
            name: "ssd",
            description: "A SATA SSD for contrast: no seek, 80 us flash reads, 32 in parallel, 520 MB/s",
            params: DriveParams {
                kind: DriveKind::Ssd,
                capacity_gb: 1000.2,
                rpm: 0.0,
                heads: 1,
                zones: 1,
                outer_mb_s: 520.0,
                middle_mb_s: 520.0,
                inner_mb_s: 520.0,
                seek_track_ms: 0.0,
                seek_full_ms: 0.0,
                seek_sqrt_weight: 1.0,
                command_overhead_ms: 0.01,
                interface_mb_s: 600.0,
                cache_segments: 0,
                segment_kib: 0,
                ncq_depth: 32,
                ncq_aging_ms_per_s: 10.0,
                ncq_max_age_ms: 2000.0,
                ssd_read_latency_us: 80.0,
                ssd_parallelism: 32,
            },
            reference: Reference {
                source: "typical SATA SSD: ~90 us 4 KiB random read at depth 1, 520 MB/s sequential",
                avg_seek_ms: None,
                diskinfo_strokes_ms: None,
            },
        },
    ]
}

/// Why drive parameters could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ParamsError {
    #[error("unknown drive preset {name:?}; the presets are: {known} (see `vidbench disk presets`)")]
    UnknownPreset { name: String, known: String },
    #[error("cannot read drive config {path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
    #[error("drive config {path} is not valid: {message}")]
    Toml { path: PathBuf, message: String },
    #[error("drive parameter {field} = {value}: {why}")]
    Invalid { field: &'static str, value: String, why: &'static str },
}

/// Looks a preset up by name.
pub fn preset(name: &str) -> Result<Preset, ParamsError> {
    presets().into_iter().find(|p| p.name == name).ok_or_else(|| ParamsError::UnknownPreset {
        name: name.to_owned(),
        known: presets().iter().map(|p| p.name).collect::<Vec<_>>().join(", "),
    })
}

/// The TOML drive file: an optional base preset and any subset of the fields.
#[derive(Debug, Default, Deserialize)]
pub struct DriveFile {
    /// Base preset; the command line's `--preset` wins if both are given.
    pub preset: Option<String>,
    #[serde(flatten)]
    pub fields: toml::Table,
}

impl DriveFile {
    pub fn load(path: &Path) -> Result<DriveFile, ParamsError> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| ParamsError::Io { path: path.to_owned(), error })?;
        toml::from_str(&text).map_err(|e| ParamsError::Toml { path: path.to_owned(), message: e.to_string() })
    }

    /// Applies the file's fields over `base`; unknown keys and wrong types are
    /// errors naming the key and the file.
    pub fn apply(&self, base: &DriveParams, path: &Path) -> Result<DriveParams, ParamsError> {
        let mut table = toml::Table::try_from(base).expect("parameters serialize to a table");
        for (key, value) in &self.fields {
            if !table.contains_key(key) {
                return Err(ParamsError::Toml {
                    path: path.to_owned(),
                    message: format!("unknown key {key:?} (the keys are the fields listed by `vidbench disk presets`)"),
                });
            }
            // Integers are accepted where a float is expected (rpm = 7200).
            let value = match (&table[key], value) {
                (toml::Value::Float(_), toml::Value::Integer(i)) => toml::Value::Float(*i as f64),
                _ => value.clone(),
            };
            table.insert(key.clone(), value);
        }
        DriveParams::deserialize(table)
            .map_err(|e| ParamsError::Toml { path: path.to_owned(), message: e.to_string() })
    }
}

impl DriveParams {
    /// Checks that the parameters describe a drive the model can run.
    pub fn validate(&self) -> Result<(), ParamsError> {
        fn bad(field: &'static str, value: impl ToString, why: &'static str) -> Result<(), ParamsError> {
            Err(ParamsError::Invalid { field, value: value.to_string(), why })
        }
        let finite_pos = |x: f64| x.is_finite() && x > 0.0;
        let finite_nonneg = |x: f64| x.is_finite() && x >= 0.0;
        if !finite_pos(self.capacity_gb) || self.capacity_gb > 1.0e6 {
            return bad("capacity_gb", self.capacity_gb, "must be a positive number of GB, at most 10^6");
        }
        for (field, v) in [("outer_mb_s", self.outer_mb_s), ("middle_mb_s", self.middle_mb_s), ("inner_mb_s", self.inner_mb_s), ("interface_mb_s", self.interface_mb_s)] {
            if !finite_pos(v) || v > 1.0e5 {
                return bad(field, v, "must be a positive rate in MB/s, at most 10^5");
            }
        }
        for (field, v) in [("seek_track_ms", self.seek_track_ms), ("seek_full_ms", self.seek_full_ms), ("command_overhead_ms", self.command_overhead_ms), ("ncq_max_age_ms", self.ncq_max_age_ms), ("ncq_aging_ms_per_s", self.ncq_aging_ms_per_s), ("ssd_read_latency_us", self.ssd_read_latency_us)] {
            if !finite_nonneg(v) || v > 1.0e5 {
                return bad(field, v, "must be a non-negative time, at most 10^5");
            }
        }
        if !(0.0..=1.0).contains(&self.seek_sqrt_weight) {
            return bad("seek_sqrt_weight", self.seek_sqrt_weight, "must be between 0 and 1");
        }
        if self.ncq_depth == 0 || self.ncq_depth > 256 {
            return bad("ncq_depth", self.ncq_depth, "must be between 1 and 256");
        }
        match self.kind {
            DriveKind::Hdd => {
                if !finite_pos(self.rpm) || self.rpm > 100_000.0 {
                    return bad("rpm", self.rpm, "a hard disk needs a positive spindle speed, at most 100000");
                }
                if self.heads == 0 || self.heads > 64 {
                    return bad("heads", self.heads, "must be between 1 and 64");
                }
                if self.zones == 0 || self.zones > 1024 {
                    return bad("zones", self.zones, "must be between 1 and 1024");
                }
                if self.seek_full_ms < self.seek_track_ms {
                    return bad("seek_full_ms", self.seek_full_ms, "must not be less than seek_track_ms");
                }
                if self.cache_segments > 1024 {
                    return bad("cache_segments", self.cache_segments, "must be at most 1024");
                }
                if self.segment_kib > 1 << 20 {
                    return bad("segment_kib", self.segment_kib, "must be at most 1 GiB");
                }
            }
            DriveKind::Ssd => {
                if self.ssd_parallelism == 0 || self.ssd_parallelism > 1024 {
                    return bad("ssd_parallelism", self.ssd_parallelism, "must be between 1 and 1024");
                }
            }
        }
        Ok(())
    }

    /// Capacity in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        (self.capacity_gb * 1e9) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_is_valid_and_round_trips_through_toml() {
        for p in presets() {
            p.params.validate().unwrap_or_else(|e| panic!("{}: {e}", p.name));
            let text = toml::to_string(&p.params).unwrap();
            let file: DriveFile = toml::from_str(&text).unwrap();
            assert_eq!(file.apply(&p.params, Path::new("x.toml")).unwrap(), p.params, "{}", p.name);
        }
    }

    #[test]
    fn toml_overrides_apply_and_bad_keys_are_named() {
        let base = preset("wd-red-1tb").unwrap().params;
        let file: DriveFile = toml::from_str("preset = \"ssd\"\nrpm = 7200\nncq_depth = 4\n").unwrap();
        let p = file.apply(&base, Path::new("d.toml")).unwrap();
        assert_eq!(file.preset.as_deref(), Some("ssd"));
        assert_eq!(p.rpm, 7200.0);
        assert_eq!(p.ncq_depth, 4);
        let file: DriveFile = toml::from_str("rmp = 7200\n").unwrap();
        let err = file.apply(&base, Path::new("d.toml")).unwrap_err().to_string();
        assert!(err.contains("rmp") && err.contains("d.toml"), "{err}");
        let file: DriveFile = toml::from_str("rpm = \"fast\"\n").unwrap();
        let err = file.apply(&base, Path::new("d.toml")).unwrap_err().to_string();
        assert!(err.contains("d.toml"), "{err}");
    }

    #[test]
    fn bad_values_and_presets_are_named() {
        let mut p = preset("wd-red-1tb").unwrap().params;
        p.ncq_depth = 0;
        assert!(p.validate().unwrap_err().to_string().contains("ncq_depth"));
        p.ncq_depth = 32;
        p.rpm = -1.0;
        assert!(p.validate().unwrap_err().to_string().contains("rpm"));
        let err = preset("wd-blue").unwrap_err().to_string();
        assert!(err.contains("wd-blue") && err.contains("wd-red-1tb"), "{err}");
    }
}
