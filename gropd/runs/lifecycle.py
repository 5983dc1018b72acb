"""A run's lifecycle, in one place: its states, when it counts as changed, its twins, its thread count.

A run's status.json records one of STATES (run_dir.py); what a reader sees of it is one of

    new        no status.json yet
    changed    its config hash or its models differ from those it started with (what_changed)
    running    a live session is working on it (runs/session.py: is_alive; only the status table asks)
    finished | collapsed     DONE: not redone
    failed | resumable       started and stopped; the next attempt resumes it

and the transitions are: new → running (open_run_dir) → trained (training ended) → finished
(evaluated), or → collapsed (the collapse rule) or → failed (an exception; resumed later); a run that
is new but has a finished twin takes the twin's results instead of training; `--force` deletes the
run and starts it as new.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from gropd.config import Manifests, RunConfig, config_hash, config_yaml, data_hash
from gropd.config.errors import ConfigError, RunFileError
from gropd.model.checkpoints import checkpoint_digests, checkpoint_identity, checkpoint_stamps
from gropd.record.ranges import planned_k
from gropd.record.run_dir import DONE, RunDir, delete_tree

STARTED = (*DONE, "failed", "resumable")  # seen states of a run that has begun


def seen_state(status: dict[str, Any] | None, changed: bool, alive: bool) -> str:
    """The state a reader sees (the table above) of a run with this status.json."""
    if status is None:
        return "new"
    recorded = status["status"]
    if recorded not in (*DONE, "failed") and alive:
        return "running"
    if changed:
        return "changed"
    return recorded if recorded in (*DONE, "failed") else "resumable"


def models_of(config: RunConfig, manifests: Manifests) -> dict[str, tuple[str, str]]:
    """Role -> (model label, mode) of the run: student and teacher, or an eval run's model."""
    if config.kind == "eval":
        return {"model": (config.model, config.mode)}
    record = manifests.pairings[config.pairing]
    return {side: (record[side]["model"], record[side]["mode"]) for side in ("student", "teacher")}


def checkpoints_of(config: RunConfig, manifests: Manifests) -> dict[str, str]:
    """Role → checkpoint_identity of the run's models (models_of)."""
    models = models_of(config, manifests)
    return {role: checkpoint_identity(manifests, config.profile, label) for role, (label, _) in models.items()}


def digests_of(
    config: RunConfig, manifests: Manifests, status: dict[str, Any] | None = None
) -> dict[str, dict[str, str] | None]:
    """Role → checkpoint_digests of the run's models (None for a model whose files are not here); with the run's
    `status`, files whose stamps it recorded unchanged keep its digests (not read again)."""
    digests, stamps = ((status or {}).get(key) for key in ("digests", "stamps"))
    digests, stamps = (value if isinstance(value, dict) else {} for value in (digests, stamps))
    return {
        role: checkpoint_digests(manifests, config.profile, label, (digests.get(role), stamps.get(role)))
        for role, (label, _) in models_of(config, manifests).items()
    }


def stamps_of(config: RunConfig, manifests: Manifests) -> dict[str, dict[str, list[int]] | None]:
    """Role → checkpoint_stamps of the run's models, recorded beside their digests."""
    models = models_of(config, manifests)
    return {role: checkpoint_stamps(manifests, config.profile, label) for role, (label, _) in models.items()}


