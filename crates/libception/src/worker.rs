//! Disk workers: one FIFO queue and one read at a time per worker.
//!
//! The receptionist submits a [`ReadJob`] (the passed file, the planned byte
//! range, the waiting client) to the worker that owns the file's disk. Under
//! the queue lock it first looks for a queued or in-flight read of the same
//! file that already covers the client's range; if there is one the client
//! joins it (its fd is closed at once, it gets the reply of that read) instead
//! of queueing a second read.
//!
//! The worker thread pops one job, skips the prefix of the range that is
//! already resident, `pread`s the rest into a reusable buffer (never `read`:
//! the fd shares the client's file offset), closes the passed fd, reports the
//! read to the prefetch controller and stats, and replies to every waiter.
//! In-flight and queue counters are updated around each read, so the stats'
//! `max_in_flight` is a direct observation of the serialization guarantee.
//!
//! Lock rule: `DiskWorker::queue` is held only to move jobs and waiters
//! between the queue, the in-flight slot and local variables; no I/O, no
//! socket send and no fd close happens under it.
//!
//! A client that disconnects is cancelled: its waiters are removed, and a
//! queued job left with no waiter is dropped (closing its fd). An in-flight
//! read always completes; replies to closed connections are skipped.

use crate::conn::Connection;
use crate::prefetch::{PlannedRead, PrefetchController, ReadObservation};
use crate::residency;
use crate::stats::{DiskStats, Stats, WorkerStats};
use libception_proto::{reply_flags, Reply};
use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

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
}

/// A read to do on one disk.
pub struct ReadJob {
    pub file: File,
    pub key: FileKey,
    pub plan: PlannedRead,
    pub disk: Arc<DiskStats>,
    pub waiters: Vec<Waiter>,
    pub enqueued: Instant,
}

struct InFlight {
    key: FileKey,
    plan: PlannedRead,
    waiters: Vec<Waiter>,
}

struct Queue {
    jobs: VecDeque<ReadJob>,
    in_flight: Option<InFlight>,
    stopping: bool,
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
    all_stats: Arc<Stats>,
}

fn covers(key: FileKey, plan: &PlannedRead, other_key: FileKey, other: &PlannedRead) -> bool {
    key == other_key && plan.start <= other.start && other.want_end <= plan.end
}

impl DiskWorker {
    pub fn new(index: usize, controller: Arc<dyn PrefetchController>, stats: Arc<Stats>) -> Self {
        DiskWorker {
            index,
            queue: Mutex::new(Queue { jobs: VecDeque::new(), in_flight: None, stopping: false }),
            wake: Condvar::new(),
            stats: stats.add_worker(index),
            controller,
            all_stats: stats,
        }
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
        let ahead = q.jobs.len();
        job.disk.on_queued(ahead);
        self.stats.on_queued();
        q.jobs.push_back(job);
        drop(q);
        self.wake.notify_one();
        Submitted::Queued { ahead }
    }

    /// Removes every waiter of connection `conn_id`; drops queued jobs left
    /// without waiters. Returns (waiters removed, reads cancelled).
    pub fn cancel_connection(&self, conn_id: u64) -> (usize, usize) {
        let mut dropped_jobs = Vec::new();
        let mut removed = 0;
        {
            let mut q = self.queue.lock().unwrap();
            if let Some(f) = q.in_flight.as_mut() {
                let before = f.waiters.len();
                f.waiters.retain(|w| w.conn.id != conn_id);
                removed += before - f.waiters.len();
            }
            let mut i = 0;
            while i < q.jobs.len() {
                let job = &mut q.jobs[i];
                let before = job.waiters.len();
                job.waiters.retain(|w| w.conn.id != conn_id);
                removed += before - job.waiters.len();
                if job.waiters.is_empty() {
                    dropped_jobs.push(q.jobs.remove(i).expect("index in range"));
                } else {
                    i += 1;
                }
            }
        }
        for job in &dropped_jobs {
            job.disk.on_cancelled();
            self.stats.on_dequeued();
        }
        (removed, dropped_jobs.len()) // dropping the jobs closes their fds
    }

