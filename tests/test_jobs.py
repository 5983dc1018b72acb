"""`grid --jobs N`: thread split, GPU round-robin, started runs keep their threads, same results as one
at a time, and a failed run leaves the others finished with a non-zero exit status."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from tiny_runs import FAST, REPO, project, tiny_config

from gropd.config import config_hash, config_yaml, load_manifests
from gropd.record.run_dir import RunDir
from gropd.runs.jobs import Job, plan_jobs, run_grid_jobs, run_jobs
from gropd.runs.lifecycle import keep_started_threads, split_threads, with_threads
from gropd.runs.pipeline import find_run_file
from gropd.runs.plan import RunPlan, plan_run_id

GROPD, OPD = "pair__I4nothink-I1.7nothink__gropd", "pair__I4nothink-I1.7nothink__opd"
PAIR = """name: pair
kind: train
matrix:
  pairing: [I4nothink-I1.7nothink]
  method: [gropd, opd]
"""
# A setting the front door cannot judge without drawing the pool: `sub` has 3,005 training questions, found
# short only when the run draws them (tasks it does not know are refused before anything is written).
BROKEN_OPD = """set:
  - when: {method: opd}
    values: {sampling: {temperature: 1.0e-300}}
"""  # valid input that fails once it runs: logits / T overflow, and torch refuses to sample from NaN probabilities
SHORT = ["train.steps=2", "eval.questions=2", "eval.suites=[add]", "backend.threads=1"]
TIMING = ("time_rollout_s", "time_teacher_s", "time_update_s")


def pair_project(tmp_path: Path, grid: str = PAIR) -> Path:
    """A project with grid `pair` whose profile runs on 2 threads (so that --jobs 2 has something to split)."""
    root = project(tmp_path)
    (root / "experiments" / "grids" / "pair.yaml").write_text(grid)
    profile = root / "experiments" / "profiles" / "tiny.yaml"
    profile.write_text(re.sub(r"\n  threads: \d+", "\n  threads: 2", profile.read_text()))
    return root


def plans_of(root: Path, run_ids: tuple[str, ...]) -> list[RunPlan]:
    """The runs' plans in the project at `root` (its results/), with the test runs' FAST settings."""
    manifests = load_manifests(root / "experiments")
    return [plan_run_id(manifests, "tiny", run_id, FAST, root / "results") for run_id in run_ids]


def finish(root: Path, run_id: str, config) -> None:
    """A finished run's files as the pipeline leaves them (config.yaml, status.json)."""
    run_dir = RunDir(root / "results" / "tiny" / run_id)
    run_dir.write_config(config_yaml(config))
    run_dir.update_status(run_id=run_id, status="finished", config_hash=config_hash(config))


def test_a_grid_whose_runs_are_done_starts_no_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """(Each process took seconds to say "already finished": a finished grid of 30 runs took minutes.)"""
    root = pair_project(tmp_path)
    plans = plans_of(root, (GROPD, OPD))
    for plan in plans:
        finish(root, plan.config.run_id, plan.config)
    monkeypatch.setattr("gropd.runs.jobs.subprocess.Popen", lambda *args, **kwargs: pytest.fail("a process started"))
    out = io.StringIO()
    settings = {"overrides": [], "force": False, "dry_run": False}
    assert run_grid_jobs(plans, ["finished"] * 2, jobs=2, results_root=root / "results", out=out, **settings) == 0
    assert f"finished           {GROPD}" in out.getvalue() and f"finished           {OPD}" in out.getvalue()


def test_a_plan_knows_where_its_thread_count_came_from(tmp_path: Path) -> None:
    """The thread rule reads the plan's origins: the profile's count gives way to --jobs' split, a count on the
    command line or in the run's own file does not; a grid's jobs put the key on the command line only once."""
    root = pair_project(tmp_path)
    manifests, results = load_manifests(root / "experiments"), root / "results"
    profile = plan_run_id(manifests, "tiny", GROPD, [], results)
    assert profile.origin("backend.threads") == str(root / "experiments" / "profiles" / "tiny.yaml")
    assert not profile.threads_on_purpose and profile.with_split(results, 1).config.backend.threads == 1
    given = plan_run_id(manifests, "tiny", GROPD, ["backend.threads=2"], results)
    assert given.threads_on_purpose and given.with_split(results, 1).config.backend.threads == 2
    run_file = find_run_file(manifests, "tiny", OPD)
    run_file.write_text(run_file.read_text() + "backend: {threads: 2}\n")
    own = plan_run_id(manifests, "tiny", OPD, [], results)
    assert own.run_file == run_file and own.origin("backend.threads") == str(run_file)
    assert own.threads_on_purpose and own.with_split(results, 1).config.backend.threads == 2
    for plan, overrides in ((given, ["backend.threads=2"]), (own, [])):
        (job,) = plan_jobs([plan], jobs=2, overrides=overrides, force=False, results_root=results, cores=2, gpus=[])
        assert [token for token in job.command if token.startswith("backend.threads=")] == ["backend.threads=2"]


def test_split_threads() -> None:
    cases = {(2, 1): 2, (2, 2): 1, (2, 4): 1, (16, 3): 5, (16, 14): 1}
    assert {case: split_threads(*case) for case in cases} == cases


