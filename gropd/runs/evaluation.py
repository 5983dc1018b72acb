"""Evaluate a run's model (its trained student, or a reference checkpoint) with Avg@K on the
profile's suites, through the same rollout backends and prompt rendering as training.

After a multi-process run the evaluation shares no process and no distributed world with the
training engines: it runs in processes of its own (`gropd.cli evaluate RUN_ID` under a launcher), each
one shard of the questions on its own GPU (eval/shards.py), rank 0 merging; shards form no process
group (a vLLM engine in one starts its own one-process world). A one-process run starts its evaluation as
a process of its own afterwards, the one shard (gropd/runs/pipeline.py: evaluate_in_own_process).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from eval.runner import evaluate_model
from eval.suites import Question, SuiteSpec, load_questions, load_suite_manifest
from gropd.config.errors import ConfigError
from gropd.config.lock import dataset_revision, read_lock
from gropd.config.manifests import Manifests
from gropd.config.schema import SEED_MAX, RunConfig
from gropd.model.checkpoints import CheckpointRef, checkpoint_ref, load_model, load_tokenizer
from gropd.model.rollout.base import RolloutEngine, SamplingSettings
from gropd.record.run_dir import RunDir
from gropd.record.run_lock import shard_ended


def model_under_test(config: RunConfig, manifests: Manifests, run_dir: RunDir) -> tuple[CheckpointRef, str]:
    """(checkpoint, mode): the final student in the student's mode, or the eval run's model and mode."""
    if config.kind == "train":
        mode = manifests.pairings[config.pairing]["student"]["mode"]
        return CheckpointRef(str(run_dir.final), None, str(run_dir.final)), mode
    return checkpoint_ref(manifests, config.profile, config.model), config.mode


def evaluation_seed(config: RunConfig) -> int:
    """The seed an evaluation samples with: eval.seed for a trained run, whatever its training seed (its seeds'
    evaluations share their draws, as comparisons paired by seed want); eval.seed + seed for an eval run (seed 0:
    eval.seed itself), so that `grid table6 --seeds 3` evaluates each model at three evaluation seeds, the spread a
    baseline's evaluation has (the claims page, claim 0), where before its seeds were one evaluation three times."""
    return (config.eval.seed + (config.seed if config.kind == "eval" else 0)) % (SEED_MAX + 1)


def suites_for(config: RunConfig, manifests: Manifests) -> dict[str, tuple[SuiteSpec, list[Question]]]:
    """The run's suites (all of the profile's unless eval.suites names some), K overrides applied."""
    specs = load_suite_manifest(manifests.root / "suites.yaml", config.profile)
    lock_path = manifests.root / "lock.yaml"
    lock = read_lock(lock_path)
    chosen: dict[str, tuple[SuiteSpec, list[Question]]] = {}
    for name in config.eval.suites or list(specs):
        spec = specs[name]
        if name in config.eval.k:
            spec = spec.model_copy(update={"k": config.eval.k[name]})
        source, revision = spec.source, None  # a Hub dataset's full revision from the lock (required in paper)
        if source.kind == "hub" and not spec.local_jsonl:
            revision = dataset_revision(lock, source.repo, source.revision, lock_path, config.profile == "paper")
        questions = load_questions(
            spec, revision=revision, questions=config.eval.questions, first=config.eval.first_question
        )
        chosen[name] = (spec, questions)
    return chosen


