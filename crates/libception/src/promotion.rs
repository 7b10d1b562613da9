//! When the disk workers promote what they read (`--promote off|on|auto`;
//! the second read that moves pages to the active LRU list is in
//! `worker.rs`, the reason in docs/daemon.md, "Promotion").
//!
//! `auto` promotes only once the daemon has seen the harm promotion undoes:
//! prefetched bytes evicted before their stream asked for them. The prefetch
//! controller's tracker counts them for every controller (paper 001 Table 1's
//! prefetch evictions) beside the bytes streams requested. A window lasts at
//! least `window` (`--promote-window`) and until streams requested
//! [`AUTO_MIN_REQUESTED`] bytes in it; when the bytes evicted before use are
//! at least [`AUTO_EVICTED_SHARE`] of the requested ones (paper 001's
//! adjust_evict, the same ratio), promotion starts and stays on, else the
//! next window begins. Requested bytes are counted when the tracker settles a
//! range (used, or found evicted) or sees a resident request outside its
//! ranges; ranges nobody came back to are left out, as they settle only
//! after the tracker's waste horizon (600 s) and would otherwise make early
//! windows look worse than they are. It stays on because turning it off
//! again would bring the evictions back: the memory per stream that caused
//! them changes with the workload, over hours, not with promotion. A machine
//! whose cache holds prefetched data until it is used never promotes, so its
//! other programs' cached files do not age faster on the daemon's account.

use crate::prefetch::{PrefetchController, UsageTally};
use crate::stats::Stats;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Prefetched bytes evicted before use, as a share of the bytes requested,
/// that turns promotion on: paper 001's adjust_evict (the same ratio), the
/// share at which its controller treats prefetch evictions as the thing to
/// act on.
pub const AUTO_EVICTED_SHARE: f64 = 0.05;

/// A window goes on until streams requested this many bytes in it (a
/// lightly loaded daemon's windows are long).
pub const AUTO_MIN_REQUESTED: u64 = 64 << 20;

/// While a window waits for enough requested bytes, it is looked at no more
/// often than this (each look sums every worker's counters).
const RECHECK: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromoteMode {
    Off,
    On,
    Auto,
}

impl PromoteMode {
    pub fn name(self) -> &'static str {
        match self {
            PromoteMode::Off => "off",
            PromoteMode::On => "on",
            PromoteMode::Auto => "auto",
        }
    }
}

/// The window `auto` is measuring: when it began, the cumulative sums then,
/// and when to look next.
struct Window {
    began: Instant,
    requested: u64,
    evicted: u64,
    next_look: Instant,
}

/// Whether the workers promote, shared by all of them.
pub struct Promotion {
    mode: PromoteMode,
    window: Duration,
    active: AtomicBool,
    measuring: Mutex<Option<Window>>,
    stats: Arc<Stats>,
}

/// Bytes requested and prefetched bytes evicted before use, cumulative,
/// summed over every worker.
fn requested_and_evicted(c: &dyn PrefetchController) -> (u64, u64) {
    c.usage().iter().fold((0, 0), |(r, e), w| {
        let u: &UsageTally = &w.usage;
        (r + u.used_bytes, e + u.evicted_bytes)
    })
}

/// Does a window in which streams requested `requested` bytes and
/// `evicted` prefetched bytes were evicted before use call for promotion?
pub fn calls_for_promotion(requested: u64, evicted: u64) -> bool {
    requested >= AUTO_MIN_REQUESTED && evicted as f64 >= AUTO_EVICTED_SHARE * requested as f64
}

impl Promotion {
    pub fn new(mode: PromoteMode, window: Duration, stats: Arc<Stats>) -> Self {
        let p = Promotion { mode, window, active: AtomicBool::new(mode == PromoteMode::On), measuring: Mutex::new(None), stats };
        p.stats.set_promotion(mode.name(), mode == PromoteMode::On);
        p
    }

    /// Whether the read a worker just made is to be promoted; with `auto`,
    /// closes the window when it is due (at most once per window, whichever
    /// worker asks first; a short lock otherwise).
    pub fn promotes(&self, controller: &dyn PrefetchController) -> bool {
        self.promotes_at(controller, Instant::now())
    }

