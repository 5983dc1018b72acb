"""Credit assignment: hand-computed examples and hypothesis properties (gropd/credit.py)."""

import math

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gropd.credit import (
    CREDIT_RULES,
    CreditSettings,
    broadcast,
    calibrated_credit,
    group_stats,
    opd_advantages,
    pressure,
    token_advantages,
    token_feedback,
    trajectory_scores,
    without_format_tokens,
)

D = torch.float64
INF = float("inf")


def degenerate_groups(S, group_size, std="unbiased", sigma_floor=1e-5):
    """The degenerate-group mask `[B//G]` calibrated_credit returns with these settings."""
    return calibrated_credit(S, CreditSettings(group_size=group_size, std=std, sigma_floor=sigma_floor))[1]


def gropd_advantages(S, group_size, lam, eps=1e-6, std="unbiased", *, sigma_floor=1e-5, degenerate="zero"):
    """A_i of GR-OPD `[B]` (calibrated_credit with these settings)."""
    settings = CreditSettings(group_size, lam=lam, eps=eps, std=std, sigma_floor=sigma_floor, degenerate=degenerate)
    return calibrated_credit(S, settings)[0]


def t(values, dtype=D):
    return torch.tensor(values, dtype=dtype)


# --------------------------------------------------------------------------- token feedback


def test_token_feedback_is_teacher_minus_student_and_zero_on_padding():
    teacher = t([[-1.0, -2.0, -INF], [-INF, -0.5, -0.25]])
    student = t([[-1.5, -1.0, float("nan")], [-3.0, -0.5, -1.0]])
    mask = t([[1, 1, 0], [0, 1, 1]])
    f = token_feedback(teacher, student, mask)
    assert torch.equal(f, t([[0.5, -1.0, 0.0], [0.0, 0.0, 0.75]]))


def test_token_feedback_carries_no_gradient():
    student = t([[-1.0, -2.0]]).requires_grad_()
    f = token_feedback(t([[-0.5, -0.5]]), student, t([[1, 1]]))
    assert not f.requires_grad


# --------------------------------------------------------------------------- trajectory scores


def test_trajectory_scores_discount_counts_from_first_response_token():
    f = t([[1.0, 2.0, 4.0, 99.0], [99.0, 1.0, 2.0, 4.0], [8.0, 99.0, 99.0, 99.0]])
    mask = t([[1, 1, 1, 0], [0, 1, 1, 1], [1, 0, 0, 0]])
    # γ = .5: 1·1 + .5·2 + .25·4 = 3 for both paddings; the single token keeps weight 1.
    assert torch.allclose(trajectory_scores(f, mask, 0.5), t([3.0, 3.0, 8.0]), rtol=0, atol=1e-15)
    # γ = .99: 1 + .99·2 + .9801·4 = 6.9004
    assert torch.allclose(trajectory_scores(f, mask, 0.99), t([6.9004, 6.9004, 8.0]), rtol=0, atol=1e-12)
    assert torch.equal(trajectory_scores(f, mask, 1.0), t([7.0, 7.0, 8.0]))


def test_trajectory_scores_accepts_bool_mask_and_rejects_bad_gamma():
    f = t([[1.0, 1.0]])
    assert torch.equal(trajectory_scores(f, torch.tensor([[True, False]]), 0.5), t([1.0]))
    for gamma in (0.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="gamma"):
            trajectory_scores(f, t([[1, 1]]), gamma)


# --------------------------------------------------------------------------- group statistics

S_TWO_GROUPS = t([1.0, 3.0, 2.0, 6.0])  # groups [1, 3] (μ 2) and [2, 6] (μ 4)


def test_group_stats_both_conventions():
    mu, sigma = group_stats(S_TWO_GROUPS, 2, "population")
    assert torch.equal(mu, t([2.0, 4.0])) and torch.equal(sigma, t([1.0, 2.0]))
    mu, sigma = group_stats(S_TWO_GROUPS, 2, "unbiased")
    assert torch.allclose(sigma, t([math.sqrt(2), 2 * math.sqrt(2)]), rtol=0, atol=1e-15)
    mu, sigma = group_stats(t([0.0, 3.0, 6.0]), 3, "unbiased")  # deviations −3, 0, 3
    assert mu.item() == 3.0 and sigma.item() == pytest.approx(3.0, abs=1e-15)  # sqrt(18 / 2)
    _, sigma = group_stats(t([0.0, 3.0, 6.0]), 3, "population")
    assert sigma.item() == pytest.approx(math.sqrt(6.0), abs=1e-15)  # sqrt(18 / 3)


