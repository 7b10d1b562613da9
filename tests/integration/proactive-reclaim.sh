#!/usr/bin/env bash
# Pauses of DAMON's proactive reclaim are shared and survive SIGKILL
# (scripts/proactive-reclaim, `vidbench proactive-reclaim`, reclaim.rs):
#  1. a script that pauses holds every running kdamond off, and its release
#     turns them on again;
#  2. while two scripts hold a pause, the first release leaves them off;
#  3. a script SIGKILLed while holding a pause leaves them off and its record
#     says so ("dead"); `recover` turns them on again.
# On a machine without a running kdamond the same steps must change nothing.
# Uses a private registry (VIDBENCH_RECLAIM_REGISTRY) so that it never touches
# the pause of a benchmark running beside it. Needs root.
set -euo pipefail
cd "$(dirname "$0")/../.."
export VIDBENCH=${VIDBENCH:-${LIBCEPTION_BUILD:-$PWD/build}/bin/vidbench}
if [ "$(id -u)" -ne 0 ]; then echo "skip: needs root (DAMON's sysfs)"; exit 77; fi
[ -x "$VIDBENCH" ] || { echo "FAIL: $VIDBENCH not built (run make)"; exit 1; }
tmp=$(mktemp -d /tmp/proactive-reclaim.XXXXXX)
export VIDBENCH_RECLAIM_REGISTRY=$tmp/registry
admin=/sys/kernel/mm/damon/admin/kdamonds
states() { for k in "$admin"/[0-9]*; do [ -f "$k/state" ] && echo "$(basename "$k")=$(cat "$k/state")"; done 2>/dev/null | tr '\n' ' '; }
before=$(states)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  scripts/proactive-reclaim recover 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; scripts/proactive-reclaim status || true; exit 1; }
running=$(states | grep -o '[0-9]*=on' | sed 's/=on//' | tr '\n' ' ' || true)
off_now() { for k in $running; do [ "$(cat "$admin/$k/state")" = off ] || return 1; done; }
on_now() { for k in $running; do [ "$(cat "$admin/$k/state")" = on ] || return 1; done; }
echo "kdamonds running before: ${running:-none}"

# A holder: a shell that pauses, says so, and waits for a line on its fifo.
holder() { # name
  mkfifo "$tmp/$1.in"
  bash -c 'scripts/proactive-reclaim pause 2>/dev/null; echo paused > "$0.out"; read -r cmd < "$0.in"; scripts/proactive-reclaim "$cmd" 2>/dev/null; echo done > "$0.out"' "$tmp/$1" &
  pids+=($!)
  for _ in $(seq 100); do [ -s "$tmp/$1.out" ] && return 0; sleep 0.05; done
  fail "holder $1 did not pause"
}
tell() { echo "$2" > "$tmp/$1.in"; for _ in $(seq 100); do grep -q done "$tmp/$1.out" && return 0; sleep 0.05; done; fail "holder $1 did not $2"; }

# 1 and 2.
holder a
off_now || fail "a running kdamond is still on while a script holds a pause"
holder b
tell a release
off_now || fail "the first release turned a kdamond on while another script still holds it"
tell b release
on_now || fail "the last release did not turn the kdamonds on again"
[ "$(states)" = "$before" ] || fail "kdamond states changed: $before -> $(states)"

# 3.
holder c
kill -KILL "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
off_now || fail "a kdamond came on although its holder was killed before releasing"
if [ -n "$running" ]; then
  scripts/proactive-reclaim status | grep -q "dead" || fail "status does not show the killed holder's record"
fi
scripts/proactive-reclaim recover 2>/dev/null
on_now || fail "recover did not turn on what the killed holder left off"
[ "$(states)" = "$before" ] || fail "kdamond states changed: $before -> $(states)"
[ -z "$(ls "$tmp/registry" 2>/dev/null)" ] || fail "records left: $(ls "$tmp/registry")"
echo "proactive-reclaim: ok"
