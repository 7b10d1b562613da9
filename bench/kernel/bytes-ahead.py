#!/usr/bin/env python3
"""How many bytes one video stream holds in the page cache ahead of what it has
sent, under kernel readahead and under Libception's fetches, and how many the
device read for the bytes sent: the quantity behind nginx with kernel tuning
reading more per delivered byte than nginx under Libception at paper scale
(docs/results/table3-paper-2026-11-29, NOTES). Data held ahead waits on the
page cache's LRU lists until its stream reaches it; the more of it, and the
longer it waits, the more of it is evicted before use under memory pressure.

A stream is a server's: requests of 525,000 bytes (paper 000's SD chunk) in
order, each its own open() and one sendfile() of the whole request (nginx with
`sendfile_max_chunk 0`) to a socket a thread drains. After each request the
pages cached in the next 32 MiB past its end are counted with cachestat(2)
(pages still being read count: they hold memory already). The stream stops
after --requests requests, as a viewer who stops watching: what is cached past
that point was read for nothing, and the device's bytes read against the bytes
sent say how much.

Modes (each on the evicted file, one stream, nothing else reading it):
  kernel-raN   no shim; the device's read_ahead_kb is N (for each --ra)
  libception   the shim (LD_PRELOAD) and a daemon with --prefetch, the
               device's read_ahead_kb 128 (Table 3's Libception rows)

Output: OUT/samples.csv (mode, request, end offset, bytes cached ahead),
OUT/results.csv (per mode: bytes sent and read, cached ahead: mean, median,
90th percentile, largest, at the stop), OUT/setup.json, and a table on stdout.

  bench/kernel/bytes-ahead.py [--out DIR] [--fs ext4|xfs] [--ra "128 2048"]
      [--prefetch 2M] [--requests 40] [--libception BIN] [--shim SO]

Needs root and loop devices; the libception mode needs `make` (the daemon and
the shim; --libception and --shim name others).
"""
import argparse
import csv
import ctypes
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from loopfs import LoopFs, drain, evict

CHUNK = 525_000
AHEAD_SPAN = 32 << 20
PAGE = os.sysconf("SC_PAGE_SIZE")
SYS_CACHESTAT = 451  # the same number on every architecture (Linux 6.5)
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


