//! Helpers shared by the daemon's integration tests: start the real
//! `libception` binary on a private socket (and stop it, checking a clean
//! exit), make and evict test files, count a process's descriptors.
#![allow(dead_code)]

pub mod hang_fs;

use libception::Client;
use libception::Snapshot;
use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_libception");
pub const MIB: u64 = 1 << 20;

/// A daemon started for one test; stopped (SIGTERM) on drop.
pub struct Daemon {
    pub child: Option<Child>,
    pub socket: PathBuf,
    pub log: PathBuf,
    pub dir: tempfile::TempDir,
}

/// A temporary directory on the real filesystem the tests run from (the
/// cargo target dir), not tmpfs, so that eviction and disk mapping are real.
pub fn real_tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("daemon-test-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("temp dir in the cargo target dir")
}

impl Daemon {
    pub fn start(args: &[&str]) -> Daemon {
        Self::start_with_nofile(args, None)
    }

    /// A daemon whose socket clients of any uid can reach (mode 0666 in a
    /// directory open to all).
    pub fn start_for_all_uids(args: &[&str]) -> Daemon {
        let mut all = vec!["--socket-mode", "0666"];
        all.extend_from_slice(args);
        let d = Daemon::start(&all);
        std::fs::set_permissions(d.dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        d
    }

    /// Starts it with its soft RLIMIT_NOFILE set to `soft` (the hard limit
    /// unchanged), as a service manager's default of 1024 would.
    pub fn start_with_nofile(args: &[&str], soft: Option<u64>) -> Daemon {
        Self::start_with_nofile_limits(args, soft, None)
    }

    /// Starts it with RLIMIT_NOFILE's soft and hard limits lowered to the
    /// given values (a hard limit the daemon cannot raise past).
    pub fn start_with_nofile_limits(args: &[&str], soft: Option<u64>, hard: Option<u64>) -> Daemon {
        use std::os::unix::process::CommandExt;
        let dir = real_tempdir();
        let socket = dir.path().join("reception.sock");
        let log = dir.path().join("daemon.log");
        let mut command = Command::new(BIN);
        command
            .args(["--log-level", "debug", "daemon", "--socket"])
            .arg(&socket)
            .args(args)
            .stdout(Stdio::null())
            .stderr(File::create(&log).unwrap());
        if soft.is_some() || hard.is_some() {
            // SAFETY: only async-signal-safe calls between fork and exec.
            unsafe {
                command.pre_exec(move || {
                    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
                    libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
                    if let Some(hard) = hard {
                        lim.rlim_max = hard.min(lim.rlim_max);
                    }
                    lim.rlim_cur = soft.unwrap_or(lim.rlim_cur).min(lim.rlim_max);
                    libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
                    Ok(())
                });
            }
        }
        let child = command
            .spawn()
            .expect("spawn libception daemon");
        let mut d = Daemon { child: Some(child), socket, log, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Client::connect(&d.socket).is_err() {
            if let Some(st) = d.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("daemon exited at start-up ({st}):\n{}", d.log_text());
            }
            assert!(Instant::now() < deadline, "daemon did not listen within 10 s:\n{}", d.log_text());
            std::thread::sleep(Duration::from_millis(10));
        }
        d
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    pub fn client(&self) -> Client {
        let c = Client::connect(&self.socket).expect("connect to daemon");
        c.set_timeout(Some(Duration::from_secs(30))).unwrap();
        c
    }

    pub fn stats(&self) -> Snapshot {
        self.client().stats().expect("stats")
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn fd_count(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid())).unwrap().count()
    }

    /// Waits until the daemon's fd count is `want` (closes are asynchronous
    /// to the client); returns the last count seen.
    pub fn wait_fd_count(&self, want: usize) -> usize {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let n = self.fd_count();
            if n == want || Instant::now() > deadline {
                return n;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM and wait; returns the exit status.
    pub fn stop(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("daemon running");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                return st;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("daemon did not exit within 30 s of SIGTERM:\n{}", self.log_text());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Writes a file of `size` bytes (content depends on the name) and returns its path.
pub fn make_file(dir: &Path, name: &str, size: u64) -> PathBuf {
    let path = dir.join(name);
    let mut f = File::create(&path).unwrap();
    let seed = name.bytes().fold(7u8, |a, b| a.wrapping_mul(31).wrapping_add(b));
    let block: Vec<u8> = (0..MIB as usize).map(|i| (i as u8).wrapping_mul(seed)).collect();
    let mut left = size;
    while left > 0 {
        let n = left.min(MIB) as usize;
        f.write_all(&block[..n]).unwrap();
        left -= n as u64;
    }
    f.sync_all().unwrap();
    path
}

/// Drops a file's pages from the page cache.
pub fn evict(path: &Path) {
    let f = File::open(path).unwrap();
    f.sync_all().unwrap();
    // SAFETY: advice on a descriptor we own.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(rc, 0);
}

/// Resident bytes from `start` (up to `end`) without a gap, checked here.
pub fn resident_prefix(path: &Path, start: u64, end: u64) -> u64 {
    use std::os::fd::AsFd;
    let f = File::open(path).unwrap();
    libception::resident_prefix(f.as_fd(), start, end).unwrap()
}

/// Whether any page of `[start, end)` is resident.
pub fn any_resident(path: &Path, start: u64, end: u64) -> bool {
    use std::os::fd::AsFd;
    let f = File::open(path).unwrap();
    let ps = libception::page_size();
    let mut pos = start;
    while pos < end {
        if libception::is_resident(f.as_fd(), pos, (pos + ps).min(end)).unwrap() {
            return true;
        }
        pos += ps;
    }
    false
}

/// Opens a file and advises RANDOM access, so that kernel readahead adds
/// nothing to what the daemon reads through this descriptor.
pub fn open_random(path: &Path) -> File {
    let f = File::open(path).unwrap();
    // SAFETY: advice on a descriptor we own.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    f
}

/// False, after saying why the test is skipped, when not root. A skipped
/// test prints SKIP and passes in cargo's count: read the output.
pub fn root_or_skip(needs: &str) -> bool {
    if !is_root() {
        eprintln!("SKIP: needs root to {needs}");
    }
    is_root()
}

/// Runs `f` on a thread of its own whose credentials (only) are `uid` and
/// gid `uid` (raw setres[ug]id: glibc's wrappers would change every thread
/// of the process). A socket connected in `f` keeps those credentials for
/// the daemon's SO_PEERCRED. Root only.
pub fn as_uid<T: Send>(uid: u32, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: plain syscalls changing this thread's credentials.
            let ok = unsafe {
                libc::syscall(libc::SYS_setresgid, uid, uid, uid) == 0 && libc::syscall(libc::SYS_setresuid, uid, uid, uid) == 0
            };
            assert!(ok, "setresuid({uid}) in a helper thread: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .expect("the helper thread with another uid panicked")
    })
}

pub fn is_root() -> bool {
    // SAFETY: no arguments, no memory effects.
    unsafe { libc::geteuid() == 0 }
}

/// Raises this process's soft RLIMIT_NOFILE to its hard limit; returns it.
pub fn raise_own_nofile() -> u64 {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain syscalls on a local struct.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
    lim.rlim_cur
}

/// Sends a FETCH of exactly `[offset, offset + length)` (no prefetch), tagged
/// `seq`, without waiting for the reply.
pub fn send_exact_fetch(c: &Client, fd: i32, offset: u64, length: u64, seq: u64) {
    use libception_proto::{request_flags, Op, Request, PROTO_VERSION};
    let req = Request { version: PROTO_VERSION, op: Op::Fetch, flags: request_flags::NO_PREFETCH, call: 0, seq, offset, length, tid: 0 };
    c.send_raw(&req.encode(), &[fd]).unwrap();
}

/// Polls `cond` every 2 ms until it holds; fails after 20 s naming `what`.
pub fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The daemon started with `args` exits 2 before binding its socket, saying
/// `expect` on stderr.
pub fn daemon_refuses(args: &[&str], expect: &str) {
    let dir = real_tempdir();
    let out = Command::new(BIN)
        .args(["daemon", "--socket"])
        .arg(dir.path().join("s.sock"))
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(expect), "{args:?}: expected {expect:?} in {err}");
    assert!(!dir.path().join("s.sock").exists(), "refused before binding");
}
