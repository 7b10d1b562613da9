//! Raw results: one row per request, per session and per sample interval,
//! written as CSV while the run goes on (nothing is lost if the run is
//! interrupted), plus the running counters the progress line, the intervals
//! and the summary are made from.
//!
//! The [`Collector`] lives on the load client's single event-loop thread;
//! sessions hand it finished records synchronously, so there is no locking and
//! no channel. Write errors are remembered and reported when the run ends.

use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use crate::steps::{StepCounters, StepResult};
use vidbench_library::Phase;

/// How a request, and so its session, ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    /// The whole response was not there by the request's deadline.
    Timeout,
    /// The TCP connection could not be made.
    Connect,
    /// Not 206 for a range request or 200 for a whole file.
    Status,
    /// The server closed the connection before the whole body, or announced
    /// fewer bytes than the range asks for.
    ShortBody,
    /// A received byte differs from the library's content (`--verify`).
    Verify,
    /// A connection error after the connection was made (reset, closed
    /// between requests).
    Io,
    /// A response the client cannot use: malformed head, no Content-Length,
    /// chunked encoding, a Content-Range other than the one asked for.
    Protocol,
    /// The run was interrupted (Ctrl-C) while the session was active.
    Interrupted,
    /// Stopped between two requests by a population match of a stepped run
    /// (the steady state of a lower rate has fewer sessions in play).
    Withdrawn,
}

impl Outcome {
    /// Whether the session failed: neither completed nor cut short by the
    /// client itself (interrupted, withdrawn).
    pub fn is_failure(self) -> bool {
        !matches!(self, Outcome::Ok | Outcome::Interrupted | Outcome::Withdrawn)
    }

    pub fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Timeout => "timeout",
            Outcome::Connect => "connect",
            Outcome::Status => "status",
            Outcome::ShortBody => "short_body",
            Outcome::Verify => "verify",
            Outcome::Io => "io",
            Outcome::Protocol => "protocol",
            Outcome::Interrupted => "interrupted",
            Outcome::Withdrawn => "withdrawn",
        }
    }
}

/// A row of `requests.csv`. Times are seconds since the run started, as seen
/// by the emulated client (one-way delay included), rounded to microseconds.
#[derive(Debug, Clone, Serialize)]
pub struct RequestRecord {
    pub session: u64,
    pub phase: Phase,
    pub class: String,
    pub video: u32,
    pub path: String,
    /// `first-last` as in the Range header, empty for a whole file.
    pub range: String,
    pub start_s: f64,
    pub first_byte_s: Option<f64>,
    pub end_s: f64,
    /// Body bytes received.
    pub bytes: u64,
    pub status: Option<u16>,
    pub outcome: Outcome,
}

/// A failed session, kept while it would still be playing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FailedSession {
    pub failed_at_s: f64,
    /// Its scheduled start plus its whole paced time.
    pub would_end_s: f64,
    pub scheduled_s: f64,
    /// Its place in the session list.
    pub catalogue: usize,
}

/// A row of `sessions.csv`.
#[derive(Debug, Clone, Serialize)]
pub struct SessionRecord {
    pub session: u64,
    pub phase: Phase,
    pub class: String,
    pub video: u32,
    /// When the arrival process said the session should start.
    pub scheduled_s: f64,
    pub start_s: f64,
    pub end_s: f64,
    pub requests_done: usize,
    pub requests_total: usize,
    pub bytes: u64,
    /// New connections after the server announced `Connection: close`.
    pub reconnects: u32,
    pub outcome: Outcome,
    /// Why it failed, empty when it did not.
    pub detail: String,
}

/// A row of `intervals.csv`: what happened in one sample interval.
#[derive(Debug, Clone, Serialize)]
pub struct IntervalRecord {
    pub start_s: f64,
    pub end_s: f64,
    /// Body bytes received in the interval, complete responses or not.
    pub received_bytes: u64,
    pub received_mb_s: f64,
    /// Bytes of the requests that completed successfully in the interval.
    pub completed_bytes: u64,
    pub completed_mb_s: f64,
    pub requests_completed: u64,
    pub requests_failed: u64,
    pub sessions_started: u64,
    /// Sessions active at the end of the interval.
    pub sessions_active: u64,
}

