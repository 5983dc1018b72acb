"""The one statistics convention of every artefact (docs/DESIGN.md §7; each legend states CONVENTION): a cell is
mean ± sample std (ddof 1) over n seeds; a difference is called only when its CONFIDENCE t interval excludes 0:
within a pairing a paired comparison over the seeds both ran (the mean of the differences a − b, t_{n−1} · s / √n
either side), across pairings, which seeds do not pair, Welch's unpaired interval (Welch–Satterthwaite degrees of
freedom). Each interval carries the two-sided p of its t test, which `holm` adjusts over a family.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

CONFIDENCE = 0.95
POWER = 0.8  # the size of "no difference": the smallest difference resolved with this probability
MIN_SEEDS = 2
CONVENTION = (
    "Cells: mean ± sample std (ddof 1) over n seeds, n shown. A difference is called only by a paired comparison "
    f"over the seeds both ran: mean per-seed difference [{CONFIDENCE:.0%} t interval], 'better' only when the interval "
    "excludes 0; bold marks such a win; nothing is bold at n = 1."
)
EVALUATIONS = (  # Table 6: evaluations of untrained models, no training seed, no comparison
    "Cells: mean ± sample std (ddof 1) over n evaluation seeds, n shown (an eval run's seed offsets its evaluation "
    "seed: each a fresh draw of the K samples a question); this table calls no difference."
)
UNPAIRED = (  # where an artefact compares runs of different pairings (the claims page)
    "Runs of different pairings share no prompts, so seeds do not pair them: their difference is Welch's unpaired "
    f"[{CONFIDENCE:.0%} t interval] (Welch–Satterthwaite degrees of freedom), 'n=a vs b'."
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
    """A difference (or any estimate) and its CONFIDENCE t interval [lo, hi] (infinite when a side has one value):
    n values (paired), or `sizes` (a, b) of an unpaired comparison, n then the smaller; `p`: the two-sided p of its
    t test against 0 (None when infinite), `df` its degrees of freedom."""

    mean: float
    lo: float
    hi: float
    n: int
    p: float | None = None
    df: float | None = None
    sizes: tuple[int, int] | None = None

    @property
    def call(self) -> int:
        """+1 when the interval lies above 0, −1 below, 0 when it holds 0 (always for n = 1: it is infinite)."""
        return 1 if self.lo > 0 else -1 if self.hi < 0 else 0

    @property
    def se(self) -> float | None:
        """The standard error behind the interval: its half-width / t_{(1+CONFIDENCE)/2, df} (None when infinite)."""
        from scipy.stats import t

        if self.df is None or math.isinf(self.lo):
            return None
        return (self.hi - self.mean) / float(t.ppf(0.5 + CONFIDENCE / 2, self.df))

    def distance(self, threshold: float = 0.0) -> float | None:
        """How many standard errors the estimate sits from `threshold`: (mean − threshold) / se (None: no se; ±inf
        at se 0 off the threshold)."""
        se = self.se
        if se is None:
            return None
        gap = self.mean - threshold
        return gap / se if se else (0.0 if gap == 0 else math.copysign(math.inf, gap))

    def resolvable(self, power: float = POWER) -> float | None:
        """The smallest difference this design resolves (two-sided, at CONFIDENCE) with probability `power`, from the
        observed spread: (t_{(1+CONFIDENCE)/2, df} + t_{power, df}) · se. Paired over n seeds (df n − 1, se s/√n):
        (t_{0.975,n−1} + t_{0.8,n−1}) · s/√n; Welch's: the same with its se and Welch–Satterthwaite df. None: no se."""
        from scipy.stats import t

        se = self.se
        if se is None:
            return None
        return (float(t.ppf(0.5 + CONFIDENCE / 2, self.df)) + float(t.ppf(power, self.df))) * se

    def text(self, decimals: int = 2) -> str:
        """'+1.23 [+0.45, +2.01] (n=5)'; one value: '+1.23 (n=1)'; unpaired: '… (n=3 vs 4, Welch)'."""
        size = f"n={self.n}" if self.sizes is None else f"n={self.sizes[0]} vs {self.sizes[1]}, Welch"
        if math.isinf(self.lo):
            return f"{self.mean:+.{decimals}f} ({size})"
        return f"{self.mean:+.{decimals}f} [{self.lo:+.{decimals}f}, {self.hi:+.{decimals}f}] ({size})"


def two_sided_p(mean: float, se: float, df: float) -> float:
    """The two-sided p of a t test of `mean` against 0 (se 0: 0, or 1 at a mean of 0)."""
    from scipy.stats import t

    return float(2 * t.sf(abs(mean) / se, df)) if se else 0.0 if mean else 1.0


