//! The `libception` subcommands other than `daemon`: `run`, `stat` and
//! `fetch`. They belong to the binary (declared from `main.rs`) and reach the
//! daemon only through the library's public API: the protocol [`Client`],
//! the stats document, [`launch`].
//!
//! [`Client`]: libception::Client
//! [`launch`]: libception::launch

pub mod fetch;
pub mod run;
pub mod stat;
