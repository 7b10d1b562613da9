//! The video library that every vidbench part agrees on.
//!
//! The workload generator writes a [`Library`] manifest (`library.json`), the
//! emulated disk mounts it as a filesystem, and the load client checks the bytes
//! it receives against [`content`]. [`session`] holds what the clients ask for.
//! No video byte is ever stored: the content of
//! file `id` at `offset` is a pure function of the two, so a library can be as
//! large as the papers' (20,000 files, 260 GB) and any byte can be verified.

pub mod content;
pub mod session;
pub mod session_io;
mod manifest;

pub use manifest::{Library, LibraryError, Video, MANIFEST_VERSION};
