#!/usr/bin/env python3
"""Which LRU list a file's page cache lands on after one pass of read() or
sendfile(), per read_ahead_kb: the kernel fact behind the page cache's
lists in every paper-scale run (docs/run.md, "Why the inactive list is
small").

A fresh filesystem on a loop device (direct I/O to its image, so the image's
own pages stay out of the picture) holds one file of random bytes. For each
read_ahead_kb and each access pattern the file is evicted (fadvise
DONTNEED), read once from start to end by a child process in a memory
cgroup of its own (v1 or v2, whichever is mounted), and the cgroup's
active_file and inactive_file are recorded. Every page is read exactly once
in every pattern; a page on the active list got there by being marked
accessed more than once during that single pass.

Patterns:
  read-64k          read() in 64 KiB pieces, one open
  sendfile-64k      sendfile() to a socket in 64 KiB pieces, one open
  sendfile-1m       sendfile() in 1 MiB pieces, one open
  sendfile-requests 525,000-byte requests (paper 000's SD chunk), each its
                    own open, sent in 64 KiB pieces (as a server sends ranges)

Output: OUT/results.csv (one row per read_ahead_kb and pattern), OUT/setup.json
(kernel, filesystem, sizes, cgroup version) and a table on stdout.

  bench/kernel/sendfile-lru.py [--out DIR] [--fs ext4|xfs] [--size-mb N] [--ra "16 64 128 2048"]

Needs root, loop devices and a memory cgroup controller.
"""
import argparse
import csv
import json
import os
import platform
import socket
import sys
import threading
import time

from loopfs import LoopFs, drain, evict

PATTERNS = ["read-64k", "sendfile-64k", "sendfile-1m", "sendfile-requests"]
CHUNK = 525_000


def cgroup_root():
    """(version, directory in which to make a child with a memory controller)."""
    v2 = "/sys/fs/cgroup/cgroup.controllers"
    if os.path.exists(v2) and "memory" in open(v2).read().split():
        control = "/sys/fs/cgroup/cgroup.subtree_control"
        if "memory" not in open(control).read().split():
            with open(control, "w") as f:
                f.write("+memory")
        return 2, "/sys/fs/cgroup"
    if os.path.isdir("/sys/fs/cgroup/memory"):
        return 1, "/sys/fs/cgroup/memory"
    sys.exit("sendfile-lru: no memory cgroup controller is mounted (v1 /sys/fs/cgroup/memory or v2 with memory)")


def lists(cg):
    stat = dict(line.split() for line in open(os.path.join(cg, "memory.stat")))
    return int(stat["active_file"]), int(stat["inactive_file"])


def one_pass(path, pattern):
    """Reads the whole file once in `pattern` (runs in the child)."""
    size = os.path.getsize(path)
    if pattern == "read-64k":
        fd = os.open(path, os.O_RDONLY)
        while os.read(fd, 64 << 10):
            pass
        os.close(fd)
        return
    piece = (1 << 20) if pattern == "sendfile-1m" else (64 << 10)
    request = CHUNK if pattern == "sendfile-requests" else size
    out, peer = socket.socketpair()
    reader = threading.Thread(target=drain, args=(peer,))
    reader.start()
    offset = 0
    while offset < size:
        fd = os.open(path, os.O_RDONLY)
        end = min(offset + request, size)
        while offset < end:
            sent = os.sendfile(out.fileno(), fd, offset, min(piece, end - offset))
            if sent == 0:
                raise RuntimeError(f"sendfile returned 0 at {offset} of {size}")
            offset += sent
        os.close(fd)
    out.close()
    reader.join()


def measure(cg, path, pattern):
    """Evicts the file, reads it once from a child in `cg`, returns the lists in bytes."""
    evict(path)
    time.sleep(0.2)
    before = lists(cg)
    if before[0] + before[1] > 1 << 20:
        raise RuntimeError(f"the cgroup still holds {sum(before)} bytes of file pages after eviction")
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            with open(os.path.join(cg, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
            one_pass(path, pattern)
        except BaseException as e:  # the parent reports it
            print(f"sendfile-lru: {pattern}: {e}", file=sys.stderr)
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"the {pattern} pass failed")
    return lists(cg)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=f"/tmp/sendfile-lru-{time.strftime('%Y%m%d-%H%M%S')}")
    ap.add_argument("--fs", default="ext4", choices=["ext4", "xfs"])
    ap.add_argument("--size-mb", type=int, default=256)
    ap.add_argument("--ra", default="16 64 128 512 2048", help="read_ahead_kb values, space-separated")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("sendfile-lru: needs root (loop device, mount, cgroups)")
    ras = [int(r) for r in args.ra.split()]
    os.makedirs(args.out, exist_ok=True)
    version, root = cgroup_root()
    cg = os.path.join(root, f"sendfile-lru-{os.getpid()}")
    with LoopFs("sendfile-lru", args.fs, args.size_mb) as lf:
        try:
            os.makedirs(cg)
            rows = []
            for ra in ras:
                lf.read_ahead_kb = ra
                for pattern in PATTERNS:
                    active, inactive = measure(cg, lf.path, pattern)
                    rows.append({"read_ahead_kb": ra, "pattern": pattern, "active_bytes": active, "inactive_bytes": inactive,
                                 "active_pct": round(100 * active / max(1, active + inactive), 1)})
                    print(f"read_ahead_kb {ra:5d}  {pattern:18s} active {active >> 20:5d} MiB  inactive {inactive >> 20:5d} MiB  "
                          f"({rows[-1]['active_pct']:5.1f} % active)", flush=True)
            with open(os.path.join(args.out, "results.csv"), "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=list(rows[0]))
                w.writeheader()
                w.writerows(rows)
            with open(os.path.join(args.out, "setup.json"), "w") as f:
                json.dump({"kernel": platform.release(), "fs": lf.fstype, "file_mb": args.size_mb, "cgroup_version": version,
                           "loop_direct_io": True, "request_bytes": CHUNK, "patterns": PATTERNS,
                           "command": " ".join(sys.argv)}, f, indent=2)
            print(f"results in {args.out}")
        finally:
            if os.path.isdir(cg):
                evict(lf.path)  # uncharge the cgroup before removing it
                try:
                    os.rmdir(cg)
                except OSError as e:
                    print(f"sendfile-lru: could not remove {cg}: {e}", file=sys.stderr)


if __name__ == "__main__":
    main()
