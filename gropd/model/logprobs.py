"""Per-token log-probabilities of responses under a causal LM: log π(y_t | x, y_<t).

Rows are laid out as [left padding, prompt, response, right padding] so every response
starts at the same column P; position ids count real tokens only, so a row's numbers do
not depend on how much padding its batch needed. Output tensors are `[B, T]` with
T = the longest response, right-padded, and `mask` 1 on real response tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from accelerate.utils import extract_model_from_parallel
from transformers import DynamicCache
from transformers.cache_utils import Cache

from gropd.model.chunked_kl import token_reverse_kl
from gropd.model.chunked_logprobs import token_logprobs


@dataclass
class PackedBatch:
    """input_ids/attention_mask/position_ids `[B, P+T]`; response y at columns P..P+T-1."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    response_ids: torch.Tensor  # [B, T]
    response_mask: torch.Tensor  # [B, T] float
    prompt_width: int
    response_lengths: tuple[int, ...]  # each row's real response tokens, on the host (no device read to find them)


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
        response_lengths=tuple(len(response) for response in response_ids),
    )


TokenScore = Callable[[torch.Tensor, torch.nn.Linear, torch.Tensor], torch.Tensor]
"""(final hidden states `[N, H]` of N real response tokens, the LM head, their payload `[N, ...]`) -> `[N, k]`."""


def logprob_score(temperature: float = 1.0, with_entropy: bool = False) -> TokenScore:
    """log π(y | h) per token, and the entropy if asked (`[N, 1]` or `[N, 2]`); the payload is y `[N]`.

    Logits are divided by `temperature` first, so the numbers are those of the distribution the sampler
    drew from; only `[chunk, V]` logits exist at a time (`gropd.model.chunked_logprobs`)."""

    def score(hidden: torch.Tensor, head: torch.nn.Linear, targets: torch.Tensor) -> torch.Tensor:
        chosen, entropy = token_logprobs(hidden, head.weight, head.bias, targets, temperature, with_entropy)
        return torch.stack([chosen, entropy] if with_entropy else [chosen], dim=-1)  # new tensors, not views (FSDP2)

    return score


def reverse_kl_score(teacher_head: torch.nn.Linear, temperature: float = 1.0) -> TokenScore:
    """KL(π_S(·|h) ‖ π_T(·|h)) per token over the whole vocabulary (`[N, 1]`); the payload is the teacher's
    final hidden states at the same positions `[N, H_T]` (gropd/model/chunked_kl.py)."""

    def score(hidden: torch.Tensor, head: torch.nn.Linear, teacher_hidden: torch.Tensor) -> torch.Tensor:
        return token_reverse_kl(hidden, head, teacher_hidden, teacher_head, temperature)[:, None]

    return score


def with_hidden(score: TokenScore) -> TokenScore:
    """`score` followed by the hidden states themselves, in float32: `[N, k + H]` (the teacher's pass for
    `fullkl` scores f and keeps what its distribution is computed from)."""
    return lambda hidden, head, payload: torch.cat([score(hidden, head, payload), hidden.float()], dim=-1)


def response_scores(
    model: torch.nn.Module, batch: PackedBatch, score: TokenScore, payload: torch.Tensor | None = None
) -> torch.Tensor:
    """`score` at every real response token, `[B, T, k]` (0 on padding); `payload` `[B, T, ...]` (default:
    the response tokens y). Gradients flow when the caller allows them.

    Only the response positions reach the LM head (`logits_to_keep`) and only its real tokens go through
    `score`: no `[B, P+T, V]` logits are made.
    """
    width, length = batch.prompt_width, batch.response_ids.shape[1]
    if width < 1:
        raise ValueError("every row needs a prompt token: y_0 is predicted from the last prompt position")
    device = batch.input_ids.device
    real = leading_index(batch.response_lengths, length, device)  # the real tokens of [B, T], flat
    payload = batch.response_ids if payload is None else _pad_columns(payload, length)
    with _head_scores_tokens(model, lambda hidden: _take(hidden, real), _take(payload, real), score):
        values = model(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask,
            position_ids=batch.position_ids,
            logits_to_keep=torch.arange(width - 1, width - 1 + length, device=device),  # h_t at column P-1+t
        ).logits  # [N, k]: the N real response tokens, row by row
    return _scatter_rows(real, (len(batch.response_lengths), length), values)


