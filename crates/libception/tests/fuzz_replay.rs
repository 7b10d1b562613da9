//! The fuzz targets (`fuzz/`, bodies in `src/fuzzing.rs`) on stable Rust,
//! without libFuzzer: every saved input (the minimised seed corpus and the
//! regression inputs of bugs the fuzzer found) and a few thousand inputs
//! drawn from a fixed-seed generator go through the same functions, with the
//! same checks (no panic, well-formed replies, no descriptor leak, a fresh
//! client still served). The long runs are recorded in docs/results/fuzz/.

use libception::fuzzing::{parse, Harness};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Random inputs per target per run of this test.
const RANDOM_INPUTS: usize = 3000;

/// A harness counts the whole process's descriptors: one at a time.
static ONE_HARNESS: Mutex<()> = Mutex::new(());

/// Every file under fuzz/seeds/<target> and fuzz/regressions/<target>.
fn saved_inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut inputs = Vec::new();
    for kind in ["seeds", "regressions"] {
        let Ok(dir) = std::fs::read_dir(fuzz.join(kind).join(target)) else { continue };
        for e in dir.flatten() {
            inputs.push((e.path(), std::fs::read(e.path()).unwrap()));
        }
    }
    inputs.sort();
    inputs
}

fn random_input(rng: &mut ChaCha8Rng, max_len: usize) -> Vec<u8> {
    let mut b = vec![0u8; rng.gen_range(0..=max_len)];
    rng.fill_bytes(&mut b);
    b
}

#[test]
fn parse_target_replays_saved_and_random_inputs() {
    let saved = saved_inputs("parse");
    assert!(!saved.is_empty(), "the parse target's seed corpus is missing");
    for (path, data) in &saved {
        eprintln!("parse: {}", path.display());
        parse(data);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    for _ in 0..RANDOM_INPUTS * 10 {
        parse(&random_input(&mut rng, 96));
    }
}

#[test]
fn connection_target_replays_saved_and_random_inputs() {
    let _one = ONE_HARNESS.lock().unwrap_or_else(|e| e.into_inner());
    let mut h = Harness::new(Path::new(env!("CARGO_TARGET_TMPDIR"))).expect("starting the harness's receptionist");
    let saved = saved_inputs("connection");
    assert!(!saved.is_empty(), "the connection target's seed corpus is missing");
    for (path, data) in &saved {
        eprintln!("connection: {}", path.display());
        h.run(data);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    for _ in 0..RANDOM_INPUTS {
        h.run(&random_input(&mut rng, 512));
    }
    assert_eq!(h.inputs(), (saved.len() + RANDOM_INPUTS) as u64);
}


/// The flood step reaches the daemon's "does not read its replies" path
/// (and the end-of-input checks hold after it): without that the fuzzer
/// could not reach it either.
#[test]
fn a_flood_that_is_never_read_is_dropped() {
    use libception::fuzzing::{Damage, Fixture, FlagsField, Message, Number, OpField, Step};
    let _one = ONE_HARNESS.lock().unwrap_or_else(|e| e.into_inner());
    let mut h = Harness::new(Path::new(env!("CARGO_TARGET_TMPDIR"))).expect("starting the harness's receptionist");
    let check = Message { op: OpField::Check, flags: FlagsField::None, call: 0, seq: 1, offset: Number::Zero, length: Number::Small(10), tid: 0, damage: Damage::Intact };
    h.run_steps(&[Step::Connect { stranger: false }, Step::Flood { client: 0, message: check, fds: vec![Fixture::Small], times: 1023 }]);
    assert_eq!(h.snapshot().totals.connections_dropped_slow, 1);
}
