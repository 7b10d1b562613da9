#!/usr/bin/env bash
# Block mode leaves nothing behind (no filesystem mount, loop device, image
# server, clean-up process or runtime directory) on any exit path:
#  1. SIGTERM and 2. SIGINT to a foreground mount;
#  3. SIGKILL of the mount process (its reaper process cleans up);
#  4. its parent killed (PR_SET_PDEATHSIG);
#  5. SIGTERM while the image is being built (and no partial image is cached);
#  6. `disk unmount` while a file is held open (lazy unmount; the loop device
#     goes when the file is closed);
#  7. `umount -l` of its mounts by someone else, then SIGTERM;
#  8. SIGKILL of the mount process and its reaper together: `disk stat`
#     says the drive is gone, `disk unmount` releases what was left.
# Needs root, /dev/fuse, loop devices and mkfs.ext4 (skips otherwise).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/block/common.sh
block_test ext4
"$VB" disk library "$tmp/lib.json" --files 4 --size-mib 2 --odd --name cleanup
mnt=$tmp/mnt

wait_mounted() {
  for _ in $(seq 300); do mountpoint -q "$mnt" && return 0; kill -0 "$1" 2>/dev/null || fail "mount process $1 died: $(tail -5 "$tmp/fg.log")"; sleep 0.1; done
  fail "not mounted after 30 s"
}
wait_exit() {
  for _ in $(seq 200); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  fail "process $1 still running 20 s after $2"
}
start_fg() {
  "$VB" disk mount "$mnt" --library "$tmp/lib.json" --preset wd-red-1tb --block "$@" > "$tmp/fg.log" 2>&1 &
  pid=$!; echo "$pid" >> "$tmp/pids"
}

# Build the image once so that the cases below start quickly.
start_fg; wait_mounted "$pid"

# 1. SIGTERM
kill -TERM "$pid"; wait_exit "$pid" SIGTERM
wait "$pid" || fail "exit status $? after SIGTERM"
assert_nothing_left SIGTERM; echo "1. SIGTERM: clean"

# 2. SIGINT
start_fg; wait_mounted "$pid"
cat "$mnt/v/a/00000.mp4" > /dev/null
kill -INT "$pid"; wait_exit "$pid" SIGINT
assert_nothing_left SIGINT; echo "2. SIGINT: clean"

# 3. SIGKILL: nothing in the process can clean up; the reaper does.
start_fg; wait_mounted "$pid"
kill -KILL "$pid"; wait_exit "$pid" SIGKILL
assert_nothing_left SIGKILL; echo "3. SIGKILL: clean (reaper)"

# 4. The parent (a driver) is killed.
bash -c '"$0" disk mount "$1" --library "$2" --preset wd-red-1tb --block > "$3" 2>&1; :' "$VB" "$mnt" "$tmp/lib.json" "$tmp/fg.log" &
parent=$!; echo "$parent" >> "$tmp/pids"
for _ in $(seq 300); do mountpoint -q "$mnt" && break; sleep 0.1; done
mountpoint -q "$mnt" || fail "parent case: not mounted"
child=$(pgrep -P "$parent" -f "disk mount") || fail "no mount process under $parent"
echo "$child" >> "$tmp/pids"
kill -KILL "$parent"
wait_exit "$child" "its parent was killed"
assert_nothing_left "killed parent"; echo "4. parent killed: clean"

# 5. SIGTERM during the image build.
"$VB" disk library "$tmp/big.json" --files 200 --size-mib 64 --name cleanup-big
"$VB" disk mount "$mnt" --library "$tmp/big.json" --preset wd-red-1tb --block > "$tmp/fg.log" 2>&1 &
pid=$!; echo "$pid" >> "$tmp/pids"
for _ in $(seq 300); do grep -q " $tmp/run/build-$pid/fs " /proc/mounts && break; sleep 0.05; done
grep -q " $tmp/run/build-$pid/fs " /proc/mounts || fail "the build did not start: $(cat "$tmp/fg.log")"
kill -TERM "$pid"; wait_exit "$pid" "SIGTERM during the build"
if wait "$pid"; then fail "an interrupted build exited 0"; fi
grep -q "interrupted by signal" "$tmp/fg.log" || fail "no interruption reported: $(tail -3 "$tmp/fg.log")"
assert_nothing_left "SIGTERM during the build"
ls "$tmp/cache" | grep -q cleanup-big && fail "a partial image was cached: $(ls -a "$tmp/cache")"
echo "5. SIGTERM during the build: clean, nothing cached"

