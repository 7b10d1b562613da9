#!/usr/bin/env bash
# A chaos run end to end (issue 13): nginx under Libception on the emulated
# disk while the driver SIGKILLs the daemon every 3 s and starts a new one
# 1 s later. The shim must fail open: every session completes and every
# byte verifies. chaos.csv alternates kill and start rows with the pids of
# distinct daemons, setup.json counts the kills, the daemon log shows each
# start, and the run ends with a live daemon whose counters were taken,
# whether the load ended while a daemon ran or in a restart gap.
# Needs root, /dev/fuse, a cgroup memory controller and nginx.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/integration/lib/scratch.sh
driver_test_prereqs
[ -x /usr/sbin/nginx ] || { echo "skip: nginx is not installed"; exit 77; }
scratch run-chaos

{
  small_experiment chaos 18096
  cat <<EOT
[[config]]
name = "chaos"
server = "nginx"
libception = "full"
prefetch_kb = 2048
chaos = { kill_every_s = 3, restart_after_s = 1 }
EOT
} > "$tmp/e.toml"
"$VB" run "$tmp/e.toml" --out "$tmp/r" > "$tmp/log" 2>&1 || fail "the chaos run failed"
run=$tmp/r/runs/chaos/rate-2.00-rep0
[ -f "$run/DONE" ] || fail "the run is not complete"
python3 - "$run" <<'PY' || fail "the chaos run's records"
import csv, json, sys
run = sys.argv[1]
rows = list(csv.DictReader(open(f"{run}/chaos.csv")))
events = [r["event"] for r in rows]
assert len(events) >= 16, f"only {len(events)} chaos events in a 60 s load"
assert events == ["kill", "start"] * (len(events) // 2), events
pids = [int(r["pid"]) for r in rows]
assert all(pids[i] == pids[i - 1] for i in range(2, len(pids), 2)), "a kill hit another daemon than the last started"
assert len(set(pids)) == len(pids) // 2 + 1, "restarted daemons reuse a pid"
times = [float(r["t_s"]) for r in rows]
gaps = [times[i + 1] - times[i] for i in range(0, len(times) - 1, 2)]
# The last start may come early: the load ended in its gap.
assert all(0.9 <= g <= 3.0 for g in gaps[:-1]) and gaps[-1] <= 3.0, f"restart gaps {gaps}"
setup = json.load(open(f"{run}/setup.json"))
assert setup["chaos_kills"] == len(events) // 2, setup["chaos_kills"]
s = json.load(open(f"{run}/load/summary.json"))
sessions, v = s["sessions"], s["verify"]
assert sessions["completed"] > 0 and sessions["failed"] == 0, sessions
assert v["enabled"] and v["mismatches"] == 0 and v["bytes_checked"] > 0, v
daemon = json.load(open(f"{run}/daemon.json"))
assert daemon["daemon"]["pid"] == pids[-1], (daemon["daemon"]["pid"], pids[-1])
print(f"  {len(events) // 2} kills; {sessions['completed']} sessions completed, {v['bytes_checked']} bytes verified")
PY
starts=$(grep -c "libception daemon listening" "$run/daemon.log" || true)
kills=$(jq .chaos_kills "$run/setup.json")
[ "$starts" -eq $((kills + 1)) ] || fail "daemon.log shows $starts starts for $kills kills: $(head -5 "$run/daemon.log")"
echo "run-chaos: ok"
