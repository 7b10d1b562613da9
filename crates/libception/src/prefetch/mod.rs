//! Prefetch size control: how far each read is extended.
//!
//! The receptionist asks a [`PrefetchController`] how far to extend each read
//! and tells it about every FETCH it sees (`observe_request`: which range,
//! resident or not); the disk worker reports every finished read
//! (`observe_read`). [`fixed::FixedPrefetch`] is paper 000's policy (one
//! size for everything, 2 MiB by default; 0 means serialize only), which
//! still tracks what became of its prefetched bytes for the stats.
//! [`adaptive::AdaptivePrefetch`] is paper 001's controller (score =
//! disk time x cache-miss ratio, gradient descent with gradual change); it
//! learns from both observation streams, keeps one state per disk worker and
//! answers `prefetch_bytes` with the size in force for that worker.
//!
//! Layout, so that no module imports one that imports it back: this file is
//! the controller's interface (the trait, what it is told, the fixed policy,
//! read planning); [`snapshot`] is the plain data a controller reports for the
//! stats; [`tracker`] (which prefetched bytes were used, evicted or wasted),
//! [`fixed`] and [`adaptive`] build on both, and nothing here imports them
//! (callers name `prefetch::fixed::FixedPrefetch`, not a re-export).
//! `no_import_cycle_between_the_prefetch_files` below checks it.

pub mod adaptive;
pub mod fixed;
pub mod probe;
mod snapshot;
mod tracker;

pub use snapshot::{ControllerSnapshot, Decision, IntervalRecord, ProbeSnapshot, ProbeSource, QueueSnapshot, SizeScore, TransactionSource, UsageTally, WorkerUsage};
use std::time::Duration;

/// The page size prefetch sizes are rounded to.
pub(crate) const PAGE: u64 = 4096;

/// `bytes` rounded down to whole pages, at least one page.
fn page_round(bytes: f64) -> u64 {
    let b = if bytes.is_finite() { bytes.max(0.0) } else { 0.0 };
    ((b as u64) / PAGE).max(1) * PAGE
}

/// Identity of a file across different descriptors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileKey {
    pub dev: u64,
    pub ino: u64,
}

/// What the controller knows when sizing a read.
#[derive(Debug, Clone, Copy)]
pub struct PrefetchContext<'a> {
    /// Queue name of the disk the file lives on.
    pub disk: &'a str,
    /// Index of the disk worker that will do the read.
    pub worker: usize,
    /// The file.
    pub file: FileKey,
}

/// One FETCH as the receptionist saw it (after clamping to the file).
#[derive(Debug, Clone, Copy)]
pub struct RequestObservation<'a> {
    pub disk: &'a str,
    pub worker: usize,
    pub file: FileKey,
    /// Requested range `[offset, end)`.
    pub offset: u64,
    pub end: u64,
    /// Where the part of `[offset, end)` found in the page cache from
    /// `offset` on ends: `end` when the daemon's check found all of it
    /// resident, `offset` when its first page is missing. Tells a request
    /// that runs past a prefetched range's end (its tail is not cached yet)
    /// from one that finds the range evicted.
    pub resident_to: u64,
}

impl RequestObservation<'_> {
    /// The whole requested range is in the page cache.
    pub fn resident(&self) -> bool {
        self.resident_to >= self.end
    }
}

/// One finished read, reported to the controller.
#[derive(Debug, Clone, Copy)]
pub struct ReadObservation<'a> {
    pub disk: &'a str,
    pub worker: usize,
    pub file: FileKey,
    /// The planned range `[start, end)` and the end of the part a client asked for.
    pub plan: PlannedRead,
    /// Where the read began (after skipping the resident prefix).
    pub read_start: u64,
    /// The read succeeded (a failed read's bytes are not tracked as prefetched).
    pub ok: bool,
    /// Bytes actually read from the file (planned minus the resident prefix).
    pub bytes_read: u64,
    /// Time the read kept the disk worker busy.
    pub busy: Duration,
}

impl ReadObservation<'_> {
    /// End of the bytes read (`read_start` for a failed read: nothing to track).
    pub fn read_end(&self) -> u64 {
        if self.ok {
            self.read_start + self.bytes_read
        } else {
            self.read_start
        }
    }
}

