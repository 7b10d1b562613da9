//! The drive model: when each read would complete on one real drive.
//!
//! Pure and deterministic: no threads, no wall clock. Time is a number of
//! nanoseconds on the model's own timeline; the caller [`Drive::submit`]s
//! requests stamped with their arrival time and calls [`Drive::advance`] with
//! "now" to collect the completions that are due. Decisions are taken at the
//! simulated instant the drive becomes free, using only requests that had
//! arrived by then, and every start and end is an absolute time derived from
//! the previous end. A caller that wakes up late therefore gets its completions
//! late but never slows the drive down: the timeline is the same as if it had
//! woken on time (tested below).
//!
//! Hard disk ([`DriveKind::Hdd`]):
//! - Zoned geometry: the LBA space is cut into `zones` equal shares; a zone's
//!   media rate is interpolated from the outer/middle/inner figures (LBA 0 is
//!   the outer edge), which fixes its sectors per track, and its cylinder count
//!   follows from its size. Seek distances are in cylinders, so the slower inner
//!   zones also hold more cylinders per byte.
//! - Seek time `track + (full - track) * (w*sqrt(x) + (1-w)*x)` for a distance
//!   of x full strokes (0 for the same cylinder); the platter angle advances
//!   with absolute time, so the rotational wait is the exact angle between the
//!   head and the first sector when the seek ends.
//! - One actuator and a per-command overhead. After each read the head keeps
//!   reading ahead into a cache segment (up to `segment_kib`) until the next
//!   command moves it; reads wholly inside a segment are cache hits served at
//!   the interface rate, and a read that continues the sector stream under the
//!   head costs no positioning ("stream"). `cache_segments` segments are kept,
//!   least recently used replaced.
//! - NCQ: of the queued requests the drive considers the oldest `ncq_depth`
//!   and serves the one with the shortest positioning time (seek + rotation);
//!   one older than `ncq_max_age_ms` goes first. Depth 1 is FIFO.
//! - Joining (off unless [`Drive::set_join_limit`]): queued requests that
//!   continue each other on the platter are served as one command up to the
//!   limit, as the host's block layer would have merged them had its request
//!   size limit allowed; block mode uses it to emulate a `max_sectors_kb`
//!   above what a loop device accepts (docs/disk.md).
//!
//! SSD ([`DriveKind::Ssd`]): no positioning; up to `ssd_parallelism` commands
//! in flight, each costing overhead + flash latency, then its data crosses a
//! shared channel at the media rate (so bandwidth is bounded).

use crate::params::{DriveKind, DriveParams};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Sector size of the model, bytes.
pub const SECTOR: u64 = 512;

/// Joined requests arrived within this of the chosen one: the pieces of one
/// host request, which reach the drive within a fraction of a millisecond.
/// Requests queued at separate times are not joined: on a real host the
/// earlier one may already sit in the drive's queue, where nothing merges.
pub const JOIN_ARRIVAL_NS: u64 = 2_000_000;

/// A read as the drive sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Caller's tag, returned in the completion.
    pub id: u64,
    /// When the request reached the drive, model ns.
    pub arrival_ns: u64,
    /// First sector.
    pub lba: u64,
    /// Length in sectors (at least 1).
    pub sectors: u64,
}

/// How a read was served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Whole request in the drive's cache.
    Hit,
    /// Continued the stream under the head: no seek, no rotational wait.
    Stream,
    /// Needed positioning (seek and/or rotational wait).
    Miss,
    /// Joined to the command of the request just before it on the platter
    /// (see [`Drive::set_join_limit`]): served by that command, in the same
    /// pass, and completed with it.
    Joined,
}

/// A served read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Completion {
    pub id: u64,
    pub arrival_ns: u64,
    /// When the drive took the command.
    pub start_ns: u64,
    /// When its data was delivered.
    pub end_ns: u64,
    pub lba: u64,
    pub sectors: u64,
    pub outcome: Outcome,
    /// Seek distance in cylinders (0 when there was no seek).
    pub seek_cylinders: u64,
    /// Requests in the drive (queued and arrived, plus this one) when it started.
    pub queue_depth: u32,
}

#[derive(Debug, Clone)]
struct Zone {
    first_lba: u64,
    sectors: u64,
    first_cyl: u64,
    /// Sectors per track.
    spt: u64,
}

/// The platter layout of a hard disk.
#[derive(Debug, Clone)]
pub struct Geometry {
    zones: Vec<Zone>,
    total_sectors: u64,
    cylinders: u64,
    heads: u64,
    /// Duration of one revolution, ns.
    rev_ns: f64,
}

impl Geometry {
    fn new(p: &DriveParams) -> Geometry {
        let total_sectors = p.capacity_bytes() / SECTOR;
        let rev_ns = 60e9 / p.rpm;
        let heads = p.heads as u64;
        let n = p.zones as u64;
        let mut zones = Vec::with_capacity(n as usize);
        let mut first_cyl = 0;
        for z in 0..n {
            let first_lba = total_sectors * z / n;
            let sectors = total_sectors * (z + 1) / n - first_lba;
            let f = (z as f64 + 0.5) / n as f64;
            let rate = if f < 0.5 {
                p.outer_mb_s + (p.middle_mb_s - p.outer_mb_s) * f / 0.5
            } else {
                p.middle_mb_s + (p.inner_mb_s - p.middle_mb_s) * (f - 0.5) / 0.5
            };
            let spt = ((rate * 1e6 * rev_ns / 1e9) / SECTOR as f64).round().max(1.0) as u64;
            zones.push(Zone { first_lba, sectors, first_cyl, spt });
            first_cyl += sectors.div_ceil(spt * heads);
        }
        Geometry { zones, total_sectors, cylinders: first_cyl, heads, rev_ns }
    }

