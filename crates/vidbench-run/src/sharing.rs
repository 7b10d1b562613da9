//! Experiments sharing one machine.
//!
//! A paper-scale configuration keeps the machine's CPUs about 80 % idle (the
//! server, the load client and the emulated drive together use about a third
//! of one core) while its memory limit takes 8 of 24 GiB, so two experiments
//! can run side by side, each on its own emulated drive, cgroup, server port
//! and load client (nginx by default beside another experiment repeated its
//! alone run step for step: docs/results/shared-check-2026-11-26). What
//! they would otherwise share is made safe here:
//!
//! - **the global `drop_caches`** a run writes before it starts would empty
//!   the other experiment's cgroup in the middle of a window. While another
//!   experiment is registered it is skipped: every run mounts its drive
//!   afresh, and a filesystem that was not mounted has nothing in the page
//!   cache, so the library starts cold either way (what the drop was for).
//!   Each run records which happened (`setup.json` `sharing`).
//! - **the server port**: each experiment takes `run.port`, or the next port
//!   no other registered experiment uses and nothing listens on.
//! - **memory**: the memory limits of all registered experiments, each with
//!   the headroom of its load client and drive, must fit in the machine,
//!   else the kernel's global reclaim would take pages from every cgroup.
//!   Without the global drop, what the drivers themselves write and read
//!   (results, traces, the workload, the image cache) would pile up in the
//!   page cache outside every limit until it did; so when the drop is skipped,
//!   the experiment evicts its own files instead ([`evict_own_files`]), and
//!   every run records the global reclaim (kswapd and direct scans, from
//!   `/proc/vmstat`) over its span, so that a run it touched is seen.
//! - **DAMON's proactive reclaim**: both experiments must want the same
//!   (`run.proactive_reclaim`), since a pause holds for the whole machine.
//!
//! A run records the experiments that overlapped it (`setup.json`
//! `sharing.overlapped`: live when it started, or registered or departed
//! while it ran, from the registry's history), so a report says which
//! results were measured on a shared machine. A driver from before this
//! registry does not register; its run cgroups (`vidbench-PID-N`) still show
//! it, and the global drop is skipped while one of another live pid exists.
//!
//! Registration is a file per experiment in [`DIR`] (`VIDBENCH_SHARING_DIR`
//! moves it, for tests) named by pid and start time, so a dead experiment's
//! file is recognised as stale and removed; a lock file serialises
//! registration against the check-and-drop, so an experiment never
//! registers between another's check and its drop.

use crate::driver::now_unix;
use crate::experiment::ReclaimPolicy;
use crate::reclaim::Holder;
use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Where experiments register.
pub const DIR: &str = "/run/vidbench/experiments";
const LOCK: &str = ".lock";
/// One line per registration and departure: `UNIX_SECONDS join|leave|gone
/// PID OUT` (`gone`: a dead experiment's file found and removed).
const HISTORY: &str = ".history";
/// How many ports above `run.port` are tried.
const PORT_TRIES: u16 = 64;

/// What one registered experiment declared.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Sharer {
    pub pid: u32,
    #[serde(skip)]
    start: u64,
    pub out: PathBuf,
    pub memory_limit_bytes: u64,
    pub port: u16,
    /// `run.proactive_reclaim`.
    pub proactive_reclaim: ReclaimPolicy,
}

/// This experiment's registration; removed when dropped.
pub struct Share {
    dir: PathBuf,
    file: PathBuf,
    me: Sharer,
}

/// An exclusive lock on the registry, held until dropped.
struct Locked {
    _file: std::fs::File,
}

impl Locked {
    fn take(dir: &Path) -> anyhow::Result<Locked> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let path = dir.join(LOCK);
        let f = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).with_context(|| format!("cannot open {}", path.display()))?;
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(std::io::Error::last_os_error()).with_context(|| format!("cannot lock {}", path.display()));
        }
        Ok(Locked { _file: f })
    }
}

