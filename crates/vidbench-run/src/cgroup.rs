//! The memory cgroup a run's server and daemon share (cgroup v1), and CPU
//! accounting for each of them.
//!
//! Page cache is charged to the cgroup of the task that first reads a page, so
//! the server and Libception's daemon live together under one
//! `memory.limit_in_bytes`: the papers' memory : library ratio, scaled. The
//! emulated disk's process stays outside (it only answers FUSE requests).
//! CPU is accounted separately per role in `cpuacct/vidbench-<id>/<role>`.
//!
//! A [`RunCgroup`] is a guard: dropping it kills whatever still runs inside and
//! removes the directories. Children enter the cgroups between fork and exec
//! ([`Attach::enter`], async-signal-safe: it writes "0" to pre-opened
//! `cgroup.procs` files), so not one page is charged elsewhere.
//! [`cleanup_stale`] removes the cgroups of a driver that died without cleaning up.

use anyhow::{bail, Context};
use std::fs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const MEMORY_ROOT: &str = "/sys/fs/cgroup/memory";
pub const CPUACCT_ROOT: &str = "/sys/fs/cgroup/cpuacct";
const PREFIX: &str = "vidbench-";

/// Which processes of a run a cgroup accounts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Server,
    Daemon,
    Reader,
}

impl Role {
    fn dir(self) -> &'static str {
        match self {
            Role::Server => "server",
            Role::Daemon => "daemon",
            Role::Reader => "reader",
        }
    }
}

/// A run's cgroups; removed on drop.
#[derive(Debug)]
pub struct RunCgroup {
    memory: PathBuf,
    cpuacct: Option<PathBuf>,
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

fn open_procs(dir: &Path) -> anyhow::Result<OwnedFd> {
    let f = fs::OpenOptions::new()
        .write(true)
        .open(dir.join("cgroup.procs"))
        .with_context(|| format!("cannot open {}/cgroup.procs", dir.display()))?;
    Ok(f.into())
}

/// Whether cgroup v1 memory control is usable here (root, mounted).
pub fn available() -> Result<(), String> {
    if unsafe { libc::geteuid() } != 0 {
        return Err("vidbench run needs root (cgroups, drop_caches, mounts)".into());
    }
    if !Path::new(MEMORY_ROOT).join("memory.limit_in_bytes").exists() {
        return Err(format!("the cgroup v1 memory controller is not mounted at {MEMORY_ROOT}"));
    }
    Ok(())
}

impl RunCgroup {
    /// Creates `vidbench-<id>` with the memory limit.
    pub fn create(id: &str, limit_bytes: u64) -> anyhow::Result<RunCgroup> {
        let name = format!("{PREFIX}{id}");
        let memory = Path::new(MEMORY_ROOT).join(&name);
        if memory.exists() {
            bail!("memory cgroup {} already exists (another run is using it?)", memory.display());
        }
        fs::create_dir(&memory).with_context(|| format!("cannot create memory cgroup {}", memory.display()))?;
        let mut cg = RunCgroup { memory: memory.clone(), cpuacct: None };
        fs::write(memory.join("memory.limit_in_bytes"), limit_bytes.to_string())
            .with_context(|| format!("cannot set {}/memory.limit_in_bytes to {limit_bytes}", memory.display()))?;
        let cpu = Path::new(CPUACCT_ROOT).join(&name);
        if Path::new(CPUACCT_ROOT).join("cpuacct.usage").exists() {
            fs::create_dir(&cpu).with_context(|| format!("cannot create cpuacct cgroup {}", cpu.display()))?;
            cg.cpuacct = Some(cpu.clone());
            for role in [Role::Server, Role::Daemon, Role::Reader] {
                fs::create_dir(cpu.join(role.dir()))
                    .with_context(|| format!("cannot create cpuacct cgroup {}/{}", cpu.display(), role.dir()))?;
            }
        }
        Ok(cg)
    }

    /// The files a child of `role` must write itself into.
    pub fn attach(&self, role: Role) -> anyhow::Result<Attach> {
        let mut fds = vec![open_procs(&self.memory)?];
        if let Some(cpu) = &self.cpuacct {
            fds.push(open_procs(&cpu.join(role.dir()))?);
        }
        Ok(Attach { fds })
    }

    /// CPU time used by `role` so far, in seconds (None without cpuacct).
    pub fn cpu_seconds(&self, role: Role) -> Option<f64> {
        let cpu = self.cpuacct.as_ref()?;
        let text = fs::read_to_string(cpu.join(role.dir()).join("cpuacct.usage")).ok()?;
        text.trim().parse::<u64>().ok().map(|ns| ns as f64 / 1e9)
    }

    /// The memory controller's counters worth keeping (bytes).
    pub fn memory_stats(&self) -> serde_json::Value {
        let read = |f: &str| fs::read_to_string(self.memory.join(f)).ok().and_then(|t| t.trim().parse::<u64>().ok());
        let mut stat = serde_json::Map::new();
        if let Ok(text) = fs::read_to_string(self.memory.join("memory.stat")) {
            for line in text.lines() {
                if let Some((k, v)) = line.split_once(' ') {
                    if matches!(k, "cache" | "rss" | "mapped_file" | "pgpgin" | "pgpgout" | "pgmajfault" | "inactive_file" | "active_file") {
                        if let Ok(v) = v.parse::<u64>() {
                            stat.insert(k.to_string(), v.into());
                        }
                    }
                }
            }
        }
        serde_json::json!({
            "limit_in_bytes": read("memory.limit_in_bytes"),
            "usage_in_bytes": read("memory.usage_in_bytes"),
            "max_usage_in_bytes": read("memory.max_usage_in_bytes"),
            "failcnt": read("memory.failcnt"),
            "stat": stat,
        })
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

fn remove_tree(memory: &Path, cpuacct: Option<&Path>) {
    if !kill_all_in(memory, Duration::from_secs(10)) {
        tracing::warn!("processes still in {} after SIGKILL", memory.display());
    }
    if let Some(cpu) = cpuacct {
        for role in [Role::Server, Role::Daemon, Role::Reader] {
            let d = cpu.join(role.dir());
            kill_all_in(&d, Duration::from_secs(5));
            if let Err(e) = remove_dir_retrying(&d) {
                tracing::warn!("cannot remove {}: {e}", d.display());
            }
        }
        if let Err(e) = remove_dir_retrying(cpu) {
            tracing::warn!("cannot remove {}: {e}", cpu.display());
        }
    }
    if let Err(e) = remove_dir_retrying(memory) {
        tracing::warn!("cannot remove {}: {e}", memory.display());
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        remove_tree(&self.memory, self.cpuacct.as_deref());
    }
}

/// Removes `vidbench-<pid>-*` cgroups whose driver process is gone. Returns their names.
pub fn cleanup_stale() -> Vec<String> {
    let mut removed = Vec::new();
    let Ok(entries) = fs::read_dir(MEMORY_ROOT) else { return removed };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(rest) = name.strip_prefix(PREFIX) else { continue };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<i32>().ok()) else { continue };
        let alive = unsafe { libc::kill(pid, 0) } == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if alive {
            continue;
        }
        let cpu = Path::new(CPUACCT_ROOT).join(&name);
        remove_tree(&e.path(), cpu.exists().then_some(cpu.as_path()));
        removed.push(name);
    }
    removed
}
