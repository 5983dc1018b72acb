"""Moving averages of a metric series (values already stripped of nulls, in step order)."""

from __future__ import annotations

import statistics


def trailing_mean(values: list[float], window: int) -> list[float]:
    """m_i = mean(v_{max(0, i-w+1)} .. v_i): the last `window` points, fewer at the start."""
    return [statistics.fmean(values[max(0, i - window + 1) : i + 1]) for i in range(len(values))]


def centred_mean(values: list[float], window: int) -> list[float]:
    """m_i = mean(v_{i-(w-1)//2} .. v_{i+w//2}), the window cut at both ends of the series."""
    before, after = (window - 1) // 2, window // 2
    return [statistics.fmean(values[max(0, i - before) : i + after + 1]) for i in range(len(values))]
