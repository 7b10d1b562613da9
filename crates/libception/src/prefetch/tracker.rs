//! What became of prefetched bytes, as far as the daemon can tell.
//!
//! Paper 001 measures prefetch evictions (prefetched data evicted before it
//! was used), their eviction time, wasted prefetch (prefetched, never
//! requested) and the cache-miss ratio (bytes read from disk / bytes
//! requested). Its server saw every request; Reception sees only the FETCHes
//! the shim sends (misses, plus every read when the shim cannot check
//! residency itself) and the reads it does. So each read is remembered as a
//! tracked range `[start, end)` of its file, with a `confirmed` mark: the end
//! of the part known to have been requested. Later FETCHes on the file decide
//! what happened to it:
//!
//! * a FETCH inside the range that the daemon finds resident moves the mark
//!   (a client is reading the range; seen when the shim forwards hits);
//! * a FETCH inside the range that is NOT resident is a prefetch eviction: the
//!   bytes from the first page found missing (or the mark, if further) to the
//!   range's end were read and evicted before anybody asked for them; unless
//!   the request only runs past the range's end with its part of the range
//!   cached: then the stream has reached the end of the range (consumed). The eviction happened
//!   between the last time the range was seen resident (a resident FETCH
//!   inside it; else the read itself) and this FETCH: both ends of the
//!   bracket are kept. The estimate is its middle (off by at most half its
//!   width) when a resident FETCH narrowed it, else the discovery time (the
//!   upper bound, all that paper 001's server observed too). Assumption: the pages of one read age together (they entered
//!   the page cache at once), so a resident page of the range stands for the
//!   range;
//! * a FETCH that starts at or just after the range's end (within one range
//!   length) means the stream consumed the whole range and moved on;
//! * a range nobody comes back to within `waste_after` is retired as
//!   unconfirmed: the bytes after its mark count as wasted. This is an upper
//!   bound: a stream that continued into data already cached for another
//!   viewer never comes back to the daemon.
//!
//! Every retired range adds its disk bytes and its confirmed bytes to the
//! tally, so the miss ratio `read / used` of an interval compares the same
//! ranges' reads and uses (no bias from the time between a read and its use;
//! the ranges retiring just after a size change can still be read at the
//! earlier size, and the streams move to the new one together: docs/daemon.md,
//! "Settling"). A
//! resident FETCH outside every tracked range (a cache hit on data the daemon
//! did not just prefetch) adds to `used` only.
//!
//! Each follow-up gives a stream-rate sample: the distance from the range's
//! start to the offset the stream asks for now, divided by the time since
//! the read. They give the eviction-time jump its
//! rate and a per-file rate for bitrate scaling. A file's first sample is
//! left out of its rate: a session's first requests come back to back (the
//! play-out buffer), which makes the first range look consumed far faster
//! than the bitrate.
//!
//! Re-reads (paper 001's cache evictions): the requested parts of retired
//! ranges are remembered per file (a few extents per file, a bounded number
//! of files); a later read over them counts those bytes in `reread_bytes`.
//!
//! Memory is bounded: at most [`MAX_RANGES_PER_FILE`] ranges per file (the
//! oldest is retired as unconfirmed) and `max_ranges` in all (further reads
//! are counted in `untracked_reads` and not tracked).

use super::snapshot::{UsageTally, WorkerUsage};
use super::{page_round, FileKey, PAGE};
use libception_proto::BitrateScale;
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

/// The reference rate of bitrate scaling: this quantile of the files' rates
/// (the highest class, robust to a few overestimates).
pub const REFERENCE_QUANTILE: f64 = 0.9;
/// A rate at least this fraction of the reference is the reference's class.
pub const SAME_CLASS: f64 = 0.5;

/// Ranges kept per file (concurrent viewers of one file each have one).
pub const MAX_RANGES_PER_FILE: usize = 8;
/// A follow-up at least this far past a range's end still counts as "moved on"
/// for short ranges.
const MIN_FOLLOW_SLACK: u64 = 1 << 20;
/// Weight of a new sample in a file's stream-rate estimate.
const RATE_EWMA_WEIGHT: f64 = 0.5;
/// Used extents remembered per file, and files remembered, for re-reads.
const USED_EXTENTS_PER_FILE: usize = 16;
const MAX_USED_FILES: usize = 1 << 16;

#[derive(Debug, Clone, Copy)]
struct TrackedRange {
    start: u64,
    end: u64,
    confirmed: u64,
    read_bytes: u64,
    read_at: Duration,
    /// Last time the range was seen resident (the read, or a resident FETCH).
    seen_resident: Duration,
}

#[derive(Debug, Clone, Copy)]
struct FileRate {
    /// The estimate; `None` until the second sample (the first is the burst).
    bps: Option<f64>,
    seen: Duration,
}

/// Requested extents of a file, for re-read detection.
#[derive(Debug, Default)]
struct UsedExtents {
    extents: Vec<(u64, u64)>,
    seen: Duration,
}

