"""`gropd.cli status` on a hand-made results tree: every state, and the numbers of each row."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_runs import project

from gropd.cli import main
from gropd.config import config_hash, config_yaml, load_manifests
from gropd.record.run_dir import RunDir
from gropd.runs.pipeline import load_run
from gropd.runs.session import process_start
from gropd.runs.status import format_seconds

IDS = {
    "finished": "table1__I4nothink-I1.7nothink__gropd",
    "collapsed": "table1__I4nothink-I1.7nothink__opd",
    "failed": "table1__I32nothink-I1.7nothink__gropd",
    "running": "table1__I32nothink-I1.7nothink__opd",
    "resumable": "table1__I4think-B1.7__gropd",
    "changed": "table1__I4think-B1.7__opd",
    "broken": "table1__B4-B1.7__gropd",
    "new": "table1__B4-B1.7__opd",
}
ORPHAN = "table1__I4nothink-I1.7nothink__gropd__seed7"


def metric(step: int, reward: float, length: float, seconds: float) -> dict:
    return {
        "step": step,
        "verifier_reward": reward,
        "mean_response_len": length,
        "time_rollout_s": seconds / 2,
        "time_teacher_s": seconds / 4,
        "time_update_s": seconds / 4,
    }


def write_run(root: Path, run_id: str, status: dict, metrics: list[dict], config=None) -> RunDir:
    run_dir = RunDir(root / "results" / "tiny" / run_id)
    if config is not None:
        run_dir.write_config(config_yaml(config))
    run_dir.update_status(run_id=run_id, profile="tiny", kind="train", **status)
    for record in metrics:
        run_dir.append_metrics(record)
    return run_dir


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = project(tmp_path)
    manifests = load_manifests(root / "experiments")
    configs = {state: load_run(manifests, "tiny", run_id) for state, run_id in IDS.items()}
    owner = {"pid": os.getpid(), "host": socket.gethostname(), "pid_start": process_start(os.getpid())}

    def write(state: str, metrics: list[dict], **status) -> RunDir:
        status = {"config_hash": config_hash(configs[state]), **status}
        return write_run(root, IDS[state], status, metrics, configs[state])

    steps = configs["finished"].train.steps  # a finished run that did not collapse logged all of them
    ran = [metric(step, 0.25, 40.0, 2) for step in range(1, steps)] + [metric(steps, 0.375, 41.5, 2)]
    write("finished", ran, status="finished", step=steps, wall_s=75.0)
    fell = metric(1, 0.5, 50.0, 2) | {"loss": None, "non_finite": {"loss": "nan"}}  # the collapse its record bears out
    write("collapsed", [fell], status="collapsed", step=1, collapse_step=1, reason="reward fell", wall_s=3725.0)
    write("failed", [], status="failed", failed_in="running", step=0, reason="ValueError: boom", wall_s=9.0)
    # the tiny profile's train.steps; mean of the last steps: 2 s a step, steps - 2 left
    running = write("running", [metric(1, 0.1, 30.0, 3), metric(2, 0.2, 31.0, 1)], status="running", step=2, **owner)
    with running.metrics_path.open("a") as handle:
        handle.write('{"step": 3, "verifier_rew')  # a line torn by a crash is ignored
    write("resumable", [metric(1, 0.1, 30.0, 2)], status="running", step=1, **{**owner, "pid": dead_pid()})
    write("changed", [metric(1, 0.1, 30.0, 2)], status="finished", step=1, config_hash="0" * 16)
    broken = RunDir(root / "results" / "tiny" / IDS["broken"])
    broken.root.mkdir(parents=True)
    broken.status_path.write_text('{"status": "finis')
    orphan = configs["finished"].model_copy(update={"run_id": ORPHAN, "seed": 7})
    status = {"status": "finished", "config_hash": config_hash(orphan), "step": steps, "wall_s": 5.0}
    write_run(root, ORPHAN, status, [metric(step, 0.5, 20.0, 1) for step in range(1, steps + 1)], orphan)
    monkeypatch.chdir(root)
    return root


def rows(text: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split()[1:] for line in text.splitlines()[2:-1]}


def test_status_prints_every_state(tree: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["status", "--profile", "tiny"]) == 0
    out = capsys.readouterr().out
    table = rows(out)
    for state, run_id in IDS.items():
        assert table[run_id][0] == state, (run_id, table[run_id])
    steps = load_run(load_manifests(tree / "experiments"), "tiny", IDS["finished"]).train.steps
    assert table[IDS["finished"]][1:5] == [f"{steps}/{steps}", "0.375", "41.5", "1m15s"]
    assert table[IDS["collapsed"]][1:] == [f"1/{steps}", "0.500", "50.0", "1h02m", "reward", "fell"]
    assert table[IDS["failed"]][1:] == [f"0/{steps}", "9s", "ValueError:", "boom"]
    assert table[IDS["running"]][1:] == [f"2/{steps}", "0.200", "31.0", "ETA", format_seconds(2.0 * (steps - 2))]
    assert table[IDS["resumable"]][1:] == [f"1/{steps}", "0.100", "30.0"]
    assert "0000000000000000" in " ".join(table[IDS["changed"]])
    assert "status.json" in " ".join(table[IDS["broken"]])
    assert table[IDS["new"]] == ["new"]
    assert table[ORPHAN][:5] == ["finished", f"{steps}/{steps}", "0.500", "20.0", "5s"]
    # every run of every grid is listed: table1's 10, plus the other grids' runs
    grids = [p.stem for p in (tree / "experiments" / "grids").glob("*.yaml")]
    assert {run_id.split("__")[0] for run_id in table} == set(grids)
    total = out.splitlines()[-1]
    assert total.startswith(f"{len(table)} runs: ")


def test_status_reads_without_writing(tree: Path, capsys: pytest.CaptureFixture) -> None:
    before = sorted(str(p) for p in tree.rglob("*"))
    main(["status", "--profile", "tiny"])
    assert sorted(str(p) for p in tree.rglob("*")) == before


def test_status_without_profile_shows_profiles_with_results(tree: Path, capsys: pytest.CaptureFixture) -> None:
    main(["status"])
    out = capsys.readouterr().out
    assert "profile tiny" in out and "profile paper" not in out


def test_format_seconds() -> None:
    assert [format_seconds(s) for s in (0, 59.4, 60, 3599, 3600, 7322)] == [
        "0s",
        "59s",
        "1m00s",
        "59m59s",
        "1h00m",
        "2h02m",
    ]
