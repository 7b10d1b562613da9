//! The bodies of the daemon's fuzz targets (`crates/libception/fuzz/`), kept
//! in the library so that the normal test suite replays the same code on
//! stable Rust (`tests/fuzz_replay.rs`) without libFuzzer.
//!
//! * [`parse`]: one datagram through the request and reply parsers and the
//!   read planner. Checks that parsing never panics, that what parses
//!   re-encodes to the same bytes, and that a planned read always covers the
//!   first byte the client asked for and never exceeds the caps.
//! * [`Harness`]: the real receptionist (the daemon's epoll loop and disk
//!   worker, not a model of them) listening on a real socket, driven by
//!   [`Harness::run`] with a sequence of [`Step`]s decoded from the input:
//!   clients connect (root, or a stranger uid), send well-formed, damaged,
//!   truncated or oversized requests with absurd offsets and lengths and
//!   with none, one or too many descriptors of every kind (regular files,
//!   a directory, a pipe, a socket, /dev/zero, O_WRONLY and O_PATH
//!   descriptors, procfs, tmpfs, an eventfd), flood the daemon with requests
//!   whose replies they never read, read their replies, half-close and
//!   close. Between steps the loop turns only when
//!   the input says so, so messages pile up in a socket while a read is
//!   queued, as they do in service.
//!
//! After every input the harness checks, and panics (a crash, for the
//! fuzzer) when one fails: every reply datagram parses (and a STATS payload
//! is JSON of the announced length); once the clients are gone the daemon
//! holds no connection, its workers are idle and the process has exactly
//! the descriptors it had before the input (no fd leak); and a fresh client
//! is still answered.
//!
//! Not a stable API: it exists for the fuzz targets and their replay test.

use crate::prefetch::fixed::FixedPrefetch;
use crate::prefetch::{extend_past_cached, plan_read};
use crate::receptionist::{ReceptionConfig, Receptionist, Turn};
use crate::stats::{DaemonInfo, Stats};
use crate::{daemon, Limits, Trust};
use arbitrary::{Arbitrary, Unstructured};
use libception_proto::{echo_header, Op, RawRequest, Reply, Request, PROTO_VERSION, REQUEST_MAGIC, REQUEST_SIZE};
use nix::sys::socket::{self, AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType, UnixAddr};
use std::fs::File;
use std::io::IoSlice;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Size of the fixture file most requests name; offsets are drawn around it.
const BIG_SIZE: u64 = 4 << 20;
/// The harness daemon's prefetch and read cap: small, so that a worker read
/// after an eviction stays short.
const PREFETCH: u64 = 256 << 10;
const MAX_READ: u64 = 1 << 20;
/// Steps and clients per input.
const MAX_STEPS: usize = 64;
const MAX_CLIENTS: usize = 6;
/// Descriptors per message: past the daemon's 8 its control data is truncated.
const MAX_FDS: usize = 12;
/// The uid of stranger clients (nobody).
const STRANGER_UID: u32 = 65534;
/// How long the daemon may take to settle after an input before that counts
/// as a hang.
const SETTLE: Duration = Duration::from_secs(10);

