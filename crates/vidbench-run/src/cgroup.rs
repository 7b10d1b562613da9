//! The memory cgroup a run's server and daemon share, and CPU accounting for
//! each of them, on cgroup v1 or cgroup v2.
//!
//! Page cache is charged to the cgroup of the task that first reads a page, so
//! the server and Libception's daemon live together under one memory limit:
//! the papers' memory : library ratio, scaled. The emulated disk's process
//! stays outside (it only answers FUSE requests).
//!
//! Which hierarchy holds the memory controller is found once per call of
//! [`detect`]: the directory named by `VIDBENCH_CGROUP_ROOT` if set, else the
//! cgroup v1 hierarchy with `memory` in its mount options, else the cgroup2
//! (unified) mount, both read from `/proc/self/mountinfo`. The layouts:
//! - **v1**: `MEMORY/vidbench-<id>` with `memory.limit_in_bytes`, every process
//!   of the run in it; CPU per role in `CPUACCT/vidbench-<id>/<role>` (if the
//!   `cpuacct` controller is mounted).
//! - **v2**: `ROOT/vidbench-<id>` with `memory.max`, and one leaf per role
//!   (`server`, `daemon`, `reader`) holding the processes: v2 allows processes
//!   only in leaves ("no internal processes"), so the limit sits on the parent,
//!   which accounts for all three; CPU per role from each leaf's `cpu.stat`.
//!   `memory` is enabled in ROOT's `cgroup.subtree_control` if it is not yet.
//!
//! A [`RunCgroup`] is a guard: dropping it kills whatever still runs inside
//! (`cgroup.kill` where the kernel has it, else SIGKILL until empty) and removes
//! the directories, leaves first. Children enter the cgroups between fork and
//! exec ([`Attach::enter`], async-signal-safe: it writes "0" to pre-opened
//! `cgroup.procs` files), so not one page is charged elsewhere.
//! [`cleanup_stale`] removes the cgroups of a driver that died without cleaning up.
//! [`RunCgroup::describe`] says which version and files a run used (recorded in
//! its `setup.json`), [`RunCgroup::memory_stats`] gives the v1 names for both.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Names the directory under which run cgroups are made, bypassing detection.
pub const ROOT_ENV: &str = "VIDBENCH_CGROUP_ROOT";
const PREFIX: &str = "vidbench-";
const ROLES: [Role; 3] = [Role::Server, Role::Daemon, Role::Reader];

/// Which processes of a run a cgroup accounts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Server,
    Daemon,
    Reader,
}

impl Role {
    pub fn dir(self) -> &'static str {
        match self {
            Role::Server => "server",
            Role::Daemon => "daemon",
            Role::Reader => "reader",
        }
    }
}

/// The cgroup version of a hierarchy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// What cannot be done with the cgroups here, and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error(
        "no cgroup hierarchy vidbench can use is mounted: /proc/self/mountinfo shows neither a cgroup v1 hierarchy \
         with the `memory` controller nor a cgroup2 (unified) mount; mount one (cgroup v2: `mount -t cgroup2 none \
         /sys/fs/cgroup`) or name a cgroup directory in {ROOT_ENV}"
    )]
    NotMounted,
    #[error(
        "{ROOT_ENV}={0} is not a cgroup directory (it has neither cgroup.controllers, as in cgroup v2, nor \
         memory.limit_in_bytes, as in a cgroup v1 memory hierarchy): point it at a directory inside a mounted \
         cgroup hierarchy"
    )]
    NotACgroup(PathBuf),
    #[error("the memory controller is not available at {root} (cgroup v2: its cgroup.controllers lists: {controllers}): {why}")]
    NoMemory { root: PathBuf, controllers: String, why: String },
    #[error("cannot enable the memory controller for the children of {dir} (writing `+memory` to its cgroup.subtree_control failed: {error}): {why}")]
    Enable { dir: PathBuf, error: io::Error, why: String },
    #[error("cannot parse {file} line {line} `{text}`: expected {expected}; it is not what a cgroup file of this kind holds")]
    Parse { file: PathBuf, line: usize, text: String, expected: &'static str },
    #[error("cannot {what} {path}: {error}")]
    Io { what: &'static str, path: PathBuf, error: io::Error },
    #[error("cgroup {0} already exists (another run is using it?): remove it (rmdir) if no run is")]
    Exists(PathBuf),
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> CgroupError + 'a {
    move |error| CgroupError::Io { what, path: path.to_path_buf(), error }
}

fn read(path: &Path) -> Result<String, CgroupError> {
    fs::read_to_string(path).map_err(io_err("read", path))
}

/// Where run cgroups are made, and how.
#[derive(Debug, Clone)]
pub struct Hierarchy {
    pub version: Version,
    /// The directory run cgroups are made in (v1: in the memory hierarchy).
    pub root: PathBuf,
    /// v1: the cpuacct hierarchy's root, if mounted.
    pub cpuacct: Option<PathBuf>,
    /// How `root` was found.
    pub source: &'static str,
    /// v2: the controllers `root` may use (its cgroup.controllers).
    pub controllers: Vec<String>,
    /// A cgroup v1 memory mount (to explain why v2 lacks memory).
    v1_memory: Option<PathBuf>,
    /// Whether `root` is the top of its mount (not a subtree).
    mount_root: bool,
}

/// One cgroup mount of /proc/self/mountinfo.
#[derive(Debug)]
struct Mount {
    point: PathBuf,
    v2: bool,
    options: Vec<String>,
}

/// The cgroup and cgroup2 mounts in a mountinfo text (proc(5)): fields
/// `id parent dev root point options [optional...] - fstype source superoptions`.
fn cgroup_mounts(mountinfo: &str) -> Vec<Mount> {
    let mut mounts = Vec::new();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let Some(point) = left.split(' ').nth(4) else { continue };
        let mut r = right.split(' ');
        let (Some(fstype), Some(_source), Some(superopts)) = (r.next(), r.next(), r.next()) else { continue };
        let v2 = match fstype {
            "cgroup2" => true,
            "cgroup" => false,
            _ => continue,
        };
        mounts.push(Mount { point: PathBuf::from(vidbench_disk::unescape_mountinfo(point)), v2, options: superopts.split(',').map(str::to_string).collect() });
    }
    mounts
}

