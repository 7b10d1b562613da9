#!/usr/bin/env bash
# scripts/contained: the command runs in a memory cgroup of its own whose cap
# holds its page cache (300 MB written under a 128M cap leave at most 128 MiB
# charged), its exit status is the script's, a bad size is refused before
# anything runs, no cgroup is left behind, and neither is the command's page
# cache. Needs root and a memory cgroup controller.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "$(id -u)" -ne 0 ]; then echo "skip: needs root (cgroups)"; exit 77; fi
[ -d /sys/fs/cgroup/memory ] || grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null \
  || { echo "skip: no memory cgroup controller"; exit 77; }
tmp=$(mktemp -d /tmp/contained.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
leftovers() { ls -d /sys/fs/cgroup/contained-* /sys/fs/cgroup/memory/contained-* 2>/dev/null || true; }
before=$(leftovers)
scripts/contained --memory 128M bash -c '
  cg=$(awk -F: "\$2 == \"memory\" || \$2 == \"\" {print \$3}" /proc/self/cgroup | head -1)
  case $cg in /contained-*) ;; *) echo "not in a contained cgroup: $cg"; exit 3;; esac
  dir=/sys/fs/cgroup/memory$cg; [ -d "$dir" ] || dir=/sys/fs/cgroup$cg
  dd if=/dev/zero of="$1/big" bs=1M count=300 conv=fsync status=none
  charged=$(cat "$dir/memory.usage_in_bytes" 2>/dev/null || cat "$dir/memory.current")
  [ "$charged" -le $((128 << 20)) ] || { echo "charged $charged bytes over the 128M cap"; exit 4; }
' _ "$tmp" || fail "the contained command failed (status $?)"
set +e
scripts/contained sh -c 'exit 7'; status=$?
scripts/contained --memory lots true 2> "$tmp/err"; bad=$?
set -e
[ "$status" = 7 ] || fail "exit status $status, expected the command's 7"
[ "$bad" = 2 ] && grep -q "not a size" "$tmp/err" || fail "a bad size was not refused: status $bad, $(cat "$tmp/err")"
[ "$(leftovers)" = "$before" ] || fail "cgroups left behind: $(leftovers)"
# What the command wrote is no longer cached once it has ended.
cached=$(fincore --bytes --noheadings --output RES "$tmp/big" | tr -d ' ')
[ "$cached" -lt $((8 << 20)) ] || fail "the command's page cache stayed: $cached bytes of its file cached"
echo "ok: contained"