    fn zone_of(&self, lba: u64) -> usize {
        self.zones.partition_point(|z| z.first_lba <= lba).saturating_sub(1)
    }

    /// Sectors on the drive.
    pub fn total_sectors(&self) -> u64 {
        self.total_sectors
    }

    /// Cylinders on the drive (a full stroke is `cylinders - 1`).
    pub fn cylinders(&self) -> u64 {
        self.cylinders
    }

    /// Cylinder holding `lba`.
    pub fn cylinder(&self, lba: u64) -> u64 {
        let z = &self.zones[self.zone_of(lba)];
        z.first_cyl + (lba - z.first_lba) / (z.spt * self.heads)
    }

    /// Media rate at `lba`, bytes per second.
    pub fn media_rate(&self, lba: u64) -> f64 {
        let z = &self.zones[self.zone_of(lba.min(self.total_sectors - 1))];
        z.spt as f64 * SECTOR as f64 * 1e9 / self.rev_ns
    }

    /// Angle of `lba` on its track, in revolutions [0, 1).
    fn angle(&self, lba: u64) -> f64 {
        let z = &self.zones[self.zone_of(lba)];
        ((lba - z.first_lba) % z.spt) as f64 / z.spt as f64
    }

    /// Time for sectors `[a, b)` to pass under the head, ns.
    fn media_ns(&self, a: u64, b: u64) -> f64 {
        let mut t = 0.0;
        let mut lba = a;
        let mut zi = self.zone_of(a);
        while lba < b && zi < self.zones.len() {
            let z = &self.zones[zi];
            let zone_end = z.first_lba + z.sectors;
            let upto = b.min(zone_end);
            t += (upto - lba) as f64 / z.spt as f64 * self.rev_ns;
            lba = upto;
            zi += 1;
        }
        t
    }

    /// The sector under the head `dt` ns after it was at `lba` while streaming.
    fn lba_after(&self, lba: u64, dt: f64) -> u64 {
        let mut lba = lba;
        let mut left = dt;
        let mut zi = self.zone_of(lba);
        while left > 0.0 && zi < self.zones.len() {
            let z = &self.zones[zi];
            let zone_end = z.first_lba + z.sectors;
            let per_sector = self.rev_ns / z.spt as f64;
            let can = (left / per_sector) as u64;
            if lba + can < zone_end {
                return lba + can;
            }
            left -= (zone_end - lba) as f64 * per_sector;
            lba = zone_end;
            zi += 1;
        }
        lba.min(self.total_sectors)
    }
}

/// Sectors the drive is reading ahead into its newest segment.
#[derive(Debug, Clone, Copy)]
struct Stream {
    /// The head was at `lba0` at time `t0` and reads sequentially from there.
    lba0: u64,
    t0: f64,
    /// Where speculative reading stops if no command extends it.
    limit: u64,
    /// Index of the segment being filled.
    segment: usize,
}

#[derive(Debug, Clone, Copy)]
struct Segment {
    start: u64,
    /// Fixed end once the segment stopped filling (the active one is computed).
    end: u64,
    last_use: f64,
}

/// What serving one request would do, computed before committing to it.
#[derive(Debug, Clone, Copy)]
struct Plan {
    /// When the head starts delivering the request's data (positioning done).
    ready: f64,
    end: f64,
    outcome: Outcome,
    seek_cylinders: u64,
    action: Action,
}

#[derive(Debug, Clone, Copy)]
enum Action {
    /// Served from segment `i`.
    Hit(usize),
    /// The current stream delivers it; its limit moves to `limit`.
    Extend { limit: u64 },
    /// The head goes to `lba`, starting to read there at time `t0`.
    Reposition { lba: u64, t0: f64, limit: u64, new_segment: bool },
}

/// One drive's state on the model's timeline.
#[derive(Debug, Clone)]
pub struct Drive {
    params: DriveParams,
    geometry: Option<Geometry>,
    /// Requests not started yet, in arrival order.
    queue: VecDeque<Request>,
    /// Times at which each service slot becomes free (1 slot for a hard disk).
    slots: BinaryHeap<Reverse<u64>>,
    /// Started, not yet reported, ordered by end time on output.
    in_service: Vec<Completion>,
    stream: Option<Stream>,
    segments: Vec<Segment>,
    /// Head position when no stream exists yet.
    head_lba: u64,
    /// SSD: when the shared channel is free.
    channel_free: f64,
    segment_sectors: u64,
    /// Largest command joined from contiguous requests, sectors (0: none).
    join_sectors: u64,
}

impl Drive {
    /// A drive at rest, head at LBA 0, empty cache. `params` must have passed
    /// [`DriveParams::validate`].
    pub fn new(params: &DriveParams) -> Drive {
        let geometry = (params.kind == DriveKind::Hdd).then(|| Geometry::new(params));
        let slot_count = match params.kind {
            DriveKind::Hdd => 1,
            DriveKind::Ssd => params.ssd_parallelism as usize,
        };
        Drive {
            params: params.clone(),
            geometry,
            queue: VecDeque::new(),
            slots: (0..slot_count).map(|_| Reverse(0)).collect(),
            in_service: Vec::new(),
            stream: None,
            segments: Vec::new(),
            head_lba: 0,
            channel_free: 0.0,
            segment_sectors: params.segment_kib as u64 * 1024 / SECTOR,
            join_sectors: 0,
        }
    }

    /// Serve queued requests that continue one another on the platter as one
    /// command of up to `bytes` (0 turns joining off), as a host block layer
    /// merges adjacent requests up to its `max_sectors_kb`. The chosen
    /// request takes with it every queued, arrived request that starts where
    /// the command so far ends (or ends where it starts) and arrived within
    /// [`JOIN_ARRIVAL_NS`] of it, while the command stays within the limit;
    /// they all complete when the command does.
    pub fn set_join_limit(&mut self, bytes: u64) {
        self.join_sectors = bytes / SECTOR;
    }

