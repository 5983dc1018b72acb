"""A run in one process evaluates in a process of its own (`gropd.cli evaluate RUN_ID --recorded`), so no
evaluation engine shares a process with its training engines, and its per-sample records are byte for byte
those of the same trained run evaluated in this process."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from tiny_runs import project, tiny_config

from gropd.cli import main
from gropd.config import load_manifests
from gropd.record.run_dir import RunDir
from gropd.runs.pipeline import evaluate, execute

pytestmark = pytest.mark.slow
RUN = "table1__I4nothink-I1.7nothink__gropd"


def test_a_one_process_run_evaluates_in_a_process_of_its_own(tmp_path: Path, capsys) -> None:
    root = project(tmp_path)
    config = tiny_config(root, RUN, ["train.steps=2"])
    manifests = load_manifests(root / "experiments")
    status = execute(config, manifests, root / "results")
    run = RunDir(root / "results" / "tiny" / RUN)
    assert status["status"] == "finished" and run.read_summary() is not None
    assert status["pid"] != os.getpid()  # the evaluation's session was another process's
    assert "evaluating it in a process of its own" in capsys.readouterr().err

    again = root / "results-here" / "tiny" / RUN  # the same trained run, evaluated in this process
    shutil.copytree(run.root, again, ignore=shutil.ignore_patterns("eval", "tracking"))
    RunDir(again).update_status(status="trained")
    assert evaluate(config, manifests, root / "results-here")["status"] == "finished"
    assert (run.eval_dir / "add.jsonl").read_bytes() == (again / "eval" / "add.jsonl").read_bytes()
    summaries = [{k: v for k, v in r.read_summary().items() if k != "model"} for r in (run, RunDir(again))]
    assert summaries[0] == summaries[1]  # (its `model` is the final/ folder's path)


def test_evaluate_recorded_refuses_overrides_and_a_run_it_has_no_config_of(tmp_path: Path, capsys, monkeypatch) -> None:
    root = project(tmp_path)
    monkeypatch.chdir(root)
    assert main(["evaluate", RUN, "--profile", "tiny", "--recorded", "eval.questions=2"]) == 2
    assert "--recorded: given with eval.questions=2" in capsys.readouterr().err
    assert main(["evaluate", RUN, "--profile", "tiny", "--recorded"]) == 2
    assert f"--recorded: run {RUN} has not run under results/tiny/ (no results/tiny/{RUN}/" in capsys.readouterr().err
    assert not (root / "results" / "tiny" / RUN).exists()
