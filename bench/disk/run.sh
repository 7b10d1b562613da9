#!/usr/bin/env bash
# Benchmarks of the emulated disk through the kernel, per preset:
#   - sequential MB/s at the outer and inner edge (fio, 1 MiB buffered reads of
#     the first and last file of a sequentially placed library);
#   - random 4 KiB read IOPS at depth 1 and 32 (fio, psync, 1 or 32 jobs,
#     read_ahead_kb 0 so each read is one disk request);
#   - the papers' phenomenon: `vidbench disk bench` (32 threads x 64 KiB reads
#     vs 1 thread x 2 MiB reads over the same 32 files, random placement);
#   - the model alone (`vidbench disk model`).
# Every command is logged in OUT/commands.log, raw outputs (fio JSON, stats
# snapshots, bench CSV) are kept in OUT/<preset>/, and OUT/results.csv has one
# row per figure, made from the raw files. Needs root and /dev/fuse.
#
#   bench/disk/run.sh [--out DIR] [--presets "wd-red-1tb ssd"] [--runtime S]
set -euo pipefail
cd "$(dirname "$0")/../.."
VB=${VIDBENCH:-${LIBCEPTION_BUILD:-$PWD/build}/bin/vidbench}
out=/tmp/vidbench-disk-bench-$(date +%Y%m%d-%H%M%S)
presets="wd-red-1tb hp-146g-10k st1000dm003 ssd"
runtime=15
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2;;
    --presets) presets=$2; shift 2;;
    --runtime) runtime=$2; shift 2;;
    *) echo "usage: $0 [--out DIR] [--presets LIST] [--runtime S]" >&2; exit 2;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "needs root" >&2; exit 1; }
command -v fio > /dev/null || { echo "needs fio (apt-get install fio)" >&2; exit 1; }
[ -x "$VB" ] || { echo "$VB not built (run make)" >&2; exit 1; }
mkdir -p "$out"
mnt=$(mktemp -d /tmp/vidbench-disk-bench-mnt.XXXXXX)
cleanup() { mountpoint -q "$mnt" && "$VB" disk unmount "$mnt" > /dev/null 2>&1 || true; rmdir "$mnt" 2>/dev/null || true; }
trap cleanup EXIT

{
  echo "date: $(date -Is)"; echo "kernel: $(uname -r)"; echo "cpus: $(nproc)"
  echo "vidbench: $("$VB" --version)"; echo "fio: $(fio --version)"; echo "git: $(git rev-parse HEAD 2>/dev/null || echo none)"
} > "$out/setup.txt"
echo "preset,figure,value,unit,raw" > "$out/results.csv"
log() { echo "$*" >> "$out/commands.log"; }
run() { log "$*"; "$@"; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
bdi() { local dev; dev=$(stat -c %d "$mnt"); echo "/sys/class/bdi/0:$((dev & 0xff | (dev >> 12 & 0xfff00)))/read_ahead_kb"; }
fio_field() { python3 -c "import json,sys; j=json.load(open(sys.argv[1]))['jobs'][0]['read']; print(j[sys.argv[2]])" "$@"; }
row() { echo "$1,$2,$3,$4,$5" >> "$out/results.csv"; printf '%-12s %-28s %10s %s\n' "$1" "$2" "$3" "$4"; }

run "$VB" disk library "$out/library-seq.json" --files 40 --size-mib 256 --name disk-bench
for preset in $presets; do
  d=$out/$preset; mkdir -p "$d"
  run "$VB" disk model --preset "$preset" --out "$d/model.json" | tee "$d/model.txt"

  # Sequential placement: file 0 at the outer edge, file 39 at the inner edge.
  run "$VB" disk mount "$mnt" --library "$out/library-seq.json" --preset "$preset" --placement sequential --daemonize --log "$d/mount-seq.log"
  files=$(ls "$mnt"/v/a/*.mp4 | sort)
  first=$(echo "$files" | head -1); last=$(echo "$files" | tail -1)
  for where in outer inner; do
    f=$first; [ $where = inner ] && f=$last
    drop
    run fio --name=seq-$where --filename="$f" --rw=read --bs=1M --size=256M --ioengine=psync --readonly --output-format=json --output="$d/fio-seq-$where.json"
    row "$preset" "seq_${where}_mb_s" "$(fio_field "$d/fio-seq-$where.json" bw_bytes | awk '{printf "%.1f", $1/1e6}')" MB/s "$preset/fio-seq-$where.json"
  done
  echo 0 > "$(bdi)"; log "echo 0 > $(bdi)"
  list=$(echo "$files" | tr '\n' ':' | sed 's/:$//')
  for depth in 1 32; do
    drop
    run fio --name=rand-qd$depth --filename="$list" --rw=randread --bs=4k --ioengine=psync --numjobs=$depth --group_reporting \
        --time_based --runtime="$runtime" --norandommap --file_service_type=random --readonly --output-format=json --output="$d/fio-rand-qd$depth.json"
    row "$preset" "rand4k_qd${depth}_iops" "$(fio_field "$d/fio-rand-qd$depth.json" iops | awk '{printf "%.0f", $1}')" IOPS "$preset/fio-rand-qd$depth.json"
  done
  cp "$mnt/.vidbench/stats.json" "$d/stats-seq.json"
  run "$VB" disk unmount "$mnt"

  # Random placement (as on the papers' disks): the 32-stream phenomenon.
  run "$VB" disk mount "$mnt" --library "$out/library-seq.json" --preset "$preset" --daemonize --trace "$d/trace-bench.csv" --log "$d/mount-bench.log"
  run "$VB" disk bench "$mnt" --streams 32 --small-kib 64 --large-kib 2048 --mib-per-file 8 --out "$d/bench" | tee "$d/bench.txt"
  run "$VB" disk unmount "$mnt"
  for k in interleaved serialized; do
    row "$preset" "bench_${k}_mb_s" "$(python3 -c "import json,sys; print('%.2f' % json.load(open(sys.argv[1]))[sys.argv[2]]['mb_s'])" "$d/bench/summary.json" $k)" MB/s "$preset/bench/summary.json"
  done
  row "$preset" "bench_ratio" "$(python3 -c "import json,sys; print('%.2f' % json.load(open(sys.argv[1]))['ratio_serialized_over_interleaved'])" "$d/bench/summary.json")" x "$preset/bench/summary.json"
done
echo "results: $out/results.csv"
