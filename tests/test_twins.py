"""A run whose settings another grid's finished run already has is copied, not trained again."""

from __future__ import annotations

from pathlib import Path

import pytest
from tiny_runs import project, tiny_config

from gropd.config import config_hash, load_manifests
from gropd.pipeline import execute
from gropd.run_dir import RunDir
from gropd.twins import settings_hash

pytestmark = pytest.mark.slow
TABLE1 = "table1__I4nothink-I1.7nothink__opd"
LAMBDA = "lambda__I4nothink-I1.7nothink__opd"  # the λ sweep's OPD baseline: the same settings
STEPS = ["train.steps=2"]


def test_settings_hash_ignores_only_the_names(tmp_path: Path) -> None:
    root = project(tmp_path)
    one, two = (tiny_config(root, run_id, STEPS).model_dump(mode="json") for run_id in (TABLE1, LAMBDA))
    assert settings_hash(one) == settings_hash(two)
    assert settings_hash(one) != settings_hash({**one, "seed": 1})
    assert settings_hash(one) == settings_hash({**one, "tracking": {"backends": []}})


def test_a_twin_is_copied_and_force_trains_anew(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = project(tmp_path)
    monkeypatch.chdir(root)
    manifests, results = load_manifests(root / "experiments"), root / "results"
    original = tiny_config(root, TABLE1, STEPS)
    assert execute(original, manifests, results)["status"] == "finished"
    twin_config = tiny_config(root, LAMBDA, STEPS)
    status = execute(twin_config, manifests, results)
    source, copy = RunDir(results / "tiny" / TABLE1), RunDir(results / "tiny" / LAMBDA)
    assert status["status"] == "finished" and status["copied_from"] == TABLE1
    assert status["config_hash"] == config_hash(twin_config) and status["grid"] == "lambda"
    assert copy.read_metrics() == source.read_metrics()
    assert copy.read_summary() == source.read_summary()
    assert not copy.checkpoints.exists() and (copy.final / "model.safetensors").exists()
    assert execute(twin_config, manifests, results)["copied_from"] == TABLE1  # finished: nothing redone
    other = tiny_config(root, LAMBDA, [*STEPS, "seed=1"])  # other settings: not a twin
    assert "copied_from" not in execute(other, manifests, results, force=True)
    forced = execute(twin_config, manifests, results, force=True)
    assert "copied_from" not in forced and copy.checkpoints.exists()
