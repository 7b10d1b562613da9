//! Paper 003 Table 3 for a generated (or any) workload.
//!
//! Computed from the library manifest and the sessions alone, so `vidbench
//! workload summary` can describe a directory written long ago or sessions made by
//! another tool, and `gen` cannot report numbers that differ from its files.
//! Definitions (paper 003 section 5.2):
//! - a chunk is one request's target: (path, first byte); for file-per-chunk
//!   storage that is one file;
//! - session time is the video time the session downloads: the bytes of each
//!   request divided by its video's bitrate (paper 003 counts whole chunks, so
//!   a last, shorter chunk makes this a little smaller);
//! - video averages are over the distinct videos the sessions request.
//!
//! Sizes are reported in bytes and MiB (the papers' "MB" of 0.5 MB chunks is MiB).

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use vidbench_library::{Library, Phase, Session, WarmRange};

const MIB: f64 = 1024.0 * 1024.0;

/// The summary written to `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub name: String,
    pub library: LibraryFigures,
    pub sessions: SessionFigures,
    /// Paper 003 Table 3.
    pub table3: Table3,
    pub warming: Option<WarmingFigures>,
    pub scaling: Option<ScalingFigures>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LibraryFigures {
    pub videos: u64,
    pub files: u64,
    pub bytes: u64,
    pub mean_duration_s: f64,
    pub mean_video_bytes: f64,
    /// Videos per bitrate (kbit/s).
    pub videos_by_bitrate_kbps: BTreeMap<u32, u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionFigures {
    pub count: u64,
    pub ramp_up: u64,
    pub measure: u64,
    pub ramp_down: u64,
    pub by_class: BTreeMap<String, u64>,
    /// Sessions per bitrate of the video watched.
    pub by_bitrate_kbps: BTreeMap<u32, u64>,
    pub mean_views_per_requested_video: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Table3 {
    pub unique_videos: u64,
    pub single_session_videos_pct: f64,
    pub mean_video_duration_s: f64,
    pub mean_video_bytes: f64,
    pub mean_session_time_s: f64,
    pub mean_requests_per_session: f64,
    pub unique_chunks_requested: u64,
    pub total_chunks_requested: u64,
    pub chunks_viewed_once: u64,
    pub total_bytes_requested: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WarmingFigures {
    pub chunks: u64,
    pub bytes: u64,
}

/// What the workload is scaled for, with the papers' ratios for comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScalingFigures {
    pub memory_limit_mib: u64,
    /// Library bytes / memory (paper 000: 260 GB / 8 GB = 32.5).
    pub library_to_memory: f64,
    /// Bytes requested / memory (paper 000: 118 GB / 8 GB = 14.75).
    pub requested_to_memory: f64,
    pub nominal_rate_per_s: Option<f64>,
    /// Sessions / rate plus the mean session time: how long one run lasts.
    pub estimated_run_s: Option<f64>,
    /// Bytes requested per second at the nominal rate, MiB/s.
    pub offered_mib_per_s: Option<f64>,
}

/// Optional context for the summary (from the spec).
#[derive(Debug, Clone, Default)]
pub struct Context {
    pub memory_limit_mib: u64,
    pub nominal_rate_per_s: Option<f64>,
}

/// Computes the summary; an error names the session and request that refers to
/// a file the library does not have.
pub fn summarize(
    library: &Library,
    sessions: &[Session],
    warm: Option<&[WarmRange]>,
    context: &Context,
) -> Result<Summary, String> {
    let by_path: HashMap<&str, usize> =
        library.files.iter().enumerate().map(|(i, f)| (f.path.as_str(), i)).collect();
    // Per video: (duration, bitrate, bytes).
    let mut videos: BTreeMap<u32, (f64, u32, u64)> = BTreeMap::new();
    for f in &library.files {
        let e = videos.entry(f.video).or_insert((f.duration_s, f.bitrate_kbps, 0));
        e.2 += f.size;
    }
    let mut videos_by_bitrate = BTreeMap::new();
    for &(_, kbps, _) in videos.values() {
        *videos_by_bitrate.entry(kbps).or_insert(0u64) += 1;
    }
    let library_figures = LibraryFigures {
        videos: videos.len() as u64,
        files: library.files.len() as u64,
        bytes: library.total_bytes(),
        mean_duration_s: mean(videos.values().map(|v| v.0)),
        mean_video_bytes: mean(videos.values().map(|v| v.2 as f64)),
        videos_by_bitrate_kbps: videos_by_bitrate,
    };

    // Ordered, so float sums over videos are the same on every run.
    let mut views: BTreeMap<u32, u64> = BTreeMap::new();
    let mut chunk_views: HashMap<(usize, u64), u64> = HashMap::new();
    let mut by_class = BTreeMap::new();
    let mut by_bitrate = BTreeMap::new();
    let (mut ramp_up, mut measure, mut ramp_down) = (0, 0, 0);
    let (mut total_bytes, mut total_requests, mut session_time) = (0u64, 0u64, 0f64);
    for s in sessions {
        match s.phase {
            Phase::RampUp => ramp_up += 1,
            Phase::Measure => measure += 1,
            Phase::RampDown => ramp_down += 1,
        }
        *by_class.entry(s.class.clone()).or_insert(0u64) += 1;
        let mut video = None;
        for (k, r) in s.requests.iter().enumerate() {
            let index = *by_path.get(r.path.trim_start_matches('/')).ok_or_else(|| {
                format!("session {} request {k}: {} is not a file of library {:?}", s.id, r.path, library.name)
            })?;
            let file = &library.files[index];
            let (first, last) = r.range.unwrap_or((0, file.size - 1));
            if last >= file.size {
                return Err(format!(
                    "session {} request {k}: range {first}-{last} is past the end of {} ({} bytes)",
                    s.id, r.path, file.size
                ));
            }
            let bytes = last - first + 1;
            total_bytes += bytes;
            total_requests += 1;
            session_time += bytes as f64 * 8.0 / (file.bitrate_kbps as f64 * 1000.0);
            *chunk_views.entry((index, first)).or_insert(0) += 1;
            video.get_or_insert(file.video);
        }
        if let Some(v) = video {
            *views.entry(v).or_insert(0) += 1;
            *by_bitrate.entry(videos[&v].1).or_insert(0u64) += 1;
        }
    }
    let count = sessions.len() as u64;
    let unique = views.len() as u64;
    let single = views.values().filter(|&&n| n == 1).count() as u64;
    let table3 = Table3 {
        unique_videos: unique,
        single_session_videos_pct: pct(single, unique),
        mean_video_duration_s: mean(views.keys().map(|v| videos[v].0)),
        mean_video_bytes: mean(views.keys().map(|v| videos[v].2 as f64)),
        mean_session_time_s: ratio(session_time, count),
        mean_requests_per_session: ratio(total_requests as f64, count),
        unique_chunks_requested: chunk_views.len() as u64,
        total_chunks_requested: total_requests,
        chunks_viewed_once: chunk_views.values().filter(|&&n| n == 1).count() as u64,
        total_bytes_requested: total_bytes,
    };
    let warming = warm.map(|w| WarmingFigures {
        chunks: w.len() as u64,
        bytes: w.iter().map(|r| r.range.1 - r.range.0 + 1).sum(),
    });
    let scaling = (context.memory_limit_mib > 0).then(|| {
        let memory = context.memory_limit_mib as f64 * MIB;
        let run = context.nominal_rate_per_s.map(|r| count as f64 / r + table3.mean_session_time_s);
        ScalingFigures {
            memory_limit_mib: context.memory_limit_mib,
            library_to_memory: library_figures.bytes as f64 / memory,
            requested_to_memory: total_bytes as f64 / memory,
            nominal_rate_per_s: context.nominal_rate_per_s,
            estimated_run_s: run,
            offered_mib_per_s: context.nominal_rate_per_s.map(|r| r * ratio(total_bytes as f64, count) / MIB),
        }
    });
    Ok(Summary {
        name: library.name.clone(),
        library: library_figures,
        sessions: SessionFigures {
            count,
            ramp_up,
            measure,
            ramp_down,
            by_class,
            by_bitrate_kbps: by_bitrate,
            mean_views_per_requested_video: ratio(count as f64, unique),
        },
        table3,
        warming,
        scaling,
    })
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0u64), |(s, n), v| (s + v, n + 1));
    ratio(sum, n)
}

