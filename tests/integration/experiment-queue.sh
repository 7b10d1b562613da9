#!/usr/bin/env bash
# scripts/experiment-queue with a stand-in for vidbench (it records its
# arguments, runs for the seconds its experiment file says and exits with its
# status, or 130 at SIGINT, counting the SIGINTs it got): at most --parallel
# at once, in queue order, each with --out OUT --resume and its --only; done
# and failed lines recorded and skipped next time; at --until every running
# experiment gets one SIGINT and the queue waits for it, and at a deadline
# moved through QUEUE.until; an experiment already running in a line's OUT
# is adopted, not started twice; one interrupted by hand is left for the
# next --resume while the queue goes on; a bad queue line is
# an error naming it; the queue file is read again before each start (lines
# added or removed meanwhile count); --checkpoints saves stopped experiments
# and restores them into a fresh machine's missing results directories; a
# line pinned to a commit (--build) runs that commit's build, made once;
# global reclaim while experiments run is said.
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d /tmp/experiment-queue.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
q=scripts/experiment-queue
# The queue reads global reclaim from this stand-in for /proc/vmstat, still
# unless a case below moves it.
printf 'pgscan_kswapd 1000\npgscan_direct 7\nnr_free_pages 5\n' > "$tmp/vmstat"
export EXPERIMENT_QUEUE_VMSTAT=$tmp/vmstat

cat > "$tmp/vidbench" <<'STUB'
#!/usr/bin/env bash
# experiment file: "SECONDS STATUS"
[ "$1" = report ] && exit 0 # checkpoint-results cuts trace windows: none here
exp=$2 out=$4
read -r secs status < "$exp"
echo "$(date +%s.%N) start $*" >> "$(dirname "$out")/calls"
# Results as a stepped search leaves them: a finished run, an interrupted one
# with its steps, and a per-request log no checkpoint keeps.
if [ -f "$out/experiment.json" ]; then
  echo "$(date +%s.%N) resumed $out" >> "$(dirname "$out")/calls"
else
  mkdir -p "$out/runs/srv/rep0/load" "$out/runs/srv/steps-rep0/load"
  echo '{}' > "$out/experiment.json"
  echo "{\"image\": \"$(dirname "$out")/cache/lib-ext4-ab.vbimg\", \"image_figures\": {\"data_first_byte\": 1, \"data_end_byte\": 9, \"extents\": 2, \"overlay_blocks\": 3, \"placement\": \"p1\"}}" > "$out/image.json"
  echo 1 > "$out/runs/srv/rep0/DONE"
  echo '{"rate": 1}' > "$out/runs/srv/rep0/result.json"
  echo '{"config": {}}' > "$out/runs/srv/steps-rep0/run.json"
  echo 't_s' > "$out/runs/srv/steps-rep0/samples.csv"
  echo '[]' > "$out/runs/srv/steps-rep0/load/steps.json"
  echo 'request log' > "$out/runs/srv/steps-rep0/load/requests.csv"
  mkdir -p "$out/runs/srv/rep0/shim" && echo '{"sendfile": {}}' > "$out/runs/srv/rep0/shim/stats-42.json"
fi
ints=0
trap 'ints=$((ints + 1)); echo "$(date +%s.%N) sigint $out" >> "$(dirname "$out")/calls"; sleep 0.3; echo "ints=$ints" >> "$out.ints"; exit 130' INT
for _ in $(seq $((secs * 10))); do sleep 0.1; done
echo "$(date +%s.%N) end $out $status" >> "$(dirname "$out")/calls"
[ "$status" = 0 ] && echo "INFO all runs done; results in $out"
exit "$status"
STUB
chmod +x "$tmp/vidbench"
echo "1 0" > "$tmp/short.toml"
echo "2 0" > "$tmp/two.toml"
echo "1 3" > "$tmp/broken.toml"
echo "600 0" > "$tmp/long.toml"

