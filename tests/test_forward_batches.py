"""Which rows go into which forward (gropd/model/forward_batches.py): plans worked out by hand, the same
count on every rank, and the numbers unchanged by any plan."""

from __future__ import annotations

import pytest
import torch
from toy_model import toy_qwen3
from transformers import Qwen3ForCausalLM

from gropd.model.forward_batches import even_out, forward_cost, no_grad_logprobs, plan_forwards
from gropd.model.logprobs import pack, response_logprobs

CPU = torch.device("cpu")


def random_lm(seed: int = 0) -> Qwen3ForCausalLM:
    return toy_qwen3(40, seed).eval()


def test_rows_in_forwards_by_hand() -> None:
    prompts = [[1] * 3, [1] * 2, [1] * 4, [1] * 2, [1] * 1]
    responses = [[2] * 2, [2] * 3, [2] * 1, [2] * 20, []]
    # sorted by response length: rows 4 (0), 2 (1), 0 (2), 1 (3), 3 (20)
    # budget 12: [4] 1x(1+1)=2, + row 2: 2x(4+1)=10, + row 0: 3x(4+2)=18 > 12 -> [4, 2];
    # [0] 5, + row 1: 2x(3+3)=12 -> [0, 1]; + row 3: 3x(3+20) > 12 -> [3] alone (23 > 12, it goes alone)
    assert plan_forwards(prompts, responses, 12) == [[4, 2], [0, 1], [3]]
    assert plan_forwards(prompts, responses, 10**6) == [[4, 2, 0, 1, 3]]
    assert plan_forwards(prompts, responses, 10**6, max_rows=2) == [[4, 2], [0, 1], [3]]
    with pytest.raises(ValueError, match="at least 1"):
        plan_forwards(prompts, responses, 0)


def test_shared_prompts_are_counted_once_a_forward() -> None:
    prompts = [[7, 7, 7]] * 3 + [[8, 8]] * 2
    responses = [[1] * 5, [1] * 1, [1] * 2, [1] * 1, [1] * 3]
    # one prompt x 2 + 2 rows x 3 = 8 shared; 2 x (2 + 3) = 10 packed
    assert forward_cost(prompts, responses, [3, 4], share=True) == 1 * 2 + 2 * 3
    assert forward_cost(prompts, responses, [3, 4], share=False) == 2 * (2 + 3)
    # sorted by length: rows 1 (1), 3 (1), 2 (2), 4 (3), 0 (5); all five: 2 prompts x 3 + 5 rows x 5 = 31
    assert plan_forwards(prompts, responses, 31, share_prompts=True) == [[1, 3, 2, 4, 0]]
    # budget 20: [1, 3, 2] 2 x 3 + 3 x 2 = 12, + row 4: 2 x 3 + 4 x 3 = 18, + row 0: 31 > 20
    assert plan_forwards(prompts, responses, 20, share_prompts=True) == [[1, 3, 2, 4], [0]]


def test_even_out_halves_the_largest_then_pads_with_empty_forwards() -> None:
    assert even_out([[1, 2, 3, 4], [5]], 3) == [[1, 2], [3, 4], [5]]
    assert even_out([[1, 2], [3]], 2) == [[1, 2], [3]]
    assert even_out([[1], [2]], 4) == [[1], [2], [], []]


@pytest.mark.parametrize("share", [False, True])
@pytest.mark.parametrize("budget", [14, 40, 10**6])
def test_no_grad_logprobs_equal_one_packed_forward_under_any_plan(share: bool, budget: int) -> None:
    model = random_lm()
    prompts = [[1, 2, 3]] * 3 + [[4, 5]] * 2 + [[6]]
    responses = [[7, 8], [9, 10, 11, 12], [13], [5, 5, 5, 5, 5], [], [3, 2]]
    with torch.no_grad():
        whole, whole_entropy = response_logprobs(model, pack(prompts, responses, 0, CPU), 0.9, with_entropy=True)
    calls = []
    parts, parts_entropy = no_grad_logprobs(
        model,
        prompts,
        responses,
        0,
        CPU,
        budget,
        0.9,
        with_entropy=True,
        share_prompts=share,
        forwards=lambda n: calls.append(n) or n + 2,  # two more forwards than this rank needs
    )
    assert len(calls) == 1
    # Every plan puts each value through the same operations; only the shapes of the batched matmuls differ, and a
    # BLAS may block another shape differently (MKL's AVX-512 and CUDA kernels do), reordering the sums of a dot
    # product. So the plans agree to float32 rounding, not bit for bit: within 16 x eps x the largest value (on an
    # Intel Xeon, natively: up to 1.2e-6 = 5 ulps of an entropy of 3.7); a misplaced position or mask is off by ~1.
    for got, want in ((parts, whole), (parts_entropy, whole_entropy)):
        ulps = 16 * torch.finfo(torch.float32).eps * float(want.abs().max())
        torch.testing.assert_close(got, want, rtol=0, atol=ulps)
