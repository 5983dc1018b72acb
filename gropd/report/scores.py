"""Scores read from an evaluation summary (eval/summary.json) against the profile's suite list.

Macro = unweighted mean of the suites' UNROUNDED Avg@K (docs/DESIGN.md §2); rounding happens only
when a cell is displayed.
"""

from __future__ import annotations

import statistics
from typing import Any

from gropd.report.loading import GridRun, missing_line


def suite_field(summary: dict[str, Any], suite: str, key: str) -> float | None:
    """summary["suites"][suite][key] as a float, None when the suite or the key is absent or null."""
    value = ((summary.get("suites") or {}).get(suite) or {}).get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def missing_suites(summary: dict[str, Any], suites: list[str]) -> list[str]:
    """The suites of `suites` that have no avg_at_k in the summary."""
    return [suite for suite in suites if suite_field(summary, suite, "avg_at_k") is None]


def macro(summary: dict[str, Any], suites: list[str], key: str = "avg_at_k") -> float | None:
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
