"""The loop's rules, each alone: the learning-rate schedule (factors worked out by hand) and the collapse rule."""

from __future__ import annotations

import math

import pytest

from gropd.config.schema import CollapseRule
from gropd.train.loop import collapse_reason, lr_factor


def test_constant_with_warmup() -> None:
    assert [lr_factor(u, 10, "constant", 4, 0.0) for u in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert lr_factor(0, 10, "constant", 0, 0.5) == 1.0


def test_linear_decays_to_the_floor() -> None:
    # total 10, floor 0.1: factor = 0.1 + 0.9 * (1 - u/10)
    assert lr_factor(0, 10, "linear", 0, 0.1) == pytest.approx(1.0)
    assert lr_factor(5, 10, "linear", 0, 0.1) == pytest.approx(0.55)
    assert lr_factor(10, 10, "linear", 0, 0.1) == pytest.approx(0.1)
    assert lr_factor(12, 10, "linear", 0, 0.1) == pytest.approx(0.1)
    # warm-up multiplies: update 1 of 4 warm-up updates at progress 0.1
    assert lr_factor(1, 10, "linear", 4, 0.0) == pytest.approx(0.5 * 0.9)


def test_cosine_matches_half_cosine() -> None:
    assert lr_factor(5, 10, "cosine", 0, 0.0) == pytest.approx(0.5)
    assert lr_factor(10, 10, "cosine", 0, 0.2) == pytest.approx(0.2)
    assert lr_factor(3, 12, "cosine", 0, 0.0) == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))


def test_unknown_schedule_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="constant, linear, cosine"):
        lr_factor(0, 10, "step", 0, 0.0)


def rule(**kw) -> CollapseRule:
    base = dict(reward_window=2, reward_fraction=0.5, reward_patience=2, len_cap_fraction=0.9, len_cap_patience=3)
    return CollapseRule(**(base | kw))


def record(step: int, reward: float, capped: float = 0.0, loss: float = 0.1) -> dict:
    return {
        "step": step,
        "verifier_reward": reward,
        "frac_at_len_cap": capped,
        "loss": loss,
        "mean_advantage_abs": 1.0,
        "grad_norm": 1.0,
    }


def test_collapse_rules() -> None:
    # moving averages (window 2) of 0.4, 0.4, 0.1, 0.1, 0.1: 0.4, 0.25, 0.1, 0.1; start 0.4, floor 0.2
    history = [record(i + 1, r) for i, r in enumerate([0.4, 0.4, 0.1, 0.1, 0.1])]
    assert collapse_reason(history[:4], rule()) is None  # 0.25 then 0.1: one step below the floor
    assert "moving average below 0.5" in collapse_reason(history, rule())
    assert "non-finite loss" in collapse_reason([record(1, 0.5, loss=float("nan"))], rule())
    capped = [record(i + 1, 0.3, capped=c) for i, c in enumerate([0.95, 0.95, 0.5, 0.95, 0.95, 0.9])]
    assert collapse_reason(capped[:5], rule()) is None
    assert "at the length cap" in collapse_reason(capped, rule())
    assert collapse_reason([record(i + 1, 0.0) for i in range(9)], rule()) is None  # start 0: rule cannot fire
