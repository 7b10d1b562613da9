#!/usr/bin/env python3
"""What the drive did in one window of a stepped run, from its disk trace.

    analyze-trace.py RUN_DIR WINDOW_START_S WINDOW_END_S

RUN_DIR holds disk-trace.csv (docs/disk.md "Trace") and disk-before.json,
whose uptime_s is the drive's clock when the load started (the window is on
the load's clock). Prints the request sizes, the drive time by outcome, and
how many positionings (outcome "miss") continue a file where one of its reads
had ended less than 5 ms before they arrived (follow-ups), then three files'
requests in order: how a 10-second chunk reaches the drive.
"""
import collections
import csv
import json
import sys

run, w0, w1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
offset_s = json.load(open(f"{run}/disk-before.json"))["uptime_s"]
rows = []
with open(f"{run}/disk-trace.csv") as f:
    for r in csv.DictReader(f):
        a, s, e = int(r["arrival_ns"]), int(r["start_ns"]), int(r["end_ns"])
        if w0 <= s / 1e9 - offset_s < w1:
            rows.append({"a": a, "s": s, "e": e, "file": r["file_id"], "off": int(r["offset"]),
                         "bytes": int(r["bytes"]), "outcome": r["outcome"]})
n, total = len(rows), sum(r["bytes"] for r in rows)
busy = sum(r["e"] - r["s"] for r in rows) / 1e9
print(f"window {w0:.0f}-{w1:.0f} s: {n} requests, {total / 1e6 / (w1 - w0):.2f} MB/s, "
      f"mean {total / n / 1024:.1f} KiB, drive busy {busy:.1f} s")
print("request size: % of requests, % of bytes")
sizes = collections.Counter(r["bytes"] // 1024 for r in rows)
for kib, c in sorted(sizes.items(), key=lambda x: -x[1])[:6]:
    print(f"  {kib:5d} KiB: {100 * c / n:5.1f} %  {100 * kib * 1024 * c / total:5.1f} %")
for outcome in ("miss", "stream", "hit"):
    sel = [r for r in rows if r["outcome"] == outcome]
    if sel:
        t = sum(r["e"] - r["s"] for r in sel) / 1e6
        print(f"  {outcome:6s}: {len(sel):6d} requests, {t / len(sel):6.2f} ms each, "
              f"{sum(r['bytes'] for r in sel) / len(sel) / 1024:6.1f} KiB each, {t / 1000:5.1f} s of drive time")
ends = {(r["file"], r["off"] + r["bytes"]): r["e"] for r in rows}
misses = [r for r in rows if r["outcome"] == "miss"]
follow = [r for r in misses if 0 <= r["a"] - ends.get((r["file"], r["off"]), -10**18) < 5_000_000]
gaps = sorted((r["a"] - ends[(r["file"], r["off"])]) / 1e6 for r in follow)
print(f"positionings {len(misses)}: follow-ups {len(follow)} ({100 * len(follow) / len(misses):.0f} %), "
      f"{sum(r['e'] - r['s'] for r in follow) / 1e9:.1f} s of drive time; "
      f"the follow-up arrived a median {gaps[len(gaps) // 2]:.2f} ms after the read it continues ended")
by_file = collections.defaultdict(list)
for r in rows:
    by_file[r["file"]].append(r)
shown = 0
for fid, reqs in by_file.items():
    if len(reqs) < 12 or shown == 3:
        continue
    shown += 1
    print(f"file {fid}:")
    for r in sorted(reqs, key=lambda r: r["s"])[:10]:
        print(f"  start {r['s'] / 1e9 - offset_s:9.3f} s  offset {r['off']:10d} ({r['off'] / 525000:5.2f} chunks) "
              f"{r['bytes'] // 1024:4d} KiB  {r['outcome']}")
