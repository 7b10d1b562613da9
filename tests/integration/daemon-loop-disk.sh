#!/usr/bin/env bash
# Per-disk mapping through a real partition: a small image with an MBR
# partition table is attached with `losetup -P`, its partition formatted and
# mounted; a file on it and a file on the repository's own disk (/dev/vda on
# the project's machines) are fetched through a `--per-disk` daemon. The
# daemon must name the loop device (not the partition) as the disk, list the
# partition's device number under it, give it a worker of its own, and name
# the repository's disk by its whole-disk sysfs name. Kernels built without
# partition-table parsers (CONFIG_MSDOS_PARTITION unset, as on the project's
# VMs) create no loopNp1; the test then formats the whole loop device and
# checks the same things for it (partition -> parent is also covered by the
# fake-sysfs unit test in crates/libception/src/disks.rs).
# Needs root and loop devices (skips otherwise).
set -u
cd "$(dirname "$0")/../.."
BIN=${LIBCEPTION_BUILD:-$PWD/build}/bin/libception
[ -x "$BIN" ] || { echo "libception binary missing at $BIN; run make first"; exit 1; }
[ "$(id -u)" = 0 ] || { echo "skip: needs root for losetup and mount"; exit 77; }
command -v losetup >/dev/null && command -v mkfs.ext4 >/dev/null || { echo "skip: losetup or mkfs.ext4 missing"; exit 77; }
command -v jq >/dev/null || { echo "skip: jq missing"; exit 77; }

work=$(mktemp -d "$PWD/build/daemon-loop-XXXXXX")
loopdev= daemon_pid=
cleanup() {
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
  mountpoint -q "$work/mnt" 2>/dev/null && umount "$work/mnt"
  [ -n "$loopdev" ] && losetup -d "$loopdev"
  rm -rf "$work"
}
trap cleanup EXIT

# 64 MiB image, one Linux partition from sector 2048 to the end (MBR written by hand).
truncate -s 64M "$work/disk.img"
python3 - "$work/disk.img" <<'PY'
import struct, sys
sectors = 64 * 1024 * 1024 // 512
entry = bytes([0x00, 0xFE, 0xFF, 0xFF, 0x83, 0xFE, 0xFF, 0xFF]) + struct.pack("<II", 2048, sectors - 2048)
with open(sys.argv[1], "r+b") as f:
    f.seek(446); f.write(entry)
    f.seek(510); f.write(b"\x55\xaa")
PY
loopdev=$(losetup -P -f --show "$work/disk.img") || { echo "skip: losetup -P failed (no loop devices?)"; exit 77; }
part="${loopdev}p1"
for _ in $(seq 50); do [ -b "$part" ] && break; sleep 0.1; done
if [ ! -b "$part" ]; then
  echo "note: $part did not appear (kernel without partition-table support); using the whole loop device"
  part=$loopdev
fi
mkfs.ext4 -q -F "$part" >/dev/null
mkdir "$work/mnt" && mount "$part" "$work/mnt"
head -c 4194304 /dev/urandom > "$work/mnt/on-loop"
head -c 4194304 /dev/urandom > "$work/on-root"
sync

sock="$work/reception.sock"
"$BIN" --log-level info daemon --per-disk --socket "$sock" 2>"$work/daemon.log" &
daemon_pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
"$BIN" fetch --json --socket "$sock" "$work/mnt/on-loop" "$work/on-root" > "$work/fetch.json" || { cat "$work/fetch.json" "$work/daemon.log"; exit 1; }
"$BIN" stat --json --socket "$sock" > "$work/stats.json" || exit 1

loopname=$(basename "$loopdev")
partdev=$(printf '%d:%d' "0x$(stat -c %t "$part")" "0x$(stat -c %T "$part")")
rootdev=$(stat -c '%d' "$work/on-root")
echo "loop disk $loopname, filesystem device $partdev"
jq -c '.disks[] | {name, devices, worker, requests}' "$work/stats.json"

fail=0
jq -e --arg n "$loopname" --arg p "$partdev" '.disks[] | select(.name == $n) | .devices | index($p)' "$work/stats.json" >/dev/null \
  || { echo "FAIL: device $partdev is not mapped to disk $loopname"; fail=1; }
[ "$(jq '.disks | length' "$work/stats.json")" = 2 ] || { echo "FAIL: expected two disks"; fail=1; }
[ "$(jq '.workers | length' "$work/stats.json")" = 2 ] || { echo "FAIL: expected one worker per disk"; fail=1; }
[ "$(jq '[.disks[].worker] | unique | length' "$work/stats.json")" = 2 ] || { echo "FAIL: disks share a worker"; fail=1; }
[ "$(jq '[.disks[].requests] | add' "$work/stats.json")" = 2 ] || { echo "FAIL: expected two fetches"; fail=1; }
# The other disk is the one the repository lives on, by its sysfs name.
major=$(( rootdev >> 8 & 0xfff )); minor=$(( (rootdev & 0xff) | (rootdev >> 12 & 0xfff00) ))
if [ "$major" != 0 ]; then
  expect=$(basename "$(readlink -f /sys/dev/block/$major:$minor)")
  [ -e "/sys/dev/block/$major:$minor/partition" ] && expect=$(basename "$(dirname "$(readlink -f /sys/dev/block/$major:$minor)")")
  jq -e --arg n "$expect" '.disks[] | select(.name == $n)' "$work/stats.json" >/dev/null \
    || { echo "FAIL: the repository's disk $expect is not listed"; fail=1; }
fi
kill -TERM "$daemon_pid"; wait "$daemon_pid"; rc=$?; daemon_pid=
[ "$rc" = 0 ] || { echo "FAIL: daemon exit status $rc after SIGTERM"; fail=1; }
[ -e "$sock" ] && { echo "FAIL: socket left behind"; fail=1; }
[ $fail = 0 ] || cat "$work/daemon.log"
exit $fail
