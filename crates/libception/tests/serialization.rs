//! Serialization and prefetch, observed from outside the daemon: N threads
//! and N processes fetch N different cold files on the same disk at once;
//! the daemon's counters must show one read in flight at most, reads of the
//! prefetch size, and the page cache (checked here with cachestat) must hold
//! exactly the prefetched ranges. Also: overlapping requests join a queued
//! read instead of reading twice, and LCP_REQ_NO_PREFETCH reads the exact range.
//!
//! Test files are opened with POSIX_FADV_RANDOM by the clients (the fd is
//! shared with the daemon), so kernel readahead adds nothing to what the
//! daemon reads and the page-cache check can be exact.

mod common;
use common::*;
use libception::{DiskSnapshot, SizeBucket, Snapshot};
use libception_proto::{reply_flags, request_flags, Op, Request};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const N: usize = 6;
const FILE_SIZE: u64 = 8 * MIB;
const PREFETCH: u64 = 2 * MIB;

fn cold_files(dir: &std::path::Path, prefix: &str, n: usize, size: u64) -> Vec<PathBuf> {
    let files: Vec<PathBuf> = (0..n).map(|i| make_file(dir, &format!("{prefix}{i}"), size)).collect();
    for f in &files {
        evict(f);
        assert_eq!(resident_prefix(f, 0, size), 0, "{} still cached after DONTNEED", f.display());
    }
    files
}

/// The one disk that served requests in this test.
fn busy_disk(s: &Snapshot) -> &DiskSnapshot {
    let used: Vec<&DiskSnapshot> = s.disks.iter().filter(|d| d.requests > 0).collect();
    assert_eq!(used.len(), 1, "files in one directory must map to one disk: {:#?}", s.disks);
    used[0]
}

fn assert_serialized_prefetch(s: &Snapshot, files: &[PathBuf]) {
    let d = busy_disk(s);
    assert_eq!(d.max_in_flight, 1, "more than one read in flight on {}: {d:#?}", d.name);
    for w in &s.workers {
        assert!(w.max_in_flight <= 1, "worker {} had {} reads in flight", w.index, w.max_in_flight);
    }
    assert_eq!(d.requests, files.len() as u64);
    assert_eq!(d.queued, files.len() as u64);
    assert_eq!(d.reads, files.len() as u64);
    assert_eq!(d.bytes_read, files.len() as u64 * PREFETCH);
    assert_eq!(d.bytes_requested, files.len() as u64 * 4096);
    assert_eq!(d.reads_by_size, vec![SizeBucket { le_bytes: PREFETCH, count: files.len() as u64 }]);
    assert_eq!(d.queue_wait_us.count, files.len() as u64);
    assert_eq!(d.queue_length_hist.count, files.len() as u64);
    for f in files {
        assert_eq!(resident_prefix(f, 0, FILE_SIZE), PREFETCH, "{}: the prefetched range is not (only) what is cached", f.display());
        assert!(!any_resident(f, PREFETCH, FILE_SIZE), "{}: pages beyond the prefetch are cached", f.display());
    }
}

#[test]
fn threads_fetching_cold_files_are_served_one_read_at_a_time() {
    let dir = real_tempdir();
    let files = cold_files(dir.path(), "thread", N, FILE_SIZE);
    let daemon = Daemon::start(&["--prefetch", "2M"]);
    let barrier = Arc::new(Barrier::new(N));
    let handles: Vec<_> = files
        .iter()
        .cloned()
        .map(|path| {
            let barrier = barrier.clone();
            let mut client = daemon.client();
            std::thread::spawn(move || {
                let f = open_random(&path);
                barrier.wait();
                client.fetch(f.as_raw_fd(), 0, 4096, 0).expect("fetch")
            })
        })
        .collect();
    for h in handles {
        let r = h.join().unwrap();
        assert_eq!(r.status, 0);
        assert_eq!(r.flags, reply_flags::READ, "{r:?}");
        assert_eq!(r.bytes_read, PREFETCH);
    }
    assert_serialized_prefetch(&daemon.stats(), &files);
}

