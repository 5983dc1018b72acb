"""Chosen-token log-probs and entropies from final hidden states, chunk by chunk over tokens.

With hidden states h `[N, H]`, the LM head W `[V, H]` (bias b) and temperature τ,
z = (h Wᵀ + b) / τ and

    log π(y | h) = log_softmax(z)_y,        H(π) = −Σ_v π_v log π_v.

Only `[chunk, V]` logits exist at any time, in forward and in backward (which recomputes
them from h), so memory grows with N·H, not N·V. The matmuls run in the head's dtype,
softmax and sums in float32, as `lm_head(h).float() / τ` followed by a full log-softmax.
Backward: ∂log π_y/∂z = onehot(y) − π and ∂H/∂z = −π ⊙ (log π + H), divided by τ and
taken through the head; the head's gradient is summed over chunks in float32. Under autocast
(bf16 compute over float32 weights) the backward recomputes the logits under the same autocast
state as the forward, so both see the same bf16 logits.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from gropd.vector_math import exp

CHUNK_ELEMENTS = 2**24  # logits per chunk on a CPU: 64 MiB of float32 (110 tokens at 151,936)
MAX_CHUNK_ELEMENTS = 2**28  # on CUDA: 1 GiB of float32 (1,766 tokens at Qwen3's 151,936 entries)
LIVE_COPIES = 4  # float32 [chunk, V] tensors a chunk holds at once (logits, log-softmax, its exp, the gradient at the
# logits): gropd/model/fit.py counts them in the trainer's memory


def chunk_tokens(vocab: int, device: torch.device | None = None) -> int:
    """Tokens per chunk so that one float32 `[chunk, V]` tensor holds about CHUNK_ELEMENTS numbers, MAX_CHUNK_ELEMENTS
    on CUDA (a small chunk is thousands of kernel launches a micro-step). Fixed, never the free memory: the chunk
    decides how the GEMMs split, so a resume on a GPU with other memory free would not be bit-identical. A CPU
    keeps CHUNK_ELEMENTS: the committed runs' numerics."""
    elements = MAX_CHUNK_ELEMENTS if device is not None and device.type == "cuda" else CHUNK_ELEMENTS
    return max(1, elements // vocab)


def chunk_log_probs(
    hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, temperature: float
) -> torch.Tensor:
    """log_softmax((h Wᵀ + b) / τ) in float32 `[c, V]` for one chunk of hidden states `[c, H]`."""
    return torch.log_softmax(F.linear(hidden, weight, bias).float().div_(temperature), dim=-1)


def autocast_state(tensor: torch.Tensor) -> tuple[str, torch.dtype, bool]:
    """torch.autocast's (device, dtype, enabled) as they stand on `tensor`'s device: a backward that recomputes
    logits enters them again, so it sees the same (bf16 under autocast) logits as the forward."""
    device = tensor.device.type
    return device, torch.get_autocast_dtype(device), torch.is_autocast_enabled(device)


def head_gradients(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    needs: tuple[bool, ...],
    chunk: int,
    grad_logits: Callable[[slice], torch.Tensor],
) -> tuple[torch.Tensor | None, ...]:
    """Gradients for (hidden, weight, bias), as `needs` asks, of a loss whose gradient at the logits
    z = h Wᵀ + b is `grad_logits(rows)` `[c, V]`, one chunk of rows at a time: each chunk's ∂L/∂z is taken
    through the head in its dtype; the head's gradient is summed over chunks in float32."""
    need_hidden, need_weight, need_bias = needs[:3]
    grad_hidden = torch.zeros_like(hidden) if need_hidden else None
    grad_weight = torch.zeros_like(weight, dtype=torch.float32) if need_weight else None
    grad_bias = torch.zeros_like(bias, dtype=torch.float32) if need_bias else None
    for start in range(0, hidden.shape[0], chunk):
        rows = slice(start, start + chunk)
        grad = grad_logits(rows).to(weight.dtype)
        if need_hidden:
            grad_hidden[rows] = grad @ weight
        if need_weight:
            grad_weight += (grad.T @ hidden[rows]).float()
        if need_bias:
            grad_bias += grad.float().sum(0)
        del grad  # before the next chunk's logits exist
    grad_weight = None if grad_weight is None else grad_weight.to(weight.dtype)
    grad_bias = None if grad_bias is None else grad_bias.to(bias.dtype)
    return grad_hidden, grad_weight, grad_bias


class _TokenLogProbs(torch.autograd.Function):
    """(log π(y_n | h_n) `[N]`, H(π(· | h_n)) `[N]` or an empty tensor) as float32."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, temperature, with_entropy, chunk):
        chosen = hidden.new_empty(hidden.shape[0], dtype=torch.float32)
        entropy = hidden.new_empty(hidden.shape[0] if with_entropy else 0, dtype=torch.float32)
        for start in range(0, hidden.shape[0], chunk):
            rows = slice(start, start + chunk)
            log_probs = chunk_log_probs(hidden[rows], weight, bias, temperature)
            chosen[rows] = log_probs.gather(-1, targets[rows, None]).squeeze(-1)
            if with_entropy:
                entropy[rows] = -exp(log_probs).mul_(log_probs).sum(-1)
            del log_probs  # before the next chunk's logits exist
        ctx.save_for_backward(hidden, weight, bias, targets, entropy)
        ctx.temperature, ctx.chunk, ctx.autocast = temperature, chunk, autocast_state(hidden)
        ctx.set_materialize_grads(False)
        if not with_entropy:
            ctx.mark_non_differentiable(entropy)
        return chosen, entropy

    @staticmethod
    def backward(ctx, grad_chosen, grad_entropy):
        if grad_chosen is None and grad_entropy is None:
            return None, None, None, None, None, None, None
        hidden, weight, bias, targets, entropy = ctx.saved_tensors

        def grad_logits(rows: slice) -> torch.Tensor:
            return _chunk_grad_logits(
                chunk_log_probs(hidden[rows], weight, bias, ctx.temperature),
                targets[rows],
                None if grad_chosen is None else grad_chosen[rows],
                None if grad_entropy is None else (grad_entropy[rows], entropy[rows]),
            ).div_(ctx.temperature)

        with torch.autocast(*ctx.autocast):
            grads = head_gradients(hidden, weight, bias, ctx.needs_input_grad, ctx.chunk, grad_logits)
        return *grads, None, None, None, None


def _chunk_grad_logits(
    log_probs: torch.Tensor,
    targets: torch.Tensor,
    grad_chosen: torch.Tensor | None,
    entropy_part: tuple[torch.Tensor, torch.Tensor] | None,
) -> torch.Tensor:
    """∂L/∂z `[c, V]` = g_y (onehot(y) − π) − g_H π ⊙ (log π + H), built in place on log π's memory."""
    probs = exp(log_probs)
    if entropy_part is None:
        grad = probs.mul_(-grad_chosen[:, None])
    else:
        grad_entropy, entropy = entropy_part
        grad = log_probs.add_(entropy[:, None]).mul_(probs).mul_(-grad_entropy[:, None])
        if grad_chosen is not None:
            grad.sub_(probs.mul_(grad_chosen[:, None]))
    if grad_chosen is not None:
        grad.scatter_add_(1, targets[:, None], grad_chosen[:, None].to(grad.dtype))
    return grad


def token_logprobs(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    targets: torch.Tensor,
    temperature: float = 1.0,
    with_entropy: bool = False,
    chunk: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log π(y_n | h_n) `[N]` and, if asked, the entropy `[N]`, both float32, for hidden `[N, H]`.

    `chunk` tokens at a time (default `chunk_tokens(V, device)`). Gradients reach hidden, weight and
    bias through both outputs.
    """
    if hidden.dim() != 2 or targets.shape != hidden.shape[:1]:
        raise ValueError(f"hidden must be [N, H] and targets [N]; got {tuple(hidden.shape)}, {tuple(targets.shape)}")
    size = chunk if chunk is not None else chunk_tokens(weight.shape[0], hidden.device)
    if size < 1:
        raise ValueError(f"chunk must be at least 1, got {size}")
    chosen, entropy = _TokenLogProbs.apply(hidden, weight, bias, targets, temperature, with_entropy, size)
    return chosen, entropy if with_entropy else None
