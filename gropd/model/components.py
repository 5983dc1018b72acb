"""Build what a run needs from its config: student, teacher scorer, rollout engine, prompts.

Backends are chosen by name (`backend.rollout`, `backend.teacher`); an unknown name lists
the valid ones. Only models, data and sizes differ between profiles, never the code path.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from gropd.config.manifests import Manifests
from gropd.config.schema import RunConfig
from gropd.model.checkpoints import (
    CheckpointRef,
    check_same_tokenizer,
    checkpoint_ref,
    load_model,
    load_tokenizer,
    require_same_on_every_rank,
    torch_dtype,
)
from gropd.model.fit import max_model_len
from gropd.model.rollout.base import RolloutEngine, StopRule
from gropd.model.teacher.base import TeacherScorer
from gropd.templates import render_prompt, stop_strings, stop_token_ids


@dataclass(frozen=True)
class Role:
    """One side of a pairing: which checkpoint, which mode it is prompted in."""

    label: str
    mode: str
    ref: CheckpointRef


@dataclass(frozen=True)
class PromptRenderer:
    """Question text -> prompt token ids for one mode (templates.render_prompt + encode)."""

    tokenizer: Any
    mode: str
    instruction: str

    def __call__(self, question: str) -> list[int]:
        text = render_prompt(question, self.mode, self.tokenizer, self.instruction)
        return list(self.tokenizer.encode(text, add_special_tokens=False))


def pairing_roles(config: RunConfig, manifests: Manifests) -> tuple[Role, Role, str]:
    """(student, teacher, teacher_render) of the run's pairing in the run's profile."""
    record = manifests.pairings[config.pairing]
    roles = []
    for side in ("student", "teacher"):
        label, mode = record[side]["model"], record[side]["mode"]
        roles.append(Role(label, mode, checkpoint_ref(manifests, config.profile, label)))
    return roles[0], roles[1], record.get("teacher_render", "own")


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("backend.device=cuda but CUDA is not available on this machine")
    return torch.device(name)


TEACHER_WAIT_ENV = "GROPD_TEACHER_WAIT_S"
TEACHER_WAIT_S = 1800.0  # a 32B `vllm serve` downloads, loads and compiles for minutes before it answers


def teacher_wait_s(environ: Mapping[str, str]) -> float:
    """How long a run waits for its teacher server to answer, at start-up and again whenever it goes away
    mid-run: GROPD_TEACHER_WAIT_S seconds (an operational setting, outside the run's config and hash), default
    TEACHER_WAIT_S."""
    text = environ.get(TEACHER_WAIT_ENV, "").strip()
    if not text:
        return TEACHER_WAIT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"{TEACHER_WAIT_ENV}={text!r}: expected a positive number of seconds")
    return value


TEACHER_CONCURRENCY_ENV = "GROPD_TEACHER_CONCURRENCY"
TEACHER_CONCURRENCY = 4  # requests a rank keeps in flight: one per replica of teacher_server.sh's default 4


def teacher_concurrency(environ: Mapping[str, str]) -> int:
    """How many scoring requests a rank keeps in flight at a teacher server: GROPD_TEACHER_CONCURRENCY (an
    operational setting, outside the run's config and hash: each row's log-probs are the server's whatever the
    batch), default TEACHER_CONCURRENCY."""
    text = environ.get(TEACHER_CONCURRENCY_ENV, "").strip()
    if not text:
        return TEACHER_CONCURRENCY
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{TEACHER_CONCURRENCY_ENV}={text!r}: expected a whole number of requests >= 1")
    return int(text)


def _hf_teacher(config: RunConfig, teacher: Role, device: torch.device, pad_id: int) -> TeacherScorer:
    """The transformers teacher, unsharded in every process: its real weights loaded on every rank (no prepare
    broadcasts them: gropd/model/checkpoints.py load_model) and checked equal across ranks before it scores."""
    from gropd.model.teacher.hf import HFTeacher

    b = config.backend
    model = load_model(teacher.ref, device, b.dtype, every_rank=True)
    require_same_on_every_rank(model, f"teacher {teacher.label} ({teacher.ref.describe()})")
    return HFTeacher(model, pad_id, device, b.max_tokens_per_forward, b.share_prompt_forward)


def _vllm_teacher(config: RunConfig, teacher: Role, device: torch.device, pad_id: int) -> TeacherScorer:
    from gropd.model.teacher.vllm_engine import VLLMTeacher

    return VLLMTeacher(
        teacher.ref.path,
        revision=teacher.ref.revision,
        tensor_parallel=config.backend.tensor_parallel,
        dtype=config.backend.dtype,
        gpu_memory_utilization=config.backend.teacher_gpu_fraction,
        max_model_len=max_model_len(config, config.sampling.max_new_tokens) + 1,
        max_num_batched_tokens=config.backend.teacher_max_batched_tokens,
        tokenizer=teacher.ref.tokenizer_path,
    )


def _server_teacher(config: RunConfig, teacher: Role, device: torch.device, pad_id: int) -> TeacherScorer:
    """The served teacher at backend.teacher_url, or where its address file says it is now (server.py)."""
    from gropd.model.teacher.server import ServerTeacher, teacher_address

    return ServerTeacher(
        teacher_address(config.backend.teacher_url, teacher.label, os.environ),
        model=teacher.ref.path,
        revision=teacher.ref.revision,
        batch_size=64,
        max_request_tokens=65536,  # ~8 rows of 8k tokens: a timeout resends at most this much
        timeout_s=600.0,
        max_retries=3,
        backoff_s=2.0,
        wait_s=teacher_wait_s(os.environ),
        context=max_model_len(config, config.sampling.max_new_tokens) + 1,
        concurrency=teacher_concurrency(os.environ),
    )


TEACHER_BACKENDS: dict[str, Callable[..., TeacherScorer]] = {
    "hf": _hf_teacher,
    "vllm": _vllm_teacher,
    "server": _server_teacher,
}


def build_teacher(config: RunConfig, teacher: Role, device: torch.device, pad_id: int) -> TeacherScorer:
    if config.backend.teacher not in TEACHER_BACKENDS:
        raise ValueError(f"unknown teacher backend {config.backend.teacher!r}; valid: {', '.join(TEACHER_BACKENDS)}")
    return TEACHER_BACKENDS[config.backend.teacher](config, teacher, device, pad_id)


def stop_rule(mode: str, tokenizer: Any) -> StopRule:
    """How a response of `mode` ends: the mode's stop tokens and stop strings (gropd/templates.py)."""
    return StopRule(tuple(stop_token_ids(mode, tokenizer)), stop_strings(mode))


def build_rollout(
    config: RunConfig,
    role: Role,
    model: torch.nn.Module | None,
    tokenizer: Any,
    device: torch.device,
    *,
    seed: int,
    gpu_fraction: float,
    own_copy: bool,
    max_new_tokens: int | None = None,
    distributed: bool = True,
    logprobs: bool = True,
    max_num_seqs: int | None = None,
) -> RolloutEngine:
    """The rollout engine named by backend.rollout for `role` (checkpoint + mode).

    hf samples `model` itself, or with `own_copy` its own copy in backend.dtype synced from it (the
    trainer's float32 masters, sharded or not); vllm starts its own engine from the checkpoint (`model`
    unused) and follows the trainer's weights through sync_weights. `max_new_tokens` sizes a vLLM
    engine's max_model_len (default: the training cap); `distributed` False keeps a vLLM engine out of
    the trainer's world (the evaluation after training runs on one rank); `logprobs` False: a vLLM engine asks
    for no sampler log-probs (the evaluation reads none; hf computes them anyway from the logits it samples);
    `max_num_seqs`: the most sequences a vLLM engine runs at once (training: a rank's share of a rollout batch;
    None: vLLM's default).
    """
    rule = stop_rule(role.mode, tokenizer)
    if config.backend.rollout == "hf":
        from gropd.model.rollout.hf import HFRollout

        if model is None:
            raise ValueError("backend.rollout=hf samples from a loaded model; none was given")
        decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=False)  # noqa: E731
        engine_dtype = torch_dtype(config.backend.dtype) if own_copy else None
        return HFRollout(model, rule, decode, tokenizer.pad_token_id, device, engine_dtype)
    if config.backend.rollout == "vllm":
        from gropd.model.rollout.vllm import VLLMRollout

        return VLLMRollout(
            role.ref.path,
            revision=role.ref.revision,
            tensor_parallel=config.backend.tensor_parallel,
            dtype=config.backend.dtype,
            gpu_memory_utilization=gpu_fraction,
            seed=seed,
            max_model_len=max_model_len(config, max_new_tokens or config.sampling.max_new_tokens),
            rule=rule,
            tokenizer=role.ref.tokenizer_path,
            distributed=distributed,
            logprobs=logprobs,
            max_num_seqs=max_num_seqs,
        )
    raise ValueError(f"unknown rollout backend {config.backend.rollout!r}; valid: hf, vllm")


def load_student(student: Role, teacher: Role, device: torch.device, dtype: str) -> tuple[torch.nn.Module, Any]:
    """The student model and its tokenizer; refuses a teacher with a different vocabulary."""
    tokenizer = load_tokenizer(student.ref)
    check_same_tokenizer(load_tokenizer(teacher.ref), tokenizer, teacher.ref.describe(), student.ref.describe())
    return load_model(student.ref, device, dtype), tokenizer
