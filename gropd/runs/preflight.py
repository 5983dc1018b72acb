"""Checks a run passes before it loads anything: its models pinned, its in-process vLLM engines on one GPU
each, and its GPU big enough for what lives on it (gropd/model/fit.py): the trainer beside its rollout and
teacher engines, each engine within its share, the evaluation engine alone. Each failure is a clear error
(exit 2) naming what to set; a grid is checked whole before its first run starts. Each training run on a GPU
states the split of the card gropd/model/fit.py chooses for it (choose_split: the rollout engine's share, the
teacher's, the waves a rollout batch takes) and the settings that give it when the run has others; what fits but
runs slower (a rollout batch whose KV cache needs several waves) is said on stderr too. A served
teacher needs no address here: without backend.teacher_url the run follows its address file and waits for it
(gropd/model/teacher/server.py); the job's environment check reports it (gropd/runs/preflight_env.py)."""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eval.suites import SuiteError, load_suite_manifest, question_pool
from gropd.config.errors import ConfigError
from gropd.config.manifests import Manifests
from gropd.config.schema import RunConfig
from gropd.model.checkpoints import (
    checkpoint_ref,
    local_model_config,
    model_config,
    require_world_bytes,
    tiny_recipe_path,
)
from gropd.model.fit import (
    GIB,
    SAMPLER_ROWS,
    SPLIT_FREE,
    SPLIT_STEPS,
    Architecture,
    Fit,
    FitError,
    Split,
    Trainer,
    choose_split,
    describe,
    describe_trainer,
    estimate,
    logit_rows,
    max_model_len,
    model_runner_v2,
    require_fit,
    run_trainer_memory,
)
from gropd.model.optional import VLLM_PURPOSES, require
from gropd.model.rollout.base import require_sampler_logprobs
from gropd.numerics import enter
from gropd.runs.evaluation import suites_for
from gropd.runs.lifecycle import models_of

Shapes = Mapping[str, Mapping[str, Any]] | None  # model label -> config.json numbers (planning without the Hub)
FSDP_ROUTE = (
    "Train it sharded over a node's GPUs: accelerate launch --config_file experiments/launch/eight_gpu_fsdp.yaml -m "
    "gropd.cli run {run_id} --profile {profile} (or sbatch experiments/launch/slurm_run.sbatch {run_id})"
)


def require_device(config: RunConfig, cuda: bool) -> None:
    """backend.device: cuda needs a GPU torch can use here (else the run would stop at its first tensor, or at
    its evaluation after training)."""
    if config.backend.device == "cuda" and not cuda:
        raise ConfigError(
            f"run {config.run_id}",
            "backend.device",
            "cuda, but torch sees no CUDA device on this machine",
            "cpu or auto here, or run it on a GPU node",
        )


def require_tiny_instruction(config: RunConfig, manifests: Manifests) -> None:
    """ConfigError when a run on tiny-world models asks another prompt.instruction than the one the tiny world's
    models were trained on (their recipe: experiments/tiny_world.yaml, or the one their source's `world` names): they
    answer nothing else."""
    from gropd.tiny.recipe import load_recipe

    labels = [label for label, _ in models_of(config, manifests).values()]
    sources = [manifests.model(config.profile, label)["source"] for label in labels]
    for path in dict.fromkeys(tiny_recipe_path(manifests, source) for source in sources if source["kind"] == "tiny"):
        recipe, _ = load_recipe(path)
        if config.prompt.instruction != recipe.instruction:
            raise ConfigError(
                "run config",
                "prompt.instruction",
                repr(config.prompt.instruction),
                f"{recipe.instruction!r}, the instruction the tiny world's models were trained on ({path.name})",
            )


