//! Libception's daemon for one run, as a guard.
//!
//! `libception daemon --socket RUN/daemon.sock --prefetch ...` (the command line
//! of [`daemon_args`]) runs inside the
//! run's memory cgroup (role `daemon` for CPU accounting): the pages it
//! prefetches are charged where the server's are, as on the papers' machines
//! where both shared the server's RAM. The socket is opened to every user
//! (mode 0666) because the servers' workers run as an unprivileged user; it
//! lives in the run directory and only for the run. Counters come from
//! `libception stat --json --socket P` before the daemon is stopped (SIGTERM,
//! which answers pending requests first).

use crate::cgroup::{Role, RunCgroup};
use crate::experiment::Config;
use crate::interrupt::{self, Interrupted};
use crate::process::{tail, Child, Spawn};
use anyhow::{bail, Context};
use libception::launch::{self, Readiness};
use libception_proto::Prefetch;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

pub struct Daemon {
    pub child: Child,
    pub socket: PathBuf,
    binary: PathBuf,
    log: PathBuf,
    /// What it was started with, to start it again (chaos runs).
    prefetch: Prefetch,
    server_user: String,
    options: DaemonOptions,
}

/// What a configuration sets on the daemon beside the prefetch size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DaemonOptions {
    /// One worker per drive (`--per-disk`).
    pub per_disk: bool,
    /// Read ranges again from the cache to activate them (`--promote`).
    pub promote: bool,
    /// Only once prefetched bytes are evicted before use (`--promote auto`).
    pub promote_auto: bool,
    /// Queued reads in disk order (`--queue-order position`).
    pub queue_by_position: bool,
    /// Waiters answered once their own range is read (`--reply range`).
    pub reply_by_range: bool,
    /// A fixed size's scale for slower streams (`--prefetch-scale`).
    pub prefetch_scale: Option<libception_proto::BitrateScale>,
}

impl DaemonOptions {
    pub fn of(cfg: &Config) -> DaemonOptions {
        DaemonOptions { per_disk: cfg.per_disk, promote: cfg.promote, promote_auto: cfg.promote_auto, queue_by_position: cfg.queue_by_position, reply_by_range: cfg.reply_by_range, prefetch_scale: cfg.prefetch_scale }
    }
}

/// The daemon's arguments: [`launch::daemon_args`] trusting `server_user`,
/// and the configuration's [`DaemonOptions`].
pub fn daemon_args(socket: &Path, prefetch: &Prefetch, server_user: &str, options: DaemonOptions) -> Vec<String> {
    let mut args = launch::daemon_args(socket, prefetch, &[server_user]);
    if options.per_disk {
        args.push("--per-disk".into());
    }
    if options.promote {
        args.push("--promote".into());
    } else if options.promote_auto {
        args.extend(["--promote".into(), "auto".into()]);
    }
    if options.queue_by_position {
        args.extend(["--queue-order".into(), "position".into()]);
    }
    if options.reply_by_range {
        args.extend(["--reply".into(), "range".into()]);
    }
    if let Some(scale) = options.prefetch_scale {
        args.extend(["--prefetch-scale".into(), scale.name()]);
    }
    args
}

impl Daemon {
    /// Starts the daemon in `cgroup`, trusting `server_user` (the web
    /// server's workers) to learn residency, with `options`.
    pub fn start(binary: &Path, socket: &Path, prefetch: &Prefetch, server_user: &str, options: DaemonOptions, log: &Path, cgroup: &RunCgroup) -> anyhow::Result<Daemon> {
        let args = daemon_args(socket, prefetch, server_user, options);
        // Appended to: a restarted daemon's log follows its predecessor's.
        let out = std::fs::OpenOptions::new().create(true).append(true).open(log).with_context(|| format!("cannot create {}", log.display()))?;
        let mut command = Command::new(binary);
        command.args(&args).stdin(Stdio::null()).stdout(out.try_clone()?).stderr(out);
        let child = Child::spawn(Spawn {
            name: "libception daemon",
            command,
            attach: Some(cgroup.attach(Role::Daemon)?),
            stop_signal: libc::SIGTERM,
            death_signal: libc::SIGKILL,
        })?;
        let mut d = Daemon {
            child,
            socket: socket.to_owned(),
            binary: binary.to_owned(),
            log: log.to_owned(),
            prefetch: prefetch.clone(),
            server_user: server_user.to_owned(),
            options,
        };
        let child = &mut d.child;
        // Ready when it accepts a connection: the socket file exists from
        // bind(), a moment before listen(), and a connect() in between is
        // refused.
        let readiness = launch::wait_ready(Duration::from_secs(20), Duration::from_millis(20), || child.exited(), || {
            interrupt::check()?;
            Ok::<_, Interrupted>(libception::Client::connect(socket).is_ok())
        })?;
        match readiness {
            Readiness::Ready => {
                std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o666))
                    .with_context(|| format!("cannot open the daemon's socket {} to the server's user", socket.display()))?;
                Ok(d)
            }
            Readiness::Exited(status) => {
                bail!("libception daemon exited ({status}) during start-up; its log {}:\n{}", log.display(), tail(log, 20))
            }
            Readiness::TimedOut => {
                bail!("libception daemon did not create {} within 20 s; its log {}:\n{}", socket.display(), log.display(), tail(log, 20))
            }
        }
    }

    /// SIGKILL, as a crash would end it: no reply to what is pending, its
    /// socket file left behind. Returns the pid it had.
    pub fn kill(&mut self) -> i32 {
        let pid = self.child.pid();
        // Not once reaped: the pid may belong to another process by then.
        if self.child.exited().is_none() {
            unsafe { libc::kill(pid, libc::SIGKILL) };
            self.child.wait_timeout(Duration::from_secs(10));
        }
        pid
    }

    /// Starts a new daemon in place of a dead one, with the same arguments,
    /// on the same socket path (the daemon removes the dead one's file
    /// itself, and readiness is a connect, which a stale file refuses).
    pub fn restart(&mut self, cgroup: &RunCgroup) -> anyhow::Result<()> {
        let new = Daemon::start(&self.binary, &self.socket, &self.prefetch, &self.server_user, self.options, &self.log, cgroup)?;
        *self = new;
        Ok(())
    }

    /// `libception stat --json`.
    pub fn stats(&self) -> anyhow::Result<serde_json::Value> {
        let out = Command::new(&self.binary)
            .args(["stat", "--json", "--socket"])
            .arg(&self.socket)
            .stdin(Stdio::null())
            .output()
            .context("cannot run libception stat")?;
        if !out.status.success() {
            bail!("libception stat failed: {} (daemon log {})", String::from_utf8_lossy(&out.stderr).trim(), self.log.display());
        }
        serde_json::from_slice(&out.stdout).context("libception stat --json did not print JSON")
    }
}
