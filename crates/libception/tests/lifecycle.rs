//! The daemon's life cycle and access control: socket creation (mode, stale
//! socket removal, refusal to steal a live daemon's socket or to replace a
//! non-socket file), peer credential checks, clean shutdown on SIGTERM and
//! SIGINT with pending requests answered and the socket removed, `--per-disk`
//! workers, and `libception run` (environment, LD_PRELOAD prepending, exit
//! status pass-through, a private daemon).

mod common;
use common::*;
use libception_proto::{reply_flags, Op, Request};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn socket_is_created_with_the_requested_mode_and_removed_at_exit() {
    let mut d = Daemon::start(&[]);
    let meta = std::fs::metadata(&d.socket).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o7777, 0o660);
    assert!(d.stop().success());
    assert!(!d.socket.exists(), "socket left behind after SIGTERM");
    assert!(d.log_text().contains("received signal 15"));

    let mut d = Daemon::start(&["--socket-mode", "0600"]);
    assert_eq!(std::fs::metadata(&d.socket).unwrap().permissions().mode() & 0o7777, 0o600);
    // SIGINT is a clean shutdown too.
    let mut child = d.child.take().unwrap();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert!(child.wait().unwrap().success());
    assert!(!d.socket.exists());
}

#[test]
fn a_live_daemon_is_never_replaced_and_a_stale_socket_is() {
    let d = Daemon::start(&[]);
    let out = Command::new(BIN).args(["daemon", "--socket"]).arg(&d.socket).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already listening"), "{err}");
    d.client().stats().expect("the first daemon still serves");

    // A stale socket: bound, then its owner went away without removing it.
    let dir = real_tempdir();
    let stale = dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    assert!(stale.exists());
    let mut child = Command::new(BIN)
        .args(["daemon", "--socket"])
        .arg(&stale)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while libception::Client::connect(&stale).is_err() {
        assert!(child.try_wait().unwrap().is_none(), "daemon refused a stale socket");
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());

    // A regular file at the path is left alone.
    let file = dir.path().join("not-a-socket");
    std::fs::write(&file, "keep me").unwrap();
    let out = Command::new(BIN).args(["daemon", "--socket"]).arg(&file).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a socket"));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
}

#[test]
fn peers_outside_the_allow_lists_are_rejected_and_logged() {
    // SAFETY: trivial getters.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let other = (uid + 4242).to_string();
    let d = Daemon::start(&["--allow-uid", &other, "--allow-gid", &other]);
    let c = libception::Client::connect(&d.socket).unwrap();
    c.set_timeout(Some(Duration::from_secs(5))).unwrap();
    let sent = c.send_raw(&Request { version: libception_proto::PROTO_VERSION, op: Op::Stats, flags: 0, call: 0, seq: 1, offset: 0, length: 0, tid: 0 }.encode(), &[]);
    let mut buf = [0u8; 64];
    let got = c.recv_raw(&mut buf);
    assert!(sent.is_err() || matches!(got, Ok(0) | Err(_)), "a rejected peer got an answer");
    let log = d.log_text();
    assert!(log.contains("rejecting a connection") && log.contains(&format!("uid={uid}")), "{log}");

    let d = Daemon::start(&["--allow-uid", &other, "--allow-gid", &gid.to_string()]);
    let s = d.stats();
    assert_eq!(s.totals.connections_rejected, 0);
}

#[test]
fn sigterm_answers_pending_requests_before_exiting() {
    let dir = real_tempdir();
    let files: Vec<_> = (0..3).map(|i| make_file(dir.path(), &format!("p{i}"), 32 * MIB)).collect();
    let mut d = Daemon::start(&["--prefetch", "2M", "--max-read", "32M"]);
    let clients: Vec<_> = files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            evict(f);
            let c = d.client();
            let file = std::fs::File::open(f).unwrap();
            c.send_raw(&Request { version: libception_proto::PROTO_VERSION, op: Op::Fetch, flags: 0, call: 0, seq: i as u64 + 1, offset: 0, length: 32 * MIB, tid: 0 }.encode(), &[file.as_raw_fd()])
                .unwrap();
            c
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while d.stats().disks.iter().map(|x| x.queued).sum::<u64>() < 3 {
        assert!(Instant::now() < deadline);
    }
    let status = d.stop();
    assert!(status.success(), "{status}");
    for (i, c) in clients.iter().enumerate() {
        let r = c.recv_reply().expect("pending request answered before exit");
        assert_eq!((r.seq, r.status), (i as u64 + 1, 0));
        assert!(r.flags & (reply_flags::READ | reply_flags::RESIDENT) != 0);
    }
    assert!(!d.socket.exists());
}

