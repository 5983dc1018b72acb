"""The figures a paper job carries, derived from its plan (gropd/runs/job_plan.py): host memory by hand from the
Qwen3-1.7B student's parameter count, the start-up deadline and collective timeout by their formulas."""

from __future__ import annotations

from pathlib import Path

import pytest

from gropd.config import load_manifests
from gropd.runs import job_plan
from gropd.runs.cost import step_cost

REPO = Path(__file__).resolve().parents[1]
# Qwen3-1.7B's config.json (vocab 151,936, hidden 2,048, 28 layers, MLP 6,144, 16 heads and 8 KV heads of 128, tied
# embedding): the embedding, then a layer's q and o (2 x 2,048 x 16 x 128), k and v (2 x 2,048 x 8 x 128), gated MLP
# (3 x 2,048 x 6,144), two norms and the q/k norms; the final norm. Qwen3-4B likewise (2,560, 36 layers, 9,728, 32).
EMBEDDING = 151_936 * 2_048
LAYER = 2_048 * 16 * 128 * 2 + 2 * 2_048 * 8 * 128 + 3 * 2_048 * 6_144 + 2 * 2_048 + 2 * 128
STUDENT = EMBEDDING + 28 * LAYER + 2_048  # 1,720,574,976 (Qwen's "1.7B")
TEACHER_4B = 151_936 * 2_560 + 36 * (2_560 * 32 * 128 * 2 + 2 * 2_560 * 8 * 128 + 3 * 2_560 * 9_728 + 2 * 2_560 + 256)
TEACHER_4B += 2_560
GIB = 2**30


@pytest.fixture(scope="module")
def manifests():
    return load_manifests(REPO / "experiments")


def config(manifests, pairing: str, method: str = "gropd"):
    """Table 1's run of `pairing` and `method`, as its grid entry resolves."""
    return next(c for c in job_plan.table1(manifests) if (c.pairing, c.method) == (pairing, method))


def test_a_jobs_host_memory_by_hand(manifests) -> None:
    """8 ranks: 8 x (3 + 2 x 3) GiB beside a 4B teacher (8 x (3 + 3) beside a served one), 64 workers x 0.25 GiB,
    12 + 6 bytes a student parameter, x 1.25, up to a multiple of 8 GiB."""
    assert STUDENT == 1_720_574_976
    in_process = (72 + 16 + 18 * STUDENT / GIB) * 1.25  # 146.05 GiB
    served = (48 + 16 + 18 * STUDENT / GIB) * 1.25  # 116.05 GiB
    assert job_plan.trainer_memory(config(manifests, "I4nothink-I1.7nothink"), manifests).gib() == 152 > in_process
    assert job_plan.trainer_memory(config(manifests, "I32nothink-I1.7nothink"), manifests).gib() == 120 > served
    assert job_plan.job_memory_gib(manifests)[0] == 152  # the most any Table 1 run's job needs
    assert job_plan.server_memory(8).gib() == 64  # (8 x 6 + 3) x 1.25 = 63.75


def test_start_up_deadline_and_collective_timeout_follow_the_plans_longest_step(manifests) -> None:
    """With S the plan's longest step (gropd/runs/cost.py), read at 200 MB/s: a 4B-teacher run reads the student and
    its teacher in bf16 and a checkpoint (12 B a parameter), builds 2 engines of 300 s; a served run 1 engine, and
    waits for its server (GROPD_TEACHER_WAIT_S) at start-up and in a step."""
    local = config(manifests, "I4nothink-I1.7nothink")
    s = step_cost(local, manifests).seconds()[1]
    build = (2 * STUDENT + 2 * TEACHER_4B + 12 * STUDENT) / 200e6 + 2 * 300
    limits = job_plan.run_limits(local, manifests, teacher_wait_s=1800.0)
    assert limits.collective_s == pytest.approx(max(4 * s + 600, build))
    assert limits.startup_s == pytest.approx(build + 4 * s + 600)
    assert 600 < limits.collective_s < 3600  # minutes, where the process group waited 7,200 s

    served = config(manifests, "I32think-B1.7", "opd")
    s = step_cost(served, manifests).seconds()[1]
    build = (2 * STUDENT + 12 * STUDENT) / 200e6 + 300
    limits = job_plan.run_limits(served, manifests, teacher_wait_s=1800.0)
    assert limits.collective_s == pytest.approx(max(4 * s + 1800, build))
    assert limits.startup_s == pytest.approx(build + 1800 + 4 * s + 1800)


def sbatch_options(path: Path) -> dict[str, str]:
    """The #SBATCH options of a job script, up to its first command (where sbatch stops reading them)."""
    options = {}
    for line in path.read_text().splitlines()[1:]:
        if line.strip() and not line.startswith("#"):
            break
        if line.startswith("#SBATCH --"):
            name, _, value = line.split()[1][2:].partition("=")
            options[name] = value
    return options


def test_the_launch_scripts_request_what_the_plan_derives(manifests) -> None:
    """Both scripts carry the plan's figures (before: neither asked for host memory, and the server ran 48 h):
    `--mem` of the training job and of the server's node, the server's time limit, each with its derivation beside
    it. A change of the plan (a larger student, the cost model's step) fails here until the scripts follow."""
    from gropd.model.components import TEACHER_WAIT_S

    launch = REPO / "experiments" / "launch"
    job, server = sbatch_options(launch / "slurm_run.sbatch"), sbatch_options(launch / "teacher_server.sh")
    gib, how = job_plan.job_memory_gib(manifests)
    assert job["mem"] == f"{gib}G" and "= 116.8 GiB" in how
    assert f"Host memory (--mem, per node): {gib} GiB =" in (launch / "slurm_run.sbatch").read_text()
    assert server["mem"] == f"{job_plan.server_memory().gib()}G"
    assert f"Host memory (--mem): {job_plan.server_memory().gib()} GiB =" in (launch / "teacher_server.sh").read_text()
    hours, how = job_plan.server_hours(manifests, TEACHER_WAIT_S)
    assert server["time"] == f"{hours}:00:00" and server["signal"] == "B:USR1@600"
    seconds = how.rsplit(", ", 1)[1].removesuffix(" s")
    assert f"Its time limit is the plan's: {hours} h" in (launch / "teacher_server.sh").read_text()
    assert f"{int(seconds):,} s" in (launch / "teacher_server.sh").read_text()
