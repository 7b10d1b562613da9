//! Client sessions: what one simulated viewer asks the server for, and when.
//!
//! Written by `vidbench workload gen` (as JSON lines with full detail, and as
//! httperf wsesslog extended the way the papers' videoperf client did), read back
//! by `vidbench load`. Session start times are not part of a session: the load
//! client draws them from a Poisson process at the rate it is asked to offer.

use serde::{Deserialize, Serialize};

/// Where a session falls in an experiment. Ramp-up and ramp-down sessions are
/// played (they load the server) but left out of the headline figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    RampUp,
    #[default]
    Measure,
    RampDown,
}

/// One viewer: a persistent HTTP/1.1 connection playing part of one video.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Session {
    /// Position in the session file, from 0.
    pub id: u64,
    #[serde(default)]
    pub phase: Phase,
    /// Name of the client class (e.g. `dsl`, `cable`).
    pub class: String,
    /// Download bandwidth cap in bits per second; 0 = uncapped.
    pub rate_bps: u64,
    /// One-way network delay added in each direction, in milliseconds.
    pub delay_ms: u32,
    /// Index of the video watched (the manifest's `video`).
    pub video: u32,
    /// The requests, in order.
    pub requests: Vec<Request>,
}

/// One HTTP GET of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// URL path, starting with `/`, e.g. `/v/00042.mp4`.
    pub path: String,
    /// Inclusive byte range `[first, last]` for a `Range: bytes=first-last`
    /// header; `None` asks for the whole file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<(u64, u64)>,
    /// Content id of the file (the manifest's `id`), for `--verify`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_id: Option<u32>,
    /// `None`: issue as soon as the previous response is complete (the
    /// unpaced initial requests). `Some(p)`: issue `p` seconds after the previous
    /// request started, or when it completes if that is later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pace_s: Option<f64>,
    /// Deadline for the whole response, in seconds from the request's start.
    pub timeout_s: f64,
}

impl Request {
    /// Bytes this request should return, if its size is known from the range.
    pub fn expected_len(&self) -> Option<u64> {
        self.range.map(|(a, b)| b - a + 1)
    }
}
