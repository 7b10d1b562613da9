#!/usr/bin/env python3
"""Judges the steps of recorded stepped runs by the step verdict of today's
load client, from their raw logs, beside the verdict they were recorded with.

A step's verdict (crates/vidbench-load/src/steps.rs, `StepResult`) is the
largest of three shares:
  - measured: sessions scheduled in the window that failed before the step
    ended, of those scheduled in it (the only share before build a144130);
  - in progress: sessions whose failing request was issued in the window,
    of the sessions in play when it opened plus those started in it;
  - missing: under the settling gate (gate_pct), when the window's mean
    population (sessions in play) is more than three standard deviations
    (sqrt(N)) below a steady state of its rate (rate x mean paced session
    length, N), the share of N missing.
A step passes below 0.3 %. This script recomputes the last two from
`load/sessions.csv`, `load/requests.csv` and `load/intervals.csv` (kept in a
results directory, left out of committed records) and the workload's session
list, and prints each step's shares and both verdicts, marking changes. A
failed session's failing request is the failed request of the same session
id that ended nearest the session's end (ids repeat: joins and repairs reuse
them).

    rejudge.py WORKLOAD_DIR RUN_DIR...     (RUN_DIR: RESULTS/runs/CONFIG/steps-rep0)
"""
import csv
import json
import math
import sys
from pathlib import Path

THRESHOLD_PCT = 0.3
SIGMAS = 3.0


def session_lengths(workload: Path) -> dict:
    """Paced length of each session of the workload, by id (the load
    client's `Durations::length_of`: the paces after the first request)."""
    lengths = {}
    with open(workload / "sessions.jsonl") as f:
        for line in f:
            s = json.loads(line)
            lengths[str(s["id"])] = sum(r.get("pace_s") or 0.0 for r in s["requests"][1:])
    if not lengths:
        sys.exit(f"rejudge: {workload}/sessions.jsonl holds no sessions")
    return lengths


def failure(outcome: str) -> bool:
    return outcome not in ("ok", "interrupted", "withdrawn", "", None)


def rejudge(run: Path, lengths: dict) -> None:
    load = run / "load"
    for f in ("steps.json", "sessions.csv", "requests.csv", "intervals.csv"):
        if not (load / f).is_file():
            sys.exit(f"rejudge: {load / f} is missing (a committed record keeps no per-session logs)")
    mean_len = sum(lengths.values()) / len(lengths)
    # Each failed request (ended, issued) by session id.
    failed_requests = {}
    with open(load / "requests.csv") as f:
        for q in csv.DictReader(f):
            if failure(q["outcome"]) and q["start_s"] and q["end_s"]:
                failed_requests.setdefault(q["session"], []).append((float(q["end_s"]), float(q["start_s"])))
    issued = []  # when each failed session's failing request was issued
    with open(load / "sessions.csv") as f:
        for r in csv.DictReader(f):
            if failure(r["outcome"]) and r["end_s"]:
                end = float(r["end_s"])
                candidates = failed_requests.get(r["session"], [])
                if candidates:
                    issued.append(min(candidates, key=lambda q: abs(q[0] - end))[1])
    with open(load / "intervals.csv") as f:
        intervals = [(float(i["start_s"]), float(i["end_s"]), int(i["sessions_started"]), int(i["sessions_active"])) for i in csv.DictReader(f)]
    print(f"== {run}")
    for s in json.load(open(load / "steps.json")):
        a, b = s["window_s"]
        rate = s["spec"]["rate"]
        measured = s.get("measured_failure_percent", s["failure_percent"])
        if measured is None:
            print(f"  {rate:.2f}: no measured session")
            continue
        at_open = sum(act for _, end, _, act in intervals if abs(end - a) < 1e-6)
        started = sum(n for start, end, n, _ in intervals if start >= a - 1e-6 and end <= b + 1e-6)
        in_progress = at_open + started
        failed_in = sum(1 for t in issued if a <= t < b)
        in_pct = 100.0 * failed_in / in_progress if in_progress else 0.0
        steady = rate * mean_len
        if not s.get("active_sessions"):
            print(f"  {rate:.2f}/s: no sample interval inside the window: no population figure")
            continue
        held = s["active_sessions"]["mean"]
        population = 100.0 * held / steady
        holds = held >= steady - SIGMAS * math.sqrt(steady)
        judged = s["spec"].get("gate_pct", 0) > 0  # the population only under the gate
        verdict = max(measured, in_pct, 0.0 if holds or not judged else 100.0 - population)
        before = "pass" if s["failure_percent"] < THRESHOLD_PCT else "FAIL"
        now = "pass" if verdict < THRESHOLD_PCT else "FAIL"
        print(
            f"  {rate:.2f}/s: measured {measured:6.2f} %, in progress {failed_in}/{in_progress} = {in_pct:5.2f} %, "
            f"population {population:3.0f} % ({'held' if holds else 'NOT held'}) -> {verdict:6.2f} %: "
            f"{before} -> {now}{'  CHANGED' if before != now else ''}"
        )


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    lengths = session_lengths(Path(sys.argv[1]))
    for run in sys.argv[2:]:
        rejudge(Path(run), lengths)


if __name__ == "__main__":
    main()
