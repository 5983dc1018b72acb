"""The trainer on the real tiny world: learning, exact logging, collapse, template mismatch, resume."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from tiny_runs import REPO, project
from tiny_runs import run_tiny as run

from gropd.credit import broadcast, trajectory_scores

pytestmark = pytest.mark.slow
MATCHED = "table1__I4nothink-I1.7nothink__gropd"
CROSS = "table1__I4think-B1.7__gropd"


def test_logged_f_S_A_match_the_credit_functions_and_teacher(root: Path) -> None:
    status, run_dir = run(root, CROSS, ["train.steps=1", "train.dump_steps=[1]", "gropd.lam=0.25"])
    assert status["status"] == "finished"
    dump = torch.load(run_dir.root / "batches" / "step_1_rank0.pt")
    mask = dump["mask"]
    f = (dump["teacher_logp"] - dump["logp_old"]) * mask
    assert torch.allclose(dump["f"], f, atol=1e-6)
    S = trajectory_scores(f, mask, 0.99)
    assert torch.allclose(dump["S"], S, atol=1e-5)
    groups = S.reshape(-1, 8)  # A_i = ((S_i − μ) + λμ) / (σ + ε), λ = .25, Bessel σ, by hand
    mu, sigma = groups.mean(1, keepdim=True), groups.std(1, keepdim=True)
    A = broadcast(((groups - mu + 0.25 * mu) / (sigma + 1e-6)).reshape(-1), mask)
    assert torch.allclose(dump["advantages"], A, atol=1e-5)
    record = run_dir.read_metrics()[0]
    assert record["mean_feedback"] == pytest.approx((f.sum() / mask.sum()).item(), rel=1e-5)


def test_constant_advantage_is_minus_the_first_batch_mean_abs_feedback_also_after_a_resume(root: Path) -> None:
    extra = ["method=constant", "train.steps=2", "train.dump_steps=[1,2]", "train.checkpoint_every=1"]
    status, run_dir = run(root, MATCHED, extra)
    assert status["status"] == "finished"
    dumps = [torch.load(run_dir.root / "batches" / f"step_{step}_rank0.pt") for step in (1, 2)]
    c = float((dumps[0]["f"].abs() * dumps[0]["mask"]).sum() / dumps[0]["mask"].sum())
    records = run_dir.read_metrics()
    assert [r["constant_c"] for r in records] == pytest.approx([c, c], rel=1e-6)
    for dump in dumps:  # −c on every response token, 0 elsewhere, whatever the teacher said
        assert torch.equal(dump["advantages"], torch.where(dump["mask"].bool(), -records[0]["constant_c"], 0.0))
    # interrupted after step 1: the resumed step 2 takes c from step 1, not from its own batch
    shutil.rmtree(run_dir.root / "checkpoints" / "step_2")
    for done in ("final", "eval"):
        shutil.rmtree(run_dir.root / done)
    run_dir.update_status(status="running", step=1)
    status, _ = run(root, MATCHED, extra)
    assert status["status"] == "finished"
    timing = lambda r: {k: v for k, v in r.items() if not k.startswith("time_")}  # noqa: E731
    assert [timing(r) for r in run_dir.read_metrics()] == [timing(r) for r in records]


def test_cross_pattern_feedback_is_larger_than_matched(root: Path) -> None:
    firsts = {}
    for run_id in (MATCHED, CROSS):
        _, run_dir = run(root, run_id, ["train.steps=1"])
        firsts[run_id] = run_dir.read_metrics()[0]["mean_abs_feedback"]
    # measured: matched ~0.3-0.6, cross ~2-4 (the teacher expects "<think>" where the base student writes work)
    assert firsts[CROSS] > 2 * firsts[MATCHED]


def test_absurd_learning_rate_collapses_with_a_reason(root: Path) -> None:
    overrides = [
        "train.steps=15",
        "train.optimizer.lr=0.5",
        "collapse.reward_window=2",
        "collapse.reward_patience=2",
        "train.checkpoint_every=5",
    ]
    status, run_dir = run(root, "table1__I4nothink-I1.7nothink__opd", overrides)
    assert status["status"] == "collapsed" and status["reason"]
    assert status["collapse_step"] == len(run_dir.read_metrics()) < 15
    assert not (run_dir.eval_dir / "summary.json").exists()


def test_finished_run_is_not_redone(root: Path) -> None:
    status, run_dir = run(root, MATCHED, ["train.steps=1"])
    mtime = run_dir.metrics_path.stat().st_mtime_ns
    again, _ = run(root, MATCHED, ["train.steps=1"])
    assert again["status"] == status["status"] == "finished" and run_dir.metrics_path.stat().st_mtime_ns == mtime


TIMING = ("time_rollout_s", "time_teacher_s", "time_update_s")


def cli_run(root: Path, out: str, run_id: str, extra: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "2"}
    command = [sys.executable, "-m", "gropd.cli", "run", run_id, "--profile", "tiny", *extra]
    return subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=open(out, "w"))


def test_sigkill_then_resume_equals_uninterrupted(tmp_path: Path) -> None:
    extra = ["train.steps=8", "train.checkpoint_every=3", "eval.questions=2", "eval.suites=[add]"]
    whole, broken = project(tmp_path / "a"), project(tmp_path / "b")
    assert cli_run(whole, tmp_path / "a.log", MATCHED, extra).wait(timeout=600) == 0
    metrics = broken / "results" / "tiny" / MATCHED / "metrics.jsonl"
    victim = cli_run(broken, tmp_path / "b.log", MATCHED, extra)
    deadline = time.time() + 600
    while time.time() < deadline and (not metrics.exists() or len(metrics.read_text().splitlines()) < 5):
        time.sleep(0.05)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    assert len(metrics.read_text().splitlines()) in (5, 6, 7)  # killed after step 5, before the end
    assert cli_run(broken, tmp_path / "b2.log", MATCHED, extra).wait(timeout=600) == 0
    assert "resuming after step 3" in (tmp_path / "b2.log").read_text()

    def rows(project_dir: Path) -> list[dict]:
        lines = (project_dir / "results" / "tiny" / MATCHED / "metrics.jsonl").read_text().splitlines()
        return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in lines]

    assert [r["step"] for r in rows(broken)] == list(range(1, 9))
    assert rows(broken) == rows(whole)
    weights = [load_file(p / "results" / "tiny" / MATCHED / "final" / "model.safetensors") for p in (whole, broken)]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
