"""The verdict rules of the claims page: pure functions of per-seed numbers, thresholds as Thresholds (their values:
experiments/registration.yaml; their wording: experiments/report.yaml `rules`). A Verdict is reproduced, not
reproduced, undecided at this n (a threshold decision within one standard error decides it) or not tested (too few
seeds, a missing reference). Differences follow gropd/report/stats.py (a 95% t interval excluding 0: paired within a
pairing, Welch's across pairings); one instability rule serves every dynamics claim, a collapse being its extreme
case.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from gropd.report.evidence import Trend
from gropd.report.stats import MIN_SEEDS, POWER, Interval

REPRODUCED, NOT_REPRODUCED, NOT_TESTED = "reproduced", "not reproduced", "not tested"
UNDECIDED = "undecided at this n"  # a threshold decision within one standard error decides the verdict
PREFERRED_SEEDS = 3  # what the page asks for when it names missing seed runs


@dataclass(frozen=True)
class Thresholds:
    """The numbers the verdicts compare with, as experiments/registration.yaml registers them (`thresholds`; the one
    place they are written): lift_fraction (the lift reaches this fraction of the teacher–student gap), majority (a
    setting is unstable when more than this share of its seeds is), reward_fall (unstable: reward over the last 10%
    of steps below this fraction of the first 10%), length_near_cap (or mean length over the last 10% grown to at
    least this fraction of the cap), large_lambda ("too much retained pressure": λ at least this); `undecided`: a
    decision within one standard error of its threshold reads UNDECIDED (registration `readings`: within_one_se),
    else it stands marked fragile (fragile_mark). `halfway`: world 5's length arm in place of the cap's
    (experiments/registration_long.yaml, whose untrained student already writes most of its cap): the last 10%'s mean
    grown at least length_near_cap of the way from the first 10%'s mean to the cap."""

    lift_fraction: float
    majority: float
    reward_fall: float
    length_near_cap: float
    large_lambda: float
    undecided: bool = True
    halfway: bool = False


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


def distillation(
    student: float | None,
    teacher: float | None,
    lift: Interval | None,
    collapsed: int,
    limits: Thresholds,
    share: Interval | None = None,
) -> Verdict:
    """`lift` (stats.lift: trained seed − pre-OPD student, over the seeds that finished): its mean ≥ lift_fraction x
    (teacher − student) and its t interval above 0; a collapsed seed fails it. `share` (stats.gap_share, where the
    baselines have a spread): its distance from lift_fraction in standard errors is stated; within one, the verdict
    is UNDECIDED (limits.undecided) or marked fragile, with the seeds a group that would put it one away."""
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
    far = f" ({away(lift)})" if away(lift) else ""
    text = f"lift {lift.text()}{far} = {lift.mean / gap:.2f} of the gap {gap:.2f}"
    fraction = limits.lift_fraction
    distance = share.distance(fraction) if share else None
    side = "above" if distance is not None and distance >= 0 else "below"
    text += "" if distance is None else f" ({abs(distance):.1f} se {side} {fraction:.2g})"
    if lift.mean >= fraction * gap and lift.call > 0:
        verdict = Verdict(REPRODUCED, text)
    else:
        verdict = Verdict(NOT_REPRODUCED, f"{text}, needs ≥ {fraction:.2g} and > 0")
    if distance is None or abs(distance) >= 1 or (verdict.outcome == NOT_REPRODUCED and lift.call <= 0):
        return verdict
    why = f"the share of the gap within one standard error of {fraction:.2g}; "
    why += needed(distance, share.n, "runs in each group (trained seeds, evaluations)")
    if limits.undecided:
        return Verdict(UNDECIDED, f"{UNDECIDED}: {verdict.reason} ({why})", why)
    return Verdict(verdict.outcome, f"{verdict.reason} (**fragile**, {why})", why)


def needed(distance: float, n: int, unit: str) -> str:
    """The n at which an estimate `distance` standard errors from its threshold, its standard error falling as
    1/√n, would sit one standard error away: n · (1 / distance)², 'about N <unit> would put it one standard error
    away (now n)'."""
    if distance == 0:
        return f"no n decides it (on the threshold, now {n} {unit})"
    return f"about {math.ceil(n / distance**2)} {unit} would put it one standard error away (now {n})"


