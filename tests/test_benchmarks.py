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


def test_gpu_check_runs_its_phases_on_a_cpu_at_a_tiny_shape() -> None:
    """benchmarks/gpu_check.py is written for a GPU no session here had: its code runs here at a tiny shape."""
    import subprocess
    import sys

    result = subprocess.run(
        [
            sys.executable,
            "benchmarks/gpu_check.py",
            "--device",
            "cpu",
            "--shape",
            "tiny",
            "--lengths",
            "32",
            "--rollout-rows",
            "4",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    rows = __import__("json").loads(result.stdout.strip().splitlines()[-1])["rows"]
    assert [row["phase"].split(" ")[0] for row in rows] == ["update", "teacher", "rollout"]
    assert all(row["tokens_per_s"] > 0 for row in rows)
