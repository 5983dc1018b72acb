"""The claims page: each claim of experiments/report.yaml (`claims`), the evidence this profile's runs give and a
verdict by its rule: a function of RULE_FUNCTIONS, `(evidence, claim) -> Section`, whose thresholds live in
gropd/report/verdicts.py and whose wording in report.yaml (`rules`). A claim using an existing rule is a YAML entry.
Each difference a section shows is a Comparison of a family (gropd/report/families.py): registered where its rule
reads it, described otherwise; the page adjusts the registered family by Holm and says how many each holds.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from functools import reduce
from itertools import combinations, product
from typing import Any

from gropd.config import ConfigError
from gropd.credit import METHODS
from gropd.report import verdicts
from gropd.report.evidence import Evidence, Run, Setting, num
from gropd.report.families import ALPHA, DESCRIBED, REGISTERED, Comparison, Families
from gropd.report.formats import Cell, missing_block, pipe_table
from gropd.report.publish import Artefact
from gropd.report.settings import ClaimSettings
from gropd.report.stats import CONVENTION, MIN_SEEDS, UNPAIRED, Interval, gap_share, lift, paired, stats, welch
from gropd.report.verdicts import NOT_TESTED, PREFERRED_SEEDS, REPRODUCED, Verdict, comparison

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
        gain = lift(values, student)
        means = [statistics.fmean(x) if x else None for x in (student, teacher)]
        sides = [ref for ref in (student_ref, teacher_ref) if ref]
        verdict = broken(s, *sides) or verdicts.distillation(*means, gain, collapsed)
        cells[cell := f"{ev.title(s.pairing)}, {s.label}"] = verdict
        known = values and None not in means and means[0] != means[1]
        share = gap_share(list(values.values()), student, teacher) if known else None
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
        if verdict.outcome == REPRODUCED and b_collapsed:
            verdict, against = by_collapse(ev, first, a, verdict, names[0])
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


def by_collapse(
    ev: Evidence, winner: Setting, values: dict[int, float], verdict: Verdict, name: str
) -> tuple[Verdict, Comparison | None]:
    """A cell reproduced only because the other setting collapsed: its reason says so, and whether the winner ended
    above the untrained student (its pairing's student before OPD; the difference stats.lift, described)."""
    title, student = ev.title(winner.pairing), ev.manifests.pairings[winner.pairing]["student"]
    before = untrained(ev, student, [])
    reference = list(macros(ev, before)[0].values()) if before else []
    if not values or not reference:
        why = f"reproduced by the collapse alone (no pre-OPD evaluation of the student to set {name} against)"
        return Verdict(verdict.outcome, f"{verdict.reason}: {why}", verdict.fragile), None
    interval = lift(values, reference)
    mine, theirs = statistics.fmean(values.values()), statistics.fmean(reference)
    side = "above" if mine > theirs else "below" if mine < theirs else "level with"
    said = comparison(interval, (name, "the untrained student"))
    reason = (
        f"{verdict.reason}: reproduced by the collapse alone; {name}'s mean Macro {mine:.2f} ended {side} the "
        f"untrained student's {theirs:.2f} ({student['model']}, {student['mode']}, before OPD; {name} − the untrained "
        f"student: {interval.text()}, {said}; described)"
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
    rows, cells, lines, runs, contrasts = [], {}, [], [], []
    for name, bad, good in groups:
        for first, second in combinations(bad + good, 2):
            interval = paired(macros(ev, first)[0], macros(ev, second)[0])
            call = "—" if interval is None else comparison(interval, (first.label, second.label))
            identity = ("final Macro", f"{name}: {first.label}", f"{name}: {second.label}")
            contrasts.append([name, f"{first.label} − {second.label}", Comparison(identity, interval, DESCRIBED), call])
        flags, near = {}, {}
        for s in bad + good:
            trends, miss = s.collect(lambda run: run.trend())
            finals = s.collect(lambda run: run.final(list(ev.suites)))[0]
            flags[s.label] = [bool(verdicts.unstable(t)) for t in trends.values()]
            near[s.label] = [verdicts.borderline(t) for t in trends.values()]
            for seed, run in s.seeds().items():
                t = trends.get(seed)
                cap = f" (cap {t.cap})" if t and t.cap else ""
                why = "—" if t is None else "; ".join(verdicts.unstable(t)) or "stable"
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
        verdict = broken(*bad, *good) or verdicts.contrast(bad_flags, good_flags, bad_name, near_by_name)
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
    for c, m in product(*([s for s in settings if ev.matched(s.pairing) == side] for side in (False, True))):
        interval = welch(list(medians[id(c)].values()), list(medians[id(m)].values()))
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
    "large_lambda_unstable": lambda ev, c: knob_rule(ev, c, "lam", "gamma", lambda lam: lam >= verdicts.LARGE_LAMBDA),
    "gamma_one_unstable": lambda ev, c: knob_rule(ev, c, "gamma", "lam", lambda gamma: gamma >= 1.0),
    "cross_pressure_above_matched": pressure_rule,
}


def wording(ev: Evidence, name: str, key: str, compare: list[dict[str, Any]] = ()) -> str:
    """The wording of rule `name` (report.yaml `rules`), its {thresholds}, {first} and {second} filled in."""
    try:
        unstable = ev.report.rules.get("unstable", "").format(**verdicts.THRESHOLDS)
        first, second = (*map(describe, compare), "", "")[:2]
        return ev.report.rules[name].format(**verdicts.THRESHOLDS, unstable=unstable, first=first, second=second)
    except KeyError as err:
        problem = f"no wording for rule {name!r} in `rules`, or it names {err}, not a threshold"
        raise ConfigError(
            str(ev.experiments_dir / "report.yaml"), key, problem, ", ".join(verdicts.THRESHOLDS)
        ) from None


SUMMARY = ["claim", "verdict", "why"]  # the summary table's columns, then the verdict after Holm
Table = tuple[str, list[str], list[list[str]]]  # (intro, header, rows) as the page shows them


def expand(header: list[str], rows: list[Row], families: Families) -> tuple[list[str], list[list[str]]]:
    """A section's table as shown: each column of Comparisons followed by the comparison's family and its p (with
    Holm's adjustment where registered)."""
    header, rows = list(header), [list(row) for row in rows]
    for i in sorted({i for row in rows for i, cell in enumerate(row) if isinstance(cell, Comparison)}, reverse=True):
        header[i + 1 : i + 1] = ["family", f"p; Holm-adjusted p (registered, m = {families.m})"]
        for row in rows:
            cell = row[i]
            shown = [cell.text(), cell.family, families.p_text(cell)] if isinstance(cell, Comparison) else None
            row[i : i + 1] = shown or [cell, "—", "—"]
    return header, rows


@dataclass(frozen=True)
class Judged:
    """One claim of report.yaml judged: its rule in words, its evidence, the verdict over its cells, its tables as
    shown (`tables`: comparisons with their family and p) and its verdict read after Holm (holm_reading)."""

    claim: ClaimSettings
    rule: str
    section: Section
    verdict: Verdict
    tables: list[Table]
    after_holm: str

    name = property(lambda self: f"{self.claim.key}. {self.claim.title}")
    missing = property(lambda self: list(dict.fromkeys(self.section.missing)))


@dataclass(frozen=True)
class Claims:
    """What the claims page shows: every claim judged, in page order, the wording every rule shares, the families of
    its comparisons, and the paragraph and table (header, rows) that state them."""

    judged: list[Judged]
    common: str
    families: Families
    multiplicity: str
    family_table: tuple[list[str], list[list[str]]]


def multiplicity(families: Families, called: int, standing: int) -> str:
    """The page's paragraph on its comparisons: the two families, how many each holds, Holm's rule."""
    return (
        f"Every difference on this page is in one of two families. **Registered** ({families.m} comparisons): the "
        "differences a verdict reads, by rules experiments/report.yaml and experiments/TINY.md fixed before the runs. "
        "Their p-values (two-sided, of the t test behind the interval shown) are adjusted by Holm–Bonferroni over the "
        "whole family: sorted p(1) ≤ … ≤ p(m), the i-th adjusted p is the largest over j ≤ i of min(1, (m − j + 1) · "
        f"p(j)); a difference is resolved after Holm when its adjusted p < {ALPHA:g}. The verdicts are the registered "
        "rules', read from the unadjusted 95% intervals; the column 'after Holm' says which reproduced verdict would "
        "not survive the adjustment (it only widens: a verdict not reproduced stands; '—': no interval decides it): "
        f"of the {called} registered differences whose interval excludes 0, {standing} stay resolved after Holm. "
        f"**Described** ({families.k} comparisons): differences shown beside a verdict that no rule reads (the paired "
        "final Macro beside an instability verdict, a cell a collapse decides, a winner against the untrained "
        "student); their p is not adjusted and they are not claims. A difference two claims read counts once; an "
        "interval with one seed a side has no p and is in no count."
    )


def holm_reading(section: Section, verdict: Verdict, families: Families) -> str:
    """The verdict with the registered family's Holm adjustment: '—' where no interval with a p decides a cell;
    'stands' where it survives (an adjustment only widens intervals: a verdict not reproduced stands); else 'not
    reproduced: not resolved in <cells>', the reproduced cells whose interval no longer excludes 0."""
    decided = {name: c for name, c in section.deciding.items() if c.identity in families.adjusted}
    if not decided:
        return "—"
    lost = [
        name
        for name, c in decided.items()
        if section.cells[name].outcome == REPRODUCED and families.adjusted[c.identity] >= ALPHA
    ]
    if verdict.outcome != REPRODUCED or not lost:
        return "stands"
    where = "every cell" if len(lost) == len(section.cells) > 2 else ", ".join(lost)  # (as verdicts.combine says it)
    return f"not reproduced: not resolved in {where}"


def judge(ev: Evidence) -> Claims:
    """Every claim of report.yaml by its rule, the families of their comparisons; an unknown rule or wording raises
    ConfigError naming the key."""
    sections = []
    for index, claim in enumerate(ev.report.claims):
        if claim.rule not in RULE_FUNCTIONS:
            where = str(ev.experiments_dir / "report.yaml")
            raise ConfigError(where, f"claims[{index}].rule", repr(claim.rule), f"one of {', '.join(RULE_FUNCTIONS)}")
        rule = wording(ev, claim.rule, f"claims[{index}].rule", claim.compare)
        sections.append((claim, rule, RULE_FUNCTIONS[claim.rule](ev, claim)))
    families = Families.of([c for _, _, section in sections for c in section.comparisons])
    judged = []
    for claim, rule, section in sections:
        verdict, tables = verdicts.combine(section.cells), [(i, *expand(h, r, families)) for i, h, r in section.tables]
        judged.append(Judged(claim, rule, section, verdict, tables, holm_reading(section, verdict, families)))
    readers: dict[tuple[str, ...], list[str]] = {}
    for claim, _, section in sections:
        for c in section.comparisons:
            keys = readers.setdefault(c.identity, [])
            keys += [claim.key] if c.family == REGISTERED and claim.key not in keys else []
    rows, called, standing = [], 0, 0
    for identity, c in families.registered.items():
        adjusted = families.adjusted.get(identity)
        called += bool(c.interval and c.interval.call)
        standing += bool(c.interval and c.interval.call and adjusted is not None and adjusted < ALPHA)
        shown = [c.text(), families.p(c), families.holm(c), families.after_holm(c)]
        rows.append([c.name, ", ".join(readers[identity]), *shown])
    header = ["registered comparison", "claims", "difference [95% t]", "p", f"Holm p (m = {families.m})", "after Holm"]
    common = wording(ev, "common", "rules.common")
    return Claims(judged, common, families, multiplicity(families, called, standing), (header, rows))


def anchor(key: str) -> str:
    """The anchor other pages link a claim by (`claims.md#claim-7′a`): its key, whatever its title says."""
    return f'<a id="claim-{key}"></a>'


def claims(ev: Evidence) -> Artefact:
    """claims.md: a summary of verdicts, the comparisons' families, then per claim the paper's sentence, the rule,
    the evidence, the verdict."""
    page = judge(ev)
    lines = [f"# The paper's claims on the {ev.profile} profile", ""]
    lines += [
        f"Built from `{ev.profile_results}/` alone (reports never train). Every number comes from a run named under "
        "it; the paper's sentences are quoted from experiments/report.yaml. A verdict is **reproduced**, **not "
        "reproduced** (with the reason) or **not tested** (with the runs that would test it, under Missing).",
        "",
        f"**Statistics.** {CONVENTION} {UNPAIRED}",
        "",
        f"**Comparisons.** {page.multiplicity}",
        "",
        f"**Every rule.** {page.common}",
        "",
    ]
    rows = [[j.name, j.verdict.outcome, j.verdict.reason, j.after_holm] for j in page.judged]
    lines += pipe_table([*SUMMARY, f"after Holm (m = {page.families.m})"], [[Cell(x) for x in row] for row in rows])
    header, family_rows = page.family_table
    lines += ["", "**The registered family.**", ""] + pipe_table(header, [Cell.texts(*row) for row in family_rows])
    for j in page.judged:
        lines += ["", anchor(j.claim.key), "", f"## {j.name}", "", f"**The paper.** {j.claim.paper}"]
        lines += ["", f"**Rule.** {j.rule}"]
        lines += ["", "**Evidence.**", ""]
        for intro, header, table_rows in j.tables:
            lines += [intro, ""] + pipe_table(header, [[Cell(c) for c in row] for row in table_rows]) + [""]
        lines += [f"- {name}: {v.outcome} — {v.reason}" for name, v in j.section.cells.items()]
        lines += ["", f"**Verdict: {j.verdict.outcome}** — {j.verdict.reason}.", ""]
        lines += missing_block(j.missing)
    runs = [run for j in page.judged for run in j.section.runs]
    missing = list(dict.fromkeys(line for j in page.judged for line in j.section.missing))
    grids = tuple(dict.fromkeys(g for c in ev.report.claims for g in c.grids))
    manifests = [f"grids/{g}.yaml" for g in grids] + ["pairings.yaml", "suites.yaml", "train.yaml", "report.yaml"]
    files = {"claims.md": "\n".join(lines) + "\n"}
    return Artefact("claims", files, runs, missing, manifests, grids, content=page)
