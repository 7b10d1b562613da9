//! A blocking client of the daemon's socket, speaking the wire protocol.
//!
//! Used by `libception stat` and by the tests, which also need to send
//! arbitrary (hostile) datagrams with arbitrary descriptors, hence
//! [`Client::send_raw`].

use crate::stats::Snapshot;
use libception_proto::{Op, Reply, Request, MAX_MESSAGE};
use nix::sys::socket::{self, AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType, UnixAddr};
use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::time::Duration;

pub struct Client {
    fd: OwnedFd,
    next_seq: u64,
}

fn nix_err(e: nix::errno::Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

impl Client {
    /// Connects to the daemon at `path` (blocking socket, no timeout).
    pub fn connect(path: &Path) -> io::Result<Client> {
        let fd = socket::socket(AddressFamily::Unix, SockType::SeqPacket, SockFlag::SOCK_CLOEXEC, None).map_err(nix_err)?;
        let addr = UnixAddr::new(path).map_err(nix_err)?;
        socket::connect(fd.as_raw_fd(), &addr).map_err(|e| {
            io::Error::new(nix_err(e).kind(), format!("connecting to the libception daemon at {}: {e}", path.display()))
        })?;
        Ok(Client { fd, next_seq: 1 })
    }

    /// Bounds every later receive (None: wait forever).
    pub fn set_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        let tv = match timeout {
            Some(d) => nix::sys::time::TimeVal::new(d.as_secs() as _, d.subsec_micros() as _),
            None => nix::sys::time::TimeVal::new(0, 0),
        };
        socket::setsockopt(&self.fd, socket::sockopt::ReceiveTimeout, &tv).map_err(nix_err)
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Sends one datagram with the given descriptors attached.
    pub fn send_raw(&self, bytes: &[u8], fds: &[RawFd]) -> io::Result<()> {
        let iov = [IoSlice::new(bytes)];
        let cmsg = [ControlMessage::ScmRights(fds)];
        let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &cmsg };
        socket::sendmsg::<()>(self.fd.as_raw_fd(), &iov, cmsgs, MsgFlags::MSG_NOSIGNAL, None).map_err(nix_err)?;
        Ok(())
    }

    /// Receives one datagram into `buf`; returns its length (0 = closed).
    pub fn recv_raw(&self, buf: &mut [u8]) -> io::Result<usize> {
        socket::recv(self.fd.as_raw_fd(), buf, MsgFlags::empty()).map_err(nix_err)
    }

    /// Receives and parses one reply.
    pub fn recv_reply(&self) -> io::Result<Reply> {
        let mut buf = [0u8; MAX_MESSAGE];
        let n = self.recv_raw(&mut buf)?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the daemon closed the connection"));
        }
        Reply::parse(&buf[..n]).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// Sends a request (with `fd` attached when given) and waits for its reply.
    pub fn call(&mut self, op: Op, flags: u32, offset: u64, length: u64, fd: Option<RawFd>) -> io::Result<Reply> {
        let seq = self.next_seq;
        self.next_seq += 1;
        let req = Request { version: libception_proto::PROTO_VERSION, op, flags, call: 0, seq, offset, length, tid: nix::unistd::gettid().as_raw() as u32 };
        let fds: Vec<RawFd> = fd.into_iter().collect();
        self.send_raw(&req.encode(), &fds)?;
        let reply = self.recv_reply()?;
        if reply.seq != seq {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("reply seq {} does not match request seq {seq}", reply.seq)));
        }
        Ok(reply)
    }

    pub fn fetch(&mut self, fd: RawFd, offset: u64, length: u64, flags: u32) -> io::Result<Reply> {
        self.call(Op::Fetch, flags, offset, length, Some(fd))
    }

    pub fn check(&mut self, fd: RawFd, offset: u64, length: u64) -> io::Result<Reply> {
        self.call(Op::Check, 0, offset, length, Some(fd))
    }

    /// The daemon's counters (LCP_OP_STATS) as raw JSON bytes.
    pub fn stats_json(&mut self) -> io::Result<Vec<u8>> {
        let reply = self.call(Op::Stats, 0, 0, 0, None)?;
        if reply.status != 0 {
            return Err(io::Error::from_raw_os_error(-reply.status));
        }
        let mut buf = vec![0u8; reply.payload_len as usize + 1];
        let n = self.recv_raw(&mut buf)?;
        if n as u64 != reply.payload_len {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("stats payload is {n} bytes, the reply announced {}", reply.payload_len)));
        }
        buf.truncate(n);
        Ok(buf)
    }

    /// The daemon's counters, parsed.
    pub fn stats(&mut self) -> io::Result<Snapshot> {
        let json = self.stats_json()?;
        serde_json::from_slice(&json).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("stats JSON: {e}")))
    }
}
