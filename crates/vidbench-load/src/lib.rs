//! HTTP load client that plays video sessions against a real server
//! (`vidbench load`), after paper 003's modified httperf.
//!
//! An open system: session starts follow a Poisson process at the offered
//! rate whatever the server does. Each session is one persistent HTTP/1.1
//! connection; its first requests (no `pace_s`) go back to back, later ones
//! start `pace_s` after the previous one started; every request must be
//! complete by its deadline, and a missed deadline, a connection error, a wrong
//! status, a short body or (with verification) a wrong byte fails the session,
//! which then stops. Downloads are capped at the session's class rate through
//! a small receive buffer read at that rate, so TCP flow control reaches the
//! server; one-way delay is emulated by sleeping (see `client`).
//!
//! # Library API (for the experiment driver)
//!
//! ```no_run
//! use vidbench_load::{play, LoadConfig, Stop};
//! use vidbench_library::read_sessions;
//!
//! let sessions = read_sessions("sessions.jsonl".as_ref())?;
//! let mut config = LoadConfig::new("http://127.0.0.1:8080", 2.5, "results/rate-2.5");
//! config.stop = Stop::Duration(600.0);
//! let summary = play(config, sessions, &mut |p| eprintln!("{p}"))?;
//! println!("failed {:?} %, {:?} MB/s", summary.failure_percent, summary.throughput_mb_s);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`play`] blocks the calling thread (it runs its own single-threaded tokio
//! runtime; do not call it from inside one), writes the raw records into
//! `config.out_dir` as it goes and returns the [`LoadSummary`] it also writes
//! as `summary.json`. Session failures are results, not errors: [`LoadError`]
//! means the run could not be done (bad configuration or sessions, unreachable
//! server, unwritable result directory). The progress callback is called on
//! the same thread at the end of every sample interval.
//!
//! # Result files
//!
//! - `requests.csv`: one row per request started ([`RequestRecord`]).
//! - `sessions.csv`: one row per session started ([`SessionRecord`]).
//! - `intervals.csv`: one row per sample interval ([`IntervalRecord`]).
//! - `summary.json`: [`LoadSummary`].
//!
//! Times are seconds since the run started, to the microsecond. See
//! `docs/load.md` for the columns and the definitions of the headline figures.

mod arrivals;
pub mod cli;
mod client;
mod config;
mod materialize;
mod play;
pub mod population;
mod records;
pub mod steps;
mod summary;

pub use arrivals::PoissonArrivals;
pub use config::{LoadConfig, LoadError, ReceiveBuffer, Stop, MAX_SECONDS};
pub use materialize::materialize;
pub use play::{play, play_steps, Progress};
pub use steps::{FirstByte, FixedSteps, Matched, StepPlan, StepResult, StepSpec};
pub use records::{IntervalRecord, Outcome, RequestRecord, SessionCounts, SessionRecord};
pub use summary::{
    mean_ci95, CpuUse, ErrorCount, LoadSummary, Percentiles, RequestCounts, Samples, SessionRate, Setup, VerifyCounts,
    SUMMARY_VERSION,
};
