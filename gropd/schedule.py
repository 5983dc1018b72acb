"""The learning-rate schedule of the student's optimiser, as a factor of the base lr.

For optimiser update `u` (0-based) of `total` updates, with `w` warm-up updates and
floor `m` (`min_lr_ratio`):

    warm(u)   = min(1, (u + 1) / w)            (1 when w = 0)
    p         = min(u, total) / total          (progress through the run)
    constant  factor = warm(u)
    linear    factor = warm(u) · (m + (1 − m) · (1 − p))
    cosine    factor = warm(u) · (m + (1 − m) · ½ (1 + cos π p))
"""

from __future__ import annotations

import math

SCHEDULES = ("constant", "linear", "cosine")


def lr_factor(update: int, total: int, name: str, warmup_steps: int, min_lr_ratio: float) -> float:
    """The multiplier of the base learning rate at optimiser update `update` (see the module docstring)."""
    if name not in SCHEDULES:
        raise ValueError(f"unknown schedule {name!r}; valid: {', '.join(SCHEDULES)}")
    warm = min(1.0, (update + 1) / warmup_steps) if warmup_steps else 1.0
    if name == "constant":
        return warm
    progress = min(update, total) / total
    decay = 1.0 - progress if name == "linear" else 0.5 * (1.0 + math.cos(math.pi * progress))
    return warm * (min_lr_ratio + (1.0 - min_lr_ratio) * decay)
