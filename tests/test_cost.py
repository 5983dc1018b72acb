"""Table 1's GPU cost derived from its plan (gropd/runs/cost.py): a step, a served step and an evaluation by hand,
the split it reads, and the README's table as the command prints it now (it was typed: 15-30 s a step, 150-300
GPU-hours; then 51-201 s and 226-821 GPU-hours for training alone, with no slowest-rank wait)."""

from __future__ import annotations

import re
from pathlib import Path

from gropd.config import load_manifests
from gropd.config.resolve import resolve_run
from gropd.model.fit import PLANNED_GPU_BYTES, Architecture
from gropd.runs.cost import PAPER_SHAPES, cost_table, evaluation_s, grid_costs, step_cost
from gropd.runs.preflight import engines_of, memory_split

REPO = Path(__file__).resolve().parents[1]


def paper_run(pairing: str):
    values = {"kind": "train", "grid": "table1", "pairing": pairing, "method": "gropd", "run_id": f"t__{pairing}"}
    return resolve_run(None, "paper", load_manifests(REPO / "experiments"), [], entry_values=values)


def test_a_step_by_hand() -> None:
    """A 4B-teacher run: 64 rows a rank; its rollout engine at 0.5 of an H100 holds 31 rows of 8,192 tokens at once
    (tests/test_preflight.py). Low: the longest of 2,048-token responses (prompts 256) reaches the cap (8,192 x 3 ms),
    64 micro-steps of a 2,304-token row (0.3 + 256 x 0.5 / 6,144 s each) and a quarter more for the recompute, 2 s of
    sync, 64 x 2,304 tokens at 30k tokens/s for the teacher. High: 0.9 of the rows at the cap, 58 rows in 2 waves at
    5 ms, every micro-step waiting for a capped row on some rank (1 - 0.1^8 of them, a 8,448-token row: 0.3 + 6,400 x
    0.5 / 6,144 s), a third more for the recompute, 4 s, and 64 rows of 256 + 0.9 x 8,192 + 0.1 x 2,048 tokens at
    15k tokens/s. 200 steps on 8 GPUs. The old model (longest response plus a fixed 0.3-0.8 s a micro-step) had
    no slowest-rank wait and a fixed 3-15 s teacher."""
    cost = step_cost(paper_run("I4nothink-I1.7nothink"), load_manifests(REPO / "experiments"))
    assert (cost.sequences, cost.waves, cost.micro_steps, cost.cap, cost.steps) == (64, 2, 64, 8192, 200)
    short, capped = 0.3 + 256 * 0.5 / 6144, 0.3 + 6400 * 0.5 / 6144
    low = 8192 * 0.003 + 64 * short * 1.25 + 2 + 64 * 2304 / 30000
    q = 1 - 0.1**8
    high = 2 * 8192 * 0.005 + 64 * (q * capped + (1 - q) * short) * 1.33 + 4 + 64 * 7833.6 / 15000
    assert abs(cost.seconds()[0] - low) < 1e-9 and abs(cost.seconds()[1] - high) < 1e-9
    hours = cost.gpu_hours()
    assert abs(hours[0] - 200 * low / 3600 * 8) < 1e-9 and abs(hours[1] - 200 * high / 3600 * 8) < 1e-9


def test_a_served_teacher_step_by_hand() -> None:
    """A 32B-teacher run (rollout 0.7: 46 rows at once, so 58 capped rows take 2 waves) scores all 8 ranks' 512 rows
    on the server: 512 x 2,304 = 1.18 M tokens at 60k tokens/s alone (low); at the high end 512 x 7,833.6 tokens at
    30k tokens/s, and the grid's 4 served runs at once make the server the bottleneck: 4 x that beats the run's own
    step. The server's node counts while the longest served run trains, 8 GPUs."""
    manifests = load_manifests(REPO / "experiments")
    grid = grid_costs(manifests, "table1")
    served = next(run for run in grid.runs if run.pairing == "I32think-B1.7")
    assert (served.waves, served.teacher_share, served.rollout_share, served.sharing) == (2, None, 0.7, 4)
    short = 0.3 + 256 * 0.5 / 6144
    low = 8192 * 0.003 + 64 * short * 1.25 + 2 + 512 * 2304 / 60000
    alone_high = 512 * 7833.6 / 30000
    assert abs(served.seconds()[0] - low) < 1e-9 and abs(served.seconds()[1] - 4 * alone_high) < 1e-9
    assert abs(grid.server[1] - 200 * 4 * alone_high / 3600 * 8) < 1e-9
    assert grid.starts == 10 + 10 + 1  # each run's training and evaluation, and the server
    parts = [grid.server, grid.evaluation, grid.startups] + [run.gpu_hours() for run in grid.runs]
    assert grid.total() == (sum(p[0] for p in parts), sum(p[1] for p in parts))


def test_an_evaluation_by_hand() -> None:
    """A trained run's evaluation on 8 shards: each suite's questions x K / 8 samples of half (low) its
    expected_tokens, decoded at the sequences of that length the evaluation engine's KV cache holds (0.85 of the
    card, fit.py's numbers for the 1.7B at 18,432 tokens of context) a decode step."""
    manifests = load_manifests(REPO / "experiments")
    run = paper_run("I4nothink-I1.7nothink")
    arch = Architecture.of(PAPER_SHAPES["I1.7"])
    per_token = 2 * 28 * 8 * 128 * 2  # K and V, 28 layers, 8 KV heads of 128, bf16
    weights = arch.parameters() * 2
    free = 0.85 * PLANNED_GPU_BYTES - weights - (1024 * 151936 * 4 + 2 * 2**30)
    counts = {"aime24": (30, 32, 15000), "aime25": (30, 32, 15000), "amc23": (40, 32, 10000)}
    counts |= {"math500": (500, 8, 6000), "minerva": (272, 8, 6000), "olympiadbench": (675, 8, 10000)}
    low = sum(q * k / 8 * t / 2 / int(free / per_token // (256 + t / 2)) * 0.003 for q, k, t in counts.values())
    assert abs(evaluation_s(run, manifests)[0] - low) < 1e-6


def test_the_cost_takes_fits_split_of_the_planned_card() -> None:
    """The paper profile types no engine share: each run's cost is at fit.py's split of the 80 GB card it plans for
    (0.5 + 0.2 beside an in-process 4B, 0.7 beside a served 32B), as a job on that card takes it."""
    manifests = load_manifests(REPO / "experiments")
    for pairing in manifests.pairings:
        run = paper_run(pairing)
        assert (run.backend.rollout_gpu_fraction, run.backend.teacher_gpu_fraction) == (None, None)
        engines = [e for e in engines_of(run, manifests, 8) if e.what != "evaluation engine"]
        split = memory_split(run, manifests, PLANNED_GPU_BYTES, engines, 8, True, PAPER_SHAPES)
        cost = step_cost(run, manifests)
        assert cost.rollout_share == split.rollout, pairing
        assert cost.teacher_share == (split.teacher if run.backend.teacher == "vllm" else None), pairing


def test_the_readmes_cost_table_is_the_commands_output() -> None:
    readme = (REPO / "README.md").read_text()
    found = re.search(r"<!-- cost table: python -m gropd.runs.cost --grid table1 -->\n(.*?)<!-- end of", readme, re.S)
    assert found, "README.md lost its cost table markers"
    assert found.group(1) == cost_table(grid_costs(load_manifests(REPO / "experiments"), "table1"), "table1")
