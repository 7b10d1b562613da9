# Sourced by integration tests that run `vidbench run`, from the repository
# root: what they need checked (root, /dev/fuse, the built vidbench as $VB),
# a scratch directory $tmp (readable by the servers' user) removed at exit
# with whatever is still mounted below it, fail(), which prints the driver's
# log tail, and the head of a small FUSE-mode experiment on small.toml.
#   source tests/integration/lib/scratch.sh; driver_test_prereqs; scratch NAME
# (nginx_run_prereqs: the same, and nginx, jq and a cgroup memory controller).
driver_test_prereqs() {
  VB=${VIDBENCH:-${LIBCEPTION_BUILD:-$PWD/build}/bin/vidbench}
  if [ "$(id -u)" -ne 0 ]; then echo "skip: needs root (cgroups, drop_caches, FUSE)"; exit 77; fi
  [ -c /dev/fuse ] || { echo "skip: /dev/fuse is missing"; exit 77; }
  [ -x "$VB" ] || { echo "FAIL: $VB not built (run make)"; exit 1; }
}
# driver_test_prereqs, and what a run of nginx needs: nginx, jq, a cgroup
# memory controller ($cgroup: its root).
nginx_run_prereqs() {
  driver_test_prereqs
  [ -x /usr/sbin/nginx ] || { echo "skip: nginx is not installed"; exit 77; }
  command -v jq > /dev/null || { echo "skip: jq is not installed"; exit 77; }
  . tests/integration/lib/cgroup.sh
  cgroup=$(cgroup_root) || { echo "$cgroup"; exit 77; }
}
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
# small_experiment NAME PORT [RUN [RATES]]: small.toml generated into $tmp/w,
# the emulated WD Red in FUSE mode, 256 MiB, no warming; by default 60 s of
# arrivals at 2 sessions/s with every byte verified, else RUN's lines in [run]
# (after warm and port) and RATES's in [rates]; [[config]] tables follow.
small_experiment() {
  [ -d "$tmp/w" ] || "$VB" workload gen bench/specs/small.toml --out "$tmp/w" > /dev/null
  cat <<EOT
name = "$1"
templates = "$PWD/bench/servers"
[workload]
dir = "$tmp/w"
[disk]
mode = "fuse"
preset = "wd-red-1tb"
[memory]
limit_mb = 256
[run]
warm = false
port = $2
${3:-duration_s = 60
max_session_s = 20
verify = true}
[rates]
${4:-fixed = [2]}
EOT
}
