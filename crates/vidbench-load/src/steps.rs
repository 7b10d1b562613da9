//! Stepped runs: one load run that offers a sequence of session rates, each
//! measured in steady state (paper 003 section 7's protocol applied per rate).
//!
//! A step at rate r lasts `settle_s + measure_s + hold_s`. Sessions arrive at
//! r throughout. The **measured sessions** of the step are those scheduled to
//! start inside its window `[start + settle_s, start + settle_s + measure_s)`;
//! one of them counts as failed when it fails before the step ends (the hold
//! gives the last of them `hold_s` seconds at the same rate to show a late
//! failure); a measured session still running when the step ends is counted as
//! not failed (it is censored: what happens to it later happens under another
//! rate). The step's verdict (`StepResult::failure_percent`) is the largest of
//! the measured sessions' failure share, the share of the sessions in progress
//! that failed on a request issued in the window, and, under the settling
//! gate, the share of the steady-state population the window lacked beyond
//! three standard deviations. Delivered MB/s is that of requests completed
//! inside the window, so a driver that samples the disk at the same times
//! reports both over one window.
//!
//! What comes next is decided by a [`StepPlan`] when each step ends, from the
//! step's result: a fixed list of rates, or a search for the maximum
//! failure-free rate running on another thread. When the plan says stop, the
//! sessions still active are ended and recorded as `interrupted` (neither
//! completed nor failed).

use crate::records::{IntervalRecord, SessionCounts};
use crate::summary::window_figures;
use serde::{Deserialize, Serialize};

/// One rate of a stepped run and how long each of its phases lasts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StepSpec {
    /// Sessions per second (Poisson arrivals).
    pub rate: f64,
    /// Seconds of arrivals at `rate` before the measured window (the first
    /// step's ramp-up from an idle server; a later step's settling after the
    /// change of rate).
    pub settle_s: f64,
    /// Length of the measured window.
    pub measure_s: f64,
    /// Seconds at the same rate after the window, in which failures of the
    /// window's sessions still count.
    pub hold_s: f64,
    /// The settling gate: with a value g > 0, `settle_s` is a minimum and
    /// the window opens only when at most g % of the steady-state sessions
    /// at `rate` are missing or in excess (`population::gap`), checked
    /// every [`GATE_STEP_S`]; 0 = open after `settle_s`.
    #[serde(default)]
    pub gate_pct: f64,
    /// With the gate: the longest settling (the window opens then whatever
    /// the gap, and the step's result says so).
    #[serde(default)]
    pub max_settle_s: f64,
    /// Population matching: with a value j > 0 the sessions in play are
    /// made a sample of the steady state at `rate` when the step starts
    /// (`population`: sessions in progress added, or some withdrawn), the
    /// added ones joining over the first j seconds; at most `settle_s`.
    /// 0 = no matching.
    #[serde(default)]
    pub join_s: f64,
}

/// How far the gate moves the window each time it finds the sessions
/// unsettled: the sample interval, so that windows stay on sample edges.
pub const GATE_STEP_S: f64 = 5.0;

impl StepSpec {
    pub fn length_s(&self) -> f64 {
        self.settle_s + self.measure_s + self.hold_s
    }

    pub(crate) fn check(&self) -> Result<(), String> {
        if !(self.rate.is_finite() && self.rate > 0.0) {
            return Err(format!("step rate {} must be a positive number of sessions/s", self.rate));
        }
        for (name, v) in [("settle_s", self.settle_s), ("hold_s", self.hold_s)] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("step {name} {v} must be zero or more seconds"));
            }
        }
        if !(self.measure_s.is_finite() && self.measure_s > 0.0) {
            return Err(format!("step measure_s {} must be a positive number of seconds", self.measure_s));
        }
        if !(self.gate_pct.is_finite() && self.gate_pct >= 0.0) {
            return Err(format!("step gate_pct {} must be zero (no gate) or a positive percentage", self.gate_pct));
        }
        if self.gate_pct > 0.0 && !(self.max_settle_s.is_finite() && self.max_settle_s >= self.settle_s) {
            return Err(format!("step max_settle_s {} must be at least settle_s ({})", self.max_settle_s, self.settle_s));
        }
        if !(self.join_s.is_finite() && self.join_s >= 0.0 && self.join_s <= self.settle_s) {
            return Err(format!("step join_s {} must be between 0 and settle_s ({})", self.join_s, self.settle_s));
        }
        Ok(())
    }
}

