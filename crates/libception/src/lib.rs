//! Reception, the daemon half of Libception.
//!
//! Architecture (paper 000, section 3.2.2; docs/daemon.md has the details):
//!
//! * `receptionist`: one thread, an epoll loop over every client connection;
//!   validates requests, answers residency checks and already-resident
//!   fetches, routes misses to the disk worker of the file's disk (`disks`).
//! * `worker`: disk workers, one FIFO queue and one read in flight each;
//!   joins overlapping requests, extends reads by the prefetch size chosen by a
//!   `prefetch::PrefetchController`, replies over the client's connection
//!   (`conn`).
//! * `prefetch`: the controllers: fixed size, or paper 001's adaptive size
//!   (`--prefetch adaptive`), fed by a tracker that works out which
//!   prefetched bytes were used, evicted before use, or wasted.
//! * `stats`: counters per disk, worker and client, served as JSON over the
//!   socket (LCP_OP_STATS) and optionally as Prometheus text.
//! * `daemon`: start-up, the socket, signals, shutdown.
//!
//! # Library API
//!
//! The modules are private; what other code needs is re-exported here:
//!
//! * [`run_daemon`] with a [`DaemonConfig`]: `libception daemon`.
//! * [`launch`]: the daemon's command line and the wait until a started child
//!   is ready (used by `libception run` and vidbench's experiment driver).
//! * [`logging`]: how the `libception` and `vidbench` binaries log.
//! * [`Client`]: a blocking client of the daemon's socket (`libception stat`,
//!   `fetch`, the tests).
//! * [`Snapshot`] and its parts: the stats document ([`STATS_FORMAT`]),
//!   including the adaptive controller's part ([`ControllerSnapshot`]).
//! * [`resident_prefix`], [`is_resident`], [`page_size`]: page-cache residency
//!   as the daemon checks it.
//! * [`parse_size`], [`human_size`]: byte sizes as the command line writes them.
//! * [`fuzzing`]: the bodies of the fuzz targets (`fuzz/`), replayed by
//!   `tests/fuzz_replay.rs`; not a stable API.
//!
//! The `run`, `stat` and `fetch` subcommands live in the binary (`src/cli/`).

mod client;
mod conn;
mod daemon;
mod disks;
mod diskstat;
mod fsfilter;
pub mod fuzzing;
mod limits;
pub mod launch;
pub mod logging;
mod prefetch;
mod promotion;
mod placement;
mod receptionist;
mod residency;
mod size;
mod stats;
mod sys;
mod trust;
mod worker;

pub use client::Client;
pub use daemon::{run as run_daemon, DaemonConfig};
pub use worker::{QueueOrder, ReplyWhen};
pub use promotion::PromoteMode;
pub use limits::Limits;
pub use prefetch::{ControllerSnapshot, Decision, IntervalRecord, ProbeSnapshot, ProbeSource, QueueSnapshot, SizeScore, TransactionSource, UsageTally, WorkerUsage};
pub use trust::Trust;
pub use placement::physical_offset;
pub use residency::{is_resident, page_size, resident_prefix};
pub use size::{human_size, parse_size, SizeError};
pub use stats::{
    ClientSnapshot, DaemonInfo, DiskSnapshot, HistSummary, SizeBucket, Snapshot, TotalsSnapshot, WorkerSnapshot, STATS_FORMAT,
};
