#!/usr/bin/env bash
# Block mode through the kernel, for FS=ext4|xfs:
#  - the image is built and cached on the first mount, loaded on the second;
#  - every file read through the real filesystem equals the generator and,
#    byte for byte, the same file read through a FUSE-mode mount;
#  - owner, mode, read-only; st_dev names the loop device in /sys/block;
#  - the queue knobs are set as asked (scheduler, read_ahead_kb,
#    max_sectors_kb, nr_requests, rotational);
#  - reads reach the drive model (its counters grow by at least what was
#    read) and the block layer (loopN/stat); `disk stat` shows both;
#  - `disk unmount` leaves no mount, loop device, process or directory;
#  - the placement is a function of the image key: a second build (another
#    cache) puts every file at the same physical blocks (ext4 draws the
#    library directory's block group from its hash seed, which the builder
#    fixes).
set -euo pipefail
cd "$(dirname "$0")/../../.."
. tests/integration/block/common.sh
FS=${FS:?FS=ext4 or FS=xfs}
block_test "$FS"
mkdir "$tmp/fuse"
"$VB" disk library "$tmp/lib.json" --files 6 --size-mib 3 --odd --name "block-$FS"

mount_block() {
  local out
  out=$("$VB" disk mount "$tmp/mnt" --library "$tmp/lib.json" --preset wd-red-1tb --block --fs "$FS" \
        --uid 4242 --gid 4343 --daemonize --log "$tmp/block.log" "$@") || fail "block mount failed"
  echo "$out"
  echo "$out" | sed -n 's/.*server pid \([0-9]*\).*/\1/p' >> "$tmp/pids"
}

# 1. First mount: builds the image.
mount_block --trace "$tmp/trace.csv"
grep -q "building the $FS image" "$tmp/block.log" || fail "no build reported"
ls "$tmp/cache"/*.vbimg >/dev/null || fail "no image in the cache"
mountpoint -q "$tmp/mnt" || fail "not mounted"
src=$(awk -v m="$tmp/mnt" '$2 == m { print $1 " " $3 }' /proc/mounts)
case "$src" in "/dev/loop"*" $FS") ;; *) fail "mount is '$src', expected a loop device with $FS";; esac
dev=${src%% *}; loopname=${dev#/dev/}
"$VB" disk mount "$tmp/fuse" --library "$tmp/lib.json" --preset wd-red-1tb --daemonize --log "$tmp/fuse.log" \
  | sed -n 's/.*server pid \([0-9]*\).*/\1/p' >> "$tmp/pids"

verify_pattern "$tmp/mnt" "$tmp/lib.json"
python3 - "$tmp/lib.json" "$tmp/mnt" "$tmp/fuse" <<'PY'
import json, sys
lib, a, b = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
for f in lib["files"]:
    x = open(f"{a}/{f['path']}", "rb").read()
    y = open(f"{b}/{f['path']}", "rb").read()
    assert x == y, f"{f['path']}: block mode and FUSE mode differ"
print(f"{len(lib['files'])} files identical in block mode and FUSE mode")
PY
"$VB" disk unmount "$tmp/fuse" >/dev/null

f0=$tmp/mnt/v/a/00000.mp4
[ "$(stat -c '%u:%g:%a' "$f0")" = "4242:4343:444" ] || fail "owner/mode $(stat -c '%u:%g:%a' "$f0")"
if (echo x >> "$f0") 2>/dev/null; then fail "a library file was writable"; fi
if touch "$tmp/mnt/new" 2>/dev/null; then fail "the filesystem is writable"; fi
# st_dev is the loop device, which /sys/dev/block resolves to a disk in /sys/block.
devno=$(stat -c '%d' "$f0")
majmin="$((devno >> 8 & 0xfff)):$(( (devno & 0xff) | (devno >> 12 & 0xfff00) ))"
[ "$(cat "/sys/block/$loopname/dev")" = "$majmin" ] || fail "st_dev $majmin is not $loopname ($(cat "/sys/block/$loopname/dev"))"
[ "$(basename "$(readlink -f "/sys/dev/block/$majmin")")" = "$loopname" ] || fail "/sys/dev/block/$majmin does not lead to $loopname"
q=/sys/block/$loopname/queue
[ "$(cat $q/rotational)" = 1 ] || fail "rotational is $(cat $q/rotational)"
grep -q '\[mq-deadline\]' $q/scheduler || fail "scheduler $(cat $q/scheduler)"
[ "$(cat /sys/block/$loopname/loop/dio)" = 1 ] || fail "loop device without direct I/O"
[ "$(cat /sys/block/$loopname/ro)" = 1 ] || fail "loop device is not read-only"

