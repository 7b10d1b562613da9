#!/usr/bin/env bash
# Benchmark of the load client itself: can it play ~2,000 concurrent paced
# sessions at ~100 MB/s against nginx serving a cached file on this machine,
# and what does that cost it in CPU?
#
#   bench/load/run.sh --out DIR [--concurrency 2000] [--requests 20] [--measure 90] [--verify]
#
# Sessions follow paper 000's client model: 0.5 MiB range requests, the first
# 3 back to back, then one every 10 s; half the sessions capped at 10 Mbps,
# half at 3.5 Mbps, 50 ms one-way delay. The rate is chosen so that
# concurrency = rate x session length reaches the target; the first sessions
# (one session length's worth) are ramp-up, the next --measure seconds' worth
# are measured. nginx (1 worker) serves one 64 MiB file that is read into the
# page cache first.
#
# DIR gets: setup.txt (machine, versions, parameters), the load client's raw
# results (load/), cpu.csv (client and nginx CPU seconds from /proc every 2 s),
# and bench.json (figures computed from those raw files).
set -euo pipefail
out="" concurrency=2000 requests=20 measure_s=90 verify=""
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2;;
    --concurrency) concurrency=$2; shift 2;;
    --requests) requests=$2; shift 2;;
    --measure) measure_s=$2; shift 2;;
    --verify) verify=1; shift;;
    *) echo "unknown argument $1" >&2; exit 2;;
  esac
done
[ -n "$out" ] || { echo "usage: $0 --out DIR [--concurrency N] [--requests N] [--measure S] [--verify]" >&2; exit 2; }
[ "$requests" -ge 4 ] || { echo "--requests must be at least 4" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/lib/scratch-nginx.bash"
VIDBENCH=${VIDBENCH:-$root/build/bin/vidbench}
[ -x "$VIDBENCH" ] || { echo "no vidbench binary at $VIDBENCH: run make first" >&2; exit 1; }
command -v nginx >/dev/null && command -v jq >/dev/null || { echo "needs nginx and jq (scripts/bootstrap)" >&2; exit 1; }
mkdir -p "$out"
[ ! -e "$out/load" ] || { echo "$out already holds a run" >&2; exit 1; }
out=$(cd "$out" && pwd)

T=$(mktemp -d /tmp/bench-load.XXXXXX)
sampler=""
cleanup() {
  [ -n "$sampler" ] && kill "$sampler" 2>/dev/null
  [ -f "$T/nginx.pid" ] && kill "$(cat "$T/nginx.pid")" 2>/dev/null
  sleep 0.2
  rm -rf "$T"
}
trap cleanup EXIT

chunk=524288 pace=10 file_size=$((64 * 1024 * 1024))
session_s=$(( (requests - 3) * pace + 2 ))
rate=$(awk -v c="$concurrency" -v d="$session_s" 'BEGIN { printf "%.4f", c / d }')
ramp_n=$(awk -v r="$rate" -v d="$session_s" 'BEGIN { printf "%d", r * d }')
measure_n=$(awk -v r="$rate" -v m="$measure_s" 'BEGIN { printf "%d", r * m }')

cat >"$T/library.json" <<JSON
{"version": 1, "name": "bench-load", "placement_seed": 1, "files": [
 {"id": 0, "path": "v/cached.mp4", "size": $file_size, "video": 0, "bitrate_kbps": 420, "duration_s": 1280.0, "rank": 1}]}
JSON
"$VIDBENCH" load materialize "$T/library.json" "$T/www" 2>/dev/null
cat "$T/www/v/cached.mp4" >/dev/null # into the page cache

# Sessions: consecutive chunks from a random chunk of the file.
awk -v n=$((ramp_n + measure_n)) -v ramp=$ramp_n -v k="$requests" -v chunk=$chunk -v pace=$pace \
    -v chunks=$((file_size / chunk)) 'BEGIN {
  srand(7)
  for (s = 0; s < n; s++) {
    phase = s < ramp ? "ramp-up" : "measure"
    if (s % 2 == 0) { class = "cable"; rate = 10000000 } else { class = "dsl"; rate = 3500000 }
    first = int(rand() * (chunks - k + 1))
    printf "{\"id\":%d,\"phase\":\"%s\",\"class\":\"%s\",\"rate_bps\":%d,\"delay_ms\":50,\"video\":0,\"requests\":[", s, phase, class, rate
    for (i = 0; i < k; i++) {
      a = (first + i) * chunk
      printf "%s{\"path\":\"/v/cached.mp4\",\"range\":[%d,%d],\"file_id\":0,%s\"timeout_s\":10}", (i ? "," : ""), a, a + chunk - 1, (i >= 3 ? "\"pace_s\":" pace "," : "")
    }
    print "]}"
  }
}' >"$T/sessions.jsonl"