def test_plan_splits_threads_keeps_started_runs_and_round_robins_gpus(tmp_path: Path) -> None:
    root = pair_project(tmp_path)
    plans = plans_of(root, (GROPD, OPD))
    assert plans[0].config.backend.threads == 2  # the project's profile
    finish(root, GROPD, plans[0].config)
    jobs = plan_jobs(
        plans,
        jobs=2,
        overrides=["train.steps=2"],
        force=False,
        results_root=root / "results",
        cores=2,
        gpus=[],
    )
    assert [job.threads for job in jobs] == [2, 1]  # the finished run keeps its 2; the new one gets 2 // 2
    assert jobs[1].command[1:] == [
        "-m",
        "gropd.cli",
        "--results",
        str(root / "results"),
        "run",
        OPD,
        "--profile",
        "tiny",
        "train.steps=2",
        "backend.threads=1",
    ]
    assert jobs[1].env["OMP_NUM_THREADS"] == "1" and "CUDA_VISIBLE_DEVICES" not in jobs[1].env
    cuda = [
        replace(
            plan,
            config=plan.config.model_copy(
                update={"backend": plan.config.backend.model_copy(update={"device": "cuda"})}
            ),
        )
        for plan in plans * 2
    ]
    gpus = plan_jobs(
        cuda,
        jobs=4,
        overrides=[],
        force=True,
        results_root=root / "results",
        cores=16,
        gpus=["3", "5"],
    )
    assert [job.env["CUDA_VISIBLE_DEVICES"] for job in gpus] == ["3", "5", "3", "5"]
    assert all(job.command[-1] == "--force" for job in gpus)


def test_a_started_run_keeps_its_thread_count(tmp_path: Path) -> None:
    root = pair_project(tmp_path)
    started = tiny_config(root, GROPD, ["backend.threads=1"])
    finish(root, GROPD, started)
    now = tiny_config(root, GROPD, [])  # resolves to the project profile's 2 threads
    assert config_hash(now) != config_hash(started)
    kept = keep_started_threads(now, root / "results")
    assert kept.backend.threads == 1 and config_hash(kept) == config_hash(started)
    edited = tiny_config(root, GROPD, ["train.steps=7"])  # another change is a change
    assert keep_started_threads(edited, root / "results") == edited
    assert with_threads(now, 1) == started


def grid(root: Path, jobs: int, log: Path) -> int:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "gropd.cli", "grid", "pair", "--profile", "tiny", "--jobs", str(jobs), *SHORT]
    with log.open("w") as out:
        return subprocess.run(command, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=900).returncode


def outputs(root: Path, run_id: str) -> tuple[list[dict], dict]:
    run_dir = RunDir(root / "results" / "tiny" / run_id)
    metrics = [{k: v for k, v in record.items() if k not in TIMING} for record in run_dir.read_metrics()]
    return metrics, json.loads((run_dir.eval_dir / "summary.json").read_text())


@pytest.mark.slow
def test_jobs_2_equals_jobs_1(tmp_path: Path) -> None:
    together, alone = pair_project(tmp_path / "a"), pair_project(tmp_path / "b")
    assert grid(together, 2, tmp_path / "a.log") == 0
    assert grid(alone, 1, tmp_path / "b.log") == 0
    log = (tmp_path / "a.log").read_text()
    assert f"[{GROPD}] step 2/2" in log and f"[{OPD}] step 2/2" in log
    for run_id in (GROPD, OPD):
        metrics, summary = outputs(together, run_id)
        assert [record["step"] for record in metrics] == [1, 2]
        assert (metrics, summary) == outputs(alone, run_id)


@pytest.mark.slow
def test_a_failed_run_leaves_the_other_finished(tmp_path: Path) -> None:
    root = pair_project(tmp_path, PAIR + BROKEN_OPD)
    assert grid(root, 2, tmp_path / "log") == 1
    log = (tmp_path / "log").read_text()
    summary = log[log.index("summary of 2 runs") :]
    assert f"finished           {GROPD}" in summary and f"1 run(s) failed: {OPD}" in summary
    status = {run_id: RunDir(root / "results" / "tiny" / run_id).read_status() for run_id in (GROPD, OPD)}
    assert status[GROPD]["status"] == "finished"
    assert status[OPD]["status"] == "failed" and "probability tensor contains" in status[OPD]["reason"]


class ClosedPipe(io.StringIO):
    """An output whose reader has gone (`| head` exited): every write raises BrokenPipeError, as a write to a pipe
    with no reader does once SIGPIPE is ignored (Python ignores it)."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_jobs_run_on_when_their_output_reader_is_gone(tmp_path: Path) -> None:
    """Each job prints 1 MB (16 times a pipe's buffer) after the reader is gone: read on, they end; before, the
    streaming thread died at the first write and each job blocked on its full pipe for ever."""
    chatter = "import sys\nfor i in range(20000): print('x' * 50, flush=True)\nprint('done')"
    jobs = [Job(f"run{n}", None, [sys.executable, "-c", chatter], {}) for n in range(2)]
    finished = threading.Event()
    worker = threading.Thread(target=lambda: (run_jobs(jobs, 2, ClosedPipe()), finished.set()), daemon=True)
    worker.start()
    assert finished.wait(timeout=120), "a job blocked writing to its pipe"
    assert [job.returncode for job in jobs] == [0, 0] and all(job.tail[-1] == "done" for job in jobs)
