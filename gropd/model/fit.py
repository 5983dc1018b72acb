"""Does a run fit its GPU? An estimate from the model's config.json, checked before anything is loaded, so a
run that cannot fit stops at once with what to change (gropd/runs/preflight.py, experiments/launch/
teacher_server.sh). The formulas are ours, not vLLM's profiler or PyTorch's allocator: a configuration that
passes can still be refused, but one that fails here would not start (or would crash later) there.

A vLLM engine per GPU, with tensor parallelism `tp` (vLLM 0.33: linear layers and the vocabulary embedding
split over tp; KV heads split too, at least one per rank; norms replicated):

    weights      = parameters · bytes(dtype) / tp
    kv           = max_model_len · kv_per_token     (vLLM refuses to start unless its KV cache holds one
                   kv_per_token = 2 · layers · max(1, kv_heads / tp) · head_dim · bytes(dtype)   sequence)
    workspace    = logit_rows · vocab · 4 bytes (float32 logits held at once: `logit_rows`)
                   + WORKSPACE_GIB (activations, CUDA graphs, allocator slack: our allowance)
    budget       = fraction · GPU memory        (gpu_memory_utilization is a share of the whole card)

A batch of S sequences of up to max_model_len tokens: the cache left after weights and workspace holds
`at_once` = ⌊(budget − weights − workspace) / (max_model_len · kv_per_token)⌋ of them at full length; the
others wait, or are preempted and recomputed when the cache fills (vLLM's scheduler), so a batch whose
responses all run long takes up to ⌈S / at_once⌉ waves (`Fit.waves`).

The trainer on one GPU (one process of `shards`; shards > 1 only under FSDP):

    states       = parameters · 16 / shards     (float32 masters 4 + gradients 4 + AdamW m and v 8 bytes)
    compute      = parameters · bytes(dtype)     without FSDP, in bf16: autocast keeps a bf16 copy of every
                                                 weight a forward used until the forward ends
                 = (embedding + 2 layers) · bytes(dtype)   under FSDP2, on any number of ranks (one unit
                                                 gathered in bf16, the next prefetched; no whole-model copy)
    activations  = per row of T tokens, one layer's working set T · (10 · hidden + 4 · intermediate) ·
                   bytes(dtype), plus each layer's float32 input (T · hidden · 4) with gradient checkpointing,
                   or every layer's working set without; the largest of the update (per_device_batch rows of
                   max_model_len) and a no-grad forward (max_tokens_per_forward tokens, one layer at a time)
    logits       = LOGPROB_LIVE_COPIES · chunk · vocab · 4 bytes   the float32 [chunk, vocab] tensors a log-prob
                                                 chunk holds at once (gropd/model/chunked_logprobs.py), in every
                                                 forward and backward; on CUDA chunk = LOGPROB_CUDA_ELEMENTS / vocab
                                                 tokens (fixed: 4 GiB at any vocabulary)
    head         = vocab · hidden · 10 bytes     the LM head's gradient while the chunks run (head_gradients): its
                                                 float32 sum 4 + a chunk's bf16 product 2 + that product in float32 4
    optimizer    = parameters · 4 / shards       foreach AdamW's float32 sqrt(v) of every parameter at once
                                                 (torch/optim/adam.py _multi_tensor_adam: _foreach_sqrt);
                 = 0                             fused AdamW (one kernel, no temporary: the trainer on CUDA)
    need         = states + max(compute + activations + logits + head, optimizer) + slack   (the optimiser
                                                 steps after the backward has freed activations and compute copies)
    slack        = TRAINER_SLACK_GIB (CUDA context, allocator: our allowance)

Measured on an H200 (benchmarks/gpu_check.py update phase, Qwen3-1.7B shapes, FSDP2 on 1 rank, foreach AdamW):
a peak of 34.7 GiB at both 2,048- and 8,192-token responses; these formulas give 36.0 and 37.8 GiB (the logits and
head terms are upper bounds: not all of a chunk's copies live beside the head's largest temporaries).

It shares the GPU with the engines that live beside it: trainer + Σ fraction · GPU memory ≤ GPU memory.

The split of a training GPU (`choose_split`, in twentieths of the card): an in-process teacher gets the least
share whose KV cache holds TEACHER_SEQUENCES full-length sequences (it only prefills: one row scored, the next
queued), SPLIT_FREE of the card stays free (CUDA contexts, fragmentation), and the rollout engine gets the rest
beside the trainer, so that a rank's rollout batch runs in as few waves as the card allows. pairings.yaml
writes each pairing's split for an 80 GB card (PLANNED_GPU_BYTES); tests/test_preflight.py checks they agree.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gropd.config.schema import RunConfig

GIB = 1024**3
WORKSPACE_GIB = 2.0
TRAINER_SLACK_GIB = 2.0
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
PROMPT_LOGPROB_CHUNK_V2 = 1024  # vLLM 0.33.0 vllm/v1/worker/gpu/sample/prompt_logprob.py CHUNK_SIZE
SAMPLER_ROWS = 1024  # vLLM 0.33.0 max_num_seqs of an LLM on an H100/H200 (EngineArgs.get_batch_defaults): logits rows
LOGPROB_CUDA_ELEMENTS = 2**28  # = chunked_logprobs.py MAX_CHUNK_ELEMENTS, the chunk on CUDA (tests/test_fit.py)
LOGPROB_LIVE_COPIES = 4  # = chunked_logprobs.py LIVE_COPIES (torch is not imported to plan a run)
PLANNED_GPU_BYTES = 81559 * 2**20  # an H100 80 GB as nvidia-smi lists it: the card pairings.yaml's splits are for
SPLIT_STEPS = 20  # GPU shares in steps of 1/20 of the card
SPLIT_FREE = 1  # of those steps, kept free of engines and trainer
TEACHER_SEQUENCES = 2  # full-length sequences an in-process teacher engine's KV cache holds


def max_model_len(config: RunConfig, max_new_tokens: int) -> int:
    """A vLLM engine's max_model_len: the prompt budget plus the longest response it serves (a teacher's
    engine one more: vLLM generates one token after every prompt it scores)."""
    return config.backend.max_prompt_tokens + max_new_tokens


def model_runner_v2(environ: Mapping[str, str], cuda: bool) -> bool:
    """Whether vLLM 0.33.0 runs Model Runner V2 (`VllmConfig.use_v2_model_runner`, vllm/config/vllm.py):
    VLLM_USE_V2_MODEL_RUNNER (0/1) when set, else wherever Triton runs (CUDA) for engines like ours (no
    pipeline parallelism, speculative decoding or micro-batching, the features V2 lacks)."""
    value = environ.get("VLLM_USE_V2_MODEL_RUNNER")
    return bool(int(value)) if value not in (None, "") else cuda


def logit_rows(max_batched_tokens: int, v2: bool) -> int:
    """Rows of float32 `[rows, vocab]` logits a prompt-log-prob step holds at once: V2 computes them in chunks
    of 1,024 rows (`compute_prompt_logprobs_with_chunking`); the V1 runner takes a request's whole scheduled
    chunk, up to max_num_batched_tokens (`_get_prompt_logprobs_dict`, gpu_model_runner.py)."""
    return min(PROMPT_LOGPROB_CHUNK_V2, max_batched_tokens) if v2 else max_batched_tokens


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

    def layer_parameters(self) -> int:
        """One decoder layer: q/k/v/o, the gated MLP, its two norms and the q/k norms."""
        h, d = self.hidden, self.head_dim
        attention = h * self.heads * d + 2 * h * self.kv_heads * d + self.heads * d * h
        return attention + 3 * h * self.intermediate + 2 * h + 2 * d

    def parameters(self) -> int:
        """Embedding (and untied head), the layers, the final norm."""
        return self.vocab * self.hidden * (1 if self.tied else 2) + self.layers * self.layer_parameters() + self.hidden

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

    def at_once(self) -> int:
        """Sequences of max_model_len tokens whose KV cache fits at once (0 when not even one)."""
        return max(0, int((self.budget - self.weights - self.workspace) // self.kv))

    def waves(self, sequences: int) -> int:
        """⌈sequences / at_once⌉: rounds a batch takes when every response runs to the cap (module docstring)."""
        return math.ceil(sequences / max(1, self.at_once()))


def estimate(
    arch: Architecture,
    *,
    dtype: str,
    tensor_parallel: int,
    max_model_len: int,
    logit_rows: int,
    fraction: float,
    gpu_bytes: int,
) -> Fit:
    """The memory of one engine per GPU by the module docstring's formulas."""
    return Fit(
        weights=arch.parameters() * DTYPE_BYTES[dtype] / tensor_parallel,
        kv=max_model_len * arch.kv_bytes_per_token(dtype, tensor_parallel),
        workspace=logit_rows * arch.vocab * 4 + WORKSPACE_GIB * GIB,
        budget=fraction * gpu_bytes,
    )


