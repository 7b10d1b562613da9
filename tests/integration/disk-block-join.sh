#!/usr/bin/env bash
# Block mode above the loop device's max_sectors_kb cap: the loop device gets
# its cap and the drive joins what it split. With --max-sectors-kb 16384 and
# 2 MiB readahead, eight readers keep the drive busy so that the 1280 + 768 KiB
# pieces of a window queue together; the drive serves each such pair as one
# command: the trace marks the second piece `joined`, with the same start and
# end as the piece before it, pieces that arrived apart are not joined, no
# command exceeds the limit, the record says `drive_joins_kb`, and the bytes
# read are the library's.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/block/common.sh
block_test ext4
"$VB" disk library "$tmp/lib.json" --files 8 --size-mib 48 --name block-join
"$VB" disk mount "$tmp/mnt" --library "$tmp/lib.json" --preset wd-red-1tb --block --fs ext4 \
  --max-sectors-kb 16384 --read-ahead-kb 2048 --trace "$tmp/trace.csv" --daemonize --log "$tmp/block.log" \
  > "$tmp/ready.txt"
sed -n 's/.*server pid \([0-9]*\).*/\1/p' "$tmp/ready.txt" >> "$tmp/pids"
grep -q "max_sectors_kb 1280 (the drive joins contiguous requests up to 16384 KiB)" "$tmp/ready.txt" \
  || fail "the ready line does not say the drive joins: $(cat "$tmp/ready.txt")"
dev=$(sed -n 's|.* on /dev/\(loop[0-9]*\) .*|\1|p' "$tmp/ready.txt")
[ "$(cat /sys/block/$dev/queue/max_sectors_kb)" = 1280 ] || fail "$dev has max_sectors_kb $(cat /sys/block/$dev/queue/max_sectors_kb)"
"$VB" disk stat "$tmp/mnt" --json > "$tmp/stat.json"
python3 - "$tmp/stat.json" <<'PY'
import json, sys
q = json.load(open(sys.argv[1]))["config"]["block"]["device"]["queue"]
assert q["drive_joins_kb"] == 16384 and q["max_sectors_kb"] == "1280", q
PY

# Eight buffered readers at once, each a whole file in 256 KiB reads; the
# bytes at sampled offsets are checked against the library's generator.
python3 - "$tmp/mnt" "$tmp/lib.json" <<'PY'
import json, os, sys, threading
sys.path.insert(0, "tests/integration/lib")
from generated_content import expected
mnt, lib = sys.argv[1], json.load(open(sys.argv[2]))
errors = []
def read(f):
    try:
        with open(os.path.join(mnt, f["path"]), "rb") as fh:
            off = 0
            while chunk := fh.read(256 << 10):
                if off % (4 << 20) == 0:
                    assert chunk[:4096] == expected(f["id"], off, 4096), (f["path"], off)
                off += len(chunk)
        assert off == f["size"], (f["path"], off, f["size"])
    except Exception as e:
        errors.append(repr(e))
threads = [threading.Thread(target=read, args=(f,)) for f in lib["files"]]
for t in threads: t.start()
for t in threads: t.join()
assert not errors, errors
PY
"$VB" disk stat "$tmp/mnt" --json > "$tmp/stat.json"
"$VB" disk unmount "$tmp/mnt" > /dev/null || fail "unmount"
assert_nothing_left "unmount"

python3 - "$tmp/trace.csv" "$tmp/stat.json" <<'PY'
import csv, json, sys
from collections import defaultdict
rows = [r for r in csv.DictReader(open(sys.argv[1]))]
for r in rows:
    r["lba"], r["bytes"] = int(r["lba"]), int(r["bytes"])
assert max(r["bytes"] for r in rows) <= 1280 * 1024, "a request above the loop device's cap"
by_end = defaultdict(list)
for r in rows:
    by_end[(r["start_ns"], r["end_ns"])].append(r)
joined = [r for r in rows if r["outcome"] == "joined"]
assert len(joined) >= 8, f"only {len(joined)} of {len(rows)} requests joined: the pieces never queued together?"
for r in joined:
    command = sorted(by_end[(r["start_ns"], r["end_ns"])], key=lambda x: x["lba"])
    assert command[0]["outcome"] != "joined", f"a command of joined pieces only: {command}"
    for a, b in zip(command, command[1:]):
        assert a["lba"] + a["bytes"] // 512 == b["lba"], f"a command of pieces that do not continue each other: {command}"
    assert sum(x["bytes"] for x in command) <= 16384 * 1024, "a command above the join limit"
    # Every piece arrived within 2 ms of the one the drive chose.
    arrivals = [int(x["arrival_ns"]) for x in command]
    assert max(arrivals) - min(arrivals) <= 4_000_000, f"pieces that arrived apart were joined: {command}"
counters = json.load(open(sys.argv[2]))["total"]["counters"]
assert counters["joined_reads"] == len(joined), (counters["joined_reads"], len(joined))
commands = len({(r["start_ns"], r["end_ns"]) for r in rows})
print(f"{len(rows)} drive requests, {len(joined)} joined to the piece before them: {commands} commands")
PY
echo "disk-block-join: ok"
