//! Workload generator: a spec becomes a video library and client sessions.
//!
//! Paper 003's methodology (sections 4-7, Table 2): a TOML [`Spec`] with the
//! papers' defaults is validated (`spec`), [`generate`]d into a library
//! manifest, sessions and a warming set with seeded, independent random streams
//! (`generate`, over the tabulated distributions of `cdf`), summarized as paper
//! 003 Table 3 ([`summarize`], `summary`) and written atomically to a directory
//! ([`write_workload`], `output`). The modules are private; their API is
//! re-exported here. The session file formats live in `vidbench_library` so
//! the load client reads them without this crate. `vidbench workload` is [`cli`].

mod cdf;
pub mod cli;
mod generate;
mod output;
mod spec;
mod summary;

pub use cdf::Cdf;
pub use generate::{generate, zipf_weights, VideoInfo, Workload};
pub use output::{
    context_of, write_workload, JSONL_FILE, LIBRARY_FILE, RESOLVED_SPEC_FILE, SPEC_FILE, SUMMARY_JSON_FILE, SUMMARY_MD_FILE,
    WARM_FILE, WSESSLOG_FILE,
};
pub use spec::{
    chunk_bytes, Arrivals, BitrateShare, ClientClass, LibrarySpec, Scaling, SessionSpec, Spec, SpecError, Storage, Validated,
    WarmingSpec,
};
pub use summary::{summarize, Context, LibraryFigures, ScalingFigures, SessionFigures, Summary, Table3, WarmingFigures};
