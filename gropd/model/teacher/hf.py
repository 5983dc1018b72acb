"""Teacher scoring with a transformers model in the trainer's process (small teachers)."""

from __future__ import annotations

import torch

from gropd.model.forward_batches import no_grad_logprobs


class HFTeacher:
    """log π_T of each response token, no gradient, in forwards of at most `max_tokens` packed tokens
    (gropd/model/forward_batches.py; with `share_prompts` a group's prompt runs once)."""

    def __init__(self, model: torch.nn.Module, pad_id: int, device: torch.device, max_tokens: int, share_prompts: bool):
        self.model, self.pad_id, self.device, self.max_tokens = model.eval(), pad_id, device, max_tokens
        self.share_prompts = share_prompts

    def score(self, prompt_ids: list[list[int]], response_ids: list[list[int]]) -> list[list[float]]:
        logp, _ = no_grad_logprobs(
            self.model,
            prompt_ids,
            response_ids,
            self.pad_id,
            self.device,
            self.max_tokens,
            share_prompts=self.share_prompts,
        )
        return [row[: len(r)] for row, r in zip(logp.tolist(), response_ids, strict=True)]
