#!/usr/bin/env bash
# `vidbench workload` end to end through the real binary: every bundled spec
# generates a complete, readable directory (its spec.toml a copy, or for a
# spec that `extends` another the merged spec, which parses alone); `summary` recomputes Table 3 from the
# files and agrees with summary.json; generation is deterministic; a bad spec is
# refused naming the key and line, and leaves nothing behind.
set -euo pipefail
cd "$(dirname "$0")/../.."
VB=${VIDBENCH:-${LIBCEPTION_BUILD:-$PWD/build}/bin/vidbench}
[ -x "$VB" ] || { echo "FAIL: $VB not built (run make)"; exit 1; }

tmp=$(mktemp -d /tmp/workload-gen.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

for spec in bench/specs/*.toml; do
  name=$(basename "$spec" .toml)
  "$VB" workload gen "$spec" --out "$tmp/$name" --quiet > /dev/null
  for f in library.json sessions.jsonl sessions.wsesslog warm.txt summary.json summary.md spec.toml spec.resolved.toml; do
    [ -s "$tmp/$name/$f" ] || { echo "FAIL: $name: $f missing or empty"; exit 1; }
  done
  if grep -q '^extends *=' "$spec"; then
    # A spec that extends another is recorded merged: it stands alone.
    head -1 "$tmp/$name/spec.toml" | grep -q '^# Resolved from' && ! grep -q '^extends *=' "$tmp/$name/spec.toml" \
      || { echo "FAIL: $name: spec.toml is not the merged spec"; exit 1; }
    "$VB" workload check "$tmp/$name/spec.toml" > /dev/null || { echo "FAIL: $name: the merged spec.toml does not parse alone"; exit 1; }
  else
    cmp -s "$spec" "$tmp/$name/spec.toml" || { echo "FAIL: $name: spec.toml is not a copy of $spec"; exit 1; }
  fi
  # Recomputed from library.json + sessions.jsonl, and from the wsesslog: same figures.
  "$VB" workload summary "$tmp/$name" --json > "$tmp/$name.recomputed.json"
  "$VB" workload summary "$tmp/$name" --json --sessions "$tmp/$name/sessions.wsesslog" > "$tmp/$name.wsesslog.json"
  python3 - "$tmp/$name/summary.json" "$tmp/$name.recomputed.json" "$tmp/$name.wsesslog.json" <<'PY'
import json, sys
a, b, c = (json.load(open(p)) for p in sys.argv[1:])
assert a == b, f"summary.json differs from the recomputed summary"
assert a == c, f"the wsesslog gives a different summary from the JSON lines"
t = a["table3"]
assert t["unique_videos"] > 0 and t["total_chunks_requested"] >= t["unique_chunks_requested"] >= t["chunks_viewed_once"]
PY
  echo "ok: $name: $(grep -c '' "$tmp/$name/sessions.jsonl") sessions, summary agrees"
done

# Deterministic: the same spec twice gives the same bytes; another seed does not.
"$VB" workload gen bench/specs/small.toml --out "$tmp/again" --quiet > /dev/null
diff -r "$tmp/small" "$tmp/again" > /dev/null || { echo "FAIL: two runs of small.toml differ"; exit 1; }
"$VB" workload gen bench/specs/small.toml --out "$tmp/seed2" --seed 2 --quiet > /dev/null
if cmp -s "$tmp/small/sessions.jsonl" "$tmp/seed2/sessions.jsonl"; then echo "FAIL: --seed 2 changed nothing"; exit 1; fi
echo "ok: deterministic given the seed"

# An existing directory is not overwritten without --force.
if "$VB" workload gen bench/specs/small.toml --out "$tmp/small" > "$tmp/out" 2>&1; then
  echo "FAIL: overwrote an existing directory"; exit 1
fi
grep -q "already exists" "$tmp/out" || { echo "FAIL: unclear error:"; cat "$tmp/out"; exit 1; }

# Bad specs: the error names the key and line, exit status 1, nothing written.
printf '[sessions]\ncount = 100\nramp_up = 10\nramp_down = 10\nclasses = [\n  { name = "a", rate_mbps = -1, share = 1.0 },\n]\n' > "$tmp/bad.toml"
if "$VB" workload gen "$tmp/bad.toml" --out "$tmp/bad" > "$tmp/out" 2>&1; then echo "FAIL: accepted a negative rate"; exit 1; fi
grep -qF "bad.toml:6: sessions.classes[0].rate_mbps" "$tmp/out" || { echo "FAIL: error does not name key and line:"; cat "$tmp/out"; exit 1; }
printf '[library]\nvideos = 10\nvidoes = 20\n' > "$tmp/typo.toml"
if "$VB" workload gen "$tmp/typo.toml" --out "$tmp/typo" > "$tmp/out" 2>&1; then echo "FAIL: accepted an unknown key"; exit 1; fi
grep -q "line 3" "$tmp/out" && grep -q "vidoes" "$tmp/out" || { echo "FAIL: unknown key not named:"; cat "$tmp/out"; exit 1; }
[ ! -e "$tmp/bad" ] && [ ! -e "$tmp/typo" ] || { echo "FAIL: something was written for a bad spec"; exit 1; }
if ls -a "$tmp" | grep -q '\.tmp-'; then echo "FAIL: a temporary directory was left behind"; exit 1; fi
echo "ok: bad specs refused: $(head -1 "$tmp/out")"