def test_group_stats_rejects_indivisible_batch_and_unknown_std():
    with pytest.raises(ValueError, match="not divisible by group_size=3"):
        group_stats(S_TWO_GROUPS, 3)
    with pytest.raises(ValueError, match="unbiased, population"):
        group_stats(S_TWO_GROUPS, 2, "sample")


def test_group_of_one_is_finite_and_degenerate_under_bessel():
    mu, sigma = group_stats(t([5.0, -1.0]), 1, "unbiased")
    assert torch.equal(mu, t([5.0, -1.0])) and torch.equal(sigma, t([0.0, 0.0]))
    assert degenerate_groups(t([5.0, -1.0]), 1, "unbiased", sigma_floor=0.0).tolist() == [True, True]
    A = gropd_advantages(t([5.0, -1.0]), 1, lam=0.5)
    assert torch.equal(A, t([0.0, 0.0]))


# --------------------------------------------------------------------------- GR-OPD advantages


def test_gropd_advantages_population_std_lambda_quarter():
    # group 1: ((∓1) + .25·2) / 1 → −.5, 1.5 ; group 2: ((∓2) + .25·4) / 2 → −.5, 1.5
    A = gropd_advantages(S_TWO_GROUPS, 2, lam=0.25, eps=0.0, std="population")
    assert torch.equal(A, t([-0.5, 1.5, -0.5, 1.5]))
    A = gropd_advantages(S_TWO_GROUPS, 2, lam=0.25, eps=1e-6, std="population")
    expected = t([-0.5 / (1 + 1e-6), 1.5 / (1 + 1e-6), -1.0 / (2 + 1e-6), 3.0 / (2 + 1e-6)])
    assert torch.allclose(A, expected, rtol=0, atol=1e-15)


def test_gropd_advantages_unbiased_std_each_lambda():
    S = t([0.0, 3.0, 6.0])  # μ 3, unbiased σ 3
    expected = {0.0: [-1.0, 0.0, 1.0], 0.25: [-0.75, 0.25, 1.25], 1.0: [0.0, 1.0, 2.0]}
    for lam, values in expected.items():
        A = gropd_advantages(S, 3, lam=lam, eps=0.0, std="unbiased")
        assert torch.allclose(A, t(values), rtol=0, atol=1e-15), lam
    A = gropd_advantages(S, 3, lam=0.0, eps=1e-6)
    assert torch.allclose(A, t([-3.0, 0.0, 3.0]) / (3 + 1e-6), rtol=0, atol=1e-15)


def test_degenerate_group_rules():
    S = t([2.0, 2.0, 1.0, 3.0])  # group 1 identical (σ 0), group 2 μ 2, unbiased σ √2
    assert degenerate_groups(S, 2).tolist() == [True, False]
    zero = gropd_advantages(S, 2, lam=0.25)
    s2 = math.sqrt(2) + 1e-6
    assert torch.allclose(zero, t([0.0, 0.0, -0.5 / s2, 1.5 / s2]), rtol=0, atol=1e-15)
    keep = gropd_advantages(S, 2, lam=0.25, degenerate="keep")
    assert keep[:2].tolist() == pytest.approx([5e5, 5e5], rel=1e-12)  # .25·2 / 1e-6
    assert torch.equal(keep[2:], zero[2:])
    # a floor above the group's σ marks it too; below it does not
    assert degenerate_groups(S, 2, sigma_floor=2.0).tolist() == [True, True]
    assert degenerate_groups(t([1.0, 1.001]), 2, "population", sigma_floor=1e-4).tolist() == [False]
    with pytest.raises(ValueError, match="zero, keep"):
        gropd_advantages(S, 2, lam=0.25, degenerate="drop")


# --------------------------------------------------------------------------- OPD, broadcast


def test_opd_advantages_and_broadcast():
    f = t([[0.5, -1.0, 7.0], [7.0, 2.0, 0.25]])
    mask = t([[1, 1, 0], [0, 1, 1]])
    assert torch.equal(opd_advantages(f, mask), t([[0.5, -1.0, 0.0], [0.0, 2.0, 0.25]]))
    assert torch.equal(broadcast(t([3.0, -2.0]), mask), t([[3.0, 3.0, 0.0], [0.0, -2.0, -2.0]]))


