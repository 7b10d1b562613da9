#!/usr/bin/env bash
# laio-httpd as a `vidbench run` server kind: one short run per liblaio back
# end (lazy, eager; the template's `backend` knob) on the emulated disk in a
# memory cgroup, every byte verified by the load client. Each run must serve
# all its sessions with no failure and no verification error, record the
# rendered laio.conf with its knobs, and leave the workers' counter lines
# (their back end named) in the run's error log.
# Needs root, /dev/fuse and a cgroup memory controller.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${LIBCEPTION_BUILD:-$PWD/build}
source tests/integration/lib/scratch.sh
driver_test_prereqs
[ -x "$BUILD/bin/laio-httpd" ] || { echo "FAIL: $BUILD/bin/laio-httpd not built (run make)"; exit 1; }
scratch run-laio

{
  small_experiment laio 18097
  cat <<EOT
[[config]]
name = "laio-lazy"
server = "laio"
knobs = { backend = "lazy" }
[[config]]
name = "laio-eager"
server = "laio"
knobs = { backend = "eager", buffer_kb = "128" }
EOT
} > "$tmp/e.toml"
"$VB" run "$tmp/e.toml" --check > /dev/null || fail "the experiment does not check"
"$VB" run "$tmp/e.toml" --out "$tmp/r" > "$tmp/log" 2>&1 || fail "the run failed"
for backend in lazy eager; do
  run=$tmp/r/runs/laio-$backend/rate-2.00-rep0
  [ -f "$run/DONE" ] || fail "run laio-$backend is not complete"
  grep -q "^backend = $backend$" "$run/laio.conf" || fail "laio.conf of laio-$backend: $(grep backend "$run/laio.conf")"
  python3 - "$run/load/summary.json" <<'PY' || fail "laio-$backend: the load's summary"
import json, sys
s = json.load(open(sys.argv[1]))
sessions, v = s["sessions"], s["verify"]
assert sessions["completed"] > 0, sessions
assert sessions["failed"] == 0, sessions
assert v["enabled"] and v["mismatches"] == 0 and v["bytes_checked"] > 0, v
print(f"  {sessions['completed']} sessions, {v['bytes_checked']} bytes verified")
PY
  grep -q "laio-httpd worker 0 ($backend back end)" "$run/error.log" || fail "no counters from laio-$backend's workers: $(tail -5 "$run/error.log")"
done
echo "run-laio: ok"
