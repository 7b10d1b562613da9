#!/usr/bin/env bash
# Real programs under the shim give libc's output: cat, sha256sum, cp, diff,
# tar (create and extract), and python3 reading files with read, pread and
# mmap - all on cold files, in full mode against a daemon (the real one when
# built, else the fake one), then in serialize, prefetch and track modes.
# The shim's statistics must show that it actually saw the reads and fetched.
set -euo pipefail
source "$(dirname "$0")/../../native/tests/shim-lib.bash"
shim_setup
shim_require_python

mkdir -p "$tmp/data/tree/sub" "$tmp/out" "$tmp/stats"
head -c $((5 << 20)) /dev/urandom >"$tmp/data/big.bin"
seq 1 200000 >"$tmp/data/a.txt"
seq 1 200000 | sed 's/^1234$/changed/; s/^99999$/also changed/' >"$tmp/data/b.txt"
for i in 1 2 3; do head -c $((i * 700000)) /dev/urandom >"$tmp/data/tree/f$i"; done
head -c 300000 /dev/urandom >"$tmp/data/tree/sub/g"
files=$(find "$tmp/data" -type f)

cat >"$tmp/read.py" <<'PY'
import hashlib, mmap, os, sys
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        whole = hashlib.sha256(f.read()).hexdigest()
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    parts = hashlib.sha256()
    for off in range(0, size, 300000):
        parts.update(os.pread(fd, 300000, off))
    mapped = "empty"
    if size:
        with mmap.mmap(fd, size, prot=mmap.PROT_READ) as m:
            mapped = hashlib.sha256(m[:]).hexdigest()
    os.close(fd)
    print(os.path.basename(path), whole, parts.hexdigest(), mapped)
PY

# run_all OUTDIR: every program once, outputs into OUTDIR.
run_all() {
  local o=$1
  mkdir -p "$o"
  cat "$tmp/data/big.bin" >"$o/cat.out"
  sha256sum "$tmp/data/big.bin" "$tmp/data/a.txt" >"$o/sha256sum.out"
  cp "$tmp/data/big.bin" "$o/cp.out"
  diff "$tmp/data/a.txt" "$tmp/data/b.txt" >"$o/diff.out" && echo "diff status 0" >>"$o/diff.out" ||
    echo "diff status $?" >>"$o/diff.out"
  tar -C "$tmp/data" -cf "$o/tar.out" tree
  mkdir -p "$o/extracted" && tar -C "$o/extracted" -xf "$o/tar.out"
  "$python" "$tmp/read.py" $files >"$o/python.out"
}

compare() {
  local label=$1 want=$2 got=$3 f
  for f in cat.out sha256sum.out cp.out diff.out tar.out python.out; do
    if ! cmp -s "$want/$f" "$got/$f"; then
      echo "FAIL $label: $f differs from the run without the shim"; status=1
    fi
  done
  diff -r "$want/extracted" "$got/extracted" >/dev/null || { echo "FAIL $label: tar extraction differs"; status=1; }
}

status=0
shim_evict $files
run_all "$tmp/out/libc"

sock=$tmp/daemon.sock
shim_start_daemon "$sock" "$tmp/daemon.log"
echo "daemon: $DAEMON_KIND"
for mode in full serialize prefetch track; do
  shim_evict $files
  rm -f "$tmp/stats"/*.json
  env LD_PRELOAD="$SHIM" LIBCEPTION_MODE=$mode LIBCEPTION_SOCKET="$sock" \
    LIBCEPTION_STATS="$tmp/stats/%p.json" bash -c "$(declare -f run_all); tmp='$tmp' python='$python' files='$files' run_all '$tmp/out/$mode'"
  compare "$mode" "$tmp/out/libc" "$tmp/out/$mode"
  reads=$(( $(shim_stat_sum "$tmp/stats" '*.json' calls '"read"') + $(shim_stat_sum "$tmp/stats" '*.json' calls '"pread64"') ))
  misses=$(shim_stat_sum "$tmp/stats" '*.json' misses '"read"')
  fetches=$(shim_stat_sum "$tmp/stats" '*.json' fetches)
  prefetched=$(shim_stat_sum "$tmp/stats" '*.json' bytes '"prefetch": {')
  mmaps=$(shim_stat_sum "$tmp/stats" '*.json' calls '"mmap64"')
  echo "$mode: $(ls "$tmp/stats" | wc -l) processes, read+pread64 calls $reads, read misses $misses, mmap64 $mmaps, fetches $fetches, prefetched $prefetched bytes"
  [ "$reads" -gt 0 ] || { echo "FAIL $mode: the shim saw no reads"; status=1; }
  [ "$misses" -gt 0 ] || { echo "FAIL $mode: cold files gave no read misses"; status=1; }
  [ "$mmaps" -gt 0 ] || { echo "FAIL $mode: python's mmap was not seen"; status=1; }
  case $mode in
    full|serialize) [ "$fetches" -gt 0 ] || { echo "FAIL $mode: nothing fetched through the daemon"; status=1; } ;;
    prefetch) [ "$prefetched" -gt 0 ] || { echo "FAIL prefetch: nothing prefetched"; status=1; } ;;
    track) [ "$fetches" -eq 0 ] && [ "$prefetched" -eq 0 ] || { echo "FAIL track: changed I/O"; status=1; } ;;
  esac
done
exit $status
