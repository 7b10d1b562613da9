//! The receptionist: one thread, one epoll loop, every client connection.
//!
//! It accepts connections (checking SO_PEERCRED against the allow lists),
//! reads requests with `recvmsg` + SCM_RIGHTS, validates them, answers what it
//! can at once (STATS, CHECK, FETCH of a range that is already resident, and
//! every error), and hands misses to the disk worker of the file's disk
//! (`st_dev` -> whole disk, cached per device). It also handles SIGTERM/SIGINT
//! through a signalfd in the same loop.
//!
//! Every datagram is hostile until parsed. A bad message gets an error reply
//! and one log line; a connection that keeps sending bad messages, sends
//! oversized control data repeatedly, or stops reading its replies is closed.
//! Every received descriptor is owned by an `OwnedFd` from the moment it
//! arrives, so each is closed exactly once whatever path the request takes.

use crate::conn::{Connection, Peer};
use crate::prefetch::{extend_past_cached, plan_read, PrefetchContext, PrefetchController, RequestObservation};
use crate::disks;
use crate::fsfilter::{FsFilter, Verdict};
use crate::limits::{Charge, Clients, Limits};
use crate::promotion::{PromoteMode, Promotion};
use crate::warn_limited;
use crate::residency;
use crate::stats::{DaemonInfo, DiskStats, Stats};
use crate::sys::{self, Epoll, EV_READ};
use crate::trust::{self, Trust};
use crate::worker::{DiskWorker, FileKey, QueueOrder, ReadJob, ReplyWhen, Submitted, Waiter};
use libception_proto::{echo_header, reply_flags, Op, Reply, Request, RequestError, MAX_MESSAGE, REQUEST_SIZE};
use std::collections::HashMap;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub const TOKEN_LISTENER: u64 = 0;
pub const TOKEN_SIGNAL: u64 = 1;
const FIRST_CONN_TOKEN: u64 = 16;
/// Requests read from one connection per wake-up, for fairness.
const MESSAGES_PER_WAKEUP: usize = 32;
/// Anonymous devices (allowed with --allow-fs) with a queue of their own;
/// the rest share [`ANON_OVERFLOW`].
const MAX_ANON_QUEUES: usize = 8;
const ANON_OVERFLOW: &str = "anon-other";
/// Protocol errors tolerated on one connection before it is closed.
const MAX_ERRORS_PER_CONNECTION: u32 = 16;

/// Settings the receptionist needs.
pub struct ReceptionConfig {
    pub allow_uids: Vec<u32>,
    pub allow_gids: Vec<u32>,
    pub trust: Trust,
    /// Anonymous-device filesystem types served anyway (`fsfilter.rs`).
    pub allow_fs: Vec<String>,
    pub limits: Limits,
    pub per_disk: bool,
    /// When workers read each range again from the cache (`promotion.rs`).
    pub promote: PromoteMode,
    pub promote_window: Duration,
    /// In which order workers take their queued reads (`worker.rs`).
    pub queue_order: QueueOrder,
    /// When the disk workers answer the clients waiting on a read.
    pub reply: ReplyWhen,
    pub max_read: u64,
    pub info: DaemonInfo,
}

#[derive(Clone)]
struct DiskRoute {
    disk: Arc<DiskStats>,
    worker: Arc<DiskWorker>,
}

struct ConnEntry {
    conn: Arc<Connection>,
    errors: AtomicU32,
}

pub struct Receptionist {
    cfg: ReceptionConfig,
    epoll: Arc<Epoll>,
    listener: OwnedFd,
    signal_fd: OwnedFd,
    stats: Arc<Stats>,
    controller: Arc<dyn PrefetchController>,
    /// Shared by every worker.
    promotion: Arc<Promotion>,
    conns: HashMap<u64, ConnEntry>,
    next_token: u64,
    routes_by_dev: HashMap<u64, DiskRoute>,
    fs_filter: FsFilter,
    /// Queues made for anonymous devices so far (at most MAX_ANON_QUEUES + 1).
    anon_queues: usize,
    clients: Clients,
    /// Held open so that on EMFILE one descriptor can be freed to accept
    /// and close the waiting connection instead of spinning on it.
    reserve_fd: Option<OwnedFd>,
    routes_by_name: HashMap<String, DiskRoute>,
    workers: Vec<(Arc<DiskWorker>, JoinHandle<()>)>,
}

