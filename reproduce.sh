#!/usr/bin/env bash
# GR-OPD reproduction: the paper's procedure, top to bottom.
#
#   ./reproduce.sh TARGET [--profile tiny|paper] [--seeds N] [--jobs N] [--full] [--dry-run] [--from-results]
#                         [--results DIR] [--force] [--fast] [key.path=value ...]
#
# Targets
#   table1   train + evaluate the 5 pairings x {GR-OPD, vanilla OPD}, then write Table 1
#   table2   the λ sweep at γ = .99, then Table 2 (pressure proxies)
#   fig1     score each pairing's student (J_H), train raw score vs GR-OPD, then Figure 1(b–d)
#   fig3     the λ and γ sweeps, then Figure 3 (training dynamics)
#   fig4     the γ sweep on I32nothink→I1.7nothink, then Figure 4 (length, reward, correlations)
#   table6   evaluate the pre-OPD reference models, then Table 6
#   tables   Tables 3–6 (3–5 straight from the manifests, 6 after its evaluations)
#   claims   the paper's claims with this profile's evidence and verdicts (reports only: runs nothing)
#   all      every run and every artefact
#   runs     list every run of every grid with its state (finished, resumable, new, …)
#   status   one table of every run: state, step, reward, length, ETA or wall time (from results/;
#            works from another terminal while a grid runs; all profiles with results unless --profile)
#   pin      resolve the paper's short revisions into experiments/lock.yaml (needs the Hub)
#   world    build the tiny world (tokenizer, arithmetic suites, SFT teachers and students)
#   rehearse the paper profile's code path on this CPU (bf16 over float32 masters, 2 processes with FSDP2,
#            a teacher server, evaluation on rank 0, a kill and a resume) and its checks: minutes
#   test     run the test suite (what CI runs); --fast skips the tests marked slow (those that train or
#            build tiny models): minutes
#
# Without --profile: paper when CUDA is present, tiny otherwise (it says which and why).
# --from-results rebuilds artefacts from results/ without running anything; --results DIR reads and writes
#   runs under DIR instead of results/ (results/reference/ holds the committed tiny runs behind the README).
# --full (tiny profile) evaluates every question of the clean split (500 per suite: 500-999) instead of 300.
# --jobs N runs up to N runs of the grids at once, each its own process, backend.threads = cores / N
#   (tiny profile: one run per core by default; its runs use one thread, so the results are the same).
# Curves: tensorboard --logdir results/   (every run writes results/<profile>/<run_id>/tracking/)
set -euo pipefail
cd "$(dirname "$0")"

# usage: the comment block at the top of this file, up to its first other line (read by
# basename: the cd above made this file's directory the current one)
usage() { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "${0##*/}"; }

# --- 1. environment: a local .venv with pinned requirements, made on first use ----------
ensure_venv() {
  local stamp=.venv/.requirements.sha256 want
  want=$(cat requirements.txt $( [ -f .venv/.gpu ] && echo requirements-gpu.txt ) | sha256sum | cut -c1-64)
  if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "setting up .venv (pinned requirements; first run only)" >&2
    python3.11 -m venv .venv 2>/dev/null || python3 -m venv .venv
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -r requirements.txt
    .venv/bin/python -m pip install -q --no-deps --no-build-isolation -e .
    if command -v nvidia-smi >/dev/null 2>&1 && [ -f requirements-gpu.txt ]; then
      echo "CUDA machine: installing the GPU extra (vLLM)" >&2
      .venv/bin/python -m pip install -q -r requirements-gpu.txt && touch .venv/.gpu
    fi
    cat requirements.txt $( [ -f .venv/.gpu ] && echo requirements-gpu.txt ) | sha256sum | cut -c1-64 > "$stamp"
  fi
}

[ $# -ge 1 ] || { usage >&2; exit 2; }
case "$1" in -h|--help|help) usage; exit 0;; esac
target=$1; shift
case "$target" in
  table1|table2|fig1|fig3|fig4|table6|tables|claims|all|runs|status|pin|world|rehearse|test) ;;
  *) echo "unknown target '$target'" >&2; usage >&2; exit 2;;
esac
profile=""; seeds=""; jobs=""; dry=""; from_results=""; force=""; results=""; fast=""; passthrough=()
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile=$2; shift 2;;
    --profile=*) profile=${1#*=}; shift;;
    --seeds) seeds=$2; shift 2;;
    --jobs) jobs=$2; shift 2;;
    --jobs=*) jobs=${1#*=}; shift;;
    --full) passthrough+=("eval.questions=null"); shift;;
    --dry-run) dry=--dry-run; shift;;
    --from-results) from_results=1; shift;;
    --results) results=$2; shift 2;;
    --results=*) results=${1#*=}; shift;;
    --force) force=--force; shift;;
    --fast) fast=1; shift;;
    -h|--help) usage; exit 0;;
    *) passthrough+=("$1"); shift;;
  esac
done

ensure_venv
export PYTHONUNBUFFERED=1
py() { .venv/bin/python "$@"; }
if [ -z "$profile" ] && [[ "$target" != test && "$target" != pin && "$target" != status && "$target" != rehearse ]]; then
  profile=$(py -m gropd.model.hardware) || exit 2   # paper with CUDA, tiny without a GPU; stops on a GPU node torch cannot use
fi
gropd() { py -m gropd.cli ${results:+--results "$results"} "$@"; }
if [ -z "$jobs" ] && [ "$profile" = tiny ]; then  # one run per core: the tiny profile's runs use one thread each
  jobs=$(py -c "from gropd.runs.lifecycle import usable_cores; print(usable_cores())")
  echo "tiny profile: --jobs $jobs (one run per core, results as one at a time; --jobs 1 to run them in turn)" >&2
fi

# --- 2. runs: train (GR-OPD or vanilla OPD) and evaluate every run the target needs ------
run_grids() {
  [ -n "$from_results" ] && return 0
  gropd grid "$@" --profile "$profile" ${seeds:+--seeds "$seeds"} ${jobs:+--jobs "$jobs"} $dry $force "${passthrough[@]}"
}
# --- 3. reports: rebuilt from results/ alone -------------------------------------------
report() { [ -n "$dry" ] || gropd report "$@" --profile "$profile"; }

case "$target" in
  table1) run_grids table1; report table1;;
  table2) run_grids lambda; report table2;;
  fig1)   run_grids fig1; report fig1;;
  fig3)   run_grids lambda gamma; report fig3;;
  fig4)   run_grids gamma; report fig4;;
  table6) run_grids table6; report table6;;
  tables) run_grids table6; report table3 table4 table5 table6;;
  claims) report claims;;
  all)    run_grids table6 table1 lambda gamma fig1
          report table1 table2 fig1 fig3 fig4 table3 table4 table5 table6 claims;;
  runs)   gropd runs --profile "$profile" ${seeds:+--seeds "$seeds"};;
  status) gropd status ${profile:+--profile "$profile"} "${passthrough[@]}";;
  pin)    gropd pin --profile "${profile:-paper}";;
  world)  gropd world;;
  rehearse) py -m gropd.runs.rehearsal;;
  test)   py -m pytest -q ${fast:+-m "not slow"} "${passthrough[@]}";;
esac
