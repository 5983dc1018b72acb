"""One training run from its resolved config: build, resume, loop, checkpoint, collapse, save; with the
learning-rate schedule (the section at the end); the collapse rule it applies is gropd/record/collapse.py's.

Checkpoints (accelerate's save_state: model, optimiser, scheduler, RNG states, plus the
prompt sampler's position) are written to a temp directory, sealed and renamed (run_dir.py), every
`checkpoint_every` rollout batches and at the end. A resumed run replays exactly:
sampling seeds are functions of (seed, step, rank), and metrics.jsonl is cut back to
the checkpoint's step before the loop goes on.
"""

from __future__ import annotations

import copy
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator, FullyShardedDataParallelPlugin, PartialState
from accelerate.state import AcceleratorState, GradientState
from accelerate.utils import (
    DataLoaderConfiguration,
    DistributedType,
    InitProcessGroupKwargs,
    broadcast_object_list,
    set_seed,
)

from eval.grading import Grader
from eval.suites import Question
from gropd.config import config_hash
from gropd.config.manifests import Manifests
from gropd.config.schema import RunConfig
from gropd.credit import method
from gropd.model.checkpoints import torch_dtype
from gropd.model.chunked_logprobs import chunk_tokens
from gropd.model.components import (
    PromptRenderer,
    build_rollout,
    build_teacher,
    load_student,
    pairing_roles,
    teacher_wait_s,
)
from gropd.model.fit import GIB, Architecture, run_trainer_memory
from gropd.model.rollout.base import require_sampler_logprobs, samples_a_copy
from gropd.model.teacher.server import TeacherServerAway
from gropd.record import tracking
from gropd.record.collapse import collapse_reason
from gropd.record.run_dir import RunDir, seal
from gropd.record.run_lock import require_held
from gropd.train.device_memory import held_gib
from gropd.train.prompts import PromptSampler, load_prompt_pool
from gropd.train.step import StepContext, assign_prompts, print_progress, step_seed, train_step
from gropd.train.tied_weights import tied_weights_saved_quietly
from gropd.train.watchdog import ALLOWANCE_S, RunLimits, StepWatchdog, leave_marker
from gropd.train.world import layout_note, process_group_timeout, rank_share
from gropd.vector_math import VML_FREE

MIXED_PRECISION = {"float32": "no", "bfloat16": "bf16"}  # backend.dtype -> accelerate's mixed_precision


def make_accelerator(config: RunConfig, run_root: Path, collective_s: float | None = None) -> Accelerator:
    """The run's Accelerator, with its trackers (config.tracking) writing under run_root/tracking.

    Precision comes from the run's config, not the launch config: the student is loaded in float32
    (master weights and AdamW state) and computes in `backend.dtype`. Without FSDP accelerate wraps
    the forward in autocast; under FSDP (`accelerate launch` with distributed_type FSDP) the FSDP2
    policy keeps float32 shards, gathers bf16 parameters for compute and reduces gradients in
    float32, and leaves outputs as computed (our log-probs are float32; accelerate's own default
    would cast them to bf16). On a CPU accelerate does not apply FSDP at all (it runs MULTI_CPU/gloo);
    fsdp_on_cpu makes it take its FSDP2 path there too, so the rehearsal runs the cluster's code.

    The process group waits process_group_timeout(collective_s) for a collective (NCCL's default is 600 s),
    when this Accelerator is the one that creates it (Ranks.meet creates it first, with the same timeout).
    split_batches=True makes the prepared scheduler step once per optimiser step: with False, accelerate
    1.15.0's AcceleratedScheduler.step (scheduler.py, "num_processes steps per training step") steps it
    once per process, for dataloaders that multiply the batch by the process count; ours do not (the
    rollout batch is split over the ranks), and split_batches touches nothing else here.
    """
    device = config.backend.device
    cpu = device == "cpu" or (device == "auto" and not torch.cuda.is_available())
    if config.backend.threads:
        torch.set_num_threads(config.backend.threads)
    mixed = MIXED_PRECISION[config.backend.dtype]
    launched = os.environ.get("ACCELERATE_MIXED_PRECISION")
    if launched and launched != mixed:
        print(
            f"note: launch config mixed_precision {launched!r} ignored; the run's backend.dtype "
            f"{config.backend.dtype} gives {mixed!r}",
            file=sys.stderr,
        )
    plugin = fsdp_plugin(config.backend.dtype) if os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true" else None
    # accelerate keeps one AcceleratorState per process, and refuses another precision once it is set; a grid
    # runs its runs in one process, and they may differ in precision: each run's Accelerator starts afresh
    # (the process group, in PartialState, stays)
    AcceleratorState._reset_state()
    GradientState._reset_state()
    accelerator = Accelerator(
        cpu=cpu,
        mixed_precision=mixed,
        fsdp_plugin=plugin,
        dataloader_config=DataLoaderConfiguration(split_batches=True),
        kwargs_handlers=[InitProcessGroupKwargs(timeout=process_group_timeout(collective_s))],
        **tracking.accelerator_kwargs(config.tracking, run_root),
    )
    if plugin is not None and cpu:
        fsdp_on_cpu(accelerator, plugin)
    return accelerator


