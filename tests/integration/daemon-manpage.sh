#!/usr/bin/env bash
# Every flag `libception --help` lists, for every subcommand, is documented in
# docs/man/libception.1, and the page renders without warnings.
set -u
cd "$(dirname "$0")/../.."
BIN=${LIBCEPTION_BUILD:-$PWD/build}/bin/libception
PAGE=docs/man/libception.1
[ -x "$BIN" ] || { echo "libception binary missing at $BIN; run make first"; exit 1; }
fail=0
for cmd in "" daemon stat fetch run; do
  flags=$("$BIN" $cmd --help | grep -oE '^ +(-[a-zA-Z], )?--[a-z][a-z-]*' | grep -oE -- '--[a-z][a-z-]*' | sort -u)
  [ -n "$flags" ] || { echo "FAIL: no flags parsed from 'libception $cmd --help'"; fail=1; }
  for f in $flags; do
    escaped=$(printf '%s' "$f" | sed 's/-/\\\\-/g')
    grep -q -- "$escaped" "$PAGE" || { echo "FAIL: $f of 'libception $cmd' is not in $PAGE"; fail=1; }
  done
done
if command -v groff >/dev/null; then
  warnings=$(groff -man -Tutf8 -ww -z "$PAGE" 2>&1)
  [ -z "$warnings" ] || { echo "FAIL: groff warnings:"; echo "$warnings"; fail=1; }
fi
exit $fail
