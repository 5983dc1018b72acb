"""The one statistics convention of every artefact (docs/DESIGN.md §5; each legend states CONVENTION): a cell is
mean ± sample std (ddof 1) over n seeds; a difference is called only by a paired comparison over the seeds both
ran, the mean of the differences a − b with its CONFIDENCE t interval (t_{n−1} · s / √n either side) excluding 0.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

CONFIDENCE = 0.95
MIN_SEEDS = 2
CONVENTION = (
    "Cells: mean ± sample std (ddof 1) over n seeds, n shown. A difference is called only by a paired comparison "
    f"over the seeds both ran: mean per-seed difference [{CONFIDENCE:.0%} t interval], 'better' only when the interval "
    "excludes 0; bold marks such a win; nothing is bold at n = 1."
)


@dataclass(frozen=True)
class Stats:
    """Mean and sample std (None for one value) of n per-seed values."""

    mean: float
    std: float | None
    n: int

    def text(self, decimals: int) -> str:
        """'12.34 ± 0.56', or '12.34' for one seed (thousands separated)."""
        body = f"{self.mean:,.{decimals}f}"
        return body if self.std is None else f"{body} ± {self.std:,.{decimals}f}"


def stats(values: list[float]) -> Stats | None:
    """Stats of per-seed values (unrounded); None when there are none."""
    std = statistics.stdev(values) if len(values) > 1 else None
    return Stats(statistics.fmean(values), std, len(values)) if values else None


@dataclass(frozen=True)
class Interval:
    """The mean of n values and its CONFIDENCE t interval [lo, hi] (infinite for n = 1)."""

    mean: float
    lo: float
    hi: float
    n: int

    @property
    def call(self) -> int:
        """+1 when the interval lies above 0, −1 below, 0 when it holds 0 (always for n = 1: it is infinite)."""
        return 1 if self.lo > 0 else -1 if self.hi < 0 else 0

    def text(self, decimals: int = 2) -> str:
        """'+1.23 [+0.45, +2.01] (n=5)'; one value: '+1.23 (n=1)'."""
        if self.n < MIN_SEEDS:
            return f"{self.mean:+.{decimals}f} (n={self.n})"
        return f"{self.mean:+.{decimals}f} [{self.lo:+.{decimals}f}, {self.hi:+.{decimals}f}] (n={self.n})"


def t_interval(values: list[float]) -> Interval:
    """Interval of the mean of a non-empty list of values."""
    from scipy.stats import t

    mean, n = statistics.fmean(values), len(values)
    if n < 2:
        return Interval(mean, -math.inf, math.inf, n)
    half = float(t.ppf(0.5 + CONFIDENCE / 2, n - 1)) * statistics.stdev(values) / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n)


def paired(a: dict[int, float], b: dict[int, float]) -> Interval | None:
    """Interval of the per-seed differences a − b over the seeds both hold (seed -> value); None: no such seed."""
    seeds = sorted(set(a) & set(b))
    return t_interval([a[s] - b[s] for s in seeds]) if seeds else None


def lift(values: dict[int, float], reference: float | None) -> Interval | None:
    """Interval of the per-seed values minus one reference value (a trained student over its pre-OPD score); None
    without values or reference."""
    return t_interval([v - reference for v in values.values()]) if values and reference is not None else None
