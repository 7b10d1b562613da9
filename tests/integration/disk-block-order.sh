#!/usr/bin/env bash
# Block mode keeps the order in which the kernel issues reads: a 1 MiB direct
# read that the block layer splits in two (max_sectors_kb 768) reaches the
# drive head first, then tail, so the drive serves it in one pass. The
# emulator once made each read's bytes before stamping its arrival, on
# several FUSE threads; the smaller tail then overtook its head in 70 of 128
# such reads and the drive positioned twice for each of them.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/block/common.sh
block_test ext4
"$VB" disk library "$tmp/lib.json" --files 4 --size-mib 64 --name block-order
"$VB" disk mount "$tmp/mnt" --library "$tmp/lib.json" --preset wd-red-1tb --block --fs ext4 --max-sectors-kb 768 \
  --trace "$tmp/trace.csv" --daemonize --log "$tmp/block.log" | sed -n 's/.*server pid \([0-9]*\).*/\1/p' >> "$tmp/pids"

# One read at a time, as Libception's daemon reads: 1 MiB every 2 MiB of
# each file, from a page-aligned buffer (O_DIRECT).
python3 - "$tmp/mnt" <<'PY'
import glob, mmap, os, sys
buf = mmap.mmap(-1, 1 << 20)
n = 0
for path in sorted(glob.glob(sys.argv[1] + "/**/*.mp4", recursive=True)):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    size = os.fstat(fd).st_size
    for off in range(0, size - (1 << 20) + 1, 2 << 20):
        assert os.preadv(fd, [buf], off) == 1 << 20
        n += 1
    os.close(fd)
assert n == 128, n
PY
"$VB" disk unmount "$tmp/mnt" > /dev/null || fail "unmount"
assert_nothing_left "unmount"

# Per file, in the drive's arrival order: a piece that ends where the piece
# that arrived just before it begins came in behind the bytes after it.
python3 - "$tmp/trace.csv" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["file_id"] != "4294967295"]
rows.sort(key=lambda r: int(r["arrival_ns"]))
last, in_order, reversed_ = {}, 0, []
for r in rows:
    off, size = int(r["offset"]), int(r["bytes"])
    prev = last.get(r["file_id"])
    if prev is not None and off + size == prev[0]:
        reversed_.append((r["file_id"], off, size))
    elif prev is not None and prev[0] + prev[1] == off:
        in_order += 1
    last[r["file_id"]] = (off, size)
split = sum(1 for r in rows if int(r["bytes"]) < 1 << 20)
assert split >= 128, f"the reads were not split in two: {split} pieces under 1 MiB of {len(rows)}"
assert not reversed_, f"{len(reversed_)} reads reached the drive tail first (file, offset, bytes): {reversed_[:5]}"
assert in_order >= 128, f"only {in_order} heads were followed by their tails"
print(f"{len(rows)} drive requests: {in_order} tails right behind their heads, none ahead")
PY
echo "disk-block-order: ok"
