#!/usr/bin/env bash
# Serve a paper teacher with `vllm serve` at the revision pinned in experiments/lock.yaml.
#
#   experiments/launch/teacher_server.sh LABEL [TP] [PORT]      e.g.  teacher_server.sh I32 8 8000
#   sbatch --nodes=1 --gpus-per-node=8 --time=48:00:00 experiments/launch/teacher_server.sh I32
#
# LABEL is a model label of the paper profile (experiments/models.yaml: I32, I4, B4); TP the
# tensor-parallel size (default: every GPU this node shows; Qwen3-32B needs 2 or more on 80 GB cards);
# PORT defaults to 8000. The model is served under the name `<repo>@<full revision>`, which
# ServerTeacher (gropd/model/teacher/server.py) checks against the run's manifest before it scores anything.
# Before it starts, `python -m gropd.model.fit` checks that weights, the KV cache of one MAX_MODEL_LEN
# sequence and the prompt-log-prob workspace fit GPU_MEMORY_UTILIZATION of each GPU (exit 2 if not).
# Point a run at it with
#   backend.teacher_url=http://<this host>:PORT     (the 32B pairings score through a server by default)
# Environment: MAX_MODEL_LEN (default 10240: a 2,048-token prompt + an 8,192-token response),
# GPU_MEMORY_UTILIZATION (default 0.90), MAX_NUM_BATCHED_TOKENS (default 4096: bounds the float32
# [chunk, vocabulary] log-softmax vLLM computes for prompt log-probs, which its memory profiling does
# not reserve), HOST (default 0.0.0.0; the trainer is on another node).
set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-$(dirname "$0")/../..}"

label=${1:?usage: teacher_server.sh LABEL [TP] [PORT]}
gpus=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU' || true)
tp=${2:-$(( gpus > 0 ? gpus : 1 ))}
port=${3:-8000}
max_model_len=${MAX_MODEL_LEN:-10240}
memory=${GPU_MEMORY_UTILIZATION:-0.90}
batched=${MAX_NUM_BATCHED_TOKENS:-4096}

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
)
read -r repo revision <<< "$pinned"
python -m gropd.model.fit "$label" --tensor-parallel "$tp" --max-model-len "$max_model_len" \
  --max-batched-tokens "$batched" --fraction "$memory"

echo "serving ${repo}@${revision} (tp=${tp}) on ${HOST:-0.0.0.0}:${port}" >&2
exec vllm serve "$repo" \
  --revision "$revision" \
  --tokenizer-revision "$revision" \
  --served-model-name "${repo}@${revision}" \
  --tensor-parallel-size "$tp" \
  --dtype bfloat16 \
  --max-model-len "$max_model_len" \
  --max-num-batched-tokens "$batched" \
  --gpu-memory-utilization "$memory" \
  --host "${HOST:-0.0.0.0}" \
  --port "$port"
