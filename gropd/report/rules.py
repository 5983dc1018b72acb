"""The claims page's rules: per claim of experiments/report.yaml, a function of RULE_FUNCTIONS, `(evidence, claim)
-> Section`, gives the cells' verdicts (gropd/report/verdicts.py, with the thresholds, tests and reading that
experiments/registration.yaml holds in force, or as first registered: Evidence.first) and the comparisons it shows,
each a Comparison of a family (gropd/report/families.py): registered where its rule reads it, described otherwise.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from functools import reduce
from itertools import combinations, product
from typing import Any

from gropd.config.errors import ConfigError
from gropd.credit import METHODS
from gropd.report import verdicts
from gropd.report.evidence import Evidence, Run, Setting, num
from gropd.report.families import DESCRIBED, REGISTERED, Comparison
from gropd.report.settings import ClaimSettings
from gropd.report.stats import MIN_SEEDS, Interval, gap_share, lift, paired, stats, welch
from gropd.report.verdicts import NOT_TESTED, PREFERRED_SEEDS, REPRODUCED, Thresholds, Verdict, comparison

Row = list[str | Comparison]  # a Comparison cell becomes three on the page: the interval, its family, its p


@dataclass
class Section:
    """One claim's evidence: tables (intro, header, rows), per-cell verdicts, the runs read, Missing lines, the
    comparisons its verdict lines state outside the tables, and per cell the registered comparison its verdict
    reads (`deciding`; none where no interval decides it)."""

    tables: list[tuple[str, list[str], list[Row]]]
    cells: dict[str, Verdict]
    runs: list[Run]
    missing: list[str]
    stated: list[Comparison] = field(default_factory=list)
    deciding: dict[str, Comparison] = field(default_factory=dict)

    @property
    def comparisons(self) -> list[Comparison]:
        """Every comparison of the section: its tables' cells, then those its verdict lines state."""
        cells = [cell for _, _, rows in self.tables for row in rows for cell in row if isinstance(cell, Comparison)]
        return cells + self.stated


def trained(ev: Evidence, claim: ClaimSettings, reads: str | None = None) -> list[Setting]:
    """The train settings of the claim's grids on its `pairings` (of a method that reads the knob `reads`, e.g.
    gropd.lam: GR-OPD's, when given)."""

    def wanted(pairing: str) -> bool:
        matched, nothink = ev.matched(pairing), ev.manifests.pairings[pairing]["student"]["mode"] == "nothink"
        return {"matched": matched, "cross": not matched, "matched-nothink": matched and nothink}.get(claim.pairings, 1)

    settings = [s for s in ev.settings(*claim.grids) if s.config.get("kind") == "train" and s.registered]
    return [s for s in settings if wanted(s.pairing) and (reads is None or (s.record and s.record.reads(reads)))]


def lacking(ev: Evidence, claim: ClaimSettings, settings: list[Setting]) -> list[str]:
    """Missing lines for the seeds 0..PREFERRED_SEEDS-1 no run of a setting holds, by their id in the claim's grid."""
    lines = []
    for s in settings:
        home = next(run for grid in claim.grids for run in s.runs if run.grid == grid)
        command = f"python -m gropd.cli grid {home.grid} --seeds {PREFERRED_SEEDS} --profile {ev.profile}"
        ids, held = ev.seed_ids(home, PREFERRED_SEEDS), s.seeds()
        named = {run.run_id for run, _ in s.elsewhere}  # ran another setting: a Missing line of its own says so
        absent = [run_id for seed, run_id in enumerate(ids) if seed not in held and run_id not in named]
        lines += [f"`{run_id}`: not run; a not-tested verdict needs it (`{command}`)" for run_id in absent]
    return lines


def macros(ev: Evidence, s: Setting) -> tuple[dict[int, float], int, list[str]]:
    """A setting's final Macro by seed, its collapsed-seed count and its Missing lines."""
    finals, lines = s.collect(lambda run: run.final(list(ev.suites)))
    collapsed = sum(run.state == "collapsed" for run in s.seeds().values())
    return {seed: f.macro for seed, f in finals.items()}, collapsed, lines


