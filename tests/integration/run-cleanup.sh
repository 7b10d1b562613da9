#!/usr/bin/env bash
# vidbench run never leaves a mount, a cgroup or a server behind:
#  1. a server binary that does not exist: refused before anything is set up,
#     with an error naming it;
#  2. a server that dies at start-up (/bin/false as nginx) after the disk is
#     mounted and the cgroup made: the error names it, and the mount, the cgroup
#     and every child are gone;
#  3. Ctrl-C (SIGINT) in the middle of a real nginx run: the driver says how to
#     resume, and the mount, the cgroup, nginx and the disk process are gone;
#     the interrupted run is not marked complete.
# Needs root, /dev/fuse, a cgroup memory controller (v1 or v2) and nginx (skips otherwise).
set -euo pipefail
cd "$(dirname "$0")/../.."
VB=${VIDBENCH:-${LIBCEPTION_BUILD:-$PWD/build}/bin/vidbench}
if [ "$(id -u)" -ne 0 ]; then echo "skip: needs root (cgroups, drop_caches, FUSE)"; exit 77; fi
[ -c /dev/fuse ] || { echo "skip: /dev/fuse is missing"; exit 77; }
[ -x /usr/sbin/nginx ] || { echo "skip: nginx is not installed"; exit 77; }
[ -x "$VB" ] || { echo "FAIL: $VB not built (run make)"; exit 1; }
. tests/integration/lib/cgroup.sh
cgroup=$(cgroup_root) || { echo "$cgroup"; exit 77; }

tmp=$(mktemp -d /tmp/run-cleanup.XXXXXX)
chmod 755 "$tmp"
driver=
cleanup() {
  [ -n "$driver" ] && kill -KILL "$driver" 2>/dev/null || true
  for m in $(grep -o " $tmp[^ ]*" /proc/mounts || true); do umount -l "$m" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; [ -f "$tmp/log" ] && tail -20 "$tmp/log"; exit 1; }

"$VB" workload gen bench/specs/small.toml --out "$tmp/w" > /dev/null
experiment() { # binary, extra [run] lines
  cat <<EOT
name = "cleanup"
templates = "$PWD/bench/servers"
[workload]
dir = "$tmp/w"
[disk]
preset = "wd-red-1tb"
[memory]
limit_mb = 256
[run]
duration_s = 60
warm = false
port = 18097
$2
[rates]
fixed = [5]
[[config]]
name = "srv"
server = "nginx"
binary = "$1"
EOT
}
no_leftovers() { # driver pid
  grep -q " $tmp" /proc/mounts && fail "a mount under $tmp is left: $(grep " $tmp" /proc/mounts)"
  cgroup_leftovers "$cgroup" "$1" || fail "$(cgroup_leftovers "$cgroup" "$1")"
  pgrep -f "$tmp" > /dev/null && fail "processes left: $(pgrep -af "$tmp")"
  return 0
}

# 1. Missing binary.
experiment /nonexistent/nginx "" > "$tmp/e1.toml"
if "$VB" run "$tmp/e1.toml" --out "$tmp/r1" 2> "$tmp/log"; then fail "a missing server binary was accepted"; fi
grep -q "/nonexistent/nginx does not exist" "$tmp/log" || fail "the error does not name the binary"
[ ! -e "$tmp/r1/runs" ] || fail "results were started for a missing binary"

# 2. Server dying at start-up, after mount and cgroup.
experiment /bin/false "" > "$tmp/e2.toml"
"$VB" run "$tmp/e2.toml" --out "$tmp/r2" > /dev/null 2> "$tmp/log" & driver=$!
if wait $driver; then fail "a server that exits at once was accepted"; fi
grep -q "nginx exited during start-up" "$tmp/log" || fail "the error does not say the server died"
no_leftovers $driver
[ -f "$tmp/r2/runs/srv/rate-5.00-rep0/disk.log" ] || fail "the disk was not mounted before the server started (nothing was tested)"
[ ! -e "$tmp/r2/runs/srv/rate-5.00-rep0/DONE" ] || fail "a failed run is marked complete"

# 3. Ctrl-C during the load of a real run.
experiment /usr/sbin/nginx "" > "$tmp/e3.toml"
"$VB" run "$tmp/e3.toml" --out "$tmp/r3" > /dev/null 2> "$tmp/log" & driver=$!
for _ in $(seq 600); do grep -q "    load " "$tmp/log" && break; sleep 0.1; done
grep -q "    load " "$tmp/log" || fail "the load never started"
pgrep -f "$tmp/r3/runs" > /dev/null || fail "no nginx was running during the load"
kill -INT $driver
rc=0; wait $driver || rc=$?
[ "$rc" = 130 ] || fail "an interrupted experiment exited $rc, not 130 (128 + SIGINT)"
grep -q -- "--resume" "$tmp/log" || fail "the driver did not say how to resume"
no_leftovers $driver
[ ! -e "$tmp/r3/runs/srv/rate-5.00-rep0/DONE" ] || fail "the interrupted run is marked complete"
driver=
echo "run-cleanup: ok"
