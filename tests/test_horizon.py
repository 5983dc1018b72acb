"""J_H(H) on fixed responses (gropd/horizon.py): hand-computed AUCs, the chance value, a peak where designed."""

import pytest
import torch

from gropd.horizon import horizon_grid, prefix_scores, prompt_aucs, separation_curve

D = torch.float64


def t(values, dtype=D):
    return torch.tensor(values, dtype=dtype)


# Four prompts of G = 4 responses, right-padded to T = 6 (mask from the lengths).
# Prompt 1: tokens 2–3 separate (correct +1 each); token 5 of w1 (+3) undoes it.
# Prompt 2: c1 = [0, 2, −1] beats everything at H = 2; w1's 4th token (+5) beats it from H = 4.
# Prompts 3 (all correct) and 4 (all incorrect) carry no information.
# fmt: off
ROWS = [  # (f, |y|, correct), one line per prompt
    ([0, 1, 1, 0, 0, 0], 6, 1), ([0, 1, 1, 0, 0, 0], 6, 1), ([0, 0, 0, 0, 3, 0], 6, 0), ([0] * 6, 6, 0),
    ([0, 2, -1], 3, 1), ([0, 0, 0, 5], 4, 0), ([1, 0], 2, 0), ([0] * 6, 6, 0),
    ([9, 9], 2, 1), ([-9], 1, 1), ([1, 2, 3], 3, 1), ([4], 1, 1),
    ([9, 9], 2, 0), ([-9], 1, 0), ([1, 2, 3], 3, 0), ([4], 1, 0),
]
# fmt: on
HORIZONS = [0, 1, 2, 3, 4, 5, 6, 10]
# AUC by hand (pairs (c, w), ties half). Prompt 1: H ≤ 1 all tie; H = 2..4 c (1 or 2) > w (0, 0);
# H ≥ 5: c = 2 < w1 = 3, > w2 = 0. Prompt 2 (c vs w1, w2, w3): H = 1: 0 vs 0, 1, 0 → 1/3;
# H = 2: 2 vs 0, 1, 0 → 1; H = 3: 1 vs 0, 1, 0 → 5/6; H ≥ 4: 1 vs 5, 1, 0 → 1/2.
AUC_1 = [0.5, 0.5, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5]
AUC_2 = [0.5, 1 / 3, 1.0, 5 / 6, 0.5, 0.5, 0.5, 0.5]


def batch(rows, width=6, left=False):
    f = torch.zeros(len(rows), width, dtype=D)
    mask = torch.zeros(len(rows), width, dtype=D)
    for i, (values, length, _) in enumerate(rows):
        span = slice(width - length, width) if left else slice(0, length)
        f[i, span] = t((values + [0] * length)[:length])
        mask[i, span] = 1
    correct = torch.tensor([c for _, _, c in rows], dtype=torch.bool)
    return f, mask, correct


def test_prefix_scores_by_hand_for_both_paddings():
    for left in (False, True):
        f, mask, _ = batch(ROWS[4:8], left=left)
        S = prefix_scores(f, mask, HORIZONS)
        assert S.tolist() == [
            [0, 0, 2, 1, 1, 1, 1, 1],
            [0, 0, 0, 0, 5, 5, 5, 5],
            [0, 1, 1, 1, 1, 1, 1, 1],
            [0, 0, 0, 0, 0, 0, 0, 0],
        ]


def test_prefix_scores_equal_a_loop_over_each_response():
    gen = torch.Generator().manual_seed(3)
    f = torch.randn(7, 9, generator=gen, dtype=D)
    mask = torch.zeros(7, 9, dtype=D)
    for i, (start, length) in enumerate([(0, 9), (2, 7), (0, 1), (4, 5), (0, 0), (8, 1), (1, 3)]):
        mask[i, start : start + length] = 1
    horizons = [0, 1, 2, 3, 5, 8, 9, 50]
    S = prefix_scores(f, mask, horizons)
    for i in range(7):
        tokens = [f[i, j].item() for j in range(9) if mask[i, j]]
        for k, H in enumerate(horizons):
            assert S[i, k].item() == pytest.approx(sum(tokens[:H]), abs=1e-12)