class _Range(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Stat(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in ("nr_cache", "nr_dirty", "nr_writeback", "nr_evicted", "nr_recently_evicted")]


def cached_bytes(fd, off, length):
    """Bytes of [off, off + length) of the open file `fd` in the page cache."""
    libc = ctypes.CDLL(None, use_errno=True)
    rng, st = _Range(off, length), _Stat()
    if libc.syscall(SYS_CACHESTAT, fd, ctypes.byref(rng), ctypes.byref(st), 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cachestat: {os.strerror(err)} (needs Linux 6.5 or later)")
    return st.nr_cache * PAGE


def stream(path, requests, samples_path):
    """The child's part: serves `requests` requests of the file in order and
    writes one sample per request to `samples_path` (CSV without header)."""
    size = os.path.getsize(path)
    if requests * CHUNK > size:
        raise SystemExit(f"bytes-ahead: {requests} requests of {CHUNK} bytes need {requests * CHUNK} bytes; {path} has {size}")
    out, peer = socket.socketpair()
    reader = threading.Thread(target=drain, args=(peer,))
    reader.start()
    probe = os.open(path, os.O_RDONLY)
    rows = []
    for i in range(requests):
        offset, end = i * CHUNK, (i + 1) * CHUNK
        fd = os.open(path, os.O_RDONLY)
        while offset < end:
            sent = os.sendfile(out.fileno(), fd, offset, end - offset)
            if sent == 0:
                raise RuntimeError(f"sendfile returned 0 at {offset} of {size}")
            offset += sent
        os.close(fd)
        rows.append((i, end, cached_bytes(probe, end, AHEAD_SPAN)))
    os.close(probe)
    out.close()
    reader.join()
    with open(samples_path, "w", newline="") as f:
        csv.writer(f).writerows(rows)


def daemon_stats(binary, sock):
    out = subprocess.run([binary, "stat", "--socket", sock, "--json"], check=True, capture_output=True, text=True).stdout
    disks = json.loads(out)["disks"]
    return {k: sum(d.get(k, 0) for d in disks) for k in ("requests", "resident_hits", "queued", "bytes_read", "reads")}


def one_mode(lf, mode, args, work):
    """Evicts the file, runs one stream in a child, returns (samples, row)."""
    evict(lf.path)
    time.sleep(0.2)
    fd = os.open(lf.path, os.O_RDONLY)
    try:
        if cached_bytes(fd, 0, os.path.getsize(lf.path)) > 1 << 20:
            raise RuntimeError(f"{lf.path} is still cached after eviction")
    finally:
        os.close(fd)
    samples_path = os.path.join(work, f"{mode}.csv")
    cmd = [sys.executable, os.path.abspath(__file__), "--stream", lf.path, "--requests", str(args.requests), "--samples", samples_path]
    env = dict(os.environ)
    daemon = None
    sock = os.path.join(work, "libception.sock")
    try:
        if mode == "libception":
            lf.read_ahead_kb = 128
            daemon = subprocess.Popen([args.libception, "daemon", "--socket", sock, "--prefetch", args.prefetch],
                                      stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "daemon.log"), "w"))
            for _ in range(100):
                if os.path.exists(sock) or daemon.poll() is not None:
                    break
                time.sleep(0.05)
            if not os.path.exists(sock):
                raise RuntimeError(f"the daemon did not open {sock}: {open(os.path.join(work, 'daemon.log')).read()[-2000:]}")
            env.update(LD_PRELOAD=args.shim, LIBCEPTION_SOCKET=sock)
        else:
            lf.read_ahead_kb = int(mode.removeprefix("kernel-ra"))
        before = lf.bytes_read()
        subprocess.run(cmd, check=True, env=env)
        read = lf.bytes_read() - before
        fetched = daemon_stats(args.libception, sock) if daemon else None
        if daemon and fetched["requests"] == 0:
            raise RuntimeError("the daemon got no FETCH: the shim did not reach it (is LD_PRELOAD honoured?)")
    finally:
        if daemon:
            daemon.terminate()
            daemon.wait(timeout=10)
    with open(samples_path) as f:
        samples = [(mode, int(i), int(end), int(ahead)) for i, end, ahead in csv.reader(f)]
    ahead = [s[3] for s in samples]
    sent = args.requests * CHUNK
    mib = lambda b: round(b / (1 << 20), 3)  # noqa: E731
    row = {
        "mode": mode, "read_ahead_kb": lf.read_ahead_kb, "prefetch": args.prefetch if daemon else "",
        "requests": args.requests, "bytes_sent": sent, "device_bytes_read": read, "read_per_sent": round(read / sent, 3),
        "ahead_mean_mib": mib(statistics.mean(ahead)), "ahead_median_mib": mib(statistics.median(ahead)),
        "ahead_p90_mib": mib(sorted(ahead)[int(0.9 * (len(ahead) - 1))]), "ahead_max_mib": mib(max(ahead)),
        "ahead_at_stop_mib": mib(ahead[-1]),
        "daemon_fetches": fetched["requests"] if fetched else "", "daemon_reads": fetched["reads"] if fetched else "",
    }
    return samples, row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=f"/tmp/bytes-ahead-{time.strftime('%Y%m%d-%H%M%S')}")
    ap.add_argument("--fs", default="ext4", choices=["ext4", "xfs"])
    ap.add_argument("--ra", default="128 2048", help="read_ahead_kb values of the kernel modes, space-separated")
    ap.add_argument("--prefetch", default="2M", help="the daemon's --prefetch in the libception mode ('' for no libception mode)")
    ap.add_argument("--requests", type=int, default=40, help="requests per stream (525,000 bytes each)")
    ap.add_argument("--libception", default=os.path.join(ROOT, "build/bin/libception"))
    ap.add_argument("--shim", default=os.path.join(ROOT, "build/libdeception.so"))
    ap.add_argument("--stream", help=argparse.SUPPRESS)
    ap.add_argument("--samples", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.stream:
        stream(args.stream, args.requests, args.samples)
        return
    if os.geteuid() != 0:
        sys.exit("bytes-ahead: needs root (loop device, mount, the daemon)")
    if args.requests < 1:
        sys.exit("bytes-ahead: --requests must be at least 1")
    modes = [f"kernel-ra{int(r)}" for r in args.ra.split()]
    if args.prefetch:
        for f in (args.libception, args.shim):
            if not os.path.exists(f):
                sys.exit(f"bytes-ahead: {f} does not exist (run `make`, or name it with --libception / --shim)")
        modes.append("libception")
    size_mb = (args.requests * CHUNK + AHEAD_SPAN) // (1 << 20) + 8
    os.makedirs(args.out, exist_ok=True)
    samples, rows = [], []
    with LoopFs("bytes-ahead", args.fs, size_mb) as lf, tempfile.TemporaryDirectory(prefix="bytes-ahead-") as work:
        for mode in modes:
            s, row = one_mode(lf, mode, args, work)
            samples += s
            rows.append(row)
            print(f"{mode:14s} read_ahead_kb {row['read_ahead_kb']:5d}  device read {row['read_per_sent']:.3f} bytes per byte sent  "
                  f"cached ahead MiB: mean {row['ahead_mean_mib']:.2f}  median {row['ahead_median_mib']:.2f}  "
                  f"max {row['ahead_max_mib']:.2f}  at the stop {row['ahead_at_stop_mib']:.2f}", flush=True)
        fstype = lf.fstype
    with open(os.path.join(args.out, "samples.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["mode", "request", "end_offset", "cached_ahead_bytes"])
        w.writerows(samples)
    with open(os.path.join(args.out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(args.out, "setup.json"), "w") as f:
        json.dump({"kernel": platform.release(), "fs": fstype, "file_mb": size_mb, "loop_direct_io": True,
                   "request_bytes": CHUNK, "ahead_span_bytes": AHEAD_SPAN, "modes": modes, "prefetch": args.prefetch,
                   "libception": args.libception, "shim": args.shim, "command": " ".join(sys.argv)}, f, indent=2)
    print(f"results in {args.out}")


if __name__ == "__main__":
    main()
