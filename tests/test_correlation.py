"""gropd/train/correlation.py: Pearson and Spearman by hand, against scipy as a second implementation, and the
same bits whatever BLAS kernel numpy would pick (they reach no BLAS)."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from gropd.train.correlation import average_ranks, pearson, spearman


def test_pearson_and_spearman_by_hand() -> None:
    # dx = (-1, 0, 1), dy = (-1, 1, 0): Σ dx·dy = 1, Σ dx² = Σ dy² = 2 -> 1 / √4 = 0.5 exactly
    assert pearson([1, 2, 3], [1, 3, 2]) == 0.5
    assert pearson([1, 2, 3], [2, 4, 6]) == 1.0 and pearson([1, 2, 3], [6, 4, 2]) == -1.0
    # ranks of (1, 2, 2, 3): (1, 2.5, 2.5, 4); against (1, 2, 3, 4): Σ dx·dy = 4.5, Σ dx² = 4.5, Σ dy² = 5
    assert average_ranks([1, 2, 2, 3]) == [1.0, 2.5, 2.5, 4.0]
    assert spearman([1, 2, 2, 3], [10, 20, 30, 40]) == 4.5 / math.sqrt(4.5 * 5)
    # ranks of y (10, 30, 20, 40): (1, 3, 2, 4); d² = 0 + 1 + 1 + 0 -> 1 − 6·2 / (4·15) = 0.8
    assert spearman([1, 2, 3, 4], [10, 30, 20, 40]) == pytest.approx(0.8, abs=1e-15)


@pytest.mark.parametrize(
    "x, y",
    [([1.0], [2.0]), ([], []), ([1, 2, 3], [5, 5, 5]), ([0.1] * 3, [1, 2, 3]), ([1, float("nan")], [1, 2])],
)
def test_undefined_correlations_are_none(x: list[float], y: list[float]) -> None:
    assert pearson(x, y) is None and spearman(x, y) is None


def test_unequal_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="3 x values against 2 y values"):
        pearson([1, 2, 3], [1, 2])


def test_they_agree_with_scipy_to_the_last_bits_on_a_rollout_batchs_shapes() -> None:
    """scipy (another implementation) within 2e-16: scores against lengths (Pearson), against 0/1 rewards with
    ties (Spearman), 128 responses as a tiny step has."""
    rng = np.random.default_rng(7)
    for _ in range(200):
        scores = (rng.normal(size=128) * rng.uniform(0.1, 50)).tolist()
        lengths = rng.integers(1, 200, size=128).astype(float).tolist()
        rewards = rng.integers(0, 2, size=128).astype(float).tolist()
        assert abs(pearson(scores, lengths) - stats.pearsonr(scores, lengths)[0]) <= 2e-16
        assert abs(spearman(scores, rewards) - stats.spearmanr(scores, rewards)[0]) <= 2e-16


SCRIPT = """
import hashlib, random, struct
from gropd.train.correlation import pearson, spearman
rng, digest = random.Random(0), hashlib.sha256()
for _ in range(200):
    x = [rng.gauss(0, 1) for _ in range(128)]
    y = [float(rng.randint(1, 199)) for _ in range(128)]
    digest.update(struct.pack("<dd", pearson(x, y), spearman(x, y)))
print(digest.hexdigest())
"""


def test_the_same_bits_under_two_openblas_kernels() -> None:
    """OPENBLAS_CORETYPE forces numpy's BLAS kernel (scipy's pearsonr gives other last digits under Prescott and
    Haswell): these correlations do not move."""
    digests = {
        kernel: subprocess.run(
            [sys.executable, "-c", SCRIPT],
            env={**os.environ, "OPENBLAS_CORETYPE": kernel},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for kernel in ("Prescott", "Haswell")
    }
    assert len(set(digests.values())) == 1
