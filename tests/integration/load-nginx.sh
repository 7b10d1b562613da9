#!/usr/bin/env bash
# vidbench load against a real nginx: a small library is written to a temp dir
# with its generated content (`vidbench load materialize`), nginx serves it on
# 127.0.0.1 with a temp config, and the load client plays capped, delayed,
# paced sessions of range and whole-file requests with --verify. Every session
# must complete and every byte must verify; then one byte of one file is
# flipped on disk and the same run must fail exactly the sessions that read it,
# with cause "verify".
set -u
VIDBENCH=${VIDBENCH:-${LIBCEPTION_BUILD:-$PWD/build}/bin/vidbench}
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
source "$(dirname "$0")/../../scripts/lib/scratch-nginx.bash"
[ -x "$VIDBENCH" ] || { echo "vidbench binary not found at $VIDBENCH (run make first)"; exit 77; }
[ -x "$NGINX" ] || { echo "nginx is not installed (scripts/bootstrap installs nginx-light)"; exit 77; }
command -v jq >/dev/null || { echo "jq is not installed"; exit 77; }

T=$(mktemp -d /tmp/load-nginx.XXXXXX)
cleanup() {
  [ -f "$T/nginx.pid" ] && kill "$(cat "$T/nginx.pid")" 2>/dev/null
  sleep 0.2
  rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

# Three 1 MB files with ids that differ from their positions.
cat >"$T/library.json" <<'JSON'
{"version": 1, "name": "load-nginx", "placement_seed": 1, "files": [
 {"id": 11, "path": "v/a.mp4", "size": 1048576, "video": 0, "bitrate_kbps": 420, "duration_s": 20.0, "rank": 1},
 {"id": 12, "path": "v/b.mp4", "size": 1048576, "video": 1, "bitrate_kbps": 420, "duration_s": 20.0, "rank": 2},
 {"id": 13, "path": "v/c.mp4", "size": 1000003, "video": 2, "bitrate_kbps": 420, "duration_s": 20.0, "rank": 3}]}
JSON
"$VIDBENCH" load materialize "$T/library.json" "$T/www" || fail "materialize"
[ "$(stat -c %s "$T/www/v/c.mp4")" = 1000003 ] || fail "materialized file has the wrong size"

# Six sessions: two unpaced then paced range requests (file ids resolved from
# the library by path for some, given for others), one whole-file request.
{
  for s in 0 1 2 3 4 5; do
    f=$(( s % 3 )); name=$(echo a b c | cut -d' ' -f$((f + 1)))
    class=dsl; rate=3500000; [ $((s % 2)) = 0 ] && { class=cable; rate=10000000; }
    fid=""; [ $((s % 2)) = 0 ] && fid=",\"file_id\":$((11 + f))"
    reqs=""
    for c in 0 1 2 3; do
      a=$((c * 200000)); b=$((a + 199999)); pace=""; [ $c -ge 2 ] && pace=',"pace_s":0.5'
      reqs="$reqs{\"path\":\"/v/$name.mp4\",\"range\":[$a,$b]$fid$pace,\"timeout_s\":10},"
    done
    reqs="$reqs{\"path\":\"/v/$name.mp4\",\"pace_s\":0.5,\"timeout_s\":10}"
    echo "{\"id\":$s,\"phase\":\"measure\",\"class\":\"$class\",\"rate_bps\":$rate,\"delay_ms\":20,\"video\":$f,\"requests\":[$reqs]}"
  done
} >"$T/sessions.jsonl"

scratch_nginx "$T" "$T/www" 1024 "$NGINX" || fail "nginx did not start"
port=$SCRATCH_NGINX_PORT

run() { # out-dir
  "$VIDBENCH" load "$T/sessions.jsonl" --server "http://127.0.0.1:$port" --rate 20 \
    --out "$1" --verify "$T/library.json" --seed 3 --interval 1 -q
}

run "$T/ok" || fail "the load run exited with an error"
S="$T/ok/summary.json"
[ "$(jq .sessions.started "$S")" = 6 ] || fail "sessions started: $(jq .sessions "$S")"
[ "$(jq .sessions.completed "$S")" = 6 ] || fail "not every session completed: $(jq -c .sessions "$S") $(jq -c .errors "$S")"
[ "$(jq .failure_percent "$S")" = 0 ] || fail "failure percent $(jq .failure_percent "$S")"
[ "$(jq .verify.mismatches "$S")" = 0 ] || fail "verify mismatches"
# 6 sessions x (4 x 200,000 + a whole file); files a,b are 1 MiB, c is 1,000,003 bytes.
want=$(( 6 * 800000 + 2 * (1048576 + 1048576 + 1000003) ))
[ "$(jq .verify.bytes_checked "$S")" = $want ] || fail "bytes checked $(jq .verify.bytes_checked "$S"), want $want"
[ "$(jq .requests.completed_bytes "$S")" = $want ] || fail "completed bytes $(jq .requests.completed_bytes "$S"), want $want"
rows=$(tail -n +2 "$T/ok/requests.csv" | wc -l)
[ "$rows" = 30 ] || fail "requests.csv has $rows rows, want 30"
bad=$(tail -n +2 "$T/ok/requests.csv" | awk -F, '$12 != "ok" || ($6 != "" && $11 != 206) || ($6 == "" && $11 != 200)' | wc -l)
[ "$bad" = 0 ] || fail "requests with a wrong status or outcome: $(awk -F, '$12 != "ok"' "$T/ok/requests.csv")"
[ "$(tail -n +2 "$T/ok/sessions.csv" | wc -l)" = 6 ] || fail "sessions.csv rows"

# Flip one byte of c.mp4 (inside the first range) on disk: the sessions on c fail with "verify".
printf '\x00' | dd of="$T/www/v/c.mp4" bs=1 seek=12345 conv=notrunc status=none
orig=$(od -An -tu1 -j12345 -N1 "$T/www/v/c.mp4" | tr -d ' ')
if [ "$orig" = 0 ]; then printf '\x01' | dd of="$T/www/v/c.mp4" bs=1 seek=12345 conv=notrunc status=none; fi
run "$T/bad" || fail "the second load run exited with an error"
S="$T/bad/summary.json"
# The flipped byte may by chance equal the generated one; only 1 in 256 and then both writes cannot match.
[ "$(jq '.sessions.failed_by_cause.verify' "$S")" = 2 ] || fail "want 2 sessions failed by verify: $(jq -c .sessions "$S")"
[ "$(jq .sessions.completed "$S")" = 4 ] || fail "want 4 completed: $(jq -c .sessions "$S")"
grep -q "byte 12345 differs" "$T/bad/sessions.csv" || fail "sessions.csv does not name the wrong byte"
echo "load-nginx: 6 sessions verified against nginx; a flipped byte failed its 2 sessions"
exit 0
