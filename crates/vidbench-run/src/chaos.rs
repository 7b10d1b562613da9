//! The chaos benchmark of issue 13: while the load plays, the daemon is
//! killed with SIGKILL every `kill_every_s` seconds and a new one started
//! `restart_after_s` later on the same socket, as systemd restarts the
//! service (`Restart=always`, `RestartSec=1s` in dist/systemd). The shim must
//! fail open meanwhile, so the sessions failing under chaos are compared with
//! vanilla nginx's at the same rate.
//!
//! Stand-in for the unit, and what differs: under socket activation systemd
//! holds the listening socket, so a shim's connect() during the restart waits
//! in the backlog; here the socket file goes with the killed daemon and a
//! connect() during the gap fails at once (the shim then goes to libc and
//! retries with back-off). Every kill and start is a row of `chaos.csv` in
//! the run directory (load-clock seconds, event, pid). The real units'
//! restart and backlog behaviour is tested under systemd itself by
//! `tests/integration/service-systemd.sh`.

use crate::cgroup::RunCgroup;
use crate::daemon::Daemon;
use crate::experiment::ChaosSection;
use crate::interrupt;
use anyhow::Context;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Runs `play` while a thread kills and restarts `daemon`; returns what
/// `play` returned and the number of kills, or the first error of either.
///
/// A daemon started by the chaos thread gets its PR_SET_PDEATHSIG (SIGKILL)
/// when that thread ends, since the kernel ties it to the creating thread.
/// So once the load is over, a daemon the thread started is started again
/// from the caller's thread, which outlives the run: the end of the run
/// finds a daemon to ask for its counters (those of this last instance
/// only) and to stop. If the thread's last daemon was alive when the load
/// ended, that hand-over kills it: `chaos.csv` and the count show that kill
/// too, so kills and starts always alternate.
pub fn during<T>(
    chaos: ChaosSection,
    daemon: &Mutex<Daemon>,
    cgroup: &RunCgroup,
    log: &Path,
    play: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<(T, u32)> {
    let done = AtomicBool::new(false);
    let epoch = Instant::now();
    let mut out = std::fs::File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
    writeln!(out, "t_s,event,pid")?;
    let (played, kills) = std::thread::scope(|scope| {
        let killer = scope.spawn(|| kill_loop(chaos, daemon, cgroup, &mut out, epoch, &done));
        let played = play();
        done.store(true, Ordering::Relaxed);
        let kills = killer.join().map_err(|_| anyhow::anyhow!("the chaos thread panicked"));
        (played, kills)
    });
    let (mut kills, thread_daemon_alive) = kills??;
    if kills > 0 {
        let mut d = daemon.lock().unwrap_or_else(|e| e.into_inner());
        let pid = d.kill();
        if thread_daemon_alive {
            kills += 1;
            writeln!(out, "{:.3},kill,{pid}", epoch.elapsed().as_secs_f64())?;
        }
        d.restart(cgroup).context("starting the daemon again after the chaos")?;
        writeln!(out, "{:.3},start,{}", epoch.elapsed().as_secs_f64(), d.child.pid())?;
    }
    Ok((played?, kills))
}

/// Sleeps `d` unless `done` is set or Ctrl-C comes first; true if it slept it all.
fn pause(d: Duration, done: &AtomicBool) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if done.load(Ordering::Relaxed) || interrupt::check().is_err() {
            return false;
        }
        std::thread::sleep((end - Instant::now()).min(Duration::from_millis(50)));
    }
    true
}

/// Returns the kills and whether the last daemon this thread started was
/// still running (rather than killed, awaiting its restart) when it ended.
fn kill_loop(chaos: ChaosSection, daemon: &Mutex<Daemon>, cgroup: &RunCgroup, out: &mut std::fs::File, epoch: Instant, done: &AtomicBool) -> anyhow::Result<(u32, bool)> {
    let mut kills = 0;
    let every = Duration::from_secs_f64(chaos.kill_every_s);
    let gap = Duration::from_secs_f64(chaos.restart_after_s);
    let lock = || daemon.lock().unwrap_or_else(|e| e.into_inner());
    while pause(every - gap, done) {
        let pid = lock().kill();
        kills += 1;
        writeln!(out, "{:.3},kill,{pid}", epoch.elapsed().as_secs_f64())?;
        // When the load ends in the gap, `during` starts the next one.
        if !pause(gap, done) {
            return Ok((kills, false));
        }
        let mut d = lock();
        d.restart(cgroup).context("restarting the killed daemon")?;
        writeln!(out, "{:.3},start,{}", epoch.elapsed().as_secs_f64(), d.child.pid())?;
    }
    Ok((kills, kills > 0))
}
