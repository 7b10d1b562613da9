#!/usr/bin/env bash
# Block mode refuses bad input and missing pieces with an error that names
# what and where, and leaves nothing behind:
#  1. a mount point that is already a mount;
#  2. an image cache from another library (a clear mismatch, not used);
#  3. a corrupt image cache (reported, rebuilt, the mount works);
#  4. mkfs missing (hidden in a private mount namespace): names the package;
#  5. no loop support (/dev without loop-control, private namespace);
#  6. no free loop device (/dev without loop device nodes, private namespace);
#  7. --max-sectors-kb beyond a SATA disk's cap; an unknown scheduler;
#  8. --image: an older builder version's image of this library is mounted as
#     it is (a resumed experiment's drive); another library's, a missing file
#     and --image with --rebuild-image are refused.
# Needs root, /dev/fuse, loop devices, mkfs.ext4, mkfs.xfs and unshare.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/block/common.sh
block_skip_checks
for p in mkfs.ext4 mkfs.xfs unshare; do
  command -v $p >/dev/null || [ -x /usr/sbin/$p ] || { echo "skip: $p is not installed (scripts/bootstrap)"; exit 77; }
done
block_scratch
mkdir "$tmp/mnt" "$tmp/other"
"$VB" disk library "$tmp/a.json" --files 3 --size-mib 1 --name liba
"$VB" disk library "$tmp/b.json" --files 4 --size-mib 1 --name liba   # same name, other content
mnt=$tmp/mnt
expect_error() { # what, pattern, command...
  local what=$1 pattern=$2; shift 2
  if "$@" > "$tmp/out.log" 2> "$tmp/err.log"; then fail "$what: accepted"; fi
  grep -q -- "$pattern" "$tmp/err.log" || fail "$what: error does not say '$pattern': $(cat "$tmp/err.log")"
  assert_nothing_left "$what"
  echo "$what: $(tail -1 "$tmp/err.log")"
}
mount_args() { echo disk mount "$mnt" --library "$1" --preset wd-red-1tb --block; }

# 1. Mount point in use.
mount -t tmpfs none "$tmp/other"
if "$VB" disk mount "$tmp/other" --library "$tmp/a.json" --preset wd-red-1tb --block 2> "$tmp/err.log"; then fail "mount on a mount point accepted"; fi
grep -q "already a mount point (tmpfs" "$tmp/err.log" || fail "mount point in use: $(cat "$tmp/err.log")"
umount "$tmp/other"
assert_nothing_left "mount point in use"; echo "mount point in use: $(cat "$tmp/err.log")"
expect_error "missing mount point" "does not exist" "$VB" disk mount "$tmp/nowhere" --library "$tmp/a.json" --preset wd-red-1tb --block