#[test]
fn processes_fetching_cold_files_are_served_one_read_at_a_time() {
    let dir = real_tempdir();
    let files = cold_files(dir.path(), "proc", N, FILE_SIZE);
    let daemon = Daemon::start(&["--prefetch", "2M"]);
    let children: Vec<_> = files
        .iter()
        .map(|f| {
            Command::new(BIN)
                .args(["fetch", "--json", "--fadvise-random", "--socket"])
                .arg(&daemon.socket)
                .arg(f)
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut pids = std::collections::HashSet::new();
    for c in children {
        pids.insert(c.id() as i32);
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success());
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["status"], 0);
        assert_eq!(v["read"], true);
        assert_eq!(v["joined"], false);
        assert_eq!(v["bytes_read"], PREFETCH);
    }
    let s = daemon.stats();
    assert_serialized_prefetch(&s, &files);
    for pid in pids {
        let c = s.clients.iter().find(|c| c.pid == pid).expect("each process is a client");
        assert_eq!((c.fetch, c.bytes_requested, c.bytes_read), (1, 4096, PREFETCH));
    }
}

#[test]
fn no_prefetch_flag_reads_exactly_the_range() {
    let dir = real_tempdir();
    let files = cold_files(dir.path(), "exact", 1, FILE_SIZE);
    let daemon = Daemon::start(&["--prefetch", "2M"]);
    let f = open_random(&files[0]);
    let r = daemon.client().fetch(f.as_raw_fd(), MIB + 100, 5000, request_flags::NO_PREFETCH).unwrap();
    assert_eq!((r.status, r.flags), (0, reply_flags::READ));
    // The read starts at the page holding the offset.
    assert_eq!(r.bytes_read, 100 + 5000);
    assert_eq!(resident_prefix(&files[0], MIB, FILE_SIZE), 8192);
    assert!(!any_resident(&files[0], 0, MIB));
    // The same range again is answered by the receptionist as resident.
    let r = daemon.client().fetch(f.as_raw_fd(), MIB + 100, 5000, request_flags::NO_PREFETCH).unwrap();
    assert_eq!((r.status, r.flags, r.bytes_read), (0, reply_flags::RESIDENT, 0));
    let s = daemon.stats();
    let d = busy_disk(&s);
    assert_eq!((d.requests, d.resident_hits, d.reads, d.bytes_read), (2, 1, 1, 5100));
}

#[test]
fn the_resident_prefix_of_a_planned_read_is_skipped() {
    let dir = real_tempdir();
    let files = cold_files(dir.path(), "prefix", 1, FILE_SIZE);
    let daemon = Daemon::start(&["--prefetch", "2M"]);
    let f = open_random(&files[0]);
    let mut c = daemon.client();
    // Cache the first 1 MiB exactly, then ask for [0, 4 KiB) with a 2 MiB prefetch:
    // the range the client asked for is resident, so nothing is read.
    assert_eq!(c.fetch(f.as_raw_fd(), 0, MIB, request_flags::NO_PREFETCH).unwrap().bytes_read, MIB);
    let r = c.fetch(f.as_raw_fd(), 0, 4096, 0).unwrap();
    assert_eq!((r.flags, r.bytes_read), (reply_flags::RESIDENT, 0));
    // Asking for [512 KiB, 1 MiB + 4 KiB) misses; its resident prefix (up
    // to 1 MiB) is skipped and the prefetch counts from there: [1, 3 MiB).
    let r = c.fetch(f.as_raw_fd(), MIB / 2, MIB / 2 + 4096, 0).unwrap();
    assert_eq!((r.flags, r.bytes_read), (reply_flags::READ, 2 * MIB));
    assert_eq!(resident_prefix(&files[0], 0, FILE_SIZE), 3 * MIB);
}