cat > "$tmp/q.txt" <<EOT
# three quick ones, two at a time
$tmp/a $tmp/two.toml
$tmp/b $tmp/short.toml --only x,y
$tmp/c $tmp/broken.toml
EOT
"$q" "$tmp/q.txt" --until 23:59 --parallel 2 --vidbench "$tmp/vidbench" --poll-s 0.2 > "$tmp/out1" || fail "the queue failed: $(cat "$tmp/out1")"
grep -q "every experiment of the queue is done or failed" "$tmp/out1" || fail "no end line: $(cat "$tmp/out1")"
grep -q "start run $tmp/two.toml --out $tmp/a --resume$" "$tmp/calls" || fail "a's command: $(cat "$tmp/calls")"
grep -q "start run $tmp/short.toml --out $tmp/b --resume --only x,y$" "$tmp/calls" || fail "b's command: $(cat "$tmp/calls")"
# c starts only when b (1 s) ends, before a (2 s) does: never three at once.
python3 - "$tmp/calls" <<'PY'
import sys
events = sorted((float(l.split()[0]), l.split()[1]) for l in open(sys.argv[1]) if l.split()[1] in ("start", "end"))
running = peak = 0
for _, what in events:
    running += 1 if what == "start" else -1
    peak = max(peak, running)
assert peak == 2, f"{peak} at once"
PY
grep -qP "^done\t$tmp/a\t" "$tmp/q.txt.done" && grep -qP "^done\t$tmp/b\t" "$tmp/q.txt.done" || fail "done lines: $(cat "$tmp/q.txt.done")"
grep -qP "^failed 3\t$tmp/c\t" "$tmp/q.txt.done" || fail "the failed line: $(cat "$tmp/q.txt.done")"
grep -q "$tmp/c FAILED (exit 3)" "$tmp/out1" || fail "the failure was not reported"

# Done and failed lines are skipped; a long one is interrupted at --until, once.
echo "$tmp/d $tmp/long.toml" >> "$tmp/q.txt"
: > "$tmp/calls"
"$q" "$tmp/q.txt" --until +3s --vidbench "$tmp/vidbench" --poll-s 0.2 > "$tmp/out2" || fail "the second queue failed: $(cat "$tmp/out2")"
grep -q "1 of 4 experiments to run" "$tmp/out2" || fail "finished lines were not skipped: $(cat "$tmp/out2")"
[ "$(grep -c ' start ' "$tmp/calls")" = 1 ] || fail "only d should have started: $(cat "$tmp/calls")"
grep -q "interrupting 1 experiment" "$tmp/out2" && grep -q "$tmp/d interrupted (exit 130); --resume continues it" "$tmp/out2" || fail "d was not interrupted 3 s on: $(cat "$tmp/out2")"
[ "$(cat "$tmp/d.ints")" = "ints=1" ] || fail "d got $(cat "$tmp/d.ints") SIGINTs"
! grep -q "$tmp/d" "$tmp/q.txt.done" || fail "an interrupted experiment was recorded as finished"

# The deadline moves while the queue runs: a value written into QUEUE.until
# that does not parse is said and ignored, one that does replaces --until.
echo "$tmp/u $tmp/long.toml" > "$tmp/qu.txt"
echo "+0s" > "$tmp/qu.txt.until" # left from before the queue started: not read
: > "$tmp/calls"
"$q" "$tmp/qu.txt" --until 23:59 --vidbench "$tmp/vidbench" --poll-s 0.2 > "$tmp/out6" & qpid=$!
for _ in $(seq 300); do grep -q -- "--out $tmp/u --resume" "$tmp/calls" && break; sleep 0.1; done
sleep 0.5
grep -q "sigint $tmp/u" "$tmp/calls" && fail "a deadline file older than the queue was read: $(cat "$tmp/out6")"
echo "soon" > "$tmp/qu.txt.until"
for _ in $(seq 300); do grep -q "'soon' is not HH:MM" "$tmp/out6" && break; sleep 0.1; done
grep -q "$tmp/qu.txt.until: 'soon' is not HH:MM or +N followed by s, m or h; the deadline stays" "$tmp/out6" || fail "a bad deadline was not said: $(cat "$tmp/out6")"
echo "+1s" > "$tmp/qu.txt.until"
wait $qpid || fail "the queue with a moved deadline failed: $(cat "$tmp/out6")"
grep -q "deadline moved to .* ($tmp/qu.txt.until)" "$tmp/out6" || fail "the moved deadline was not said: $(cat "$tmp/out6")"
grep -q "$tmp/u interrupted (exit 130); --resume continues it" "$tmp/out6" || fail "u was not interrupted at the moved deadline: $(cat "$tmp/out6")"

