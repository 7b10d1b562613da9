//! Child processes of a run (server, daemon, disk, reader) as guards.
//!
//! Every child gets its own process group, so a Ctrl-C typed at the terminal
//! reaches only the driver, which then stops the children in order (server,
//! daemon, disk). A child may enter a run's cgroups between fork and exec. Stopping
//! sends the child's stop signal to its whole group, waits a grace period, then
//! SIGKILLs the group; dropping the guard does the same.
//! With `PR_SET_PDEATHSIG` a child also gets a signal if the driver is killed
//! outright (SIGKILL), the one case the driver cannot clean up after itself.

use crate::cgroup::Attach;
use anyhow::Context;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

/// A running child; stopped (group-wide) on drop.
#[derive(Debug)]
pub struct Child {
    pub name: String,
    child: std::process::Child,
    stop_signal: i32,
    status: Option<ExitStatus>,
    stopped: bool,
}

/// How to start a child.
pub struct Spawn<'a> {
    pub name: &'a str,
    pub command: Command,
    pub attach: Option<Attach>,
    /// Signal asking it to stop (SIGTERM for most, SIGQUIT for a graceful nginx).
    pub stop_signal: i32,
    /// Signal it gets if the driver dies.
    pub death_signal: i32,
}

impl Child {
    pub fn spawn(spec: Spawn<'_>) -> anyhow::Result<Child> {
        let Spawn { name, mut command, attach, stop_signal, death_signal } = spec;
        let program = command.get_program().to_string_lossy().to_string();
        unsafe {
            command.pre_exec(move || {
                if libc::setpgid(0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::prctl(libc::PR_SET_PDEATHSIG, death_signal as libc::c_ulong, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if let Some(a) = &attach {
                    a.enter()?;
                }
                Ok(())
            });
        }
        let child = command.spawn().with_context(|| {
            if !Path::new(&program).exists() && program.contains('/') {
                format!("cannot start {name}: {program} does not exist")
            } else {
                format!("cannot start {name} ({program})")
            }
        })?;
        Ok(Child { name: name.to_string(), child, stop_signal, status: None, stopped: false })
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The exit status if it has exited (reaps it).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    /// Sends the stop signal to the group, waits up to `grace`, then kills the group.
    pub fn stop(&mut self, grace: Duration) -> ExitStatus {
        let pgid = self.pid();
        if self.exited().is_none() {
            unsafe { libc::kill(-pgid, self.stop_signal) };
            let end = Instant::now() + grace;
            while self.exited().is_none() && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        // Whatever remains of the group (workers of a master that exited) goes too.
        if !self.stopped {
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            self.stopped = true;
        }
        match self.status {
            Some(s) => s,
            None => {
                let s = self.child.wait().expect("waiting for our own child cannot fail");
                self.status = Some(s);
                s
            }
        }
    }

    /// Waits for it to exit by itself (up to `timeout`).
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let end = Instant::now() + timeout;
        loop {
            if let Some(s) = self.exited() {
                return Some(s);
            }
            if Instant::now() >= end {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if !self.stopped {
            self.stop(Duration::from_secs(5));
        }
    }
}

/// The last `n` lines of a log file, for error messages.
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
