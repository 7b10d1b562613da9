#!/usr/bin/env bash
# The steady-state protocol end to end, with real nginx on the emulated disk:
#  1. one run, two rates as its steps (run.steady, one_run): steps.json holds
#     both steps with their windows, the disk's MB/s over the same window and
#     the disk bytes per delivered byte; samples.csv covers the run on the
#     load's clock; sessions are full (not cut) and those still running at the
#     end are censored, not failed; the drive's process found outside the
#     run's memory cgroup, the kernel's TCP buffer settings and the
#     server's send buffers every 15 s are recorded; the server runs under
#     the shim in track mode, which rewrites its statistics every second, and
#     every sample sums them into shim.jsonl (growing sendfile counts), from
#     which the report takes each window's sendfile latencies;
#  2. the same rate in its own run (one_run = false): one step, ramp first;
#     a configuration with a ramp of its own (ramp_s) waits that long instead;
#  3. the report reads both and prints one window per row;
#  4. the settling gate: this workload's sessions last minutes, so after a
#     15 s ramp far more than 3 % of the steady-state sessions are missing and
#     the window opens at max_settle_s, recorded as not settled, with the gap;
#  5. population matching with the same gate: sessions in progress join over
#     the ramp, so the window opens at the ramp's minimum, settled, holding
#     the steady-state number of sessions; the lower second rate withdraws
#     sessions (recorded as withdrawn, not failed); the cache is filled to
#     80 % of the limit before the load (warm_fill_pct);
#  6. the page cache's gate (lru_pct): the LRU lists must have held still
#     for 120 s, which a 40 s cap cannot give, so the window opens at the
#     cap, recorded as opened on a moving cache; the server's CPU seconds
#     are sampled and taken over the window.
# Needs root, /dev/fuse, a cgroup memory controller and nginx.
set -euo pipefail
cd "$(dirname "$0")/../.."
VB=${VIDBENCH:-${LIBCEPTION_BUILD:-$PWD/build}/bin/vidbench}
if [ "$(id -u)" -ne 0 ]; then echo "skip: needs root (cgroups, drop_caches, FUSE)"; exit 77; fi
[ -c /dev/fuse ] || { echo "skip: /dev/fuse is missing"; exit 77; }
[ -x /usr/sbin/nginx ] || { echo "skip: nginx is not installed"; exit 77; }
[ -x "$VB" ] || { echo "FAIL: $VB not built (run make)"; exit 1; }

source tests/integration/lib/scratch.sh
scratch run-steady

"$VB" workload gen bench/specs/small.toml --out "$tmp/w" > /dev/null
experiment() { # one_run, rates, [extra steady keys], [extra run keys]
  cat <<EOT
name = "steady"
templates = "$PWD/bench/servers"
[workload]
dir = "$tmp/w"
[disk]
preset = "wd-red-1tb"
[memory]
limit_mb = 256
[run]
warm = false
port = 18098
steady = { ramp_s = 15, settle_s = 10, measure_s = 15, hold_s = 5, one_run = $1${3:-} }
${4:-}
[rates]
fixed = $2
[[config]]
name = "srv"
server = "nginx"
EOT
}

# 1. Two rates as steps of one run.
experiment true "[2, 4]" > "$tmp/e1.toml"
echo 'libception = "track"' >> "$tmp/e1.toml"
"$VB" run "$tmp/e1.toml" --out "$tmp/r1" > "$tmp/log" 2>&1 || fail "the stepped run failed"
run="$tmp/r1/runs/srv/steps-rep0"
[ -f "$run/DONE" ] || fail "the stepped run is not complete"
python3 - "$run" <<'PY' || fail "the stepped run's records are wrong"
import csv, json, os, sys
run = sys.argv[1]
cpu_accounted = os.path.exists("/sys/fs/cgroup/cgroup.controllers") or os.path.exists("/sys/fs/cgroup/cpuacct/cpuacct.usage")
steps = json.load(open(f"{run}/steps.json"))
assert [s["spec"]["rate"] for s in steps] == [2, 4], steps
assert [s["window_s"] for s in steps] == [[15, 30], [45, 60]], [s["window_s"] for s in steps]
assert steps[0]["spec"]["settle_s"] == 15 and steps[1]["spec"]["settle_s"] == 10
for s in steps:
    assert s["sessions_measured"] > 0, s
    d = s["disk"]
    assert d is not None and d["seconds"] == 15 and d["bytes"] > 0, s
    assert s["disk_bytes_per_delivered_byte"] > 0, s
    assert s["memory_mean_bytes"] > 0, s
    # CPU is accounted on cgroup v2 and on v1 with cpuacct (else null, by design).
    if cpu_accounted:
        assert s["server_cpu_s"] > 0, s