fn ratio(a: f64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a / b as f64
    }
}

fn pct(a: u64, b: u64) -> f64 {
    100.0 * ratio(a as f64, b)
}

fn mib(bytes: f64) -> String {
    format!("{:.2} MiB", bytes / MIB)
}

fn gib(bytes: f64) -> String {
    format!("{:.2} GiB", bytes / (MIB * 1024.0))
}

fn counts<K: std::fmt::Display>(map: &BTreeMap<K, u64>, unit: &str) -> String {
    map.iter().map(|(k, n)| format!("{k}{unit}: {n}")).collect::<Vec<_>>().join(", ")
}

impl Summary {
    /// The Markdown form (`summary.md`, and what `summary` prints).
    pub fn to_markdown(&self) -> String {
        let t = &self.table3;
        let mut md = String::new();
        let _ = writeln!(md, "# Workload {}\n", self.name);
        let _ = writeln!(md, "Paper 003 Table 3 for this workload:\n");
        let _ = writeln!(md, "| description | value |\n|---|---|");
        let rows = [
            ("unique videos", t.unique_videos.to_string()),
            ("single-session videos", format!("{:.1} %", t.single_session_videos_pct)),
            ("average video duration", format!("{:.1} s", t.mean_video_duration_s)),
            ("average video size", mib(t.mean_video_bytes)),
            ("average session time", format!("{:.1} s", t.mean_session_time_s)),
            ("average requests per session", format!("{:.3}", t.mean_requests_per_session)),
            ("unique file chunks requested", t.unique_chunks_requested.to_string()),
            ("total file chunks requested", t.total_chunks_requested.to_string()),
            ("number of chunks viewed once", t.chunks_viewed_once.to_string()),
            ("total bytes requested", format!("{} ({})", t.total_bytes_requested, gib(t.total_bytes_requested as f64))),
        ];
        for (name, value) in rows {
            let _ = writeln!(md, "| {name} | {value} |");
        }
        let l = &self.library;
        let s = &self.sessions;
        let _ = writeln!(md, "\nLibrary: {} videos in {} files, {} ({} bytes), mean duration {:.1} s, mean size {}; videos by bitrate: {}.",
            l.videos, l.files, gib(l.bytes as f64), l.bytes, l.mean_duration_s, mib(l.mean_video_bytes), counts(&l.videos_by_bitrate_kbps, " kbit/s"));
        let _ = writeln!(md, "\nSessions: {} ({} ramp-up, {} measured, {} ramp-down), {:.2} per requested video; by class: {}; by bitrate: {}.",
            s.count, s.ramp_up, s.measure, s.ramp_down, s.mean_views_per_requested_video, counts(&s.by_class, ""), counts(&s.by_bitrate_kbps, " kbit/s"));
        if let Some(w) = &self.warming {
            let _ = writeln!(md, "\nWarming set: {} chunks, {}.", w.chunks, mib(w.bytes as f64));
        }
        if let Some(sc) = &self.scaling {
            let _ = writeln!(md, "\nScaling: meant for a {} MiB memory limit; library : memory = {:.1} (paper 000: 32.5), requested : memory = {:.1} (paper 000: 14.75).",
                sc.memory_limit_mib, sc.library_to_memory, sc.requested_to_memory);
            if let (Some(rate), Some(run), Some(offered)) = (sc.nominal_rate_per_s, sc.estimated_run_s, sc.offered_mib_per_s) {
                let _ = writeln!(md, "At the nominal {rate} sessions/s: about {:.0} s per run, {offered:.1} MiB/s offered.", run);
            }
        }
        md
    }
}
