"""Run one run id end to end: resolve its config, train (kind train) and evaluate, or score (kind
score: sample, teacher-score and grade the untrained student's responses), record status.

A finished run (same config hash) is not redone, nor is a new run whose twin (the same settings
under another id: gropd/twins.py) finished; an interrupted one resumes; a run whose config changed
since it started is refused unless `force` (which starts it afresh).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

from gropd.checkpoints import checkpoint_identity
from gropd.config import ConfigError, Manifests, RunConfig, config_hash, config_yaml, resolve_run
from gropd.config.grids import RunEntry, expand_grid, grid_names, load_grid, write_run_file
from gropd.run_dir import DONE, RunDir
from gropd.run_session import Ranks, run_session
from gropd.tracking import check_backends, log_evaluation
from gropd.twins import copy_twin, find_twin

SIDES = ("student", "teacher")


def grid_entries(manifests: Manifests, grids: list[str], seeds: list[int] | None = None) -> list[RunEntry]:
    return [entry for name in grids for entry in expand_grid(load_grid(name, manifests.root), seeds)]


def materialise(manifests: Manifests, profile: str, entries: list[RunEntry]) -> list[tuple[RunEntry, Path, str]]:
    """Write (or keep, when edited) experiments/runs/<profile>/<run_id>.yaml for each entry."""
    runs_dir = manifests.root / "runs" / profile
    return [(entry, *write_run_file(entry, runs_dir)) for entry in entries]


def find_run_file(manifests: Manifests, profile: str, run_id: str) -> Path:
    """The run's YAML, generated from its grid if it does not exist yet."""
    path = manifests.root / "runs" / profile / f"{run_id}.yaml"
    if path.exists():
        return path
    grid = run_id.split("__", 1)[0]
    if grid in grid_names(manifests.root):
        for entry in grid_entries(manifests, [grid], seeds=[_seed_of(run_id)]):
            if entry.run_id == run_id:
                return write_run_file(entry, path.parent)[0]
    raise ConfigError(str(path), "run_id", f"no run {run_id!r}", "an id listed by `./reproduce.sh runs`")


def _seed_of(run_id: str) -> int:
    tail = run_id.rsplit("__", 1)[-1]
    return int(tail[4:]) if tail.startswith("seed") and tail[4:].isdigit() else 0


def load_run(manifests: Manifests, profile: str, run_id: str, overrides: list[str] | None = None) -> RunConfig:
    return resolve_run(find_run_file(manifests, profile, run_id), profile, manifests, overrides)


def checkpoints_of(config: RunConfig, manifests: Manifests) -> dict[str, str]:
    """Role → checkpoint_identity of the run's models (student and teacher; an eval run's model)."""
    if config.kind == "eval":
        return {"model": checkpoint_identity(manifests, config.profile, config.model)}
    record = manifests.pairings[config.pairing]
    return {side: checkpoint_identity(manifests, config.profile, record[side]["model"]) for side in SIDES}


def what_changed(status: dict[str, Any], config: RunConfig, manifests: Manifests | None) -> str | None:
    """Why a run's status.json no longer matches `config` (None when it does): another config hash, or,
    given the manifests, other models than it started with (a rebuilt tiny world, a re-pinned revision)."""
    if status["config_hash"] != config_hash(config):
        return f"started with config {status['config_hash']}, now {config_hash(config)}"
    recorded = status.get("checkpoints")
    if manifests is None or recorded is None:
        return None
    now = checkpoints_of(config, manifests)
    moved = [f"{role} {recorded.get(role)} -> {now[role]}" for role in now if recorded.get(role) != now[role]]
    return f"started with other models: {'; '.join(moved)}" if moved else None


def run_state(config: RunConfig, results_root: Path, manifests: Manifests | None = None) -> tuple[RunDir, str]:
    """(run dir, one of: new, finished, collapsed, failed, resumable, changed); a failed run resumes too.
    Without `manifests` a change of models goes unseen (what_changed).

    A broken file that carrying the run on would read raises RunFileError (RunDir.check).
    """
    run_dir = RunDir(results_root / config.profile / config.run_id)
    status = run_dir.read_status()
    if status is None:
        return run_dir, "new"
    if what_changed(status, config, manifests):
        return run_dir, "changed"
    run_dir.check(status)
    return run_dir, status["status"] if status["status"] in (*DONE, "failed") else "resumable"


def open_run_dir(config: RunConfig, manifests: Manifests, run_dir: RunDir) -> dict[str, Any]:
    """Make the run's directory and write its config; a run without a status.json gets its first one
    (identity, status running, step 0). Returns the status."""
    run_dir.root.mkdir(parents=True, exist_ok=True)
    run_dir.write_config(config_yaml(config))
    status = run_dir.read_status() or {}
    if not status:
        status = run_dir.update_status(
            **identity(config, manifests), status="running", reason=None, step=0, collapse_step=None
        )
    return status


