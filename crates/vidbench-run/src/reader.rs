//! Sequential reader for cache warming and for the `wc` upper bound.
//!
//! Both read a list of byte ranges (the warming-list format, `PATH FIRST-LAST`)
//! from the mounted emulated disk, in list order, each range front to back in
//! `read_kb` reads, like `wc` does: the page cache and the mount's readahead
//! see exactly what a plain sequential reader gives them. The driver runs the
//! reader as a child process (`vidbench run --internal-read`) inside the run's
//! memory cgroup, so the pages it brings in are charged like the server's.
//!
//! [`wc_list`] builds the `wc` list of paper 003 section 8.1: the chunks the
//! sessions request, merged per file and read in file order, files (videos) in
//! a random order fixed by a seed. [`fill_list`] builds the list that fills
//! the cache towards its limit before a steady-state run (`run.warm_fill`):
//! the chunks the sessions request most, read in file order.

use anyhow::Context;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};
use vidbench_library::session::Session;
use vidbench_library::session_io::WarmRange;

/// What a reader did.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReadReport {
    pub ranges_total: usize,
    pub ranges_read: usize,
    pub bytes: u64,
    pub seconds: f64,
    pub mb_per_s: f64,
    /// True when the deadline stopped it before the end of the list.
    pub stopped_by_deadline: bool,
}

/// Reads `ranges` under `mount`, stopping at `deadline` if given.
pub fn read_ranges(mount: &Path, ranges: &[WarmRange], read_kb: usize, deadline: Option<Duration>) -> anyhow::Result<ReadReport> {
    let start = Instant::now();
    let mut buf = vec![0u8; read_kb.max(4) * 1024];
    let mut bytes = 0u64;
    let mut done = 0usize;
    let mut stopped = false;
    'ranges: for r in ranges {
        let path = mount.join(r.path.trim_start_matches('/'));
        let file = std::fs::File::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
        let (first, last) = r.range;
        let mut off = first;
        while off <= last {
            if deadline.is_some_and(|d| start.elapsed() >= d) {
                stopped = true;
                break 'ranges;
            }
            let want = ((last - off + 1) as usize).min(buf.len());
            let n = file.read_at(&mut buf[..want], off).with_context(|| format!("cannot read {} at {off}", path.display()))?;
            if n == 0 {
                break;
            }
            bytes += n as u64;
            off += n as u64;
        }
        done += 1;
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok(ReadReport {
        ranges_total: ranges.len(),
        ranges_read: done,
        bytes,
        seconds,
        mb_per_s: if seconds > 0.0 { bytes as f64 / 1e6 / seconds } else { 0.0 },
        stopped_by_deadline: stopped,
    })
}

/// A range of a file: (path, (first, last)).
type FileRange<'a> = (&'a str, (u64, u64));

/// Every requested range of `sessions` with the number of requests for it
/// (a whole-file request reads to the end of the file).
fn requested(sessions: &[Session]) -> BTreeMap<FileRange<'_>, u64> {
    let mut counts = BTreeMap::new();
    for s in sessions {
        for r in &s.requests {
            *counts.entry((r.path.as_str(), r.range.unwrap_or((0, u64::MAX - 1)))).or_default() += 1;
        }
    }
    counts
}

/// Ranges grouped per file, sorted and merged where they touch or overlap.
fn merge_per_file<'a>(ranges: impl IntoIterator<Item = (&'a str, (u64, u64))>) -> BTreeMap<&'a str, Vec<(u64, u64)>> {
    let mut per_file: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
    for (path, range) in ranges {
        per_file.entry(path).or_default().push(range);
    }
    for ranges in per_file.values_mut() {
        ranges.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for &(a, b) in ranges.iter() {
            match merged.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        *ranges = merged;
    }
    per_file
}

fn flatten<'a>(files: impl IntoIterator<Item = (&'a str, Vec<(u64, u64)>)>) -> Vec<WarmRange> {
    files.into_iter().flat_map(|(path, ranges)| ranges.into_iter().map(move |range| WarmRange { path: path.to_string(), range })).collect()
}

/// The `wc` list: every requested byte, merged per file, files in a seeded random order.
pub fn wc_list(sessions: &[Session], seed: u64) -> Vec<WarmRange> {
    let mut files: Vec<(&str, Vec<(u64, u64)>)> = merge_per_file(requested(sessions).into_keys()).into_iter().collect();
    files.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed));
    flatten(files)
}

