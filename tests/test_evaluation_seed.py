"""The seed an evaluation samples with (gropd/runs/evaluation.py: evaluation_seed): an eval run's seed offsets it, so
grid table6 at `--seeds 3` evaluates each model at three evaluation seeds (the spread claim 0 carries); seed 0 keeps
eval.seed itself (the committed evaluations); a trained run is evaluated at eval.seed whatever its training seed."""

from __future__ import annotations

from pathlib import Path

from eval.runner import chunk_seed
from gropd.config import load_manifests
from gropd.config.grids import expand_grid, load_grid
from gropd.runs.evaluation import evaluation_seed
from gropd.runs.plan import plan_entry

REPO = Path(__file__).resolve().parents[1]


def configs(grid: str, seeds: list[int]):
    manifests = load_manifests(REPO / "experiments")
    entries = expand_grid(load_grid(grid, REPO / "experiments"), seeds)
    return [plan_entry(manifests, "tiny", entry, [], REPO / "results").config for entry in entries]


def test_an_eval_runs_seed_offsets_its_evaluation_seed_and_a_trained_runs_does_not():
    evals = [c for c in configs("table6", [0, 1, 2]) if c.model == "B1.7"]
    assert [c.seed for c in evals] == [0, 1, 2] and evals[0].kind == "eval"
    base = evals[0].eval.seed
    assert [evaluation_seed(c) for c in evals] == [base, base + 1, base + 2]
    assert len({chunk_seed(evaluation_seed(c), "add", 0) for c in evals}) == 3  # three different draws
    trained = [c for c in configs("table1", [0, 1, 2]) if c.pairing == "B4-B1.7" and c.method == "opd"]
    assert [c.seed for c in trained] == [0, 1, 2] and {evaluation_seed(c) for c in trained} == {base}


def test_the_committed_evaluations_are_what_seed_0_samples_with():
    """results/reference's table6 runs are seed 0: the evaluation seed they ran with is still theirs."""
    for c in configs("table6", [0]):
        recorded = (REPO / "results" / "reference" / "tiny" / c.run_id / "config.yaml").read_text()
        assert "\nseed: 0\n" in recorded and f"\n  seed: {c.eval.seed}\n" in recorded
        assert evaluation_seed(c) == c.eval.seed