samples = list(csv.DictReader(open(f"{run}/samples.csv")))
times = [float(r["t_s"]) for r in samples]
assert times[0] == 0 and times[-1] >= 65 and all(b - a == 5 for a, b in zip(times, times[1:])), times
sessions = list(csv.DictReader(open(f"{run}/load/sessions.csv")))
assert all(float(r["scheduled_s"]) < 70 for r in sessions)
assert any(r["outcome"] == "interrupted" for r in sessions), "nothing was running at the end"
# Full sessions: some lasted beyond a 50 s cut.
assert any(int(r["requests_total"]) > 8 for r in sessions)
setup = json.load(open(f"{run}/setup.json"))
assert setup["rate"] == "steps", setup["rate"]
assert setup["network"]["tcp_wmem"], setup["network"]
# The drive's process was checked to be outside the run's memory cgroup.
assert len(setup["disk"]["pids_outside_run_cgroup"]) == 1, setup["disk"]
sockets = [json.loads(l) for l in open(f"{run}/sockets.jsonl")]
# Every 15 s (a snapshot with nobody connected writes no line).
assert len(sockets) >= 3 and all(s["t_s"] > 0 and s["t_s"] % 15 == 0 for s in sockets), sockets
assert all(s["send_buffer_bytes"]["connections"] > 0 and s["send_buffer_bytes"]["max"] >= s["send_buffer_bytes"]["median"] > 0 for s in sockets), sockets
# The shim's statistics through the run: a sum every sample, its sendfile
# calls growing while the load runs; the files end as the ones written at exit.
shim = [json.loads(l) for l in open(f"{run}/shim.jsonl")]
assert [l["t_s"] for l in shim] == times[:len(shim)] and len(shim) >= len(times) - 1, [l["t_s"] for l in shim]
calls = [sum(f["calls"] for n, f in l["totals"]["functions"].items() if n.startswith("sendfile")) for l in shim]
assert all(b >= a for a, b in zip(calls, calls[1:])), calls
at = lambda t: calls[[l["t_s"] for l in shim].index(t)]
assert at(15) < at(30) < at(45) < at(60), calls
files = [json.load(open(f"{run}/shim/{f}")) for f in os.listdir(f"{run}/shim") if f.endswith(".json")]
assert files and all(f["at_exit"] is True and f["interval_ms"] == 1000 for f in files), files
PY
grep -q "step 2 at 4.00 sessions/s" "$tmp/log" || fail "the driver did not report the steps as they ended"

# 2. One rate in its own run; a second configuration with a ramp of its own.
experiment false "[2]" > "$tmp/e2.toml"
printf '[[config]]\nname = "own"\nserver = "nginx"\nramp_s = 25\n' >> "$tmp/e2.toml"
"$VB" run "$tmp/e2.toml" --out "$tmp/r2" > "$tmp/log" 2>&1 || fail "the separate run failed"
python3 - "$tmp/r2" <<'PY' || fail "the separate run's records are wrong"
import json, sys
for config, ramp in [("srv", 15), ("own", 25)]:
    steps = json.load(open(f"{sys.argv[1]}/runs/{config}/rate-2.00-rep0/steps.json"))
    assert len(steps) == 1 and steps[0]["window_s"] == [ramp, ramp + 15] and steps[0]["disk"]["bytes"] > 0, (config, steps)
    assert steps[0]["spec"]["settle_s"] == ramp, (config, steps[0]["spec"])
configs = {c["name"]: c for c in json.load(open(f"{sys.argv[1]}/experiment.json"))["configs"]}
assert configs["own"]["ramp_s"] == 25 and "ramp_s" not in configs["srv"], configs
PY

# 3. The report.
"$VB" report "$tmp/r1" --print-table > "$tmp/table" 2> "$tmp/log" || fail "the report of a stepped run failed"
grep -q "  2.00 " "$tmp/table" && grep -q "  4.00 " "$tmp/table" || fail "the table lacks a step: $(cat "$tmp/table")"
grep -q "every column over the step's measured window" "$tmp/table" || fail "the table does not state its window: $(cat "$tmp/table")"
grep -Eq "\| the window (15-30|45-60) s at the maximum failure-free rate" "$tmp/r1/report.md" || fail "the sendfile latencies are not the window's: $(grep -A5 'sendfile latency' "$tmp/r1/report.md")"
# 4. The settling gate, ending at its cap.
experiment true "[2]" ", gate_pct = 3, max_settle_s = 30" > "$tmp/e4.toml"
"$VB" run "$tmp/e4.toml" --out "$tmp/r4" > "$tmp/log" 2>&1 || fail "the gated run failed"
python3 - "$tmp/r4/runs/srv/steps-rep0" <<'PY' || fail "the gated run's records are wrong"
import json, sys
steps = json.load(open(f"{sys.argv[1]}/steps.json"))
assert len(steps) == 1, steps
s = steps[0]
assert s["spec"]["gate_pct"] == 3 and s["spec"]["max_settle_s"] == 30, s["spec"]
assert s["window_s"] == [30, 45] and s["settled_s"] == 30 and s["settled"] is False, s
assert s["gap_pct"] > 3, s["gap_pct"]
assert s["sessions_measured"] > 0 and s["disk"]["seconds"] == 15, s
PY
grep -q "NOT settled" "$tmp/log" || fail "the driver did not say the window opened unsettled: $(grep 'step 1' "$tmp/log")"

