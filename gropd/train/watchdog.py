"""A training rank that stops making steps ends its job, in a time sized from the steps it has made.

The process group's timeout (gropd/train/world.py, 2 h) must cover a run's start-up and a shared teacher's worst
wait, so a rank hung without dying (a wedged GPU, a stuck collective, a dead NFS mount) would idle every GPU of the
job that long. Each rank runs a StepWatchdog: the loop beats it once a rollout batch (its step and checkpoint done);
once a step has been timed, a rank that goes `allowance_s + FACTOR × the longest step so far` without a beat prints
what it waited for, writes the job's marker file (GROPD_HUNG_MARKER, set by experiments/launch/slurm_run.sbatch) and
exits with HUNG_EXIT at once (os._exit: a hung collective never returns to Python). Every rank waits for the same
steps, so every rank's watchdog fires, the launcher ends the job, and the job script, finding the marker, requeues it
(`scontrol requeue`); the run resumes from its last checkpoint. Before the first timed step the process group's own
timeout holds (start-up: engines, compilation), and while a checkpoint is written (`paused`: its time on a slow
shared disk is not a step's). A process that stood still (SIGSTOP, Ctrl-Z then `fg`, a paused VM) is not hung:
its watchdog thread wakes late, which a hung rank's does not, and the time it stood still is not counted. The
allowance is the teacher server's wait (GROPD_TEACHER_WAIT_S) for a run that scores through one (a step may wait that
long for a server that went away), else ALLOWANCE_S.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

FACTOR = 4  # a step may take this many times the longest step so far (responses lengthen as a run goes on)
ALLOWANCE_S = 600.0  # plus this much (a checkpoint written to a slow disk, a garbage collection, a slow grader)
HUNG_EXIT = 75  # EX_TEMPFAIL: try again
MARKER_VARIABLE = "GROPD_HUNG_MARKER"
POLL_S = 10.0


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
    ) -> None:
        self.allowance_s, self.what, self.clock, self.poll_s = allowance_s, what, clock, poll_s
        self.on_hang = on_hang or hang
        self.steps_s: list[float] = []
        self.last: float | None = None
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
        if self.last is not None and seconds > 0:
            self.last += seconds

    def overdue(self) -> str | None:
        """Why this rank counts as hung now, or None."""
        limit = deadline_s(self.steps_s, self.allowance_s)
        if limit is None or self.last is None or self.clock() - self.last <= limit:
            return None
        return (
            f"{self.what}: no rollout batch done for {self.clock() - self.last:.0f} s, over {limit:.0f} s "
            f"({self.allowance_s:.0f} s + {FACTOR} x the longest step so far, {max(self.steps_s):.0f} s): a rank is "
            f"hung; ending this process (exit {HUNG_EXIT}) so the job ends and is requeued (gropd/train/watchdog.py)"
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


def hang(reason: str) -> None:
    """Say why, leave the job's marker (GROPD_HUNG_MARKER) for its script, and exit now with HUNG_EXIT."""
    print(f"error: {reason}", file=sys.stderr, flush=True)
    marker = os.environ.get(MARKER_VARIABLE)
    if marker:
        path = Path(marker)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(reason + "\n")
    os._exit(HUNG_EXIT)