#[test]
fn per_disk_mode_gives_each_disk_its_own_worker() {
    let dir = real_tempdir();
    let on_disk = make_file(dir.path(), "a", MIB);
    // /dev/shm is tmpfs: an anonymous device, hence its own disk queue
    // (served only on the --allow-fs list).
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();
    let on_tmpfs = make_file(shm.path(), "b", MIB);
    for args in [&["--per-disk", "--allow-fs", "tmpfs"][..], &["--allow-fs", "tmpfs"][..]] {
        let d = Daemon::start(args);
        let mut c = d.client();
        for p in [&on_disk, &on_tmpfs] {
            evict(p);
            let f = std::fs::File::open(p).unwrap();
            assert_eq!(c.fetch(f.as_raw_fd(), 0, 4096, 0).unwrap().status, 0);
        }
        let s = d.stats();
        assert_eq!(s.disks.len(), 2, "{:#?}", s.disks);
        let anon = s.disks.iter().find(|x| x.name.starts_with("anon-0:")).expect("tmpfs is anonymous");
        let real = s.disks.iter().find(|x| !x.name.starts_with("anon-")).expect("the real disk");
        if !args.contains(&"--per-disk") {
            assert_eq!(s.workers.len(), 1);
            assert_eq!((anon.worker, real.worker), (0, 0));
        } else {
            assert_eq!(s.workers.len(), 2);
            assert_ne!(anon.worker, real.worker);
        }
    }
}

fn empty_shared_object(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let src = dir.join(format!("{name}.c"));
    let so = dir.join(format!("{name}.so"));
    std::fs::write(&src, "int libception_test_marker_symbol;\n").unwrap();
    let ok = Command::new("cc").args(["-shared", "-fPIC", "-o"]).arg(&so).arg(&src).status().unwrap();
    assert!(ok.success(), "cc could not build a test shared object");
    so
}

#[test]
fn run_sets_the_environment_prepends_the_shim_and_passes_the_exit_status() {
    let dir = real_tempdir();
    let shim = empty_shared_object(dir.path(), "libdeception");
    let other = empty_shared_object(dir.path(), "other");
    let out = Command::new(BIN)
        .args(["run", "--mode", "serialize", "--prefetch", "4M", "--timeout-ms", "250", "--socket", "/tmp/x.sock", "--shim"])
        .arg(&shim)
        .args(["--", "sh", "-c", "echo \"$LD_PRELOAD|$LIBCEPTION_MODE|$LIBCEPTION_PREFETCH|$LIBCEPTION_SOCKET|$LIBCEPTION_TIMEOUT_MS\"; exit 7"])
        .env("LD_PRELOAD", &other)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(7));
    let shim_abs = shim.canonicalize().unwrap();
    // LIBCEPTION_PREFETCH is read in prefetch mode only, so only that mode gets it.
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("{}:{}|serialize||/tmp/x.sock|250", shim_abs.display(), other.display())
    );
    let out = Command::new(BIN)
        .args(["run", "--mode", "prefetch", "--prefetch", "4M", "--shim"])
        .arg(&shim)
        .args(["--", "sh", "-c", "echo \"$LIBCEPTION_MODE|$LIBCEPTION_PREFETCH\""])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "prefetch|4194304");
    // Killed by a signal: 128 + signal number.
    let st = Command::new(BIN).args(["run", "--shim"]).arg(&shim).args(["--", "sh", "-c", "kill -TERM $$"]).status().unwrap();
    assert_eq!(st.code(), Some(128 + libc::SIGTERM));
    // LIBCEPTION_SHIM is used when --shim is not given; a missing shim is an error naming it.
    let out = Command::new(BIN).args(["run", "--", "true"]).env("LIBCEPTION_SHIM", dir.path().join("missing.so")).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.so"));
}