fn file_name(h: Holder) -> String {
    format!("{}.json", h.file_name())
}

/// The live experiments registered in `dir`; stale files are removed.
fn live(dir: &Path) -> Vec<Sharer> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        // The lock, and a registration being written (renamed into place).
        let Some(stem) = name.strip_suffix(".json").filter(|_| !name.starts_with('.')) else { continue };
        let record = std::fs::read_to_string(&path).ok().and_then(|t| serde_json::from_str::<Sharer>(&t).ok());
        match (Holder::parse(stem), record) {
            (Some(h), Some(mut r)) if h.alive() => {
                r.start = h.start;
                out.push(r);
            }
            // A dead holder's file (killed: it wrote no `leave`), or one
            // nobody could have written whole.
            (_, record) => {
                if std::fs::remove_file(&path).is_ok() {
                    if let Some(r) = record {
                        log_event(dir, "gone", r.pid, &r.out);
                    }
                }
            }
        }
    }
    out.sort_by_key(|s| s.pid);
    out
}

/// Appends an event to the history in one write (O_APPEND: lines never
/// interleave); best effort, it only informs records.
fn log_event(dir: &Path, what: &str, pid: u32, out: &Path) {
    use std::io::Write;
    let line = format!("{:.3} {what} {pid} {}\n", now_unix(), out.display());
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(dir.join(HISTORY)) {
        let _ = f.write_all(line.as_bytes());
    }
}