@dataclass(frozen=True)
class Trainer:
    """The trainer's memory on one GPU, in bytes (module docstring)."""

    states: float
    compute: float
    activations: float
    optimizer: float
    logits: float
    head: float

    @property
    def need(self) -> float:
        working = self.compute + self.activations + self.logits + self.head
        return self.states + max(working, self.optimizer) + TRAINER_SLACK_GIB * GIB


def trainer_memory(
    arch: Architecture,
    *,
    dtype: str,
    shards: int,
    fsdp: bool,
    fused: bool,
    row_tokens: int,
    rows: int,
    forward_tokens: int,
    checkpointing: bool,
    chunk_elements: int = LOGPROB_CUDA_ELEMENTS,
) -> Trainer:
    """The trainer's states, compute copies, activations, log-prob chunk, head-gradient and optimiser temporaries by
    the module docstring's formulas (`shards` > 1 only with `fsdp`; `chunk_elements`: logits a chunk holds, the
    CUDA trainer's by default)."""
    size = DTYPE_BYTES[dtype]
    params = arch.parameters()
    if fsdp:
        compute = (arch.vocab * arch.hidden + 2 * arch.layer_parameters()) * size
    else:
        compute = params * size if size < 4 else 0
    working = (10 * arch.hidden + 4 * arch.intermediate) * size  # one layer, per token
    kept = arch.hidden * 4 if checkpointing else working  # per layer and token, until the backward
    update = rows * row_tokens * (arch.layers * kept + (working if checkpointing else 0))
    forward = forward_tokens * (working + 2 * arch.hidden * 4)
    return Trainer(
        states=params * 16 / shards,
        compute=compute,
        activations=max(update, forward),
        optimizer=0 if fused else params * 4 / shards,
        logits=LOGPROB_LIVE_COPIES * (chunk_elements // arch.vocab) * arch.vocab * 4,
        head=arch.vocab * arch.hidden * 10,
    )


def run_trainer_memory(arch: Architecture, config: RunConfig, shards: int, fsdp: bool, fused: bool) -> Trainer:
    """trainer_memory for `config`'s update (per_device_batch rows of max_model_len tokens), no-grad forwards
    (backend.max_tokens_per_forward) and precision: the one estimate both the plan (gropd/runs/preflight.py) and
    the trainer's logged `memory_trainer_estimate_gib` (gropd/train/loop.py) read."""
    b = config.backend
    return trainer_memory(
        arch,
        dtype=b.dtype,
        shards=shards,
        fsdp=fsdp,
        fused=fused,
        row_tokens=max_model_len(config, config.sampling.max_new_tokens),
        rows=config.train.per_device_batch,
        forward_tokens=b.max_tokens_per_forward,
        checkpointing=b.gradient_checkpointing,
    )


@dataclass(frozen=True)
class Split:
    """A training GPU's shares: `rollout` and `teacher` (0: no in-process teacher) engine fractions, and the
    rollout engine's estimate at its share."""

    rollout: float
    teacher: float
    rollout_fit: Fit

    def describe(self, sequences: int, trainer_need: float) -> str:
        """`rollout 0.50 + teacher 0.20 beside the trainer's 16.1 GiB: ... 31 of 64 sequences at once (3 waves)`."""
        teacher = f" + teacher {self.teacher:.2f}" if self.teacher else ""
        fit = self.rollout_fit
        return (
            f"rollout {self.rollout:.2f}{teacher} of a {fit.budget / self.rollout / GIB:.0f} GiB GPU beside the "
            f"trainer's {trainer_need / GIB:.1f} GiB: the rollout engine holds {fit.at_once()} of its {sequences} "
            f"sequences at full length at once ({fit.waves(sequences)} wave(s) when all run long)"
        )


def choose_split(
    trainer_need: float, rollout: Callable[[float], Fit], teacher: Callable[[float], Fit] | None, gpu_bytes: int
) -> Split | None:
    """The module docstring's split of a `gpu_bytes` card: `rollout(fraction)` and `teacher(fraction)` estimate each
    engine at a share (teacher None: none in-process); None when no split fits (the teacher's least share, or no
    room for a rollout engine that fits)."""
    teacher_steps = 0
    if teacher is not None:
        fits = (k for k in range(1, SPLIT_STEPS + 1) if teacher(k / SPLIT_STEPS).at_once() >= TEACHER_SEQUENCES)
        teacher_steps = next(fits, None)
        if teacher_steps is None:
            return None
    room = math.floor((SPLIT_STEPS - SPLIT_FREE) - SPLIT_STEPS * trainer_need / gpu_bytes) - teacher_steps
    if room < 1 or not rollout(room / SPLIT_STEPS).fits:
        return None
    return Split(room / SPLIT_STEPS, teacher_steps / SPLIT_STEPS, rollout(room / SPLIT_STEPS))


def describe(fit: Fit) -> str:
    """`weights 61.0 + KV 10.0 + workspace 4.3 = 75.3 GiB > 67.4 GiB`-style summary."""
    sign = "<=" if fit.fits else ">"
    return (
        f"weights {fit.weights / GIB:.1f} + KV {fit.kv / GIB:.1f} + workspace {fit.workspace / GIB:.1f} "
        f"= {fit.need / GIB:.1f} GiB {sign} {fit.budget / GIB:.1f} GiB"
    )


def describe_trainer(trainer: Trainer) -> str:
    return (
        f"float32 weights, gradients and AdamW {trainer.states / GIB:.1f} + the larger of compute copies "
        f"{trainer.compute / GIB:.1f} + activations {trainer.activations / GIB:.1f} + log-prob chunk "
        f"{trainer.logits / GIB:.1f} + head gradient {trainer.head / GIB:.1f} and the optimiser's temporary "
        f"{trainer.optimizer / GIB:.1f} + {TRAINER_SLACK_GIB:.0f} GiB slack = {trainer.need / GIB:.1f} GiB"
    )


def require_fit(what: str, fit: Fit, knobs: str) -> None:
    """Raise FitError naming the engine, the estimate and the settings to change, unless it fits."""
    if not fit.fits:
        raise FitError(f"{what} does not fit: {describe(fit)} (our estimate: gropd/model/fit.py). Set {knobs}.")


class FitError(RuntimeError):
    """A run would not fit its GPU; the message says what to set."""


def main(argv: list[str] | None = None) -> int:
    """`python -m gropd.model.fit LABEL --tensor-parallel N ...`: the check for a teacher server before it starts
    (experiments/launch/teacher_server.sh); exit 2 when the model cannot fit, 0 when it can or no GPU
    is here to check against."""
    import argparse
    import os
    import sys
    from pathlib import Path

    import torch

    from gropd.config import load_manifests
    from gropd.model.checkpoints import checkpoint_ref, model_config

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("label", help="a paper-profile model label (models.yaml)")
    parser.add_argument("--tensor-parallel", type=int, required=True)
    parser.add_argument("--max-model-len", type=int, required=True)
    parser.add_argument("--max-batched-tokens", type=int, default=8192, help="vLLM's server default on an H100")
    parser.add_argument("--fraction", type=float, required=True)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device here: the fit was not checked", file=sys.stderr)
        return 0
    ref = checkpoint_ref(load_manifests(Path("experiments")), "paper", args.label)
    fit = estimate(
        Architecture.of(model_config(ref)),
        dtype="bfloat16",  # teacher_server.sh serves --dtype bfloat16
        tensor_parallel=args.tensor_parallel,
        max_model_len=args.max_model_len,
        logit_rows=logit_rows(args.max_batched_tokens, model_runner_v2(os.environ, cuda=True)),
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
