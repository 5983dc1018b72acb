"""The rollout interface every backend (transformers, vLLM) implements.

Token ids travel as plain Python lists so that backends on other processes or
machines need no tensors; the trainer builds padded tensors itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch


@dataclass(frozen=True)
class SamplingSettings:
    """Sampling for one generation call: temperature, nucleus top-p, response cap."""

    temperature: float
    top_p: float
    max_new_tokens: int


@dataclass
class RolloutBatch:
    """`n` responses for each of `P` prompts, flattened prompt-major: row i*n+j is
    response j of prompt i (the consecutive-block grouping that credit expects).

    prompt_ids[r]        the prompt's token ids (repeated for each of its n rows)
    response_ids[r]      the sampled tokens, ending with the stop token when one was hit
    finish_reasons[r]    "stop" (a stop token ended it) or "length" (hit max_new_tokens)
    sampler_logprobs[r]  the sampler's own log-prob of each response token, or None
                         when the backend does not report them
    """

    prompt_ids: list[list[int]]
    response_ids: list[list[int]]
    finish_reasons: list[str]
    sampler_logprobs: list[list[float]] | None = None


class RolloutEngine(Protocol):
    """Generates responses from the current student and follows its weights."""

    def generate(self, prompt_ids: list[list[int]], n: int, sampling: SamplingSettings, seed: int) -> RolloutBatch:
        """Sample `n` responses for every prompt; deterministic for a given seed."""
        ...

    def sync_weights(self, model: torch.nn.Module) -> None:
        """Load the trainer's current student weights before the next generate()."""
        ...