def require_started_teacher_server(config: RunConfig, manifests: Manifests) -> None:
    """ConfigError when a tiny-profile run asks for a teacher server (backend.teacher=server) that nobody started:
    no backend.teacher_url and no address file yet (gropd/model/teacher/server.py). A paper job starts its servers
    beside its runs (experiments/launch/), which wait for them; nothing starts one for a tiny run, which waited 30
    minutes for it."""
    if config.kind != "train" or config.backend.teacher != "server" or config.profile != "tiny":
        return
    from gropd.model.teacher.server import teacher_address

    label = models_of(config, manifests)["teacher"][0]
    address = teacher_address(config.backend.teacher_url, label, os.environ)
    if address.current() is None:
        raise ConfigError(
            "run config",
            "backend.teacher",
            f"'server', but no teacher server serves {label} ({address.describe()} names none)",
            "backend.teacher=hf on the tiny profile, or a server started first (experiments/launch/teacher_server.sh "
            "writes that file) or named by backend.teacher_url",
        )


def require_vllm_installed(config: RunConfig) -> None:
    """MissingDependencyError (how to install it) when the run chooses a vLLM engine that this .venv lacks: at
    plan time (found, not imported: the run imports it), not after its directory is written."""
    installed = "vllm" in sys.modules or importlib.util.find_spec("vllm") is not None
    for role, purpose in VLLM_PURPOSES.items():
        if getattr(config.backend, role) == "vllm" and not installed:
            require("vllm", f"backend.{role}=vllm ({purpose})")  # raises, naming how to install it


def require_question_range(config: RunConfig, manifests: Manifests) -> None:
    """eval.first_question and eval.questions inside every suite the run evaluates: from the suite's pool where
    it is known without loading (eval.suites.question_pool), else, when the range is not the whole suite, by
    loading the suite now (a Hub dataset: from the cache or the Hub) rather than after training."""
    specs = load_suite_manifest(manifests.root / "suites.yaml", config.profile)
    first, count = config.eval.first_question, config.eval.questions
    names = config.eval.suites or list(specs)
    if (first or count is not None) and any(question_pool(specs[name]) is None for name in names):
        try:
            suites_for(config, manifests)
        except SuiteError as err:
            raise ConfigError(f"run {config.run_id}", "eval.first_question / eval.questions", str(err)) from None
    for name in names:
        pool = question_pool(specs[name])
        if pool is not None and (first >= pool or (count is not None and first + count > pool)):
            end = pool if count is None else first + count
            raise ConfigError(
                f"run {config.run_id}",
                "eval.first_question / eval.questions",
                f"questions {first}..{end - 1} of suite {name}, which has {pool}",
                f"a range inside 0..{pool - 1}",
            )


def require_positions(config: RunConfig, manifests: Manifests) -> None:
    """Each response cap the run samples with (sampling.max_new_tokens in training, read by student and teacher;
    eval.sampling.<mode>.max_new_tokens in an evaluation) plus at least one prompt token within the positions of
    the model that reads it (config.json's max_position_embeddings), known before the run where the model's files
    are local (the tiny world; a Hub model not downloaded is checked by nothing here). The prompt's own length is not
    counted beyond its first token: it is known only once the prompts are rendered."""
    roles = models_of(config, manifests)
    label, mode = roles["model" if config.kind == "eval" else "student"]
    caps = (
        [] if config.kind == "score" else [(label, config.eval.sampling[mode].max_new_tokens, f"eval.sampling.{mode}")]
    )
    if config.kind in ("train", "score"):
        caps += [(label, config.sampling.max_new_tokens, "sampling") for label, _ in roles.values()]
    for label, cap, section in caps:
        positions = (local_model_config(manifests, config.profile, label) or {}).get("max_position_embeddings")
        if isinstance(positions, int) and cap + 1 > positions:
            raise ConfigError(
                f"run {config.run_id}",
                f"{section}.max_new_tokens",
                f"{cap} tokens after a prompt of at least one: past model {label}'s {positions} positions "
                "(max_position_embeddings in its config.json)",
                f"at most {positions - 1} (less the prompt's length)",
            )


