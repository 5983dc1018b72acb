"""Teacher scoring with a transformers model in the trainer's process (small teachers)."""

from __future__ import annotations

import torch

from gropd.logprobs import pack, response_logprobs


class HFTeacher:
    """log π_T of each response token, in micro-batches of `batch_size` rows, no gradient."""

    def __init__(self, model: torch.nn.Module, pad_id: int, device: torch.device, batch_size: int = 64):
        self.model, self.pad_id, self.device, self.batch_size = model.eval(), pad_id, device, batch_size

    @torch.no_grad()
    def score(self, prompt_ids: list[list[int]], response_ids: list[list[int]]) -> list[list[float]]:
        scores: list[list[float]] = []
        for start in range(0, len(prompt_ids), self.batch_size):
            prompts = prompt_ids[start : start + self.batch_size]
            responses = response_ids[start : start + self.batch_size]
            logp, _ = response_logprobs(self.model, pack(prompts, responses, self.pad_id, self.device))
            scores += [row[: len(r)] for row, r in zip(logp.tolist(), responses, strict=True)]
        return scores