def what_changed(status: dict[str, Any], config: RunConfig, manifests: Manifests | None) -> str | None:
    """Why a run's status.json no longer matches `config` (None when it does): another config hash, or,
    given the manifests, other models than it started with (a rebuilt tiny world, a re-pinned revision), or
    other bytes in their files than it recorded (`digests`; a model whose files are not here is not compared)."""
    if status["config_hash"] != config_hash(config):
        return f"started with config {status['config_hash']}, now {config_hash(config)}"
    recorded = status.get("checkpoints")
    if manifests is None or recorded is None:
        return None
    now = checkpoints_of(config, manifests)
    moved = [f"{role} {recorded.get(role)} -> {now[role]}" for role in now if recorded.get(role) != now[role]]
    if moved:
        return f"started with other models: {'; '.join(moved)}"
    recorded_digests = status.get("digests") if isinstance(status.get("digests"), dict) else {}
    edited = []
    for role, files in (digests_of(config, manifests, status) if recorded_digests else {}).items():  # none: no hash
        before = recorded_digests.get(role)
        if files is not None and isinstance(before, dict) and before != files:
            names = sorted(name for name in {*files, *before} if files.get(name) != before.get(name))
            edited.append(f"{role} {now[role]}: {', '.join(names)}")
    return f"started with other bytes in its model files: {'; '.join(edited)}" if edited else None


def changed_error(run_dir: RunDir, config: RunConfig, manifests: Manifests, expected: str | None = None) -> ConfigError:
    """Why a changed run is refused; `expected`: the way out (default: the same settings, or --force)."""
    return ConfigError(
        str(run_dir.status_path),
        "config_hash / checkpoints",
        f"run {config.run_id} {what_changed(run_dir.read_status() or {}, config, manifests)}",
        expected or "the same config and models to resume, or --force to start it afresh",
    )


def run_state(config: RunConfig, results_root: Path, manifests: Manifests | None = None) -> tuple[RunDir, str]:
    """(run dir, one of: new, finished, collapsed, failed, resumable, changed); a failed run resumes too.
    Without `manifests` a change of models goes unseen (what_changed).

    A broken file that carrying the run on would read raises RunFileError (RunDir.check).
    """
    run_dir = RunDir.at(results_root, config.profile, config.run_id)
    status = run_dir.read_status()
    if status is None:
        return run_dir, "new"
    if what_changed(status, config, manifests):
        return run_dir, "changed"
    run_dir.check(status)
    return run_dir, seen_state(status, changed=False, alive=False)


