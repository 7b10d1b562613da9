//! The shim's statistics files (`LIBCEPTION_STATS`, written by
//! `native/deception/stats.c`): one JSON document per process with counters
//! and power-of-two latency histograms per interposed function, and their
//! sum over a directory of such files.
//!
//! The counters only grow while a process lives, and a file is replaced
//! whole (rename), never written in place. With `LIBCEPTION_STATS_INTERVAL_MS`
//! a running process rewrites its file, so the sum over a directory read at
//! two instants, one subtracted from the other ([`Totals::since`]), gives
//! what the processes did in between, to within one interval at each end.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One interposed function's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionStats {
    pub calls: u64,
    pub bytes: u64,
    pub hits: u64,
    pub misses: u64,
    pub unknown: u64,
    pub errors: u64,
    /// Calls by duration: the key `2^b` counts calls of `[2^b, 2^(b+1))` ns
    /// (the key 1 also holds 0 ns); empty buckets are absent.
    #[serde(default)]
    pub latency_ns: BTreeMap<u64, u64>,
}

impl FunctionStats {
    fn add(&mut self, other: &FunctionStats) {
        self.calls += other.calls;
        self.bytes += other.bytes;
        self.hits += other.hits;
        self.misses += other.misses;
        self.unknown += other.unknown;
        self.errors += other.errors;
        for (bucket, n) in &other.latency_ns {
            *self.latency_ns.entry(*bucket).or_default() += n;
        }
    }

    /// What happened since `earlier`; a counter that went back (a process
    /// whose file vanished) counts as nothing.
    fn since(&self, earlier: &FunctionStats) -> FunctionStats {
        let latency_ns = self
            .latency_ns
            .iter()
            .map(|(b, n)| (*b, n.saturating_sub(earlier.latency_ns.get(b).copied().unwrap_or(0))))
            .filter(|(_, n)| *n > 0)
            .collect();
        FunctionStats {
            calls: self.calls.saturating_sub(earlier.calls),
            bytes: self.bytes.saturating_sub(earlier.bytes),
            hits: self.hits.saturating_sub(earlier.hits),
            misses: self.misses.saturating_sub(earlier.misses),
            unknown: self.unknown.saturating_sub(earlier.unknown),
            errors: self.errors.saturating_sub(earlier.errors),
            latency_ns,
        }
    }
}

/// The part of one process's file read here.
#[derive(Debug, Clone, Deserialize)]
pub struct StatsFile {
    pub pid: i64,
    /// CLOCK_MONOTONIC when it was written; absent in files of older shims.
    #[serde(default)]
    pub written_ns: Option<u64>,
    /// Whether this is the file the process wrote at exit.
    #[serde(default)]
    pub at_exit: Option<bool>,
    pub functions: BTreeMap<String, FunctionStats>,
}

/// Counters summed over processes: per function name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Files summed.
    pub processes: u64,
    /// Functions with at least one call.
    pub functions: BTreeMap<String, FunctionStats>,
}

/// A file of the directory that could not be read or parsed, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    pub path: PathBuf,
    pub reason: String,
}

impl Totals {
    pub fn add(&mut self, file: &StatsFile) {
        self.processes += 1;
        for (name, f) in file.functions.iter().filter(|(_, f)| f.calls > 0) {
            self.functions.entry(name.clone()).or_default().add(f);
        }
    }

    /// The sum over the statistics files in `dir` (`*.json`, not the
    /// shim's dot-named temporary files), and the files skipped with the
    /// reason. A missing directory is an empty sum.
    pub fn read_dir(dir: &Path) -> (Totals, Vec<Unreadable>) {
        let mut totals = Totals::default();
        let mut skipped = Vec::new();
        let Ok(entries) = std::fs::read_dir(dir) else { return (totals, skipped) };
        let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).filter(|p| is_stats_file(p)).collect();
        paths.sort();
        for path in paths {
            match read_file(&path) {
                Ok(file) => totals.add(&file),
                // Gone between the listing and the read: not an error.
                Err(reason) if !path.exists() => drop(reason),
                Err(reason) => skipped.push(Unreadable { path, reason }),
            }
        }
        (totals, skipped)
    }

    /// What happened since `earlier`, a sum taken before this one.
    pub fn since(&self, earlier: &Totals) -> Totals {
        let functions = self
            .functions
            .iter()
            .map(|(name, f)| (name.clone(), earlier.functions.get(name).map_or_else(|| f.clone(), |e| f.since(e))))
            .filter(|(_, f)| f.calls > 0)
            .collect();
        Totals { processes: self.processes, functions }
    }

    /// The latency histogram of the functions whose names start with
    /// `prefix` (`sendfile` takes sendfile and sendfile64), summed:
    /// (bucket in ns, calls), by bucket.
    pub fn latency_of(&self, prefix: &str) -> Vec<(u64, u64)> {
        let mut sum: BTreeMap<u64, u64> = BTreeMap::new();
        for f in self.functions.iter().filter(|(name, _)| name.starts_with(prefix)).map(|(_, f)| f) {
            for (bucket, n) in &f.latency_ns {
                *sum.entry(*bucket).or_default() += n;
            }
        }
        sum.into_iter().collect()
    }
}

