"""What a run is: a run whose settings another grid's finished run already has is copied, not trained
again; a run whose models changed since it started (a rebuilt tiny world) is not resumed or reused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tiny_runs import FAST, REPO, native_profile, project, tiny_config

from gropd.config import ConfigError, config_hash, load_manifests
from gropd.record.run_dir import RunDir
from gropd.runs.lifecycle import changed_error, settings_hash
from gropd.runs.pipeline import execute, planned_state, run_state
from gropd.runs.status import status_rows

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
    assert planned_state(twin_config, results, manifests) == f"new (results of {TABLE1})"
    assert planned_state(twin_config, results, manifests, force=True) == "forced (started afresh)"
    status = execute(twin_config, manifests, results)
    source, copy = RunDir(results / "tiny" / TABLE1), RunDir(results / "tiny" / LAMBDA)
    assert status["status"] == "finished" and status["copied_from"] == TABLE1
    assert status["config_hash"] == config_hash(twin_config) and status["grid"] == "lambda"
    assert copy.read_metrics() == source.read_metrics()
    assert copy.read_summary() == source.read_summary()
    assert not copy.checkpoints.exists() and (copy.final / "model.safetensors").exists()
    assert planned_state(twin_config, results, manifests) == "finished"
    assert execute(twin_config, manifests, results)["copied_from"] == TABLE1  # finished: nothing redone
    other = tiny_config(root, LAMBDA, [*STEPS, "seed=1"])  # other settings: not a twin
    assert "copied_from" not in execute(other, manifests, results, force=True)
    forced = execute(twin_config, manifests, results, force=True)
    assert "copied_from" not in forced and copy.checkpoints.exists()
    # a finished run whose record cannot be believed (a score outside its range) is nobody's twin
    summary = source.read_summary()
    summary["suites"][next(iter(summary["suites"]))]["avg_at_k"] = 150.0
    source.summary_path.write_text(json.dumps(summary))
    shutil.rmtree(copy.root)
    assert planned_state(twin_config, results, manifests) == "new"


def test_a_run_whose_models_changed_is_refused_and_is_nobodys_twin(tmp_path: Path, monkeypatch) -> None:
    root = project(tmp_path)
    monkeypatch.chdir(root)
    results = root / "results"
    original = tiny_config(root, TABLE1, STEPS)
    assert execute(original, load_manifests(root / "experiments"), results)["status"] == "finished"
    recipe = root / "experiments" / "tiny_world.yaml"
    recipe.write_text(recipe.read_text().replace("step: 700", "step: 701"))  # another B1.7, so another I1.7
    manifests = load_manifests(root / "experiments")
    assert run_state(original, results, manifests)[1] == "changed"
    assert run_state(original, results)[1] == "finished"  # without the manifests only the config is compared
    assert planned_state(tiny_config(root, LAMBDA, STEPS), results, manifests) == "new"  # nobody's twin
    with pytest.raises(ConfigError, match=r"started with other models: student tiny I1\.7 \w{12} -> tiny I1\.7 \w{12}"):
        execute(original, manifests, results)
    rows = {row.run_id: row for row in status_rows(manifests, "tiny", results, FAST + STEPS)}
    assert rows[TABLE1].state == "changed" and "other models" in rows[TABLE1].reason
    assert RunDir(results / "tiny" / TABLE1).read_status()["status"] == "finished"  # nothing was touched


def test_a_model_file_changed_since_the_run_started_makes_it_changed(tmp_path, monkeypatch) -> None:
    """A run records the sha256 of every model file it loads (status.json digests); one byte of the teacher's
    weights changed afterwards (the recipe hash, the tiny model's identity, unchanged) makes the run "changed" and
    refused on resume, naming the file; before, it resumed silently with another teacher."""
    root = tmp_path / "project"
    shutil.copytree(REPO / "experiments", root / "experiments", ignore=shutil.ignore_patterns("runs", "lock.yaml"))
    native_profile(root / "experiments")
    shutil.copytree(REPO / "results" / "tiny" / "world", root / "results" / "tiny" / "world")  # a copy: edited below
    monkeypatch.chdir(root)
    manifests = load_manifests(root / "experiments")
    config = tiny_config(root, "table1__B4-B1.7__opd", ["train.steps=1"])
    execute(config, manifests, root / "results")
    assert run_state(config, root / "results", manifests)[1] == "finished"
    weights = next((root / "results" / "tiny" / "world").glob("*/models/B4/model.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # the last byte of the last tensor
    weights.write_bytes(bytes(data))
    run_dir, state = run_state(config, root / "results", manifests)
    assert state == "changed"
    assert "other bytes in its model files: teacher tiny B4" in str(changed_error(run_dir, config, manifests))
    assert "model.safetensors" in str(changed_error(run_dir, config, manifests))