impl UsedExtents {
    fn overlap(&self, start: u64, end: u64) -> u64 {
        self.extents.iter().map(|&(s, e)| end.min(e).saturating_sub(start.max(s))).sum()
    }

    fn add(&mut self, start: u64, end: u64, now: Duration) {
        self.seen = now;
        let (mut s, mut e) = (start, end);
        self.extents.retain(|&(a, b)| {
            let touches = a <= e && s <= b;
            if touches {
                s = s.min(a);
                e = e.max(b);
            }
            !touches
        });
        if self.extents.len() >= USED_EXTENTS_PER_FILE {
            self.extents.remove(0);
        }
        self.extents.push((s, e));
    }
}

/// The tracked ranges of one disk queue. Times are durations since a fixed
/// epoch chosen by the caller, so tests can drive it without a clock.
#[derive(Debug)]
pub struct PrefetchTracker {
    waste_after: Duration,
    max_ranges: usize,
    files: HashMap<FileKey, Vec<TrackedRange>>,
    ranges: usize,
    rates: HashMap<FileKey, FileRate>,
    used: HashMap<FileKey, UsedExtents>,
    tally: UsageTally,
}

impl PrefetchTracker {
    pub fn new(waste_after: Duration, max_ranges: usize) -> Self {
        PrefetchTracker {
            waste_after,
            max_ranges,
            files: HashMap::new(),
            ranges: 0,
            rates: HashMap::new(),
            used: HashMap::new(),
            tally: UsageTally::default(),
        }
    }

    /// Ranges tracked now.
    pub fn tracked(&self) -> usize {
        self.ranges
    }

    /// A read of `[read_start, end)` finished for a planned range starting at
    /// `start`, of which `[start, want_end)` was requested.
    pub fn record_read(&mut self, file: FileKey, start: u64, want_end: u64, read_start: u64, end: u64, now: Duration) {
        if end <= start || end <= read_start {
            // Nothing read (all cached by then, or the read failed): no
            // range, but the request was made, and a range it ran out of
            // left its bytes to this one.
            let want_end = want_end.min(end.max(start)).max(start);
            self.tally.used_bytes += want_end - start;
            self.remember_used(file, start, want_end, now);
            return;
        }
        let read_bytes = end.saturating_sub(read_start);
        if let Some(u) = self.used.get(&file) {
            self.tally.reread_bytes += u.overlap(read_start, end);
        }
        let list = self.files.entry(file).or_default();
        // A new read over a tracked range supersedes it: the old range's
        // confirmed part was used, the rest is being read again.
        let mut retired = Vec::new();
        list.retain(|r| {
            let overlaps = r.start < end && start < r.end;
            if overlaps {
                retired.push(*r);
            }
            !overlaps
        });
        if list.len() >= MAX_RANGES_PER_FILE {
            let oldest = (0..list.len()).min_by_key(|&i| list[i].read_at).expect("non-empty");
            let r = list.remove(oldest);
            retired.push(r);
            self.tally.wasted_ranges += 1;
            self.tally.wasted_bytes += r.end - r.confirmed;
        }
        let removed = retired.len();
        let tracked_now = self.ranges - removed;
        let range = TrackedRange { start, end, confirmed: want_end.clamp(start, end), read_bytes, read_at: now, seen_resident: now };
        let keep = tracked_now < self.max_ranges;
        if keep {
            list.push(range);
        } else {
            self.tally.untracked_reads += 1;
        }
        if list.is_empty() {
            self.files.remove(&file);
        }
        self.ranges = tracked_now + usize::from(keep);
        for r in retired {
            self.retire(file, &r, r.confirmed, now);
        }
        if !keep {
            // Untracked: its bytes still count as read and its request as used.
            self.retire(file, &range, range.confirmed, now);
        }
    }

