"""The claims page: each claim of experiments/report.yaml (`claims`) judged by its rule (gropd/report/rules.py:
RULE_FUNCTIONS), whose numbers, tests, seeds and multiplicity family experiments/registration.yaml holds and whose
wording report.yaml does (`rules`). A claim using an existing rule is a YAML entry in each. The registered seeds
decide; the page judges all seeds and the registration as first written too, and shows each apart where it reads
otherwise ("set after the runs" where a rule in force was written after the first run a claim reads began). The page
adjusts the registered family, fixed by the registration, by Holm and says how many each family holds; claims.json
gives the per-claim summary.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from gropd.config import ConfigError
from gropd.report import verdicts
from gropd.report.evidence import Evidence, Run, began_at
from gropd.report.families import ALPHA, REGISTERED, Families, expand, pvalue
from gropd.report.formats import Cell, missing_block, pipe_table
from gropd.report.long_horizon import LongPilot, World4, difference, judge_long, long_lines, mean_response_tokens
from gropd.report.publish import Artefact
from gropd.report.registered import first_started, seeds_of, set_after
from gropd.report.rules import RULE_FUNCTIONS, Section, wording
from gropd.report.settings import ClaimSettings
from gropd.report.stats import CONVENTION, UNPAIRED
from gropd.report.verdicts import REPRODUCED, Verdict

__all__ = ["RULE_FUNCTIONS", "Claims", "Judged", "Registered", "claims", "judge"]


SUMMARY = ["claim", "verdict", "why"]  # the summary table's columns, then the verdict after Holm
Table = tuple[str, list[str], list[list[str]]]  # (intro, header, rows) as the page shows them


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
    long: list[tuple[LongPilot, dict[str, World4]]] = field(default_factory=list)  # world 5, this page beside it


def multiplicity(ev: Evidence, families: Families, called: int, standing: int, runs: list[Run]) -> str:
    """The page's paragraph on its comparisons: the two families, how many each holds, Holm's rule and when the
    family was registered (against the first start of the runs the page reads)."""
    rule, first = ev.registration.family_rule(), ev.registration.family_rule(first=True)
    began = began_at(runs)
    when = "" if began is None else f": {'set after' if rule.date > began else 'before'} the runs"
    return (
        f"Every difference on this page is in one of two families. **Registered** ({families.m} members, a number "
        f"experiments/registration.yaml fixes, written down {rule.stamp}{when}; as first registered, {first.stamp}, "
        "no adjustment: the verdict column): per claim the cells its registration names, each by the difference its "
        "verdict reads, or, where a collapse decides the cell or it is not tested, by its rule's outcome (resolved: p "
        "0; not: p 1); a difference two claims read counts once (a − b and b − a alike). Their p-values (two-sided, of "
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
    text = multiplicity(
        ev, families, called, standing, [run for _, _, section in sections for run in section.runs]
    ) + "".join(f" {line}" for line in unmatched)
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


def world4_of(ev: Evidence, j: Judged, title: str) -> World4:
    """What the page found for claim j on this profile, for World 5's side-by-side table: verdict, n, the mean
    response tokens of its runs, and claim 1's paired difference on the pilot's pairing (titled `title`)."""
    tokens = mean_response_tokens(j.section.runs, list(ev.suites))
    return World4(j.verdict.outcome, seeds_of(j.section), tokens, difference(j.section, title))


def world5(ev: Evidence, page: Claims) -> list[tuple[LongPilot, dict[str, World4]]]:
    """World 5's registered grids judged (gropd/report/long_horizon.py; their runs under the project root experiments/
    sits in), each with what this page found per claim, for the two side by side ([]: experiments/ registers none)."""
    pilots = judge_long(ev.experiments_dir, ev.experiments_dir.parent)
    return [(p, {j.claim.key: world4_of(ev, j, p.pairing_title) for j in page.judged}) for p in pilots]


def claims(ev: Evidence) -> Artefact:
    """claims.md: a summary of verdicts, the comparisons' families, then per claim the paper's sentence, the rule,
    the registration, the evidence, the verdict; claims.json: the summary (`summary`). The registered seeds decide
    (experiments/registration.yaml); all seeds and the rules as first registered are judged too, shown apart."""
    page = judge(ev.variant(registered_seeds=True))
    every = {j.claim.key: j for j in judge(ev).judged}
    first = {j.claim.key: j for j in judge(ev.variant(registered_seeds=True, first=True)).judged}
    shown = {j.claim.key: registration_lines(ev, j, every[j.claim.key], first[j.claim.key]) for j in page.judged}
    page = replace(page, registered=shown, long=world5(ev, page))
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
    if long := page.long:
        lines += long_lines(long) + [""]
    runs = [run for j in page.judged for run in j.section.runs] + [r for j in every.values() for r in j.section.runs]
    runs = list({id(run): run for run in runs}.values())
    missing = list(dict.fromkeys(line for j in page.judged for line in j.section.missing))
    grids = tuple(dict.fromkeys(g for c in ev.report.claims for g in c.grids))
    manifests = [f"grids/{g}.yaml" for g in grids]
    manifests += ["pairings.yaml", "suites.yaml", "train.yaml", "report.yaml", "registration.yaml"]
    manifests += [pilot.file for pilot, _ in long]
    files = {
        "claims.md": "\n".join(lines) + "\n",
        "claims.json": json.dumps(summary(page), indent=2, ensure_ascii=False) + "\n",
    }
    return Artefact("claims", files, runs, missing, manifests, grids, content=page)
