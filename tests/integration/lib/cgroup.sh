# Shared by the driver's integration tests: where vidbench run makes its
# cgroups (v1 or v2, as `vidbench run --probe-cgroup` finds them), and a check
# that a driver left none behind. Source it after setting VB.

# Prints the memory hierarchy's root, or exits 77 (skip) with the reason.
cgroup_root() {
  local probe
  if ! probe=$("$VB" run --probe-cgroup 2>&1); then
    echo "skip: no usable cgroup memory controller: $(echo "$probe" | tail -1)"
    exit 77
  fi
  echo "$probe" | python3 -c 'import json,sys; print(json.load(sys.stdin)["hierarchy_root"])'
}

# Fails (returns 1 with a message) if driver PID left a cgroup under ROOT
# (or, on v1, under cpuacct).
cgroup_leftovers() { # root, pid
  local left
  left=$(ls -d "$1"/vidbench-"$2"-* /sys/fs/cgroup/cpuacct/vidbench-"$2"-* 2>/dev/null || true)
  [ -z "$left" ] || { echo "cgroup(s) of driver $2 left behind: $left"; return 1; }
}
