"""The verdict rules of the claims page: pure functions of per-seed numbers, thresholds as named values.

Every rule returns a Verdict: reproduced, not reproduced (with the reason) or not tested (too
few usable seeds or a missing reference; the caller names the runs that would settle it).
"Beyond noise" always means: a difference of means larger than NOISE_MULTIPLE x the larger
sample standard deviation (ddof = 1) of the two sides. `RULES` holds the rules as the page prints
them, written from the same constants.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gropd.report.scores import seed_stats

REPRODUCED, NOT_REPRODUCED, NOT_TESTED = "reproduced", "not reproduced", "not tested"

NOISE_MULTIPLE = 2.0  # a difference counts when it exceeds this many sample stds (the larger side's)
MIN_SEEDS = 2  # usable seeds per compared setting, or the claim is not tested
PREFERRED_SEEDS = 3  # what the page asks for when it names missing seed runs
DISTILL_MIN_SEEDS = 3  # seeds of the trained student for "distillation works"
LIFT_FRACTION = 1 / 3  # the lift must reach this fraction of the teacher-student gap
MAJORITY = 0.5  # "collapses" / "is unstable": in more than this share of the seeds
TREND_FRACTION = 0.1  # length and reward trends: mean over the first vs the last 10% of logged steps
REWARD_FALL = 0.5  # unstable: reward over the last 10% below this fraction of the first 10%
LENGTH_NEAR_CAP = 0.5  # unstable: mean length over the last 10% at least this fraction of the cap, and grown
LARGE_LAMBDA = 0.5  # "too much retained pressure": the paper's largest λ, compared with every smaller λ
PAIRED_CONFIDENCE = 0.95  # GR-OPD vs OPD: the two-sided t interval of the mean paired (same-seed) difference


@dataclass(frozen=True)
class Verdict:
    """One of REPRODUCED / NOT_REPRODUCED / NOT_TESTED, the sentence saying why, and (not tested) the
    runs that would test it."""

    outcome: str
    reason: str
    missing_runs: str = ""

    @property
    def text(self) -> str:
        """The reason, then the missing runs where there are any."""
        return self.reason + (f"; missing runs: {self.missing_runs}" if self.missing_runs else "")


def beyond_noise(a: list[float], b: list[float]) -> tuple[float, float]:
    """(mean(a) − mean(b), NOISE_MULTIPLE x the larger sample std of a and b)."""
    sa, sb = seed_stats(a), seed_stats(b)
    return sa.mean - sb.mean, NOISE_MULTIPLE * max(sa.spread, sb.spread)


def too_few(counts: dict[str, int], need: int = MIN_SEEDS) -> Verdict | None:
    """NOT_TESTED naming each setting with fewer than `need` usable seeds, else None."""
    short = [f"{name} has {n}" for name, n in counts.items() if n < need]
    if not short:
        return None
    return Verdict(NOT_TESTED, f"needs ≥ {need} usable seeds per setting ({'; '.join(short)})")


def beats(
    better: dict[int, float],
    better_collapsed: int,
    worse: dict[int, float],
    worse_collapsed: int,
    names: tuple[str, str],
) -> Verdict:
    """'`names[0]` beats `names[1]`' from final scores by seed and collapse counts. A collapse loses (as in
    Table 1): reproduced when only the other side collapsed; otherwise the paired interval of the same
    seeds' differences must lie above 0 (comparison)."""
    a, b = names
    counts = {a: len(better) + better_collapsed, b: len(worse) + worse_collapsed}
    if short := too_few(counts):
        return short
    if better_collapsed:
        both = f"; {b} collapsed in {worse_collapsed} of {counts[b]}" if worse_collapsed else ""
        return Verdict(NOT_REPRODUCED, f"{a} collapsed in {better_collapsed} of {counts[a]} seeds{both}")
    if worse_collapsed:
        return Verdict(
            REPRODUCED, f"{b} collapsed in {worse_collapsed} of {counts[b]} seeds, {a} in none (a collapse loses)"
        )
    paired = paired_difference(better, worse)
    if paired.n < MIN_SEEDS:
        return Verdict(NOT_TESTED, f"needs ≥ {MIN_SEEDS} seeds run under both settings (has {paired.n})")
    interval = f"{paired.mean:+.2f} ± {paired.half_width:.2f} over {paired.n} paired seeds"
    outcome = REPRODUCED if paired.answer > 0 else NOT_REPRODUCED
    return Verdict(outcome, f"{comparison(paired, names)} ({interval})")


