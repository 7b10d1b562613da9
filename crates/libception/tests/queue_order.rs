//! `--queue-order`: the order in which the real daemon's worker takes queued
//! reads. A FUSE file whose reads are held (`hang_fs`) occupies the worker
//! while reads of files on the real filesystem queue behind it, submitted
//! in an order neither up nor down the disk; after the release, the
//! daemon's log of finished reads gives the order. `fifo` takes them as they
//! came; `position` sweeps up the disk (the FUSE file has no position, so the
//! sweep starts from the lowest). Where the filesystem does not map files
//! (FIEMAP), `position` has nothing to sort by and is FIFO too. Root only
//! (FUSE).

mod common;
use common::*;
use libception::Client;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

const K: u64 = 64 * 1024;
const FILES: u64 = 6;

/// A FETCH of exactly [offset, offset + K), tagged `seq`.
fn fetch(c: &Client, fd: i32, offset: u64, seq: u64) {
    send_exact_fetch(c, fd, offset, K, seq);
}

/// The `start` of every "read done" line of the daemon's debug log, in order.
fn reads_done(log: &str) -> Vec<u64> {
    log.lines()
        .filter(|l| l.contains("read done"))
        .filter_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("start=")).and_then(|v| v.parse().ok()))
        .collect()
}

/// Queues one read of each file (file i at offset (i + 1) x K, so that the
/// log's `start` names it) in `submit` order behind a held FUSE read, then
/// releases it; returns the files' indices in the order the worker read them.
fn order_read(order: &str, paths: &[std::path::PathBuf], files: &[std::fs::File], submit: &[usize]) -> Vec<usize> {
    for (i, p) in paths.iter().enumerate() {
        evict(p);
        assert_eq!(resident_prefix(p, (i as u64 + 1) * K, (i as u64 + 2) * K), 0, "{} still cached", p.display());
    }
    let fuse = hang_fs::HangMount::mount().expect("mounting the test FUSE filesystem");
    let d = Daemon::start(&["--allow-fs", "fuse", "--queue-order", order, "--queue-max-wait-ms", "60000"]);
    let held = std::fs::File::open(fuse.file()).unwrap();
    fuse.hold_reads();
    let first = d.client();
    fetch(&first, held.as_raw_fd(), 0, 0);
    wait_for("the worker's read reaches the FUSE server", || fuse.held().1 == 1);
    let clients: Vec<Client> = submit.iter().map(|_| d.client()).collect();
    for (n, (&i, c)) in submit.iter().zip(&clients).enumerate() {
        fetch(c, files[i].as_raw_fd(), (i as u64 + 1) * K, i as u64 + 1);
        let queued = || d.stats().disks.iter().map(|s| s.queued).sum::<u64>();
        let deadline = Instant::now() + Duration::from_secs(20);
        while queued() != n as u64 + 2 {
            assert!(Instant::now() < deadline, "read {n} not queued: {:?}\n{}", d.stats().disks, d.log_text());
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    fuse.release();
    assert_eq!(first.recv_reply().expect("the held read is answered").status, 0);
    for c in &clients {
        assert_eq!(c.recv_reply().expect("a queued read is answered").status, 0);
    }
    let done = reads_done(&d.log_text());
    assert_eq!(done.len(), FILES as usize + 1, "one read each: {done:?}\n{}", d.log_text());
    assert_eq!(done[0], 0, "the held read first: {done:?}");
    done[1..].iter().map(|start| (start / K - 1) as usize).collect()
}

#[test]
fn fifo_takes_reads_as_they_came_and_position_sweeps_up_the_disk() {
    if !root_or_skip("mount FUSE") {
        return;
    }
    let dir = real_tempdir();
    let paths: Vec<_> = (0..FILES).map(|i| make_file(dir.path(), &format!("f{i}"), (FILES + 1) * K)).collect();
    let files: Vec<std::fs::File> = paths.iter().map(|p| open_random(p)).collect();
    // Where each file's read lies on the disk; submitted neither up nor down
    // the disk (the ranks 2, 5, 0, 3, 1, 4 from the lowest).
    let places: Vec<Option<u64>> = files.iter().enumerate().map(|(i, f)| libception::physical_offset(f, (i as u64 + 1) * K)).collect();
    let mut by_place: Vec<usize> = (0..FILES as usize).collect();
    by_place.sort_by_key(|&i| places[i]);
    let submit: Vec<usize> = [2, 5, 0, 3, 1, 4].iter().map(|&rank| by_place[rank]).collect();

    assert_eq!(order_read("fifo", &paths, &files, &submit), submit, "fifo: as submitted");
    let by_position = order_read("position", &paths, &files, &submit);
    if places.iter().all(Option::is_some) {
        let mut up = submit.clone();
        up.sort_by_key(|&i| places[i]);
        assert_ne!(up, submit, "the files lie in distinct places: {places:?}");
        assert_eq!(by_position, up, "position: up the disk ({places:?})");
    } else {
        // A filesystem without FIEMAP (this target directory's): no positions.
        assert!(places.iter().all(Option::is_none), "{places:?}");
        assert_eq!(by_position, submit, "position without positions: as submitted");
    }
}
