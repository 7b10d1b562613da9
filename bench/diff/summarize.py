#!/usr/bin/env python3
"""Tables of the diff microbenchmark (bench/diff/run) from its results.csv.

Per scheduler, mode and number of diffs: the workload's completion time (mean
and, with repetitions, a 95 % confidence interval), and what iostat would
show for the loop device over the run (paper 000 Table 4): utilisation, reads
per second, mean service time (busy time per read) and mean wait (time reads
spent queued and served, per read). Then Libception's change in completion
time against vanilla under each scheduler.

    summarize.py results.csv [setup.txt]
"""
import csv
import statistics
import sys
from collections import defaultdict

# Two-sided 95 % Student t quantiles by degrees of freedom (1..30).
T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
       2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
       2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def mean_ci(xs):
    m = statistics.mean(xs)
    if len(xs) < 2:
        return m, None
    return m, T95[min(len(xs) - 1, 30) - 1] * statistics.stdev(xs) / len(xs) ** 0.5


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    rows = list(csv.DictReader(open(sys.argv[1])))
    if not rows:
        sys.exit(f"{sys.argv[1]}: no runs")
    groups = defaultdict(list)
    for r in rows:
        groups[(r["scheduler"], r["instances"], r["mode"])].append(r)

    print("# diff microbenchmark (paper 000 section 8, Fig 18 and Table 4)\n")
    if len(sys.argv) > 2:
        print("```")
        print(open(sys.argv[2]).read().rstrip())
        print("```\n")
    print("| scheduler | diffs | mode | runs | completion s | util % | reads/s | service ms | wait ms | MB read |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    means = {}
    for key in sorted(groups):
        sched, n, mode = key
        g = groups[key]
        secs = [float(r["seconds"]) for r in g]
        m, ci = mean_ci(secs)
        means[key] = m
        reads = sum(int(r["loop_reads"]) for r in g)
        busy = sum(int(r["loop_busy_ms"]) for r in g)
        wait = sum(int(r["loop_read_wait_ms"]) for r in g)
        total_s = sum(secs)
        mb = statistics.mean(int(r["loop_bytes"]) for r in g) / 1e6
        ci_txt = f" ± {ci:.1f}" if ci is not None else ""
        print(f"| {sched} | {n} | {mode} | {len(g)} | {m:.1f}{ci_txt} | {100 * busy / 1000 / total_s:.1f} | "
              f"{reads / total_s:.0f} | {busy / max(reads, 1):.2f} | {wait / max(reads, 1):.2f} | {mb:.0f} |")
    print("\nLibception against vanilla (completion time, negative = sooner):\n")
    print("| scheduler | diffs | vanilla s | Libception s | change |")
    print("|---|---|---|---|---|")
    for (sched, n, mode), m in sorted(means.items()):
        if mode != "vanilla" or (sched, n, "libception") not in means:
            continue
        lib = means[(sched, n, "libception")]
        print(f"| {sched} | {n} | {m:.1f} | {lib:.1f} | {100 * (lib - m) / m:+.1f} % |")


if __name__ == "__main__":
    main()