# An experiment already being written, left running by a queue that was
# killed, is adopted (vidbench run's registry names its OUT): not started
# again, interrupted at the deadline, and counted done when its log says so.
export VIDBENCH_SHARING_DIR=$tmp/registry
mkdir -p "$VIDBENCH_SHARING_DIR"
register() { # PID OUT: the registry file vidbench run writes for an experiment
  local start
  start=$(python3 -c 'import sys; s = open(f"/proc/{sys.argv[1]}/stat").read(); print(s[s.rindex(")") + 1:].split()[19])' "$1")
  echo "{\"pid\": $1, \"out\": \"$2\", \"memory_limit_bytes\": 1, \"port\": 1, \"proactive_reclaim\": \"pause\"}" > "$VIDBENCH_SHARING_DIR/$1-$start.json"
}
: > "$tmp/calls"
# Job control on: a background job of a script would start with SIGINT
# ignored, which the stub could not trap; a queue's child does not.
set -m
"$tmp/vidbench" run "$tmp/long.toml" --out "$tmp/o" --resume >> "$tmp/o.log" 2>&1 & opid=$!
for _ in $(seq 300); do grep -q -- "--out $tmp/o --resume" "$tmp/calls" && break; sleep 0.1; done
register $opid "$tmp/o"
echo "$tmp/o $tmp/long.toml" > "$tmp/qa.txt"
"$q" "$tmp/qa.txt" --until +2s --vidbench "$tmp/vidbench" --poll-s 0.2 > "$tmp/out7" || fail "the adopting queue failed: $(cat "$tmp/out7")"
wait $opid || true
grep -q "$tmp/o is being written by pid $opid, started outside this queue (line 1): adopted" "$tmp/out7" || fail "the running experiment was not adopted: $(cat "$tmp/out7")"
[ "$(grep -c -- "--out $tmp/o --resume" "$tmp/calls")" = 1 ] || fail "the adopted experiment was started again: $(cat "$tmp/calls")"
[ "$(cat "$tmp/o.ints")" = "ints=1" ] || fail "the adopted experiment got $(cat "$tmp/o.ints" 2>/dev/null) SIGINTs at the deadline"
grep -q "$tmp/o interrupted (exit 130); --resume continues it" "$tmp/out7" || fail "the adopted experiment's interruption was not said: $(cat "$tmp/out7")"
! grep -q "$tmp/o" "$tmp/qa.txt.done" 2>/dev/null || fail "an interrupted adopted experiment was recorded as finished"
# One that finishes while adopted is done.
"$tmp/vidbench" run "$tmp/two.toml" --out "$tmp/p" --resume >> "$tmp/p.log" 2>&1 & ppid=$!
set +m
for _ in $(seq 300); do grep -q -- "--out $tmp/p --resume" "$tmp/calls" && break; sleep 0.1; done
register $ppid "$tmp/p"
echo "$tmp/p $tmp/two.toml" > "$tmp/qp.txt"
"$q" "$tmp/qp.txt" --until 23:59 --vidbench "$tmp/vidbench" --poll-s 0.2 > "$tmp/out8" || fail "the second adopting queue failed: $(cat "$tmp/out8")"
grep -qP "^done\t$tmp/p\t" "$tmp/qp.txt.done" || fail "the adopted experiment that finished is not done: $(cat "$tmp/out8")"
[ "$(grep -c -- "--out $tmp/p --resume" "$tmp/calls")" = 1 ] || fail "the adopted experiment was started again: $(cat "$tmp/calls")"
unset VIDBENCH_SHARING_DIR

