#!/usr/bin/env python3
"""Turns a Rice-shaped trace (rice_trace.py) into a session file for
`vidbench load`, so the load client replays it against an HTTP server the way
paper 002 drove its web servers: C concurrent clients, each taking the next
request of the trace as soon as its previous response is complete, until the
trace is exhausted.

Client k of C gets requests k, k+C, k+2C, ... of the trace: one session, one
persistent HTTP/1.1 connection, its requests back to back (no pacing),
uncapped, no added delay. Started together (`vidbench load --rate` high),
the clients keep the trace's order within a few requests of each other.
A request asks for the whole file; `--timeout` is its deadline (a missed one
fails that client's session: reported, never hidden).

    rice_sessions.py TRACE_DIR CLIENTS OUT.jsonl [--timeout SECONDS]

TRACE_DIR holds trace.txt and library.json as rice_trace.py wrote them.
"""
import argparse
import json
import os
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace_dir")
    p.add_argument("clients", type=int)
    p.add_argument("out")
    p.add_argument("--timeout", type=float, default=600.0, help="deadline of each request, seconds")
    a = p.parse_args()
    if a.clients < 1:
        sys.exit("rice_sessions: CLIENTS must be at least 1")
    try:
        with open(os.path.join(a.trace_dir, "library.json")) as f:
            files = json.load(f)["files"]
        with open(os.path.join(a.trace_dir, "trace.txt")) as f:
            trace = [line.strip() for line in f if line.strip()]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"rice_sessions: cannot read the trace in {a.trace_dir}: {e}")
    ids = {f["path"]: f["id"] for f in files}
    for n, path in enumerate(trace, 1):
        if path not in ids:
            sys.exit(f"rice_sessions: {a.trace_dir}/trace.txt:{n}: {path} is not in library.json")
    clients = min(a.clients, len(trace))
    with open(a.out, "w") as out:
        for k in range(clients):
            requests = [{"path": "/" + path, "file_id": ids[path], "timeout_s": a.timeout} for path in trace[k::clients]]
            session = {"id": k, "class": "rice", "rate_bps": 0, "delay_ms": 0, "video": 0, "requests": requests}
            out.write(json.dumps(session, separators=(",", ":")) + "\n")
    print(f"rice_sessions: {len(trace)} requests as {clients} clients -> {a.out}")


if __name__ == "__main__":
    main()
