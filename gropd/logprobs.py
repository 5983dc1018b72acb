"""Per-token log-probabilities of responses under a causal LM: log π(y_t | x, y_<t).

Rows are laid out as [left padding, prompt, response, right padding] so every response
starts at the same column P; position ids count real tokens only, so a row's numbers do
not depend on how much padding its batch needed. Output tensors are `[B, T]` with
T = the longest response, right-padded, and `mask` 1 on real response tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class PackedBatch:
    """input_ids/attention_mask/position_ids `[B, P+T]`; response y at columns P..P+T-1."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    response_ids: torch.Tensor  # [B, T]
    response_mask: torch.Tensor  # [B, T] float
    prompt_width: int


def pack(prompt_ids: list[list[int]], response_ids: list[list[int]], pad_id: int, device: torch.device) -> PackedBatch:
    """Left-pad prompts to a common width P, right-pad responses to T, build position ids."""
    width = max(len(p) for p in prompt_ids)
    length = max(1, max(len(r) for r in response_ids))
    rows, masks, responses, response_masks = [], [], [], []
    for prompt, response in zip(prompt_ids, response_ids, strict=True):
        left, right = width - len(prompt), length - len(response)
        rows.append([pad_id] * left + prompt + response + [pad_id] * right)
        masks.append([0] * left + [1] * (len(prompt) + len(response)) + [0] * right)
        responses.append(response + [pad_id] * right)
        response_masks.append([1.0] * len(response) + [0.0] * right)
    attention = torch.tensor(masks, device=device)
    positions = (attention.cumsum(dim=1) - 1).clamp(min=0)
    return PackedBatch(
        input_ids=torch.tensor(rows, device=device),
        attention_mask=attention,
        position_ids=positions,
        response_ids=torch.tensor(responses, device=device),
        response_mask=torch.tensor(response_masks, device=device),
        prompt_width=width,
    )


def response_logprobs(
    model: torch.nn.Module, batch: PackedBatch, temperature: float = 1.0, with_entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log π(y_t | h_t) `[B, T]` (0 on padding) and, if asked, the policy entropy `[B, T]`.

    Logits are divided by `temperature` first, so the numbers are those of the
    distribution the sampler drew from. Gradients flow when the caller allows them.
    """
    width, length = batch.prompt_width, batch.response_ids.shape[1]
    logits = model(
        input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=batch.position_ids
    ).logits
    logits = logits[:, width - 1 : width - 1 + length].float() / temperature
    log_probs = torch.log_softmax(logits, dim=-1)
    chosen = log_probs.gather(-1, batch.response_ids.unsqueeze(-1)).squeeze(-1) * batch.response_mask
    if not with_entropy:
        return chosen, None
    entropy = -(log_probs.exp() * log_probs).sum(-1) * batch.response_mask
    return chosen, entropy
