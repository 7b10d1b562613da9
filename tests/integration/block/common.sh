# Shared by the disk-block-*.sh tests: skip checks, a scratch directory, the
# generator in Python, and the check that nothing of a block mount is left.
# Sourced, not run (tests/run only runs tests/integration/*.sh).
VB=${VIDBENCH:-${LIBCEPTION_BUILD:-$PWD/build}/bin/vidbench}

block_skip_checks() {
  if [ "$(id -u)" -ne 0 ]; then echo "skip: needs root (loop devices, mounting a filesystem)"; exit 77; fi
  [ -c /dev/fuse ] || { echo "skip: /dev/fuse is missing"; exit 77; }
  [ -e /dev/loop-control ] || { echo "skip: no loop device support (/dev/loop-control is missing; modprobe loop)"; exit 77; }
  command -v losetup >/dev/null || { echo "skip: losetup is not installed"; exit 77; }
  [ -x "$VB" ] || { echo "FAIL: $VB not built (run make)"; exit 1; }
}

# Skips (exit 77) unless mkfs for filesystem $1 is installed.
block_need_mkfs() {
  command -v "mkfs.$1" >/dev/null || [ -x "/usr/sbin/mkfs.$1" ] || { echo "skip: mkfs.$1 is not installed (scripts/bootstrap installs it)"; exit 77; }
}

fail() { echo "FAIL: $*"; for l in "$tmp"/*.log; do [ -f "$l" ] && { echo "--- $l"; tail -15 "$l"; }; done; exit 1; }

# A scratch directory with its own image cache and runtime root; the EXIT
# trap releases whatever a failed test left (mounts under it, loop devices
# backed by its image servers, its processes).
block_scratch() {
  tmp=$(mktemp -d /tmp/disk-block.XXXXXX)
  export VIDBENCH_IMAGE_CACHE=$tmp/cache VIDBENCH_RUNTIME_DIR=$tmp/run
  trap block_cleanup EXIT
}

# The start of a test of one block mount: the skip checks, mkfs for
# filesystem $1, the scratch directory and its mount point $tmp/mnt.
block_test() {
  block_skip_checks
  block_need_mkfs "$1"
  block_scratch
  mkdir "$tmp/mnt"
}

block_cleanup() {
  local m d
  for m in $(awk -v p="$tmp" 'index($2, p) == 1 { print $2 }' /proc/mounts | sort -r); do
    "$VB" disk unmount "$m" --wait-s 10 > /dev/null 2>&1 || umount -l "$m" 2>/dev/null || true
  done
  # A mount process whose filesystem is already gone still holds its loop
  # device and image server until it is told to stop.
  pkill -TERM -f "disk mount $tmp" 2>/dev/null || true
  for d in $(losetup -a -O NAME,BACK-FILE -n 2>/dev/null | awk -v p="$tmp" 'index($2, p) == 1 { print $1 }'); do losetup -d "$d" 2>/dev/null || true; done
  [ -f "$tmp/pids" ] && while read -r p; do kill -TERM "$p" 2>/dev/null || true; done < "$tmp/pids"
  rm -rf "$tmp"
}

# Fails if anything of the scratch directory is still mounted, attached or running.
assert_nothing_left() {
  local what=$1 i
  for i in $(seq 100); do
    if ! grep -q " $tmp" /proc/mounts && ! losetup -a -O BACK-FILE -n 2>/dev/null | grep -q "^$tmp" \
       && ! pgrep -f "disk (mount|block-reaper --for) $tmp" >/dev/null; then
      [ -z "$(ls -A "$tmp/run" 2>/dev/null)" ] || fail "$what: runtime directory left: $(ls -A "$tmp/run")"
      return 0
    fi
    sleep 0.1
  done
  grep " $tmp" /proc/mounts || true
  losetup -a || true
  pgrep -af "disk (mount|block-reaper --for) $tmp" || true
  fail "$what: a mount, loop device or process is left behind"
}

# Verify every file under a mount against the generator (random offsets,
# page and request boundaries, EOF).
verify_pattern() {
  python3 "$(dirname "${BASH_SOURCE[0]}")/../lib/generated_content.py" "$1" "$2"
}
