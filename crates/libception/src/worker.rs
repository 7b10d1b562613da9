//! Disk workers: one FIFO queue and one read at a time per worker.
//!
//! The receptionist submits a [`ReadJob`] (the passed file, the planned byte
//! range, the waiting client) to the worker that owns the file's disk. Under
//! the queue lock it first looks for a queued or in-flight read of the same
//! file that already covers the client's range; if there is one the client
//! joins it (its fd is closed at once, it gets the reply of that read) instead
//! of queueing a second read.
//!
//! The worker thread pops one job, opens its own description of the file
//! (readahead off, so the disk sees exactly the planned range), skips the
//! prefix of the range that is already resident, `pread`s the rest into a
//! reusable buffer, closes both descriptors, reports the
//! read to the prefetch controller and stats, and replies to every waiter
//! (with [`ReplyWhen::Range`], each trusted waiter as soon as the chunk that
//! completes its own range is read).
//! In-flight and queue counters are updated around each read, so the stats'
//! `max_in_flight` is a direct observation of the serialization guarantee.
//!
//! Promotion (`--promote`, when: `promotion.rs`): right after the read, the worker reads the same
//! bytes a second time from the page cache (`RWF_NOWAIT`: never from the
//! disk). A page read twice moves to the kernel's active LRU list. Since Linux
//! 4.7 the inactive file list is kept at about 1/sqrt(10 x GiB) of the cache
//! (under an eighth of 8 GiB), and a page read once waits for its next use
//! there: prefetched data a stream needs tens of seconds later is evicted
//! first and read again (docs/daemon.md, "Promotion").
//!
//! Fairness: the queue is one FIFO per client (uid), served round-robin, so
//! a client with many queued reads delays another client's next read by at
//! most one read per other client, not by its whole backlog.
//!
//! Order (`--queue-order`): within a client's turn the worker takes its
//! oldest read (`fifo`, paper 000's Reception), or (`position`) the read that
//! lies next on the disk after the previous one, sweeping upwards and
//! starting again from the lowest (C-SCAN), a client's read that has waited
//! `max_wait` going first. One read at a time leaves the drive almost
//! nothing to reorder (its NCQ sees one command), so under a long queue FIFO
//! pays a seek across the library per read; the sweep makes them short.
//! Positions (device, byte) come from FIEMAP (`placement.rs`), looked up by
//! the worker before it picks, with the queue unlocked (the lookup may wait
//! on the filesystem; the event loop never does); a read without one (a
//! filesystem that does not map) is taken when it is its client's oldest.
//!
//! Lock rule: `DiskWorker::queue` is held only to move jobs and waiters
//! between the queue, the in-flight slot and local variables; no I/O, no
//! socket send and no fd close happens under it.
//!
//! A client that disconnects is cancelled: its waiters are removed, and a
//! queued job left with no waiter is dropped (closing its fd), unless a
//! concealed waiter asked for it (see `cancel_connection`). An in-flight
//! read always completes; replies to closed connections are skipped.

use crate::conn::Connection;
use crate::prefetch::{PlannedRead, PrefetchController, ReadObservation};
use crate::limits::Charge;
use crate::promotion::Promotion;
use crate::residency;
use crate::stats::{DiskStats, Stats, WorkerStats};
use libception_proto::{reply_flags, Reply};
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Size of each pread into the worker's reusable buffer.
pub const READ_CHUNK: usize = 1 << 20;

pub use crate::prefetch::FileKey;

/// A client waiting for a read.
pub struct Waiter {
    pub conn: Arc<Connection>,
    pub op: u16,
    pub seq: u64,
    pub joined: bool,
    /// The peer may not learn residency: reply status only (see `trust.rs`).
    pub conceal: bool,
    /// When its FETCH queued a read or joined one (a joiner keeps its own
    /// time): the reply ends the wait of the peer's thread, which is charged
    /// to the client (`Stats::on_answered`).
    pub since: Instant,
    /// The end of the range it asked for (its plan's `want_end`): with
    /// [`ReplyWhen::Range`] it is answered once the read has passed it.
    pub want_end: u64,
}