def text(values: dict[int, float], collapsed: int = 0) -> str:
    body = "—" if (value := stats(list(values.values()))) is None else f"{value.text(2)} (n={value.n})"
    return body + (f", {collapsed} collapsed" if collapsed else "")


def family(read: bool) -> str:
    """REGISTERED for a comparison a verdict rule read, DESCRIBED for one it did not (families.py)."""
    return REGISTERED if read else DESCRIBED


def limits(ev: Evidence) -> Thresholds:
    """The thresholds and the reading near them that ev's registration holds in force (ev.first: as first
    registered)."""
    reading = ev.registration.reading(ev.first).reading
    return Thresholds(**ev.registration.values(ev.first), undecided=reading == "within_one_se", halfway=ev.halfway)


def test(ev: Evidence, claim: ClaimSettings) -> str:
    """The test the registration names for the claim's rule (in force, or as first registered)."""
    return ev.registration.test(claim.rule, ev.first).test


def untrained(ev: Evidence, side: dict[str, Any], grids: list[str]) -> Setting | None:
    """The registered evaluation setting of a pairing's side (its model before OPD, in its mode) in `grids` (every
    grid's when none): its seeds are evaluations at as many evaluation seeds (gropd/runs/evaluation.py)."""
    found = [
        s
        for s in ev.settings(*grids)
        if s.registered
        and s.config.get("kind") == "eval"
        and (s.value("model"), s.value("mode")) == (side["model"], side["mode"])
    ]
    return found[0] if found else None


def baseline_noise(student: list[float], teacher: list[float]) -> str:
    """How much of a baseline's evaluation noise the page can carry: 'baseline n = 3 and 3', or '…, no spread'."""
    n = (len(student), len(teacher))
    return f"baseline n = {n[0]} and {n[1]}" if min(n) > 1 else f"baseline n = {min(n)}, no spread"


def share_text(share: Interval | None, student: list[float], teacher: list[float]) -> str:
    """The share of the gap closed with its interval where every group has a spread: '0.53 [0.47, 0.60] (baseline
    n = 3 and 3)', '0.33 (baseline n = 1, no spread)'; '—' when there is none."""
    if share is None:
        return "—"
    body = f"{share.mean:.2f}" + ("" if math.isinf(share.lo) else f" [{share.lo:.2f}, {share.hi:.2f}]")
    return f"{body} ({baseline_noise(student, teacher)})"


def distillation_rule(ev: Evidence, claim: ClaimSettings) -> Section:
    """Per pairing and method: the lift of the trained student toward its teacher (pre-OPD: claim.grids[1:]), the
    baseline's evaluation noise carried where it was evaluated at several evaluation seeds (stats.lift, gap_share)."""
    refs = [s for s in ev.settings(*claim.grids[1:]) if s.registered]
    rows, cells, lines, runs, deciding = [], {}, [], [run for s in refs for run in s.runs], {}

    def pre(side: dict) -> tuple[Setting | None, list[float], str]:
        if (s := untrained(ev, side, claim.grids[1:])) is None:
            return None, [], f"— (no {side['model']} {side['mode']} run in grid {', '.join(claim.grids[1:])})"
        values, _, miss = macros(ev, s)
        lines.extend(line for line in miss if line not in lines)
        return s, list(values.values()), text(values)

    for s in trained(ev, claim):
        record = ev.manifests.pairings[s.pairing]
        (student_ref, student, student_text), (teacher_ref, teacher, teacher_text) = map(
            pre, (record["student"], record["teacher"])
        )
        values, collapsed, miss = macros(ev, s)
        means = [statistics.fmean(x) if x else None for x in (student, teacher)]
        if test(ev, claim) == "one_evaluation":  # as first registered: the baselines' means, their spread not carried
            student, teacher = ([m] if m is not None else [] for m in means)
        gain = lift(values, student)
        sides = [ref for ref in (student_ref, teacher_ref) if ref]
        known = values and None not in means and means[0] != means[1]
        share = gap_share(list(values.values()), student, teacher) if known else None
        verdict = broken(s, *sides) or verdicts.distillation(*means, gain, collapsed, limits(ev), share)
        cells[cell := f"{ev.title(s.pairing)}, {s.label}"] = verdict
        identity = ("Macro", f"{ev.title(s.pairing)}: {s.label}", "the student before OPD")
        read = verdict.outcome != NOT_TESTED and not collapsed  # (a collapsed seed fails it unread)
        row = [student_text, teacher_text, text(values, collapsed), Comparison(identity, gain, family(read))]
        deciding |= {cell: row[-1]} if read else {}
        rows.append([ev.title(s.pairing), s.label, *row, share_text(share, student, teacher), verdict.outcome])
        lines += miss + (lacking(ev, claim, [s]) if verdict.outcome == NOT_TESTED else [])
        runs += s.runs
    header = ["pairing", "method", "student pre-OPD", "teacher", "trained student", "lift [95% t]"]
    header += ["share of the gap [95% t]", "verdict"]
    grids = ", ".join(claim.grids[1:])
    intro = f"Macro Avg@K (%); pre-OPD rows from grid {grids}, trained rows from {claim.grids[0]}. " + BASELINE_NOISE
    return Section([(intro, header, rows)], cells, runs, lines, deciding=deciding)


