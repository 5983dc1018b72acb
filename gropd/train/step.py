"""One training step: rollout -> teacher scoring -> credit -> clipped update -> metrics (the loop around
it, with checkpoints and the collapse rule, is gropd/train/loop.py).

One step for GR-OPD, vanilla OPD and the raw score (`method` picks the credit rule) and for both
profiles; a scoring pass (gropd/train/scoring.py) reuses the rollout, grading and dump steps.
Data parallelism: each of the accelerate processes takes an equal share of the prompts
(whole groups) and of the responses of every optimisation minibatch (sizes: gropd/train/world.py);
the loss is weighted so the summed gradient equals that of the full minibatch on one process
(Table 3 holds exactly). Forwards are planned per rank (gropd/model/forward_batches.py) and evened
out to the busiest rank's count, so FSDP's collectives stay in step whatever the response lengths.
Gradients are reduced once per minibatch under DDP and at every micro-step under FSDP2
(StepContext.sync_gradients says why).

π_S,old (`backend.old_logprobs`): `recompute` runs the trainer's own no-grad forward over the
rollout (the sampler may be another engine or dtype: vLLM, a bf16 copy); `sampler` takes the
log-probs the sampler reports, allowed only when it samples the trained weights themselves
(one float32 process: the same numbers up to float order). Either way `sampler_logprob_gap`
logs the mean |recompute − sampler| on the steps that have both (every step under recompute;
under sampler, step 1 and every checkpoint step, whose extra forward costs little).
Deviation from the paper: none known; values the paper does not state come from YAML.
"""

from __future__ import annotations

import sys
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from accelerate import Accelerator
from accelerate.utils import gather_object

from eval.grading import Grader
from eval.suites import Question
from fileio import atomic_write_with
from gropd.config import RunConfig
from gropd.credit import (
    CreditSettings,
    Method,
    pressure,
    token_advantages,
    token_feedback,
    trajectory_scores,
    without_format_tokens,
)
from gropd.loss import clipped_policy_loss, full_kl_loss, truncated_is_weights
from gropd.model.forward_batches import even_out, no_grad_logprobs, plan_forwards
from gropd.model.logprobs import PackedBatch, logprob_score, pack, reverse_kl_score, rows_scores
from gropd.model.rollout.base import RolloutBatch, RolloutEngine, SamplingSettings
from gropd.model.teacher.base import TeacherScorer
from gropd.record.ranges import strict_record
from gropd.train.correlation import pearson, spearman
from gropd.train.device_memory import memory_metrics, phase_peak_gib
from gropd.train.rank_balance import balanced_minibatch
from gropd.train.world import rank_share


@dataclass(kw_only=True)
class Rollout:
    """One rollout batch on this process, tensors `[B, T]` (B = local prompts x G); built by field name."""

    questions: list[Question]
    batch: RolloutBatch
    packed: PackedBatch
    logp_old: torch.Tensor
    teacher_logp: torch.Tensor
    entropy: torch.Tensor
    f: torch.Tensor
    advantages: torch.Tensor | None  # None for a scoring pass (no method, no update)
    scores: torch.Tensor  # S_i, [B]
    degenerate_groups: int
    seconds: dict[str, float]
    peaks_gib: dict[str, float | None]  # the rollout and teacher phases' device memory peaks (device_memory.py)
    sampler_gap: float | None = None  # Σ |recompute − sampler| over response tokens, where both exist
    forwards: int | None = None  # this rank's planned forwards of the π_S,old recompute (before even_out)
    teacher_hidden: torch.Tensor | None = None  # [B, T, H_T]: the teacher's full distribution (method fullkl)
    is_weights: torch.Tensor | None = None  # [B, T]: truncated importance weights (train.tis_cap), else None


