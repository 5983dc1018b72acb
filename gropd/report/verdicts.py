"""The verdict rules of the claims page: pure functions of per-seed numbers, thresholds as named values (their
wording: experiments/report.yaml `rules`, filled in from THRESHOLDS). A Verdict is reproduced, not reproduced or
not tested (too few seeds, a missing reference). Differences follow gropd/report/stats.py (a 95% t interval
excluding 0: paired within a pairing, Welch's across pairings); one instability rule serves every dynamics claim, a
collapse being its extreme case.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from gropd.report.evidence import Trend
from gropd.report.stats import MIN_SEEDS, Interval

REPRODUCED, NOT_REPRODUCED, NOT_TESTED = "reproduced", "not reproduced", "not tested"
PREFERRED_SEEDS = 3  # what the page asks for when it names missing seed runs
LIFT_FRACTION = 1 / 3  # distillation works: the lift reaches this fraction of the teacher-student gap
MAJORITY = 0.5  # a setting is unstable when more than this share of its seeds is
REWARD_FALL = 0.5  # unstable: reward over the last 10% of steps below this fraction of the first 10%
LENGTH_NEAR_CAP = 0.5  # unstable: mean length over the last 10% grown to at least this fraction of the cap
LARGE_LAMBDA = 0.5  # "too much retained pressure": the paper's largest λ, against every smaller λ


@dataclass(frozen=True)
class Verdict:
    """An outcome and why; `fragile`: what could flip it within the noise of its numbers ('' when nothing could)."""

    outcome: str
    reason: str
    fragile: str = ""


def too_few(counts: dict[str, int]) -> Verdict | None:
    """NOT_TESTED naming each setting with fewer than MIN_SEEDS usable seeds, else None."""
    short = [f"{name} has {n}" for name, n in counts.items() if n < MIN_SEEDS]
    return Verdict(NOT_TESTED, f"needs ≥ {MIN_SEEDS} seeds per setting ({'; '.join(short)})") if short else None


def distillation(student: float | None, teacher: float | None, lift: Interval | None, collapsed: int) -> Verdict:
    """`lift` (stats.lift: trained seed − pre-OPD student, over the seeds that finished): its mean ≥ LIFT_FRACTION x
    (teacher − student) and its t interval above 0; a collapsed seed fails it."""
    if student is None or teacher is None:
        return Verdict(NOT_TESTED, f"no pre-OPD evaluation of the {'student' if student is None else 'teacher'}")
    seeds = (lift.n if lift else 0) + collapsed
    if short := too_few({"trained student": seeds}):
        return short
    gap = teacher - student
    if gap <= 0:
        return Verdict(NOT_TESTED, f"the teacher does not beat the student before OPD (gap {gap:+.2f})")
    if collapsed:
        return Verdict(NOT_REPRODUCED, f"{collapsed} of {seeds} seeds collapsed")
    assert lift is not None  # too_few saw at least MIN_SEEDS seeds, none collapsed
    text = f"lift {lift.text()} = {lift.mean / gap:.2f} of the gap {gap:.2f}"
    if lift.mean >= LIFT_FRACTION * gap and lift.call > 0:
        return Verdict(REPRODUCED, text)
    return Verdict(NOT_REPRODUCED, f"{text}, needs ≥ {LIFT_FRACTION:.2g} and > 0")


def beats(interval: Interval | None, seeds: tuple[int, int], collapsed: tuple[int, int], names: tuple) -> Verdict:
    """'`names[0]` beats `names[1]`' from final scores by seed (`seeds`: how many finished of each, `collapsed`: how
    many collapsed; `interval`: stats.paired of the finished ones): a collapse loses (reproduced when only b
    collapsed, not when a did); otherwise the paired interval of the same seeds must lie above 0."""
    (x, y), (a_collapsed, b_collapsed) = names, collapsed
    counts = {x: seeds[0] + a_collapsed, y: seeds[1] + b_collapsed}
    if short := too_few(counts):
        return short
    if a_collapsed:
        return Verdict(NOT_REPRODUCED, f"{x} collapsed in {a_collapsed} of {counts[x]} seeds")
    if b_collapsed:
        return Verdict(REPRODUCED, f"{y} collapsed in {b_collapsed} of {counts[y]} seeds, {x} in none")
    if interval is None or interval.n < MIN_SEEDS:
        return Verdict(NOT_TESTED, f"needs ≥ {MIN_SEEDS} seeds run under both")
    outcome = REPRODUCED if interval.call > 0 else NOT_REPRODUCED
    return Verdict(outcome, f"{comparison(interval, names)}: {interval.text()}")


def above(interval: Interval | None, names: tuple[str, str]) -> Verdict:
    """'`names[0]` lies above `names[1]`' from the interval of their difference (the pressure rule, claim 6: Welch's):
    reproduced when it lies above 0; NOT_TESTED when a side has fewer than MIN_SEEDS seeds (interval.n)."""
    if interval is None or interval.n < MIN_SEEDS:
        return Verdict(NOT_TESTED, f"needs ≥ {MIN_SEEDS} seeds run under both")
    return Verdict(REPRODUCED if interval.call > 0 else NOT_REPRODUCED, comparison(interval, names))


def comparison(interval: Interval, names: tuple[str, str]) -> str:
    """'<a> better', '<b> better' or 'no difference resolved at N seeds' (unpaired: 'at A vs B seeds')."""
    if interval.call:
        return f"{names[0 if interval.call > 0 else 1]} better"
    if interval.sizes is not None:
        return f"no difference resolved at {interval.sizes[0]} vs {interval.sizes[1]} seeds"
    return f"no difference resolved at {interval.n} seed{'' if interval.n == 1 else 's'}"


def unstable(trend: Trend) -> list[str]:
    """Why one run is unstable (empty: stable): it collapsed; its reward over the last 10% of steps fell below
    REWARD_FALL x the first 10%; or its length over the last 10% grew to ≥ LENGTH_NEAR_CAP x the cap."""
    reasons = [f"collapsed at step {trend.collapse_step}"] if trend.collapse_step is not None else []
    reward, length, cap = trend.reward, trend.length, trend.cap
    if reward is not None and reward[0] > 0 and reward[1] < REWARD_FALL * reward[0]:
        reasons.append(f"reward {reward[0]:.3f} → {reward[1]:.3f}")
    if length is not None and cap and length[1] > length[0] and length[1] >= LENGTH_NEAR_CAP * cap:
        reasons.append(f"length {length[0]:.1f} → {length[1]:.1f} of cap {cap}")
    return reasons


def borderline(trend: Trend) -> str:
    """Why one run's instability call is within its own noise of a threshold ('' when it is not): a ratio the rule
    compares (reward last / first 10%; length last 10% / cap) whose ± one standard error straddles its threshold,
    the error from the two windows' (delta method). A collapse is no ratio: never borderline."""
    if trend.collapse_step is not None:
        return ""
    found = []
    (reward, reward_error), (length, length_error) = (
        (trend.reward, trend.reward_error),
        (trend.length, trend.length_error),
    )
    if reward and reward_error and reward[0] > 0:
        ratio = reward[1] / reward[0]
        error = math.hypot(reward_error[1] / reward[0], ratio * reward_error[0] / reward[0])
        if abs(ratio - REWARD_FALL) < error:
            found.append(f"reward ratio {ratio:.2f} ± {error:.2f} against {REWARD_FALL:g}")
    if length and length_error and trend.cap and length[1] > length[0]:
        ratio, error = length[1] / trend.cap, length_error[1] / trend.cap
        if abs(ratio - LENGTH_NEAR_CAP) < error:
            found.append(f"length / cap {ratio:.2f} ± {error:.2f} against {LENGTH_NEAR_CAP:g}")
    return "; ".join(found)


def contrast(
    bad: list[bool], good: dict[str, list[bool]], name: str, near: dict[str, list[str]] | None = None
) -> Verdict:
    """'`name` is unstable, the `good` settings are not': more than MAJORITY of bad's seeds unstable, no seed
    of any good setting. `near`: per setting (`name` for bad), each seed's borderline reason ('' for none); the
    verdict is fragile when flipping some of those seeds would change its outcome (TINY.md, round 6)."""
    verdict = _contrast(bad, good, name)
    flips = [(who, i) for who, reasons in (near or {}).items() for i, reason in enumerate(reasons) if reason]
    for chosen in itertools.chain.from_iterable(itertools.combinations(flips, n) for n in range(1, len(flips) + 1)):
        flipped = {who: list(flags) for who, flags in ({name: bad} | good).items()}
        for who, i in chosen:
            flipped[who][i] = not flipped[who][i]
        if _contrast(flipped.pop(name), flipped, name).outcome != verdict.outcome:
            why = "; ".join(f"{who} seed {i}: {near[who][i]}" for who, i in flips)
            fragile = f"within one standard error of a threshold: {why}"
            return Verdict(verdict.outcome, f"{verdict.reason} (**fragile**, {fragile})", fragile)
    return verdict


def _contrast(bad: list[bool], good: dict[str, list[bool]], name: str) -> Verdict:
    if short := too_few({name: len(bad)} | {other: len(flags) for other, flags in good.items()}):
        return short
    few = f"only {sum(bad)}" if any(bad) else "none"
    failures = [f"{name} unstable in {few} of {len(bad)} seeds"] if sum(bad) <= MAJORITY * len(bad) else []
    failures += [f"{other} also unstable in {sum(f)} of {len(f)} seeds" for other, f in good.items() if any(f)]
    if failures:
        return Verdict(NOT_REPRODUCED, "; ".join(failures))
    others = ", ".join(f"{other} in 0 of {len(flags)}" for other, flags in good.items())
    return Verdict(REPRODUCED, f"{name} unstable in {sum(bad)} of {len(bad)} seeds, {others}")


def combine(verdicts: dict[str, Verdict]) -> Verdict:
    """A claim over several cells: not reproduced if any cell is, else not tested if any is, else reproduced."""
    for outcome in (NOT_REPRODUCED, NOT_TESTED):
        names = [name for name, verdict in verdicts.items() if verdict.outcome == outcome]
        if names:
            return _marked(Verdict(outcome, f"{outcome} in {', '.join(names)}"), {n: verdicts[n] for n in names})
    if not verdicts:
        return Verdict(NOT_TESTED, "no cell to judge")
    where = ", ".join(verdicts) if len(verdicts) < 3 else "every cell"
    return _marked(Verdict(REPRODUCED, f"reproduced in {where}"), verdicts)


def _marked(verdict: Verdict, deciding: dict[str, Verdict]) -> Verdict:
    """`verdict`, marked fragile when a cell that decides it is."""
    if not (fragile := [name for name, cell in deciding.items() if cell.fragile]):
        return verdict
    return Verdict(verdict.outcome, f"{verdict.reason} (**fragile** in {', '.join(fragile)})", "fragile")


THRESHOLDS = dict(min_seeds=MIN_SEEDS, preferred_seeds=PREFERRED_SEEDS, lift_fraction=LIFT_FRACTION, majority=MAJORITY)
THRESHOLDS |= dict(reward_fall=REWARD_FALL, length_near_cap=LENGTH_NEAR_CAP, large_lambda=LARGE_LAMBDA)