/// Decides the steps of a stepped run.
pub trait StepPlan {
    /// The first step (`finished` is `None`), or the one after `finished`;
    /// `None` ends the run. Called on the load client's event loop: it must
    /// answer promptly.
    fn next(&mut self, finished: Option<&StepResult>) -> Option<StepSpec>;

    /// Under the settling gate, whether the server's page cache has settled
    /// at `t_s` seconds into the run (the driver judges it from its own
    /// samples: the memory cgroup's LRU lists); `None` when the plan cannot
    /// tell, and the gate then goes by the sessions alone. Called on the
    /// load client's event loop: it must answer promptly.
    fn cache_settled(&mut self, _t_s: f64) -> Option<bool> {
        None
    }
}

/// A plan that plays a fixed list of steps.
pub struct FixedSteps(pub std::collections::VecDeque<StepSpec>);

impl StepPlan for FixedSteps {
    fn next(&mut self, _finished: Option<&StepResult>) -> Option<StepSpec> {
        self.0.pop_front()
    }
}

/// Active sessions over the window: the steady state shows as equal thirds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ActiveSessions {
    pub mean: f64,
    pub first_third: f64,
    pub last_third: f64,
}

/// What one step measured (a row of `steps.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepResult {
    /// From 0, in the order played.
    pub index: usize,
    pub spec: StepSpec,
    /// Seconds since the run started: when the step began and ended, and its
    /// measured window.
    pub start_s: f64,
    pub window_s: (f64, f64),
    pub end_s: f64,
    /// Sessions started during the whole step.
    pub sessions_started: u64,
    /// Sessions scheduled inside the window.
    pub sessions_measured: u64,
    /// Of those, failed before the step ended.
    pub sessions_failed: u64,
    pub failed_by_cause: std::collections::BTreeMap<String, u64>,
    /// The step's verdict, in percent: the largest of the measured sessions'
    /// failure percentage (`measured_failure_percent`), that of the sessions
    /// in progress during the window (`in_progress_failure_percent`), and,
    /// when the window held fewer sessions than a steady state of its rate
    /// would by more than the bound (`population_held` false) under the
    /// settling gate, the share missing. `None` when no session arrived in
    /// the window. Steps recorded before build a144130 hold the measured
    /// percentage alone and have no `measured_failure_percent`.
    pub failure_percent: Option<f64>,
    /// Failed measured sessions (scheduled in the window, failed before the
    /// step's end) in percent of the measured ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_failure_percent: Option<f64>,
    /// Sessions in progress at some time in the window (those in play when
    /// it opened and those started in it) and, of them, those that failed
    /// on a request issued in the window (one issued before it, while the
    /// step settled, belongs to the settling: the joins of a population
    /// match and the repairs land there).
    #[serde(default)]
    pub in_progress_sessions: u64,
    #[serde(default)]
    pub in_progress_failed: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_progress_failure_percent: Option<f64>,
    /// Mean sessions in play over the window in percent of a steady state
    /// of the step's rate (rate x mean session length).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub population_percent: Option<f64>,
    /// False when the window held fewer sessions than that steady state by
    /// more than three standard deviations of its count (sqrt(N) of N under
    /// Poisson arrivals): sessions lost to failures before the window, a
    /// server recovering from a collapse rather than sustaining the rate.
    /// Part of the verdict under the settling gate only (`gate_pct`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub population_held: Option<bool>,
    /// Completed-request bytes inside the window, MB/s.
    pub throughput_mb_s: f64,
    /// Body bytes received inside the window (sample intervals wholly inside
    /// it), MB/s.
    pub received_mb_s: Option<f64>,
    /// Mean and 95 % CI half-width of the completed MB/s of the sample
    /// intervals wholly inside the window.
    pub samples_mb_s: (Option<f64>, Option<f64>),
    pub samples: usize,
    pub active_sessions: Option<ActiveSessions>,
    /// The settling the window actually had (`settle_s`, or more under the gate).
    #[serde(default)]
    pub settled_s: f64,
    /// Share of the steady-state sessions missing (negative: in excess) when
    /// the window opened (`population::gap`), percent; under the gate only.
    #[serde(default)]
    pub gap_pct: Option<f64>,
    /// Under the gate: false when the window opened at `max_settle_s` with
    /// the gap still above `gate_pct` or the page cache not settled.
    #[serde(default = "settled_default")]
    pub settled: bool,
    /// Under the gate, whether the plan found the page cache settled when
    /// the window opened ([`StepPlan::cache_settled`]); `None` when it could
    /// not tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_settled: Option<bool>,
    /// Under population matching: what the match at the step's start did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched: Option<Matched>,
    /// Per client class, how long the requests issued in the window waited
    /// for their first body byte: a class's deadline minus its transfer time
    /// is what the server may take, and a failing step shows which class
    /// ran out of it. Absent in steps recorded before.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub first_byte: std::collections::BTreeMap<String, FirstByte>,
}