    pub fn params(&self) -> &DriveParams {
        &self.params
    }

    /// The platter layout (hard disks only).
    pub fn geometry(&self) -> Option<&Geometry> {
        self.geometry.as_ref()
    }

    /// Sectors addressable on this drive.
    pub fn total_sectors(&self) -> u64 {
        self.params.capacity_bytes() / SECTOR
    }

    /// Requests submitted and not yet returned by `advance`.
    pub fn outstanding(&self) -> usize {
        self.queue.len() + self.in_service.len()
    }

    /// Hands a request to the drive. Requests may be submitted in any order of
    /// arrival; the queue stays ordered by arrival.
    pub fn submit(&mut self, req: Request) {
        let sectors = req.sectors.max(1);
        let lba = req.lba.min(self.total_sectors().saturating_sub(sectors));
        let req = Request { lba, sectors, ..req };
        let at = self.queue.partition_point(|q| q.arrival_ns <= req.arrival_ns);
        self.queue.insert(at, req);
    }

    /// When the next completion is due, if any request is outstanding and
    /// its completion is already decided; otherwise the time the next decision
    /// can be taken (a queued request with nothing in service).
    pub fn next_event_ns(&self) -> Option<u64> {
        let in_service = self.in_service.iter().map(|c| c.end_ns).min();
        let decision = self.queue.front().map(|q| q.arrival_ns.max(self.slots.peek().map_or(0, |s| s.0)));
        match (in_service, decision) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Runs the drive up to `now_ns` and appends every completion with an end
    /// time at or before it, in end order.
    pub fn advance(&mut self, now_ns: u64, out: &mut Vec<Completion>) {
        // Start every command whose decision instant has come.
        while let Some(front) = self.queue.front() {
            let slot_free = self.slots.peek().expect("at least one slot").0;
            let decide_at = slot_free.max(front.arrival_ns);
            if decide_at > now_ns {
                break;
            }
            self.slots.pop();
            let end_ns = self.start_one(decide_at);
            self.slots.push(Reverse(end_ns));
        }
        // The pieces of a joined command end together: report them in platter order.
        self.in_service.sort_by_key(|c| Reverse((c.end_ns, c.lba)));
        while self.in_service.last().is_some_and(|c| c.end_ns <= now_ns) {
            out.push(self.in_service.pop().expect("checked"));
        }
    }

    /// Picks the next command at `t`, commits its service and puts the
    /// completions of its requests in service; returns when it ends.
    fn start_one(&mut self, t: u64) -> u64 {
        let tf = t as f64;
        // Requests that have arrived by t, oldest first, at most ncq_depth of them.
        let arrived = self.queue.partition_point(|q| q.arrival_ns <= t);
        let window = arrived.min(self.params.ncq_depth as usize).max(1);
        let max_age = (self.params.ncq_max_age_ms * 1e6) as u64;
        let (index, plan) = if self.params.kind == DriveKind::Ssd || window == 1 || t - self.queue[0].arrival_ns > max_age {
            (0, self.plan(&self.command_from(0, arrived).0, tf))
        } else {
            // Aged SPTF: positioning time minus a credit for the time waited.
            let aging = self.params.ncq_aging_ms_per_s / 1e3;
            let score = |i: usize, plan: &Plan| plan.ready - tf - aging * (t - self.queue[i].arrival_ns) as f64;
            let mut best: Option<(usize, f64, Plan)> = None;
            for i in 0..window {
                let plan = self.plan(&self.command_from(i, arrived).0, tf);
                let s = score(i, &plan);
                if best.as_ref().is_none_or(|b| s < b.1) {
                    best = Some((i, s, plan));
                }
            }
            let (i, _, plan) = best.expect("the window holds a request");
            (i, plan)
        };
        let (command, mut members) = self.command_from(index, arrived);
        let queue_depth = (arrived as u32) + self.in_service.iter().filter(|c| c.end_ns > t).count() as u32;
        self.commit(&command, tf, &plan);
        let end_ns = plan.end.round() as u64;
        // Members in platter order; the first bears the positioning.
        members.sort_unstable_by_key(|&i| self.queue[i].lba);
        for (k, &i) in members.iter().enumerate() {
            let r = self.queue[i];
            let (outcome, seek_cylinders) = if k == 0 { (plan.outcome, plan.seek_cylinders) } else { (Outcome::Joined, 0) };
            self.in_service.push(Completion { id: r.id, arrival_ns: r.arrival_ns, start_ns: t, end_ns, lba: r.lba, sectors: r.sectors, outcome, seek_cylinders, queue_depth });
        }
        members.sort_unstable_by(|a, b| b.cmp(a));
        for i in members {
            self.queue.remove(i);
        }
        end_ns
    }

    /// The command that serving queued request `index` makes: that request
    /// alone, or joined with the arrived requests (`..arrived`) contiguous
    /// with it on either side within the join limit. Returns it as one
    /// request (the first member's id, the earliest arrival) and the queue
    /// indices of its members.
    fn command_from(&self, index: usize, arrived: usize) -> (Request, Vec<usize>) {
        let mut command = self.queue[index];
        let mut members = vec![index];
        if self.join_sectors == 0 {
            return (command, members);
        }
        // Few requests are queued (the host's queue depth): a scan per step is cheap.
        loop {
            let room = self.join_sectors.saturating_sub(command.sectors);
            let chosen = self.queue[index].arrival_ns;
            let fits = |j: &usize| !members.contains(j) && self.queue[*j].sectors <= room && self.queue[*j].arrival_ns.abs_diff(chosen) <= JOIN_ARRIVAL_NS;
            // The piece after the command first (a back merge), else the one before.
            let next = (0..arrived)
                .filter(fits)
                .find(|&j| self.queue[j].lba == command.lba + command.sectors)
                .or_else(|| (0..arrived).filter(fits).find(|&j| self.queue[j].lba + self.queue[j].sectors == command.lba));
            let Some(j) = next else { break };
            let r = self.queue[j];
            command.lba = command.lba.min(r.lba);
            command.sectors += r.sectors;
            command.arrival_ns = command.arrival_ns.min(r.arrival_ns);
            members.push(j);
        }
        (command, members)
    }

    fn overhead_ns(&self) -> f64 {
        self.params.command_overhead_ms * 1e6
    }

    fn interface_ns(&self, sectors: u64) -> f64 {
        (sectors * SECTOR) as f64 / (self.params.interface_mb_s * 1e6) * 1e9
    }

    /// The sector under the head at time `t` and whether it is still reading.
    fn head_at(&self, t: f64) -> (u64, bool) {
        let g = self.geometry.as_ref().expect("hard disk");
        match self.stream {
            None => (self.head_lba, false),
            Some(s) => {
                if t <= s.t0 {
                    return (s.lba0, true);
                }
                let pos = g.lba_after(s.lba0, t - s.t0);
                if pos >= s.limit { (s.limit, false) } else { (pos, true) }
            }
        }
    }

    /// End of the cached range of segment `i` at time `t`, and its start
    /// (a segment keeps at most `segment_sectors`, ring-buffer style).
    fn segment_range(&self, i: usize, t: f64) -> (u64, u64) {
        let seg = &self.segments[i];
        let end = match self.stream {
            Some(s) if s.segment == i => {
                if t <= s.t0 { s.lba0 } else { self.head_at(t).0 }
            }
            _ => seg.end,
        };
        let keep = self.segment_sectors.max(1);
        (seg.start.max(end.saturating_sub(keep)), end)
    }

    fn plan(&self, r: &Request, t: f64) -> Plan {
        match self.params.kind {
            DriveKind::Ssd => self.plan_ssd(r, t),
            DriveKind::Hdd => self.plan_hdd(r, t),
        }
    }

    fn plan_ssd(&self, r: &Request, t: f64) -> Plan {
        let ready = t + self.overhead_ns() + self.params.ssd_read_latency_us * 1e3;
        let transfer = (r.sectors * SECTOR) as f64 / (self.params.outer_mb_s * 1e6) * 1e9;
        let end = ready.max(self.channel_free) + transfer;
        Plan { ready, end, outcome: Outcome::Miss, seek_cylinders: 0, action: Action::Hit(usize::MAX) }
    }

    fn plan_hdd(&self, r: &Request, t: f64) -> Plan {
        let g = self.geometry.as_ref().expect("hard disk");
        let (a, b) = (r.lba, r.lba + r.sectors);
        let overhead = self.overhead_ns();
        // 1. Entirely in a cache segment.
        for i in 0..self.segments.len() {
            let (start, end) = self.segment_range(i, t);
            if start <= a && b <= end {
                let ready = t + overhead;
                return Plan { ready, end: ready + self.interface_ns(r.sectors), outcome: Outcome::Hit, seek_cylinders: 0, action: Action::Hit(i) };
            }
        }
        let readahead = self.segment_sectors;
        let disk_end = g.total_sectors;
        // 2. Continues the stream under the head (already read, or coming).
        if let Some(s) = self.stream {
            let (seg_start, _) = self.segment_range(s.segment, t);
            let (_, reading) = self.head_at(t);
            if seg_start <= a && a <= s.limit && (reading || b <= s.limit) {
                let data_at = |lba: u64| s.t0 + g.media_ns(s.lba0, lba);
                let ready = (t + overhead).max(data_at(a));
                let end = (t + overhead).max(data_at(b));
                let limit = s.limit.max((b + readahead).min(disk_end));
                return Plan { ready, end, outcome: Outcome::Stream, seek_cylinders: 0, action: Action::Extend { limit } };
            }
        }
        // 3. Positioning: seek to the cylinder, wait for the sector.
        let (head, _) = self.head_at(t);
        let from = g.cylinder(head);
        let to = g.cylinder(a);
        let distance = from.abs_diff(to);
        let arrive = t + overhead + self.seek_ns(distance);
        let angle_now = (arrive / g.rev_ns).fract();
        let wait = (g.angle(a) - angle_now).rem_euclid(1.0) * g.rev_ns;
        let t0 = arrive + wait;
        let end = t0 + g.media_ns(a, b);
        let limit = (b + readahead).min(disk_end);
        Plan { ready: t0, end, outcome: Outcome::Miss, seek_cylinders: distance, action: Action::Reposition { lba: a, t0, limit, new_segment: true } }
    }

    /// Seek time for `d` cylinders, ns.
    pub fn seek_ns(&self, d: u64) -> f64 {
        let Some(g) = self.geometry.as_ref() else { return 0.0 };
        if d == 0 {
            return 0.0;
        }
        let p = &self.params;
        let x = (d - 1) as f64 / (g.cylinders.max(2) - 2).max(1) as f64;
        let shape = p.seek_sqrt_weight * x.sqrt() + (1.0 - p.seek_sqrt_weight) * x;
        (p.seek_track_ms + (p.seek_full_ms - p.seek_track_ms) * shape) * 1e6
    }

    fn commit(&mut self, r: &Request, t: f64, plan: &Plan) {
        if self.params.kind == DriveKind::Ssd {
            self.channel_free = plan.end;
            return;
        }
        match plan.action {
            Action::Hit(i) => self.segments[i].last_use = t,
            Action::Extend { limit } => {
                let s = self.stream.as_mut().expect("extend needs a stream");
                s.limit = limit;
                let i = s.segment;
                self.segments[i].last_use = t;
            }
            Action::Reposition { lba, t0, limit, new_segment } => {
                // The old stream stops where the head is now.
                if let Some(s) = self.stream.take() {
                    let (pos, _) = {
                        self.stream = Some(s);
                        let h = self.head_at(t);
                        self.stream = None;
                        h
                    };
                    self.segments[s.segment].end = pos.max(self.segments[s.segment].start);
                    self.head_lba = pos;
                }
                debug_assert!(new_segment);
                let capacity = self.params.cache_segments.max(1) as usize;
                let seg = Segment { start: lba, end: lba, last_use: t };
                let index = if self.segments.len() < capacity {
                    self.segments.push(seg);
                    self.segments.len() - 1
                } else {
                    let lru = (0..self.segments.len())
                        .min_by(|&x, &y| self.segments[x].last_use.total_cmp(&self.segments[y].last_use))
                        .expect("segments exist");
                    self.segments[lru] = seg;
                    lru
                };
                self.stream = Some(Stream { lba0: lba, t0, limit: limit.max(r.lba + r.sectors), segment: index });
            }
        }
    }
}

/// Closed-loop workloads on the model alone: used by the tests and by
/// `vidbench disk model`.
pub mod sim {
    use super::*;

