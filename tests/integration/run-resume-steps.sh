#!/usr/bin/env bash
# A stepped search interrupted after some of its steps goes on after them on
# --resume, with real nginx on the emulated disk:
#  - the interrupted run becomes runs/srv/steps-part01 (DONE, part.json, its
#    finished steps in steps.json with their disk windows);
#  - the resumed run steps-rep0 ramps afresh, says how many steps it
#    replayed, and plays only the search's remaining probes;
#  - search.json holds every probe, the part's first and with the outcomes
#    the part measured;
#  - a search its max_probes cut says so, and goes on after its finished
#    steps once max_probes is raised (its run kept as the next part);
#  - the report reads every directory as the configuration's steps;
#  - a configuration added on a later resume, its rates fractions of the
#    search's answer (rates.relative_to), plays them;
#  - all of it after the interrupted results went through a checkpoint and a
#    restore into an empty directory (another machine's session).
# Needs root, /dev/fuse, a cgroup memory controller, nginx and jq.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/integration/lib/scratch.sh
nginx_run_prereqs
scratch run-resume-steps
# A driver still running when the test fails is stopped (it cleans up its
# mounts and cgroups) before the scratch directory goes.
driver=
trap '[ -n "$driver" ] && kill -INT "$driver" 2>/dev/null && wait "$driver" 2>/dev/null; scratch_cleanup' EXIT

{
  small_experiment resume-steps 18099 \
    'steady = { ramp_s = 15, settle_s = 10, measure_s = 15, hold_s = 5 }' \
    'bracket = { start = 1, step_pct = 20, resolution_pct = 5, repetitions = 2, max_probes = 4 }'
  printf '[[config]]\nname = "srv"\nserver = "nginx"\n'
} > "$tmp/exp.toml"
out=$tmp/r

# Interrupted once its second step has been reported.
"$VB" run "$tmp/exp.toml" --out "$out" > /dev/null 2> "$tmp/log" & driver=$!
for _ in $(seq 1800); do grep -q "    step 2 at" "$tmp/log" && break; kill -0 $driver 2>/dev/null || break; sleep 0.1; done
grep -q "    step 2 at" "$tmp/log" || fail "the run never reached its second step"
kill -INT $driver
if wait $driver; then fail "an interrupted experiment exited 0"; fi
driver=
run=$out/runs/srv/steps-rep0
[ -d "$run" ] && [ ! -e "$run/DONE" ] || fail "the interrupted run is not left incomplete"
[ -f "$run/load/steps.json" ] || fail "the load client did not keep its finished steps"
kept=$(jq length "$run/load/steps.json")
[ "$kept" -ge 2 ] || fail "only $kept finished steps were written"

# Carried to another machine: what follows resumes from a checkpoint of the
# interrupted results (scripts/checkpoint-results), restored into an empty
# results directory, without the original's per-request logs and traces.
VIDBENCH=$VB scripts/checkpoint-results "$out" "$tmp/checkpoints/r" > /dev/null 2>> "$tmp/log" || fail "the checkpoint failed: $(tail -3 "$tmp/log")"
mv "$out" "$tmp/original"
scripts/checkpoint-results --restore "$tmp/checkpoints/r" "$out" > /dev/null || fail "the restore failed"
[ "$(ls "$out/runs/srv/steps-rep0" | sort | tr '\n' ' ')" != "$(ls "$tmp/original/runs/srv/steps-rep0" | sort | tr '\n' ' ')" ] \
  || fail "the checkpoint kept every file of the run, logs included"

"$VB" run "$tmp/exp.toml" --out "$out" --resume > /dev/null 2> "$tmp/log" || fail "the resumed search failed"
part=$out/runs/srv/steps-part01
grep -q "finished steps are kept in $part" "$tmp/log" || fail "the resume did not say where the steps were kept"
grep -q "goes on after the $kept steps of its earlier parts" "$tmp/log" || fail "the resume did not say it replays $kept steps"
for f in DONE part.json steps.json result.json run.json samples.csv setup.json; do
  [ -f "$part/$f" ] || fail "the part has no $f"
done
[ "$(jq length "$part/steps.json")" = "$kept" ] || fail "the part holds $(jq length "$part/steps.json") steps, not $kept"
jq -e 'all(.[]; .disk.mb_s != null and .disk_bytes_per_delivered_byte != null)' "$part/steps.json" > /dev/null \
  || fail "the part's steps lack their disk windows"
