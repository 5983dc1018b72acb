"""Clipped policy loss: hand-computed values, clipping bounds, masking, gradients (gropd/loss.py)."""

import math

import pytest
import torch

from gropd.loss import TOKEN_AGGREGATIONS, aggregate, clipped_policy_loss

D = torch.float64
LO, HI = 0.2, 0.28


def k3(r):
    return (r - 1) - math.log(r)


def hand_batch():
    """Row 0: A = +1, ratios 1, 1.5, .5, 2 (all response tokens).
    Row 1: A = −2, a masked first position holding −inf log-probs, then ratios 1.5, .5, 1."""
    ratios = torch.tensor([[1.0, 1.5, 0.5, 2.0], [1.0, 1.5, 0.5, 1.0]], dtype=D)
    logp_old = torch.tensor([[-1.0, -2.0, -0.5, -3.0], [-math.inf, -1.0, -1.0, -2.0]], dtype=D)
    logp_new = (logp_old + ratios.log()).requires_grad_()
    A = torch.tensor([[1.0] * 4, [-2.0] * 4], dtype=D)
    mask = torch.tensor([[1, 1, 1, 1], [0, 1, 1, 1]], dtype=D)
    return logp_new, logp_old, A, mask


# per-token losses −min(ρA, clip(ρ)A): row 0 → −1, −1.28 (clipped), −.5, −1.28 (clipped);
# row 1 → 3, 1.6 (clipped: ρ = .5 < .8 with A < 0), 2
ROW0, ROW1 = [-1.0, -1.28, -0.5, -1.28], [3.0, 1.6, 2.0]
EXPECTED = {
    "token-mean": (sum(ROW0) + sum(ROW1)) / 7,
    "seq-mean-token-mean": (sum(ROW0) / 4 + sum(ROW1) / 3) / 2,
    "seq-mean-token-sum": (sum(ROW0) + sum(ROW1)) / 2,
}


@pytest.mark.parametrize("agg", list(EXPECTED))
def test_hand_computed_loss_for_each_aggregation(agg):
    logp_new, logp_old, A, mask = hand_batch()
    loss, _ = clipped_policy_loss(logp_new, logp_old, A, mask, LO, HI, agg=agg)
    assert loss.item() == pytest.approx(EXPECTED[agg], abs=1e-12)