# --------------------------------------------------------------------------- pressure


def test_pressure_hand_example_and_degenerate_groups_left_out():
    # groups [1, 3] (|μ| 2, σ 1) and [2, 6] (4, 2), population: P = (2 + 2) / 2 = 2
    normalised, retained = pressure(S_TWO_GROUPS, 2, lam=0.5, eps=1e-12, std="population")
    assert normalised.item() == pytest.approx(2.0, abs=1e-10)
    assert retained.item() == pytest.approx(1.0, abs=1e-10)
    # unbiased: (2/√2 + 4/(2√2)) / 2 = √2
    normalised, _ = pressure(S_TWO_GROUPS, 2, lam=0.5, eps=1e-12)
    assert normalised.item() == pytest.approx(math.sqrt(2), abs=1e-10)
    # identical responses [2, 2]: no relative signal, left out; [1, 3] alone gives 2 / (√2 + ε)
    normalised, retained = pressure(t([2.0, 2.0, 1.0, 3.0]), 2, lam=0.25)
    assert normalised.item() == pytest.approx(2 / (math.sqrt(2) + 1e-6), rel=1e-12)
    assert retained.item() == pytest.approx(0.25 * normalised.item(), rel=1e-15)
    # a σ just above the floor still counts: [2, 2 + 4e-5] has σ = √2·2e-5 > 1e-5 x |μ| = 2.00002e-5;
    # [2, 2 + 2e-5] has σ = √2·1e-5 < 2.00001e-5: left out
    normalised, _ = pressure(t([2.0, 2.0 + 4e-5]), 2, lam=1.0)
    assert normalised.item() == pytest.approx(2.00002 / (math.sqrt(2) * 2e-5 + 1e-6), rel=1e-5)
    assert math.isnan(pressure(t([2.0, 2.0 + 2e-5]), 2, lam=1.0)[0].item())
    normalised, _ = pressure(t([4.0, -2.0]), 1, lam=1.0)  # G = 1, Bessel: σ undefined, every group left out
    assert math.isnan(normalised.item())
    with pytest.raises(ValueError, match="eps > 0"):
        pressure(S_TWO_GROUPS, 2, lam=0.5, eps=0.0)


def test_pressure_matches_paper_table2_relation():
    S = t([0.3, -1.2, 2.0, 0.7, 5.0, 4.1, 6.2, 3.3])
    normalised, retained = pressure(S, 4, lam=0.5)
    assert retained.item() == pytest.approx(0.5 * normalised.item(), rel=1e-15)


# --------------------------------------------------------------------------- dispatch by name


def test_token_advantages_dispatches_every_rule_with_one_signature():
    f = t([[1.0, 2.0, 0.0], [0.0, 0.0, 4.0], [2.0, 2.0, 0.0], [0.0, 1.0, 1.0]])
    mask = t([[1, 1, 0], [0, 0, 1], [1, 1, 0], [0, 1, 1]])
    settings = CreditSettings(group_size=2, gamma=1.0, lam=0.0, eps=0.0, std="population", sigma_floor=1e-6)
    A, stats = token_advantages("gropd", f, mask, settings)
    # scores [3, 4 | 4, 2]; group 1: μ 3.5, σ .5 → −1, 1; group 2: μ 3, σ 1 → 1, −1
    assert torch.equal(A, t([[-1.0, -1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0], [0.0, -1.0, -1.0]]))
    assert stats == {"degenerate_groups": 0}
    A, stats = token_advantages("opd", f, mask, settings)
    assert torch.equal(A, f) and stats == {"degenerate_groups": 0}
    f_same = t([[1.0, 1.0], [1.0, 1.0]])
    _, stats = token_advantages("gropd", f_same, torch.ones(2, 2), settings)
    assert stats == {"degenerate_groups": 1}
    with pytest.raises(ValueError, match="gropd, opd, raw, constant"):
        token_advantages("grpo", f, mask, settings)
    assert set(CREDIT_RULES) == {"gropd", "opd", "raw", "constant"}


