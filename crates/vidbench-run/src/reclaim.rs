//! Proactive reclaim by DAMON during an experiment. Some VMs run a kdamond
//! with a `pageout` scheme over physical memory (this project's machines: page
//! cache untouched for about a minute is evicted, up to 128 MiB/s, with 23 GiB
//! free). Under it the page cache of a run holds what was touched in the last
//! minute, not what the memory limit allows, and every configuration is
//! measured against that policy instead of the kernel's LRU (seen on
//! 2026-11-25: a cold open-stat-read run read 2.68 GB for 1.04 GB of files,
//! and its "warm" rerun went to the disk). The driver records the kdamonds in
//! `machine.json` and, unless the experiment says `proactive_reclaim =
//! "keep"`, turns the running ones off for the experiment and on again when it
//! ends (also after Ctrl-C or an error; not after SIGKILL:
//! `scripts/proactive-reclaim resume` then).

use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Where the kernel's DAMON sysfs interface lists its kdamonds.
pub const KDAMONDS: &str = "/sys/kernel/mm/damon/admin/kdamonds";

/// One kdamond: its directory, state and schemes in words.
#[derive(Debug, Clone, PartialEq)]
pub struct Kdamond {
    pub dir: PathBuf,
    pub state: String,
    pub schemes: Vec<String>,
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).map(|s| s.trim().to_string()).unwrap_or_default()
}

/// The kdamonds under `root` (none where DAMON's sysfs interface is absent).
pub fn kdamonds(root: &Path) -> Vec<Kdamond> {
    let n: usize = read(&root.join("nr_kdamonds")).parse().unwrap_or(0);
    (0..n)
        .map(|i| {
            let dir = root.join(i.to_string());
            let ctx = dir.join("contexts/0");
            let aggr_ms = read(&ctx.join("monitoring_attrs/intervals/aggr_us")).parse::<u64>().unwrap_or(0) / 1000;
            let nr_schemes: usize = read(&ctx.join("schemes/nr_schemes")).parse().unwrap_or(0);
            let schemes = (0..nr_schemes)
                .map(|s| {
                    let s = ctx.join("schemes").join(s.to_string());
                    let age: u64 = read(&s.join("access_pattern/age/min")).parse().unwrap_or(0);
                    format!(
                        "{} of regions untouched for {} s (<= {} accesses per {} ms), at most {} bytes per {} ms",
                        read(&s.join("action")),
                        age * aggr_ms / 1000,
                        read(&s.join("access_pattern/nr_accesses/max")),
                        aggr_ms,
                        read(&s.join("quotas/bytes")),
                        read(&s.join("quotas/reset_interval_ms")),
                    )
                })
                .collect();
            Kdamond { state: read(&dir.join("state")), dir, schemes }
        })
        .collect()
}

/// Running kdamonds turned off; turned on again when dropped.
pub struct Paused {
    dirs: Vec<PathBuf>,
}

impl Paused {
    /// Turns off every kdamond under `root` that is on.
    pub fn pause(root: &Path) -> std::io::Result<Paused> {
        let mut paused = Paused { dirs: Vec::new() };
        for k in kdamonds(root).into_iter().filter(|k| k.state == "on") {
            std::fs::write(k.dir.join("state"), "off")?;
            paused.dirs.push(k.dir);
        }
        Ok(paused)
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        for dir in &self.dirs {
            if let Err(e) = std::fs::write(dir.join("state"), "on") {
                eprintln!("vidbench run: could not turn {} on again ({e}): run scripts/proactive-reclaim status", dir.display());
            }
        }
    }
}

/// What `machine.json` records: the kdamonds as found and what the driver did.
pub fn describe(found: &[Kdamond], action: &str) -> Value {
    json!({
        "kdamonds": found.iter().map(|k| json!({"state": k.state, "schemes": k.schemes})).collect::<Vec<_>>(),
        "action": action,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DAMON sysfs tree with one kdamond like this project's machines'.
    fn fake(state: &str) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let put = |p: &str, v: &str| {
            let p = root.path().join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, format!("{v}\n")).unwrap();
        };
        put("nr_kdamonds", "1");
        put("0/state", state);
        put("0/contexts/0/monitoring_attrs/intervals/aggr_us", "5000000");
        put("0/contexts/0/schemes/nr_schemes", "1");
        put("0/contexts/0/schemes/0/action", "pageout");
        put("0/contexts/0/schemes/0/access_pattern/age/min", "12");
        put("0/contexts/0/schemes/0/access_pattern/nr_accesses/max", "1");
        put("0/contexts/0/schemes/0/quotas/bytes", "134217728");
        put("0/contexts/0/schemes/0/quotas/reset_interval_ms", "1000");
        root
    }

    #[test]
    fn a_running_kdamond_is_described_paused_and_resumed() {
        let root = fake("on");
        let found = kdamonds(root.path());
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].schemes, ["pageout of regions untouched for 60 s (<= 1 accesses per 5000 ms), at most 134217728 bytes per 1000 ms"]);
        let paused = Paused::pause(root.path()).unwrap();
        assert!(!paused.is_empty());
        assert_eq!(read(&root.path().join("0/state")), "off");
        drop(paused);
        assert_eq!(read(&root.path().join("0/state")), "on");
        assert_eq!(describe(&found, "paused")["kdamonds"][0]["state"], "on");
    }

    #[test]
    fn a_stopped_kdamond_or_no_damon_is_left_alone() {
        let root = fake("off");
        let paused = Paused::pause(root.path()).unwrap();
        assert!(paused.is_empty());
        drop(paused);
        assert_eq!(read(&root.path().join("0/state")), "off");
        let none = tempfile::tempdir().unwrap();
        assert!(kdamonds(&none.path().join("absent")).is_empty());
        assert!(Paused::pause(&none.path().join("absent")).unwrap().is_empty());
    }
}