def student_t(mean: float, se: float, df: float | None, n: int, sizes: tuple[int, int] | None = None) -> Interval:
    """The CONFIDENCE interval mean ± t_df · se and its p (df None: nothing to estimate the spread from, an infinite
    interval)."""
    from scipy.stats import t

    if df is None:
        return Interval(mean, -math.inf, math.inf, n, sizes=sizes)
    half = float(t.ppf(0.5 + CONFIDENCE / 2, df)) * se
    return Interval(mean, mean - half, mean + half, n, two_sided_p(mean, se, df), df, sizes)


def t_interval(values: list[float]) -> Interval:
    """Interval of the mean of a non-empty list of values (df n − 1)."""
    from scipy.stats import t

    mean, n = statistics.fmean(values), len(values)
    if n < 2:
        return student_t(mean, math.inf, None, n)
    std = statistics.stdev(values)
    half = float(t.ppf(0.5 + CONFIDENCE / 2, n - 1)) * std / math.sqrt(n)  # (in this order: the published bits)
    return Interval(mean, mean - half, mean + half, n, two_sided_p(mean, std / math.sqrt(n), n - 1), n - 1)


def linear(terms: list[tuple[float, list[float]]], estimate: float | None = None) -> Interval:
    """Interval of Σ c·mean(values) over independent groups (c, values) (or of `estimate`, whose first-order
    expansion that sum is: the delta method): standard error √(Σ c² s² / n), Welch–Satterthwaite degrees of freedom
    (Σ c² s² / n)² / Σ (c² s² / n)² / (n − 1); infinite when a group has one value. `n`: the smallest group."""
    parts = [(c * c * statistics.variance(v) / len(v), len(v)) if len(v) > 1 else (None, len(v)) for c, v in terms]
    mean = estimate if estimate is not None else sum(c * statistics.fmean(v) for c, v in terms)
    n = min(size for _, size in parts)
    sizes = (parts[0][1], parts[1][1]) if len(parts) == 2 else None
    if any(part is None for part, _ in parts):
        return student_t(mean, math.inf, None, n, sizes)
    variance = sum(part for part, _ in parts)
    df = variance**2 / sum(part**2 / (size - 1) for part, size in parts) if variance else float(n - 1)
    return student_t(mean, math.sqrt(variance), df, n, sizes)


def welch(a: list[float], b: list[float]) -> Interval | None:
    """Welch's unpaired interval of mean(a) − mean(b) (None when a side is empty): runs that no seed pairs."""
    return linear([(1.0, a), (-1.0, b)]) if a and b else None


def paired(a: dict[int, float], b: dict[int, float]) -> Interval | None:
    """Interval of the per-seed differences a − b over the seeds both hold (seed -> value); None: no such seed."""
    seeds = sorted(set(a) & set(b))
    return t_interval([a[s] - b[s] for s in seeds]) if seeds else None


def lift(values: dict[int, float], reference: float | list[float] | None) -> Interval | None:
    """Interval of the per-seed values minus a reference (a trained student over its pre-OPD score): one value,
    t interval of the differences; several (the reference evaluated at several evaluation seeds), Welch's interval,
    so that the reference's own spread is carried; None without values or reference."""
    if not values or reference is None or reference == []:
        return None
    if isinstance(reference, list) and len(reference) > 1:
        return welch(list(values.values()), reference)
    one = reference[0] if isinstance(reference, list) else reference
    return t_interval([v - one for v in values.values()])


def gap_share(trained: list[float], student: list[float], teacher: list[float]) -> Interval:
    """(mean trained − mean student) / (mean teacher − mean student), the share of the teacher–student gap a trained
    student closed, with the delta method's interval: linear in the three means with coefficients 1/G, −L/G² and
    −(G − L)/G² (L the lift, G the gap), Welch–Satterthwaite degrees of freedom; infinite while a group has one value
    (a baseline evaluated once has no spread to carry). The gap must not be 0."""
    lift_, gap = (statistics.fmean(x) - statistics.fmean(student) for x in (trained, teacher))
    terms = [(1 / gap, trained), (-lift_ / gap**2, teacher), (-(gap - lift_) / gap**2, student)]
    return linear(terms, lift_ / gap)


def holm(p: list[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, in the order given: sorted p(1) ≤ … ≤ p(m), the i-th adjusted is
    max over j ≤ i of min(1, (m − j + 1) · p(j)); a family's comparison holds at level α when its adjusted p < α."""
    order, adjusted, running = sorted(range(len(p)), key=lambda i: p[i]), [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        adjusted[i] = running
    return adjusted