def test_constant_rule_is_minus_c_on_every_response_token_and_zero_elsewhere():
    f = t([[1.0, -9.0, 5.0], [0.0, 3.0, -2.0]])
    mask = t([[1, 1, 0], [0, 1, 1]])
    A, stats = token_advantages("constant", f, mask, CreditSettings(group_size=2, constant=0.75))
    assert torch.equal(A, t([[-0.75, -0.75, 0.0], [0.0, -0.75, -0.75]])) and stats == {"degenerate_groups": 0}
    # the teacher is not in it: any other feedback gives the same advantages
    assert torch.equal(token_advantages("constant", -3 * f + 1, mask, CreditSettings(2, constant=0.75))[0], A)
    for c in (None, 0.0, -1.0):
        with pytest.raises(ValueError, match="c > 0"):
            token_advantages("constant", f, mask, CreditSettings(group_size=2, constant=c))


def test_format_tokens_are_the_first_token_and_the_stop_token():
    f = t([[1.0, 2.0, 3.0, 4.0], [9.0, 5.0, 6.0, 7.0], [8.0, 0.0, 0.0, 0.0], [1.0, 2.0, 3.0, 0.0]])
    mask = t([[1, 1, 1, 1], [0, 1, 1, 1], [1, 0, 0, 0], [1, 1, 1, 0]])
    stopped = torch.tensor([True, True, True, False])  # the last response hit the length cap: no stop token
    assert torch.equal(
        without_format_tokens(f, mask, stopped),
        t([[0.0, 2.0, 3.0, 0.0], [9.0, 0.0, 6.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 2.0, 3.0, 0.0]]),
    )


def test_raw_rule_broadcasts_the_discounted_score_without_group_calibration():
    f = t([[1.0, 2.0, 0.0], [0.0, 0.0, 4.0], [2.0, 2.0, 0.0], [0.0, 1.0, -1.0]])
    mask = t([[1, 1, 0], [0, 0, 1], [1, 1, 0], [0, 1, 1]])
    # γ = .5: S = [1 + .5·2, 4, 2 + .5·2, 1 + .5·(−1)] = [2, 4, 3, .5]; no μ subtracted, no σ divided
    A, stats = token_advantages("raw", f, mask, CreditSettings(group_size=2, gamma=0.5))
    assert torch.equal(A, t([[2.0, 2.0, 0.0], [0.0, 0.0, 4.0], [3.0, 3.0, 0.0], [0.0, 0.5, 0.5]]))
    assert stats == {"degenerate_groups": 0}
    # identical responses (σ = 0) are not degenerate for the raw score: each token still gets S_i = 2
    A, stats = token_advantages("raw", t([[1.0, 1.0], [1.0, 1.0]]), torch.ones(2, 2), CreditSettings(2, gamma=1.0))
    assert torch.equal(A, t([[2.0, 2.0], [2.0, 2.0]])) and stats == {"degenerate_groups": 0}


# --------------------------------------------------------------------------- properties

SCORE = st.floats(min_value=-50.0, max_value=50.0, allow_nan=False)


@st.composite
def grouped_scores(draw, max_groups=4, max_group_size=6, min_group_size=2):
    G = draw(st.integers(min_group_size, max_group_size))
    n = draw(st.integers(1, max_groups))
    values = draw(st.lists(SCORE, min_size=G * n, max_size=G * n))
    return t(values), G


def _min_sigma(S, G, std):
    return group_stats(S, G, std)[1].min().item()


FAST = settings(max_examples=60, deadline=None)


@FAST
@given(grouped_scores(), st.sampled_from(["unbiased", "population"]))
def test_lambda_zero_gives_zero_mean_in_every_group(data, std):
    S, G = data
    A = gropd_advantages(S, G, lam=0.0, std=std).reshape(-1, G)
    assert torch.allclose(A.mean(dim=1), torch.zeros(A.shape[0], dtype=D), atol=1e-9)


@FAST
@given(grouped_scores(), st.sampled_from(["unbiased", "population"]))
def test_lambda_one_gives_scores_over_sigma(data, std):
    S, G = data
    _, sigma = group_stats(S, G, std)
    A = gropd_advantages(S, G, lam=1.0, std=std, degenerate="keep")
    expected = S / (sigma.repeat_interleave(G) + 1e-6)
    assert torch.allclose(A, expected, rtol=1e-12, atol=1e-9)


@FAST
@given(st.integers(1, 4), st.integers(1, 7), st.data())
def test_gamma_one_is_the_plain_masked_sum(B, T, data):
    f = t(data.draw(st.lists(SCORE, min_size=B * T, max_size=B * T))).reshape(B, T)
    mask = t(data.draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=B * T, max_size=B * T)))
    mask = mask.reshape(B, T)
    assert torch.allclose(trajectory_scores(f, mask, 1.0), (f * mask).sum(dim=1), rtol=0, atol=1e-12)


