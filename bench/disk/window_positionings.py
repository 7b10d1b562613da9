#!/usr/bin/env python3
"""How hard the drive worked for each window of a stepped run: from the run's
disk trace (docs/disk.md "Trace") and its steps.json, per window the
delivered MB/s, the drive's busy share, its positionings (requests with
outcome "miss": the head moved), positionings per delivered chunk and KiB
read per positioning. Two servers that deliver different MB/s on the same
saturated drive differ in the last two columns.

    window_positionings.py RUN_DIR [--chunk-bytes N]

RUN_DIR is a stepped run (RESULTS/runs/CONFIG/steps-rep0 or steps-partNN)
with disk-before.json (its uptime_s is the drive's clock when the load
started; windows are on the load's clock), steps.json, and disk-trace.csv or
the recorded disk-trace-window.csv.gz (which holds the best rate's windows
only: windows with no request in the trace are printed as absent).
--chunk-bytes is the workload's chunk (default 525,000: paper 000's SD
chunk, 10 s of 420 kbit/s video).
"""
import argparse
import csv
import gzip
import json
import os
import sys
import zlib


def open_trace(run):
    whole = os.path.join(run, "disk-trace.csv")
    if os.path.exists(whole):
        return open(whole, newline="")
    window = os.path.join(run, "disk-trace-window.csv.gz")
    if os.path.exists(window):
        return gzip.open(window, "rt", newline="")
    sys.exit(f"{run}: no disk-trace.csv or disk-trace-window.csv.gz (was the run traced?)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run")
    ap.add_argument("--chunk-bytes", type=int, default=525000)
    a = ap.parse_args()
    try:
        uptime = float(json.load(open(os.path.join(a.run, "disk-before.json")))["uptime_s"])
        steps = json.load(open(os.path.join(a.run, "steps.json")))
        windows = [(float(s["window_s"][0]), float(s["window_s"][1]), float(s["spec"]["rate"]), float(s["failure_percent"]), float(s["throughput_mb_s"]))
                   for s in steps if s.get("window_s")]
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
        sys.exit(f"{a.run}: disk-before.json or steps.json: {type(e).__name__}: {e}")
    if not windows:
        sys.exit(f"{a.run}/steps.json: no step has a window")
    # positionings, bytes read, requests, busy ns per window
    counts = [[0, 0, 0, 0] for _ in windows]
    line = 1
    try:
        with open_trace(a.run) as f:
            for line, r in enumerate(csv.DictReader(f), start=2):
                try:
                    start = int(r["start_ns"])
                    t = start / 1e9 - uptime
                    # A joined request rides in the command before it: the
                    # drive's time and the transaction are counted there.
                    joined = r["outcome"] == "joined"
                    busy = 0 if joined else int(r["end_ns"]) - start
                    nbytes = int(r["bytes"])
                    positioning = r["outcome"] == "miss"
                except (KeyError, TypeError, ValueError):
                    sys.exit(f"{a.run}: trace line {line}: malformed")
                count(counts, windows, t, nbytes, busy, positioning, not joined)
    except (OSError, EOFError, zlib.error, csv.Error, UnicodeDecodeError) as e:
        sys.exit(f"{a.run}: trace unreadable after line {line}: {type(e).__name__}: {e}")
    print("| rate | window (s) | failed % | delivered MB/s | drive busy | positionings | per delivered chunk | KiB read per positioning |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for (w0, w1, rate, failed, mb_s), (miss, nbytes, n, busy) in zip(windows, counts):
        head = f"| {rate:.2f} | {w0:.0f}-{w1:.0f} | {failed:.2f} | {mb_s:.2f} |"
        if n == 0:
            print(head + " not in the trace | | | |")
            continue
        chunks = mb_s * (w1 - w0) * 1e6 / a.chunk_bytes
        per_chunk = f"{miss / chunks:.2f}" if chunks else "-"
        per_miss = f"{nbytes / miss / 1024:.1f}" if miss else "-"
        print(f"{head} {100 * busy / 1e9 / (w1 - w0):.0f} % | {miss} | {per_chunk} | {per_miss} |")


def count(counts, windows, t, nbytes, busy, positioning, command):
    """Adds one request started at load time t to the window holding it
    (`command`: it is a transaction of its own, not joined to another)."""
    for i, (w0, w1, *_) in enumerate(windows):
        if w0 <= t < w1:
            c = counts[i]
            c[0] += positioning
            c[1] += nbytes
            c[2] += command
            c[3] += busy
            return


if __name__ == "__main__":
    main()
