#!/usr/bin/env bash
# FUSE mode and block mode side by side, per preset, through the kernel:
#   - sequential MB/s at the outer, middle and inner edge (fio, 1 MiB buffered
#     reads, read_ahead_kb 128): FUSE mode reads files 0, 20 and 39 of a
#     sequentially placed library; block mode reads /dev/loopN itself at
#     offset 0, half the capacity and the last 256 MiB (the same LBAs);
#   - random 4 KiB reads at depth 1 and 32 (fio, psync, 1 or 32 jobs):
#     FUSE mode over the 40 files (spread over the whole drive, readahead 0),
#     block mode over the whole raw device with direct I/O;
#   - the papers' phenomenon: `vidbench disk bench` (32 threads x 64 KiB vs
#     1 thread x 2 MiB over 32 files) on a random-placement FUSE mount and on
#     the block mount (files where ext4 put them, whole-drive filesystem);
#   - the model alone.
# Every command is in OUT/commands.log, raw outputs in OUT/<preset>/<mode>/,
# OUT/results.csv has one row per figure, made from the raw files.
#
#   bench/disk/block.sh [--out DIR] [--presets "wd-red-1tb"] [--runtime S] [--fs ext4]
set -euo pipefail
cd "$(dirname "$0")/../.."
VB=${VIDBENCH:-${LIBCEPTION_BUILD:-$PWD/build}/bin/vidbench}
out=/tmp/vidbench-disk-block-$(date +%Y%m%d-%H%M%S)
presets="wd-red-1tb"
runtime=15
fs=ext4
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2;;
    --presets) presets=$2; shift 2;;
    --runtime) runtime=$2; shift 2;;
    --fs) fs=$2; shift 2;;
    *) echo "usage: $0 [--out DIR] [--presets LIST] [--runtime S] [--fs ext4|xfs]" >&2; exit 2;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "needs root" >&2; exit 1; }