/// A name the shim gives its files: not a temporary (`.NAME.XXXX`), ends in `.json`.
fn is_stats_file(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    !name.starts_with('.') && name.ends_with(".json") && path.is_file()
}

/// One process's file.
pub fn read_file(path: &Path) -> Result<StatsFile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    serde_json::from_str(&text).map_err(|e| format!("not a statistics file of the shim: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file as the shim writes it (the fields read here and some others).
    fn file(pid: u32, sendfile_calls: u64, buckets: &[(u64, u64)]) -> String {
        let hist: Vec<String> = buckets.iter().map(|(b, n)| format!("\"{b}\": {n}")).collect();
        format!(
            "{{\n  \"pid\": {pid},\n  \"ppid\": 1,\n  \"mode\": \"track\",\n  \"written_ns\": 5,\n  \"at_exit\": false,\n  \"interval_ms\": 1000,\n  \
             \"functions\": {{\n    \"read\": {{\"calls\": 0, \"bytes\": 0, \"hits\": 0, \"misses\": 0, \"unknown\": 0, \"errors\": 0, \"latency_ns\": {{}}}},\n    \
             \"sendfile64\": {{\"calls\": {sendfile_calls}, \"bytes\": 10, \"hits\": 1, \"misses\": 0, \"unknown\": 0, \"errors\": 0, \"latency_ns\": {{{}}}}}\n  }},\n  \
             \"daemon\": {{\"connects\": 0}},\n  \"prefetch\": {{\"calls\": 0, \"bytes\": 0}}\n}}\n",
            hist.join(", ")
        )
    }

    #[test]
    fn a_directory_sums_its_processes_and_skips_temporaries_and_garbage() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("stats-1.json"), file(1, 3, &[(1024, 2), (2048, 1)])).unwrap();
        std::fs::write(dir.path().join("stats-2.json"), file(2, 1, &[(1024, 1)])).unwrap();
        std::fs::write(dir.path().join(".stats-3.json.0123456789abcdef"), file(3, 100, &[(1, 100)])).unwrap();
        std::fs::write(dir.path().join("stats-4.json"), "{\"pid\": 4, \"functions\": ").unwrap();
        let (totals, skipped) = Totals::read_dir(dir.path());
        assert_eq!(totals.processes, 2);
        assert_eq!(totals.functions.keys().collect::<Vec<_>>(), ["sendfile64"], "functions without calls are left out");
        assert_eq!(totals.functions["sendfile64"].calls, 4);
        assert_eq!(totals.latency_of("sendfile"), [(1024, 3), (2048, 1)]);
        assert_eq!(skipped.len(), 1);
        assert!(skipped[0].path.ends_with("stats-4.json") && skipped[0].reason.contains("not a statistics file"), "{skipped:?}");
        assert_eq!(Totals::read_dir(&dir.path().join("absent")).0, Totals::default());
    }

    #[test]
    fn the_difference_of_two_sums_is_what_happened_between() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("stats-1.json"), file(1, 3, &[(1024, 2), (2048, 1)])).unwrap();
        let (before, _) = Totals::read_dir(dir.path());
        std::fs::write(dir.path().join("stats-1.json"), file(1, 7, &[(1024, 2), (2048, 4), (4096, 1)])).unwrap();
        // A process that started in between counts whole.
        std::fs::write(dir.path().join("stats-2.json"), file(2, 2, &[(1024, 2)])).unwrap();
        let (after, _) = Totals::read_dir(dir.path());
        let window = after.since(&before);
        assert_eq!(window.functions["sendfile64"].calls, 6);
        assert_eq!(window.latency_of("sendfile"), [(1024, 2), (2048, 3), (4096, 1)]);
        // Nothing happened: no function is left.
        assert!(after.since(&after).functions.is_empty());
        // A counter that went back (a file replaced by an older one) gives nothing, not a wrap.
        assert_eq!(before.since(&after).functions.len(), 0);
    }

    #[test]
    fn a_sum_survives_a_round_trip_through_json() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("stats-1.json"), file(1, 3, &[(1024, 2), (2048, 1)])).unwrap();
        let (totals, _) = Totals::read_dir(dir.path());
        let text = serde_json::to_string(&totals).unwrap();
        assert_eq!(serde_json::from_str::<Totals>(&text).unwrap(), totals);
    }
}
