"""A hung rank ends its job in a time sized from the steps it made (gropd/train/watchdog.py), not after the process
group's 2 h timeout, and leaves the marker the job script requeues on (tests/test_slurm_run.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from gropd.train.watchdog import ALLOWANCE_S, HUNG_EXIT, StepWatchdog, deadline_s
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


def test_a_rank_hung_before_its_first_step_is_found_at_the_plans_start_up_deadline() -> None:
    """From the run's start (engines built, first step) the plan's start-up deadline holds; before, nothing did
    until a step had been timed, so a hang in the engines' build or step 1 idled the job for the process group's 2 h.
    The first step's end is still under it; from then on the step rule holds."""
    now = {"t": 0.0}
    dog = StepWatchdog(600.0, "run r, rank 5", on_hang=lambda reason: None, clock=lambda: now["t"], startup_s=2165.0)
    now["t"] = 2165.0
    assert dog.overdue() is None
    now["t"] = 2166.0  # still building its engines
    assert "run r, rank 5: no first step done 2166 s after its start, over the plan's start-up deadline of 2165 s" in (
        dog.overdue() or ""
    )
    dog = StepWatchdog(600.0, "run r, rank 5", on_hang=lambda reason: None, clock=lambda: now["t"], startup_s=2165.0)
    now["t"] += 700.0
    dog.beat()  # built in 700 s: step 1 starts
    now["t"] += 1466.0  # step 1 not done 2,166 s after the start
    assert "start-up deadline of 2165 s" in (dog.overdue() or "")
    now["t"] -= 166.0
    dog.beat()  # step 1 done in 1,300 s: the step rule from here, 600 + 4 x 1,300
    assert dog.steps_s == [1300.0] and dog.overdue() is None
    now["t"] += 5800.0
    assert dog.overdue() is None
    now["t"] += 1.0
    assert "over 5800 s" in (dog.overdue() or "")


def test_a_process_that_stood_still_during_its_start_up_is_not_hung() -> None:
    now = {"t": 0.0}
    dog = StepWatchdog(600.0, "run r, rank 0", on_hang=lambda reason: None, clock=lambda: now["t"], startup_s=100.0)
    now["t"] = 5090.0
    dog.suspended(5000.0)  # stood still 5,000 s of them (the thread woke that late)
    assert dog.overdue() is None
    now["t"] = 5101.0
    assert "no first step done 101 s after its start" in (dog.overdue() or "")


def test_the_collective_timeout_is_the_plans_unless_the_launch_sets_one(monkeypatch) -> None:
    """GROPD_COLLECTIVE_TIMEOUT_S wins; else the run's planned timeout in whole seconds (a paper run's
    RunLimits.collective_s, minutes); else DEFAULT_TIMEOUT_S (the tiny and rehearsal profiles, unchanged)."""
    from gropd.train.world import process_group_timeout

    monkeypatch.delenv("GROPD_COLLECTIVE_TIMEOUT_S", raising=False)
    assert process_group_timeout(1404.3).total_seconds() == 1405
    assert process_group_timeout(None).total_seconds() == DEFAULT_TIMEOUT_S == 7200
    monkeypatch.setenv("GROPD_COLLECTIVE_TIMEOUT_S", "900")
    assert process_group_timeout(1404.3).total_seconds() == 900


def test_an_evaluation_shard_beats_once_a_chunk_and_a_hung_one_is_ended(tmp_path: Path) -> None:
    """The evaluation runner calls its `on_chunk` after each chunk it writes (2 suites of 5 and 2 questions in
    chunks of 2 prompts: 3 + 1 chunks), so a shard runs under the same watchdog as training (gropd/runs/
    evaluation.py); a shard whose engine hangs in its first chunk is ended at its start-up deadline."""
    import threading

    from test_eval_runner import SAMPLING, SUITES, FakeEngine, decode, render

    from eval.runner import evaluate_model

    def evaluate(engine: FakeEngine, out: Path, on_chunk) -> None:
        evaluate_model(
            engine,
            suites=SUITES,
            render_prompt=render,
            decode=decode,
            out_dir=out,
            sampling=SAMPLING,
            seed=3,
            batch_prompts=2,
            progress=False,
            on_chunk=on_chunk,
        )

    beats: list[int] = []
    evaluate(FakeEngine(), tmp_path / "one", lambda: beats.append(1))
    assert len(beats) == 3 + 1

    released, reasons = threading.Event(), []

    class HungEngine(FakeEngine):
        def generate(self, prompt_ids, n, sampling, seed):
            released.wait(10.0)  # a wedged engine: its call never returns (here: until the watchdog says so)
            return super().generate(prompt_ids, n, sampling, seed)

    def hung(reason: str) -> None:
        reasons.append(reason)
        released.set()

    dog = StepWatchdog(ALLOWANCE_S, "evaluation of r, shard 0 of 1", on_hang=hung, poll_s=0.01, startup_s=0.2)
    dog.start()
    dog.beat()  # its engine built
    started = time.monotonic()
    evaluate(HungEngine(), tmp_path / "hung", dog.beat)
    dog.stop()
    assert len(reasons) == 1 and "start-up deadline of 0 s" in reasons[0] and time.monotonic() - started < 5.0


def test_a_teacher_server_away_past_the_wait_leaves_the_marker_that_requeues(tmp_path: Path, monkeypatch) -> None:
    """Before: a run whose server stayed away longer than GROPD_TEACHER_WAIT_S (a server requeued behind other jobs,
    past its time limit) failed, exit 1, no marker, so its job ended for good. Now it still fails (its session records
    why) and leaves the job's marker: slurm_run.sbatch requeues the job, and the run resumes waiting for its server."""
    import gropd.train.loop as loop
    from gropd.model.teacher.server import TeacherServerAway

    def away(*args) -> dict:
        raise TeacherServerAway("the teacher server (the address in .teachers/I32.url) was not alive within 1800 s")

    marker = tmp_path / ".hung" / "4242"
    monkeypatch.setenv("GROPD_HUNG_MARKER", str(marker))
    monkeypatch.setattr(loop, "_train", away)
    config = SimpleNamespace(run_id="r", backend=SimpleNamespace(teacher="server"))
    with pytest.raises(TeacherServerAway):
        loop.train_run(config, None, None)
    assert "was not alive within 1800 s; the job is requeued to wait for it again" in marker.read_text()
