"""The trainer's distributed world: every per-rank size, derived in one place from the real process
count, the process group's timeout, and how a process leaves it.

With `W` processes, `P` prompts per rollout batch (train.prompts_per_batch), `G` responses per prompt
and `M` responses per optimiser step (train.minibatch_responses):

    prompts per rank      P / W     (whole groups: a group's G responses share one rank's credit)
    responses per rank    P·G / W
    minibatch share       M / W     responses of every minibatch on every rank (minibatches partition
                                    responses, not prompts: with W > M / G a rank's share is part of a group)
    forwards              ⌈(M / W) / per_device_batch⌉ per minibatch before the token budget splits more

so W must divide P and M (Table 3, P = M = 64: 1, 2, 4, 8, 16, 32 or 64 processes). `train.replicas`
and `train.grad_accum` record Table 3's layout (8 × 8 × per-device batch 1 = M); they fix nothing at
run time: a run on another process count keeps P, G and M and says how its ranks share them.
"""

from __future__ import annotations

import atexit
import math
import os
import sys
from dataclasses import dataclass
from datetime import timedelta
from typing import NoReturn

from gropd.config.errors import ConfigError

TIMEOUT_VARIABLE = "GROPD_COLLECTIVE_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 7200  # a run without a plan-derived timeout (RunLimits.collective_s: the paper profile has one)


@dataclass(frozen=True)
class RankShare:
    """One rank's part of a rollout batch and of each minibatch (module docstring)."""

    world: int
    prompts: int
    responses: int
    minibatch: int
    forwards: int


def rank_share(train, world: int) -> RankShare:
    """The per-rank sizes of `train` (TrainSettings) over `world` processes; ConfigError naming the
    process counts that work when `world` divides the rollout batch's prompts or a minibatch unevenly."""
    prompts, responses = train.prompts_per_batch, train.minibatch_responses
    if prompts % world or responses % world:
        fits = [w for w in range(1, prompts + 1) if prompts % w == 0 and responses % w == 0]
        raise ConfigError(
            "run config",
            "train.prompts_per_batch / train.minibatch_responses",
            f"{world} processes cannot share {prompts} prompts per rollout batch and {responses} responses per "
            "minibatch evenly",
            f"a process count that divides both: {', '.join(map(str, fits))}",
        )
    share = responses // world
    forwards = -(-share // train.per_device_batch)
    return RankShare(world, prompts // world, prompts * train.group_size // world, share, forwards)


def layout_note(train, share: RankShare) -> str | None:
    """A line saying how the ranks share Table 3's batch when the process count is not train.replicas."""
    if share.world == train.replicas:
        return None
    return (
        f"note: train.replicas is {train.replicas} (Table 3's layout) and this run has {share.world} process(es): "
        f"each takes {share.prompts} prompt(s) of a rollout batch and {share.minibatch} of each minibatch's "
        f"{train.minibatch_responses} responses, in {share.forwards} forward(s) of at most per_device_batch "
        f"{train.per_device_batch} (Table 3: {train.grad_accum} accumulation steps)"
    )


def process_group_timeout(planned_s: float | None = None) -> timedelta:
    """How long a collective may wait for the slowest rank: GROPD_COLLECTIVE_TIMEOUT_S seconds (a launch
    setting, not part of a run's config), else `planned_s` (the run's RunLimits.collective_s, derived from its
    plan by gropd/runs/job_plan.py: minutes, where NCCL's default is 10), else DEFAULT_TIMEOUT_S."""
    text = os.environ.get(TIMEOUT_VARIABLE, str(math.ceil(planned_s) if planned_s else DEFAULT_TIMEOUT_S))
    if not text.isdigit() or int(text) < 1:
        raise ConfigError("environment", TIMEOUT_VARIABLE, f"{text!r}", "a whole number of seconds >= 1")
    return timedelta(seconds=int(text))


def leave(code: int) -> NoReturn:
    """Exit with `code`. A rank of a launcher's world (WORLD_SIZE > 1) runs the exit handlers (atexit, weakref
    finalizers) and flushes its streams while the interpreter is whole, then ends by os._exit, skipping the
    interpreter's teardown: there a rank aborted after its work was done and its process group destroyed
    ("terminate called without an active exception", SIGABRT; the rehearsal's 2-process FSDP2 training, after both
    ranks said "trained", and tests/dp_worker.py), since what still holds gloo's group (FSDP2's device mesh, the
    model) is freed with the interpreter and gloo's leftover work takes the GIL of an interpreter going away
    (pytorch/pytorch#179291). Any other process exits as usual."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
