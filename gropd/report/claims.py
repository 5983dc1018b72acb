"""The claims page: each claim of experiments/report.yaml (`claims`), the evidence this profile's runs give and a
verdict by its rule: a function of RULE_FUNCTIONS, `(evidence, claim) -> Section`, whose thresholds live in
gropd/report/verdicts.py and whose wording in report.yaml (`rules`). A claim using an existing rule is a YAML entry.
Each difference a section shows is a Comparison of a family (gropd/report/families.py): registered where its rule
reads it, described otherwise; the page adjusts the registered family by Holm and says how many each holds.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field, replace
from functools import reduce
from itertools import combinations, product
from typing import Any

from gropd.config import ConfigError
from gropd.credit import METHODS
from gropd.report import verdicts
from gropd.report.evidence import Evidence, Run, Setting, num
from gropd.report.families import ALPHA, DESCRIBED, REGISTERED, Comparison, Families, pvalue
from gropd.report.formats import Cell, missing_block, pipe_table
from gropd.report.publish import Artefact
from gropd.report.registered import first_started, seeds_of, set_after
from gropd.report.settings import ClaimSettings
from gropd.report.stats import CONVENTION, MIN_SEEDS, UNPAIRED, Interval, gap_share, lift, paired, stats, welch
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
    return Thresholds(**ev.registration.values(ev.first), undecided=reading == "within_one_se")


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


def describe(selector: dict[str, Any]) -> str:
    """'GR-OPD', 'vanilla OPD (feedback.zero_format_tokens=True)': a `compare` entry in words."""
    extra = ", ".join(f"{key}={value}" for key, value in selector.items() if key != "method")
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
            identity = ("final Macro", f"{name}: {first.label}", f"{name}: {second.label}")
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


def wording(ev: Evidence, name: str, key: str, compare: list[dict[str, Any]] = ()) -> str:
    """The wording of rule `name` (report.yaml `rules`), its {thresholds}, {first} and {second} filled in."""
    try:
        values = verdicts.wording_values(limits(ev))
        unstable = ev.report.rules.get("unstable", "").format(**values)
        first, second = (*map(describe, compare), "", "")[:2]
        return ev.report.rules[name].format(**values, unstable=unstable, first=first, second=second)
    except KeyError as err:
        problem = f"no wording for rule {name!r} in `rules`, or it names {err}, not a threshold"
        raise ConfigError(
            str(ev.experiments_dir / "report.yaml"), key, problem, ", ".join(verdicts.wording_values(limits(ev)))
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
class Registered:
    """What the registration says of a judged claim: its paragraph, the lines of its verdict at all seeds where the
    extra seeds read otherwise (none: they do not), its verdict at all seeds and its 'set after the runs' mark ('')."""

    lines: list[str]
    apart: list[str]
    all_seeds: str
    mark: str
    after_holm_all_seeds: str = "—"

    def columns(self) -> list[str]:
        """The summary table's last two cells: the verdict at all seeds, the mark ('—' where none)."""
        return [self.all_seeds, self.mark or "—"]


REGISTERED_COLUMNS = ["all seeds", "set after the runs"]


@dataclass(frozen=True)
class Claims:
    """What the claims page shows: every claim judged, in page order, the wording every rule shares, the families of
    its comparisons, and the paragraph and table (header, rows) that state them."""

    judged: list[Judged]
    common: str
    families: Families
    multiplicity: str
    family_table: tuple[list[str], list[list[str]]]
    registered: dict[str, Registered] = field(default_factory=dict)  # per claim key (claims(): the page's)