LAUNCHER_WORLD = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE")
LAUNCHER_WORLD += ("ROLE_RANK", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def claim_shard(environ: MutableMapping[str, str]) -> tuple[int, int]:
    """(rank, world) of this process's shard of an evaluation, from its launcher (torchrun, accelerate
    launch; (0, 1) without one). Gives the process the local-rank-th visible GPU alone
    (CUDA_VISIBLE_DEVICES: its engine runs on cuda:0 of its own view) and takes the launcher's world out
    of its environment, so nothing here joins a process group (accelerate's PartialState behind a
    tracker, a vLLM engine). Call it before CUDA is initialised (any torch.cuda call)."""
    rank, world = launcher_count(environ, "RANK", 0), launcher_count(environ, "WORLD_SIZE", 1)
    local_rank, local_world = launcher_count(environ, "LOCAL_RANK", 0), launcher_count(environ, "LOCAL_WORLD_SIZE", 1)
    pairs = ((rank, world, "RANK, WORLD_SIZE"), (local_rank, local_world, "LOCAL_RANK, LOCAL_WORLD_SIZE"))
    for index, size, names in pairs:
        if size < 1 or index >= size:
            raise ConfigError("environment", names, f"{index} of {size}", "a rank below a world of 1 or more")
    if local_world > 1:
        visible = environ.get("CUDA_VISIBLE_DEVICES", ",".join(map(str, range(local_world)))).split(",")
        if local_rank >= len(visible):
            raise ConfigError(
                "environment",
                "LOCAL_RANK, CUDA_VISIBLE_DEVICES",
                f"local rank {local_rank} of {local_world} processes; visible GPUs: {visible}",
                "one visible GPU a local process",
            )
        environ["CUDA_VISIBLE_DEVICES"] = visible[local_rank]
    for name in LAUNCHER_WORLD:
        environ.pop(name, None)
    return rank, world


def launcher_count(environ: MutableMapping[str, str], name: str, default: int) -> int:
    """A launcher's rank or world size from `environ` (`default` when unset); ConfigError unless a count."""
    text = environ.get(name, str(default)).strip()
    if not text.isdigit():
        raise ConfigError("environment", name, repr(environ.get(name)), "a non-negative integer (set by the launcher)")
    return int(text)


def build_eval_engine(config: RunConfig, ref: CheckpointRef, mode: str, tokenizer: Any) -> RolloutEngine:
    """The run's rollout backend on the model under test (hf loads it here; vllm loads it itself), in
    this process alone (a shard's engine joins no world), asking for no sampler log-probs (none is read)."""
    from gropd.model.components import Role, build_rollout, resolve_device  # torch: not for planning (preflight)

    device = resolve_device(config.backend.device)
    model = load_model(ref, device, config.backend.dtype).eval() if config.backend.rollout == "hf" else None
    return build_rollout(
        config,
        Role(label=ref.describe(), mode=mode, ref=ref),
        model,
        tokenizer,
        device,
        seed=evaluation_seed(config),
        gpu_fraction=config.backend.eval_gpu_fraction,
        own_copy=False,
        max_new_tokens=config.eval.sampling[mode].max_new_tokens,
        distributed=False,
        logprobs=False,
    )


def evaluate_run(
    config: RunConfig, manifests: Manifests, run_dir: RunDir, shard: tuple[int, int] = (0, 1)
) -> dict[str, Any] | None:
    """Write run_dir/eval/<suite>.jsonl and summary.json (resuming a partial evaluation) as shard
    (rank, world) of the evaluation; the summary on rank 0, None on the others. The shard runs under a watchdog
    (gropd/train/watchdog.py) beaten once a chunk: a paper run's shard has the plan's deadline for its engine's
    build and first chunk (gropd/runs/job_plan.py: evaluation_startup_s), then the step rule over its chunks."""
    import torch

    from gropd.model.components import PromptRenderer
    from gropd.train.watchdog import ALLOWANCE_S, StepWatchdog

    startup_s = None
    if config.profile == "paper" and config.kind == "train" and config.backend.rollout == "vllm":
        from gropd.runs.job_plan import evaluation_startup_s

        startup_s = evaluation_startup_s(config, manifests)
    what = f"evaluation of {config.run_id}, shard {shard[0]} of {shard[1]}"
    watchdog = StepWatchdog(ALLOWANCE_S, what, startup_s=startup_s).start()
    try:
        if config.backend.threads:
            torch.set_num_threads(config.backend.threads)
        ref, mode = model_under_test(config, manifests, run_dir)
        tokenizer = load_tokenizer(ref)
        block = config.eval.sampling[mode]
        engine = build_eval_engine(config, ref, mode, tokenizer)
        watchdog.beat()  # built: the first chunk is timed from here (its end still under the start-up deadline)
        return evaluate_model(
            engine,
            suites=suites_for(config, manifests),
            render_prompt=PromptRenderer(tokenizer, mode, config.prompt.instruction),
            decode=lambda ids: tokenizer.decode(ids, skip_special_tokens=False),
            out_dir=run_dir.eval_dir,
            sampling=SamplingSettings(block.temperature, block.top_p, block.max_new_tokens),
            seed=evaluation_seed(config),
            batch_prompts=config.eval.batch_prompts,
            model=ref.describe(),
            mode=mode,
            thinking=mode == "think",
            shard=shard,
            shard_lost=lambda rank: shard_ended(run_dir.root, rank),
            grading_workers=config.backend.threads,  # the run's CPU share (None: eval.grading's default)
            on_chunk=watchdog.beat,
        )
    finally:
        watchdog.stop()