/// What one turn of the event loop came to.
pub(crate) enum Turn {
    /// This many events were handled.
    Handled(usize),
    /// SIGTERM or SIGINT arrived: shut down.
    Stop,
}

/// Why a request could not be served, as (errno, log text).
type Refusal = (i32, String);

enum Outcome {
    /// Answered (or refused); keep reading this connection.
    Answered,
    /// Handed to a disk worker; stop reading until it replies.
    Queued,
    /// Close the connection.
    Close(String),
}

impl Receptionist {
    pub fn new(
        cfg: ReceptionConfig,
        listener: OwnedFd,
        signal_fd: OwnedFd,
        stats: Arc<Stats>,
        controller: Arc<dyn PrefetchController>,
    ) -> std::io::Result<Self> {
        let epoll = Arc::new(Epoll::new()?);
        epoll.add(listener.as_raw_fd(), libc::EPOLLIN as u32, TOKEN_LISTENER)?;
        epoll.add(signal_fd.as_raw_fd(), libc::EPOLLIN as u32, TOKEN_SIGNAL)?;
        let fs_filter = FsFilter::new(cfg.allow_fs.clone());
        let promotion = Arc::new(Promotion::new(cfg.promote, cfg.promote_window, stats.clone()));
        let mut r = Receptionist {
            cfg,
            epoll,
            listener,
            signal_fd,
            stats,
            controller,
            promotion,
            conns: HashMap::new(),
            next_token: FIRST_CONN_TOKEN,
            routes_by_dev: HashMap::new(),
            fs_filter,
            anon_queues: 0,
            clients: Clients::default(),
            reserve_fd: open_reserve(),
            routes_by_name: HashMap::new(),
            workers: Vec::new(),
        };
        if !r.cfg.per_disk {
            r.spawn_worker()?;
        }
        Ok(r)
    }

    fn spawn_worker(&mut self) -> std::io::Result<Arc<DiskWorker>> {
        let index = self.workers.len();
        let worker = Arc::new(DiskWorker::new(index, self.controller.clone(), self.stats.clone(), self.promotion.clone(), self.cfg.queue_order, self.cfg.reply));
        let w = worker.clone();
        let handle = std::thread::Builder::new()
            .name(format!("disk-worker-{index}"))
            .spawn(move || w.run())?;
        self.workers.push((worker.clone(), handle));
        Ok(worker)
    }

    /// Runs until SIGTERM or SIGINT, then drains the workers.
    pub fn run(mut self) -> anyhow::Result<()> {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
        while let Turn::Handled(_) = self.turn(&mut events, -1)? {}
        self.shutdown();
        Ok(())
    }

    /// One turn of the loop: waits up to `timeout_ms` (-1: forever) for
    /// events and handles them. `run` turns until a signal; the fuzz harness
    /// (`fuzzing.rs`) turns with no wait until nothing is left to handle.
    pub(crate) fn turn(&mut self, events: &mut [libc::epoll_event], timeout_ms: i32) -> std::io::Result<Turn> {
        let n = self.epoll.wait(events, timeout_ms)?;
        for ev in events.iter().take(n).copied() {
            let (token, flags) = (ev.u64, ev.events);
            match token {
                TOKEN_LISTENER => self.accept_all(),
                TOKEN_SIGNAL => {
                    if let Some(sig) = self.read_signal() {
                        tracing::info!("received signal {sig}; shutting down");
                        return Ok(Turn::Stop);
                    }
                }
                id => self.on_connection_event(id, flags),
            }
        }
        Ok(Turn::Handled(n))
    }

    /// Open client connections and whether every disk worker is idle (for
    /// the fuzz harness's end-of-input checks).
    pub(crate) fn load(&self) -> (usize, bool) {
        (self.conns.len(), self.workers.iter().all(|(w, _)| w.idle()))
    }

    fn read_signal(&self) -> Option<u32> {
        // SAFETY: signalfd_siginfo is plain data; the read fills it.
        let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        // SAFETY: reading into a buffer of exactly `size` bytes.
        let n = unsafe { libc::read(self.signal_fd.as_raw_fd(), (&mut info as *mut libc::signalfd_siginfo).cast(), size) };
        (n as usize == size).then_some(info.ssi_signo)
    }