    /// A FETCH of `[offset, end)` was seen; the daemon's check found it
    /// cached from `offset` up to `resident_to` (`end`: all of it).
    pub fn record_request(&mut self, file: FileKey, offset: u64, end: u64, resident_to: u64, now: Duration) {
        if end <= offset {
            return;
        }
        let resident = resident_to >= end;
        let Some(list) = self.files.get_mut(&file) else {
            self.untracked_request(file, offset, end, resident, now);
            return;
        };
        if let Some(i) = list.iter().position(|r| r.start <= offset && offset < r.end) {
            let r = &mut list[i];
            if !resident && resident_to >= r.end {
                // The request runs past the range's end, and the range's part
                // of it is cached: the stream reached the end of what was
                // prefetched; nothing was evicted. (A video chunk rarely ends
                // where a prefetch does: counted as an eviction, this made
                // every range look a chunk's share evicted.) The request's
                // own bytes from `offset` are the read it causes: that range
                // (planned from the offset's page) counts them, so this one
                // is used up to that page (counted here too, they were
                // counted twice: up to a chunk a range).
                let used_to = r.confirmed.max(page_floor(offset));
                self.consume(file, i, offset, used_to, now);
                return;
            }
            if resident {
                r.confirmed = r.confirmed.max(end.min(r.end));
                r.seen_resident = now;
                if r.confirmed < r.end {
                    return;
                }
                // A hit causes no read: the whole range was used, and what
                // the request asked beyond it was cached too: a request of
                // its own (inside another tracked range it moves that
                // range's mark; elsewhere it is a hit outside the ranges).
                let range_end = r.end;
                self.consume(file, i, offset, range_end, now);
                if end > range_end {
                    self.record_request(file, range_end, end, end, now);
                }
                return;
            }
            let r = self.remove(file, i);
            // Cached up to `resident_to`: the eviction begins there. The
            // request's own bytes from `offset` are counted by the range its
            // miss reads (planned from the offset's page), not here.
            let evicted_from = r.confirmed.max(resident_to.max(offset));
            let used_to = r.confirmed.max(page_floor(offset));
            let age = now.saturating_sub(r.read_at);
            self.rate_sample(file, offset - r.start, age, now);
            if evicted_from < r.end {
                self.tally.evictions += 1;
                self.tally.evicted_bytes += r.end - evicted_from;
                self.tally.eviction_time_sum_s += age.as_secs_f64();
                let lower = r.seen_resident.saturating_sub(r.read_at).as_secs_f64();
                self.tally.eviction_time_lower_sum_s += lower;
                self.tally.eviction_time_estimate_sum_s += if lower > 0.0 { (lower + age.as_secs_f64()) / 2.0 } else { age.as_secs_f64() };
            }
            self.retire(file, &r, used_to, now);
            return;
        }
        // The nearest range ending at or before the offset, within one range length.
        let follow = list
            .iter()
            .enumerate()
            .filter(|(_, r)| r.end <= offset && offset - r.end <= (r.end - r.start).max(MIN_FOLLOW_SLACK))
            .max_by_key(|(_, r)| r.end)
            .map(|(i, r)| (i, r.end));
        if let Some((i, range_end)) = follow {
            self.consume(file, i, offset, range_end, now);
        }
        self.untracked_request(file, offset, end, resident, now);
    }

    /// Retires every range read more than `waste_after` ago as unconfirmed
    /// and forgets stale stream rates.
    pub fn sweep(&mut self, now: Duration) {
        let waste_after = self.waste_after;
        let mut aged = Vec::new();
        self.files.retain(|&file, list| {
            list.retain(|r| {
                let old = now.saturating_sub(r.read_at) > waste_after;
                if old {
                    aged.push((file, *r));
                }
                !old
            });
            !list.is_empty()
        });
        self.ranges -= aged.len();
        for (file, r) in aged {
            self.tally.wasted_ranges += 1;
            self.tally.wasted_bytes += r.end - r.confirmed;
            self.retire(file, &r, r.confirmed, now);
        }
        self.rates.retain(|_, rate| now.saturating_sub(rate.seen) <= waste_after);
    }

    /// The stats' usage entry of `worker` (serving `disks`) whose cumulative
    /// tally is `total`, with the ranges tracked now.
    pub fn report(&self, worker: usize, disks: &BTreeSet<String>, total: UsageTally) -> WorkerUsage {
        WorkerUsage { worker, disks: disks.iter().cloned().collect(), tracked_ranges: self.tracked() as u64, usage: total }
    }

    /// The tally since the last [`Self::take_tally`], left in place.
    pub fn pending(&self) -> UsageTally {
        self.tally
    }

    /// The tally since the last call, and a fresh one.
    pub fn take_tally(&mut self) -> UsageTally {
        std::mem::take(&mut self.tally)
    }

    /// The file's estimated stream rate, bytes per second.
    pub fn file_rate(&self, file: FileKey) -> Option<f64> {
        self.rates.get(&file).and_then(|r| r.bps)
    }

    /// The prefetch size for `file` when the fastest streams get `size`
    /// (paper 001 section 5: the size is given for the highest bitrate): a
    /// file whose estimated rate is below [`SAME_CLASS`] of the reference
    /// rate (the [`REFERENCE_QUANTILE`] of the files' rates) gets `size x
    /// scale.factor(rate / reference)`, whole pages, never below `floor` nor
    /// above `size`. Rates within that factor count as the reference's
    /// class, so a single-rate workload never shrinks on estimation noise.
    ///
    /// Each size handed out under a scale is counted in the tally (full or
    /// scaled, and the scaled bytes), so the stats show the sizes each class
    /// actually got.
    pub fn scaled_size(&mut self, file: FileKey, size: u64, floor: u64, scale: BitrateScale) -> u64 {
        if scale == BitrateScale::None {
            return size;
        }
        let factor = self.file_factor(file, scale);
        let scaled = if factor < 1.0 { page_round(size as f64 * factor).clamp(floor.min(size), size) } else { size };
        if scaled < size {
            self.tally.scaled_prefetches += 1;
            self.tally.scaled_prefetch_bytes += scaled;
        } else {
            self.tally.full_prefetches += 1;
        }
        scaled
    }

