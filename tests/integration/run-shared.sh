#!/usr/bin/env bash
# Two experiments sharing the machine (crates/vidbench-run/src/sharing.rs):
# started side by side with the same `run.port`, each registers, the second
# serves on the next port, neither drops the page cache globally while the
# other runs (setup.json `sharing` names the other), and each run still starts
# cold: its drive is a fresh mount, so the warming read everything from the
# drive. A third that would need more memory than the machine has is refused
# naming the two running; a second experiment on the same results directory
# is refused; each run's setup.json and the report name the experiments that
# ran beside it. Needs root, /dev/fuse, a cgroup memory controller and nginx.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib/scratch.sh
nginx_run_prereqs
scratch run-shared
# The machine's registry: an experiment already running is company, so the
# test's drivers never drop its cache (they skip the global drop too).
registry=${VIDBENCH_SHARING_DIR:-/run/vidbench/experiments}
registered() { grep -l "\"out\":\"$1\"" "$registry"/*.json 2>/dev/null | head -1; }
pids=()
stop_all() { for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; scratch_cleanup; }
trap stop_all EXIT

small_experiment shared 18130 | sed 's/^warm = false$/warm = true/' > "$tmp/exp.toml"
cat >> "$tmp/exp.toml" <<'EOT'
[[config]]
name = "vanilla"
server = "nginx"
EOT
grep -q '^warm = true$' "$tmp/exp.toml" || fail "the experiment does not warm"

"$VB" run "$tmp/exp.toml" --out "$tmp/a" > "$tmp/a.log" 2>&1 & pids+=($!)
for _ in $(seq 100); do [ -n "$(registered "$tmp/a")" ] && break; sleep 0.1; done
[ -n "$(registered "$tmp/a")" ] || fail "the first experiment did not register in $registry: $(tail -5 "$tmp/a.log")"
"$VB" run "$tmp/exp.toml" --out "$tmp/b" > "$tmp/b.log" 2>&1 & pids+=($!)
for _ in $(seq 100); do [ -n "$(registered "$tmp/b")" ] && break; sleep 0.1; done
[ -n "$(registered "$tmp/b")" ] || fail "the second experiment did not register in $registry: $(tail -5 "$tmp/b.log")"

# While both run: one results directory takes one experiment; a third that
# does not fit in memory is refused, naming the two.
if "$VB" run "$tmp/exp.toml" --out "$tmp/a" --resume > "$tmp/same.log" 2>&1; then fail "a second experiment on $tmp/a was accepted"; fi
grep -q "already writing to $tmp/a" "$tmp/same.log" || fail "same directory: $(tail -3 "$tmp/same.log")"
total_mib=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 ))
big=$(( total_mib - 1024 ))
sed "s/^limit_mb = 256$/limit_mb = $big/" "$tmp/exp.toml" > "$tmp/big.toml"
if "$VB" run "$tmp/big.toml" --out "$tmp/c" > "$tmp/c.log" 2>&1; then fail "an experiment over the machine's memory was accepted"; fi
grep -q "running experiments' \[pid" "$tmp/c.log" && grep -q "$tmp/a" "$tmp/c.log" && grep -q "$tmp/b" "$tmp/c.log" \
  || fail "memory refusal: $(tail -3 "$tmp/c.log")"
echo "refused: the same results directory twice, a third experiment over the machine's memory"

for p in "${pids[@]}"; do wait "$p" || { cat "$tmp/a.log" "$tmp/b.log" | tail -30; fail "an experiment failed"; }; done
pids=()
grep -q "sharing the machine with pid .* writing to $tmp/a (port 18130)" "$tmp/b.log" || fail "b does not say it shares the machine: $(head -5 "$tmp/b.log")"

for x in a b; do
  run=$(ls -d "$tmp/$x"/runs/vanilla/*/ | head -1)
  [ -f "$run/DONE" ] || fail "$x: no finished run"
  jq -e '.sessions.failed == 0 and .sessions.completed > 0' "$run/load/summary.json" > /dev/null \
    || fail "$x: sessions failed: $(jq -c '.sessions | {completed, failed}' "$run/load/summary.json")"
  # Cold start without a global drop: the warming read from the drive at
  # least every byte it asked for (the drive's counters since its mount).
  warm=$(jq .bytes "$run/warm.json")
  drive=$(jq '.total.counters.bytes // empty' "$run/disk-before.json")
  [ -n "$drive" ] || fail "$x: no read-bytes counter in disk-before.json: $(jq -c 'keys' "$run/disk-before.json")"
  [ "$warm" -gt 0 ] && [ "$drive" -ge "$warm" ] || fail "$x: warming asked for $warm bytes, the drive read $drive: not a cold start"
  echo "$x: port $(jq .sharing.port "$run/setup.json"), drop_caches $(jq -c .sharing.drop_caches "$run/setup.json"), warming $warm bytes, drive $drive bytes"
done
jq -e '.sharing.port == 18131 and (.sharing.drop_caches | startswith("skipped")) and (.sharing.shared_with | any(.out | endswith("/a")))
  and .sharing.own_files_evicted > 0 and (.sharing.global_reclaim_pages_scanned | type == "number")' \
  "$(ls -d "$tmp"/b/runs/vanilla/*/ | head -1)/setup.json" > /dev/null || fail "b's setup.json: $(jq -c .sharing "$(ls -d "$tmp"/b/runs/vanilla/*/ | head -1)/setup.json")"
jq -e '.sharing.port == 18130 and (.sharing.overlapped | any(endswith("/b")))' "$(ls -d "$tmp"/a/runs/vanilla/*/ | head -1)/setup.json" > /dev/null \
  || fail "a's setup.json: $(jq -c .sharing "$(ls -d "$tmp"/a/runs/vanilla/*/ | head -1)/setup.json")"
"$VB" report "$tmp/b" > /dev/null 2>&1 || fail "vidbench report $tmp/b failed"
grep -q "Runs that shared the machine with another experiment.*(with .*$tmp/a" "$tmp/b/report.md" || fail "b's report does not say it shared the machine"
[ -z "$(registered "$tmp/a")$(registered "$tmp/b")" ] || fail "registrations left behind in $registry"
echo "ok: two experiments shared the machine on ports 18130 and 18131, b skipped the global drop, both started cold"
