//! The emulated disk of one run, as a guard.
//!
//! The disk is `vidbench disk mount` run as a separate process, in its own
//! process group and outside every memory cgroup of the run (its memory is not
//! the server's), in the foreground so that the driver owns it. Counters are
//! read with `vidbench disk stat MOUNT --json` before and after the load; the
//! trace, when asked for, is written by the disk process itself. Unmounting asks
//! `vidbench disk unmount`, then signals the process, and as a last resort
//! detaches the mount with `fusermount3 -u -z`: a run never leaves a mount behind.

use crate::interrupt::{self, Interrupted};
use crate::process::{tail, Child, Spawn};
use anyhow::{bail, Context};
use libception::launch::{self, Readiness};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// How to mount.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DiskOptions {
    pub library: PathBuf,
    pub preset: String,
    pub read_ahead_kb: u32,
    pub max_request_kb: u32,
    pub trace: Option<PathBuf>,
    pub extra_args: Vec<String>,
}

/// A mounted emulated disk; unmounted on drop.
pub struct Disk {
    pub mount: PathBuf,
    vidbench: PathBuf,
    child: Option<Child>,
    log: PathBuf,
    /// The command line used, for setup.json.
    pub command: Vec<String>,
}

/// Whether `path` is a mount point now (from /proc/self/mounts).
pub fn is_mounted(path: &Path) -> bool {
    let want = path.to_string_lossy().replace(' ', "\\040");
    std::fs::read_to_string("/proc/self/mounts")
        .map(|t| t.lines().any(|l| l.split_whitespace().nth(1) == Some(want.as_str())))
        .unwrap_or(false)
}

/// Detaches a mount left behind (e.g. by a driver that was killed).
pub fn force_unmount(path: &Path) {
    let _ = Command::new("fusermount3").arg("-u").arg("-z").arg(path).stderr(Stdio::null()).status();
    if is_mounted(path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path without NUL");
        unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
    }
}

impl Disk {
    pub fn mount(vidbench: &Path, mount: &Path, opts: &DiskOptions, log: &Path) -> anyhow::Result<Disk> {
        std::fs::create_dir_all(mount).with_context(|| format!("cannot create mount point {}", mount.display()))?;
        if is_mounted(mount) {
            force_unmount(mount);
        }
        let mut args: Vec<String> = vec![
            "disk".into(),
            "mount".into(),
            mount.display().to_string(),
            "--library".into(),
            opts.library.display().to_string(),
            "--preset".into(),
            opts.preset.clone(),
            "--read-ahead-kb".into(),
            opts.read_ahead_kb.to_string(),
            "--max-request-kb".into(),
            opts.max_request_kb.to_string(),
        ];
        if let Some(t) = &opts.trace {
            args.push("--trace".into());
            args.push(t.display().to_string());
        }
        args.extend(opts.extra_args.iter().cloned());
        let out = std::fs::File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
        let mut command = Command::new(vidbench);
        command.args(&args).stdin(Stdio::null()).stdout(out.try_clone()?).stderr(out);
        let child = Child::spawn(Spawn {
            name: "vidbench disk mount",
            command,
            attach: None,
            stop_signal: libc::SIGTERM,
            death_signal: libc::SIGTERM,
        })?;
        let mut command_line = vec![vidbench.display().to_string()];
        command_line.extend(args);
        let mut disk = Disk { mount: mount.to_owned(), vidbench: vidbench.to_owned(), child: Some(child), log: log.to_owned(), command: command_line };
        let child = disk.child.as_mut().expect("just started");
        let readiness = launch::wait_ready(Duration::from_secs(60), Duration::from_millis(50), || child.exited(), || {
            interrupt::check()?;
            Ok::<_, Interrupted>(is_mounted(mount) && read_stats(vidbench, mount).is_ok())
        })?;
        match readiness {
            Readiness::Ready => Ok(disk),
            Readiness::Exited(status) => {
                bail!("vidbench disk mount exited ({status}) before the disk was mounted; its log {}:\n{}", log.display(), tail(log, 20))
            }
            Readiness::TimedOut => {
                bail!("the emulated disk did not appear at {} within 60 s; its log {}:\n{}", mount.display(), log.display(), tail(log, 20))
            }
        }
    }

    /// The disk's counters as JSON (`vidbench disk stat --json`).
    pub fn stats(&self) -> anyhow::Result<serde_json::Value> {
        read_stats(&self.vidbench, &self.mount)
    }

    /// Unmounts and waits for the disk process to exit.
    pub fn unmount(&mut self) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else { return Ok(()) };
        // `disk unmount` waits for the disk process to exit, which needs us to
        // reap it: run the command in the background while we wait for our child.
        let asked = Command::new(&self.vidbench)
            .args(["disk", "unmount", "--wait-s", "20"])
            .arg(&self.mount)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let exited = child.wait_timeout(Duration::from_secs(20)).is_some();
        let asked_ok = match asked {
            Ok(mut c) => c.wait().map(|s| s.success()).unwrap_or(false),
            Err(_) => false,
        };
        let clean = exited && asked_ok;
        if !clean {
            child.stop(Duration::from_secs(10));
        } else {
            child.stop(Duration::from_secs(1));
        }
        if is_mounted(&self.mount) {
            force_unmount(&self.mount);
        }
        if is_mounted(&self.mount) {
            bail!("{} is still mounted after unmounting (log {})", self.mount.display(), self.log.display());
        }
        if !clean {
            bail!("the emulated disk at {} did not unmount cleanly; it was stopped by signal (log {})", self.mount.display(), self.log.display());
        }
        Ok(())
    }
}

/// `vidbench disk stat --json MOUNT`, run with the `vidbench` binary at `vidbench`.
fn read_stats(vidbench: &Path, mount: &Path) -> anyhow::Result<serde_json::Value> {
    let out = Command::new(vidbench)
        .args(["disk", "stat", "--json"])
        .arg(mount)
        .stdin(Stdio::null())
        .output()
        .context("cannot run vidbench disk stat")?;
    if !out.status.success() {
        bail!("vidbench disk stat {} failed: {}", mount.display(), String::from_utf8_lossy(&out.stderr).trim());
    }
    serde_json::from_slice(&out.stdout).context("vidbench disk stat --json did not print JSON")
}

impl Drop for Disk {
    fn drop(&mut self) {
        if let Err(e) = self.unmount() {
            tracing::warn!("{e:#}");
        }
    }
}
