#!/usr/bin/env bash
# `vidbench disk` refuses bad input with an error that names what and where:
# unknown preset, bad manifest, bad TOML drive file (unknown key, wrong type,
# invalid value), missing mount point, a library larger than the drive, and
# unmounting something that is not a vidbench disk. Runs without root (every
# case fails before anything is mounted).
set -euo pipefail
cd "$(dirname "$0")/../.."
VB=${VIDBENCH:-${LIBCEPTION_BUILD:-$PWD/build}/bin/vidbench}
[ -x "$VB" ] || { echo "FAIL: $VB not built (run make)"; exit 1; }

tmp=$(mktemp -d /tmp/disk-errors.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/mnt"
"$VB" disk library "$tmp/lib.json" --files 3 --size-mib 1

# expect_error DESCRIPTION PATTERN... -- COMMAND...
expect_error() {
  local what=$1; shift
  local patterns=()
  while [ "$1" != -- ]; do patterns+=("$1"); shift; done
  shift
  if "$@" > "$tmp/out" 2>&1; then echo "FAIL: $what: command succeeded"; cat "$tmp/out"; exit 1; fi
  for p in "${patterns[@]}"; do
    grep -qF -- "$p" "$tmp/out" || { echo "FAIL: $what: error does not mention '$p':"; cat "$tmp/out"; exit 1; }
  done
  echo "ok: $what: $(head -1 "$tmp/out")"
}

expect_error "unknown preset" "wd-blue" "wd-red-1tb" -- \
  "$VB" disk mount "$tmp/mnt" --library "$tmp/lib.json" --preset wd-blue
expect_error "no preset" "--preset" -- \
  "$VB" disk mount "$tmp/mnt" --library "$tmp/lib.json"
echo '{"version": 1, "name": "x",' > "$tmp/broken.json"
expect_error "broken manifest" "broken.json" "line" -- \
  "$VB" disk mount "$tmp/mnt" --library "$tmp/broken.json" --preset ssd
expect_error "missing manifest" "nothere.json" -- \
  "$VB" disk mount "$tmp/mnt" --library "$tmp/nothere.json" --preset ssd
python3 - "$tmp/lib.json" "$tmp/dup.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d["files"][1]["id"] = d["files"][0]["id"]
json.dump(d, open(sys.argv[2], "w"))
PY
expect_error "invalid manifest" "dup.json" "used twice" -- \
  "$VB" disk mount "$tmp/mnt" --library "$tmp/dup.json" --preset ssd
printf 'preset = "wd-red-1tb"\nrmp = 7200\n' > "$tmp/typo.toml"
expect_error "unknown TOML key" "typo.toml" "rmp" -- \
  "$VB" disk mount "$tmp/mnt" --library "$tmp/lib.json" --config "$tmp/typo.toml"
printf 'preset = "wd-red-1tb"\nrpm = "fast"\n' > "$tmp/type.toml"
expect_error "wrong TOML type" "type.toml" -- \
  "$VB" disk mount "$tmp/mnt" --library "$tmp/lib.json" --config "$tmp/type.toml"
printf 'preset = "wd-red-1tb"\nrpm = [\n' > "$tmp/syntax.toml"
expect_error "TOML syntax" "syntax.toml" -- \
  "$VB" disk mount "$tmp/mnt" --library "$tmp/lib.json" --config "$tmp/syntax.toml"
printf 'preset = "wd-red-1tb"\nncq_depth = 0\n' > "$tmp/value.toml"
expect_error "invalid value" "ncq_depth" -- \
  "$VB" disk mount "$tmp/mnt" --library "$tmp/lib.json" --config "$tmp/value.toml"
expect_error "invalid override" "seek_sqrt_weight" -- \
  "$VB" disk mount "$tmp/mnt" --library "$tmp/lib.json" --preset wd-red-1tb --seek-sqrt-weight 2
expect_error "missing mount point" "$tmp/nodir" -- \
  "$VB" disk mount "$tmp/nodir" --library "$tmp/lib.json" --preset ssd
touch "$tmp/afile"
expect_error "mount point not a directory" "not a directory" -- \
  "$VB" disk mount "$tmp/afile" --library "$tmp/lib.json" --preset ssd
"$VB" disk library "$tmp/big.json" --files 3 --size-mib 1000
expect_error "library larger than the drive" "does not fit" "big.json" -- \
  "$VB" disk mount "$tmp/mnt" --library "$tmp/big.json" --preset ssd --capacity-gb 1
expect_error "unmount a non-vidbench mount" "not a vidbench disk" -- \
  "$VB" disk unmount /proc
expect_error "unmount a plain directory" "not a mount point" -- \
  "$VB" disk unmount "$tmp/mnt"
expect_error "stat of a plain directory" "vidbench disk mount" -- \
  "$VB" disk stat "$tmp/mnt"
"$VB" disk presets > "$tmp/presets"
for p in wd-red-1tb hp-146g-10k st1000dm003 ssd; do grep -q "^$p" "$tmp/presets" || { echo "FAIL: presets lacks $p"; exit 1; }; done
"$VB" disk presets --toml st1000dm003 > "$tmp/st.toml"
"$VB" disk model --config "$tmp/st.toml" --out "$tmp/model.json" > /dev/null
grep -q '"preset": "st1000dm003"' "$tmp/model.json" || { echo "FAIL: model from presets --toml"; exit 1; }
echo "disk-errors: ok"