/// When a worker answers the clients waiting on a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyWhen {
    /// Each as soon as its own range is resident (after the read chunk that
    /// completes it); the read goes on to the prefetch size meanwhile.
    /// Concealed waiters are answered at the end all the same (an early
    /// answer's timing would tell a resident range from a read one).
    Range,
    /// All at the end of the whole read (paper 000's Reception).
    Read,
}

/// Where a read lies: the device number and the byte on it (devices in
/// number order, then bytes: a worker serving several disks sweeps each).
pub type Place = (u64, u64);

/// In which order a worker takes a client's queued reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueOrder {
    /// As they came.
    Fifo,
    /// Next on the disk after the previous read (C-SCAN); a read that has
    /// waited `max_wait` first.
    Position { max_wait: Duration },
}

/// A read to do on one disk.
pub struct ReadJob {
    /// The uid whose FIFO it waits in (round-robin between uids).
    pub owner: u32,
    /// Its share of the owner's queue budget, given back when the job goes.
    pub charge: Charge,
    pub file: File,
    pub key: FileKey,
    pub plan: PlannedRead,
    pub disk: Arc<DiskStats>,
    pub waiters: Vec<Waiter>,
    pub enqueued: Instant,
    /// Where the plan's start lies, looked up by the worker before it picks
    /// (`QueueOrder::Position` only): `None` until then, `Some(None)` where
    /// the filesystem does not map files.
    pub position: Option<Option<Place>>,
    /// Its number in the worker's queue (set by `submit`), to store a
    /// position looked up while the queue was unlocked.
    pub id: u64,
    /// A concealed waiter hung up on it: it is made all the same (see
    /// `cancel_connection`).
    pub abandoned_by_concealed: bool,
}

struct InFlight {
    key: FileKey,
    plan: PlannedRead,
    waiters: Vec<Waiter>,
}

struct Queue {
    jobs: Jobs,
    in_flight: Option<InFlight>,
    stopping: bool,
    /// Where the previous read ended on the disk (position order).
    head: Option<Place>,
    /// The number the next submitted job gets.
    next_id: u64,
}

/// Something queued on behalf of a client.
trait Owned {
    fn owner(&self) -> u32;
    /// Its place on the disk, if known.
    fn position(&self) -> Option<Place> {
        None
    }
    /// When it was queued.
    fn enqueued(&self) -> Option<Instant> {
        None
    }
}

impl Owned for ReadJob {
    fn owner(&self) -> u32 {
        self.owner
    }
    fn position(&self) -> Option<Place> {
        self.position.flatten()
    }
    fn enqueued(&self) -> Option<Instant> {
        Some(self.enqueued)
    }
}

/// Queued jobs: a FIFO per owner, owners taken in turn.
struct Jobs<T = ReadJob> {
    by_owner: HashMap<u32, VecDeque<T>>,
    /// Owners with queued jobs, next to serve first.
    turns: VecDeque<u32>,
    len: usize,
}

impl<T> Default for Jobs<T> {
    fn default() -> Self {
        Jobs { by_owner: HashMap::new(), turns: VecDeque::new(), len: 0 }
    }
}

impl<T: Owned> Jobs<T> {
    fn len(&self) -> usize {
        self.len
    }

    fn push(&mut self, job: T) {
        let owner = job.owner();
        let fifo = self.by_owner.entry(owner).or_default();
        if fifo.is_empty() {
            self.turns.push_back(owner);
        }
        fifo.push_back(job);
        self.len += 1;
    }

    #[cfg(test)]
    fn pop(&mut self) -> Option<T> {
        self.pop_in(QueueOrder::Fifo, None, Instant::now())
    }