/// A video stream through the daemon: 525,000-byte chunks in order, each
/// FETCHed as a server's shim would (the chunks a read covered are hits).
/// Every fourth chunk runs past its 2 MiB range; the next read must still
/// bring 2 MiB (paper 001: every prefetch is the prefetch size, but at the
/// end of the file), not the 1.5 MiB from the chunk's start to 2 MiB past it.
#[test]
fn a_stream_reaching_a_ranges_end_prefetches_the_full_size_again() {
    const CHUNK: u64 = 525_000;
    let dir = real_tempdir();
    let size = 40 * CHUNK;
    let files = cold_files(dir.path(), "stream", 1, size);
    let daemon = Daemon::start(&["--prefetch", "2M"]);
    let f = open_random(&files[0]);
    let mut c = daemon.client();
    for k in 0..40 {
        let r = c.fetch(f.as_raw_fd(), k * CHUNK, CHUNK, 0).unwrap();
        assert_eq!(r.status, 0, "chunk {k}: {r:?}");
    }
    let s = daemon.stats();
    let d = busy_disk(&s);
    // 21,000,000 bytes in 2 MiB reads: ten of 2 MiB and the file's rest.
    assert_eq!(d.bytes_read, size, "every byte read once");
    assert_eq!(d.reads, size.div_ceil(PREFETCH), "reads of the prefetch size: {:?}", d.reads_by_size);
    let rest = size - 10 * PREFETCH; // 28,480 bytes
    assert_eq!(d.reads_by_size, vec![SizeBucket { le_bytes: rest.next_power_of_two(), count: 1 }, SizeBucket { le_bytes: PREFETCH, count: 10 }]);
}

fn send_fetch(c: &libception::Client, fd: i32, seq: u64, offset: u64, length: u64) {
    let req = Request { version: libception_proto::PROTO_VERSION, op: Op::Fetch, flags: 0, call: 0, seq, offset, length, tid: 0 };
    c.send_raw(&req.encode(), &[fd]).unwrap();
}

