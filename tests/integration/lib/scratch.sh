# Sourced by integration tests that run `vidbench run`: a scratch directory
# $tmp (readable by the servers' user), removed at exit with whatever is
# still mounted below it, and fail(), which prints the driver's log tail.
#   source tests/integration/lib/scratch.sh; scratch NAME
unmount_scratch() {
  for m in $(grep -o " $tmp[^ ]*" /proc/mounts || true); do umount -l "$m" 2>/dev/null || true; done
}
scratch_cleanup() {
  unmount_scratch
  rm -rf "$tmp"
}
scratch() {
  tmp=$(mktemp -d "/tmp/$1.XXXXXX")
  chmod 755 "$tmp"
  trap scratch_cleanup EXIT
}
fail() { echo "FAIL: $*"; [ -f "$tmp/log" ] && tail -30 "$tmp/log"; exit 1; }
