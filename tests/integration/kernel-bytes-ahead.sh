#!/usr/bin/env bash
# bench/kernel/bytes-ahead.py end to end on a short stream: one row per mode
# with every request sent, the device having read at least what was sent, the
# cached bytes counted only past each request's end and within the 32 MiB
# looked at, the libception mode served by the daemon (its FETCHes counted)
# and holding no more ahead than one 2 MiB fetch can; and nothing left
# behind (loop device, mount, work directory, daemon). How far the kernel's
# readahead runs ahead is what the script measures, not checked here.
# Needs root, loop devices, mkfs.ext4 and `make` (the daemon and the shim).
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "$(id -u)" -ne 0 ]; then echo "skip: needs root (loop device, mount, the daemon)"; exit 77; fi
command -v mkfs.ext4 >/dev/null || { echo "skip: mkfs.ext4 is not installed (scripts/bootstrap installs it)"; exit 77; }
[ -x build/bin/libception ] && [ -f build/libdeception.so ] || { echo "FAIL: run make first (build/bin/libception, build/libdeception.so)"; exit 1; }
tmp=$(mktemp -d /tmp/kernel-bytes-ahead.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; tail -20 "$tmp/log" 2>/dev/null; exit 1; }
work_before=$(ls -d /var/tmp/bytes-ahead-* 2>/dev/null || true)
bench/kernel/bytes-ahead.py --ra "128 2048" --requests 8 --out "$tmp/out" > "$tmp/log" 2>&1 || fail "bytes-ahead.py failed"
python3 - "$tmp/out" <<'PY' || fail "the results are wrong"
import csv, json, sys
out = sys.argv[1]
rows = {r["mode"]: r for r in csv.DictReader(open(f"{out}/results.csv"))}
assert list(rows) == ["kernel-ra128", "kernel-ra2048", "libception"], list(rows)
assert rows["kernel-ra2048"]["read_ahead_kb"] == "2048" and rows["libception"]["read_ahead_kb"] == "128", rows
for r in rows.values():
    assert int(r["bytes_sent"]) == 8 * 525000, r
    assert int(r["device_bytes_read"]) >= int(r["bytes_sent"]), r
    assert 0 <= float(r["ahead_mean_mib"]) <= float(r["ahead_max_mib"]) <= 32, r
assert int(rows["libception"]["daemon_fetches"]) >= 1, rows["libception"]
# One 2 MiB fetch past what was cached: at most 2 MiB past a request's end,
# plus the kernel's own 128 KiB readahead.
assert float(rows["libception"]["ahead_max_mib"]) <= 2 + 0.125 + 0.01, rows["libception"]
samples = list(csv.DictReader(open(f"{out}/samples.csv")))
assert len(samples) == 3 * 8, len(samples)
assert [int(s["end_offset"]) for s in samples[:8]] == [525000 * (i + 1) for i in range(8)], samples[:8]
setup = json.load(open(f"{out}/setup.json"))
assert setup["fs"] == "ext4" and setup["modes"] == list(rows), setup
PY
! losetup -a | grep -q "/var/tmp/bytes-ahead-" || fail "a loop device was left behind: $(losetup -a | grep /var/tmp/bytes-ahead-)"
[ "$(ls -d /var/tmp/bytes-ahead-* 2>/dev/null || true)" = "$work_before" ] || fail "the work directory was left behind"
! grep -q bytes-ahead /proc/mounts || fail "a mount was left behind"
! pgrep -f "libception daemon --socket /tmp/bytes-ahead-" > /dev/null || fail "the daemon was left running"
echo "ok: kernel-bytes-ahead"
