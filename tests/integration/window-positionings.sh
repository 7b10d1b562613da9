#!/usr/bin/env bash
# bench/disk/window_positionings.py over a hand-made stepped run: per window
# the drive's busy share, positionings, positionings per delivered chunk and
# KiB per positioning, from the whole trace and from a recorded window trace
# (windows it lacks printed as absent); a missing or malformed input is an
# error naming the run directory, never a traceback.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib/run_script.sh
script=bench/disk/window_positionings.py
run=$tmp/steps-rep0
mkdir -p "$run"

# The drive's clock was at 100 s when the load started. Window 1 (10-20 s of
# the load): 2 positionings, 1 streamed request and 1 request joined to the
# second positioning's command (its time counted once), 4 x 128 KiB, busy 3 s;
# window 2 (30-40 s): nothing; one request between the windows is ignored.
echo '{"uptime_s": 100.0}' > "$run/disk-before.json"
cat > "$run/steps.json" <<'EOF'
[{"spec": {"rate": 2.5}, "window_s": [10.0, 20.0], "failure_percent": 0.0, "throughput_mb_s": 1.05},
 {"spec": {"rate": 3.0}, "window_s": [30.0, 40.0], "failure_percent": 1.5, "throughput_mb_s": 2.0},
 {"spec": {"rate": 3.5}, "failure_percent": 0.0, "throughput_mb_s": 0.0}]
EOF
{
  echo "arrival_ns,start_ns,end_ns,file_id,offset,bytes,lba,outcome,seek_cylinders,queue_depth"
  echo "0,111000000000,112000000000,1,0,131072,10,miss,5,1"
  echo "0,112000000000,113000000000,1,131072,131072,266,stream,0,1"
  echo "0,115000000000,116000000000,2,0,131072,900,miss,7,1"
  echo "0,115000000000,116000000000,2,131072,131072,1156,joined,0,1"
  echo "0,125000000000,126000000000,3,0,131072,950,miss,7,1"
} > "$run/disk-trace.csv"

out=$(python3 "$script" "$run" --chunk-bytes 525000)
echo "$out"
# 1.05 MB/s x 10 s / 525,000 B = 20 chunks delivered; 2 positionings -> 0.10 per chunk.
echo "$out" | grep -qF "| 2.50 | 10-20 | 0.00 | 1.05 | 30 % | 2 | 0.10 | 256.0 |" || fail "window 1 row"
echo "$out" | grep -qF "| 3.00 | 30-40 | 1.50 | 2.00 | not in the trace |" || fail "window 2 row"
[ "$(echo "$out" | grep -c '^| [0-9]')" = 2 ] || fail "a step without a window was printed"

# A recorded run keeps only a window's trace, gzipped.
gzip "$run/disk-trace.csv"
mv "$run/disk-trace.csv.gz" "$run/disk-trace-window.csv.gz"
python3 "$script" "$run" | grep -qF "| 2.50 | 10-20 | 0.00 | 1.05 | 30 % | 2 | 0.10 | 256.0 |" || fail "gzipped window trace"

# Errors name the input, never a traceback (rejects: lib/run_script.sh).
head -c 40 "$run/disk-trace-window.csv.gz" > "$run/cut.gz" && mv "$run/cut.gz" "$run/disk-trace-window.csv.gz"
rejects "$run" "a cut gzip" "trace unreadable"
rm "$run/disk-trace-window.csv.gz"
rejects "$run" "no trace" "no disk-trace.csv"
printf 'arrival_ns,start_ns,end_ns,file_id,offset,bytes,lba,outcome\n0,x,1,1,0,4096,1,miss\n' > "$run/disk-trace.csv"
rejects "$run" "a malformed trace" "trace line 2: malformed"
echo '[{"window_s": [1, 2]}]' > "$run/steps.json"
rejects "$run" "a step without its figures" "steps.json: KeyError"
echo '[]' > "$run/steps.json"
rejects "$run" "steps without windows" "no step has a window"
rejects "$tmp/absent" "an absent run" "absent"
echo "window-positionings: ok"