    fn promotes_at(&self, controller: &dyn PrefetchController, now: Instant) -> bool {
        if self.mode != PromoteMode::Auto || self.active.load(Relaxed) {
            return self.active.load(Relaxed);
        }
        let mut measuring = self.measuring.lock().unwrap();
        let Some(w) = measuring.as_mut() else {
            let (requested, evicted) = requested_and_evicted(controller);
            *measuring = Some(Window { began: now, requested, evicted, next_look: now + self.window });
            return false;
        };
        if now < w.next_look {
            return false;
        }
        let (requested, evicted) = requested_and_evicted(controller);
        let (r, e) = (requested.saturating_sub(w.requested), evicted.saturating_sub(w.evicted));
        if r < AUTO_MIN_REQUESTED {
            // Too little to judge: the window goes on until it has enough.
            w.next_look = now + RECHECK;
            return false;
        }
        if !calls_for_promotion(r, e) {
            *measuring = Some(Window { began: now, requested, evicted, next_look: now + self.window });
            return false;
        }
        self.active.store(true, Relaxed);
        self.stats.set_promotion(self.mode.name(), true);
        tracing::info!(
            evicted_mib = e >> 20,
            requested_mib = r >> 20,
            share_pct = format!("{:.1}", 100.0 * e as f64 / r as f64),
            window_s = format!("{:.0}", now.saturating_duration_since(w.began).as_secs_f64()),
            "promotion on: prefetched bytes are evicted before their streams use them (--promote auto)"
        );
        *measuring = None;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prefetch::{PrefetchContext, WorkerUsage};

    const MIB: u64 = 1 << 20;

    /// A controller whose usage the test sets.
    struct Usage(Mutex<(u64, u64)>);

    impl PrefetchController for Usage {
        fn name(&self) -> &'static str {
            "test"
        }
        fn prefetch_bytes(&self, _ctx: &PrefetchContext<'_>) -> u64 {
            0
        }
        fn current_bytes(&self, _disk: &str) -> u64 {
            0
        }
        fn usage(&self) -> Vec<WorkerUsage> {
            let (requested, evicted) = *self.0.lock().unwrap();
            let half = |x: u64| UsageTally { used_bytes: x / 2, evicted_bytes: 0, ..Default::default() };
            // Two workers: the sums count.
            vec![
                WorkerUsage { worker: 0, disks: vec![], tracked_ranges: 0, usage: half(requested) },
                WorkerUsage {
                    worker: 1,
                    disks: vec![],
                    tracked_ranges: 0,
                    usage: UsageTally { used_bytes: requested - requested / 2, evicted_bytes: evicted, ..Default::default() },
                },
            ]
        }
    }

    fn set(c: &Usage, requested: u64, evicted: u64) {
        *c.0.lock().unwrap() = (requested, evicted);
    }

    fn auto() -> (Promotion, Arc<Stats>) {
        let stats = Arc::new(Stats::new());
        (Promotion::new(PromoteMode::Auto, Duration::from_secs(60), stats.clone()), stats)
    }

    #[test]
    fn the_rule() {
        assert!(!calls_for_promotion(AUTO_MIN_REQUESTED - 1, AUTO_MIN_REQUESTED), "too little requested decides nothing");
        assert!(calls_for_promotion(100 * MIB, 5 * MIB));
        assert!(!calls_for_promotion(100 * MIB, 4 * MIB));
    }

    #[test]
    fn off_and_on_never_change() {
        let c = Usage(Mutex::new((1 << 40, 1 << 39)));
        let stats = Arc::new(Stats::new());
        let off = Promotion::new(PromoteMode::Off, Duration::ZERO, stats.clone());
        let on = Promotion::new(PromoteMode::On, Duration::ZERO, stats);
        for _ in 0..3 {
            assert!(!off.promotes(&c));
            assert!(on.promotes(&c));
        }
    }

    #[test]
    fn auto_turns_on_after_a_window_with_evictions_and_stays_on() {
        let c = Usage(Mutex::new((500 * MIB, 0)));
        let (p, stats) = auto();
        let t0 = Instant::now();
        assert!(!p.promotes_at(&c, t0), "the first call opens the first window");
        // Evictions before the window closes are not looked at yet.
        set(&c, 700 * MIB, 50 * MIB);
        assert!(!p.promotes_at(&c, t0 + Duration::from_secs(59)));
        assert_eq!(stats.promotion(), ("auto".to_string(), false));
        // The window: 200 MiB requested, 50 evicted before use (25 %).
        assert!(p.promotes_at(&c, t0 + Duration::from_secs(60)));
        assert_eq!(stats.promotion(), ("auto".to_string(), true));
        // No evictions any more: it stays on.
        assert!(p.promotes(&c));
        assert!(p.promotes_at(&c, t0 + Duration::from_secs(600)));
    }

    #[test]
    fn auto_counts_only_the_window_not_the_past() {
        // Evictions before the first window (a warm-up) do not count.
        let c = Usage(Mutex::new((1000 * MIB, 500 * MIB)));
        let (p, _) = auto();
        let t0 = Instant::now();
        assert!(!p.promotes_at(&c, t0));
        // 100 MiB requested in the window, 2 evicted: 2 %.
        set(&c, 1100 * MIB, 502 * MIB);
        assert!(!p.promotes_at(&c, t0 + Duration::from_secs(61)));
        // Next window (from 61 s): 100 MiB requested, 6 evicted: 6 %.
        set(&c, 1200 * MIB, 508 * MIB);
        assert!(!p.promotes_at(&c, t0 + Duration::from_secs(100)), "window not over");
        assert!(p.promotes_at(&c, t0 + Duration::from_secs(121)));
    }

    #[test]
    fn auto_needs_enough_requested_bytes() {
        let c = Usage(Mutex::new((0, 0)));
        let (p, _) = auto();
        let t0 = Instant::now();
        assert!(!p.promotes_at(&c, t0));
        // Half as much evicted, but only 10 MiB requested: the window goes on.
        set(&c, 10 * MIB, 5 * MIB);
        assert!(!p.promotes_at(&c, t0 + Duration::from_secs(60)));
        // Looked at again only a second later; then it has enough, counted
        // from its start.
        set(&c, 70 * MIB, 7 * MIB);
        assert!(!p.promotes_at(&c, t0 + Duration::from_millis(60_500)), "looked again within RECHECK");
        assert!(p.promotes_at(&c, t0 + Duration::from_secs(61)));
    }
}
