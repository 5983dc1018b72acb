"""Aggregating one quantity over a grid's seeds: mean ± sample standard deviation (ddof = 1).

With one seed the spread is 0 and only the mean is shown.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from gropd.report.formats import Cell


@dataclass(frozen=True)
class SeedStats:
    """mean and spread (sample std, 0 for one seed) of `n` per-seed values."""

    mean: float
    spread: float
    n: int


def seed_stats(values: list[float]) -> SeedStats:
    """SeedStats of a non-empty list of per-seed values (unrounded)."""
    if not values:
        raise ValueError("seed_stats needs at least one value")
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return SeedStats(mean=statistics.fmean(values), spread=spread, n=len(values))


def stats_cell(stats: SeedStats, decimals: int, bold: bool = False, mark: str = "") -> Cell:
    """'12.34' or '12.34 ± 0.56' (thousands separated); the CSV keeps full precision."""
    text = f"{stats.mean:,.{decimals}f}"
    raw = repr(stats.mean)
    if stats.n > 1:
        text += f" ± {stats.spread:,.{decimals}f}"
        raw += f" ± {stats.spread!r} (n={stats.n})"
    return Cell(text + mark, bold=bold, raw=raw + mark)
