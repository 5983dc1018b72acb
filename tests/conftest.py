"""Shared fixtures: a private copy of experiments/ so tests can edit manifests freely, and a private project on the
real tiny world as the current directory."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import gropd  # noqa: F401  # isort: skip  (before torch: caps oneDNN under a lowered ATen capability)
import pytest
import torch
from tiny_runs import project

REPO = Path(__file__).resolve().parents[1]

# Two threads for one pytest process; one for each pytest-xdist worker (`-n 2`: the two workers share the cores).
torch.set_num_threads(1 if os.environ.get("PYTEST_XDIST_WORKER") else 2)


@pytest.fixture
def experiments(tmp_path: Path) -> Path:
    """A copy of experiments/ (manifests, profiles, grids; no generated runs) under tmp_path."""
    target = tmp_path / "experiments"
    shutil.copytree(REPO / "experiments", target, ignore=shutil.ignore_patterns("runs", "lock.yaml"))
    return target


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private project (tiny_runs.project: experiments/ copied, the built tiny world linked) as the current
    directory; a test file may define its own `root`."""
    root = project(tmp_path)
    monkeypatch.chdir(root)
    return root
