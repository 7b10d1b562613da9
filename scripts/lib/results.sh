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
