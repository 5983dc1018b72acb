"""World 5's grids read by their registered rules (experiments/registration_long*.yaml, one file a pairing: the pilot
on B4→B1.7, registration_long.yaml, then the cross-pattern I4think→B1.7; docs/DESIGN.md, "World 5"): the claims each
file's `rules` name (of 1, 3, 4, 5) on the long-horizon twin, by the claims page's own rules (gropd/report/rules.py)
with the one change the files register (the instability rule's length arm: `halfway`), set beside world 4's verdicts.

    judge_long(experiments_dir, root)   -> [LongPilot]: per file, per claim its Section and verdict, mean length, n
    long_lines(pilots)                  the claims page's section: per pairing world 4 and world 5 side by side, then
                                        each claim's evidence

A grid's runs are read from the results directory its registration names (`results`, under the project root `root`),
whatever results directory the rest of the page reads: world 5's runs are committed once, in results/long/.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from gropd.config.errors import ConfigError
from gropd.config.layering import read_yaml
from gropd.config.schema import Strict
from gropd.report.evidence import Evidence, Run, began_at
from gropd.report.families import DESCRIBED, Comparison, Families, expand
from gropd.report.formats import Cell, missing_block, pipe_table
from gropd.report.registered import seeds_of, set_after
from gropd.report.registration import Dated
from gropd.report.rules import RULE_FUNCTIONS, Row, Section, chosen, macros, wording
from gropd.report.settings import ClaimSettings, ReportSettings, load_settings
from gropd.report.stats import paired
from gropd.report.verdicts import Verdict, combine, comparison

FILE = "registration_long.yaml"  # the pilot's; every registration_long*.yaml is one (FILES)
FILES = "registration_long*.yaml"
CLAIMS = {  # claim -> (the claims page's rule, the registration's settings it compares: first, second)
    "1": ("beats", ("gropd", "opd")),
    "3": ("unstable_vs_stable", ("opd", "gropd")),
    "4": ("large_lambda_unstable", ()),
    "5": ("gamma_one_unstable", ()),
}
CONTROLS = {"1": [("fullkl", "opd"), ("fullkl", "gropd")]}  # described beside a claim, judged by none (`rules`)


class LongRegistration(Strict):
    """experiments/registration_long*.yaml: a grid's pairing, seeds, settings and rules (their wording: `claim_N` for
    each claim it judges, N in CLAIMS), and `registered`: the commit that wrote them and its date, which every run's
    start must follow (recorded by the commit after that one: absent until then, and its runs then read as undated)."""

    issue: int
    profile: str
    grid: str
    pairing: str
    seeds: list[int] = Field(min_length=1)
    results: str
    registered: Dated | None = None
    settings: dict[str, dict[str, Any]]
    order: str
    numbers: str
    unstable: str
    rules: dict[str, str]
    second_pairing: str = ""

    def judged(self) -> list[str]:
        """The claims its rules judge, in CLAIMS' order."""
        return [key for key in CLAIMS if f"claim_{key}" in self.rules]


def load_long_registration(path: Path) -> LongRegistration:
    """One registration file; a bad key raises ConfigError naming the file and key: a rule `claim_N` for a claim
    without a rule function here, none at all, or one comparing a setting not in `settings`."""
    try:
        reg = LongRegistration.model_validate(read_yaml(path))
    except ValidationError as err:
        first = err.errors()[0]
        raise ConfigError(str(path), ".".join(map(str, first["loc"])), first["msg"]) from None
    for name in reg.rules:
        if name.startswith("claim_") and name.removeprefix("claim_") not in CLAIMS:
            raise ConfigError(str(path), f"rules.{name}", f"a claim World 5 reads: one of {', '.join(CLAIMS)}")
    if not reg.judged():
        raise ConfigError(str(path), "rules", f"at least one claim_N, N one of {', '.join(CLAIMS)}")
    for key in reg.judged():
        if any(name not in reg.settings for name in CLAIMS[key][1]):
            raise ConfigError(str(path), f"rules.claim_{key}", "it compares a setting not in `settings`")
    return reg