BASELINE_NOISE = (
    "A pre-OPD model evaluated at several evaluation seeds (its grid's seeds: `--seeds 3`) carries its evaluation "
    "noise: the lift is then Welch's interval against those evaluations, and the share of the gap (lift / (teacher − "
    "student)) a delta-method t interval over the three groups (Welch–Satterthwaite df); evaluated once, a baseline "
    "has no spread to carry (baseline n = 1, no spread)."
)


def broken(*settings: Setting) -> Verdict | None:
    """NOT_TESTED when a seed of these settings has a record that cannot be believed (RunDir.record_problem): a
    verdict is refused, not made from the other seeds, which could be any subset a damaged file leaves."""
    ids = [run.run_id for s in settings for run in s.seeds().values() if run.state == "broken"]
    return Verdict(NOT_TESTED, f"the record of {', '.join(ids)} is broken (see Missing)") if ids else None


def wording(ev: Evidence, name: str, key: str, compare: list[dict[str, Any]] = (), unstable: str | None = None) -> str:
    """The wording of rule `name` (report.yaml `rules`), its {thresholds}, {first} and {second} filled in; {unstable}
    is report.yaml's `unstable` paragraph unless `unstable` replaces it (World 5 registers its own)."""
    try:
        values = verdicts.wording_values(limits(ev))
        if unstable is None:
            unstable = ev.report.rules.get("unstable", "").format(**values)
        first, second = (*map(describe, compare), "", "")[:2]
        return ev.report.rules[name].format(**values, unstable=unstable, first=first, second=second)
    except KeyError as err:
        problem = f"no wording for rule {name!r} in `rules`, or it names {err}, not a threshold"
        raise ConfigError(
            str(ev.experiments_dir / "report.yaml"), key, problem, ", ".join(verdicts.wording_values(limits(ev)))
        ) from None


def describe(selector: dict[str, Any]) -> str:
    """'GR-OPD', 'vanilla OPD (feedback.zero_format_tokens=True)': a `compare` entry in words; a key selected as
    unset (None: the method's default, e.g. constant.c from the first batch) is not named, as Table 1 names it."""
    extra = ", ".join(f"{key}={value}" for key, value in selector.items() if key != "method" and value is not None)
    record = METHODS.get(selector.get("method"))
    return (record.label if record else "any method") + (f" ({extra})" if extra else "")