    /// The next job: the next owner's, in `order` (`head`: where the disk's
    /// previous read ended; `now`: for the position order's age limit).
    fn pop_in(&mut self, order: QueueOrder, head: Option<Place>, now: Instant) -> Option<T> {
        let owner = self.turns.pop_front()?;
        let fifo = self.by_owner.get_mut(&owner).expect("an owner in turns has a FIFO");
        let index = match order {
            QueueOrder::Fifo => 0,
            QueueOrder::Position { max_wait } => next_by_position(fifo, head, now, max_wait),
        };
        let job = fifo.remove(index).expect("an owner in turns has a job");
        if fifo.is_empty() {
            self.by_owner.remove(&owner);
        } else {
            self.turns.push_back(owner);
        }
        self.len -= 1;
        Some(job)
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.by_owner.values_mut().flatten()
    }

    /// Removes the jobs `keep` rejects, in queue order per owner.
    fn take_unless(&mut self, mut keep: impl FnMut(&mut T) -> bool) -> Vec<T> {
        let mut taken = Vec::new();
        for fifo in self.by_owner.values_mut() {
            let mut kept = VecDeque::with_capacity(fifo.len());
            for mut job in fifo.drain(..) {
                if keep(&mut job) {
                    kept.push_back(job);
                } else {
                    taken.push(job);
                }
            }
            *fifo = kept;
        }
        self.by_owner.retain(|_, fifo| !fifo.is_empty());
        let by_owner = &self.by_owner;
        self.turns.retain(|o| by_owner.contains_key(o));
        self.len -= taken.len();
        taken
    }
}

/// The index in `fifo` (oldest first, not empty) of the job to take in
/// position order: the oldest if it has waited `max_wait` or has no position;
/// else the lowest position at or past `head`, or the lowest of all when none
/// lies past it (the sweep starts again).
fn next_by_position<T: Owned>(fifo: &VecDeque<T>, head: Option<Place>, now: Instant, max_wait: Duration) -> usize {
    let oldest = &fifo[0];
    let overdue = oldest.enqueued().is_some_and(|t| now.saturating_duration_since(t) >= max_wait);
    if overdue || oldest.position().is_none() {
        return 0;
    }
    let placed = fifo.iter().enumerate().filter_map(|(i, j)| Some((j.position()?, i)));
    let ahead = placed.clone().filter(|(p, _)| head.is_none_or(|h| *p >= h)).min();
    ahead.or_else(|| placed.min()).map_or(0, |(_, i)| i)
}

/// What happened to a submitted job.
pub enum Submitted {
    /// Queued behind `ahead` other reads.
    Queued { ahead: usize },
    /// Joined an existing read; the job's file is handed back to be closed.
    Joined { in_flight: bool, file: File },
}

pub struct DiskWorker {
    pub index: usize,
    queue: Mutex<Queue>,
    wake: Condvar,
    pub stats: Arc<WorkerStats>,
    controller: Arc<dyn PrefetchController>,
    /// Whether to read each range a second time from the cache (see the
    /// file comment).
    promotion: Arc<Promotion>,
    /// In which order queued reads are taken.
    order: QueueOrder,
    /// When waiters are answered.
    reply: ReplyWhen,
    all_stats: Arc<Stats>,
}

fn covers(key: FileKey, plan: &PlannedRead, other_key: FileKey, other: &PlannedRead) -> bool {
    key == other_key && plan.start <= other.start && other.want_end <= plan.end
}

impl DiskWorker {
    pub fn new(index: usize, controller: Arc<dyn PrefetchController>, stats: Arc<Stats>, promotion: Arc<Promotion>, order: QueueOrder, reply: ReplyWhen) -> Self {
        DiskWorker {
            index,
            queue: Mutex::new(Queue { jobs: Jobs::default(), in_flight: None, stopping: false, head: None, next_id: 0 }),
            wake: Condvar::new(),
            stats: stats.add_worker(index),
            controller,
            promotion,
            order,
            reply,
            all_stats: stats,
        }
    }

