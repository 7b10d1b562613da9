#!/usr/bin/env bash
# bench/load/window_demand.py over a hand-made stepped run: per window the
# sessions started per second in its lead-in and in it, the cold starts (a
# video not asked for in the last --cold seconds), the requests served and
# the failed sessions; a missing or malformed input is an error naming it,
# never a traceback.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib/run_script.sh
script=bench/load/window_demand.py
run=$tmp/steps-rep0
mkdir -p "$run/load"

# One window, 100-110 s at a nominal 1 session/s, 3 of 10 sessions failed.
# Lead-in 90-100 s (--lead 10): two starts (video 1, and video 2 first seen
# then) and a later chunk; in the window: a start of video 1 (seen at 97 s:
# warm), of video 3 (never seen: cold) and of video 2 (seen at 92 s, more
# than --cold 5 s before: cold), and a chunk of video 3.
cat > "$run/steps.json" <<'EOF'
[{"spec": {"rate": 1.0}, "window_s": [100.0, 110.0], "sessions_failed": 3, "sessions_measured": 10},
 {"spec": {"rate": 1.2}, "sessions_failed": 0, "sessions_measured": 0}]
EOF
{
  echo "session,phase,class,video,path,range,start_s,first_byte_s,end_s,bytes,status,outcome"
  echo "1,measure,cable,1,/v/1.mp4,0-524999,97.0,97.1,97.5,525000,206,ok"
  echo "2,measure,cable,2,/v/2.mp4,0-524999,92.0,92.1,92.5,525000,206,ok"
  echo "2,measure,cable,2,/v/2.mp4,525000-1049999,96.0,96.1,96.5,525000,206,ok"
  echo "3,measure,cable,1,/v/1.mp4,0-524999,101.0,101.1,101.5,525000,206,ok"
  echo "4,measure,cable,3,/v/3.mp4,0-524999,102.0,102.1,102.5,525000,206,ok"
  echo "5,measure,cable,2,/v/2.mp4,0-524999,103.0,103.1,103.5,525000,206,ok"
  echo "4,measure,cable,3,/v/3.mp4,525000-1049999,108.0,108.1,108.5,525000,206,ok"
  echo "6,measure,cable,9,/v/9.mp4,0-524999,120.0,120.1,120.5,525000,206,ok"
} > "$run/load/requests.csv"

out=$(python3 "$script" "$run" --lead 10 --cold 5)
echo "$out"
# Lead-in: 2 starts in 10 s = 0.20/s (-80 % of 1/s), both cold; window: 3
# starts (0.30/s), 2 cold (0.20/s), 4 requests (0.4/s).
echo "$out" | grep -qF "| 1.00 | 100-110 | 3 of 10 | 0.20 (-80 %) | 0.20 | 0.30 | 0.20 | 0.4 |" || fail "the window's row"
[ "$(echo "$out" | grep -c '^| [0-9]')" = 1 ] || fail "a step without a window was printed"

# Errors name the input, never a traceback (rejects: lib/run_script.sh).
printf 'session,phase,class,video,path,range,start_s\n1,m,c,1,/v,0-1,soon\n' > "$run/load/requests.csv"
rejects "$run" "a malformed request" "requests.csv:2: malformed"
rm "$run/load/requests.csv"
rejects "$run" "no requests" "requests.csv: unreadable"
echo '[{"window_s": [1, 2]}]' > "$run/steps.json"
rejects "$run" "a step without its figures" "a step lacks"
echo '[]' > "$run/steps.json"
rejects "$run" "steps without windows" "no step has a window"
rejects "$tmp/absent" "an absent run" "absent"
echo "window-demand: ok"