fn words(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_string).collect()
}

/// Finds the hierarchy from the environment and /proc/self/mountinfo.
pub fn detect() -> Result<Hierarchy, CgroupError> {
    let explicit = std::env::var_os(ROOT_ENV).filter(|v| !v.is_empty()).map(PathBuf::from);
    let mountinfo = read(Path::new("/proc/self/mountinfo"))?;
    detect_from(&mountinfo, explicit.as_deref())
}

/// [`detect`] over a given mountinfo text and `VIDBENCH_CGROUP_ROOT` value.
pub fn detect_from(mountinfo: &str, explicit: Option<&Path>) -> Result<Hierarchy, CgroupError> {
    let mounts = cgroup_mounts(mountinfo);
    let v1_with = |c: &str| mounts.iter().find(|m| !m.v2 && m.options.iter().any(|o| o == c)).map(|m| m.point.clone());
    let v1_memory = v1_with("memory");
    let cpuacct = v1_with("cpuacct").filter(|p| p.join("cpuacct.usage").exists());
    let v2_mount = mounts.iter().find(|m| m.v2).map(|m| m.point.clone());
    let is_mount_point = |p: &Path| mounts.iter().any(|m| m.point == p);
    let v2 = |root: PathBuf, source| -> Result<Hierarchy, CgroupError> {
        let controllers = words(&read(&root.join("cgroup.controllers"))?);
        let mount_root = is_mount_point(&root);
        Ok(Hierarchy { version: Version::V2, root, cpuacct: None, source, controllers, v1_memory: v1_memory.clone(), mount_root })
    };
    if let Some(root) = explicit {
        if root.join("cgroup.controllers").exists() {
            return v2(root.to_path_buf(), ROOT_ENV);
        }
        if root.join("memory.limit_in_bytes").exists() {
            let mount_root = is_mount_point(root);
            return Ok(Hierarchy {
                version: Version::V1,
                root: root.to_path_buf(),
                cpuacct,
                source: ROOT_ENV,
                controllers: Vec::new(),
                v1_memory: Some(root.to_path_buf()),
                mount_root,
            });
        }
        return Err(CgroupError::NotACgroup(root.to_path_buf()));
    }
    if let Some(root) = &v1_memory {
        return Ok(Hierarchy {
            version: Version::V1,
            root: root.clone(),
            cpuacct,
            source: "/proc/self/mountinfo",
            controllers: Vec::new(),
            v1_memory: v1_memory.clone(),
            mount_root: true,
        });
    }
    match v2_mount {
        Some(root) => v2(root, "/proc/self/mountinfo"),
        None => Err(CgroupError::NotMounted),
    }
}

impl Hierarchy {
    /// Ok if a memory limit can be set here, else why not and what to do.
    pub fn check_memory(&self) -> Result<(), CgroupError> {
        if self.version == Version::V1 || self.controllers.iter().any(|c| c == "memory") {
            return Ok(());
        }
        let why = if let Some(v1) = &self.v1_memory {
            format!(
                "the kernel binds the memory controller to the cgroup v1 hierarchy mounted at {} (a controller serves one \
                 hierarchy at a time); use that one (unset {ROOT_ENV}), or boot with `cgroup_no_v1=memory` (or \
                 `systemd.unified_cgroup_hierarchy=1`) to give it to cgroup v2",
                v1.display()
            )
        } else if self.mount_root {
            "the kernel offers cgroup v2 no memory controller: it is disabled (`cgroup_disable=memory` on the kernel \
             command line) or bound to a cgroup v1 hierarchy mounted elsewhere (see /proc/cgroups)"
                .to_string()
        } else {
            format!(
                "its parent does not hand it down: enable it in every ancestor from the mount's root down (`echo +memory > \
                 {}/cgroup.subtree_control`, and so on upwards), or point {ROOT_ENV} at a directory that has it",
                self.root.parent().unwrap_or(&self.root).display()
            )
        };
        let controllers = if self.controllers.is_empty() { "(none)".to_string() } else { self.controllers.join(" ") };
        Err(CgroupError::NoMemory { root: self.root.clone(), controllers, why })
    }

    /// v2: `memory` in root's cgroup.subtree_control, written if missing.
    fn enable_memory(&self) -> Result<(), CgroupError> {
        self.check_memory()?;
        let file = self.root.join("cgroup.subtree_control");
        if words(&read(&file)?).iter().any(|c| c == "memory") {
            return Ok(());
        }
        fs::write(&file, "+memory").map_err(|source| {
            let dir = self.root.display();
            let why = match source.raw_os_error() {
                Some(libc::EBUSY) => format!(
                    "{dir} holds processes of its own, and cgroup v2 lets a non-root cgroup enable controllers for its \
                     children only when it holds none (\"no internal processes\"); move them into a child (`mkdir \
                     {dir}/init` and write each pid of {dir}/cgroup.procs to {dir}/init/cgroup.procs), then run again"
                ),
                Some(libc::EACCES) | Some(libc::EPERM) => format!(
                    "not allowed: run as root, or have the subtree delegated to this user (systemd: `Delegate=yes`) and \
                     point {ROOT_ENV} into it"
                ),
                _ => format!("enable it by hand (`echo +memory > {}`) and run again", file.display()),
            };
            CgroupError::Enable { dir: self.root.clone(), error: source, why }
        })
    }
}