# One experiment interrupted by hand (vidbench exits 130) is not failed: the
# queue goes on with the next line and leaves it for the next --resume.
: > "$tmp/calls"
printf '%s\n%s\n' "$tmp/h $tmp/long.toml" "$tmp/hn $tmp/short.toml" > "$tmp/qh.txt"
"$q" "$tmp/qh.txt" --until 23:59 --vidbench "$tmp/vidbench" --poll-s 0.2 > "$tmp/out9" & qpid=$!
for _ in $(seq 300); do grep -q -- "--out $tmp/h --resume" "$tmp/calls" && break; sleep 0.1; done
pkill -INT -f -- "--out $tmp/h --resume" || fail "the experiment to interrupt by hand is not running"
wait $qpid || fail "the queue failed after an experiment was interrupted by hand: $(cat "$tmp/out9")"
grep -q "$tmp/h interrupted (exit 130); --resume continues it" "$tmp/out9" || fail "the interruption by hand was not said: $(cat "$tmp/out9")"
! grep -qP "\t$tmp/h\t" "$tmp/qh.txt.done" || fail "an experiment interrupted by hand was recorded: $(cat "$tmp/qh.txt.done")"
grep -qP "^done\t$tmp/hn\t" "$tmp/qh.txt.done" || fail "the queue did not go on after the interruption by hand: $(cat "$tmp/out9")"

# The file is read again before each start: a line added while the queue runs
# starts, a line removed before its turn does not.
printf '%s\n%s\n' "$tmp/qm $tmp/two.toml" "$tmp/qn $tmp/short.toml" > "$tmp/q2.txt"
: > "$tmp/calls"
"$q" "$tmp/q2.txt" --until 23:59 --parallel 1 --vidbench "$tmp/vidbench" --poll-s 0.2 > "$tmp/out5" & qpid=$!
for _ in $(seq 300); do grep -q -- "--out $tmp/qm --resume" "$tmp/calls" && break; sleep 0.1; done
printf '%s\n%s\n' "$tmp/qm $tmp/two.toml" "$tmp/qo $tmp/short.toml" > "$tmp/q2.new" && mv "$tmp/q2.new" "$tmp/q2.txt"
wait $qpid || fail "the edited queue failed: $(cat "$tmp/out5")"
grep -q -- "--out $tmp/qo --resume" "$tmp/calls" || fail "the line added while the queue ran did not start: $(cat "$tmp/calls")"
! grep -q -- "--out $tmp/qn " "$tmp/calls" || fail "the line removed before its turn started"
grep -q "every experiment of the queue is done or failed" "$tmp/out5" || fail "no end line: $(cat "$tmp/out5")"

