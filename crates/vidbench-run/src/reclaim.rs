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
//! ends.
//!
//! Pauses are shared through a registry (`/run/vidbench/proactive-reclaim`):
//! each holder (a process, named by pid and start time so that a reused pid is
//! not mistaken for it) has a file listing the kdamonds it keeps off. A kdamond
//! is turned on again only when no live holder lists it, so two benchmarks
//! never turn it on under each other, and the files of holders that died
//! without releasing (SIGKILL) are taken over by the next pause or undone by
//! `recover` (`make test` runs it at its end). `vidbench proactive-reclaim`
//! is the command line (the benchmark scripts use it through
//! `scripts/proactive-reclaim`).

use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

/// Where the kernel's DAMON sysfs interface lists its kdamonds.
pub const KDAMONDS: &str = "/sys/kernel/mm/damon/admin/kdamonds";
/// Where holders of a pause record the kdamonds they keep off.
pub const REGISTRY: &str = "/run/vidbench/proactive-reclaim";

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

/// A process holding a pause: its pid and start time (clock ticks after boot,
/// `/proc/PID/stat` field 22), so that a later process with the same pid is
/// not taken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    pub start: u64,
}

impl Holder {
    /// The process `pid` as it is now; `None` when there is none.
    pub fn of(pid: u32) -> Option<Holder> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
        let start = stat[stat.rfind(')')? + 1..].split_whitespace().nth(19)?.parse().ok()?;
        Some(Holder { pid, start })
    }

    /// This process.
    pub fn current() -> Holder {
        Holder::of(std::process::id()).unwrap_or(Holder { pid: std::process::id(), start: 0 })
    }

    pub(crate) fn alive(&self) -> bool {
        Holder::of(self.pid) == Some(*self)
    }

    pub(crate) fn file_name(&self) -> String {
        format!("{}-{}", self.pid, self.start)
    }

    pub(crate) fn parse(name: &str) -> Option<Holder> {
        let (pid, start) = name.split_once('-')?;
        Some(Holder { pid: pid.parse().ok()?, start: start.parse().ok()? })
    }
}

/// The shared record of who keeps which kdamond off (see the module comment).
pub struct Registry {
    dir: PathBuf,
}

/// One holder's record; `holder` is `None` for a file that names no process.
struct Entry {
    file: PathBuf,
    holder: Option<Holder>,
    /// Whether the holder is still running (read once, with the record).
    live: bool,
    dirs: BTreeSet<PathBuf>,
}

/// The kdamond directories a record lists, one per line.
fn read_record(path: &Path) -> io::Result<BTreeSet<PathBuf>> {
    Ok(std::fs::read_to_string(path)?.lines().filter(|l| !l.is_empty()).map(PathBuf::from).collect())
}

impl Registry {
    pub fn at(dir: impl Into<PathBuf>) -> Registry {
        Registry { dir: dir.into() }
    }

    /// The machine's registry (`VIDBENCH_RECLAIM_REGISTRY` moves it, for tests).
    pub fn system() -> Registry {
        Registry::at(std::env::var_os("VIDBENCH_RECLAIM_REGISTRY").map_or_else(|| PathBuf::from(REGISTRY), PathBuf::from))
    }

    /// True when no holder has a record (also when the registry was never made).
    pub fn is_empty(&self) -> bool {
        std::fs::read_dir(&self.dir).map_or(true, |mut d| !d.any(|e| e.is_ok_and(|e| !e.file_name().to_string_lossy().starts_with('.'))))
    }

    /// An exclusive lock on the registry, held until the file is dropped.
    fn lock(&self) -> io::Result<std::fs::File> {
        std::fs::create_dir_all(&self.dir)?;
        let f = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(self.dir.join(".lock"))?;
        f.lock()?;
        Ok(f)
    }