    /// Result of a simulated run.
    #[derive(Debug, Clone)]
    pub struct RunResult {
        pub completions: Vec<Completion>,
        /// Model time from the first arrival to the last completion, ns.
        pub elapsed_ns: u64,
    }

    impl RunResult {
        pub fn bytes(&self) -> u64 {
            self.completions.iter().map(|c| c.sectors * SECTOR).sum()
        }
        pub fn mb_per_s(&self) -> f64 {
            self.bytes() as f64 / (self.elapsed_ns as f64 / 1e9) / 1e6
        }
        pub fn iops(&self) -> f64 {
            self.completions.len() as f64 / (self.elapsed_ns as f64 / 1e9)
        }
        /// Mean of end - start, ms.
        pub fn mean_service_ms(&self) -> f64 {
            self.completions.iter().map(|c| (c.end_ns - c.start_ns) as f64).sum::<f64>() / self.completions.len() as f64 / 1e6
        }
    }

    /// Keeps `depth` requests outstanding: each completion is seen by the host
    /// `host_delay(i)` ns after it happens (a late wake-up), and the host then
    /// submits the next request from `next`. Runs `count` requests.
    pub fn closed_loop(
        drive: &mut Drive,
        depth: usize,
        count: usize,
        mut next: impl FnMut(usize) -> (u64, u64),
        mut host_delay: impl FnMut(usize) -> u64,
    ) -> RunResult {
        let mut completions = Vec::with_capacity(count);
        let mut issued = 0usize;
        let mut now = 0u64;
        let mut buf = Vec::new();
        while issued < depth.min(count) {
            let (lba, sectors) = next(issued);
            drive.submit(Request { id: issued as u64, arrival_ns: 0, lba, sectors });
            issued += 1;
        }
        while completions.len() < count {
            let event = drive.next_event_ns().expect("requests are outstanding");
            // The host sleeps until the event and wakes up late.
            now = now.max(event) + host_delay(completions.len());
            buf.clear();
            drive.advance(now, &mut buf);
            for c in buf.drain(..) {
                completions.push(c);
                if issued < count {
                    let (lba, sectors) = next(issued);
                    drive.submit(Request { id: issued as u64, arrival_ns: now, lba, sectors });
                    issued += 1;
                }
            }
        }
        let elapsed_ns = completions.iter().map(|c| c.end_ns).max().unwrap_or(0);
        RunResult { completions, elapsed_ns }
    }