def require_one_gpu_engines(config: RunConfig) -> None:
    """In-process engines beside the trainer run on one GPU each: with vLLM's external_launcher the ranks of
    a tensor-parallel group must send their engine identical prompts, and every trainer rank samples and
    scores its own share (gropd/train/step.py assign_prompts)."""
    b = config.backend
    in_process = [f"backend.{k}: vllm" for k in ("rollout", "teacher") if getattr(b, k) == "vllm"]
    if config.kind in ("train", "score") and b.tensor_parallel > 1 and in_process:
        raise ConfigError(
            f"run {config.run_id}",
            "backend.tensor_parallel",
            f"{b.tensor_parallel} with in-process vLLM engines ({', '.join(in_process)}), whose tensor-parallel "
            "ranks would get different prompts (each trainer rank has its own share)",
            "1; a teacher too large for one GPU is served: backend.teacher: server with "
            "experiments/launch/teacher_server.sh LABEL TP",
        )


@dataclass(frozen=True)
class Engine:
    """One vLLM engine a run starts: what, whose model, its GPU share, context, logits rows, batch, knobs."""

    what: str
    label: str
    fraction: float
    context: int
    sequences: int
    knobs: str
    rows: int = SAMPLER_ROWS  # float32 logits rows held at once (gropd/model/fit.py logit_rows)


def engines_of(config: RunConfig, manifests: Manifests, world: int) -> list[Engine]:
    """The run's vLLM engines, sized as gropd/model/components.py builds them: beside the trainer the rollout
    engine (`sequences`: this rank's share of a rollout batch) and an in-process teacher; the evaluation
    engine alone after training (tensor parallelism open to it only in an eval run's own process)."""
    b, roles, engines = config.backend, models_of(config, manifests), []
    if config.kind in ("train", "score"):
        context = max_model_len(config, config.sampling.max_new_tokens)
        local = math.ceil(config.train.prompts_per_batch / world) * config.train.group_size
        knobs = "backend.rollout_gpu_fraction or sampling.max_new_tokens"
        student = roles["student"][0]  # its sampler's logits: max_num_seqs = the rank's rows (gropd/train/loop.py)
        engines += [Engine("rollout engine", student, b.rollout_gpu_fraction, context, local, knobs, local)]
        if b.teacher == "vllm":
            rows = logit_rows(b.teacher_max_batched_tokens, model_runner_v2(os.environ, cuda=True))
            knobs = "backend.teacher: server (experiments/launch/teacher_server.sh) or backend.teacher_gpu_fraction"
            teacher = roles["teacher"][0]
            engines += [
                Engine("in-process teacher engine", teacher, b.teacher_gpu_fraction, context + 1, 0, knobs, rows)
            ]
        engines = engines if b.rollout == "vllm" else engines[1:]
    if b.rollout == "vllm":
        label, mode = roles["model" if config.kind == "eval" else "student"]
        context = max_model_len(config, config.eval.sampling[mode].max_new_tokens)
        tp = ", backend.tensor_parallel" if config.kind == "eval" else ""
        knobs = f"backend.eval_gpu_fraction{tp} or eval.sampling.<mode>.max_new_tokens"
        engines += [Engine("evaluation engine", label, b.eval_gpu_fraction, context, 0, knobs)]
    return engines


def architecture(config: RunConfig, manifests: Manifests, label: str, shapes: Shapes = None) -> Architecture:
    """Model `label`'s numbers: from `shapes` (label -> config.json numbers) where given, else its config.json."""
    if shapes is not None:
        return Architecture.of(shapes[label])
    return Architecture.of(model_config(checkpoint_ref(manifests, config.profile, label)))


def engine_fit(
    config: RunConfig, manifests: Manifests, engine: Engine, gpu_bytes: int, fraction: float, shapes: Shapes = None
) -> Fit:
    """The estimate of `engine` at `fraction` of a `gpu_bytes` card (tensor parallelism only in an eval run's own
    process)."""
    tp = config.backend.tensor_parallel if config.kind == "eval" else 1
    return estimate(
        architecture(config, manifests, engine.label, shapes),
        dtype=config.backend.dtype,
        tensor_parallel=tp,
        max_model_len=engine.context,
        logit_rows=engine.rows,
        fraction=fraction,
        gpu_bytes=gpu_bytes,
    )