@dataclass(frozen=True)
class PairedDifference:
    """The same seeds under two settings: mean of the per-seed differences a − b, its sample std, the
    half-width of the PAIRED_CONFIDENCE t interval of the mean, and the number of seed pairs."""

    mean: float
    spread: float
    half_width: float
    n: int

    @property
    def answer(self) -> int:
        """+1 when the interval lies above 0, −1 below, 0 when it holds 0 (no difference resolved)."""
        if self.n < MIN_SEEDS:
            return 0
        return 1 if self.mean - self.half_width > 0 else -1 if self.mean + self.half_width < 0 else 0


def paired_difference(a: dict[int, float], b: dict[int, float]) -> PairedDifference:
    """PairedDifference over the seeds both `a` and `b` hold (seed -> value); one seed: no interval."""
    from scipy.stats import t

    seeds = sorted(set(a) & set(b))
    diffs = [a[s] - b[s] for s in seeds]
    if not diffs:
        return PairedDifference(math.nan, math.nan, math.nan, 0)
    stats = seed_stats(diffs)
    if stats.n < 2:
        return PairedDifference(stats.mean, 0.0, math.inf, 1)
    half = float(t.ppf(0.5 + PAIRED_CONFIDENCE / 2, stats.n - 1)) * stats.spread / math.sqrt(stats.n)
    return PairedDifference(stats.mean, stats.spread, half, stats.n)


def comparison(paired: PairedDifference, names: tuple[str, str]) -> str:
    """'<a> better', '<b> better' or 'no difference resolved at N seeds' from the paired interval."""
    if paired.answer > 0:
        return f"{names[0]} better"
    if paired.answer < 0:
        return f"{names[1]} better"
    return f"no difference resolved at {paired.n} seed{'' if paired.n == 1 else 's'}"


def distillation(student: float | None, teacher: float | None, trained: list[float], collapsed: int) -> Verdict:
    """Distillation works: lift = mean(trained) − student ≥ LIFT_FRACTION x (teacher − student) and
    lift > NOISE_MULTIPLE x sample std of the trained seeds, with ≥ DISTILL_MIN_SEEDS seeds."""
    if student is None or teacher is None:
        side = "student" if student is None else "teacher"
        return Verdict(NOT_TESTED, f"no pre-OPD evaluation of the {side}")
    if short := too_few({"trained student": len(trained) + collapsed}, DISTILL_MIN_SEEDS):
        return short
    gap = teacher - student
    if gap <= 0:
        return Verdict(NOT_TESTED, f"the teacher does not beat the student before OPD (gap {gap:+.2f})")
    if collapsed:
        return Verdict(NOT_REPRODUCED, f"{collapsed} of {len(trained) + collapsed} seeds collapsed")
    stats = seed_stats(trained)
    lift, noise = stats.mean - student, NOISE_MULTIPLE * stats.spread
    failures = []
    if lift < LIFT_FRACTION * gap:
        failures.append(f"lift {lift:+.2f} below {LIFT_FRACTION:.3g} of the gap {gap:.2f}")
    if lift <= noise:
        failures.append(f"lift {lift:+.2f} within {NOISE_MULTIPLE:g} x seed spread ({noise:.2f})")
    if failures:
        return Verdict(NOT_REPRODUCED, "; ".join(failures))
    return Verdict(REPRODUCED, f"lift {lift:+.2f} = {lift / gap:.2f} of the gap {gap:.2f}, beyond noise {noise:.2f}")


def share(flags: list[bool]) -> float:
    """The fraction of True flags (0 for none)."""
    return sum(flags) / len(flags) if flags else 0.0


