"""A tiny pairing through the CLI as 2 CPU processes under `accelerate launch` with the FSDP launch
config adapted to CPU (experiments/launch/cpu_fsdp.yaml) and a small token budget: one world of 2
ranks trains (sharded) and stops at `trained`; a resubmitted launch finds it trained and returns;
`evaluate` under the launcher evaluates it as 2 shards, with the per-sample records of 1 process;
and the run's learning rate at every step is the 1-process run's (the tiny profile's linear warm-up).
The ranks draw their own samples, so other numbers match the 1-process run in kind, not in value: the
transformers teacher has the same weights on both ranks (the run checks it and says so) and the mean |f| is
the 1-process run's in scale (a rank scoring with a zeros teacher, a uniform distribution, logged ~2.0 against
~0.13)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_runs import FAST, REPO, project

from gropd.record.run_dir import RunDir

pytestmark = pytest.mark.slow
RUN = "table1__I4nothink-I1.7nothink__gropd"
SETTINGS = [
    *FAST,
    "train.steps=2",
    "backend.old_logprobs=recompute",
    "backend.max_tokens_per_forward=400",
    "eval.batch_prompts=2",
]
LAUNCH = [
    sys.executable,
    "-m",
    "accelerate.commands.launch",
    "--config_file",
    str(REPO / "experiments/launch/cpu_fsdp.yaml"),
]


def cli(root: Path, launcher: list[str], results: str, command: str = "run") -> subprocess.CompletedProcess:
    argv = [*launcher, "-m", "gropd.cli", "--results", results, command, RUN, "--profile", "tiny", *SETTINGS]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=600)


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stderr


def test_two_processes_train_then_evaluate_in_processes_of_their_own(tmp_path: Path) -> None:
    root = project(tmp_path)
    trained = ok(cli(root, LAUNCH, "results"))
    two = RunDir(root / "results" / "tiny" / RUN)
    assert two.read_status()["status"] == "trained" and "[eval" not in trained
    assert "evaluated by processes of its own" in trained and "train.replicas is 1" in trained
    assert "teacher I4 (" in trained and "the same weights on all 2 processes" in trained

    again = ok(cli(root, LAUNCH, "results"))  # a resubmitted job: trained, nothing to wait for
    assert "[eval" not in again and two.read_status()["status"] == "trained"

    shutil.copytree(root / "results" / "tiny" / RUN, root / "results-one-shard" / "tiny" / RUN)
    evaluated = ok(cli(root, LAUNCH, "results", "evaluate"))
    assert "[eval add shard 1/2]" in evaluated and "[eval add shard 0/2]" in evaluated
    ok(cli(root, [sys.executable], "results-one-shard", "evaluate"))
    one_shard = RunDir(root / "results-one-shard" / "tiny" / RUN)
    for run in (two, one_shard):
        assert run.read_status()["status"] == "finished" and not (run.eval_dir / "shards").exists()
    records = (two.eval_dir / "add.jsonl").read_text()
    assert records == (one_shard.eval_dir / "add.jsonl").read_text()
    assert len({(r["question_id"], r["sample"]) for r in map(json.loads, records.splitlines())}) == 4 * 4
    summaries = [{k: v for k, v in r.read_summary().items() if k != "model"} for r in (two, one_shard)]
    assert summaries[0] == summaries[1]

    ok(cli(root, [sys.executable], "results-one"))
    one = RunDir(root / "results-one" / "tiny" / RUN)
    assert [r.read_status()["processes"] for r in (two, one)] == [2, 1]
    assert one.read_status()["status"] == "finished"
    metrics = [r.read_metrics() for r in (two, one)]
    assert [len(m) for m in metrics] == [2, 2] and metrics[0][0].keys() == metrics[1][0].keys()
    assert [r["lr"] for r in metrics[0]] == [r["lr"] for r in metrics[1]]  # one schedule step per update
    two_f, one_f = (sum(r["mean_abs_feedback"] for r in m) / len(m) for m in metrics)
    assert 0.5 < two_f / one_f < 2, (two_f, one_f)  # the same teacher on both ranks: |f| of the same scale
    for record in metrics[0]:
        assert 0 <= record["verifier_reward"] <= 1 and record["logprob_forwards_min"] >= 1
