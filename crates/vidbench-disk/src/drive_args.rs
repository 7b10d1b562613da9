//! Which drive, from the command line: a preset, a TOML drive file and
//! per-parameter overrides, resolved in that order (`vidbench disk mount` and
//! `vidbench disk model`).

use crate::params::{self, DriveFile, DriveKind, DriveParams};
use anyhow::Context;
use std::path::PathBuf;

/// Drive parameter overrides; each replaces the preset's / TOML file's value.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DriveOverrides {
    /// Hard disk or SSD model.
    #[arg(long, value_parser = ["hdd", "ssd"], help_heading = "Drive parameters")]
    pub kind: Option<String>,
    /// Capacity, decimal GB (10^9 bytes).
    #[arg(long, help_heading = "Drive parameters")]
    pub capacity_gb: Option<f64>,
    /// Spindle speed (HDD).
    #[arg(long, help_heading = "Drive parameters")]
    pub rpm: Option<f64>,
    /// Recording surfaces: tracks per cylinder (HDD).
    #[arg(long, help_heading = "Drive parameters")]
    pub heads: Option<u32>,
    /// Recording zones, each an equal share of the LBA space (HDD).
    #[arg(long, help_heading = "Drive parameters")]
    pub zones: Option<u32>,
    /// Media rate at the outer edge (LBA 0), MB/s.
    #[arg(long, help_heading = "Drive parameters")]
    pub outer_mb_s: Option<f64>,
    /// Media rate at the middle LBA, MB/s.
    #[arg(long, help_heading = "Drive parameters")]
    pub middle_mb_s: Option<f64>,
    /// Media rate at the inner edge, MB/s.
    #[arg(long, help_heading = "Drive parameters")]
    pub inner_mb_s: Option<f64>,
    /// Seek time over one cylinder, ms.
    #[arg(long, help_heading = "Drive parameters")]
    pub seek_track_ms: Option<f64>,
    /// Seek time across all cylinders, ms (settle included, rotation excluded).
    #[arg(long, help_heading = "Drive parameters")]
    pub seek_full_ms: Option<f64>,
    /// Seek curve between the two: 1 square root of the distance, 0 linear.
    #[arg(long, help_heading = "Drive parameters")]
    pub seek_sqrt_weight: Option<f64>,
    /// Controller time per command, ms.
    #[arg(long, help_heading = "Drive parameters")]
    pub command_overhead_ms: Option<f64>,
    /// Host interface rate for data served from the drive cache, MB/s.
    #[arg(long, help_heading = "Drive parameters")]
    pub interface_mb_s: Option<f64>,
    /// Read cache segments (independent read-ahead buffers).
    #[arg(long, help_heading = "Drive parameters")]
    pub cache_segments: Option<u32>,
    /// Size of one segment: how far the drive reads ahead while idle, KiB.
    #[arg(long, help_heading = "Drive parameters")]
    pub segment_kib: Option<u32>,
    /// NCQ depth (1 = FIFO); default 32.
    #[arg(long = "ncq", help_heading = "Drive parameters")]
    pub ncq_depth: Option<u32>,
    /// NCQ aging: positioning credit per second a command has waited, ms (0 = pure SPTF).
    #[arg(long, help_heading = "Drive parameters")]
    pub ncq_aging_ms_per_s: Option<f64>,
    /// A queued command older than this is served next, ms.
    #[arg(long, help_heading = "Drive parameters")]
    pub ncq_max_age_ms: Option<f64>,
    /// SSD: latency of one flash read, microseconds.
    #[arg(long, help_heading = "Drive parameters")]
    pub ssd_read_latency_us: Option<f64>,
    /// SSD: commands served at the same time (channels x dies).
    #[arg(long, help_heading = "Drive parameters")]
    pub ssd_parallelism: Option<u32>,
}

/// Which drive: preset, TOML file, overrides.
#[derive(Debug, Clone, clap::Args)]
pub struct DriveArgs {
    /// Drive preset (see `vidbench disk presets`); may come from the TOML file.
    #[arg(long)]
    pub preset: Option<String>,
    /// TOML drive file: `preset = "..."` and any drive parameter.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub overrides: DriveOverrides,
}

impl DriveArgs {
    /// Preset, then TOML, then command line; validated.
    pub fn resolve(&self) -> anyhow::Result<(String, DriveParams)> {
        let file = match &self.config {
            Some(path) => Some((DriveFile::load(path)?, path.clone())),
            None => None,
        };
        let name = self
            .preset
            .clone()
            .or_else(|| file.as_ref().and_then(|(f, _)| f.preset.clone()))
            .context("no drive given: use --preset NAME (see `vidbench disk presets`) or a --config file with preset = \"NAME\"")?;
        let mut p = params::preset(&name)?.params;
        if let Some((file, path)) = &file {
            p = file.apply(&p, path)?;
        }
        let o = &self.overrides;
        macro_rules! set {
            ($($field:ident),*) => { $( if let Some(v) = o.$field { p.$field = v; } )* };
        }
        set!(capacity_gb, rpm, heads, zones, outer_mb_s, middle_mb_s, inner_mb_s, seek_track_ms, seek_full_ms, seek_sqrt_weight, command_overhead_ms, interface_mb_s, cache_segments, segment_kib, ncq_depth, ncq_aging_ms_per_s, ncq_max_age_ms, ssd_read_latency_us, ssd_parallelism);
        if let Some(kind) = &o.kind {
            p.kind = if kind == "ssd" { DriveKind::Ssd } else { DriveKind::Hdd };
        }
        p.validate().with_context(|| match &self.config {
            Some(path) => format!("drive {name} with {} and the command line", path.display()),
            None => format!("drive {name} with the command line"),
        })?;
        Ok((name, p))
    }
}