# 6. Unmount while a file is held open.
start_fg; wait_mounted "$pid"
loopname=$(awk -v m="$mnt" '$2 == m { sub("/dev/", "", $1); print $1 }' /proc/mounts)
sleep 600 < "$mnt/v/a/00000.mp4" &
holder=$!; echo "$holder" >> "$tmp/pids"
"$VB" disk unmount "$mnt" > "$tmp/unmount.log" 2>&1 || fail "unmount with an open file: $(cat "$tmp/unmount.log")"
grep -q "files are still open" "$tmp/unmount.log" || fail "busy unmount not reported: $(cat "$tmp/unmount.log")"
mountpoint -q "$mnt" && fail "still mounted"
# The open file is still served (a real disk under a lazily unmounted fs is).
python3 - "/proc/$holder/fd/0" "$PWD/tests/integration/lib" <<'PY' \
  || fail "the open file is not served correctly after the lazy unmount"
import os, sys
sys.path.insert(0, sys.argv[2])
from generated_content import expected
fd = os.open(sys.argv[1], os.O_RDONLY)
sys.exit(0 if os.pread(fd, 65536, 1 << 20) == expected(0, 1 << 20, 65536) else 1)
PY
kill -0 "$pid" 2>/dev/null || fail "the mount process exited while a file was open"
kill "$holder"; wait "$holder" 2>/dev/null || true
wait_exit "$pid" "the last open file was closed"
assert_nothing_left "unmount while busy"
losetup "/dev/$loopname" 2>/dev/null | grep -q "$tmp" && fail "$loopname still attached"
echo "6. busy unmount: clean once the file is closed"

# 7. Someone lazily unmounts everything of the mount (its filesystem and the
#    image server under it) before stopping it: SIGTERM still releases the
#    loop device, which no longer names its file by the old path.
start_fg; wait_mounted "$pid"
loopname=$(basename "$(findmnt -n -o SOURCE "$mnt")")
for m in $(awk -v p="$tmp" 'index($2, p) == 1 { print $2 }' /proc/mounts | sort -r); do umount -l "$m"; done
kill -TERM "$pid"; wait_exit "$pid" "SIGTERM after a lazy unmount of its mounts"
losetup "/dev/$loopname" 2>/dev/null | grep -q "disk.img" && fail "$loopname still attached after SIGTERM"
assert_nothing_left "lazy unmount, then SIGTERM"
echo "7. lazy unmount by someone else, then SIGTERM: clean"

# 8. Nobody left to clean up: the mount process and its reaper both killed.
start_fg; wait_mounted "$pid"
reaper=$(pgrep -f "block-reaper --for $mnt") || fail "no reaper for $mnt"
echo "$reaper" >> "$tmp/pids"
kill -KILL "$reaper" "$pid"; wait_exit "$pid" SIGKILL; wait_exit "$reaper" SIGKILL
wait "$pid" 2>/dev/null || true
mountpoint -q "$mnt" || fail "case 8 needs the orphaned mount, but $mnt is gone already"
if "$VB" disk stat "$mnt" > "$tmp/stat.log" 2>&1; then fail "disk stat of an orphaned mount succeeded"; fi
grep -q "is gone" "$tmp/stat.log" || fail "disk stat does not say the drive is gone: $(cat "$tmp/stat.log")"
"$VB" disk unmount "$mnt" > "$tmp/unmount.log" 2>&1 || fail "unmount of an orphaned mount: $(cat "$tmp/unmount.log")"
grep -q "drive process had died" "$tmp/unmount.log" || fail "orphan not reported: $(cat "$tmp/unmount.log")"
assert_nothing_left "orphaned mount, then disk unmount"
echo "8. mount process and reaper killed, then disk unmount: clean"
echo "disk-block-cleanup: ok"
