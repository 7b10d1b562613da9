//! The daemon is not a page-cache oracle (issue 13, CVE-2019-5489): a peer
//! that neither owns a file nor opened it for writing, and is not on the
//! operator's trust lists, learns nothing about what was resident from CHECK
//! or FETCH, yet its FETCHes are still served. Owners and trusted peers get
//! the truth. Nor does anything else a stranger can see tell a hit from a
//! miss: its budget, its STATS, hanging up before a reply. Clients of
//! another uid are `libception fetch` run as `nobody`, or a thread of the
//! test with `nobody`'s credentials (root only: the test changes uid).

mod common;
use common::*;
use libception::Client;
use libception_proto::reply_flags;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;

const NOBODY: u32 = 65534;

#[derive(Debug, serde::Deserialize)]
struct Outcome {
    status: i32,
    resident: bool,
    read: bool,
    joined: bool,
    bytes_read: u64,
    resident_end: u64,
}

/// `libception fetch [--check]` as uid/gid `nobody`, on `file` passed as its
/// stdin and reopened through /dev/stdin (no directory traversal needed).
fn as_nobody(d: &Daemon, file: &Path, check: bool) -> Outcome {
    as_nobody_at(d, file, check, 0)
}

/// `as_nobody` for the 64 KiB at `offset`.
fn as_nobody_at(d: &Daemon, file: &Path, check: bool, offset: u64) -> Outcome {
    let mut cmd = Command::new(BIN);
    cmd.args(["fetch", "--json", "--fadvise-random", "--length", "64K", "--offset", &offset.to_string(), "--socket"]).arg(&d.socket);
    if check {
        cmd.arg("--check");
    }
    let out = cmd
        .arg("/dev/stdin")
        .stdin(std::fs::File::open(file).unwrap())
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .expect("run libception fetch as nobody");
    assert!(out.status.success(), "fetch as nobody failed: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("one JSON outcome")
}

use std::os::unix::process::CommandExt;

/// A daemon whose socket `nobody` can reach.
fn open_daemon(extra: &[&str]) -> Daemon {
    let mut args = vec!["--prefetch", "1M"];
    args.extend_from_slice(extra);
    Daemon::start_for_all_uids(&args)
}

fn warm(path: &Path) {
    std::fs::read(path).unwrap();
}

fn foreign_file(dir: &Path, name: &str) -> std::path::PathBuf {
    let p = make_file(dir, name, 4 * MIB);
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    p
}

/// Two foreign files in `dir`: "hot", all resident, and "cold", none of it.
fn hot_and_cold(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (hot, cold) = (foreign_file(dir, "hot"), foreign_file(dir, "cold"));
    warm(&hot);
    evict(&cold);
    (hot, cold)
}

#[test]
fn an_untrusted_reader_of_a_foreign_file_learns_nothing_but_is_served() {
    if !root_or_skip("run a client as another uid") {
        return;
    }
    let dir = real_tempdir();
    let daemon = open_daemon(&[]);
    let (hot, cold) = hot_and_cold(dir.path());

    let check = as_nobody(&daemon, &hot, true);
    assert_eq!((check.status, check.resident), (0, false), "CHECK told a stranger what is resident: {check:?}");
    let fetch = as_nobody(&daemon, &hot, false);
    assert_eq!((fetch.status, fetch.resident, fetch.read, fetch.joined, fetch.bytes_read), (0, false, false, false, 0), "{fetch:?}");
    // Nor how far the resident run goes: no window ahead of the request.
    assert_eq!((check.resident_end, fetch.resident_end), (0, 0), "resident_end told a stranger: {check:?} {fetch:?}");

    let fetch = as_nobody(&daemon, &cold, false);
    assert_eq!((fetch.status, fetch.resident, fetch.read, fetch.bytes_read, fetch.resident_end), (0, false, false, 0, 0), "{fetch:?}");
    assert_eq!(resident_prefix(&cold, 0, 4 * MIB), MIB, "the FETCH was served all the same (1 MiB prefetch)");

    let s = daemon.stats();
    assert_eq!(s.totals.residency_concealed, 3);
    // The owner learns the truth about its own file.
    std::os::unix::fs::chown(&hot, Some(NOBODY), Some(NOBODY)).unwrap();
    let check = as_nobody(&daemon, &hot, true);
    assert_eq!((check.status, check.resident), (0, true), "the owner is told: {check:?}");
}

#[test]
fn trusted_uids_and_gids_are_told_what_is_resident() {
    if !root_or_skip("run a client as another uid") {
        return;
    }
    let dir = real_tempdir();
    let hot = foreign_file(dir.path(), "hot");
    let cold = foreign_file(dir.path(), "cold");
    for flag in ["--trust-uid", "--trust-gid"] {
        let daemon = open_daemon(&[flag, &NOBODY.to_string()]);
        warm(&hot);
        let check = as_nobody(&daemon, &hot, true);
        assert_eq!((check.status, check.resident), (0, true), "{flag}: {check:?}");
        // How far the resident run goes, up to the prefetch size (1 MiB)
        // from the request's page: one answer covers a forward walk's window.
        assert_eq!(check.resident_end, MIB, "{flag}: {check:?}");
        let fetch = as_nobody_at(&daemon, &hot, false, 5000);
        assert_eq!((fetch.status, fetch.resident, fetch.resident_end), (0, true, 4096 + MIB), "{flag}: {fetch:?}");
        evict(&cold);
        let fetch = as_nobody(&daemon, &cold, false);
        assert_eq!((fetch.status, fetch.read, fetch.bytes_read, fetch.resident_end), (0, true, MIB, MIB), "{flag}: {fetch:?}");
        // Only what is resident: the run ends where the cache does.
        let fetch = as_nobody_at(&daemon, &cold, false, 64 * 1024);
        assert_eq!((fetch.status, fetch.resident, fetch.resident_end), (0, true, MIB), "{flag}: {fetch:?}");
        assert_eq!(daemon.stats().totals.residency_concealed, 0);
        assert!(daemon.log_text().contains("trusted=true"));
    }
}

/// `--reply range` answers trusted waiters as soon as their range is read,
/// but a stranger only when the whole read is done: an early answer's timing
/// would tell a range found resident from one read.
#[test]
fn a_stranger_is_answered_after_the_whole_read_even_with_reply_range() {
    if !root_or_skip("run a client as another uid") {
        return;
    }
    let dir = real_tempdir();
    let daemon = Daemon::start_for_all_uids(&["--prefetch", "4M", "--reply", "range"]);
    let (_, cold) = hot_and_cold(dir.path());
    let fetch = as_nobody(&daemon, &cold, false);
    assert_eq!((fetch.status, fetch.bytes_read, fetch.resident_end), (0, 0, 0), "{fetch:?}");
    assert_eq!(resident_prefix(&cold, 0, 4 * MIB), 4 * MIB, "answered before the read's end");
}

/// A client connected as `nobody` (the daemon takes credentials at connect).
fn nobody_client(d: &Daemon) -> Client {
    as_uid(NOBODY, || Client::connect(&d.socket).expect("connect as nobody"))
}

#[test]
fn a_stranger_at_its_budget_is_refused_alike_whether_the_range_is_resident_or_not() {
    if !root_or_skip("run a client as another uid") {
        return;
    }
    let dir = real_tempdir();
    let daemon = open_daemon(&["--max-queued-per-uid", "0"]);
    let (hot, cold) = hot_and_cold(dir.path());
    let mut stranger = nobody_client(&daemon);
    for path in [&hot, &cold] {
        let f = File::open(path).unwrap();
        let reply = stranger.fetch(f.as_raw_fd(), 0, 64 * 1024, 0).unwrap();
        assert_eq!((reply.status, reply.flags), (-libc::EAGAIN, 0), "{}: {reply:?}", path.display());
    }
    assert!(!any_resident(&cold, 0, 4 * MIB), "a refused FETCH reads nothing");
    // The owner may learn residency anyway: its hit is answered, its miss refused.
    for path in [&hot, &cold] {
        std::os::unix::fs::chown(path, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    let mut owner = nobody_client(&daemon);
    let reply = owner.fetch(File::open(&hot).unwrap().as_raw_fd(), 0, 64 * 1024, 0).unwrap();
    assert_eq!((reply.status, reply.flags & reply_flags::RESIDENT), (0, reply_flags::RESIDENT), "{reply:?}");
    let reply = owner.fetch(File::open(&cold).unwrap().as_raw_fd(), 0, 64 * 1024, 0).unwrap();
    assert_eq!(reply.status, -libc::EAGAIN, "{reply:?}");
}

#[test]
fn a_strangers_stats_hold_no_count_that_follows_from_residency() {
    if !root_or_skip("run a client as another uid") {
        return;
    }
    let dir = real_tempdir();
    let daemon = open_daemon(&[]);
    let (hot, cold) = hot_and_cold(dir.path());
    let mut stranger = nobody_client(&daemon);
    for path in [&hot, &cold] {
        let reply = stranger.fetch(File::open(path).unwrap().as_raw_fd(), 0, 64 * 1024, 0).unwrap();
        assert_eq!(reply.status, 0, "{reply:?}");
    }
    // Asked before root's own STATS: client records are per process, and
    // this test's root connection would take over the stranger's.
    let seen = stranger.stats().expect("a stranger's STATS are answered");
    assert!(seen.disks.is_empty() && seen.workers.is_empty() && seen.prefetch_usage.is_empty() && seen.controller.is_none(), "{seen:?}");
    assert!(!seen.clients.is_empty() && seen.clients.iter().all(|c| c.uid == NOBODY), "{:?}", seen.clients);
    for c in &seen.clients {
        assert_eq!((c.bytes_read, c.resident_hits, c.joined), (0, 0, 0), "{c:?}");
    }
    assert_eq!(seen.clients.iter().map(|c| c.fetch).sum::<u64>(), 2, "its own request counts stay");
    assert_eq!(seen.clients_total, seen.clients.len(), "it counts only the clients it is shown");
    // Root sees the hit and the read.
    let all = daemon.stats();
    assert!(all.disks.iter().map(|d| d.resident_hits).sum::<u64>() >= 1 && all.disks.iter().map(|d| d.reads).sum::<u64>() >= 1, "{:?}", all.disks);
    assert_eq!((seen.totals.cancelled_reads, seen.totals.cancelled_waiters), (0, 0));
}

#[test]
fn a_read_a_stranger_queued_is_made_even_when_it_hangs_up() {
    if !root_or_skip("run a client as another uid and mount FUSE") {
        return;
    }
    const K: u64 = 64 * 1024;
    let (stranger_at, quitter_at) = (4 * K, 14 * K);
    // Root's read holds the disk worker at the FUSE server until the release.
    let fuse = hang_fs::HangMount::mount().expect("mounting the test FUSE filesystem");
    let mut daemon = open_daemon(&["--allow-fs", "fuse"]);
    let file = File::open(fuse.file()).unwrap();
    let fd = file.as_raw_fd();
    fuse.hold_reads();
    let root = daemon.client();
    root.set_timeout(Some(std::time::Duration::from_secs(20))).unwrap();
    send_exact_fetch(&root, fd, 0, K, 0);
    wait_for("root's read reaches the FUSE server", || fuse.held().1 == 1);
    // Queued behind it: a stranger's read of root's file (concealed) and one
    // of root's own (not); both hang up before their reads.
    let stranger = nobody_client(&daemon);
    send_exact_fetch(&stranger, fd, stranger_at, K, 1);
    let quitter = daemon.client();
    send_exact_fetch(&quitter, fd, quitter_at, K, 2);
    wait_for("both reads are queued", || daemon.stats().disks.iter().map(|d| d.queued).sum::<u64>() == 3);
    drop(stranger);
    drop(quitter);
    wait_for("both waiters are gone", || daemon.stats().totals.cancelled_waiters == 2);
    fuse.release();
    assert_eq!(root.recv_reply().expect("root's reply").status, 0);
    wait_for("the daemon is idle", || daemon.stats().disks.iter().all(|d| d.in_flight == 0 && d.queue_length == 0));
    let log = fuse.read_log();
    let read_at = |at: u64| log.iter().any(|&o| (at..at + K).contains(&o));
    assert!(read_at(stranger_at), "the stranger's read was cancelled: reads at {log:?}");
    assert!(!read_at(quitter_at), "root's abandoned read was made: reads at {log:?}");
    assert_eq!(daemon.stats().totals.cancelled_reads, 1, "only root's read is cancelled");
    // A stranger is not told of cancellations (they follow from misses).
    let seen = nobody_client(&daemon).stats().expect("a stranger's STATS");
    assert_eq!((seen.totals.cancelled_waiters, seen.totals.cancelled_reads), (0, 0), "{:?}", seen.totals);

    // A stop does not wait on such reads: nobody is left to time them.
    let (held_at, abandoned_at) = (6 * K, 8 * K);
    fuse.hold_reads();
    send_exact_fetch(&root, fd, held_at, K, 3);
    wait_for("root's second read reaches the FUSE server", || fuse.held().1 == 1);
    let stranger = nobody_client(&daemon);
    send_exact_fetch(&stranger, fd, abandoned_at, K, 4);
    wait_for("the stranger's read is queued", || daemon.stats().disks.iter().map(|d| d.queue_length).sum::<u64>() == 1);
    drop(stranger);
    wait_for("its waiter is gone", || daemon.stats().totals.cancelled_waiters == 3);
    let log = daemon.log.clone();
    let stopped = std::thread::scope(|s| {
        s.spawn(|| {
            let stopping = || std::fs::read_to_string(&log).unwrap_or_default().contains("answering pending requests before exit");
            wait_for("the daemon begins to stop", stopping);
            std::thread::sleep(std::time::Duration::from_millis(100));
            fuse.release();
        });
        daemon.stop()
    });
    assert!(stopped.success(), "{stopped:?}");
    assert!(!fuse.read_log().iter().any(|&o| (abandoned_at..abandoned_at + K).contains(&o)), "the stop made an abandoned read: {:?}", fuse.read_log());
}
