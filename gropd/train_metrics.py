"""Monitoring numbers of one rollout batch (Figure 4's correlations among them). Never in the loss."""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import stats


def pearson(x: list[float], y: list[float]) -> float | None:
    """Pearson correlation, or None when undefined (fewer than 2 points or a constant side)."""
    return _correlation(stats.pearsonr, x, y)


def spearman(x: list[float], y: list[float]) -> float | None:
    """Spearman rank correlation (ties get average ranks), or None when undefined."""
    return _correlation(stats.spearmanr, x, y)


def _correlation(function, x: list[float], y: list[float]) -> float | None:
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = float(function(x, y)[0])
    return value if math.isfinite(value) else None


def mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")
