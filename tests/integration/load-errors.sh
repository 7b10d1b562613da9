#!/usr/bin/env bash
# vidbench load's command line on bad input: each case must exit non-zero with
# one clear message naming what is wrong and where, and write no results.
set -u
VIDBENCH=${VIDBENCH:-${LIBCEPTION_BUILD:-$PWD/build}/bin/vidbench}
[ -x "$VIDBENCH" ] || { echo "vidbench binary not found at $VIDBENCH (run make first)"; exit 77; }
T=$(mktemp -d /tmp/load-errors.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

good='{"id":0,"class":"dsl","rate_bps":0,"delay_ms":0,"video":0,"requests":[{"path":"/a","timeout_s":10}]}'
printf '%s\n' "$good" >"$T/ok.jsonl"
printf '%s\n{"id":1,"class":"dsl"\n' "$good" >"$T/bad.jsonl"
# A port nobody listens on: bind one, note it, release it.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null || echo 9)

expect_error() { # name, expected text, args...
  local name=$1 want=$2; shift 2
  "$VIDBENCH" load "$@" >"$T/out.txt" 2>&1 && fail "$name: exited 0"
  grep -q -- "$want" "$T/out.txt" || { cat "$T/out.txt"; fail "$name: message does not say \"$want\""; }
  [ "$(grep -c . "$T/out.txt")" -le 3 ] || { cat "$T/out.txt"; fail "$name: more than 3 lines of error"; }
}

expect_error "malformed line" "bad.jsonl:2" "$T/bad.jsonl" --server "http://127.0.0.1:$port" --rate 1 --out "$T/r1"
expect_error "missing file" "nope.jsonl" "$T/nope.jsonl" --server "http://127.0.0.1:$port" --rate 1 --out "$T/r2"
expect_error "unreachable" "127.0.0.1:$port.*unreachable" "$T/ok.jsonl" --server "http://127.0.0.1:$port" --rate 1 --out "$T/r3"
expect_error "https" "only http://" "$T/ok.jsonl" --server "https://127.0.0.1:$port" --rate 1 --out "$T/r4"
expect_error "bad rate" "rate" "$T/ok.jsonl" --server "http://127.0.0.1:$port" --rate 0 --out "$T/r5"
expect_error "missing library" "missing-library.json" "$T/ok.jsonl" --server "http://127.0.0.1:$port" --rate 1 --out "$T/r6" --verify "$T/missing-library.json"
expect_error "both stops" "cannot be used with" "$T/ok.jsonl" --server "http://127.0.0.1:$port" --rate 1 --out "$T/r7" --duration 5 --sessions 3
for r in r1 r2 r3 r4 r5 r6 r7; do
  [ ! -e "$T/$r/requests.csv" ] || fail "$r: results written after an error"
done
echo "load-errors: 7 kinds of bad input give one clear error each"
exit 0