def away(interval: Interval, threshold: float = 0.0) -> str:
    """'2.3 se from 0': how many standard errors an estimate sits from the threshold its decision reads ('' without
    a standard error: one value a side)."""
    distance = interval.distance(threshold)
    return "" if distance is None else f"{abs(distance):.1f} se from {threshold:g}"


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
    """'<a> better (3.1 se from 0)', '<b> better (…)' or 'no difference resolved at N seeds (0.4 se from 0; resolvable:
    ±X at 80% power)' (unpaired: 'at A vs B seeds'): the size of "no difference" is stats.Interval.resolvable."""
    far = f" ({away(interval)})" if away(interval) else ""
    if interval.call:
        return f"{names[0 if interval.call > 0 else 1]} better{far}"
    size = (
        f"{interval.sizes[0]} vs {interval.sizes[1]} seeds"
        if interval.sizes is not None
        else f"{interval.n} seed{'' if interval.n == 1 else 's'}"
    )
    smallest = interval.resolvable()
    if smallest is None:
        return f"no difference resolved at {size}"
    return (
        f"no difference resolved at {size} ({away(interval)}; this design resolves ±{smallest:.2f} at {POWER:.0%} "
        "power)"
    )


def unstable(trend: Trend, limits: Thresholds) -> list[str]:
    """Why one run is unstable (empty: stable): it collapsed; its reward over the last 10% of steps fell below
    reward_fall x the first 10%; or its length over the last 10% grew to ≥ length_near_cap x the cap (limits.halfway:
    ≥ length_near_cap of the way from the first 10%'s length to the cap, `length_share`)."""
    reasons = [f"collapsed at step {trend.collapse_step}"] if trend.collapse_step is not None else []
    reward, length, cap = trend.reward, trend.length, trend.cap
    if reward is not None and reward[0] > 0 and reward[1] < limits.reward_fall * reward[0]:
        reasons.append(f"reward {reward[0]:.3f} → {reward[1]:.3f}")
    if (share := length_share(trend, limits)) is not None and share[1] >= limits.length_near_cap:
        reasons.append(f"length {length[0]:.1f} → {length[1]:.1f} of cap {cap}")
    return reasons


def length_share(trend: Trend, limits: Thresholds) -> tuple[str, float, float | None] | None:
    """The length arm's ratio where the length grew (None: it did not, or no length or cap): (name, ratio, its
    standard error from the two windows' by the delta method, None unknown). The cap's arm: last / cap; the halfway
    arm: (last − first) / (cap − first), the share of the room left below the cap that the run took up."""
    length, cap = trend.length, trend.cap
    if length is None or not cap or length[1] <= length[0]:
        return None
    errors = trend.length_error
    if not limits.halfway:
        return "length / cap", length[1] / cap, errors and errors[1] / cap
    room = cap - length[0]
    if room <= 0:
        return None
    share = (length[1] - length[0]) / room
    return "length growth / room to cap", share, errors and math.hypot(errors[1], errors[0] * (1 - share)) / room


def ratios(trend: Trend, limits: Thresholds) -> list[tuple[str, float, float, float]]:
    """The ratios the instability rule compares, each (name, ratio, its standard error, threshold): reward last /
    first 10% against reward_fall; the length arm's (length_share) against length_near_cap where the length grew. The
    error from the two windows' (delta method); none for a collapse, which is no ratio."""
    if trend.collapse_step is not None:
        return []
    found = []
    reward, reward_error = trend.reward, trend.reward_error
    if reward and reward_error and reward[0] > 0:
        ratio = reward[1] / reward[0]
        error = math.hypot(reward_error[1] / reward[0], ratio * reward_error[0] / reward[0])
        found.append(("reward ratio", ratio, error, limits.reward_fall))
    if (share := length_share(trend, limits)) is not None and share[2] is not None:
        found.append((*share, limits.length_near_cap))
    return found


def distances(trend: Trend, limits: Thresholds) -> str:
    """'reward ratio 0.52, 0.2 se above 0.5': each ratio the rule compares and its distance from the threshold."""
    parts = []
    for name, ratio, error, threshold in ratios(trend, limits):
        side = "above" if ratio >= threshold else "below"
        far = f", {abs(ratio - threshold) / error:.1f} se" if error else ""
        parts.append(f"{name} {ratio:.2f}{far} {side} {threshold:g}")
    return "; ".join(parts)


