//! Ctrl-C and termination: the driver never dies in the middle of a run with a
//! mount, a cgroup or a server left behind. SIGINT, SIGTERM and SIGHUP only set
//! a flag; every wait in the driver polls it ([`sleep`], [`check`]) and returns
//! [`Interrupted`], so the run's guards unwind and clean up in order. A second
//! signal while cleaning up is ignored for a few seconds; a third exits at once.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

static FLAG: AtomicBool = AtomicBool::new(false);
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// The error a wait returns once a signal arrived.
#[derive(Debug, thiserror::Error)]
#[error("interrupted by a signal")]
pub struct Interrupted;

/// Installs the handlers (once per process).
pub fn install() -> anyhow::Result<()> {
    static INSTALLED: AtomicBool = AtomicBool::new(false);
    if INSTALLED.swap(true, Ordering::SeqCst) {
        return Ok(());
    }
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // Safety: the handler only touches atomics and calls async-signal-safe functions.
        unsafe {
            signal_hook::low_level::register(sig, || {
                FLAG.store(true, Ordering::SeqCst);
                let n = COUNT.fetch_add(1, Ordering::SeqCst) + 1;
                if n == 1 {
                    let msg = b"\nvidbench run: interrupted, cleaning up (press Ctrl-C twice more to abandon clean-up)\n";
                    libc::write(2, msg.as_ptr().cast(), msg.len());
                } else if n >= 3 {
                    libc::_exit(130);
                }
            })?;
        }
    }
    Ok(())
}

/// Whether a signal has been received.
pub fn requested() -> bool {
    FLAG.load(Ordering::SeqCst)
}

/// `Err(Interrupted)` once a signal has been received.
pub fn check() -> Result<(), Interrupted> {
    if requested() {
        Err(Interrupted)
    } else {
        Ok(())
    }
}

/// Sleeps `d`, waking early (with `Err`) on a signal.
pub fn sleep(d: Duration) -> Result<(), Interrupted> {
    let end = Instant::now() + d;
    loop {
        check()?;
        let now = Instant::now();
        if now >= end {
            return Ok(());
        }
        std::thread::sleep((end - now).min(Duration::from_millis(50)));
    }
}
