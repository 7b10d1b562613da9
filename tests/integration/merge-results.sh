#!/usr/bin/env bash
# scripts/merge-results: the finished configurations of one results directory
# join another of the same experiment (two `--only` halves run side by side);
# a different testbed, disk image or configuration, or a configuration
# finished in both, is refused naming it, and nothing is copied then. Over
# hand-made results directories (the JSON keys the script reads); needs jq.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v jq > /dev/null || { echo "skip: jq is not installed"; exit 77; }
tmp=$(mktemp -d /tmp/merge-results.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

results() { # DIR MEMORY IMAGE CONFIG_B_PREFETCH [OVERLAY_BLOCKS]: an experiment of configs a and b
  mkdir -p "$1/runs"
  jq -n --argjson mem "$2" --argjson p "$4" \
    '{disk: {preset: "wd-red-1tb"}, run: {ramp_s: 1200}, memory_limit_bytes: $mem, workload: {spec: "/s.toml"},
      configs: [{name: "a", server: "nginx"}, {name: "b", server: "nginx", prefetch_kb: $p}]}' > "$1/experiment.json"
  echo "{\"image_key_hash\": \"$3\", \"image_figures\": {\"data_first_byte\": 1, \"data_end_byte\": 9, \"extents\": 2, \"overlay_blocks\": ${5:-3}}}" > "$1/image.json"
}
finish() { mkdir -p "$1/steps-rep0"; echo "$2" > "$1/steps-rep0/steps.json"; date +%s > "$1/steps-rep0/DONE"; }

results "$tmp/into" 8589934592 abc 2048
finish "$tmp/into/runs/a" into-a
mkdir -p "$tmp/into/runs/b/steps-rep0"   # b interrupted in INTO: no DONE
results "$tmp/from" 8589934592 abc 2048
finish "$tmp/from/runs/b" from-b
mkdir -p "$tmp/from/runs/a/steps-rep0"   # a unfinished in FROM: not copied,
finish "$tmp/from/runs/a" from-a-part    # even with a part kept from an earlier run
mv "$tmp/from/runs/a/steps-rep0" "$tmp/from/runs/a/steps-part01" && mkdir "$tmp/from/runs/a/steps-rep0"
scripts/merge-results "$tmp/from" "$tmp/into" > "$tmp/out"
grep -qx "merged b" "$tmp/out" && [ "$(wc -l < "$tmp/out")" -eq 1 ] || fail "merged: $(cat "$tmp/out")"
[ "$(cat "$tmp/into/runs/b/steps-rep0/steps.json")" = from-b ] && [ -f "$tmp/into/runs/b/steps-rep0/DONE" ] || fail "b was not copied whole"
[ "$(cat "$tmp/into/runs/a/steps-rep0/steps.json")" = into-a ] || fail "INTO's finished a was touched"
[ -f "$tmp/from/runs/b/steps-rep0/DONE" ] || fail "FROM was changed"
echo "ok: a finished configuration joined, an interrupted one replaced, one with only a kept part left, FROM kept"

refused() { # what, expected words, FROM
  if scripts/merge-results "$3" "$tmp/into" > /dev/null 2> "$tmp/err"; then fail "$1 was accepted"; fi
  grep -q "$2" "$tmp/err" || fail "$1: $(cat "$tmp/err")"
}
refused "b finished in both" "finished already" "$tmp/from"
results "$tmp/mem" 4294967296 abc 2048; finish "$tmp/mem/runs/c" x
refused "another memory limit" "memory_limit_bytes" "$tmp/mem"
results "$tmp/img" 8589934592 def 2048; finish "$tmp/img/runs/c" x
refused "another disk image" "disk image differs" "$tmp/img"
results "$tmp/build" 8589934592 abc 2048 4; finish "$tmp/build/runs/c" x
refused "another build of the image" "read another build of image abc" "$tmp/build"
jq '.image_figures.overlay_blocks = 3 | .image_figures.placement = "p2"' "$tmp/build/image.json" > "$tmp/x" && mv "$tmp/x" "$tmp/build/image.json"
jq '.configs += [{name: "c", server: "nginx"}]' "$tmp/build/experiment.json" > "$tmp/x" && mv "$tmp/x" "$tmp/build/experiment.json"
jq '.image_figures.placement = "p1"' "$tmp/into/image.json" > "$tmp/x" && mv "$tmp/x" "$tmp/into/image.json"
refused "another placement digest" "placement p2 against p1" "$tmp/build"
[ ! -e "$tmp/into/runs/c" ] || fail "a refused build was merged"
scripts/merge-results --other-build "$tmp/build" "$tmp/into" c > "$tmp/out" 2> "$tmp/err" || fail "--other-build refused: $(cat "$tmp/err")"
grep -q "note: .*another build.*--other-build" "$tmp/err" && grep -qx "merged c" "$tmp/out" || fail "--other-build: $(cat "$tmp/out" "$tmp/err")"
rm -rf "$tmp/into/runs/c"; jq '.configs |= map(select(.name != "c"))' "$tmp/into/experiment.json" > "$tmp/x" && mv "$tmp/x" "$tmp/into/experiment.json"
rm -rf "$tmp/into/runs/b"; results "$tmp/cfg" 8589934592 abc 4096; finish "$tmp/cfg/runs/b" x
refused "b with other settings" "configuration b has other settings" "$tmp/cfg"
[ ! -e "$tmp/into/runs/b" ] && [ ! -e "$tmp/into/runs/c" ] || fail "a refused merge copied something"
refused "not a results directory" "not a results directory" "$tmp/nothing"
echo "ok: refused: finished in both, another memory limit, another image or build of it (merged with --other-build), other settings, not a results directory"

