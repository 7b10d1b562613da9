//! Reception, the daemon half of Libception, and the `libception` CLI.
//!
//! Architecture (paper 000, section 3.2.2; docs/daemon.md has the details):
//!
//! * [`receptionist`]: one thread, an epoll loop over every client connection;
//!   validates requests, answers residency checks and already-resident
//!   fetches, routes misses to the disk worker of the file's disk ([`disks`]).
//! * [`worker`]: disk workers, one FIFO queue and one read in flight each;
//!   joins overlapping requests, extends reads by the prefetch size chosen by a
//!   [`prefetch::PrefetchController`], replies over the client's connection
//!   ([`conn`]).
//! * [`prefetch`]: the controllers: fixed size, or paper 001's adaptive size
//!   (`--prefetch adaptive`), fed by a tracker that works out which
//!   prefetched bytes were used, evicted before use, or wasted.
//! * [`stats`]: counters per disk, worker and client, served as JSON over the
//!   socket (LCP_OP_STATS) and optionally as Prometheus text.
//! * [`daemon`], [`cli_stat`], [`cli_run`], [`cli_fetch`]: the subcommands; [`client`]
//!   is the protocol client used by `stat` and the tests.

pub mod cli_fetch;
pub mod cli_run;
pub mod cli_stat;
pub mod client;
pub mod conn;
pub mod daemon;
pub mod disks;
pub mod launch;
pub mod prefetch;
pub mod receptionist;
pub mod residency;
pub mod size;
pub mod stats;
pub mod sys;
pub mod worker;
