#!/usr/bin/env bash
# vidbench run with two drives (`[disk] count = 2`, paper 000 section 7): each
# run mounts two emulated drives under the servers' document root, every file
# is served from one of them (requests and the warming list name the drive),
# both serve reads, the drives' counters are summed in disk-after.json with
# each drive's own beside them, setup.json records both mounts and the
# division; under Libception the daemon sees two disks, on one worker or, with
# `per_disk = true`, on a worker each. Also: `count` out of range, a trace with
# two drives, and `per_disk` without a daemon are refused by name.
# Needs root, /dev/fuse, a cgroup memory controller and nginx (skips otherwise).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib/scratch.sh
nginx_run_prereqs
scratch run-two-disks

"$VB" workload gen bench/specs/small.toml --out "$tmp/w" > /dev/null
experiment() { # [disk] extra lines, [[config]] sections
  cat <<EOT
name = "two-disks"
templates = "$PWD/bench/servers"
[workload]
dir = "$tmp/w"
[disk]
preset = "wd-red-1tb"
count = 2
$1
[memory]
limit_mb = 256
[run]
duration_s = 60
max_session_s = 20
warm = true
port = 18098
[rates]
fixed = [4]
$2
EOT
}

# Refused by name before anything runs.
refused() { # what, expected text, [disk] lines, configs
  experiment "$3" "$4" > "$tmp/bad.toml"
  if "$VB" run "$tmp/bad.toml" --check > "$tmp/err" 2>&1; then fail "$1 was accepted"; fi
  grep -q "$2" "$tmp/err" || fail "$1: $(cat "$tmp/err")"
}
nginx_cfg='[[config]]
name = "v"
server = "nginx"'
experiment "" "$nginx_cfg" | sed 's/^count = 2$/count = 9/' > "$tmp/bad.toml"
if "$VB" run "$tmp/bad.toml" --check > "$tmp/err" 2>&1; then fail "count = 9 was accepted"; fi
grep -q "disk.count" "$tmp/err" || fail "count = 9: $(cat "$tmp/err")"
refused "a trace with two drives" "disk.trace" "trace = true" "$nginx_cfg"
refused "per_disk without a daemon" "per_disk" "" '[[config]]
name = "v"
server = "nginx"
per_disk = true'
echo "refused: count out of range, a trace with two drives, per_disk without a daemon"

experiment "" '[[config]]
name = "vanilla"
server = "nginx"
[[config]]
name = "one-worker"
server = "nginx"
libception = "full"
prefetch_kb = 1024
[[config]]
name = "per-disk"
server = "nginx"
libception = "full"
prefetch_kb = 1024
per_disk = true' > "$tmp/exp.toml"
"$VB" run "$tmp/exp.toml" --check > "$tmp/check"
head -1 "$tmp/check"
grep -q "2 drives" "$tmp/check" || fail "--check does not say two drives"
grep -q "per-disk .*one daemon worker per drive" "$tmp/check" || fail "--check does not show per_disk"
"$VB" run "$tmp/exp.toml" --out "$tmp/out" > "$tmp/log" 2>&1 || fail "the run failed"

grep -q '^/d[01]/v/' "$tmp/out/warm-drives.txt" || fail "the warming list names no drive: $(head -3 "$tmp/out/warm-drives.txt")"
for cfg in vanilla one-worker per-disk; do
  run=$(ls -d "$tmp/out/runs/$cfg"/*/)
  [ -f "$run/DONE" ] || fail "$cfg: no complete run"
  jq -e '.disk.count == 2 and (.disk.drives | length) == 2 and (.disk.drives[0].mount != .disk.drives[1].mount) and (.disk.division | test("fnv1a")) and (.disk.pids_outside_run_cgroup | length) == 2' "$run/setup.json" > /dev/null \
    || fail "$cfg: setup.json does not record two drives: $(jq -c .disk "$run/setup.json")"
  d0=$(jq '.drives[0].total.counters.bytes - 0' "$run/disk-after.json")
  d1=$(jq '.drives[1].total.counters.bytes - 0' "$run/disk-after.json")
  sum=$(jq '.total.counters.bytes' "$run/disk-after.json")
  [ "$d0" -gt 0 ] && [ "$d1" -gt 0 ] || fail "$cfg: a drive served nothing (d0 $d0, d1 $d1 bytes)"
  [ "$sum" -eq $((d0 + d1)) ] || fail "$cfg: total $sum is not d0 $d0 + d1 $d1"
  failed=$(jq '.outcome.failure_pct' "$run/result.json")
  jq -e '.outcome.failure_pct == 0' "$run/result.json" > /dev/null || fail "$cfg: $failed % of sessions failed"
  echo "$cfg: d0 served $d0 bytes, d1 $d1, no session failed"
done
for cfg in one-worker per-disk; do
  run=$(ls -d "$tmp/out/runs/$cfg"/*/)
  disks=$(jq '[.disks[] | select(.requests > 0)] | length' "$run/daemon.json")
  workers=$(jq '[.disks[] | select(.requests > 0) | .worker] | unique | length' "$run/daemon.json")
  echo "$cfg: the daemon queued reads for $disks disks on $workers worker(s)"
  [ "$disks" = 2 ] || fail "$cfg: the daemon saw $disks disks: $(jq -c '.disks' "$run/daemon.json")"
  want=1; [ "$cfg" = per-disk ] && want=2
  [ "$workers" = "$want" ] || fail "$cfg: $workers workers, expected $want"
  jq -e --argjson p "$([ "$cfg" = per-disk ] && echo true || echo false)" '(.daemon_command | index("--per-disk") != null) == $p' "$run/setup.json" > /dev/null \
    || fail "$cfg: setup.json's daemon command: $(jq -c .daemon_command "$run/setup.json")"
done
grep -q " $tmp" /proc/mounts && fail "a mount is left: $(grep " $tmp" /proc/mounts)"
echo "run-two-disks: ok"
