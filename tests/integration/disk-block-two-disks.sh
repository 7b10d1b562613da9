#!/usr/bin/env bash
# Two block-mode mounts are two disks: each has its own loop device, the
# st_dev of each mount's files names its loop device in /sys/block, and a
# Libception daemon with --per-disk maps each file to its own disk and
# worker with no special case (the path /dev/sdX takes in production). The
# fetches reach each emulated drive (its counters grow), not the other's.
# Needs root, /dev/fuse, loop devices, mkfs.ext4, jq and the libception binary.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/block/common.sh
BIN=${LIBCEPTION:-${LIBCEPTION_BUILD:-$PWD/build}/bin/libception}
block_skip_checks
block_need_mkfs ext4
command -v jq >/dev/null || { echo "skip: jq missing"; exit 77; }
[ -x "$BIN" ] || { echo "FAIL: $BIN not built (run make)"; exit 1; }
block_scratch
mkdir "$tmp/d1" "$tmp/d2"
"$VB" disk library "$tmp/lib.json" --files 4 --size-mib 4 --name two-disks
daemon_pid=
stop_daemon() { [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null; daemon_pid=; }
trap 'stop_daemon; block_cleanup' EXIT
for d in d1 d2; do
  "$VB" disk mount "$tmp/$d" --library "$tmp/lib.json" --preset wd-red-1tb --block --daemonize --log "$tmp/$d.log" \
    | sed -n 's/.*server pid \([0-9]*\).*/\1/p' >> "$tmp/pids"
done
loop1=$(awk -v m="$tmp/d1" '$2 == m { sub("/dev/", "", $1); print $1 }' /proc/mounts)
loop2=$(awk -v m="$tmp/d2" '$2 == m { sub("/dev/", "", $1); print $1 }' /proc/mounts)
[ -n "$loop1" ] && [ -n "$loop2" ] && [ "$loop1" != "$loop2" ] || fail "two mounts on loop devices '$loop1' and '$loop2'"
grep -q "loaded" "$tmp/d2.log" || fail "the second mount did not reuse the cached image"
f1=$tmp/d1/v/a/00001.mp4; f2=$tmp/d2/v/a/00002.mp4
devof() { local n; n=$(stat -c %d "$1"); echo "$((n >> 8 & 0xfff)):$(( (n & 0xff) | (n >> 12 & 0xfff00) ))"; }
[ "$(devof "$f1")" = "$(cat /sys/block/$loop1/dev)" ] || fail "st_dev of $f1 is not $loop1"
[ "$(devof "$f2")" = "$(cat /sys/block/$loop2/dev)" ] || fail "st_dev of $f2 is not $loop2"

drive_bytes() { "$VB" disk stat --json "$1" | jq '.total.counters.bytes'; }
sync; echo 3 > /proc/sys/vm/drop_caches
a0=$(drive_bytes "$tmp/d1"); b0=$(drive_bytes "$tmp/d2")
sock=$tmp/reception.sock
"$BIN" --log-level info daemon --per-disk --socket "$sock" 2> "$tmp/daemon.log" &
daemon_pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
"$BIN" fetch --json --socket "$sock" "$f1" "$f2" > "$tmp/fetch.json" || fail "fetch: $(cat "$tmp/fetch.json" "$tmp/daemon.log")"
"$BIN" stat --json --socket "$sock" > "$tmp/stats.json"
jq -c '.disks[] | {name, devices, worker, requests}' "$tmp/stats.json"
for l in "$loop1" "$loop2"; do
  jq -e --arg n "$l" --arg d "$(cat /sys/block/$l/dev)" '.disks[] | select(.name == $n) | .devices | index($d)' "$tmp/stats.json" > /dev/null \
    || fail "the daemon did not map $(cat /sys/block/$l/dev) to disk $l"
done
[ "$(jq '.disks | length' "$tmp/stats.json")" = 2 ] || fail "expected two disks"
[ "$(jq '[.disks[].worker] | unique | length' "$tmp/stats.json")" = 2 ] || fail "the disks share a worker"
a1=$(drive_bytes "$tmp/d1"); b1=$(drive_bytes "$tmp/d2")
[ $((a1 - a0)) -gt 0 ] && [ $((b1 - b0)) -gt 0 ] || fail "a fetch did not reach its drive (d1 +$((a1 - a0)), d2 +$((b1 - b0)) bytes)"
echo "drives: d1 served $((a1 - a0)) bytes, d2 $((b1 - b0)) bytes"
stop_daemon
"$VB" disk unmount "$tmp/d1" > /dev/null; "$VB" disk unmount "$tmp/d2" > /dev/null
assert_nothing_left "two disks"
echo "disk-block-two-disks: ok"
