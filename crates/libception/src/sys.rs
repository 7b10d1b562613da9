//! Thin safe wrappers over the few Linux calls the daemon uses directly:
//! epoll (the receptionist's event loop; workers re-arm connections through
//! the same epoll instance, which the kernel allows from any thread) and
//! non-blocking datagram sends.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// An epoll instance. `epoll_ctl` and `epoll_wait` are thread-safe.
pub struct Epoll {
    fd: OwnedFd,
}

/// Interest sets used by the daemon.
pub const EV_READ: u32 = (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;
/// Only hang-ups: a connection with a request outstanding is not read.
pub const EV_HANGUP_ONLY: u32 = libc::EPOLLRDHUP as u32;

impl Epoll {
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: plain syscall; the fd is owned below.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(Epoll { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: ev is a valid epoll_event.
        let rc = unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    pub fn add(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, events, token)
    }

    pub fn modify(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, events, token)
    }

    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    /// Waits up to `timeout_ms` (-1: forever); EINTR returns no events.
    pub fn wait(&self, events: &mut [libc::epoll_event], timeout_ms: i32) -> io::Result<usize> {
        // SAFETY: the buffer is valid for events.len() entries.
        let n = unsafe {
            libc::epoll_wait(self.fd.as_raw_fd(), events.as_mut_ptr(), events.len() as libc::c_int, timeout_ms)
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(0);
            }
            return Err(e);
        }
        Ok(n as usize)
    }
}

/// Sends one datagram without blocking and without SIGPIPE.
pub fn send_nonblocking(fd: RawFd, bytes: &[u8]) -> io::Result<()> {
    loop {
        // SAFETY: bytes is a valid buffer.
        let n = unsafe {
            libc::send(fd, bytes.as_ptr().cast(), bytes.len(), libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
        };
        if n >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Shuts both directions of a socket; the owner closes it later.
pub fn shutdown_both(fd: RawFd) {
    // SAFETY: shutdown on a descriptor we hold open.
    unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
}

/// Most descriptors accepted in one datagram's control data; more are
/// dropped by the kernel (MSG_CTRUNC) and the message is rejected.
pub const MAX_FDS_PER_MESSAGE: usize = 8;

/// One received datagram.
pub struct Datagram {
    /// Bytes copied into the caller's buffer.
    pub copied: usize,
    /// The datagram's real length (larger than `copied` when truncated).
    pub len: usize,
    /// Descriptors received with it, each owned exactly once.
    pub fds: Vec<OwnedFd>,
    /// The control data did not fit: some descriptors were discarded by the kernel.
    pub control_truncated: bool,
}

/// Receives one datagram with `recvmsg(MSG_DONTWAIT | MSG_CMSG_CLOEXEC | MSG_TRUNC)`,
/// taking ownership of every SCM_RIGHTS descriptor that arrived, including
/// when the control data was truncated (nix's cmsg iterator refuses truncated
/// control data, which would leak the descriptors that did arrive).
pub fn recv_with_fds(fd: RawFd, buf: &mut [u8]) -> io::Result<Datagram> {
    // u64 storage keeps the control buffer aligned for cmsghdr.
    const CONTROL_WORDS: usize = 64;
    let mut control = [0u64; CONTROL_WORDS];
    // SAFETY: CMSG_SPACE is a pure computation.
    let needed = unsafe { libc::CMSG_SPACE((MAX_FDS_PER_MESSAGE * std::mem::size_of::<RawFd>()) as u32) } as usize;
    assert!(needed <= std::mem::size_of_val(&control));
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: zeroed msghdr is a valid "empty" header; fields set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = needed as _;
    let n = loop {
        // SAFETY: msg points to valid buffers for the duration of the call.
        let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC | libc::MSG_TRUNC) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    let mut fds = Vec::new();
    // SAFETY: walking the control buffer the kernel filled, with the libc
    // CMSG macros, bounded by msg_controllen; every SCM_RIGHTS descriptor is
    // wrapped in an OwnedFd immediately so it is closed exactly once.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg);
                let payload = (*cmsg).cmsg_len as usize - (data as usize - cmsg as usize);
                let count = payload / std::mem::size_of::<RawFd>();
                for i in 0..count {
                    let raw: RawFd = std::ptr::read_unaligned((data as *const RawFd).add(i));
                    if raw >= 0 {
                        fds.push(OwnedFd::from_raw_fd(raw));
                    }
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok(Datagram {
        copied: n.min(buf.len()),
        len: n,
        fds,
        control_truncated: msg.msg_flags & libc::MSG_CTRUNC != 0,
    })
}

/// Whether the peer of a connected socket has closed or shut down its
/// sending side. On SOCK_SEQPACKET a receive of 0 bytes means either an empty
/// datagram or end of stream; this tells them apart.
pub fn peer_closed(fd: RawFd) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLRDHUP, revents: 0 };
    // SAFETY: one valid pollfd, zero timeout.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents & (libc::POLLHUP | libc::POLLRDHUP | libc::POLLERR) != 0
}

/// The supplementary groups of a connected socket's peer (SO_PEERGROUPS),
/// as they were when it connected. Empty when the kernel cannot say.
pub fn peer_groups(fd: RawFd) -> Vec<u32> {
    let mut groups = vec![0u32; 64];
    loop {
        let mut len = (groups.len() * std::mem::size_of::<u32>()) as libc::socklen_t;
        // SAFETY: the buffer holds `len` bytes; the kernel writes at most that.
        let rc = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_PEERGROUPS, groups.as_mut_ptr().cast(), &mut len) };
        let n = len as usize / std::mem::size_of::<u32>();
        if rc == 0 {
            groups.truncate(n);
            return groups;
        }
        // ERANGE tells the size needed; NGROUPS_MAX bounds it.
        if io::Error::last_os_error().raw_os_error() != Some(libc::ERANGE) || n <= groups.len() || n > 65536 {
            return Vec::new();
        }
        groups.resize(n, 0);
    }
}

