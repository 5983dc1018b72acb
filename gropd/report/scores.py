"""Scores read from an evaluation summary (eval/summary.json) against the profile's suite list, and one
quantity aggregated over a grid's seeds: mean ± sample standard deviation (ddof = 1; one seed: spread 0).

Macro = unweighted mean of the suites' UNROUNDED Avg@K (docs/DESIGN.md §2); rounding happens only
when a cell is displayed.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from gropd.report.formats import Cell
from gropd.report.loading import GridRun, missing_line


def suite_field(summary: dict[str, Any], suite: str, key: str) -> float | None:
    """summary["suites"][suite][key] as a float, None when the suite or the key is absent or null."""
    value = ((summary.get("suites") or {}).get(suite) or {}).get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def missing_suites(summary: dict[str, Any], suites: list[str]) -> list[str]:
    """The suites of `suites` that have no avg_at_k in the summary."""
    return [suite for suite in suites if suite_field(summary, suite, "avg_at_k") is None]


def summary_macro(summary: dict[str, Any], suites: list[str], key: str = "avg_at_k") -> float | None:
    """Unweighted mean of `key` over `suites` (unrounded); None unless every suite has it."""
    values = [suite_field(summary, suite, key) for suite in suites]
    if not values or any(value is None for value in values):
        return None
    return statistics.fmean(values)


def finished_summaries(runs: list[GridRun], suites: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """The eval summaries of the finished seeds, and one line per seed (or suite) that lacks one."""
    summaries, missing = [], []
    for run in runs:
        summary = run.summary() if run.state == "finished" else None
        if run.state != "finished":
            missing.append(missing_line(run, run.describe()))
        elif summary is None:
            missing.append(missing_line(run, "no eval/summary.json"))
        else:
            summaries.append(summary)
            missing += [
                missing_line(run, f"no {suite} score in eval/summary.json") for suite in missing_suites(summary, suites)
            ]
    return summaries, missing


@dataclass(frozen=True)
class SeedStats:
    """mean and spread (sample std, 0 for one seed) of `n` per-seed values."""

    mean: float
    spread: float
    n: int


def seed_stats(values: list[float]) -> SeedStats:
    """SeedStats of a non-empty list of per-seed values (unrounded)."""
    if not values:
        raise ValueError("seed_stats needs at least one value")
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return SeedStats(mean=statistics.fmean(values), spread=spread, n=len(values))


def stats_cell(stats: SeedStats, decimals: int, bold: bool = False, mark: str = "") -> Cell:
    """'12.34' or '12.34 ± 0.56' (thousands separated); the CSV keeps full precision."""
    text = f"{stats.mean:,.{decimals}f}"
    raw = repr(stats.mean)
    if stats.n > 1:
        text += f" ± {stats.spread:,.{decimals}f}"
        raw += f" ± {stats.spread!r} (n={stats.n})"
    return Cell(text + mark, bold=bold, raw=raw + mark)