/// The cache-filling list: the ranges `sessions` request most (ties in file
/// order), leaving out those of `already` (the warming set, read before),
/// until they hold `budget` bytes; then merged per file and in file order, so
/// the drive reads them nearly sequentially. Whole-file requests are left out
/// (their size is not known here).
pub fn fill_list(sessions: &[Session], already: &[WarmRange], budget: u64) -> Vec<WarmRange> {
    let skip: std::collections::HashSet<FileRange> = already.iter().map(|r| (r.path.as_str(), r.range)).collect();
    let mut ranked: Vec<(FileRange, u64)> =
        requested(sessions).into_iter().filter(|(key, _)| key.1 .1 != u64::MAX - 1 && !skip.contains(key)).collect();
    // Most requested first; the sort is stable, so ties stay in file order.
    ranked.sort_by_key(|&(_, count)| std::cmp::Reverse(count));
    let mut total = 0u64;
    let chosen = ranked.into_iter().map(|(key, _)| key).take_while(|&(_, (a, b))| {
        let more = total < budget;
        total += b - a + 1;
        more
    });
    flatten(merge_per_file(chosen))
}

#[cfg(test)]
mod tests {
    use super::*;
    use vidbench_library::session::{Phase, Request};

    fn session(path: &str, ranges: &[(u64, u64)]) -> Session {
        Session {
            id: 0,
            phase: Phase::Measure,
            class: "c".into(),
            rate_bps: 0,
            delay_ms: 0,
            video: 0,
            requests: ranges
                .iter()
                .map(|r| Request { path: path.into(), range: Some(*r), file_id: None, pace_s: None, timeout_s: 10.0 })
                .collect(),
        }
    }

    #[test]
    fn wc_list_merges_ranges_per_file_and_keeps_file_order_sequential() {
        let s = vec![session("/a", &[(0, 99), (100, 199), (400, 499)]), session("/b", &[(0, 9)]), session("/a", &[(150, 299)])];
        let list = wc_list(&s, 1);
        let a: Vec<_> = list.iter().filter(|r| r.path == "/a").map(|r| r.range).collect();
        assert_eq!(a, [(0, 299), (400, 499)]);
        // Ranges of one file are contiguous in the list (the file is read in one go).
        let first_a = list.iter().position(|r| r.path == "/a").unwrap();
        assert_eq!(list[first_a + 1].path, "/a");
        assert_eq!(wc_list(&s, 1), list, "the order depends only on the seed");
    }

    #[test]
    fn fill_list_takes_the_most_requested_ranges_up_to_the_budget_in_file_order() {
        let s = vec![
            session("/b", &[(0, 99), (100, 199)]),
            session("/b", &[(0, 99)]),
            session("/a", &[(0, 99), (200, 299)]),
            session("/a", &[(0, 99), (300, 399)]),
            session("/c", &[(0, 99)]),
        ];
        // Counts: /a 0-99 x2, /b 0-99 x2, then once each: /a 200, /a 300, /b 100, /c 0.
        let already = [WarmRange { path: "/b".into(), range: (0, 99) }];
        let list = fill_list(&s, &already, 250);
        let got: Vec<(&str, (u64, u64))> = list.iter().map(|r| (r.path.as_str(), r.range)).collect();
        // /a 0-99 (100 B), then /a 200-299 and 300-399 (300 B >= 250): merged, file order.
        assert_eq!(got, [("/a", (0, 99)), ("/a", (200, 399))]);
        assert!(fill_list(&s, &already, 0).is_empty());
        let all = fill_list(&s, &[], u64::MAX);
        assert_eq!(all.iter().map(|r| r.range.1 - r.range.0 + 1).sum::<u64>(), 600);
        assert_eq!(all.iter().map(|r| r.path.as_str()).collect::<Vec<_>>(), ["/a", "/a", "/b", "/c"]);
    }

    #[test]
    fn reads_ranges_and_counts_bytes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), vec![7u8; 10_000]).unwrap();
        let ranges = vec![
            WarmRange { path: "/f".into(), range: (0, 4095) },
            WarmRange { path: "/f".into(), range: (9000, 20_000) },
        ];
        let r = read_ranges(dir.path(), &ranges, 1, None).unwrap();
        assert_eq!(r.bytes, 4096 + 1000);
        assert_eq!(r.ranges_read, 2);
        assert!(!r.stopped_by_deadline);
        let err = read_ranges(dir.path(), &[WarmRange { path: "/missing".into(), range: (0, 1) }], 128, None).unwrap_err();
        assert!(format!("{err:#}").contains("missing"));
    }
}