def response_logprobs(
    model: torch.nn.Module, batch: PackedBatch, temperature: float = 1.0, with_entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log π(y_t | h_t) `[B, T]` (0 on padding) and, if asked, the policy entropy `[B, T]` (response_scores
    with logprob_score)."""
    values = response_scores(model, batch, logprob_score(temperature, with_entropy))
    return values[..., 0].contiguous(), values[..., 1].contiguous() if with_entropy else None


def prefill(
    model: torch.nn.Module, prompts: list[list[int]], pad_id: int, device: torch.device, cache: Cache
) -> tuple[torch.Tensor, torch.Tensor]:
    """One forward of `prompts` left-padded to a common width W (position ids count real tokens only)
    that fills `cache` and takes only the last position to the LM head; returns (the forward's
    `.logits`: `[P, 1, V]`, or what a swapped head makes of it, and the attention mask `[P, W]`). The
    hf rollout's prefill and shared_prompt_scores' pass 1."""
    width = max(len(p) for p in prompts)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
    ids = torch.tensor([[pad_id] * (width - len(p)) + list(p) for p in prompts], device=device)
    logits = model(
        input_ids=ids,
        attention_mask=mask,
        position_ids=(mask.cumsum(1) - 1).clamp(min=0),
        past_key_values=cache,
        use_cache=True,
        logits_to_keep=1,
    ).logits
    return logits, mask


def shared_prompt_scores(
    model: torch.nn.Module,
    prompts: list[list[int]],
    prompt_of_row: list[int],
    response_ids: list[list[int]],
    pad_id: int,
    device: torch.device,
    score: TokenScore,
    payload: torch.Tensor | None = None,
) -> torch.Tensor:
    """`response_scores` of rows whose prompts repeat (a group's G responses), each distinct prompt
    forwarded once: row r answers `prompts[prompt_of_row[r]]`; output `[R, T, k]`; `payload` `[R, T, ...]`.

    Pass 1 runs the P distinct prompts (left-padded to W) and keeps their KV cache; its last position
    predicts y_0 of every row. The cache is then gathered to the R rows (differentiable, so the prompt's
    gradient sums over its rows) and pass 2 runs y_0..y_{T-2}, whose outputs predict y_1..y_{T-1}. Same
    numbers as one packed forward per row, up to float order; the prompt's tokens cost P, not R, forwards.
    """
    if not prompts or min(len(p) for p in prompts) < 1:
        raise ValueError("every row needs a prompt token: y_0 is predicted from the last prompt position")
    length = max(2, max(len(r) for r in response_ids))  # >= 2: pass 2 below has at least one column
    lengths = [len(r) for r in response_ids]
    responses = torch.tensor([list(r) + [pad_id] * (length - len(r)) for r in response_ids], device=device)
    real = torch.tensor([[1] * n + [0] * (length - n) for n in lengths], device=device)
    payload = responses if payload is None else _pad_columns(payload, length)
    of_row = torch.tensor(prompt_of_row, device=device)
    first = leading_index([min(n, 1) for n in lengths], 1, device)  # the rows with a y_0, of [R, 1]
    of_first = torch.tensor([prompt_of_row[r] for r, n in enumerate(lengths) if n], device=device, dtype=torch.long)
    cache = DynamicCache()
    with _head_scores_tokens(model, lambda h: h[:, -1].index_select(0, of_first), _take(payload[:, :1], first), score):
        head, prompt_mask = prefill(model, prompts, pad_id, device, cache)
    rest = leading_index([max(n - 1, 0) for n in lengths], length - 1, device)  # y_1.. of [R, T-1]
    cache.batch_select_indices(of_row)  # pass 2 always runs (at least one column): every rank makes the same calls
    mask = torch.cat([prompt_mask[of_row], real[:, :-1]], dim=1)
    start = prompt_mask.sum(1)[of_row]
    with _head_scores_tokens(model, lambda h: _take(h, rest), _take(payload[:, 1:], rest), score):
        tail = model(
            input_ids=responses[:, :-1],
            attention_mask=mask,
            position_ids=start[:, None] + torch.arange(length - 1, device=device),
            past_key_values=cache,
            use_cache=True,
        ).logits
    rows = len(lengths)
    values = torch.cat([_scatter_rows(first, (rows, 1), head), _scatter_rows(rest, (rows, length - 1), tail)], dim=1)
    return values[:, : max(1, max(len(r) for r in response_ids))]


def rows_scores(
    model: torch.nn.Module,
    prompt_ids: list[list[int]],
    response_ids: list[list[int]],
    rows: list[int],
    pad_id: int,
    device: torch.device,
    score: TokenScore,
    payload: torch.Tensor | None = None,
    share_prompts: bool = False,
) -> torch.Tensor:
    """`score` `[len(rows), T, k]` of batch rows `rows` in one forward: packed rows (response_scores, one
    model call), or with `share_prompts` each distinct prompt once (shared_prompt_scores, two model calls).
    `payload` `[len(rows), T, ...]` is aligned with `rows` (default: their response tokens)."""
    prompts, responses = [prompt_ids[r] for r in rows], [response_ids[r] for r in rows]
    if not share_prompts:
        return response_scores(model, pack(prompts, responses, pad_id, device), score, payload)
    distinct: dict[tuple[int, ...], int] = {}
    of_row = [distinct.setdefault(tuple(p), len(distinct)) for p in prompts]
    return shared_prompt_scores(model, [list(p) for p in distinct], of_row, responses, pad_id, device, score, payload)


def leading_index(lengths: list[int] | tuple[int, ...], width: int, device: torch.device) -> torch.Tensor:
    """The flat positions, row by row, of the first `lengths[r]` columns of each row r of an `[R, width]` grid,
    built on the host: selecting with it reads no device value to find them (a boolean mask does: nonzero)."""
    flat = [row * width + column for row, n in enumerate(lengths) for column in range(n)]
    return torch.tensor(flat, device=device, dtype=torch.long)


def _take(grid: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """The entries of `grid` `[R, W, ...]` at flat positions `index` (leading_index): `[N, ...]`."""
    return grid.flatten(0, 1).index_select(0, index)


def _scatter_rows(index: torch.Tensor, shape: tuple[int, int], values: torch.Tensor) -> torch.Tensor:
    """`[R, W, k]` zeros with `values` `[N, k]` written at flat positions `index` (leading_index); out of place,
    so gradients flow to `values`."""
    zeros = torch.zeros(shape[0] * shape[1], values.shape[-1], dtype=values.dtype, device=values.device)
    return zeros.index_copy(0, index, values).view(*shape, values.shape[-1])


def _pad_columns(payload: torch.Tensor, length: int) -> torch.Tensor:
    """`payload` `[R, T, ...]` cut or zero-padded to `length` columns."""
    if payload.shape[1] >= length:
        return payload[:, :length]
    pad = payload.new_zeros(payload.shape[0], length - payload.shape[1], *payload.shape[2:])
    return torch.cat([payload, pad], dim=1)


@contextmanager
def _head_scores_tokens(
    model: torch.nn.Module, select: Callable[[torch.Tensor], torch.Tensor], payload: torch.Tensor, score: TokenScore
) -> Iterator[None]:
    """While inside, the model's LM head maps hidden states `[B, T, H]` to `score(select(hidden), head,
    payload)` `[N, k]` (the N hidden states `select(hidden)` `[N, H]`, `payload` `[N, ...]` aligned with
    them) instead of logits `[B, T, V]`.

    The head is swapped inside the model's own forward, so wrappers (DDP, FSDP2) still
    gather and reduce its weight as usual.
    """
    head = extract_model_from_parallel(model).get_output_embeddings()
    if not isinstance(head, torch.nn.Linear):
        raise TypeError(f"response_scores needs a linear LM head, got {type(head).__name__}")
    own = head.__dict__.get("forward")
    head.forward = lambda hidden: score(select(hidden), head, payload)
    try:
        yield
    finally:
        if own is None:
            del head.forward
        else:
            head.forward = own