@dataclass
class StepContext:
    """What one step needs besides the config: models, engines, renderers, the process group."""

    accelerator: Accelerator
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: Any
    engine: RolloutEngine
    teacher: TeacherScorer
    student_prompt: Any  # PromptRenderer
    teacher_prompt: Any
    decode: Any
    pad_id: int
    grader: Grader  # built with thinking = (student mode is think)
    dump_dir: Path | None = None  # where dump_steps' tensors go (dump_path: batches/step_<N>_rank<R>.pt)
    method: Method | None = None  # the run's method record (gropd/credit.py); None: a scoring pass, no update
    constant_c: float | None = None  # c of a first_batch_c method: config.constant.c, or set from the first batch
    engines_gib: float | None = None  # device memory the engines hold once built; trainer_gib: fit.py's estimate
    trainer_gib: float | None = None  # (both None off CUDA: gropd/train/device_memory.py)

    def busiest(self, count: int) -> int:
        """The largest `count` over the data-parallel ranks (every rank calls it: a collective)."""
        if self.accelerator.num_processes == 1:
            return count
        local = torch.tensor(count, device=self.accelerator.device)
        return int(self.accelerator.reduce(local, reduction="max"))

    def sync_gradients(self, last: bool) -> AbstractContextManager:
        """One micro-step's context. DDP all-reduces at a minibatch's `last` micro-step only (accelerate's
        no_sync before it: DDP holds whole gradients anyway). FSDP2 reduce-scatters at every one, on
        purpose: its no_sync (set_requires_gradient_sync(False)) keeps a whole unsharded float32 gradient
        on every GPU, 6.8 GB for the 1.7B student (1.7e9 x 4 bytes) beside its 3.4 GB shard of weights,
        gradients and AdamW, on cards the vLLM engines share; the reduce-scatter overlaps the backward."""
        if last or self.accelerator.is_fsdp2:
            return nullcontext()
        return self.accelerator.no_sync(self.model)

    def mean_over_ranks(self, values: dict[str, float]) -> dict[str, float]:
        """Each value averaged over the data-parallel ranks (a collective)."""
        if self.accelerator.num_processes == 1:
            return values
        local = torch.tensor(list(values.values()), dtype=torch.float64, device=self.accelerator.device)
        return dict(zip(values, self.accelerator.reduce(local, reduction="mean").tolist(), strict=True))


def step_seed(seed: int, step: int, rank: int) -> int:
    """The sampling seed of one rollout batch: a function of (seed, step, rank) only, so resumes replay."""
    return (seed * 1_000_003 + step * 9_176 + rank * 131) % (2**31 - 1)


def collect_rollout(
    ctx: StepContext, config: RunConfig, questions: list[Question], seed: int, step: int = 1
) -> Rollout:
    """Sample G responses per prompt, score them under the teacher, and compute f, S and A
    (A by the run's method's rule; None when the run has no method, as a scoring pass, or when its method has no
    rule: its loss takes the teacher's whole distribution instead)."""
    method = ctx.method
    G, device = config.train.group_size, ctx.accelerator.device
    sampling = SamplingSettings(config.sampling.temperature, config.sampling.top_p, config.sampling.max_new_tokens)
    phase_peak_gib(device)  # the rollout's peak starts from what is held now
    t0 = time.perf_counter()
    ctx.engine.sync_weights(ctx.accelerator.unwrap_model(ctx.model))
    batch = ctx.engine.generate([ctx.student_prompt(q.question) for q in questions], G, sampling, seed)
    t1 = time.perf_counter()
    peaks_gib = {"rollout": phase_peak_gib(device)}
    teacher_prompts = [ctx.teacher_prompt(q.question) for q in questions for _ in range(G)]
    teacher_hidden = None
    if method is not None and method.needs_distribution:
        teacher_rows, teacher_hidden = ctx.teacher.score_with_hidden(teacher_prompts, batch.response_ids)
    else:
        teacher_rows = ctx.teacher.score(teacher_prompts, batch.response_ids)
    t2 = time.perf_counter()
    peaks_gib["teacher"] = phase_peak_gib(device)
    packed = pack(batch.prompt_ids, batch.response_ids, ctx.pad_id, device)
    width = packed.response_ids.shape[1]
    logp_old, entropy, gap, forwards = old_logprobs(ctx, config, batch, width, step)
    teacher_logp = rows_tensor(teacher_rows, width, device)
    mask = packed.response_mask
    f = token_feedback(teacher_logp, logp_old, mask)
    if config.feedback.zero_format_tokens:
        stopped = torch.tensor([reason == "stop" for reason in batch.finish_reasons], device=device)
        f = without_format_tokens(f, mask, stopped)
    if method is not None and method.first_batch_c and ctx.constant_c is None:
        totals = ctx.mean_over_ranks({"abs_f": float(f.abs().sum()), "tokens": float(mask.sum())})
        ctx.constant_c = totals["abs_f"] / totals["tokens"]  # mean |f| over the first batch's response tokens
    advantages, stats = (None, {"degenerate_groups": 0})
    if method is not None and method.rule is not None:
        advantages, stats = token_advantages(method.name, f, mask, credit_settings(config, ctx.constant_c))
    scores = trajectory_scores(f, mask, config.gropd.gamma)
    is_weights = None  # train.tis_cap: π_S,old (recomputed) against the sampler's own log-probs (gropd/loss.py)
    if (cap := config.train.tis_cap) is not None:
        is_weights = truncated_is_weights(logp_old, rows_tensor(batch.sampler_logprobs, width, device), mask, cap)
    seconds = {"rollout": t1 - t0, "teacher": t2 - t1, "credit": time.perf_counter() - t2}
    return Rollout(
        questions=questions,
        batch=batch,
        packed=packed,
        logp_old=logp_old,
        teacher_logp=teacher_logp,
        entropy=entropy,
        f=f,
        advantages=advantages,
        scores=scores,
        degenerate_groups=stats["degenerate_groups"],
        seconds=seconds,
        peaks_gib=peaks_gib,
        sampler_gap=gap,
        forwards=forwards,
        teacher_hidden=teacher_hidden,
        is_weights=is_weights,
    )


