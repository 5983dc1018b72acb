"""Monitoring correlations of one rollout batch (Figure 4's Pearson(S, length) and Spearman(S, reward)), computed by
a route whose order of operations does not depend on the CPU.

numpy's and scipy's correlations reach OpenBLAS, which picks its dot and norm kernels by CPU (an AVX-512 CPU and a
Zen 3 differ in the last digit: docs/DESIGN.md, Numbers that travel). Here every sum is `math.fsum` (the exactly
rounded sum of float64 terms), every other operation one IEEE-rounded float64 operation, so the bits are the same
on any machine:

    r = Σ (x_i − x̄)(y_i − ȳ) / √( Σ (x_i − x̄)² · Σ (y_i − ȳ)² ),   x̄ = fsum(x) / n,

clamped to [−1, 1]. Spearman's ρ is r over average ranks (tied values share the mean of their positions).
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson correlation of two equal-length samples; None when undefined (fewer than 2 points, a constant side,
    a non-finite value)."""
    if len(x) != len(y):
        raise ValueError(f"pearson: {len(x)} x values against {len(y)} y values")
    xs, ys = [float(v) for v in x], [float(v) for v in y]
    if len(xs) < 2 or not all(math.isfinite(v) for v in (*xs, *ys)):
        return None
    if min(xs) == max(xs) or min(ys) == max(ys):
        return None
    x_mean, y_mean = math.fsum(xs) / len(xs), math.fsum(ys) / len(ys)
    dx, dy = [v - x_mean for v in xs], [v - y_mean for v in ys]
    covariance = math.fsum(a * b for a, b in zip(dx, dy, strict=True))
    spread = math.sqrt(math.fsum(a * a for a in dx) * math.fsum(b * b for b in dy))
    if spread == 0.0 or not math.isfinite(spread):
        return None
    return max(-1.0, min(1.0, covariance / spread))


def average_ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, tied values sharing the mean of the positions they occupy (scipy's rankdata 'average')."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman rank correlation (average ranks for ties); None when undefined."""
    xs, ys = [float(v) for v in x], [float(v) for v in y]
    if len(xs) != len(ys):
        raise ValueError(f"spearman: {len(xs)} x values against {len(ys)} y values")
    if not all(math.isfinite(v) for v in (*xs, *ys)):
        return None
    return pearson(average_ranks(xs), average_ranks(ys))
