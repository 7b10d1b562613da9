//! The emulated hard disk: a FUSE filesystem timed by a model of one drive.
//!
//! A library manifest (`vidbench_library::Library`) becomes a read-only
//! filesystem whose file content is generated, and whose reads complete when a
//! model of one drive says they would. The modules are private; what other
//! crates use is re-exported below. The parts:
//!
//! - `params`: drive parameters, the presets, the TOML drive file;
//!   `drive_args`: which drive a command line means (preset, file, overrides);
//! - `model`: the drive model on a simulated clock (pure, tested alone; its
//!   closed-loop runs in [`sim`]);
//! - `layout`: where each file lies on the platter;
//! - `scheduler`: the thread that puts the model on the wall clock and
//!   replies to reads at their completion times;
//! - `fs`: the FUSE filesystem (fuser) and [`read_snapshot`] of its control
//!   file, `stats`: iostat-like counters, `trace`: the per-request CSV,
//!   `sys`: mount table, bdi, unmount;
//! - `mount`: the mount server (`vidbench disk mount`, `--daemonize`);
//!   `bench`: `vidbench disk bench`;
//! - [`block`]: block mode (`--block`): the drive image under a loop device
//!   and a real filesystem, its builder and cache;
//! - [`cli`]: `vidbench disk mount|unmount|stat|presets|model|bench|library`.
//!
//! docs/disk.md describes the testbed, its model and its limits.

mod bench;
pub mod block;
pub mod cli;
mod drive_args;
mod fs;
mod layout;
mod mount;
mod mount_args;
mod model;
mod params;
mod scheduler;
mod stats;
mod sys;
mod trace;

pub use mount::read_snapshot;
pub use sys::{fuse_max_request_kb, unescape as unescape_mountinfo};
pub use layout::{Layout, Placement};
pub use model::{sim, Completion, Drive, Geometry, Outcome, Request, SECTOR};
pub use params::{preset, presets, DriveFile, DriveKind, DriveParams, ParamsError, Preset, Reference};
pub use stats::{Counters, Interval, Rates, Snapshot, SNAPSHOT_FORMAT};
