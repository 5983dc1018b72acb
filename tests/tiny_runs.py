"""Helpers for tests that train on the real tiny world: a private project dir per test.

The project dir holds a copy of experiments/ and a link to the repository's built tiny
world (results/tiny/world), so runs write only under tmp_path and never rebuild models.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from gropd.config import RunConfig, load_manifests
from gropd.record.run_dir import RunDir
from gropd.runs.pipeline import execute, load_run

REPO = Path(__file__).resolve().parents[1]
# Fast settings for short test runs: few steps, one small suite, short responses capped generously.
FAST = ["eval.questions=4", "eval.suites=[add]", "train.checkpoint_every=100"]


def project(tmp_path: Path) -> Path:
    """tmp_path/project with experiments/ copied and results/tiny/world linked; returns it. Its tiny profile
    computes in the native numerics mode: a run in the pytest process computes under the settings torch was
    loaded with (gropd/numerics.py refuses portable there); a test of the portable mode asks for it
    (backend.numerics=portable) in a process of its own."""
    root = tmp_path / "project"
    shutil.copytree(REPO / "experiments", root / "experiments", ignore=shutil.ignore_patterns("runs", "lock.yaml"))
    native_profile(root / "experiments")
    (root / "results" / "tiny").mkdir(parents=True)
    os.symlink(REPO / "results" / "tiny" / "world", root / "results" / "tiny" / "world")
    return root


def native_profile(experiments: Path) -> None:
    """The tiny profile of the experiments/ copy at `experiments` with backend.numerics: native."""
    profile = experiments / "profiles" / "tiny.yaml"
    text = profile.read_text()
    assert "  numerics: portable" in text, "the tiny profile's numerics line moved: update tests/tiny_runs.py"
    profile.write_text(text.replace("  numerics: portable", "  numerics: native", 1))


def tiny_config(root: Path, run_id: str, overrides: list[str]) -> RunConfig:
    return load_run(load_manifests(root / "experiments"), "tiny", run_id, FAST + overrides)


def run_tiny(root: Path, run_id: str, overrides: list[str]) -> tuple[dict, RunDir]:
    """Run `run_id` of the project at `root` with FAST + `overrides`; its status and its run directory."""
    status = execute(tiny_config(root, run_id, overrides), load_manifests(root / "experiments"), root / "results")
    return status, RunDir(root / "results" / "tiny" / run_id)
