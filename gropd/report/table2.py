"""Table 2: the pressure proxies of GR-OPD per (pairing, λ, γ) (grid `lambda`, GR-OPD runs).

Per run: `pressure_normalised` (P = mean over prompt groups of |μ_g| / (σ_g + ε)) and
`pressure_retained` (λ·P), each averaged over every rollout batch the run logged (null
entries skipped; a collapsed run up to its collapse). Several seeds: mean ± sample std.
The paper profile adds the published values in a labelled reference column.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from gropd.report.context import ReportContext
from gropd.report.formats import Cell, Table, plain
from gropd.report.labels import num, pairing_title, run_params
from gropd.report.loading import GridRun, grid_runs, missing_line, series
from gropd.report.provenance import publish_table
from gropd.report.scores import seed_stats, stats_cell
from gropd.report.settings import Table2Reference

METRICS = ("pressure_normalised", "pressure_retained")


def run_pressure(run: GridRun) -> tuple[dict[str, float], tuple[int, int]] | str:
    """Per metric the mean over the run's logged steps, and the (first, last) step; or why there is none."""
    if run.state in ("not run", "running"):
        return run.describe()
    rows = run.metrics()
    means, steps = {}, []
    for key in METRICS:
        xs, ys = series(rows, key)
        if not ys:
            return f"no {key} in metrics.jsonl"
        means[key] = statistics.fmean(ys)
        steps += xs
    return means, (int(min(steps)), int(max(steps)))


def reference(refs: list[Table2Reference], pairing: str, lam: float, gamma: float) -> Table2Reference | None:
    """The paper's row for (pairing, λ, γ), if it published one."""
    for ref in refs:
        if ref.pairing == pairing and math.isclose(ref.lam, lam) and math.isclose(ref.gamma, gamma):
            return ref
    return None


def build_table2(ctx: ReportContext) -> tuple[Table, list[GridRun]]:
    """Table 2 from results/<profile>/lambda__*__gropd*/metrics.jsonl."""
    defaults, pairings = ctx.train_defaults(), ctx.manifest("pairings")
    runs = [run for run in grid_runs(ctx, "lambda") if run.field("method") == "gropd"]
    cells: dict[tuple[str, float, float], list[tuple[dict[str, float], tuple[int, int]]]] = {}
    missing, notes = [], []
    for run in runs:
        params = run_params(run, defaults)
        result = run_pressure(run)
        bucket = cells.setdefault((str(run.field("pairing")), params.lam, params.gamma), [])
        if isinstance(result, str):
            missing.append(missing_line(run, result))
            continue
        bucket.append(result)
        if run.state == "collapsed":
            notes.append(missing_line(run, f"{run.describe()}; averaged over steps {result[1][0]}–{result[1][1]}"))
    decimals, paper = ctx.settings.table2.decimals, ctx.profile == "paper"
    rows = []
    for (pairing, lam, gamma), results in cells.items():
        row = plain([pairing_title(pairings, pairing), num(lam), num(gamma)])
        if results:
            first, last = min(s[0] for _, s in results), max(s[1] for _, s in results)
            row += [Cell(f"{first}–{last}")] + [
                stats_cell(seed_stats([m[key] for m, _ in results]), decimals) for key in METRICS
            ]
        else:
            row += plain(["—", "—", "—"])
        if paper:
            ref = reference(ctx.settings.paper_reference.table2, pairing, lam, gamma)
            row += plain([f"{ref.normalised:.2f}", f"{ref.retained:.2f}"] if ref else ["—", "—"])
        rows.append(row)
    header = ["Pairing", "λ", "γ", "steps", "normalised pressure", "retained pressure"]
    if paper:
        header += ["paper (reference): normalised", "paper (reference): retained"]
    caption = (
        f"Pressure proxies of GR-OPD, each the mean over the run's rollout batches in the steps column "
        "(first–last step logged); several seeds: mean ± sample std; "
        f"{decimals} decimals; {ctx.profile} profile, grid lambda"
        + (". Paper columns: the published values, for reference." if paper else ".")
    )
    table = Table(
        name="table2",
        title="Table 2: normalised and retained teacher pressure",
        caption=caption,
        header=header,
        rows=rows,
        notes=notes,
        missing=missing,
        label_columns=3,
    )
    return table, runs


def table2(ctx: ReportContext) -> list[Path]:
    """Write table2.{md,tex,csv} and its provenance sidecar."""
    table, runs = build_table2(ctx)
    manifests = ["grids/lambda.yaml", "pairings.yaml", "train.yaml", "report.yaml"]
    return publish_table(ctx, table, runs, manifests, missing=table.missing + table.notes)
