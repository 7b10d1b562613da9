//! Paper 000's fixed-size prefetch (`--prefetch SIZE`, the default 2 MiB),
//! optionally scaled for slower streams by their estimated bitrate
//! (`--prefetch-scale`, paper 001 Fig 10: HD at 6 MB and SD at 6 MB times a
//! factor), with paper 001 Table 1's accounting of what became of its prefetched
//! bytes (requested, read, evicted before use, wasted, re-read, eviction
//! time), so that a fixed size can be compared with the adaptive controller
//! on the same counters.
//!
//! The size never changes; the accounting is the adaptive controller's
//! [`PrefetchTracker`], one per disk worker behind one mutex taken for a few
//! hundred nanoseconds per FETCH and per read. Its memory is bounded the same
//! way (at most [`MAX_TRACKED_RANGES`] ranges per worker); ranges nobody came
//! back to are retired every [`SWEEP_EVERY`] (not on every call: a sweep walks
//! all tracked ranges) and before every report.

use super::adaptive::MAX_TRACKED_RANGES;
use super::snapshot::{UsageTally, WorkerUsage};
use super::tracker::PrefetchTracker;
use super::{PrefetchContext, PrefetchController, ReadObservation, RequestObservation, PAGE};
use libception_proto::{AdaptiveParams, BitrateScale};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often the tracked ranges are swept for the ones that aged out.
pub const SWEEP_EVERY: Duration = Duration::from_secs(10);

/// One disk worker's accounting.
#[derive(Debug)]
struct Ledger {
    tracker: PrefetchTracker,
    total: UsageTally,
    disks: BTreeSet<String>,
    swept: Duration,
}

impl Ledger {
    fn sweep(&mut self, now: Duration) {
        self.tracker.sweep(now);
        self.swept = now;
        let t = self.tracker.take_tally();
        self.total.add(&t);
    }

    /// Sweeps if the last sweep is [`SWEEP_EVERY`] old; always takes the
    /// tally counted by the calls since (follow-ups and evictions).
    fn settle(&mut self, now: Duration) {
        if now.saturating_sub(self.swept) >= SWEEP_EVERY {
            self.sweep(now);
        } else {
            let t = self.tracker.take_tally();
            self.total.add(&t);
        }
    }
}

/// Paper 000's fixed-size prefetch.
pub struct FixedPrefetch {
    bytes: u64,
    /// How a slower stream's size follows its rate (`None`: one size).
    scale: BitrateScale,
    waste_after: Duration,
    epoch: Instant,
    ledgers: Mutex<BTreeMap<usize, Ledger>>,
}

impl FixedPrefetch {
    /// Prefetches `bytes` (0: exactly the request); a prefetched range
    /// nobody comes back to counts as wasted after the adaptive controller's
    /// default `waste_after`.
    pub fn new(bytes: u64) -> Self {
        Self::with_waste_after(bytes, AdaptiveParams::default().waste_after)
    }

    pub fn with_waste_after(bytes: u64, waste_after: Duration) -> Self {
        FixedPrefetch { bytes, scale: BitrateScale::None, waste_after, epoch: Instant::now(), ledgers: Mutex::new(BTreeMap::new()) }
    }

    /// Scales the size of streams slower than the fastest by `scale` (their
    /// rates are the tracker's estimates, per disk worker, as under the
    /// adaptive controller); the fastest keep `bytes`.
    pub fn with_scale(mut self, scale: BitrateScale) -> Self {
        self.scale = scale;
        self
    }

    fn with_ledger_at<T>(&self, worker: usize, disk: &str, now: Duration, f: impl FnOnce(&mut Ledger, Duration) -> T) -> T {
        let mut ledgers = self.ledgers.lock().unwrap();
        let l = ledgers.entry(worker).or_insert_with(|| Ledger {
            tracker: PrefetchTracker::new(self.waste_after, MAX_TRACKED_RANGES),
            total: UsageTally::default(),
            disks: BTreeSet::new(),
            swept: now,
        });
        if !disk.is_empty() && !l.disks.contains(disk) {
            l.disks.insert(disk.to_string());
        }
        f(l, now)
    }