def require_fits(config: RunConfig, manifests: Manifests, gpu_bytes: int, world: int = 1, fsdp: bool = False) -> None:
    """FitError unless the run fits a GPU of `gpu_bytes` (gropd/model/fit.py): each engine its fraction, and
    during training the trainer (one of `world` processes, sharded when `fsdp`) beside the rollout engine
    and an in-process teacher, each engine's share fit.py's split of the card where the config leaves it null
    (with_gpu_split). Prints a note where a batch's KV cache runs in waves, and a training run's split."""
    config = with_gpu_split(config, manifests, gpu_bytes, world, fsdp)
    engines = engines_of(config, manifests, world)
    tp = config.backend.tensor_parallel if config.kind == "eval" else 1
    for engine in engines:
        fit = engine_fit(config, manifests, engine, gpu_bytes, engine.fraction)
        ref = checkpoint_ref(manifests, config.profile, engine.label)
        require_fit(
            f"run {config.run_id}: the {engine.what} of {ref.describe()} (tensor parallel {tp}, {engine.fraction} "
            f"of a {gpu_bytes / GIB:.0f} GiB GPU)",
            fit,
            engine.knobs,
        )
        if engine.sequences and fit.waves(engine.sequences) > 1:
            print(
                f"note: run {config.run_id}: the {engine.what} holds the KV cache of {fit.at_once()} of its "
                f"{engine.sequences} sequences of {engine.context} tokens at once ({describe(fit)}); when "
                f"responses run long vLLM queues and preempts the rest: up to {fit.waves(engine.sequences)} "
                "waves per call",
                file=sys.stderr,
            )
    if config.kind == "train":
        beside = [engine for engine in engines if engine.what != "evaluation engine"]
        shards = world if fsdp else 1
        require_trainer_fits(config, manifests, gpu_bytes, beside, shards, fsdp)
        if config.backend.rollout == "vllm":
            note = split_note(config, manifests, gpu_bytes, beside, shards, fsdp)
            print(f"note: run {config.run_id}: {note}", file=sys.stderr)


def trainer_estimate(
    config: RunConfig, manifests: Manifests, shards: int, fsdp: bool, shapes: Shapes = None
) -> Trainer:
    """The trainer's memory on one GPU (on CUDA: fused AdamW, gropd/train/loop.py) by gropd/model/fit.py."""
    label = models_of(config, manifests)["student"][0]
    return run_trainer_memory(architecture(config, manifests, label, shapes), config, shards, fsdp, fused=True)


def memory_split(
    config: RunConfig,
    manifests: Manifests,
    gpu_bytes: int,
    engines: list[Engine],
    shards: int,
    fsdp: bool,
    shapes: Shapes = None,
) -> Split | None:
    """fit.py's split (choose_split) of a training GPU for this run's rollout engine and in-process teacher
    (`engines`: engines_of's, the evaluation engine left out)."""
    rollout = next(engine for engine in engines if engine.what == "rollout engine")
    teacher = next((engine for engine in engines if engine.what == "in-process teacher engine"), None)

    def teacher_at(fraction: float) -> Fit:
        return engine_fit(config, manifests, teacher, gpu_bytes, fraction, shapes)

    return choose_split(
        trainer_estimate(config, manifests, shards, fsdp, shapes).need,
        lambda fraction: engine_fit(config, manifests, rollout, gpu_bytes, fraction, shapes),
        None if teacher is None else teacher_at,
        gpu_bytes,
    )


def needs_gpu_split(config: RunConfig) -> bool:
    """Whether a vLLM engine that trains beside the trainer has its share left null (fit.py's split decides)."""
    b = config.backend
    null = (b.rollout == "vllm" and b.rollout_gpu_fraction is None) or (
        b.teacher == "vllm" and b.teacher_gpu_fraction is None
    )
    return config.kind in ("train", "score") and null


