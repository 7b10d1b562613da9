#!/usr/bin/env python3
"""Writes a small library manifest (library.json, format version 1 of
crates/vidbench-library) for testing and benchmarking the emulated disk
without the workload generator.

  make_library.py OUT.json --files N --size-mib M [--odd] [--name NAME] [--seed S]

--odd gives every file a size that is not a multiple of 512 or 4096 (for EOF
tests) and spreads the files over two directories.
"""
import argparse
import json
import os

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("out")
p.add_argument("--files", type=int, default=8)
p.add_argument("--size-mib", type=float, default=4.0)
p.add_argument("--odd", action="store_true")
p.add_argument("--name", default="disk-test")
p.add_argument("--seed", type=int, default=1)
a = p.parse_args()

files = []
for i in range(a.files):
    size = int(a.size_mib * 1024 * 1024)
    if a.odd:
        size += 1000 + 37 * i
    sub = "a" if (not a.odd or i % 2 == 0) else "b"
    bitrate = 2000
    files.append({
        "id": i,
        "path": f"v/{sub}/{i:05d}.mp4",
        "size": size,
        "video": i,
        "bitrate_kbps": bitrate,
        "duration_s": max(size * 8 / (bitrate * 1000), 0.001),
        "rank": i + 1,
    })
lib = {"version": 1, "name": a.name, "placement_seed": a.seed, "files": files}
tmp = a.out + ".tmp"
with open(tmp, "w") as f:
    json.dump(lib, f, indent=1)
os.replace(tmp, a.out)
