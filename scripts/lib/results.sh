# Sourced by scripts that read `vidbench run` results directories.

# finished CONFIG_DIR: true when the configuration (RESULTS/runs/NAME) has a
# run with DONE other than the kept parts of an interrupted stepped search
# (steps-partNN), which a resume continues.
finished() {
  local d
  for d in "$1"/*/; do
    case $(basename "$d") in steps-part*) continue;; esac
    [ -f "$d/DONE" ] && return 0
  done
  return 1
}

# Files of a run directory that a record or a checkpoint keeps: every record
# of the run but the per-request and per-session logs and the whole disk
# trace (its window, disk-trace-window.csv.gz, stays); error.log is the
# server's own (Apache says there when its thread pool ran out). An interrupted run's
# run.json, samples.csv and load/steps.json are what `--resume` turns into a
# part, so a checkpoint keeps them too. The shim's statistics (shim/*.json,
# a few KB per server process: Fig 17's sendfile latencies) are kept as well.
KEPT_RUN_FILES="DONE run.json result.json part.json steps.json samples.csv controller.csv sockets.jsonl setup.json daemon.json warm.json resources.json disk-before.json disk-after.json disk-trace-window.csv.gz error.log"
KEPT_LOAD_FILES="intervals.csv steps.json summary.json"

# copy_kept_run RUN_DIR DEST_DIR: copies what of RUN_DIR a record keeps.
copy_kept_run() {
  local src=$1 dst=$2 f
  mkdir -p "$dst/load"
  for f in $KEPT_RUN_FILES; do
    [ -f "$src/$f" ] && cp "$src/$f" "$dst/"
  done
  for f in $KEPT_LOAD_FILES; do
    [ -f "$src/load/$f" ] && cp "$src/load/$f" "$dst/load/"
  done
  for f in "$src"/shim/*.json; do
    [ -f "$f" ] || continue
    mkdir -p "$dst/shim"
    cp "$f" "$dst/shim/"
  done
  return 0
}

# copy_kept_experiment RESULTS DEST: the experiment's own files (experiment,
# machine and drive-image records) that a record or a checkpoint keeps.
copy_kept_experiment() {
  local f
  mkdir -p "$2"
  for f in experiment.json experiment.toml machine.json image.json; do
    [ -f "$1/$f" ] && cp "$1/$f" "$2/"
  done
  return 0
}

# copy_kept_config CONFIG_DIR DEST_DIR finished|started: a configuration's
# search.json and its runs, each as copy_kept_run keeps it: only finished
# runs (DONE) for a record, every run that started (run.json) for a
# checkpoint, whose interrupted ones --resume makes parts of.
copy_kept_config() {
  local src=$1 dst=$2 which=$3 run
  mkdir -p "$dst"
  [ -f "$src/search.json" ] && cp "$src/search.json" "$dst/"
  for run in "$src"/*/; do
    [ -d "$run" ] || continue
    if [ -f "$run/DONE" ] || { [ "$which" = started ] && [ -f "$run/run.json" ]; }; then
      copy_kept_run "$run" "$dst/$(basename "$run")"
    fi
  done
  return 0
}