#[test]
fn run_can_start_a_private_daemon_for_the_program() {
    let dir = real_tempdir();
    let shim = empty_shared_object(dir.path(), "libdeception");
    let script = format!(
        "{bin} stat --json --socket \"$LIBCEPTION_SOCKET\" > {out} && echo \"$LIBCEPTION_SOCKET\"",
        bin = BIN,
        out = dir.path().join("stats.json").display()
    );
    let out = Command::new(BIN)
        .args(["run", "--start-daemon", "--prefetch", "1M", "--shim"])
        .arg(&shim)
        .args(["--", "sh", "-c", &script])
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let socket = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(!socket.is_empty());
    assert!(!std::path::Path::new(&socket).exists(), "the private daemon's socket outlived it");
    let stats: libception::Snapshot = serde_json::from_slice(&std::fs::read(dir.path().join("stats.json")).unwrap()).unwrap();
    assert_eq!(stats.daemon.prefetch_bytes, MIB);
    assert_eq!(stats.daemon.socket, socket);
}

#[test]
fn stat_prints_a_table_and_json_and_prometheus_serves_text() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let dir = real_tempdir();
    let file = make_file(dir.path(), "f", 4 * MIB);
    evict(&file);
    let d = Daemon::start(&["--prometheus", &addr]);
    let f = std::fs::File::open(&file).unwrap();
    assert_eq!(d.client().fetch(f.as_raw_fd(), 0, 4096, 0).unwrap().status, 0);

    let out = Command::new(BIN).args(["stat", "--socket"]).arg(&d.socket).output().unwrap();
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    let disk = d.stats().disks[0].name.clone();
    assert!(table.contains("DISK") && table.contains("MAXIF"), "{table}");
    assert!(table.lines().any(|l| l.starts_with(&disk)), "{table}");

    let out = Command::new(BIN).args(["stat", "--json", "--socket"]).arg(&d.socket).output().unwrap();
    let snap: libception::Snapshot = serde_json::from_slice(&out.stdout).expect("stat --json prints the snapshot");
    assert_eq!(snap.format, libception::STATS_FORMAT);
    assert_eq!(snap.disks[0].reads, 1);

    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(&addr).expect("prometheus endpoint listening");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    assert!(body.contains(&format!("libception_disk_max_in_flight{{disk=\"{disk}\"}} 1")), "{body}");
    assert!(body.contains(&format!("libception_disk_reads_total{{disk=\"{disk}\"}} 1")), "{body}");
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    s.write_all(b"GET /nope HTTP/1.1\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    assert!(body.starts_with("HTTP/1.1 404"));
}

/// Regression: a client that closes right after its reply used to be read as
/// an empty datagram (recv returns 0 for both on SOCK_SEQPACKET) and logged
/// as a protocol error.
#[test]
fn ordinary_disconnects_are_not_protocol_errors() {
    let d = Daemon::start(&[]);
    for _ in 0..50 {
        let mut c = d.client();
        c.stats().unwrap();
    }
    let s = d.stats();
    assert_eq!(s.totals.protocol_errors, 0, "{:?}", s.totals);
    assert!(!d.log_text().contains("request refused"));
    // A genuinely empty datagram on a live connection is still refused.
    let c = d.client();
    c.send_raw(&[], &[]).unwrap();
    let r = c.recv_reply().unwrap();
    assert_eq!(r.status, -libc::EPROTO);
}