def fsdp_plugin(dtype: str) -> FullyShardedDataParallelPlugin:
    """The launch config's FSDP plugin (read from the FSDP_* variables accelerate launch sets) with our
    mixed-precision policy: bf16 compute, float32 shards and gradient reduction, outputs uncast."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    plugin = FullyShardedDataParallelPlugin()
    if dtype != "float32":
        plugin.mixed_precision_policy = MixedPrecisionPolicy(param_dtype=torch_dtype(dtype), reduce_dtype=torch.float32)
    return plugin


def fsdp_on_cpu(accelerator: Accelerator, plugin: FullyShardedDataParallelPlugin) -> None:
    """Turn a CPU (MULTI_CPU, gloo) Accelerator into an FSDP one, as accelerate's state.py does for
    GPUs (AcceleratorState._prepare_backend refuses FSDP off CUDA): the distributed type is set in the
    shared PartialState too, which every later AcceleratorState() copies. Pinned accelerate 1.15.0."""
    if accelerator.distributed_type != DistributedType.MULTI_CPU:
        return  # one process: nothing to shard
    accelerator.state.distributed_type = DistributedType.FSDP
    PartialState._shared_state["distributed_type"] = DistributedType.FSDP
    accelerator.state.fsdp_plugin = plugin
    if not accelerator.is_fsdp2:
        raise RuntimeError("accelerate did not take the FSDP2 path on the CPU (expected fsdp_version: 2)")


def make_optimizer(config: RunConfig, model: torch.nn.Module, fused: bool = False):
    """AdamW and its schedule (lr per optimiser step). `fused` (the trainer on CUDA, gropd/model/fit.py), or a
    process whose numerics call no MKL vector math (gropd/vector_math.py: the portable mode): one kernel a step,
    no sqrt(v) temporary, and on a CPU a sqrt of ATen's own; else torch's default implementation (on a CPU its
    single-tensor loop, whose sqrt is MKL's vector math; on CUDA foreach)."""
    o, s = config.train.optimizer, config.train.schedule
    fused = fused or VML_FREE
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=o.lr, betas=o.betas, weight_decay=o.weight_decay, eps=o.eps, fused=fused or None
    )
    updates_per_step = config.train.prompts_per_batch * config.train.group_size // config.train.minibatch_responses
    total = config.train.steps * updates_per_step
    factor = lambda update: lr_factor(update, total, s.name, s.warmup_steps, s.min_lr_ratio)  # noqa: E731
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def save_checkpoint(
    accelerator: Accelerator, run_dir: RunDir, step: int, sampler: PromptSampler, keep: int, config_hash: str
) -> None:
    """checkpoints/step_<step>/: accelerate's state and trainer_state.json (the step, the sampler's position and the
    run's config hash: RunDir.check_resumable resumes only from a checkpoint the run itself could have written),
    sealed; the oldest beyond `keep` deleted."""
    final, tmp = run_dir.checkpoints / f"step_{step}", run_dir.checkpoints / f"step_{step}.tmp"
    if accelerator.is_main_process:
        require_held(run_dir.root)
        shutil.rmtree(tmp, ignore_errors=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))
    accelerator.wait_for_everyone()  # every process's files are on disk before they are sealed
    if accelerator.is_main_process:
        (tmp / "trainer_state.json").write_text(
            json.dumps({"step": step, "sampler": sampler.state_dict(), "config_hash": config_hash})
        )
        seal(tmp)
        tmp.rename(final)
        for _, old in run_dir.checkpoint_steps()[:-keep]:
            shutil.rmtree(old)
    accelerator.wait_for_everyone()