def test_within_prompt_aucs_by_hand_and_uninformative_prompts_dropped():
    f, mask, correct = batch(ROWS)
    aucs = prompt_aucs(f, mask, correct, 4, HORIZONS)
    assert aucs.shape == (2, len(HORIZONS))
    assert aucs[0].tolist() == pytest.approx(AUC_1, abs=1e-15)
    assert aucs[1].tolist() == pytest.approx(AUC_2, abs=1e-15)


def curve(f, mask, correct, group_size=4):
    """separation_curve of one saved batch: J_H(H) at H = 1..the longest response."""
    return separation_curve([{"f": f, "mask": mask, "correct": correct, "group_size": group_size}])


def test_separation_peaks_where_the_early_tokens_separate():
    f, mask, correct = batch(ROWS)
    J = curve(f, mask, correct)
    assert J["horizons"] == [1, 2, 3, 4, 5, 6] and (J["informative"], J["prompts"]) == (2, 4)
    expected = [(a + b) / 2 for a, b in zip(AUC_1, AUC_2, strict=True)]  # 1/2, 5/12, 1, 11/12, 3/4, 1/2, …
    assert J["values"] == pytest.approx(expected[1:7], abs=1e-15)  # HORIZONS[1:7] = 1..6
    assert J["horizons"][max(range(6), key=J["values"].__getitem__)] == 2
    f_left, mask_left, _ = batch(ROWS, left=True)
    assert curve(f_left, mask_left, correct) == J


def test_no_separation_gives_the_chance_value():
    # the same four responses twice: correctness [1, 1, 0, 0] in prompt 1 and [0, 0, 1, 1] in prompt 2,
    # so at every H each (c, w) win of one prompt is a loss of the other: AUC_1 + AUC_2 = 1
    gen = torch.Generator().manual_seed(7)
    f = torch.randn(4, 12, generator=gen, dtype=D).repeat(2, 1)
    mask = torch.ones(8, 12, dtype=D)
    mask[[1, 5], 7:] = 0
    correct = torch.tensor([1, 1, 0, 0, 0, 0, 1, 1], dtype=torch.bool)
    assert curve(f, mask, correct)["values"] == pytest.approx([0.5] * 12, abs=1e-15)  # H = 1..12
    aucs = prompt_aucs(f, mask, correct, 4, list(range(13)))
    assert not torch.allclose(aucs[0], torch.full_like(aucs[0], 0.5))  # each prompt alone does separate
    zero = torch.zeros(8, 12, dtype=D)
    assert curve(zero, mask, correct)["values"] == [0.5] * 12  # all tie


def test_no_informative_prompt_is_undefined_and_bad_shapes_are_refused():
    f, mask, _ = batch(ROWS[8:16])
    correct = torch.tensor([1, 1, 1, 1, 0, 0, 0, 0], dtype=torch.bool)
    J = curve(f, mask, correct)
    assert J["values"] is None and (J["informative"], J["prompts"]) == (0, 2)
    with pytest.raises(ValueError, match="whole groups"):
        prompt_aucs(f, mask, correct, 3, [1])
    with pytest.raises(ValueError, match="correct must be"):
        prompt_aucs(f, mask, correct[:4], 4, [1])
    with pytest.raises(ValueError, match=">= 0"):
        prefix_scores(f, mask, [-1])


def test_horizon_grid_is_even_in_cube_root():
    assert horizon_grid(1000, 10) == [1, 8, 27, 64, 125, 216, 343, 512, 729, 1000]
    assert horizon_grid(8, 40) == list(range(1, 9))  # fine steps: every integer, no duplicates
    grid = horizon_grid(8192, 30)
    assert grid[0] == 1 and grid[-1] == 8192 and grid == sorted(set(grid)) and len(grid) <= 30
    with pytest.raises(ValueError):
        horizon_grid(0, 10)
