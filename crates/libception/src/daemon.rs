//! `libception daemon`: socket setup, signal handling, threads, shutdown.
//!
//! Start-up order matters: SIGTERM/SIGINT are blocked before any thread is
//! spawned (so every thread inherits the mask and only the receptionist's
//! signalfd sees them), then the socket is bound. An existing socket file is
//! probed with `connect`: if a daemon answers we refuse to start; if nobody
//! does (ECONNREFUSED) the file is stale and removed. Anything at the path
//! that is not a socket is left alone and start-up fails. The socket is
//! created under a restrictive umask and then chmod'ed to `--socket-mode`, so
//! there is no window in which it is more open than asked.
//!
//! Under systemd socket activation (`LISTEN_FDS`, `dist/systemd/`) the
//! listening socket is fd 3 and systemd owns the file: nothing is bound,
//! chmod'ed or removed.
//!
//! Shutdown: the receptionist stops accepting, the workers drain their queues
//! (answering every pending request), the socket file is removed if it is
//! still ours (same inode), and the process exits 0.

use crate::prefetch::adaptive::AdaptivePrefetch;
use crate::prefetch::fixed::FixedPrefetch;
use crate::prefetch::PrefetchController;
use crate::receptionist::{ReceptionConfig, Receptionist};
use crate::stats::{DaemonInfo, Stats};
use crate::limits::Limits;
use crate::trust::Trust;
use crate::promotion::PromoteMode;
use crate::worker::{QueueOrder, ReplyWhen};
use anyhow::{bail, Context, Result};
use libception_proto::{BitrateScale, Prefetch};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::socket::{self, AddressFamily, Backlog, SockFlag, SockType, UnixAddr};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Everything `libception daemon` can be told.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    pub socket: PathBuf,
    pub socket_mode: u32,
    pub socket_group: Option<u32>,
    pub allow_uids: Vec<u32>,
    pub allow_gids: Vec<u32>,
    /// Peers that may learn any file's residency (`trust.rs`).
    pub trust: Trust,
    /// Filesystem types on anonymous devices served anyway (`fsfilter.rs`).
    pub allow_fs: Vec<String>,
    /// Caps per uid and in all (`limits.rs`).
    pub limits: Limits,
    pub per_disk: bool,
    /// When the workers read each range again from the cache to activate
    /// its pages (`promotion.rs`, `worker.rs`), and `auto`'s window.
    pub promote: PromoteMode,
    pub promote_window: Duration,
    /// In which order each worker takes its queued reads (`worker.rs`).
    pub queue_order: QueueOrder,
    /// When the workers answer the clients waiting on a read (`worker.rs`).
    pub reply: ReplyWhen,
    pub prefetch: Prefetch,
    /// With a fixed size: how a slower stream's size follows its estimated
    /// bitrate (`--prefetch-scale`; paper 001 Fig 10). `None`: one size.
    pub prefetch_scale: BitrateScale,
    pub max_read: u64,
    pub prometheus: Option<SocketAddr>,
}