def registration_files(experiments_dir: Path) -> list[Path]:
    """experiments/registration_long*.yaml, the pilot's first (name order: 'registration_long.yaml' sorts first)."""
    return sorted(experiments_dir.glob(FILES))


@dataclass(frozen=True)
class LongClaim:
    key: str
    title: str
    section: Section
    verdict: Verdict
    rules_before_runs: str  # 'yes: …' or 'no: …', the registration's date against the first run it reads
    applied: str  # the claims page's rule that decides (report.yaml `rules`; the instability rule: the registration's)


@dataclass(frozen=True)
class LongPilot:
    file: str  # the registration's file name under experiments/
    registration: LongRegistration
    results: Path
    pairing_title: str
    claims: list[LongClaim]
    mean_tokens: float | None  # the pilot's finished runs' mean response length in evaluation (None: none finished)


def registered_before(file: str, reg: LongRegistration, ev: Evidence, key: str, rule: str, runs: list[Run]) -> str:
    """Whether the rules a claim reads were all written before its first run began: the registration file's commit
    and the registration.yaml entries (thresholds, test, reading) the rule reads."""
    began = began_at(runs)
    if began is None:
        return "no run started yet"
    if reg.registered is None:
        return f"undated: {file} records no `registered` commit (first run {began:%Y-%m-%d %H:%M:%S} UTC)"
    late = [f"{file} ({reg.registered.stamp})"] if reg.registered.date > began else []
    late += set_after(ev, key, rule, runs)
    when = f"{reg.registered.commit[:7]} at {reg.registered.date:%Y-%m-%d %H:%M:%S} UTC, first run {began:%H:%M:%S} UTC"
    return f"no: set after the runs: {', '.join(late)} ({when})" if late else f"yes ({when})"


def mean_response_tokens(runs: list[Run], suites: list[str]) -> float | None:
    """The mean of the finished runs' mean evaluation response lengths (eval/summary.json)."""
    found = [f.mean_tokens for run in runs if not isinstance(f := run.final(suites), str) and f.mean_tokens]
    return statistics.fmean(found) if found else None


def controls(
    ev: Evidence, reg: LongRegistration, claim: ClaimSettings, pairs: list[tuple[str, str]]
) -> tuple[str, list[str], list[Row]]:
    """The registration's described comparisons beside a claim (the exact full-vocabulary KL against the methods):
    each pair's final Macro, paired by seed (rules.beats_rule's reading, judged by no rule)."""
    rows = []
    for a, b in pairs:
        selectors = [reg.settings[a], reg.settings[b]]
        for first, second in chosen(ev, claim.model_copy(update={"compare": selectors})):
            (x, _, _), (y, _, _) = macros(ev, first), macros(ev, second)
            interval = paired(x, y)
            identity = (
                "Macro",
                f"{ev.title(first.pairing)}: {first.label}",
                f"{ev.title(second.pairing)}: {second.label}",
            )
            call = "—" if interval is None else comparison(interval, (first.label, second.label))
            rows.append([f"{first.label} − {second.label}", Comparison(identity, interval, DESCRIBED), call])
    intro = "The control, described (judged by no claim): final Macro, paired by seed over the seeds both finished."
    return intro, ["settings", "paired difference [95% t]", "comparison"], rows


def judge_long(experiments_dir: Path, root: Path) -> list[LongPilot]:
    """World 5's claims judged, a registration file at a time, from the results directory each names, under `root`
    ([]: no registration in experiments_dir)."""
    files = registration_files(experiments_dir)
    if not files:
        return []
    settings = load_settings(experiments_dir / "report.yaml")
    return [judge_registration(path, root, settings) for path in files]