[ -f "$run/DONE" ] || fail "the resumed run did not finish"
jq -e --argjson k "$kept" '.replayed_steps == $k' "$run/run.json" > /dev/null || fail "run.json does not record the replayed steps"
jq -e '.continues == ["steps-part01"]' "$run/run.json" > /dev/null || fail "run.json does not name the part it continues"
search=$out/runs/srv/search.json
probes=$(jq '.steps | length' "$search")
[ "$probes" = 4 ] || fail "the search made $probes probes, not its max_probes of 4"
[ "$(jq length "$run/steps.json")" = $((probes - kept)) ] || fail "the resumed run played $(jq length "$run/steps.json") steps, not the $((probes - kept)) left"
# The resumed run's first step ramps (15 s) rather than settling (10 s).
jq -e '.[0].spec.settle_s == 15' "$run/steps.json" > /dev/null || fail "the resumed run's first step did not ramp"
# The search took the part's outcomes for its first probes.
jq -n --slurpfile s "$search" --slurpfile p "$part/steps.json" \
  '[$s[0].steps[:($p[0] | length)][] | [.rate, .outcome.failure_pct]] == [$p[0][] | [.spec.rate, .failure_percent]]' \
  | grep -qx true || fail "search.json does not start with the part's steps"

# 2. Four probes cannot bracket, refine and confirm two repetitions each: the
# budget cut the search, and raising it continues after its 4 steps.
jq -e '.complete == false' "$search" > /dev/null || fail "a search of 4 probes was not cut by its budget"
"$VB" run "$tmp/exp.toml" --out "$out" --resume > /dev/null 2> "$tmp/log" || fail "resuming a finished experiment failed"
grep -q "raise max_probes and --resume" "$tmp/log" || fail "the driver did not say the search was cut: $(tail -3 "$tmp/log")"
sed -i 's/max_probes = 4 }/max_probes = 8 }/' "$tmp/exp.toml"
"$VB" run "$tmp/exp.toml" --out "$out" --resume > /dev/null 2> "$tmp/log" || fail "the search given more probes failed"
grep -q "srv: its search stopped at 4 probes (max_probes) before confirming a rate; it goes on to at most 8" "$tmp/log" \
  || fail "the resume did not say it continues the cut search: $(grep srv: "$tmp/log")"
part2=$out/runs/srv/steps-part02
[ -f "$part2/DONE" ] && jq -e '.probes == 4' "$part2/part.json" > /dev/null || fail "the cut search's run was not kept as steps-part02"
more=$(jq '.steps | length' "$search")
[ "$more" -gt 4 ] && [ "$more" -le 8 ] || fail "the continued search made $more probes in all"
jq -n --slurpfile s "$search" --slurpfile a "$part/steps.json" --slurpfile b "$part2/steps.json" \
  '[$s[0].steps[:4][] | .rate] == [($a[0] + $b[0])[] | .spec.rate]' | grep -qx true || fail "the continued search did not replay its 4 probes first"
[ "$(jq length "$run/steps.json")" = $((more - 4)) ] || fail "the continued run played $(jq length "$run/steps.json") steps, not $((more - 4))"

"$VB" report "$out" --out "$tmp/report.md" > /dev/null 2>> "$tmp/log" || fail "the report failed"
for d in steps-part01 steps-part02 steps-rep0; do
  grep -q "| \`runs/srv/$d\` |" "$tmp/report.md" || fail "the report does not list $d"
done
# 3. Rates relative to the search's answer, in a configuration added later.
max=$(jq '.max_rate' "$search")
[ "$max" != null ] || fail "the search found no failure-free rate, so nothing can be relative to it"
cat >> "$tmp/exp.toml" <<EOT
[[config]]
name = "rel"
server = "nginx"
rates = { fixed = [0.5], relative_to = { config = "srv" } }
EOT
"$VB" run "$tmp/exp.toml" --check > "$tmp/check" 2>> "$tmp/log" || fail "--check refused the relative plan"
grep -q "50 % of \`srv\`'s maximum failure-free rate x 1" "$tmp/check" || fail "--check does not show the relative plan: $(cat "$tmp/check")"
"$VB" run "$tmp/exp.toml" --out "$out" --resume > /dev/null 2> "$tmp/log" || fail "the relative configuration failed"
want=$(sed -n "s/^rel: rates \([0-9.]*\) sessions\/s, 50 % of \`srv\`'s maximum failure-free rate.*/\1/p" "$tmp/log")
[ -n "$want" ] || fail "the driver did not say the rate it plays for rel"
python3 -c "import sys; sys.exit(abs($want - $max / 2) > 0.0051)" || fail "rel plays $want sessions/s, not half of $max"
jq -e --argjson r "$want" '.[0].spec.rate == $r' "$out/runs/rel/steps-rep0/steps.json" > /dev/null || fail "rel did not play $want sessions/s"
jq -e --argjson r "$want" '.fixed_rates == [$r]' "$out/runs/rel/steps-rep0/run.json" > /dev/null || fail "run.json does not record the rates played"

echo "run-resume-steps: ok ($kept steps kept, $((probes - kept)) played after the resume, $((more - 4)) after raising max_probes)"
