#!/usr/bin/env python3
"""What the session schedule offered around each window of a stepped run, next
to how the window went: from the load client's requests.csv and the run's
steps.json, per window the sessions started per second in the LEAD seconds
before it and in it (against the step's nominal rate), how many of those
starts per second were cold (a video nobody asked for in the COLD seconds
before: its first chunks come from the disk), the chunk requests per second
served, and the failed sessions. Starts and cold starts follow from the
schedule alone (every configuration of an experiment plays the same one: the
seed fixes arrivals and videos); requests fall when sessions fail. Whether a
window's failures followed a surge of its schedule is what it shows.

    window_demand.py RUN_DIR [--lead 60] [--cold 300]

RUN_DIR is a stepped run (RESULTS/runs/CONFIG/steps-rep0 or steps-partNN)
with load/requests.csv and steps.json.
"""
import argparse
import csv
import json
import os
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run")
    p.add_argument("--lead", type=float, default=60.0, help="seconds before a window counted as its lead-in")
    p.add_argument("--cold", type=float, default=300.0, help="a range not asked for in this many seconds is cold")
    a = p.parse_args()
    try:
        steps = json.load(open(os.path.join(a.run, "steps.json")))
    except (OSError, ValueError) as e:
        sys.exit(f"{a.run}/steps.json: {e}")
    try:
        windows = [(s["spec"]["rate"], s["window_s"][0], s["window_s"][1], f'{s["sessions_failed"]} of {s["sessions_measured"]}') for s in steps if s.get("window_s")]
    except (KeyError, TypeError, IndexError) as e:
        sys.exit(f"{a.run}/steps.json: a step lacks {e}")
    if not windows:
        sys.exit(f"{a.run}/steps.json: no step has a window")
    requests = []
    path = os.path.join(a.run, "load", "requests.csv")
    line = 1
    try:
        with open(path, newline="") as f:
            for line, r in enumerate(csv.DictReader(f), start=2):
                try:
                    start = float(r["start_s"])
                    first = int(r["range"].split("-")[0]) if r["range"] else 0
                    requests.append((start, r["video"], first))
                except (KeyError, TypeError, ValueError, AttributeError):
                    sys.exit(f"{path}:{line}: malformed")
    except (OSError, csv.Error, UnicodeDecodeError) as e:
        sys.exit(f"{path}: unreadable after line {line}: {type(e).__name__}: {e}")
    requests.sort()
    # Cold: the range's last request lies more than --cold seconds back (or none).
    last, cold = {}, []
    for start, video, first in requests:
        seen = last.get((video, first))
        cold.append(seen is None or start - seen > a.cold)
        last[(video, first)] = start

    def span(t0, t1):
        """Starts, cold starts and requests per second in [t0, t1)."""
        picked = [(first, c) for (start, _, first), c in zip(requests, cold) if t0 <= start < t1]
        seconds = max(t1 - t0, 1e-9)
        starts = sum(1 for first, _ in picked if first == 0)
        cold_starts = sum(1 for first, c in picked if first == 0 and c)
        return starts / seconds, cold_starts / seconds, len(picked) / seconds

    print(f"| rate | window (s) | failed sessions | starts/s lead-in ({a.lead:.0f} s) | cold starts/s lead-in | starts/s window | cold starts/s window | requests/s window |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for rate, w0, w1, failed in windows:
        lead = span(w0 - a.lead, w0)
        win = span(w0, w1)
        print(f"| {rate:.2f} | {w0:.0f}-{w1:.0f} | {failed} | {lead[0]:.2f} ({100 * (lead[0] / rate - 1):+.0f} %) | {lead[1]:.2f} | {win[0]:.2f} | {win[1]:.2f} | {win[2]:.1f} |")


if __name__ == "__main__":
    main()
