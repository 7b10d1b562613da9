#!/usr/bin/env python3
"""Tables 3 and 4 of paper 002 from run-openstat's openstat.csv: seconds per
run (median over repetitions) for N threads and for liblaio's eager and lazy
back ends with N requests in flight, cold and warm, and the issue's goals:
lazy open-stat warm within 1.2x of one thread, open-stat-read cold with 100
in flight at least as fast as 100 threads.

    summarize_openstat.py openstat.csv
"""
import csv
import statistics
import sys
from collections import defaultdict


def main():
    rows = list(csv.DictReader(open(sys.argv[1])))
    if not rows:
        sys.exit("summarize_openstat: no rows")
    t = defaultdict(list)
    bg = defaultdict(list)
    for r in rows:
        key = (r["read"], r["mode"], r["backend"], int(r["n"]), r["state"])
        t[key].append(float(r["seconds"]))
        if int(r["calls"]):
            bg[key].append(int(r["background"]) / int(r["calls"]))
    med = {k: statistics.median(v) for k, v in t.items()}
    ns = sorted({k[3] for k in med})
    variants = [("threads", "none", "threads"), ("laio", "eager", "eager"), ("laio", "lazy", "lazy")]
    for read, title in (("0", "Table 3 analogue: open-stat"), ("1", "Table 4 analogue: open-stat-read")):
        print(f"## {title} (seconds, median of {len(t[next(iter(t))])} run(s))")
        print()
        print("| N | " + " | ".join(f"{name} cold | {name} warm" for _, _, name in variants) + " |")
        print("|---|" + "---|---|" * len(variants))
        for n in ns:
            cells = []
            for mode, backend, _ in variants:
                for state in ("cold", "warm"):
                    v = med.get((read, mode, backend, n, state))
                    b = bg.get((read, mode, backend, n, state))
                    cell = "-" if v is None else f"{v:.2f}"
                    if b:
                        cell += f" ({100 * statistics.median(b):.0f} % bg)"
                    cells.append(cell)
            print(f"| {n} | " + " | ".join(cells) + " |")
        print()
    print("(N: threads, or requests in flight for liblaio; bg: share of liblaio calls that went to the background)")
    print()
    print("## Goals (issue 14)")
    print()
    checks = [
        ("open-stat warm: lazy (1 in flight) within 1.2x of one thread",
         ("0", "laio", "lazy", 1, "warm"), ("0", "threads", "none", 1, "warm"), 1.2),
        ("open-stat-read cold: lazy with 100 in flight at least as fast as 100 threads",
         ("1", "laio", "lazy", 100, "cold"), ("1", "threads", "none", 100, "cold"), 1.0),
    ]
    for what, a, b, limit in checks:
        if a in med and b in med:
            ratio = med[a] / med[b]
            print(f"- {what}: {med[a]:.3f} s vs {med[b]:.3f} s = {ratio:.2f}x: {'met' if ratio <= limit else 'NOT met'}")
        else:
            print(f"- {what}: not measured")


if __name__ == "__main__":
    main()
