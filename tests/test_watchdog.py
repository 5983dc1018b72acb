"""A hung rank ends its job in a time sized from the steps it made (gropd/train/watchdog.py), not after the process
group's 2 h timeout, and leaves the marker the job script requeues on (tests/test_slurm_run.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from gropd.train.watchdog import HUNG_EXIT, StepWatchdog, deadline_s
from gropd.train.world import DEFAULT_TIMEOUT_S


def test_the_deadline_follows_the_longest_step() -> None:
    """allowance + 4 x the longest step: steps of 30, 90 and 60 s give 600 + 360 = 960 s, where the process group
    alone waited 7,200 s; before any step is timed (start-up) there is none."""
    assert deadline_s([], 600.0) is None
    assert deadline_s([30.0, 90.0, 60.0], 600.0) == 960.0 < DEFAULT_TIMEOUT_S
    assert deadline_s([30.0, 90.0, 60.0], 1800.0) == 2160.0  # a served teacher's 30-minute wait allowed for


def test_a_rank_is_hung_once_it_outlasts_the_deadline() -> None:
    now = {"t": 0.0}
    dog = StepWatchdog(600.0, "run r, rank 3", on_hang=lambda reason: None, clock=lambda: now["t"])
    dog.beat()  # the loop starts: the start-up before it is not a step
    now["t"] = 10_000.0
    assert dog.overdue() is None  # no step timed yet: the process group's timeout holds
    for t in (10_100.0, 10_190.0):
        now["t"] = t
        dog.beat()
    assert dog.steps_s == [10_100.0, 90.0]
    now["t"] = 10_190.0 + 600.0 + 4 * 10_100.0
    assert dog.overdue() is None
    now["t"] += 1.0
    assert "run r, rank 3: no rollout batch done for 41001 s, over 41000 s" in dog.overdue()


def test_a_checkpoint_written_is_not_a_step() -> None:
    """A checkpoint on a slow shared disk may take longer than steps do: no deadline while it is written, and the
    next step is timed from its end."""
    now = {"t": 0.0}
    dog = StepWatchdog(600.0, "run r, rank 0", on_hang=lambda reason: None, clock=lambda: now["t"])
    dog.beat()
    now["t"] = 60.0
    dog.beat()  # a step of 60 s: the deadline is 840 s
    with dog.paused():
        now["t"] = 60.0 + 5000.0  # a checkpoint of 5,000 s
        assert dog.overdue() is None
    now["t"] += 70.0
    dog.beat()
    assert dog.steps_s == [60.0, 70.0]


def test_the_watchdog_thread_calls_the_hang(tmp_path: Path) -> None:
    reasons: list[str] = []
    dog = StepWatchdog(0.05, "run r, rank 0", on_hang=reasons.append, poll_s=0.01).start()
    dog.beat()
    dog.beat()  # a step of ~0 s: the deadline is ~0.05 s
    deadline = time.monotonic() + 5.0
    while not reasons and time.monotonic() < deadline:
        time.sleep(0.01)
    dog.stop()
    assert len(reasons) == 1 and "a rank is hung" in reasons[0]


def test_a_process_that_stood_still_is_not_hung() -> None:
    """A run stopped for 5,000 s (SIGSTOP, then SIGCONT: a remake grid paused during a CI run was ended with exit
    75 at once) goes on: the thread, waking 5,000 s late, moves the last beat by the time it stood still."""
    now = {"t": 0.0}
    reasons: list[str] = []
    dog = StepWatchdog(600.0, "run r, rank 0", on_hang=reasons.append, clock=lambda: now["t"], poll_s=0.01)
    dog.beat()
    now["t"] = 60.0
    dog.beat()  # a step of 60 s: the deadline is 840 s
    dog.start()
    time.sleep(0.1)
    now["t"] = 60.0 + 5000.0  # the process stood still, then wakes
    time.sleep(0.2)
    dog.stop()
    assert reasons == [] and dog.overdue() is None
    assert 4999.0 < dog.last <= 5060.0
    now["t"] = dog.last + 841.0  # a rank hung from its wake-up on: overdue as before
    assert "no rollout batch done for 841 s, over 840 s" in dog.overdue()


def test_a_hang_leaves_the_marker_and_exits_for_a_requeue(tmp_path: Path) -> None:
    marker = tmp_path / ".hung" / "4242"
    result = subprocess.run(
        [sys.executable, "-c", "from gropd.train.watchdog import hang; hang('rank 3 waited')"],
        env={**os.environ, "GROPD_HUNG_MARKER": str(marker)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == HUNG_EXIT == 75
    assert marker.read_text() == "rank 3 waited\n" and "error: rank 3 waited" in result.stderr
