#!/usr/bin/env python3
"""Active sessions per step of a stepped run against the steady state.

For each step of `RESULTS/runs/CONFIG/steps-rep0` (a `vidbench run` with
`run.steady`): the mean active sessions in the window (the load client's
samples), the number the rate history predicts (rate x E[min(D, age)] summed
over the steps so far, D being a session's paced time in the workload's
session list, minus the sessions that failed and would still be playing), and
the steady-state number at the step's rate (rate x E[D]). The gap column is
what the settling gate (run.steady.gate_pct) bounds: the share of the
steady-state sessions missing when the window is half over.

    population_check.py RESULTS CONFIG
"""
import bisect
import csv
import json
import sys
from pathlib import Path


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    res, config = Path(sys.argv[1]), sys.argv[2]
    run = res / "runs" / config / "steps-rep0" / "load"
    sessions_file = res / "workload" / "sessions.jsonl"
    if not sessions_file.exists():
        sys.exit(f"{sessions_file}: the workload's session list is needed (records leave it out: regenerate it with "
                 f"`vidbench workload gen {res}/workload/spec.toml --out {res}/workload`)")
    paced, lengths = {}, []
    for line in open(sessions_file):
        s = json.loads(line)
        d = sum(r.get("pace_s") or 0 for r in s["requests"][1:])
        paced[s["id"]] = d
        lengths.append(d)
    lengths.sort()
    prefix = [0.0]
    for d in lengths:
        prefix.append(prefix[-1] + d)
    n = len(lengths)

    def emin(x):
        if x <= 0:
            return 0.0
        b = bisect.bisect_left(lengths, x)
        return (prefix[b] + (x * (n - b) if b < n else 0.0)) / n

    mean = emin(float("inf")) if n else 0.0
    steps = json.load(open(run / "steps.json"))
    history = [(st["start_s"], st["spec"]["rate"]) for st in steps]
    failed = []
    for r in csv.DictReader(open(run / "sessions.csv")):
        if r.get("end_s") and r["outcome"] not in ("ok", "interrupted") and int(r["session"]) in paced:
            failed.append((float(r["end_s"]), float(r["scheduled_s"]) + paced[int(r["session"])]))

    def expected(t, upto):
        total = 0.0
        for k, (a, rate) in enumerate(history[:upto + 1]):
            until = min(history[k + 1][0], t) if k + 1 <= upto else t
            if until > a:
                total += rate * (emin(t - a) - emin(t - until))
        return total

    print(f"session list: {n} sessions, mean paced time E[D] = {mean:.1f} s")
    print("| step | rate/s | window s | active (mean) | predicted | of which failed, still playing | steady state | gap at mid-window | failed % |")
    print("|---|---|---|---|---|---|---|---|---|")
    for i, st in enumerate(steps):
        a, b = st["window_s"]
        mid = (a + b) / 2
        gone = sum(1 for end, would_end in failed if end < mid < would_end)
        predicted = expected(mid, i) - gone
        rate = st["spec"]["rate"]
        steady = rate * mean
        active = (st.get("active_sessions") or {}).get("mean", float("nan"))
        print(f"| {i + 1} | {rate:.2f} | {a:.0f}-{b:.0f} | {active:.0f} | {predicted:.0f} | {gone} | {steady:.0f} | "
              f"{100 * (steady - predicted) / steady:.1f} % | {st['failure_percent'] or 0:.1f} |")


if __name__ == "__main__":
    main()