/// Whether vidbench run can work here: root, and a hierarchy with a memory controller.
pub fn available() -> Result<(), String> {
    if unsafe { libc::geteuid() } != 0 {
        return Err("vidbench run needs root (cgroups, drop_caches, mounts)".into());
    }
    detect().and_then(|h| h.check_memory()).map_err(|e| e.to_string())
}

/// `key value` lines, as in memory.stat, memory.events, cpu.stat and
/// memory.oom_control (both versions).
pub fn parse_flat(file: &Path, text: &str) -> Result<BTreeMap<String, u64>, CgroupError> {
    let mut map = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = || CgroupError::Parse { file: file.to_path_buf(), line: i + 1, text: line.to_string(), expected: "`NAME INTEGER`" };
        let mut w = line.split_whitespace();
        let (Some(k), Some(v), None) = (w.next(), w.next(), w.next()) else { return Err(bad()) };
        map.insert(k.to_string(), v.parse::<u64>().map_err(|_| bad())?);
    }
    Ok(map)
}

/// v2 io.stat: `MAJ:MIN key=value ...` per device.
pub fn parse_io_stat(file: &Path, text: &str) -> Result<BTreeMap<String, BTreeMap<String, u64>>, CgroupError> {
    let mut map = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = || CgroupError::Parse { file: file.to_path_buf(), line: i + 1, text: line.to_string(), expected: "`MAJ:MIN KEY=INTEGER ...`" };
        let mut w = line.split_whitespace();
        let dev = w.next().filter(|d| d.split_once(':').is_some_and(|(a, b)| a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok())).ok_or_else(bad)?;
        let mut counters = BTreeMap::new();
        for kv in w {
            let (k, v) = kv.split_once('=').ok_or_else(bad)?;
            counters.insert(k.to_string(), v.parse::<u64>().map_err(|_| bad())?);
        }
        map.insert(dev.to_string(), counters);
    }
    Ok(map)
}

/// A file holding one integer, or `max` (v2 limits: None).
pub fn parse_value(file: &Path, text: &str) -> Result<Option<u64>, CgroupError> {
    let t = text.trim();
    if t == "max" {
        return Ok(None);
    }
    t.parse::<u64>().map(Some).map_err(|_| CgroupError::Parse { file: file.to_path_buf(), line: 1, text: t.to_string(), expected: "an integer or `max`" })
}

fn read_value(file: &Path) -> Result<Option<u64>, CgroupError> {
    parse_value(file, &read(file)?)
}

/// v1 memory.stat names the driver records, and their v2 equivalents.
/// `workingset_refault_file` counts pages (both versions): file pages read
/// again after eviction, while their shadow entry still said how recently
/// they had been in memory.
const STAT_NAMES: [(&str, Option<&str>); 9] = [
    ("cache", Some("file")),
    ("rss", Some("anon")),
    ("mapped_file", Some("file_mapped")),
    ("pgpgin", None),
    ("pgpgout", None),
    ("pgmajfault", Some("pgmajfault")),
    ("inactive_file", Some("inactive_file")),
    ("active_file", Some("active_file")),
    ("workingset_refault_file", Some("workingset_refault_file")),
];

/// A run's cgroups; removed on drop.
#[derive(Debug)]
pub struct RunCgroup {
    version: Version,
    /// The run's directory: v1 in the memory hierarchy, v2 the parent of the leaves.
    dir: PathBuf,
    /// v1: the run's cpuacct directory (with one child per role).
    cpuacct: Option<PathBuf>,
    /// v2: whether memory.max was set (the memory files exist).
    memory: bool,
    hierarchy_source: &'static str,
}

/// Open `cgroup.procs` files a child writes itself into before exec.
#[derive(Debug)]
pub struct Attach {
    fds: Vec<OwnedFd>,
}