    /// The factor `file`'s prefetch gets under `scale` (see
    /// [`Self::scaled_size`]): 1 for the reference's class, for a file whose
    /// rate is not known yet, and without a scale.
    fn file_factor(&self, file: FileKey, scale: BitrateScale) -> f64 {
        if scale == BitrateScale::None {
            return 1.0;
        }
        let Some(rate) = self.file_rate(file) else { return 1.0 };
        self.rate_quantile(REFERENCE_QUANTILE).map_or(1.0, |reference| class_factor(rate, reference, scale))
    }

    /// Whether `file` gets the size in force itself under `scale`.
    pub fn in_reference_class(&self, file: FileKey, scale: BitrateScale) -> bool {
        self.file_factor(file, scale) >= 1.0
    }

    /// The stream rate that sizes the eviction-time jump: the median over
    /// the files of `rate / factor`, the rate at which a stream goes through
    /// the size in force when its own prefetch is `size x factor`
    /// ([`Self::scaled_size`]). A prefetch of `size x factor` lives `size x
    /// factor / rate` before the stream reaches its end, so sizes up to
    /// `eviction time x rate / factor` are used before they are evicted.
    /// With one class (or `scale` none) it is the median rate; with SD
    /// streams at a fifth of the HD rate under the square-root rule, it is
    /// `sqrt(SD x HD)`, not the SD rate, which would shrink the HD size by
    /// another factor `sqrt(5)`. The size floor is left out (a floored
    /// prefetch is smaller, so it lives shorter still).
    pub fn jump_rate(&self, scale: BitrateScale) -> Option<f64> {
        let reference = self.rate_quantile(REFERENCE_QUANTILE)?;
        let mut rates: Vec<f64> = self
            .rates
            .values()
            .filter_map(|r| r.bps)
            .filter(|r| r.is_finite())
            .map(|r| r / class_factor(r, reference, scale).max(1e-9))
            .collect();
        if rates.is_empty() {
            return None;
        }
        // The median as `rate_quantile(0.5)` takes it (the upper of two).
        let mid = ((rates.len() - 1) as f64 * 0.5).round() as usize;
        Some(*rates.select_nth_unstable_by(mid, f64::total_cmp).1)
    }

