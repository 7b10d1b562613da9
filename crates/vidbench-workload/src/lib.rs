//! Workload generator: a spec becomes a video library and client sessions.
//!
//! Paper 003's methodology (sections 4-7, Table 2): a TOML [`spec`] with the
//! papers' defaults is validated, [`generate`]d into a library manifest, sessions
//! and a warming set with seeded, independent random streams, summarized as paper
//! 003 Table 3 ([`summary`]) and written atomically to a directory ([`output`]).
//! The session file formats live in `vidbench_library::session_io` so the load
//! client reads them without this crate. `vidbench workload` is [`cli`].

pub mod cdf;
pub mod cli;
pub mod generate;
pub mod output;
pub mod spec;
pub mod summary;

pub use generate::{generate, Workload};
pub use spec::{Spec, SpecError, Validated};
pub use summary::{summarize, Summary};
