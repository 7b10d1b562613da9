//! Experiment driver (`vidbench run`): runs real web servers on the emulated
//! disk under a memory limit, with and without Libception, and finds each
//! configuration's maximum failure-free rate (paper 000 section 4, paper 003
//! section 7).
//!
//! - [`experiment`]: the experiment file and its checks.
//! - [`search`]: the maximum failure-free rate search (pure, tested against a
//!   simulated server; confidence intervals come from vidbench-stats).
//! - [`driver`]: the loop over configurations, rates and repetitions, results
//!   layout, progress, resume; one run builds its guards in order:
//!   [`disk`] (outside the cgroup), [`cgroup`], [`daemon`], [`server`] (from a
//!   [`template`]), all children being [`process`] guards, and stops them in
//!   reverse whatever happens ([`interrupt`] turns Ctrl-C into an error).
//! - [`reader`]: cache warming and the `wc` upper bound.
//! - [`setup`]: the machine description recorded with every run.

pub mod cgroup;
pub mod cli;
pub mod daemon;
pub mod disk;
pub mod driver;
pub mod experiment;
pub mod interrupt;
pub mod process;
pub mod reader;
pub mod search;
pub mod server;
pub mod setup;
pub mod template;
