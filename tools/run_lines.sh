#!/usr/bin/env bash
# Run a list of sweep job lines (stdin) in sweep.sh's resumable job pool, with a wall summed over sittings:
#   python -m studies.wave grid NAME | bash tools/run_lines.sh OUTDIR
# Finished steps are skipped (tools/sweep_lib.sh pending); OUTDIR/wall.json is written as each job ends, so a
# sitting killed outright keeps what it measured; OUTDIR/logs holds one log per job.
set -uo pipefail
export LC_ALL=C
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$HERE" || exit 2
OUTDIR=${1:?usage: bash tools/run_lines.sh OUTDIR < lines}
PY=${PYTHON:-python}; STOP_RC=75; SCALE=tiny; REHEARSE=0
note() { echo "run_lines: $*" >&2; }
die() { note "$*"; exit 2; }
. "$HERE/tools/sweep_lib.sh"
NCPU=$(nproc 2>/dev/null || echo 1); JOBS=${JOBS:-$NCPU}
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || die "JOBS must be a positive integer, got '$JOBS'"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( NCPU / JOBS > 0 ? NCPU / JOBS : 1 ))}
mapfile -t GRID
passes
todo=("${FIRST[@]}" "${SECOND[@]}")
note "${#GRID[@]} jobs, $(( ${#GRID[@]} - ${#todo[@]} )) finished, ${#todo[@]} to run with JOBS=$JOBS"
(( ${#todo[@]} )) || exit 0
mkdir -p "$OUTDIR"; WALL=$OUTDIR/wall.json
read -r WALL_BASE WALL_SITS < <(sed -n 's/.*"seconds": *\([0-9]*\).*"sittings": *\([0-9]*\).*/\1 \2/p' "$WALL" 2>/dev/null || true)
WALL_BASE=${WALL_BASE:-0}; WALL_SITS=$(( ${WALL_SITS:-0} + 1 )); WALL_START=$SECONDS
wall_tick() {
    printf '{"seconds": %d, "sittings": %d, "jobs": %d, "cores": %d, "cpu": "%s"}\n' $(( WALL_BASE + SECONDS - WALL_START )) \
        "$WALL_SITS" "$JOBS" "$NCPU" "$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -1)" > "$WALL.tmp" \
        && mv "$WALL.tmp" "$WALL"
}
wall_tick
trap wall_tick EXIT  # a stopped sitting keeps its time up to the stop
(( ${#FIRST[@]} )) && run_pool "$OUTDIR/logs" < <(printf '%s\n' "${FIRST[@]}")
(( ${#SECOND[@]} )) && run_pool "$OUTDIR/logs" < <(printf '%s\n' "${SECOND[@]}")
wall_tick
note "${#FAILED[@]} failed, ${#STOPPED[@]} stopped"
(( ${#FAILED[@]} )) && exit 1
(( ${#STOPPED[@]} )) && exit "$STOP_RC"
exit 0
