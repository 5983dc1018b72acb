"""The claims page: each claim of experiments/report.yaml (`claims`), the evidence this profile's runs give and a
verdict by its rule: a function of RULE_FUNCTIONS, `(evidence, claim) -> Section`, whose thresholds live in
gropd/report/verdicts.py and whose wording in report.yaml (`rules`). A claim using an existing rule is a YAML entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from itertools import combinations, product
from typing import Any

from gropd.config import ConfigError
from gropd.credit import METHODS
from gropd.report import verdicts
from gropd.report.evidence import Evidence, Run, Setting, num
from gropd.report.formats import Cell, missing_block, pipe_table
from gropd.report.publish import Artefact
from gropd.report.settings import ClaimSettings
from gropd.report.stats import CONVENTION, MIN_SEEDS, lift, paired, stats
from gropd.report.verdicts import NOT_TESTED, PREFERRED_SEEDS, Verdict, comparison


@dataclass
class Section:
    """One claim's evidence: tables (intro, header, rows), per-cell verdicts, the runs read, Missing lines."""

    tables: list[tuple[str, list[str], list[list[str]]]]
    cells: dict[str, Verdict]
    runs: list[Run]
    missing: list[str]


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


def distillation_rule(ev: Evidence, claim: ClaimSettings) -> Section:
    """Per pairing and method: the lift of the trained student toward its teacher (pre-OPD: claim.grids[1:])."""
    refs = {(s.config.get("model"), s.config.get("mode")): s for s in ev.settings(*claim.grids[1:]) if s.registered}
    rows, cells, lines, runs = [], {}, [], [run for s in refs.values() for run in s.runs]

    def pre(side: dict) -> tuple[float | None, str]:
        if (s := refs.get((side["model"], side["mode"]))) is None:
            return None, f"— (no {side['model']} {side['mode']} run in grid {', '.join(claim.grids[1:])})"
        values, _, miss = macros(ev, s)
        lines.extend(line for line in miss if line not in lines)
        return (stats(list(values.values())).mean if values else None), text(values)

    for s in trained(ev, claim):
        record = ev.manifests.pairings[s.pairing]
        (student, student_text), (teacher, teacher_text) = pre(record["student"]), pre(record["teacher"])
        values, collapsed, miss = macros(ev, s)
        sides = [
            ref for side in ("student", "teacher") if (ref := refs.get((record[side]["model"], record[side]["mode"])))
        ]
        gain = lift(values, student)
        verdict = broken(s, *sides) or verdicts.distillation(student, teacher, gain, collapsed)
        cells[f"{ev.title(s.pairing)}, {s.label}"] = verdict
        row = [student_text, teacher_text, text(values, collapsed), gain.text() if gain else "—", verdict.outcome]
        rows.append([ev.title(s.pairing), s.label, *row])
        lines += miss + (lacking(ev, claim, [s]) if verdict.outcome == NOT_TESTED else [])
        runs += s.runs
    header = ["pairing", "method", "student pre-OPD", "teacher", "trained student", "lift [95% t]", "verdict"]
    intro = f"Macro Avg@K (%); pre-OPD rows from grid {', '.join(claim.grids[1:])}, trained rows from {claim.grids[0]}."
    return Section([(intro, header, rows)], cells, runs, lines)


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
    """Per pairing: the first setting against the second in Macro, paired over seeds."""
    rows, cells, lines, runs, names = [], {}, [], [], tuple(map(describe, claim.compare))
    for first, second in chosen(ev, claim):
        (a, a_collapsed, miss_a), (b, b_collapsed, miss_b) = macros(ev, first), macros(ev, second)
        interval = paired(a, b)
        verdict = broken(first, second) or verdicts.beats(interval, (len(a), len(b)), (a_collapsed, b_collapsed), names)
        cells[ev.title(first.pairing)] = verdict
        call = "not used: a collapse decides" if a_collapsed or b_collapsed else None  # (verdicts.beats' order)
        shown = ["—", call or "—"] if interval is None else [interval.text(), call or comparison(interval, names)]
        compared = f"{first.label} vs {second.label}"
        rows.append(
            [ev.title(first.pairing), compared, text(a, a_collapsed), text(b, b_collapsed), *shown, verdict.outcome]
        )
        lines += miss_a + miss_b + (lacking(ev, claim, [first, second]) if verdict.outcome == NOT_TESTED else [])
        runs += first.runs + second.runs
    header = ["pairing", "settings", *names, f"paired {names[0]} − {names[1]} [95% t]", "comparison", "verdict"]
    intro = f"Macro Avg@K (%) from grid {', '.join(claim.grids)}, paired by seed (same prompts, same evaluation draws)."
    return Section([(intro, header, rows)], cells, runs, lines)


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
            shown = "—" if interval is None else interval.text()
            contrasts.append([name, f"{first.label} − {second.label}", shown, call])
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
    """Every cross-pattern GR-OPD setting against every matched one, per-run median normalised pressure."""
    settings, medians, lines, rows = trained(ev, claim, "gropd.lam"), {}, [], []
    for s in settings:
        found, miss = s.collect(lambda run: run.pressure())
        medians[id(s)], lines = {seed: m[0] for seed, m in found.items()}, lines + miss
        pattern = "matched" if ev.matched(s.pairing) else "cross-pattern"
        rows.append([ev.title(s.pairing), pattern, s.label, text(medians[id(s)])])
    cells, pairs, names = {}, [], ("cross-pattern", "matched")
    for c, m in product(*([s for s in settings if ev.matched(s.pairing) == side] for side in (False, True))):
        interval = paired(medians[id(c)], medians[id(m)])
        name = f"{ev.title(c.pairing)} λ={num(c.knob('lam'))} vs {ev.title(m.pairing)} λ={num(m.knob('lam'))}"
        judged = verdicts.above(interval, names)
        if judged.outcome == NOT_TESTED:
            pairs.append([name, "—" if interval is None else interval.text(), "not judged"])
            continue
        pairs.append([name, interval.text(), judged.reason])
        cells[name] = broken(c, m) or judged
    if not cells:
        cells = {"every pair": Verdict(NOT_TESTED, f"no cross-pattern and matched setting share ≥ {MIN_SEEDS} seeds")}
        lines += lacking(ev, claim, settings)
    tables = [("Per setting, every grid's runs pooled:", ["pairing", "pattern", "setting", "per-run median"], rows)]
    tables.append(("Pairs, over their common seeds:", ["cross-pattern vs matched", "paired difference", "call"], pairs))
    return Section(tables, cells, [run for s in settings for run in s.runs], lines)


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