@FAST
@given(grouped_scores(), st.floats(0.1, 10.0), st.sampled_from(["unbiased", "population"]))
def test_lambda_zero_is_invariant_to_scaling_feedback(data, c, std):
    """Scaling f by c scales S, μ, σ by c (γ-discounting is linear). With λ = 0,
    A = z·σ/(σ+ε) for the exact z-score z, so |A − z| ≤ |z|·ε/σ and
    |A(cS) − A(S)| ≤ 2·|z|·ε / min(σ, cσ), with |z| < √G."""
    S, G = data
    sigma_min = _min_sigma(S, G, std)
    assume(sigma_min > 1e-3)
    A, A_c = gropd_advantages(S, G, 0.0, std=std), gropd_advantages(c * S, G, 0.0, std=std)
    tol = 2 * math.sqrt(G) * 1e-6 / min(sigma_min, c * sigma_min) + 1e-12
    assert torch.allclose(A_c, A, rtol=0, atol=tol)


@FAST
@given(grouped_scores(), st.floats(-100.0, 100.0), st.data())
def test_lambda_zero_is_invariant_to_shifting_one_group(data, shift, pick):
    S, G = data
    assume(_min_sigma(S, G, "unbiased") > 1e-3)
    g = pick.draw(st.integers(0, S.shape[0] // G - 1))
    shifted = S.clone()
    shifted[g * G : (g + 1) * G] += shift
    A, A_s = gropd_advantages(S, G, 0.0), gropd_advantages(shifted, G, 0.0)
    # rounding of S + shift is ~1e-14 absolute; divided by σ > 1e-3
    assert torch.allclose(A_s, A, rtol=0, atol=1e-9)


@FAST
@given(grouped_scores(min_group_size=1), st.floats(0.0, 1.0), st.randoms(use_true_random=False))
def test_results_do_not_depend_on_group_order(data, lam, rng):
    S, G = data
    n = S.shape[0] // G
    order = list(range(n))
    rng.shuffle(order)
    rows = torch.tensor([g * G + j for g in order for j in range(G)])
    A = gropd_advantages(S, G, lam)
    assert torch.equal(gropd_advantages(S[rows], G, lam), A[rows])
    assert torch.equal(degenerate_groups(S[rows], G), degenerate_groups(S, G)[torch.tensor(order)])
    assert pressure(S[rows], G, lam)[0].item() == pytest.approx(pressure(S, G, lam)[0].item(), rel=1e-12, nan_ok=True)


def test_degenerate_floor_is_relative_to_the_groups_scale():
    # identical responses at S ≈ -85 whose scores differ by float noise: σ ≈ 1.3e-5 passes an absolute floor of
    # 1e-6 but not the relative one (1e-5 x 85 = 8.5e-4); a group differing by one token (σ ~ 0.3) is kept
    noise = t([-85.0, -85.00001, -84.99998, -85.00002, -85.0, -84.99999, -85.00001, -85.00002])
    varied = t([-85.0, -85.4, -84.7, -85.0, -85.2, -84.9, -85.1, -85.3])
    assert 1e-6 < float(group_stats(noise, 8)[1][0]) < 1e-4
    assert degenerate_groups(torch.cat([noise, varied]), 8, sigma_floor=1e-5).tolist() == [True, False]
    # below |μ| = 1 the floor is absolute: σ 5e-6 at μ 0.5 is degenerate, σ 2e-5 is not
    assert degenerate_groups(t([0.5 - 5e-6, 0.5 + 5e-6]), 2, "population", sigma_floor=1e-5).tolist() == [True]
    assert degenerate_groups(t([0.5 - 2e-5, 0.5 + 2e-5]), 2, "population", sigma_floor=1e-5).tolist() == [False]
    # the pressure proxies leave the noise group out: only the varied group's |μ| / σ counts
    normalised, retained = pressure(torch.cat([noise, varied]), 8, lam=0.25, sigma_floor=1e-5)
    _, sigma_varied = group_stats(varied, 8)
    assert float(normalised) == pytest.approx(85.075 / (float(sigma_varied[0]) + 1e-6), rel=1e-6)
    assert float(retained) == pytest.approx(0.25 * float(normalised), rel=1e-12)