def credit_settings(config: RunConfig, constant_c: float | None) -> CreditSettings:
    """The credit rules' settings from the run's config (γ, λ, ε, σ convention, degenerate rule; c)."""
    g = config.gropd
    return CreditSettings(
        group_size=config.train.group_size,
        gamma=g.gamma,
        lam=g.lam,
        eps=g.eps,
        std=g.std,
        sigma_floor=g.sigma_floor,
        degenerate=g.degenerate,
        constant=constant_c,
    )


def rows_tensor(rows: list[list[float]], width: int, device: torch.device) -> torch.Tensor:
    """Ragged per-token rows as `[B, width]`, right-padded with 0."""
    return torch.tensor([row + [0.0] * (width - len(row)) for row in rows], device=device)


def old_logprobs(
    ctx: StepContext, config: RunConfig, batch: RolloutBatch, width: int, step: int
) -> tuple[torch.Tensor, torch.Tensor, float | None, int | None]:
    """(π_S,old `[B, T]`, entropy `[B, T]`, Σ |recompute − sampler| or None, this rank's planned recompute
    forwards or None) by `backend.old_logprobs` (module docstring)."""
    device, b = ctx.accelerator.device, config.backend
    use_sampler = b.old_logprobs == "sampler"
    check = not use_sampler or step == 1 or step % config.train.checkpoint_every == 0
    recomputed, planned = None, []
    if check:
        recomputed = no_grad_logprobs(
            ctx.model,
            batch.prompt_ids,
            batch.response_ids,
            ctx.pad_id,
            device,
            b.max_tokens_per_forward,
            config.sampling.temperature,
            with_entropy=True,
            share_prompts=b.share_prompt_forward,
            forwards=lambda count: planned.append(count) or ctx.busiest(count),
        )
    sampler = None if batch.sampler_logprobs is None else rows_tensor(batch.sampler_logprobs, width, device)
    gap = None
    if recomputed is not None and sampler is not None:
        mask = rows_tensor([[1.0] * len(r) for r in batch.response_ids], width, device)
        gap = float(((recomputed[0][:, :width] - sampler).abs() * mask).sum())
    forwards = planned[0] if planned else None
    if use_sampler:
        return sampler, rows_tensor(batch.sampler_entropy, width, device), gap, forwards
    return recomputed[0][:, :width], recomputed[1][:, :width], gap, forwards


def _share(rows: list[int], lengths: list[int] | tuple[int, ...], agg: str) -> float:
    """What `rows` count toward their minibatch's loss: their response tokens for token-mean, else sequences
    (host numbers: the response lengths are known without reading the device)."""
    return float(sum(lengths[r] for r in rows)) if agg == "token-mean" else float(len(rows))


