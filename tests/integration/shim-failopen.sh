#!/usr/bin/env bash
# Fail-open with real programs: the output is libc's and nothing hangs when
# the daemon is absent, never answers, or is killed in the middle of a run
# and restarted (the shim must reconnect and be served again).
set -euo pipefail
source "$(dirname "$0")/../../native/tests/shim-lib.bash"
shim_setup
shim_require_python
mkdir -p "$tmp/data" "$tmp/stats"
for i in $(seq 1 12); do head -c $((1 << 20)) /dev/urandom >"$tmp/data/f$i"; done
sock=$tmp/daemon.sock

# Reads every file in 64 KiB preads with a short pause, evicting as it goes,
# for about 2.5 s, and prints one hash per file.
cat >"$tmp/reader.py" <<'PY'
import hashlib, os, sys, time
for path in sys.argv[1:]:
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    h = hashlib.sha256()
    for off in range(0, 1 << 20, 65536):
        h.update(os.pread(fd, 65536, off))
        time.sleep(0.012)
    os.close(fd)
    print(os.path.basename(path), h.hexdigest(), flush=True)
PY
files=$(ls "$tmp"/data/f* | sort -V)
sync
"$python" "$tmp/reader.py" $files >"$tmp/libc.out"
status=0

run_reader() { # label, extra env...
  local label=$1; shift
  rm -f "$tmp/stats"/*.json
  local start=$SECONDS
  env LD_PRELOAD="$SHIM" LIBCEPTION_SOCKET="$sock" LIBCEPTION_TIMEOUT_MS=400 \
    LIBCEPTION_STATS="$tmp/stats/%p.json" "$@" timeout 60 "$python" "$tmp/reader.py" $files >"$tmp/$label.out" ||
    { echo "FAIL $label: reader failed or hung (exit $?)"; status=1; }
  cmp -s "$tmp/libc.out" "$tmp/$label.out" || { echo "FAIL $label: output differs"; status=1; }
  echo "$label: $((SECONDS - start)) s; connects $(shim_stat_sum "$tmp/stats" '*.json' connects)," \
    "connect failures $(shim_stat_sum "$tmp/stats" '*.json' connect_failures)," \
    "timeouts $(shim_stat_sum "$tmp/stats" '*.json' timeouts), broken $(shim_stat_sum "$tmp/stats" '*.json' broken)," \
    "fetches $(shim_stat_sum "$tmp/stats" '*.json' fetches)"
}

# 1. No daemon at all.
rm -f "$sock"
run_reader absent
[ "$(shim_stat_sum "$tmp/stats" '*.json' connect_failures)" -le 12 ] ||
  { echo "FAIL absent: connect storm (back-off not working)"; status=1; }

# 2. A daemon that accepts but never answers.
shim_start_daemon "$sock" "$tmp/never.log" never
run_reader never-replies
shim_stop_daemon
[ "$(shim_stat_sum "$tmp/stats" '*.json' timeouts)" -ge 1 ] || { echo "FAIL never-replies: no timeout"; status=1; }
[ "$(wc -l <"$tmp/never.log")" -le 8 ] || { echo "FAIL never-replies: $(wc -l <"$tmp/never.log") requests, back-off should limit them"; status=1; }

# 3. Killed mid-run, restarted later.
shim_start_daemon "$sock" "$tmp/first.log"
echo "daemon: $DAEMON_KIND"
(
  sleep 0.8; kill -KILL "$DAEMON_PID"; rm -f "$sock"; sleep 0.8
  if [ "$DAEMON_KIND" = real ]; then exec "$LIBCEPTION" daemon --socket "$sock" >"$tmp/second.log" 2>&1
  else exec "$FAKEDAEMON" --socket "$sock" --log "$tmp/second.log"; fi
) &
killer=$!
run_reader killed-restarted
kill "$killer" 2>/dev/null || true
wait "$killer" 2>/dev/null || true
DAEMON_PID=
fetches=$(shim_stat_sum "$tmp/stats" '*.json' fetches)
failures=$(( $(shim_stat_sum "$tmp/stats" '*.json' broken) + $(shim_stat_sum "$tmp/stats" '*.json' connect_failures) + $(shim_stat_sum "$tmp/stats" '*.json' timeouts) ))
connects=$(shim_stat_sum "$tmp/stats" '*.json' connects)
[ "$failures" -ge 1 ] || { echo "FAIL killed-restarted: the shim never noticed the daemon dying"; status=1; }
[ "$connects" -ge 2 ] || { echo "FAIL killed-restarted: the shim did not reconnect to the restarted daemon"; status=1; }
if [ "$DAEMON_KIND" = fake ]; then
  [ -s "$tmp/second.log" ] || { echo "FAIL killed-restarted: the restarted daemon got no request"; status=1; }
fi
exit $status
