"""Truncated importance sampling (issue 64, item 7(c); beyond the paper, off by default): the weight
w_t = min(π_S,old / π_vllm, C) by hand, the weighted surrogate's loss and gradient by hand, and the config key that
switches it on without changing any recorded run's hash."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from gropd.config import ConfigError, load_manifests
from gropd.config.resolve import config_hash, data_hash, resolve_run
from gropd.loss import clipped_policy_loss, truncated_is_weights

REPO = Path(__file__).resolve().parents[1]


def test_the_weight_is_the_ratio_of_the_two_policies_truncated_at_the_cap() -> None:
    """π_S,old = 0.5, 0.2, 0.3 against vLLM's 0.25, 0.4, 0.3: ratios 2, 0.5, 1; at C = 1.5 the first is cut to 1.5;
    the padding position (mask 0, log-probs -inf there) weighs 0."""
    old = torch.tensor([[math.log(0.5), math.log(0.2), math.log(0.3), -math.inf]])
    sampler = torch.tensor([[math.log(0.25), math.log(0.4), math.log(0.3), -math.inf]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    w = truncated_is_weights(old, sampler, mask, 1.5)
    assert torch.allclose(w, torch.tensor([[1.5, 0.5, 1.0, 0.0]]), atol=1e-6)
    assert torch.allclose(truncated_is_weights(old, sampler, mask, 10.0), torch.tensor([[2.0, 0.5, 1.0, 0.0]]))
    with pytest.raises(ValueError, match="positive"):
        truncated_is_weights(old, sampler, mask, 0.0)


def test_the_weighted_surrogate_and_its_gradient_by_hand() -> None:
    """At ρ = 1 (logp_new = logp_old) with A = (1, -2) the per-token terms are -A = (-1, 2); weighted by (1.5, 0.5)
    they are (-1.5, 1); token-mean: -0.25. d/d logp_new of -w·A·ρ at ρ = 1 is -w·A / 2 tokens = (-0.75, 0.5).
    With no weights the loss is the paper's, bit for bit as with weights of 1."""
    old = torch.tensor([[-1.0, -2.0]])
    new = old.clone().requires_grad_(True)
    advantages, mask = torch.tensor([[1.0, -2.0]]), torch.ones(1, 2)
    loss, stats = clipped_policy_loss(new, old, advantages, mask, 0.2, 0.28, "token-mean", torch.tensor([[1.5, 0.5]]))
    loss.backward()
    assert loss.item() == pytest.approx(-0.25) and stats["tis_weight_mean"].item() == pytest.approx(1.0)
    assert torch.allclose(new.grad, torch.tensor([[-0.75, 0.5]]))
    plain, plain_stats = clipped_policy_loss(old, old, advantages, mask, 0.2, 0.28, "token-mean")
    ones, _ = clipped_policy_loss(old, old, advantages, mask, 0.2, 0.28, "token-mean", torch.ones(1, 2))
    assert plain.item() == pytest.approx(0.5) and torch.equal(plain, ones) and "tis_weight_mean" not in plain_stats


def tiny_run(*overrides: str):
    values = {"kind": "train", "grid": "table1", "pairing": "I4nothink-I1.7nothink", "method": "gropd", "run_id": "t"}
    return resolve_run(None, "tiny", load_manifests(REPO / "experiments"), list(overrides), entry_values=values)


def test_the_option_is_off_by_default_and_out_of_every_recorded_hash() -> None:
    """train.tis_cap (and the other keys added with it) at its default leaves the hash a config.yaml without the
    keys gives; set, it is a new setting; with the sampler's own log-probs as π_S,old (the tiny profile's) it is
    refused."""
    run = tiny_run()
    assert (run.train.tis_cap, run.train.dynamic_batch, run.train.balance_ranks) == (None, False, False)
    recorded = run.model_dump(mode="json")
    for key in ("tis_cap", "dynamic_batch", "balance_ranks"):
        del recorded["train"][key]  # a run recorded before the keys existed
    assert config_hash(run) == data_hash(recorded)
    recompute = tiny_run("backend.old_logprobs=recompute")  # the tiny profile's π_S,old is its sampler's own
    assert config_hash(tiny_run("backend.old_logprobs=recompute", "train.tis_cap=2.0")) != config_hash(recompute)
    assert config_hash(tiny_run("train.balance_ranks=true")) != config_hash(run)
    with pytest.raises(ConfigError, match="tis_cap"):
        tiny_run("train.tis_cap=2.0")
    with pytest.raises(ConfigError):
        tiny_run("train.tis_capp=2.0")


@pytest.mark.slow
def test_a_tiny_step_weights_each_token_by_its_two_log_probs(tmp_path: Path, monkeypatch) -> None:
    """On the tiny world with π_S,old recomputed (the transformers sampler reports its own log-probs too), the
    rollout carries w = min(exp(log π_S,old − log π_sampler), C) on its response tokens, and a micro-batch's loss is
    the surrogate weighted by it; without the key the rollout carries none."""
    from tiny_runs import project, tiny_config

    from gropd.record.run_dir import RunDir
    from gropd.runs.pipeline import open_run_dir
    from gropd.train.loop import build_context, local_questions, make_accelerator
    from gropd.train.step import _micro_batch_loss, collect_rollout, rows_tensor

    run_id = "table1__I4nothink-I1.7nothink__gropd"
    root = project(tmp_path)
    monkeypatch.chdir(root)
    config = tiny_config(root, run_id, ["train.steps=1", "backend.old_logprobs=recompute", "train.tis_cap=1.01"])
    manifests = load_manifests(root / "experiments")
    run_dir = RunDir(root / "results" / "tiny" / run_id)
    open_run_dir(config, manifests, run_dir)
    accelerator = make_accelerator(config, run_dir.root)
    ctx, sampler = build_context(config, manifests, accelerator)
    rollout = collect_rollout(ctx, config, local_questions(sampler, config, 1, accelerator), seed=3)
    mask = rollout.packed.response_mask
    width = mask.shape[1]
    sampled = rows_tensor(rollout.batch.sampler_logprobs, width, torch.device("cpu"))
    by_hand = torch.clamp(torch.exp(rollout.logp_old - sampled), max=1.01) * mask
    torch.testing.assert_close(rollout.is_weights, by_hand, rtol=1e-6, atol=1e-7)
    assert (rollout.is_weights <= 1.01).all() and rollout.is_weights[mask.bool()].min() > 0
    rows = [0, 5]
    loss, stats = _micro_batch_loss(ctx, config, rollout, rows)
    index = torch.tensor(rows)
    new = rollout.logp_old[index]  # the model has not moved: the recompute is π_θ
    want, _ = clipped_policy_loss(
        new, new, rollout.advantages[index], mask[index], 0.2, 0.28, "token-mean", by_hand[index]
    )
    assert loss.item() == pytest.approx(want.item(), rel=1e-4, abs=1e-6) and "tis_weight_mean" in stats
    plain = tiny_config(root, run_id, ["train.steps=1", "backend.old_logprobs=recompute"])
    assert collect_rollout(ctx, plain, local_questions(sampler, plain, 2, accelerator), seed=3).is_weights is None
