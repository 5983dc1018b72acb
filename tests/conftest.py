"""Shared fixtures: a private copy of experiments/ so tests can edit manifests freely."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]

torch.set_num_threads(2)


@pytest.fixture
def experiments(tmp_path: Path) -> Path:
    """A copy of experiments/ (manifests, profiles, grids; no generated runs) under tmp_path."""
    target = tmp_path / "experiments"
    shutil.copytree(REPO / "experiments", target, ignore=shutil.ignore_patterns("runs", "lock.yaml"))
    return target
