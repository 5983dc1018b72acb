"""Checks a run passes before it loads anything: its models pinned, its teacher server named, and every
vLLM engine it will start within its share of the GPU (gropd/model/fit.py). Each failure is a clear error
(exit 2) naming what to set; a grid is checked whole before its first run starts."""

from __future__ import annotations

from gropd.config.errors import ConfigError
from gropd.config.manifests import Manifests
from gropd.config.schema import RunConfig
from gropd.model.checkpoints import checkpoint_ref, model_config
from gropd.model.components import max_model_len
from gropd.model.fit import GIB, Architecture, estimate, require_fit


def models_of(config: RunConfig, manifests: Manifests) -> dict[str, tuple[str, str]]:
    """Role -> (model label, mode) of the run: student and teacher, or an eval run's model."""
    if config.kind == "eval":
        return {"model": (config.model, config.mode)}
    record = manifests.pairings[config.pairing]
    return {side: (record[side]["model"], record[side]["mode"]) for side in ("student", "teacher")}


def require_pinned(config: RunConfig, manifests: Manifests) -> None:
    """ConfigError (run `pin`) unless every hub model of the run is in experiments/lock.yaml."""
    for label, _ in models_of(config, manifests).values():
        checkpoint_ref(manifests, config.profile, label)


def require_teacher_server(config: RunConfig, manifests: Manifests) -> None:
    """A run whose teacher is served needs the server's address before anything starts."""
    if config.kind != "train" and config.kind != "score" or config.backend.teacher != "server":
        return
    if not config.backend.teacher_url:
        label = manifests.pairings[config.pairing]["teacher"]["model"]
        raise ConfigError(
            f"run {config.run_id}",
            "backend.teacher_url",
            f"missing: its teacher {label} is scored by a server (backend.teacher: server)",
            f"http://HOST:PORT of `experiments/launch/teacher_server.sh {label}` started first on a GPU node "
            "(pass backend.teacher_url=..., or TEACHER_URL=... to experiments/launch/slurm_run.sbatch)",
        )


def require_fits(config: RunConfig, manifests: Manifests, gpu_bytes: int) -> None:
    """FitError unless each vLLM engine of the run fits `gpu_bytes` x its fraction (gropd/model/fit.py): during
    training the student's rollout engine and an in-process teacher share a GPU with the trainer; the
    evaluation engine runs alone after training."""
    b = config.backend
    engines = []  # (what, label, fraction, max_new_tokens, batched tokens, knobs)
    roles = models_of(config, manifests)
    if config.kind in ("train", "score"):
        if b.rollout == "vllm":
            engines.append(
                (
                    "rollout engine",
                    roles["student"][0],
                    b.rollout_gpu_fraction,
                    config.sampling.max_new_tokens,
                    8192,
                    "backend.rollout_gpu_fraction or sampling.max_new_tokens",
                )
            )
        if b.teacher == "vllm":
            engines.append(
                (
                    "in-process teacher engine",
                    roles["teacher"][0],
                    b.teacher_gpu_fraction,
                    config.sampling.max_new_tokens,
                    b.teacher_max_batched_tokens,
                    "backend.teacher: server (experiments/launch/teacher_server.sh) or backend.teacher_gpu_fraction",
                )
            )
        if b.rollout == "vllm" and b.teacher == "vllm" and b.rollout_gpu_fraction + b.teacher_gpu_fraction >= 1:
            raise ConfigError(
                f"run {config.run_id}",
                "backend.rollout_gpu_fraction + backend.teacher_gpu_fraction",
                f"{b.rollout_gpu_fraction + b.teacher_gpu_fraction:.2f} of one GPU for two engines",
                "less than 1, leaving room for the trainer",
            )
    if b.rollout == "vllm":
        label, mode = roles["model" if config.kind == "eval" else "student"]
        engines.append(
            (
                "evaluation engine",
                label,
                b.eval_gpu_fraction,
                config.eval.sampling[mode].max_new_tokens,
                8192,
                "backend.eval_gpu_fraction, backend.tensor_parallel or eval.sampling.<mode>.max_new_tokens",
            )
        )
    for what, label, fraction, new_tokens, batched, knobs in engines:
        ref = checkpoint_ref(manifests, config.profile, label)
        fit = estimate(
            Architecture.of(model_config(ref)),
            dtype=b.dtype,
            tensor_parallel=b.tensor_parallel,
            max_model_len=max_model_len(config, new_tokens),
            max_batched_tokens=batched,
            fraction=fraction,
            gpu_bytes=gpu_bytes,
        )
        require_fit(
            f"run {config.run_id}: the {what} of {ref.describe()} (tensor parallel {b.tensor_parallel}, "
            f"{fraction} of a {gpu_bytes / GIB:.0f} GiB GPU)",
            fit,
            knobs,
        )


def preflight(config: RunConfig, manifests: Manifests) -> None:
    """Every check above that applies where this process runs (fits: only with CUDA, where vLLM runs)."""
    import torch

    if config.profile == "paper":
        require_pinned(config, manifests)
    require_teacher_server(config, manifests)
    if torch.cuda.is_available() and "vllm" in (config.backend.rollout, config.backend.teacher):
        require_fits(config, manifests, torch.cuda.get_device_properties(0).total_memory)
