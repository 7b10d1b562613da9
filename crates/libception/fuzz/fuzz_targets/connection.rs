//! Fuzz target: sequences of client steps against the real receptionist on a
//! real socket, with the end-of-input checks of `libception::fuzzing::Harness`
//! (replies well formed, no descriptor leaked, a fresh client still served).
//! The harness lives for the whole run, so state left by one input (a leaked
//! descriptor, a connection never forgotten) fails a later one.
#![no_main]

use libception::fuzzing::Harness;
use std::cell::RefCell;

thread_local! {
    static HARNESS: RefCell<Harness> = RefCell::new({
        // Fixture files must be on a block-device filesystem (the daemon
        // serves only those); the fuzz crate's target directory is.
        let dir = std::env::var_os("LIBCEPTION_FUZZ_DIR").unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/target").into());
        Harness::new(std::path::Path::new(&dir)).expect("starting the fuzz harness's receptionist")
    });
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| HARNESS.with(|h| h.borrow_mut().run(data)));