    fn entries(&self) -> io::Result<Vec<Entry>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(&self.dir)? {
            let e = e?;
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let holder = Holder::parse(&name);
            out.push(Entry { dirs: read_record(&e.path())?, live: holder.is_some_and(|h| h.alive()), file: e.path(), holder });
        }
        Ok(out)
    }

    /// Turns off every kdamond under `root` that is on and records them for
    /// `holder`, together with those other live holders keep off (so that
    /// their release does not turn them on under this one) and those of
    /// holders that died (so that they are turned on when this one releases).
    pub fn pause(&self, root: &Path, holder: Holder) -> io::Result<Pause> {
        let _lock = self.lock()?;
        let mut mine = BTreeSet::new();
        let mut adopted = Vec::new();
        for e in self.entries()? {
            let own = e.holder == Some(holder);
            if !own && !e.live {
                adopted.extend(e.dirs.iter().cloned());
            }
            if own || !e.live {
                std::fs::remove_file(&e.file)?;
            }
            mine.extend(e.dirs);
        }
        let mut turned_off = Vec::new();
        for k in kdamonds(root).into_iter().filter(|k| k.state == "on") {
            std::fs::write(k.dir.join("state"), "off")?;
            mine.insert(k.dir.clone());
            turned_off.push(k.dir);
        }
        if !mine.is_empty() {
            let text: String = mine.iter().map(|d| format!("{}\n", d.display())).collect();
            std::fs::write(self.dir.join(holder.file_name()), text)?;
        }
        Ok(Pause { turned_off, adopted })
    }

    /// Ends `holder`'s pause: each kdamond it kept off that no other live
    /// holder keeps off is turned on again (as are those of dead holders).
    /// Returns the kdamonds turned on.
    pub fn release(&self, holder: Holder) -> io::Result<Vec<PathBuf>> {
        let _lock = self.lock()?;
        let file = self.dir.join(holder.file_name());
        let mine = match read_record(&file) {
            Ok(dirs) => {
                std::fs::remove_file(&file)?;
                dirs
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => BTreeSet::new(),
            Err(e) => return Err(e),
        };
        self.turn_on_unheld(mine)
    }

    /// Undoes the pauses of holders that died without releasing them.
    pub fn recover(&self) -> io::Result<Vec<PathBuf>> {
        let _lock = self.lock()?;
        self.turn_on_unheld(BTreeSet::new())
    }

    /// With the lock held: turns on `released` and the kdamonds of dead
    /// holders, except those a live holder keeps off; removes dead holders' files.
    fn turn_on_unheld(&self, mut released: BTreeSet<PathBuf>) -> io::Result<Vec<PathBuf>> {
        let mut held = BTreeSet::new();
        for e in self.entries()? {
            if e.live {
                held.extend(e.dirs);
            } else {
                std::fs::remove_file(&e.file)?;
                released.extend(e.dirs);
            }
        }
        let mut on = Vec::new();
        for d in released.into_iter().filter(|d| !held.contains(d)) {
            std::fs::write(d.join("state"), "on")?;
            on.push(d);
        }
        Ok(on)
    }
}

/// What a pause did.
#[derive(Debug)]
pub struct Pause {
    /// The kdamonds it turned off (others may be held off with it).
    pub turned_off: Vec<PathBuf>,
    /// Those left off by holders that died, now held by this pause.
    pub adopted: Vec<PathBuf>,
}

/// A pause held by this process for as long as the value lives; released
/// when dropped.
pub struct Paused {
    registry: Registry,
    holder: Holder,
    pub pause: Pause,
}

impl Paused {
    /// Pauses the kdamonds under `root` for this process.
    pub fn hold(registry: Registry, root: &Path) -> io::Result<Paused> {
        let holder = Holder::current();
        let pause = registry.pause(root, holder)?;
        Ok(Paused { registry, holder, pause })
    }

    /// Pauses the machine's running kdamonds for this process.
    pub fn system() -> io::Result<Paused> {
        Paused::hold(Registry::system(), Path::new(KDAMONDS))
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        if let Err(e) = self.registry.release(self.holder) {
            eprintln!("vidbench run: could not turn DAMON's proactive reclaim on again ({e}): run `vidbench proactive-reclaim recover`");
        }
    }
}