/// Time to first byte of the requests of one client class issued in a
/// step's window, milliseconds (hdrhistogram, 3 significant digits).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FirstByte {
    /// Requests issued in the window (that ended before the step did).
    pub requests: u64,
    /// Of those, requests that ended without a body byte (a timeout or an
    /// error before any data): not in the percentiles.
    pub without_first_byte: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// What a population match did (a step's `matched`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Matched {
    /// Sessions in progress added for the rise of rate.
    pub added: u64,
    /// Of those, added in place of failed sessions that would still be playing.
    pub replaced: u64,
    /// Sessions in play withdrawn for the fall of rate.
    pub withdrawn: u64,
    /// Drawn sessions whose requests were all made at their age (none left to play).
    pub finished: u64,
    /// Sessions that failed before the window opened, resumed at their age
    /// (`play.rs`, `repair_population`).
    #[serde(default)]
    pub repaired: u64,
}

fn settled_default() -> bool {
    true
}

/// The running accounting of the current step.
#[derive(Debug)]
pub(crate) struct StepCounters {
    pub index: usize,
    pub spec: StepSpec,
    pub start_s: f64,
    pub started: u64,
    pub measured: u64,
    pub failures: SessionCounts,
    /// Settling added by the gate so far.
    pub extra_settle_s: f64,
    /// Under the gate, the gap (percent) when the window opened: `None`
    /// while the gate has not opened it yet.
    pub gap_pct: Option<f64>,
    /// Under the gate, the plan's word on the page cache when the window opened.
    pub cache_settled: Option<bool>,
    /// Under the gate, while the window waits: what its last check found
    /// unsettled, as the progress line says it.
    waiting: Option<&'static str>,
    pub matched: Option<Matched>,
    /// Sessions in play in a steady state of the step's rate (rate x mean
    /// session length), when the player knows the session lengths.
    pub steady_sessions: Option<f64>,
    /// Sessions that failed on a request issued in the window.
    pub in_progress_failed: u64,
    /// Per client class: microseconds to the first body byte of the
    /// requests issued in the window, and how many had none.
    first_byte: std::collections::BTreeMap<String, (hdrhistogram::Histogram<u64>, u64)>,
}

/// How far below its steady state, in standard deviations of the count,
/// a window's mean population may fall and still count as holding it.
pub const POPULATION_SIGMAS: f64 = 3.0;

impl StepCounters {
    pub fn new(index: usize, spec: StepSpec, start_s: f64) -> StepCounters {
        StepCounters {
            index,
            spec,
            start_s,
            started: 0,
            measured: 0,
            failures: SessionCounts::default(),
            extra_settle_s: 0.0,
            gap_pct: None,
            cache_settled: None,
            waiting: None,
            matched: None,
            steady_sessions: None,
            in_progress_failed: 0,
            first_byte: std::collections::BTreeMap::new(),
        }
    }

    pub fn window(&self) -> (f64, f64) {
        let a = self.start_s + self.spec.settle_s + self.extra_settle_s;
        (a, a + self.spec.measure_s)
    }

    pub fn end_s(&self) -> f64 {
        self.start_s + self.spec.length_s() + self.extra_settle_s
    }

    /// Under the gate, when the window would open: the time to check it.
    pub fn gate_check_s(&self) -> Option<f64> {
        (self.spec.gate_pct > 0.0 && self.gap_pct.is_none()).then(|| self.window().0)
    }

    /// False when the gate opened the window at its cap, the gap still too
    /// large or the page cache still moving.
    fn settled(&self) -> bool {
        self.gap_pct.is_none_or(|g| g.abs() <= self.spec.gate_pct) && self.cache_settled != Some(false)
    }

    /// The gate's decision at the window's start, given the gap there (a
    /// fraction, see `population::gap`) and the plan's word on the page
    /// cache: open the window when both have settled (a cache the plan
    /// cannot judge does not hold it), or settle [`GATE_STEP_S`] longer
    /// (never past `max_settle_s`).
    pub fn gate(&mut self, gap: f64, cache_settled: Option<bool>) {
        let settle = self.spec.settle_s + self.extra_settle_s;
        let sessions_ok = (100.0 * gap).abs() <= self.spec.gate_pct;
        let cache_ok = cache_settled != Some(false);
        if (sessions_ok && cache_ok) || settle + GATE_STEP_S > self.spec.max_settle_s + 1e-9 {
            self.gap_pct = Some(100.0 * gap);
            self.cache_settled = cache_settled;
            self.waiting = None;
        } else {
            self.extra_settle_s += GATE_STEP_S;
            self.waiting = Some(match (sessions_ok, cache_ok) {
                (false, false) => "settling, waiting for the sessions and the page cache",
                (false, true) => "settling, waiting for the sessions",
                _ => "settling, waiting for the page cache",
            });
        }
    }