def build_context(
    config: RunConfig, manifests: Manifests, accelerator: Accelerator, dump_dir: Path | None = None
) -> tuple[StepContext, PromptSampler]:
    set_seed(config.seed)
    student, teacher, render = pairing_roles(config, manifests)
    model, tokenizer = load_student(student, teacher, accelerator.device, "float32")  # float32 masters
    if config.backend.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    optimizer, scheduler = make_optimizer(config, model, fused=accelerator.device.type == "cuda")
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    own_copy = samples_a_copy(config.backend.rollout, config.backend.dtype, accelerator.num_processes)
    before_engines = held_gib(accelerator.device)
    engine = build_rollout(
        config,
        student,
        accelerator.unwrap_model(model),
        tokenizer,
        accelerator.device,
        seed=config.seed,
        gpu_fraction=config.backend.rollout_gpu_fraction,
        own_copy=own_copy,
        max_num_seqs=rank_share(config.train, accelerator.num_processes).responses,  # a rank's rollout batch
    )
    require_sampler_logprobs(config.backend, accelerator.num_processes)
    scorer = build_teacher(config, teacher, accelerator.device, tokenizer.pad_token_id)
    engines_gib = None if before_engines is None else held_gib(accelerator.device) - before_engines
    instruction = config.prompt.instruction
    teacher_mode = teacher.mode if render == "own" else student.mode
    ctx = StepContext(
        accelerator=accelerator,
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        engine=engine,
        teacher=scorer,
        student_prompt=PromptRenderer(tokenizer, student.mode, instruction),
        teacher_prompt=PromptRenderer(tokenizer, teacher_mode, instruction),
        decode=lambda ids: tokenizer.decode(ids, skip_special_tokens=False),
        pad_id=tokenizer.pad_token_id,
        grader=Grader(thinking=student.mode == "think", workers=config.backend.threads),  # the run's CPU share
        dump_dir=dump_dir,
        method=method(config.method) if config.method else None,
        constant_c=config.constant.c,
        engines_gib=engines_gib,
        trainer_gib=trainer_estimate_gib(config, accelerator, accelerator.unwrap_model(model).config.to_dict()),
    )
    pool = load_prompt_pool(config.train.prompts.source, config.profile, manifests)
    return ctx, PromptSampler(pool, config.seed)


def trainer_estimate_gib(config: RunConfig, accelerator: Accelerator, model_config: dict[str, Any]) -> float | None:
    """gropd/model/fit.py's trainer memory for this run's shapes (`model_config`: the student's config.json as
    loaded), processes and precision, in GiB, as the plan checks it (fused AdamW on CUDA); None off CUDA."""
    if accelerator.device.type != "cuda":
        return None
    arch = Architecture.of(model_config)
    fsdp = accelerator.is_fsdp2
    shards = accelerator.num_processes if fsdp else 1
    return run_trainer_memory(arch, config, shards, fsdp, fused=True).need / GIB


def local_questions(sampler: PromptSampler, config: RunConfig, step: int, accelerator: Accelerator) -> list[Question]:
    """The next rollout batch's prompts (train.prompts_per_batch), this process's share (assign_prompts)."""
    questions = sampler.next(config.train.prompts_per_batch)
    mine = assign_prompts(
        len(questions), step_seed(config.seed, step, 0), accelerator.process_index, accelerator.num_processes
    )
    return [questions[i] for i in mine]