    /// The `q` quantile (0..=1) of the files' estimated rates.
    pub fn rate_quantile(&self, q: f64) -> Option<f64> {
        let mut rates: Vec<f64> = self.rates.values().filter_map(|r| r.bps).filter(|r| r.is_finite()).collect();
        if rates.is_empty() {
            return None;
        }
        // Asked on every FETCH when sizes follow bitrates: a selection, not a sort.
        let i = ((rates.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize;
        Some(*rates.select_nth_unstable_by(i, f64::total_cmp).1)
    }

    fn untracked_request(&mut self, file: FileKey, offset: u64, end: u64, resident: bool, now: Duration) {
        if resident {
            self.tally.used_bytes += end - offset;
            self.tally.untracked_hit_bytes += end - offset;
            self.remember_used(file, offset, end, now);
        }
    }

    fn remember_used(&mut self, file: FileKey, start: u64, end: u64, now: Duration) {
        if start >= end {
            return;
        }
        if self.used.len() >= MAX_USED_FILES && !self.used.contains_key(&file) {
            // Forget the older half of the files.
            let mut seen: Vec<Duration> = self.used.values().map(|u| u.seen).collect();
            seen.sort();
            let cut = seen[seen.len() / 2];
            self.used.retain(|_, u| u.seen > cut);
        }
        self.used.entry(file).or_default().add(start, end, now);
    }

    /// The stream went through the whole of range `i` and now asks for
    /// `reached`: a rate sample, and the range retires used up to `used_to`
    /// (its end, or where the read the request causes takes over).
    ///
    /// The sample is the distance from the range's start (where the stream
    /// was when its miss caused the read) to `reached` (where it is now),
    /// not the range's length: a request that runs past the range's end
    /// starts inside it, up to a chunk before its end, and crediting the
    /// whole range overstated the rate by up to `len / (len - chunk)`
    /// (1.6x for 2.6 MB HD chunks and 4 MiB ranges).
    fn consume(&mut self, file: FileKey, i: usize, reached: u64, used_to: u64, now: Duration) {
        let r = self.remove(file, i);
        self.rate_sample(file, reached.saturating_sub(r.start), now.saturating_sub(r.read_at), now);
        self.tally.consumed_ranges += 1;
        self.retire(file, &r, used_to, now);
    }

    fn remove(&mut self, file: FileKey, i: usize) -> TrackedRange {
        let list = self.files.get_mut(&file).expect("file tracked");
        let r = list.swap_remove(i);
        if list.is_empty() {
            self.files.remove(&file);
        }
        self.ranges -= 1;
        r
    }

    fn retire(&mut self, file: FileKey, r: &TrackedRange, used_to: u64, now: Duration) {
        let used_to = used_to.clamp(r.start, r.end);
        self.tally.read_bytes += r.read_bytes;
        self.tally.used_bytes += used_to - r.start;
        self.remember_used(file, r.start, used_to, now);
    }

    fn rate_sample(&mut self, file: FileKey, bytes: u64, over: Duration, now: Duration) {
        if bytes == 0 || over.is_zero() {
            return;
        }
        let bps = bytes as f64 / over.as_secs_f64();
        self.tally.rate_samples += 1;
        self.tally.rate_sum_bps += bps;
        match self.rates.get_mut(&file) {
            None => {
                self.rates.insert(file, FileRate { bps: None, seen: now });
            }
            Some(rate) => {
                rate.bps = Some(match rate.bps {
                    None => bps,
                    Some(old) => old + RATE_EWMA_WEIGHT * (bps - old),
                });
                rate.seen = now;
            }
        }
    }
}

/// The start of the page holding `offset`: where the daemon plans a read
/// for a request at `offset` (`plan_read`).
fn page_floor(offset: u64) -> u64 {
    offset - offset % PAGE
}

/// The fraction of the size in force a stream of `rate` gets when the
/// reference rate is `reference`: 1 within [`SAME_CLASS`] of it, else
/// `scale.factor(rate / reference)`.
fn class_factor(rate: f64, reference: f64, scale: BitrateScale) -> f64 {
    if reference > 0.0 && rate < reference * SAME_CLASS {
        scale.factor(rate / reference)
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const M: u64 = 1 << 20;
    const F: FileKey = FileKey { dev: 1, ino: 2 };
    const G: FileKey = FileKey { dev: 1, ino: 3 };

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    fn tracker() -> PrefetchTracker {
        PrefetchTracker::new(s(600), 1000)
    }

    #[test]
    fn stream_that_moves_on_used_the_whole_range() {
        let mut t = tracker();
        t.record_request(F, 0, 64 << 10, 0, s(0));
        t.record_read(F, 0, 64 << 10, 0, 4 * M, s(0));
        assert_eq!(t.tracked(), 1);
        // The shim served [64K, 4M) itself; the next miss is at 4M, 40 s later.
        t.record_request(F, 4 * M, 4 * M + (64 << 10), 4 * M, s(40));
        let tally = t.take_tally();
        assert_eq!(t.tracked(), 0);
        assert_eq!((tally.read_bytes, tally.used_bytes, tally.evicted_bytes, tally.wasted_bytes), (4 * M, 4 * M, 0, 0));
        assert_eq!(tally.consumed_ranges, 1);
        assert_eq!(tally.miss_ratio(), Some(1.0));
        assert_eq!(tally.mean_rate_bps(), Some((4 * M) as f64 / 40.0));
        assert_eq!(t.file_rate(F), None, "a file's first sample may be its start-up burst");
        t.record_read(F, 4 * M, 4 * M + 1, 4 * M, 8 * M, s(40));
        t.record_request(F, 8 * M, 8 * M + 1, 8 * M, s(80));
        assert_eq!(t.file_rate(F), Some((4 * M) as f64 / 40.0));
    }

    #[test]
    fn miss_inside_a_range_is_a_prefetch_eviction() {
        let mut t = tracker();
        t.record_read(F, 0, 64 << 10, 0, 8 * M, s(0));
        // The stream got to 3M, found it gone 60 s after the read.
        t.record_request(F, 3 * M, 3 * M + (64 << 10), 3 * M, s(60));
        let tally = t.take_tally();
        assert_eq!(tally.evictions, 1);
        assert_eq!(tally.evicted_bytes, 5 * M);
        assert_eq!(tally.used_bytes, 3 * M);
        assert_eq!(tally.read_bytes, 8 * M);
        assert_eq!(tally.mean_eviction_time_s(), Some(60.0));
        assert_eq!(tally.mean_rate_bps(), Some((3 * M) as f64 / 60.0));
        // The re-read of [3M, 11M) is a new range.
        t.record_read(F, 3 * M, 3 * M + (64 << 10), 3 * M, 11 * M, s(60));
        t.record_request(F, 11 * M, 11 * M + 1, 11 * M, s(200));
        let tally = t.take_tally();
        assert_eq!((tally.read_bytes, tally.used_bytes), (8 * M, 8 * M));
    }

    #[test]
    fn resident_requests_inside_a_range_confirm_it() {
        let mut t = tracker();
        t.record_read(F, 0, M, 0, 4 * M, s(0));
        t.record_request(F, M, 2 * M, 2 * M, s(10));
        t.record_request(F, 2 * M, 3 * M, 3 * M, s(20));
        assert_eq!(t.take_tally().used_bytes, 0, "credited when the range retires");
        t.record_request(F, 3 * M, 4 * M, 4 * M, s(30));
        let tally = t.take_tally();
        assert_eq!((tally.used_bytes, tally.consumed_ranges), (4 * M, 1));
        assert_eq!(t.tracked(), 0);
        // Hits on data nobody prefetched are cache hits: used, never read.
        t.record_request(G, 0, M, M, s(31));
        let tally = t.take_tally();
        assert_eq!((tally.used_bytes, tally.untracked_hit_bytes, tally.read_bytes), (M, M, 0));
        assert_eq!(tally.miss_ratio(), Some(0.0));
        // A hit running from one tracked range into the next (another
        // viewer's read) moves the next one's mark instead of counting its
        // bytes a second time as a hit outside the ranges.
        let mut t = tracker();
        t.record_read(F, 0, 64 << 10, 0, 4 * M, s(0));
        t.record_read(F, 4 * M, 4 * M + (64 << 10), 4 * M, 8 * M, s(1));
        t.record_request(F, 7 * M / 2, 9 * M / 2, 9 * M / 2, s(40));
        assert_eq!(t.tracked(), 1, "the first range consumed, the second still open");
        t.sweep(s(10_000));
        let tally = t.take_tally();
        assert_eq!((tally.used_bytes, tally.untracked_hit_bytes, tally.wasted_bytes), (9 * M / 2, 0, 7 * M / 2));
    }

    #[test]
    fn a_request_running_past_the_range_with_its_part_cached_is_not_an_eviction() {
        // A 525,000-byte video chunk starting 1.5 MiB into a 2 MiB range: its
        // tail lies beyond the range, so it is a miss, with the range's part cached.
        let mut t = tracker();
        t.record_read(F, 0, 64 << 10, 0, 2 * M, s(0));
        let (at, chunk) = (3 * M / 2, 525_000);
        t.record_request(F, at, at + chunk, 2 * M, s(30));
        let tally = t.take_tally();
        assert_eq!((tally.evicted_bytes, tally.evictions, tally.consumed_ranges), (0, 0, 1));
        // Used up to the request: its bytes are the next read's to count.
        assert_eq!((tally.read_bytes, tally.used_bytes), (2 * M, at));
        assert_eq!(t.tracked(), 0);
    }

    #[test]
    fn rate_samples_run_from_the_range_start_to_where_the_stream_is() {
        // An HD stream: 2,618,750-byte chunks every 10 s, 4 MiB prefetches
        // planned from each miss. Every chunk after the first straddles a
        // range's end: the stream is at the chunk's start, not the range's
        // end (crediting the range gave 4 MiB / 10 s, 1.6x the truth).
        let chunk = 2_618_750u64;
        let truth = chunk as f64 / 10.0;
        let mut t = tracker();
        let mut range_start = 0;
        t.record_read(F, 0, chunk, 0, 4 * M, s(0));
        for k in 1..=4u64 {
            let at = k * chunk;
            let range_end = range_start + 4 * M;
            t.record_request(F, at, at + chunk, range_end, s(10 * k));
            t.record_read(F, at, at + chunk, range_end, at + 4 * M, s(10 * k));
            range_start = at;
        }
        let rate = t.file_rate(F).expect("a rate after the first sample");
        assert!((rate - truth).abs() / truth < 0.01, "{rate} B/s, truth {truth}");
        assert_eq!(t.take_tally().evictions, 0);
    }

    #[test]
    fn requested_bytes_of_a_stream_are_counted_once() {
        // A stream of 525,000-byte chunks through 2 MiB prefetches planned
        // from each miss, the shim serving hits itself (the daemon sees only
        // the misses, each straddling a range's end), and one hit it does
        // forward. The truth: every chunk requested once. The tracker sees
        // each byte up to the last miss's chunk and the forwarded hit; the
        // hits after the last miss it cannot see (the session ended there).
        let chunk = 525_000u64;
        let mut t = tracker();
        let mut seen_to = 0;
        let mut range_end = 0;
        for k in 0..40u64 {
            let (at, end) = (k * chunk, (k + 1) * chunk);
            let now = s(10 * k);
            if end <= range_end {
                if k == 9 {
                    t.record_request(F, at, end, end, now); // a forwarded hit inside the range
                }
                continue;
            }
            t.record_request(F, at, end, range_end.max(at), now);
            // The daemon plans from the request's page and reads from the
            // first byte not cached.
            let start = at - at % PAGE;
            let read_start = range_end.max(start);
            range_end = start + 2 * M;
            t.record_read(F, start, end, read_start, range_end, now);
            seen_to = end;
        }
        t.sweep(s(10_000));
        let tally = t.take_tally();
        assert_eq!(tally.evictions, 0);
        assert_eq!(tally.used_bytes, seen_to, "each requested byte once, up to the last miss's chunk");
        assert_eq!(tally.read_bytes, range_end, "every byte read once");
    }

    #[test]
    fn a_request_whose_read_reads_nothing_still_counts_as_requested() {
        // The stream runs out of a range; by the time the worker gets to its
        // read, another viewer's read has cached the rest (or the read
        // fails): the request's bytes count once, as used.
        let mut t = tracker();
        t.record_read(F, 0, 64 << 10, 0, 2 * M, s(0));
        let at = 2 * M - 65_536;
        t.record_request(F, at, at + 525_000, 2 * M, s(30));
        t.record_read(F, at, at + 525_000, at + 2 * M, at + 2 * M, s(30));
        let tally = t.take_tally();
        assert_eq!((tally.used_bytes, tally.read_bytes), (at + 525_000, 2 * M));
        assert_eq!(t.tracked(), 0);
    }

    #[test]
    fn the_jump_rate_is_how_fast_streams_go_through_the_size_in_force() {
        // Two files at 400 KiB/s and three at 80 (each sampled twice after
        // its burst sample).
        let mut t = tracker();
        let files: Vec<(FileKey, u64)> = (0..5).map(|i| (FileKey { dev: 1, ino: 10 + i }, if i < 2 { 400 } else { 80 })).collect();
        for &(f, kib_s) in &files {
            for k in 0..3u64 {
                let (start, end) = (k * 4 * M, (k + 1) * 4 * M);
                let at = |k: u64| Duration::from_secs_f64((k * 4096) as f64 / kib_s as f64);
                t.record_read(f, start, start + 1, start, end, at(k));
                t.record_request(f, end, end + 1, end, at(k + 1));
            }
        }
        let (hd, sd) = (400.0 * 1024.0, 80.0 * 1024.0);
        let close = |a: f64, b: f64| (a - b).abs() / b < 1e-6;
        // One size for all: the slower streams bind.
        assert!(close(t.jump_rate(BitrateScale::None).unwrap(), sd));
        // SD gets size x sqrt(1/5): it goes through the size in force at sqrt(SD x HD).
        assert!(close(t.jump_rate(BitrateScale::Sqrt).unwrap(), (sd * hd).sqrt()));
        // Proportional sizes: every stream lives size / HD.
        assert!(close(t.jump_rate(BitrateScale::Proportional).unwrap(), hd));
        assert_eq!(tracker().jump_rate(BitrateScale::Sqrt), None);
    }

    #[test]
    fn a_request_running_past_the_range_counts_the_eviction_from_its_first_missing_page() {
        let mut t = tracker();
        t.record_read(F, 0, 64 << 10, 0, 2 * M, s(0));
        // Cached from 1.5 MiB to 1.75 MiB only: [1.75, 2) MiB was evicted.
        t.record_request(F, 3 * M / 2, 5 * M / 2, 7 * M / 4, s(30));
        let tally = t.take_tally();
        assert_eq!((tally.evicted_bytes, tally.evictions), (M / 4, 1));
        assert_eq!(tally.used_bytes, 3 * M / 2, "used up to the request, which its own read counts");
    }

    #[test]
    fn eviction_after_partial_confirmation_counts_from_the_mark() {
        let mut t = tracker();
        t.record_read(F, 0, M, 0, 6 * M, s(0));
        t.record_request(F, M, 3 * M, 3 * M, s(5));
        // A second viewer misses at 2M (already used by the first): only
        // [3M, 6M) was evicted before use.
        t.record_request(F, 2 * M, 2 * M + 1, 2 * M, s(30));
        let tally = t.take_tally();
        assert_eq!((tally.evicted_bytes, tally.used_bytes), (3 * M, 3 * M));
    }

    #[test]
    fn ranges_nobody_returns_to_are_wasted_after_the_horizon() {
        let mut t = PrefetchTracker::new(s(100), 1000);
        t.record_read(F, 0, M, 0, 5 * M, s(0));
        t.record_read(G, 0, M, M / 2, 5 * M, s(50));
        t.sweep(s(99));
        assert_eq!(t.tracked(), 2);
        t.sweep(s(101));
        assert_eq!(t.tracked(), 1);
        let tally = t.take_tally();
        assert_eq!((tally.wasted_ranges, tally.wasted_bytes, tally.used_bytes, tally.read_bytes), (1, 4 * M, M, 5 * M));
        t.sweep(s(151));
        let tally = t.take_tally();
        assert_eq!((tally.wasted_bytes, tally.read_bytes), (4 * M, 5 * M - M / 2), "resident prefix not read");
    }

    #[test]
    fn far_requests_leave_ranges_alone_and_memory_is_bounded() {
        let mut t = PrefetchTracker::new(s(100), 10);
        t.record_read(F, 0, M, 0, 2 * M, s(0));
        // Another viewer far away in the same file: no verdict on the range.
        t.record_request(F, 50 * M, 51 * M, 50 * M, s(1));
        assert_eq!(t.tracked(), 1);
        assert_eq!(t.take_tally(), UsageTally::default());
        for i in 0..(MAX_RANGES_PER_FILE as u64 + 2) {
            t.record_read(F, 100 * M + i * 10 * M, 100 * M + i * 10 * M + 1, 100 * M + i * 10 * M, 101 * M + i * 10 * M, s(2 + i));
        }
        assert_eq!(t.tracked(), MAX_RANGES_PER_FILE);
        assert!(t.take_tally().wasted_ranges >= 2);
        for i in 0..20u64 {
            t.record_read(FileKey { dev: 9, ino: i }, 0, 1, 0, M, s(20));
        }
        assert_eq!(t.tracked(), 10);
        let tally = t.take_tally();
        assert!(tally.untracked_reads > 0);
        assert_eq!(tally.read_bytes % M, 0);
    }

    /// A synthetic trace with known truth: streams request 512 KiB chunks
    /// every 10 s; each prefetch of 8 chunks stays cached exactly `life`
    /// seconds. With `forward_hits` the shim forwards every request (it
    /// cannot check residency), else only misses.
    fn eviction_trace(life: u64, forward_hits: bool) -> UsageTally {
        const CHUNK: u64 = 512 << 10;
        let mut t = PrefetchTracker::new(s(600), 1000);
        for stream in 0..20u64 {
            let f = FileKey { dev: 1, ino: stream };
            let start = stream * 3; // staggered
            let mut read: Option<(u64, u64, u64)> = None; // (start, end, read at)
            for k in 0..40u64 {
                let now = start + 10 * k;
                let off = k * CHUNK;
                let resident = matches!(read, Some((a, b, at)) if a <= off && off < b && now < at + life);
                if resident && forward_hits {
                    t.record_request(f, off, off + CHUNK, off + CHUNK, s(now));
                }
                if !resident {
                    t.record_request(f, off, off + CHUNK, off, s(now));
                    t.record_read(f, off, off + CHUNK, off, off + 8 * CHUNK, s(now));
                    read = Some((off, off + 8 * CHUNK, now));
                }
            }
        }
        t.take_tally()
    }

    #[test]
    fn eviction_time_bracket_holds_the_truth_of_a_synthetic_trace() {
        for life in [25, 42, 61] {
            // The shim forwards hits: the bracket is [last resident request,
            // discovery], 10 s wide, and its middle is off by at most 5 s.
            let tally = eviction_trace(life, true);
            assert!(tally.evictions > 0);
            let (lo, hi, est) = (tally.mean_eviction_time_lower_s().unwrap(), tally.mean_eviction_time_s().unwrap(), tally.mean_eviction_time_estimate_s().unwrap());
            let life = life as f64;
            assert!(lo < life && life <= hi, "truth {life} in [{lo}, {hi}]");
            assert!(hi - lo <= 10.0 + 1e-9, "one request period wide: [{lo}, {hi}]");
            assert!((est - life).abs() <= 5.0, "estimate {est} for truth {life}");
            // Only misses reach the daemon: the bracket is open below and the
            // estimate is the discovery time, at most one period late.
            let tally = eviction_trace(life as u64, false);
            let (lo, hi, est) = (tally.mean_eviction_time_lower_s().unwrap(), tally.mean_eviction_time_s().unwrap(), tally.mean_eviction_time_estimate_s().unwrap());
            assert_eq!(lo, 0.0);
            assert_eq!(est, hi);
            assert!(life <= hi && hi < life + 10.0, "truth {life}, discovered at {hi}");
        }
    }

    #[test]
    fn reading_requested_data_again_is_a_reread() {
        let mut t = tracker();
        // Viewer 1 reads and uses [0, 4M); later viewer 2's miss reads it again.
        t.record_read(F, 0, M, 0, 4 * M, s(0));
        t.record_request(F, 4 * M, 4 * M + 1, 4 * M, s(40));
        t.record_read(F, 0, M, 0, 4 * M, s(500));
        assert_eq!(t.take_tally().reread_bytes, 4 * M);
        // A prefetch past what anybody used is not a re-read.
        t.record_read(G, 0, M, 0, 4 * M, s(0));
        t.record_request(G, 0, M, M, s(1));
        t.record_read(G, 2 * M, 3 * M, 2 * M, 6 * M, s(2));
        assert_eq!(t.take_tally().reread_bytes, 0, "[2M, 4M) was prefetched, never requested");
    }

    #[test]
    fn a_new_read_over_a_range_supersedes_it() {
        let mut t = tracker();
        t.record_read(F, 0, M, 0, 4 * M, s(0));
        t.record_read(F, 2 * M, 3 * M, 2 * M, 6 * M, s(1));
        assert_eq!(t.tracked(), 1);
        let tally = t.take_tally();
        assert_eq!((tally.read_bytes, tally.used_bytes), (4 * M, M));
    }
}
