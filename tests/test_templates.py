"""Prompt rendering for the three model modes, stop tokens and SFT targets (gropd/templates.py)."""

from __future__ import annotations

import pytest

from gropd.templates import MODES, render_prompt, render_target, stop_token_ids
from gropd.tiny.tokenizer import build_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer()


def test_modes_are_the_papers_three():
    assert MODES == ("default", "think", "nothink")


def test_default_mode_is_plain_continuation(tokenizer):
    got = render_prompt("347+285", "default", tokenizer, "Answer in \\boxed{}.")
    assert got == "Question: 347+285 Answer in \\boxed{}.\nAnswer:"


def test_think_mode_is_chat_template_without_think_block(tokenizer):
    got = render_prompt("347+285", "think", tokenizer, "Answer in \\boxed{}.")
    assert got == "<|im_start|>user\n347+285 Answer in \\boxed{}.<|im_end|>\n<|im_start|>assistant\n"


def test_nothink_mode_appends_empty_think_block(tokenizer):
    got = render_prompt("347+285", "nothink", tokenizer, "Answer in \\boxed{}.")
    assert got == (
        "<|im_start|>user\n347+285 Answer in \\boxed{}.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )


def test_empty_instruction_leaves_question_alone(tokenizer):
    assert render_prompt("1+2", "default", tokenizer, "") == "Question: 1+2\nAnswer:"


@pytest.mark.parametrize(
    "call",
    [
        lambda tok: render_prompt("1+2", "chat", tok, ""),
        lambda tok: stop_token_ids("Think", tok),
        lambda tok: render_target("w", "1", "base"),
    ],
)
def test_unknown_mode_lists_valid_modes(tokenizer, call):
    with pytest.raises(ValueError, match="default, think, nothink"):
        call(tokenizer)


def test_stop_tokens(tokenizer):
    im_end, eot = tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    assert stop_token_ids("default", tokenizer) == [eot]
    assert stop_token_ids("think", tokenizer) == [im_end, eot]
    assert stop_token_ids("nothink", tokenizer) == [im_end, eot]


def test_targets_per_mode():
    work = "1+2+0=3 c0\n\\boxed{3}"
    assert render_target(work, "3", "think") == ("<think>\n1+2+0=3 c0\n\\boxed{3}\n</think>\n\n\\boxed{3}<|im_end|>")
    assert render_target(work, "3", "nothink") == "1+2+0=3 c0\n\\boxed{3}<|im_end|>"
    assert render_target(work, "3", "default") == " 1+2+0=3 c0\n\\boxed{3}<|endoftext|>"
