//! The emulated hard disk: a FUSE filesystem timed by a model of one drive.
//!
//! A library manifest (`vidbench_library::Library`) becomes a read-only
//! filesystem whose file content is generated, and whose reads complete when a
//! model of one drive says they would. The parts:
//!
//! - [`params`]: drive parameters, the presets, the TOML drive file;
//! - [`model`]: the drive model on a simulated clock (pure, tested alone);
//! - [`layout`]: where each file lies on the platter;
//! - `scheduler`: the thread that puts the model on the wall clock and
//!   replies to reads at their completion times;
//! - `fs`: the FUSE filesystem (fuser), `stats`: iostat-like counters,
//!   `trace`: the per-request CSV, `sys`: mount table, bdi, unmount;
//! - [`block`]: block mode (`--block`): the drive image under a loop device
//!   and a real filesystem, its builder and cache;
//! - [`cli`]: `vidbench disk mount|unmount|stat|presets|model|bench`.
//!
//! docs/disk.md describes the testbed, its model and its limits.

mod bench;
pub mod block;
pub mod cli;
mod fs;
pub mod layout;
pub mod model;
pub mod params;
mod scheduler;
pub mod stats;
mod sys;
mod trace;