/// The message-parsing target: `data` as a request datagram, as a reply
/// datagram, and as the numbers of a read plan.
pub fn parse(data: &[u8]) {
    match Request::parse(data) {
        Ok(r) => {
            assert_eq!(&r.encode()[..], data, "a parsed request re-encodes to its bytes");
            assert_eq!(echo_header(data), (r.op as u16, r.seq));
        }
        Err(_) => {
            let (op, seq) = echo_header(data);
            if data.len() < 24 || data[..4] != REQUEST_MAGIC.to_le_bytes() {
                assert_eq!((op, seq), (0, 0), "nothing is echoed without magic and seq");
            }
        }
    }
    if let Ok(r) = Reply::parse(data) {
        assert_eq!(&r.encode()[..], data, "a parsed reply re-encodes to its bytes");
    }
    if let Ok((r, version)) = Reply::parse_any_version(data) {
        let (image, len) = r.encode_version(version);
        assert_eq!(&image[..len], data, "a parsed reply of version {version} re-encodes to its bytes");
    }
    let mut u = Unstructured::new(data);
    let (Ok(offset), Ok(length), Ok(size), Ok(prefetch), Ok(max_read)) =
        (u.arbitrary::<u64>(), u.arbitrary::<u64>(), u.arbitrary::<u64>(), u.arbitrary::<u64>(), u.arbitrary::<u64>())
    else {
        return;
    };
    let page = 4096;
    let Some(p) = plan_read(offset, length, size, prefetch, max_read, page) else {
        assert!(offset >= size || length == 0, "a non-empty range inside the file is planned");
        return;
    };
    let first = offset.min(size);
    assert!(p.start % page == 0 && p.start <= first, "{p:?}");
    assert!(first < p.want_end && p.want_end <= p.end && p.end <= size, "the first byte asked is read: {p:?}");
    assert!(p.end - p.start <= max_read.max(page), "capped at max_read: {p:?}");
    // A miss with part of the request cached: the read past the cache.
    let Ok(cached_to) = u.arbitrary::<u64>() else {
        return;
    };
    let e = extend_past_cached(p, cached_to, size, prefetch, max_read, page);
    assert!(e.start == p.start && e.want_end == p.want_end && p.end <= e.end && e.end <= size, "{p:?} -> {e:?}");
    if e.end > p.end {
        let from = cached_to - cached_to % page;
        assert!(from > p.start && e.end - from <= max_read.max(page).min(prefetch), "read past the cache capped: {p:?} -> {e:?}");
        // Beyond max_read from its start by at most the cached part.
        assert!(e.end - e.start <= max_read.max(page).saturating_add(from - e.start), "{p:?} -> {e:?}");
    }
}

/// A descriptor a client can pass.
#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fixture {
    /// A 4 MiB regular file, O_RDONLY.
    Big,
    /// A 4 KiB regular file.
    Small,
    Empty,
    ReadWrite,
    WriteOnly,
    PathOnly,
    Directory,
    Pipe,
    Socket,
    DevZero,
    Procfs,
    Tmpfs,
    EventFd,
}

/// A number for an offset or length, weighted to the edges.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Number {
    Zero,
    Small(u16),
    Pages(u16),
    /// Around the end of the big file.
    NearEnd(i32),
    Max,
    Any(u64),
}