# Bad input names what and where.
printf '%s\n' "$tmp/e" > "$tmp/bad.txt"
err=$("$q" "$tmp/bad.txt" --until 23:59 --vidbench "$tmp/vidbench" 2>&1) && fail "a line without an experiment was accepted"
echo "$err" | grep -q "bad.txt:1: expected" || fail "$err"
printf '%s x.toml\n%s y.toml\n' "$tmp/e" "$tmp/e" > "$tmp/bad.txt"
err=$("$q" "$tmp/bad.txt" --until 23:59 --vidbench "$tmp/vidbench" 2>&1) && fail "two lines into one directory were accepted"
echo "$err" | grep -q "is the results directory of 2 lines" || fail "$err"
err=$("$q" "$tmp/q.txt" --until 25:00 --vidbench "$tmp/vidbench" 2>&1) && fail "--until 25:00 was accepted"
echo "$err" | grep -q "is not HH:MM" || fail "$err"
err=$("$q" "$tmp/q.txt" --until +5d --vidbench "$tmp/vidbench" 2>&1) && fail "--until +5d was accepted"
echo "$err" | grep -q "or +N followed by s, m or h" || fail "$err"
err=$("$q" "$tmp/q.txt" --until 23:59 --vidbench "$tmp/none" 2>&1) && fail "a missing vidbench was accepted"
echo "$err" | grep -q "is not an executable vidbench" || fail "$err"
# --checkpoints: an interrupted experiment is saved for resuming elsewhere,
# and restored into a results directory that is gone (a fresh machine).
ck=$tmp/checkpoints
image() { # FILE DATA_END_BYTE [PLACEMENT]: a drive image's header as the cache keeps it (gzip'd)
  python3 -c 'import gzip, json, struct, sys
h = json.dumps({"figures": {"data_first_byte": 1, "data_end_byte": int(sys.argv[2]), "extents": 2, "overlay_blocks": 3,
                            "placement": sys.argv[3]}}).encode()
gzip.open(sys.argv[1], "wb").write(b"VBDIMG01" + struct.pack("<I", len(h)) + h)' "$1" "$2" "${3:-p1}"
}
mkdir -p "$tmp/cache" && image "$tmp/cache/lib-ext4-ab.vbimg" 9
echo "$tmp/f $tmp/long.toml" > "$tmp/qc.txt"
: > "$tmp/calls"
"$q" "$tmp/qc.txt" --until +2s --checkpoints "$ck" --vidbench "$tmp/vidbench" --poll-s 0.2 > "$tmp/out3" || fail "the checkpointing queue failed: $(cat "$tmp/out3")"
grep -q "checkpoint $tmp/f: checkpointed $tmp/f into $ck/f: 2 runs, 1 finished" "$tmp/out3" || fail "no checkpoint reported: $(cat "$tmp/out3")"
for f in CHECKPOINT experiment.json runs/srv/rep0/DONE runs/srv/rep0/result.json runs/srv/steps-rep0/run.json \
         runs/srv/steps-rep0/samples.csv runs/srv/steps-rep0/load/steps.json runs/srv/rep0/shim/stats-42.json; do
  [ -f "$ck/f/$f" ] || fail "the checkpoint lacks $f: $(find "$ck" -type f)"