def judge_registration(path: Path, root: Path, settings: ReportSettings) -> LongPilot:
    """The claims one registration file judges (by the report settings of the experiments/ it sits in), from the
    results directory it names, under `root`."""
    reg, experiments_dir = load_long_registration(path), path.parent
    ev = Evidence(reg.profile, root / reg.results, experiments_dir, settings, halfway=True)
    titles = {claim.key: claim.title for claim in settings.claims}
    judged = []
    for key in reg.judged():
        rule, names = CLAIMS[key]
        compare = [reg.settings[name] for name in names] or None  # (the grid runs the registered pairing alone)
        claim = ClaimSettings(
            key=key,
            title=titles.get(key, key),
            paper="",
            rule=rule,
            grids=[reg.grid],
            **({"compare": compare} if compare else {}),
        )
        section = RULE_FUNCTIONS[rule](ev, claim)
        if key in CONTROLS:
            section = replace(section, tables=[*section.tables, controls(ev, reg, claim, CONTROLS[key])])
        cells = list(section.cells.values())
        verdict = cells[0] if len(cells) == 1 else combine(section.cells)  # (one pairing: its cell says why)
        before = registered_before(path.name, reg, ev, key, rule, section.runs)
        applied = wording(ev, rule, f"rules.claim_{key}", claim.compare, unstable="").strip()
        judged.append(LongClaim(key, claim.title, section, verdict, before, applied))
    runs = {run.run_id: run for c in judged for run in c.section.runs}.values()
    tokens = mean_response_tokens(list(runs), list(ev.suites))
    return LongPilot(path.name, reg, ev.profile_results, ev.title(reg.pairing), judged, tokens)


def pilot_family(pilot: LongPilot) -> Families:
    """The pilot's comparisons by family: Holm over the registration's one judged difference, claim 1's GR-OPD −
    OPD on its pairing (whether or not enough seeds have run to read it: the family does not move with outcomes)."""
    comparisons = [c for claim in pilot.claims for c in claim.section.comparisons]
    judged = [c.identity for claim in pilot.claims if claim.key == "1" for c in claim.section.comparisons]
    return Families.of(comparisons, [(identity, None) for identity in judged[:1]])


def difference(section: Section, title: str) -> str:
    """The paired Macro difference a claim-1 section shows for the pairing titled `title` ('—': none)."""
    found = [c for c in section.comparisons if c.identity[0] == "Macro" and c.identity[1].startswith(f"{title}:")]
    return found[0].text() if found else "—"


@dataclass(frozen=True)
class World4:
    """What the claims page found for one claim on world 4: its verdict, n and its runs' mean response tokens, and
    (claim 1) the paired GR-OPD − OPD difference on the pilot's pairing."""

    verdict: str
    n: str
    tokens: float | None
    difference: str = "—"


def both_worlds(pilot: LongPilot, world4: dict[str, World4]) -> tuple[list[str], list[list[Cell]]]:
    """The table of both worlds (header, rows): per claim its verdict on world 4 and on world 5, each with n and the
    mean response tokens, what world 5 finds, and whether its rules were registered before the runs."""
    long_len = "—" if pilot.mean_tokens is None else f"{pilot.mean_tokens:.0f}"
    rows = []
    for c in pilot.claims:
        w4 = world4.get(c.key, World4("—", "—", None))
        short = "—" if w4.tokens is None else f"{w4.tokens:.0f}"
        rows.append(
            Cell.texts(
                c.key,
                c.title,
                f"{w4.verdict} (n = {w4.n}; {short} tokens)",
                f"{c.verdict.outcome} (n = {seeds_of(c.section)}; {long_len} tokens)",
                c.verdict.reason,
                c.rules_before_runs,
            )
        )
    header = ["claim", "statement", "world 4", "world 5 (long horizon)", "world 5 finds", "rules before the runs"]
    return header, rows