def twin_to_copy(config: RunConfig, state: str, manifests: Manifests, results_root: Path, force: bool) -> RunDir | None:
    """The finished run whose results a new, unforced run takes instead of training (gropd/twins.py)."""
    if force or state != "new":
        return None
    return find_twin(config, checkpoints_of(config, manifests), results_root)


def planned_state(config: RunConfig, results_root: Path, manifests: Manifests, force: bool = False) -> str:
    """What `execute` would do with the run, in words: its run_state, "new (results of <twin>)" when a
    twin's results would be copied, or "forced (started afresh)"."""
    if force:
        return "forced (started afresh)"
    state = run_state(config, results_root, manifests)[1]
    twin = twin_to_copy(config, state, manifests, results_root, force)
    return f"new (results of {twin.root.name})" if twin is not None else state


def execute(config: RunConfig, manifests: Manifests, results_root: Path, force: bool = False) -> dict[str, Any]:
    """Bring one run to `finished` or `collapsed`; returns its status. `force` deletes the run's
    directory first, unread (so it also redoes a run whose files are broken).

    Launched as several ranks (`accelerate launch`), every rank decides from the same reading of the
    run's files (all read, then meet, before rank 0 writes anything), every rank trains, and only rank 0
    writes the run's files and evaluates, once training has ended on every rank (the other ranks then
    return: on a GPU node they free their devices for the evaluation engine).
    """
    ranks = Ranks.of(config)
    if force and ranks.main:
        shutil.rmtree(results_root / config.profile / config.run_id, ignore_errors=True)
    ranks.meet()
    run_dir, state = run_state(config, results_root, manifests)
    ranks.meet()
    if state in DONE:
        print(f"[{config.run_id}] already {state}; nothing to do (--force redoes it)", file=sys.stderr)
        return run_dir.read_status() or {}
    if state == "changed":
        raise ConfigError(
            str(run_dir.status_path),
            "config_hash / checkpoints",
            f"run {config.run_id} {what_changed(run_dir.read_status() or {}, config, manifests)}",
            "the same config and models to resume, or --force to start it afresh",
        )
    check_backends(config.tracking)
    twin = twin_to_copy(config, state, manifests, results_root, force)
    if twin is not None:
        print(
            f"[{config.run_id}] same settings as finished run {twin.root.name}: its results are copied", file=sys.stderr
        )
        status = copy_twin(twin, run_dir, config, identity(config, manifests)) if ranks.main else {}
        ranks.meet()
        return run_dir.read_status() or status
    if ranks.main:
        open_run_dir(config, manifests, run_dir)
    ranks.meet()
    with run_session(run_dir) as status:
        if config.kind == "train" and status["status"] == "running":
            from gropd.training_run import train_run

            ended = train_run(config, manifests, run_dir)  # ends every rank's process group
            status = run_dir.update_status(**ended) if ranks.main else {**status, **ended}
        if config.kind == "score" and status["status"] == "running":
            from gropd.scoring_run import score_run

            scored = score_run(config, manifests, run_dir)
            return run_dir.update_status(**scored) if ranks.main else {**status, **scored}
        if not ranks.main:
            print(f"[{config.run_id}] rank {ranks.rank}: training done; rank 0 evaluates", file=sys.stderr)
            return status
        if status["status"] in ("trained", "running"):
            from gropd.evaluation import evaluate_run

            summary = evaluate_run(config, manifests, run_dir)
            log_evaluation(config, run_dir.root, summary, step=status.get("step", 0) + 1)
            status = run_dir.update_status(status="finished")
    return status


def identity(config: RunConfig, manifests: Manifests) -> dict[str, Any]:
    """The fields reports select runs by (results/README.md)."""
    fields = {
        "run_id": config.run_id,
        "config_hash": config_hash(config),
        "kind": config.kind,
        "grid": config.grid,
        "seed": config.seed,
        "profile": config.profile,
    }
    if config.kind in ("train", "score"):
        student = manifests.pairings[config.pairing]["student"]
        fields |= {
            "pairing": config.pairing,
            "method": config.method,
            "model": student["model"],
            "mode": student["mode"],
            "lam": config.gropd.lam if config.method == "gropd" else None,
            "gamma": config.gropd.gamma if config.method in ("gropd", "raw") else None,
        }
    else:
        fields |= {"model": config.model, "mode": config.mode, "pairing": None, "method": None}
    return fields | {"checkpoints": checkpoints_of(config, manifests)}
