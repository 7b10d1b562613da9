//! `vidbench run --probe-cgroup`: does with the cgroups what a run does, with
//! stand-in children, and reports what happened, so a machine can be checked
//! (and the cgroup code tested on a real hierarchy) in a second rather than
//! at the first run of a long experiment.
//!
//! In order: detect the hierarchy, remove stale run cgroups (as the driver does
//! at start), create a run cgroup (with a memory limit if asked), start one
//! CPU-busy `sh` per role through [`Attach`](crate::cgroup::Attach), read each
//! role's CPU time, the memory counters (when the memory controller is in use)
//! and the children's own view of their cgroups (`/proc/PID/cgroup`), then drop
//! the cgroup and check that the teardown killed the children and removed the
//! directories.

use crate::cgroup::{self, Role, RunCgroup};
use crate::process::{Child, Spawn};
use serde_json::{json, Value};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Runs the probe; the error is the one a run would meet.
pub fn probe(limit_bytes: Option<u64>) -> anyhow::Result<Value> {
    let h = cgroup::detect()?;
    let stale = cgroup::cleanup_stale_in(&h);
    let cg = RunCgroup::create_in(&h, &format!("{}-probe", std::process::id()), limit_bytes)?;
    let mut children = Vec::new();
    for role in [Role::Server, Role::Daemon, Role::Reader] {
        let mut command = Command::new("/bin/sh");
        command.args(["-c", "while :; do :; done"]).stdin(Stdio::null()).stdout(Stdio::null());
        let child = Child::spawn(Spawn {
            name: role.dir(),
            command,
            attach: Some(cg.attach(role)?),
            stop_signal: libc::SIGTERM,
            death_signal: libc::SIGKILL,
        })?;
        children.push((role, child));
    }
    std::thread::sleep(Duration::from_millis(300));
    let mut roles = serde_json::Map::new();
    for (role, child) in &children {
        let pid = child.pid();
        let proc_cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        let placed_in = cg.leaf(*role);
        let in_procs = std::fs::read_to_string(placed_in.join("cgroup.procs"))?.lines().any(|l| l.trim() == pid.to_string());
        roles.insert(
            role.dir().into(),
            json!({
                "pid": pid,
                "placed_in": placed_in,
                "listed_in_cgroup_procs": in_procs,
                "proc_cgroup": proc_cgroup.lines().collect::<Vec<_>>(),
                "cpu_s": cg.cpu_usage(*role)?,
            }),
        );
    }
    let memory = if cg.has_memory() { Some(cg.memory_stats()?) } else { None };
    let describe = cg.describe();
    let dir = cg.dir().to_path_buf();
    drop(cg);
    let mut killed = serde_json::Map::new();
    for (role, child) in &mut children {
        let status = child.wait_timeout(Duration::from_secs(5));
        killed.insert(role.dir().into(), json!(status.and_then(|s| s.signal()) == Some(libc::SIGKILL)));
    }
    Ok(json!({
        "cgroup": describe,
        "hierarchy_root": h.root,
        "stale_removed": stale,
        "limit_bytes": limit_bytes,
        "roles": roles,
        "memory": memory,
        "teardown": {"killed_by_sigkill": killed, "removed": !dir.exists()},
    }))
}
