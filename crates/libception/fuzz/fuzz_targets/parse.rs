//! Fuzz target: one datagram through the request and reply parsers and the
//! read planner (`libception::fuzzing::parse`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| libception::fuzzing::parse(data));