def train_run(config: RunConfig, manifests: Manifests, run_dir: RunDir, limits: RunLimits | None = None) -> dict:
    """Train until `train.steps` or collapse; returns the final status. Resumes from the last checkpoint. The
    rank's watchdog runs from here: `limits` (the paper profile's, gropd/runs/job_plan.py) give it a start-up
    deadline up to the first step's end and the process group its collective timeout. A teacher server that stays
    away longer than the run waits for it (GROPD_TEACHER_WAIT_S: its job queued again, or past its time limit) fails
    the run as before, and leaves the job's marker (GROPD_HUNG_MARKER): the job requeues itself and the run resumes
    from its last checkpoint, waiting for the server again."""
    allowance = teacher_wait_s(os.environ) if config.backend.teacher == "server" else ALLOWANCE_S
    what = f"run {config.run_id}, rank {os.environ.get('RANK', '0')}"
    watchdog = StepWatchdog(allowance, what, startup_s=limits.startup_s if limits else None).start()
    try:
        return _train(config, manifests, run_dir, watchdog, limits.collective_s if limits else None)
    except TeacherServerAway as err:
        leave_marker(f"{what}: {err}; the job is requeued to wait for it again")
        raise
    finally:
        watchdog.stop()


def _train(
    config: RunConfig, manifests: Manifests, run_dir: RunDir, watchdog: StepWatchdog, collective_s: float | None
) -> dict:
    accelerator = make_accelerator(config, run_dir.root, collective_s)
    note = layout_note(config.train, rank_share(config.train, accelerator.num_processes))  # before anything loads
    if note and accelerator.is_main_process:
        print(f"[{config.run_id}] {note}", file=sys.stderr)
    ctx, sampler = build_context(config, manifests, accelerator, run_dir.root / "batches")
    if accelerator.is_main_process:
        vocab = accelerator.unwrap_model(ctx.model).config.vocab_size
        chunk, note = logprob_chunk_record(run_dir.read_status() or {}, vocab, accelerator.device)
        if note:
            print(f"[{config.run_id}] {note}", file=sys.stderr)
        run_dir.update_status(processes=accelerator.num_processes, **chunk)
    history, first = [], 1
    resume = run_dir.latest_checkpoint()
    last = 0
    if resume:
        last, path = resume
        state = run_dir.read_checkpoint(last, path)
        accelerator.load_state(str(path))
        sampler.load_state_dict(state["sampler"])
        history, first = [r for r in run_dir.read_metrics() if r["step"] <= last], last + 1
        if ctx.method.first_batch_c:
            ctx.constant_c = history[0]["constant_c"]  # c as the first batch set it
        print(f"[{config.run_id}] resuming after step {last}", file=sys.stderr)
    accelerator.wait_for_everyone()  # every rank has read the run's files before rank 0 rewrites one
    if accelerator.is_main_process:
        run_dir.truncate_metrics(last)
    tracking.start(accelerator, config, run_dir.root, first_step=first)
    started, status = time.perf_counter(), {"status": "running", "reason": None}
    watchdog.beat()  # start-up done: step 1 is timed from here (its end is still under the start-up deadline)
    try:
        for step in range(first, config.train.steps + 1):
            record = train_step(ctx, config, local_questions(sampler, config, step, accelerator), step)
            history.append(record)
            reason = broadcast_object_list([collapse_reason(history, config.collapse)])[0]  # rank 0 decides
            if accelerator.is_main_process:
                require_held(run_dir.root)  # a writer whose lock or directory was deleted stops here
                run_dir.append_metrics(record)
                tracking.log_step(accelerator, record)
                run_dir.update_status(step=step, status="running")
                print_progress(config.run_id, record, config.train.steps, started, first)
            if reason:
                status = {"status": "collapsed", "reason": reason, "collapse_step": step}
                break
            watchdog.beat()
            if step % config.train.checkpoint_every == 0 or step == config.train.steps:
                with watchdog.paused(), tied_weights_saved_quietly(accelerator.unwrap_model(ctx.model)):
                    save_checkpoint(
                        accelerator, run_dir, step, sampler, config.train.keep_checkpoints, config_hash(config)
                    )
    finally:
        watchdog.stop()  # what follows (the final model, the group's end) is bounded by the collective timeout
        ctx.grader.close()
    if status["status"] == "running":
        save_final(accelerator, ctx, run_dir, config.backend.dtype)
        status = {"status": "trained", "reason": None, "collapse_step": None}
    accelerator.wait_for_everyone()
    if accelerator.num_processes == 1:  # this process goes on, and its evaluation starts beside it on the device;
        release_engines(ctx)  # first: one process's vLLM engine made the process group that end_training ends
    accelerator.end_training()  # closes the trackers and this run's process group (if any is left)
    return status


