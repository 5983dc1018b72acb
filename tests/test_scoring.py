"""Figure 1's runs on the real tiny world: a scoring pass (kind score) and a raw-score training run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from tiny_runs import run_tiny as run
from tiny_runs import tiny_config

from gropd.credit import broadcast, trajectory_scores
from gropd.horizon import separation_curve

pytestmark = pytest.mark.slow
PAIRING = "I4nothink-I1.7nothink"


def test_scoring_pass_saves_graded_batches_and_trains_nothing(root: Path) -> None:
    status, run_dir = run(root, f"fig1__{PAIRING}__score", ["train.steps=2"])
    assert status["status"] == "finished" and status["kind"] == "score" and status["method"] is None
    assert status["model"] == "I1.7" and status["mode"] == "nothink"
    assert not (run_dir.final.exists() or run_dir.checkpoints.exists() or run_dir.eval_dir.exists())
    records = run_dir.read_metrics()
    assert [r["step"] for r in records] == [1, 2]
    train = tiny_config(root, f"fig1__{PAIRING}__score", []).train
    responses = train.prompts_per_batch * train.group_size
    for record in records:
        dump = torch.load(run_dir.root / "batches" / f"step_{record['step']}_rank0.pt")
        mask, correct = dump["mask"], dump["correct"]
        assert dump["group_size"] == train.group_size and correct.dtype == torch.bool
        assert correct.shape == (responses,)
        assert dump["advantages"] is None and "mean_advantage_abs" not in record  # no advantages: no |A|
        assert torch.allclose(dump["f"], (dump["teacher_logp"] - dump["logp_old"]) * mask, atol=1e-6)
        assert record["verifier_reward"] == pytest.approx(correct.float().mean().item())
        assert record["mean_response_len"] == pytest.approx(mask.sum(1).mean().item())
    ended = run_dir.read_status()  # (the session's end wrote its wall time after `status` was returned)
    again, _ = run(root, f"fig1__{PAIRING}__score", ["train.steps=2"])
    assert again == ended == run_dir.read_status()  # a finished scoring pass is not redone: nothing rewritten
    dumps = [torch.load(path, weights_only=True) for path in sorted((run_dir.root / "batches").glob("*.pt"))]
    assert run_dir.read_horizon() == json.loads(json.dumps(separation_curve(dumps)))  # J_H of its own batches


def test_raw_run_broadcasts_the_discounted_score_and_records_correctness(root: Path) -> None:
    status, run_dir = run(root, f"fig1__{PAIRING}__raw", ["train.steps=1", "train.dump_steps=[1]"])
    assert status["status"] == "finished" and status["method"] == "raw" and status["gamma"] == 0.99
    assert status["lam"] is None
    dump = torch.load(run_dir.root / "batches" / "step_1_rank0.pt")
    mask, f = dump["mask"], dump["f"]
    assert torch.allclose(dump["advantages"], broadcast(trajectory_scores(f, mask, 0.99), mask), atol=1e-6)
    assert run_dir.read_metrics()[0]["verifier_reward"] == pytest.approx(dump["correct"].float().mean().item())
    assert (run_dir.eval_dir / "summary.json").exists()