    fn orders_by_position(&self) -> bool {
        matches!(self.order, QueueOrder::Position { .. })
    }

    /// Position order: looks up where every queued read not looked up yet
    /// lies, with `q` unlocked meanwhile (FIEMAP may wait on the filesystem),
    /// through duplicates of their descriptors (a read cancelled meanwhile
    /// keeps its own), and stores the answers. Returns the queue locked.
    fn place_queued<'a>(&'a self, mut q: std::sync::MutexGuard<'a, Queue>) -> std::sync::MutexGuard<'a, Queue> {
        if !self.orders_by_position() {
            return q;
        }
        let unplaced: Vec<(u64, Option<File>, u64)> =
            q.jobs.iter_mut().filter(|j| j.position.is_none()).map(|j| (j.id, j.file.try_clone().ok(), j.plan.start)).collect();
        if unplaced.is_empty() {
            return q;
        }
        drop(q);
        // The duplicates close here, with the queue unlocked.
        let found: HashMap<u64, Option<Place>> =
            unplaced.into_iter().map(|(id, file, start)| (id, file.and_then(|f| crate::placement::place(&f, start)))).collect();
        let mut q = self.queue.lock().unwrap();
        for j in q.jobs.iter_mut() {
            if let Some(p) = found.get(&j.id) {
                j.position = Some(*p);
            }
        }
        q
    }

    /// Queues a job, or joins it to a read that already covers its range.
    pub fn submit(&self, mut job: ReadJob) -> Submitted {
        let mut q = self.queue.lock().unwrap();
        if let Some(f) = q.in_flight.as_mut() {
            if covers(f.key, &f.plan, job.key, &job.plan) {
                f.waiters.extend(job.waiters.drain(..).map(|w| Waiter { joined: true, ..w }));
                return Submitted::Joined { in_flight: true, file: job.file };
            }
        }
        if let Some(existing) = q.jobs.iter_mut().find(|j| covers(j.key, &j.plan, job.key, &job.plan)) {
            existing.waiters.extend(job.waiters.drain(..).map(|w| Waiter { joined: true, ..w }));
            return Submitted::Joined { in_flight: false, file: job.file };
        }
        job.id = q.next_id;
        q.next_id += 1;
        let ahead = q.jobs.len();
        job.disk.on_queued(ahead);
        self.stats.on_queued();
        q.jobs.push(job);
        drop(q);
        self.wake.notify_one();
        Submitted::Queued { ahead }
    }

    /// Removes every waiter of connection `conn_id`; drops queued jobs left
    /// without waiters, except those a concealed waiter asked for: a FETCH
    /// whose reply says nothing of residency must load its range like a
    /// `read` would, or hanging up before a miss's slow reply would probe
    /// the cache without changing it. Returns (waiters removed, reads
    /// cancelled).
    pub fn cancel_connection(&self, conn_id: u64) -> (usize, usize) {
        let dropped_jobs;
        let mut removed = 0;
        {
            let mut q = self.queue.lock().unwrap();
            if let Some(f) = q.in_flight.as_mut() {
                let before = f.waiters.len();
                f.waiters.retain(|w| w.conn.id != conn_id);
                removed += before - f.waiters.len();
            }
            dropped_jobs = q.jobs.take_unless(|job| {
                let before = job.waiters.len();
                job.abandoned_by_concealed |= job.waiters.iter().any(|w| w.conn.id == conn_id && w.conceal);
                job.waiters.retain(|w| w.conn.id != conn_id);
                removed += before - job.waiters.len();
                job.abandoned_by_concealed || !job.waiters.is_empty()
            });
        }
        self.count_cancelled(&dropped_jobs);
        (removed, dropped_jobs.len()) // dropping the jobs closes their fds
    }

    /// Nothing queued and nothing in flight.
    pub fn idle(&self) -> bool {
        let q = self.queue.lock().unwrap();
        q.jobs.len() == 0 && q.in_flight.is_none()
    }