def logprob_chunk_record(status: dict[str, Any], vocab: int, device: torch.device) -> tuple[dict[str, int], str | None]:
    """On CUDA, the log-prob chunk this process computes with (gropd/model/chunked_logprobs.py: fixed, it decides
    the GEMM split) as a status.json field, and a note when a resumed run recorded another one (its steps from here
    on are not bit-identical to an uninterrupted run's). Nothing on a CPU: a tiny run's status stays as it was."""
    if device.type != "cuda":
        return {}, None
    chunk, recorded = chunk_tokens(vocab, device), status.get("logprob_chunk_tokens")
    note = None
    if recorded is not None and recorded != chunk:
        note = (
            f"note: this run recorded a log-prob chunk of {recorded} tokens and this code computes with {chunk} "
            "(gropd/model/chunked_logprobs.py changed): the steps from here on are not bit-identical to an "
            "uninterrupted run's"
        )
    return {"logprob_chunk_tokens": chunk}, note


def release_engines(ctx: StepContext) -> None:
    """Shut the run's vLLM engines down (close(): their memory back now, not when vLLM's frozen garbage
    collector gets to it); the other engines hold nothing beyond the Python objects dropped with `ctx`."""
    for engine in (ctx.engine, ctx.teacher):
        close = getattr(engine, "close", None)
        if close is not None:
            close()


def save_final(accelerator: Accelerator, ctx: StepContext, run_dir: RunDir, dtype: str) -> None:
    """The final student as a transformers checkpoint (with its tokenizer) for the evaluation, in the
    compute dtype `dtype` (backend.dtype: what a user serves; the float32 masters stay in the last
    checkpoint). Every rank gathers (get_state_dict is a collective); rank 0 writes."""
    accelerator.wait_for_everyone()
    state = accelerator.get_state_dict(ctx.model)
    if accelerator.is_main_process:
        tmp = run_dir.root / "final.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        served = {name: tensor.to(torch_dtype(dtype)) for name, tensor in state.items()}
        model = accelerator.unwrap_model(ctx.model)
        model.save_pretrained(tmp, state_dict=served)
        config = copy.deepcopy(model.config)
        config.dtype = dtype  # save_pretrained records the masters' float32; the tensors are `dtype`
        config.save_pretrained(tmp)
        ctx.student_prompt.tokenizer.save_pretrained(tmp)
        seal(tmp)
        shutil.rmtree(run_dir.final, ignore_errors=True)
        tmp.rename(run_dir.final)
    accelerator.wait_for_everyone()


# --- schedule --------------------------------------------------------------------------------------------
# The learning-rate schedule of the student's optimiser, as a factor of the base lr.
#
# For optimiser update `u` (0-based) of `total` updates, with `w` warm-up updates and
# floor `m` (`min_lr_ratio`):
#
#     warm(u)   = min(1, (u + 1) / w)            (1 when w = 0)
#     p         = min(u, total) / total          (progress through the run)
#     constant  factor = warm(u)
#     linear    factor = warm(u) · (m + (1 − m) · (1 − p))
#     cosine    factor = warm(u) · (m + (1 − m) · ½ (1 + cos π p))

SCHEDULES = ("constant", "linear", "cosine")


def lr_factor(update: int, total: int, name: str, warmup_steps: int, min_lr_ratio: float) -> float:
    """The multiplier of the base learning rate at optimiser update `update` (the formulas above)."""
    if name not in SCHEDULES:
        raise ValueError(f"unknown schedule {name!r}; valid: {', '.join(SCHEDULES)}")
    warm = min(1.0, (update + 1) / warmup_steps) if warmup_steps else 1.0
    if name == "constant":
        return warm
    progress = min(update, total) / total
    decay = 1.0 - progress if name == "linear" else 0.5 * (1.0 + math.cos(math.pi * progress))
    return warm * (min_lr_ratio + (1.0 - min_lr_ratio) * decay)
