"""A tiny pairing through the CLI as 2 CPU processes under `accelerate launch` with the FSDP launch
config adapted to CPU (experiments/launch/cpu_fsdp.yaml) and a small token budget: one world of 2
ranks trains (sharded), rank 0 alone evaluates, and the results are those of the same run in one
process in kind (the ranks draw their own samples, so not in value)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_runs import FAST, REPO, project

from gropd.record.run_dir import RunDir

pytestmark = pytest.mark.slow
RUN = "table1__I4nothink-I1.7nothink__gropd"
SETTINGS = [*FAST, "train.steps=2", "backend.old_logprobs=recompute", "backend.max_tokens_per_forward=400"]


def cli(root: Path, launcher: list[str], results: str) -> subprocess.CompletedProcess:
    command = [*launcher, "-m", "gropd.cli", "--results", results, "run", RUN, "--profile", "tiny", *SETTINGS]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=600)


def test_two_processes_train_one_world_and_rank_0_alone_evaluates(tmp_path: Path) -> None:
    root = project(tmp_path)
    launch = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(REPO / "experiments/launch/cpu_fsdp.yaml"),
    ]
    two = cli(root, launch, "results")
    assert two.returncode == 0, two.stderr[-3000:]
    one = cli(root, [sys.executable], "results-one")
    assert one.returncode == 0, one.stderr[-3000:]
    runs = [RunDir(root / results / "tiny" / RUN) for results in ("results", "results-one")]
    assert [r.read_status()["processes"] for r in runs] == [2, 1]
    assert [r.read_status()["status"] for r in runs] == ["finished", "finished"]
    assert "rank 1: training done; rank 0 evaluates" in two.stderr
    assert two.stderr.count("[eval add]") == 1  # one evaluation
    for run in runs:
        records = [json.loads(line) for line in (run.eval_dir / "add.jsonl").read_text().splitlines()]
        assert len(records) == len({(r["question_id"], r["sample"]) for r in records}) == 4 * 4
    metrics = [r.read_metrics() for r in runs]
    assert [len(m) for m in metrics] == [2, 2] and metrics[0][0].keys() == metrics[1][0].keys()
    for record in metrics[0]:
        assert 0 <= record["verifier_reward"] <= 1 and record["logprob_forwards_min"] >= 1
    summaries = [r.read_summary() for r in runs]
    assert summaries[0].keys() == summaries[1].keys() and 0 <= summaries[0]["macro"] <= 100