def borderline(trend: Trend, limits: Thresholds) -> str:
    """Why one run's instability call is within its own noise of a threshold ('' when it is not): a ratio (`ratios`)
    whose ± one standard error straddles its threshold, with the window that would decide it (its error falling as
    1/√k over a window of k logged steps)."""
    found = []
    for name, ratio, error, threshold in ratios(trend, limits):
        if abs(ratio - threshold) < error:
            distance = (ratio - threshold) / error
            window = f"; {needed(distance, trend.window, 'logged steps a window')}" if trend.window else ""
            found.append(f"{name} {ratio:.2f} ± {error:.2f} against {threshold:g}{window}")
    return "; ".join(found)


def contrast(
    bad: list[bool],
    good: dict[str, list[bool]],
    name: str,
    limits: Thresholds,
    near: dict[str, list[str]] | None = None,
) -> Verdict:
    """'`name` is unstable, the `good` settings are not': more than majority of bad's seeds unstable, no seed
    of any good setting. `near`: per setting (`name` for bad), each seed's borderline reason ('' for none); where
    flipping some of those seeds would change its outcome, the verdict is UNDECIDED (limits.undecided), or marked
    fragile (TINY.md, round 6)."""
    verdict = _contrast(bad, good, name, limits.majority)
    flips = [(who, i) for who, reasons in (near or {}).items() for i, reason in enumerate(reasons) if reason]
    for chosen in itertools.chain.from_iterable(itertools.combinations(flips, n) for n in range(1, len(flips) + 1)):
        flipped = {who: list(flags) for who, flags in ({name: bad} | good).items()}
        for who, i in chosen:
            flipped[who][i] = not flipped[who][i]
        if _contrast(flipped.pop(name), flipped, name, limits.majority).outcome != verdict.outcome:
            why = "; ".join(f"{who} seed {i}: {near[who][i]}" for who, i in flips)
            fragile = f"within one standard error of a threshold: {why}"
            if limits.undecided:
                return Verdict(UNDECIDED, f"{UNDECIDED}: {verdict.reason} ({fragile})", fragile)
            return Verdict(verdict.outcome, f"{verdict.reason} (**fragile**, {fragile})", fragile)
    return verdict


def _contrast(bad: list[bool], good: dict[str, list[bool]], name: str, majority: float) -> Verdict:
    if short := too_few({name: len(bad)} | {other: len(flags) for other, flags in good.items()}):
        return short
    few = f"only {sum(bad)}" if any(bad) else "none"
    failures = [f"{name} unstable in {few} of {len(bad)} seeds"] if sum(bad) <= majority * len(bad) else []
    failures += [f"{other} also unstable in {sum(f)} of {len(f)} seeds" for other, f in good.items() if any(f)]
    if failures:
        return Verdict(NOT_REPRODUCED, "; ".join(failures))
    others = ", ".join(f"{other} in 0 of {len(flags)}" for other, flags in good.items())
    return Verdict(REPRODUCED, f"{name} unstable in {sum(bad)} of {len(bad)} seeds, {others}")


def combine(verdicts: dict[str, Verdict]) -> Verdict:
    """A claim over several cells: not reproduced if any cell is, else undecided at this n if any is, else not tested
    if any is, else reproduced."""
    for outcome in (NOT_REPRODUCED, UNDECIDED, NOT_TESTED):
        names = [name for name, verdict in verdicts.items() if verdict.outcome == outcome]
        if names:
            return _marked(Verdict(outcome, f"{outcome} in {', '.join(names)}"), {n: verdicts[n] for n in names})
    if not verdicts:
        return Verdict(NOT_TESTED, "no cell to judge")
    where = ", ".join(verdicts) if len(verdicts) < 3 else "every cell"
    return _marked(Verdict(REPRODUCED, f"reproduced in {where}"), verdicts)


def _marked(verdict: Verdict, deciding: dict[str, Verdict]) -> Verdict:
    """`verdict`, marked fragile when a cell that decides it is (an undecided cell says so itself: no mark)."""
    if not (fragile := [name for name, cell in deciding.items() if cell.fragile and cell.outcome != UNDECIDED]):
        return verdict
    return Verdict(verdict.outcome, f"{verdict.reason} (**fragile** in {', '.join(fragile)})", "fragile")


def wording_values(limits: Thresholds) -> dict[str, float]:
    """The {names} a rule's wording (report.yaml `rules`) may state: the thresholds and the seed counts."""
    values = {k: v for k, v in vars(limits).items() if k != "undecided"}
    return dict(min_seeds=MIN_SEEDS, preferred_seeds=PREFERRED_SEEDS) | values
