"""Table 6: the pre-OPD reference evaluations (grid `table6`, kind eval): per (model, mode) its
role, Macro Avg@K (mean of the unrounded suite scores) and mean tokens (unweighted mean of the
suites' `mean_tokens`). Several seeds: mean ± sample std. The paper profile adds the published
values in a labelled reference column (experiments/report.yaml `paper_reference.table6`).
"""

from __future__ import annotations

from pathlib import Path

from gropd.report.context import ReportContext
from gropd.report.formats import Cell, Table, plain
from gropd.report.loading import GridRun, grid_runs, group_runs
from gropd.report.provenance import publish_table
from gropd.report.scores import finished_summaries, seed_stats, stats_cell, summary_macro
from gropd.report.settings import Table6Reference


def reference(refs: list[Table6Reference], model: str, mode: str) -> list[Cell]:
    """The paper's Macro and mean tokens for (model, mode), '—' where it published none."""
    for ref in refs:
        if (ref.model, ref.mode) == (model, mode):
            return plain([f"{ref.macro:.3f}", f"{ref.mean_tokens:,.1f}"])
    return plain(["—", "—"])


def measured(summaries: list[dict], suites: list[str], key: str, decimals: int) -> Cell:
    """Seed statistics of one per-run macro quantity, '—' when no run has it."""
    values = [v for s in summaries if (v := summary_macro(s, suites, key)) is not None]
    return stats_cell(seed_stats(values), decimals) if values else Cell("—")


def build_table6(ctx: ReportContext) -> tuple[Table, list[GridRun]]:
    """Table 6 from results/<profile>/table6__*/eval/summary.json."""
    runs = grid_runs(ctx, "table6")
    suites, models = list(ctx.section("suites")), ctx.section("models")
    settings, paper = ctx.settings.table6, ctx.profile == "paper"
    rows, missing = [], []
    for (model, mode), seeds in group_runs(runs, "model", "mode").items():
        summaries, lacking = finished_summaries(seeds, suites)
        missing += lacking
        record = models.get(model) or {}
        row = plain([str(record.get("name", model)), str(mode), str(record.get("role", "—"))])
        row += [
            measured(summaries, suites, "avg_at_k", settings.macro_decimals),
            measured(summaries, suites, "mean_tokens", settings.token_decimals),
        ]
        rows.append(row + (reference(ctx.settings.paper_reference.table6, model, mode) if paper else []))
    header = ["model", "mode", "role", "Macro Avg@K", "mean tokens"]
    if paper:
        header += ["paper (reference): Macro Avg@K", "paper (reference): mean tokens"]
    caption = (
        f"Macro: unweighted mean of the {len(suites)} unrounded suite Avg@K (%); mean tokens: unweighted "
        f"mean of the suites' mean response tokens; {ctx.profile} profile, grid table6"
        + (". Paper columns: the published values, for reference." if paper else ".")
    )
    table = Table(
        name="table6",
        title="Table 6: pre-OPD references",
        caption=caption,
        header=header,
        rows=rows,
        missing=missing,
        label_columns=3,
    )
    return table, runs


def table6(ctx: ReportContext) -> list[Path]:
    """Write table6.{md,tex,csv} and its provenance sidecar."""
    table, runs = build_table6(ctx)
    return publish_table(ctx, table, runs, ["grids/table6.yaml", "models.yaml", "suites.yaml", "report.yaml"])
