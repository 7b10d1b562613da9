//! `libception run`: runs a program under the Deception shim.
//!
//! Sets the LIBCEPTION_* variables the chosen mode reads and prepends the shim
//! to LD_PRELOAD (an existing value is kept after it, never replaced), both
//! through [`ShimEnv`], the one builder of the shim's environment; and
//! passes the program's exit status through (128 + signal number when it was
//! killed). With `--start-daemon` it first starts a private daemon on a
//! socket in a fresh temporary directory (or `--socket`) with the command
//! line of [`launch::daemon_args`], waits until it accepts connections, and
//! stops it with SIGTERM after the program exits.

use anyhow::{bail, Context, Result};
use libception::launch::{self, wait_ready, Readiness};
use libception_proto::{Mode, Prefetch, ShimEnv};
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Everything `libception run` can be told.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub mode: Mode,
    /// Read-ahead of prefetch mode, and the started daemon's prefetch size.
    pub prefetch: Option<u64>,
    pub socket: Option<PathBuf>,
    pub start_daemon: bool,
    pub per_disk: bool,
    pub shim: Option<PathBuf>,
    pub timeout_ms: Option<u64>,
    pub patience_ms: Option<u64>,
    pub stats_file: Option<PathBuf>,
    /// Rewrite it while running, at most this often.
    pub stats_interval_ms: Option<u64>,
    pub daemon_log_level: String,
    pub command: Vec<OsString>,
}

/// Where the shim is looked for, in order.
pub fn shim_candidates(explicit: Option<&Path>) -> Vec<PathBuf> {
    let mut c = Vec::new();
    if let Some(p) = explicit {
        c.push(p.to_path_buf());
        return c;
    }
    if let Some(p) = std::env::var_os("LIBCEPTION_SHIM").filter(|v| !v.is_empty()) {
        c.push(PathBuf::from(p));
        return c;
    }
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            c.push(dir.join("../lib/libdeception.so")); // installed: PREFIX/bin + PREFIX/lib
            c.push(dir.join("../libdeception.so")); // repository: build/bin + build/
            c.push(dir.join("../../build/libdeception.so")); // cargo: target/release
        }
    }
    c
}

pub fn find_shim(explicit: Option<&Path>) -> Result<PathBuf> {
    let candidates = shim_candidates(explicit);
    for c in &candidates {
        if c.is_file() {
            return Ok(c.canonicalize().unwrap_or_else(|_| c.clone()));
        }
    }
    let tried: Vec<String> = candidates.iter().map(|c| c.display().to_string()).collect();
    bail!("libdeception.so not found (tried: {}); build it with `make`, or pass --shim / set LIBCEPTION_SHIM", tried.join(", "))
}

struct DaemonGuard {
    child: Child,
    _dir: Option<tempfile::TempDir>,
}

impl Drop for DaemonGuard {
    fn drop(&mut self) {
        // SAFETY: signalling our own child by pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_daemon(opts: &RunOptions) -> Result<(DaemonGuard, PathBuf)> {
    let (dir, socket) = match &opts.socket {
        Some(s) => (None, s.clone()),
        None => {
            let d = tempfile::Builder::new().prefix("libception-run-").tempdir().context("creating a directory for the daemon's socket")?;
            let s = d.path().join("reception.sock");
            (Some(d), s)
        }
    };
    let exe = std::env::current_exe().context("locating the libception binary")?;
    let mut cmd = Command::new(exe);
    // The program runs as this user: it may learn what is resident.
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() }.to_string();
    cmd.arg("--log-level").arg(&opts.daemon_log_level).args(launch::daemon_args(&socket, &daemon_prefetch(opts), &[&me]));
    if opts.per_disk {
        cmd.arg("--per-disk");
    }
    let child = cmd.spawn().context("starting the libception daemon")?;
    let mut guard = DaemonGuard { child, _dir: dir };
    let child = &mut guard.child;
    let readiness = wait_ready(Duration::from_secs(10), Duration::from_millis(10), || child.try_wait().ok().flatten(), || {
        Ok::<_, anyhow::Error>(libception::Client::connect(&socket).is_ok())
    })?;
    match readiness {
        Readiness::Ready => Ok((guard, socket)),
        Readiness::Exited(status) => bail!("the libception daemon exited during start-up ({status}); see its messages above"),
        Readiness::TimedOut => bail!("the libception daemon did not start listening on {} within 10 s", socket.display()),
    }
}

