"""Prompt rendering for every model mode, in one place, for both profiles.

Three modes (docs/DESIGN.md §3; the paper's Table 6):

    default   a base model, plain continuation, no chat template:
                  "Question: {question} {instruction}\\nAnswer:"
    think     Qwen3 chat template, user message "{question} {instruction}",
              `enable_thinking=True` (the generation prompt ends "<|im_start|>assistant\\n";
              the model opens its own "<think>" block)
    nothink   the same chat template with `enable_thinking=False` (Qwen3 appends the empty
              think block "<think>\\n\\n</think>\\n\\n" to the generation prompt)

Chat modes go through `tokenizer.apply_chat_template`, so a real Qwen3 tokenizer and the
tiny one render alike. `render_target` is the response a model of each mode is expected
to write (used to build the tiny world's SFT targets); the prompt is never part of it.
"""

from __future__ import annotations

from typing import Any

MODES = ("default", "think", "nothink")

ENDOFTEXT = "<|endoftext|>"
IM_END = "<|im_end|>"


def check_mode(mode: str) -> str:
    """Return `mode` if it is one of MODES, else raise ValueError listing the valid ones."""
    if mode not in MODES:
        raise ValueError(f"unknown model mode {mode!r}; valid modes: {', '.join(MODES)}")
    return mode


def user_message(question: str, instruction: str) -> str:
    """The question text a model sees in every mode: "{question} {instruction}"."""
    return f"{question} {instruction}" if instruction else question


def render_prompt(question: str, mode: str, tokenizer: Any, instruction: str) -> str:
    """The prompt text for `question` in `mode` (see the module docstring for the formats)."""
    check_mode(mode)
    message = user_message(question, instruction)
    if mode == "default":
        return f"Question: {message}\nAnswer:"
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": message}],
        tokenize=False,
        add_generation_prompt=True,
        enable_thinking=mode == "think",
    )


def stop_strings(mode: str) -> tuple[str, ...]:
    """Text that ends a response besides its stop tokens: a base model (default mode) that runs on into a
    new "Question:" of its own stops there (StopRule keeps the token that completes it; the grader then
    reads the answer before it); chat modes stop on their tokens only."""
    check_mode(mode)
    return ("Question:",) if mode == "default" else ()


def stop_token_ids(mode: str, tokenizer: Any) -> list[int]:
    """Token ids that end a response: chat modes `<|im_end|>` and `<|endoftext|>`; default `<|endoftext|>`."""
    check_mode(mode)
    stops = [ENDOFTEXT] if mode == "default" else [IM_END, ENDOFTEXT]
    return [int(tokenizer.convert_tokens_to_ids(token)) for token in stops]


def render_target(work: str, answer: str, mode: str) -> str:
    """The response text a model of `mode` should write after its prompt, stop token included.

        think     "<think>\\n{work}\\n</think>\\n\\n\\boxed{answer}<|im_end|>"
        nothink   "{work}<|im_end|>"          (the empty think block is already in the prompt)
        default   " {work}<|endoftext|>"      (continues "Answer:")

    `work` is a worked solution that itself ends in "\\boxed{answer}".
    """
    check_mode(mode)
    if mode == "think":
        return f"<think>\n{work}\n</think>\n\n\\boxed{{{answer}}}{IM_END}"
    if mode == "nothink":
        return f"{work}{IM_END}"
    return f" {work}{ENDOFTEXT}"