fn port_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// The machine's registry directory (`VIDBENCH_SHARING_DIR` moves it).
fn registry() -> PathBuf {
    std::env::var_os("VIDBENCH_SHARING_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(DIR))
}

/// The pid of the live registered experiment writing to `out`, if any.
pub fn writer_of(out: &Path) -> Option<u32> {
    live(&registry()).into_iter().find(|s| s.out == out).map(|s| s.pid)
}

impl Share {
    /// Registers the experiment writing to `out` in the machine's registry
    /// (`total`: the machine's memory).
    pub fn join(out: &Path, memory_limit_bytes: u64, headroom: u64, base_port: u16, proactive_reclaim: ReclaimPolicy, total: u64) -> anyhow::Result<Share> {
        let want = Sharer { pid: 0, start: 0, out: out.to_owned(), memory_limit_bytes, port: base_port, proactive_reclaim };
        Share::join_in(&registry(), want, headroom, total, port_free)
    }

    /// Registers `want` (its pid is this process's; its port the first to try).
    fn join_in(dir: &Path, want: Sharer, headroom: u64, total: u64, port_free: impl Fn(u16) -> bool) -> anyhow::Result<Share> {
        let (out, memory_limit_bytes, base_port) = (want.out.as_path(), want.memory_limit_bytes, want.port);
        let _lock = Locked::take(dir)?;
        let others = live(dir);
        if let Some(o) = others.iter().find(|o| o.out == out) {
            bail!("experiment pid {} is already writing to {}: one results directory takes one experiment at a time", o.pid, out.display());
        }
        if let Some(o) = others.iter().find(|o| o.proactive_reclaim != want.proactive_reclaim) {
            bail!(
                "experiment pid {} ({}) runs with [run] proactive_reclaim = {:?} and this one with {:?}: a pause of DAMON holds for the whole machine, so both must want the same",
                o.pid,
                o.out.display(),
                o.proactive_reclaim.name(),
                want.proactive_reclaim.name()
            );
        }
        let need: u64 = others.iter().fold(memory_limit_bytes.saturating_add(headroom), |n, o| n.saturating_add(o.memory_limit_bytes).saturating_add(headroom));
        if need > total {
            let list: Vec<String> = others.iter().map(|o| format!("pid {} ({} MiB, {})", o.pid, o.memory_limit_bytes >> 20, o.out.display())).collect();
            bail!(
                "this experiment's {} MiB and the running experiments' [{}], each with {} MiB for its load client and drive, need {} MiB, \
                 but this machine has {} MiB: the kernel would reclaim from every experiment's cgroup. Start it when one has finished",
                memory_limit_bytes >> 20,
                list.join(", "),
                headroom >> 20,
                need >> 20,
                total >> 20
            );
        }
        let port = (0..PORT_TRIES)
            .filter_map(|k| base_port.checked_add(k))
            .find(|p| others.iter().all(|o| o.port != *p) && port_free(*p))
            .with_context(|| format!("no free port in {base_port}..{} for the server (the experiments running use {:?})", base_port as u32 + PORT_TRIES as u32, others.iter().map(|o| o.port).collect::<Vec<_>>()))?;
        let h = Holder::current();
        let me = Sharer { pid: h.pid, start: h.start, port, ..want };
        let file = dir.join(file_name(h));
        let tmp = dir.join(format!(".{}", file_name(h)));
        std::fs::write(&tmp, serde_json::to_vec(&me)?).with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, &file).with_context(|| format!("cannot write {}", file.display()))?;
        log_event(dir, "join", me.pid, &me.out);
        Ok(Share { dir: dir.to_owned(), file, me })
    }

    /// The server port this experiment uses.
    pub fn port(&self) -> u16 {
        self.me.port
    }

    /// The other experiments registered now.
    pub fn others(&self) -> Vec<Sharer> {
        live(&self.dir).into_iter().filter(|s| !(s.pid == self.me.pid && s.start == self.me.start)).collect()
    }

    /// The results directories of the other experiments that were running
    /// at any time since `since` (seconds since the epoch): live now, or
    /// registered or departed since.
    pub fn overlapping(&self, since: f64) -> Vec<PathBuf> {
        let mut outs: std::collections::BTreeSet<PathBuf> = self.others().into_iter().map(|s| s.out).collect();
        let history = std::fs::read_to_string(self.dir.join(HISTORY)).unwrap_or_default();
        for line in history.lines() {
            let mut f = line.splitn(4, ' ');
            let (Some(t), Some(_), Some(pid), Some(out)) = (f.next(), f.next(), f.next(), f.next()) else { continue };
            if t.parse::<f64>().is_ok_and(|t| t >= since) && pid.parse::<u32>().is_ok_and(|p| p != self.me.pid) {
                outs.insert(PathBuf::from(out));
            }
        }
        outs.into_iter().collect()
    }

    /// Runs `drop` (the global `drop_caches`) when no other experiment runs,
    /// under the registry's lock: none registered, and none of the pids
    /// `unregistered` gives (drivers that predate the registry) other than
    /// this one or a registered one. Returns who shares the machine.
    pub fn drop_unless_shared(&self, unregistered: impl FnOnce() -> Vec<u32>, drop: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<Company> {
        let _lock = Locked::take(&self.dir)?;
        let company = self.company(unregistered());
        if company.alone() {
            drop()?;
        }
        Ok(company)
    }

    /// Who shares the machine now: the other registered experiments, and
    /// those of the `unregistered` pids (drivers seen by their run cgroups)
    /// that are neither this one nor registered.
    pub fn company(&self, mut unregistered: Vec<u32>) -> Company {
        let registered = self.others();
        unregistered.retain(|p| *p != self.me.pid && registered.iter().all(|r| r.pid != *p));
        unregistered.sort_unstable();
        unregistered.dedup();
        Company { registered, unregistered_pids: unregistered }
    }
}

/// The experiments sharing the machine at one moment.
#[derive(Debug, Serialize)]
pub struct Company {
    pub registered: Vec<Sharer>,
    /// Live drivers that did not register (their run cgroups show them).
    pub unregistered_pids: Vec<u32>,
}

impl Company {
    pub fn alone(&self) -> bool {
        self.registered.is_empty() && self.unregistered_pids.is_empty()
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        let _lock = Locked::take(&self.dir);
        let _ = std::fs::remove_file(&self.file);
        log_event(&self.dir, "leave", self.me.pid, &self.me.out);
    }
}

/// Pages scanned by the kernel's global reclaim so far (kswapd and direct,
/// every zone; `/proc/vmstat`), or `None` where it cannot be read.
pub fn global_reclaim_scanned() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/vmstat").ok()?;
    Some(text.lines().filter(|l| l.starts_with("pgscan_kswapd") || l.starts_with("pgscan_direct")).filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok()).sum())
}