def contrast(bad: list[bool], good: dict[str, list[bool]], name: str, what: str) -> Verdict:
    """'setting `name` is `what`, the `good` settings are not': reproduced when more than MAJORITY of
    the bad setting's seeds are flagged and no seed of any `good` setting is."""
    counts = {name: len(bad)} | {other: len(flags) for other, flags in good.items()}
    if short := too_few(counts):
        return short
    failures = []
    if share(bad) <= MAJORITY:
        failures.append(f"{name} {what} in only {sum(bad)} of {len(bad)} seeds")
    for other, flags in good.items():
        if any(flags):
            failures.append(f"{other} also {what} in {sum(flags)} of {len(flags)} seeds")
    if failures:
        return Verdict(NOT_REPRODUCED, "; ".join(failures))
    others = ", ".join(f"{other} in 0 of {len(flags)}" for other, flags in good.items())
    return Verdict(REPRODUCED, f"{name} {what} in {sum(bad)} of {len(bad)} seeds, {others}")


def ordered_increasing(cells: list[tuple[str, list[float]]]) -> Verdict:
    """Each cell's mean exceeds the previous cell's beyond noise (cells in the order of the setting)."""
    if len(cells) < 2:
        return Verdict(NOT_TESTED, "needs at least two settings to compare")
    if short := too_few({name: len(values) for name, values in cells}):
        return short
    for (low_name, low), (high_name, high) in zip(cells, cells[1:], strict=False):
        diff, noise = beyond_noise(high, low)
        if diff <= noise:
            return Verdict(NOT_REPRODUCED, f"{high_name} not above {low_name} beyond noise ({diff:+.2f}, {noise:.2f})")
    return Verdict(REPRODUCED, "each step up is beyond noise")


def all_pairs_exceed(high: list[tuple[str, list[float]]], low: list[tuple[str, list[float]]]) -> Verdict:
    """Every `high` cell's mean exceeds every `low` cell's beyond noise."""
    if not high or not low:
        return Verdict(NOT_TESTED, "needs cells on both sides")
    if short := too_few({name: len(values) for name, values in high + low}):
        return short
    for high_name, a in high:
        for low_name, b in low:
            diff, noise = beyond_noise(a, b)
            if diff <= noise:
                ahead = "ahead beyond noise" if -diff > noise else "within noise"
                return Verdict(NOT_REPRODUCED, f"{low_name} vs {high_name}: {ahead} ({diff:+.2f}, {noise:.2f})")
    return Verdict(REPRODUCED, "every pair differs beyond noise")


def combine(verdicts: dict[str, Verdict]) -> Verdict:
    """A claim over several cells: not reproduced if any cell is, else not tested if any cell is, else
    reproduced; the reason names the cells behind it."""
    for outcome in (NOT_REPRODUCED, NOT_TESTED):
        names = [name for name, verdict in verdicts.items() if verdict.outcome == outcome]
        if names:
            return Verdict(outcome, f"{outcome} in {', '.join(names)}")
    if not verdicts:
        return Verdict(NOT_TESTED, "no cell to test")
    return Verdict(REPRODUCED, f"reproduced in {', '.join(verdicts)}")


def trend_window(n: int) -> int:
    """How many of n logged steps make up the first / last TREND_FRACTION (at least one)."""
    return max(1, math.ceil(TREND_FRACTION * n))


def instability(
    collapsed: bool, reward: tuple[float, float] | None, length: tuple[float, float] | None, cap: int | None
) -> list[str]:
    """Why one run is unstable (empty: stable): it collapsed; its reward fell below REWARD_FALL x its
    start; or its length grew to at least LENGTH_NEAR_CAP x the cap. reward and length are
    (first 10%, last 10%) means; None when not logged."""
    reasons = ["collapsed"] if collapsed else []
    if reward is not None and reward[0] > 0 and reward[1] < REWARD_FALL * reward[0]:
        reasons.append(f"reward {reward[0]:.3f} → {reward[1]:.3f}")
    if length is not None and cap and length[1] > length[0] and length[1] >= LENGTH_NEAR_CAP * cap:
        reasons.append(f"length {length[0]:.1f} → {length[1]:.1f} of cap {cap}")
    return reasons


