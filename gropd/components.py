"""Build what a run needs from its config: student, teacher scorer, rollout engine, prompts.

Backends are chosen by name (`backend.rollout`, `backend.teacher`); an unknown name lists
the valid ones. Only models, data and sizes differ between profiles, never the code path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from gropd.checkpoints import CheckpointRef, check_same_tokenizer, checkpoint_ref, load_model, load_tokenizer
from gropd.config.manifests import Manifests
from gropd.config.schema import RunConfig
from gropd.rollout.base import RolloutEngine
from gropd.teacher.base import TeacherScorer
from gropd.templates import render_prompt, stop_token_ids


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


def _hf_teacher(config: RunConfig, teacher: Role, device: torch.device, pad_id: int) -> TeacherScorer:
    from gropd.teacher.hf import HFTeacher

    return HFTeacher(
        load_model(teacher.ref, device, config.backend.dtype), pad_id, device, config.backend.max_tokens_per_forward
    )


def _vllm_teacher(config: RunConfig, teacher: Role, device: torch.device, pad_id: int) -> TeacherScorer:
    from gropd.teacher.vllm_engine import VLLMTeacher

    return VLLMTeacher(
        teacher.ref.path,
        revision=teacher.ref.revision,
        tensor_parallel=config.backend.tensor_parallel,
        dtype=config.backend.dtype,
        gpu_memory_utilization=0.3,
        max_model_len=None,
        tokenizer=teacher.ref.tokenizer_path,
    )


def _server_teacher(config: RunConfig, teacher: Role, device: torch.device, pad_id: int) -> TeacherScorer:
    from gropd.teacher.server import ServerTeacher

    if not config.backend.teacher_url:
        raise ValueError("backend.teacher=server needs backend.teacher_url (http://host:port of `vllm serve`)")
    return ServerTeacher(
        config.backend.teacher_url,
        model=teacher.ref.path,
        revision=teacher.ref.revision,
        batch_size=64,
        timeout_s=600.0,
        max_retries=5,
        backoff_s=2.0,
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


def build_rollout(
    config: RunConfig,
    role: Role,
    model: torch.nn.Module | None,
    tokenizer: Any,
    device: torch.device,
    *,
    seed: int,
    gpu_memory_utilization: float,
) -> RolloutEngine:
    """The rollout engine named by backend.rollout for `role` (checkpoint + mode).

    hf samples from `model` itself (required); vllm starts its own engine from the checkpoint
    (`model` unused) and follows the trainer's weights through sync_weights.
    """
    stops = stop_token_ids(role.mode, tokenizer)
    if config.backend.rollout == "hf":
        from gropd.rollout.hf import HFRollout

        if model is None:
            raise ValueError("backend.rollout=hf samples from a loaded model; none was given")
        return HFRollout(model, stops, tokenizer.pad_token_id, device)
    if config.backend.rollout == "vllm":
        from gropd.rollout.vllm import VLLMRollout

        return VLLMRollout(
            role.ref.path,
            revision=role.ref.revision,
            tensor_parallel=config.backend.tensor_parallel,
            dtype=config.backend.dtype,
            gpu_memory_utilization=gpu_memory_utilization,
            enable_sleep_mode=False,
            seed=seed,
            max_model_len=None,
            stop_token_ids=stops,
            tokenizer=role.ref.tokenizer_path,
        )
    raise ValueError(f"unknown rollout backend {config.backend.rollout!r}; valid: hf, vllm")


def load_student(student: Role, teacher: Role, device: torch.device, dtype: str) -> tuple[torch.nn.Module, Any]:
    """The student model and its tokenizer; refuses a teacher with a different vocabulary."""
    tokenizer = load_tokenizer(student.ref)
    check_same_tokenizer(load_tokenizer(teacher.ref), tokenizer, teacher.ref.describe(), student.ref.describe())
    return load_model(student.ref, device, dtype), tokenizer