    pub(crate) fn shutdown(&mut self) {
        let _ = self.epoll.delete(self.listener.as_raw_fd());
        let pending: usize = self.workers.iter().map(|(w, _)| w.stats.queue_length()).sum();
        tracing::info!(pending, "answering pending requests before exit");
        for (w, _) in &self.workers {
            w.stop();
        }
        for (w, handle) in self.workers.drain(..) {
            if handle.join().is_err() {
                tracing::error!(worker = w.index, "disk worker panicked");
            }
        }
        for (_, entry) in self.conns.drain() {
            entry.conn.mark_closed();
        }
    }

    fn accept_all(&mut self) {
        loop {
            // SAFETY: accept4 on our listening socket; result owned below.
            let raw = unsafe {
                libc::accept4(
                    self.listener.as_raw_fd(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                )
            };
            if raw < 0 {
                let e = std::io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) => return,
                    Some(libc::EINTR) | Some(libc::ECONNABORTED) => continue,
                    Some(libc::EMFILE) | Some(libc::ENFILE) if self.reserve_fd.is_some() => {
                        // Free the reserve, take the waiting connection and
                        // close it: the listener is drained, not spun on.
                        self.reserve_fd = None;
                        // SAFETY: as above; the result is closed at once.
                        let raw = unsafe { libc::accept4(self.listener.as_raw_fd(), std::ptr::null_mut(), std::ptr::null_mut(), libc::SOCK_CLOEXEC) };
                        let waiting = raw >= 0;
                        if waiting {
                            // SAFETY: a fresh descriptor we own.
                            drop(unsafe { OwnedFd::from_raw_fd(raw) });
                        }
                        self.reserve_fd = open_reserve();
                        // accept4 takes a descriptor before it looks for a
                        // connection, so at the limit it says EMFILE with
                        // none waiting too: then the listener is drained.
                        if !waiting {
                            return;
                        }
                        self.stats.on_rejected();
                        warn_limited!("accept", "out of descriptors ({e}): a connection was accepted and closed");
                        continue;
                    }
                    _ => {
                        // ENOMEM, or EMFILE without a reserve: retry on the next wake-up.
                        warn_limited!("accept", "accepting a client connection failed: {e}");
                        return;
                    }
                }
            }
            // SAFETY: raw is a fresh descriptor we own.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            self.admit(fd);
        }
    }

    fn admit(&mut self, fd: OwnedFd) {
        let peer = match nix::sys::socket::getsockopt(&fd, nix::sys::socket::sockopt::PeerCredentials) {
            Ok(c) => {
                let groups = sys::peer_groups(fd.as_raw_fd());
                let trusted = self.cfg.trust.trusts(c.uid(), c.gid(), &groups);
                Peer { pid: c.pid(), uid: c.uid(), gid: c.gid(), trusted }
            }
            Err(e) => {
                warn_limited!("reject", "rejecting a connection: SO_PEERCRED failed: {e}");
                self.stats.on_rejected();
                return;
            }
        };
        let restricted = !self.cfg.allow_uids.is_empty() || !self.cfg.allow_gids.is_empty();
        if restricted && !self.cfg.allow_uids.contains(&peer.uid) && !self.cfg.allow_gids.contains(&peer.gid) {
            warn_limited!("reject", pid = peer.pid, uid = peer.uid, gid = peer.gid, "rejecting a connection: uid and gid are not in --allow-uid/--allow-gid");
            self.stats.on_rejected();
            return;
        }
        if let Err(limit) = self.clients.connect(peer.uid, peer.trusted, &self.cfg.limits) {
            warn_limited!("reject", pid = peer.pid, uid = peer.uid, "rejecting a connection: {limit} reached");
            self.stats.on_rejected();
            return;
        }
        let id = self.next_token;
        self.next_token += 1;
        let client = self.stats.client(peer.pid, peer.uid, peer.gid);
        let conn = Arc::new(Connection::new(id, fd, peer, client.clone(), self.epoll.clone(), self.stats.clone()));
        if let Err(e) = self.epoll.add(conn.raw_fd(), EV_READ, id) {
            warn_limited!("reject", "registering a client connection with epoll failed: {e}");
            self.clients.disconnect(peer.uid);
            return;
        }
        self.stats.on_accepted(&client);
        if let Some(suppressed) = crate::limits::CLIENT_LOG.allow("connect") {
            tracing::info!(conn = id, pid = peer.pid, uid = peer.uid, gid = peer.gid, trusted = peer.trusted, comm = %client.comm, suppressed, "client connected");
        }
        self.conns.insert(id, ConnEntry { conn, errors: AtomicU32::new(0) });
    }

    fn close_connection(&mut self, id: u64, why: &str) {
        let Some(entry) = self.conns.remove(&id) else { return };
        let conn = entry.conn;
        self.clients.disconnect(conn.peer.uid);
        conn.mark_closed();
        let _ = self.epoll.delete(conn.raw_fd());
        let (mut waiters, mut reads) = (0, 0);
        for (w, _) in &self.workers {
            let (a, b) = w.cancel_connection(id);
            waiters += a;
            reads += b;
        }
        self.stats.on_closed(&conn.client, waiters, reads);
        if waiters > 0 {
            if let Some(suppressed) = crate::limits::CLIENT_LOG.allow("cancel") {
                tracing::info!(conn = id, pid = conn.peer.pid, waiters, reads, suppressed, "client disconnected mid-request; its requests were cancelled");
            }
        } else {
            tracing::debug!(conn = id, pid = conn.peer.pid, "connection closed: {why}");
        }
    }

    fn on_connection_event(&mut self, id: u64, flags: u32) {
        let Some(entry) = self.conns.get(&id) else { return };
        let conn = entry.conn.clone();
        if conn.is_closed() {
            self.close_connection(id, "dropped by the daemon");
            return;
        }
        let hangup = flags & (libc::EPOLLHUP | libc::EPOLLRDHUP | libc::EPOLLERR) as u32 != 0;
        let readable = flags & libc::EPOLLIN as u32 != 0;
        if !readable {
            if hangup {
                self.close_connection(id, "peer hung up");
            }
            return;
        }
        let mut buf = [0u8; MAX_MESSAGE];
        for _ in 0..MESSAGES_PER_WAKEUP {
            let dgram = match sys::recv_with_fds(conn.raw_fd(), &mut buf) {
                Ok(d) => d,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if hangup {
                        self.close_connection(id, "peer hung up");
                    }
                    return;
                }
                Err(e) => {
                    self.close_connection(id, &format!("receive failed: {e}"));
                    return;
                }
            };
            if dgram.len == 0 && dgram.fds.is_empty() && (hangup || sys::peer_closed(conn.raw_fd())) {
                self.close_connection(id, "end of stream");
                return;
            }
            match self.on_message(&conn, &buf[..dgram.copied], dgram.len, dgram.fds, dgram.control_truncated) {
                Outcome::Answered => {}
                Outcome::Queued => return,
                Outcome::Close(why) => {
                    conn.drop_connection(&why);
                    self.close_connection(id, &why);
                    return;
                }
            }
            if conn.is_closed() {
                self.close_connection(id, "dropped while replying");
                return;
            }
        }
    }

    fn refuse(&self, conn: &Connection, op: u16, seq: u64, (errno, why): Refusal) -> Outcome {
        conn.client.on_refused();
        warn_limited!("refuse", conn = conn.id, pid = conn.peer.pid, uid = conn.peer.uid, seq, "request refused ({}): {why}", std::io::Error::from_raw_os_error(errno));
        let errors = self.conns.get(&conn.id).map(|e| e.errors.fetch_add(1, Relaxed) + 1).unwrap_or(0);
        conn.send(&Reply::error(op, seq, errno), None);
        if errors >= MAX_ERRORS_PER_CONNECTION {
            return Outcome::Close(format!("{errors} refused requests"));
        }
        Outcome::Answered
    }

    fn on_message(&mut self, conn: &Arc<Connection>, data: &[u8], real_len: usize, mut fds: Vec<OwnedFd>, control_truncated: bool) -> Outcome {
        let request = match Request::parse(data) {
            Ok(r) if real_len == REQUEST_SIZE => r,
            parsed => {
                self.stats.on_protocol_error();
                let (op, seq) = echo_header(data);
                let err = match parsed {
                    Ok(_) | Err(RequestError::Size { .. }) => RequestError::Size { len: real_len },
                    Err(e) => e,
                };
                let errno = match err {
                    RequestError::Size { .. } | RequestError::Magic { .. } | RequestError::Version { .. } => libc::EPROTO,
                    _ => libc::EINVAL,
                };
                let n = fds.len();
                drop(fds);
                return self.refuse(conn, op, seq, (errno, format!("{err} ({n} fds closed)")));
            }
        };
        conn.client.touch();
        conn.set_version(request.version);
        let (op, seq) = (request.op as u16, request.seq);
        self.stats.on_request(&conn.client, request.op);
        if control_truncated {
            self.stats.on_bad_fd();
            let n = fds.len();
            drop(fds);
            return self.refuse(conn, op, seq, (libc::EINVAL, format!("too many descriptors (control data truncated, {n} received and closed)")));
        }
        if request.op == Op::Stats {
            if !fds.is_empty() {
                self.stats.on_bad_fd();
                let n = fds.len();
                drop(fds);
                return self.refuse(conn, op, seq, (libc::EINVAL, format!("STATS carries no descriptor, got {n}")));
            }
            return self.answer_stats(conn, op, seq);
        }
        if fds.len() != 1 {
            self.stats.on_bad_fd();
            let n = fds.len();
            drop(fds);
            let errno = if n == 0 { libc::EBADF } else { libc::EINVAL };
            return self.refuse(conn, op, seq, (errno, format!("{} needs exactly one descriptor, got {n}", request.op.name())));
        }
        let file = File::from(fds.pop().expect("one fd"));
        match self.serve_file_request(conn, &request, file) {
            Ok(outcome) => outcome,
            Err(refusal) => {
                self.stats.on_bad_fd();
                self.refuse(conn, op, seq, refusal)
            }
        }
    }

    fn answer_stats(&self, conn: &Connection, op: u16, seq: u64) -> Outcome {
        let mut info = self.cfg.info.clone();
        info.prefetch_bytes = self.controller.current_bytes("");
        info.residency_method = format!("{:?}", residency::method()).to_lowercase();
        let mut snapshot = self.stats.snapshot(info);
        snapshot.add_controller(self.controller.as_ref());
        if !conn.peer.trusted {
            // Other users' activity, and every count that follows from what
            // was resident, are not a stranger's business.
            snapshot.conceal_for(conn.peer.uid);
        }
        let json = match serde_json::to_vec(&snapshot) {
            Ok(j) => j,
            Err(e) => return self.refuse(conn, op, seq, (libc::EIO, format!("encoding stats failed: {e}"))),
        };
        let reply = Reply { payload_len: json.len() as u64, ..Reply::ok(op, seq) };
        conn.send(&reply, Some(&json));
        Outcome::Answered
    }

    fn route(&mut self, dev: u64) -> std::io::Result<DiskRoute> {
        if let Some(r) = self.routes_by_dev.get(&dev) {
            return Ok(r.clone());
        }
        let mut id = disks::disk_of_dev(dev);
        if id.anonymous && !self.routes_by_name.contains_key(&id.name) && self.anon_queues >= MAX_ANON_QUEUES {
            // Anonymous devices come and go (every FUSE or tmpfs mount is a
            // new one); past the cap they share one queue, so neither worker
            // threads (--per-disk) nor disk stats grow with them.
            id.name = ANON_OVERFLOW.to_string();
        }
        let route = match self.routes_by_name.get(&id.name) {
            Some(r) => r.clone(),
            None => {
                let worker = if self.cfg.per_disk { self.spawn_worker()? } else { self.workers[0].0.clone() };
                let disk = self.stats.add_disk(id.name.clone(), worker.index);
                if id.anonymous {
                    self.anon_queues += 1;
                }
                let r = DiskRoute { disk, worker };
                self.routes_by_name.insert(id.name.clone(), r.clone());
                r
            }
        };
        let (major, minor) = disks::split_dev(dev);
        route.disk.add_device(format!("{major}:{minor}"));
        tracing::info!(device = %format!("{major}:{minor}"), disk = %id.name, worker = route.worker.index, "new device mapped to a disk queue");
        self.routes_by_dev.insert(dev, route.clone());
        Ok(route)
    }

    fn serve_file_request(&mut self, conn: &Arc<Connection>, req: &Request, file: File) -> Result<Outcome, Refusal> {
        // Cached attributes only: a FUSE or network filesystem is never asked
        // from this thread (see sys::fstat_nosync).
        let meta = sys::fstat_nosync(file.as_raw_fd())
            .map_err(|e| (e.raw_os_error().unwrap_or(libc::EBADF), format!("statx of the passed descriptor failed: {e}")))?;
        let kind = match meta.file_type() {
            libc::S_IFREG => None,
            libc::S_IFDIR => Some((libc::EISDIR, "a directory")),
            libc::S_IFIFO => Some((libc::ESPIPE, "a pipe")),
            libc::S_IFSOCK => Some((libc::ESPIPE, "a socket")),
            _ => Some((libc::EINVAL, "not a regular file")),
        };
        if let Some((errno, kind)) = kind {
            return Err((errno, format!("the passed descriptor is {kind}")));
        }
        // SAFETY: F_GETFL on a descriptor we own.
        let open_flags = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) };
        if open_flags & libc::O_PATH != 0 || open_flags & libc::O_ACCMODE == libc::O_WRONLY {
            return Err((libc::EBADF, "the passed descriptor is not open for reading".into()));
        }
        if let Verdict::Refuse(fs) = self.fs_filter.check(meta.dev_major, meta.mnt_id) {
            return Err((
                libc::EOPNOTSUPP,
                format!("the file is on a {fs} filesystem, not on a block device (the daemon serves those only; see --allow-fs)"),
            ));
        }
        let size = meta.size;
        let reveal = trust::may_learn(conn.peer.trusted, conn.peer.uid, meta.uid, open_flags);
        let route = self.route(meta.dev).map_err(|e| (libc::ENOMEM, format!("starting a disk worker failed: {e}")))?;
        let (op, seq) = (req.op as u16, req.seq);
        let req_start = req.offset.min(size);
        let req_end = req.offset.saturating_add(req.length).min(size);

        if req.op == Op::Check {
            route.disk.on_check();
            if !reveal {
                // Not resident, without looking: the peer fetches, which is safe.
                self.stats.on_concealed();
                conn.send(&Reply::ok(op, seq), None);
                return Ok(Outcome::Answered);
            }
            if req_end - req_start > self.cfg.limits.max_check {
                // Not checked (bounded work); "not resident" is always safe.
                conn.send(&Reply::ok(op, seq), None);
                return Ok(Outcome::Answered);
            }
            // Up to the prefetch size ahead, as a read would have covered.
            let ahead_end = req_start
                .saturating_sub(req_start % residency::page_size())
                .saturating_add(self.controller.current_bytes(&route.disk.name))
                .min(size)
                .max(req_end);
            let run = if req_start >= req_end { Residency::Hit { end: req_end } } else { self.resident_run(&file, req_start, req_end, ahead_end) };
            let reply = match run {
                Residency::Hit { end } => Reply { flags: reply_flags::RESIDENT, resident_end: end, ..Reply::ok(op, seq) },
                Residency::Miss { .. } => Reply::ok(op, seq),
            };
            conn.send(&reply, None);
            return Ok(Outcome::Answered);
        }

        route.disk.on_fetch();
        let key = FileKey { dev: meta.dev, ino: meta.ino };
        let prefetch = if req.no_prefetch() {
            0
        } else {
            self.controller.prefetch_bytes(&PrefetchContext {
                disk: &route.disk.name,
                worker: route.worker.index,
                file: key,
            })
        };
        let hit_flags = if reveal { reply_flags::RESIDENT } else { 0 };
        if !reveal {
            self.stats.on_concealed();
        }
        let max_read = self.cfg.max_read.max(prefetch);
        let Some(plan) = plan_read(req.offset, req.length, size, prefetch, max_read, residency::page_size()) else {
            route.disk.on_resident_hit(&conn.client);
            conn.send(&Reply { flags: hit_flags, ..Reply::ok(op, seq) }, None);
            return Ok(Outcome::Answered);
        };
        let wanted = plan.want_end - req_start;
        route.disk.on_requested(&conn.client, wanted);
        // A concealed peer is charged before its range is looked at, for the
        // plan as made without residency: at its budget it then gets EAGAIN
        // whether the range is resident or not, where a charge after the
        // check would answer a hit and refuse a miss (a probe that loads
        // nothing). Its read may extend past a cached part uncharged.
        let concealed_charge = if reveal { None } else { Some(self.charge(conn.peer.uid, plan.end - plan.start)?) };
        // A peer that may learn residency is told how far it reaches, up to
        // the planned read's end: its shim then need not ask again inside.
        let ahead_end = if reveal { plan.end } else { plan.want_end };
        let run = self.resident_run(&file, req_start, plan.want_end, ahead_end);
        // On a miss, how far the request is cached from its start (a request
        // running past a prefetched range's end has the range's part cached).
        let resident_to = match run {
            Residency::Hit { .. } => plan.want_end,
            Residency::Miss { resident_to } => resident_to,
        };
        self.controller.observe_request(&RequestObservation {
            disk: &route.disk.name,
            worker: route.worker.index,
            file: key,
            offset: req_start,
            end: plan.want_end,
            resident_to,
        });
        if let Residency::Hit { end } = run {
            route.disk.on_resident_hit(&conn.client);
            let resident_end = if reveal { end } else { 0 };
            conn.send(&Reply { flags: hit_flags, resident_end, ..Reply::ok(op, seq) }, None);
            return Ok(Outcome::Answered);
        }
        // A stream reaching the end of an earlier range: prefetch from there.
        let plan = match run {
            Residency::Miss { resident_to } => extend_past_cached(plan, resident_to, size, prefetch, max_read, residency::page_size()),
            Residency::Hit { .. } => plan,
        };
        let charge = match concealed_charge {
            Some(charge) => charge,
            None => self.charge(conn.peer.uid, plan.end - plan.start)?,
        };
        // Pause before queueing: the worker's reply re-arms reading.
        conn.pause_reading();
        let queued = Instant::now();
        let job = ReadJob {
            file,
            key,
            plan,
            disk: route.disk.clone(),
            waiters: vec![Waiter { conn: conn.clone(), op, seq, joined: false, conceal: !reveal, since: queued, want_end: plan.want_end }],
            enqueued: queued,
            owner: conn.peer.uid,
            charge,
            position: None,
            id: 0,
            abandoned_by_concealed: false,
        };
        match route.worker.submit(job) {
            Submitted::Queued { ahead } => {
                tracing::debug!(conn = conn.id, seq, disk = %route.disk.name, start = plan.start, end = plan.end, ahead, "read queued");
            }
            Submitted::Joined { in_flight, file } => {
                drop(file);
                route.disk.on_joined(&conn.client);
                tracing::debug!(conn = conn.id, seq, disk = %route.disk.name, in_flight, "request joined an existing read");
            }
        }
        Ok(Outcome::Queued)
    }

    /// Charges a read of `bytes` to `uid`'s budget and the global one;
    /// EAGAIN naming the limit reached when it does not fit.
    fn charge(&mut self, uid: u32, bytes: u64) -> Result<Charge, Refusal> {
        self.clients
            .charge(uid, bytes, &self.cfg.limits)
            .map_err(|flag| (libc::EAGAIN, format!("{flag} reached; read it yourself or retry")))
    }

    /// Residency of `[start, want_end)` with the daemon's rights: when it is
    /// all resident, how far the resident run from `start` reaches, looking
    /// up to `ahead_end` (>= `want_end`); else how far it is resident from
    /// `start`. The part ahead is only looked at once the wanted part is known
    /// resident (one `cachestat` each when all is resident, a bisection
    /// otherwise). A failed check counts as "nothing resident" (the FETCH
    /// path then reads, which is always safe), one ahead as nothing ahead.
    fn resident_run(&self, file: &File, start: u64, want_end: u64, ahead_end: u64) -> Residency {
        let failed = |e: std::io::Error| {
            self.stats.on_residency_check_failed();
            tracing::debug!("residency check failed, treating as not resident: {e}");
        };
        let resident_to = match residency::resident_prefix(file.as_fd(), start, want_end) {
            Ok(prefix) => start + prefix,
            Err(e) => {
                failed(e);
                return Residency::Miss { resident_to: start };
            }
        };
        if resident_to < want_end {
            return Residency::Miss { resident_to };
        }
        if ahead_end <= want_end {
            return Residency::Hit { end: want_end };
        }
        match residency::resident_prefix(file.as_fd(), want_end, ahead_end) {
            Ok(more) => Residency::Hit { end: want_end + more },
            Err(e) => {
                failed(e);
                Residency::Hit { end: want_end }
            }
        }
    }
}

/// What [`Receptionist::resident_run`] found of a requested range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Residency {
    /// All of it is resident, and the resident run goes on to `end`.
    Hit { end: u64 },
    /// Not all of it: the bytes from its start to `resident_to` are.
    Miss { resident_to: u64 },
}

/// A descriptor kept in reserve for EMFILE (see `accept_all`).
fn open_reserve() -> Option<OwnedFd> {
    std::fs::File::open("/dev/null").ok().map(OwnedFd::from)
}
