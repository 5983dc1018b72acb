#!/usr/bin/env bash
# Serve a paper teacher with `vllm serve` at the revision pinned in experiments/lock.yaml.
#
#   sbatch experiments/launch/teacher_server.sh I32                 (a whole 8-GPU node: 4 replicas of TP 2)
#   experiments/launch/teacher_server.sh LABEL [TP] [PORT]          (on a GPU node you are logged in to)
#
# LABEL is a model label of the paper profile (experiments/models.yaml: I32, I4, B4); TP the
# tensor-parallel size of one replica (default 2: Qwen3-32B's 61 GiB of weights on two 80 GB cards leave the
# KV cache of ~30 full-length rows a replica; 1 on a node of one GPU). The node's GPUs hold GPUs / TP
# data-parallel replicas (`vllm serve --data-parallel-size`, vLLM 0.33.0, one API server balancing them): a step's
# scoring (0.9-2 M tokens of prefill from 8 ranks, and more when several runs share the server) is spread over
# them, where TP 8 over one replica ran it through one engine; each rank keeps GROPD_TEACHER_CONCURRENCY (4)
# requests in flight (gropd/model/teacher/server.py). PORT defaults to 8000. The model is served under the name `<repo>@<full revision>`, which
# ServerTeacher (gropd/model/teacher/server.py) checks against the run's manifest before it scores anything.
# Before anything loads, `./reproduce.sh check --serving LABEL` checks this node's environment (.venv made by
# `./reproduce.sh gpu-env`, the GPUs torch sees, driver and torch, CPUs, vLLM at its pin, LABEL's pinned
# snapshot in the Hub cache; exit 2 with a line naming what to set), and `python -m gropd.model.fit` that
# weights, the KV cache of one MAX_MODEL_LEN sequence and the prompt-log-prob workspace fit
# GPU_MEMORY_UTILIZATION of each GPU (exit 2 if not).
# Its life follows its runs: experiments/launch/submit_grid.sh submits it with its grid and ends it (scancel) once the
# grid's array has ended (a job of its own, --dependency=afterany on the array). Its time limit is the plan's: 18 h =
# the longest served Table 1 run's start-up deadline (5,178 s) + 200 steps x its longest step (289 s), 63,075 s, in
# whole hours (`python -m gropd.runs.job_plan`; tests/test_job_plan.py checks this line against it). Ten minutes
# before the limit Slurm signals it (--signal=B:USR1@600) and it requeues itself (`scontrol requeue`): its runs wait
# for it (GROPD_TEACHER_WAIT_S) and find it again through its address file, or, when it takes longer, requeue
# themselves (the marker of slurm_run.sbatch) and resume from their last checkpoint. Host memory (--mem): 64 GiB =
# (8 GPUs x (a vLLM worker 3 GiB + an engine core 3 GiB) + the API server 3 GiB) = 51 GiB, x 1.25, up to a multiple
# of 8 GiB (the weights go through the page cache, which the kernel reclaims; gropd/runs/job_plan.py).
# Each time it starts it writes its address (this node's name, not the 0.0.0.0 it listens on) to
# ${GROPD_TEACHER_DIR:-.teachers}/LABEL.url, where runs without backend.teacher_url find it, at start-up and
# again whenever it goes away mid-run: a preempted server is requeued (--requeue) and found on its new node.
# Runs wait for it to answer (GROPD_TEACHER_WAIT_S, 30 minutes by default, at start-up and mid-run), so the
# array may be submitted before or right after this job. It also prints the address for a fixed
#   backend.teacher_url=http://<this node>:PORT   (sbatch ... --export=ALL,TEACHER_URL=... slurm_run.sbatch)
# Environment:
#   MAX_MODEL_LEN           default 10241: a 2,048-token prompt + an 8,192-token response + the 1 token vLLM
#                           generates after every prompt it scores (runs refuse a server with less)
#   GPU_MEMORY_UTILIZATION  default 0.90
#   MAX_NUM_BATCHED_TOKENS  unset: vLLM's default. vLLM 0.33 on CUDA (Model Runner V2) computes prompt
#                           log-probs 1,024 rows at a time whatever the prefill batch, so a cap only
#                           throttles prefill; set 4096 where VLLM_USE_V2_MODEL_RUNNER=0 (the V1 runner takes
#                           a float32 [batch, vocabulary] log-softmax its profiler does not reserve)
#   HOST                    default 0.0.0.0 (the trainers are on other nodes)
#   HF_HUB_OFFLINE          default 1: compute nodes load the pinned revision from the Hugging Face cache
#                           (download it once where the Hub is reachable: the check prints the command when it
#                           is missing); HF_HUB_OFFLINE=0 lets vLLM download it here
#   GROPD_TEACHER_DIR       default .teachers (in the repository, on shared storage): where it writes LABEL.url
#SBATCH --job-name=gropd-teacher
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=32
#SBATCH --mem=64G
#SBATCH --time=18:00:00
#SBATCH --signal=B:USR1@600
#SBATCH --requeue
#SBATCH --output=gropd-teacher-%j.out
set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-$(dirname "$0")/../..}"
[[ -f .venv/bin/activate ]] && source .venv/bin/activate
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1}