    /// Asks the worker to finish its queue and exit. Queued reads nobody
    /// waits for any more (kept for a concealed peer that hung up) are
    /// dropped: no peer is left to time them, and a stop should not wait on
    /// them.
    pub fn stop(&self) {
        let abandoned = {
            let mut q = self.queue.lock().unwrap();
            q.stopping = true;
            q.jobs.take_unless(|job| !job.waiters.is_empty())
        };
        self.wake.notify_all();
        self.count_cancelled(&abandoned);
    }

    /// Counts queued jobs taken out unread (their fds close when dropped).
    fn count_cancelled(&self, jobs: &[ReadJob]) {
        for job in jobs {
            job.disk.on_cancelled();
            self.stats.on_dequeued();
        }
    }

    /// The worker thread's body.
    pub fn run(&self) {
        let mut buf = vec![0u8; READ_CHUNK];
        loop {
            let job = {
                let mut q = self.queue.lock().unwrap();
                loop {
                    q = self.place_queued(q);
                    let head = q.head;
                    if let Some(mut job) = q.jobs.pop_in(self.order, head, Instant::now()) {
                        q.head = job.position.flatten().map(|(dev, p)| (dev, p + (job.plan.end - job.plan.start))).or(head);
                        // Whoever asked for the read, credited with its bytes
                        // at the end (an early answer may take it out first).
                        let asker = job.waiters.first().map(|w| w.conn.client.clone());
                        q.in_flight = Some(InFlight {
                            key: job.key,
                            plan: job.plan,
                            waiters: std::mem::take(&mut job.waiters),
                        });
                        break Some((job, asker));
                    }
                    if q.stopping {
                        break None;
                    }
                    q = self.wake.wait(q).unwrap();
                }
            };
            let Some((job, asker)) = job else { return };
            self.stats.on_dequeued();
            job.disk.on_dequeued();
            self.serve(job, asker, &mut buf);
        }
    }

    fn serve(&self, job: ReadJob, asker: Option<Arc<crate::stats::ClientStats>>, buf: &mut [u8]) {
        let ReadJob { file, key, plan, disk, enqueued, charge, .. } = job;
        let queue_wait = enqueued.elapsed();
        let started = Instant::now();
        disk.begin_read(queue_wait);
        self.stats.begin_read();

        let own = own_description(&file);
        let reader = own.as_ref().unwrap_or(&file);
        if self.controller.wants_probe(self.index) {
            let result = crate::prefetch::probe::run_for(&disk.name, reader);
            tracing::info!(disk = %disk.name, worker = self.index, ?result, "disk probe for the start size");
            self.controller.observe_probe(self.index, &disk.name, result);
        }
        let prefix = residency::resident_prefix(reader.as_fd(), plan.start, plan.end).unwrap_or(0);
        let read_start = plan.start + prefix;
        let early = self.reply == ReplyWhen::Range;
        if early {
            self.answer_ready(read_start, 0);
        }
        let (bytes, result) = pread_range(reader, read_start, plan.end, buf, |pos| {
            if early {
                self.answer_ready(pos, pos - read_start);
            }
        });
        let busy = started.elapsed();
        if bytes > 0 && self.promotion.promotes(self.controller.as_ref()) {
            disk.on_promoted(promote_range(reader, read_start, read_start + bytes, buf));
        }
        drop(own);

        self.stats.end_read(busy, bytes);
        disk.end_read(busy, bytes, result.is_ok());
        drop(file);
        drop(charge);
        self.controller.observe_read(&ReadObservation {
            disk: &disk.name,
            worker: self.index,
            file: key,
            plan,
            read_start,
            ok: result.is_ok(),
            bytes_read: bytes,
            busy,
        });
        if let Err(e) = &result {
            tracing::warn!(disk = %disk.name, start = plan.start, end = plan.end, "read failed after {bytes} bytes: {e}");
        }
        tracing::debug!(disk = %disk.name, start = plan.start, end = plan.end, prefix, bytes, ?busy, ?queue_wait, "read done");
        if let Some(c) = asker {
            c.on_read(bytes);
        }

        let waiters = {
            let mut q = self.queue.lock().unwrap();
            q.in_flight.take().map(|f| f.waiters).unwrap_or_default()
        };
        let status = match &result {
            Ok(()) => 0,
            Err(e) => -(e.raw_os_error().unwrap_or(libc::EIO)),
        };
        let mut flags = 0;
        if bytes > 0 {
            flags |= reply_flags::READ;
        }
        if prefix >= plan.end - plan.start {
            flags |= reply_flags::RESIDENT;
        }
        // The resident prefix and what was read lie before read_start +
        // bytes, and every waiter's offset is at or past plan.start (a
        // joiner's range lies inside the plan).
        let resident_end = if status == 0 { read_start + bytes } else { 0 };
        for w in waiters {
            self.answer(w, status, flags, bytes, resident_end);
        }
    }

