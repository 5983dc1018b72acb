"""How a response ends (gropd/model/rollout/base.py StopRule): stop tokens, and a base model that runs on into a
new "Question:" of its own stops there, so the answer graded is the one it gave to the question asked."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from eval.grading import Grader
from gropd.model.components import stop_rule
from gropd.model.rollout.base import SamplingSettings, finish_response
from gropd.model.rollout.hf import HFRollout
from gropd.tiny.tokenizer import build_tokenizer

TOKENIZER = build_tokenizer()
RUN_ON = " 3+4+0=7 c0\n\\boxed{7}\nQuestion: 9+9 Answer in \\boxed{}.\nAnswer: \\boxed{18}<|endoftext|>"


def decode(ids: list[int]) -> str:
    return TOKENIZER.decode(ids, skip_special_tokens=False)


def test_a_base_response_is_cut_after_the_token_that_completes_question() -> None:
    ids = TOKENIZER.encode(RUN_ON, add_special_tokens=False)
    kept, reason = finish_response(ids, stop_rule("default", TOKENIZER), decode, 200)
    assert reason == "stop" and decode(kept) == " 3+4+0=7 c0\n\\boxed{7}\nQuestion:"
    chat, chat_reason = finish_response(ids, stop_rule("nothink", TOKENIZER), decode, 200)
    assert chat_reason == "stop" and decode(chat) == RUN_ON  # chat modes end on their tokens only
    short, short_reason = finish_response(ids[:5], stop_rule("default", TOKENIZER), decode, 5)
    assert (short, short_reason) == (ids[:5], "length")


def test_the_graded_answer_is_the_one_before_the_new_question() -> None:
    ids = TOKENIZER.encode(RUN_ON, add_special_tokens=False)
    kept, _ = finish_response(ids, stop_rule("default", TOKENIZER), decode, 200)
    with Grader() as grader:
        cut, whole = grader.grade([decode(kept), RUN_ON], ["7", "7"])
    assert cut.correct and not whole.correct  # uncut, the last \boxed{} is the new question's 18


class Scripted(torch.nn.Module):
    """A 'model' that writes RUN_ON whatever it is given: logits of +20 on the script's next token."""

    def __init__(self, script: list[int], vocab: int):
        super().__init__()
        self.script, self.vocab = script, vocab
        self.config = SimpleNamespace(num_hidden_layers=1)
        self.steps = 0

    def forward(self, input_ids, attention_mask, position_ids, past_key_values, use_cache, logits_to_keep):
        token = self.script[min(self.steps, len(self.script) - 1)]
        self.steps += 1
        logits = torch.zeros(input_ids.shape[0], 1, self.vocab)
        logits[:, :, token] = 20.0
        return SimpleNamespace(logits=logits)


def test_the_sampler_stops_a_base_model_at_the_new_question() -> None:
    script = TOKENIZER.encode(RUN_ON, add_special_tokens=False)
    model = Scripted(script, len(TOKENIZER))
    engine = HFRollout(model, stop_rule("default", TOKENIZER), decode, TOKENIZER.pad_token_id, torch.device("cpu"))
    batch = engine.generate(
        [TOKENIZER.encode("Question: 3+4", add_special_tokens=False)], 2, SamplingSettings(1.0, 1.0, 200), seed=0
    )
    assert [decode(r) for r in batch.response_ids] == [" 3+4+0=7 c0\n\\boxed{7}\nQuestion:"] * 2
    assert batch.finish_reasons == ["stop", "stop"]
    assert model.steps < len(script)  # it stopped generating, not only cut afterwards
