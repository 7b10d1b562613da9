#!/usr/bin/env bash
# vidbench run in block mode ([disk] mode = "block") never leaves a mount, a
# loop device, an image server or a cgroup behind, on any exit path:
#  1. a server that dies at start-up (/bin/false as nginx), after the image was
#     built and the disk mounted: the error names it, nothing is left;
#  2. SIGINT during the load of a real nginx run;
#  3. SIGTERM during the load;
#  4. SIGKILL of the driver during the load, then a later run into the same
#     results directory (its stale sweep): nothing is left;
#  5. a resume whose image.json names an image an older builder version made
#     mounts that file in every run, and is refused, naming it, once it is gone.
# Also checks what a block run records: OUT/image.json (key hash, placement) and,
# in a run's setup.json, the queue settings read back from the loop device:
# max_sectors_kb 512 as given, and 16384 as the loop device's cap with the
# drive joining up to 16384 (drive_joins_kb).
# "Left behind" is precise: a loop device or image-server mount created during
# the test whose mount process is gone, a mount under the test's directory, a
# process naming it, a cgroup of the driver.
# Needs root, /dev/fuse, loop devices, mkfs.ext4, a cgroup memory (v1 or v2)
# controller and nginx (skips otherwise).
set -euo pipefail
cd "$(dirname "$0")/../.."
VB=${VIDBENCH:-${LIBCEPTION_BUILD:-$PWD/build}/bin/vidbench}
if [ "$(id -u)" -ne 0 ]; then echo "skip: needs root (cgroups, loop devices, mounts)"; exit 77; fi
[ -c /dev/fuse ] || { echo "skip: /dev/fuse is missing"; exit 77; }
[ -e /dev/loop-control ] || { echo "skip: no loop devices (/dev/loop-control)"; exit 77; }
command -v losetup > /dev/null || { echo "skip: losetup is missing"; exit 77; }
command -v mkfs.ext4 > /dev/null || { echo "skip: mkfs.ext4 is missing"; exit 77; }
[ -x /usr/sbin/nginx ] || { echo "skip: nginx is not installed"; exit 77; }
[ -x "$VB" ] || { echo "FAIL: $VB not built (run make)"; exit 1; }
. tests/integration/lib/cgroup.sh
cgroup=$(cgroup_root) || { echo "$cgroup"; exit 77; }

tmp=$(mktemp -d /tmp/run-block-cleanup.XXXXXX)
chmod 755 "$tmp"
driver=
cleanup() {
  [ -n "$driver" ] && kill -KILL "$driver" 2>/dev/null || true
  for m in $(grep -o " $tmp[^ ]*" /proc/mounts || true); do "$VB" disk unmount "$m" > /dev/null 2>&1 || umount -l "$m" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; [ -f "$tmp/log" ] && tail -20 "$tmp/log"; exit 1; }