    /// With [`ReplyWhen::Range`], during a read: answers the in-flight
    /// read's waiters whose range ends at or before `upto` (resident from
    /// the plan's start up to there, `bytes` of it read so far), except the
    /// concealed ones. The others stay for a later chunk or the end.
    fn answer_ready(&self, upto: u64, bytes: u64) {
        let ready: Vec<Waiter> = {
            let mut q = self.queue.lock().unwrap();
            let Some(f) = q.in_flight.as_mut() else { return };
            if !f.waiters.iter().any(|w| !w.conceal && w.want_end <= upto) {
                return;
            }
            let (ready, waiting) = std::mem::take(&mut f.waiters).into_iter().partition(|w| !w.conceal && w.want_end <= upto);
            f.waiters = waiting;
            ready
        };
        let flags = if bytes > 0 { reply_flags::READ } else { reply_flags::RESIDENT };
        for w in ready {
            self.answer(w, 0, flags, bytes, upto);
        }
    }

    /// Sends `w` its reply (`status`, and for a peer that may learn
    /// residency the flags, bytes read and resident end), charges its wait
    /// to its client and lets its connection be read again.
    fn answer(&self, w: Waiter, status: i32, mut flags: u32, bytes: u64, resident_end: u64) {
        if w.joined {
            flags |= reply_flags::JOINED;
        }
        self.all_stats.on_answered(&w.conn.client, w.since.elapsed());
        let reply = if w.conceal {
            Reply { status, ..Reply::ok(w.op, w.seq) }
        } else {
            Reply { status, flags, bytes_read: bytes, resident_end, ..Reply::ok(w.op, w.seq) }
        };
        if w.conn.send(&reply, None) {
            w.conn.resume_reading();
        }
    }
}

