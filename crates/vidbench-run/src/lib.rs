//! Experiment driver (`vidbench run`): runs real web servers on the emulated
//! disk under a memory limit, with and without Libception, and finds each
//! configuration's maximum failure-free rate (paper 000 section 4, paper 003
//! section 7).
//!
//! The `vidbench` binary calls [`cli::run`] with [`cli::Args`]; the rest of
//! the public API is what a program needs to read or drive an experiment:
//! [`Experiment`] and its [`Config`]s (also the schema of the results'
//! `experiment.json`, `run.json` and `setup.json`), the search
//! ([`find_max_failure_free`] over a [`Prober`]) and the [`Driver`].
//!
//! Inside (private modules):
//! - `experiment`: the experiment file (`schema`), its checks and sweeps
//!   (`expand`), and the expanded [`Experiment`].
//! - `search`: the maximum failure-free rate search (pure, tested against a
//!   simulated server; confidence intervals come from vidbench-stats).
//! - `driver`: the loop over configurations, rates and repetitions, results
//!   layout, progress; `resume` (what a resume may continue) and `parts` (an
//!   interrupted search's finished steps); `summary` (a configuration's
//!   headline); `estimate` (runs and machine time for progress and `--check`).
//!   One run builds its guards in order:
//!   `disk` (outside the cgroup), `cgroup`, `daemon`, `server` (from a
//!   `template`), all children being `process` guards, and stops them in
//!   reverse whatever happens (`interrupt` turns Ctrl-C into an error).
//!   The daemon's command line and every wait for a child to be ready come
//!   from `libception::launch`, the shim's environment from
//!   `libception_proto::ShimEnv`.
//! - `cgroup_probe`: `--probe-cgroup`, a run's cgroup steps with stand-in
//!   children, to check a machine.
//! - `reader`: cache warming and the `wc` upper bound.
//! - `setup`: the machine description recorded with every run.
//! - `reclaim` (public for `vidbench proactive-reclaim`): DAMON's proactive
//!   reclaim found, recorded, and paused through a registry shared by benchmarks.
//! - `progress`: the "run N of M" line.

mod cgroup;
mod chaos;
mod cgroup_probe;
mod controller_log;
pub mod cli;
mod daemon;
mod disk;
mod driver;
mod estimate;
mod experiment;
mod interrupt;
mod parts;
mod process;
pub mod reclaim;
mod progress;
mod reader;
mod resume;
mod search;
mod server;
mod setup;
mod sharing;
mod steady;
mod summary;
mod template;

pub use driver::{Driver, RunResult, DONE};
pub use interrupt::Interrupted;
pub use summary::ConfigSummary;
pub use experiment::{Config, Experiment, ExperimentError, Mode, Prefetch, RatePlan, RunKind, ServerKind, WorkloadSource};
pub use search::{find_max_failure_free, Outcome, Prober, SearchResult};
