"""Teacher scoring with a transformers model in the trainer's process (small teachers)."""

from __future__ import annotations

import torch

from gropd.logprobs import budgeted_response_logprobs


class HFTeacher:
    """log π_T of each response token, no gradient, in forwards of at most `max_tokens` packed
    tokens (rows x padded width; a longer row goes alone)."""

    def __init__(self, model: torch.nn.Module, pad_id: int, device: torch.device, max_tokens: int):
        self.model, self.pad_id, self.device, self.max_tokens = model.eval(), pad_id, device, max_tokens

    @torch.no_grad()
    def score(self, prompt_ids: list[list[int]], response_ids: list[list[int]]) -> list[list[float]]:
        logp, _ = budgeted_response_logprobs(
            self.model, prompt_ids, response_ids, self.pad_id, self.device, self.max_tokens
        )
        return [row[: len(r)] for row, r in zip(logp.tolist(), response_ids, strict=True)]
