"""same_build.py A B: exits 0 when A and B name the same build of a drive
image, else 1 with what differs on stdout. Each is a results directory's
image.json (its image_figures) or a cached image (.vbimg: the figures in its
header). Builds are told apart by where the library lies, its extents and
metadata blocks and, where both record it (builder version 3 on), the
placement digest: before version 3 builds of one key placed files
differently (docs/disk.md, "Placement")."""
import gzip
import json
import struct
import sys

KEYS = ("data_first_byte", "data_end_byte", "extents", "overlay_blocks")


def figures(path):
    if path.endswith(".vbimg"):
        with gzip.open(path) as z:
            z.read(8)  # magic
            header = json.loads(z.read(struct.unpack("<I", z.read(4))[0]))
        return {**{k: header.get(k) for k in KEYS}, **header.get("figures", {})}
    return json.load(open(path)).get("image_figures", {})


a, b = figures(sys.argv[1]), figures(sys.argv[2])
differs = [k for k in KEYS if a.get(k) != b.get(k)]
if a.get("placement") and b.get("placement") and a["placement"] != b["placement"]:
    differs.append("placement")
if differs:
    print("; ".join(f"{k} {a.get(k)} against {b.get(k)}" for k in differs))
sys.exit(1 if differs else 0)