def multiplicity(ev: Evidence, families: Families, called: int, standing: int) -> str:
    """The page's paragraph on its comparisons: the two families, how many each holds, Holm's rule and when the
    family was registered."""
    rule, first = ev.registration.family_rule(), ev.registration.family_rule(first=True)
    return (
        f"Every difference on this page is in one of two families. **Registered** ({families.m} members, a number "
        f"experiments/registration.yaml fixes, written down {rule.stamp}: set after the runs; as first registered, "
        f"{first.stamp}, no adjustment: the verdict column): per claim the cells its registration names, each by the "
        "difference its verdict reads, or, where a collapse decides the cell or it is not tested, by its rule's "
        "outcome (resolved: p 0; not: p 1); a difference two claims read counts once. Their p-values (two-sided, of "
        "the t test behind the interval shown) are adjusted by Holm–Bonferroni over the whole family: sorted p(1) ≤ "
        "… ≤ p(m), the i-th adjusted p is the largest over j ≤ i of min(1, (m − j + 1) · p(j)); a difference is "
        f"resolved after Holm when its adjusted p < {ALPHA:g}. The verdicts are the registered rules', read from the "
        "unadjusted 95% intervals; the column 'after Holm' says which reproduced verdict would not survive the "
        "adjustment (it only widens: a verdict not reproduced stands; '—': no interval decides it): of the "
        f"{called} registered differences whose interval excludes 0, {standing} stay resolved after Holm. "
        f"**Described** ({families.k} comparisons): differences shown beside a verdict that no rule reads (the paired "
        "final Macro beside an instability verdict, a 'better' setting against the untrained student); their p is "
        "not adjusted and they are not claims. An interval with one seed a side has no p (as a member: not resolved)."
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
    members, unmatched = family_members(ev, sections)
    families = Families.of([c for _, _, section in sections for c in section.comparisons], members)
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
    for identity, p in members:
        if identity[0] == CELL:
            adjusted = families.adjusted[identity]
            outcome = "decided by its rule without an interval: " + ("resolved" if p == 0 else "not resolved")
            after = "resolved" if adjusted < ALPHA else "not resolved"
            shown = [outcome, f"{p:g} (the rule's)", "0" if adjusted == 0 else pvalue(adjusted), after]
            rows.append([f"claim {identity[1]}, {identity[2]}", identity[1], *shown])
    header = ["registered comparison", "claims", "difference [95% t]", "p", f"Holm p (m = {families.m})", "after Holm"]
    common = wording(ev, "common", "rules.common")
    text = multiplicity(ev, families, called, standing) + "".join(f" {line}" for line in unmatched)
    return Claims(judged, common, families, text, (header, rows))


CELL = "cell"  # a family member that is a cell its rule decides without an interval (a collapse, not tested)


def family_members(
    ev: Evidence, sections: list[tuple[ClaimSettings, str, Section]]
) -> tuple[list[tuple[tuple[str, ...], float | None]], list[str]]:
    """The registered family's members in page order, each (identity, p): per claim, as many of its cells as
    experiments/registration.yaml names (`claims.<key>.members`), a cell an interval decides by that comparison (p:
    its own, None), a cell its rule decides otherwise by its outcome (reproduced: p 0, resolved; else p 1); a
    comparison another claim counted is not counted again. Where a claim has fewer cells than registered, the
    missing members count as not resolved (p 1); a line says so, and where it has more."""
    members: list[tuple[tuple[str, ...], float | None]] = []
    lines, seen = [], set()
    for index, (claim, _, section) in enumerate(sections):
        registered = ev.registration.claims.get(claim.key)
        if registered is None:
            where = str(ev.experiments_dir / "registration.yaml")
            raise ConfigError(where, f"claims.{claim.key}", "missing", f"an entry for report.yaml's claims[{index}]")
        found = []
        for name, verdict in section.cells.items():
            if (c := section.deciding.get(name)) is not None:
                found += [(c.identity, None)] if c.identity not in seen else []
            else:
                found.append(((CELL, claim.key, name), 0.0 if verdict.outcome == REPRODUCED else 1.0))
            seen |= {found[-1][0]} if found else set()
        if registered.members == 0:
            continue
        if len(found) != registered.members:
            lines.append(
                f"Claim {claim.key} has {len(found)} cells where the registration names {registered.members} members"
                + (": the missing count as not resolved." if len(found) < registered.members else ": all counted.")
            )
        found += [((CELL, claim.key, f"member {i + 1} (no cell)"), 1.0) for i in range(len(found), registered.members)]
        members += found
    return members, lines


def anchor(key: str) -> str:
    """The anchor other pages link a claim by (`claims.md#claim-7′a`): its key, whatever its title says."""
    return f'<a id="claim-{key}"></a>'


def cells_differ(a: Judged, b: Judged) -> bool:
    """Whether two judgements of a claim read differently: its verdict, its reading after Holm or a cell's outcome."""
    outcomes = lambda j: {name: v.outcome for name, v in j.section.cells.items()}  # noqa: E731
    return a.verdict.outcome != b.verdict.outcome or a.after_holm != b.after_holm or outcomes(a) != outcomes(b)


def registration_lines(ev: Evidence, j: Judged, every: Judged, first: Judged) -> Registered:
    """A claim's registration paragraph, its 'all seeds' lines where extra seeds read otherwise, and the summary's
    'set after the runs' cell ('' where nothing is)."""
    registered = ev.registration.claims[j.claim.key]
    after = set_after(ev, j.claim.key, j.claim.rule, j.section.runs)
    lines = [
        f"**Registration** (experiments/registration.yaml). Comparisons: {registered.comparisons} "
        f"({registered.members} of the family's {ev.registration.size()} members); first written {registered.stamp}. "
        f"The first run it reads began {first_started(j.section.runs)}. Seeds: the registered ones decide."
    ]
    mark = ""
    if after:
        by_first = f"{first.verdict.outcome} — {first.verdict.reason}"
        lines[0] += f" **Set after the runs:** {'; '.join(after)}. By the rule as first registered: {by_first}."
        mark = f"set after the runs ({'; '.join(after)}); as first registered: {first.verdict.outcome}"
    apart = []
    if cells_differ(j, every):
        apart = [
            f"**All seeds** (the extra seeds included): {every.verdict.outcome} — {every.verdict.reason}; after Holm "
            f"(the family at all seeds): {every.after_holm}."
        ]
        apart += [f"- {name}: {v.outcome} — {v.reason}" for name, v in every.section.cells.items()]
    return Registered(lines, apart, every.verdict.outcome, mark, every.after_holm)


def summary(page: Claims) -> list[dict[str, Any]]:
    """claims.json: per claim, what README's results block needs: its key, the statement judged (its title), the
    paper's sentence, the twin's finding in one line (the verdict's reason), the verdict at the registered seeds and
    at all seeds, after Holm, the seed counts of the settings it reads, each cell's verdict, the registration mark
    and the page's anchor."""
    return [
        {
            "claim": j.claim.key,
            "statement": j.claim.title,
            "paper": j.claim.paper,
            "finding": j.verdict.reason,
            "verdict": j.verdict.outcome,
            "verdict_all_seeds": page.registered[j.claim.key].all_seeds,
            "after_holm": j.after_holm,
            "after_holm_all_seeds": page.registered[j.claim.key].after_holm_all_seeds,
            "n": seeds_of(j.section),
            "cells": [{"cell": name, "verdict": v.outcome} for name, v in j.section.cells.items()],
            "set_after_the_runs": page.registered[j.claim.key].mark,
            "anchor": f"claims.md#claim-{j.claim.key}",
        }
        for j in page.judged
    ]


def claims(ev: Evidence) -> Artefact:
    """claims.md: a summary of verdicts, the comparisons' families, then per claim the paper's sentence, the rule,
    the registration, the evidence, the verdict; claims.json: the summary (`summary`). The registered seeds decide
    (experiments/registration.yaml); all seeds and the rules as first registered are judged too, shown apart."""
    page = judge(ev.variant(registered_seeds=True))
    every = {j.claim.key: j for j in judge(ev).judged}
    first = {j.claim.key: j for j in judge(ev.variant(registered_seeds=True, first=True)).judged}
    shown = {j.claim.key: registration_lines(ev, j, every[j.claim.key], first[j.claim.key]) for j in page.judged}
    page = replace(page, registered=shown)
    lines = [f"# The paper's claims on the {ev.profile} profile", ""]
    lines += [
        f"Built from `{ev.profile_results}/` alone (reports never train). Every number comes from a run named under "
        "it; the paper's sentences are quoted from experiments/report.yaml, the rules' numbers, tests, seeds and "
        "family from experiments/registration.yaml with the commit and date that first wrote each down. A verdict is "
        "**reproduced**, **not reproduced** (with the reason), **undecided at this n** (a threshold decision within "
        "one standard error decides it) or **not tested** (with the runs that would test it, under Missing). The "
        "registered seeds decide; where the extra seeds read otherwise, both are shown. A rule in force that was "
        "written after the first run it reads began is marked **set after the runs**, with the verdict by the rule "
        "as first registered.",
        "",
        f"**Statistics.** {CONVENTION} {UNPAIRED}",
        "",
        f"**Comparisons.** {page.multiplicity}",
        "",
        f"**Every rule.** {page.common}",
        "",
    ]
    rows = [
        [j.name, j.verdict.outcome, j.verdict.reason, j.after_holm, *shown[j.claim.key].columns()] for j in page.judged
    ]
    header = [*SUMMARY, f"after Holm (m = {page.families.m})", *REGISTERED_COLUMNS]
    lines += pipe_table(header, [[Cell(x) for x in row] for row in rows])
    header, family_rows = page.family_table
    lines += ["", "**The registered family.**", ""] + pipe_table(header, [Cell.texts(*row) for row in family_rows])
    for j in page.judged:
        registration, apart = shown[j.claim.key].lines, shown[j.claim.key].apart
        lines += ["", anchor(j.claim.key), "", f"## {j.name}", "", f"**The paper.** {j.claim.paper}"]
        lines += ["", f"**Rule.** {j.rule}", "", *registration]
        lines += ["", "**Evidence.**", ""]
        for intro, header, table_rows in j.tables:
            lines += [intro, ""] + pipe_table(header, [[Cell(c) for c in row] for row in table_rows]) + [""]
        lines += [f"- {name}: {v.outcome} — {v.reason}" for name, v in j.section.cells.items()]
        lines += ["", f"**Verdict: {j.verdict.outcome}** — {j.verdict.reason}.", ""]
        lines += [*apart, ""] if apart else []
        lines += missing_block(j.missing)
    runs = [run for j in page.judged for run in j.section.runs] + [r for j in every.values() for r in j.section.runs]
    runs = list({id(run): run for run in runs}.values())
    missing = list(dict.fromkeys(line for j in page.judged for line in j.section.missing))
    grids = tuple(dict.fromkeys(g for c in ev.report.claims for g in c.grids))
    manifests = [f"grids/{g}.yaml" for g in grids]
    manifests += ["pairings.yaml", "suites.yaml", "train.yaml", "report.yaml", "registration.yaml"]
    files = {
        "claims.md": "\n".join(lines) + "\n",
        "claims.json": json.dumps(summary(page), indent=2, ensure_ascii=False) + "\n",
    }
    return Artefact("claims", files, runs, missing, manifests, grids, content=page)