    fn request_at(&self, obs: &RequestObservation<'_>, now: Duration) {
        self.with_ledger_at(obs.worker, obs.disk, now, |l, now| {
            l.tracker.record_request(obs.file, obs.offset, obs.end, obs.resident_to, now);
            if now.saturating_sub(l.swept) >= SWEEP_EVERY {
                l.sweep(now);
            }
        });
    }

    fn read_at(&self, obs: &ReadObservation<'_>, now: Duration) {
        self.with_ledger_at(obs.worker, obs.disk, now, |l, now| {
            l.tracker.record_read(obs.file, obs.plan.start, obs.plan.want_end, obs.read_start, obs.read_end(), now);
        });
    }

    fn usage_at(&self, now: Duration) -> Vec<WorkerUsage> {
        let mut ledgers = self.ledgers.lock().unwrap();
        ledgers
            .iter_mut()
            .map(|(&worker, l)| {
                l.settle(now);
                l.tracker.report(worker, &l.disks, l.total)
            })
            .collect()
    }
}

impl PrefetchController for FixedPrefetch {
    fn name(&self) -> &'static str {
        "fixed"
    }

    fn prefetch_bytes(&self, ctx: &PrefetchContext<'_>) -> u64 {
        if self.scale == BitrateScale::None || self.bytes == 0 {
            return self.bytes;
        }
        let mut ledgers = self.ledgers.lock().unwrap();
        match ledgers.get_mut(&ctx.worker) {
            Some(l) => l.tracker.scaled_size(ctx.file, self.bytes, PAGE, self.scale),
            None => self.bytes,
        }
    }

    fn observe_request(&self, obs: &RequestObservation<'_>) {
        self.request_at(obs, self.epoch.elapsed());
    }

    fn observe_read(&self, obs: &ReadObservation<'_>) {
        self.read_at(obs, self.epoch.elapsed());
    }

    fn current_bytes(&self, _disk: &str) -> u64 {
        self.bytes
    }

    fn usage(&self) -> Vec<WorkerUsage> {
        self.usage_at(self.epoch.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prefetch::{FileKey, PlannedRead};
    const M: u64 = 1 << 20;
    const F: FileKey = FileKey { dev: 1, ino: 2 };

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    fn request(c: &FixedPrefetch, offset: u64, end: u64, resident: bool, at: u64) {
        let resident_to = if resident { end } else { offset };
        c.request_at(&RequestObservation { disk: "sda", worker: 0, file: F, offset, end, resident_to }, s(at));
    }

    fn read(c: &FixedPrefetch, start: u64, want_end: u64, end: u64, at: u64) {
        let plan = PlannedRead { start, end, want_end };
        let obs = ReadObservation {
            disk: "sda",
            worker: 0,
            file: F,
            plan,
            read_start: start,
            ok: true,
            bytes_read: end - start,
            busy: Duration::from_millis(10),
        };
        c.read_at(&obs, s(at));
    }

    /// Paper 001 Table 1 for the fixed size: a stream that uses one prefetch,
    /// finds the next evicted half-way, a read nobody returns to (wasted), and
    /// a second viewer reading used data again (re-read).
    #[test]
    fn fixed_size_reports_table_1_usage() {
        let c = FixedPrefetch::with_waste_after(2 * M, s(100));
        assert_eq!(c.usage_at(s(0)), Vec::new(), "nothing seen, nothing reported");
        request(&c, 0, M / 4, false, 0);
        read(&c, 0, M / 4, 2 * M, 0);
        // Moved on: [0, 2M) used.
        request(&c, 2 * M, 2 * M + M / 4, false, 20);
        read(&c, 2 * M, 2 * M + M / 4, 4 * M, 20);
        // Evicted at 3M, 50 s after the read: [3M, 4M) evicted before use.
        request(&c, 3 * M, 3 * M + M / 4, false, 70);
        read(&c, 3 * M, 3 * M + M / 4, 5 * M, 70);
        // A second viewer from the start: [0, 2M) read again.
        read(&c, 0, M / 4, 2 * M, 80);
        let u = c.usage_at(s(80));
        assert_eq!(u.len(), 1);
        assert_eq!((u[0].worker, u[0].disks.clone(), u[0].tracked_ranges), (0, vec!["sda".to_string()], 2));
        let t = u[0].usage;
        assert_eq!((t.read_bytes, t.used_bytes, t.evicted_bytes, t.evictions), (4 * M, 3 * M, M, 1));
        assert_eq!(t.reread_bytes, 2 * M);
        assert_eq!(t.mean_eviction_time_s(), Some(50.0));
        assert_eq!(t.wasted_bytes, 0);
        // Nobody returns: both open ranges age out as wasted past the
        // requested parts, swept by the report.
        let t = c.usage_at(s(300))[0].usage;
        assert_eq!(t.wasted_bytes, (5 * M - 3 * M - M / 4) + (2 * M - M / 4));
        assert_eq!(t.read_bytes, 4 * M + 2 * M + 2 * M);
    }

    /// Paper 001 Fig 10: HD at the fixed size, SD (five times slower, as its
    /// bitrate) at the size times the factor or rule; no estimate, or one
    /// scale of `none`, gives the fixed size to all.
    #[test]
    fn a_scale_gives_slower_streams_a_smaller_fixed_size() {
        let (hd, sd, new) = (FileKey { dev: 1, ino: 1 }, FileKey { dev: 1, ino: 2 }, FileKey { dev: 1, ino: 3 });
        let ctx = |file| PrefetchContext { disk: "sda", worker: 0, file };
        for (scale, factor) in [
            (BitrateScale::Factor(450), 0.45),
            (BitrateScale::Factor(100), 0.1),
            (BitrateScale::Sqrt, (0.2f64).sqrt()),
            (BitrateScale::Proportional, 0.2),
            (BitrateScale::None, 1.0),
        ] {
            let c = FixedPrefetch::new(6 * M).with_scale(scale);
            assert_eq!(c.prefetch_bytes(&ctx(hd)), 6 * M, "{scale:?}: nothing seen yet");
            // Each stream comes back when it has used the range: the HD one
            // every 10 s, the SD one every 50 s (three ranges each, the
            // first, a session's burst, left out of the rate).
            for (file, secs) in [(hd, 10u64), (sd, 50)] {
                let mut t = 0;
                let mut pos = 0;
                for gap in [1, secs, secs] {
                    let plan = PlannedRead { start: pos, end: pos + 6 * M, want_end: pos + 1 };
                    let obs = ReadObservation { disk: "sda", worker: 0, file, plan, read_start: pos, ok: true, bytes_read: 6 * M, busy: Duration::from_millis(50) };
                    c.read_at(&obs, s(t));
                    t += gap;
                    pos += 6 * M;
                    c.request_at(&RequestObservation { disk: "sda", worker: 0, file, offset: pos, end: pos + M, resident_to: pos }, s(t));
                }
            }
            assert_eq!(c.prefetch_bytes(&ctx(hd)), 6 * M, "{scale:?}: the fastest stream gets the fixed size");
            let want = 6.0 * M as f64 * factor;
            let got = c.prefetch_bytes(&ctx(sd));
            assert!((got as f64 - want).abs() <= PAGE as f64, "{scale:?}: SD gets {got}, want {want}");
            assert_eq!(c.prefetch_bytes(&ctx(new)), 6 * M, "{scale:?}: a stream without an estimate gets the fixed size");
            assert_eq!(c.current_bytes("sda"), 6 * M);
            // The stats count the sizes handed out: two at 6 MiB (the first,
            // before the worker's first read, has no ledger yet), SD's scaled.
            let u = c.usage_at(s(200))[0].usage;
            let counted = (u.full_prefetches, u.scaled_prefetches, u.scaled_prefetch_bytes);
            if scale == BitrateScale::None {
                assert_eq!(counted, (0, 0, 0), "no scale, nothing to count");
            } else {
                assert_eq!(counted, (2, 1, got), "{scale:?}");
            }
        }
    }

    /// Aged ranges are swept by the FETCH path too, at most every SWEEP_EVERY.
    #[test]
    fn requests_sweep_aged_ranges_periodically() {
        let c = FixedPrefetch::with_waste_after(2 * M, s(30));
        read(&c, 0, M, 2 * M, 0);
        request(&c, 100 * M, 101 * M, false, 31);
        let l = c.ledgers.lock().unwrap();
        assert_eq!((l[&0].tracker.tracked(), l[&0].swept), (0, s(31)));
    }
}