    /// Where the step is at `t_s` (progress output): settling (and, under
    /// the gate, for what), measuring, or holding.
    pub fn phase(&self, t_s: f64) -> &'static str {
        let (a, b) = self.window();
        // A gate check not made yet (a progress tick at the same instant
        // comes first) has not opened the window: it may move it on.
        if t_s < a || self.gate_check_s().is_some() {
            self.waiting.unwrap_or("settling")
        } else if t_s < b {
            "measuring"
        } else {
            "holding"
        }
    }

    fn in_window(&self, scheduled_s: f64) -> bool {
        let (a, b) = self.window();
        scheduled_s >= a && scheduled_s < b
    }

    pub fn session_started(&mut self, scheduled_s: f64) {
        self.started += 1;
        if self.in_window(scheduled_s) {
            self.measured += 1;
        }
    }

    /// A session ended (before this step's end, or it would have been
    /// closed); `failed_request_s`: when the request it ended on was issued.
    pub fn session_ended(&mut self, record: &crate::records::SessionRecord, failed_request_s: Option<f64>) {
        if !record.outcome.is_failure() {
            return;
        }
        if self.in_window(record.scheduled_s) {
            self.failures.started += 1;
            self.failures.failed += 1;
            *self.failures.failed_by_cause.entry(record.outcome.name().to_owned()).or_default() += 1;
        }
        if failed_request_s.is_some_and(|t| self.in_window(t)) {
            self.in_progress_failed += 1;
        }
    }

    /// A request ended: one issued in the window counts in its class's
    /// first-byte figures.
    pub fn request_ended(&mut self, record: &crate::records::RequestRecord) {
        if !self.in_window(record.start_s) {
            return;
        }
        let (hist, without) = self.first_byte.entry(record.class.clone()).or_insert_with(|| (crate::records::histogram(), 0));
        match record.first_byte_s {
            Some(fb) => hist.saturating_record(((fb - record.start_s).max(0.0) * 1e6) as u64),
            None => *without += 1,
        }
    }

    /// The step's result, from its counters, the completed requests
    /// `(end time, bytes)` and the sample intervals of the run so far.
    pub fn finish(&self, completed: &[(f64, u64)], intervals: &[IntervalRecord]) -> StepResult {
        let (a, b) = self.window();
        let figures = window_figures(completed, intervals, a, b);
        let inside: Vec<&IntervalRecord> = intervals.iter().filter(|i| i.start_s >= a - 1e-6 && i.end_s <= b + 1e-6).collect();
        let received = (!inside.is_empty()).then(|| {
            let span: f64 = inside.iter().map(|i| i.end_s - i.start_s).sum();
            inside.iter().map(|i| i.received_bytes).sum::<u64>() as f64 / 1e6 / span.max(1e-9)
        });
        let active: Vec<f64> = inside.iter().map(|i| i.sessions_active as f64).collect();
        let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
        let third = active.len() / 3;
        let active_sessions = (third > 0).then(|| ActiveSessions {
            mean: mean(&active).unwrap_or(0.0),
            first_third: mean(&active[..third]).unwrap_or(0.0),
            last_third: mean(&active[active.len() - third..]).unwrap_or(0.0),
        });
        // In play when the window opened (the interval ending there), and
        // started in it.
        let at_open = intervals.iter().find(|i| (i.end_s - a).abs() < 1e-6).map_or(0, |i| i.sessions_active);
        let in_progress = at_open + inside.iter().map(|i| i.sessions_started).sum::<u64>();
        let pct = |part: u64, whole: u64| (whole > 0).then(|| 100.0 * part as f64 / whole as f64);
        let measured_failure_percent = pct(self.failures.failed, self.measured);
        let in_progress_failure_percent = pct(self.in_progress_failed, in_progress);
        let population = self.steady_sessions.filter(|n| *n > 0.0).zip(mean(&active)).map(|(steady, held)| {
            let bound = steady - POPULATION_SIGMAS * steady.sqrt();
            (100.0 * held / steady, held >= bound)
        });
        // Judged under the settling gate only: the gate is what claims the
        // window holds the steady state (without it, a short ramp from idle
        // leaves the window short by design, and the figure is recorded).
        let judged = self.spec.gate_pct > 0.0;
        let missing = population.filter(|(_, held)| judged && !held).map(|(p, _)| 100.0 - p);
        let failure_percent = measured_failure_percent
            .map(|m| [in_progress_failure_percent, missing].into_iter().flatten().fold(m, f64::max));
        StepResult {
            index: self.index,
            spec: self.spec,
            start_s: self.start_s,
            window_s: (a, b),
            end_s: self.end_s(),
            sessions_started: self.started,
            sessions_measured: self.measured,
            sessions_failed: self.failures.failed,
            failed_by_cause: self.failures.failed_by_cause.clone(),
            failure_percent,
            measured_failure_percent,
            in_progress_sessions: in_progress,
            in_progress_failed: self.in_progress_failed,
            in_progress_failure_percent,
            population_percent: population.map(|(p, _)| p),
            population_held: population.map(|(_, held)| held),
            throughput_mb_s: figures.throughput_mb_s,
            received_mb_s: received,
            samples_mb_s: (figures.samples.mean_mb_s, figures.samples.ci95_mb_s),
            samples: figures.samples.count,
            active_sessions,
            settled_s: self.spec.settle_s + self.extra_settle_s,
            gap_pct: self.gap_pct,
            settled: self.settled(),
            cache_settled: self.cache_settled,
            matched: self.matched,
            first_byte: self
                .first_byte
                .iter()
                .map(|(class, (h, without))| {
                    // No byte at all in the class: zeros, with the requests counted.
                    let p = crate::summary::Percentiles::from_histogram_us(h);
                    let at = |f: fn(&crate::summary::Percentiles) -> f64| p.as_ref().map_or(0.0, f);
                    let summary = FirstByte {
                        requests: h.len() + without,
                        without_first_byte: *without,
                        p50_ms: at(|p| p.p50),
                        p90_ms: at(|p| p.p90),
                        p99_ms: at(|p| p.p99),
                        max_ms: at(|p| p.max),
                    };
                    (class.clone(), summary)
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Outcome;

    fn spec() -> StepSpec {
        StepSpec { rate: 2.0, settle_s: 10.0, measure_s: 30.0, hold_s: 10.0, gate_pct: 0.0, max_settle_s: 0.0, join_s: 0.0 }
    }

    fn interval(start: f64, mb_s: f64, active: u64) -> IntervalRecord {
        IntervalRecord {
            start_s: start,
            end_s: start + 5.0,
            received_bytes: (mb_s * 5e6) as u64,
            received_mb_s: mb_s,
            completed_bytes: (mb_s * 5e6) as u64,
            completed_mb_s: mb_s,
            requests_completed: 1,
            requests_failed: 0,
            sessions_started: 1,
            sessions_active: active,
        }
    }

    /// Sample intervals from 100 to 150 s around the window [110, 140) of
    /// `spec()` from 100 s: `active` in play at every edge, `started` sessions
    /// started in each interval inside the window and `outside` in the others.
    fn window_intervals(active: u64, started: u64, outside: u64) -> Vec<IntervalRecord> {
        (20..30)
            .map(|k| {
                let mut i = interval(k as f64 * 5.0, 1.0, active);
                i.sessions_started = if (22..28).contains(&k) { started } else { outside };
                i
            })
            .collect()
    }

    /// A session that ran from `start` (scheduled at `scheduled`) to `end`
    /// with `done` requests answered.
    fn ended(scheduled: f64, start: f64, end: f64, done: usize, outcome: Outcome) -> crate::records::SessionRecord {
        crate::records::SessionRecord {
            session: 0,
            phase: vidbench_library::Phase::Measure,
            class: "c".into(),
            video: 0,
            scheduled_s: scheduled,
            start_s: start,
            end_s: end,
            requests_done: done,
            requests_total: 10,
            bytes: 0,
            reconnects: 0,
            outcome,
            detail: String::new(),
        }
    }

    /// A request of `class` issued at `start`, its first byte `first_byte`
    /// seconds later (none: it ended without one).
    fn request(class: &str, start: f64, first_byte: Option<f64>, outcome: Outcome) -> crate::records::RequestRecord {
        crate::records::RequestRecord {
            session: 0,
            phase: vidbench_library::Phase::Measure,
            class: class.into(),
            video: 0,
            path: "/v/0.mp4".into(),
            range: String::new(),
            start_s: start,
            first_byte_s: first_byte.map(|d| start + d),
            end_s: start + 5.0,
            bytes: 1,
            status: Some(206),
            outcome,
        }
    }

    #[test]
    fn first_byte_times_are_per_class_of_the_requests_issued_in_the_window() {
        let mut s = StepCounters::new(1, spec(), 100.0);
        assert_eq!(s.window(), (110.0, 140.0));
        // Outside the window: before it, and in the hold.
        s.request_ended(&request("slow", 105.0, Some(9.0), Outcome::Ok));
        s.request_ended(&request("slow", 141.0, Some(9.0), Outcome::Ok));
        // "fast": 100 requests answered after 1..=100 ms.
        for k in 1..=100 {
            s.request_ended(&request("fast", 110.0 + k as f64 * 0.1, Some(k as f64 / 1e3), Outcome::Ok));
        }
        // "slow": one after 2.5 s, one that timed out before any byte, one
        // that failed after its first byte (counted in the percentiles).
        s.request_ended(&request("slow", 120.0, Some(2.5), Outcome::Ok));
        s.request_ended(&request("slow", 121.0, None, Outcome::Timeout));
        s.request_ended(&request("slow", 122.0, Some(4.0), Outcome::Timeout));
        let r = s.finish(&[], &[]);
        assert_eq!(r.first_byte.keys().collect::<Vec<_>>(), ["fast", "slow"]);
        let fast = &r.first_byte["fast"];
        assert_eq!((fast.requests, fast.without_first_byte), (100, 0));
        let near = |a: f64, b: f64| (a - b).abs() <= b * 0.002;
        assert!(near(fast.p50_ms, 50.0) && near(fast.p90_ms, 90.0) && near(fast.p99_ms, 99.0) && near(fast.max_ms, 100.0), "{fast:?}");
        let slow = &r.first_byte["slow"];
        assert_eq!((slow.requests, slow.without_first_byte), (3, 1));
        assert!(near(slow.p50_ms, 2500.0) && near(slow.max_ms, 4000.0), "{slow:?}");
        // A class whose every request ended without a byte: zeros, counted.
        let mut s = StepCounters::new(1, spec(), 100.0);
        s.request_ended(&request("dead", 115.0, None, Outcome::Connect));
        let dead = &s.finish(&[], &[]).first_byte["dead"];
        assert_eq!((dead.requests, dead.without_first_byte, dead.max_ms), (1, 1, 0.0));
    }

    #[test]
    fn only_sessions_scheduled_in_the_window_and_failed_before_the_end_count() {
        let mut s = StepCounters::new(1, spec(), 100.0);
        assert_eq!(s.window(), (110.0, 140.0));
        assert_eq!(s.end_s(), 150.0);
        for t in [105.0, 110.0, 120.0, 139.9, 140.0, 145.0] {
            s.session_started(t);
        }
        assert_eq!((s.started, s.measured), (6, 3));
        s.session_ended(&ended(105.0, 105.0, 108.0, 0, Outcome::Timeout), Some(105.0)); // settling: not measured
        s.session_ended(&ended(110.0, 110.0, 121.0, 1, Outcome::Timeout), Some(111.0));
        s.session_ended(&ended(120.0, 120.0, 125.0, 3, Outcome::Ok), Some(124.0));
        s.session_ended(&ended(139.9, 139.9, 149.0, 2, Outcome::Interrupted), Some(145.0)); // the run ended: not a failure
        s.session_ended(&ended(140.0, 140.0, 146.0, 0, Outcome::Connect), Some(140.0)); // after the window
        // 20 in play when the window opened, one started in each of its six intervals.
        let r = s.finish(&[], &window_intervals(20, 1, 0));
        assert_eq!(r.sessions_failed, 1);
        assert_eq!(r.failed_by_cause.get("timeout"), Some(&1));
        let pct = r.measured_failure_percent.unwrap();
        assert!((pct - 100.0 / 3.0).abs() < 1e-9, "{pct}");
        // The one failure was on a request issued in the window: 1 of 26 in progress.
        assert_eq!((r.in_progress_failed, r.in_progress_sessions), (1, 26));
        assert_eq!(r.failure_percent, Some(pct), "the measured share is the larger");
    }

    /// Sessions in progress during the window fail it too, whenever they
    /// started, when the request they failed on was issued in the window
    /// (one issued while the step settled belongs to the settling); the
    /// share is of the sessions in play at the window's start plus those
    /// started in it, and the verdict is the larger share.
    #[test]
    fn failures_of_sessions_in_progress_during_the_window_count() {
        let mut s = StepCounters::new(1, spec(), 100.0); // window [110, 140), end 150
        for t in [50.0, 60.0, 70.0, 80.0, 90.0] {
            s.session_started(t);
        }
        s.session_ended(&ended(50.0, 50.0, 122.0, 6, Outcome::Timeout), Some(112.0)); // issued in the window: counts
        s.session_ended(&ended(60.0, 60.0, 149.0, 8, Outcome::Status), Some(139.0)); // failed in the hold, issued in the window: counts
        s.session_ended(&ended(20.0, 105.0, 115.0, 0, Outcome::Timeout), Some(105.0)); // a join's first request, issued while settling
        s.session_ended(&ended(70.0, 70.0, 118.0, 3, Outcome::Timeout), Some(108.0)); // issued while settling, failed in the window
        s.session_ended(&ended(80.0, 80.0, 148.0, 9, Outcome::Timeout), Some(141.0)); // issued in the hold
        s.session_ended(&ended(90.0, 90.0, 120.0, 4, Outcome::Withdrawn), Some(115.0)); // not a failure
        assert_eq!(s.in_progress_failed, 2);
        // 40 in play when the window opened, 2 started in each of its six intervals.
        let intervals = window_intervals(40, 2, 9);
        let r = s.finish(&[], &intervals);
        assert_eq!((r.in_progress_sessions, r.in_progress_failed), (52, 2));
        assert_eq!(r.measured_failure_percent, None);
        assert_eq!(r.failure_percent, None, "no measured session: no verdict");
        s.session_started(115.0);
        let r = s.finish(&[], &intervals);
        assert_eq!(r.measured_failure_percent, Some(0.0));
        let in_progress = 100.0 * 2.0 / 52.0;
        assert_eq!(r.in_progress_failure_percent, Some(in_progress));
        assert_eq!(r.failure_percent, Some(in_progress));
    }

    /// Under the gate, a window holding fewer sessions than a steady state
    /// of its rate by more than three standard deviations fails by the share
    /// missing.
    #[test]
    fn a_window_short_of_its_steady_population_fails() {
        let held = |active: u64| {
            let gated = StepSpec { gate_pct: 3.0, max_settle_s: 10.0, ..spec() };
            let mut s = StepCounters::new(1, gated, 100.0);
            s.steady_sessions = Some(400.0); // bound: 400 - 3 x 20 = 340
            s.session_started(120.0);
            let intervals: Vec<IntervalRecord> = (22..28).map(|k| interval(k as f64 * 5.0, 1.0, active)).collect();
            s.finish(&[], &intervals)
        };
        let r = held(372);
        assert_eq!((r.population_percent, r.population_held), (Some(93.0), Some(true)));
        assert_eq!(r.failure_percent, Some(0.0));
        let r = held(340);
        assert_eq!(r.population_held, Some(true), "at the bound");
        let r = held(320);
        assert_eq!((r.population_percent, r.population_held), (Some(80.0), Some(false)));
        assert_eq!(r.failure_percent, Some(20.0));
        assert_eq!(r.measured_failure_percent, Some(0.0));
        // Without the session lengths there is no population verdict.
        let mut s = StepCounters::new(1, spec(), 100.0);
        s.session_started(120.0);
        let r = s.finish(&[], &(22..28).map(|k| interval(k as f64 * 5.0, 1.0, 100)).collect::<Vec<_>>());
        assert_eq!((r.population_percent, r.population_held, r.failure_percent), (None, None, Some(0.0)));
        // Without the gate the population is recorded, not judged.
        let mut s = StepCounters::new(1, spec(), 100.0);
        s.steady_sessions = Some(400.0);
        s.session_started(120.0);
        let r = s.finish(&[], &(22..28).map(|k| interval(k as f64 * 5.0, 1.0, 100)).collect::<Vec<_>>());
        assert_eq!((r.population_percent, r.population_held, r.failure_percent), (Some(25.0), Some(false), Some(0.0)));
    }

    #[test]
    fn throughput_and_samples_are_those_of_the_window() {
        let s = StepCounters::new(0, spec(), 0.0);
        // Completions before, inside and after the window [10, 40).
        let completed = [(5.0, 9_000_000), (10.0, 3_000_000), (39.0, 3_000_000), (40.0, 9_000_000)];
        let intervals: Vec<IntervalRecord> =
            (0..10).map(|k| interval(k as f64 * 5.0, if (2..8).contains(&k) { 1.0 } else { 50.0 }, 10 + k)).collect();
        let r = s.finish(&completed, &intervals);
        assert!((r.throughput_mb_s - 6.0 / 30.0).abs() < 1e-9);
        assert_eq!(r.samples, 6);
        assert_eq!(r.samples_mb_s.0, Some(1.0));
        assert_eq!(r.received_mb_s, Some(1.0));
        let a = r.active_sessions.unwrap();
        assert_eq!((a.first_third, a.last_third), (12.5, 16.5));
        assert_eq!(s.finish(&[], &[]).failure_percent, None);
    }

    #[test]
    fn the_gate_moves_the_window_until_the_sessions_settle_or_the_cap() {
        let gated = StepSpec { gate_pct: 3.0, max_settle_s: 25.0, ..spec() }; // settle 10, measure 30, hold 10
        let mut s = StepCounters::new(1, gated, 100.0);
        assert_eq!(s.gate_check_s(), Some(110.0));
        s.gate(0.08, None); // 8 % missing: 5 s more
        assert_eq!((s.gate_check_s(), s.window(), s.end_s()), (Some(115.0), (115.0, 145.0), 155.0));
        s.gate(-0.02, None); // within 3 % (an excess counts by its size): open
        assert_eq!(s.gate_check_s(), None);
        assert_eq!(s.window(), (115.0, 145.0));
        // A session scheduled in the extended settling is not measured.
        s.session_started(112.0);
        s.session_started(116.0);
        assert_eq!((s.started, s.measured), (2, 1));
        let r = s.finish(&[], &[]);
        assert_eq!((r.settled_s, r.gap_pct, r.settled), (15.0, Some(-2.0), true));

        // Never settled: the window opens at the cap, and says so.
        let mut s = StepCounters::new(1, gated, 100.0);
        for _ in 0..10 {
            if s.gate_check_s().is_some() {
                s.gate(0.2, None);
            }
        }
        let r = s.finish(&[], &[]);
        assert_eq!((r.settled_s, r.settled), (25.0, false));
        assert_eq!(r.window_s, (125.0, 155.0));

        // Sessions settled but the page cache still moving: the window
        // waits for the cache, then opens once it has settled.
        let mut s = StepCounters::new(1, gated, 100.0);
        assert_eq!(s.phase(105.0), "settling");
        assert_eq!(s.phase(112.0), "settling", "at or past the window's start, the gate not yet asked");
        s.gate(0.0, Some(false));
        assert_eq!(s.gate_check_s(), Some(115.0));
        assert_eq!(s.phase(112.0), "settling, waiting for the page cache");
        s.gate(0.2, Some(false));
        assert_eq!(s.phase(117.0), "settling, waiting for the sessions and the page cache");
        let mut s = StepCounters::new(1, gated, 100.0);
        s.gate(0.0, Some(false));
        s.gate(0.01, Some(true));
        let r = s.finish(&[], &[]);
        assert_eq!((r.settled_s, r.settled, r.cache_settled), (15.0, true, Some(true)));
        assert_eq!((s.phase(114.0), s.phase(115.0), s.phase(145.0)), ("settling", "measuring", "holding"));
        // A cache that never settles opens the window at the cap, unsettled.
        let mut s = StepCounters::new(1, gated, 100.0);
        while s.gate_check_s().is_some() {
            s.gate(0.0, Some(false));
        }
        let r = s.finish(&[], &[]);
        assert_eq!((r.settled_s, r.gap_pct, r.settled, r.cache_settled), (25.0, Some(0.0), false, Some(false)));

        // Without the gate the window is where the spec puts it.
        let s = StepCounters::new(1, spec(), 100.0);
        assert_eq!((s.gate_check_s(), s.window()), (None, (110.0, 140.0)));
    }

    #[test]
    fn bad_specs_are_refused() {
        assert!(spec().check().is_ok());
        assert!(StepSpec { rate: 0.0, ..spec() }.check().is_err());
        assert!(StepSpec { measure_s: 0.0, ..spec() }.check().is_err());
        assert!(StepSpec { hold_s: f64::NAN, ..spec() }.check().is_err());
        assert!(StepSpec { gate_pct: -1.0, ..spec() }.check().is_err());
        assert!(StepSpec { gate_pct: 3.0, max_settle_s: 5.0, ..spec() }.check().is_err(), "a cap below the minimum settling");
        assert!(StepSpec { gate_pct: 3.0, max_settle_s: 60.0, ..spec() }.check().is_ok());
        assert!(StepSpec { join_s: 10.0, ..spec() }.check().is_ok());
        assert!(StepSpec { join_s: 11.0, ..spec() }.check().is_err(), "joins past the settling");
        assert!(StepSpec { join_s: -1.0, ..spec() }.check().is_err());
    }
}