fn wait_until(daemon: &Daemon, what: &str, cond: impl Fn(&Snapshot) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = daemon.stats();
        if cond(&s) {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting until {what}: {:#?}", s.disks);
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn overlapping_requests_join_a_queued_read() {
    let dir = real_tempdir();
    let blockers = cold_files(dir.path(), "blocker", 2, 64 * MIB);
    let target = cold_files(dir.path(), "target", 1, FILE_SIZE).remove(0);
    let daemon = Daemon::start(&["--prefetch", "2M", "--max-read", "64M"]);
    // Two 64 MiB reads keep the worker busy while the requests below arrive.
    let bfiles: Vec<_> = blockers.iter().map(|b| open_random(b)).collect();
    let bconns: Vec<_> = (0..2).map(|_| daemon.client()).collect();
    for (i, (c, f)) in bconns.iter().zip(&bfiles).enumerate() {
        send_fetch(c, f.as_raw_fd(), 100 + i as u64, 0, 64 * MIB);
    }
    wait_until(&daemon, "the second blocker is queued", |s| s.disks.iter().any(|d| d.queued == 2));
    let tf = open_random(&target);
    let (a, b, c, d) = (daemon.client(), daemon.client(), daemon.client(), daemon.client());
    send_fetch(&a, tf.as_raw_fd(), 1, 0, 4096);
    wait_until(&daemon, "the first target request is queued", |s| s.disks.iter().any(|d| d.queued == 3));
    send_fetch(&b, tf.as_raw_fd(), 2, 8192, 4096); // inside A's 2 MiB: joins
    send_fetch(&c, tf.as_raw_fd(), 3, MIB, 4096); // inside A's 2 MiB: joins
    send_fetch(&d, tf.as_raw_fd(), 4, 3 * MIB, 4096); // beyond it: a read of its own
    let ra = a.recv_reply().unwrap();
    let rb = b.recv_reply().unwrap();
    let rc = c.recv_reply().unwrap();
    let rd = d.recv_reply().unwrap();
    for c in &bconns {
        let r = c.recv_reply().unwrap();
        assert_eq!((r.status, r.bytes_read), (0, 64 * MIB));
    }
    assert_eq!((ra.seq, ra.status, ra.flags, ra.bytes_read), (1, 0, reply_flags::READ, PREFETCH));
    let joined = reply_flags::READ | reply_flags::JOINED;
    assert_eq!((rb.seq, rb.status, rb.flags), (2, 0, joined), "{rb:?}");
    assert_eq!((rc.seq, rc.status, rc.flags), (3, 0, joined), "{rc:?}");
    assert_eq!((rd.seq, rd.status, rd.flags, rd.bytes_read), (4, 0, reply_flags::READ, PREFETCH));
    let s = daemon.stats();
    let disk = busy_disk(&s);
    assert_eq!((disk.requests, disk.queued, disk.joined, disk.reads), (6, 4, 2, 4));
    assert_eq!(disk.bytes_read, 2 * 64 * MIB + 2 * PREFETCH);
    assert_eq!(disk.max_in_flight, 1);
    assert_eq!(resident_prefix(&target, 0, FILE_SIZE), PREFETCH);
    assert_eq!(resident_prefix(&target, 3 * MIB, FILE_SIZE), PREFETCH);
}

/// `--reply range`: each waiter of a read is answered once the 1 MiB chunk
/// completing its own range is read, with how far the read had got; the read
/// itself still covers the prefetch size. By default (`read`) both are
/// answered at the end, with the whole read.
#[test]
fn with_reply_range_a_waiter_is_answered_once_its_range_is_read() {
    for (reply, a_end, b_end) in [("range", MIB, 9 * MIB), ("read", 16 * MIB, 16 * MIB)] {
        let dir = real_tempdir();
        let blocker = cold_files(dir.path(), "blocker", 1, 64 * MIB).remove(0);
        let target = cold_files(dir.path(), "target", 1, 16 * MIB).remove(0);
        let daemon = Daemon::start(&["--prefetch", "16M", "--max-read", "64M", "--reply", reply]);
        assert_eq!(daemon.stats().daemon.reply, reply, "the stats say which");
        // A 64 MiB read keeps the worker busy while both target requests queue
        // as one read: B's range lies inside A's planned 16 MiB, so it joins.
        let bf = open_random(&blocker);
        let bc = daemon.client();
        send_fetch(&bc, bf.as_raw_fd(), 100, 0, 64 * MIB);
        wait_until(&daemon, "the blocker is in flight", |s| s.disks.iter().any(|d| d.queued == 1));
        let tf = open_random(&target);
        let (a, b) = (daemon.client(), daemon.client());
        send_fetch(&a, tf.as_raw_fd(), 1, 0, 4096);
        wait_until(&daemon, "A's read is queued", |s| s.disks.iter().any(|d| d.queued == 2));
        send_fetch(&b, tf.as_raw_fd(), 2, 8 * MIB, 4096);
        wait_until(&daemon, "B joined A's read", |s| s.disks.iter().any(|d| d.joined == 1));
        let (ra, rb) = (a.recv_reply().unwrap(), b.recv_reply().unwrap());
        assert_eq!((ra.status, ra.flags, ra.bytes_read, ra.resident_end), (0, reply_flags::READ, a_end, a_end), "{reply}: {ra:?}");
        let joined = reply_flags::READ | reply_flags::JOINED;
        assert_eq!((rb.status, rb.flags, rb.bytes_read, rb.resident_end), (0, joined, b_end, b_end), "{reply}: {rb:?}");
        assert_eq!(bc.recv_reply().unwrap().bytes_read, 64 * MIB);
        // The read went on to its end either way, once.
        wait_until(&daemon, "the target's read is done", |s| s.disks.iter().any(|d| d.reads == 2 && d.in_flight == 0));
        let s = daemon.stats();
        assert_eq!(busy_disk(&s).bytes_read, 80 * MIB, "{reply}");
        assert_eq!(resident_prefix(&target, 0, 16 * MIB), 16 * MIB, "{reply}");
    }
}

/// A client's `read_wait_ns` is the time its FETCHes waited for reads: at
/// least the read's time on the disk (the FETCH came before the read began
/// and its reply after the read ended), at most what the client measured from
/// sending to the reply; a FETCH answered as resident adds nothing. The
/// daemon-wide total is the clients' sum.
#[test]
fn a_clients_read_wait_is_the_time_its_fetches_waited_for_reads() {
    let dir = real_tempdir();
    let file = cold_files(dir.path(), "wait", 1, FILE_SIZE).remove(0);
    let daemon = Daemon::start(&["--prefetch", "2M"]);
    let f = open_random(&file);
    let c = daemon.client();
    let pid = std::process::id() as i32;
    let before = daemon.stats();
    let waited_before = before.clients.iter().find(|c| c.pid == pid).map_or(0, |c| c.read_wait_ns);
    assert_eq!(waited_before, 0, "no FETCH yet");

    let t0 = Instant::now();
    send_fetch(&c, f.as_raw_fd(), 1, 0, 4096);
    let r = c.recv_reply().unwrap();
    let measured = t0.elapsed().as_nanos() as u64;
    assert_eq!((r.status, r.bytes_read), (0, PREFETCH));
    let s = daemon.stats();
    let me = s.clients.iter().find(|c| c.pid == pid).expect("the test process is a client");
    let busy = busy_disk(&s).busy_ns;
    assert!(busy > 0 && busy <= me.read_wait_ns, "waited {} ns, read took {busy} ns", me.read_wait_ns);
    assert!(me.read_wait_ns <= measured, "waited {} ns, measured {measured} ns", me.read_wait_ns);
    assert_eq!(s.totals.read_wait_ns, me.read_wait_ns);

    // Resident now: answered at once, no wait for a read.
    send_fetch(&c, f.as_raw_fd(), 2, 0, 4096);
    let r = c.recv_reply().unwrap();
    assert_eq!((r.status, r.flags & reply_flags::READ), (0, 0));
    let after = daemon.stats();
    let me_after = after.clients.iter().find(|c| c.pid == pid).unwrap();
    assert_eq!(busy_disk(&after).resident_hits, 1);
    assert_eq!(me_after.read_wait_ns, me.read_wait_ns);
    assert_eq!(after.totals.read_wait_ns, me.read_wait_ns);
}

/// Issue 13 item 5: the daemon reads through its own description with
/// readahead off, so the disk sees exactly the planned range. The client's
/// descriptor here has default readahead, primed for sequential access by a
/// read of its own (which would make the kernel read far ahead through that
/// description), and still only the planned bytes become resident; the
/// client's file offset is untouched.
#[test]
fn reads_use_the_daemons_own_description_without_readahead() {
    use std::io::{Read, Seek};
    let dir = real_tempdir();
    let files = cold_files(dir.path(), "own", 1, FILE_SIZE);
    let daemon = Daemon::start(&["--prefetch", "2M"]);
    let mut f = std::fs::File::open(&files[0]).unwrap(); // no POSIX_FADV_RANDOM
    // SAFETY: advice on a descriptor we own.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_SEQUENTIAL) };
    let mut first = vec![0u8; 4096];
    f.read_exact(&mut first).unwrap();
    evict(&files[0]);
    let before = f.stream_position().unwrap();
    let r = daemon.client().fetch(f.as_raw_fd(), MIB, 4096, request_flags::NO_PREFETCH).unwrap();
    assert_eq!((r.status, r.bytes_read), (0, 4096));
    assert_eq!(resident_prefix(&files[0], MIB, FILE_SIZE), 4096, "kernel readahead read beyond the plan");
    assert!(!any_resident(&files[0], MIB + 4096, MIB + 4 * MIB), "kernel readahead read beyond the plan");
    let r = daemon.client().fetch(f.as_raw_fd(), 3 * MIB, 4096, 0).unwrap();
    assert_eq!((r.status, r.bytes_read), (0, 2 * MIB));
    assert_eq!(resident_prefix(&files[0], 3 * MIB, FILE_SIZE), 2 * MIB);
    assert!(!any_resident(&files[0], 5 * MIB, (9 * MIB).min(FILE_SIZE)), "kernel readahead read beyond the planned 2 MiB");
    assert_eq!(f.stream_position().unwrap(), before, "the client's offset moved");
}