# Reads reach the drive and the block layer.
drive_bytes() { python3 -c "import json,subprocess,sys; print(json.loads(subprocess.check_output([sys.argv[1],'disk','stat','--json',sys.argv[2]]))['total']['counters']['bytes'])" "$VB" "$tmp/mnt"; }
sync; echo 3 > /proc/sys/vm/drop_caches
b0=$(drive_bytes); s0=$(awk '{print $3}' /sys/block/$loopname/stat)
cat "$tmp/mnt/v/b/00003.mp4" > /dev/null
b1=$(drive_bytes); s1=$(awk '{print $3}' /sys/block/$loopname/stat)
size=$(stat -c %s "$tmp/mnt/v/b/00003.mp4")
[ $((b1 - b0)) -ge "$size" ] || fail "the drive served $((b1 - b0)) bytes for a $size-byte file read cold"
[ $(( (s1 - s0) * 512 )) -ge "$size" ] || fail "the block layer read $(( (s1 - s0) * 512 )) bytes for a $size-byte file"
"$VB" disk stat "$tmp/mnt" > "$tmp/stat.txt"
grep -q "block layer ($loopname" "$tmp/stat.txt" || fail "stat: $(cat "$tmp/stat.txt")"
grep -q "queue depth" "$tmp/stat.txt" || fail "stat has no queue-depth histogram: $(cat "$tmp/stat.txt")"
"$VB" disk stat "$tmp/mnt" --json | python3 -c "
import json, sys
d = json.load(sys.stdin)
assert d['block_layer']['counters']['reads'] > 0, d['block_layer']
assert d['config']['block']['device']['device'] == '$loopname', d['config']['block']
assert sum(d['total']['counters']['queue_depth_histogram']) == d['total']['counters']['reads']
# The block layer's totals are this mount's (a loop device keeps its counters
# across attaches): never more sectors than the drive served bytes, plus slack.
assert d['block_layer']['counters']['read_sectors'] * 512 <= d['total']['counters']['bytes'] + (1 << 20), (d['block_layer'], d['total']['counters']['bytes'])
"
"$VB" disk stat "$tmp/mnt" --interval 0.2 --count 2 > "$tmp/stat-i.txt"
[ "$(wc -l < "$tmp/stat-i.txt")" -eq 5 ] || fail "stat --interval printed: $(cat "$tmp/stat-i.txt")"

# Second mount point on the same mount point is refused.
if "$VB" disk mount "$tmp/mnt" --library "$tmp/lib.json" --preset wd-red-1tb --block --fs "$FS" 2> "$tmp/err"; then fail "second mount accepted"; fi
grep -q "already a mount point" "$tmp/err" || fail "second mount error: $(cat "$tmp/err")"

"$VB" disk unmount "$tmp/mnt" || fail "unmount"
assert_nothing_left "unmount"
rows=$(( $(wc -l < "$tmp/trace.csv") - 1 ))
[ "$rows" -gt 0 ] || fail "empty trace"
awk -F, 'NR > 1 && $4 == 1 { found = 1 } END { exit !found }' "$tmp/trace.csv" || fail "no trace row names file 1"
echo "trace: $rows rows"

# 2. Second mount: the cached image is loaded, the knobs are applied.
: > "$tmp/block.log"
mount_block --scheduler bfq --read-ahead-kb 512 --max-sectors-kb 256 --nr-requests 64 --fill-order library
grep -q "loaded" "$tmp/block.log" || fail "the cached image was not used: $(cat "$tmp/block.log")"
grep -q "building" "$tmp/block.log" && fail "the image was built again"
loopname=$(awk -v m="$tmp/mnt" '$2 == m { sub("/dev/", "", $1); print $1 }' /proc/mounts)
q=/sys/block/$loopname/queue
grep -q '\[bfq\]' $q/scheduler || fail "scheduler $(cat $q/scheduler)"
[ "$(cat $q/read_ahead_kb)" = 512 ] || fail "read_ahead_kb $(cat $q/read_ahead_kb)"
[ "$(cat $q/max_sectors_kb)" = 256 ] || fail "max_sectors_kb $(cat $q/max_sectors_kb)"
[ "$(cat $q/nr_requests)" = 64 ] || fail "nr_requests $(cat $q/nr_requests)"
verify_pattern "$tmp/mnt" "$tmp/lib.json"
# Each file's first physical block (FIEMAP), for case 3.
placement() { find "$tmp/mnt/v" -type f | sort | while read -r f; do echo "${f#"$tmp/mnt/"} $(filefrag -v "$f" | awk '$1 == "0:" { print $4 }')"; done; }
command -v filefrag > /dev/null || { echo "skip: filefrag (e2fsprogs) is not installed"; exit 77; }
placement > "$tmp/placement-1"
# Every file, each with its first physical block.
[ "$(wc -l < "$tmp/placement-1")" -eq 6 ] && awk 'NF != 2 || $2 !~ /^[0-9]+\.\.$/ { exit 1 }' "$tmp/placement-1" \
  || fail "no placement read for every file: $(cat "$tmp/placement-1")"
# max_sectors_kb bounds what the drive sees.
drive_rb() { "$VB" disk stat --json "$tmp/mnt" | python3 -c "import json,sys; c=json.load(sys.stdin)['total']['counters']; print(c['reads'], c['bytes'])"; }
sync; echo 3 > /proc/sys/vm/drop_caches
read r0 b0 < <(drive_rb)
dd if="$tmp/mnt/v/a/00004.mp4" of=/dev/null bs=4M iflag=direct status=none
read r1 b1 < <(drive_rb)
avg=$(( (b1 - b0) / (r1 - r0) / 1024 ))
echo "4 MiB direct reads with max_sectors_kb 256: the drive saw $((r1 - r0)) requests of $avg KiB on average"
[ "$avg" -le 256 ] && [ "$avg" -ge 128 ] || fail "average drive request $avg KiB with max_sectors_kb 256"
"$VB" disk unmount "$tmp/mnt" > /dev/null
assert_nothing_left "second unmount"

# 3. A second build of the same key, into another cache, places every file
# where the first did.
: > "$tmp/block.log"
VIDBENCH_IMAGE_CACHE=$tmp/cache2 mount_block
grep -q "building the $FS image" "$tmp/block.log" || fail "the second cache did not build: $(cat "$tmp/block.log")"
placement > "$tmp/placement-2"
diff "$tmp/placement-1" "$tmp/placement-2" > "$tmp/placement.diff" || fail "two builds of one key placed files differently: $(cat "$tmp/placement.diff")"
echo "two builds: the same physical place for each of $(wc -l < "$tmp/placement-1") files ($(head -1 "$tmp/placement-1"))"
"$VB" disk unmount "$tmp/mnt" > /dev/null
assert_nothing_left "third unmount"
echo "disk-block ($FS): ok"
