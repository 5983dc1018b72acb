#!/usr/bin/env bash
# The first thing to run on a GPU machine: the paper profile's shapes on one GPU, no network, <= 5 minutes.
#
#   bash benchmarks/gpu_check.sh [--lengths 2048 8192] [--rollout-rows 16]
#
# Random weights from a Qwen3-1.7B-shaped config (benchmarks/gpu_check.py): a bf16 update step over
# float32 masters at Table 3's per-device batch (1 response per forward/backward, 8 per optimiser
# step, gradient checkpointing), teacher scoring in bf16, and rollouts (vLLM when installed, else the
# transformers sampler), each at 2k- and 8k-token responses: peak GPU memory and tokens/s, as a table.
set -euo pipefail
cd "$(dirname "$0")/.."
python=python
[[ -x .venv/bin/python ]] && python=.venv/bin/python
exec timeout 300 "$python" benchmarks/gpu_check.py "$@"