def _minibatch_total(
    minibatch: list[int], lengths: list[int] | tuple[int, ...], agg: str, accelerator: Accelerator
) -> float:
    """The minibatch's count (_share) summed over every rank: one collective and one read a minibatch."""
    local = torch.tensor(_share(minibatch, lengths, agg), device=accelerator.device)
    return float(accelerator.reduce(local, reduction="sum"))


def assign_prompts(count: int, seed: int, rank: int, world: int) -> list[int]:
    """This process's prompts (indices into the rollout batch's `count` prompts).

    The prompts are shuffled with a seed shared by every process and process r holds every
    world-th of them (positions ≡ r mod world), each with its G responses; its k-th local
    minibatch is its next M/world responses (gropd/train/world.py). While world divides the
    m = M/G prompts of a minibatch, minibatch k is the shuffled prompts [k·m, (k+1)·m) whatever the
    number of processes; with more processes each rank's share is part of a group.
    """
    order = torch.randperm(count, generator=torch.Generator().manual_seed(seed)).tolist()
    return order[rank::world]


def accumulate_gradient(
    ctx: StepContext, config: RunConfig, rollout: Rollout, rows: list[int], total: float, real: bool
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """One micro-step: the loss of `rows` (_micro_batch_loss), its gradient added with the rows' share of their
    minibatch's `total` (_minibatch_total) as weight (0 for a filler forward, `real` False, that keeps the ranks in
    step). It reads nothing back from the device: the weight is host arithmetic."""
    loss, stats = _micro_batch_loss(ctx, config, rollout, rows)
    weight = _share(rows, rollout.packed.response_lengths, config.train.agg) / total * ctx.accelerator.num_processes
    ctx.accelerator.backward(loss * (weight if real else 0.0))
    return loss, stats


def update_policy(ctx: StepContext, config: RunConfig, rollout: Rollout) -> dict[str, float]:
    """Clipped updates (or, for fullkl, exact-KL updates) over minibatches (consecutive local rows; see
    assign_prompts; dealt again across ranks by tokens with train.balance_ranks), with gradient accumulation over the
    minibatch's forwards (plan_forwards: at most per_device_batch responses, unless train.dynamic_batch, and
    backend.max_tokens_per_forward packed tokens each, as many on every rank: even_out)."""
    t, b = config.train, config.backend
    B = len(rollout.batch.response_ids)
    local_minibatch = rank_share(t, ctx.accelerator.num_processes).minibatch
    sums: dict[str, list[float]] = {"loss": [], "grad_norm": []}
    ctx.model.train()
    for start in range(0, B, local_minibatch):
        minibatch, rows_of = list(range(start, min(start + local_minibatch, B))), rollout
        if t.balance_ranks:  # the minibatch's rows dealt to the ranks by tokens (gropd/train/rank_balance.py)
            rows_of = balanced_minibatch(ctx.accelerator, rollout, minibatch, ctx.pad_id)
            minibatch = list(range(len(rows_of.batch.response_ids)))
        prompts, responses = rows_of.batch.prompt_ids, rows_of.batch.response_ids
        local = [
            [minibatch[i] for i in rows]
            for rows in plan_forwards(
                [prompts[r] for r in minibatch],
                [responses[r] for r in minibatch],
                b.max_tokens_per_forward,
                None if t.dynamic_batch else t.per_device_batch,  # dynamic: the token budget alone
                b.share_prompt_forward,
            )
        ]
        planned = even_out(local, ctx.busiest(len(local)))
        total = _minibatch_total(minibatch, rows_of.packed.response_lengths, t.agg, ctx.accelerator)
        pending: dict[str, list[torch.Tensor]] = {}  # this minibatch's numbers, read once it is done
        for micro, rows in enumerate(planned):
            with ctx.sync_gradients(last=micro == len(planned) - 1):
                loss, stats = accumulate_gradient(ctx, config, rows_of, rows or [minibatch[0]], total, bool(rows))
            if rows:
                for key, value in {**stats, "loss": loss}.items():
                    pending.setdefault(key, []).append(value.detach())
        for key, values in pending.items():  # one read a key: the same floats float() gave one by one
            sums.setdefault(key, []).extend(torch.stack(values).tolist())
        grad_norm = ctx.accelerator.clip_grad_norm_(ctx.model.parameters(), t.max_grad_norm)
        sums["grad_norm"].append(float(grad_norm))
        ctx.optimizer.step()
        ctx.scheduler.step()
        ctx.optimizer.zero_grad(set_to_none=True)
    return ctx.mean_over_ranks({key: sum(values) / len(values) for key, values in sums.items()})


def _micro_batch_loss(
    ctx: StepContext, config: RunConfig, rollout: Rollout, rows: list[int]
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """One forward's loss over rollout rows `rows` and its stats: the clipped surrogate on A, or for fullkl
    the exact per-token KL to the teacher's whole distribution (gropd/loss.py)."""
    t, b = config.train, config.backend
    prompts, responses = rollout.batch.prompt_ids, rollout.batch.response_ids
    index, fullkl = torch.tensor(rows), ctx.method.needs_distribution
    device, temperature = ctx.accelerator.device, config.sampling.temperature
    score = reverse_kl_score(ctx.teacher.head, temperature) if fullkl else logprob_score(temperature)
    payload = rollout.teacher_hidden[index.to(rollout.teacher_hidden.device)] if fullkl else None
    values = rows_scores(
        ctx.model, prompts, responses, rows, ctx.pad_id, device, score, payload, b.share_prompt_forward
    )
    width = values.shape[1]
    mask = rollout.packed.response_mask[index, :width]
    if fullkl:
        return full_kl_loss(values[..., 0], mask, t.agg)
    return clipped_policy_loss(
        values[..., 0],
        rollout.logp_old[index, :width],
        rollout.advantages[index, :width],
        mask,
        t.clip_low,
        t.clip_high,
        t.agg,
        None if rollout.is_weights is None else rollout.is_weights[index, :width],
    )


def grade_rollout(ctx: StepContext, config: RunConfig, rollout: Rollout) -> list[float]:
    """Verifier reward of each local response, `[B]`: 1.0 if its final answer equals the gold one, else 0.0."""
    texts = [ctx.decode(ids) for ids in rollout.batch.response_ids]
    golds = [q.answer for q in rollout.questions for _ in range(config.train.group_size)]
    return [float(v.correct) for v in ctx.grader.grade(texts, golds)]


def rollout_metrics(ctx: StepContext, config: RunConfig, rollout: Rollout, rewards: list[float]) -> dict[str, Any]:
    """Monitoring numbers of the whole rollout batch (gathered over processes), `rewards` from
    grade_rollout. Never in the loss."""
    mask = rollout.packed.response_mask
    local = {
        "len": mask.sum(1).tolist(),
        "capped": [r == "length" for r in rollout.batch.finish_reasons],
        "reward": rewards,
        "S": rollout.scores.tolist(),
        "f_sum": float(rollout.f.sum()),
        "f_abs_sum": float(rollout.f.abs().sum()),
        "tokens": float(mask.sum()),
        "entropy_sum": float(rollout.entropy.sum()),
        "adv_abs_sum": None if rollout.advantages is None else float((rollout.advantages.abs() * mask).sum()),
        "degenerate": rollout.degenerate_groups,
        "gap_sum": rollout.sampler_gap,
        "forwards": rollout.forwards,
    }
    parts = gather_object([local])
    joined = {
        key: [x for part in parts for x in (part[key] if isinstance(part[key], list) else [part[key]])] for key in local
    }
    tokens = sum(joined["tokens"])
    S = torch.tensor(joined["S"])
    g = config.gropd
    normalised, retained = pressure(S, config.train.group_size, g.lam, g.eps, g.std, g.sigma_floor)
    return {
        "mean_response_len": mean(joined["len"]),
        "frac_at_len_cap": mean([float(c) for c in joined["capped"]]),
        "verifier_reward": mean(joined["reward"]),
        "pearson_score_len": pearson(joined["S"], joined["len"]),
        "spearman_score_reward": spearman(joined["S"], joined["reward"]),
        "pressure_normalised": float(normalised),
        "pressure_retained": float(retained),
        "degenerate_groups": int(sum(joined["degenerate"])),
        "mean_feedback": sum(joined["f_sum"]) / tokens,
        "mean_abs_feedback": sum(joined["f_abs_sum"]) / tokens,
        "mean_score": mean(joined["S"]),
        "entropy": sum(joined["entropy_sum"]) / tokens,
        "sampler_logprob_gap": None if None in joined["gap_sum"] else sum(joined["gap_sum"]) / tokens,
        "logprob_forwards_min": None if None in joined["forwards"] else min(joined["forwards"]),
        "logprob_forwards_max": None if None in joined["forwards"] else max(joined["forwards"]),
    } | ({} if None in joined["adv_abs_sum"] else {"mean_advantage_abs": sum(joined["adv_abs_sum"]) / tokens})


def train_step(ctx: StepContext, config: RunConfig, questions: list[Question], step: int) -> dict[str, Any]:
    """One rollout batch end to end; returns its metrics record."""
    rank = ctx.accelerator.process_index
    rollout = collect_rollout(ctx, config, questions, step_seed(config.seed, step, rank), step)
    rewards = grade_rollout(ctx, config, rollout)
    if step in config.train.dump_steps and ctx.dump_dir is not None:
        dump_rollout(rollout, dump_path(ctx.dump_dir, step, rank), rewards, config.train.group_size)
    t0 = time.perf_counter()
    update = update_policy(ctx, config, rollout)
    t1 = time.perf_counter()
    peaks_gib = {**rollout.peaks_gib, "update": phase_peak_gib(ctx.accelerator.device)}
    record = {
        "step": step,
        **rollout_metrics(ctx, config, rollout, rewards),
        **update,
        "lr": ctx.scheduler.get_last_lr()[0],
        **({"constant_c": ctx.constant_c} if ctx.method.first_batch_c else {}),
        "time_rollout_s": rollout.seconds["rollout"],
        "time_teacher_s": rollout.seconds["teacher"],
        "time_update_s": t1 - t0 + rollout.seconds["credit"],
        **memory_metrics(peaks_gib, ctx.engines_gib, ctx.trainer_gib),
    }
    return strict_record(record)  # metrics.jsonl is strict JSON: a non-finite number is null, flagged


def dump_path(dump_dir: Path, step: int, rank: int) -> Path:
    """Where one process's rollout batch of one step is saved."""
    return dump_dir / f"step_{step}_rank{rank}.pt"


def dump_rollout(rollout: Rollout, path: Path, rewards: list[float], group_size: int) -> None:
    """Save one rollout batch (atomically): log-probs, mask, f, S and A `[B, T]`/`[B]` on the CPU, the
    verifier's `correct` `[B]` (bool), `group_size` (rows come in consecutive groups of G) and the
    response token ids. A is None for a scoring pass."""
    advantages = None if rollout.advantages is None else rollout.advantages.cpu()
    record = {
        "logp_old": rollout.logp_old.cpu(),
        "teacher_logp": rollout.teacher_logp.cpu(),
        "mask": rollout.packed.response_mask.cpu(),
        "f": rollout.f.cpu(),
        "S": rollout.scores.cpu(),
        "advantages": advantages,
        "correct": torch.tensor([r > 0.5 for r in rewards], dtype=torch.bool),
        "group_size": group_size,
        "response_ids": rollout.batch.response_ids,
    }
    atomic_write_with(path, lambda tmp: torch.save(record, tmp))


def shown(value: Any, spec: str) -> str:
    """A progress-line number in format `spec`; "nan" for a value a record holds as None (NaN: a collapse to come)."""
    return "nan" if value is None else format(value, spec)


def print_progress(run_id: str, record: dict[str, Any], total: int, started: float, first_step: int) -> None:
    done = record["step"] - first_step + 1
    eta = (time.perf_counter() - started) / done * (total - record["step"])
    number = lambda key, spec: shown(record.get(key), spec)  # noqa: E731
    print(
        f"[{run_id}] step {record['step']}/{total} reward {number('verifier_reward', '.3f')} "
        f"len {number('mean_response_len', '.1f')} loss {number('loss', '+.4f')} "
        f"|f| {number('mean_abs_feedback', '.3f')} ETA {eta:.0f}s",
        file=sys.stderr,
        flush=True,
    )


# --- monitoring numbers of one rollout batch (Figure 4's correlations: gropd/train/correlation.py); never in the loss


def mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")
