#!/usr/bin/env python3
"""Summary table (Markdown) of native/bench/laio/run's getpid.csv: median and
min/max seconds per configuration and the median's ratio to the direct calls'.
Made from the raw CSV only; usage: summarize.py getpid.csv"""
import csv
import statistics
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
groups = {}
for r in rows:
    key = (r["mode"], r["backend"], int(r["outstanding"]))
    groups.setdefault(key, []).append(float(r["seconds"]))
direct = statistics.median(groups[("direct", "none", 1)])
print("| configuration | runs | median (s) | min-max (s) | vs direct |")
print("|---|---|---|---|---|")
order = sorted(groups, key=lambda k: (k[0] != "direct", k[1] != "lazy", k[2]))
for key in order:
    v = groups[key]
    mode, backend, k = key
    name = "direct getpid" if mode == "direct" else (
        "lazy" if backend == "lazy" else f"eager, {k} outstanding")
    med = statistics.median(v)
    print(f"| {name} | {len(v)} | {med:.3f} | {min(v):.3f}-{max(v):.3f} | {med / direct:.2f}x |")
lazy = statistics.median(groups[("laio", "lazy", 1)])
print()
print(f"Goal (issue 14): lazy within 1.3x of direct: {lazy / direct:.2f}x, "
      f"{'met' if lazy / direct <= 1.3 else 'not met'}. Paper 002 (2005 hardware): "
      "direct 0.80 s, liblaiogen 6.1 s (7.7x).")