done
[ ! -e "$ck/f/runs/srv/steps-rep0/load/requests.csv" ] || fail "the checkpoint kept the per-request log"
kept=$(cat "$ck/f/IMAGE")
case $kept in lib-ext4-ab-????????????.vbimg) ;; *) fail "the image is kept as '$kept'";; esac
cmp -s "$ck/images/$kept" "$tmp/cache/lib-ext4-ab.vbimg" || fail "the kept image differs from the one the runs read"
# A fresh machine: neither the results nor the image cache.
rm -rf "$tmp/f" "$tmp/cache"
"$q" "$tmp/qc.txt" --until +2s --checkpoints "$ck" --vidbench "$tmp/vidbench" --poll-s 0.2 > "$tmp/out4" || fail "the restoring queue failed: $(cat "$tmp/out4")"
grep -q "restore $tmp/f: restored $ck/f into $tmp/f" "$tmp/out4" || fail "no restore reported: $(cat "$tmp/out4")"
grep -q "resumed $tmp/f" "$tmp/calls" || fail "the experiment did not resume from the restored results: $(cat "$tmp/calls")"
[ ! -e "$tmp/f/CHECKPOINT" ] || fail "the restored results kept the checkpoint's marker"
cmp -s "$ck/images/$kept" "$tmp/cache/lib-ext4-ab.vbimg" || fail "the drive image was not restored into the cache"
# A cache holding another build of the key is left alone, said so, and the
# runs' build restored beside it, named by image.json for the resume.
image "$tmp/cache/lib-ext4-ab.vbimg" 10 && cp "$tmp/cache/lib-ext4-ab.vbimg" "$tmp/other.vbimg"
err=$(scripts/checkpoint-results --restore "$ck/f" "$tmp/g" 2>&1) || fail "restore beside another image build: $err"
echo "$err" | grep -q "holds another build of lib-ext4-ab.vbimg" || fail "$err"
cmp -s "$tmp/cache/lib-ext4-ab.vbimg" "$tmp/other.vbimg" || fail "the cached image was overwritten"
beside=$(jq -r .image "$tmp/g/image.json")
[ "$beside" = "$tmp/cache/restored/$(sha256sum "$ck/images/$kept" | cut -c1-12)/lib-ext4-ab.vbimg" ] && cmp -s "$beside" "$ck/images/$kept" || fail "the runs' build was not restored beside the cache's: image.json names '$beside'"
# A checkpoint of the restored results keeps that build again.
out=$(scripts/checkpoint-results "$tmp/g" "$ck/g2" 2>&1) && [ "$(cat "$ck/g2/IMAGE" 2>/dev/null)" = "$kept" ] || fail "the restored build was not checkpointed again: $out"
# ... and a checkpoint of results whose image file now holds another build keeps none.
image "$beside" 10
err=$(scripts/checkpoint-results "$tmp/g" "$ck/g" 2>&1) || fail "checkpoint beside another image build: $err"
echo "$err" | grep -q "is not the build these runs read" || fail "$err"
[ ! -e "$ck/g/IMAGE" ] || fail "another build's image was kept"
# ... nor one with the same figures and another placement digest.
image "$beside" 9 p2
err=$(scripts/checkpoint-results "$tmp/g" "$ck/h" 2>&1) || fail "checkpoint beside another placement: $err"
echo "$err" | grep -q "is not the build these runs read" || fail "another placement digest was taken for the runs' image: $err"
[ ! -e "$ck/h/IMAGE" ] || fail "another placement's image was kept"
# Neither direction overwrites what it does not own.
mkdir -p "$tmp/notack" && echo keep > "$tmp/notack/file"
err=$(scripts/checkpoint-results "$tmp/f" "$tmp/notack" 2>&1) && fail "a directory that is not a checkpoint was replaced"
echo "$err" | grep -q "is not a checkpoint" && [ -f "$tmp/notack/file" ] || fail "$err"
err=$(scripts/checkpoint-results --restore "$ck/f" "$tmp/f" 2>&1) && fail "a restore overwrote results"
echo "$err" | grep -q "already holds results" || fail "$err"
err=$(scripts/checkpoint-results "$tmp/notack" "$ck/x" 2>&1) && fail "a directory without results was checkpointed"
echo "$err" | grep -q "no experiment.json" || fail "$err"
printf '%s x.toml\n%s y.toml\n' "$tmp/one/g" "$tmp/two/g" > "$tmp/bad.txt"
err=$("$q" "$tmp/bad.txt" --until 23:59 --checkpoints "$ck" --vidbench "$tmp/vidbench" 2>&1) && fail "two lines with one checkpoint name were accepted"
echo "$err" | grep -q "share the results name g" || fail "$err"
# --build COMMIT: the line runs the vidbench of that commit's build, made by
# scripts/build-at (a stand-in here, which records its calls) once and before
# anything starts; a commit the repository does not have is an error naming it.
head=$(git rev-parse --short=7 HEAD)
cat > "$tmp/build-at" <<STUB
#!/usr/bin/env bash
echo "\$*" >> "$tmp/builds.log"
mkdir -p "\$3/build-\$(git rev-parse --short=7 "\$1")/bin"
sed 's/start \$\*/start pinned \$*/' "$tmp/vidbench" > "\$3/build-\$(git rev-parse --short=7 "\$1")/bin/vidbench"
chmod +x "\$3/build-\$(git rev-parse --short=7 "\$1")/bin/vidbench"
echo "\$3/build-\$(git rev-parse --short=7 "\$1")/bin/vidbench"
STUB
chmod +x "$tmp/build-at"
printf '%s\n%s\n%s\n' "$tmp/pa $tmp/short.toml --build $head" "$tmp/pb $tmp/short.toml --build HEAD --only x" "$tmp/pc $tmp/short.toml" > "$tmp/qp.txt"
: > "$tmp/calls"
EXPERIMENT_QUEUE_BUILD_AT=$tmp/build-at "$q" "$tmp/qp.txt" --until 23:59 --parallel 1 --builds "$tmp/builds" --vidbench "$tmp/vidbench" --poll-s 0.2 > "$tmp/out6" ||
  fail "the pinned queue failed: $(cat "$tmp/out6")"
