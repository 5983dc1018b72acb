"""The benchmark scripts still run against the code they measure (a short run of each phase)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tiny_runs import REPO

from benchmarks.train_step import PHASES, measure

pytestmark = pytest.mark.slow


def test_train_step_benchmark_times_every_phase(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    figures = measure("I4nothink-I1.7nothink", "gropd", 2, tmp_path)
    assert all(figures[phase] > 0 for phase in PHASES)
    assert figures["mean_response_len"] > 0 and figures["wall_s"] > 0
    assert not (REPO / "results" / "tiny" / "I4nothink-I1.7nothink").exists()  # only tmp_path was written