/// Binds the listening socket, refusing to steal a live daemon's path.
pub fn bind_socket(path: &Path, mode: u32, group: Option<u32>) -> Result<(OwnedFd, (u64, u64))> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            let probe = socket::socket(AddressFamily::Unix, SockType::SeqPacket, SockFlag::SOCK_CLOEXEC, None)
                .context("creating a probe socket")?;
            let addr = UnixAddr::new(path).with_context(|| format!("socket path {} is not usable", path.display()))?;
            match socket::connect(probe.as_raw_fd(), &addr) {
                Ok(()) => bail!(
                    "another libception daemon is already listening on {} (stop it, or pass --socket to use another path)",
                    path.display()
                ),
                Err(nix::errno::Errno::ECONNREFUSED) => {
                    tracing::info!(socket = %path.display(), "removing stale socket left by a daemon that is gone");
                    std::fs::remove_file(path).with_context(|| format!("removing stale socket {}", path.display()))?;
                }
                Err(e) => bail!("probing the existing socket {} failed: {e}; remove it if no daemon uses it", path.display()),
            }
        }
        Ok(_) => bail!("{} exists and is not a socket; refusing to replace it", path.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => bail!("cannot inspect socket path {}: {e}", path.display()),
    }
    if let Some(parent) = path.parent() {
        if !parent.as_os_str().is_empty() && !parent.is_dir() {
            bail!("the directory of the socket path {} does not exist", path.display());
        }
    }
    let fd = socket::socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )
    .context("creating the listening socket")?;
    let addr = UnixAddr::new(path).with_context(|| format!("socket path {} is too long", path.display()))?;
    // SAFETY: umask only changes this process's creation mask; restored below.
    let old = unsafe { libc::umask(0o177) };
    let bound = socket::bind(fd.as_raw_fd(), &addr);
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    bound.with_context(|| format!("binding {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("setting mode {mode:o} on {}", path.display()))?;
    if let Some(gid) = group {
        std::os::unix::fs::chown(path, None, Some(gid)).with_context(|| format!("setting group {gid} on {}", path.display()))?;
    }
    socket::listen(&fd, Backlog::new(1024).unwrap_or(Backlog::MAXCONN)).context("listening on the socket")?;
    let meta = std::fs::metadata(path)?;
    Ok((fd, (meta.dev(), meta.ino())))
}

/// Runs the daemon until SIGTERM/SIGINT.
pub fn run(cfg: DaemonConfig) -> Result<()> {
    let mut mask = SigSet::empty();
    mask.add(Signal::SIGTERM);
    mask.add(Signal::SIGINT);
    mask.thread_block().context("blocking SIGTERM/SIGINT")?;
    // SAFETY: ignoring SIGPIPE process-wide; sends use MSG_NOSIGNAL anyway.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    raise_nofile_limit();
    let signal_fd = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC).context("creating a signalfd")?;
    let signal_fd: OwnedFd = signal_fd.into();

    let controller: Arc<dyn PrefetchController> = match &cfg.prefetch {
        Prefetch::Adaptive(params) => Arc::new(AdaptivePrefetch::new(params.clone())?),
        Prefetch::Fixed(bytes) => Arc::new(FixedPrefetch::new(*bytes).with_scale(cfg.prefetch_scale)),
    };
    // Socket activation: systemd owns the socket file (mode, group, removal).
    let (listener, identity) = match activated_listener()? {
        Some(fd) => {
            tracing::info!("using the listening socket passed by the service manager (LISTEN_FDS); --socket-mode and --socket-group do not apply");
            (fd, None)
        }
        None => {
            let (fd, identity) = bind_socket(&cfg.socket, cfg.socket_mode, cfg.socket_group)?;
            (fd, Some(identity))
        }
    };
    let stats = Arc::new(Stats::new());
    let info = DaemonInfo {
        pid: std::process::id(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        socket: cfg.socket.display().to_string(),
        per_disk: cfg.per_disk,
        prefetch_controller: controller.name().to_string(),
        prefetch_bytes: controller.current_bytes(""),
        max_read_bytes: cfg.max_read.max(cfg.prefetch.max_bytes()),
        residency_method: String::new(),
        uptime_s: 0.0,
        promote: String::new(),
        promoting_since_s: None,
        reply: match cfg.reply {
            ReplyWhen::Read => "read",
            ReplyWhen::Range => "range",
        }
        .to_string(),
    };
    if let Some(addr) = cfg.prometheus {
        spawn_prometheus(addr, stats.clone(), controller.clone(), info.clone())?;
    }
    tracing::info!(
        socket = %cfg.socket.display(),
        mode = %format!("{:o}", cfg.socket_mode),
        prefetch = %match &cfg.prefetch {
            Prefetch::Adaptive(p) => format!("{} step {}, interval {:?}, scale {}", Prefetch::Adaptive(p.clone()), p.step, p.interval, p.scale.name()),
            Prefetch::Fixed(bytes) if cfg.prefetch_scale == BitrateScale::None => bytes.to_string(),
            Prefetch::Fixed(bytes) => format!("{bytes}, scaled by {} for slower streams", cfg.prefetch_scale.name()),
        },
        per_disk = cfg.per_disk,
        promote = cfg.promote.name(),
        queue_order = ?cfg.queue_order,
        reply = ?cfg.reply,
        euid = nix::unistd::geteuid().as_raw(),
        "libception daemon listening"
    );
    if !nix::unistd::geteuid().is_root() {
        tracing::warn!("not running as root: without CAP_FOWNER, residency checks of files this daemon neither owns nor may write fail and count as misses; without CAP_DAC_READ_SEARCH, files it may not read are read through the client's description");
    }
    let reception = Receptionist::new(
        ReceptionConfig {
            allow_uids: cfg.allow_uids.clone(),
            allow_gids: cfg.allow_gids.clone(),
            trust: cfg.trust.clone(),
            allow_fs: cfg.allow_fs.clone(),
            limits: cfg.limits.clone(),
            per_disk: cfg.per_disk,
            promote: cfg.promote,
            promote_window: cfg.promote_window,
            queue_order: cfg.queue_order,
            reply: cfg.reply,
            max_read: cfg.max_read,
            info,
        },
        listener,
        signal_fd,
        stats,
        controller,
    )?;
    let result = reception.run();
    if let Some(identity) = identity {
        remove_if_ours(&cfg.socket, identity);
    }
    tracing::info!("libception daemon stopped");
    result
}

/// The listening socket passed by socket activation (sd_listen_fds(3)
/// protocol: `LISTEN_PID` is this process, `LISTEN_FDS` >= 1, the first at
/// fd 3), checked to be a listening SOCK_SEQPACKET socket and made
/// non-blocking and close-on-exec. None when not socket-activated. The
/// variables are removed so that no child sees them.
fn activated_listener() -> Result<Option<OwnedFd>> {
    use std::os::fd::FromRawFd;
    const SD_LISTEN_FDS_START: i32 = 3;
    let pid = std::env::var("LISTEN_PID").ok();
    let fds = std::env::var("LISTEN_FDS").ok();
    std::env::remove_var("LISTEN_PID");
    std::env::remove_var("LISTEN_FDS");
    std::env::remove_var("LISTEN_FDNAMES");
    let (Some(pid), Some(fds)) = (pid, fds) else { return Ok(None) };
    if pid.trim().parse::<u32>().ok() != Some(std::process::id()) {
        return Ok(None);
    }
    let n: i32 = fds.trim().parse().with_context(|| format!("LISTEN_FDS={fds:?} is not a number"))?;
    if n < 1 {
        return Ok(None);
    }
    if n > 1 {
        bail!("socket activation passed {n} sockets; libception.socket must have exactly one ListenSequentialPacket=");
    }
    // SAFETY: the service manager passed fd 3 to us and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(SD_LISTEN_FDS_START) };
    let ty = socket::getsockopt(&fd, socket::sockopt::SockType).context("the socket passed by socket activation (fd 3) is not a socket")?;
    let listening = socket::getsockopt(&fd, socket::sockopt::AcceptConn).unwrap_or(false);
    if ty != SockType::SeqPacket || !listening {
        bail!("the socket passed by socket activation is not a listening SOCK_SEQPACKET socket (use ListenSequentialPacket= in libception.socket)");
    }
    nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK)).context("making the activated socket non-blocking")?;
    nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC)).context("marking the activated socket close-on-exec")?;
    Ok(Some(fd))
}

