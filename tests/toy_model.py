"""The toy Qwen3 the unit tests build: 2 layers, hidden 32, 4 attention heads of 8 over 2 KV heads, 64 positions,
torch's own initialisation after torch.manual_seed(seed). (The vLLM tests need head_dim 64 and build their own.)"""

from __future__ import annotations

from typing import Any

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

TOY_SHAPE = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "max_position_embeddings": 64,
}


def toy_qwen3(vocab: int, seed: int = 0, **config: Any) -> Qwen3ForCausalLM:
    """A fresh toy Qwen3 with `vocab` tokens (in training mode); `config` adds or replaces Qwen3Config fields."""
    torch.manual_seed(seed)
    return Qwen3ForCausalLM(Qwen3Config(**{"vocab_size": vocab, **TOY_SHAPE, **config}))