# Loop devices and image-server mounts of block mounts (mount-PID) whose process is gone.
orphans() {
  { losetup -a -O NAME,BACK-FILE -n 2>/dev/null || true; grep -o ' /run/vidbench/block/mount-[0-9]*/fuse ' /proc/mounts || true; } |
    { grep -o '/run/vidbench/block/mount-[0-9]*' || true; } | sort -u | while read -r dir; do
      pid=${dir##*-}
      kill -0 "$pid" 2>/dev/null || echo "$dir"
    done
}
orphans > "$tmp/orphans-before"

"$VB" workload gen bench/specs/small.toml --out "$tmp/w" > /dev/null
experiment() { # binary [max_sectors_kb]
  cat <<EOT
name = "block-cleanup"
templates = "$PWD/bench/servers"
[workload]
dir = "$tmp/w"
[disk]
preset = "wd-red-1tb"
mode = "block"
image_cache = "$tmp/images"
[memory]
limit_mb = 256
[run]
duration_s = 60
warm = false
port = 18098
[rates]
fixed = [5]
[[config]]
name = "srv"
server = "nginx"
binary = "$1"
max_sectors_kb = ${2:-512}
scheduler = "bfq"
EOT
}
no_leftovers() { # driver pid
  grep -q " $tmp" /proc/mounts && fail "a mount under $tmp is left: $(grep " $tmp" /proc/mounts)"
  orphans > "$tmp/orphans-after"
  new=$(comm -13 "$tmp/orphans-before" "$tmp/orphans-after")
  [ -z "$new" ] && true || fail "loop device or image server left by a dead mount process: $new ($(losetup -a))"
  cgroup_leftovers "$cgroup" "$1" || fail "$(cgroup_leftovers "$cgroup" "$1")"
  pgrep -f "$tmp" > /dev/null && fail "processes left: $(pgrep -af "$tmp")"
  return 0
}
wait_load() { # results dir
  for _ in $(seq 900); do grep -q "    load " "$tmp/log" && break; sleep 0.1; done
  grep -q "    load " "$tmp/log" || fail "the load never started"
  grep -q " $1/mnt ext4 " /proc/mounts || fail "$1/mnt is not an ext4 mount during the load (block mode was not used)"
  pgrep -f "$1/runs" > /dev/null || fail "no nginx was running during the load"
}

# 1. Server dying at start-up, after the image and the mount.
experiment /bin/false > "$tmp/e1.toml"
"$VB" run "$tmp/e1.toml" --out "$tmp/r1" > /dev/null 2> "$tmp/log" & driver=$!
if wait $driver; then fail "a server that exits at once was accepted"; fi
grep -q "nginx exited during start-up" "$tmp/log" || fail "the error does not say the server died"
no_leftovers $driver
grep -q '"image_key_hash"' "$tmp/r1/image.json" || fail "no image key recorded before the runs"
grep -q "ext4 on /dev/loop" "$tmp/r1/runs/srv/rate-5.00-rep0/disk.log" || fail "the run did not mount in block mode (nothing was tested)"
[ ! -e "$tmp/r1/runs/srv/rate-5.00-rep0/DONE" ] || fail "a failed run is marked complete"

# 2, 3. SIGINT and SIGTERM during the load.
experiment /usr/sbin/nginx > "$tmp/e.toml"
experiment /usr/sbin/nginx 16384 > "$tmp/e-join.toml"
hw=$(cat /sys/block/loop0/queue/max_hw_sectors_kb 2>/dev/null || echo 1280)
for sig in INT TERM; do
  out="$tmp/r-$sig"
  spec=$tmp/e.toml
  [ $sig = TERM ] && spec=$tmp/e-join.toml
  "$VB" run "$spec" --out "$out" > /dev/null 2> "$tmp/log" & driver=$!
  wait_load "$out"
  # What the run records is written before the load: the queue as the device took it.
  setup=$(ls "$out"/runs/srv/*/disk-before.json)
  if [ $sig = INT ]; then
    grep -q '"max_sectors_kb": "512"' "$setup" || fail "the device did not get max_sectors_kb 512"
    grep -q '"drive_joins_kb": null' "$setup" || fail "the drive joins at max_sectors_kb 512"
  else
    want=$((hw < 1280 ? hw : 1280))
    grep -q "\"max_sectors_kb\": \"$want\"" "$setup" || fail "the device did not get its cap $want for max_sectors_kb 16384"
    grep -q '"drive_joins_kb": 16384' "$setup" || fail "the drive does not join up to 16384 KiB"
  fi
  kill -"$sig" $driver
  if wait $driver; then fail "an experiment stopped by SIG$sig exited 0"; fi
  grep -q -- "--resume" "$tmp/log" || fail "the driver did not say how to resume after SIG$sig"
  no_leftovers $driver
  [ ! -e "$out/runs/srv/rate-5.00-rep0/DONE" ] || fail "the run stopped by SIG$sig is marked complete"
done

# 4. SIGKILL of the driver, then a later run into the same directory.
out="$tmp/r-KILL"
"$VB" run "$tmp/e.toml" --out "$out" > /dev/null 2> "$tmp/log" & driver=$!
wait_load "$out"
kill -KILL $driver
wait $driver 2>/dev/null || true
killed=$driver
driver=
# The disk process and nginx die with their parent (PR_SET_PDEATHSIG); the
# cgroups stay until a later run sweeps them.
for _ in $(seq 100); do pgrep -f "$out" > /dev/null || break; sleep 0.2; done
experiment /nonexistent/nginx > "$tmp/e4.toml"
if "$VB" run "$tmp/e4.toml" --out "$out" --resume 2> "$tmp/log"; then fail "a missing server binary was accepted"; fi
no_leftovers $killed

# 5. Resuming an experiment whose image an older builder version made (r1's,
# rewritten so): every run mounts that file as it is (--image), not what this
# build would make; with the file gone the resume is refused, naming it.
python3 tests/integration/lib/older_image.py "$(ls "$tmp"/images/*.vbimg)" "$tmp/older.vbimg"
mkdir "$tmp/m5"
"$VB" disk mount "$tmp/m5" --library "$tmp/w/library.json" --preset wd-red-1tb --block --image "$tmp/older.vbimg" --daemonize --log "$tmp/m5.log" > /dev/null
older_key=$("$VB" disk stat --json "$tmp/m5" | python3 -c "import json, sys; print(json.load(sys.stdin)['config']['block']['image_key_hash'])")
"$VB" disk unmount "$tmp/m5" > /dev/null
python3 - "$tmp/r1/image.json" "$tmp/older.vbimg" "$older_key" <<'PY'
import json, sys
image = json.load(open(sys.argv[1]))
assert image["image_key_hash"] != sys.argv[3], "the older key hashes like this build's"
image["image"], image["image_key_hash"] = sys.argv[2], sys.argv[3]
json.dump(image, open(sys.argv[1], "w"))
PY
if "$VB" run "$tmp/e1.toml" --out "$tmp/r1" --resume > /dev/null 2> "$tmp/log"; then fail "the resumed /bin/false run was accepted"; fi
grep -q "cannot resume" "$tmp/log" && fail "the resume refused the older builder version's image: $(grep "cannot resume" "$tmp/log")"
grep -q "nginx exited during start-up" "$tmp/log" || fail "the resumed run did not get as far as the server: $(tail -5 "$tmp/log")"
grep -q "image $tmp/older.vbimg (builder version" "$tmp/r1/runs/srv/rate-5.00-rep0/disk.log" || fail "the resumed run did not mount the older image: $(grep -i image "$tmp/r1/runs/srv/rate-5.00-rep0/disk.log")"
rm "$tmp/older.vbimg"
if "$VB" run "$tmp/e1.toml" --out "$tmp/r1" --resume > /dev/null 2> "$tmp/log"; then fail "a resume without its image was accepted"; fi
grep -q "cannot resume $tmp/r1: the disk image is not the one its runs read (image key .*$tmp/older.vbimg" "$tmp/log" || fail "the resume without its image does not say so: $(tail -3 "$tmp/log")"
no_leftovers $killed
echo "run-block-cleanup: ok"
