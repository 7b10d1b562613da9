#!/usr/bin/env python3
"""A request trace with the shape of the Rice web workload of paper 002
(Table 1: 245,820 requests over a 1.1 GB file set, 8 GB transferred), for
the open-stat and open-stat-read benchmarks (native/bench/laio/run-openstat).

The original trace is not public, so one is generated with the figures the
paper gives and the usual shape of web server workloads:
- file sizes lognormal (median 12 KiB, sigma 1.9: many small files, a heavy
  tail), scaled so that the file set holds DATASET bytes;
- popularity Zipf over the files (alpha 0.8), requests drawn independently;
- popular files tend to be small, as in web traces: sizes are given to files
  in the order of rank + noise, and the noise is found by bisection so that
  the requests transfer TRANSFERS bytes (without it the transfer would be
  REQUESTS x the mean size, 4x too much).
Writes OUT/library.json (a vidbench library, so `vidbench disk mount` serves
the files on the emulated disk) and OUT/trace.txt (one path per line), and
prints the figures achieved. Deterministic for a seed.

    rice_trace.py OUT [--requests N] [--files N] [--dataset BYTES]
                      [--transfers BYTES] [--seed S]
"""
import argparse
import bisect
import json
import math
import os
import random
import sys


def sizes_for(files, dataset, rnd):
    raw = [rnd.lognormvariate(math.log(12 * 1024), 1.9) for _ in range(files)]
    scale = dataset / sum(raw)
    return sorted(max(1, int(s * scale)) for s in raw)


def zipf_cdf(files, alpha):
    weights = [1.0 / (r ** alpha) for r in range(1, files + 1)]
    total = sum(weights)
    cdf, acc = [], 0.0
    for w in weights:
        acc += w / total
        cdf.append(acc)
    return cdf


def assign(sizes, noise, seed):
    """Size of the file of each rank: ranks ordered by rank/files + noise."""
    rnd = random.Random(seed)
    n = len(sizes)
    keys = sorted(range(n), key=lambda r: r / n + noise * rnd.gauss(0.0, 1.0))
    by_rank = [0] * n
    for i, r in enumerate(keys):
        by_rank[r] = sizes[i]
    return by_rank


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--requests", type=int, default=245_820)
    ap.add_argument("--files", type=int, default=25_000)
    ap.add_argument("--dataset", type=float, default=1.1e9)
    ap.add_argument("--transfers", type=float, default=8e9)
    ap.add_argument("--alpha", type=float, default=0.8)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.requests < 1 or a.files < 1 or a.dataset < a.files or a.transfers <= 0:
        sys.exit("rice_trace: requests and files must be positive, the dataset at least a byte per file")

    rnd = random.Random(a.seed)
    sizes = sizes_for(a.files, a.dataset, rnd)
    cdf = zipf_cdf(a.files, a.alpha)
    ranks = [min(bisect.bisect_left(cdf, rnd.random()), a.files - 1) for _ in range(a.requests)]
    counts = [0] * a.files
    for r in ranks:
        counts[r] += 1

    def transferred(noise):
        by_rank = assign(sizes, noise, a.seed + 1)
        return sum(c * s for c, s in zip(counts, by_rank)), by_rank

    # More noise -> sizes less tied to popularity -> more bytes transferred.
    lo, hi = 0.0, 100.0
    low_bytes, by_rank = transferred(lo)
    high_bytes, _ = transferred(hi)
    if not low_bytes <= a.transfers <= high_bytes:
        print(f"rice_trace: {a.transfers:.3g} bytes cannot be reached (between {low_bytes:.3g} and {high_bytes:.3g}); "
              "using the nearest", file=sys.stderr)
    for _ in range(40):
        mid = (lo + hi) / 2
        got, by_rank = transferred(mid)
        if got < a.transfers:
            lo = mid
        else:
            hi = mid
    got, by_rank = min((transferred(lo), transferred(hi)), key=lambda t: abs(t[0] - a.transfers))

    os.makedirs(a.out, exist_ok=True)
    # Paths spread over directories, 100 files each, as a web tree is.
    path = [f"d{r // 100:04d}/f{r:06d}.html" for r in range(a.files)]
    library = {
        "version": 1,
        "name": "rice-shaped",
        "placement_seed": a.seed,
        "files": [
            {"id": r, "path": path[r], "size": by_rank[r], "video": r, "bitrate_kbps": 1, "duration_s": 1.0, "rank": r + 1}
            for r in range(a.files)
        ],
    }
    with open(os.path.join(a.out, "library.json"), "w") as f:
        json.dump(library, f)
    with open(os.path.join(a.out, "trace.txt"), "w") as f:
        for r in ranks:
            f.write(path[r] + "\n")
    touched = sum(s for s, c in zip(by_rank, counts) if c)
    print(f"rice_trace: {a.requests} requests over {a.files} files ({sum(by_rank) / 1e9:.3f} GB; "
          f"{touched / 1e9:.3f} GB requested at least once), {got / 1e9:.3f} GB transferred, "
          f"mean request {got / a.requests / 1024:.1f} KiB -> {a.out}")


if __name__ == "__main__":
    main()