def with_gpu_split(
    config: RunConfig, manifests: Manifests, gpu_bytes: int, world: int, fsdp: bool, shapes: Shapes = None
) -> RunConfig:
    """`config` with each engine share left null (backend.rollout_gpu_fraction, backend.teacher_gpu_fraction: the
    paper profile's) set to fit.py's split (choose_split) of a `gpu_bytes` card for this run's trainer (one of
    `world` processes, sharded when `fsdp`); a typed share (pairings.yaml, a run file, the command line) is kept as
    an override. Unchanged when nothing is null or nothing trains beside vLLM engines; FitError when no split
    fits. The config's hash stays the resolved one's (null): the split is the card's, not the run's identity."""
    b = config.backend
    typed = {"rollout_gpu_fraction": b.rollout_gpu_fraction, "teacher_gpu_fraction": b.teacher_gpu_fraction}
    if not needs_gpu_split(config):
        return config
    if b.rollout != "vllm":
        raise ConfigError(
            f"run {config.run_id}",
            "backend.teacher_gpu_fraction",
            "null (fit.py's split of the card), which is chosen beside a vLLM rollout engine, and this run has none",
            "a share of the card, e.g. backend.teacher_gpu_fraction=0.3",
        )
    engines = [engine for engine in engines_of(config, manifests, world) if engine.what != "evaluation engine"]
    if not fsdp:
        trainer = trainer_estimate(config, manifests, 1, False, shapes)
        raise FitError(
            f"run {config.run_id}: its engines' shares are left to fit.py's split, which is planned beside a trainer "
            f"sharded over a node's GPUs, and this trainer is one process, unsharded ({describe_trainer(trainer)}). "
            f"{FSDP_ROUTE.format(run_id=config.run_id, profile=config.profile)}, or type both shares "
            "(backend.rollout_gpu_fraction, backend.teacher_gpu_fraction)."
        )
    split = memory_split(config, manifests, gpu_bytes, engines, world, fsdp, shapes)
    if split is None:
        share = max(1, math.floor((SPLIT_STEPS - SPLIT_FREE) / len(engines))) / SPLIT_STEPS  # an even share each
        fits = [(e, engine_fit(config, manifests, e, gpu_bytes, share, shapes)) for e in engines]
        said = [f"the {e.what} at {share:.2f} {'fits' if f.fits else 'does not fit'} ({describe(f)})" for e, f in fits]
        raise FitError(
            f"run {config.run_id}: gropd/model/fit.py finds no split of a {gpu_bytes / GIB:.0f} GiB GPU that holds its "
            f"engines beside the trainer ({'; '.join(said)}). Set {' or '.join(e.knobs for e in engines)}."
        )
    chosen = {"rollout_gpu_fraction": split.rollout, "teacher_gpu_fraction": split.teacher or None}
    shares = {key: chosen[key] if value is None else value for key, value in typed.items()}
    return config.model_copy(update={"backend": b.model_copy(update=shares)})


def job_gpu_split(config: RunConfig, manifests: Manifests) -> RunConfig:
    """with_gpu_split for the card this process got (torch's device 0, as `preflight` reads it) and the launcher's
    processes (WORLD_SIZE, FSDP when accelerate launch says so); ConfigError when a share is null and no CUDA
    device is here to size it."""
    b = config.backend
    if not needs_gpu_split(config):
        return config
    import torch

    if not torch.cuda.is_available():
        raise ConfigError(
            f"run {config.run_id}",
            "backend.rollout_gpu_fraction / backend.teacher_gpu_fraction",
            f"{b.rollout_gpu_fraction} / {b.teacher_gpu_fraction}: null is fit.py's split of the job's GPU, and "
            "torch sees no CUDA device here",
            "a share of the card for each engine, or run it on a GPU node",
        )
    world = int(os.environ.get("WORLD_SIZE", "1"))
    fsdp = os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true"
    return with_gpu_split(config, manifests, torch.cuda.get_device_properties(0).total_memory, world, fsdp)


