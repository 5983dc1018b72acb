"""Which profile this machine runs by default, and the one case that must not fall back: a GPU node
whose torch cannot see its GPUs.

    CUDA visible to torch              -> paper
    no NVIDIA GPU (nvidia-smi absent
      or listing none)                 -> tiny
    nvidia-smi lists GPUs but torch
      sees none                        -> stop (exit 2): a CPU-only torch build, or a CUDA build newer
                                          than the driver (torch 2.14 from PyPI is CUDA 13: driver >= 580)

    python -m gropd.model.hardware           prints the profile (reproduce.sh), or the error and exits 2
"""

from __future__ import annotations

import subprocess
import sys

MIN_DRIVER = {12: 525, 13: 580}  # CUDA major -> minimum NVIDIA Linux driver major (NVIDIA's compatibility table)


class GPUNotUsableError(RuntimeError):
    """nvidia-smi sees GPUs that torch cannot use."""


def nvidia_gpus() -> list[tuple[str, str]]:
    """(name, driver version) of each GPU nvidia-smi lists; [] without nvidia-smi or GPUs."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    rows = [line.rsplit(",", 1) for line in out.stdout.splitlines() if "," in line]
    return [(name.strip(), driver.strip()) for name, driver in rows]


def why_not_usable(driver: str, torch_version: str, torch_cuda: str | None) -> str:
    """Why this torch build cannot drive GPUs whose driver is `driver`, and what to install."""
    if torch_cuda is None:
        return (
            f"this torch ({torch_version}) is a CPU-only build; install a CUDA build: "
            "./reproduce.sh gpu-env (requirements-gpu.txt: torch 2.14.0, CUDA 13, driver >= 580)"
        )
    major = int(torch_cuda.split(".")[0])
    need = MIN_DRIVER.get(major)
    have = int(driver.split(".")[0]) if driver.split(".")[0].isdigit() else None
    if need is not None and have is not None and have < need:
        return (
            f"this torch ({torch_version}) is built for CUDA {torch_cuda}, which needs an NVIDIA driver >= "
            f"{need}; the driver is {driver}: update the driver, or install a torch built for an older CUDA"
        )
    return (
        f"this torch ({torch_version}, CUDA {torch_cuda}) found no usable GPU with driver {driver}; "
        "check CUDA_VISIBLE_DEVICES and `python -c 'import torch; torch.cuda.init()'`"
    )


def choose_profile() -> tuple[str, str]:
    """(profile, why) by the module docstring's rule; GPUNotUsableError in the stop case."""
    import torch

    if torch.cuda.is_available():
        return "paper", "CUDA is available"
    gpus = nvidia_gpus()
    if not gpus:
        return "tiny", "no CUDA device found"
    names = ", ".join(sorted({name for name, _ in gpus}))
    reason = why_not_usable(gpus[0][1], torch.__version__, torch.version.cuda)
    raise GPUNotUsableError(
        f"nvidia-smi lists {len(gpus)} GPU(s) ({names}, driver {gpus[0][1]}) but torch cannot use them: {reason}. "
        "Not falling back to the tiny profile on a GPU node; pass --profile tiny to run it anyway."
    )


if __name__ == "__main__":
    try:
        profile, why = choose_profile()
    except GPUNotUsableError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    print(f"profile: {profile} ({why}; pass --profile to choose)", file=sys.stderr)
    print(profile)