impl Number {
    fn value(self) -> u64 {
        match self {
            Number::Zero => 0,
            Number::Small(n) => n.into(),
            Number::Pages(n) => u64::from(n) * 4096,
            Number::NearEnd(d) => BIG_SIZE.saturating_add_signed(d.into()),
            Number::Max => u64::MAX,
            Number::Any(n) => n,
        }
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum OpField {
    Fetch,
    Check,
    Stats,
    Other(u16),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum FlagsField {
    None,
    NoPrefetch,
    Any(u32),
}

/// What is done to a request's wire image before it is sent.
#[derive(Arbitrary, Debug, Clone)]
pub enum Damage {
    Intact,
    Magic(u32),
    Version(u16),
    Reserved(u32),
    /// Cut to this many bytes (mod 48).
    Truncate(u8),
    /// These bytes appended.
    Append(Vec<u8>),
    /// Zeros appended up to 48 + n bytes: oversized datagrams up to 64 KiB.
    Oversize(u16),
    /// One byte changed.
    Flip { at: u8, xor: u8 },
    /// These bytes instead of the request.
    Raw(Vec<u8>),
}

/// A request as a client sends it.
#[derive(Arbitrary, Debug, Clone)]
pub struct Message {
    pub op: OpField,
    pub flags: FlagsField,
    pub call: u32,
    pub seq: u64,
    pub offset: Number,
    pub length: Number,
    pub tid: u32,
    pub damage: Damage,
}

impl Message {
    /// The datagram's bytes.
    pub fn bytes(&self) -> Vec<u8> {
        let op = match self.op {
            OpField::Fetch => Op::Fetch as u16,
            OpField::Check => Op::Check as u16,
            OpField::Stats => Op::Stats as u16,
            OpField::Other(n) => n,
        };
        let flags = match self.flags {
            FlagsField::None => 0,
            FlagsField::NoPrefetch => libception_proto::request_flags::NO_PREFETCH,
            FlagsField::Any(f) => f,
        };
        let mut raw = RawRequest {
            magic: REQUEST_MAGIC,
            version: PROTO_VERSION,
            op,
            flags,
            call: self.call,
            seq: self.seq,
            offset: self.offset.value(),
            length: self.length.value(),
            tid: self.tid,
            reserved: 0,
        };
        match &self.damage {
            Damage::Magic(m) => raw.magic = *m,
            Damage::Version(v) => raw.version = *v,
            Damage::Reserved(r) => raw.reserved = *r,
            _ => {}
        }
        let mut b = raw.to_wire().to_vec();
        match &self.damage {
            Damage::Truncate(n) => b.truncate(usize::from(*n) % REQUEST_SIZE),
            Damage::Append(extra) => b.extend_from_slice(extra),
            Damage::Oversize(n) => b.resize(REQUEST_SIZE + usize::from(*n), 0),
            Damage::Flip { at, xor } => b[usize::from(*at) % REQUEST_SIZE] ^= xor,
            Damage::Raw(bytes) => b = bytes.clone(),
            _ => {}
        }
        b
    }
}

/// One thing a client (or the test) does. Client numbers are taken modulo
/// the clients open; a step on a client when none is open connects one.
#[derive(Arbitrary, Debug, Clone)]
pub enum Step {
    Connect { stranger: bool },
    Send { client: u8, message: Message, fds: Vec<Fixture> },
    /// The same request `times % 1024 + 1` times (until the socket is full)
    /// without reading a reply: a client that never reads its replies.
    Flood { client: u8, message: Message, fds: Vec<Fixture>, times: u16 },
    /// Read every reply waiting.
    Read { client: u8 },
    /// shutdown(SHUT_WR): no more requests, replies still wanted.
    HalfClose { client: u8 },
    Close { client: u8 },
    /// Drop the big file from the page cache: the next FETCH goes to the disk worker.
    Evict,
    /// Let the daemon handle everything pending.
    Pump,
}

struct ClientConn {
    fd: OwnedFd,
    /// Length of the STATS payload announced by the last reply, if any.
    payload: Option<u64>,
}

/// Descriptors the clients pass, opened once.
struct Fixtures {
    big: File,
    small: File,
    empty: File,
    read_write: File,
    write_only: File,
    path_only: File,
    directory: File,
    pipe: (OwnedFd, OwnedFd),
    socket: (std::os::unix::net::UnixStream, std::os::unix::net::UnixStream),
    dev_zero: File,
    procfs: File,
    tmpfs: Option<(tempfile::NamedTempFile, File)>,
    eventfd: OwnedFd,
}

impl Fixtures {
    fn open(dir: &Path) -> std::io::Result<Fixtures> {
        use std::os::unix::fs::OpenOptionsExt;
        let make = |name: &str, len: u64| -> std::io::Result<PathBuf> {
            let path = dir.join(name);
            let f = File::create(&path)?;
            // Real data, not a hole: the worker's reads are reads.
            std::io::Write::write_all(&mut &f, &vec![0x5a; len as usize])?;
            f.sync_all()?;
            Ok(path)
        };
        let big = make("big", BIG_SIZE)?;
        let small = make("small", 4096)?;
        let empty = make("empty", 0)?;
        let tmpfs = match tempfile::NamedTempFile::new_in("/dev/shm") {
            Ok(t) => {
                let f = File::open(t.path())?;
                Some((t, f))
            }
            Err(_) => None,
        };
        // SAFETY: eventfd returns a new descriptor or -1.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Fixtures {
            big: File::open(&big)?,
            small: File::open(&small)?,
            empty: File::open(&empty)?,
            read_write: std::fs::OpenOptions::new().read(true).write(true).open(&small)?,
            write_only: std::fs::OpenOptions::new().write(true).open(&small)?,
            path_only: std::fs::OpenOptions::new().read(true).custom_flags(libc::O_PATH).open(&big)?,
            directory: File::open(dir)?,
            pipe: nix::unistd::pipe()?,
            socket: std::os::unix::net::UnixStream::pair()?,
            dev_zero: File::open("/dev/zero")?,
            procfs: File::open("/proc/self/status")?,
            tmpfs,
            // SAFETY: a fresh descriptor we own.
            eventfd: unsafe { std::os::fd::FromRawFd::from_raw_fd(efd) },
        })
    }

    fn fd(&self, which: Fixture) -> RawFd {
        match which {
            Fixture::Big => self.big.as_raw_fd(),
            Fixture::Small => self.small.as_raw_fd(),
            Fixture::Empty => self.empty.as_raw_fd(),
            Fixture::ReadWrite => self.read_write.as_raw_fd(),
            Fixture::WriteOnly => self.write_only.as_raw_fd(),
            Fixture::PathOnly => self.path_only.as_raw_fd(),
            Fixture::Directory => self.directory.as_raw_fd(),
            Fixture::Pipe => self.pipe.0.as_raw_fd(),
            Fixture::Socket => self.socket.0.as_raw_fd(),
            Fixture::DevZero => self.dev_zero.as_raw_fd(),
            Fixture::Procfs => self.procfs.as_raw_fd(),
            Fixture::Tmpfs => self.tmpfs.as_ref().map_or(self.procfs.as_raw_fd(), |(_, f)| f.as_raw_fd()),
            Fixture::EventFd => self.eventfd.as_raw_fd(),
        }
    }
}

/// A receptionist and its disk worker in this process, with the fixtures.
pub struct Harness {
    reception: Option<Receptionist>,
    stats: Arc<Stats>,
    info: DaemonInfo,
    socket: PathBuf,
    fixtures: Fixtures,
    events: Vec<libc::epoll_event>,
    /// Descriptors of this process when the input started (0: not counted).
    baseline: usize,
    inputs: u64,
    _dir: tempfile::TempDir,
}

/// Whether a send or receive error only means the daemon closed the
/// connection or its buffer is full: things a hostile client causes.
fn expected_errno(e: nix::errno::Errno) -> bool {
    use nix::errno::Errno;
    matches!(e, Errno::EAGAIN | Errno::EPIPE | Errno::ECONNRESET | Errno::ENOTCONN | Errno::ECONNREFUSED | Errno::ETOOMANYREFS | Errno::ENOBUFS | Errno::EMSGSIZE)
}

fn fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0)
}

