//! Rust mirror of `native/include/libception/protocol.h`.
//!
//! Placeholder until issue #2 lands.
