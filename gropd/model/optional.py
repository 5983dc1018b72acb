"""Optional dependencies: import on use, fail with a message that says what to install.

GPU-only backends (vLLM rollouts and teacher scoring) are imported by name from the
config. Their modules must import on a CPU machine without vLLM, so they call
`require` inside constructors, never at module level.
"""

from __future__ import annotations

import importlib
from types import ModuleType

GPU_INSTALL_HINT = "./reproduce.sh gpu-env (requirements-gpu.txt into .venv, from any node)"


VLLM_PURPOSES = {"rollout": "student rollouts", "teacher": "in-process teacher scoring"}  # backend.<key>=vllm


class MissingDependencyError(ImportError):
    """An optional package needed by a chosen backend is not installed."""


def require(module_name: str, purpose: str, install_hint: str = GPU_INSTALL_HINT) -> ModuleType:
    """Import `module_name`, or raise MissingDependencyError naming it, why it is needed and how to install it.

    Example: `vllm = require("vllm", "backend.rollout=vllm")`.
    """
    try:
        return importlib.import_module(module_name)
    except ImportError as err:
        raise MissingDependencyError(
            f"{purpose} needs the Python package '{module_name}', which could not be imported "
            f"({err.__class__.__name__}: {err}). Install it with: {install_hint}"
        ) from err
