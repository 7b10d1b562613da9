//! The scheduler thread: puts the drive model on the wall clock.
//!
//! The filesystem hands each read to an [`Intake`], which stamps it with the
//! mount's clock (ns since the mount) and queues it here with its reply
//! object at once; a fill pool makes its bytes while it waits at the drive.
//! Stamping before the bytes are made keeps the order in which the kernel
//! issued the reads: when FUSE threads made the bytes first, the 256 KiB
//! tail of a split 1 MiB read reached the drive before its 768 KiB head in
//! 70 of 128 reads (the head took longer to make), and the drive then
//! positioned twice where the host had asked for one sequential pass. This thread
//! owns the [`Drive`]; it sleeps until the model's next event (or a new
//! request), advances the model to "now" and replies to every read whose
//! completion time has come. The model's timeline is absolute, so waking up
//! late delays the replies of that wake-up only, never the drive. The thread
//! runs with a 1 ns timer slack and stops sleeping a little before each event
//! (by a running estimate of how late its sleeps end), polling the last few
//! tens of microseconds, so replies leave close to their completion times.
//! How late they actually leave is counted (`reply_late_ns` in the stats).
//!
//! Replies may go out in any order (FUSE matches them by request id), so the
//! kernel can keep as many reads outstanding as `max_background` allows; this
//! is what lets NCQ reorder them.

use crate::model::{Drive, Request};
use crate::stats::Stats;
use crate::trace::Row;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How much earlier than an event the thread should stop sleeping: a moving
/// average of how late timed sleeps end, bounded so that the polling it
/// replaces stays short.
struct WakeEstimate {
    early_ns: u64,
}

impl WakeEstimate {
    fn observe(&mut self, overslept_ns: u64) {
        let sample = overslept_ns.clamp(5_000, 200_000);
        self.early_ns = (self.early_ns * 7 + sample) / 8;
    }
}

/// A read handed to the drive.
struct Job {
    arrival_ns: u64,
    read: Read,
    /// The bytes to return, from the fill pool.
    bytes: mpsc::Receiver<Vec<u8>>,
    reply: fuser::ReplyData,
}

/// Where a read lies: the library file and offset it starts in (for the
/// trace), and the drive's sectors.
#[derive(Debug, Clone, Copy)]
pub struct Read {
    pub file_id: u32,
    pub offset: u64,
    pub lba: u64,
    pub sectors: u64,
    /// Bytes to return.
    pub len: u64,
}

type FillTask = Box<dyn FnOnce() + Send>;

/// Where a filesystem hands its reads; cheap to clone. A read is stamped and
/// queued at the drive before its bytes are made (on the fill pool), so reads
/// reach the drive in the order the filesystem received them whatever their
/// sizes.
#[derive(Clone)]
pub struct Intake {
    jobs: mpsc::Sender<Job>,
    fill: crossbeam_channel::Sender<FillTask>,
    clock: Clock,
}

impl Intake {
    /// Queues `read` at the drive now; `make` fills its bytes meanwhile, and
    /// `reply` gets them when the drive completes it (EIO if the drive has
    /// stopped or making them failed).
    pub fn read(&self, read: Read, make: impl FnOnce(&mut [u8]) + Send + 'static, reply: fuser::ReplyData) {
        let arrival_ns = self.clock.now_ns();
        let (made, bytes) = mpsc::sync_channel(1);
        let len = read.len as usize;
        // The bytes are under way before the drive can complete the read. A
        // pool that is gone drops the task and its sender: the scheduler then
        // answers EIO.
        let _ = self.fill.send(Box::new(move || {
            let mut data = vec![0u8; len];
            make(&mut data);
            let _ = made.send(data);
        }));
        if let Err(mpsc::SendError(job)) = self.jobs.send(Job { arrival_ns, read, bytes, reply }) {
            job.reply.error(fuser::Errno::EIO);
        }
    }
}

/// Threads making the bytes of queued reads.
const FILL_THREADS: usize = 2;

/// The mount's clock: nanoseconds since `epoch`.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    pub epoch: Instant,
}

impl Clock {
    pub fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }
}

