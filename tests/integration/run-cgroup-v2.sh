#!/usr/bin/env bash
# The driver's cgroup code on a real cgroup v2 hierarchy, and on the machine's
# own (v1 here), through `vidbench run --probe-cgroup` (a run's cgroup steps
# with stand-in children):
#  1. a cgroup2 hierarchy is mounted at a temporary directory (the machine's v1
#     hierarchies are left alone) and VIDBENCH_CGROUP_ROOT names a fresh
#     directory in it; a stale run cgroup of a dead driver with a live process
#     in its server leaf is set up there;
#  2. the probe removes the stale cgroup (its process SIGKILLed), creates the run
#     cgroup with a leaf per role, places a CPU-busy child in each (the kernel's
#     /proc/PID/cgroup agrees), reads each leaf's cpu.stat (> 0), tears down
#     (cgroup.kill: every child dies of SIGKILL) and leaves no directory;
#  3. the memory limit: where the v2 mount offers the memory controller the
#     probe sets memory.max and reads memory.current/stat/events back; where it
#     does not (a v1 machine: a controller serves one hierarchy at a time) the
#     probe must fail with the error that names the cause, and make nothing;
#  4. VIDBENCH_CGROUP_ROOT naming a directory that is no cgroup: a clear error;
#  5. the hierarchy found on its own (v1 memory here, v2 on Debian 12) with a
#     64 MiB limit: the limit is read back and the teardown is complete.
# The v2 mount is unmounted at the end, even on failure. Needs root.
set -euo pipefail
cd "$(dirname "$0")/../.."
VB=${VIDBENCH:-${LIBCEPTION_BUILD:-$PWD/build}/bin/vidbench}
if [ "$(id -u)" -ne 0 ]; then echo "skip: needs root (mounts a cgroup2 hierarchy)"; exit 77; fi
grep -qw cgroup2 /proc/filesystems || { echo "skip: this kernel has no cgroup2 filesystem"; exit 77; }
[ -x "$VB" ] || { echo "FAIL: $VB not built (run make)"; exit 1; }

tmp=$(mktemp -d /tmp/run-cgroup-v2.XXXXXX)
mnt=$tmp/cg2
base=$mnt/vidbench-itest-$$
stale_pid=
cleanup() {
  [ -n "$stale_pid" ] && kill -KILL "$stale_pid" 2>/dev/null || true
  if mountpoint -q "$mnt"; then
    if [ -d "$base" ]; then
      # Whatever a failure left: kill, then remove leaves first.
      [ -e "$base/cgroup.kill" ] && echo 1 > "$base/cgroup.kill" 2>/dev/null || true
      find "$base" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    fi
    umount "$mnt" || umount -l "$mnt"
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*.err; do [ -s "$f" ] && { echo "--- $f"; tail -5 "$f"; }; done; exit 1; }

mkdir "$mnt"
mount -t cgroup2 none "$mnt" || fail "cannot mount a cgroup2 hierarchy at $mnt"
mkdir "$base"
echo "cgroup2 mounted at $mnt; its root offers: $(cat "$mnt/cgroup.controllers")"
echo "memory controller in /proc/cgroups (subsys hierarchy num enabled): $(grep -w ^memory /proc/cgroups)"

# 1. A stale run cgroup: driver pid 2147483647 (above any pid_max) with a live process.
stale=$base/vidbench-2147483647-9
mkdir -p "$stale/server" "$stale/daemon" "$stale/reader"
sleep 600 & stale_pid=$!
echo "$stale_pid" > "$stale/server/cgroup.procs"

# 2. The probe without a limit.
VIDBENCH_CGROUP_ROOT=$base "$VB" run --probe-cgroup > "$tmp/v2.json" 2> "$tmp/v2.err" || fail "the probe failed on cgroup v2"
status=0; wait "$stale_pid" || status=$?
[ "$status" = 137 ] || fail "the stale cgroup's process was not SIGKILLed (wait status $status)"
stale_pid=
python3 - "$tmp/v2.json" "$base" "$$" <<'EOF' || fail "the v2 probe's report is wrong"
import json, os, re, sys
r, base, tpid = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
c = r["cgroup"]
assert c["version"] == 2 and c["found_by"] == "VIDBENCH_CGROUP_ROOT", c
assert r["stale_removed"] == ["vidbench-2147483647-9"], r["stale_removed"]
assert not os.path.exists(base + "/vidbench-2147483647-9"), "stale cgroup left"
kill = "cgroup.kill" if os.path.exists(base + "/cgroup.kill") else "SIGKILL to each pid of ROLE/cgroup.procs"
assert c["files"]["kill"] == kill and c["files"]["cpu"] == "ROLE/cpu.stat usage_usec", c["files"]
assert c["files"]["limit"] is None and r["memory"] is None, "no limit was asked"
for role in ("server", "daemon", "reader"):
    x = r["roles"][role]
    assert x["listed_in_cgroup_procs"], (role, x)
    want = re.compile(r"^0::/vidbench-itest-%s/vidbench-\d+-probe/%s$" % (tpid, role))
    assert any(want.match(l) for l in x["proc_cgroup"]), (role, x["proc_cgroup"])
    assert x["placed_in"].startswith(base + "/vidbench-") and x["placed_in"].endswith("/" + role), x["placed_in"]
    assert x["cpu_s"] > 0, (role, "no CPU time in cpu.stat", x)
    assert r["teardown"]["killed_by_sigkill"][role], (role, "not killed by the teardown")
