#!/usr/bin/env bash
# Serve a paper teacher with `vllm serve` at the revision pinned in experiments/lock.yaml.
#
#   experiments/launch/teacher_server.sh LABEL [TP] [PORT]      e.g.  teacher_server.sh I32 8 8000
#   sbatch --nodes=1 --gpus-per-node=8 --time=48:00:00 experiments/launch/teacher_server.sh I32 8
#
# LABEL is a model label of the paper profile (experiments/models.yaml: I32, I4, B4);
# TP the tensor-parallel size (default 8; 4 fits Qwen3-32B in bf16 on 80 GB cards);
# PORT defaults to 8000. The model is served under the name `<repo>@<full revision>`,
# which ServerTeacher (gropd/teacher/server.py) checks against the run's manifest
# before it scores anything. Point a run at it with
#   backend.teacher=server backend.teacher_url=http://<this host>:PORT
# Environment: MAX_MODEL_LEN (default 16384: prompt + 8,192-token response with room),
# GPU_MEMORY_UTILIZATION (default 0.90), HOST (default 0.0.0.0; the trainer is on another node).
set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-$(dirname "$0")/../..}"

label=${1:?usage: teacher_server.sh LABEL [TP] [PORT]}
tp=${2:-8}
port=${3:-8000}

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

echo "serving ${repo}@${revision} (tp=${tp}) on ${HOST:-0.0.0.0}:${port}" >&2
exec vllm serve "$repo" \
  --revision "$revision" \
  --tokenizer-revision "$revision" \
  --served-model-name "${repo}@${revision}" \
  --tensor-parallel-size "$tp" \
  --dtype bfloat16 \
  --max-model-len "${MAX_MODEL_LEN:-16384}" \
  --gpu-memory-utilization "${GPU_MEMORY_UTILIZATION:-0.90}" \
  --host "${HOST:-0.0.0.0}" \
  --port "$port"
