"""`./reproduce.sh status`: one table of every run of every grid, read from results/ while runs go on.

Rows: each run of each grid (experiments/grids/, with the grids' own seeds), then any other run
directory under results/<profile>/ that holds a status.json (other seeds, removed entries).
Nothing is written and no model is loaded, so it can run in another terminal during a grid.

    state      a state of gropd/runs/lifecycle.py (changed: the run resolves, with the overrides given to
               `status`, to another config hash or other models, so grid/run would refuse it without --force),
               or broken: the run's YAML, or a file of its run directory that `grid` reads (status.json,
               config.yaml against its hash, ...: RunDir.check), cannot be read, or its record cannot be believed
               (misplaced, metrics cut short or repeated: RunDir.record_problem; reports leave it out),
               or not in this profile: a manifest rules the entry out of it (the fullkl baselines under paper)
    step       last step of metrics.jsonl / train.steps of the recorded config ("-": eval-only run)
    reward, len   the last step's verifier_reward and mean_response_len
    time       running: ETA of the training, the mean of the last 10 steps' time_*_s times the
               steps left (evaluation not included; "evaluating" once trained);
               done: wall time (status.json wall_s, the sum of its sessions)
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gropd.config import ConfigError, Manifests, RunConfig, RunFileError
from gropd.config.grids import grid_names, run_file_path
from gropd.record.ranges import planned_k
from gropd.record.run_dir import DONE, RunDir
from gropd.runs.lifecycle import seen_state, what_changed
from gropd.runs.pipeline import grid_entries
from gropd.runs.plan import plan_entry
from gropd.runs.session import is_alive

ETA_WINDOW = 10
TIMING_KEYS = ("time_rollout_s", "time_teacher_s", "time_update_s")


@dataclass(frozen=True)
class StatusRow:
    run_id: str
    state: str
    step: str = ""
    reward: str = ""
    length: str = ""
    time: str = ""
    reason: str = ""


def status_rows(manifests: Manifests, profile: str, results_root: Path, overrides: list[str]) -> list[StatusRow]:
    rows, seen = [], set()
    for entry in grid_entries(manifests, grid_names(manifests.root), profile=profile):
        seen.add(entry.run_id)
        try:
            config = plan_entry(manifests, profile, entry, overrides, results_root).config
        except (ConfigError, RunFileError) as err:
            if isinstance(err, ConfigError) and err.file == "command line":  # the overrides given to status
                raise
            rows.append(unplanned_row(manifests, profile, results_root, entry.run_id, err))
            continue
        rows.append(row_or_broken(RunDir.at(results_root, profile, entry.run_id), config, manifests))
    profile_dir = results_root / profile
    others = sorted(p for p in profile_dir.glob("*/status.json") if p.parent.name not in seen)
    rows += [row_or_broken(RunDir(path.parent), None, None) for path in others]
    return rows


NOT_IN_PROFILE = "not in this profile"


def unplanned_row(
    manifests: Manifests, profile: str, results_root: Path, run_id: str, err: ConfigError | RunFileError
) -> StatusRow:
    """The row of a grid entry that does not resolve: NOT_IN_PROFILE when a manifest, not the run's own file, rules
    it out of this profile and it never ran there (the fullkl baselines under paper, whose teacher is vLLM's: as
    the reports' "cannot run in this profile"); broken otherwise."""
    own_file = str(run_file_path(manifests.root, profile, run_id))
    ran = (results_root / profile / run_id / "status.json").exists()
    if isinstance(err, ConfigError) and err.file != own_file and not ran:
        return StatusRow(run_id, NOT_IN_PROFILE, reason=str(err))
    return StatusRow(run_id, "broken", reason=str(err))


def row_or_broken(run_dir: RunDir, config: RunConfig | None, manifests: Manifests | None) -> StatusRow:
    """run_row, or a broken row naming what went wrong: no file of one run, however edited, stops the table."""
    try:
        return run_row(run_dir, config, manifests)
    except Exception as err:
        reason = str(err) if isinstance(err, RunFileError) else f"{run_dir.root}: {type(err).__name__}: {err}"
        return StatusRow(run_dir.root.name, "broken", reason=reason)


def run_row(run_dir: RunDir, config: RunConfig | None, manifests: Manifests | None) -> StatusRow:
    """One run's row from its files; `config` None: not part of a grid, so never "changed"."""
    run_id = run_dir.root.name
    try:
        status = run_dir.read_status()
        changed = (what_changed(status, config, manifests) if config and status else None) or ""
        if status is not None and not changed:
            run_dir.check(status)  # the files `grid` would read: a config.yaml off its hash is not "finished"
    except Exception as err:  # any unreadable file is shown, never stops the table
        reason = str(err) if isinstance(err, RunFileError) else f"{run_dir.status_path}: {err}"
        return StatusRow(run_id, "broken", reason=reason)
    if status is None:
        return StatusRow(run_id, "new")
    metrics = _metrics(run_dir)
    try:
        summary, horizon = run_dir.read_summary(), run_dir.read_horizon()
    except RunFileError as err:
        return StatusRow(run_id, "broken", reason=str(err))
    recorded = run_dir.read_config()
    ks = planned_k(recorded, manifests.suites.get(run_dir.root.parent.name) or {}) if manifests else None
    if not changed and (problem := run_dir.record_problem(status, recorded, metrics, summary, horizon, ks)):
        return StatusRow(run_id, "broken", reason=f"{run_dir.root}: {problem}")  # what a report would leave out
    steps = _recorded_steps(run_dir, config)
    kind = status.get("kind", "train")
    last = metrics[-1] if metrics else {}
    state = seen_state(status, bool(changed), alive=is_alive(status))
    return StatusRow(
        run_id,
        state,
        step="-" if kind == "eval" else f"{last.get('step', 0)}/{steps if steps else '?'}",
        reward=_number(last.get("verifier_reward"), 3),
        length=_number(last.get("mean_response_len"), 1),
        time=_time(state, status, metrics, steps),
        reason=changed or str(status.get("reason") or ""),
    )


def _metrics(run_dir: RunDir) -> list[dict[str, Any]]:
    try:
        return run_dir.read_metrics()
    except (OSError, ValueError, TypeError):
        return []


def _recorded_steps(run_dir: RunDir, config: RunConfig | None) -> int | None:
    """train.steps of the run's own config.yaml (what it is running), else of its current config."""
    try:
        return int(run_dir.read_config()["train"]["steps"])
    except (OSError, ValueError, TypeError, KeyError, RunFileError):
        return config.train.steps if config is not None else None


def _time(state: str, status: dict[str, Any], metrics: list[dict[str, Any]], steps: int | None) -> str:
    if state == "running":
        if status["status"] == "trained" or status.get("kind") == "eval":
            return "evaluating"
        recent = [sum(r.get(key) or 0.0 for key in TIMING_KEYS) for r in metrics[-ETA_WINDOW:]]
        if not recent or not steps:
            return "ETA ?"
        return f"ETA {format_seconds(sum(recent) / len(recent) * (steps - metrics[-1]['step']))}"
    wall = status.get("wall_s")
    return format_seconds(wall) if state in (*DONE, "failed") and isinstance(wall, (int, float)) else ""


def _number(value: Any, digits: int) -> str:
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) else ""


def format_seconds(seconds: float) -> str:
    """45s, 12m05s, 3h02m ("?" for a time that is not a finite number)."""
    if not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def format_table(rows: list[StatusRow]) -> str:
    """A plain text table, one line a run, then a count of runs by state."""
    header = StatusRow("run", "state", "step", "reward", "len", "time", "reason")
    fields = ("run_id", "state", "step", "reward", "length", "time")
    widths = [max(len(getattr(row, name)) for row in [header, *rows]) for name in fields]
    lines = [
        "  ".join(getattr(row, name).ljust(width) for name, width in zip(fields, widths, strict=True))
        + f"  {row.reason}".rstrip()
        for row in [header, *rows]
    ]
    counts = Counter(row.state for row in rows)  # in order of first appearance
    lines.append(f"{len(rows)} runs: " + ", ".join(f"{n} {state}" for state, n in counts.items()))
    return "\n".join(line.rstrip() for line in lines)
