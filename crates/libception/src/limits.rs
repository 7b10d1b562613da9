//! What one client, and all of them, may take from the daemon, and a log that
//! a hostile client cannot grow without bound.
//!
//! A *client* here is a uid: a hostile local user can open many processes,
//! not many uids. Limits (flags of `libception daemon`, defaults in
//! [`Limits::default`]):
//!
//! * connections: `--max-connections` in all, `--max-connections-per-uid` per
//!   uid (root and trusted peers are held to the global cap only: the web
//!   server is one uid with a connection per thread);
//! * queued reads: `--max-queued-per-uid` reads queued or in flight and
//!   `--max-queued-bytes-per-uid` planned bytes in them, and `--max-queued` /
//!   `--max-queued-bytes` over all uids (each queued read holds a descriptor
//!   of the client's file, so the global cap also bounds the daemon's
//!   descriptors); a FETCH over any is refused with EAGAIN (the shim then
//!   reads by itself);
//! * CHECK ranges longer than `--max-check` are answered "not resident"
//!   without a check.
//!
//! Budgets are counted in [`UidBudget`]s (one per uid, one for all) shared
//! with the disk workers: a queued read holds a [`Charge`] on both that gives
//! its share back when the read is done or dropped, whichever path that takes.
//!
//! [`LogLimiter`]: at most `burst` warning lines at once and `per_sec` a
//! second after that, per kind of event; what was left out is counted and
//! said in the next line that passes.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;

#[derive(Debug, Clone)]
pub struct Limits {
    pub max_connections: usize,
    pub max_connections_per_uid: usize,
    pub max_queued_per_uid: u64,
    pub max_queued_bytes_per_uid: u64,
    pub max_queued: u64,
    pub max_queued_bytes: u64,
    pub max_check: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 16384,
            max_connections_per_uid: 1024,
            max_queued_per_uid: 256,
            max_queued_bytes_per_uid: 1 << 30,
            max_queued: 4096,
            max_queued_bytes: 8 << 30,
            max_check: 1 << 30,
        }
    }
}

/// Queued reads and their bytes of one uid.
#[derive(Default)]
pub struct UidBudget {
    reads: AtomicU64,
    bytes: AtomicU64,
}

/// One queued read's share of its uid's [`UidBudget`] and of the global
/// one, given back on drop.
pub struct Charge {
    budgets: [Arc<UidBudget>; 2],
    bytes: u64,
}

impl UidBudget {
    fn fits(&self, bytes: u64, max_reads: u64, max_bytes: u64) -> bool {
        self.reads.load(Relaxed) < max_reads && self.bytes.load(Relaxed).saturating_add(bytes) <= max_bytes
    }

    fn take(&self, bytes: u64) {
        self.reads.fetch_add(1, Relaxed);
        self.bytes.fetch_add(bytes, Relaxed);
    }

    pub fn queued(&self) -> (u64, u64) {
        (self.reads.load(Relaxed), self.bytes.load(Relaxed))
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        for b in &self.budgets {
            b.reads.fetch_sub(1, Relaxed);
            b.bytes.fetch_sub(self.bytes, Relaxed);
        }
    }
}

/// Per-uid connection counts and budgets, and the global budget (the
/// receptionist's; charges are taken on its thread only, so a check and
/// its take cannot interleave with another's).
#[derive(Default)]
pub struct Clients {
    connections: HashMap<u32, usize>,
    total: usize,
    budgets: HashMap<u32, Arc<UidBudget>>,
    global: Arc<UidBudget>,
}

impl Clients {
    /// Counts a new connection of `uid` unless a cap is reached; the error
    /// says which.
    pub fn connect(&mut self, uid: u32, trusted: bool, limits: &Limits) -> Result<(), &'static str> {
        if self.total >= limits.max_connections {
            return Err("--max-connections");
        }
        let n = self.connections.entry(uid).or_default();
        if !trusted && *n >= limits.max_connections_per_uid {
            return Err("--max-connections-per-uid");
        }
        *n += 1;
        self.total += 1;
        Ok(())
    }

    pub fn disconnect(&mut self, uid: u32) {
        if let Some(n) = self.connections.get_mut(&uid) {
            *n -= 1;
            self.total -= 1;
            if *n == 0 {
                self.connections.remove(&uid);
                // A budget with nothing charged is forgotten with its uid.
                if self.budgets.get(&uid).is_some_and(|b| b.queued() == (0, 0)) {
                    self.budgets.remove(&uid);
                }
            }
        }
    }

    /// Takes one read of `bytes` for `uid` if that stays within both the
    /// uid's limits and the global ones; the error names the flag reached.
    pub fn charge(&mut self, uid: u32, bytes: u64, limits: &Limits) -> Result<Charge, &'static str> {
        let own = self.budgets.entry(uid).or_default().clone();
        if !own.fits(bytes, limits.max_queued_per_uid, limits.max_queued_bytes_per_uid) {
            return Err("--max-queued-per-uid or --max-queued-bytes-per-uid");
        }
        if !self.global.fits(bytes, limits.max_queued, limits.max_queued_bytes) {
            return Err("--max-queued or --max-queued-bytes");
        }
        own.take(bytes);
        self.global.take(bytes);
        Ok(Charge { budgets: [own, self.global.clone()], bytes })
    }

    /// Reads and bytes queued by `uid`, and by everyone.
    #[cfg(test)]
    pub fn queued(&self, uid: u32) -> ((u64, u64), (u64, u64)) {
        (self.budgets.get(&uid).map(|b| b.queued()).unwrap_or((0, 0)), self.global.queued())
    }
}

