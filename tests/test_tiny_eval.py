"""A tiny-profile evaluation of a teacher and its student, through the real pipeline (table6 runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tiny_runs import project, tiny_config

from gropd.config import load_manifests
from gropd.runs.pipeline import execute
from gropd.tiny.world import ensure_tiny_world

pytestmark = pytest.mark.slow
SUITES = ("add3", "mixed", "muladd")  # the tasks where the teacher leads its student most


def test_teacher_ranks_above_student(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = project(tmp_path)
    monkeypatch.chdir(root)
    manifests = load_manifests(root / "experiments")
    macro = {}
    for run_id in ("table6__I4-nothink", "table6__I1.7-nothink"):
        config = tiny_config(root, run_id, ["eval.questions=40", f"eval.suites=[{', '.join(SUITES)}]"])
        assert execute(config, manifests, root / "results")["status"] == "finished"
        summary = json.loads((root / "results" / "tiny" / run_id / "eval" / "summary.json").read_text())
        assert set(summary["suites"]) == set(SUITES)
        assert all(s["questions"] == 40 and s["k"] == 4 for s in summary["suites"].values())
        macro[run_id] = summary["macro"]
    # the gap world.json records (greedy, 100 questions per task) on these suites, in points: the sampled
    # evaluation must show at least half of it
    world = ensure_tiny_world(root / "experiments" / "tiny_world.yaml", root / "results" / "tiny" / "world")
    accuracy = {label: world.info["models"][label]["accuracy"]["nothink"] for label in ("I4", "I1.7")}
    greedy_gap = 100 * sum(accuracy["I4"][t] - accuracy["I1.7"][t] for t in SUITES) / len(SUITES)
    assert greedy_gap > 10
    assert macro["table6__I4-nothink"] > macro["table6__I1.7-nothink"] + greedy_gap / 2