scratch_nginx "$T" "$T/www" 10000 nginx || exit 1
port=$SCRATCH_NGINX_PORT
nginx_pid=$SCRATCH_NGINX_PID
nginx_worker=$(pgrep -P "$nginx_pid" | head -n1)

{
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(hostname), $(nproc) cores, $(awk '/MemTotal/ {print $2/1024/1024 " GiB"}' /proc/meminfo)"
  echo "kernel: $(uname -r)"
  echo "cpu: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
  echo "nginx: $(nginx -v 2>&1)"
  echo "vidbench: $("$VIDBENCH" --version) commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "tcp congestion control: $(cat /proc/sys/net/ipv4/tcp_congestion_control)"
  echo "parameters: concurrency $concurrency, $requests requests of $chunk bytes per session (3 unpaced, then every $pace s), rate $rate sessions/s, $ramp_n ramp-up + $measure_n measured sessions, classes 10 / 3.5 Mbps, 50 ms delay, verify ${verify:-off}"
} >"$out/setup.txt"
cat "$out/setup.txt"

verify_args=()
[ -n "$verify" ] && verify_args=(--verify "$T/library.json")
"$VIDBENCH" load "$T/sessions.jsonl" --server "http://127.0.0.1:$port" --rate "$rate" --seed 1 \
  --out "$out/load" "${verify_args[@]}" &
client=$!

# CPU seconds (utime + stime, clock ticks / CLK_TCK) of the client and the nginx worker.
tck=$(getconf CLK_TCK)
(
  echo "t_s,client_cpu_s,nginx_cpu_s"
  start=$(date +%s.%N)
  while kill -0 "$client" 2>/dev/null; do
    c=$(awk -v t="$tck" '{print ($14 + $15) / t}' "/proc/$client/stat" 2>/dev/null) || break
    n=$(awk -v t="$tck" '{print ($14 + $15) / t}' "/proc/$nginx_worker/stat" 2>/dev/null || echo "")
    echo "$(awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN {printf "%.2f", a - b}'),$c,$n"
    sleep 2
  done
) >"$out/cpu.csv" &
sampler=$!
wait "$client"
wait "$sampler" || true
sampler=""

# Figures from the raw files.
S="$out/load/summary.json"
read -r w0 w1 < <(jq -r '.measure_window_s | "\(.[0]) \(.[1])"' "$S")
steady_cpu=$(awk -F, -v a="$w0" -v b="$w1" 'NR > 1 && $1 >= a && $1 <= b { if (!n++) { t0 = $1; c0 = $2; g0 = $3 } t1 = $1; c1 = $2; g1 = $3 }
  END { if (n > 1) printf "{\"client_cores\": %.4f, \"nginx_cores\": %.4f, \"seconds\": %.1f}", (c1 - c0) / (t1 - t0), (g1 - g0) / (t1 - t0), t1 - t0; else print "null" }' "$out/cpu.csv")
peak_active=$(awk -F, 'NR > 1 && $10 > m { m = $10 } END { print m + 0 }' "$out/load/intervals.csv")
window_active=$(awk -F, -v a="$w0" -v b="$w1" 'NR > 1 && $1 >= a && $2 <= b { s += $10; n++ } END { printf "%.0f", n ? s / n : 0 }' "$out/load/intervals.csv")
jq -n --slurpfile s "$S" --argjson steady "$steady_cpu" --argjson peak "$peak_active" --argjson mean_active "$window_active" \
  --arg concurrency "$concurrency" '{
    target_concurrency: ($concurrency | tonumber),
    peak_active_sessions: $peak,
    mean_active_sessions_in_window: $mean_active,
    throughput_mb_s: $s[0].throughput_mb_s,
    sample_mean_mb_s: $s[0].samples.mean_mb_s,
    sample_ci95_mb_s: $s[0].samples.ci95_mb_s,
    failure_percent: $s[0].failure_percent,
    sessions: $s[0].sessions,
    offered_rate: $s[0].session_rate.offered,
    achieved_rate: $s[0].session_rate.achieved,
    start_lag_ms: $s[0].session_rate.start_lag_ms,
    cpu_in_window_from_proc: $steady,
    client_cpu_whole_run: $s[0].cpu,
    wall_s: $s[0].wall_s
  }' >"$out/bench.json"
cat "$out/bench.json"
