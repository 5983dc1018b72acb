#!/usr/bin/env bash
# Wall time of a tiny-profile grid run one at a time next to `--jobs N`, on this machine.
#
#   bash benchmarks/grid_jobs.sh [JOBS] [key.path=value ...]     e.g. bash benchmarks/grid_jobs.sh 2 train.steps=4 eval.questions=3
#
# Makes two scratch projects (a copy of experiments/, results/tiny/world linked, so nothing is
# rebuilt and results/ is never touched), runs `gropd.cli grid GRID --jobs 1` in one and
# `--jobs JOBS` in the other with the same overrides, and prints both wall times and each run's
# final state. --jobs 1 runs with the profile's backend.threads, --jobs JOBS with cores // JOBS.
# Environment: GRID (default table1), PYTHON (default .venv/bin/python), KEEP_SCRATCH=1.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
jobs=${1:-2}
shift || true
grid=${GRID:-table1}
python=${PYTHON:-$repo/.venv/bin/python}
scratch=$(mktemp -d)
[[ -n "${KEEP_SCRATCH:-}" ]] || trap 'rm -rf "$scratch"' EXIT

for n in 1 "$jobs"; do
  project="$scratch/jobs$n"
  mkdir -p "$project/results/tiny"
  cp -r "$repo/experiments" "$project/experiments"
  rm -rf "$project/experiments/runs" "$project/experiments/lock.yaml"
  ln -s "$repo/results/tiny/world" "$project/results/tiny/world"
  start=$(date +%s.%N)
  (cd "$project" && PYTHONPATH="$repo" "$python" -m gropd.cli grid "$grid" --profile tiny --jobs "$n" "$@" \
     > "$scratch/jobs$n.log" 2>&1) || echo "--jobs $n: a run failed (log: $scratch/jobs$n.log)" >&2
  end=$(date +%s.%N)
  states=$(cd "$project" && PYTHONPATH="$repo" "$python" -m gropd.cli status --profile tiny "$@" | tail -n 1)
  printf -- '--jobs %-3s %7.1f s  (%s on %s cores; %s)\n' "$n" "$(awk -v a="$start" -v b="$end" 'BEGIN {print b - a}')" "$grid" "$(env -u OMP_NUM_THREADS nproc)" "$states"
done