command -v fio > /dev/null || { echo "needs fio (apt-get install fio)" >&2; exit 1; }
[ -x "$VB" ] || { echo "$VB not built (run make)" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
mnt=$(mktemp -d /tmp/vidbench-disk-block-mnt.XXXXXX)
export VIDBENCH_IMAGE_CACHE=${VIDBENCH_IMAGE_CACHE:-$out/.cache}
cleanup() { mountpoint -q "$mnt" && "$VB" disk unmount "$mnt" > /dev/null 2>&1 || true; rmdir "$mnt" 2>/dev/null || true; rm -rf "$out/.cache"; }
trap cleanup EXIT

{
  echo "date: $(date -Is)"; echo "kernel: $(uname -r)"; echo "cpus: $(nproc)"; echo "load: $(cat /proc/loadavg)"
  echo "vidbench: $("$VB" --version)"; echo "fio: $(fio --version)"; echo "git: $(git rev-parse HEAD 2>/dev/null || echo none)"
  echo "mkfs: $(mkfs.$fs -V 2>&1 | head -1)"; echo "fs: $fs"
} > "$out/setup.txt"
echo "preset,mode,figure,value,unit,raw" > "$out/results.csv"
log() { echo "$*" | sed "s#$out#\$OUT#g; s#$mnt#\$MNT#g" >> "$out/commands.log"; }
run() { log "$*"; "$@"; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
fio_field() { python3 -c "import json,sys; j=json.load(open(sys.argv[1]))['jobs'][0]['read']; print(j[sys.argv[2]])" "$@"; }
row() { echo "$1,$2,$3,$4,$5,$6" >> "$out/results.csv"; printf '%-12s %-6s %-26s %10s %s\n' "$1" "$2" "$3" "$4" "$5"; }
mbs() { fio_field "$1" bw_bytes | awk '{printf "%.1f", $1/1e6}'; }
iops() { fio_field "$1" iops | awk '{printf "%.0f", $1}'; }
bench_rows() { # preset mode dir
  for k in interleaved serialized; do
    row "$1" "$2" "bench_${k}_mb_s" "$(python3 -c "import json,sys; print('%.2f' % json.load(open(sys.argv[1]))[sys.argv[2]]['mb_s'])" "$3/bench/summary.json" "$k")" MB/s "${3#$out/}/bench/summary.json"
  done
  row "$1" "$2" bench_ratio "$(python3 -c "import json,sys; print('%.2f' % json.load(open(sys.argv[1]))['ratio_serialized_over_interleaved'])" "$3/bench/summary.json")" x "${3#$out/}/bench/summary.json"
}

"$VB" disk library "$out/library.json" --files 40 --size-mib 256 --name disk-block-bench
run "$VB" disk presets > "$out/presets.txt"
for preset in $presets; do
  d=$out/$preset/model; mkdir -p "$d"
  run "$VB" disk model --preset "$preset" --out "$d/model.json" > "$d/model.txt"

  # ---- FUSE mode
  d=$out/$preset/fuse; mkdir -p "$d"
  run "$VB" disk mount "$mnt" --library "$out/library.json" --preset "$preset" --placement sequential --daemonize --log "$d/mount-seq.log"
  files=$(ls "$mnt"/v/a/*.mp4 | sort)
  for where in outer middle inner; do
    case $where in outer) f=$(echo "$files" | sed -n 1p);; middle) f=$(echo "$files" | sed -n 21p);; inner) f=$(echo "$files" | tail -1);; esac
    drop
    run fio --name=seq-$where --filename="$f" --rw=read --bs=1M --size=256M --ioengine=psync --readonly --output-format=json --output="$d/fio-seq-$where.json"
    row "$preset" fuse "seq_${where}_mb_s" "$(mbs "$d/fio-seq-$where.json")" MB/s "$preset/fuse/fio-seq-$where.json"
  done
  dev=$(stat -c %d "$mnt"); bdi=/sys/class/bdi/0:$((dev & 0xff | (dev >> 12 & 0xfff00)))/read_ahead_kb
  echo 0 > "$bdi"; log "echo 0 > $bdi"
  list=$(echo "$files" | tr '\n' ':' | sed 's/:$//')
  for depth in 1 32; do
    drop
    run fio --name=rand-qd$depth --filename="$list" --rw=randread --bs=4k --ioengine=psync --numjobs=$depth --group_reporting \
        --time_based --runtime="$runtime" --norandommap --file_service_type=random --readonly --output-format=json --output="$d/fio-rand-qd$depth.json"
    row "$preset" fuse "rand4k_qd${depth}_iops" "$(iops "$d/fio-rand-qd$depth.json")" IOPS "$preset/fuse/fio-rand-qd$depth.json"
  done
  cp "$mnt/.vidbench/stats.json" "$d/stats.json"
  run "$VB" disk unmount "$mnt" > /dev/null
  run "$VB" disk mount "$mnt" --library "$out/library.json" --preset "$preset" --daemonize --log "$d/mount-bench.log"
  drop
  run "$VB" disk bench "$mnt" --streams 32 --small-kib 64 --large-kib 2048 --mib-per-file 8 --out "$d/bench" > "$d/bench.txt"
  run "$VB" disk unmount "$mnt" > /dev/null
  bench_rows "$preset" fuse "$d"

  # ---- block mode
  d=$out/$preset/block; mkdir -p "$d"
  run "$VB" disk mount "$mnt" --library "$out/library.json" --preset "$preset" --block --fs "$fs" --daemonize --log "$d/mount.log"
  loop=$(awk -v m="$mnt" '$2 == m { print $1 }' /proc/mounts)
  q=/sys/block/${loop#/dev/}/queue
  for k in scheduler read_ahead_kb max_sectors_kb max_hw_sectors_kb nr_requests rotational; do echo "$k: $(cat $q/$k)"; done > "$d/queue.txt"
  cap=$(blockdev --getsize64 "$loop")
  for where in outer middle inner; do
    case $where in outer) off=0;; middle) off=$(( cap / 2 / 1048576 * 1048576 ));; inner) off=$(( (cap - 268435456) / 1048576 * 1048576 ));; esac
    drop
    run fio --name=seq-$where --filename="$loop" --offset="$off" --rw=read --bs=1M --size=256M --ioengine=psync --readonly --output-format=json --output="$d/fio-seq-$where.json"
    row "$preset" block "seq_${where}_mb_s" "$(mbs "$d/fio-seq-$where.json")" MB/s "$preset/block/fio-seq-$where.json"
  done
  for depth in 1 32; do
    run fio --name=rand-qd$depth --filename="$loop" --direct=1 --rw=randread --bs=4k --ioengine=psync --numjobs=$depth --group_reporting \
        --time_based --runtime="$runtime" --norandommap --readonly --output-format=json --output="$d/fio-rand-qd$depth.json"
    row "$preset" block "rand4k_qd${depth}_iops" "$(iops "$d/fio-rand-qd$depth.json")" IOPS "$preset/block/fio-rand-qd$depth.json"
  done
  drop
  run "$VB" disk bench "$mnt" --streams 32 --small-kib 64 --large-kib 2048 --mib-per-file 8 --out "$d/bench" > "$d/bench.txt"
  run "$VB" disk stat "$mnt" --json > "$d/stats.json"
  run "$VB" disk unmount "$mnt" > /dev/null
  bench_rows "$preset" block "$d"
done
python3 bench/disk/block_summary.py "$out" > "$out/README.md"
echo "results: $out/results.csv, summary: $out/README.md"