impl IntervalRecord {
    /// An interval starting at `start_s` in which nothing has happened yet.
    fn starting_at(start_s: f64) -> IntervalRecord {
        IntervalRecord {
            start_s,
            end_s: 0.0,
            received_bytes: 0,
            received_mb_s: 0.0,
            completed_bytes: 0,
            completed_mb_s: 0.0,
            requests_completed: 0,
            requests_failed: 0,
            sessions_started: 0,
            sessions_active: 0,
        }
    }
}

/// Counts of sessions of one phase (or all).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SessionCounts {
    pub started: u64,
    pub completed: u64,
    pub failed: u64,
    /// Failed sessions by cause (`timeout`, `connect`, `status`, ...).
    pub failed_by_cause: BTreeMap<String, u64>,
    /// Sessions cut short by Ctrl-C: neither completed nor failed.
    pub interrupted: u64,
    /// Sessions withdrawn by a population match: neither completed nor failed.
    pub withdrawn: u64,
}

impl SessionCounts {
    fn end(&mut self, outcome: Outcome) {
        if outcome == Outcome::Ok {
            self.completed += 1;
        } else if outcome == Outcome::Interrupted {
            self.interrupted += 1;
        } else if outcome == Outcome::Withdrawn {
            self.withdrawn += 1;
        } else {
            self.failed += 1;
            *self.failed_by_cause.entry(outcome.name().to_owned()).or_default() += 1;
        }
    }
}

/// At most this many distinct error messages are kept; the rest are counted
/// under one "other" entry, so a dead server cannot fill memory.
const MAX_DISTINCT_ERRORS: usize = 64;

/// Running state of a load run.
pub(crate) struct Collector {
    requests_out: Output,
    sessions_out: Output,
    intervals_out: Output,
    first_write_error: Option<(PathBuf, std::io::Error)>,

    pub active: u64,
    pub started: u64,
    pub ended: u64,
    pub failed: u64,
    pub by_phase: HashMap<Phase, SessionCounts>,
    pub requests_started: u64,
    pub requests_ok: u64,
    pub requests_failed: u64,
    pub received_bytes: u64,
    pub completed_bytes: u64,
    pub verified_bytes: u64,
    pub verify_mismatches: u64,
    /// (end time, bytes) of every successful request, for the measurement window.
    pub completed: Vec<(f64, u64)>,
    pub response_us: Histogram<u64>,
    pub first_byte_us: Histogram<u64>,
    pub dispatch_lag_us: Histogram<u64>,
    /// Start times (scheduled) of the first and last measure-phase sessions.
    pub measure_starts: Option<(f64, f64)>,
    pub last_start: f64,
    pub errors: HashMap<(Outcome, String), u64>,
    pub intervals: Vec<IntervalRecord>,
    interval: IntervalRecord,
    /// The current step of a stepped run, and the steps already finished.
    pub step: Option<StepCounters>,
    pub steps: Vec<StepResult>,
    /// The failed sessions that may still be playing had they not failed,
    /// for the settling gate and population matching; those past their end
    /// are dropped as they are counted.
    pub failed_sessions: Vec<FailedSession>,
    /// Sessions withdrawn by population matching so far.
    pub withdrawn: u64,
}

struct Output {
    path: PathBuf,
    writer: csv::Writer<BufWriter<File>>,
}

impl Output {
    fn create(dir: &Path, name: &str) -> Result<Output, crate::LoadError> {
        let path = dir.join(name);
        let file = File::create(&path).map_err(|source| crate::LoadError::Output { path: path.clone(), error: source })?;
        Ok(Output { path, writer: csv::Writer::from_writer(BufWriter::with_capacity(64 * 1024, file)) })
    }
}