/// systemd socket activation (sd_listen_fds): with LISTEN_PID = its pid and
/// LISTEN_FDS = 1 the daemon serves the listening socket at fd 3, binds
/// nothing at --socket, and leaves the socket file (systemd's) at exit.
#[test]
fn socket_activation_serves_the_passed_socket_and_leaves_its_file() {
    use nix::sys::socket::{bind, listen, socket, AddressFamily, Backlog, SockFlag, SockType, UnixAddr};
    use std::os::unix::process::CommandExt;
    let dir = real_tempdir();
    let path = dir.path().join("activated.sock");
    let unused = dir.path().join("unused.sock");
    let listener = socket(AddressFamily::Unix, SockType::SeqPacket, SockFlag::SOCK_CLOEXEC, None).unwrap();
    bind(listener.as_raw_fd(), &UnixAddr::new(&path).unwrap()).unwrap();
    listen(&listener, Backlog::new(16).unwrap()).unwrap();
    let raw = listener.as_raw_fd();
    let log = dir.path().join("daemon.log");
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(r#"export LISTEN_PID=$$ LISTEN_FDS=1; exec "$0" daemon --socket "$1""#)
        .arg(BIN)
        .arg(&unused)
        .stderr(std::fs::File::create(&log).unwrap());
    // SAFETY: dup2 and fcntl are async-signal-safe; fd 3 is what the daemon
    // expects (dup2 onto itself keeps close-on-exec, hence the fcntl).
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(raw, 3) != 3 || libc::fcntl(3, libc::F_SETFD, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    drop(listener);
    let mut c = libception::Client::connect(&path).expect("connect to the activated socket");
    c.set_timeout(Some(Duration::from_secs(10))).unwrap();
    let s = c.stats().unwrap_or_else(|e| panic!("no answer on the activated socket: {e}\n{}", std::fs::read_to_string(&log).unwrap()));
    assert_eq!(s.daemon.pid, child.id());
    drop(c);
    assert!(!unused.exists(), "the daemon bound --socket although it was given one");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    assert!(path.exists(), "the activated socket's file belongs to systemd and stays");
    assert!(std::fs::read_to_string(&log).unwrap().contains("LISTEN_FDS"));
}

/// Every FUSE or tmpfs mount is a new anonymous device: with --per-disk and
/// --allow-fs they used to get a worker thread each, never reaped. Past 8
/// they share one queue (`anon-other`). Root only: the test mounts 12 tmpfs.
#[test]
fn anonymous_devices_get_a_bounded_number_of_queues() {
    if !root_or_skip("mount tmpfs") {
        return;
    }
    let dir = real_tempdir();
    let mut mounts = Vec::new();
    for i in 0..12 {
        let m = dir.path().join(format!("m{i}"));
        std::fs::create_dir(&m).unwrap();
        let target = std::ffi::CString::new(m.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: valid C strings; the mount is undone below.
        let rc = unsafe { libc::mount(c"tmpfs".as_ptr(), target.as_ptr(), c"tmpfs".as_ptr(), 0, std::ptr::null()) };
        assert_eq!(rc, 0, "mount tmpfs: {}", std::io::Error::last_os_error());
        mounts.push((m, target));
    }
    let d = Daemon::start(&["--per-disk", "--allow-fs", "tmpfs"]);
    let mut c = d.client();
    for (m, _) in &mounts {
        let p = make_file(m, "f", 64 << 10);
        let f = std::fs::File::open(&p).unwrap();
        assert_eq!(c.fetch(f.as_raw_fd(), 0, 4096, 0).unwrap().status, 0);
    }
    let s = d.stats();
    for (_, target) in &mounts {
        // SAFETY: unmounting what this test mounted.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
    assert_eq!(s.workers.len(), 9, "{:?}", s.disks.iter().map(|d| &d.name).collect::<Vec<_>>());
    let other = s.disks.iter().find(|d| d.name == "anon-other").expect("a shared queue for the rest");
    assert_eq!(other.requests, 4);
}

/// Protocol version 2 added `resident_end` to the reply; a shim loaded into a
/// long-running server before an upgrade still speaks version 1 and must be
/// answered in version 1's layout (40 bytes), not dropped as a protocol error.
#[test]
fn a_version_1_client_is_answered_in_version_1() {
    let dir = real_tempdir();
    let path = make_file(dir.path(), "v1", 4 * MIB);
    std::fs::read(&path).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let d = Daemon::start(&["--prefetch", "1M"]);
    let c = d.client();
    for (version, size) in [(1u16, libception_proto::REPLY_SIZE_V1), (libception_proto::PROTO_VERSION, libception_proto::REPLY_SIZE)] {
        let req = Request { version, op: Op::Fetch, flags: 0, call: 0, seq: 5, offset: 0, length: 4096, tid: 0 };
        c.send_raw(&req.encode(), &[file.as_raw_fd()]).unwrap();
        let mut buf = [0u8; libception_proto::MAX_MESSAGE];
        let n = c.recv_raw(&mut buf).unwrap();
        assert_eq!((n, u16::from_le_bytes([buf[4], buf[5]])), (size, version), "reply to a version {version} request");
        let mut image = [0u8; libception_proto::REPLY_SIZE];
        image[..n].copy_from_slice(&buf[..n]);
        image[4..6].copy_from_slice(&libception_proto::PROTO_VERSION.to_le_bytes());
        let r = libception_proto::Reply::parse(&image).unwrap();
        assert_eq!((r.status, r.seq, r.flags & reply_flags::RESIDENT), (0, 5, reply_flags::RESIDENT));
        // Root is trusted: version 2 says how far the run goes, version 1 cannot.
        assert_eq!(r.resident_end, if version == 1 { 0 } else { MIB }, "version {version}");
    }
}
