#!/usr/bin/env bash
# native/bench/laio/summarize_openstat.py's verdicts on issue 14's two
# open-stat goals, over hand-made openstat.csv files: met when the 95 %
# intervals show it, a tie when they overlap the limit, NOT met when they
# show it missed, and a single run judged at the medians with no interval.
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d /tmp/laio-summary.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
sum=native/bench/laio/summarize_openstat.py

# csv NAME "LAZY_WARM_SECONDS..." "THREADS_WARM_SECONDS..." (open-stat, N=1)
csv() {
  local f=$tmp/$1.csv rep=0 s
  echo "rep,state,mode,backend,n,read,requests,bytes,seconds,calls,background" > "$f"
  for s in $2; do rep=$((rep + 1)); echo "$rep,warm,laio,lazy,1,0,10,0,$s,20,0" >> "$f"; done
  rep=0
  for s in $3; do rep=$((rep + 1)); echo "$rep,warm,threads,none,1,0,10,0,$s,0,0" >> "$f"; done
}
goal() { python3 "$sum" "$tmp/$1.csv" | grep "^- open-stat warm"; }

csv within "1.02 1.04 1.03 1.05" "1.00 1.01 0.99 1.00"
goal within | grep -q "= 1.04x; means .*: met$" || fail "a clear pass: $(goal within)"
csv tie "1.10 1.45 1.12 1.44 1.08" "1.00 1.01 0.99 1.00 1.00"
goal tie | grep -q "met at the medians; the intervals overlap the limit" || fail "an overlap: $(goal tie)"
csv slow "1.50 1.52 1.49" "1.00 1.01 0.99"
goal slow | grep -q ": NOT met$" || fail "a clear miss: $(goal slow)"
csv one "1.10" "1.00"
goal one | grep -q "met at the medians; a single run has no interval" || fail "one run: $(goal one)"
python3 "$sum" "$tmp/one.csv" | grep -q "open-stat-read cold: .*: not measured" || fail "the unmeasured goal"
! python3 "$sum" "$tmp/one.csv" | grep -q "Table 4" || fail "an empty open-stat-read table was printed"
echo "laio-openstat-summary: ok"
