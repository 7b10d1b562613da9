#!/usr/bin/env bash
# Two block mounts needing one image (two experiments starting together on a
# fresh machine): the image is built once; the mount that waits for the
# build says so every 10 s (a silent wait made `vidbench run` give up on the
# mount after a minute) and then loads the image the other built; and a
# wait can be interrupted.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/block/common.sh
block_test ext4
"$VB" disk library "$tmp/lib.json" --files 6 --size-mib 3 --name shared-build
mkdir "$tmp/mnt2"
mount_at() { # MOUNT_POINT LOG
  "$VB" disk mount "$1" --library "$tmp/lib.json" --preset wd-red-1tb --block --fs ext4 --daemonize --log "$2" \
    | sed -n 's/.*server pid \([0-9]*\).*/\1/p' >> "$tmp/pids"
}

# 1. Both at once on an empty cache: one builds, the other loads.
mount_at "$tmp/mnt" "$tmp/a.log" & a=$!
mount_at "$tmp/mnt2" "$tmp/b.log" & b=$!
wait $a || fail "the first mount failed"
wait $b || fail "the second mount failed"
mountpoint -q "$tmp/mnt" && mountpoint -q "$tmp/mnt2" || fail "not both mounted"
[ "$(cat "$tmp/a.log" "$tmp/b.log" | grep -c "building the ext4 image of")" = 1 ] || fail "the image was not built exactly once"
[ "$(ls "$tmp/cache"/*.vbimg | wc -l)" = 1 ] || fail "cache: $(ls -A "$tmp/cache")"
verify_pattern "$tmp/mnt2" "$tmp/lib.json"
"$VB" disk unmount "$tmp/mnt" > /dev/null
"$VB" disk unmount "$tmp/mnt2" > /dev/null

# 2. A mount that finds the entry locked waits, saying so, then loads.
lock=$(ls "$tmp"/cache/.*.lock)
flock "$lock" sleep 12 & holder=$!
sleep 0.5
mount_at "$tmp/mnt" "$tmp/c.log"
wait $holder
[ "$(grep -c "waiting for another mount to finish building" "$tmp/c.log")" -ge 2 ] || fail "the wait was not reported every 10 s: $(cat "$tmp/c.log")"
grep -q "loaded in" "$tmp/c.log" || fail "the image was not loaded after the wait: $(cat "$tmp/c.log")"
"$VB" disk unmount "$tmp/mnt" > /dev/null

# 3. A wait is interrupted by SIGTERM: no mount, nothing left.
flock "$lock" sleep 30 & holder=$!
sleep 0.5
"$VB" disk mount "$tmp/mnt" --library "$tmp/lib.json" --preset wd-red-1tb --block --fs ext4 2> "$tmp/d.log" & m=$!
for _ in $(seq 50); do grep -q "waiting for another mount" "$tmp/d.log" 2>/dev/null && break; sleep 0.2; done
grep -q "waiting for another mount" "$tmp/d.log" || fail "no wait reported: $(cat "$tmp/d.log")"
kill -TERM $m
for _ in $(seq 50); do kill -0 $m 2>/dev/null || break; sleep 0.2; done
kill -0 $m 2>/dev/null && fail "the waiting mount did not stop at SIGTERM"
kill $holder 2>/dev/null || true
! mountpoint -q "$tmp/mnt" || fail "mounted after SIGTERM"
assert_nothing_left "interrupted wait"
echo "disk-block-shared-build: ok"
