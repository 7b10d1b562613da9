#!/usr/bin/env bash
# End to end through the real shim: four processes run `cat` under
# `libception run` on four cold files at once, against one daemon (cat reads
# with read(2), which the shim sees, when its output is a pipe; into a
# regular file it would use copy_file_range, and sha256sum reads through
# stdio's internal read: neither is visible to an LD_PRELOAD shim). The copies must be
# identical to the files, every process must
# have fetched through the daemon, and the daemon must never have had more
# than one read in flight on the disk. That last check only counts the
# daemon's own reads; shim-serialization-drive.sh observes serialization from
# outside, at the emulated drive.
set -u
cd "$(dirname "$0")/../.."
BUILD=${LIBCEPTION_BUILD:-$PWD/build}
BIN=$BUILD/bin/libception
SHIM=$BUILD/libdeception.so
[ -x "$BIN" ] || { echo "libception binary missing at $BIN; run make first"; exit 1; }
[ -f "$SHIM" ] || { echo "shim missing at $SHIM; run make first"; exit 1; }
command -v jq >/dev/null || { echo "skip: jq missing"; exit 77; }
command -v python3 >/dev/null || { echo "skip: python3 missing (used to evict files)"; exit 77; }

work=$(mktemp -d "$BUILD/daemon-shim-XXXXXX")
daemon_pid=
cleanup() {
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

for i in 1 2 3 4; do head -c 8388608 /dev/urandom > "$work/video$i"; done
sync
python3 - "$work"/video? <<'PY'
import os, sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
PY

sock="$work/reception.sock"
"$BIN" --log-level info daemon --prefetch 2M --socket "$sock" 2>"$work/daemon.log" &
daemon_pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || { echo "daemon did not start"; cat "$work/daemon.log"; exit 1; }

pids=()
for i in 1 2 3 4; do
  (cd "$work" && "$BIN" run --mode full --socket "$sock" --shim "$SHIM" -- cat "video$i" | cat > "out$i") &
  pids+=($!)
done
fail=0
for p in "${pids[@]}"; do wait "$p" || { echo "FAIL: a cat under the shim failed"; fail=1; }; done
for i in 1 2 3 4; do
  cmp -s "$work/video$i" "$work/out$i" || { echo "FAIL: video$i copied through the shim differs"; fail=1; }
done

"$BIN" stat --json --socket "$sock" > "$work/stats.json" || exit 1
jq -c '{totals: .totals, disks: [.disks[] | {name, requests, reads, bytes_read, max_in_flight, resident_hits, joined}]}' "$work/stats.json"
fetchers=$(jq '[.clients[] | select(.comm == "cat" and .fetch > 0)] | length' "$work/stats.json")
[ "$fetchers" -ge 4 ] || { echo "FAIL: only $fetchers of 4 cat processes fetched through the daemon"; fail=1; }
[ "$(jq '[.disks[].max_in_flight] | max // 0' "$work/stats.json")" = 1 ] || { echo "FAIL: more than one read in flight on a disk"; fail=1; }
[ "$(jq '[.disks[].bytes_read] | add // 0' "$work/stats.json")" -gt 0 ] || { echo "FAIL: the daemon read nothing"; fail=1; }

kill -TERM "$daemon_pid"; wait "$daemon_pid"; rc=$?; daemon_pid=
[ "$rc" = 0 ] || { echo "FAIL: daemon exit status $rc after SIGTERM"; fail=1; }
[ $fail = 0 ] || tail -n 30 "$work/daemon.log"
exit $fail
