"""A Qwen3 model's rotary (cos, sin) looked up in a table, for a process that calls no MKL vector math
(gropd/vector_math.py).

transformers' Qwen3RotaryEmbedding computes `freqs = position · inv_freq` (float32) and then `cos(freqs)`,
`sin(freqs)` with torch, which a CPU sends to MKL's VML on every forward. The table holds, for every position
`p < max_position_embeddings`, the same float32 `freqs = float32(p) · inv_freq`, with cos and sin taken in double
precision by Python's `math` (glibc's libm: the same code on every x86-64 CPU) and rounded to float32 once;
`attention_scaling` multiplies them as in transformers (1 for the default rope). Only the default rope is
tabulated; a model with another rope type, or a position past the table, is refused."""

from __future__ import annotations

import math

import torch

from gropd.vector_math import VML_FREE


class RotaryTable(torch.nn.Module):
    """`forward(x, position_ids [B, T]) -> (cos, sin)`, each `[B, T, head_dim]` in x's dtype, from the table."""

    def __init__(self, rotary: torch.nn.Module, positions: int):
        super().__init__()
        half = rotary.inv_freq.detach().to(device="cpu", dtype=torch.float32)
        freqs = torch.arange(positions, dtype=torch.float32)[:, None] * half[None, :]  # [P, head_dim / 2]
        angles = torch.cat((freqs, freqs), dim=-1).double().tolist()
        cos = torch.tensor([[math.cos(a) for a in row] for row in angles], dtype=torch.float64).float()
        sin = torch.tensor([[math.sin(a) for a in row] for row in angles], dtype=torch.float64).float()
        scaling = float(rotary.attention_scaling)
        device = rotary.inv_freq.device
        self.cos = torch.nn.Buffer((cos * scaling).to(device), persistent=False)
        self.sin = torch.nn.Buffer((sin * scaling).to(device), persistent=False)

    @torch.no_grad()
    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if position_ids.numel() and int(position_ids.max()) >= self.cos.shape[0]:
            raise ValueError(
                f"rotary table: position {int(position_ids.max())} is past the model's "
                f"max_position_embeddings ({self.cos.shape[0]})"
            )
        return self.cos[position_ids].to(x.dtype), self.sin[position_ids].to(x.dtype)


def tabulate_rotary(model: torch.nn.Module) -> torch.nn.Module:
    """`model` with its rotary embedding (`model.model.rotary_emb`) replaced by a RotaryTable in a process that
    calls no MKL vector math; elsewhere `model` as it is."""
    if not VML_FREE:
        return model
    inner = model.model
    config = model.config
    rope_type = (getattr(config, "rope_parameters", None) or {}).get("rope_type", "default")
    if rope_type != "default":
        raise ValueError(f"rotary table: rope_type {rope_type!r} (only the default rope is tabulated)")
    inner.rotary_emb = RotaryTable(inner.rotary_emb, config.max_position_embeddings)
    return model