/// Decides how many bytes a read is extended to.
pub trait PrefetchController: Send + Sync {
    /// Short name for stats (`fixed`, `adaptive`).
    fn name(&self) -> &'static str;
    /// Bytes to read starting at the request's offset (0: exactly the request).
    fn prefetch_bytes(&self, ctx: &PrefetchContext<'_>) -> u64;
    /// Called for each FETCH (resident or not) before any read it causes.
    fn observe_request(&self, _obs: &RequestObservation<'_>) {}
    /// Called after each read; controllers that adapt learn from it.
    fn observe_read(&self, _obs: &ReadObservation<'_>) {}
    /// Whether `worker` should probe its disk before its next read (asked
    /// before every read; true at most once per worker).
    fn wants_probe(&self, _worker: usize) -> bool {
        false
    }
    /// What the probe of `worker` measured (`None`: nothing usable).
    fn observe_probe(&self, _worker: usize, _disk: &str, _result: Option<probe::ProbeResult>) {}
    /// The size currently in force for `disk` (`""`: the first disk queue),
    /// for stats.
    fn current_bytes(&self, disk: &str) -> u64;
    /// What became of each disk worker's prefetched bytes, cumulative since
    /// start (paper 001 Table 1), for the stats document's `prefetch_usage`.
    fn usage(&self) -> Vec<WorkerUsage> {
        Vec::new()
    }
    /// The controller's state for the stats document (`None`: nothing beyond
    /// `prefetch_bytes`).
    fn snapshot(&self) -> Option<ControllerSnapshot> {
        None
    }
}

/// The byte range a FETCH turns into: `[start, end)` to read, and the part of
/// it the client asked for (`want_end`). Pure arithmetic, no I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannedRead {
    pub start: u64,
    pub end: u64,
    /// End of the client's range (clamped); `start..want_end` must be covered
    /// for another request to join this read.
    pub want_end: u64,
}

/// Plans a read: the request clamped to end of file, extended to `prefetch`
/// bytes from its page-aligned start, and capped at `max_read` bytes so that
/// an absurd length never turns into an absurd read.
pub fn plan_read(offset: u64, length: u64, file_size: u64, prefetch: u64, max_read: u64, page: u64) -> Option<PlannedRead> {
    let req_start = offset.min(file_size);
    let req_end = offset.saturating_add(length).min(file_size);
    if req_start >= req_end {
        return None;
    }
    let start = req_start - req_start % page;
    let cap_end = start.saturating_add(max_read.max(page)).min(file_size);
    let want_end = req_end.min(cap_end);
    let end = if prefetch == 0 {
        want_end
    } else {
        want_end.max(start.saturating_add(prefetch)).min(cap_end)
    };
    Some(PlannedRead { start, end, want_end })
}

/// The plan of a miss whose request is cached from its start up to
/// `cached_to`, as when a stream reaches the end of a range read before: the
/// prefetch counts from the first page not cached, so that every read brings
/// `prefetch` new bytes, as paper 001's prefetcher reads its size `p` each
/// time except at the end of a file. Counted from the request instead, a
/// stream of 525,000-byte chunks under 2 MiB read 1.5 MiB at a time (three
/// chunks), and one of 2,618,750-byte chunks under 4 MiB one chunk. What is
/// read past the cached part stays within `max_read`; the plan from its start
/// may exceed it by that part (at most the request), which the worker reads
/// too if it was evicted meanwhile, and for which the client is charged
/// (a concealed peer is charged before the check, for the plan without it).
/// Without prefetching, or with nothing of the request cached (or all of it:
/// no miss), the plan is unchanged.
pub fn extend_past_cached(plan: PlannedRead, cached_to: u64, file_size: u64, prefetch: u64, max_read: u64, page: u64) -> PlannedRead {
    if prefetch == 0 || cached_to <= plan.start || cached_to >= plan.want_end {
        return plan;
    }
    let from = cached_to - cached_to % page;
    let end = from.saturating_add(prefetch.min(max_read.max(page))).min(file_size);
    PlannedRead { end: plan.end.max(end), ..plan }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    const P: u64 = 4096;

    /// The files of this directory and their text, without their test modules.
    const FILES: [(&str, &str); 6] = [
        ("mod", include_str!("mod.rs")),
        ("adaptive", include_str!("adaptive.rs")),
        ("fixed", include_str!("fixed.rs")),
        ("probe", include_str!("probe.rs")),
        ("snapshot", include_str!("snapshot.rs")),
        ("tracker", include_str!("tracker.rs")),
    ];

    /// Which files of this directory each file imports: `super::NAME` and
    /// `crate::prefetch::NAME` name the module NAME or an item of mod.rs;
    /// mod.rs's own `use NAME::` names a module. Comments and test modules
    /// are left out.
    fn imports(files: &[(&str, &str)]) -> BTreeMap<String, Vec<String>> {
        let names: Vec<&str> = files.iter().map(|(n, _)| *n).collect();
        let module = |word: &str| if names.contains(&word) && word != "mod" { word.to_string() } else { "mod".to_string() };
        let mut graph = BTreeMap::new();
        for (name, text) in files {
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            let mut deps = Vec::new();
            for line in code.lines().map(str::trim).filter(|l| !l.starts_with("//")) {
                for prefix in ["super::", "crate::prefetch::"] {
                    for (i, _) in line.match_indices(prefix) {
                        let rest = &line[i + prefix.len()..];
                        let words: Vec<&str> = match rest.strip_prefix('{') {
                            Some(list) => list.split('}').next().unwrap_or("").split(',').map(|w| w.trim().split("::").next().unwrap_or("")).collect(),
                            None => vec![rest.split(|c: char| !c.is_alphanumeric() && c != '_').next().unwrap_or("")],
                        };
                        deps.extend(words.into_iter().filter(|w| !w.is_empty()).map(module));
                    }
                }
                if *name == "mod" {
                    let rest = line.strip_prefix("pub use ").or_else(|| line.strip_prefix("use "));
                    if let Some(word) = rest.and_then(|r| r.split("::").next()) {
                        if names.contains(&word) {
                            deps.push(word.to_string());
                        }
                    }
                }
            }
            deps.retain(|d| d != name);
            deps.sort();
            deps.dedup();
            graph.insert(name.to_string(), deps);
        }
        graph
    }

    /// A cycle of the graph, if any (depth-first search).
    fn cycle(graph: &BTreeMap<String, Vec<String>>) -> Option<Vec<String>> {
        fn visit(n: &str, g: &BTreeMap<String, Vec<String>>, path: &mut Vec<String>, done: &mut Vec<String>) -> Option<Vec<String>> {
            if let Some(i) = path.iter().position(|p| p == n) {
                return Some(path[i..].to_vec());
            }
            if done.iter().any(|d| d == n) {
                return None;
            }
            path.push(n.to_string());
            for d in g.get(n).into_iter().flatten() {
                if let Some(c) = visit(d, g, path, done) {
                    return Some(c);
                }
            }
            path.pop();
            done.push(n.to_string());
            None
        }
        let mut done = Vec::new();
        graph.keys().find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
    }

    /// The layout rule at the top of this file: no import cycles between the
    /// files of prefetch/, and mod.rs imports only snapshot.rs.
    #[test]
    fn no_import_cycle_between_the_prefetch_files() {
        let graph = imports(&FILES);
        assert_eq!(cycle(&graph), None, "{graph:?}");
        assert_eq!(graph["mod"], ["snapshot"], "mod.rs imports only the plain data");
        assert_eq!(graph["snapshot"], Vec::<String>::new(), "snapshot.rs imports nothing of the crate");
        assert!(graph["fixed"].contains(&"tracker".to_string()) && graph["tracker"].contains(&"mod".to_string()), "{graph:?}");
        // The check sees a cycle when there is one.
        let looped = [("mod", "use tracker::PrefetchTracker;\n"), ("tracker", "use super::{FileKey, snapshot::UsageTally};\n"), ("snapshot", "")];
        assert_eq!(cycle(&imports(&looped)), Some(vec!["mod".to_string(), "tracker".to_string()]));
    }
    const M: u64 = 1 << 20;

    #[test]
    fn small_request_extends_to_prefetch_from_page_start() {
        let p = plan_read(5000, 100, 100 * M, 2 * M, 16 * M, P).unwrap();
        assert_eq!(p, PlannedRead { start: 4096, end: 4096 + 2 * M, want_end: 5100 });
    }

    #[test]
    fn a_miss_past_a_cached_prefix_prefetches_from_where_the_cache_ends() {
        // SD: the fourth 525,000-byte chunk of a 2 MiB range runs 2,848 bytes
        // past it; the next read brings 2 MiB from the range's end.
        let chunk = 525_000;
        let p = plan_read(3 * chunk, chunk, 100 * M, 2 * M, 16 * M, P).unwrap();
        assert_eq!((p.start, p.end), (1_572_864, 1_572_864 + 2 * M), "planned from the request");
        let e = extend_past_cached(p, 2 * M, 100 * M, 2 * M, 16 * M, P);
        assert_eq!(e, PlannedRead { start: p.start, end: 4 * M, want_end: 4 * chunk });
        // HD: a 2,618,750-byte chunk 60 % inside a 4 MiB range.
        let chunk = 2_618_750;
        let p = plan_read(chunk, chunk, 100 * M, 4 * M, 16 * M, P).unwrap();
        assert_eq!(extend_past_cached(p, 4 * M, 100 * M, 4 * M, 16 * M, P).end, 8 * M);
        // A cached part ending inside a page: the page is read again.
        assert_eq!(extend_past_cached(p, 4 * M + 100, 100 * M, 4 * M, 16 * M, P).end, 8 * M);
    }

    #[test]
    fn extension_past_the_cache_keeps_its_bounds() {
        let p = plan_read(M, M, 100 * M, 2 * M, 16 * M, P).unwrap();
        // Nothing cached, all of it cached, or no prefetching: unchanged.
        assert_eq!(extend_past_cached(p, M, 100 * M, 2 * M, 16 * M, P), p);
        assert_eq!(extend_past_cached(p, p.want_end, 100 * M, 2 * M, 16 * M, P), p);
        assert_eq!(extend_past_cached(p, u64::MAX, 100 * M, 2 * M, 16 * M, P), p);
        assert_eq!(extend_past_cached(p, 0, 100 * M, 2 * M, 16 * M, P), p);
        let q = plan_read(M, M, 100 * M, 0, 16 * M, P).unwrap();
        assert_eq!(extend_past_cached(q, M + M / 2, 100 * M, 0, 16 * M, P), q);
        // The end of the file, and max_read, bound what is read.
        assert_eq!(extend_past_cached(p, 3 * M / 2, 13 * M / 4, 2 * M, 16 * M, P).end, 13 * M / 4);
        assert_eq!(extend_past_cached(p, 3 * M / 2, 100 * M, 8 * M, 3 * M, P).end, 9 * M / 2);
        // Never shorter than the plan (a cached prefix near its start).
        assert_eq!(extend_past_cached(p, M + P, 100 * M, 2 * M, 16 * M, P).end, M + P + 2 * M);
        let short = plan_read(M, 3 * M, 100 * M, 2 * M, 16 * M, P).unwrap();
        assert_eq!(extend_past_cached(short, M + P, 100 * M, 2 * M, 16 * M, P).end, 4 * M, "the request's own end stays");
    }

    #[test]
    fn serialize_only_reads_the_request() {
        let p = plan_read(5000, 100, 100 * M, 0, 16 * M, P).unwrap();
        assert_eq!((p.start, p.end), (4096, 5100));
    }

    #[test]
    fn clamped_to_eof_and_max_read() {
        let p = plan_read(M, u64::MAX, 3 * M / 2, 2 * M, 16 * M, P).unwrap();
        assert_eq!((p.start, p.end, p.want_end), (M, 3 * M / 2, 3 * M / 2));
        let p = plan_read(0, 1 << 40, 1 << 41, 2 * M, 16 * M, P).unwrap();
        assert_eq!((p.start, p.end, p.want_end), (0, 16 * M, 16 * M));
        assert_eq!(plan_read(10 * M, 5, 3 * M, 2 * M, 16 * M, P), None);
        assert_eq!(plan_read(u64::MAX, u64::MAX, 3 * M, 2 * M, 16 * M, P), None);
        assert_eq!(plan_read(0, 0, 3 * M, 2 * M, 16 * M, P), None);
    }
}
