//! One client connection, shared by the receptionist (which reads requests)
//! and the disk workers (which send replies for queued reads).
//!
//! Ownership: the connection owns its socket; it is closed when the last
//! `Arc<Connection>` drops (the receptionist's table entry and any waiters in
//! worker queues), so a worker can never send on a reused descriptor number.
//! A connection that is dropped by the daemon is first marked closed and shut
//! down; the receptionist then sees the hang-up, forgets it and cancels its
//! queued requests.
//!
//! Ordering: a client has at most one request outstanding. While a request is
//! queued the receptionist stops reading the socket (interest: hang-up only);
//! whoever sends the reply re-arms reading afterwards. The receptionist sets
//! hang-up-only interest *before* queueing, so a fast reply's re-arm cannot be
//! overwritten.
//!
//! Version: replies go out in the protocol version of the client's latest
//! request (a shim loaded before an upgrade speaks version 1); the
//! receptionist records it before answering or queueing the request.

use crate::stats::{ClientStats, Stats};
use crate::sys::{self, Epoll, EV_HANGUP_ONLY, EV_READ};
use libception_proto::Reply;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::Arc;

/// The peer's credentials as the kernel reported them at accept time.
#[derive(Debug, Clone, Copy)]
pub struct Peer {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
    /// On the operator's trust lists (or root): may learn any file's residency.
    pub trusted: bool,
}

pub struct Connection {
    pub id: u64,
    pub peer: Peer,
    pub client: Arc<ClientStats>,
    fd: OwnedFd,
    epoll: Arc<Epoll>,
    stats: Arc<Stats>,
    closed: AtomicBool,
    /// Protocol version of the latest request: the replies' layout.
    version: AtomicU16,
}

impl Connection {
    pub fn new(id: u64, fd: OwnedFd, peer: Peer, client: Arc<ClientStats>, epoll: Arc<Epoll>, stats: Arc<Stats>) -> Self {
        Connection { id, peer, client, fd, epoll, stats, closed: AtomicBool::new(false), version: AtomicU16::new(libception_proto::PROTO_VERSION) }
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Replies from now on use the layout of protocol `version`.
    pub fn set_version(&self, version: u16) {
        self.version.store(version, Ordering::Relaxed);
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Sends a reply (and an optional payload datagram) without blocking.
    /// A full socket buffer means the client is not reading its replies: the
    /// connection is dropped rather than letting it stall a disk worker.
    pub fn send(&self, reply: &Reply, payload: Option<&[u8]>) -> bool {
        if self.is_closed() {
            return false;
        }
        let (image, len) = reply.encode_version(self.version.load(Ordering::Relaxed));
        let mut result = sys::send_nonblocking(self.raw_fd(), &image[..len]);
        if let (Ok(()), Some(p)) = (&result, payload) {
            result = sys::send_nonblocking(self.raw_fd(), p);
        }
        match result {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.stats.on_dropped_slow();
                self.drop_connection("its socket buffer is full (it does not read its replies)");
                false
            }
            Err(e) => {
                self.drop_connection(&format!("sending a reply failed: {e}"));
                false
            }
        }
    }

    /// Stop reading requests until the outstanding one is answered.
    pub fn pause_reading(&self) {
        let _ = self.epoll.modify(self.raw_fd(), EV_HANGUP_ONLY, self.id);
    }

    /// Read requests again (after a queued request was answered).
    pub fn resume_reading(&self) {
        if !self.is_closed() {
            // ENOENT when the receptionist already forgot the connection: harmless.
            let _ = self.epoll.modify(self.raw_fd(), EV_READ, self.id);
        }
    }

    /// Closes the connection from the daemon's side (logged once).
    pub fn drop_connection(&self, why: &str) {
        if !self.closed.swap(true, Ordering::AcqRel) {
            crate::warn_limited!("drop", conn = self.id, pid = self.peer.pid, uid = self.peer.uid, "dropping client connection: {why}");
            sys::shutdown_both(self.raw_fd());
            // Make sure the receptionist hears about it even while paused.
            let _ = self.epoll.modify(self.raw_fd(), EV_READ, self.id);
        }
    }

    /// Marks the connection closed without logging (peer hung up).
    pub fn mark_closed(&self) {
        self.closed.store(true, Ordering::Release);
    }
}