[ "$(cat "$tmp/builds.log")" = "$head --into $tmp/builds" ] || fail "build-at calls: $(cat "$tmp/builds.log")"
grep -q "start pinned run $tmp/short.toml --out $tmp/pa --resume$" "$tmp/calls" &&
  grep -q "start pinned run $tmp/short.toml --out $tmp/pb --resume --only x$" "$tmp/calls" &&
  grep -q "start run $tmp/short.toml --out $tmp/pc --resume$" "$tmp/calls" || fail "pinned lines' commands: $(cat "$tmp/calls")"
[ -x "$tmp/builds/build-$head/bin/vidbench" ] || fail "no build of $head in $tmp/builds"
printf '%s\n' "$tmp/pd $tmp/short.toml --build 0000000deadbeef" > "$tmp/bad.txt"
err=$(EXPERIMENT_QUEUE_BUILD_AT=$tmp/build-at "$q" "$tmp/bad.txt" --until 23:59 --builds "$tmp/builds" --vidbench "$tmp/vidbench" 2>&1) && fail "an unknown commit was accepted"
echo "$err" | grep -q -- "--build 0000000deadbeef: not a commit" || fail "$err"
printf '%s\n' "$tmp/pe $tmp/short.toml --build" > "$tmp/bad.txt"
err=$("$q" "$tmp/bad.txt" --until 23:59 --vidbench "$tmp/vidbench" 2>&1) && fail "--build without a commit was accepted"
echo "$err" | grep -q "bad.txt:1: expected" || fail "$err"
# Global reclaim while experiments run is said, with who ran, and its total
# at the end; none, nothing said.
grep -q "global reclaim" "$tmp"/out* && fail "global reclaim said where the stand-in did not move: $(grep -h "global reclaim" "$tmp"/out*)"
printf '%s\n' "$tmp/ra $tmp/two.toml" > "$tmp/qr.txt"
# Reclaim moves once ra has started (not after a fixed delay: a loaded machine
# may start the queue later than that), while ra runs its 2 s.
(for _ in $(seq 100); do grep -q -- "--out $tmp/ra --resume" "$tmp/calls" 2>/dev/null && break; sleep 0.1; done
 printf 'pgscan_kswapd 1100\npgscan_direct 7\nnr_free_pages 5\n' > "$tmp/vmstat.new"; mv "$tmp/vmstat.new" "$tmp/vmstat") &
"$q" "$tmp/qr.txt" --until 23:59 --vidbench "$tmp/vidbench" --poll-s 0.2 > "$tmp/reclaim-out" || fail "the queue failed: $(cat "$tmp/reclaim-out")"
wait
grep -q "global reclaim scanned 100 pages since [0-9:]*, beside ra: memory outside their limits" "$tmp/reclaim-out" &&
  grep -q "global reclaim scanned 100 pages in all while experiments ran" "$tmp/reclaim-out" || fail "reclaim not said: $(cat "$tmp/reclaim-out")"
# Between two looks the queue sleeps --poll-s (a9d39b6 once moved the sleep
# out of its loop, and the queue took a core from the experiments beside it):
# over a 4 s experiment it and its stand-in use well under a second of CPU.
echo "4 0" > "$tmp/four.toml"
printf '%s\n' "$tmp/rw $tmp/four.toml" > "$tmp/qw.txt"
cpu=$( ("$q" "$tmp/qw.txt" --until 23:59 --vidbench "$tmp/vidbench" --poll-s 0.5 > "$tmp/poll-out"; echo $? > "$tmp/poll-rc"; times) | tail -n 1)
[ "$(cat "$tmp/poll-rc")" = 0 ] || fail "the queue failed: $(cat "$tmp/poll-out")"
python3 -c 'import re, sys; s = sum(float(m) * 60 + float(x) for m, x in re.findall(r"(\d+)m([\d.]+)s", sys.argv[1])); sys.exit(s > 1.0)' "$cpu" ||
  fail "the queue and its 4 s stand-in used $cpu of CPU (user, system) at --poll-s 0.5: the queue does not sleep between looks"
echo "experiment-queue: ok"
