"""Table 1: macro and per-suite Avg@K of every pairing x {GR-OPD, vanilla OPD} (grid `table1`).

Cells: Avg@K in percent; Macro = mean of the six UNROUNDED suite scores of a run. With several
seeds a cell is mean ± sample std over the seeds that finished. Per pairing and column the higher
mean (compared unrounded) is bold when it beats the runner-up by more than the larger of the two
spreads; otherwise both carry ‡ and neither is bold. A finished run beats a collapsed one. A row
with any collapsed seed shows "Collapse" in every cell.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gropd.report.context import ReportContext
from gropd.report.formats import Cell, Table
from gropd.report.labels import method_label, pairing_title, run_params
from gropd.report.loading import GridRun, grid_runs, group_runs, missing_line
from gropd.report.provenance import publish_table
from gropd.report.scores import SeedStats, finished_summaries, seed_stats, stats_cell, suite_field, summary_macro

TIE = "‡"
COLLAPSE = "Collapse"


@dataclass(frozen=True)
class Row:
    """One table row: its labels, whether it collapsed, and per column the seed statistics (None: missing)."""

    pairing: str
    label: str
    collapsed: bool
    stats: list[SeedStats | None]


def row_stats(summaries: list[dict[str, Any]], suites: list[str]) -> list[SeedStats | None]:
    """Per suite, then Macro: seed statistics over the summaries that have the value."""
    columns = [[suite_field(s, suite, "avg_at_k") for s in summaries] for suite in suites]
    columns.append([summary_macro(s, suites) for s in summaries])
    return [
        seed_stats([v for v in values if v is not None]) if any(v is not None for v in values) else None
        for values in columns
    ]


def build_rows(ctx: ReportContext, runs: list[GridRun], suites: list[str]) -> tuple[list[Row], list[str], list[str]]:
    """Rows in grid order, the missing lines, and the collapse notes."""
    defaults, pairings = ctx.train_defaults(), ctx.manifest("pairings")
    rows, missing, collapses = [], [], []
    for (pairing, _method), seeds in group_runs(runs, "pairing", "method").items():
        label = method_label(run_params(seeds[0], defaults))
        collapsed = [run for run in seeds if run.state == "collapsed"]
        collapses += [missing_line(run, run.describe()) for run in collapsed]
        summaries, lacking = finished_summaries([run for run in seeds if run.state != "collapsed"], suites)
        missing += lacking
        stats = [None] * (len(suites) + 1) if collapsed else row_stats(summaries, suites)
        rows.append(Row(pairing=pairing_title(pairings, pairing), label=label, collapsed=bool(collapsed), stats=stats))
    return rows, missing, collapses


def column_marks(rows: list[Row], column: int) -> tuple[set[int], set[int]]:
    """(bold rows, tied rows) of one column among the rows of one pairing (indices into `rows`)."""
    scored = sorted(
        ((row.stats[column], i) for i, row in enumerate(rows) if not row.collapsed and row.stats[column] is not None),
        key=lambda pair: -pair[0].mean,
    )
    if not scored:
        return set(), set()
    (best, ibest), others = scored[0], scored[1:]
    if not others:
        return ({ibest} if any(row.collapsed for row in rows) else set()), set()
    runner, irunner = others[0]
    if best.mean - runner.mean > max(best.spread, runner.spread):
        return {ibest}, set()
    return set(), {ibest, irunner}


def render_row(row: Row, bold: set[int], tied: set[int], decimals: int) -> list[Cell]:
    """Label cells, then per column 'Collapse', '—' (missing) or the formatted statistics."""
    cells = [Cell(row.pairing), Cell(row.label)]
    for column, stats in enumerate(row.stats):
        if row.collapsed:
            cells.append(Cell(COLLAPSE))
        elif stats is None:
            cells.append(Cell("—"))
        else:
            cells.append(stats_cell(stats, decimals, bold=column in bold, mark=TIE if column in tied else ""))
    return cells


def suite_header(ctx: ReportContext, key: str, record: dict[str, Any], runs: list[GridRun]) -> str:
    """'AIME 2024 Avg@32'; the paper profile adds '(used/paper)' question counts when they differ."""
    title = f"{record.get('title', key)}"
    paper_count = record.get("paper_questions")
    if ctx.profile == "paper" and paper_count is not None:
        used = sorted(
            {
                int(q)
                for run in runs
                if run.state == "finished"
                and (s := run.summary())
                and (q := suite_field(s, key, "questions")) is not None
            }
        )
        if used and used != [int(paper_count)]:
            title += f" ({', '.join(map(str, used))}/{paper_count})"
    return f"{title} Avg@{record.get('k')}"


def build_table1(ctx: ReportContext) -> tuple[Table, list[GridRun]]:
    """Table 1 from results/<profile>/table1__*/ and the profile's suites."""
    runs = grid_runs(ctx, "table1")
    suites = ctx.section("suites")
    rows, missing, collapses = build_rows(ctx, runs, list(suites))
    decimals = ctx.settings.table1.decimals
    cells: list[list[Cell]] = []
    for pairing in dict.fromkeys(row.pairing for row in rows):
        block = [row for row in rows if row.pairing == pairing]
        marks = [column_marks(block, column) for column in range(len(suites) + 1)]
        for i, row in enumerate(block):
            bold = {c for c, (b, _) in enumerate(marks) if i in b}
            tied = {c for c, (_, t) in enumerate(marks) if i in t}
            cells.append(render_row(row, bold, tied, decimals))
    several = any(stats is not None and stats.n > 1 for row in rows for stats in row.stats)
    caption = (
        f"Avg@K (%) per suite and Macro (unweighted mean of the {len(suites)} unrounded suite scores), "
        f"{decimals} decimals; {ctx.profile} profile, grid table1"
        + ("; mean ± sample std over seeds." if several else ".")
    )
    notes = [
        f"Bold: the higher entry of a pairing per column (unrounded), when it beats the other by more than "
        f"the larger seed spread. {TIE}: difference within that spread, neither bold. "
        f"{COLLAPSE}: the run's collapse rule fired."
    ] + collapses
    header = ["Pairing", "Method"] + [suite_header(ctx, k, r, runs) for k, r in suites.items()] + ["Macro"]
    table = Table(
        name="table1",
        title="Table 1: GR-OPD vs vanilla OPD, Avg@K",
        caption=caption,
        header=header,
        rows=cells,
        notes=notes,
        missing=missing,
        label_columns=2,
    )
    return table, runs


def table1(ctx: ReportContext) -> list[Path]:
    """Write table1.{md,tex,csv} and its provenance sidecar."""
    table, runs = build_table1(ctx)
    manifests = ["grids/table1.yaml", "suites.yaml", "pairings.yaml", "train.yaml"]
    return publish_table(ctx, table, runs, manifests, missing=table.missing + table.notes[1:])
