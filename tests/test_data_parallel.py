"""Two CPU processes (gloo) give the same weights as one process with the same global batch.

The trainer's assign_prompts + loss weights make each process's micro-batches sum to the
gradient of the full minibatch; checked under accelerate's DDP and torch's FSDP2 sharding, and
with more processes than a minibatch has prompts (minibatches partition responses). DDP reduces
the gradients once per minibatch, not once per micro-batch.
Tolerance: 1/200 of the largest weight change (~4e-2, so ~2e-4): float32 sums in a different order
differ by 1e-3 to 5e-4 of it (3.8e-5 measured on one AMD EPYC, under 2e-5 on another), while a missed
reduction or a wrong loss weight moves a weight by a sizeable share of its change. And the
π_S,old recompute keeps FSDP's collectives in step when the ranks' rows have other lengths.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
WORKER = REPO / "tests" / "dp_worker.py"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


PROCESSES = 2  # the processes that must give one process's weights: README's state table states this number


def run_worker(out: Path, mode: str, timeout: int = 300) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    if mode.startswith("single"):
        command = [sys.executable, str(WORKER), str(out), mode]
    else:
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "4" if mode == "responses" else str(PROCESSES),
            "--master_addr",
            "127.0.0.1",
            "--master_port",
            str(free_port()),
            str(WORKER),
            str(out),
            mode,
        ]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return {} if mode == "uneven" else torch.load(out)


@pytest.fixture(scope="module")
def single(tmp_path_factory) -> dict:
    return run_worker(tmp_path_factory.mktemp("dp") / "single.pt", "single")


def largest_difference(one: dict[str, torch.Tensor], other: dict[str, torch.Tensor]) -> float:
    assert one.keys() == other.keys()
    return max((one[k] - other[k]).abs().max().item() for k in one)


def same_update(one: dict, other: dict) -> bool:
    """The two runs' final weights agree within float noise: 1/200 of the largest weight change."""
    return largest_difference(one["weights"], other["weights"]) < one["moved"] / 200


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["ddp", "fsdp2"])
def test_two_processes_match_one(single, tmp_path: Path, mode: str) -> None:
    torch.manual_seed(0)
    parallel = run_worker(tmp_path / f"{mode}.pt", mode)
    assert same_update(single, parallel)
    # 2 steps x 2 minibatches of 2 micro-batches a rank: one all-reduce (one bucket) per minibatch
    assert parallel["reductions"] == (4 if mode == "ddp" else 0)


@pytest.mark.slow
def test_four_processes_share_minibatches_of_two_prompts(tmp_path: Path) -> None:
    """8 prompts x G = 4 over 4 processes, minibatches of 8 responses: each rank holds 2 whole groups
    and gives 2 responses (half a group) to each of the 4 minibatches of a step; the weights are those
    of one process updating on the same minibatches (what refused 4 processes before: 2 prompts a
    minibatch)."""
    parallel = run_worker(tmp_path / "responses.pt", "responses")
    single = run_worker(tmp_path / "single-responses.pt", "single-responses")
    assert same_update(single, parallel)
    assert parallel["reductions"] == 2 * 4  # 2 steps x 4 minibatches, one micro-batch each


@pytest.mark.slow
def test_ranks_with_other_response_lengths_run_as_many_forwards(tmp_path: Path) -> None:
    """Rank 0's four rows of 5 response tokens fit one 40-token forward, rank 1's rows of 20 need four:
    planned per rank, the FSDP ranks would fall out of step (a gloo timeout after 20 s). Each rank must
    plan its own forwards, run as many as the busiest one, and get the log-probs of an unsharded model."""
    from dp_worker import build

    from gropd.model.logprobs import pack, response_logprobs

    run_worker(tmp_path / "uneven", "uneven", timeout=120)
    model, _, _ = build("single", __import__("accelerate").Accelerator(cpu=True))
    planned = []
    for rank in (0, 1):
        got = torch.load(tmp_path / f"uneven.{rank}")
        planned.append(got["planned"])
        with torch.no_grad():
            want, want_entropy = response_logprobs(
                model, pack([[1, 2, 3, 4, 5]] * 4, got["responses"], 0, torch.device("cpu")), with_entropy=True
            )
        torch.testing.assert_close(got["logp"], want, rtol=0, atol=2e-5)
        torch.testing.assert_close(got["entropy"], want_entropy, rtol=0, atol=2e-5)
    assert planned == [1, 4]


@pytest.mark.slow
def test_rows_dealt_by_tokens_and_packed_by_a_token_budget_give_the_same_gradient(tmp_path: Path) -> None:
    """Two FSDP2 ranks (gloo) whose minibatch rows are dealt again by tokens (train.balance_ranks) and packed into
    micro-steps by a 24-token budget with no row cap (train.dynamic_batch) against one process with micro-steps of
    4 rows: under plain SGD with no clipping the weights move by -lr x the summed gradient, so equal weights after
    2 steps x 2 minibatches are equal gradients. Tolerance: 1e-4 of the largest weight change (float32 sums in
    another order; a row lost, counted twice or weighted by the wrong total moves a weight by a sizeable share of
    it; 2.3e-6 of it measured). And the deal did something: on some minibatch rank 0's tokens changed."""
    packed = run_worker(tmp_path / "packed.pt", "packed")
    single = run_worker(tmp_path / "single-sgd.pt", "single-sgd")
    difference = largest_difference(single["weights"], packed["weights"])
    assert difference < 1e-4 * single["moved"], (difference, single["moved"])
    assert packed["dealt"] and any(before != after for before, after in packed["dealt"])