# 2. A cache built for another library, under this library's cache name.
"$VB" $(mount_args "$tmp/a.json") --daemonize --log "$tmp/a.log" > /dev/null
"$VB" disk unmount "$mnt" > /dev/null
img_a=$(ls "$tmp"/cache/*.vbimg)
"$VB" $(mount_args "$tmp/b.json") --daemonize --log "$tmp/b.log" > /dev/null
"$VB" disk unmount "$mnt" > /dev/null
img_b=$(ls "$tmp"/cache/*.vbimg | grep -v "$img_a")
[ -n "$img_b" ] && [ "$img_a" != "$img_b" ] || fail "two libraries share one cache file"
cp "$img_a" "$img_b"
expect_error "cache of another library" "built for another drive image (library_hash" "$VB" $(mount_args "$tmp/b.json")
grep -q -- "--rebuild-image" "$tmp/err.log" || fail "the mismatch error does not say what to do"
"$VB" $(mount_args "$tmp/b.json") --rebuild-image --daemonize --log "$tmp/b2.log" > /dev/null || fail "--rebuild-image"
verify_pattern "$mnt" "$tmp/b.json"
"$VB" disk unmount "$mnt" > /dev/null; assert_nothing_left "rebuild"

# 3. A corrupt cache: reported and rebuilt.
head -c 5000 "$img_a" > "$img_a.cut"; mv "$img_a.cut" "$img_a"
"$VB" $(mount_args "$tmp/a.json") --daemonize --log "$tmp/a2.log" > /dev/null || fail "mount over a corrupt cache"
grep -q "corrupt" "$tmp/a2.log" && grep -q "rebuilding" "$tmp/a2.log" || fail "corruption not reported: $(cat "$tmp/a2.log")"
verify_pattern "$mnt" "$tmp/a.json"
"$VB" disk unmount "$mnt" > /dev/null; assert_nothing_left "corrupt cache"
echo "corrupt cache: reported and rebuilt"

# 4. mkfs.xfs missing (hidden in a private mount namespace only).
xfs=$(command -v mkfs.xfs || echo /usr/sbin/mkfs.xfs)
expect_error "mkfs missing" "apt-get install xfsprogs" unshare -m sh -c 'mount --bind /dev/null "$0" && exec "$@"' "$xfs" "$VB" $(mount_args "$tmp/a.json") --fs xfs --rebuild-image

# 5./6. A private /dev with FUSE but without loop-control / loop devices.
# shellcheck disable=SC2016
private_dev='mount -t tmpfs none /dev && for n in null zero fuse urandom; do touch /dev/$n; mount --bind /run/vb-orig-dev/$n /dev/$n; done'
mkdir -p /run/vb-orig-dev
for n in null zero fuse urandom loop-control; do [ -e /run/vb-orig-dev/$n ] || { touch /run/vb-orig-dev/$n; mount --bind /dev/$n /run/vb-orig-dev/$n; }; done
expect_error "no loop support" "/dev/loop-control is missing" unshare -m sh -c "$private_dev"' && exec "$@"' sh "$VB" $(mount_args "$tmp/a.json")
expect_error "no free loop device" "no free loop device could be set up" unshare -m sh -c "$private_dev"' && touch /dev/loop-control && mount --bind /run/vb-orig-dev/loop-control /dev/loop-control && exec "$@"' sh "$VB" $(mount_args "$tmp/a.json")
for n in null zero fuse urandom loop-control; do umount /run/vb-orig-dev/$n 2>/dev/null || true; rm -f /run/vb-orig-dev/$n; done
rmdir /run/vb-orig-dev 2>/dev/null || true
# A loop device the kernel allocated for the failed attempt is free, not attached.
losetup -a | grep -q "$tmp" && fail "a loop device is attached after the failed attach"

# 7. Knobs the device cannot take.
expect_error "max_sectors_kb beyond a SATA disk's" "32768 is not in 4..=32767" "$VB" $(mount_args "$tmp/a.json") --max-sectors-kb 32768
expect_error "unknown scheduler" "invalid value 'cfq'" "$VB" $(mount_args "$tmp/a.json") --scheduler cfq

# 8. --image FILE: the same library's image as an older builder version made it.
python3 tests/integration/lib/older_image.py "$img_a" "$tmp/older.vbimg"
before=$(ls "$tmp"/cache/*.vbimg | sort)
"$VB" $(mount_args "$tmp/a.json") --image "$tmp/older.vbimg" --daemonize --log "$tmp/older.log" > /dev/null || fail "--image of an older builder version: $(tail -3 "$tmp/older.log")"
grep -q "image $tmp/older.vbimg (builder version .*, this build makes .*) loaded" "$tmp/older.log" || fail "the older image was not said to be loaded: $(cat "$tmp/older.log")"
grep -q "building" "$tmp/older.log" && fail "--image built an image"
"$VB" disk stat --json "$mnt" | python3 -c "
import json, sys
b = json.load(sys.stdin)['config']['block']
assert b['image'] == '$tmp/older.vbimg' and not b['image_built_now'], b
assert b['image_key_hash'] not in '$img_a', ('the key hash is not the older image key', b['image_key_hash'])"
verify_pattern "$mnt" "$tmp/a.json"
"$VB" disk unmount "$mnt" > /dev/null; assert_nothing_left "--image"
[ "$(ls "$tmp"/cache/*.vbimg | sort)" = "$before" ] || fail "--image changed the cache"
expect_error "--image of another library" "is not an image of this mount's drive (library_hash" "$VB" $(mount_args "$tmp/b.json") --image "$tmp/older.vbimg"
expect_error "--image missing" "$tmp/none.vbimg" "$VB" $(mount_args "$tmp/a.json") --image "$tmp/none.vbimg"
expect_error "--image with --rebuild-image" "cannot be used with" "$VB" $(mount_args "$tmp/a.json") --image "$tmp/older.vbimg" --rebuild-image
echo "disk-block-errors: ok"
