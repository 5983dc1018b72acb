"""A rank that stops making progress ends its job, in a time sized from its plan and from the steps it has made.

Each rank runs a StepWatchdog from the start of its run: the loop beats it once a rollout batch (its step and
checkpoint done), an evaluation shard once a chunk. Until the first step (or chunk) is timed, the deadline is the
plan's start-up deadline (`startup_s`, gropd/runs/job_plan.py: loading, the engines' build, a served teacher's
wait, the first step), counted from the watchdog's creation; a run without one (the tiny and rehearsal profiles)
has none before its first timed step. Once a step has been timed, a rank that goes `allowance_s + FACTOR × the
longest step so far` without a beat is hung. A hung rank prints what it waited for, writes the job's marker file
(GROPD_HUNG_MARKER, set by experiments/launch/slurm_run.sbatch) and exits with HUNG_EXIT at once (os._exit: a hung
collective never returns to Python). Every rank waits for the same steps, so every rank's watchdog fires, the
launcher ends the job, and the job script, finding the marker, requeues it (`scontrol requeue`); the run resumes
from its last checkpoint. While a checkpoint is written (`paused`: its time on a slow shared disk is not a step's)
there is no deadline. A process that stood still (SIGSTOP, Ctrl-Z then `fg`, a paused VM) is not hung: its
watchdog thread wakes late, which a hung rank's does not, and the time it stood still is not counted. The
allowance is the teacher server's wait (GROPD_TEACHER_WAIT_S) for a run that scores through one (a step may wait
that long for a server that went away), else ALLOWANCE_S. The process group's timeout (RunLimits.collective_s,
gropd/train/world.py) ends a collective that outlasts any step the plan expects; the job script requeues on the
dump it leaves (TORCH_NCCL_DUMP_ON_TIMEOUT) as on the marker.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

FACTOR = 4  # a step may take this many times the longest step so far (responses lengthen as a run goes on)
ALLOWANCE_S = 600.0  # plus this much (a checkpoint written to a slow disk, a garbage collection, a slow grader)
HUNG_EXIT = 75  # EX_TEMPFAIL: try again
MARKER_VARIABLE = "GROPD_HUNG_MARKER"
POLL_S = 10.0


@dataclass(frozen=True)
class RunLimits:
    """A run's plan-derived limits (gropd/runs/job_plan.py): seconds from its start to its first step done, and
    the most one collective may wait for the slowest rank."""

    startup_s: float
    collective_s: float


def deadline_s(steps_s: list[float], allowance_s: float) -> float | None:
    """Seconds a rank may go without a beat once `steps_s` (the timed steps) are known; None before any is."""
    return allowance_s + FACTOR * max(steps_s) if steps_s else None


class StepWatchdog:
    """Beats from the training loop; a thread that ends the process (`on_hang`, default `hang`) when they stop."""

    def __init__(
        self,
        allowance_s: float,
        what: str,
        on_hang: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        poll_s: float = POLL_S,
        startup_s: float | None = None,
    ) -> None:
        self.allowance_s, self.what, self.clock, self.poll_s = allowance_s, what, clock, poll_s
        self.on_hang = on_hang or hang
        self.steps_s: list[float] = []
        self.last: float | None = None
        self.startup_s, self.origin = startup_s, clock()  # the start-up deadline counts from here
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="gropd-step-watchdog", daemon=True)

    def start(self) -> StepWatchdog:
        self._thread.start()
        return self

    def beat(self) -> None:
        """A rollout batch done (the first beat starts the clock: the start-up before it is not a step)."""
        now = self.clock()
        if self.last is not None:
            self.steps_s.append(now - self.last)
        self.last = now

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No deadline inside (a checkpoint written); the clock starts again when it ends, no step recorded."""
        self.last = None
        try:
            yield
        finally:
            self.last = self.clock()

    def suspended(self, seconds: float) -> None:
        """This process stood still for `seconds`: the wait for the next beat counts without them."""
        if seconds > 0:
            self.origin += seconds
            if self.last is not None:
                self.last += seconds

    def overdue(self) -> str | None:
        """Why this rank counts as hung now, or None."""
        if not self.steps_s:
            return self._late_start()
        limit = deadline_s(self.steps_s, self.allowance_s)
        if limit is None or self.last is None or self.clock() - self.last <= limit:
            return None
        return (
            f"{self.what}: no rollout batch done for {self.clock() - self.last:.0f} s, over {limit:.0f} s "
            f"({self.allowance_s:.0f} s + {FACTOR} x the longest step so far, {max(self.steps_s):.0f} s): a rank is "
            f"hung; ending this process (exit {HUNG_EXIT}) so the job ends and is requeued (gropd/train/watchdog.py)"
        )

    def _late_start(self) -> str | None:
        """Why this rank counts as hung before its first timed step: past the plan's start-up deadline."""
        waited = self.clock() - self.origin
        if self.startup_s is None or waited <= self.startup_s:
            return None
        return (
            f"{self.what}: no first step done {waited:.0f} s after its start, over the plan's start-up deadline of "
            f"{self.startup_s:.0f} s (loading, the engines' build, the first step: gropd/runs/job_plan.py): a rank "
            f"is hung; ending this process (exit {HUNG_EXIT}) so the job ends and is requeued"
        )

    def _watch(self) -> None:
        polled = self.clock()
        while not self._stop.wait(self.poll_s):
            now = self.clock()
            late = now - polled - self.poll_s  # a hung rank's thread still wakes on time; a stopped process's does not
            if late > self.poll_s:
                self.suspended(late)
            polled = now
            reason = self.overdue()
            if reason is not None:
                self.on_hang(reason)
                return

    def stop(self) -> None:
        self._stop.set()


def leave_marker(reason: str) -> None:
    """Write `reason` to the job's marker (GROPD_HUNG_MARKER, when its script set one): the job requeues itself."""
    marker = os.environ.get(MARKER_VARIABLE)
    if marker:
        path = Path(marker)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(reason + "\n")


def hang(reason: str) -> None:
    """Say why, leave the job's marker (GROPD_HUNG_MARKER) for its script, and exit now with HUNG_EXIT."""
    print(f"error: {reason}", file=sys.stderr, flush=True)
    leave_marker(reason)
    os._exit(HUNG_EXIT)
