"""The trainer's world (gropd/train/world.py and the Accelerator it makes): per-rank sizes from the real
process count, Table 3 on 16 or 32 ranks, the layouts refused before anything loads; the collective
timeout given to the process group; one lr-schedule step per optimiser step whatever the process count.

Where the behaviour needs several processes, accelerate 1.15.0 is faked at the line it models (named)."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml
from accelerate.state import AcceleratorState, GradientState, PartialState

from gropd.config.errors import ConfigError
from gropd.config.schema import TrainSettings
from gropd.runs.session import Ranks
from gropd.train.loop import make_accelerator
from gropd.train.world import DEFAULT_TIMEOUT_S, TIMEOUT_VARIABLE, layout_note, process_group_timeout, rank_share

REPO = Path(__file__).resolve().parents[1]


def table3() -> TrainSettings:
    return TrainSettings(**yaml.safe_load((REPO / "experiments" / "train.yaml").read_text())["train"])


@pytest.mark.parametrize(
    ("world", "prompts", "responses", "minibatch", "forwards"),
    [(1, 64, 512, 64, 64), (8, 8, 64, 8, 8), (16, 4, 32, 4, 4), (32, 2, 16, 2, 2), (64, 1, 8, 1, 1)],
)
def test_table3_shares_over_any_power_of_two_ranks(world, prompts, responses, minibatch, forwards) -> None:
    # by hand: P = 64 prompts, G = 8, M = 64 responses a minibatch, per-device batch 1
    share = rank_share(table3(), world)
    assert (share.prompts, share.responses, share.minibatch, share.forwards) == (
        prompts,
        responses,
        minibatch,
        forwards,
    )
    assert share.responses // share.minibatch == 8  # 8 optimiser steps per rollout batch on every layout


@pytest.mark.parametrize("world", [3, 24, 128])
def test_layouts_that_cannot_share_the_batch_are_named(world) -> None:
    with pytest.raises(ConfigError, match=rf"{world} processes cannot share 64 prompts .* 1, 2, 4, 8, 16, 32, 64\)"):
        rank_share(table3(), world)


def test_a_process_count_other_than_train_replicas_is_said() -> None:
    train = table3()
    assert layout_note(train, rank_share(train, 8)) is None  # train.replicas: 8
    note = layout_note(train, rank_share(train, 16))
    assert "train.replicas is 8" in note and "16 process(es)" in note and "4 of each minibatch's 64 responses" in note


def test_collective_timeout_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TIMEOUT_VARIABLE, raising=False)
    assert process_group_timeout() == timedelta(seconds=DEFAULT_TIMEOUT_S) > timedelta(minutes=10)
    monkeypatch.setenv(TIMEOUT_VARIABLE, "60")
    assert process_group_timeout() == timedelta(seconds=60)
    monkeypatch.setenv(TIMEOUT_VARIABLE, "ten")
    with pytest.raises(ConfigError, match=TIMEOUT_VARIABLE):
        process_group_timeout()


class Created(Exception):
    """Raised by the fake init_process_group once it has recorded its arguments."""


CPU_CONFIG = SimpleNamespace(
    backend=SimpleNamespace(device="cpu", threads=None, dtype="float32"), tracking=SimpleNamespace(backends=[])
)


@pytest.fixture
def fresh_state():
    for state in (AcceleratorState, GradientState, PartialState):
        state._reset_state()
    yield
    for state in (AcceleratorState, GradientState, PartialState):
        state._reset_state()


@pytest.mark.parametrize("first", ["meet", "accelerator"])
def test_the_process_group_gets_the_collective_timeout(first, fresh_state, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whichever comes first, the run's meet (pipeline) or its Accelerator, creates the group with the
    timeout: accelerate 1.15.0 state.py, PartialState.__init__'s MULTI_CPU branch,
    `torch.distributed.init_process_group(backend=self.backend, **kwargs)` (faked: no peer exists)."""
    made = {}

    def init_process_group(**kwargs):
        made.update(kwargs)
        raise Created

    monkeypatch.setattr(torch.distributed, "init_process_group", init_process_group)
    env = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2", "OMP_NUM_THREADS": "1"}
    for name, value in {**env, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv(TIMEOUT_VARIABLE, raising=False)
    with pytest.raises(Created):
        Ranks(0, 2, "cpu").meet() if first == "meet" else make_accelerator(CPU_CONFIG, Path("unused"))
    assert made["backend"] == "gloo" and made["timeout"] == timedelta(seconds=DEFAULT_TIMEOUT_S)


def test_the_schedule_steps_once_per_optimiser_step_on_any_process_count(fresh_state) -> None:
    """accelerate 1.15.0 scheduler.py, AcceleratedScheduler.step: without split_batches it steps the
    schedule `AcceleratorState().num_processes` times a call; faked here as 2 processes in one."""
    accelerator = make_accelerator(CPU_CONFIG, Path("unused"))
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1.0)
    warmup = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda update: (update + 1) / 10)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, warmup)
    PartialState._shared_state["num_processes"] = 2  # every AcceleratorState() copies it
    for update in range(3):
        optimizer.step()
        scheduler.step()
        assert scheduler.get_last_lr() == [pytest.approx((update + 2) / 10)]


LEAVING = """
import atexit, sys
from pathlib import Path
from gropd.train.world import leave
atexit.register(lambda: Path(sys.argv[1]).write_text("exit handlers ran"))
class Teardown:
    def __del__(self):  # a module global's finaliser: runs in the interpreter's teardown only
        print("teardown ran")
held = Teardown()
print("buffered, never flushed by hand", end="")
leave(3)
"""


@pytest.mark.parametrize("world", ["2", "1", None])
def test_a_rank_of_a_launched_world_leaves_without_the_interpreters_teardown(tmp_path, world) -> None:
    """gropd.cli ends by world.leave: in a launcher's world (WORLD_SIZE > 1) the exit handlers run and the streams
    are flushed, the code passes through, and nothing of the interpreter's teardown runs (where gloo's leftovers
    aborted a rank); any other process exits as usual, teardown included."""
    env = {k: v for k, v in os.environ.items() if k != "WORLD_SIZE"} | ({"WORLD_SIZE": world} if world else {})
    env["PYTHONPATH"] = str(REPO)
    marker = tmp_path / "marker"
    done = subprocess.run(
        [sys.executable, "-c", LEAVING, str(marker)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 3, done.stderr
    assert marker.read_text() == "exit handlers ran"
    launched = world == "2"
    expected = "buffered, never flushed by hand" + ("" if launched else "teardown ran\n")
    assert done.stdout == expected