/// `vidbench proactive-reclaim`: the registry from the command line, for
/// benchmark scripts (`scripts/proactive-reclaim`) and after a killed run.
#[derive(Debug, clap::Args)]
#[command(about = "DAMON's proactive reclaim: show it, pause it for a benchmark, end the pause, \
                   or undo what killed benchmarks left off (see docs/run.md)")]
pub struct CliArgs {
    #[command(subcommand)]
    action: CliAction,
}

#[derive(Debug, clap::Subcommand)]
enum CliAction {
    /// One line per kdamond (state and schemes) and the pauses on record.
    Status,
    /// Turn every running kdamond off and hold it off for a process (root).
    Pause {
        /// The process the pause belongs to (default: the calling process,
        /// e.g. the benchmark script); the pause ends when it releases or,
        /// if it dies first, at the next pause or recover.
        #[arg(long, value_name = "PID")]
        holder: Option<u32>,
    },
    /// End a process's pause: kdamonds no other live process holds go on again (root).
    Release {
        /// The process whose pause ends (default: the calling process).
        #[arg(long, value_name = "PID")]
        holder: Option<u32>,
    },
    /// Turn on what benchmarks killed before releasing left off (root).
    Recover,
}

fn holder_arg(pid: Option<u32>) -> anyhow::Result<Holder> {
    let pid = pid.unwrap_or_else(std::os::unix::process::parent_id);
    Holder::of(pid).ok_or_else(|| anyhow::anyhow!("no process {pid} to hold the pause"))
}

