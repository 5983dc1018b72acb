"""What every section of the claims page shares: the Section record, the seeds of one setting, the
runs a not-tested verdict lacks, and number formatting.

A *setting* is one (pairing, credit rule) of a grid: its runs differ only by seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gropd.config.grids import expand_grid, load_grid
from gropd.report.context import ReportContext
from gropd.report.labels import RunParams, method_label, pairing_title, run_params
from gropd.report.loading import GridRun, missing_line
from gropd.report.scores import seed_stats, stats_cell
from gropd.report.verdicts import NOT_TESTED, PREFERRED_SEEDS, Verdict

# The target that runs a grid's seeds 0..2 (reports never train: the page only names it).
GRID_TARGETS = {
    "table1": "./reproduce.sh table1 --seeds 3",
    "lambda": "./reproduce.sh table2 --seeds 3",
    "gamma": "./reproduce.sh fig4 --seeds 3",
    "table6": "./reproduce.sh table6",
}


@dataclass(frozen=True)
class Section:
    """One claim on the page: the paper's sentence, the rule, the evidence lines (Markdown), the verdict,
    the runs it read (for provenance) and the lines naming what was missing."""

    key: str
    title: str
    paper: str
    rule: str
    evidence: list[str]
    verdict: Verdict
    runs: list[GridRun] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Setting:
    """The seeds of one (pairing, credit rule) of one grid."""

    grid: str
    pairing: str
    params: RunParams
    runs: list[GridRun]

    def label(self) -> str:
        return method_label(self.params)


def settings_of(runs: list[GridRun], grid: str, defaults: dict[str, Any]) -> list[Setting]:
    """Runs grouped by (pairing, method, λ, γ) with the profile's defaults filled in, in grid order."""
    groups: dict[tuple[str, RunParams], list[GridRun]] = {}
    for run in runs:
        groups.setdefault((str(run.field("pairing")), run_params(run, defaults)), []).append(run)
    return [Setting(grid, pairing, params, members) for (pairing, params), members in groups.items()]


def seed_run_ids(ctx: ReportContext, setting: Setting, seeds: int = PREFERRED_SEEDS) -> list[str]:
    """The run ids of seeds 0..seeds-1 of this setting, as the grid expands them (seed 0 first)."""
    own = {k: v for k, v in setting.runs[0].values.items() if k not in ("seed", "run_id")}
    entries = expand_grid(load_grid(setting.grid, ctx.experiments_dir), list(range(seeds)))
    return [e.run_id for e in entries if {k: v for k, v in e.values.items() if k not in ("seed", "run_id")} == own]


def lacking(ctx: ReportContext, settings: list[Setting], usable: set[str]) -> list[str]:
    """Per setting, its seeds 0..PREFERRED_SEEDS-1 not usable yet: '`<seed-0 run id>` seeds 1, 2'
    (seed N > 0 is the run id with `__seed<N>` appended)."""
    texts = []
    for s in settings:
        ids = seed_run_ids(ctx, s)
        seeds = [str(seed) for seed, run_id in enumerate(ids) if run_id not in usable]
        if seeds:
            texts.append(f"`{ids[0]}` seed{'s' if len(seeds) > 1 else ''} {', '.join(seeds)}")
    return texts


def name_missing(verdict: Verdict, needs: dict[str, list[str]]) -> Verdict:
    """A not-tested verdict with the runs that would test it (grid -> run ids) and the targets that make them."""
    parts = [f"{'; '.join(ids)} (`{GRID_TARGETS[grid]}`)" for grid, ids in needs.items() if ids]
    if verdict.outcome != NOT_TESTED or not parts:
        return verdict
    return Verdict(NOT_TESTED, verdict.reason, "; ".join(parts))


def unusable_lines(runs: list[GridRun], usable: set[str]) -> list[str]:
    """One line per run that is not usable, with its state."""
    return [missing_line(run, run.describe()) for run in runs if run.run_id not in usable]


def stats_text(values: list[float], decimals: int) -> str:
    """'12.34 ± 0.56 (n=3)', '12.34 (n=1)' or '—'."""
    if not values:
        return "—"
    return f"{stats_cell(seed_stats(values), decimals).text} (n={len(values)})"


def signed(value: float | None, decimals: int = 2) -> str:
    return "—" if value is None else f"{value:+.{decimals}f}"


def fixed(value: float | None, decimals: int = 2) -> str:
    return "—" if value is None else f"{value:.{decimals}f}"


def title(ctx: ReportContext, pairing: str) -> str:
    return pairing_title(ctx.manifest("pairings"), pairing)


def matched(ctx: ReportContext, pairing: str) -> bool:
    """A matched pairing: teacher and student in the same mode (thinking pattern)."""
    record = ctx.manifest("pairings")[pairing]
    return record["teacher"]["mode"] == record["student"]["mode"]


def verdict_bullets(verdicts: dict[str, Verdict]) -> list[str]:
    """One bullet per judged cell: '- <cell>: <outcome> — <reason>'."""
    return [f"- {name}: {v.outcome} — {v.text}" for name, v in verdicts.items()]


def verdict_line(verdict: Verdict) -> str:
    return f"**Verdict: {verdict.outcome}** — {verdict.text}."


def run_list(ctx: ReportContext, settings: list[Setting]) -> list[str]:
    """'Runs:' then one bullet per setting listing its run ids with their states."""
    lines = ["", "Runs:"]
    for s in settings:
        ids = ", ".join(f"`{r.run_id}` ({r.state})" for r in s.runs)
        lines.append(f"- {title(ctx, s.pairing)}, {s.label()}: {ids}")
    return lines
