"""Which rows go into which forward: a token budget, rows of alike length side by side, and the same
number of forwards on every data-parallel rank.

A forward's cost is its packed tokens: rows x (longest prompt + longest response), or with shared
prompts (gropd/model/logprobs.py: shared_prompt_scores) distinct prompts x longest prompt + rows x
longest response. `plan_forwards` sorts the rows by response length and fills forwards in that order
while the cost stays within `max_tokens` and the rows within `max_rows` (rows of alike length side by
side: little padding); a row that alone exceeds the budget goes alone. Under FSDP every forward (and
backward) is a collective, so each rank runs as many as the busiest rank (`even_out`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from gropd.model.logprobs import TokenScore, logprob_score, rows_scores


def forward_cost(prompt_ids: list[list[int]], response_ids: list[list[int]], rows: list[int], share: bool) -> int:
    """Packed tokens of one forward over `rows` (module docstring)."""
    prompts = {tuple(prompt_ids[r]) for r in rows} if share else rows
    width = max(len(prompt_ids[r]) for r in rows)
    return len(prompts) * width + len(rows) * max(1, max(len(response_ids[r]) for r in rows))


def plan_forwards(
    prompt_ids: list[list[int]],
    response_ids: list[list[int]],
    max_tokens: int,
    max_rows: int | None = None,
    share_prompts: bool = False,
) -> list[list[int]]:
    """Every row in exactly one forward (module docstring), shortest responses first."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    forwards: list[list[int]] = []
    for row in sorted(range(len(prompt_ids)), key=lambda r: (len(response_ids[r]), r)):
        current = forwards[-1] if forwards else None
        fits = current is not None and (max_rows is None or len(current) < max_rows)
        if fits and forward_cost(prompt_ids, response_ids, current + [row], share_prompts) <= max_tokens:
            current.append(row)
        else:
            forwards.append([row])
    return forwards


def even_out(forwards: list[list[int]], count: int) -> list[list[int]]:
    """`forwards` made exactly `count` long: the forward with the most rows is halved until there are
    `count` (a half never costs more than the whole), then empty forwards (run on one row, output
    dropped: only to keep the ranks in step) fill up."""
    parts = [list(rows) for rows in forwards]
    while len(parts) < count:
        widest = max(range(len(parts)), key=lambda i: len(parts[i]))
        if len(parts[widest]) < 2:
            return parts + [[] for _ in range(count - len(parts))]
        rows = parts[widest]
        parts[widest : widest + 1] = [rows[: len(rows) // 2], rows[len(rows) // 2 :]]
    return parts


def no_grad_scores(
    model: torch.nn.Module,
    prompt_ids: list[list[int]],
    response_ids: list[list[int]],
    pad_id: int,
    device: torch.device,
    max_tokens: int,
    score: TokenScore,
    share_prompts: bool = False,
    forwards: Callable[[int], int] | None = None,
) -> torch.Tensor:
    """`rows_scores` of all rows `[B, T, k]` (T = the longest response), no gradient, in the forwards of
    plan_forwards; `forwards(n)` turns this rank's count n into the count every rank runs (even_out)."""
    length = max(1, max((len(r) for r in response_ids), default=0))
    plan = plan_forwards(prompt_ids, response_ids, max_tokens, share_prompts=share_prompts)
    if forwards is not None:
        plan = even_out(plan, forwards(len(plan)))
    out: torch.Tensor | None = None
    with torch.no_grad():
        for rows in plan:
            got = rows_scores(model, prompt_ids, response_ids, rows or [0], pad_id, device, score, None, share_prompts)
            if out is None:
                out = torch.zeros(len(response_ids), length, got.shape[-1], dtype=got.dtype, device=device)
            if rows:
                out[torch.tensor(rows, device=device), : got.shape[1]] = got
    return out


def no_grad_logprobs(
    model: torch.nn.Module,
    prompt_ids: list[list[int]],
    response_ids: list[list[int]],
    pad_id: int,
    device: torch.device,
    max_tokens: int,
    temperature: float = 1.0,
    with_entropy: bool = False,
    share_prompts: bool = False,
    forwards: Callable[[int], int] | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log π `[B, T]` (and the entropy `[B, T]` if asked) of all rows, no gradient (no_grad_scores)."""
    score = logprob_score(temperature, with_entropy)
    values = no_grad_scores(model, prompt_ids, response_ids, pad_id, device, max_tokens, score, share_prompts, forwards)
    return values[..., 0].contiguous(), values[..., 1].contiguous() if with_entropy else None