/// The daemon's own open file description of the client's file, with
/// kernel readahead off: reading through the client's description would let
/// its readahead state extend the read past the plan (unserialized and
/// uncounted) and would change that state for the client. Opened through
/// /proc/self/fd (read-only, close-on-exec), which works for unlinked files
/// too. When that fails (no /proc, or not permitted), the client's
/// description is used as before and the failure is logged.
fn own_description(file: &File) -> Option<File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let path = format!("/proc/self/fd/{}", file.as_raw_fd());
    match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_CLOEXEC | libc::O_NOCTTY).open(&path) {
        Ok(own) => {
            // SAFETY: advice on a descriptor we own.
            let rc = unsafe { libc::posix_fadvise(own.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
            if rc != 0 {
                crate::warn_limited!("reopen", "POSIX_FADV_RANDOM on the daemon's own description failed: {}", io::Error::from_raw_os_error(rc));
            }
            Some(own)
        }
        Err(e) => {
            crate::warn_limited!("reopen", "reopening the client's file through {path} failed ({e}); reading through the client's description");
            None
        }
    }
}

/// Reads `[start, end)` with pread in chunks into `buf`, discarding the data
/// (the point is the page cache), calling `progress` with the position after
/// each chunk. Stops early at end of file.
fn pread_range(file: &File, start: u64, end: u64, buf: &mut [u8], mut progress: impl FnMut(u64)) -> (u64, io::Result<()>) {
    let mut pos = start;
    while pos < end {
        let want = ((end - pos) as usize).min(buf.len());
        match file.read_at(&mut buf[..want], pos) {
            Ok(0) => break,
            Ok(n) => {
                pos += n as u64;
                progress(pos);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return (pos - start, Err(e)),
        }
    }
    (pos - start, Ok(()))
}

/// Reads `[start, end)` a second time, from the page cache only
/// (`RWF_NOWAIT`), so that the kernel marks its pages active; returns the
/// bytes read. Stops at the first byte that is not cached (evicted already, or
/// a kernel without `RWF_NOWAIT` for reads: nothing is promoted then).
fn promote_range(file: &File, start: u64, end: u64, buf: &mut [u8]) -> u64 {
    use std::os::fd::AsRawFd;
    let mut pos = start;
    while pos < end {
        let want = ((end - pos) as usize).min(buf.len());
        let iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: want };
        // SAFETY: one iovec over `buf[..want]`, which outlives the call.
        let n = unsafe { libc::preadv2(file.as_raw_fd(), &iov, 1, pos as libc::off_t, libc::RWF_NOWAIT) };
        match n {
            n if n > 0 => pos += n as u64,
            -1 if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => continue,
            _ => break,
        }
    }
    pos - start
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Owned for (u32, u32) {
        fn owner(&self) -> u32 {
            self.0
        }
    }

    #[test]
    fn clients_are_served_in_turn_each_in_its_own_order() {
        let mut jobs = Jobs::default();
        for j in 0..5 {
            jobs.push((1000, j)); // one client queues a backlog first
        }
        jobs.push((33, 0));
        jobs.push((33, 1));
        jobs.push((7, 0));
        let order: Vec<_> = std::iter::from_fn(|| jobs.pop()).collect();
        assert_eq!(order, [(1000, 0), (33, 0), (7, 0), (1000, 1), (33, 1), (1000, 2), (1000, 3), (1000, 4)]);
        assert_eq!(jobs.len(), 0);
    }

    /// A queued read for the position order: owner, disk position, queued when.
    #[derive(Debug, PartialEq)]
    struct Placed(u32, Option<u64>, Instant);

    impl Owned for Placed {
        fn owner(&self) -> u32 {
            self.0
        }
        fn position(&self) -> Option<Place> {
            self.1.map(|p| (8, p))
        }
        fn enqueued(&self) -> Option<Instant> {
            Some(self.2)
        }
    }

    /// Pops every job in position order, the head following each read
    /// (`len` bytes long) as the worker moves it; the positions taken.
    fn sweep(jobs: &mut Jobs<Placed>, head: Option<u64>, now: Instant, max_wait: Duration) -> Vec<Option<u64>> {
        let order = QueueOrder::Position { max_wait };
        let mut head = head.map(|p| (8, p));
        std::iter::from_fn(|| {
            let job = jobs.pop_in(order, head, now)?;
            head = job.position().map(|(d, p)| (d, p + 10)).or(head);
            Some(job.1)
        })
        .collect()
    }

    #[test]
    fn the_position_order_sweeps_up_from_the_head_and_starts_again_from_the_lowest() {
        let t = Instant::now();
        let mut jobs = Jobs::default();
        for p in [500, 100, 900, 300, 700] {
            jobs.push(Placed(33, Some(p), t));
        }
        assert_eq!(sweep(&mut jobs, Some(400), t, Duration::from_secs(2)), [Some(500), Some(700), Some(900), Some(100), Some(300)]);
        // FIFO takes them as they came.
        for p in [500, 100, 900] {
            jobs.push(Placed(33, Some(p), t));
        }
        let fifo: Vec<_> = std::iter::from_fn(|| jobs.pop_in(QueueOrder::Fifo, Some((8, 400)), t)).map(|j| j.1).collect();
        assert_eq!(fifo, [Some(500), Some(100), Some(900)]);
    }

    #[test]
    fn an_overdue_or_unplaced_oldest_read_goes_first() {
        let t = Instant::now();
        let wait = Duration::from_millis(100);
        let mut jobs = Jobs::default();
        jobs.push(Placed(33, Some(50), t)); // behind the head, queued first
        jobs.push(Placed(33, Some(600), t + wait));
        jobs.push(Placed(33, Some(800), t + wait));
        // Not yet overdue: the sweep goes on from 500 first.
        assert_eq!(sweep(&mut jobs, Some(500), t + wait / 2, wait), [Some(600), Some(800), Some(50)]);
        jobs.push(Placed(33, Some(50), t));
        jobs.push(Placed(33, Some(600), t + wait));
        // Overdue: it goes first, then the sweep goes on from it.
        assert_eq!(sweep(&mut jobs, Some(500), t + wait, wait), [Some(50), Some(600)]);
        // A read the filesystem could not place is taken when it is the oldest.
        jobs.push(Placed(33, None, t));
        jobs.push(Placed(33, Some(10), t));
        jobs.push(Placed(33, Some(5), t));
        assert_eq!(sweep(&mut jobs, None, t, wait), [None, Some(5), Some(10)]);
    }

    /// A read on device `dev` at byte `p`.
    struct OnDevice(u64, u64);

    impl Owned for OnDevice {
        fn owner(&self) -> u32 {
            0
        }
        fn position(&self) -> Option<Place> {
            Some((self.0, self.1))
        }
        fn enqueued(&self) -> Option<Instant> {
            None
        }
    }

    #[test]
    fn a_worker_serving_several_devices_sweeps_each_in_device_order() {
        let mut jobs = Jobs::default();
        for (dev, p) in [(9, 100), (3, 500), (9, 50), (3, 200), (5, 10)] {
            jobs.push(OnDevice(dev, p));
        }
        let order = QueueOrder::Position { max_wait: Duration::from_secs(9) };
        let mut head = Some((3, 300));
        let got: Vec<Place> = std::iter::from_fn(|| {
            let j = jobs.pop_in(order, head, Instant::now())?;
            head = Some((j.0, j.1 + 1));
            Some((j.0, j.1))
        })
        .collect();
        assert_eq!(got, [(3, 500), (5, 10), (9, 50), (9, 100), (3, 200)]);
    }

    #[test]
    fn clients_still_take_turns_in_position_order() {
        let t = Instant::now();
        let mut jobs = Jobs::default();
        for p in [900, 100, 500] {
            jobs.push(Placed(1000, Some(p), t));
        }
        jobs.push(Placed(7, Some(50), t));
        let order: Vec<_> = std::iter::from_fn(|| jobs.pop_in(QueueOrder::Position { max_wait: Duration::from_secs(9) }, Some((8, 400)), t)).map(|j| (j.0, j.1)).collect();
        assert_eq!(order, [(1000, Some(500)), (7, Some(50)), (1000, Some(900)), (1000, Some(100))]);
    }

    #[test]
    fn taking_jobs_out_keeps_turns_and_length_right() {
        let mut jobs = Jobs::default();
        for (o, j) in [(1, 0), (2, 0), (1, 1), (3, 0)] {
            jobs.push((o, j));
        }
        let taken = jobs.take_unless(|job| job.0 != 2 && *job != (1, 0));
        assert_eq!(taken.len(), 2);
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs.iter_mut().count(), 2);
        let order: Vec<_> = std::iter::from_fn(|| jobs.pop()).collect();
        assert_eq!(order, [(1, 1), (3, 0)]);
    }
}