label=${1:?usage: teacher_server.sh LABEL [TP] [PORT]}
gpus=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' || true)
tp=${2:-$(( gpus > 1 ? 2 : 1 ))}
(( gpus < 1 )) && gpus=$tp
(( gpus % tp == 0 )) || { echo "TP ${tp} does not divide this node's ${gpus} GPUs: give a TP that does" >&2; exit 2; }
replicas=$(( gpus / tp ))
port=${3:-8000}
max_model_len=${MAX_MODEL_LEN:-10241}
memory=${GPU_MEMORY_UTILIZATION:-0.90}
host=${HOST:-0.0.0.0}

# this node's environment, before anything loads (exit 2, a line a problem)
./reproduce.sh check --processes "$gpus" --serving "$label"

# repo and full revision through the suite's own lock reader (a clear error when unpinned)
pinned=$(python - "$label" <<'PY'
import sys
from pathlib import Path

from gropd.config import load_manifests
from gropd.config.lock import pinned_revision, read_lock

source = load_manifests(Path("experiments")).model("paper", sys.argv[1])["source"]
lock_path = Path("experiments/lock.yaml")
print(source["repo"], pinned_revision(read_lock(lock_path), source["repo"], str(source["revision"]), lock_path))
PY
) || exit 2
read -r repo revision <<< "$pinned"
batched=()
[[ -n "${MAX_NUM_BATCHED_TOKENS:-}" ]] && batched=(--max-num-batched-tokens "$MAX_NUM_BATCHED_TOKENS")
python -m gropd.model.fit "$label" --tensor-parallel "$tp" --max-model-len "$max_model_len" \
  --fraction "$memory" ${MAX_NUM_BATCHED_TOKENS:+--max-batched-tokens "$MAX_NUM_BATCHED_TOKENS"}

case "$host" in
  0.0.0.0|::) address=$(hostname -f 2>/dev/null || hostname) ;;
  *) address=$host ;;
esac
# where runs find it now (written whole, then renamed: a run never reads half an address)
teachers=${GROPD_TEACHER_DIR:-.teachers}
mkdir -p "$teachers"
echo "http://${address}:${port}" > "${teachers}/.${label}.url.$$" && mv -f "${teachers}/.${label}.url.$$" "${teachers}/${label}.url"
echo "serving ${repo}@${revision} (${replicas} replica(s) of tp=${tp}) on ${host}:${port}; runs find it in ${teachers}/${label}.url, or give" >&2
echo "  backend.teacher_url=http://${address}:${port}   (TEACHER_URL=http://${address}:${port} for slurm_run.sbatch)" >&2
# in the background, so that this shell takes Slurm's signal before the time limit and requeues the job (see above)
vllm serve "$repo" \
  --revision "$revision" \
  --tokenizer-revision "$revision" \
  --served-model-name "${repo}@${revision}" \
  --tensor-parallel-size "$tp" \
  --data-parallel-size "$replicas" \
  --dtype bfloat16 \
  --max-model-len "$max_model_len" \
  "${batched[@]}" \
  --gpu-memory-utilization "$memory" \
  --host "$host" \
  --port "$port" &
server=$!
requeue() {
  echo "the time limit is near: requeueing job ${SLURM_JOB_ID:-} so that its runs find the server again" >&2
  [[ -n "${SLURM_JOB_ID:-}" ]] && scontrol requeue "$SLURM_JOB_ID"
}
trap requeue USR1
trap 'kill -TERM "$server" 2>/dev/null' TERM INT
set +e
wait "$server"
code=$?
while (( code > 128 )) && kill -0 "$server" 2>/dev/null; do  # a signal ended the wait, not the server
  wait "$server"
  code=$?
done
exit "$code"
