# shim-lib.bash - helpers sourced by tests/integration/shim-*.sh: where the
# shim and daemons are, making files cold, starting and stopping a daemon
# (the real `libception daemon` when it is built and working, otherwise the
# fake daemon of native/tests), and reading the shim's JSON statistics.
# Callers set -eu and either call shim_setup or set a trap that calls
# shim_cleanup themselves.

BUILD=${LIBCEPTION_BUILD:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build}
SHIM=$BUILD/libdeception.so
FAKEDAEMON=$BUILD/native/plain/lib/fakedaemon
LIBCEPTION=$BUILD/bin/libception
DAEMON_PID=
DAEMON_KIND=

shim_require_build() {
  for f in "$SHIM" "$FAKEDAEMON"; do
    [ -e "$f" ] || { echo "missing $f: run make first"; exit 77; }
  done
}

# The usual start of a test: skip without a build; a scratch directory $tmp,
# removed at exit after any daemon started here is stopped.
shim_setup() {
  shim_require_build
  tmp=$(mktemp -d)
  trap 'shim_cleanup; rm -rf "$tmp"' EXIT
}

# Sets $python to python3's own executable (not a wrapper script, so that
# LD_PRELOAD reaches the interpreter); skips the test without python3.
shim_require_python() {
  local found
  found=$(command -v python3 || true)
  [ -n "$found" ] || { echo "python3 is needed"; exit 77; }
  python=$("$found" -c 'import sys; print(sys.executable)')
}

# The real daemon counts as present once `libception daemon --help` works.
shim_real_daemon_available() {
  [ -x "$LIBCEPTION" ] && "$LIBCEPTION" daemon --help >/dev/null 2>&1
}

# shim_start_daemon SOCKET LOG [fake-behaviour]
# (SHIM_DAEMON_ARGS: more arguments for the real daemon, e.g. --trust-uid)
shim_start_daemon() {
  local sock=$1 log=$2 behaviour=${3:-}
  rm -f "$sock"
  if [ -z "$behaviour" ] && shim_real_daemon_available; then
    DAEMON_KIND=real
    # shellcheck disable=SC2086 # a word list on purpose
    "$LIBCEPTION" daemon --socket "$sock" ${SHIM_DAEMON_ARGS:-} >"$log" 2>&1 &
  else
    DAEMON_KIND=fake
    "$FAKEDAEMON" --socket "$sock" --behaviour "${behaviour:-normal}" --log "$log" &
  fi
  DAEMON_PID=$!
  for _ in $(seq 200); do
    [ -S "$sock" ] && return 0
    sleep 0.05
  done
  echo "daemon ($DAEMON_KIND) did not create $sock"; cat "$log" || true
  return 1
}

shim_stop_daemon() {
  local signal=${1:-TERM}
  if [ -n "$DAEMON_PID" ]; then
    kill -"$signal" "$DAEMON_PID" 2>/dev/null || true
    wait "$DAEMON_PID" 2>/dev/null || true
    DAEMON_PID=
  fi
}

# Make files cold: write back, then drop their pages.
shim_evict() {
  local f
  for f in "$@"; do
    sync "$f"
    dd if="$f" iflag=nocache count=0 status=none
  done
}

# shim_stat_sum DIR PATTERN KEY [AFTER]: sum of "KEY": N over the JSON files
# DIR/PATTERN, counting from the first occurrence of AFTER in each file.
shim_stat_sum() {
  local dir=$1 pattern=$2 key=$3 after=${4:-}
  local total=0 f v
  for f in "$dir"/$pattern; do
    [ -e "$f" ] || continue
    if [ -n "$after" ]; then
      v=$(sed -n "/$after/,\$p" "$f" | grep -o "\"$key\": [0-9]*" | head -1 | awk '{print $2}')
    else
      v=$(grep -o "\"$key\": [0-9]*" "$f" | head -1 | awk '{print $2}')
    fi
    total=$((total + ${v:-0}))
  done
  echo "$total"
}

shim_cleanup() {
  shim_stop_daemon KILL
}