/// The started daemon's prefetch: none in serialize mode, else `--prefetch`
/// or the daemon's default.
fn daemon_prefetch(opts: &RunOptions) -> Prefetch {
    match (opts.mode, opts.prefetch) {
        (Mode::Serialize, _) => Prefetch::Fixed(0),
        (_, Some(bytes)) => Prefetch::Fixed(bytes),
        (_, None) => Prefetch::DEFAULT,
    }
}

/// What the program is told: the shim and the settings its mode reads.
fn shim_env(opts: &RunOptions, shim: PathBuf, socket: Option<PathBuf>) -> ShimEnv {
    ShimEnv {
        socket,
        prefetch: opts.prefetch,
        timeout_ms: opts.timeout_ms,
        patience_ms: opts.patience_ms,
        stats: opts.stats_file.clone(),
        stats_interval_ms: opts.stats_interval_ms,
        ..ShimEnv::new(shim, opts.mode)
    }
}

/// Runs the program; returns the exit code to pass through.
pub fn run(opts: RunOptions) -> Result<i32> {
    let Some((program, args)) = opts.command.split_first() else {
        bail!("no program given: libception run [OPTIONS] -- PROGRAM [ARGS...]");
    };
    let shim = find_shim(opts.shim.as_deref())?;
    let (daemon, socket) = if opts.start_daemon {
        let (g, s) = start_daemon(&opts)?;
        (Some(g), Some(s))
    } else {
        (None, opts.socket.clone())
    };
    let mut cmd = Command::new(program);
    cmd.args(args);
    cmd.envs(shim_env(&opts, shim, socket).vars(std::env::var_os("LD_PRELOAD")));
    // The terminal's Ctrl-C reaches the program directly (same process group);
    // this wrapper ignores SIGINT/SIGQUIT while it waits. They are ignored only
    // after spawning, because ignored dispositions are inherited across exec.
    let mut child = cmd.spawn().with_context(|| format!("starting {}", program.to_string_lossy()))?;
    // SAFETY: changes this process's dispositions only.
    let (old_int, old_quit) = unsafe { (libc::signal(libc::SIGINT, libc::SIG_IGN), libc::signal(libc::SIGQUIT, libc::SIG_IGN)) };
    let status = child.wait().context("waiting for the program")?;
    // SAFETY: restoring the previous dispositions.
    unsafe {
        libc::signal(libc::SIGINT, old_int);
        libc::signal(libc::SIGQUIT, old_quit);
    }
    drop(daemon);
    Ok(match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        _ => 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(mode: Mode, prefetch: Option<u64>) -> RunOptions {
        RunOptions {
            mode,
            prefetch,
            socket: None,
            start_daemon: true,
            per_disk: false,
            shim: None,
            timeout_ms: Some(250),
            patience_ms: None,
            stats_file: None,
            stats_interval_ms: None,
            daemon_log_level: "warn".into(),
            command: vec!["true".into()],
        }
    }

    #[test]
    fn prefetch_is_the_shims_read_ahead_in_prefetch_mode_only() {
        let env = |mode| shim_env(&options(mode, Some(4096)), "/x/libdeception.so".into(), Some("/s".into())).vars(Some("/a.so".into()));
        let prefetch = env(Mode::Prefetch);
        assert_eq!(prefetch[0], ("LD_PRELOAD", OsString::from("/x/libdeception.so:/a.so")));
        assert!(prefetch.contains(&(libception_proto::shim_env::var::PREFETCH, "4096".into())));
        assert!(!prefetch.iter().any(|(k, _)| *k == libception_proto::shim_env::var::SOCKET));
        let full = env(Mode::Full);
        assert!(!full.iter().any(|(k, _)| *k == libception_proto::shim_env::var::PREFETCH));
        assert!(full.contains(&(libception_proto::shim_env::var::SOCKET, "/s".into())));
    }

    #[test]
    fn the_started_daemon_prefetches_as_asked_except_in_serialize_mode() {
        assert_eq!(daemon_prefetch(&options(Mode::Full, Some(1 << 20))), Prefetch::Fixed(1 << 20));
        assert_eq!(daemon_prefetch(&options(Mode::Full, None)), Prefetch::DEFAULT);
        assert_eq!(daemon_prefetch(&options(Mode::Serialize, Some(1 << 20))), Prefetch::Fixed(0));
    }

    #[test]
    fn explicit_shim_wins_and_missing_shim_names_the_paths() {
        let err = find_shim(Some(Path::new("/nonexistent/libdeception.so"))).unwrap_err().to_string();
        assert!(err.contains("/nonexistent/libdeception.so"), "{err}");
    }
}