/// Rate limit for warning lines, per kind of event.
pub struct LogLimiter {
    burst: f64,
    per_sec: f64,
    state: Mutex<BTreeMap<&'static str, Bucket>>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
    suppressed: u64,
}

impl LogLimiter {
    pub const fn new(burst: f64, per_sec: f64) -> Self {
        LogLimiter { burst, per_sec, state: Mutex::new(BTreeMap::new()) }
    }

    /// `Some(lines left out since the last one)` when a line of `kind` may
    /// be written now, `None` when it must be left out.
    pub fn allow(&self, kind: &'static str) -> Option<u64> {
        self.allow_at(kind, Instant::now())
    }

    fn allow_at(&self, kind: &'static str, now: Instant) -> Option<u64> {
        let mut state = self.state.lock().unwrap();
        let b = state.entry(kind).or_insert(Bucket { tokens: self.burst, at: now, suppressed: 0 });
        b.tokens = (b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * self.per_sec).min(self.burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Some(std::mem::take(&mut b.suppressed))
        } else {
            b.suppressed += 1;
            None
        }
    }
}

/// The daemon's one limiter for lines a client can cause.
pub static CLIENT_LOG: LogLimiter = LogLimiter::new(50.0, 10.0);

/// `tracing::warn!` through [`CLIENT_LOG`] under `kind`, noting how many
/// lines of that kind were left out before it.
#[macro_export]
macro_rules! warn_limited {
    ($kind:expr, $($arg:tt)+) => {
        if let Some(suppressed) = $crate::limits::CLIENT_LOG.allow($kind) {
            tracing::warn!(suppressed, $($arg)+);
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn budgets_refuse_past_the_limits_and_come_back_on_drop() {
        let limits = Limits { max_queued_per_uid: 2, max_queued_bytes_per_uid: 100, ..Limits::default() };
        let mut clients = Clients::default();
        let a = clients.charge(7, 60, &limits).unwrap();
        assert_eq!(clients.charge(7, 50, &limits).err(), Some("--max-queued-per-uid or --max-queued-bytes-per-uid"), "bytes");
        let c = clients.charge(7, 40, &limits).unwrap();
        assert!(clients.charge(7, 0, &limits).is_err(), "reads");
        assert!(clients.charge(8, 50, &limits).is_ok(), "another uid has its own budget");
        drop(a);
        assert_eq!(clients.queued(7).0, (1, 40));
        drop(c);
        assert_eq!(clients.queued(7), ((0, 0), (0, 0)));
    }

    #[test]
    fn the_global_budget_caps_every_uid_together() {
        let limits = Limits { max_queued: 3, max_queued_bytes: 1000, ..Limits::default() };
        let mut clients = Clients::default();
        let held: Vec<Charge> = (0..3).map(|uid| clients.charge(uid, 100, &limits).unwrap()).collect();
        assert_eq!(clients.charge(99, 1, &limits).err(), Some("--max-queued or --max-queued-bytes"), "reads in all");
        assert_eq!(clients.queued(99).1, (3, 300));
        drop(held);
        let big = clients.charge(1, 900, &limits).unwrap();
        assert_eq!(clients.charge(2, 101, &limits).err(), Some("--max-queued or --max-queued-bytes"), "bytes in all");
        // A refused charge takes nothing from the uid's own budget.
        assert_eq!(clients.queued(2).0, (0, 0));
        drop(big);
        assert_eq!(clients.queued(1), ((0, 0), (0, 0)));
    }

    #[test]
    fn connection_caps_per_uid_and_in_all() {
        let limits = Limits { max_connections: 3, max_connections_per_uid: 2, ..Limits::default() };
        let mut c = Clients::default();
        assert!(c.connect(1000, false, &limits).is_ok());
        assert!(c.connect(1000, false, &limits).is_ok());
        assert_eq!(c.connect(1000, false, &limits), Err("--max-connections-per-uid"));
        assert!(c.connect(33, true, &limits).is_ok());
        assert_eq!(c.connect(33, true, &limits), Err("--max-connections"));
        c.disconnect(1000);
        assert!(c.connect(1000, false, &limits).is_ok());
    }

    #[test]
    fn log_limiter_lets_a_burst_through_then_a_rate_and_counts_the_rest() {
        let l = LogLimiter::new(3.0, 1.0);
        let t0 = Instant::now();
        assert_eq!((0..5).filter_map(|_| l.allow_at("x", t0)).count(), 3);
        assert_eq!(l.allow_at("y", t0), Some(0), "kinds are separate");
        assert_eq!(l.allow_at("x", t0 + Duration::from_millis(1100)), Some(2));
        assert_eq!(l.allow_at("x", t0 + Duration::from_millis(1200)), None);
    }
}
