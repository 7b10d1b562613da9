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
    #[error("cannot enable the memory controller for the children of {dir} (writing `+memory` to its cgroup.subtree_control failed: {source}): {why}")]
    Enable { dir: PathBuf, source: io::Error, why: String },
    #[error("cannot parse {file} line {line} `{text}`: expected {expected}; it is not what a cgroup file of this kind holds")]
    Parse { file: PathBuf, line: usize, text: String, expected: &'static str },
    #[error("cannot {what} {path}: {source}")]
    Io { what: &'static str, path: PathBuf, source: io::Error },
    #[error("cgroup {0} already exists (another run is using it?): remove it (rmdir) if no run is")]
    Exists(PathBuf),
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> CgroupError + 'a {
    move |source| CgroupError::Io { what, path: path.to_path_buf(), source }
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

/// Undoes the octal escapes (`\040` for a space) of a mountinfo path.
fn unescape(s: &str) -> PathBuf {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    use std::os::unix::ffi::OsStringExt;
    PathBuf::from(std::ffi::OsString::from_vec(out))
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
        mounts.push(Mount { point: unescape(point), v2, options: superopts.split(',').map(str::to_string).collect() });
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
            CgroupError::Enable { dir: self.root.clone(), source, why }
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
const STAT_NAMES: [(&str, Option<&str>); 8] = [
    ("cache", Some("file")),
    ("rss", Some("anon")),
    ("mapped_file", Some("file_mapped")),
    ("pgpgin", None),
    ("pgpgout", None),
    ("pgmajfault", Some("pgmajfault")),
    ("inactive_file", Some("inactive_file")),
    ("active_file", Some("active_file")),
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
                Ok(json!({
                    "version": 1,
                    "limit_in_bytes": read_value(&d.join("memory.limit_in_bytes"))?,
                    "usage_in_bytes": read_value(&d.join("memory.usage_in_bytes"))?,
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
                    "usage_in_bytes": read_value(&d.join("memory.current"))?,
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

/// [`cleanup_stale`] under `h`.
pub fn cleanup_stale_in(h: &Hierarchy) -> Vec<String> {
    let mut removed = Vec::new();
    let Ok(entries) = fs::read_dir(&h.root) else { return removed };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(rest) = name.strip_prefix(PREFIX) else { continue };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<i32>().ok()) else { continue };
        let alive = unsafe { libc::kill(pid, 0) } == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if alive {
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
