# Shared by the tests of the analysis scripts that read one run directory
# (window-positionings.sh, window-demand.sh): a scratch directory removed at
# exit, `fail`, and `rejects RUN WHAT EXPECTED`: "$script" on RUN must fail
# with EXPECTED in its message and no Python traceback. Sourced, not run.
tmp=$(mktemp -d /tmp/run-script.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

rejects() {
  local err
  err=$(python3 "$script" "$1" 2>&1) && fail "$2 accepted"
  echo "$err" | grep -q "$3" || fail "$2: $err"
  if echo "$err" | grep -q Traceback; then fail "$2: a traceback: $err"; fi
}
