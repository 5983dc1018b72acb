"""J_H(H): how strongly prefix scores favour a prompt's correct responses (Figure 1(b)).

Fixed responses (no training): response `i` of a prompt's group, with token feedback
`f_{i,t}` (`gropd.credit.token_feedback`), `|y_i|` response tokens, and verifier
correctness `c_i ∈ {0, 1}`. For a horizon of `H ≥ 0` tokens:

    prefix score   S_i(H) = Σ_{t ≤ min(H, |y_i|)} f_{i,t}      (t counts response tokens from 1; no γ)
    per prompt g   AUC_g(H) = 1/(|C_g| |W_g|) · Σ_{c ∈ C_g} Σ_{w ∈ W_g} ( 1[S_c(H) > S_w(H)] + ½·1[S_c(H) = S_w(H)] )
    separation     J_H(H) = mean of AUC_g(H) over the prompts g with both correct (C_g) and incorrect (W_g) responses

AUC_g(H) is the chance that a random correct response of prompt g outscores a random
incorrect one when only its first H tokens of feedback count (ties count half): 1 = the
prefix score ranks every correct response above every incorrect one, 0.5 = chance (also
the value when all prefix scores tie, as at H = 0), 0 = always the wrong way round.
Comparing within a prompt keeps the prompt's difficulty out of the measure (the teacher
may like every response of an easy prompt more than any of a hard one); prompts whose
responses are all correct or all incorrect carry no information and are left out.

Ours: the paper plots J_H(H) (higher is better, peaking around 1,500–3,000 tokens) without
giving its formula; this definition is our choice and figures say so.

Shapes: `B` rows (responses), `T` token positions, `K` horizons, `G` = `group_size`. Rows
come in consecutive blocks of `G` per prompt (row `g*G + j` is response `j` of prompt `g`),
as in `gropd.credit`. `mask` is `[B, T]`, 1 on response tokens, 0 on prompt and padding
(either side). Nothing loops over tokens or prompts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported where curves are computed: the report draws them without it
    import torch


def prefix_scores(f: torch.Tensor, mask: torch.Tensor, horizons: Sequence[int]) -> torch.Tensor:
    """`S_i(H) = Σ_{t ≤ min(H, |y_i|)} f_{i,t}` for every row and horizon: `[B, T]` → `[B, K]`.

    `t` counts the row's own response tokens, so left and right padding give the same scores.
    """
    import torch

    if any(h < 0 for h in horizons):
        raise ValueError(f"horizons must be >= 0 tokens, got {list(horizons)}")
    keep = mask.bool()
    position = torch.cumsum(keep.to(torch.long), dim=1)  # response tokens up to and including each column
    running = torch.cumsum(torch.where(keep, f, torch.zeros_like(f)), dim=1)
    H = torch.as_tensor(list(horizons), dtype=torch.long, device=f.device).expand(f.shape[0], -1).contiguous()
    last = torch.searchsorted(position, H, right=True) - 1  # last column holding at most H response tokens
    gathered = running.gather(1, last.clamp(min=0))
    return torch.where(last >= 0, gathered, torch.zeros_like(gathered))


def prompt_aucs(
    f: torch.Tensor, mask: torch.Tensor, correct: torch.Tensor, group_size: int, horizons: Sequence[int]
) -> torch.Tensor:
    """`AUC_g(H)` of every prompt with both correct and incorrect responses: `[P, K]`, P ≤ B // G.

    `correct` is `[B]` (bool or 0/1). Prompts keep their order; uninformative ones are dropped.
    """
    B = f.shape[0]
    if group_size < 1 or B % group_size:
        raise ValueError(f"B={B} rows must come in whole groups of group_size={group_size}")
    if correct.shape != (B,):
        raise ValueError(f"correct must be [B] = [{B}], got shape {tuple(correct.shape)}")
    n, K = B // group_size, len(horizons)
    S = prefix_scores(f, mask, horizons).reshape(n, group_size, K)
    right = correct.bool().to(f.device).reshape(n, group_size)
    pairs = right[:, :, None] & ~right[:, None, :]  # [n, G, G]: (correct j, incorrect k)
    above = S[:, :, None, :] > S[:, None, :, :]
    tied = S[:, :, None, :] == S[:, None, :, :]
    wins = above.to(f.dtype) + 0.5 * tied.to(f.dtype)  # [n, G, G, K]
    counts = pairs.sum(dim=(1, 2))  # |C_g| |W_g|
    totals = (wins * pairs[..., None].to(f.dtype)).sum(dim=(1, 2))
    informative = counts > 0
    return totals[informative] / counts[informative, None].to(f.dtype)


def horizon_grid(longest: int, points: int) -> list[int]:
    """At most `points` integer horizons from 1 to `longest` tokens, evenly spaced in `H^(1/3)`
    (Figure 1(b)'s cube-root axis) and rounded; duplicates at small H are dropped."""
    if longest < 1 or points < 2:
        raise ValueError(f"horizon_grid needs longest >= 1 and points >= 2, got {longest}, {points}")
    top = longest ** (1 / 3)
    return sorted({round((1 + (top - 1) * k / (points - 1)) ** 3) for k in range(points)})


def separation_curve(batches: list[dict]) -> dict:
    """J_H(H) at every horizon H = 1..the longest response, pooled over the prompts of `batches` (saved
    rollout batches: f, mask, correct, group_size): {"horizons", "values", "informative", "prompts",
    "reward"}, with "values" None when no prompt has both correct and incorrect responses. What a scoring
    pass records (horizon.json) for Figure 1(b), which picks its horizons from it."""
    import torch

    longest = max(int(b["mask"].sum(dim=1).max()) for b in batches)
    prompts = sum(b["f"].shape[0] // b["group_size"] for b in batches)
    reward = float(torch.cat([b["correct"].float() for b in batches]).mean())
    horizons = list(range(1, max(longest, 1) + 1))
    aucs = torch.cat(
        [prompt_aucs(b["f"].double(), b["mask"], b["correct"], b["group_size"], horizons) for b in batches]
    )
    values = aucs.mean(dim=0).tolist() if aucs.shape[0] else None
    return {"horizons": horizons, "values": values, "informative": aucs.shape[0], "prompts": prompts, "reward": reward}