def test_hand_computed_stats_and_gradient():
    logp_new, logp_old, A, mask = hand_batch()
    loss, stats = clipped_policy_loss(logp_new, logp_old, A, mask, LO, HI)
    assert stats["clip_frac"].item() == pytest.approx(3 / 7, abs=1e-15)
    assert stats["ratio_mean"].item() == pytest.approx(8 / 7, abs=1e-12)
    kl = 2 * k3(1.5) + 2 * k3(0.5) + k3(2.0)
    assert stats["approx_kl"].item() == pytest.approx(kl / 7, abs=1e-12)
    assert all(s.dim() == 0 and not s.requires_grad for s in stats.values())
    loss.backward()
    # d/d logp_new of −ρA/7 is −ρA/7 on unclipped tokens; clipped and masked tokens get 0
    expected = torch.tensor([[-1.0, 0.0, -0.5, 0.0], [0.0, 3.0, 0.0, 2.0]], dtype=D) / 7
    assert torch.allclose(logp_new.grad, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("agg", list(TOKEN_AGGREGATIONS))
def test_equal_policies_give_minus_aggregated_advantage(agg):
    gen = torch.Generator().manual_seed(0)
    logp = -torch.rand(3, 5, generator=gen, dtype=D)
    A = torch.randn(3, 5, generator=gen, dtype=D)
    mask = torch.tensor([[1, 1, 1, 0, 0], [0, 1, 1, 1, 1], [0, 0, 0, 0, 1]], dtype=D)
    loss, stats = clipped_policy_loss(logp.clone(), logp, A, mask, LO, HI, agg=agg)
    rows = [A[i][mask[i].bool()] for i in range(3)]
    by_hand = {
        "token-mean": torch.cat(rows).mean(),
        "seq-mean-token-mean": torch.stack([r.mean() for r in rows]).mean(),
        "seq-mean-token-sum": torch.stack([r.sum() for r in rows]).mean(),
    }[agg]
    assert loss.item() == pytest.approx(-by_hand.item(), abs=1e-12)
    assert stats["clip_frac"].item() == 0.0 and stats["ratio_mean"].item() == 1.0
    assert stats["approx_kl"].item() == 0.0


@pytest.mark.parametrize(
    "ratio, advantage, clipped",
    [
        (1 + HI - 1e-6, 1.0, False),
        (1 + HI + 1e-6, 1.0, True),
        (1 + HI + 0.5, -1.0, False),  # a large ratio is only clipped for A > 0
        (1 - LO + 1e-6, -1.0, False),
        (1 - LO - 1e-6, -1.0, True),
        (1 - LO - 0.5, 1.0, False),  # a small ratio is only clipped for A < 0
    ],
)
def test_clipping_engages_exactly_beyond_the_bounds(ratio, advantage, clipped):
    logp_new = torch.tensor([[math.log(ratio)]], dtype=D, requires_grad=True)
    A = torch.tensor([[advantage]], dtype=D)
    loss, stats = clipped_policy_loss(logp_new, torch.zeros(1, 1, dtype=D), A, torch.ones(1, 1), LO, HI)
    loss.backward()
    assert stats["clip_frac"].item() == float(clipped)
    expected_grad = 0.0 if clipped else -advantage * ratio
    assert logp_new.grad.item() == pytest.approx(expected_grad, abs=1e-12)
    bound = 1 + HI if ratio > 1 else 1 - LO
    expected_loss = -advantage * (bound if clipped else ratio)
    assert loss.item() == pytest.approx(expected_loss, abs=1e-12)


def test_gradient_flows_only_into_logp_new_and_not_through_masked_tokens():
    gen = torch.Generator().manual_seed(1)
    logp_new = (-torch.rand(2, 4, generator=gen, dtype=D)).requires_grad_()
    logp_old = (-torch.rand(2, 4, generator=gen, dtype=D)).requires_grad_()
    A = torch.randn(2, 4, generator=gen, dtype=D).requires_grad_()
    mask = torch.tensor([[1, 1, 0, 0], [0, 1, 1, 0]])
    loss, _ = clipped_policy_loss(logp_new, logp_old, A, mask, LO, HI, agg="seq-mean-token-sum")
    loss.backward()
    assert logp_old.grad is None and A.grad is None
    assert torch.all(logp_new.grad[mask == 0] == 0)
    assert torch.all(logp_new.grad[mask == 1] != 0)


def test_empty_mask_gives_zero_loss_and_bf16_is_upcast():
    logp = torch.zeros(2, 3, dtype=torch.bfloat16, requires_grad=True)
    A, mask = torch.ones(2, 3), torch.zeros(2, 3)
    for agg in TOKEN_AGGREGATIONS:
        loss, stats = clipped_policy_loss(logp, logp.detach(), A, mask, LO, HI, agg)
        assert loss.dtype == torch.float32 and loss.item() == 0.0 and stats["ratio_mean"].item() == 0.0


def test_bad_names_and_bounds_are_rejected():
    x = torch.zeros(1, 2)
    with pytest.raises(ValueError, match="token-mean, seq-mean-token-mean, seq-mean-token-sum"):
        aggregate(x, torch.ones(1, 2), "sum")
    with pytest.raises(ValueError, match="valid: token-mean"):
        clipped_policy_loss(x, x, x, torch.ones(1, 2), LO, HI, agg="mean")
    with pytest.raises(ValueError, match="clip_low"):
        clipped_policy_loss(x, x, x, torch.ones(1, 2), 1.0, HI)
