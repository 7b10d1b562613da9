#!/usr/bin/env bash
# bench/kernel/sendfile-lru.py end to end on a small file: it records one row
# per read_ahead_kb and pattern with the file's pages (and nothing else) on the
# two lists, one read() pass leaves every page on the inactive list, and
# page-aligned sends with folios no larger than sendfile's 64 KiB internal
# pass leave them there too; the filesystem it reports is the one it made;
# and it leaves no loop device, mount or cgroup behind. (Whether larger folios
# are activated is the kernel's behaviour the script measures, not checked.)
# Needs root, loop devices, mkfs.ext4 and a memory cgroup controller.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "$(id -u)" -ne 0 ]; then echo "skip: needs root (loop device, mount, cgroups)"; exit 77; fi
command -v mkfs.ext4 >/dev/null || { echo "skip: mkfs.ext4 is not installed (scripts/bootstrap installs it)"; exit 77; }
[ -d /sys/fs/cgroup/memory ] || grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null \
  || { echo "skip: no memory cgroup controller"; exit 77; }
tmp=$(mktemp -d /tmp/kernel-sendfile-lru.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat "$tmp/log" 2>/dev/null | tail -20; exit 1; }
work_before=$(ls -d /var/tmp/sendfile-lru-* 2>/dev/null || true)
bench/kernel/sendfile-lru.py --fs ext4 --size-mb 16 --ra "16 128" --out "$tmp/out" > "$tmp/log" 2>&1 || fail "sendfile-lru.py failed"
python3 - "$tmp/out" <<'PY' || fail "the results are wrong"
import csv, json, sys
rows = list(csv.DictReader(open(f"{sys.argv[1]}/results.csv")))
assert [(r["read_ahead_kb"], r["pattern"]) for r in rows] == [
    (ra, p) for ra in ("16", "128") for p in ("read-64k", "sendfile-64k", "sendfile-1m", "sendfile-requests")], rows
for r in rows:
    total = int(r["active_bytes"]) + int(r["inactive_bytes"])
    # The 16 MiB file, give or take a few pages of metadata.
    assert 15 << 20 <= total <= 17 << 20, r
    if r["pattern"] == "read-64k" or (r["read_ahead_kb"] == "16" and r["pattern"] != "sendfile-requests"):
        assert float(r["active_pct"]) < 5, r
setup = json.load(open(f"{sys.argv[1]}/setup.json"))
assert setup["fs"] == "ext4" and setup["file_mb"] == 16, setup
PY
# Its own: backed by an image in its work directory (/var/tmp/sendfile-lru-*);
# another experiment's loop devices may come and go meanwhile.
! losetup -a | grep -q "/var/tmp/sendfile-lru-" || fail "a loop device was left behind: $(losetup -a | grep /var/tmp/sendfile-lru-)"
[ "$(ls -d /var/tmp/sendfile-lru-* 2>/dev/null || true)" = "$work_before" ] || fail "the work directory was left behind: $(ls -d /var/tmp/sendfile-lru-*)"
! grep -q sendfile-lru /proc/mounts || fail "a mount was left behind"
! ls -d /sys/fs/cgroup/sendfile-lru-* /sys/fs/cgroup/memory/sendfile-lru-* 2>/dev/null | grep -q . || fail "a cgroup was left behind"
echo "ok: kernel-sendfile-lru"
