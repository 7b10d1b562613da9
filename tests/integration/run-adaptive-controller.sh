#!/usr/bin/env bash
# The adaptive prefetch controller under `vidbench run`, end to end with real
# nginx and the daemon on the emulated disk (paper 001 Figs 3-4's data):
#  - the experiment's `adaptive` keys reach the daemon (its stats name the
#    interval);
#  - controller.csv holds every interval the controller closed, numbered
#    from 1 without a gap, on the load's clock (ends inside the run, spaced by
#    the interval), as many as the daemon's own count at the end;
#  - the report draws the size-and-score and throughput figures from it.
# Needs root, /dev/fuse, a cgroup memory controller, nginx and jq.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/integration/lib/scratch.sh
nginx_run_prereqs
scratch run-adaptive-controller

{
  small_experiment adaptive 18101 'steady = { ramp_s = 15, settle_s = 10, measure_s = 15, hold_s = 5 }' 'fixed = [2, 3]'
  cat <<'EOT'
[[config]]
name = "adaptive"
server = "nginx"
libception = "full"
prefetch_kb = "adaptive"
# A change of size moves at once (no gradual ramp, during which no interval
# closes), so intervals end every 5 s whatever the controller decides.
adaptive = { start_kb = 1024, interval_s = 5, ramp_rate_kb = 1048576 }
EOT
} > "$tmp/exp.toml"
"$VB" run "$tmp/exp.toml" --out "$tmp/r" > "$tmp/log" 2>&1 || fail "the adaptive run failed"
run=$tmp/r/runs/adaptive/steps-rep0
[ -f "$run/DONE" ] || fail "the run is not complete"
[ -f "$run/controller.csv" ] || fail "no controller.csv"
python3 - "$run" <<'PY' || fail "controller.csv is wrong"
import csv, json, sys
run = sys.argv[1]
rows = list(csv.DictReader(open(f"{run}/controller.csv")))
daemon = json.load(open(f"{run}/daemon.json"))
queues = daemon["controller"]["queues"]
assert len(queues) == 1, queues
closed = queues[0]["intervals"]
interval = daemon["controller"]["params"]["interval"]
print(f"{len(rows)} rows, the daemon closed {closed} intervals of {interval}")
assert interval == {"secs": 5, "nanos": 0}, interval
assert len(rows) >= 5, f"only {len(rows)} intervals in a run of about 60 s at 5 to 10 s each"
# The sampler reads the stats once more when the load ends, and the driver
# writes daemon.json after that: the file misses none the daemon closed before.
assert closed - 1 <= len(rows) <= closed, (len(rows), closed)
assert [int(r["index"]) for r in rows] == list(range(1, len(rows) + 1)), [r["index"] for r in rows]
t = [float(r["t_s"]) for r in rows]
samples = list(csv.DictReader(open(f"{run}/samples.csv")))
end = float(samples[-1]["t_s"])
# The daemon may close an interval before the load starts (negative times);
# the last fetch, when the load ends, follows the last sample by up to 5 s.
assert all(-120 < x <= end + 6.0 for x in t), (t, end)
# An interval closes at the first event (a request, a stats fetch every 5 s)
# at least 5 s after it began: 5 to 10 s apart, each at least 5 s long.
gaps = [b - a for a, b in zip(t, t[1:])]
assert all(4.9 < g < 10.5 for g in gaps), gaps
assert all(float(r["length_s"]) >= 4.99 for r in rows[1:]), [r["length_s"] for r in rows]
assert int(rows[0]["prefetch_bytes"]) == 1024 * 1024, rows[0]
assert all(r["decision"] for r in rows), rows
PY
"$VB" report "$tmp/r" > /dev/null 2>> "$tmp/log" || fail "the report failed"
grep -q "figures/controller-adaptive-size-score.svg" "$tmp/r/report.md" || fail "the report has no controller figure"
grep -qx "score" "$tmp/r/figures/controller-adaptive-size-score.svg" || fail "the controller figure has no score series in its legend"
echo "run-adaptive-controller: ok"
