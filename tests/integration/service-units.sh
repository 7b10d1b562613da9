#!/usr/bin/env bash
# The systemd units in dist/systemd/: `make install-service` installs them
# under DESTDIR/PREFIX with ExecStart naming PREFIX/bin, `systemd-analyze
# verify` accepts them (exit 77 where systemd-analyze is missing), and
# `make uninstall-service` removes every file it installed.
set -u
cd "$(dirname "$0")/../.."
BIN=${LIBCEPTION_BUILD:-$PWD/build}/bin/libception
[ -x "$BIN" ] || { echo "libception binary missing at $BIN; run make first"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# DESTDIR staging: the unit names PREFIX/bin, not the staging directory.
make -s install-service DESTDIR="$tmp/stage" PREFIX=/usr >/dev/null || { echo "FAIL: make install-service"; exit 1; }
units=$tmp/stage/usr/lib/systemd/system
for f in "$units/libception.service" "$units/libception.socket" "$tmp/stage/usr/lib/sysusers.d/libception.conf"; do
  [ -f "$f" ] || { echo "FAIL: $f not installed"; fail=1; }
done
grep -qx 'ExecStart=/usr/bin/libception daemon --socket /run/libception.sock $LIBCEPTION_OPTS' "$units/libception.service" \
  || { echo "FAIL: ExecStart does not name /usr/bin/libception"; fail=1; }
grep -q '@BINDIR@' "$units/libception.service" && { echo "FAIL: @BINDIR@ left in the installed unit"; fail=1; }
make -s uninstall-service DESTDIR="$tmp/stage" PREFIX=/usr >/dev/null || { echo "FAIL: make uninstall-service"; fail=1; }
left=$(find "$tmp/stage" -type f)
[ -z "$left" ] || { echo "FAIL: uninstall-service left: $left"; fail=1; }

if ! command -v systemd-analyze >/dev/null; then
  [ $fail -eq 0 ] || exit 1
  echo "systemd-analyze not installed: units installed and removed, not verified" >&2
  exit 77
fi
# Verify needs ExecStart to exist: install into a real prefix with the binary.
# --man=no: the man page need not be installed on the machine running the test.
prefix=$tmp/prefix
mkdir -p "$prefix/bin" && cp "$BIN" "$prefix/bin/libception"
make -s install-service PREFIX="$prefix" >/dev/null || { echo "FAIL: make install-service PREFIX=$prefix"; exit 1; }
out=$(systemd-analyze verify --man=no "$prefix/lib/systemd/system/libception.socket" "$prefix/lib/systemd/system/libception.service" 2>&1)
rc=$?
# Complaints about other units on this machine are not ours.
ours=$(printf '%s\n' "$out" | grep -i 'libception' || true)
if [ $rc -ne 0 ] || [ -n "$ours" ]; then
  echo "FAIL: systemd-analyze verify (exit $rc):"; printf '%s\n' "$out"; fail=1
fi
# The options the unit documents are ones the daemon accepts.
"$BIN" daemon --help | grep -q -- '--trust-uid' || { echo "FAIL: the daemon has no --trust-uid"; fail=1; }
exit $fail