/// Drops the page cache of every regular file under `dir` (not crossing
/// into other filesystems: the drives mounted below it stay untouched);
/// returns how many files it advised. What an experiment writes and reads
/// there would otherwise outlive its runs when the global drop is skipped.
pub fn evict_own_files(dir: &Path) -> usize {
    use std::os::unix::fs::MetadataExt;
    let Ok(root) = std::fs::metadata(dir) else { return 0 };
    let mut stack = vec![dir.to_owned()];
    let mut n = 0;
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let Ok(m) = e.path().symlink_metadata() else { continue };
            if m.dev() != root.dev() {
                continue;
            }
            if m.is_dir() {
                stack.push(e.path());
            } else if m.is_file() {
                if let Ok(f) = std::fs::File::open(e.path()) {
                    // SAFETY: fadvise on a descriptor this function owns.
                    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
                    n += 1;
                }
            }
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn want(out: &str, limit: u64, port: u16) -> Sharer {
        Sharer { pid: 0, start: 0, out: out.into(), memory_limit_bytes: limit, port, proactive_reclaim: ReclaimPolicy::Pause }
    }

    fn join(dir: &Path, out: &str, limit: u64, total: u64) -> anyhow::Result<Share> {
        Share::join_in(dir, want(out, limit, 8089), GIB, total, |_| true)
    }

    #[test]
    fn a_second_experiment_gets_the_next_port_and_stops_the_global_drop() {
        let dir = tempfile::tempdir().unwrap();
        let a = join(dir.path(), "/r/a", 8 * GIB, 24 * GIB).unwrap();
        assert_eq!(a.port(), 8089);
        let mut dropped = 0;
        let me = std::process::id();
        let alone = a
            .drop_unless_shared(|| vec![me], || {
                dropped += 1;
                Ok(())
            })
            .unwrap();
        assert!(alone.alone(), "its own cgroups are not company");
        assert_eq!(dropped, 1, "alone: the global drop runs");
        // A driver that did not register (pid 1 stands for it) stops the drop too.
        let company = a
            .drop_unless_shared(|| vec![1, me], || {
                dropped += 1;
                Ok(())
            })
            .unwrap();
        assert_eq!((dropped, company.unregistered_pids), (1, vec![1]));
        // A second live experiment: pid 1 stands for it (this process is a).
        let init = Holder::of(1).expect("pid 1 exists");
        let b = Sharer { pid: 1, start: init.start, port: 8090, ..want("/r/b", 8 * GIB, 0) };
        std::fs::write(dir.path().join(file_name(init)), serde_json::to_vec(&b).unwrap()).unwrap();
        let company = a
            .drop_unless_shared(|| vec![1], || {
                dropped += 1;
                Ok(())
            })
            .unwrap();
        let others = company.registered;
        assert_eq!((dropped, others.len(), others[0].out.as_path()), (1, 1, Path::new("/r/b")), "shared: the drop is skipped and the other named");
        assert!(company.unregistered_pids.is_empty(), "b's own cgroups do not count as an unregistered driver");
        // DAMON's policy must agree.
        let keep = Sharer { proactive_reclaim: ReclaimPolicy::Keep, ..want("/r/k", GIB, 8089) };
        let err = Share::join_in(dir.path(), keep, GIB, 40 * GIB, |_| true).err().expect("refused").to_string();
        assert!(err.contains("proactive_reclaim = \"pause\"") && err.contains("\"keep\""), "{err}");
        // A third finds both ports taken and both limits counted.
        let err = join(dir.path(), "/r/c", 8 * GIB, 24 * GIB).err().expect("27 GiB needed, 24 there").to_string();
        assert!(err.contains("need 27648 MiB") && err.contains("/r/b"), "{err}");
        // One results directory, one experiment.
        let err = join(dir.path(), "/r/b", GIB, 40 * GIB).err().expect("refused").to_string();
        assert!(err.contains("pid 1 is already writing to /r/b"), "{err}");
        // b overlapped a since a began; c (below) joins after a ended.
        assert_eq!(a.overlapping(0.0), vec![PathBuf::from("/r/b")]);
        let a_pid = a.me.pid;
        // When a ends, its port and memory are free again.
        drop(a);
        assert_eq!(live(dir.path()).len(), 1, "a unregistered, b remains");
        let c = join(dir.path(), "/r/c", 8 * GIB, 24 * GIB).unwrap();
        assert_eq!(c.port(), 8089);
        // The history keeps a's stay; the same pid (this test process) is not another experiment.
        let history = std::fs::read_to_string(dir.path().join(HISTORY)).unwrap();
        assert!(history.contains(&format!("join {a_pid} /r/a")) && history.contains(&format!("leave {a_pid} /r/a")), "{history}");
        assert_eq!(c.overlapping(0.0), vec![PathBuf::from("/r/b")]);
        assert!(c.overlapping(now_unix() + 1.0).contains(&PathBuf::from("/r/b")), "b is live: it overlaps any span");
    }

    #[test]
    fn stale_and_garbled_registrations_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let dead = Sharer { pid: i32::MAX as u32, start: 3, ..want("/r/x", 8 * GIB, 8089) };
        std::fs::write(dir.path().join(file_name(Holder { pid: dead.pid, start: 3 })), serde_json::to_vec(&dead).unwrap()).unwrap();
        let me = Holder::current();
        std::fs::write(dir.path().join(file_name(me)), "{ not json").unwrap();
        assert!(live(dir.path()).is_empty());
        let names: Vec<String> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert_eq!(names, [HISTORY], "only the history is left");
        let history = std::fs::read_to_string(dir.path().join(HISTORY)).unwrap();
        assert!(history.contains(&format!("gone {} /r/x", i32::MAX)), "a killed experiment's stay ends in the history: {history}");
        // The dead one's port and memory are free again.
        let a = join(dir.path(), "/r/a", 20 * GIB, 24 * GIB).unwrap();
        assert_eq!(a.port(), 8089);
    }

    #[test]
    fn a_port_something_else_listens_on_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let a = Share::join_in(dir.path(), want("/r/a", GIB, 9000), GIB, 24 * GIB, |p| p != 9000 && p != 9001).unwrap();
        assert_eq!(a.port(), 9002);
        let err = Share::join_in(dir.path(), want("/r/b", GIB, 9000), GIB, 24 * GIB, |_| false).err().expect("none free").to_string();
        assert!(err.contains("no free port in 9000..9064"), "{err}");
    }
}

#[cfg(test)]
mod evict_tests {
    use super::*;

    #[test]
    fn own_files_are_advised_out_of_the_cache_and_reclaim_is_readable() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("runs/x")).unwrap();
        std::fs::write(dir.path().join("a.json"), vec![7u8; 1 << 20]).unwrap();
        std::fs::write(dir.path().join("runs/x/trace.csv"), vec![7u8; 1 << 20]).unwrap();
        assert_eq!(evict_own_files(dir.path()), 2);
        assert_eq!(evict_own_files(&dir.path().join("missing")), 0);
        assert!(global_reclaim_scanned().is_some(), "/proc/vmstat has pgscan counters");
    }
}
