"""The trainer's small steps, each alone: packing, log-probs, sampling seeds, the prompt sampler, correlations."""

from __future__ import annotations

import pytest
import torch
from toy_model import toy_qwen3
from transformers import Qwen3ForCausalLM

from eval.suites import Question
from gropd.model.logprobs import pack, response_logprobs
from gropd.model.rollout.base import SamplingSettings, StopRule
from gropd.model.rollout.hf import HFRollout
from gropd.train.correlation import pearson, spearman
from gropd.train.prompts import PromptSampler

CPU = torch.device("cpu")


def tiny_lm(seed: int = 0) -> Qwen3ForCausalLM:
    return toy_qwen3(24, seed).eval()


def test_packed_logprobs_equal_unpadded_forward() -> None:
    model = tiny_lm()
    prompts, responses = [[1, 2, 3], [4, 5], [6]], [[7, 8], [9, 10, 11, 12], [13]]
    batch = pack(prompts, responses, pad_id=0, device=CPU)
    with torch.no_grad():
        logp, entropy = response_logprobs(model, batch, with_entropy=True)
    for row, (prompt, response) in enumerate(zip(prompts, responses, strict=True)):
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([prompt + response])).logits[0].log_softmax(-1)
        for t, token in enumerate(response):
            assert logp[row, t].item() == pytest.approx(logits[len(prompt) - 1 + t, token].item(), abs=1e-5)
            dist = logits[len(prompt) - 1 + t]
            assert entropy[row, t].item() == pytest.approx(-(dist.exp() * dist).sum().item(), abs=1e-5)
        assert batch.response_mask[row].sum().item() == len(response)
        assert logp[row, len(response) :].abs().sum().item() == 0


def letters(ids: list[int]) -> str:
    return "".join(chr(ord("a") + i) for i in ids)


def test_hf_rollout_is_seeded_groups_prompts_and_stops() -> None:
    engine = HFRollout(tiny_lm(), StopRule((23,)), letters, pad_id=0, device=CPU)
    sampling = SamplingSettings(temperature=1.0, top_p=1.0, max_new_tokens=6)
    first = engine.generate([[1, 2, 3], [4]], n=3, sampling=sampling, seed=5)
    again = engine.generate([[1, 2, 3], [4]], n=3, sampling=sampling, seed=5)
    assert first.response_ids == again.response_ids
    assert first.prompt_ids == [[1, 2, 3]] * 3 + [[4]] * 3
    for response, reason in zip(first.response_ids, first.finish_reasons, strict=True):
        assert 1 <= len(response) <= 6
        assert (reason == "stop") == (response[-1] == 23) and 23 not in response[:-1]
        assert reason == "stop" or len(response) == 6


def test_prompt_sampler_resumes_exactly_and_covers_an_epoch() -> None:
    pool = [Question(str(i), f"q{i}", str(i)) for i in range(7)]
    sampler = PromptSampler(pool, seed=3)
    first = [q.id for q in sampler.next(5)]
    state = sampler.state_dict()
    rest = [q.id for q in sampler.next(9)]
    resumed = PromptSampler(pool, seed=3)
    resumed.load_state_dict(state)
    assert [q.id for q in resumed.next(9)] == rest
    assert sorted(first + rest[:2]) == [str(i) for i in range(7)]  # one epoch = each prompt once


def test_correlations_by_hand() -> None:
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [1, 1, 1]) is None
    # ranks of x: 1,2,3,4; ranks of y (10,30,20,40): 1,3,2,4 -> d^2 = 0+1+1+0 = 2 -> 1 - 6*2/(4*15) = 0.8
    assert spearman([1, 2, 3, 4], [10, 30, 20, 40]) == pytest.approx(0.8)