pub(crate) fn histogram() -> Histogram<u64> {
    // 1 us to 1 hour with 3 significant digits.
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

/// Seconds rounded to microseconds.
pub(crate) fn micros(s: f64) -> f64 {
    (s * 1e6).round() / 1e6
}

impl Collector {
    pub fn create(dir: &Path) -> Result<Collector, crate::LoadError> {
        Ok(Collector {
            requests_out: Output::create(dir, "requests.csv")?,
            sessions_out: Output::create(dir, "sessions.csv")?,
            intervals_out: Output::create(dir, "intervals.csv")?,
            first_write_error: None,
            active: 0,
            started: 0,
            ended: 0,
            failed: 0,
            by_phase: HashMap::new(),
            requests_started: 0,
            requests_ok: 0,
            requests_failed: 0,
            received_bytes: 0,
            completed_bytes: 0,
            verified_bytes: 0,
            verify_mismatches: 0,
            completed: Vec::new(),
            response_us: histogram(),
            first_byte_us: histogram(),
            dispatch_lag_us: histogram(),
            measure_starts: None,
            last_start: 0.0,
            failed_sessions: Vec::new(),
            withdrawn: 0,
            errors: HashMap::new(),
            intervals: Vec::new(),
            interval: IntervalRecord::starting_at(0.0),
            step: None,
            steps: Vec::new(),
        })
    }

    fn write<T: Serialize>(out: &mut Output, first_error: &mut Option<(PathBuf, std::io::Error)>, row: &T) {
        if let Err(e) = out.writer.serialize(row) {
            if first_error.is_none() {
                *first_error = Some((out.path.clone(), std::io::Error::other(e)));
            }
        }
    }

    /// A session started: from the arrival process, or (`joined`) in
    /// progress by a population match, which neither moves the last arrival
    /// time nor has a dispatch lag.
    pub fn session_started(&mut self, phase: Phase, scheduled_s: f64, lag_s: f64, joined: bool) {
        self.active += 1;
        self.started += 1;
        self.interval.sessions_started += 1;
        if !joined {
            self.last_start = scheduled_s;
        }
        self.by_phase.entry(phase).or_default().started += 1;
        if let Some(step) = &mut self.step {
            step.session_started(scheduled_s);
        }
        if phase == Phase::Measure {
            let (first, _) = self.measure_starts.unwrap_or((scheduled_s, scheduled_s));
            self.measure_starts = Some((first, scheduled_s));
        }
        if !joined {
            self.dispatch_lag_us.saturating_record((lag_s.max(0.0) * 1e6) as u64);
        }
    }

    pub fn request_started(&mut self) {
        self.requests_started += 1;
    }

    pub fn bytes_received(&mut self, n: u64) {
        self.received_bytes += n;
        self.interval.received_bytes += n;
    }

    pub fn request_ended(&mut self, record: &RequestRecord) {
        if record.outcome == Outcome::Ok {
            self.requests_ok += 1;
            self.completed_bytes += record.bytes;
            self.interval.completed_bytes += record.bytes;
            self.interval.requests_completed += 1;
            self.completed.push((record.end_s, record.bytes));
            if record.phase == Phase::Measure {
                self.response_us.saturating_record(((record.end_s - record.start_s).max(0.0) * 1e6) as u64);
                if let Some(fb) = record.first_byte_s {
                    self.first_byte_us.saturating_record(((fb - record.start_s).max(0.0) * 1e6) as u64);
                }
            }
        } else {
            self.requests_failed += 1;
            self.interval.requests_failed += 1;
            if record.outcome == Outcome::Verify {
                self.verify_mismatches += 1;
            }
        }
        if let Some(step) = &mut self.step {
            step.request_ended(record);
        }
        Self::write(&mut self.requests_out, &mut self.first_write_error, record);
    }

    /// (start, rate) of every step so far, the current one last. After a
    /// population match the sessions in play are the steady state of the
    /// matched step's rate, as if it had always run: the history starts
    /// there, at minus infinity.
    pub fn rate_history(&self) -> Vec<(f64, f64)> {
        let steps: Vec<(f64, f64, bool)> = self
            .steps
            .iter()
            .map(|s| (s.start_s, s.spec.rate, s.matched.is_some()))
            .chain(self.step.as_ref().map(|s| (s.start_s, s.spec.rate, s.matched.is_some())))
            .collect();
        let from = steps.iter().rposition(|s| s.2).unwrap_or(0);
        steps[from..]
            .iter()
            .enumerate()
            .map(|(k, &(start, rate, matched))| (if k == 0 && matched { f64::NEG_INFINITY } else { start }, rate))
            .collect()
    }

    /// The failed sessions that would still be playing at `t`, handed over
    /// (to be resumed) and forgotten.
    pub fn take_failed(&mut self, t: f64) -> Vec<FailedSession> {
        let mut failed = std::mem::take(&mut self.failed_sessions);
        failed.retain(|f| f.would_end_s > t);
        failed
    }

    /// Sessions that failed before `failed_before` and would still be
    /// playing at `t` (see `failed_sessions`).
    pub fn failed_playing(&mut self, t: f64, failed_before: f64) -> usize {
        self.failed_sessions.retain(|f| f.would_end_s > t);
        self.failed_sessions.iter().filter(|f| f.failed_at_s < failed_before).count()
    }

    /// A session ended; `last_request_s`: when the request it ended on was
    /// issued (the failing one, for a failure).
    pub fn session_ended(&mut self, record: &SessionRecord, error_kind: Option<&str>, last_request_s: Option<f64>) {
        self.active -= 1;
        self.ended += 1;
        if record.outcome == Outcome::Withdrawn {
            self.withdrawn += 1;
        } else if record.outcome != Outcome::Ok {
            self.failed += 1;
            let kind = error_kind.unwrap_or(&record.detail);
            let key = if self.errors.len() < MAX_DISTINCT_ERRORS || self.errors.contains_key(&(record.outcome, kind.to_owned())) {
                (record.outcome, kind.to_owned())
            } else {
                (record.outcome, "other errors".to_owned())
            };
            *self.errors.entry(key).or_default() += 1;
        }
        self.by_phase.entry(record.phase).or_default().end(record.outcome);
        if let Some(step) = &mut self.step {
            step.session_ended(record, last_request_s);
        }
        Self::write(&mut self.sessions_out, &mut self.first_write_error, record);
    }

    /// Ends the current step: its result joins `steps`, and `steps.json` in
    /// `dir` is replaced so that finished steps survive an interrupted run
    /// (the driver keeps them: vidbench-run's `parts.rs`).
    pub fn finish_step(&mut self, dir: &Path) -> Result<StepResult, crate::LoadError> {
        let step = self.step.take().expect("finish_step is called in a stepped run");
        let result = step.finish(&self.completed, &self.intervals);
        self.steps.push(result.clone());
        // Through a temporary file and a rename, so that a kill mid-write
        // leaves the previous list whole.
        let path = dir.join("steps.json");
        let temporary = dir.join("steps.json.tmp");
        let text = serde_json::to_string_pretty(&self.steps).expect("steps serialize") + "\n";
        std::fs::write(&temporary, text).map_err(|error| crate::LoadError::Output { path: temporary.clone(), error })?;
        std::fs::rename(&temporary, &path).map_err(|error| crate::LoadError::Output { path, error })?;
        Ok(result)
    }

    /// Closes the sample interval ending at `end_s`.
    pub fn close_interval(&mut self, end_s: f64) -> IntervalRecord {
        let mut row = self.interval.clone();
        row.end_s = micros(end_s);
        let len = (end_s - row.start_s).max(1e-9);
        row.received_mb_s = row.received_bytes as f64 / 1e6 / len;
        row.completed_mb_s = row.completed_bytes as f64 / 1e6 / len;
        row.sessions_active = self.active;
        Self::write(&mut self.intervals_out, &mut self.first_write_error, &row);
        // Keep intervals.csv current for anyone watching the run.
        if let Err(e) = self.intervals_out.writer.flush() {
            self.first_write_error.get_or_insert((self.intervals_out.path.clone(), e));
        }
        self.intervals.push(row.clone());
        self.interval = IntervalRecord::starting_at(row.end_s);
        row
    }

    /// Flushes every file; the first write error of the run, if any.
    pub fn finish(&mut self) -> Result<(), crate::LoadError> {
        for out in [&mut self.requests_out, &mut self.sessions_out, &mut self.intervals_out] {
            if let Err(e) = out.writer.flush() {
                self.first_write_error.get_or_insert((out.path.clone(), e));
            }
        }
        match self.first_write_error.take() {
            Some((path, source)) => Err(crate::LoadError::Output { path, error: source }),
            None => Ok(()),
        }
    }
}
