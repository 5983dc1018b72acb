"""The exact per-token reverse KL to the teacher over the whole vocabulary, from final hidden states, chunk by
chunk (method `fullkl`, beyond the paper: the quantity that TRL's DistillationTrainer at β = 1 minimises).

With the student's hidden states h `[N, H]`, its head W (b) and temperature τ, z = (h Wᵀ + b) / τ and
p = softmax(z); with the teacher's hidden states g `[N, H_T]` at the same positions and its head W_T (b_T),
q = softmax(g W_Tᵀ + b_T) (temperature 1, as the teacher scores f; no gradient reaches the teacher):

    KL_n = Σ_v p_v (log p_v − log q_v)                (≥ 0, 0 iff p = q)
    ∂KL_n/∂z_v = p_v (log p_v − log q_v − KL_n)

Only `[chunk, V]` logits of each model exist at a time, in forward and in backward (which recomputes them),
so memory grows with N·(H + H_T), not N·V. Matmuls run in each head's dtype, softmax and sums in float32.
"""

from __future__ import annotations

import torch

from gropd.model.chunked_logprobs import autocast_state, chunk_log_probs, chunk_tokens, head_gradients
from gropd.vector_math import exp


class _TokenReverseKL(torch.autograd.Function):
    """KL(p_n ‖ q_n) `[N]` float32; gradients reach the student's hidden states, head weight and bias."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, teacher_hidden, teacher_weight, teacher_bias, temperature, chunk):
        kl = hidden.new_empty(hidden.shape[0], dtype=torch.float32)
        for start in range(0, hidden.shape[0], chunk):
            rows = slice(start, start + chunk)
            log_p = chunk_log_probs(hidden[rows], weight, bias, temperature)
            log_q = chunk_log_probs(teacher_hidden[rows], teacher_weight, teacher_bias, 1.0)
            kl[rows] = exp(log_p).mul_(log_p - log_q).sum(-1)
            del log_p, log_q  # before the next chunk's logits exist
        ctx.save_for_backward(hidden, weight, bias, teacher_hidden, teacher_weight, teacher_bias, kl)
        ctx.temperature, ctx.chunk, ctx.autocast = temperature, chunk, autocast_state(hidden)
        return kl

    @staticmethod
    def backward(ctx, grad_kl):
        hidden, weight, bias, teacher_hidden, teacher_weight, teacher_bias, kl = ctx.saved_tensors

        def grad_logits(rows: slice) -> torch.Tensor:
            log_p = chunk_log_probs(hidden[rows], weight, bias, ctx.temperature)
            log_q = chunk_log_probs(teacher_hidden[rows], teacher_weight, teacher_bias, 1.0)
            grad = log_p.sub(log_q).sub_(kl[rows, None]).mul_(exp(log_p))
            return grad.mul_(grad_kl[rows, None] / ctx.temperature)

        with torch.autocast(*ctx.autocast):
            grads = head_gradients(hidden, weight, bias, ctx.needs_input_grad, ctx.chunk, grad_logits)
        return *grads, None, None, None, None, None


def token_reverse_kl(
    hidden: torch.Tensor,
    head: torch.nn.Linear,
    teacher_hidden: torch.Tensor,
    teacher_head: torch.nn.Linear,
    temperature: float = 1.0,
    chunk: int | None = None,
) -> torch.Tensor:
    """KL(π_S(·|h_n) ‖ π_T(·|h_n)) `[N]` float32 for student hidden states `[N, H]` and the teacher's
    `[N, H_T]` at the same positions (module docstring); `chunk` tokens at a time (default chunk_tokens(V, device))."""
    if hidden.dim() != 2 or teacher_hidden.shape[:1] != hidden.shape[:1]:
        raise ValueError(
            f"hidden must be [N, H] and teacher_hidden [N, H_T]; got {tuple(hidden.shape)}, "
            f"{tuple(teacher_hidden.shape)}"
        )
    if head.weight.shape[0] != teacher_head.weight.shape[0]:
        raise ValueError(f"vocabularies differ: student {head.weight.shape[0]}, teacher {teacher_head.weight.shape[0]}")
    size = chunk if chunk is not None else chunk_tokens(head.weight.shape[0], hidden.device)
    teacher_hidden = teacher_hidden.detach().to(teacher_head.weight.dtype)
    return _TokenReverseKL.apply(
        hidden,
        head.weight,
        head.bias,
        teacher_hidden,
        teacher_head.weight.detach(),
        None if teacher_head.bias is None else teacher_head.bias.detach(),
        temperature,
        size,
    )