/// Runs `vidbench proactive-reclaim`.
pub fn cli(args: CliArgs) -> anyhow::Result<()> {
    use anyhow::Context;
    let root = Path::new(KDAMONDS);
    let reg = Registry::system();
    let names = |v: Vec<PathBuf>| v.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ");
    match args.action {
        CliAction::Status => {
            let found = kdamonds(root);
            if found.is_empty() {
                println!("no kdamond (no DAMON sysfs interface at {KDAMONDS})");
            }
            for k in found {
                let name = k.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                println!("kdamond {name}: {}; {}", k.state, k.schemes.join("; "));
            }
            if !reg.is_empty() {
                for e in reg.entries().with_context(|| format!("cannot read {REGISTRY}"))? {
                    let who = e.holder.map_or("a record naming no process".to_string(), |h| format!("pid {}", h.pid));
                    let state = if e.live { "running" } else { "dead: `recover` turns it on" };
                    println!("held off by {who} ({state}): {}", names(e.dirs.into_iter().collect()));
                }
            }
        }
        CliAction::Pause { holder } => {
            let h = holder_arg(holder)?;
            // The pause outlives this command: the holder releases it.
            let p = reg.pause(root, h).with_context(|| format!("cannot pause DAMON's proactive reclaim (registry {REGISTRY}; root needed)"))?;
            if !p.turned_off.is_empty() {
                eprintln!("proactive-reclaim: paused {} for pid {}", names(p.turned_off), h.pid);
            }
            if !p.adopted.is_empty() {
                eprintln!("proactive-reclaim: took over {} from a killed benchmark", names(p.adopted));
            }
        }
        CliAction::Release { holder } => {
            let on = reg.release(holder_arg(holder)?).with_context(|| format!("cannot end the pause (registry {REGISTRY})"))?;
            if !on.is_empty() {
                eprintln!("proactive-reclaim: turned {} on again", names(on));
            }
        }
        CliAction::Recover => {
            let on = reg.recover().with_context(|| format!("cannot recover (registry {REGISTRY})"))?;
            if !on.is_empty() {
                eprintln!("proactive-reclaim: turned {} on again (left off by a killed benchmark)", names(on));
            }
        }
    }
    Ok(())
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

    fn state(root: &tempfile::TempDir) -> String {
        read(&root.path().join("0/state"))
    }

    /// A live process other than this one, and its holder identity.
    fn other_process() -> (std::process::Child, Holder) {
        let child = std::process::Command::new("sleep").arg("60").spawn().unwrap();
        let h = Holder::of(child.id()).unwrap();
        (child, h)
    }

    /// A process that pauses and is killed before it releases.
    fn killed_holder(reg: &Registry, root: &tempfile::TempDir) {
        let (mut child, dead) = other_process();
        reg.pause(root.path(), dead).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn a_running_kdamond_is_described_paused_and_resumed() {
        let root = fake("on");
        let reg = tempfile::tempdir().unwrap();
        let found = kdamonds(root.path());
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].schemes, ["pageout of regions untouched for 60 s (<= 1 accesses per 5000 ms), at most 134217728 bytes per 1000 ms"]);
        let paused = Paused::hold(Registry::at(reg.path()), root.path()).unwrap();
        assert_eq!(paused.pause.turned_off, [root.path().join("0")]);
        assert_eq!(state(&root), "off");
        assert!(!Registry::at(reg.path()).is_empty());
        drop(paused);
        assert_eq!(state(&root), "on");
        assert!(Registry::at(reg.path()).is_empty());
        assert_eq!(describe(&found, "paused")["kdamonds"][0]["state"], "on");
    }

    #[test]
    fn a_stopped_kdamond_or_no_damon_is_left_alone() {
        let root = fake("off");
        let reg = tempfile::tempdir().unwrap();
        let paused = Paused::hold(Registry::at(reg.path()), root.path()).unwrap();
        assert!(paused.pause.turned_off.is_empty() && paused.pause.adopted.is_empty());
        drop(paused);
        assert_eq!(state(&root), "off");
        let none = tempfile::tempdir().unwrap();
        assert!(kdamonds(&none.path().join("absent")).is_empty());
        assert!(Registry::at(reg.path()).pause(&none.path().join("absent"), Holder::current()).unwrap().turned_off.is_empty());
    }

    #[test]
    fn a_kdamond_stays_off_until_the_last_live_holder_releases_it() {
        let root = fake("on");
        let td = tempfile::tempdir().unwrap();
        let reg = Registry::at(td.path());
        let (mut child, other) = other_process();
        reg.pause(root.path(), other).unwrap(); // held by the other process, released below in its name
        let mine = Paused::hold(Registry::at(td.path()), root.path()).unwrap();
        assert!(mine.pause.turned_off.is_empty(), "already off");
        assert_eq!(reg.release(other).unwrap(), Vec::<PathBuf>::new(), "this process still holds it");
        assert_eq!(state(&root), "off");
        drop(mine);
        assert_eq!(state(&root), "on");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn what_a_killed_holder_left_off_is_recovered_or_taken_over() {
        let root = fake("on");
        let td = tempfile::tempdir().unwrap();
        let reg = Registry::at(td.path());
        // Killed before releasing: its record stays, the kdamond stays off.
        killed_holder(&reg, &root);
        assert_eq!(state(&root), "off");
        assert_eq!(reg.recover().unwrap(), [root.path().join("0")]);
        assert_eq!(state(&root), "on");
        assert!(reg.is_empty());

        // The next pause takes the dead holder's record over and ends it.
        killed_holder(&reg, &root);
        let mine = Paused::hold(Registry::at(td.path()), root.path()).unwrap();
        assert_eq!(mine.pause.adopted, [root.path().join("0")]);
        assert_eq!(state(&root), "off");
        drop(mine);
        assert_eq!(state(&root), "on");
        assert!(reg.is_empty());
    }

    #[test]
    fn a_reused_pid_is_not_taken_for_the_holder() {
        let me = Holder::current();
        assert!(me.alive());
        assert!(!Holder { pid: me.pid, start: me.start + 1 }.alive());
        assert_eq!(Holder::parse(&me.file_name()), Some(me));
        assert_eq!(Holder::parse("garbage"), None);
        // A record whose name is not a holder counts as a dead holder's.
        let root = fake("off");
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("garbage"), format!("{}\n", root.path().join("0").display())).unwrap();
        assert_eq!(Registry::at(dir.path()).recover().unwrap(), [root.path().join("0")]);
        assert_eq!(state(&root), "on");
    }
}
