"""experiments/launch/submit_grid.sh under a fake `sbatch` that records each submission and answers as
`sbatch --parsable` does (sbatch(1): the job id, then `;cluster` on a multi-cluster site). The plan behind it is
real (gropd/runs/job_plan.py on a copy of experiments/): the teacher server first, one smoke job per teacher kind
(2 steps, under results/smoke, the served one after its server's job started), the array held on every smoke job
(`--dependency=afterok`, cancelled when one fails: `--kill-on-invalid-dep=yes`), and a stopper that cancels the
server once the array has ended (`--dependency=afterany` on an array's id waits for all its tasks, sbatch(1))."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from gropd.config import load_manifests
from gropd.model.components import TEACHER_WAIT_S
from gropd.runs.job_plan import submission

REPO = Path(__file__).resolve().parents[1]
SBATCH = f"""#!{sys.executable}
import json, os, sys
path = os.environ["SUBMISSIONS"]
jobs = open(path).read().splitlines() if os.path.exists(path) else []
open(path, "a").write(json.dumps(sys.argv[1:]) + "\\n")
print(f"{{100 + len(jobs)}};cluster-a")
"""


def test_a_grid_is_submitted_server_then_smoke_then_array_then_stopper(tmp_path: Path) -> None:
    work, tools = tmp_path / "work", tmp_path / "tools"
    shutil.copytree(REPO / "experiments", work / "experiments", ignore=shutil.ignore_patterns("runs", "lock.yaml"))
    tools.mkdir()
    (tools / "sbatch").write_text(SBATCH)
    (tools / "sbatch").chmod(0o755)
    (tools / "python").write_text(f'#!/usr/bin/env bash\nexec {sys.executable} "$@"\n')  # the login node's .venv
    (tools / "python").chmod(0o755)
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}", "PYTHONPATH": str(REPO)}
    env |= {"SUBMISSIONS": str(tmp_path / "submissions")}
    script = work / "experiments" / "launch" / "submit_grid.sh"
    done = subprocess.run(
        ["bash", str(script), "table1", "backend.teacher_url=http://t:8000"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    jobs = [json.loads(line) for line in (tmp_path / "submissions").read_text().splitlines()]
    plan = submission(load_manifests(REPO / "experiments"), "table1", TEACHER_WAIT_S)
    smokes = [line.split() for line in plan if line.startswith("smoke")]
    assert [line.split()[0] for line in plan] == ["settings", "server", "smoke", "smoke"]
    assert {label for *_, label in smokes} == {"-", "I32"}  # one run of each teacher kind
    settings = ["train.steps=2", "train.checkpoint_every=1", "eval.questions=1"]
    launch = "experiments/launch"

    server, local, served, array, stopper = jobs
    assert server == ["--parsable", f"{launch}/teacher_server.sh", "I32"]  # job 100
    (_, run, limit, _), (_, served_run, served_limit, _) = smokes
    assert local == [
        "--parsable",
        f"--time={limit}",
        "--export=ALL,GROPD_RESULTS=results/smoke",
        f"{launch}/slurm_run.sbatch",
        run,
        *settings,
        "backend.teacher_url=http://t:8000",
    ]  # job 101
    assert served[:4] == ["--parsable", f"--time={served_limit}", "--export=ALL,GROPD_RESULTS=results/smoke"] + [
        "--dependency=after:100"
    ]  # job 102, once the server's job started
    assert served[4:6] == [f"{launch}/slurm_run.sbatch", served_run]
    assert array == [
        "--parsable",
        "--array=0-9",  # Table 1's 10 runs
        "--dependency=afterok:101:102",
        "--kill-on-invalid-dep=yes",
        f"{launch}/slurm_run.sbatch",
        "--grid",
        "table1",
        "backend.teacher_url=http://t:8000",
    ]  # job 103
    assert "--dependency=afterany:103" in stopper and "--wrap=scancel 100" in stopper
    assert "job 103, after the smoke jobs 101 102" in done.stderr
