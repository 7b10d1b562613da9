#!/usr/bin/env bash
# The emulated disk through the kernel: bytes served equal the generated
# pattern (random offsets, request and page boundaries, EOF), sendfile to a
# socket works, the page cache keeps data across opens (no second disk
# request), the counters add up to what was read, read_ahead_kb changes the
# request sizes the disk sees, files have the requested owner and are
# read-only, and SIGTERM unmounts cleanly with the trace flushed.
# Needs root and /dev/fuse (skips otherwise).
set -euo pipefail
cd "$(dirname "$0")/../.."
VB=${VIDBENCH:-${LIBCEPTION_BUILD:-$PWD/build}/bin/vidbench}

if [ "$(id -u)" -ne 0 ]; then echo "skip: needs root (drop_caches, sysfs readahead, allow_other)"; exit 77; fi
if [ ! -c /dev/fuse ]; then echo "skip: /dev/fuse is missing"; exit 77; fi
[ -x "$VB" ] || { echo "FAIL: $VB not built (run make)"; exit 1; }

tmp=$(mktemp -d /tmp/disk-mount.XXXXXX)
mnt=$tmp/mnt
mkdir "$mnt"
pid=
cleanup() {
  if mountpoint -q "$mnt" 2>/dev/null; then umount -l "$mnt" 2>/dev/null || true; fi
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$VB" disk library "$tmp/lib.json" --files 6 --size-mib 3 --odd
out=$("$VB" disk mount "$mnt" --library "$tmp/lib.json" --preset wd-red-1tb --daemonize \
      --uid 4242 --gid 4343 --max-request-kb 1024 --read-ahead-kb 128 --trace "$tmp/trace.csv" --log "$tmp/log")
echo "$out"
pid=$(echo "$out" | sed -n 's/.*server pid \([0-9]*\).*/\1/p')
[ -n "$pid" ] || fail "no server pid in: $out"
mountpoint -q "$mnt" || fail "not mounted after --daemonize returned"
dev=$(stat -c '%d' "$mnt")
bdi=/sys/class/bdi/0:$((dev & 0xff | (dev >> 12 & 0xfff00)))
[ "$(cat "$bdi/read_ahead_kb")" = 128 ] || fail "read_ahead_kb is $(cat "$bdi/read_ahead_kb"), not 128"

# Owner and read-only.
f0=$mnt/v/a/00000.mp4
[ "$(stat -c '%u:%g:%a' "$f0")" = "4242:4343:444" ] || fail "owner/mode $(stat -c '%u:%g:%a' "$f0")"
if (echo x >> "$f0") 2>/dev/null; then fail "a library file was writable"; fi
# The control directory is hidden from listings but readable.
ls -a "$mnt" | grep -q vidbench && fail ".vidbench is listed in the root"
"$VB" disk stat "$mnt" --json > "$tmp/s0.json"

python3 - "$mnt" "$tmp/lib.json" "$PWD/tests/integration/lib" <<'EOF'
import json, os, socket, sys, threading
mnt, lib = sys.argv[1], json.load(open(sys.argv[2]))
sys.path.insert(0, sys.argv[3])
from generated_content import check_files, expected
print(f"pattern: {check_files(mnt, lib)} reads verified")

# sendfile from the mount to a TCP socket, the receiver checks every byte.
f = lib["files"][1]
path, size, fid = os.path.join(mnt, f["path"]), f["size"], f["id"]
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
received = bytearray()
def recv():
    c, _ = srv.accept()
    while True:
        b = c.recv(1 << 20)
        if not b: break
        received.extend(b)
t = threading.Thread(target=recv); t.start()
s = socket.create_connection(srv.getsockname())
fd = os.open(path, os.O_RDONLY)
off, start = 0, 12345
off = start
while off < size:
    n = os.sendfile(s.fileno(), fd, off, size - off)
    assert n > 0
    off += n
s.close(); t.join(); os.close(fd)
assert len(received) == size - start, (len(received), size - start)
assert bytes(received[:65536]) == expected(fid, start, 65536)
assert bytes(received[-65536:]) == expected(fid, size - 65536, 65536)
mid = (size - start) // 2
assert bytes(received[mid:mid + 65536]) == expected(fid, start + mid, 65536)
print(f"sendfile: {len(received)} bytes to a socket, verified")
EOF

snap() { python3 -c "import json,sys; d=json.load(open('$mnt/.vidbench/stats.json')); c=d['total']['counters']; print(c['reads'], c['bytes'])"; }

# Counters add up, and the page cache keeps data across opens.
sync; echo 3 > /proc/sys/vm/drop_caches
read r0 b0 < <(snap)
cat "$mnt/v/a/00002.mp4" "$mnt/v/b/00003.mp4" > /dev/null
read r1 b1 < <(snap)
want=$(( $(stat -c %s "$mnt/v/a/00002.mp4") + $(stat -c %s "$mnt/v/b/00003.mp4") ))
[ $((b1 - b0)) -eq "$want" ] || fail "disk bytes $((b1 - b0)) after reading $want bytes once"
[ $((r1 - r0)) -gt 0 ] || fail "no disk reads counted"
first_reads=$((r1 - r0)) first_bytes=$((b1 - b0))
# A re-read must not reach the disk. Anything else on the machine that drops
# caches or reclaims (another test's drop_caches, memory pressure) can evict
# the pages between the reads, so an attempt counts only if the files were
# wholly resident just before it; a broken keep_cache fails every attempt.
# fincore counts whole pages; a file is wholly resident when all of its are.
nonresident_pages() {
  fincore --bytes --noheadings --output PAGES,SIZE "$@" | awk -v ps="$(getconf PAGESIZE)" '{ s += int(($2 + ps - 1) / ps) - $1 } END { print s + 0 }'
}
reread_ok=0
for attempt in 1 2 3; do
  if [ "$(nonresident_pages "$mnt/v/a/00002.mp4" "$mnt/v/b/00003.mp4")" -ne 0 ]; then
    echo "attempt $attempt: the files were evicted before the re-read (not by this test); reading them again"
    cat "$mnt/v/a/00002.mp4" "$mnt/v/b/00003.mp4" > /dev/null
    continue
  fi
  read r1 b1 < <(snap)
  cat "$mnt/v/a/00002.mp4" "$mnt/v/b/00003.mp4" > /dev/null
  python3 -c "open('$mnt/v/a/00002.mp4','rb').read()"
  read r2 b2 < <(snap)
  if [ "$r2" -eq "$r1" ] && [ "$b2" -eq "$b1" ]; then reread_ok=1; break; fi
  echo "attempt $attempt: re-read of resident files reached the disk ($((r2 - r1)) requests)"
done
[ "$reread_ok" -eq 1 ] || fail "second read of cached files reached the disk in every attempt"
echo "counters: $first_reads requests, $first_bytes bytes for $want bytes read; re-reads: 0 requests"

# read_ahead_kb changes the request sizes the disk sees.
avg_kib() { python3 -c "
import sys; r0,b0,r1,b1=map(int,sys.argv[1:]); print((b1-b0)//max(1,r1-r0)//1024)" "$@"; }
sync; echo 3 > /proc/sys/vm/drop_caches
read r0 b0 < <(snap); dd if="$mnt/v/a/00004.mp4" of=/dev/null bs=16k status=none; read r1 b1 < <(snap)
small=$(avg_kib "$r0" "$b0" "$r1" "$b1")
echo 1024 > "$bdi/read_ahead_kb"
sync; echo 3 > /proc/sys/vm/drop_caches
read r0 b0 < <(snap); dd if="$mnt/v/b/00005.mp4" of=/dev/null bs=16k status=none; read r1 b1 < <(snap)
large=$(avg_kib "$r0" "$b0" "$r1" "$b1")
echo "request size: ${small} KiB with read_ahead_kb 128, ${large} KiB with 1024"
[ "$small" -le 128 ] || fail "average request ${small} KiB exceeds read_ahead_kb 128"
[ "$large" -ge 256 ] || fail "average request ${large} KiB with read_ahead_kb 1024"

# stat, live.
"$VB" disk stat "$mnt" --interval 0.2 --count 2 > "$tmp/stat.txt"
[ "$(wc -l < "$tmp/stat.txt")" -eq 3 ] || fail "stat --interval printed: $(cat "$tmp/stat.txt")"

# Mounting again on the same mount point is refused.
if "$VB" disk mount "$mnt" --library "$tmp/lib.json" --preset ssd 2> "$tmp/err"; then fail "second mount accepted"; fi
grep -q "already a mount point" "$tmp/err" || fail "second mount error: $(cat "$tmp/err")"

# SIGTERM unmounts and flushes the trace.
read rt bt < <(snap)
kill -TERM "$pid"
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "server still running 10 s after SIGTERM"
pid=
mountpoint -q "$mnt" && fail "still mounted after SIGTERM"
rows=$(( $(wc -l < "$tmp/trace.csv") - 1 ))
[ "$rows" -eq "$rt" ] || fail "trace has $rows rows, counters say $rt requests"
tbytes=$(awk -F, 'NR > 1 { s += $6 } END { print s }' "$tmp/trace.csv")
[ "$tbytes" -eq "$bt" ] || fail "trace bytes $tbytes, counters $bt"
head -1 "$tmp/trace.csv" | grep -q '^arrival_ns,start_ns,end_ns,file_id,offset,bytes,lba,outcome' || fail "trace header"
echo "trace: $rows rows, $tbytes bytes, consistent with the counters"
echo "disk-mount: ok"
