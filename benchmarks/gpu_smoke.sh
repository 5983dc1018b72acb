#!/usr/bin/env bash
# GPU smoke test of the vLLM backends, under 8 minutes on one GPU; installs nothing.
#
#   bash benchmarks/gpu_smoke.sh            (after pip install -r requirements-gpu.txt)
#
# 1. preflight: CUDA and vLLM present, else exit 3 with a message saying which is missing;
# 2. a tiny-profile run for 5 rollout batches with vLLM rollouts and the in-process vLLM
#    teacher (results go to a scratch folder, never to results/);
# 3. rollout tokens/s of the suite's VLLMRollout next to bare vllm.LLM.generate on the
#    same batch (benchmarks/vllm_rollout_bench.py, one process each).
# Environment: RUN_ID (default table1__I4nothink-I1.7nothink__gropd), KEEP_SCRATCH=1.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
[[ -f .venv/bin/activate ]] && source .venv/bin/activate
run_id=${RUN_ID:-table1__I4nothink-I1.7nothink__gropd}

python - <<'PY' || exit 3
import importlib.util
import sys

import torch

if not torch.cuda.is_available():
    sys.exit("gpu_smoke: no CUDA device visible to torch "
             f"(torch {torch.__version__}, built for CUDA {torch.version.cuda}); nothing to test here")
if importlib.util.find_spec("vllm") is None:
    sys.exit("gpu_smoke: vLLM is not installed; run `pip install -r requirements-gpu.txt` first")
import vllm

print(f"gpu_smoke: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, vLLM {vllm.__version__}")
PY

# The tiny world is built (or loaded) in the repository so the scratch run reuses it.
timeout 120 python -m gropd.cli world

scratch=$(mktemp -d "${TMPDIR:-/tmp}/gropd-gpu-smoke.XXXXXX")
[[ -n "${KEEP_SCRATCH:-}" ]] || trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/results/tiny"
ln -s "$repo/experiments" "$scratch/experiments"
ln -s "$repo/results/tiny/world" "$scratch/results/tiny/world"

echo "== 5 rollout batches of ${run_id} (tiny profile, vLLM rollout + vLLM teacher)"
start=$(date +%s)
(cd "$scratch" && PYTHONPATH="$repo" timeout 300 python -m gropd.cli run "$run_id" --profile tiny \
  backend.rollout=vllm backend.teacher=vllm train.steps=5 backend.device=cuda)
echo "run finished in $(( $(date +%s) - start )) s; metrics: $(find "$scratch/results" -name metrics.jsonl | head -n 1)"

echo "== rollout throughput on the same batch (8 prompts x 8 samples, 200 new tokens)"
for engine in bare suite; do
  PYTHONPATH="$repo" timeout 120 python benchmarks/vllm_rollout_bench.py --engine "$engine" --profile tiny
done
