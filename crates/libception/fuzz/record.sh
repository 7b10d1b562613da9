#!/bin/sh
# Records a run of a fuzz target as docs/results/fuzz/DATE/TARGET/: the
# command, the machine, libFuzzer's final stats (inputs run, crashes), the
# peak RSS and times from /usr/bin/time -v, and the progress log. Leaks are
# crashes here: the connection target panics on a descriptor left open.
#
#   crates/libception/fuzz/record.sh TARGET RUNS [libFuzzer flags...]
#   crates/libception/fuzz/record.sh --collect WORKDIR TARGET RUNS "COMMAND" START END RC [COMMIT]
#
# The second form only records a run made by hand in WORKDIR the same way
# (time.txt from /usr/bin/time -v -o, fuzz.err, artifacts/).
#
# Builds with AddressSanitizer (cargo +nightly fuzz build -O), runs in a
# scratch directory from the target's seeds (new inputs go to corpus/),
# writes NOTES-raw.md beside the logs; NOTES.md is written by hand from it.
# SANITIZER=none builds without one (cargo fuzz build -s none) and records
# as TARGET-nosan: its RSS is the daemon's and libFuzzer's own, without
# AddressSanitizer's quarantine and shadow memory.
set -eu
sanitizer=${SANITIZER:-address}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
if [ "$1" = --collect ]; then
    work=$2 target=$3 runs=$4 cmd=$5 start=$6 end=$7 rc=$8
    commit=${9:-$(git -C "$repo" rev-parse HEAD)}
else
    target=$1 runs=$2
    shift 2
    work=$(mktemp -d /tmp/libception-fuzz.XXXXXX)
    # The commit the binary is built from, taken before a run that may last hours.
    commit=$(git -C "$repo" rev-parse HEAD)$(git -C "$repo" diff --quiet || echo ' (with local changes)')
    (cd "$here" && cargo +nightly fuzz build -O -s "$sanitizer" "$target")
    cp "$here/target/x86_64-unknown-linux-gnu/release/$target" "$work/"
    mkdir -p "$work/corpus" "$work/artifacts"
    cmd="./$target -runs=$runs -print_funcs=0 -print_final_stats=1 -artifact_prefix=artifacts/ $* corpus seeds"
    cp -r "$here/seeds/$target" "$work/seeds"
    start=$(date -u +%FT%TZ)
    rc=0
    (cd "$work" && /usr/bin/time -v -o time.txt sh -c "$cmd" >fuzz.log 2>fuzz.err) || rc=$?
    end=$(date -u +%FT%TZ)
fi
# A run made by hand may have left /usr/bin/time's report in its stderr.
[ -f "$work/time.txt" ] || grep "$(printf '^\t')" "$work/fuzz.err" >"$work/time.txt" || true
name=$target
[ "$sanitizer" = address ] || name=$target-nosan
out="$repo/docs/results/fuzz/${start%%T*}/$name"
mkdir -p "$out"
cp "$work/time.txt" "$out/time.txt"
grep '^stat::' "$work/fuzz.err" >"$out/final-stats.txt" || true
grep -E '^#[0-9]+' "$work/fuzz.err" | awk 'NR % 20 == 1' >"$out/progress.txt"
grep -E '^#[0-9]+' "$work/fuzz.err" | tail -1 >>"$out/progress.txt"
{
    echo "# $target, -runs=$runs (libFuzzer final stats below: the inputs actually run)"
    echo
    echo "- command: \`$cmd\` (in a scratch directory, binary from \`cargo +nightly fuzz build -O -s $sanitizer $target\`)"
    echo "- commit: $commit"
    echo "- toolchain: $(rustc +nightly --version); cargo-fuzz $(cargo fuzz --version 2>/dev/null | awk '{print $2}')"
    echo "- machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
    echo "- started $start, ended $end, exit status $rc"
    echo "- crash inputs: $(ls "$work/artifacts" | wc -l)"
    echo "- libFuzzer: $(tr '\n' ' ' <"$out/final-stats.txt")"
    echo "- /usr/bin/time: $(grep -E 'Elapsed|Maximum resident|User time|System time' "$out/time.txt" | sed 's/^\t//' | tr '\n' ';')"
} >"$out/NOTES-raw.md"
cp -r "$work/artifacts" "$out/" 2>/dev/null || true
echo "recorded in $out (scratch: $work)"
exit $rc