# 5. Population matching: the same gate is met at once.
experiment true "[2, 1]" ", gate_pct = 3, max_settle_s = 30, join_s = 10" "warm_fill_pct = 80" > "$tmp/e5.toml"
"$VB" run "$tmp/e5.toml" --out "$tmp/r5" > "$tmp/log" 2>&1 || fail "the matched run failed: $(tail -5 "$tmp/log")"
python3 - "$tmp/r5/runs/srv/steps-rep0" "$tmp/w/sessions.jsonl" <<'PY' || fail "the matched run's records are wrong"
import csv, json, sys
run, sessions = sys.argv[1], sys.argv[2]
lengths = [sum(r.get("pace_s", 0) for r in json.loads(l)["requests"][1:]) for l in open(sessions)]
mean = sum(lengths) / len(lengths)
steps = json.load(open(f"{run}/steps.json"))
assert [s["spec"]["join_s"] for s in steps] == [10, 10], [s["spec"] for s in steps]
first, second = steps
# Matched from idle: the gate finds the steady state at the ramp's minimum.
assert first["window_s"] == [15, 30] and first["settled"] is True and abs(first["gap_pct"]) <= 3, first
assert first["matched"]["added"] > 0 and first["matched"]["withdrawn"] == 0, first["matched"]
steady = 2 * mean
active = first["active_sessions"]["mean"]
assert 0.7 * steady <= active <= 1.3 * steady, (active, steady)
# Half the rate: sessions withdrawn, none of them failures.
assert second["matched"]["withdrawn"] > 0 and second["matched"]["added"] <= second["matched"]["replaced"], second["matched"]
rows = list(csv.DictReader(open(f"{run}/load/sessions.csv")))
withdrawn = [r for r in rows if r["outcome"] == "withdrawn"]
assert 0 < len(withdrawn) <= second["matched"]["withdrawn"], (len(withdrawn), second["matched"])
assert any(float(r["scheduled_s"]) < 0 for r in rows), "no session joined in progress"
assert all("withdrawn" not in s["failed_by_cause"] for s in steps), [s["failed_by_cause"] for s in steps]
# The cache fill read the most requested ranges until the cache held about
# 80 % of the 256 MiB limit (or the list ran out).
fill = json.load(open(f"{run}/setup.json"))["warm_fill"]
assert fill["target_pct"] == 80 and fill["read"]["bytes"] > 0, fill
assert fill["cache_after_bytes"] > fill["cache_before_bytes"], fill
assert fill["cache_after_bytes"] <= 256 << 20, fill
ranges = [l.split() for l in open(f"{run}/warm-fill.txt") if not l.startswith("#")]
assert ranges and all(r[0].startswith("/") for r in ranges), ranges[:3]
PY
grep -q "population matched" "$tmp/log" || fail "the driver did not report the match: $(grep 'step 1' "$tmp/log")"

# 6. The page cache's gate, ending at its cap.
experiment true "[2]" ", gate_pct = 3, max_settle_s = 40, lru_pct = 2, join_s = 10" > "$tmp/e6.toml"
"$VB" run "$tmp/e6.toml" --out "$tmp/r6" > "$tmp/log" 2>&1 || fail "the run with the page cache's gate failed: $(tail -5 "$tmp/log")"
python3 - "$tmp/r6/runs/srv/steps-rep0" <<'PY' || fail "the run with the page cache's gate has wrong records"
import csv, json, sys
run = sys.argv[1]
(s,) = json.load(open(f"{run}/steps.json"))
# Sessions matched at once, but two minutes of still lists cannot fit in 40 s.
assert s["window_s"] == [40, 55] and s["settled_s"] == 40, s
assert s["cache_settled"] is False and s["settled"] is False and abs(s["gap_pct"]) <= 3, s
assert s["lru"]["active_file_mean_bytes"] + s["lru"]["inactive_file_mean_bytes"] > 0, s["lru"]
samples = list(csv.DictReader(open(f"{run}/samples.csv")))
assert all(r["inactive_file_bytes"] for r in samples), samples[:2]
PY
grep -q "page cache still moving" "$tmp/log" || fail "the driver did not say the cache was still moving: $(grep 'step 1' "$tmp/log")"
echo "ok: steps of one run and a separate run measured in their windows, disk and CPU over the same window; the gate's cap recorded; population matching; the page cache's gate"