/// What the daemon needs to know about a passed descriptor, taken with
/// `statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC)`: the attributes the
/// kernel has cached, so a network or FUSE filesystem is never asked (a
/// FUSE server that never answers would otherwise freeze the caller).
#[derive(Debug, Clone, Copy)]
pub struct FdStat {
    pub mode: u32,
    pub dev: u64,
    pub dev_major: u32,
    pub ino: u64,
    pub size: u64,
    pub uid: u32,
    /// The mount's id (STATX_MNT_ID), 0 when the kernel does not say.
    pub mnt_id: u64,
}

impl FdStat {
    pub fn file_type(&self) -> u32 {
        self.mode & libc::S_IFMT
    }
}

/// `statx` of a descriptor without syncing attributes with the filesystem.
pub fn fstat_nosync(fd: RawFd) -> io::Result<FdStat> {
    // SAFETY: zeroed statx is valid output storage.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    let mask = libc::STATX_TYPE | libc::STATX_MODE | libc::STATX_INO | libc::STATX_SIZE | libc::STATX_UID | libc::STATX_MNT_ID;
    // SAFETY: a valid empty C string and output buffer.
    let rc = unsafe { libc::statx(fd, c"".as_ptr(), libc::AT_EMPTY_PATH | libc::AT_STATX_DONT_SYNC, mask, &mut st) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(FdStat {
        mode: st.stx_mode as u32,
        dev: libc::makedev(st.stx_dev_major, st.stx_dev_minor),
        dev_major: st.stx_dev_major,
        ino: st.stx_ino,
        size: st.stx_size,
        uid: st.stx_uid,
        mnt_id: if st.stx_mask & libc::STATX_MNT_ID != 0 { st.stx_mnt_id } else { 0 },
    })
}
