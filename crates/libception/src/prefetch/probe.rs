//! The start-up disk probe of the adaptive controller (paper 001 section 7):
//! the start size is the size whose transfer time equals the average seek
//! time (Li et al.). Before a disk worker's first read, a few timed reads on
//! the file it is about to read measure both: small reads at offsets spread
//! over the file give the access time (seek + rotation), one larger read
//! gives the transfer rate, and `start = access time x transfer rate`.
//!
//! Limits, also in docs/daemon.md: the probe sees only the file in hand, so
//! its seeks span that file, shorter than the disk-wide average: on a disk
//! much larger than the file the start is an underestimate that the gradient
//! descent then corrects. Offsets already in the page cache are skipped (a
//! cached read times memory, not the disk); with too few uncached offsets, or
//! timings that make no sense, the probe gives no size and the controller
//! keeps its default start. The probe reads about 1.1 MiB once per worker.

use crate::residency;
use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

/// Small reads timed for the access time, and their size.
const ACCESS_READS: u64 = 6;
const ACCESS_BYTES: usize = 4096;
/// The read timed for the transfer rate.
const TRANSFER_BYTES: usize = 1 << 20;
/// Files smaller than this do not spread the access reads enough.
const MIN_FILE: u64 = 8 << 20;

/// What the probe measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeResult {
    /// Mean time of the small reads (seek + rotation + overhead).
    pub access: Duration,
    /// Bytes per second of the large read once its own access is taken off.
    pub transfer_bps: f64,
    /// `access x transfer_bps`: the start size.
    pub start_bytes: u64,
}

/// The start size from the timings, if they make sense: `big` for
/// `big_bytes` must take longer than one access.
pub fn start_from(access: Duration, big: Duration, big_bytes: u64) -> Option<ProbeResult> {
    let transfer = big.checked_sub(access)?;
    if access.is_zero() || transfer.is_zero() {
        return None;
    }
    let transfer_bps = big_bytes as f64 / transfer.as_secs_f64();
    let start_bytes = (access.as_secs_f64() * transfer_bps) as u64;
    Some(ProbeResult { access, transfer_bps, start_bytes })
}

/// Times reads on `file` (see the module comment); `None` when the file
/// cannot give a measurement.
pub fn run(file: &File) -> Option<ProbeResult> {
    let size = file.metadata().ok()?.len();
    if size < MIN_FILE {
        return None;
    }
    let uncached = |at: u64, len: u64| residency::resident_prefix(file.as_fd(), at, at + len).map(|p| p == 0).unwrap_or(false);
    let mut buf = vec![0u8; TRANSFER_BYTES];
    let span = size - TRANSFER_BYTES as u64;
    let mut times = Vec::new();
    for i in 0..ACCESS_READS {
        let at = (span / ACCESS_READS * i + span / (2 * ACCESS_READS)) & !4095;
        if !uncached(at, ACCESS_BYTES as u64) {
            continue;
        }
        let t = Instant::now();
        file.read_at(&mut buf[..ACCESS_BYTES], at).ok()?;
        times.push(t.elapsed());
    }
    if times.len() < 3 {
        return None;
    }
    let access = times.iter().sum::<Duration>() / times.len() as u32;
    // The large read starts at an uncached offset away from the small ones.
    let at = (0..ACCESS_READS)
        .map(|i| (span / ACCESS_READS * i) & !4095)
        .find(|&at| uncached(at, TRANSFER_BYTES as u64))?;
    let t = Instant::now();
    let n = file.read_at(&mut buf, at).ok()?;
    let big = t.elapsed();
    if n < TRANSFER_BYTES {
        return None;
    }
    start_from(access, big, TRANSFER_BYTES as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_is_where_transfer_time_equals_access_time() {
        // WD Red-like: 15 ms access, 1 MiB in 15 + 8 ms (125 MiB/s): 1.875 MiB.
        let r = start_from(Duration::from_millis(15), Duration::from_millis(23), 1 << 20).unwrap();
        assert!((r.transfer_bps - 131_072_000.0).abs() < 1.0, "{r:?}");
        assert_eq!(r.start_bytes, 1_966_080);
        // A large read no slower than a small one measured the page cache.
        assert_eq!(start_from(Duration::from_millis(15), Duration::from_millis(15), 1 << 20), None);
        assert_eq!(start_from(Duration::ZERO, Duration::from_millis(5), 1 << 20), None);
    }

    #[test]
    fn small_or_cached_files_give_no_measurement() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("small");
        std::fs::write(&small, vec![1u8; 1 << 20]).unwrap();
        assert_eq!(run(&File::open(&small).unwrap()), None);
        // Just written: every page is in the page cache.
        let cached = dir.path().join("cached");
        std::fs::write(&cached, vec![1u8; 16 << 20]).unwrap();
        assert_eq!(run(&File::open(&cached).unwrap()), None);
    }
}