/// This process's descriptors and what they are, for a leak's report.
fn fd_list() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else { return Vec::new() };
    dir.flatten()
        .map(|e| format!("{} -> {}", e.file_name().to_string_lossy(), std::fs::read_link(e.path()).map(|t| t.display().to_string()).unwrap_or_default()))
        .collect()
}

impl Harness {
    /// Starts the receptionist on a socket in a new directory under `dir`
    /// (which must be on a block-device filesystem, as the daemon serves only
    /// those: a cargo target directory, not /tmp on tmpfs).
    pub fn new(dir: &Path) -> std::io::Result<Harness> {
        use std::os::unix::fs::PermissionsExt;
        // SAFETY: ignoring SIGPIPE, as the daemon does; sends use MSG_NOSIGNAL anyway.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
        let tmp = tempfile::Builder::new().prefix("libception-fuzz-").tempdir_in(dir)?;
        // Strangers must reach the socket.
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755))?;
        let socket_path = tmp.path().join("sock");
        let (listener, _) = daemon::bind_socket(&socket_path, 0o666, None).map_err(std::io::Error::other)?;
        // A signalfd with an empty mask: the loop's signal token never fires.
        let signal_fd: OwnedFd = nix::sys::signalfd::SignalFd::with_flags(
            &nix::sys::signal::SigSet::empty(),
            nix::sys::signalfd::SfdFlags::SFD_NONBLOCK | nix::sys::signalfd::SfdFlags::SFD_CLOEXEC,
        )?
        .into();
        let cfg = ReceptionConfig {
            allow_uids: Vec::new(),
            allow_gids: Vec::new(),
            trust: Trust::default(),
            allow_fs: Vec::new(),
            // Small caps, so that inputs reach them.
            limits: Limits {
                max_connections: 4,
                max_connections_per_uid: 2,
                max_queued_per_uid: 2,
                max_queued_bytes_per_uid: 2 * MAX_READ,
                max_queued: 3,
                max_queued_bytes: 3 * MAX_READ,
                max_check: MAX_READ,
            },
            per_disk: false,
            promote: crate::promotion::PromoteMode::Off,
            promote_window: std::time::Duration::from_secs(60),
            // The position order looks up FIEMAP for queued reads with the queue
            // unlocked: hostile input reaches that path here; the default FIFO
            // order meets it in the hostile-client tests of the real daemon.
            queue_order: crate::worker::QueueOrder::Position { max_wait: std::time::Duration::from_millis(50) },
            // Early answers take waiters out of a read in flight: hostile
            // input (hang-ups mid-read) meets that path here.
            reply: crate::worker::ReplyWhen::Range,
            max_read: MAX_READ,
            info: DaemonInfo {
                pid: std::process::id(),
                version: env!("CARGO_PKG_VERSION").to_string(),
                socket: socket_path.display().to_string(),
                per_disk: false,
                prefetch_controller: "fixed".into(),
                prefetch_bytes: PREFETCH,
                max_read_bytes: MAX_READ,
                residency_method: String::new(),
                uptime_s: 0.0,
                promote: String::new(),
                promoting_since_s: None,
                reply: "range".into(),
            },
        };
        let info = cfg.info.clone();
        let stats = Arc::new(Stats::new());
        let reception = Receptionist::new(cfg, listener, signal_fd, stats.clone(), Arc::new(FixedPrefetch::new(PREFETCH)))?;
        let fixtures = Fixtures::open(tmp.path())?;
        let mut h = Harness {
            reception: Some(reception),
            stats,
            info,
            socket: socket_path,
            fixtures,
            events: vec![libc::epoll_event { events: 0, u64: 0 }; 64],
            baseline: 0,
            inputs: 0,
            _dir: tmp,
        };
        // The first request maps the disk (and reads mountinfo): do it
        // before the baseline is taken.
        h.settle_and_check();
        Ok(h)
    }

    /// The harness daemon's stats document.
    pub fn snapshot(&self) -> crate::Snapshot {
        self.stats.snapshot(self.info.clone())
    }

    /// Inputs run so far.
    pub fn inputs(&self) -> u64 {
        self.inputs
    }

    /// Runs one input: the steps it decodes to, then the end-of-input checks.
    pub fn run(&mut self, data: &[u8]) {
        let mut u = Unstructured::new(data);
        let mut steps = Vec::new();
        while steps.len() < MAX_STEPS && !u.is_empty() {
            match u.arbitrary::<Step>() {
                Ok(s) => steps.push(s),
                Err(_) => break,
            }
        }
        self.run_steps(&steps);
    }

    /// Runs decoded steps, then the end-of-input checks.
    pub fn run_steps(&mut self, steps: &[Step]) {
        self.inputs += 1;
        // Taken per input: libFuzzer opens descriptors of its own between
        // inputs (a pipe to its symbolizer).
        self.baseline = fd_count();
        let mut clients: Vec<ClientConn> = Vec::new();
        for step in steps {
            match step {
                Step::Connect { stranger } => {
                    if clients.len() < MAX_CLIENTS {
                        if let Some(c) = self.connect(*stranger) {
                            clients.push(c);
                        }
                    }
                }
                Step::Send { client, message, fds } => {
                    if clients.is_empty() {
                        match self.connect(false) {
                            Some(c) => clients.push(c),
                            None => continue,
                        }
                    }
                    let n = clients.len();
                    let fds: Vec<RawFd> = fds.iter().take(MAX_FDS).map(|f| self.fixtures.fd(*f)).collect();
                    send(&clients[usize::from(*client) % n], &message.bytes(), &fds);
                }
                Step::Flood { client, message, fds, times } => {
                    if clients.is_empty() {
                        continue;
                    }
                    let n = clients.len();
                    let fds: Vec<RawFd> = fds.iter().take(MAX_FDS).map(|f| self.fixtures.fd(*f)).collect();
                    let bytes = message.bytes();
                    let c = usize::from(*client) % n;
                    for _ in 0..=(times % 1024) {
                        // A full socket: the daemon takes what is there, then
                        // the client goes on (and still reads nothing).
                        if !send(&clients[c], &bytes, &fds) {
                            self.pump();
                            if !send(&clients[c], &bytes, &fds) {
                                break;
                            }
                        }
                    }
                }
                Step::Read { client } => {
                    if !clients.is_empty() {
                        let n = clients.len();
                        read_replies(&mut clients[usize::from(*client) % n]);
                    }
                }
                Step::HalfClose { client } => {
                    if !clients.is_empty() {
                        let n = clients.len();
                        let _ = socket::shutdown(clients[usize::from(*client) % n].fd.as_raw_fd(), socket::Shutdown::Write);
                    }
                }
                Step::Close { client } => {
                    if !clients.is_empty() {
                        let n = clients.len();
                        clients.swap_remove(usize::from(*client) % n);
                    }
                }
                Step::Evict => {
                    // SAFETY: advice on a descriptor we own.
                    unsafe { libc::posix_fadvise(self.fixtures.big.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
                }
                Step::Pump => self.pump(),
            }
        }
        self.pump();
        for c in &mut clients {
            read_replies(c);
        }
        drop(clients);
        self.settle_and_check();
    }

    /// A client connection; None when the daemon's backlog is full.
    fn connect(&mut self, stranger: bool) -> Option<ClientConn> {
        let path = self.socket.clone();
        let connect = move || -> nix::Result<OwnedFd> {
            let fd = socket::socket(AddressFamily::Unix, SockType::SeqPacket, SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK, None)?;
            socket::connect(fd.as_raw_fd(), &UnixAddr::new(&path)?)?;
            Ok(fd)
        };
        let result = if stranger && nix::unistd::geteuid().is_root() {
            // SO_PEERCRED records the connecting thread's credentials: a
            // thread of our own that is nobody (raw setres[ug]id changes the
            // calling thread only) makes an untrusted peer.
            std::thread::spawn(move || {
                // SAFETY: raw syscalls that change this thread's ids only.
                let ok = unsafe {
                    libc::syscall(libc::SYS_setresgid, STRANGER_UID, STRANGER_UID, STRANGER_UID) == 0
                        && libc::syscall(libc::SYS_setresuid, STRANGER_UID, STRANGER_UID, STRANGER_UID) == 0
                };
                assert!(ok, "setresuid to nobody in a helper thread: {}", std::io::Error::last_os_error());
                connect()
            })
            .join()
            .expect("the stranger's connect thread")
        } else {
            connect()
        };
        match result {
            Ok(fd) => Some(ClientConn { fd, payload: None }),
            Err(e) if expected_errno(e) => None,
            Err(e) => panic!("connecting to the harness daemon: {e}"),
        }
    }

    /// Turns the loop until nothing is pending and the workers are idle.
    fn pump(&mut self) {
        let deadline = Instant::now() + SETTLE;
        let reception = self.reception.as_mut().expect("running");
        loop {
            match reception.turn(&mut self.events, 0).expect("epoll_wait") {
                Turn::Stop => panic!("the harness never signals the receptionist"),
                Turn::Handled(0) => {
                    if reception.load().1 {
                        return;
                    }
                    // A read in flight: wait for its reply's re-arm.
                    if let Turn::Stop = reception.turn(&mut self.events, 1).expect("epoll_wait") {
                        panic!("the harness never signals the receptionist");
                    }
                }
                Turn::Handled(_) => {}
            }
            assert!(Instant::now() < deadline, "the receptionist did not settle within {SETTLE:?}");
        }
    }

    /// With every client of the input gone: the daemon forgets them, leaks
    /// no descriptor, and still answers a fresh client.
    fn settle_and_check(&mut self) {
        self.settle(false);
        let mut probe = self.connect(false).expect("a fresh client connects");
        let check = Request { version: PROTO_VERSION, op: Op::Check, flags: 0, call: 0, seq: 7, offset: 0, length: 4096, tid: 1 };
        send(&probe, &check.encode(), &[self.fixtures.small.as_raw_fd()]);
        self.pump();
        let replies = read_replies(&mut probe);
        assert!(
            replies.iter().any(|r| r.seq == 7 && r.status == 0),
            "a fresh client's CHECK was not answered (replies {replies:?}) after input {}",
            self.inputs
        );
        drop(probe);
        self.settle(self.baseline != 0);
    }

    /// Turns the loop until the daemon holds no connection, its workers are
    /// idle and (with `fds`) the process has its baseline descriptors.
    fn settle(&mut self, fds: bool) {
        let deadline = Instant::now() + SETTLE;
        loop {
            self.pump();
            let (conns, idle) = self.reception.as_ref().expect("running").load();
            let open = fd_count();
            if conns == 0 && idle && (!fds || open == self.baseline) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "after input {}: {conns} connections still open, workers idle: {idle}, {open} descriptors open, {} before (leak): {:?}",
                self.inputs,
                self.baseline,
                fd_list()
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        if let Some(mut r) = self.reception.take() {
            r.shutdown();
        }
    }
}

/// Sends one datagram without blocking; false when it was not sent (the
/// socket is full or closed).
fn send(c: &ClientConn, bytes: &[u8], fds: &[RawFd]) -> bool {
    let iov = [IoSlice::new(bytes)];
    let cmsg = [ControlMessage::ScmRights(fds)];
    let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &cmsg };
    match socket::sendmsg::<()>(c.fd.as_raw_fd(), &iov, cmsgs, MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL, None) {
        Ok(_) => true,
        Err(e) => {
            assert!(expected_errno(e), "sending a request: {e}");
            false
        }
    }
}

/// Reads every datagram waiting on `c`, checking each; returns the replies.
fn read_replies(c: &mut ClientConn) -> Vec<Reply> {
    let mut replies = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = match socket::recv(c.fd.as_raw_fd(), &mut buf, MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_TRUNC) {
            Ok(0) => return replies, // end of stream (the daemon closed it)
            Ok(n) => n,
            Err(e) if expected_errno(e) => return replies,
            Err(e) => panic!("receiving a reply: {e}"),
        };
        assert!(n <= buf.len(), "a {n}-byte datagram from the daemon");
        if let Some(len) = c.payload.take() {
            assert_eq!(n as u64, len, "the STATS payload has the announced length");
            serde_json::from_slice::<serde_json::Value>(&buf[..n]).expect("the STATS payload is JSON");
            continue;
        }
        // A request of version 1 gets a version-1 reply.
        let (reply, _) = Reply::parse_any_version(&buf[..n])
            .unwrap_or_else(|e| panic!("the daemon sent a malformed reply ({e}): {:?}", &buf[..n]));
        assert!(reply.status <= 0, "{reply:?}");
        if reply.payload_len > 0 {
            c.payload = Some(reply.payload_len);
        }
        replies.push(reply);
    }
}