/// Raises the soft limit on descriptors to the hard limit: each connection
/// and each queued read holds one, and running out makes accept4 fail.
fn raise_nofile_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => tracing::info!(from = soft, to = hard, "raised the descriptor limit (RLIMIT_NOFILE) to its hard limit"),
            Err(e) => tracing::warn!("raising RLIMIT_NOFILE from {soft} to {hard} failed: {e}"),
        },
        Ok(_) => {}
        Err(e) => tracing::warn!("reading RLIMIT_NOFILE failed: {e}"),
    }
}

fn remove_if_ours(path: &Path, (dev, ino): (u64, u64)) {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if meta.dev() == dev && meta.ino() == ino {
            if let Err(e) = std::fs::remove_file(path) {
                tracing::warn!("removing socket {} failed: {e}", path.display());
            }
        }
    }
}

/// A minimal HTTP responder for Prometheus on its own thread: `GET /metrics`
/// returns the text exposition, anything else 404. One connection at a time
/// with short timeouts is plenty for a scraper.
fn spawn_prometheus(addr: SocketAddr, stats: Arc<Stats>, controller: Arc<dyn PrefetchController>, info: DaemonInfo) -> Result<()> {
    let listener = TcpListener::bind(addr).with_context(|| format!("binding the Prometheus endpoint {addr}"))?;
    tracing::info!(%addr, "Prometheus endpoint at http://{addr}/metrics");
    std::thread::Builder::new().name("prometheus".into()).spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
            let mut req = Vec::new();
            let mut chunk = [0u8; 1024];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 8192 {
                match stream.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => req.extend_from_slice(&chunk[..n]),
                }
            }
            let line = String::from_utf8_lossy(&req);
            let first = line.lines().next().unwrap_or("");
            let response = if first.starts_with("GET /metrics ") || first.starts_with("GET / ") {
                let mut i = info.clone();
                i.prefetch_bytes = controller.current_bytes("");
                let mut snapshot = stats.snapshot(i);
                snapshot.add_controller(controller.as_ref());
                let body = snapshot.to_prometheus();
                format!("HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
            } else {
                "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_string()
            };
            let _ = stream.write_all(response.as_bytes());
        }
    })?;
    Ok(())
}
