"""Rollouts with transformers' `generate` on the trainer's own student (no weight copy needed)."""

from __future__ import annotations

import torch
from transformers import GenerationConfig

from gropd.rollout.base import RolloutBatch, SamplingSettings


class HFRollout:
    """Samples from `model` in place; sync_weights is a no-op because it *is* the trained model.

    Sampler log-probs are not reported (None): the trainer recomputes logp_old itself.
    """

    def __init__(self, model: torch.nn.Module, stop_ids: list[int], pad_id: int, device: torch.device):
        self.model, self.stop_ids, self.pad_id, self.device = model, list(stop_ids), pad_id, device

    def sync_weights(self, model: torch.nn.Module) -> None:
        self.model = model

    @torch.no_grad()
    def generate(self, prompt_ids: list[list[int]], n: int, sampling: SamplingSettings, seed: int) -> RolloutBatch:
        width = max(len(p) for p in prompt_ids)
        input_ids = torch.tensor([[self.pad_id] * (width - len(p)) + p for p in prompt_ids], device=self.device)
        attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompt_ids], device=self.device)
        config = GenerationConfig(
            do_sample=True,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=0,
            max_new_tokens=sampling.max_new_tokens,
            num_return_sequences=n,
            eos_token_id=self.stop_ids,
            pad_token_id=self.pad_id,
        )
        was_training = self.model.training
        self.model.eval()
        torch.manual_seed(seed)
        sequences = self.model.generate(input_ids=input_ids, attention_mask=attention, generation_config=config)
        self.model.train(was_training)
        responses, reasons = [], []
        for row in sequences[:, width:].tolist():
            cut = next((i + 1 for i, tok in enumerate(row) if tok in self.stop_ids), None)
            responses.append(row[:cut] if cut else row[: sampling.max_new_tokens])
            reasons.append("stop" if cut else "length")
        prompts = [list(p) for p in prompt_ids for _ in range(n)]
        return RolloutBatch(prompt_ids=prompts, response_ids=responses, finish_reasons=reasons)
