"""The statistics of the reports (gropd/report/stats.py) against values worked by hand, and scipy.stats as a second,
independent implementation: Welch's unpaired interval and its Welch–Satterthwaite degrees of freedom, the paired t
interval's p, Holm–Bonferroni's adjusted p-values, and the share of the teacher–student gap with its spread."""

from __future__ import annotations

import math

import pytest
from scipy import stats as scipy_stats

from gropd.report.stats import gap_share, holm, lift, t_interval, welch


def test_welch_by_hand_and_as_scipy_computes_it():
    """a = 1, 2, 3 (mean 2, s² 1); b = 4, 6, 8, 10 (mean 7, s² 20/3). se² = 1/3 + (20/3)/4 = 2; df = 2² /
    ((1/3)²/2 + (5/3)²/3) = 4 / (53/54) = 216/53."""
    interval = welch([1.0, 2.0, 3.0], [4.0, 6.0, 8.0, 10.0])
    assert interval.mean == -5.0 and interval.df == pytest.approx(216 / 53, rel=1e-12)
    assert interval.sizes == (3, 4) and interval.n == 3
    half = scipy_stats.t.ppf(0.975, 216 / 53) * math.sqrt(2)
    assert (interval.lo, interval.hi) == pytest.approx((-5 - half, -5 + half), rel=1e-12)
    scipy = scipy_stats.ttest_ind([1.0, 2.0, 3.0], [4.0, 6.0, 8.0, 10.0], equal_var=False)
    low, high = scipy.confidence_interval(0.95)
    assert (interval.lo, interval.hi, interval.p) == pytest.approx((low, high, scipy.pvalue), rel=1e-9)
    assert interval.text() == "-5.00 [-8.90, -1.10] (n=3 vs 4, Welch)"


def test_welch_with_equal_spreads_and_sizes_has_2n_minus_2_degrees_of_freedom():
    """a = 9, 11; b = 1, 3: s² 2 each, se² = 2/2 + 2/2 = 2, df = 2² / (1 + 1) = 2; t(0.975, 2) = 4.302653 (the
    t table): 8 ± 4.302653 x √2 = 8 ± 6.0849."""
    interval = welch([9.0, 11.0], [1.0, 3.0])
    assert interval.df == 2.0
    assert (interval.lo, interval.hi) == pytest.approx((8 - 4.302653 * math.sqrt(2), 8 + 4.302653 * math.sqrt(2)))
    assert interval.call == 1


def test_a_side_of_one_value_has_no_spread_and_no_p():
    one = welch([9.0, 11.0], [1.0])
    assert math.isinf(one.lo) and one.p is None and one.call == 0 and one.text() == "+9.00 (n=2 vs 1, Welch)"
    assert welch([], [1.0, 2.0]) is None


def test_the_paired_interval_carries_its_p():
    """Differences 10, 11, 12: t = 11 / (1 / √3) = 19.05 on 2 df; scipy's one-sample t test says the same p."""
    interval = t_interval([10.0, 11.0, 12.0])
    assert interval.df == 2 and interval.p == pytest.approx(scipy_stats.ttest_1samp([10, 11, 12], 0).pvalue)
    assert t_interval([5.0, 5.0]).p == 0.0 and t_interval([0.0, 0.0]).p == 1.0  # no spread at all
    assert t_interval([5.0]).p is None


def test_holm_by_hand():
    """p = .01, .04, .03, .005 (m = 4). Sorted: .005 x 4 = .02; .01 x 3 = .03; .03 x 2 = .06; .04 x 1 = .04, raised
    to .06 (adjusted p never falls). In the order given: .03, .06, .06, .02."""
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.6]) == [1.0, 1.0]  # capped at 1
    assert holm([0.01, 0.01]) == [0.02, 0.02]  # ties
    assert holm([0.2]) == [0.2] and holm([]) == []


def test_the_share_of_the_gap_carries_the_baselines_spread():
    """Trained 25, 26, 27; student before OPD 9, 10, 11; teacher 39, 40, 41 (s² 1 each, n = 3): lift L = 16, gap
    G = 30, share 16/30. Delta method: coefficients 1/G, −L/G², −(G − L)/G² = 1/30, −16/900, −14/900; variances of
    the means 1/3: se² = (900 + 256 + 196) / (810000 x 3) = 1352/2430000; df = 1352² / ((900² + 256² + 196²) / 2) =
    2 x 1827904 / 913952 = 4; t(0.975, 4) = 2.776445."""
    share = gap_share([25.0, 26.0, 27.0], [9.0, 10.0, 11.0], [39.0, 40.0, 41.0])
    half = 2.776445 * math.sqrt(1352 / 2430000)
    assert share.mean == pytest.approx(16 / 30) and share.df == pytest.approx(4.0)
    assert (share.lo, share.hi) == pytest.approx((16 / 30 - half, 16 / 30 + half), rel=1e-6)
    once = gap_share([25.0, 26.0, 27.0], [10.0], [40.0])  # each baseline evaluated once: nothing to carry
    assert once.mean == pytest.approx(16 / 30) and math.isinf(once.lo) and once.p is None


def test_the_lift_against_several_evaluations_is_welchs():
    """Against one evaluation (10): t interval of 15, 16, 17. Against 9, 10, 11: Welch, se² = 1/3 + 1/3, df = 4."""
    assert lift({0: 25.0, 1: 26.0, 2: 27.0}, 10.0) == t_interval([15.0, 16.0, 17.0])
    assert lift({0: 25.0, 1: 26.0, 2: 27.0}, [10.0]) == t_interval([15.0, 16.0, 17.0])
    several = lift({0: 25.0, 1: 26.0, 2: 27.0}, [9.0, 10.0, 11.0])
    assert several.sizes == (3, 3) and several.df == pytest.approx(4.0) and several.mean == 16.0
    assert several.hi - several.mean == pytest.approx(2.776445 * math.sqrt(2 / 3), rel=1e-6)