/// Runs until every sender of `jobs` is gone; returns when all pending reads
/// have been answered. `join_bytes` is the drive's join limit, which the
/// mount may set once its device is up.
fn run(mut drive: Drive, clock: Clock, jobs: mpsc::Receiver<Job>, stats: Arc<Stats>, trace: Option<mpsc::Sender<Row>>, join_bytes: Arc<AtomicU64>) {
    // SAFETY: prctl with PR_SET_TIMERSLACK only changes this thread's timer slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
    let mut pending: HashMap<u64, Job> = HashMap::new();
    let mut next_id = 0u64;
    let mut done = Vec::new();
    let mut open = true;
    let mut wake = WakeEstimate { early_ns: 50_000 };
    let mut join = 0;
    while open || !pending.is_empty() {
        // Wait for a request or the next model event.
        let first = match drive.next_event_ns() {
            None if open => jobs.recv().map_err(|_| RecvTimeoutError::Disconnected),
            None => break,
            Some(at) => {
                let now = clock.now_ns();
                if !open {
                    std::thread::sleep(Duration::from_nanos(at.saturating_sub(now)));
                    Err(RecvTimeoutError::Timeout)
                } else if at <= now {
                    Err(RecvTimeoutError::Timeout)
                } else if at > now + wake.early_ns {
                    // Sleep, aiming to wake a typical oversleep before the event.
                    let target = at - wake.early_ns;
                    let got = jobs.recv_timeout(Duration::from_nanos(target - now));
                    if matches!(got, Err(RecvTimeoutError::Timeout)) {
                        wake.observe(clock.now_ns().saturating_sub(target));
                    }
                    got
                } else {
                    // The last stretch: poll instead of sleeping past the event.
                    loop {
                        match jobs.try_recv() {
                            Ok(job) => break Ok(job),
                            Err(TryRecvError::Disconnected) => break Err(RecvTimeoutError::Disconnected),
                            Err(TryRecvError::Empty) if clock.now_ns() >= at => break Err(RecvTimeoutError::Timeout),
                            Err(TryRecvError::Empty) => std::hint::spin_loop(),
                        }
                    }
                }
            }
        };
        let mut accept = |job: Job, drive: &mut Drive| {
            let id = next_id;
            next_id += 1;
            drive.submit(Request { id, arrival_ns: job.arrival_ns, lba: job.read.lba, sectors: job.read.sectors });
            stats.submitted();
            pending.insert(id, job);
        };
        match first {
            Ok(job) => accept(job, &mut drive),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => open = false,
        }
        // Take everything else already waiting before deciding.
        while open {
            match jobs.try_recv() {
                Ok(job) => accept(job, &mut drive),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => open = false,
            }
        }
        let wanted = join_bytes.load(Ordering::Relaxed);
        if wanted != join {
            join = wanted;
            drive.set_join_limit(join);
        }
        let now = clock.now_ns();
        drive.advance(now, &mut done);
        for c in done.drain(..) {
            let job = pending.remove(&c.id).expect("every completion has a pending job");
            // Made long before: the drive took at least a command's overhead.
            match job.bytes.recv() {
                Ok(data) => job.reply.data(&data),
                Err(_) => job.reply.error(fuser::Errno::EIO),
            }
            let bytes = job.read.len;
            stats.record(&c, bytes, now, clock.now_ns().saturating_sub(c.end_ns));
            if let Some(t) = &trace {
                // The trace writer only stops after this thread ends.
                let _ = t.send(Row { completion: c, file_id: job.read.file_id, offset: job.read.offset, bytes });
            }
        }
    }
}

/// The drive of one mount while it serves: the model on the wall clock (the
/// scheduler thread), its counters and its optional trace. Both mount modes
/// start one before they mount and [`finish`](RunningDrive::finish) it after
/// their filesystem has gone.
pub(crate) struct RunningDrive {
    pub stats: Arc<Stats>,
    /// Where the filesystem sends reads; the scheduler stops once every
    /// clone (this one and the filesystem's) is gone.
    pub intake: Intake,
    thread: std::thread::JoinHandle<()>,
    fillers: Vec<std::thread::JoinHandle<()>>,
    tracer: Option<crate::trace::Tracer>,
    join_bytes: Arc<AtomicU64>,
}

impl RunningDrive {
    pub fn start(drive: Drive, stats: impl FnOnce(Instant) -> Stats, trace: Option<&std::path::Path>) -> anyhow::Result<RunningDrive> {
        let tracer = trace.map(crate::trace::Tracer::start).transpose()?;
        let clock = Clock { epoch: Instant::now() };
        let stats = Arc::new(stats(clock.epoch));
        let (jobs, job_rx) = mpsc::channel();
        let join_bytes = Arc::new(AtomicU64::new(0));
        let thread = {
            let stats = stats.clone();
            let trace_tx = tracer.as_ref().map(|t| t.sender.clone());
            let join_bytes = join_bytes.clone();
            std::thread::Builder::new().name("vidbench-drive".into()).spawn(move || run(drive, clock, job_rx, stats, trace_tx, join_bytes))?
        };
        let (fill, tasks) = crossbeam_channel::unbounded::<FillTask>();
        let fillers = (0..FILL_THREADS)
            .map(|_| {
                let tasks = tasks.clone();
                // Ends once every Intake is gone and the queue is empty.
                std::thread::Builder::new().name("vidbench-fill".into()).spawn(move || tasks.iter().for_each(|task| task()))
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(RunningDrive { stats, intake: Intake { jobs, fill, clock }, thread, fillers, tracer, join_bytes })
    }

    /// From now on the drive serves contiguous queued reads as one command
    /// of up to `bytes` ([`Drive::set_join_limit`]); it takes effect at the
    /// scheduler's next decision.
    pub fn set_join_limit(&self, bytes: u64) {
        self.join_bytes.store(bytes, Ordering::Relaxed);
    }

    /// Once the filesystem is gone: the scheduler answers what is pending and
    /// stops, the trace is flushed, and the totals of `mountpoint` are logged.
    pub fn finish(self, mountpoint: &std::path::Path) -> anyhow::Result<()> {
        let RunningDrive { stats, intake, thread, fillers, tracer, .. } = self;
        drop(intake);
        let scheduler = thread.join().map_err(|_| anyhow::anyhow!("the drive scheduler panicked"));
        // Every filler is joined and the trace finished whatever happened
        // (a fold, not a try_fold: no join is skipped after a failed one).
        #[allow(clippy::manual_try_fold)]
        let fillers = fillers.into_iter().map(|f| f.join()).fold(Ok(()), |all, one| {
            all.and(one.map_err(|_| anyhow::anyhow!("a thread making read bytes panicked")))
        });
        let snapshot = stats.snapshot();
        if let Some(t) = tracer {
            let rows = t.finish()?;
            tracing::info!("trace: {rows} requests written");
        }
        tracing::info!(
            "unmounted {}: {} reads, {:.1} MB, {:.1} MB/s over {:.1} s",
            mountpoint.display(),
            snapshot.total.counters.reads,
            snapshot.total.counters.bytes as f64 / 1e6,
            snapshot.total.rates.mb_per_s,
            snapshot.uptime_s
        );
        scheduler.and(fillers)
    }
}