def horizon_question(pilot: LongPilot, world4: dict[str, World4]) -> str:
    """Claim 1's paired difference in both worlds: the registration's long-horizon question, read, not judged ('':
    the registration judges no claim 1)."""
    one = next((c for c in pilot.claims if c.key == "1"), None)
    if one is None:
        return ""
    title, w4 = pilot.pairing_title, world4.get("1", World4("—", "—", None))
    return (
        f"**Does the advantage grow with the horizon?** (read, not judged: `rules.long_horizon_question`) GR-OPD − "
        f"vanilla OPD in Macro on {title}, paired by seed [95% t]: world 4 {w4.difference}; world 5 "
        f"{difference(one.section, title)}."
    )


def pilot_heading(pilot: LongPilot) -> str:
    """'B4→B1.7 (grid `long_pilot`, registered in experiments/registration_long.yaml, 93b3c97, … UTC)'."""
    reg = pilot.registration
    when = reg.registered.stamp if reg.registered else "its `registered` commit not yet recorded"
    return f"{pilot.pairing_title} (grid `{reg.grid}`, registered in experiments/{pilot.file}, {when})"


def side_by_side(pilot: LongPilot, world4: dict[str, World4]) -> list[str]:
    """both_worlds as a Markdown table, then horizon_question."""
    question = horizon_question(pilot, world4)
    return [*pipe_table(*both_worlds(pilot, world4)), *(["", question] if question else [])]


def long_lines(pilots: list[tuple[LongPilot, dict[str, World4]]]) -> list[str]:
    """The claims page's World 5 section: per registered pairing, per claim the verdict at ~50 tokens beside the long
    horizon's, claim 1's paired difference in both worlds (the registration's long-horizon question, read, not
    judged), then each claim's rule, evidence and verdict."""
    lines = [
        '<a id="world-5"></a>',
        "",
        "## World 5: the long horizon",
        "",
        "The same claims on a second tiny world whose responses are hundreds of tokens, one registered grid a pairing. "
        "The rules are the claims page's, registered for this world in experiments/registration_long*.yaml before "
        "each grid's runs, with one change: a run's length arm of instability is its last 10%'s mean grown at least "
        "halfway from its first 10%'s mean to the cap. A setting's missing seeds are named under Missing; a verdict "
        "is read at the seeds every setting of its rule has.",
    ]
    for pilot, world4 in pilots:
        lines += ["", *pairing_lines(pilot, world4)]
    return lines


def pairing_lines(pilot: LongPilot, world4: dict[str, World4]) -> list[str]:
    """One registration's part of the World 5 section (anchor world-5-<grid>)."""
    reg = pilot.registration
    lines = [
        f'<a id="world-5-{reg.grid}"></a>',
        "",
        f"### {pilot_heading(pilot)}",
        "",
        f"Profile `{reg.profile}`, registered seeds {', '.join(map(str, reg.seeds))}; runs read from "
        f"`{pilot.results}/`.",
        "",
    ]
    lines += side_by_side(pilot, world4)
    families = pilot_family(pilot)
    for c in pilot.claims:
        rule = reg.rules[f"claim_{c.key}"]
        lines += ["", f"#### World 5, {pilot.pairing_title}, claim {c.key}: {c.title}", ""]
        lines += [f"**Rule (registered).** {rule}"]
        function = CLAIMS[c.key][0]
        lines += ["", f"**Rule applied** (the claims page's `{function}`, instability as registered): {c.applied}"]
        lines += ["", "**Evidence.**", ""]
        for intro, header, table_rows in c.section.tables:
            header, table_rows = expand(header, table_rows, families)
            lines += [intro, ""] + pipe_table(header, [Cell.texts(*row) for row in table_rows]) + [""]
        lines += [f"- {name}: {v.outcome} — {v.reason}" for name, v in c.section.cells.items()]
        lines += ["", f"**Verdict: {c.verdict.outcome}** — {c.verdict.reason}."]
        lines += ["", *missing_block(c.section.missing)] if c.section.missing else []
    return lines
