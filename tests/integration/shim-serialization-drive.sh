#!/usr/bin/env bash
# Serialization observed from outside (issue 13): N concurrent cold readers
# on the emulated disk in block mode (a real ext4 over a loop device over the
# drive model), read once with plain `cat` and once under the shim in full
# mode against the real daemon. The drive's own queue-depth histogram
# (`vidbench disk stat --json`: each read by the number of requests in the
# drive when it started, itself included) must show more than one request at
# a time without Libception, and only one at a time with it. The daemon's own
# max_in_flight cannot show this: it counts only the worker's reads.
#
# Metadata reads aside: before each phase the caches are dropped, every file
# is stat'ed and opened (inode tables, directories and extent maps come into
# the block device's cache), then only the files' data pages are evicted
# (POSIX_FADV_DONTNEED per file, which leaves the block device's cache alone).
# So what reaches the drive during a phase is file data; the test checks that
# the drive served at least the files' bytes and not much more.
#
# Both with readahead off on the device and with the kernel's default (128
# KiB): the daemon reads through a description of its own with readahead
# off, and the readers under the shim read only pages it made resident, so
# neither the daemon's reads nor the readers' own readahead may reach the
# drive beside a planned read (issue 13, "reads beyond the plan"). The daemon
# prefetches 1 MiB; the kernel splits a planned read into requests that
# follow one another, never side by side (seen here: 512 KiB each at 128 KiB
# readahead; one 4 KiB page each with readahead off on the device, because a
# buffered read on a device without readahead fetches page by page).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/block/common.sh
BIN=${LIBCEPTION_BUILD:-$PWD/build}/bin/libception
SHIM=${LIBCEPTION_BUILD:-$PWD/build}/libdeception.so
N=4
block_skip_checks
[ -x "$BIN" ] && [ -f "$SHIM" ] || fail "libception or the shim is not built (run make)"
block_need_mkfs ext4
block_scratch
mkdir "$tmp/mnt"
"$VB" disk library "$tmp/lib.json" --files "$N" --size-mib 4 --name serial-drive >/dev/null
"$VB" disk mount "$tmp/mnt" --library "$tmp/lib.json" --preset wd-red-1tb --block --fs ext4 \
  --read-ahead-kb 0 --max-sectors-kb 1280 --daemonize --log "$tmp/block.log" \
  | sed -n 's/.*server pid \([0-9]*\).*/\1/p' >> "$tmp/pids" || fail "block mount failed"
mapfile -t files < <(python3 -c 'import json,sys; [print(sys.argv[2] + "/" + f["path"]) for f in json.load(open(sys.argv[1]))["files"]]' "$tmp/lib.json" "$tmp/mnt")
[ "${#files[@]}" = "$N" ] || fail "library has ${#files[@]} files, expected $N"
bytes=$(stat -c %s "${files[@]}" | awk '{ s += $1 } END { print s }')

sock=$tmp/reception.sock
"$BIN" daemon --prefetch 1M --socket "$sock" 2>"$tmp/daemon.log" &
echo $! >> "$tmp/pids"
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || fail "daemon did not start"

drive() { "$VB" disk stat --json "$tmp/mnt" | jq -c '.total.counters | {h: .queue_depth_histogram, b: .bytes, r: .reads}'; }

# phase LABEL [COMMAND PREFIX...]: N concurrent cold `cat`s (reading with
# read(2) into a pipe) with the prefix before each; prints "maxdepth reads bytes".
phase() {
  local label=$1 before after pids=() i
  shift
  sync; echo 3 > /proc/sys/vm/drop_caches
  python3 - "${files[@]}" <<'PY'
import os, sys
for p in sys.argv[1:]:
    os.stat(p)
    fd = os.open(p, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
PY
  before=$(drive)
  for i in "${!files[@]}"; do
    ( "$@" cat "${files[$i]}" | cmp -s - "${files[$i]}" || echo "FAIL: $label: reader $i got wrong bytes" >> "$tmp/errors" ) &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i"; done
  after=$(drive)
  jq -rn --argjson a "$before" --argjson b "$after" '
    [range(0; $b.h | length) | select($b.h[.] - ($a.h[.] // 0) > 0)] | max // 0 | tostring
    + " " + (($b.r - $a.r) | tostring) + " " + (($b.b - $a.b) | tostring)'
}

ra_file=/sys/block/$(basename "$(findmnt -no SOURCE "$tmp/mnt")")/queue/read_ahead_kb
[ -w "$ra_file" ] || fail "no read_ahead_kb for the mount's device ($ra_file)"
for ra in 0 128; do
  echo "$ra" > "$ra_file"
  read -r plain_depth plain_reads plain_bytes < <(phase "without Libception")
  echo "readahead $ra KiB, without Libception: $plain_reads drive reads, $plain_bytes bytes, max queue depth $plain_depth"
  read -r shim_depth shim_reads shim_bytes < <(phase "with Libception" "$BIN" run --mode full --socket "$sock" --shim "$SHIM" --)
  echo "readahead $ra KiB, with Libception:    $shim_reads drive reads, $shim_bytes bytes, max queue depth $shim_depth"
  "$BIN" stat --json --socket "$sock" > "$tmp/stats.json"
  jq -c '{fetch: [.clients[] | select(.comm == "cat") | .fetch], disks: [.disks[] | {name, reads, bytes_read, max_in_flight}]}' "$tmp/stats.json"

  [ ! -s "$tmp/errors" ] || fail "$(cat "$tmp/errors")"
  for b in "$plain_bytes" "$shim_bytes"; do
    [ "$b" -ge "$bytes" ] && [ "$b" -le $((bytes + 1048576)) ] \
      || fail "readahead $ra KiB: the drive served $b bytes for $bytes bytes of files: metadata or extra reads got in"
  done
  [ "$plain_depth" -gt 1 ] || fail "readahead $ra KiB: without Libception the drive never saw two requests at once: the test cannot tell"
  [ "$shim_depth" = 1 ] || fail "readahead $ra KiB: with Libception the drive saw $shim_depth requests at once"
  fetchers=$(jq '[.clients[] | select(.comm == "cat" and .fetch > 0)] | length' "$tmp/stats.json")
  [ "$fetchers" -ge "$N" ] || fail "readahead $ra KiB: only $fetchers of $N readers fetched through the daemon"
done
echo "PASS: the drive saw one request at a time with Libception, with readahead off and at 128 KiB"