assert r["teardown"]["removed"], "run cgroup left"
print("v2 probe: placement, cpu.stat, %s, stale cleanup, removal: ok" % kill)
EOF
left=$(find "$base" -mindepth 1 -type d)
[ -z "$left" ] || fail "directories left under $base: $left"

# 3. The memory limit on v2.
if grep -qw memory "$mnt/cgroup.controllers"; then
  grep -qw memory "$mnt/cgroup.subtree_control" || echo +memory > "$mnt/cgroup.subtree_control"
  VIDBENCH_CGROUP_ROOT=$base "$VB" run --probe-cgroup --probe-limit-mb 64 > "$tmp/v2mem.json" 2> "$tmp/v2mem.err" || fail "the probe with a limit failed on cgroup v2"
  python3 - "$tmp/v2mem.json" <<'EOF' || fail "the v2 memory report is wrong"
import json, sys
r = json.load(open(sys.argv[1]))
m = r["memory"]
assert r["cgroup"]["files"]["limit"] == "memory.max" and m["version"] == 2, r["cgroup"]
assert m["limit_in_bytes"] == 64 << 20 and m["usage_in_bytes"] > 0, m
assert m["failcnt"] is not None and "anon" in m["raw"]["memory.stat"], m
assert r["teardown"]["removed"]
print("v2 memory controller: memory.max, memory.current, memory.stat, memory.events: ok")
EOF
else
  echo "the memory controller is not available in cgroup v2 here: checking the limit request's error"
  if VIDBENCH_CGROUP_ROOT=$base "$VB" run --probe-cgroup --probe-limit-mb 64 > /dev/null 2> "$tmp/nomem.err"; then
    fail "a memory limit was accepted on a cgroup v2 directory without the memory controller"
  fi
  grep -q "the memory controller is not available at $base (cgroup v2: its cgroup.controllers lists: " "$tmp/nomem.err" \
    || fail "the error does not say that memory is missing at $base: $(cat "$tmp/nomem.err")"
  v1mem=$(awk -F' - ' '{split($1, a, " "); split($2, b, " ")} b[1] == "cgroup" && b[3] ~ /(^|,)memory(,|$)/ {print a[5]; exit}' /proc/self/mountinfo)
  if [ -n "$v1mem" ]; then
    grep -q "binds the memory controller to the cgroup v1 hierarchy mounted at $v1mem" "$tmp/nomem.err" || fail "the error does not name the v1 memory hierarchy $v1mem"
  fi
  left=$(find "$base" -mindepth 1 -type d)
  [ -z "$left" ] || fail "a refused limit left directories: $left"
fi

# 4. A VIDBENCH_CGROUP_ROOT that is no cgroup.
if VIDBENCH_CGROUP_ROOT=$tmp "$VB" run --probe-cgroup > /dev/null 2> "$tmp/notcg.err"; then fail "a plain directory was taken as a cgroup"; fi
grep -q "VIDBENCH_CGROUP_ROOT=$tmp is not a cgroup directory" "$tmp/notcg.err" || fail "unclear error for a plain directory: $(cat "$tmp/notcg.err")"
rm "$tmp/notcg.err"

# 5. The machine's own hierarchy, found through /proc/self/mountinfo, with a limit.
env -u VIDBENCH_CGROUP_ROOT "$VB" run --probe-cgroup --probe-limit-mb 64 > "$tmp/auto.json" 2> "$tmp/auto.err" || fail "the probe failed on the machine's own hierarchy"
python3 - "$tmp/auto.json" <<'EOF' || fail "the probe's report on the machine's hierarchy is wrong"
import json, os, sys
r = json.load(open(sys.argv[1]))
c, m = r["cgroup"], r["memory"]
assert c["found_by"] == "/proc/self/mountinfo", c
assert m["limit_in_bytes"] == 64 << 20 and m["usage_in_bytes"] > 0, m
assert c["files"]["limit"] == {1: "memory.limit_in_bytes", 2: "memory.max"}[c["version"]], c
for role, x in r["roles"].items():
    assert x["listed_in_cgroup_procs"], (role, x)
    if c["version"] == 2 or c["cpuacct_dir"]:
        assert x["cpu_s"] > 0, (role, "no CPU time", x)
    assert r["teardown"]["killed_by_sigkill"][role], role
assert r["teardown"]["removed"] and not os.path.exists(c["dir"]), c["dir"]
if c["version"] == 1 and c["cpuacct_dir"]:
    assert not os.path.exists(c["cpuacct_dir"]), c["cpuacct_dir"]
print("machine's own hierarchy (cgroup v%d at %s): limit, counters, teardown: ok" % (c["version"], r["hierarchy_root"]))
EOF
echo "run-cgroup-v2: ok"
