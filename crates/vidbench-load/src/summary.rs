//! The summary of a load run (`summary.json`), made from the collector's
//! counters at the end of the run.
//!
//! Headline figures follow paper 003 section 7: only measure-phase sessions
//! count towards the failure percentage and the latency percentiles; the
//! throughput is that of successfully completed requests (of any phase: they
//! all load the server) inside the measurement window, which runs from the
//! scheduled start of the first measure-phase session to that of the last one,
//! i.e. while the server sees the steady arrival of measured sessions. The
//! sample intervals lying wholly inside that window give the mean and its 95 %
//! confidence interval (Student's t). MB means 10^6 bytes.

use crate::records::{Collector, SessionCounts};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::BTreeMap;
use vidbench_library::Phase;

/// Version of the `summary.json` layout.
pub const SUMMARY_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize)]
pub struct LoadSummary {
    pub version: u32,
    pub setup: Setup,
    /// Why session starts stopped: `all-sessions-played`, `duration`,
    /// `session-count` or `interrupted`.
    pub stopped_by: String,
    /// Seconds from the start of the run to the end of the last session.
    pub wall_s: f64,
    /// Sessions of every phase.
    pub sessions: SessionCounts,
    /// Sessions per phase (`ramp-up`, `measure`, `ramp-down`).
    pub sessions_by_phase: BTreeMap<String, SessionCounts>,
    /// Failed measure-phase sessions, percent of the measure-phase sessions
    /// started (less those interrupted); `None` when there are none.
    pub failure_percent: Option<f64>,
    pub requests: RequestCounts,
    /// `[first, last]` scheduled start of the measure-phase sessions.
    pub measure_window_s: Option<(f64, f64)>,
    /// Completed-request throughput inside the measurement window.
    pub throughput_mb_s: Option<f64>,
    /// Completed requests per second inside the measurement window.
    pub requests_per_s: Option<f64>,
    /// Completed-request throughput over the whole run.
    pub throughput_whole_run_mb_s: f64,
    pub samples: Samples,
    /// Response times of successful measure-phase requests, start to last byte.
    pub response_ms: Option<Percentiles>,
    /// Start to first body byte of the same requests.
    pub first_byte_ms: Option<Percentiles>,
    pub session_rate: SessionRate,
    pub verify: VerifyCounts,
    pub cpu: CpuUse,
    /// Distinct failure messages with their counts, most frequent first.
    pub errors: Vec<ErrorCount>,
    /// A stepped run's steps (see `steps.rs`): there the headline figures are
    /// per step, and the fields above describe the run as a whole.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<crate::steps::StepResult>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Setup {
    pub server: String,
    pub offered_rate: f64,
    pub stop: crate::Stop,
    pub seed: u64,
    pub sessions_source: Option<String>,
    pub sessions_available: usize,
    pub verify: bool,
    pub timeout_override_s: Option<f64>,
    pub interval_s: f64,
    pub receive_buffer: crate::ReceiveBuffer,
    pub client_version: String,
    pub hostname: String,
    pub kernel: String,
    /// Seconds since the Unix epoch when the run started.
    pub started_unix_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct RequestCounts {
    pub started: u64,
    pub completed: u64,
    pub failed: u64,
    /// Body bytes received, complete responses or not.
    pub received_bytes: u64,
    /// Body bytes of successfully completed requests.
    pub completed_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Samples {
    /// Sample intervals wholly inside the measurement window.
    pub count: usize,
    pub mean_mb_s: Option<f64>,
    /// Half-width of the 95 % confidence interval of the mean.
    pub ci95_mb_s: Option<f64>,
    pub min_mb_s: Option<f64>,
    pub max_mb_s: Option<f64>,
}

/// Percentiles in milliseconds, from an HDR histogram recorded in microseconds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Percentiles {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl Percentiles {
    pub(crate) fn from_histogram_us(h: &Histogram<u64>) -> Option<Percentiles> {
        if h.is_empty() {
            return None;
        }
        let ms = |us: u64| us as f64 / 1000.0;
        Some(Percentiles {
            count: h.len(),
            mean: h.mean() / 1000.0,
            p50: ms(h.value_at_quantile(0.50)),
            p90: ms(h.value_at_quantile(0.90)),
            p95: ms(h.value_at_quantile(0.95)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
        })
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SessionRate {
    pub offered: f64,
    /// Sessions started divided by the time of the last start.
    pub achieved: Option<f64>,
    /// How late sessions started against their scheduled time: the load
    /// client's own lag (large values mean the client is a bottleneck).
    pub start_lag_ms: Option<Percentiles>,
}

#[derive(Debug, Clone, Serialize)]
pub struct VerifyCounts {
    pub enabled: bool,
    pub bytes_checked: u64,
    /// Requests whose body differed from the library's content.
    pub mismatches: u64,
}

/// CPU time of the load client (getrusage).
#[derive(Debug, Clone, Serialize)]
pub struct CpuUse {
    /// The event-loop thread that does all the client's work.
    pub thread_user_s: f64,
    pub thread_system_s: f64,
    /// The whole process (includes anything else running in it).
    pub process_user_s: f64,
    pub process_system_s: f64,
    /// Thread CPU time over wall time: 1.0 is one core fully busy.
    pub cores_used: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ErrorCount {
    pub cause: String,
    pub message: String,
    pub count: u64,
}

/// Mean and 95 % confidence half-width of `values` (Student's t; see vidbench-stats).
pub use vidbench_stats::mean_ci95;

pub(crate) struct RunFacts {
    pub setup: Setup,
    pub stopped_by: String,
    pub wall_s: f64,
    pub offered_rate: f64,
    pub verify: bool,
    pub cpu: CpuUse,
}

pub(crate) fn summarize(c: &Collector, facts: RunFacts) -> LoadSummary {
    let mut all = SessionCounts::default();
    let mut by_phase = BTreeMap::new();
    for (phase, counts) in &c.by_phase {
        all.started += counts.started;
        all.completed += counts.completed;
        all.failed += counts.failed;
        all.interrupted += counts.interrupted;
        all.withdrawn += counts.withdrawn;
        for (cause, n) in &counts.failed_by_cause {
            *all.failed_by_cause.entry(cause.clone()).or_default() += n;
        }
        by_phase.insert(phase_name(*phase).to_owned(), counts.clone());
    }
    let measure = c.by_phase.get(&Phase::Measure);
    let failure_percent = measure
        .map(|m| (m.failed, m.started - m.interrupted - m.withdrawn))
        .filter(|(_, counted)| *counted > 0)
        .map(|(failed, counted)| 100.0 * failed as f64 / counted as f64);

    let window = c.measure_starts.filter(|(a, b)| b > a);
    let figures = window.map(|(a, b)| window_figures(&c.completed, &c.intervals, a, b));
    let (throughput, request_rate) = (figures.as_ref().map(|f| f.throughput_mb_s), figures.as_ref().map(|f| f.requests_per_s));
    let samples = figures.map_or_else(|| samples_of(&[]), |f| f.samples);
    let mut errors: Vec<ErrorCount> = c
        .errors
        .iter()
        .map(|((cause, message), count)| ErrorCount { cause: cause.name().to_owned(), message: message.clone(), count: *count })
        .collect();
    errors.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.message.cmp(&b.message)));

    LoadSummary {
        version: SUMMARY_VERSION,
        setup: facts.setup,
        stopped_by: facts.stopped_by,
        wall_s: facts.wall_s,
        sessions: all,
        sessions_by_phase: by_phase,
        failure_percent,
        requests: RequestCounts {
            started: c.requests_started,
            completed: c.requests_ok,
            failed: c.requests_failed,
            received_bytes: c.received_bytes,
            completed_bytes: c.completed_bytes,
        },
        measure_window_s: window,
        throughput_mb_s: throughput,
        requests_per_s: request_rate,
        throughput_whole_run_mb_s: c.completed_bytes as f64 / 1e6 / facts.wall_s.max(1e-9),
        samples,
        response_ms: Percentiles::from_histogram_us(&c.response_us),
        first_byte_ms: Percentiles::from_histogram_us(&c.first_byte_us),
        session_rate: SessionRate {
            offered: facts.offered_rate,
            achieved: (c.started > 0 && c.last_start > 0.0).then(|| c.started as f64 / c.last_start),
            start_lag_ms: Percentiles::from_histogram_us(&c.dispatch_lag_us),
        },
        verify: VerifyCounts { enabled: facts.verify, bytes_checked: c.verified_bytes, mismatches: c.verify_mismatches },
        cpu: facts.cpu,
        errors,
        steps: c.steps.clone(),
    }
}

/// What the completed requests did inside the window `[a, b)`.
pub(crate) struct WindowFigures {
    pub throughput_mb_s: f64,
    pub requests_per_s: f64,
    /// The completed MB/s of the sample intervals wholly inside the window.
    pub samples: Samples,
}

/// Completions `(end time, bytes)` ending inside `[a, b)`, and the sample
/// intervals wholly inside it: the one definition of a window's figures,
/// for the measure phase and for a stepped run's steps.
pub(crate) fn window_figures(completed: &[(f64, u64)], intervals: &[crate::IntervalRecord], a: f64, b: f64) -> WindowFigures {
    let (n, bytes) = completed.iter().filter(|(t, _)| *t >= a && *t < b).fold((0u64, 0u64), |(n, s), (_, by)| (n + 1, s + by));
    let values: Vec<f64> =
        intervals.iter().filter(|i| i.start_s >= a - 1e-6 && i.end_s <= b + 1e-6).map(|i| i.completed_mb_s).collect();
    WindowFigures { throughput_mb_s: bytes as f64 / 1e6 / (b - a), requests_per_s: n as f64 / (b - a), samples: samples_of(&values) }
}

fn samples_of(values: &[f64]) -> Samples {
    let (mean, ci) = mean_ci95(values);
    Samples {
        count: values.len(),
        mean_mb_s: mean,
        ci95_mb_s: ci,
        min_mb_s: values.iter().copied().reduce(f64::min),
        max_mb_s: values.iter().copied().reduce(f64::max),
    }
}

pub(crate) fn phase_name(phase: Phase) -> &'static str {
    match phase {
        Phase::RampUp => "ramp-up",
        Phase::Measure => "measure",
        Phase::RampDown => "ramp-down",
    }
}

impl LoadSummary {
    /// A few lines for a terminal.
    pub fn human(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let opt = |v: Option<f64>, unit: &str| v.map_or("n/a".to_owned(), |v| format!("{v:.2}{unit}"));
        let _ = writeln!(
            s,
            "sessions: {} started, {} completed, {} failed (stopped by {}, {:.1} s)",
            self.sessions.started, self.sessions.completed, self.sessions.failed, self.stopped_by, self.wall_s
        );
        for (phase, c) in &self.sessions_by_phase {
            let causes: Vec<String> = c.failed_by_cause.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let _ = writeln!(
                s,
                "  {phase}: {} started, {} completed, {} failed{}",
                c.started,
                c.completed,
                c.failed,
                if causes.is_empty() { String::new() } else { format!(" ({})", causes.join(", ")) }
            );
        }
        let _ = writeln!(s, "failure (measure phase): {}", opt(self.failure_percent, " %"));
        let _ = writeln!(
            s,
            "throughput (measure window): {}, {} requests/s; samples: {} x {} s, mean {} +- {} (95 % CI)",
            opt(self.throughput_mb_s, " MB/s"),
            opt(self.requests_per_s, ""),
            self.samples.count,
            self.setup.interval_s,
            opt(self.samples.mean_mb_s, " MB/s"),
            opt(self.samples.ci95_mb_s, " MB/s"),
        );
        if let Some(r) = &self.response_ms {
            let _ = writeln!(
                s,
                "response time (ms): p50 {:.1} p90 {:.1} p99 {:.1} max {:.1} over {} requests",
                r.p50, r.p90, r.p99, r.max, r.count
            );
        }
        let _ = writeln!(
            s,
            "session rate: offered {:.3}/s, achieved {}; client CPU {:.2} s ({:.1} % of one core)",
            self.session_rate.offered,
            opt(self.session_rate.achieved, "/s"),
            self.cpu.thread_user_s + self.cpu.thread_system_s,
            self.cpu.cores_used * 100.0
        );
        if self.verify.enabled {
            let _ = writeln!(s, "verify: {} bytes checked, {} mismatches", self.verify.bytes_checked, self.verify.mismatches);
        }
        for e in self.errors.iter().take(5) {
            let _ = writeln!(s, "  {} x {}: {}", e.count, e.cause, e.message);
        }
        if self.errors.len() > 5 {
            let _ = writeln!(s, "  ... {} more kinds of error in summary.json", self.errors.len() - 5);
        }
        s
    }
}
