#!/usr/bin/env python3
"""Makes the README of a bench/disk/block.sh run from its raw files only:
results.csv (every figure, with the raw file it came from), <preset>/model/
model.json (the model alone and the preset's parameters) and setup.txt.

  block_summary.py OUT > OUT/README.md

"Published" are the preset's own figures: the media rates are paper 000
Table 1 / the datasheet (outer_mb_s, middle_mb_s, inner_mb_s); random 4 KiB
at depth 1 is 1000 / (average seek + half a revolution + overhead + transfer)
from the preset's reference average seek. Depth 32 has no published figure.
"""
import csv
import json
import os
import sys

out = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(out, "results.csv"))))
setup = open(os.path.join(out, "setup.txt")).read().strip()
presets = sorted({r["preset"] for r in rows}, key=[r["preset"] for r in rows].index)
val = {(r["preset"], r["mode"], r["figure"]): r["value"] for r in rows}
# `vidbench disk presets` output: a preset's name line, then "  reference: {json}".
reference, name = {}, None
for line in open(os.path.join(out, "presets.txt")):
    if line and not line[0].isspace():
        name = line.strip()
    elif line.strip().startswith("reference:") and name:
        reference[name] = json.loads(line.split("reference:", 1)[1])

print("# Emulated disk: FUSE mode and block mode side by side\n")
print("Made by `bench/disk/block_summary.py` from `results.csv` (one row per figure, with")
print("the raw file it comes from) and `*/model/model.json`. Commands: `commands.log`.\n")
print("```\n" + setup + "\n```\n")
for p in presets:
    m = json.load(open(os.path.join(out, p, "model", "model.json")))
    par = m["params"]
    rev_ms = 60000.0 / par["rpm"] if par.get("rpm") else 0.0
    ref = reference.get(p, {})
    ref_qd1 = ""
    if ref.get("avg_seek_ms") and rev_ms:
        ref_qd1 = f"{1000.0 / (ref['avg_seek_ms'] + rev_ms / 2 + par['command_overhead_ms']):.0f}"
    figures = [
        ("sequential outer MB/s", "seq_outer_mb_s", f"{par['outer_mb_s']:.0f}", f"{m['sequential_outer_mb_s']:.1f}"),
        ("sequential middle MB/s", "seq_middle_mb_s", f"{par['middle_mb_s']:.0f}", ""),
        ("sequential inner MB/s", "seq_inner_mb_s", f"{par['inner_mb_s']:.0f}", f"{m['sequential_inner_mb_s']:.1f}"),
        ("random 4 KiB IOPS, depth 1", "rand4k_qd1_iops", ref_qd1, f"{m['random_4k_qd1_iops']:.1f}"),
        ("random 4 KiB IOPS, depth 32", "rand4k_qd32_iops", "", f"{m['random_4k_qd32_iops']:.1f}"),
        ("32 x 64 KiB interleaved MB/s", "bench_interleaved_mb_s", "", ""),
        ("1 x 2 MiB serialized MB/s", "bench_serialized_mb_s", "", ""),
        ("serialized / interleaved", "bench_ratio", "", ""),
    ]
    print(f"## {p}\n")
    print("| figure | published | model | FUSE mode | block mode |")
    print("|---|---|---|---|---|")
    for label, key, pub, model in figures:
        print(f"| {label} | {pub or '-'} | {model or '-'} | {val.get((p, 'fuse', key), '-')} | {val.get((p, 'block', key), '-')} |")
    print()
    q = os.path.join(out, p, "block", "queue.txt")
    if os.path.exists(q):
        print("Block device queue: " + ", ".join(l.strip() for l in open(q)) + ".\n")
    s = os.path.join(out, p, "block", "stats.json")
    if os.path.exists(s):
        st = json.load(open(s))
        bl = st.get("block_layer", {}).get("counters", {})
        c = st["total"]["counters"]
        if bl:
            print(f"Block mount totals: the block layer completed {bl['reads']} reads ({bl['read_merges']} merged into others, "
                  f"{bl['read_sectors'] * 512 / 1e6:.0f} MB); the drive served {c['reads']} requests, {c['bytes'] / 1e6:.0f} MB.\n")