    /// Asks the worker to finish its queue and exit.
    pub fn stop(&self) {
        self.queue.lock().unwrap().stopping = true;
        self.wake.notify_all();
    }

    /// The worker thread's body.
    pub fn run(&self) {
        let mut buf = vec![0u8; READ_CHUNK];
        loop {
            let job = {
                let mut q = self.queue.lock().unwrap();
                loop {
                    if let Some(mut job) = q.jobs.pop_front() {
                        q.in_flight = Some(InFlight {
                            key: job.key,
                            plan: job.plan,
                            waiters: std::mem::take(&mut job.waiters),
                        });
                        break Some(job);
                    }
                    if q.stopping {
                        break None;
                    }
                    q = self.wake.wait(q).unwrap();
                }
            };
            let Some(job) = job else { return };
            self.stats.on_dequeued();
            job.disk.on_dequeued();
            self.serve(job, &mut buf);
        }
    }

    fn serve(&self, job: ReadJob, buf: &mut [u8]) {
        let ReadJob { file, key, plan, disk, enqueued, .. } = job;
        let queue_wait = enqueued.elapsed();
        let started = Instant::now();
        disk.begin_read(queue_wait);
        self.stats.begin_read();

        let prefix = residency::resident_prefix(file.as_fd(), plan.start, plan.end).unwrap_or(0);
        let (bytes, result) = pread_range(&file, plan.start + prefix, plan.end, buf);

        let busy = started.elapsed();
        self.stats.end_read(busy, bytes);
        disk.end_read(busy, bytes, result.is_ok());
        drop(file);
        self.controller.observe_read(&ReadObservation {
            disk: &disk.name,
            worker: self.index,
            file: key,
            plan,
            read_start: plan.start + prefix,
            ok: result.is_ok(),
            bytes_read: bytes,
            busy,
        });
        if let Err(e) = &result {
            tracing::warn!(disk = %disk.name, start = plan.start, end = plan.end, "read failed after {bytes} bytes: {e}");
        }
        tracing::debug!(disk = %disk.name, start = plan.start, end = plan.end, prefix, bytes, ?busy, ?queue_wait, "read done");

        let waiters = {
            let mut q = self.queue.lock().unwrap();
            q.in_flight.take().map(|f| f.waiters).unwrap_or_default()
        };
        let status = match &result {
            Ok(()) => 0,
            Err(e) => -(e.raw_os_error().unwrap_or(libc::EIO)),
        };
        for (i, w) in waiters.into_iter().enumerate() {
            let mut flags = 0;
            if bytes > 0 {
                flags |= reply_flags::READ;
            }
            if prefix >= plan.end - plan.start {
                flags |= reply_flags::RESIDENT;
            }
            if w.joined {
                flags |= reply_flags::JOINED;
            }
            if i == 0 {
                w.conn.client.on_read(bytes);
            }
            let reply = if w.conceal {
                Reply { status, ..Reply::ok(w.op, w.seq) }
            } else {
                Reply { status, flags, bytes_read: bytes, ..Reply::ok(w.op, w.seq) }
            };
            if w.conn.send(&reply, None) {
                w.conn.resume_reading();
            }
        }
        let _ = &self.all_stats;
    }
}

/// Reads `[start, end)` with pread in chunks into `buf`, discarding the data
/// (the point is the page cache). Stops early at end of file.
fn pread_range(file: &File, start: u64, end: u64, buf: &mut [u8]) -> (u64, io::Result<()>) {
    let mut pos = start;
    while pos < end {
        let want = ((end - pos) as usize).min(buf.len());
        match file.read_at(&mut buf[..want], pos) {
            Ok(0) => break,
            Ok(n) => pos += n as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return (pos - start, Err(e)),
        }
    }
    (pos - start, Ok(()))
}
