"""The learning-rate schedule: factors worked out by hand."""

from __future__ import annotations

import math

import pytest

from gropd.train.loop import lr_factor


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
