"""Teacher scoring with a transformers model in the trainer's process (small teachers)."""

from __future__ import annotations

import torch

from gropd.model.forward_batches import no_grad_scores
from gropd.model.logprobs import logprob_score, with_hidden


class HFTeacher:
    """log π_T of each response token, no gradient, in forwards of at most `max_tokens` packed tokens
    (gropd/model/forward_batches.py; with `share_prompts` a group's prompt runs once)."""

    def __init__(self, model: torch.nn.Module, pad_id: int, device: torch.device, max_tokens: int, share_prompts: bool):
        self.model, self.pad_id, self.device, self.max_tokens = model.eval(), pad_id, device, max_tokens
        self.share_prompts = share_prompts

    @property
    def head(self) -> torch.nn.Linear:
        """The teacher's LM head (its distribution at a position is softmax(head(hidden)))."""
        return self.model.get_output_embeddings()

    def score(self, prompt_ids: list[list[int]], response_ids: list[list[int]]) -> list[list[float]]:
        return self.score_with_hidden(prompt_ids, response_ids, hidden=False)[0]

    def score_with_hidden(
        self, prompt_ids: list[list[int]], response_ids: list[list[int]], hidden: bool = True
    ) -> tuple[list[list[float]], torch.Tensor | None]:
        """score()'s rows and, with `hidden`, the final hidden states `[B, T, H_T]` (float32, 0 on padding)
        that predict each response token: the teacher's whole distribution there is softmax(head(hidden))."""
        score = with_hidden(logprob_score()) if hidden else logprob_score()
        values = no_grad_scores(
            self.model,
            prompt_ids,
            response_ids,
            self.pad_id,
            self.device,
            self.max_tokens,
            score,
            share_prompts=self.share_prompts,
        )
        rows = [row[: len(r)] for row, r in zip(values[..., 0].tolist(), response_ids, strict=True)]
        return rows, values[..., 1:] if hidden else None