def chosen(ev: Evidence, claim: ClaimSettings) -> list[tuple[Setting, Setting]]:
    """Per pairing, the (first, second) settings the claim's `compare` entries select by their config values."""

    def has(s: Setting, selector: dict[str, Any]) -> bool:
        return all(reduce(lambda d, k: (d or {}).get(k), key.split("."), s.config) == v for key, v in selector.items())

    first, second = ([s for s in trained(ev, claim) if has(s, selector)] for selector in claim.compare)
    return [(a, b) for a in first for b in second if a.pairing == b.pairing]


def beats_rule(ev: Evidence, claim: ClaimSettings) -> Section:
    """Per pairing: the first setting against the second in Macro, paired over seeds (registered), or a collapse
    decides (the interval then described, and the winner set against the untrained student: by_collapse)."""
    rows, cells, lines, runs, names, stated, deciding = [], {}, [], [], tuple(map(describe, claim.compare)), [], {}
    for first, second in chosen(ev, claim):
        (a, a_collapsed, miss_a), (b, b_collapsed, miss_b) = macros(ev, first), macros(ev, second)
        interval = paired(a, b)
        verdict = broken(first, second) or verdicts.beats(interval, (len(a), len(b)), (a_collapsed, b_collapsed), names)
        call = "not used: a collapse decides" if a_collapsed or b_collapsed else None  # (verdicts.beats' order)
        if verdict.outcome == REPRODUCED:
            verdict, against = useful(ev, first, a, verdict, names, alone=bool(b_collapsed))
            stated += [against] if against else []
        cells[title := ev.title(first.pairing)] = verdict
        identity = ("Macro", f"{title}: {first.label}", f"{title}: {second.label}")
        read = not call and verdict.outcome != NOT_TESTED
        compared = Comparison(identity, interval, family(read))
        deciding |= {title: compared} if read else {}
        shown = [compared, call or ("—" if interval is None else comparison(interval, names))]
        settings = f"{first.label} vs {second.label}"
        rows.append([title, settings, text(a, a_collapsed), text(b, b_collapsed), *shown, verdict.outcome])
        lines += miss_a + miss_b + (lacking(ev, claim, [first, second]) if verdict.outcome == NOT_TESTED else [])
        runs += first.runs + second.runs
    header = ["pairing", "settings", *names, f"paired {names[0]} − {names[1]} [95% t]", "comparison", "verdict"]
    intro = f"Macro Avg@K (%) from grid {', '.join(claim.grids)}, paired by seed (same prompts, same evaluation draws)."
    return Section([(intro, header, rows)], cells, runs, lines, stated, deciding)


def useful(
    ev: Evidence, winner: Setting, values: dict[int, float], verdict: Verdict, names: tuple[str, str], alone: bool
) -> tuple[Verdict, Comparison | None]:
    """A 'better' cell set against the untrained student (its pairing's student before OPD): Welch's interval of the
    winner's Macro against the student's evaluations (stats.lift, described); 'better than <second>, below the
    untrained student' where it ended below. `alone`: reproduced by the other setting's collapse alone."""
    name, title = names[0], ev.title(winner.pairing)
    student = ev.manifests.pairings[winner.pairing]["student"]
    before = untrained(ev, student, [])
    reference = list(macros(ev, before)[0].values()) if before else []
    route = ": reproduced by the collapse alone" if alone else ""
    if not values or not reference:
        why = f"no pre-OPD evaluation of the student to set {name} against"
        return Verdict(verdict.outcome, f"{verdict.reason}{route} ({why})", verdict.fragile), None
    interval = lift(values, reference)
    mine, theirs = statistics.fmean(values.values()), statistics.fmean(reference)
    said = comparison(interval, (name, "the untrained student"))
    if interval.call < 0:
        useful_text = f"better than {names[1]}, below the untrained student"
    elif interval.call > 0:
        useful_text = f"better than {names[1]} and above the untrained student"
    else:
        useful_text = f"better than {names[1]}, not resolved against the untrained student"
    reason = (
        f"{verdict.reason}{route}; {useful_text}: {name}'s mean Macro {mine:.2f} against the untrained student's "
        f"{theirs:.2f} ({student['model']}, {student['mode']}, before OPD; {name} − the untrained student: "
        f"{interval.text()}, {said}; described)"
    )
    identity = ("Macro", f"{title}: {winner.label}", "the student before OPD")
    return Verdict(verdict.outcome, reason, verdict.fragile), Comparison(identity, interval, DESCRIBED)


