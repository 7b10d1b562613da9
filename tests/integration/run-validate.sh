#!/usr/bin/env bash
# vidbench run --check: the bundled experiments are valid, and bad experiment
# files are refused with an error naming the file and the key or line, before
# anything is set up. Needs no root.
set -euo pipefail
cd "$(dirname "$0")/../.."
VB=${VIDBENCH:-${LIBCEPTION_BUILD:-$PWD/build}/bin/vidbench}
[ -x "$VB" ] || { echo "FAIL: $VB not built (run make)"; exit 1; }
tmp=$(mktemp -d /tmp/run-validate.XXXXXX)
trap 'rm -rf "$tmp" bench/experiments/.check-*.toml' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# --check also checks the machine as a run would: on one with less memory
# than an experiment's limit, that (and only that) is its error.
for e in bench/experiments/*.toml; do
  if ! "$VB" run "$e" --check > "$tmp/plan" 2> "$tmp/err"; then
    grep -q "its own memory, not the limit, would bound the page cache" "$tmp/err" || fail "$e does not validate: $(cat "$tmp/err")"
  fi
  grep -q "configurations" "$tmp/plan" || fail "$e: no plan printed"
done

# What a run would refuse before setting anything up, --check refuses too,
# naming the file and key: a spec, a workload directory, a drive preset, a
# server binary that is not there, a memory limit no machine has.
check_refuses() { # name, sed expression on quick.toml, words the error must contain
  local name=$1 expr=$2; shift 2
  sed -e "$expr" bench/experiments/quick.toml > "bench/experiments/.check-$name.toml"
  if "$VB" run "bench/experiments/.check-$name.toml" --check > /dev/null 2> "$tmp/err"; then
    rm -f "bench/experiments/.check-$name.toml"; fail "--check accepted $name"
  fi
  rm -f "bench/experiments/.check-$name.toml"
  for w in "$@"; do grep -qF -- "$w" "$tmp/err" || fail "$name: error does not mention '$w': $(cat "$tmp/err")"; done
}
check_refuses spec 's|^spec = .*|spec = "../specs/nope.toml"|' "workload.spec" "nope.toml"
check_refuses dir 's|^spec = .*|dir = "../nonexistent-wl"|' "workload.dir" "library.json"
check_refuses preset 's|^preset = .*|preset = "nosuchdrive"|' "disk.preset" "nosuchdrive"
check_refuses binary 's|^\[disk\]|[paths]\nnginx = "/nonexistent/nginx"\n[disk]|' "/nonexistent/nginx" "does not exist"
check_refuses limit 's|^limit_mb = .*|limit_mb = 17592186044416|' "memory.limit_mb" "more than any machine has"
check_refuses ramp 's|ramp_s = 60|ramp_s = 1e300|' "run.steady.ramp_s"

expect_error() { # name, file content, words the error must contain
  local name=$1 text=$2; shift 2
  printf '%s\n' "$text" > "$tmp/$name.toml"
  if "$VB" run "$tmp/$name.toml" --out "$tmp/out-$name" 2> "$tmp/err"; then fail "$name was accepted"; fi
  for w in "$@"; do grep -qF -- "$w" "$tmp/err" || fail "$name: error does not mention '$w': $(cat "$tmp/err")"; done
  [ ! -e "$tmp/out-$name" ] || fail "$name: a results directory was created for a bad experiment"
}
base='name = "t"
templates = "'$PWD'/bench/servers"
[workload]
spec = "x.toml"
[disk]
preset = "wd-red-1tb"
[memory]
limit_mb = 256
[run]
duration_s = 30
[rates]
fixed = [4]
[[config]]
name = "a"
server = "nginx"'
expect_error unknown-key "$base
colour = 1" "unknown-key.toml" "colour" "line 16"
expect_error bad-rate "${base/fixed = \[4\]/fixed = [4, -1]}" "rates.fixed[1]"
expect_error no-server "${base/server = \"nginx\"/}" 'config[0] ("a").server'
expect_error bad-mode "$base
libception = \"fast\"" "fast" "line 16"
expect_error prefetch-without-mode "$base
prefetch_kb = 2048" "prefetch_kb"
expect_error empty-file "" "empty-file.toml" "missing field"

if "$VB" run "$tmp/nope.toml" --check 2> "$tmp/err"; then fail "a missing file was accepted"; fi
grep -q "nope.toml" "$tmp/err" || fail "missing file not named: $(cat "$tmp/err")"
[ "$(grep -o "No such file" "$tmp/err" | wc -l)" -eq 1 ] || fail "the cause is said more than once: $(cat "$tmp/err")"
echo "run-validate: ok"
