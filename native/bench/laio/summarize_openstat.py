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
        if not any(k[0] == read for k in med):
            continue  # a run of the other benchmark only
        print(f"## {title} (seconds, median of {max(len(v) for k, v in t.items() if k[0] == read)} run(s))")
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
            print(f"- {what}: {verdict(t[a], t[b], limit)}")
        else:
            print(f"- {what}: not measured")


# Two-sided 95 % quantiles of Student's t by degrees of freedom (beyond 30,
# the normal's 1.96 is within 4 %).
T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
       2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def interval(xs):
    """(mean, half-width of its 95 % confidence interval)."""
    m = statistics.fmean(xs)
    if len(xs) < 2:
        return m, float("nan")
    return m, T95[min(len(xs) - 1, len(T95)) - 1] * statistics.stdev(xs) / len(xs) ** 0.5


def verdict(a, b, limit):
    """Whether times `a` are within `limit` times `b`: met when even the top
    of a's 95 % interval is within `limit` times the bottom of b's, not met
    when the bottom of a's is beyond `limit` times the top of b's, else said
    to be within the noise, with the medians' side."""
    ratio = statistics.median(a) / statistics.median(b)
    (ma, ea), (mb, eb) = interval(a), interval(b)
    said = f"{statistics.median(a):.3f} s vs {statistics.median(b):.3f} s (medians of {len(a)} and {len(b)} runs) = {ratio:.2f}x"
    if len(a) < 2 or len(b) < 2:
        return f"{said}: {'met' if ratio <= limit else 'NOT met'} at the medians; a single run has no interval"
    said += f"; means {ma:.3f} ± {ea:.3f} s vs {mb:.3f} ± {eb:.3f} s (95 % CI)"
    if ma + ea <= limit * (mb - eb):
        return f"{said}: met"
    if ma - ea > limit * (mb + eb):
        return f"{said}: NOT met"
    if ratio <= limit:
        return f"{said}: met at the medians; the intervals overlap the limit"
    return f"{said}: a tie within the intervals (not shown beyond the limit, not shown within it)"

if __name__ == "__main__":
    main()