def arrow(pair: tuple[float, float] | None, decimals: int) -> str:
    return "—" if pair is None else f"{pair[0]:.{decimals}f} → {pair[1]:.{decimals}f}"


def contrast_section(
    ev: Evidence, claim: ClaimSettings, groups: list[tuple[str, list[Setting], list[Setting]]]
) -> Section:
    """Claims 3–5: in each group (name, bad, good), the bad settings unstable and the good ones stable; beside the
    verdict, every two of the group's settings compared in final Macro, paired by seed (round 5's rule, described)."""
    rows, cells, lines, runs, contrasts, limit = [], {}, [], [], [], limits(ev)
    for name, bad, good in groups:
        for first, second in combinations(bad + good, 2):
            interval = paired(macros(ev, first)[0], macros(ev, second)[0])
            call = "—" if interval is None else comparison(interval, (first.label, second.label))
            identity = ("Macro", f"{name}: {first.label}", f"{name}: {second.label}")  # (claim 1's, reversed, is one)
            contrasts.append([name, f"{first.label} − {second.label}", Comparison(identity, interval, DESCRIBED), call])
        flags, near = {}, {}
        for s in bad + good:
            trends, miss = s.collect(lambda run: run.trend())
            finals = s.collect(lambda run: run.final(list(ev.suites)))[0]
            flags[s.label] = [bool(verdicts.unstable(t, limit)) for t in trends.values()]
            near[s.label] = [verdicts.borderline(t, limit) for t in trends.values()]
            for seed, run in s.seeds().items():
                t = trends.get(seed)
                cap = f" (cap {t.cap})" if t and t.cap else ""
                why = "—" if t is None else "; ".join(verdicts.unstable(t, limit)) or "stable"
                why += f" ({far})" if t is not None and (far := verdicts.distances(t, limit)) else ""
                final = f"{finals[seed].macro:.2f}" if seed in finals else "—"
                shown = [arrow(t and t.length, 1) + cap, arrow(t and t.reward, 3), arrow(t and t.pearson, 2)]
                rows.append([ev.title(s.pairing), s.label, str(seed), run.state, *shown, final, why])
            lines += miss
            runs += s.runs
        bad_flags = [flag for s in bad for flag in flags[s.label]]
        good_flags = {s.label: flags[s.label] for s in good}
        bad_name = " / ".join(s.label for s in bad)
        near_by_name = {bad_name: [reason for s in bad for reason in near[s.label]]} | {
            s.label: near[s.label] for s in good
        }
        verdict = broken(*bad, *good) or verdicts.contrast(bad_flags, good_flags, bad_name, limit, near_by_name)
        cells[name] = verdict
        lines += lacking(ev, claim, bad + good) if verdict.outcome == NOT_TESTED else []
    header = ["pairing", "setting", "seed", "state", "length, first → last 10%", "reward, first → last 10%"]
    header += ["Pearson(S, length)", "final Macro", "unstable?"]
    intro = f"Settings of grid {', '.join(claim.grids)}; trends: the first and the last 10% of logged steps."
    paired_intro = "Final Macro, paired by seed over the seeds both finished (described; the verdict is the rule's):"
    paired_header = ["group", "settings", "paired difference [95% t]", "comparison"]
    return Section([(intro, header, rows), (paired_intro, paired_header, contrasts)], cells, runs, lines)


def unstable_rule(ev: Evidence, claim: ClaimSettings) -> Section:
    """Per pairing: the first setting unstable, the second stable."""
    pairs, groups = chosen(ev, claim), []
    for pairing in dict.fromkeys(first.pairing for first, _ in pairs):
        bad, good = ([*{id(pair[i]): pair[i] for pair in pairs if pair[i].pairing == pairing}.values()] for i in (0, 1))
        groups.append((ev.title(pairing), bad, good))
    return contrast_section(ev, claim, groups)


