"""Two records of the same run compared bit for bit, with one named exception.

The exception: monitoring correlations (Figure 4's, never in the loss) that runs made before FIXED_BY computed with
numpy/scipy, whose OpenBLAS picks its dot and norm kernels by CPU. The committed reference runs hold the AVX-512
kernel's last digits; a CPU without AVX-512 (a Zen 3) computes others (issue 61). Since FIXED_BY they are computed
without BLAS (gropd/train/correlation.py), the same on every CPU, yet still differ from those committed values in
the last digit. So these keys, and only these, are compared within TOLERANCE: |a − b| ≤ 1e-14 · max(1, |a|, |b|)
(a correlation's scale is 1). The next remake of the reference runs (whenever numerics change for another reason)
drops the exception.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

PER_CPU_MONITORING = ("pearson_score_len", "spearman_score_reward")
TOLERANCE = 1e-14
FIXED_BY = "4b65c01"  # the commit that computes them without BLAS (gropd/train/correlation.py)
MONITORING_CLASS = f"monitoring correlations within {TOLERANCE:g}"


def within_tolerance(a: Any, b: Any) -> bool:
    """Two recorded correlations that agree to TOLERANCE (both absent, or both numbers within it)."""
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=TOLERANCE)


def differing_keys(
    mine: Mapping[str, Any], theirs: Mapping[str, Any], ignore: Iterable[str] = ()
) -> tuple[list[str], list[str]]:
    """(keys that differ, PER_CPU_MONITORING keys that differ only within TOLERANCE), each sorted; `ignore` (e.g.
    wall-clock timings) is left out of both."""
    skipped = set(ignore)
    differ, close = [], []
    for key in sorted({*mine, *theirs} - skipped):
        a, b = mine.get(key), theirs.get(key)
        if a == b:
            continue
        if key in PER_CPU_MONITORING and within_tolerance(a, b):
            close.append(key)
        else:
            differ.append(key)
    return differ, close
