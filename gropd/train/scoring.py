"""A scoring pass (run kind `score`): fixed responses of a pairing's student, scored and graded.

The student (never updated) samples `train.steps` rollout batches of `train.prompts_per_batch`
training prompts x G responses in its own mode, exactly as a training run's rollouts (same
sampler, seeds, teacher rendering and grader: `gropd.train.step.collect_rollout`, `grade_rollout`).
Each batch is saved as `batches/step_<N>_rank<R>.pt` (`gropd.train.step.dump_rollout`: f, mask,
per-response `correct`, group_size) with one metrics.jsonl line; at the end rank 0 writes
horizon.json, J_H(H) at every horizon from all of them (`gropd.horizon.separation_curve`), which
Figure 1(b) reads. Nothing is trained, checkpointed or evaluated. An interrupted pass
starts again from batch 1: every batch is a function of (seed, step, rank) alone.
"""

from __future__ import annotations

import sys
import time

import torch

from fileio import atomic_write_json
from gropd.config.manifests import Manifests
from gropd.config.schema import RunConfig
from gropd.horizon import separation_curve
from gropd.record.run_dir import RunDir
from gropd.train.loop import build_context, local_questions, make_accelerator
from gropd.train.step import collect_rollout, dump_path, dump_rollout, grade_rollout, rollout_metrics, step_seed


def score_run(config: RunConfig, manifests: Manifests, run_dir: RunDir) -> dict:
    """Sample, score, grade and save `train.steps` rollout batches; returns the final status fields."""
    accelerator = make_accelerator(config, run_dir.root)
    ctx, sampler = build_context(config, manifests, accelerator, run_dir.root / "batches")
    rank = accelerator.process_index
    if accelerator.is_main_process:
        run_dir.truncate_metrics(0)
    started = time.perf_counter()
    try:
        for step in range(1, config.train.steps + 1):
            questions = local_questions(sampler, config, step, accelerator)
            rollout = collect_rollout(ctx, config, questions, step_seed(config.seed, step, rank), step)
            rewards = grade_rollout(ctx, config, rollout)
            dump_rollout(rollout, dump_path(ctx.dump_dir, step, rank), rewards, config.train.group_size)
            record = {
                "step": step,
                **rollout_metrics(ctx, config, rollout, rewards),
                "time_rollout_s": rollout.seconds["rollout"],
                "time_teacher_s": rollout.seconds["teacher"],
            }
            if accelerator.is_main_process:
                run_dir.append_metrics(record)
                run_dir.update_status(step=step, status="running")
                eta = (time.perf_counter() - started) / step * (config.train.steps - step)
                print(
                    f"[{config.run_id}] scored batch {step}/{config.train.steps} reward "
                    f"{record['verifier_reward']:.3f} len {record['mean_response_len']:.1f} ETA {eta:.0f}s",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        ctx.grader.close()
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        batches = [torch.load(path, weights_only=True) for path in sorted(ctx.dump_dir.glob("*.pt"))]
        atomic_write_json(run_dir.horizon_path, separation_curve(batches))
    return {"status": "finished", "reason": None, "collapse_step": None}