impl Attach {
    /// Moves the calling process into the cgroups. Async-signal-safe: for use in
    /// `pre_exec`.
    pub fn enter(&self) -> std::io::Result<()> {
        for fd in &self.fds {
            // Writing "0" to cgroup.procs moves the writer itself.
            let n = unsafe { libc::write(fd.as_raw_fd(), b"0".as_ptr().cast(), 1) };
            if n != 1 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

fn open_procs(dir: &Path) -> Result<OwnedFd, CgroupError> {
    let path = dir.join("cgroup.procs");
    let f = fs::OpenOptions::new().write(true).open(&path).map_err(io_err("open", &path))?;
    Ok(f.into())
}

fn mkdir(dir: &Path) -> Result<(), CgroupError> {
    fs::create_dir(dir).map_err(io_err("create the cgroup", dir))
}

impl RunCgroup {
    /// Creates `vidbench-<id>` with the memory limit in the detected hierarchy.
    pub fn create(id: &str, limit_bytes: u64) -> anyhow::Result<RunCgroup> {
        Ok(RunCgroup::create_in(&detect()?, id, Some(limit_bytes))?)
    }

    /// Creates `vidbench-<id>` under `h`, with a memory limit if given.
    pub fn create_in(h: &Hierarchy, id: &str, limit_bytes: Option<u64>) -> Result<RunCgroup, CgroupError> {
        let name = format!("{PREFIX}{id}");
        let dir = h.root.join(&name);
        if dir.exists() {
            return Err(CgroupError::Exists(dir));
        }
        if h.version == Version::V2 && limit_bytes.is_some() {
            h.enable_memory()?;
        }
        mkdir(&dir)?;
        let mut cg = RunCgroup { version: h.version, dir: dir.clone(), cpuacct: None, memory: false, hierarchy_source: h.source };
        match h.version {
            Version::V1 => {
                cg.memory = true;
                if let Some(limit) = limit_bytes {
                    let f = dir.join("memory.limit_in_bytes");
                    fs::write(&f, limit.to_string()).map_err(io_err("set the limit in", &f))?;
                }
                if let Some(root) = &h.cpuacct {
                    let cpu = root.join(&name);
                    mkdir(&cpu)?;
                    cg.cpuacct = Some(cpu.clone());
                    for role in ROLES {
                        mkdir(&cpu.join(role.dir()))?;
                    }
                }
            }
            Version::V2 => {
                if let Some(limit) = limit_bytes {
                    cg.memory = true;
                    let f = dir.join("memory.max");
                    fs::write(&f, limit.to_string()).map_err(io_err("set the limit in", &f))?;
                }
                for role in ROLES {
                    mkdir(&dir.join(role.dir()))?;
                }
            }
        }
        Ok(cg)
    }

    /// The directory holding the limit.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The directory a process of `role` is placed in.
    pub fn leaf(&self, role: Role) -> PathBuf {
        match self.version {
            Version::V1 => self.dir.clone(),
            Version::V2 => self.dir.join(role.dir()),
        }
    }

    /// The files a child of `role` must write itself into.
    pub fn attach(&self, role: Role) -> anyhow::Result<Attach> {
        let mut fds = vec![open_procs(&self.leaf(role))?];
        if let Some(cpu) = &self.cpuacct {
            fds.push(open_procs(&cpu.join(role.dir()))?);
        }
        Ok(Attach { fds })
    }

    /// CPU time used by `role` so far, in seconds (Ok(None) without
    /// accounting: v1 without cpuacct).
    pub fn cpu_usage(&self, role: Role) -> Result<Option<f64>, CgroupError> {
        match self.version {
            Version::V1 => {
                let Some(cpu) = &self.cpuacct else { return Ok(None) };
                let f = cpu.join(role.dir()).join("cpuacct.usage");
                Ok(read_value(&f)?.map(|ns| ns as f64 / 1e9))
            }
            Version::V2 => {
                let f = self.leaf(role).join("cpu.stat");
                let stat = parse_flat(&f, &read(&f)?)?;
                let usec = stat.get("usage_usec").ok_or_else(|| CgroupError::Parse {
                    file: f.clone(),
                    line: 0,
                    text: String::new(),
                    expected: "a `usage_usec` line",
                })?;
                Ok(Some(*usec as f64 / 1e6))
            }
        }
    }

    /// [`cpu_usage`](Self::cpu_usage), None (and a warning) if it cannot be read.
    pub fn cpu_seconds(&self, role: Role) -> Option<f64> {
        self.cpu_usage(role).unwrap_or_else(|e| {
            tracing::warn!("no CPU time for the {}: {e}", role.dir());
            None
        })
    }

    /// Which version, directories and files this run used, for setup.json.
    pub fn describe(&self) -> Value {
        let has = |f: &str| self.dir.join(f).exists();
        match self.version {
            Version::V1 => json!({
                "version": 1,
                "found_by": self.hierarchy_source,
                "dir": self.dir,
                "processes_in": [self.dir.join("cgroup.procs")],
                "cpuacct_dir": self.cpuacct,
                "files": {
                    "limit": "memory.limit_in_bytes",
                    "usage": "memory.usage_in_bytes",
                    "peak": "memory.max_usage_in_bytes",
                    "limit_hits": "memory.failcnt",
                    "stat": "memory.stat",
                    "oom_kill": "memory.oom_control",
                    "cpu": self.cpuacct.as_ref().map(|_| "cpuacct/vidbench-ID/ROLE/cpuacct.usage"),
                    "io": null,
                    "kill": "SIGKILL to each pid of cgroup.procs",
                },
            }),
            Version::V2 => json!({
                "version": 2,
                "found_by": self.hierarchy_source,
                "dir": self.dir,
                "processes_in": ROLES.map(|r| self.leaf(r).join("cgroup.procs")),
                "files": {
                    "limit": self.memory.then_some("memory.max"),
                    "usage": self.memory.then_some("memory.current"),
                    "peak": (self.memory && has("memory.peak")).then_some("memory.peak"),
                    "limit_hits": self.memory.then_some("memory.events max"),
                    "stat": self.memory.then_some("memory.stat"),
                    "oom_kill": self.memory.then_some("memory.events oom_kill"),
                    "cpu": "ROLE/cpu.stat usage_usec",
                    "io": has("io.stat").then_some("io.stat"),
                    "kill": if has("cgroup.kill") { "cgroup.kill" } else { "SIGKILL to each pid of ROLE/cgroup.procs" },
                },
            }),
        }
    }

    /// Bytes charged to the cgroup now (`memory.usage_in_bytes`, v2
    /// `memory.current`).
    pub fn memory_usage(&self) -> Result<Option<u64>, CgroupError> {
        read_value(&self.dir.join(match self.version {
            Version::V1 => "memory.usage_in_bytes",
            Version::V2 => "memory.current",
        }))
    }

    /// The memory controller's counters under their v1 names (bytes, counts),
    /// with what v2 alone has and the raw memory.stat.
    pub fn memory_stats(&self) -> Result<Value, CgroupError> {
        let d = &self.dir;
        let raw_stat = read(&d.join("memory.stat"))?;
        let stat = parse_flat(&d.join("memory.stat"), &raw_stat)?;
        match self.version {
            Version::V1 => {
                let picked: BTreeMap<_, _> = STAT_NAMES.iter().filter_map(|(k, _)| stat.get(*k).map(|v| (*k, *v))).collect();
                let oom_file = d.join("memory.oom_control");
                let oom = parse_flat(&oom_file, &read(&oom_file)?)?;
                // Kernel memory charged to the cgroup (slab: inodes, dentries,
                // the page cache's tree nodes and shadow entries), where the
                // kernel accounts it separately.
                let kmem = d.join("memory.kmem.usage_in_bytes");
                Ok(json!({
                    "version": 1,
                    "limit_in_bytes": read_value(&d.join("memory.limit_in_bytes"))?,
                    "usage_in_bytes": self.memory_usage()?,
                    "kernel_bytes": if kmem.exists() { read_value(&kmem)? } else { None },
                    "max_usage_in_bytes": read_value(&d.join("memory.max_usage_in_bytes"))?,
                    "failcnt": read_value(&d.join("memory.failcnt"))?,
                    "oom_kill": oom.get("oom_kill"),
                    "stat": picked,
                    "raw": {"memory.stat": raw_stat},
                }))
            }
            Version::V2 => {
                let picked: BTreeMap<_, _> = STAT_NAMES.iter().filter_map(|(k, v2)| stat.get((*v2)?).map(|v| (*k, *v))).collect();
                let events_file = d.join("memory.events");
                let raw_events = read(&events_file)?;
                let events = parse_flat(&events_file, &raw_events)?;
                let peak = d.join("memory.peak");
                let io_file = d.join("io.stat");
                let (io, raw_io) = if io_file.exists() {
                    let text = read(&io_file)?;
                    (Some(parse_io_stat(&io_file, &text)?), Some(text))
                } else {
                    (None, None)
                };
                Ok(json!({
                    "version": 2,
                    "limit_in_bytes": read_value(&d.join("memory.max"))?,
                    "usage_in_bytes": self.memory_usage()?,
                    // `kernel` since Linux 5.18; before it, the slab alone.
                    "kernel_bytes": stat.get("kernel").or_else(|| stat.get("slab")),
                    "max_usage_in_bytes": if peak.exists() { read_value(&peak)? } else { None },
                    "failcnt": events.get("max"),
                    "oom_kill": events.get("oom_kill"),
                    "stat": picked,
                    "events": events,
                    "io": io,
                    "raw": {"memory.stat": raw_stat, "memory.events": raw_events, "io.stat": raw_io},
                }))
            }
        }
    }

    /// Whether the memory files exist (v1 always; v2 once a limit was set).
    pub fn has_memory(&self) -> bool {
        self.memory
    }

    /// Whether process `pid` is in the run's memory cgroup (v1: its
    /// directory; v2: the directory or one of its leaves), so that its pages
    /// count against the limit.
    pub fn holds(&self, pid: i32) -> bool {
        let mut dirs = vec![self.dir.clone()];
        if self.version == Version::V2 {
            dirs.extend(ROLES.map(|r| self.dir.join(r.dir())));
        }
        dirs.iter().any(|d| procs(d).contains(&pid))
    }
}

fn procs(dir: &Path) -> Vec<i32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

fn kill_all_in(dir: &Path, timeout: Duration) -> bool {
    let end = Instant::now() + timeout;
    loop {
        let pids = procs(dir);
        if pids.is_empty() {
            return true;
        }
        if Instant::now() > end {
            return false;
        }
        for pid in pids {
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn remove_dir_retrying(dir: &Path) -> std::io::Result<()> {
    let mut last = Ok(());
    for _ in 0..100 {
        match fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => last = Err(e),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    last
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir).map(|es| es.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()).collect()).unwrap_or_default()
}

/// Kills every process in `dir` and below, then removes the directories,
/// children first. v2: `cgroup.kill` first when the kernel has it (5.14+).
fn remove_tree(dir: &Path) {
    let kill = dir.join("cgroup.kill");
    if kill.exists() {
        if let Err(e) = fs::write(&kill, "1") {
            tracing::warn!("cannot write {}: {e}; killing with signals", kill.display());
        }
    }
    for child in subdirs(dir) {
        remove_tree(&child);
    }
    if !kill_all_in(dir, Duration::from_secs(10)) {
        tracing::warn!("processes still in {} after SIGKILL", dir.display());
    }
    if let Err(e) = remove_dir_retrying(dir) {
        tracing::warn!("cannot remove {}: {e}", dir.display());
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        // v1: the processes are in the memory directory; empty it first so
        // that the cpuacct directories can go.
        if self.version == Version::V1 && !kill_all_in(&self.dir, Duration::from_secs(10)) {
            tracing::warn!("processes still in {} after SIGKILL", self.dir.display());
        }
        if let Some(cpu) = &self.cpuacct {
            remove_tree(cpu);
        }
        remove_tree(&self.dir);
    }
}

/// Removes `vidbench-<pid>-*` cgroups whose driver process is gone. Returns their names.
pub fn cleanup_stale() -> Vec<String> {
    match detect() {
        Ok(h) => cleanup_stale_in(&h),
        Err(_) => Vec::new(),
    }
}

/// Pids of the live drivers other than this one that have a run cgroup
/// now (drivers that predate the sharing registry show only this way).
pub fn other_driver_pids() -> Vec<u32> {
    let Ok(h) = detect() else { return Vec::new() };
    let Ok(entries) = fs::read_dir(&h.root) else { return Vec::new() };
    let me = std::process::id() as i32;
    entries.flatten().filter_map(|e| driver_pid(&e.file_name().to_string_lossy())).filter(|&pid| pid != me && alive(pid)).map(|pid| pid as u32).collect()
}

/// The driver pid a run cgroup's name (`vidbench-PID-N`) carries.
fn driver_pid(name: &str) -> Option<i32> {
    name.strip_prefix(PREFIX)?.split('-').next()?.parse().ok()
}

/// Whether process `pid` exists (it may belong to another user).
fn alive(pid: i32) -> bool {
    (unsafe { libc::kill(pid, 0) }) == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// [`cleanup_stale`] under `h`.
pub fn cleanup_stale_in(h: &Hierarchy) -> Vec<String> {
    let mut removed = Vec::new();
    let Ok(entries) = fs::read_dir(&h.root) else { return removed };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(pid) = driver_pid(&name) else { continue };
        if alive(pid) {
            continue;
        }
        if h.version == Version::V1 {
            kill_all_in(&e.path(), Duration::from_secs(10));
        }
        if let Some(cpu) = h.cpuacct.as_ref().map(|c| c.join(&name)).filter(|c| c.exists()) {
            remove_tree(&cpu);
        }
        remove_tree(&e.path());
        removed.push(name);
    }
    removed
}

#[cfg(test)]
mod tests {
    //! Over fake hierarchies (plain directories and files in a temp dir); the
    //! real ones are exercised by tests/integration/run-cgroup-v2.sh.
    use super::*;

    fn put(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    /// A mountinfo line for a cgroup (v1, with `opts`) or cgroup2 mount at `point`.
    fn line(id: u32, point: &Path, fstype: &str, opts: &str) -> String {
        format!("{id} 31 0:{id} / {} rw,relatime shared:9 - {fstype} {fstype} {opts}\n", point.display())
    }

    /// A v1 machine as this one: memory and cpuacct on v1, an empty cgroup2 beside.
    fn hybrid(t: &Path) -> String {
        put(&t.join("memory/memory.limit_in_bytes"), "9223372036854771712\n");
        put(&t.join("cpuacct/cpuacct.usage"), "0\n");
        put(&t.join("unified/cgroup.controllers"), "hugetlb\n");
        format!(
            "23 1 0:21 / /sys rw - sysfs sysfs rw\n{}{}{}{}",
            line(32, &t.join("cpu"), "cgroup", "rw,cpu"),
            line(33, &t.join("cpuacct"), "cgroup", "rw,cpuacct"),
            line(35, &t.join("memory"), "cgroup", "rw,memory"),
            line(41, &t.join("unified"), "cgroup2", "rw")
        )
    }

    /// Debian 12: only cgroup2, memory offered and enabled for the root's children.
    fn v2_only(t: &Path) -> String {
        put(&t.join("cg/cgroup.controllers"), "cpuset cpu io memory hugetlb pids rdma misc\n");
        put(&t.join("cg/cgroup.subtree_control"), "cpu io memory pids\n");
        line(30, &t.join("cg"), "cgroup2", "rw,nsdelegate,memory_recursiveprot")
    }

    #[test]
    fn v1_memory_mount_wins_on_a_hybrid_machine() {
        let t = tempfile::tempdir().unwrap();
        let h = detect_from(&hybrid(t.path()), None).unwrap();
        assert_eq!(h.version, Version::V1);
        assert_eq!(h.root, t.path().join("memory"));
        assert_eq!(h.cpuacct, Some(t.path().join("cpuacct")));
        assert_eq!(h.source, "/proc/self/mountinfo");
        h.check_memory().unwrap();
    }

    #[test]
    fn v2_only_machine_uses_the_cgroup2_mount_found_in_mountinfo() {
        let t = tempfile::tempdir().unwrap();
        let h = detect_from(&v2_only(t.path()), None).unwrap();
        assert_eq!(h.version, Version::V2);
        assert_eq!(h.root, t.path().join("cg"));
        assert!(h.controllers.contains(&"memory".to_string()));
        assert_eq!(h.cpuacct, None);
        h.check_memory().unwrap();
    }

    #[test]
    fn mount_points_with_escaped_spaces_are_decoded() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("a b");
        put(&dir.join("cgroup.controllers"), "memory\n");
        let mi = line(30, &dir, "cgroup2", "rw").replace("a b", "a\\040b");
        assert_eq!(detect_from(&mi, None).unwrap().root, dir);
    }

    #[test]
    fn the_explicit_root_is_taken_as_it_is_and_checked() {
        let t = tempfile::tempdir().unwrap();
        let mi = hybrid(t.path());
        // A v2 directory although v1 holds memory: taken, but a limit cannot be set.
        let h = detect_from(&mi, Some(&t.path().join("unified"))).unwrap();
        assert_eq!((h.version, h.source), (Version::V2, ROOT_ENV));
        let e = h.check_memory().unwrap_err().to_string();
        assert!(e.contains("memory controller is not available at") && e.contains("lists: hugetlb"), "{e}");
        assert!(e.contains(&format!("cgroup v1 hierarchy mounted at {}", t.path().join("memory").display())), "{e}");
        assert!(e.contains("cgroup_no_v1=memory"), "{e}");
        // A v1 memory directory.
        let h = detect_from(&mi, Some(&t.path().join("memory"))).unwrap();
        assert_eq!(h.version, Version::V1);
        // Neither.
        let e = detect_from(&mi, Some(t.path())).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{ROOT_ENV}={} is not a cgroup directory", t.path().display())), "{e}");
    }

    #[test]
    fn without_any_cgroup_mount_the_error_says_what_to_mount() {
        let e = detect_from("23 1 0:21 / /sys rw - sysfs sysfs rw\n", None).unwrap_err().to_string();
        assert!(e.contains("mount -t cgroup2 none /sys/fs/cgroup") && e.contains(ROOT_ENV), "{e}");
    }

    #[test]
    fn v2_without_memory_says_why_for_each_cause() {
        let t = tempfile::tempdir().unwrap();
        // The mount's root, no v1 memory anywhere: disabled in the kernel.
        put(&t.path().join("cg/cgroup.controllers"), "cpu io pids\n");
        let mi = line(30, &t.path().join("cg"), "cgroup2", "rw");
        let e = detect_from(&mi, None).unwrap().check_memory().unwrap_err().to_string();
        assert!(e.contains("lists: cpu io pids") && e.contains("cgroup_disable=memory"), "{e}");
        // A subtree whose parent does not hand memory down.
        put(&t.path().join("cg/sub/cgroup.controllers"), "");
        let e = detect_from(&mi, Some(&t.path().join("cg/sub"))).unwrap().check_memory().unwrap_err().to_string();
        assert!(e.contains("lists: (none)") && e.contains(&format!("echo +memory > {}/cgroup.subtree_control", t.path().join("cg").display())), "{e}");
    }

    #[test]
    fn v2_run_cgroup_has_the_limit_on_the_parent_and_a_leaf_per_role() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("cg");
        let mi = v2_only(t.path());
        put(&root.join("cgroup.subtree_control"), "cpu pids\n");
        let h = detect_from(&mi, None).unwrap();
        let cg = RunCgroup::create_in(&h, "7-1", Some(256 << 20)).unwrap();
        assert_eq!(fs::read_to_string(root.join("cgroup.subtree_control")).unwrap(), "+memory", "memory enabled for the children");
        let dir = root.join("vidbench-7-1");
        assert_eq!(fs::read_to_string(dir.join("memory.max")).unwrap(), (256u64 << 20).to_string());
        for role in ROLES {
            assert!(dir.join(role.dir()).is_dir());
            assert_eq!(cg.leaf(role), dir.join(role.dir()));
        }
        assert!(matches!(RunCgroup::create_in(&h, "7-1", None), Err(CgroupError::Exists(_))));

        // What the kernel would write.
        put(&dir.join("memory.current"), "1048576\n");
        put(&dir.join("memory.peak"), "2097152\n");
        put(&dir.join("memory.stat"), "anon 4096\nfile 8192\nkernel 12\nfile_mapped 512\nactive_file 100\ninactive_file 200\npgfault 5\npgmajfault 3\nworkingset_refault_file 9\n");
        put(&dir.join("memory.events"), "low 0\nhigh 0\nmax 118\noom 1\noom_kill 1\noom_group_kill 0\n");
        put(&dir.join("io.stat"), "7:0 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n");
        put(&dir.join("server/cpu.stat"), "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n");
        let m = cg.memory_stats().unwrap();
        assert_eq!(m["version"], 2);
        assert_eq!(m["limit_in_bytes"], 256u64 << 20);
        assert_eq!(m["usage_in_bytes"], 1048576);
        assert_eq!(m["max_usage_in_bytes"], 2097152);
        assert_eq!(m["failcnt"], 118, "memory.events max stands for v1's failcnt");
        assert_eq!(m["oom_kill"], 1);
        assert_eq!(m["stat"], json!({"cache": 8192, "rss": 4096, "mapped_file": 512, "pgmajfault": 3, "active_file": 100, "inactive_file": 200, "workingset_refault_file": 9}));
        assert_eq!(m["events"]["oom"], 1);
        assert_eq!(m["io"]["7:0"]["rbytes"], 4096);
        assert!(m["raw"]["memory.stat"].as_str().unwrap().contains("kernel 12"), "the raw file is kept");
        assert_eq!(m["kernel_bytes"], 12);
        assert_eq!(cg.cpu_usage(Role::Server).unwrap(), Some(2.5));
        let d = cg.describe();
        assert_eq!(d["version"], 2);
        assert_eq!(d["files"]["limit"], "memory.max");
        assert_eq!(d["files"]["io"], "io.stat");
        assert_eq!(d["files"]["peak"], "memory.peak");
        assert_eq!(d["files"]["kill"], "SIGKILL to each pid of ROLE/cgroup.procs", "no cgroup.kill in the fake");
        assert_eq!(d["processes_in"][0], json!(dir.join("server/cgroup.procs")));
        put(&dir.join("cgroup.procs"), "");
        put(&dir.join("server/cgroup.procs"), "41\n42\n");
        put(&dir.join("daemon/cgroup.procs"), "43\n");
        assert!(cg.holds(42) && cg.holds(43), "a leaf's process is in the run's memory cgroup");
        assert!(!cg.holds(4), "a process elsewhere is not");
        std::mem::forget(cg); // the fake holds regular files: rmdir would retry in vain
    }

    #[test]
    fn v2_without_a_limit_touches_no_memory_file() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("cg");
        put(&root.join("cgroup.controllers"), "");
        let h = detect_from(&line(30, &root, "cgroup2", "rw"), None).unwrap();
        let cg = RunCgroup::create_in(&h, "7-2", None).unwrap();
        assert!(!cg.has_memory() && !cg.dir().join("memory.max").exists());
        assert_eq!(cg.describe()["files"]["limit"], Value::Null);
        // A limit here fails before anything is made.
        let e = RunCgroup::create_in(&h, "7-3", Some(1 << 20)).unwrap_err();
        assert!(matches!(e, CgroupError::NoMemory { .. }), "{e}");
        assert!(!root.join("vidbench-7-3").exists());
        drop(cg); // empty directories: removed
        assert!(!root.join("vidbench-7-2").exists());
    }

    #[test]
    fn v2_enabling_memory_that_fails_names_the_file() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("cg");
        put(&root.join("cgroup.controllers"), "memory\n");
        // Readable without `memory`, and refusing writes (even from root).
        std::os::unix::fs::symlink("/proc/version", root.join("cgroup.subtree_control")).unwrap();
        let h = detect_from(&line(30, &root, "cgroup2", "rw"), None).unwrap();
        let e = RunCgroup::create_in(&h, "7-4", Some(1 << 20)).unwrap_err();
        assert!(matches!(e, CgroupError::Enable { .. }), "{e}");
        let e = e.to_string();
        assert!(e.starts_with(&format!("cannot enable the memory controller for the children of {}", root.display())), "{e}");
        assert!(e.contains("writing `+memory` to its cgroup.subtree_control failed"), "{e}");
        assert!(!root.join("vidbench-7-4").exists(), "nothing made");
    }

    #[test]
    fn v1_run_cgroup_keeps_the_v1_files_and_names() {
        let t = tempfile::tempdir().unwrap();
        let h = detect_from(&hybrid(t.path()), None).unwrap();
        let cg = RunCgroup::create_in(&h, "8-1", Some(1 << 30)).unwrap();
        let dir = t.path().join("memory/vidbench-8-1");
        assert_eq!(fs::read_to_string(dir.join("memory.limit_in_bytes")).unwrap(), (1u64 << 30).to_string());
        assert_eq!(cg.leaf(Role::Daemon), dir, "v1: every process in the memory cgroup itself");
        assert!(t.path().join("cpuacct/vidbench-8-1/daemon").is_dir());
        put(&dir.join("memory.usage_in_bytes"), "100\n");
        put(&dir.join("memory.max_usage_in_bytes"), "200\n");
        put(&dir.join("memory.failcnt"), "157000\n");
        put(&dir.join("memory.oom_control"), "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n");
        put(&dir.join("memory.stat"), "cache 10\nrss 20\nmapped_file 1\npgpgin 5\npgpgout 6\npgmajfault 7\ninactive_file 3\nactive_file 4\nworkingset_refault_file 8\ntotal_cache 10\n");
        put(&t.path().join("cpuacct/vidbench-8-1/server/cpuacct.usage"), "1500000000\n");
        let m = cg.memory_stats().unwrap();
        assert_eq!(m["kernel_bytes"], Value::Null, "no memory.kmem.usage_in_bytes: not accounted apart");
        put(&dir.join("memory.kmem.usage_in_bytes"), "130805760\n");
        let m = cg.memory_stats().unwrap();
        assert_eq!(m["kernel_bytes"], 130805760);
        assert_eq!(m["version"], 1);
        assert_eq!(m["failcnt"], 157000);
        assert_eq!(m["limit_in_bytes"], 1u64 << 30);
        assert_eq!(m["stat"], json!({"cache": 10, "rss": 20, "mapped_file": 1, "pgpgin": 5, "pgpgout": 6, "pgmajfault": 7, "inactive_file": 3, "active_file": 4, "workingset_refault_file": 8}));
        assert_eq!(cg.cpu_usage(Role::Server).unwrap(), Some(1.5));
        let d = cg.describe();
        assert_eq!((d["version"].clone(), d["files"]["limit"].clone(), d["files"]["limit_hits"].clone()), (json!(1), json!("memory.limit_in_bytes"), json!("memory.failcnt")));
        put(&dir.join("cgroup.procs"), "7\n");
        put(&t.path().join("cpuacct/vidbench-8-1/server/cgroup.procs"), "9\n");
        assert!(cg.holds(7));
        assert!(!cg.holds(9), "v1: only the memory hierarchy's directory counts for the limit");
        std::mem::forget(cg);
    }

    #[test]
    fn malformed_files_are_errors_naming_file_line_and_format() {
        let f = Path::new("/x/memory.stat");
        let e = parse_flat(f, "anon 1\nfile 12k\n").unwrap_err().to_string();
        assert_eq!(e, "cannot parse /x/memory.stat line 2 `file 12k`: expected `NAME INTEGER`; it is not what a cgroup file of this kind holds");
        assert!(parse_flat(f, "anon 1 2\n").is_err(), "three fields");
        assert!(parse_flat(f, "anon\n").is_err(), "one field");
        assert_eq!(parse_flat(f, "a 1\n\nb 2\n").unwrap().len(), 2, "blank lines are fine");
        let io = Path::new("/x/io.stat");
        assert!(parse_io_stat(io, "8:0 rbytes=1 wbytes\n").unwrap_err().to_string().contains("line 1 `8:0 rbytes=1 wbytes`"));
        assert!(parse_io_stat(io, "sda rbytes=1\n").is_err(), "device must be MAJ:MIN");
        assert!(parse_io_stat(io, "8:0 rbytes=-1\n").is_err());
        assert_eq!(parse_io_stat(io, "8:0 rbytes=1\n259:0 rios=2\n").unwrap()["259:0"]["rios"], 2);
        assert_eq!(parse_value(Path::new("/x/memory.max"), "max\n").unwrap(), None);
        assert!(parse_value(Path::new("/x/memory.max"), "12x\n").unwrap_err().to_string().contains("an integer or `max`"));
    }

    #[test]
    fn malformed_kernel_files_fail_the_readers() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("cg");
        put(&root.join("cgroup.controllers"), "memory\n");
        put(&root.join("cgroup.subtree_control"), "memory\n");
        let h = detect_from(&line(30, &root, "cgroup2", "rw"), None).unwrap();
        let cg = RunCgroup::create_in(&h, "9-1", Some(1 << 20)).unwrap();
        let dir = cg.dir().to_path_buf();
        put(&dir.join("memory.stat"), "anon 1\n");
        put(&dir.join("memory.current"), "1\n");
        put(&dir.join("memory.events"), "max lots\n");
        let e = cg.memory_stats().unwrap_err().to_string();
        assert!(e.contains("memory.events line 1 `max lots`"), "{e}");
        put(&dir.join("server/cpu.stat"), "user_usec 5\n");
        let e = cg.cpu_usage(Role::Server).unwrap_err().to_string();
        assert!(e.contains("cpu.stat") && e.contains("`usage_usec`"), "{e}");
        assert_eq!(cg.cpu_seconds(Role::Server), None, "the run records null and warns");
        std::mem::forget(cg);
    }

    #[test]
    fn stale_cgroups_of_dead_drivers_go_and_live_ones_stay() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("cg");
        put(&root.join("cgroup.controllers"), "");
        let h = detect_from(&line(30, &root, "cgroup2", "rw"), None).unwrap();
        // i32::MAX is above any pid_max: that driver is gone.
        let dead = format!("vidbench-{}-3", i32::MAX);
        let live = format!("vidbench-{}-1", std::process::id());
        for d in [&dead, &live] {
            for role in ROLES {
                fs::create_dir_all(root.join(d).join(role.dir())).unwrap();
            }
        }
        fs::create_dir_all(root.join("someone-else")).unwrap();
        assert_eq!(cleanup_stale_in(&h), vec![dead.clone()]);
        assert!(!root.join(&dead).exists());
        assert!(root.join(&live).join("server").exists() && root.join("someone-else").exists());
    }
}