UNSTABLE_RUN = (
    f"A run is unstable when it collapsed, or its verifier reward over the last {TREND_FRACTION:.0%} of logged steps "
    f"fell below {REWARD_FALL:g} x the first {TREND_FRACTION:.0%}, or its mean length over the last "
    f"{TREND_FRACTION:.0%} grew to at least {LENGTH_NEAR_CAP:g} x the response cap (sampling.max_new_tokens). "
    f"A setting is unstable when more than {MAJORITY:.0%} of its seeds are, stable when none is."
)
PRESSURE_RUN = "Per run: the mean of pressure_normalised and of pressure_retained over its logged steps (as Table 2)."

RULES = {
    "noise": (
        f"Beyond noise: the difference of two means exceeds {NOISE_MULTIPLE:g} x the larger sample std (ddof = 1) "
        f"of the two sides. Each compared setting needs ≥ {MIN_SEEDS} usable seeds ({PREFERRED_SEEDS} preferred), "
        "else the claim is not tested and the missing seed runs are named. A run is usable when it has the number "
        "the rule needs (a finished run's Macro; for dynamics, a run whose training ended: trained, finished or "
        "collapsed). A claim over several pairings or settings is not reproduced if any of them is, else not "
        "tested if any is, else reproduced."
    ),
    "distillation": (
        f"Per matched pairing and method: reproduced when, over ≥ {DISTILL_MIN_SEEDS} seeds with none collapsed, "
        f"the trained student's mean Macro lies at least {LIFT_FRACTION:.3g} of the teacher–student gap above the "
        f"pre-OPD student (lift ≥ gap/3) and the lift exceeds {NOISE_MULTIPLE:g} x the trained seeds' sample std. "
        "A collapsed seed: not reproduced. Pre-OPD student and teacher: mean Macro of their table6 runs."
    ),
    "beats": (
        "Per pairing: reproduced when vanilla OPD collapsed in some seed and GR-OPD in none (a collapse loses, as "
        "in Table 1), or, with no collapse, the paired comparison says GR-OPD better. Paired comparison: the "
        f"per-seed differences GR-OPD − OPD over the seeds run under both (same seed: same prompts, same "
        f"evaluation draws), their mean ± the half-width of its two-sided {PAIRED_CONFIDENCE:.0%} t interval; "
        "'GR-OPD better' when the interval lies above 0, 'OPD better' below, else 'no difference resolved at N "
        f"seeds' (≥ {MIN_SEEDS} pairs needed). Not reproduced when GR-OPD collapsed or the comparison is not "
        "'GR-OPD better'."
    ),
    "collapse": (
        f"Per cross-pattern pairing: reproduced when vanilla OPD collapsed in more than {MAJORITY:.0%} of its seeds "
        f"and GR-OPD in none. Length trend: mean response length over the first → the last {TREND_FRACTION:.0%} "
        "of logged steps. σ = 0 share: degenerate_groups / train.prompts_per_batch, averaged over steps "
        "(GR-OPD only: vanilla OPD's credit has no σ and logs 0 by construction)."
    ),
    "lambda": (
        f"{UNSTABLE_RUN} Per pairing with λ ≥ {LARGE_LAMBDA:g} and a smaller λ at the same γ: reproduced when "
        f"λ ≥ {LARGE_LAMBDA:g} is unstable and every smaller λ stable."
    ),
    "gamma": (
        f"{UNSTABLE_RUN} Per (pairing, λ): reproduced when γ = 1 is unstable and γ < 1 stable. The correlations "
        "are reported, not judged."
    ),
    "pressure_cross": (
        f"{PRESSURE_RUN} Reproduced when every cross-pattern (pairing, λ) cell's mean normalised pressure exceeds "
        "every matched cell's beyond noise."
    ),
    "pressure_lambda": (
        f"{PRESSURE_RUN} Per pairing and γ with two or more λ: reproduced when the mean retained pressure rises "
        "with λ, each step beyond noise."
    ),
}
