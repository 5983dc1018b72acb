"""One training run from its resolved config: build, resume, loop, checkpoint, collapse, save.

Checkpoints (accelerate's save_state: model, optimiser, scheduler, RNG states, plus the
prompt sampler's position) are written to a temp directory, sealed and renamed (run_dir.py), every
`checkpoint_every` rollout batches and at the end. A resumed run replays exactly:
sampling seeds are functions of (seed, step, rank), and metrics.jsonl is cut back to
the checkpoint's step before the loop goes on.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed

from eval.grading import Grader
from eval.suites import Question
from gropd import tracking
from gropd.collapse import collapse_reason
from gropd.components import PromptRenderer, build_rollout, build_teacher, load_student, pairing_roles
from gropd.config.manifests import Manifests
from gropd.config.schema import RunConfig
from gropd.prompts import PromptSampler, load_prompt_pool
from gropd.run_dir import RunDir, seal
from gropd.schedule import lr_factor
from gropd.trainer import StepContext, assign_prompts, print_progress, step_seed, train_step


def make_accelerator(config: RunConfig, run_root: Path) -> Accelerator:
    """The run's Accelerator, with its trackers (config.tracking) writing under run_root/tracking."""
    device = config.backend.device
    cpu = device == "cpu" or (device == "auto" and not torch.cuda.is_available())
    if config.backend.threads:
        torch.set_num_threads(config.backend.threads)
    return Accelerator(cpu=cpu, mixed_precision="no", **tracking.accelerator_kwargs(config.tracking, run_root))


def make_optimizer(config: RunConfig, model: torch.nn.Module):
    o, s = config.train.optimizer, config.train.schedule
    optimizer = torch.optim.AdamW(model.parameters(), lr=o.lr, betas=o.betas, weight_decay=o.weight_decay, eps=o.eps)
    updates_per_step = config.train.prompts_per_batch * config.train.group_size // config.train.minibatch_responses
    total = config.train.steps * updates_per_step

    def factor(update: int) -> float:
        return lr_factor(update, total, s.name, s.warmup_steps, s.min_lr_ratio)

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def save_checkpoint(accelerator: Accelerator, run_dir: RunDir, step: int, sampler: PromptSampler, keep: int) -> None:
    final, tmp = run_dir.checkpoints / f"step_{step}", run_dir.checkpoints / f"step_{step}.tmp"
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))
    accelerator.wait_for_everyone()  # every process's files are on disk before they are sealed
    if accelerator.is_main_process:
        (tmp / "trainer_state.json").write_text(json.dumps({"step": step, "sampler": sampler.state_dict()}))
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
    model, tokenizer = load_student(student, teacher, accelerator.device, config.backend.dtype)
    if config.backend.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    optimizer, scheduler = make_optimizer(config, model)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    engine = build_rollout(
        config,
        student,
        accelerator.unwrap_model(model),
        tokenizer,
        accelerator.device,
        seed=config.seed,
        gpu_memory_utilization=0.3,
    )
    scorer = build_teacher(config, teacher, accelerator.device, tokenizer.pad_token_id)
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
        grader=Grader(thinking=student.mode == "think"),
        dump_dir=dump_dir,
    )
    pool = load_prompt_pool(config.train.prompts.source, config.profile)
    return ctx, PromptSampler(pool, config.seed)


def local_questions(sampler: PromptSampler, config: RunConfig, step: int, accelerator: Accelerator) -> list[Question]:
    """The next rollout batch's prompts (train.prompts_per_batch), this process's share (assign_prompts)."""
    questions = sampler.next(config.train.prompts_per_batch)
    mine = assign_prompts(
        len(questions), step_seed(config.seed, step, 0), accelerator.process_index, accelerator.num_processes
    )
    return [questions[i] for i in mine]


def train_run(config: RunConfig, manifests: Manifests, run_dir: RunDir) -> dict:
    """Train until `train.steps` or collapse; returns the final status. Resumes from the last checkpoint."""
    accelerator = make_accelerator(config, run_dir.root)
    minibatch_prompts = config.train.minibatch_responses // config.train.group_size
    if minibatch_prompts % accelerator.num_processes:
        raise ValueError(
            f"{accelerator.num_processes} processes cannot share minibatches of {minibatch_prompts} prompts "
            "(train.minibatch_responses / train.group_size must be a multiple of the process count)"
        )
    ctx, sampler = build_context(config, manifests, accelerator, run_dir.root / "batches")
    history, first = [], 1
    resume = run_dir.latest_checkpoint()
    if resume:
        step, path = resume
        state = run_dir.read_checkpoint(step, path)
        accelerator.load_state(str(path))
        sampler.load_state_dict(state["sampler"])
        history, first = run_dir.truncate_metrics(step), step + 1
        print(f"[{config.run_id}] resuming after step {step}", file=sys.stderr)
    elif accelerator.is_main_process:
        run_dir.truncate_metrics(0)
    tracking.start(accelerator, config, run_dir.root, first_step=first)
    started, status = time.perf_counter(), {"status": "running", "reason": None}
    try:
        for step in range(first, config.train.steps + 1):
            record = train_step(ctx, config, local_questions(sampler, config, step, accelerator), step)
            history.append(record)
            reason = collapse_reason(history, config.collapse)
            if accelerator.is_main_process:
                run_dir.append_metrics(record)
                tracking.log_step(accelerator, record)
                run_dir.update_status(step=step, status="running")
                print_progress(config.run_id, record, config.train.steps, started, first)
            if reason:
                status = {"status": "collapsed", "reason": reason, "collapse_step": step}
                break
            if step % config.train.checkpoint_every == 0 or step == config.train.steps:
                save_checkpoint(accelerator, run_dir, step, sampler, config.train.keep_checkpoints)
    finally:
        ctx.grader.close()
    if status["status"] == "running":
        save_final(accelerator, ctx, run_dir)
        status = {"status": "trained", "reason": None, "collapse_step": None}
    accelerator.end_training()
    return status


def save_final(accelerator: Accelerator, ctx: StepContext, run_dir: RunDir) -> None:
    """The final student as a transformers checkpoint (with its tokenizer) for the evaluation."""
    accelerator.wait_for_everyone()
    state = accelerator.get_state_dict(ctx.model)
    if accelerator.is_main_process:
        tmp = run_dir.root / "final.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        accelerator.unwrap_model(ctx.model).save_pretrained(tmp, state_dict=state)
        ctx.student_prompt.tokenizer.save_pretrained(tmp)
        seal(tmp)
        shutil.rmtree(run_dir.final, ignore_errors=True)
        tmp.rename(run_dir.final)
    accelerator.wait_for_everyone()
