"""The policy updates: the PPO-style clipped surrogate (docs/DESIGN.md §1, "Update") and the exact KL loss.

Per response token, with `ρ = π_θ(y_t|h_t) / π_S,old(y_t|h_t) = exp(logp_new − logp_old)`:

    ℓ_t = −min(ρ·A_t, clip(ρ, 1 − ε_lo, 1 + ε_hi)·A_t)
    L   = agg(ℓ)   over response tokens only (mask = 1)

No reference-model KL term: the teacher is the anchor. Token aggregation is chosen
by name from `TOKEN_AGGREGATIONS`. Shapes: `[B, T]` throughout. Beyond the paper, an option off by default:
ℓ_t weighted by a truncated importance weight for the gap between vLLM's sampler and the trainer
(truncated_is_weights, train.tis_cap).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from gropd.vector_math import exp


def _token_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over every response token of the batch: `Σ_{i,t} m·x / Σ_{i,t} m` (0 if no tokens)."""
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def _seq_mean(per_row: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of `per_row [B]` over rows that have at least one response token (0 if none)."""
    has_tokens = (mask.sum(dim=1) > 0).to(per_row.dtype)
    return (per_row * has_tokens).sum() / has_tokens.sum().clamp(min=1.0)


def _seq_mean_token_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-row token mean `Σ_t m·x / Σ_t m`, then the mean over non-empty rows."""
    per_row = (x * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
    return _seq_mean(per_row, mask)


def _seq_mean_token_sum(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-row token sum `Σ_t m·x`, then the mean over non-empty rows."""
    return _seq_mean((x * mask).sum(dim=1), mask)


TOKEN_AGGREGATIONS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "token-mean": _token_mean,
    "seq-mean-token-mean": _seq_mean_token_mean,
    "seq-mean-token-sum": _seq_mean_token_sum,
}


def aggregate(x: torch.Tensor, mask: torch.Tensor, agg: str) -> torch.Tensor:
    """Reduce per-token values `x [B, T]` over the response tokens with the named rule."""
    if agg not in TOKEN_AGGREGATIONS:
        raise ValueError(f"unknown token aggregation {agg!r}; valid: {', '.join(TOKEN_AGGREGATIONS)}")
    return TOKEN_AGGREGATIONS[agg](x, mask.to(x.dtype))


def clipped_policy_loss(
    logp_new: torch.Tensor,
    logp_old: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float,
    clip_high: float,
    agg: str = "token-mean",
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """`L = agg(−min(ρ·A, clip(ρ, 1−ε_lo, 1+ε_hi)·A))` and its diagnostics; with `weights` `[B, T]` (detached
    here: truncated_is_weights) `L = agg(w · −min(...))`.

    logp_new    `[B, T]` log π_θ of the sampled tokens; the only input that gets gradient
    logp_old    `[B, T]` log π_S,old of the same tokens (detached here)
    advantages  `[B, T]` per-token `A` (detached here)
    mask        `[B, T]` 1 on response tokens; other positions get zero gradient and
                may hold anything, even -inf or NaN

    Computed in float32 at least (bf16 inputs are upcast). Returns `(loss, stats)`;
    stats are 0-dim detached tensors, each a token-mean over response tokens:
    `clip_frac` (share of tokens whose clipped term is the active one, so they get no
    gradient), `ratio_mean` (mean ρ), `approx_kl` (mean of `(ρ − 1) − log ρ`, the
    non-negative k3 estimate of KL(π_S,old ‖ π_θ) on the sampled tokens).
    """
    if not 0.0 <= clip_low < 1.0 or clip_high < 0.0:
        raise ValueError(f"need 0 <= clip_low < 1 and clip_high >= 0, got {clip_low}, {clip_high}")
    dtype = torch.promote_types(logp_new.dtype, torch.float32)
    keep = mask.bool()
    delta = logp_new.to(dtype) - logp_old.detach().to(dtype)
    log_ratio = torch.where(keep, delta, torch.zeros_like(delta))
    A = torch.where(keep, advantages.detach().to(dtype), torch.zeros_like(delta))
    ratio = exp(log_ratio)
    unclipped = -A * ratio
    clipped = -A * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    per_token = torch.maximum(unclipped, clipped)
    if weights is not None:
        per_token = per_token * torch.where(keep, weights.detach().to(dtype), torch.zeros_like(delta))
    loss = aggregate(per_token, keep, agg)
    with torch.no_grad():
        stats = {
            "clip_frac": aggregate((clipped > unclipped).to(dtype), keep, "token-mean"),
            "ratio_mean": aggregate(ratio, keep, "token-mean"),
            "approx_kl": aggregate((ratio - 1.0) - log_ratio, keep, "token-mean"),
        }
        if weights is not None:
            stats["tis_weight_mean"] = aggregate(weights.detach().to(dtype), keep, "token-mean")
    return loss, stats


def truncated_is_weights(
    logp_old: torch.Tensor, logp_sampler: torch.Tensor, mask: torch.Tensor, cap: float
) -> torch.Tensor:
    """Truncated importance sampling (beyond the paper, which does not use it; off unless train.tis_cap is set):
    vLLM samples from its own π_vllm (other kernels, bf16 weights), not exactly the trainer's π_S,old, so each
    response token's surrogate is reweighted toward π_S,old, the weight truncated at C:

        w_t = min(π_S,old(y_t|h_t) / π_vllm(y_t|h_t), C) = min(exp(log π_S,old − log π_vllm), C)

    (verl's TIS, TRL's vllm_importance_sampling_cap). `logp_old`, `logp_sampler`, `mask` `[B, T]`; returns `w`
    `[B, T]` in float32 at least, detached, 0 off the response tokens."""
    if cap <= 0:
        raise ValueError(f"the truncation cap must be positive, got {cap}")
    dtype = torch.promote_types(logp_old.dtype, torch.float32)
    keep = mask.bool()
    delta = logp_old.detach().to(dtype) - logp_sampler.detach().to(dtype)
    log_w = torch.where(keep, delta, torch.zeros_like(delta))
    return torch.where(keep, torch.clamp(exp(log_w), max=cap), torch.zeros_like(delta))


def full_kl_loss(
    kl: torch.Tensor, mask: torch.Tensor, agg: str = "token-mean"
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """`L = agg(KL_t)`, the exact per-token reverse KL `KL_t = Σ_v π_θ(v|h_t)(log π_θ(v|h_t) − log π_T(v|h_t))`
    (`[B, T]`, gropd/model/chunked_kl.py) over response tokens: method `fullkl`, beyond the paper.

    Its gradient is that of the KL at the sampled prefixes h_t, with no sampled-token estimate and so no
    importance ratio: the PPO clip has nothing to act on (the gradient-norm clip still applies). Stats:
    `kl_mean`, the token-mean KL (0-dim, detached).
    """
    keep = mask.bool()
    kl = torch.where(keep, kl, torch.zeros_like(kl))
    loss = aggregate(kl, keep, agg)
    return loss, {"kl_mean": aggregate(kl.detach(), keep, "token-mean")}
