//! The video library that every vidbench part agrees on.
//!
//! The workload generator writes a [`Library`] manifest (`library.json`), the
//! emulated disk mounts it as a filesystem, and the load client checks the bytes
//! it receives against [`content`]. [`session`] holds what the clients ask for.
//! No video byte is ever stored: the content of
//! file `id` at `offset` is a pure function of the two, so a library can be as
//! large as the papers' (20,000 files, 260 GB) and any byte can be verified.
//! [`UniformLibrary`] makes a library of N equal files without a workload
//! (`vidbench disk library`, for the disk's tests and benchmarks), and
//! [`SourceTrees`] identical source trees for the diff microbenchmark
//! (`vidbench disk library --source-trees`).
//!
//! The types and functions are re-exported here; `content` (the byte
//! generator), `session` and `session_io` (the session file formats) are also
//! public as namespaces because vidbench-run names them by path, as is
//! `toml_extends` (`extends = "base.toml"` in experiment files and specs).

pub mod content;
mod manifest;
pub mod session;
pub mod session_io;
mod source_tree;
pub mod toml_extends;
mod uniform;

pub use manifest::{Library, LibraryError, Video, MANIFEST_VERSION};
pub use session::{Phase, Request, Session};
pub use session_io::{
    read_sessions, read_warm_list, write_sessions, write_warm_list, SessionFormat, SessionIoError, WarmRange,
    DEFAULT_TIMEOUT_S, WSESSLOG_DEFAULTS,
};
pub use source_tree::SourceTrees;
pub use uniform::UniformLibrary;