    /// Random reads of `bytes` anywhere on the drive at queue depth `depth`.
    pub fn random_reads(params: &DriveParams, depth: usize, count: usize, bytes: u64, seed: u64) -> RunResult {
        use rand::{Rng, SeedableRng};
        let mut drive = Drive::new(params);
        let sectors = (bytes / SECTOR).max(1);
        let span = drive.total_sectors() - sectors;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        closed_loop(&mut drive, depth, count, |_| (rng.gen_range(0..span) / 8 * 8, sectors), |_| 0)
    }

    /// Sequential reads of `bytes` from `start_lba` at queue depth 1, the host
    /// taking `host_gap_ns` to issue each next read.
    pub fn sequential_reads(params: &DriveParams, start_lba: u64, count: usize, bytes: u64, host_gap_ns: u64) -> RunResult {
        let mut drive = Drive::new(params);
        let sectors = (bytes / SECTOR).max(1);
        closed_loop(&mut drive, 1, count, |i| (start_lba + i as u64 * sectors, sectors), |_| host_gap_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::sim::*;
    use super::*;
    use crate::params::{presets, Preset};

    fn hdd_presets() -> Vec<Preset> {
        presets().into_iter().filter(|p| p.params.kind == DriveKind::Hdd).collect()
    }

    fn rev_ms(p: &DriveParams) -> f64 {
        60e3 / p.rpm
    }

    #[test]
    fn random_4k_at_depth_1_costs_datasheet_seek_plus_half_a_revolution() {
        for preset in hdd_presets() {
            let p = &preset.params;
            let avg_seek = preset.reference.avg_seek_ms.expect("every hard disk preset has an average seek");
            let r = random_reads(p, 1, 4000, 4096, 7);
            let g = Drive::new(p).geometry().unwrap().clone();
            let mid_rate = g.media_rate(g.total_sectors() / 2);
            let expected = avg_seek + rev_ms(p) / 2.0 + 4096.0 / mid_rate * 1e3 + p.command_overhead_ms;
            let got = r.mean_service_ms();
            assert!((got - expected).abs() / expected < 0.10, "{}: random 4 KiB at depth 1 takes {got:.2} ms, datasheet gives {expected:.2} ms", preset.name);
            assert!(r.completions.iter().all(|c| c.outcome == Outcome::Miss), "{}: random reads should all miss the cache", preset.name);
        }
    }

    /// FreeBSD diskinfo -t: one-sector reads alternating between two points,
    /// both moving 2048 sectors per round.
    fn diskinfo_stroke(p: &DriveParams, b0: u64, b1: u64) -> f64 {
        let mut drive = Drive::new(p);
        let (mut x, mut y) = (b0, b1);
        let mut lbas = Vec::new();
        for _ in 0..125 {
            lbas.push(x);
            lbas.push(y);
            x += 2048;
            y -= 2048;
        }
        let r = closed_loop(&mut drive, 1, 250, |i| (lbas[i], 1), |_| 20_000);
        r.elapsed_ns as f64 / 250.0 / 1e6
    }

    #[test]
    fn diskinfo_strokes_match_paper_000_table_1() {
        for preset in hdd_presets() {
            let Some(expected) = preset.reference.diskinfo_strokes_ms else { continue };
            let p = &preset.params;
            let n = p.capacity_bytes() / SECTOR;
            let got = [
                diskinfo_stroke(p, 0, n - 8192),
                diskinfo_stroke(p, n / 4, n / 4 + n / 2),
                diskinfo_stroke(p, n / 4, n / 4 + n / 4),
            ];
            for (name, (g, e)) in ["full", "half", "quarter"].iter().zip(got.iter().zip(expected)) {
                assert!((g - e).abs() / e < 0.10, "{}: {name} stroke {g:.2} ms, Table 1 says {e} ms", preset.name);
            }
        }
    }

    #[test]
    fn sequential_reads_reach_the_zone_media_rate() {
        for preset in hdd_presets() {
            let p = &preset.params;
            let n = p.capacity_bytes() / SECTOR;
            for (where_, lba, rate) in [("outer", 0, p.outer_mb_s), ("inner", n - 300_000, p.inner_mb_s)] {
                // 128 KiB reads, the host taking 30 us to issue the next one.
                let r = sequential_reads(p, lba, 1000, 128 * 1024, 30_000);
                let got = r.mb_per_s();
                assert!((got - rate).abs() / rate < 0.05, "{}: sequential {where_} {got:.1} MB/s, media rate {rate} MB/s", preset.name);
                let streamed = r.completions.iter().filter(|c| c.outcome != Outcome::Miss).count();
                assert!(streamed >= 998, "{}: only {streamed} of 1000 sequential reads avoided positioning", preset.name);
            }
        }
    }

    #[test]
    fn ncq_at_depth_32_raises_random_iops_by_a_plausible_factor() {
        for preset in hdd_presets() {
            let p = &preset.params;
            let qd1 = random_reads(p, 1, 3000, 4096, 11).iops();
            let qd32 = random_reads(p, 32, 3000, 4096, 11).iops();
            let factor = qd32 / qd1;
            assert!((1.5..=3.5).contains(&factor), "{}: depth 32 gives {qd32:.0} IOPS vs {qd1:.0} at depth 1 (x{factor:.2})", preset.name);
            let mut fifo = p.clone();
            fifo.ncq_depth = 1;
            let fifo32 = random_reads(&fifo, 32, 3000, 4096, 11).iops();
            assert!((fifo32 / qd1 - 1.0).abs() < 0.05, "{}: with ncq_depth 1, 32 outstanding should be FIFO ({fifo32:.0} vs {qd1:.0} IOPS)", preset.name);
        }
    }

    #[test]
    fn ncq_bounds_starvation() {
        let p = presets().into_iter().find(|p| p.name == "wd-red-1tb").unwrap().params;
        let r = random_reads(&p, 32, 5000, 4096, 3);
        let worst = r.completions.iter().map(|c| c.start_ns - c.arrival_ns).max().unwrap();
        // Past the age bound a command is served next; several may pass it at
        // once, each then waiting at most one slow access per older one.
        let bound = p.ncq_max_age_ms * 1e6 + p.ncq_depth as f64 * 60e6;
        assert!((worst as f64) < bound, "a request waited {} ms", worst / 1_000_000);
        let mean_wait = r.completions.iter().map(|c| (c.start_ns - c.arrival_ns) as f64).sum::<f64>() / r.completions.len() as f64;
        assert!((worst as f64) < 8.0 * mean_wait, "worst wait {} ms is far beyond the mean {} ms", worst / 1_000_000, mean_wait / 1e6);
    }

    /// Readahead windows of `window_kib` from 16 streams spread over the
    /// drive, each split by the host into pieces of at most `piece_kib`
    /// that are all queued before the drive decides; every piece's completion.
    fn split_windows(join_kib: u64, window_kib: u64, piece_kib: u64) -> Vec<Completion> {
        split_windows_apart(join_kib, window_kib, piece_kib, 0)
    }

    /// As [`split_windows`], the pieces arriving `gap_ns` apart.
    fn split_windows_apart(join_kib: u64, window_kib: u64, piece_kib: u64, gap_ns: u64) -> Vec<Completion> {
        let p = crate::params::preset("wd-red-1tb").unwrap().params;
        let mut drive = Drive::new(&p);
        drive.set_join_limit(join_kib * 1024);
        let sectors = |kib: u64| kib * 1024 / SECTOR;
        let mut id = 0;
        for stream in 0..16u64 {
            let start = drive.total_sectors() / 17 * (stream + 1) / 8 * 8;
            let mut at = 0;
            while at < window_kib {
                let len = piece_kib.min(window_kib - at);
                drive.submit(Request { id, arrival_ns: id * gap_ns, lba: start + sectors(at), sectors: sectors(len) });
                id += 1;
                at += len;
            }
        }
        let mut out = Vec::new();
        // Decide once everything has arrived, as a drive busy meanwhile would.
        drive.slots = [Reverse(id * gap_ns)].into();
        drive.advance(u64::MAX, &mut out);
        assert_eq!(out.len() as u64, id, "every piece completes");
        out
    }

    #[test]
    fn joining_serves_a_split_window_as_one_command() {
        // A 2 MiB window split at a loop device's 1280 KiB.
        let split = split_windows(0, 2048, 1280);
        let joined = split_windows(2048, 2048, 1280);
        let count = |cs: &[Completion], o: Outcome| cs.iter().filter(|c| c.outcome == o).count();
        assert_eq!(count(&joined, Outcome::Miss), 16, "one positioning per window");
        assert_eq!(count(&joined, Outcome::Joined), 16, "the other piece rides along");
        assert_eq!(count(&split, Outcome::Joined), 0, "no joining unless asked");
        for c in joined.iter().filter(|c| c.outcome == Outcome::Joined) {
            let head = joined.iter().find(|h| h.lba + h.sectors == c.lba).expect("a piece before it");
            assert_eq!((head.outcome, head.start_ns, head.end_ns), (Outcome::Miss, c.start_ns, c.end_ns), "served and completed together");
        }
        let end = |cs: &[Completion]| cs.iter().map(|c| c.end_ns).max().unwrap();
        assert!(end(&joined) <= end(&split), "one command per window is never slower: {} vs {} ns", end(&joined), end(&split));
    }

    #[test]
    fn joining_stops_at_the_limit_and_chains_pieces_below_it() {
        // Pieces of 512 KiB: 1 MiB and 1280 KiB limits join at most pairs.
        for limit in [1024, 1280] {
            let cs = split_windows(limit, 2048, 512);
            let joined = cs.iter().filter(|c| c.outcome == Outcome::Joined).count();
            assert!((16..=32).contains(&joined), "limit {limit}: {joined} pieces joined, between one and two per window");
            let mut commands: std::collections::BTreeMap<u64, u64> = Default::default();
            for c in &cs {
                *commands.entry(c.end_ns).or_default() += c.sectors * SECTOR;
            }
            assert!(commands.values().all(|&b| b <= 1024 * 1024), "limit {limit}: a command above two pieces: {commands:?}");
        }
        // A limit below two pieces changes nothing.
        let alone = split_windows(768, 2048, 512);
        let none = split_windows(0, 2048, 512);
        assert_eq!(alone, none);
        // 16 MiB takes a whole 4 MiB window of 512 KiB pieces.
        let whole = split_windows(16384, 4096, 512);
        assert_eq!(whole.iter().filter(|c| c.outcome == Outcome::Miss).count(), 16);
        assert_eq!(whole.iter().filter(|c| c.outcome == Outcome::Joined).count(), 16 * 7);
    }

    #[test]
    fn a_joined_window_costs_what_one_request_of_its_size_does() {
        // Commands of 2 MiB windows split at 1280 KiB and joined, and of the
        // same windows sent whole: the same starts and ends, the same order.
        let commands = |cs: Vec<Completion>| {
            let mut v: Vec<(u64, u64)> = cs.iter().map(|c| (c.start_ns, c.end_ns)).collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let joined = commands(split_windows(2048, 2048, 1280));
        assert_eq!(joined.len(), 16);
        assert_eq!(joined, commands(split_windows(0, 2048, 2048)));
    }

    #[test]
    fn a_read_after_a_joined_command_continues_its_stream() {
        let p = crate::params::preset("wd-red-1tb").unwrap().params;
        let mut drive = Drive::new(&p);
        drive.set_join_limit(2048 * 1024);
        let base = drive.total_sectors() / 3 / 8 * 8;
        // A busy drive: the window's pieces queue behind a far read.
        drive.submit(Request { id: 0, arrival_ns: 0, lba: 0, sectors: 8 });
        drive.submit(Request { id: 1, arrival_ns: 10, lba: base, sectors: 2560 });
        drive.submit(Request { id: 2, arrival_ns: 20, lba: base + 2560, sectors: 1536 });
        let mut out = Vec::new();
        drive.advance(u64::MAX, &mut out);
        assert_eq!(out.iter().map(|c| (c.id, c.outcome)).collect::<Vec<_>>(), [(0, Outcome::Miss), (1, Outcome::Miss), (2, Outcome::Joined)]);
        let end = out[2].end_ns;
        // The next 128 KiB of the file, asked for as the command completes.
        drive.submit(Request { id: 3, arrival_ns: end, lba: base + 4096, sectors: 256 });
        out.clear();
        drive.advance(u64::MAX, &mut out);
        assert!(matches!(out[0].outcome, Outcome::Stream | Outcome::Hit), "{:?}", out[0]);
    }

    #[test]
    fn the_chosen_request_takes_the_piece_before_it_too() {
        let p = crate::params::preset("wd-red-1tb").unwrap().params;
        let mut drive = Drive::new(&p);
        drive.set_join_limit(2048 * 1024);
        // The tail reached the queue first; a command from it starts at the head.
        drive.submit(Request { id: 7, arrival_ns: 0, lba: 5000 + 2560, sectors: 1536 });
        drive.submit(Request { id: 8, arrival_ns: 5, lba: 5000, sectors: 2560 });
        let (command, members) = drive.command_from(0, 2);
        assert_eq!((command.lba, command.sectors, command.arrival_ns), (5000, 4096, 0));
        assert_eq!(members, [0, 1]);
        // Beyond the limit it stays alone.
        drive.set_join_limit(1024 * 1024);
        assert_eq!(drive.command_from(0, 2).1, [0]);
    }

    #[test]
    fn joining_takes_only_requests_that_arrived_together() {
        let near = split_windows_apart(2048, 2048, 1280, JOIN_ARRIVAL_NS / 2);
        assert_eq!(near.iter().filter(|c| c.outcome == Outcome::Joined).count(), 16, "pieces of one request");
        let apart = split_windows_apart(2048, 2048, 1280, JOIN_ARRIVAL_NS + 1);
        assert_eq!(apart.iter().filter(|c| c.outcome == Outcome::Joined).count(), 0, "requests queued at separate times");
    }

    #[test]
    fn timeline_does_not_depend_on_host_lateness() {
        use rand::{Rng, SeedableRng};
        for preset in presets() {
            let p = &preset.params;
            let n = p.capacity_bytes() / SECTOR;
            // 400 requests all queued at time 0: 300 random, 100 sequential.
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
            let reqs: Vec<Request> = (0..400u64)
                .map(|i| {
                    let lba = if i % 4 == 0 { 1_000_000 + i * 256 } else { rng.gen_range(0..n - 256) };
                    Request { id: i, arrival_ns: 0, lba, sectors: 256 }
                })
                .collect();
            let run = |late: &mut dyn FnMut() -> u64| {
                let mut d = Drive::new(p);
                reqs.iter().for_each(|r| d.submit(*r));
                let mut out = Vec::new();
                let mut now = 0;
                while d.outstanding() > 0 {
                    now = now.max(d.next_event_ns().unwrap()) + late();
                    d.advance(now, &mut out);
                }
                out.into_iter().map(|c| (c.id, c.start_ns, c.end_ns)).collect::<Vec<_>>()
            };
            let on_time = run(&mut || 0);
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
            let late = run(&mut || rng.gen_range(0..5_000_000));
            assert_eq!(on_time.len(), 400);
            let mut a = on_time.clone();
            let mut b = late.clone();
            a.sort();
            b.sort();
            assert_eq!(a, b, "{}: late wake-ups changed the drive's timeline", preset.name);
        }
    }

    #[test]
    fn sequential_throughput_survives_late_host_wakeups() {
        // Depth 1, the host waking 0-2 ms late each time: the drive keeps
        // reading ahead, so throughput stays at the media rate.
        use rand::{Rng, SeedableRng};
        let p = presets().into_iter().find(|p| p.name == "wd-red-1tb").unwrap().params;
        let mut d = Drive::new(&p);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let r = closed_loop(&mut d, 4, 2000, |i| (i as u64 * 256, 256), |_| rng.gen_range(0..2_000_000));
        assert!((r.mb_per_s() - p.outer_mb_s).abs() / p.outer_mb_s < 0.05, "{:.1} MB/s", r.mb_per_s());
    }

    #[test]
    fn read_ahead_segments_serve_returning_streams_until_evicted() {
        let p = presets().into_iter().find(|p| p.name == "wd-red-1tb").unwrap().params;
        let segments = p.cache_segments as u64;
        let mut d = Drive::new(&p);
        let mut out = Vec::new();
        let mut now = 0;
        let issue = |d: &mut Drive, out: &mut Vec<Completion>, now: &mut u64, lba: u64| {
            d.submit(Request { id: lba, arrival_ns: *now, lba, sectors: 128 });
            // Let the drive finish and read ahead for 100 ms.
            *now = d.next_event_ns().unwrap().max(*now) + 100_000_000;
            d.advance(*now, out);
            out.pop().unwrap()
        };
        // One read in each of `segments` streams, far apart; then the next
        // 64 KiB of each stream: all of them were read ahead.
        for s in 0..segments {
            assert_eq!(issue(&mut d, &mut out, &mut now, s * 100_000_000).outcome, Outcome::Miss);
        }
        for s in 0..segments {
            assert_eq!(issue(&mut d, &mut out, &mut now, s * 100_000_000 + 128).outcome, Outcome::Hit, "stream {s}");
        }
        // One more stream evicts the least recently used segment (stream 0).
        issue(&mut d, &mut out, &mut now, segments * 100_000_000);
        assert_eq!(issue(&mut d, &mut out, &mut now, 256).outcome, Outcome::Miss);
    }

    #[test]
    fn ssd_is_fast_and_parallel() {
        let p = presets().into_iter().find(|p| p.name == "ssd").unwrap().params;
        let qd1 = random_reads(&p, 1, 2000, 4096, 1);
        let expected_ms = p.command_overhead_ms + p.ssd_read_latency_us / 1e3 + 4096.0 / (p.outer_mb_s * 1e3);
        assert!((qd1.mean_service_ms() - expected_ms).abs() / expected_ms < 0.10);
        let qd32 = random_reads(&p, 32, 20000, 4096, 1);
        assert!(qd32.iops() / qd1.iops() > 5.0, "{:.0} vs {:.0}", qd32.iops(), qd1.iops());
        let seq = random_reads(&p, 32, 2000, 1 << 20, 1);
        assert!((seq.mb_per_s() - p.outer_mb_s).abs() / p.outer_mb_s < 0.05, "{:.0} MB/s", seq.mb_per_s());
    }

    #[test]
    fn geometry_is_zoned_outer_to_inner() {
        let p = presets().into_iter().find(|p| p.name == "wd-red-1tb").unwrap().params;
        let g = Geometry::new(&p);
        let outer = g.media_rate(0) / 1e6;
        let inner = g.media_rate(g.total_sectors() - 1) / 1e6;
        assert!(outer > 1.9 * inner && outer < 2.1 * inner, "{outer} vs {inner}");
        // Inner zones hold more cylinders per byte.
        assert!(g.cylinder(g.total_sectors() - 1) - g.cylinder(g.total_sectors() / 2) > g.cylinder(g.total_sectors() / 2));
        assert_eq!(g.cylinder(g.total_sectors() - 1), g.cylinders() - 1);
    }
}