# --- thread count ---------------------------------------------------------------------------------------
# backend.threads: how `--jobs N` shares the cores, and why a run that started keeps its count.
#
# Threads are part of a run's identity (its config hash): a different intra-op thread count
# can change the order of floating-point reductions, hence the bits of a run. The rule:
#
# - `--jobs N` gives each run that has not started `threads = max(1, cores // N)`, so that
#   N x threads <= cores;
# - a run that already started keeps the count it started with, with or without --jobs: when
#   its status.json's hash matches its config with the thread count recorded in its
#   config.yaml, that count is used. So a grid finished with `--jobs 2` stays finished when run
#   again without it, and an interrupted run resumes bit for bit, instead of showing "changed";
# - a count set on purpose, on the command line (`backend.threads=T`) or in the run's YAML
#   file, always wins (and changes the hash as any edit does).


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def split_threads(cores: int, jobs: int) -> int:
    """Threads per run for `jobs` runs at once: max(1, cores // jobs)."""
    return max(1, cores // jobs)


def with_threads(config: RunConfig, threads: int | None) -> RunConfig:
    """The same config with backend.threads = threads."""
    return config.model_copy(update={"backend": config.backend.model_copy(update={"threads": threads})})


def keep_started_threads(config: RunConfig, results_root: Path) -> RunConfig:
    """`config` with the thread count its run started with, when that is the only difference from
    the recorded run; `config` unchanged otherwise (new run, other changes, unreadable files)."""
    run_dir = RunDir.at(results_root, config.profile, config.run_id)
    try:
        recorded_hash = (run_dir.read_status() or {}).get("config_hash")
        recorded = run_dir.read_config()["backend"]["threads"]
    except (OSError, TypeError, KeyError, RunFileError):
        return config
    if recorded_hash is None or recorded_hash == config_hash(config):
        return config
    candidate = with_threads(config, recorded)
    return candidate if config_hash(candidate) == recorded_hash else config


def run_threads(config: RunConfig, on_purpose: bool, results_root: Path, split: int | None = None) -> RunConfig:
    """`config` with the thread count its run gets (the rule above): its own when set on purpose (`on_purpose`:
    the plan's origin of backend.threads is the command line or the run's own file), the count it started with
    when it started, else `split` (under --jobs; None: its own)."""
    if on_purpose:
        return config
    kept = keep_started_threads(config, results_root)
    if kept is not config or split is None or run_state(config, results_root)[1] in STARTED:
        return kept
    return with_threads(config, split)


# --- twins ------------------------------------------------------------------------------------------------
# A run whose settings equal those of a run another grid already finished is not trained again.
#
# Grids overlap: the λ sweep's GR-OPD λ = 0.25 run on I4nothink→I1.7nothink and its vanilla-OPD
# baselines are Table 1's runs under other ids, and the γ sweep holds λ-sweep and Table 1 runs too.
# Two runs are *twins* when their resolved configs are equal apart from the fields that only name
# them (NAMING: run id, grid) and those that never change results (config.NOT_HASHED: tracking),
# and they start from the same checkpoints.
#
# A new run with a finished or collapsed twin under the same results/<profile>/ takes the twin's
# results instead of training: copies of metrics.jsonl, eval/ and the rollout dumps, and final/ as hard
# links where the filesystem allows (it is only ever replaced whole, never written in place); not its
# checkpoints or TensorBoard events. Its own config.yaml and
# status.json are written for its own id, the status naming the twin in `copied_from`. `--force`
# trains it anyway.

NAMING = ("run_id", "grid")
NOT_COPIED = ("checkpoints", "tracking", "status.json", "config.yaml", "final")
SESSION_FIELDS = ("pid", "pid_start", "host", "wall_s", "failed_in")


def settings_hash(config_data: dict[str, Any]) -> str:
    """data_hash of a config mapping without the fields that only name the run (NAMING)."""
    return data_hash({key: value for key, value in config_data.items() if key not in NAMING})


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def copy_twin(twin: RunDir, run_dir: RunDir, config: RunConfig, identity: dict[str, Any]) -> dict[str, Any]:
    """Give `run_dir` (absent or empty) the results of `twin`; returns the new status."""
    staging = run_dir.root.with_name(run_dir.root.name + ".twin-tmp")
    delete_tree(staging, "a twin's results are staged there")
    shutil.copytree(twin.root, staging, ignore=shutil.ignore_patterns(*NOT_COPIED))
    if twin.final.is_dir():
        shutil.copytree(twin.final, staging / "final", copy_function=_link_or_copy)
    delete_tree(run_dir.root, "a twin's results take its place")
    staging.rename(run_dir.root)
    run_dir.write_config(config_yaml(config))
    source = {key: value for key, value in (twin.read_status() or {}).items() if key not in SESSION_FIELDS}
    return run_dir.update_status(**{**source, **identity, "copied_from": twin.root.name})


def twin_to_copy(config: RunConfig, state: str, manifests: Manifests, results_root: Path, force: bool) -> RunDir | None:
    """The run whose results a new, unforced run takes instead of training (the twins section): a finished
    or collapsed run under results_root/<profile>/ with the settings of `config`, the same models
    (checkpoints_of) and a record that can be believed (RunDir.record_problem); the first by name."""
    if force or state != "new":
        return None
    wanted, checkpoints = settings_hash(config.model_dump(mode="json")), checkpoints_of(config, manifests)
    for status_path in sorted((results_root / config.profile).glob("*/status.json")):
        candidate = RunDir(status_path.parent)
        if candidate.root.name == config.run_id:
            continue
        try:
            status = candidate.read_status() or {}
            same_models = status.get("checkpoints") == checkpoints
            config_data = candidate.read_config()
            if status.get("status") in DONE and same_models and settings_hash(config_data) == wanted:
                record = (candidate.read_metrics(), candidate.read_summary(), candidate.read_horizon())
                ks = planned_k(config_data, manifests.suites.get(config.profile) or {})
                if candidate.record_problem(status, config_data, *record, ks) is None:
                    return candidate
        except RunFileError:  # a broken run is nobody's twin; its own run reports it
            continue
    return None
