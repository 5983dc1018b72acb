"""A tiny-profile evaluation of a teacher and its student, through the real pipeline (table6 runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tiny_runs import project, tiny_config

from gropd.config import load_manifests
from gropd.pipeline import execute

pytestmark = pytest.mark.slow


def test_teacher_ranks_above_student(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = project(tmp_path)
    monkeypatch.chdir(root)
    manifests = load_manifests(root / "experiments")
    macro = {}
    for run_id in ("table6__I4-nothink", "table6__I1.7-nothink"):
        config = tiny_config(root, run_id, ["eval.questions=12", "eval.suites=[add, sub, mixed]"])
        assert execute(config, manifests, root / "results")["status"] == "finished"
        summary = json.loads((root / "results" / "tiny" / run_id / "eval" / "summary.json").read_text())
        assert set(summary["suites"]) == {"add", "sub", "mixed"}
        assert all(s["questions"] == 12 and s["k"] == 4 for s in summary["suites"].values())
        macro[run_id] = summary["macro"]
    # world.json (greedy, 100 questions/task): I4 nothink 98/90/59 on add/sub/mixed, I1.7 nothink well below
    assert macro["table6__I4-nothink"] > macro["table6__I1.7-nothink"] + 10