# Only the configurations named; a search's max_probes may differ.
results "$tmp/two" 8589934592 abc 2048; finish "$tmp/two/runs/b" two-b; finish "$tmp/two/runs/d" two-d
jq '.configs += [{name: "d", server: "nginx", rates: {plan: "bracket", bracket: {start: 4.7, max_probes: 14}}}]' "$tmp/two/experiment.json" > "$tmp/x" && mv "$tmp/x" "$tmp/two/experiment.json"
jq '.configs += [{name: "d", server: "nginx", rates: {plan: "bracket", bracket: {start: 4.7, max_probes: 20}}}]' "$tmp/into/experiment.json" > "$tmp/x" && mv "$tmp/x" "$tmp/into/experiment.json"
scripts/merge-results "$tmp/two" "$tmp/into" d > "$tmp/out" || fail "merging d alone failed"
grep -qx "merged d" "$tmp/out" && [ "$(wc -l < "$tmp/out")" -eq 1 ] && [ ! -e "$tmp/into/runs/b" ] || fail "merged: $(cat "$tmp/out")"
if scripts/merge-results "$tmp/two" "$tmp/into" zz > /dev/null 2> "$tmp/err"; then fail "an absent configuration was accepted"; fi
grep -q "runs/zz is not a finished configuration" "$tmp/err" || fail "$(cat "$tmp/err")"
jq -e '[.configs[].name] == ["a", "b", "d"]' "$tmp/into/experiment.json" > /dev/null || fail "configs: $(jq -c '[.configs[].name]' "$tmp/into/experiment.json")"
echo "ok: only the configurations named, max_probes aside"

# A configuration INTO's experiment.json lacks (it ran with --only) joins it, in FROM's place.
results "$tmp/half" 8589934592 abc 2048; finish "$tmp/half/runs/e" half-e
printf '%s' '{"disk": {"preset": "wd-red-1tb"}, "run": {"ramp_s": 1200}, "memory_limit_bytes": 8589934592, "workload": {"spec": "/s.toml"},
  "configs": [{"name": "z", "server": "nginx"}, {"name": "e", "server": "apache", "rates": {"bracket": {"step_pct": 20.0}}}, {"name": "a", "server": "nginx"}]}' > "$tmp/half/experiment.json"
jq '.configs = [.configs[] | select(.name == "a" or .name == "d")]' "$tmp/into/experiment.json" > "$tmp/x" && mv "$tmp/x" "$tmp/into/experiment.json"
scripts/merge-results "$tmp/half" "$tmp/into" e > /dev/null || fail "merging e failed"
jq -e '[.configs[].name] == ["e", "a", "d"] and (.configs[0].server == "apache")' "$tmp/into/experiment.json" > /dev/null \
  || fail "e was not listed in FROM's place: $(jq -c '.configs' "$tmp/into/experiment.json")"
grep -q '"step_pct": 20.0' "$tmp/into/experiment.json" || fail "20.0 was rewritten (what resumes compare must keep its form)"
echo "ok: a configuration INTO did not list joins its experiment.json"