def knob_rule(ev: Evidence, claim: ClaimSettings, knob: str, other: str, is_bad) -> Section:
    """GR-OPD settings grouped by (pairing, the other knob), each group split by `is_bad(knob value)`."""
    groups: dict[tuple, list[Setting]] = {}
    for s in trained(ev, claim, "gropd.lam"):
        groups.setdefault((s.pairing, s.knob(other)), []).append(s)
    symbol = {"lam": "λ", "gamma": "γ"}[other]
    split = []
    for (pairing, value), members in groups.items():
        bad, good = ([s for s in members if is_bad(s.knob(knob)) == side] for side in (True, False))
        split += [(f"{ev.title(pairing)}, {symbol}={num(value)}", bad, good)] if bad and good else []
    return contrast_section(ev, claim, split)


def pressure_rule(ev: Evidence, claim: ClaimSettings) -> Section:
    """Every cross-pattern GR-OPD setting against every matched one, per-run median normalised pressure: Welch's
    unpaired interval (runs of different pairings share no prompts; a seed does not pair them)."""
    settings, medians, lines, rows = trained(ev, claim, "gropd.lam"), {}, [], []
    for s in settings:
        found, miss = s.collect(lambda run: run.pressure())
        medians[id(s)], lines = {seed: m[0] for seed, m in found.items()}, lines + miss
        pattern = "matched" if ev.matched(s.pairing) else "cross-pattern"
        rows.append([ev.title(s.pairing), pattern, s.label, text(medians[id(s)])])
    cells, pairs, names, deciding = {}, [], ("cross-pattern", "matched"), {}
    unpaired = test(ev, claim) != "paired"  # as first registered: paired by seed
    for c, m in product(*([s for s in settings if ev.matched(s.pairing) == side] for side in (False, True))):
        a, b = medians[id(c)], medians[id(m)]
        interval = welch(list(a.values()), list(b.values())) if unpaired else paired(a, b)
        name = f"{ev.title(c.pairing)} λ={num(c.knob('lam'))} vs {ev.title(m.pairing)} λ={num(m.knob('lam'))}"
        judged = verdicts.above(interval, names)
        identity = (
            "median normalised pressure",
            f"{ev.title(c.pairing)}: {c.label}",
            f"{ev.title(m.pairing)}: {m.label}",
        )
        if judged.outcome == NOT_TESTED:
            pairs.append([name, Comparison(identity, interval, DESCRIBED), "not judged"])
            continue
        cells[name] = broken(c, m) or judged
        read = cells[name] is judged
        pairs.append([name, Comparison(identity, interval, family(read)), judged.reason])
        deciding |= {name: pairs[-1][1]} if read else {}
    if not cells:
        cells = {"every pair": Verdict(NOT_TESTED, f"no cross-pattern and matched setting has ≥ {MIN_SEEDS} seeds")}
        lines += lacking(ev, claim, settings)
    tables = [("Per setting, every grid's runs pooled:", ["pairing", "pattern", "setting", "per-run median"], rows)]
    intro = "Pairs, unpaired (different pairings: no seed pairs them):"
    tables.append((intro, ["cross-pattern vs matched", "difference [95% Welch t]", "call"], pairs))
    return Section(tables, cells, [run for s in settings for run in s.runs], lines, deciding=deciding)


RULE_FUNCTIONS = {
    "distillation": distillation_rule,
    "beats": beats_rule,
    "unstable_vs_stable": unstable_rule,
    "large_lambda_unstable": lambda ev, c: knob_rule(ev, c, "lam", "gamma", lambda lam: lam >= limits(ev).large_lambda),
    "gamma_one_unstable": lambda ev, c: knob_rule(ev, c, "gamma", "lam", lambda gamma: gamma >= 1.0),
    "cross_pressure_above_matched": pressure_rule,
}