@dataclass(frozen=True)
class Judged:
    """One claim of report.yaml judged: its rule in words, its evidence and the verdict over its cells."""

    claim: ClaimSettings
    rule: str
    section: Section
    verdict: Verdict

    name = property(lambda self: f"{self.claim.key}. {self.claim.title}")
    missing = property(lambda self: list(dict.fromkeys(self.section.missing)))


@dataclass(frozen=True)
class Claims:
    """What the claims page shows: every claim judged, in page order, and the wording every rule shares."""

    judged: list[Judged]
    common: str


def judge(ev: Evidence) -> Claims:
    """Every claim of report.yaml by its rule; an unknown rule or wording raises ConfigError naming the key."""
    judged = []
    for index, claim in enumerate(ev.report.claims):
        if claim.rule not in RULE_FUNCTIONS:
            where = str(ev.experiments_dir / "report.yaml")
            raise ConfigError(where, f"claims[{index}].rule", repr(claim.rule), f"one of {', '.join(RULE_FUNCTIONS)}")
        rule = wording(ev, claim.rule, f"claims[{index}].rule", claim.compare)
        section = RULE_FUNCTIONS[claim.rule](ev, claim)
        judged.append(Judged(claim, rule, section, verdicts.combine(section.cells)))
    return Claims(judged, wording(ev, "common", "rules.common"))


def claims(ev: Evidence) -> Artefact:
    """claims.md: a summary of verdicts, then per claim the paper's sentence, the rule, the evidence, the verdict."""
    page = judge(ev)
    lines = [f"# The paper's claims on the {ev.profile} profile", ""]
    lines += [
        f"Built from `{ev.profile_results}/` alone (reports never train). Every number comes from a run named under "
        "it; the paper's sentences are quoted from experiments/report.yaml. A verdict is **reproduced**, **not "
        "reproduced** (with the reason) or **not tested** (with the runs that would test it, under Missing).",
        "",
        f"**Statistics.** {CONVENTION}",
        "",
        f"**Every rule.** {page.common}",
        "",
    ]
    rows = [[j.name, j.verdict.outcome, j.verdict.reason] for j in page.judged]
    lines += pipe_table(["claim", "verdict", "why"], [[Cell(x) for x in row] for row in rows])
    for j in page.judged:
        lines += ["", f"## {j.name}", "", f"**The paper.** {j.claim.paper}", "", f"**Rule.** {j.rule}"]
        lines += ["", "**Evidence.**", ""]
        for intro, header, table_rows in j.section.tables:
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
