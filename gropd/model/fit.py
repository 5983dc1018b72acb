"""Does a vLLM engine fit its GPU share? An estimate from the model's config.json, checked before
anything is loaded, so a run that cannot fit stops at once with what to change.

Per GPU, with tensor parallelism `tp` (vLLM 0.33: linear layers and the vocabulary embedding split
over tp; KV heads split too, at least one per rank; norms replicated):

    weights    = parameters · bytes(dtype) / tp
    kv         = max_model_len · 2 · layers · max(1, kv_heads / tp) · head_dim · bytes(dtype)
                 (vLLM refuses to start unless its KV cache holds one sequence of max_model_len)
    workspace  = max_batched_tokens · vocab · 4 bytes  (the float32 logits of one prefill chunk)
                 + WORKSPACE_GIB (activations, CUDA graphs, allocator slack: our allowance)
    budget     = fraction · GPU memory  (vLLM's gpu_memory_utilization is a share of the whole card)

The estimate is ours, not vLLM's profiler: a configuration that passes can still be refused by vLLM,
but one that fails here would not start (or would crash later) there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GIB = 1024**3
WORKSPACE_GIB = 2.0
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


@dataclass(frozen=True)
class Architecture:
    """The numbers of a causal LM's config.json that decide its memory."""

    vocab: int
    hidden: int
    layers: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    tied: bool

    @staticmethod
    def of(config: dict[str, Any]) -> Architecture:
        """From a Qwen3 (or Llama-like) config.json mapping."""
        heads = int(config["num_attention_heads"])
        return Architecture(
            vocab=int(config["vocab_size"]),
            hidden=int(config["hidden_size"]),
            layers=int(config["num_hidden_layers"]),
            intermediate=int(config["intermediate_size"]),
            heads=heads,
            kv_heads=int(config.get("num_key_value_heads") or heads),
            head_dim=int(config.get("head_dim") or config["hidden_size"] // heads),
            tied=bool(config.get("tie_word_embeddings", False)),
        )

    def parameters(self) -> int:
        """Embedding (and untied head), per layer q/k/v/o, gated MLP, norms (q/k norms included)."""
        h, d = self.hidden, self.head_dim
        attention = h * self.heads * d + 2 * h * self.kv_heads * d + self.heads * d * h
        layer = attention + 3 * h * self.intermediate + 2 * h + 2 * d
        return self.vocab * h * (1 if self.tied else 2) + self.layers * layer + h

    def kv_bytes_per_token(self, dtype: str, tp: int) -> int:
        return 2 * self.layers * max(1, self.kv_heads // tp) * self.head_dim * DTYPE_BYTES[dtype]


@dataclass(frozen=True)
class Fit:
    """The estimate for one engine on one GPU, in bytes; `fits` when need <= budget."""

    weights: float
    kv: float
    workspace: float
    budget: float

    @property
    def need(self) -> float:
        return self.weights + self.kv + self.workspace

    @property
    def fits(self) -> bool:
        return self.need <= self.budget


def estimate(
    arch: Architecture,
    *,
    dtype: str,
    tensor_parallel: int,
    max_model_len: int,
    max_batched_tokens: int,
    fraction: float,
    gpu_bytes: int,
) -> Fit:
    """The memory of one engine per GPU by the module docstring's formulas."""
    return Fit(
        weights=arch.parameters() * DTYPE_BYTES[dtype] / tensor_parallel,
        kv=max_model_len * arch.kv_bytes_per_token(dtype, tensor_parallel),
        workspace=max_batched_tokens * arch.vocab * 4 + WORKSPACE_GIB * GIB,
        budget=fraction * gpu_bytes,
    )


def describe(fit: Fit) -> str:
    """`weights 61.0 + KV 10.0 + workspace 4.3 = 75.3 GiB > 67.4 GiB`-style summary."""
    sign = "<=" if fit.fits else ">"
    return (
        f"weights {fit.weights / GIB:.1f} + KV {fit.kv / GIB:.1f} + workspace {fit.workspace / GIB:.1f} "
        f"= {fit.need / GIB:.1f} GiB {sign} {fit.budget / GIB:.1f} GiB"
    )


def require_fit(what: str, fit: Fit, knobs: str) -> None:
    """Raise FitError naming the engine, the estimate and the settings to change, unless it fits."""
    if not fit.fits:
        raise FitError(f"{what} does not fit: {describe(fit)} (our estimate: gropd/model/fit.py). Set {knobs}.")


class FitError(RuntimeError):
    """A vLLM engine would not fit its GPU share; the message says what to set."""


def main(argv: list[str] | None = None) -> int:
    """`python -m gropd.model.fit LABEL --tensor-parallel N ...`: the check for a teacher server before it starts
    (experiments/launch/teacher_server.sh); exit 2 when the model cannot fit, 0 when it can or no GPU
    is here to check against."""
    import argparse
    import sys
    from pathlib import Path

    import torch

    from gropd.config import load_manifests
    from gropd.model.checkpoints import checkpoint_ref, model_config

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("label")
    parser.add_argument("--profile", default="paper")
    parser.add_argument("--tensor-parallel", type=int, required=True)
    parser.add_argument("--max-model-len", type=int, required=True)
    parser.add_argument("--max-batched-tokens", type=int, required=True)
    parser.add_argument("--fraction", type=float, required=True)
    parser.add_argument("--dtype", default="bfloat16")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device here: the fit was not checked", file=sys.stderr)
        return 0
    ref = checkpoint_ref(load_manifests(Path("experiments")), args.profile, args.label)
    fit = estimate(
        Architecture.of(model_config(ref)),
        dtype=args.dtype,
        tensor_parallel=args.tensor_parallel,
        max_model_len=args.max_model_len,
        max_batched_tokens=args.max_batched_tokens,
        fraction=args.fraction,
        gpu_bytes=torch.cuda.get_device_properties(0).total_memory,
    )
    try:
        require_fit(
            f"{ref.describe()} at tensor parallel {args.tensor_parallel}",
            fit,
            "the server's TP (more GPUs), MAX_MODEL_LEN or GPU_MEMORY_UTILIZATION",
        )
    except FitError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"fits: {describe(fit)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
