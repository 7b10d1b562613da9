#!/usr/bin/env bash
# The diff microbenchmark (bench/diff/run) end to end on small trees: one and
# two diffs, vanilla and under Libception, on the emulated disk in block mode.
# Every run must read at least both trees of each diff from the disk (a cold
# mount each time), the runs under Libception must have fetched through the
# daemon and the vanilla ones not, the summary must compare the two, and
# nothing may be left mounted or running. Needs root (block mode).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/block/common.sh
block_skip_checks
command -v diff >/dev/null && command -v jq >/dev/null || { echo "skip: diff or jq is not installed"; exit 77; }
block_need_mkfs ext4
block_scratch
out=$tmp/out
FILES=40 SCHEDULERS=mq-deadline INSTANCES="1 2" WORK=$tmp/work bench/diff/run "$out" > "$tmp/run.log" 2>&1 \
  || { cat "$tmp/run.log"; fail "bench/diff/run failed"; }
tree=$(sed -n 's/^trees: 4 copies of 40 files, \([0-9]*\) bytes each.*/\1/p' "$out/setup.txt")
[ -n "$tree" ] && [ "$tree" -gt 0 ] || fail "setup.txt does not give the tree size"
rows=$(tail -n +2 "$out/results.csv" | wc -l)
[ "$rows" = 4 ] || fail "results.csv has $rows runs, expected 4"
tail -n +2 "$out/results.csv" | while IFS=, read -r rep sched mode n secs d1 d2 lr lb lw lbusy dr db dreads dbytes; do
  awk -v s="$secs" 'BEGIN { exit !(s > 0) }' || fail "$mode x$n: completion time $secs"
  [ "$lb" -ge $((2 * n * tree)) ] || fail "$mode x$n: the loop device read $lb bytes for $n diff(s) of two $tree-byte trees"
  [ "$db" -ge "$lb" ] || fail "$mode x$n: the drive served $db bytes, less than the loop device read ($lb)"
  if [ "$n" = 2 ]; then [ -n "$d2" ] || fail "$mode x2: no time for the second diff"; fi
  case $mode in
    libception) [ "${dreads:-0}" -gt 0 ] || fail "under Libception the daemon read nothing ($n diffs)";;
    vanilla) [ -z "$dreads" ] || fail "vanilla run has daemon reads ($dreads)";;
  esac
done
grep -q "^| mq-deadline | 2 | " "$out/summary.md" || fail "summary.md lacks the two-diff rows"
grep -q "Libception against vanilla" "$out/summary.md" || fail "summary.md lacks the comparison"
assert_nothing_left "after bench/diff/run"
pgrep -f "$tmp/work/reception.sock" >/dev/null && fail "a daemon is left running"
echo "diff-bench: ok ($(grep -c . "$out/results.csv") lines)"
