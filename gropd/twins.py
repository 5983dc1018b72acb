"""A run whose settings equal those of a run another grid already finished is not trained again.

Grids overlap: the λ sweep's GR-OPD λ = 0.25 run on I4nothink→I1.7nothink and its vanilla-OPD
baselines are Table 1's runs under other ids, and the γ sweep holds λ-sweep and Table 1 runs too.
Two runs are *twins* when their resolved configs are equal apart from the fields that only name
them (NAMING: run id, grid) and those that never change results (config.NOT_HASHED: tracking),
and they start from the same checkpoints.

A new run with a finished or collapsed twin under the same results/<profile>/ takes the twin's
results instead of training: copies of metrics.jsonl, eval/ and the rollout dumps, and final/ as hard
links where the filesystem allows (it is only ever replaced whole, never written in place); not its
checkpoints or TensorBoard events. Its own config.yaml and
status.json are written for its own id, the status naming the twin in `copied_from`. `--force`
trains it anyway.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from gropd.config import RunConfig, config_yaml, data_hash
from gropd.config.errors import RunFileError
from gropd.run_dir import DONE, RunDir

NAMING = ("run_id", "grid")
NOT_COPIED = ("checkpoints", "tracking", "status.json", "config.yaml", "final")
SESSION_FIELDS = ("pid", "pid_start", "host", "wall_s", "failed_in")


def settings_hash(config_data: dict[str, Any]) -> str:
    """data_hash of a config mapping without the fields that only name the run (NAMING)."""
    return data_hash({key: value for key, value in config_data.items() if key not in NAMING})


def find_twin(config: RunConfig, checkpoints: dict[str, str], results_root: Path) -> RunDir | None:
    """A finished or collapsed run under results_root/<profile>/ with the settings of `config` and the
    same models (`checkpoints`, as pipeline.checkpoints_of records them); the first by name."""
    wanted = settings_hash(config.model_dump(mode="json"))
    for status_path in sorted((results_root / config.profile).glob("*/status.json")):
        candidate = RunDir(status_path.parent)
        if candidate.root.name == config.run_id:
            continue
        try:
            status = candidate.read_status() or {}
            same_models = status.get("checkpoints") == checkpoints
            if status.get("status") in DONE and same_models and settings_hash(candidate.read_config()) == wanted:
                return candidate
        except RunFileError:  # a broken run is nobody's twin; its own run reports it
            continue
    return None


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def copy_twin(twin: RunDir, run_dir: RunDir, config: RunConfig, identity: dict[str, Any]) -> dict[str, Any]:
    """Give `run_dir` (absent or empty) the results of `twin`; returns the new status."""
    staging = run_dir.root.with_name(run_dir.root.name + ".twin-tmp")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(twin.root, staging, ignore=shutil.ignore_patterns(*NOT_COPIED))
    if twin.final.is_dir():
        shutil.copytree(twin.final, staging / "final", copy_function=_link_or_copy)
    shutil.rmtree(run_dir.root, ignore_errors=True)
    staging.rename(run_dir.root)
    run_dir.write_config(config_yaml(config))
    source = {key: value for key, value in (twin.read_status() or {}).items() if key not in SESSION_FIELDS}
    return run_dir.update_status(**{**source, **identity, "copied_from": twin.root.name})
