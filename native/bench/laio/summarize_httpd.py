#!/usr/bin/env python3
"""The tables of run-httpd (laio-httpd, eager and lazy, against nginx on the
Rice-shaped trace) from its httpd.csv, and the two helpers run-httpd calls
per replay.

    summarize_httpd.py httpd.csv              the tables (Markdown)
    summarize_httpd.py --row summary.json     one replay's CSV fields
    summarize_httpd.py --background LOG       laio-httpd's share of disk calls
                                              (open, read) that went to the
                                              background (from the counter lines
                                              it logs at SIGTERM)
"""
import csv
import json
import re
import statistics
import sys
from collections import defaultdict


def row(path):
    """seconds,mb_s,requests_per_s,p50,p99,completed,failed,requests of a load summary."""
    s = json.load(open(path))
    r = s.get("response_ms") or {}
    sessions, reqs, wall = s["sessions"], s["requests"], s["wall_s"]
    return (f'{wall:.3f},{s["throughput_whole_run_mb_s"]:.2f},{reqs["completed"] / wall:.1f},'
            f'{r.get("p50", "")},{r.get("p99", "")},{sessions["completed"]},{sessions["failed"]},{reqs["completed"]}')


def background(log):
    """Background / issued disk calls (open, read) over every worker's counter
    line, as a fraction. Network calls are left out: a keep-alive recv waits
    for the client's next request whatever the disk does."""
    calls = bg = 0
    for line in open(log, errors="replace"):
        if "calls (background):" not in line:
            continue
        for family, n, b in re.findall(r" ([a-z]+) (\d+) \((\d+)\)", line.split("calls (background):", 1)[1]):
            if family in ("open", "read"):
                calls += int(n)
                bg += int(b)
    if calls == 0:
        sys.exit(f"summarize_httpd: no laio-httpd counter line in {log}")
    return f"{bg / calls:.4f}"


def table(path):
    rows = list(csv.DictReader(open(path)))
    if not rows:
        sys.exit("summarize_httpd: no rows")
    runs = defaultdict(list)
    for r in rows:
        runs[(r["server"], int(r["clients"]), r["state"])].append(r)
    servers = list(dict.fromkeys(r["server"] for r in rows))
    clients = sorted({int(r["clients"]) for r in rows})
    reps = max(len(v) for v in runs.values())

    def med(rs, col):
        values = [float(r[col]) for r in rs if r[col]]
        return statistics.median(values) if values else float("nan")
    for state in ("cold", "warm"):
        print(f"## {state.capitalize()}: MB/s delivered over the whole replay (median of {reps} run(s)), "
              f"median / p99 response ms")
        print()
        print("| clients | " + " | ".join(servers) + " |")
        print("|---|" + "---|" * len(servers))
        for c in clients:
            cells = []
            for s in servers:
                rs = runs.get((s, c, state))
                if not rs:
                    cells.append("-")
                    continue
                cell = f"{med(rs, 'mb_s'):.1f} MB/s ({med(rs, 'response_p50_ms'):.1f} / {med(rs, 'response_p99_ms'):.0f} ms)"
                failed = sum(int(r["failed"]) for r in rs)
                if failed:
                    cell += f", {failed} clients failed"
                if rs[0]["background_share"]:
                    cell += f", {100 * med(rs, 'background_share'):.1f} % bg"
                cells.append(cell)
            print(f"| {c} | " + " | ".join(cells) + " |")
        print()
    print("(bg: share of laio-httpd's disk calls, open and read, that went to the background, over its cold and "
          "warm replays together)")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--row":
        print(row(sys.argv[2]))
    elif len(sys.argv) == 3 and sys.argv[1] == "--background":
        print(background(sys.argv[2]))
    elif len(sys.argv) == 2:
        table(sys.argv[1])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
