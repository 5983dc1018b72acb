"""Per-token log-probabilities of responses under a causal LM: log π(y_t | x, y_<t).

Rows are laid out as [left padding, prompt, response, right padding] so every response
starts at the same column P; position ids count real tokens only, so a row's numbers do
not depend on how much padding its batch needed. Output tensors are `[B, T]` with
T = the longest response, right-padded, and `mask` 1 on real response tokens.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from accelerate.utils import extract_model_from_parallel

from gropd.chunked_logprobs import token_logprobs


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
    Only the response positions reach the LM head (`logits_to_keep`), only its real
    tokens go through the head, chunk by chunk (`gropd.chunked_logprobs`): no
    `[B, P+T, V]` logits are made.
    """
    width, length = batch.prompt_width, batch.response_ids.shape[1]
    if width < 1:
        raise ValueError("every row needs a prompt token: y_0 is predicted from the last prompt position")
    real = batch.response_mask.bool()  # [B, T]
    with _head_scores_tokens(model, real, batch.response_ids[real], temperature, with_entropy):
        scores = model(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            position_ids=batch.position_ids,
            logits_to_keep=torch.arange(width - 1, width - 1 + length, device=real.device),  # h_t at column P-1+t
        ).logits  # [N, 1 or 2]: the N real response tokens, row by row
    zeros = torch.zeros(real.shape, dtype=torch.float32, device=real.device)
    chosen = zeros.masked_scatter(real, scores[:, 0])
    return chosen, zeros.masked_scatter(real, scores[:, 1]) if with_entropy else None


@contextmanager
def _head_scores_tokens(
    model: torch.nn.Module, real: torch.Tensor, targets: torch.Tensor, temperature: float, with_entropy: bool
) -> Iterator[None]:
    """While inside, the model's LM head maps hidden states `[B, T, H]` to `[N, 1]` (log π of
    `targets`, N = real.sum()) or `[N, 2]` (and the entropy) instead of logits `[B, T, V]`.

    The head is swapped inside the model's own forward, so wrappers (DDP, FSDP2) still
    gather and reduce its weight as usual.
    """
    head = extract_model_from_parallel(model).get_output_embeddings()
    if not isinstance(head, torch.nn.Linear):
        raise TypeError(f"response_logprobs needs a linear LM head, got {type(head).__name__}")

    def scores(hidden: torch.Tensor) -> torch.Tensor:
        chosen, entropy = token_logprobs(hidden[real], head.weight, head.bias, targets, temperature, with_entropy)
        return torch.stack([chosen, entropy], dim=-1) if with_entropy else chosen[:, None]

    own = head.__dict__.get("forward")
    head.forward = scores
    try:
        yield
    finally:
        if own is None:
            del head.forward
        else:
            head.forward = own


def token_budget_slices(prompt_ids: list[list[int]], response_ids: list[list[int]], max_tokens: int) -> list[slice]:
    """Consecutive rows, in order, grouped so that rows x (longest prompt + longest response)
    stays within `max_tokens`; a row longer than the budget on its own forms its own group."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    slices, start, width, length = [], 0, 0, 1
    for row, (prompt, response) in enumerate(zip(prompt_ids, response_ids, strict=True)):
        wider, longer = max(width, len(prompt)), max(length, len(response))
        if row > start and (row - start + 1) * (wider + longer) > max_tokens:
            slices.append(slice(start, row))
            start, wider, longer = row, len(prompt), max(1, len(response))
        width, length = wider, longer
    if prompt_ids:
        slices.append(slice(start, len(prompt_ids)))
    return slices


def budgeted_response_logprobs(
    model: torch.nn.Module,
    prompt_ids: list[list[int]],
    response_ids: list[list[int]],
    pad_id: int,
    device: torch.device,
    max_tokens: int,
    temperature: float = 1.0,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`response_logprobs` of all rows `[B, T]` (T = the longest response), one forward per
    `token_budget_slices` group, each packed on its own."""
    length = max(1, max((len(r) for r in response_ids), default=0))
    chosen = torch.zeros(len(response_ids), length, device=device)
    entropy = torch.zeros_like(chosen) if with_entropy else None
    for rows in token_budget_slices(prompt_ids, response_ids, max_tokens):
        part, part_entropy = response_logprobs(
            model, pack(prompt_ids[rows], response_ids[rows], pad_id, device), temperature, with_entropy
        )
        chosen[rows, : part.shape[1]] = part
        if entropy is not None:
            entropy[rows, : part.shape[1]] = part_entropy
    return chosen, entropy