def split_note(
    config: RunConfig, manifests: Manifests, gpu_bytes: int, engines: list[Engine], shards: int, fsdp: bool
) -> str:
    """The training GPU's split fit.py chooses for this run, and the settings that give it when the run's differ."""
    split = memory_split(config, manifests, gpu_bytes, engines, shards, fsdp)
    if split is None:
        return "gropd/model/fit.py finds no split of this GPU that holds its engines beside the trainer"
    rollout = next(engine for engine in engines if engine.what == "rollout engine")
    need = trainer_estimate(config, manifests, shards, fsdp).need
    text = f"GPU split (gropd/model/fit.py choose_split): {split.describe(rollout.sequences, need)}"
    b = config.backend
    in_process = b.teacher == "vllm"
    settings = f"backend.rollout_gpu_fraction={split.rollout:.2f}"
    settings += f" backend.teacher_gpu_fraction={split.teacher:.2f}" if in_process else ""
    if b.rollout_gpu_fraction != split.rollout or (in_process and b.teacher_gpu_fraction != split.teacher):
        own = engine_fit(config, manifests, rollout, gpu_bytes, b.rollout_gpu_fraction)
        text += (
            f"; this run has backend.rollout_gpu_fraction={b.rollout_gpu_fraction}"
            + (f" and backend.teacher_gpu_fraction={b.teacher_gpu_fraction}" if in_process else "")
            + f" ({own.waves(rollout.sequences)} wave(s)): {settings} gives the split"
        )
    return text


def require_trainer_fits(
    config: RunConfig, manifests: Manifests, gpu_bytes: int, engines: list[Engine], shards: int, fsdp: bool
) -> None:
    """FitError unless the trainer (on CUDA: fused AdamW, gropd/train/loop.py) + the engines' shares fit the GPU."""
    label = models_of(config, manifests)["student"][0]
    trainer = trainer_estimate(config, manifests, shards, fsdp)
    shares = sum(engine.fraction for engine in engines)
    need = trainer.need + shares * gpu_bytes
    route = f"FSDP2 over {shards} process(es)" if fsdp else "one process, unsharded"
    if need > gpu_bytes:
        raise FitError(
            f"run {config.run_id}: the trainer of {label} ({route}: {describe_trainer(trainer)}) beside its engines "
            f"({shares:.2f} of the card) needs {need / GIB:.1f} GiB > a {gpu_bytes / GIB:.0f} GiB GPU (our estimate: "
            f"gropd/model/fit.py). {FSDP_ROUTE.format(run_id=config.run_id, profile=config.profile)}, or lower the "
            "engines' shares (backend.rollout_gpu_fraction, backend.teacher_gpu_fraction)."
        )


def preflight(config: RunConfig, manifests: Manifests) -> None:
    """Every check above that applies where this process runs (fits: only with CUDA, for the processes the
    launcher started: WORLD_SIZE, FSDP when accelerate launch says so). torch is asked about CUDA only where
    the answer matters (backend.device cuda, a vLLM engine): a CPU run is planned without loading it."""
    vllm = "vllm" in (config.backend.rollout, config.backend.teacher)
    if config.backend.device == "cuda" or vllm:
        enter(config.backend.numerics)  # before torch loads here, as the run itself will (gropd/numerics.py)
        import torch

        cuda = torch.cuda.is_available()
    else:
        cuda = False
    if config.profile == "paper":  # every Hub model pinned in experiments/lock.yaml (else a ConfigError: run `pin`)
        for label, _ in models_of(config, manifests).values():
            checkpoint_ref(manifests, config.profile, label)
    require_one_gpu_engines(config)
    require_sampler_logprobs(config.backend, int(os.environ.get("WORLD_SIZE", "1")))
    require_device(config, cuda)
    require_question_range(config, manifests)
    require_positions(config, manifests)
    for label, _ in models_of(config, manifests).values():
        require_world_bytes(manifests, config.profile, label)
    require_tiny_instruction(config, manifests)
    require_started_teacher_server(config, manifests)
    if cuda and vllm:
        require_fits(
            config,
            manifests,
            torch.cuda.get_device_properties(0).total_memory,
            world=int(os.environ.get("WORLD_SIZE", "1")),
            fsdp=os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true",
        )
    require_vllm_installed(config)  # last: what the plan needs first, then what this .venv lacks
