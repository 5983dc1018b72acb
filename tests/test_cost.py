"""Table 1's GPU cost derived from its plan (gropd/runs/cost.py): a step by hand, the split it reads, and the
README's table as the command prints it now (it was typed: 15-30 s a step, 150-300 GPU-hours)."""

from __future__ import annotations

import re
from pathlib import Path

from gropd.config import load_manifests
from gropd.config.resolve import resolve_run
from gropd.model.fit import PLANNED_GPU_BYTES
from gropd.runs.cost import PAPER_SHAPES, cost_table, grid_costs, step_cost
from gropd.runs.preflight import engines_of, memory_split

REPO = Path(__file__).resolve().parents[1]


def paper_run(pairing: str):
    values = {"kind": "train", "grid": "table1", "pairing": pairing, "method": "gropd", "run_id": f"t__{pairing}"}
    return resolve_run(None, "paper", load_manifests(REPO / "experiments"), [], entry_values=values)


def test_a_step_by_hand() -> None:
    """A 4B-teacher run: 64 rows a rank of up to 8,192 tokens; its rollout engine at 0.5 of an H100 holds 31 of them
    (tests/test_preflight.py), so 3 waves. Low: 8,192 x 3 ms + 64 micro-steps x 0.3 s + 2 + 3 + 2 s; high:
    3 x 8,192 x 5 ms + 64 x 0.8 s + 4 + 15 + 8 s. 200 steps on 8 GPUs."""
    cost = step_cost(paper_run("I4nothink-I1.7nothink"), load_manifests(REPO / "experiments"))
    assert (cost.sequences, cost.waves, cost.micro_steps, cost.cap, cost.steps) == (64, 3, 64, 8192, 200)
    low, high = cost.seconds()
    assert abs(low - (8192 * 0.003 + 64 * 0.3 + 7)) < 1e-9 and abs(high - (3 * 8192 * 0.005 + 64 * 0.8 + 27)) < 1e-9
    assert low > 30  # the README's typed 15-30 s a step was below even one response decoding to the cap
    hours = cost.gpu_hours()
    assert abs(hours[0] - 200 * low / 3600 * 8) < 1e-9 and abs(hours[1] - 200 * high / 3600 * 8) < 1e-9
    served = step_cost(paper_run("I32think-B1.7"), load_manifests(REPO / "experiments"))
    assert (served.waves, served.teacher_share, served.rollout_share) == (2, None, 0.7)  # 46 of 64 at once


def test_the_pairings_splits_are_fits_choice_on_the_recorded_shapes() -> None:
    manifests = load_manifests(REPO / "experiments")
    for pairing in manifests.pairings:
        run = paper_run(pairing)
        engines = [e for e in engines_of(run, manifests, 8) if e.what != "evaluation engine"]
        split = memory_split(run, manifests, PLANNED_GPU_BYTES, engines, 8, True, PAPER_SHAPES)
        assert run.backend.rollout_gpu_fraction == split.rollout, pairing
        assert run.backend.teacher != "vllm" or run.backend.teacher_gpu_fraction == split.teacher, pairing


def test_the_readmes_cost_table_is_the_commands_output() -> None:
    readme = (REPO / "README.md").read_text()
    found = re.search(r"<!-- cost table: python -m gropd.runs.cost --grid table1 -->\n(.*?)<!-- end of", readme, re.S)
    assert found, "README.md lost its cost table markers"
    assert found.group(1) == cost_table(grid_costs(load_manifests(REPO / "experiments"), "table1"), "table1")
