#!/usr/bin/env bash
# Submit a grid of paper runs to Slurm in the order that makes a first-contact failure cost minutes, not an array:
#
#   experiments/launch/submit_grid.sh GRID [key.path=value ...]      (from a login node, after ./reproduce.sh pin)
#
# 1. the teacher server of each teacher the grid's runs score through a server (teacher_server.sh LABEL: its time
#    limit and memory are the plan's, gropd/runs/job_plan.py);
# 2. the smoke stage: the grid's first run of each teacher kind (a 4B teacher in-process, the 32B served), each a
#    slurm_run.sbatch job of its own: 2 steps with a checkpoint after each and the evaluation of 1 question a suite
#    (job_plan.SMOKE), under results/smoke (GROPD_RESULTS: never the registered run's directory), with the time limit
#    the plan derives (`python -m gropd.runs.job_plan --submit GRID`); the served one starts once its server's job
#    has started (--dependency=after);
# 3. the array (slurm_run.sbatch --grid GRID), whose tasks start only once every smoke job ended well
#    (--dependency=afterok) and which Slurm cancels when one did not (--kill-on-invalid-dep=yes);
# 4. a stopper: once the array has ended, however (--dependency=afterany on the array's job id: all its tasks), it
#    cancels the servers (scancel), so a server lives as long as its runs. Each server also requeues itself at its
#    time limit (teacher_server.sh) while its runs go on.
# It prints each job's id; `scancel` them to withdraw the whole submission. SBATCH_* variables and an exported
# TEACHER_URL reach every job as sbatch passes them (--export=ALL).
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ -f .venv/bin/activate ]] && source .venv/bin/activate
grid=${1:?usage: experiments/launch/submit_grid.sh GRID [key.path=value ...]}
shift
launch=experiments/launch

plan=$(python -m gropd.runs.job_plan --submit "$grid") || exit 2
runs=$(python -m gropd.cli runs --profile paper --grid "$grid" | wc -l)
(( runs > 0 )) || { echo "grid $grid has no runs in the paper profile" >&2; exit 2; }

submit() { local id; id=$(sbatch --parsable "$@"); echo "${id%%;*}"; }  # --parsable: "id" or "id;cluster"
declare -A server_of=()
servers=() smokes=() settings=()
while read -r kind rest; do
  case "$kind" in
    settings) read -r -a settings <<< "$rest" ;;
    server)
      servers+=("$(submit "$launch/teacher_server.sh" "$rest")")
      server_of[$rest]=${servers[-1]}
      echo "teacher server ${rest}: job ${servers[-1]}" >&2 ;;
    smoke)
      read -r run limit label <<< "$rest"
      after=()
      [[ "$label" != - ]] && after=(--dependency="after:${server_of[$label]}")  # once its server's job started
      smokes+=("$(submit --time="$limit" --export=ALL,GROPD_RESULTS=results/smoke "${after[@]}" \
        "$launch/slurm_run.sbatch" "$run" "${settings[@]}" "$@")")
      echo "smoke ${run} (${settings[*]}; ${limit}): job ${smokes[-1]}" >&2 ;;
  esac
done <<< "$plan"
(( ${#smokes[@]} )) || { echo "the plan of $grid named no smoke run" >&2; exit 2; }

array=$(submit --array="0-$((runs - 1))" --dependency="afterok:$(IFS=:; echo "${smokes[*]}")" \
  --kill-on-invalid-dep=yes "$launch/slurm_run.sbatch" --grid "$grid" "$@")
echo "array of ${runs} runs of ${grid}: job ${array}, after the smoke jobs ${smokes[*]}" >&2
if (( ${#servers[@]} )); then
  stopper=$(submit --job-name=gropd-stop-teachers --dependency="afterany:${array}" --nodes=1 --ntasks=1 \
    --cpus-per-task=1 --mem=1G --time=0:05:00 --output=/dev/null --wrap="scancel ${servers[*]}")
  echo "the servers ${servers[*]} end with the array: job ${stopper}" >&2
fi
