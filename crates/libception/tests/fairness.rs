//! Limits and fairness between clients of different (non-root) uids, on the
//! real daemon (issue 13): each uid has its own cap on queued reads and on
//! connections, and a disk's queue serves uids in turn, so one uid's backlog
//! delays another's next read by at most one read, not by the whole backlog.
//!
//! A connection has one request outstanding at a time (as a shim thread
//! does), so a uid's backlog is spread over its connections.
//!
//! The disk is a FUSE file whose reads are held until the test releases
//! them (`hang_fs`), so the queue is filled while the worker waits, and the
//! FUSE server's log of read offsets is the order the worker issued them.
//! Clients of other uids connect from threads with those credentials (root
//! only: the test changes uid and mounts FUSE).

mod common;
use common::*;
use libception::Client;
use libception_proto::{Op, Request, PROTO_VERSION};
use std::os::fd::AsRawFd;
use std::time::Duration;

const NOBODY: u32 = 65534;
/// A uid with no account, as an unprivileged web server's could be.
const OTHER: u32 = 4242;
const K: u64 = 64 * 1024;

/// A FETCH of exactly [seq x K, (seq + 1) x K), tagged `seq`.
fn fetch(c: &Client, fd: i32, seq: u64) {
    send_exact_fetch(c, fd, seq * K, K, seq);
}

#[test]
fn each_uid_has_its_own_caps_and_its_turn_at_the_disk() {
    if !root_or_skip("change uid and mount FUSE") {
        return;
    }
    let fuse = hang_fs::HangMount::mount().expect("mounting the test FUSE filesystem");
    let d = Daemon::start_for_all_uids(&["--allow-fs", "fuse", "--max-queued-per-uid", "4", "--max-connections-per-uid", "7"]);
    let file = std::fs::File::open(fuse.file()).unwrap();
    let fd = file.as_raw_fd();
    let connect = |uid| as_uid(uid, || Client::connect(&d.socket).expect("connect"));

    // Root's read occupies the disk worker until the release.
    fuse.hold_reads();
    let root = d.client();
    fetch(&root, fd, 0);
    wait_for("the worker's read reaches the FUSE server", || fuse.held().1 == 1);

    // nobody asks for 6 reads on 6 connections: 4 wait (its cap), the
    // last 2 are refused at once.
    let a: Vec<Client> = (0..6).map(|_| connect(NOBODY)).collect();
    for (seq, c) in (1..=6).zip(&a) {
        c.set_timeout(Some(Duration::from_secs(10))).unwrap();
        fetch(c, fd, seq);
        let want = seq.min(4) + 1;
        wait_for("nobody's read is queued or refused", || {
            let s = d.stats();
            s.disks.iter().map(|disk| disk.queued).sum::<u64>() == want
        });
    }
    for seq in [5, 6] {
        let r = a[seq as usize - 1].recv_reply().expect("a refusal while the disk is busy");
        assert_eq!((r.seq, r.status), (seq, -libc::EAGAIN), "{r:?}");
    }
    // Another uid is not held to nobody's cap.
    let b: Vec<Client> = (0..2).map(|_| connect(OTHER)).collect();
    for (seq, c) in [10, 11].into_iter().zip(&b) {
        c.set_timeout(Some(Duration::from_secs(10))).unwrap();
        fetch(c, fd, seq);
    }
    wait_for("4 + 2 reads are queued behind root's", || d.stats().disks.iter().map(|s| s.queued).sum::<u64>() == 7);

    // Connections: nobody's eighth is rejected, another uid still gets in.
    let a7 = connect(NOBODY);
    let a8 = connect(NOBODY);
    a8.set_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(a8.recv_raw(&mut buf).expect("the daemon closes a connection over the cap"), 0);
    let b3 = connect(OTHER);
    for c in [&a7, &b3] {
        c.set_timeout(Some(Duration::from_secs(10))).unwrap();
        let req = Request { version: PROTO_VERSION, op: Op::Check, flags: 0, call: 0, seq: 99, offset: 0, length: K, tid: 0 };
        c.send_raw(&req.encode(), &[fd]).unwrap();
        assert_eq!(c.recv_reply().expect("a connection within the cap is served").status, 0);
    }
    assert!(d.stats().totals.connections_rejected >= 1);

    fuse.release();
    root.set_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(root.recv_reply().unwrap().status, 0);
    for (seq, c) in (1..=4).zip(&a).chain([10, 11].into_iter().zip(&b)) {
        let r = c.recv_reply().expect("a queued read is answered");
        assert_eq!((r.seq, r.status), (seq, 0), "{r:?}");
    }

    // The order the worker read in: first in first out would read all four
    // of nobody's before the other uid's; in turn, the other uid's first
    // read comes before nobody's second, its second before nobody's third.
    let order: Vec<u64> = fuse.read_log().iter().map(|off| off / K).collect();
    assert_eq!(order.len(), 7, "one FUSE read per queued FETCH: {order:?}");
    assert_eq!(order[0], 0, "{order:?}");
    let at = |seq| order.iter().position(|&s| s == seq).unwrap_or_else(|| panic!("no read of {seq}: {order:?}"));
    assert!(at(10) < at(2) && at(11) < at(3), "uids not served in turn: {order:?}");
    let s = d.stats();
    assert!(s.disks.iter().all(|disk| disk.max_in_flight <= 1), "{:?}", s.disks);
}
