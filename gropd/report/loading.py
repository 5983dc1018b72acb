"""Reading results/: the runs a grid promises, their status, metrics and evaluation summary.

A run lives in `results/<profile>/<run_id>/` (layout in results/README.md) and its files are
read through RunDir. A run the grid promises but results/ lacks is "not run"; nothing here raises
on a missing or partial run (a torn last line of metrics.jsonl is dropped with a note on stderr),
but a broken file raises RunFileError naming it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gropd.config.grids import expand_grid, load_grid
from gropd.record.run_dir import RunDir
from gropd.report.context import ReportContext


@dataclass(frozen=True)
class GridRun:
    """One run of a grid: the values the grid gives it, and its status.json (None: not run)."""

    run_id: str
    values: dict[str, Any]
    path: Path
    status: dict[str, Any] | None

    @property
    def state(self) -> str:
        """'not run' | 'running' | 'trained' (evaluation pending) | 'finished' | 'collapsed'."""
        return "not run" if self.status is None else str(self.status.get("status"))

    def field(self, key: str, default: Any = None) -> Any:
        """A status.json field, else the grid's value (dotted keys `gropd.<key>` count), else `default`."""
        if self.status is not None and self.status.get(key) is not None:
            return self.status[key]
        for grid_key in (key, f"gropd.{key}"):
            if self.values.get(grid_key) is not None:
                return self.values[grid_key]
        return default

    def summary(self) -> dict[str, Any] | None:
        """eval/summary.json, or None when absent."""
        return RunDir(self.path).read_summary()

    def metrics(self) -> list[dict[str, Any]]:
        """metrics.jsonl rows (one per rollout batch), [] when absent; a torn last line is dropped."""
        return RunDir(self.path).read_metrics()

    def config(self) -> dict[str, Any]:
        """The resolved config.yaml, {} when absent."""
        run_dir = RunDir(self.path)
        return run_dir.read_config() if run_dir.config_path.exists() else {}

    def total_steps(self) -> int | None:
        """train.steps of the resolved config.yaml, None when unknown."""
        return (self.config().get("train") or {}).get("steps")

    def describe(self) -> str:
        """Why this run has no final result: 'not run', 'running, step 40 of 120', 'collapsed at step 7: …'."""
        if self.status is None:
            return "not run"
        if self.state == "trained":
            return "trained, evaluation not finished"
        if self.state == "running":
            total = self.total_steps()
            return f"running, step {self.status.get('step', 0)} of {total if total is not None else '?'}"
        if self.state == "collapsed":
            reason = self.status.get("reason")
            return f"collapsed at step {self.status.get('collapse_step')}" + (f": {reason}" if reason else "")
        return self.state


def grid_runs(ctx: ReportContext, grid: str) -> list[GridRun]:
    """Every run `experiments/grids/<grid>.yaml` expands to, in grid order, with what results/ holds;
    seeds beyond the grid's own (`--seeds N`) are included where results/ has a run of them."""
    spec = load_grid(grid, ctx.experiments_dir)
    own = set(spec.get("seeds", [0]))
    runs = []
    for entry in expand_grid(spec, sorted(own | extra_seeds(ctx.profile_results, grid))):
        path = ctx.profile_results / entry.run_id
        if entry.values["seed"] not in own and not path.is_dir():
            continue
        runs.append(GridRun(run_id=entry.run_id, values=entry.values, path=path, status=RunDir(path).read_status()))
    return runs


def extra_seeds(profile_results: Path, grid: str) -> set[int]:
    """The N of every `<grid>__…__seed<N>` run folder under results/<profile>/."""
    seeds = set()
    for path in profile_results.glob(f"{grid}__*__seed*"):
        tail = path.name.rsplit("__seed", 1)[-1]
        if path.is_dir() and tail.isdigit():
            seeds.add(int(tail))
    return seeds


def series(rows: list[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    """(steps, values) of one metric; rows where it is null, missing or not finite are skipped."""
    steps, values = [], []
    for row in rows:
        value = row.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            steps.append(float(row["step"]))
            values.append(float(value))
    return steps, values


def missing_line(run: GridRun, reason: str) -> str:
    """The one line a report prints for a run it could not use."""
    return f"run {run.run_id}: {reason}"


def curve_rows(run: GridRun) -> tuple[list[dict[str, Any]], list[str]]:
    """A run's metrics.jsonl rows for a training-curve figure, and the lines to print about it:
    why it has none, or that a running run is drawn as a partial line."""
    rows = run.metrics()
    if not rows:
        return [], [missing_line(run, run.describe() if run.state != "finished" else "no metrics.jsonl")]
    return rows, [missing_line(run, f"{run.describe()} (partial line)")] if run.state == "running" else []


def group_runs(runs: list[GridRun], *keys: str) -> dict[tuple[Any, ...], list[GridRun]]:
    """Runs grouped by the given fields (seeds of one cell end up together), in first-seen order."""
    groups: dict[tuple[Any, ...], list[GridRun]] = {}
    for run in runs:
        groups.setdefault(tuple(run.field(key) for key in keys), []).append(run)
    return groups
