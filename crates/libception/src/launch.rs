//! Starting programs that other programs wait for: the daemon's command line
//! and one loop that waits until a started child is ready.
//!
//! `libception run --start-daemon` and vidbench's experiment driver both start
//! a Reception daemon, and the driver also starts an emulated disk and a web
//! server; each waits until its child serves, exits, or takes too long. They
//! share [`daemon_args`] and [`wait_ready`] so that the daemon is configured
//! one way and every wait ends the same three ways.

use libception_proto::Prefetch;
use std::path::Path;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

/// `daemon --socket SOCKET --allow-fs fuse`, a `--trust-uid` per user in
/// `trusted` and the flags of `prefetch`, as `libception daemon` parses them.
/// `--allow-fs fuse`: the programs that start a daemon this way (`libception
/// run --start-daemon`, vidbench's driver) serve the emulated disk, whose FUSE
/// mode is not a block device (the daemon refuses those by default).
/// `trusted`: the users the started program runs as, which may learn what is
/// resident (the shim asks the daemon for files its process does not own).
pub fn daemon_args(socket: &Path, prefetch: &Prefetch, trusted: &[&str]) -> Vec<String> {
    let mut args = vec!["daemon".to_string(), "--socket".to_string(), socket.display().to_string()];
    args.extend(["--allow-fs".to_string(), "fuse".to_string()]);
    for user in trusted {
        args.extend(["--trust-uid".to_string(), user.to_string()]);
    }
    args.extend(prefetch.daemon_args());
    args
}

/// How a wait for a started child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// `ready` said yes.
    Ready,
    /// The child exited first.
    Exited(ExitStatus),
    /// Neither within the timeout.
    TimedOut,
}

/// Polls every `poll` until `ready()` is true, `exited()` reports an exit
/// status, or `timeout` passes. An error from `ready` (an interrupt, a probe
/// that must not be retried) ends the wait at once.
pub fn wait_ready<E>(
    timeout: Duration,
    poll: Duration,
    mut exited: impl FnMut() -> Option<ExitStatus>,
    mut ready: impl FnMut() -> Result<bool, E>,
) -> Result<Readiness, E> {
    let end = Instant::now() + timeout;
    loop {
        if ready()? {
            return Ok(Readiness::Ready);
        }
        if let Some(status) = exited() {
            return Ok(Readiness::Exited(status));
        }
        if Instant::now() >= end {
            return Ok(Readiness::TimedOut);
        }
        std::thread::sleep(poll);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn each_way_a_wait_ends() {
        let mut polls = 0;
        let ready = wait_ready::<()>(Duration::from_secs(5), MS, || None, || { polls += 1; Ok(polls == 3) });
        assert_eq!(ready, Ok(Readiness::Ready));
        let died = ExitStatus::from_raw(256);
        assert_eq!(wait_ready::<()>(Duration::from_secs(5), MS, || Some(died), || Ok(false)), Ok(Readiness::Exited(died)));
        assert_eq!(wait_ready::<()>(5 * MS, MS, || None, || Ok(false)), Ok(Readiness::TimedOut));
        assert_eq!(wait_ready(Duration::from_secs(5), MS, || None, || Err("interrupted")), Err("interrupted"));
    }

    #[test]
    fn the_daemon_is_told_its_socket_and_prefetch() {
        let args = daemon_args(Path::new("/run/x.sock"), &Prefetch::Fixed(0), &["www-data"]);
        assert_eq!(args, ["daemon", "--socket", "/run/x.sock", "--allow-fs", "fuse", "--trust-uid", "www-data", "--prefetch", "0"]);
    }
}
