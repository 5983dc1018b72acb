"""experiments/launch/slurm_run.sbatch under a fake SLURM. `srun` runs its command once per node (with
SLURM_NODEID) on the CPUs Slurm 22.05-23.02 give a step: --cpus-per-task when srun is given it (or
SRUN_CPUS_PER_TASK), else one CPU a task, whatever the job asked: from 22.05 srun no longer reads
SLURM_CPUS_PER_TASK (the 22.05 release notes; srun(1), SRUN_CPUS_PER_TASK), while the job's environment,
SLURM_CPUS_PER_TASK included, is passed on unchanged (srun --export=ALL, its default). The fake binds the step
with taskset, as Slurm's task/affinity plugin binds it. `scontrol` names the nodes, `accelerate` records how it
was launched and the CPUs it may run on. The environment check (`./reproduce.sh check`, tested on its own in
test_preflight_env.py and test_gpu_env.py) runs as reproduce.sh runs it: .venv's GPU stamp checked in bash,
then `.venv/bin/python -m gropd.runs.preflight_env`, which a stand-in python records (and fails when told).
A job checks its environment on every node first, trains the run, then evaluates it with a second launch
(processes of its own, every GPU), offline after `pin`, with the launch config and process count of its node
count."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "experiments" / "launch" / "slurm_run.sbatch"
STEP = (
    "import json, os, sys; "
    "print(json.dumps({'node': os.environ['SLURM_NODEID'], 'cpus': len(os.sched_getaffinity(0)), "
    "'argv': sys.argv[1:]}))"
)
FAKES = {
    "srun": """#!/usr/bin/env bash
nodes=1 cpus=${SRUN_CPUS_PER_TASK:-1}
echo "$*" >> "$SRUN_STEPS"
while [[ "$1" == --* ]]; do
  case "$1" in --nodes=*) nodes=${1#--nodes=};; --cpus-per-task=*) cpus=${1#--cpus-per-task=};; esac
  shift
done
have=$(nproc)
for ((node = 0; node < nodes; node++)); do
  SLURM_NODEID=$node taskset -c "0-$(( (cpus < have ? cpus : have) - 1 ))" "$@" || exit $?
done
""",
    "scontrol": """#!/usr/bin/env bash
if [[ "$1" == requeue ]]; then echo "$*" >> "$REQUEUES"; exit 0; fi
printf 'gpu-a\\ngpu-b\\n'
""",
    "accelerate": """#!/usr/bin/env python3
import json, os, sys
offline = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
with open(os.environ["LAUNCHES"], "a") as log:
    step = {"node": os.environ["SLURM_NODEID"], "cpus": len(os.sched_getaffinity(0))}
    log.write(json.dumps({"argv": sys.argv[1:], **step, **offline}) + "\\n")
what = "RUN" if "run" in sys.argv else "EVAL"
if os.environ.get(f"FAKE_{what}_EXIT"):  # the step fails; a hung rank leaves the marker
    marker = os.environ["GROPD_HUNG_MARKER"]
    if os.environ.get("FAKE_HUNG"):
        os.makedirs(os.path.dirname(marker), exist_ok=True)
        open(marker, "w").write("rank 3: no rollout batch done for 1000 s\\n")
    if os.environ.get("FAKE_NCCL_TIMEOUT"):  # torch's ProcessGroupNCCL on a collective's timeout, the dump asked for
        assert os.path.isdir(os.path.dirname(os.environ["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"]))  # torch makes no folder
        assert os.environ["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1" and int(os.environ["TORCH_NCCL_TRACE_BUFFER_SIZE"]) > 0
        open(os.environ["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] + "3", "wb").write(b"flight recorder entries")
    sys.exit(int(os.environ[f"FAKE_{what}_EXIT"]))
""",
}
VENV_PYTHON = f"""#!/usr/bin/env bash
if [[ "$1 $2" == "-m gropd.runs.preflight_env" ]]; then
  {sys.executable} -c "{STEP}" "${{@:3}}" >> "$CHECKS"
  exit "${{CHECK_EXIT:-0}}"
fi
exec {sys.executable} "$@"
"""


def make_venv(work: Path, gpu: bool) -> None:
    """.venv as `./reproduce.sh gpu-env` (gpu) or a login node's first `./reproduce.sh` leaves it: its stamp."""
    bin_dir = work / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text(VENV_PYTHON)
    (bin_dir / "python").chmod(0o755)
    (bin_dir / "activate").write_text(f'export PATH="{bin_dir}:$PATH"\n')
    files = ["requirements.txt", "requirements-gpu.txt"] if gpu else ["requirements.txt"]
    (work / ".venv" / ".requirements.sha256").write_text(
        hashlib.sha256(b"".join((work / name).read_bytes() for name in files)).hexdigest() + "\n"
    )
    if gpu:
        (work / ".venv" / ".gpu").touch()


def submit(
    tmp_path: Path, nodes: int, *args: str, pinned: bool = True, gpu_venv: bool = True, **env: str
) -> tuple[int, list[dict], list[dict], str]:
    """(exit status, the accelerate launches, the environment checks, stderr) of the job."""
    bin_dir, work = tmp_path / "bin", tmp_path / "work"
    for name, text in FAKES.items():
        (bin_dir / name).parent.mkdir(exist_ok=True)
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (work / "experiments" / "launch").mkdir(parents=True, exist_ok=True)
    for name in ("reproduce.sh", "requirements.txt", "requirements-gpu.txt"):
        shutil.copy(REPO / name, work / name)
    make_venv(work, gpu_venv)
    if pinned:
        (work / "experiments" / "lock.yaml").write_text("models: {}\n")
    shutil.copy(SCRIPT, work / "job.sbatch")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "SLURM_", "SRUN_", "TEACHER"))}
    slurm = {"SLURM_NNODES": str(nodes), "SLURM_GPUS_ON_NODE": "8", "SLURM_JOB_NODELIST": "gpu-[a-b]"}
    slurm |= {"SLURM_CPUS_PER_TASK": "2"}  # the job's ask (#SBATCH --cpus-per-task), within this machine's CPUs
    logs = {
        "LAUNCHES": str(tmp_path / "launches"),
        "CHECKS": str(tmp_path / "checks"),
        "SRUN_STEPS": str(tmp_path / "steps"),
        "REQUEUES": str(tmp_path / "requeues"),
    }
    environ = {**base, **slurm, **logs, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    result = subprocess.run(
        ["bash", "job.sbatch", *args], cwd=work, env={**environ, **env}, capture_output=True, text=True, timeout=60
    )
    return result.returncode, read_lines(tmp_path / "launches"), read_lines(tmp_path / "checks"), result.stderr


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def command(launch: dict) -> list[str]:
    return launch["argv"][launch["argv"].index("-m") + 1 :]


@pytest.mark.parametrize(("nodes", "config"), [(1, "eight_gpu_fsdp.yaml"), (2, "multi_node_fsdp.yaml")])
def test_a_job_checks_then_trains_then_evaluates_on_every_gpu_offline(tmp_path: Path, nodes: int, config: str) -> None:
    code, launches, checks, stderr = submit(tmp_path, nodes, "RUN", "train.steps=3", TEACHER_URL="http://t:8000")
    assert code == 0, stderr
    assert [check["node"] for check in checks] == [str(node) for node in range(nodes)]  # every node, first
    assert [(launch["node"], command(launch)[1]) for launch in launches] == [
        *[(str(node), "run") for node in range(nodes)],
        *[(str(node), "evaluate") for node in range(nodes)],
    ]
    for launch in launches:
        argv = launch["argv"]
        assert argv[:2] == ["launch", "--config_file"] and argv[2] == f"experiments/launch/{config}"
        assert argv[argv.index("--num_processes") + 1] == str(8 * nodes)
        assert argv[argv.index("--machine_rank") + 1] == launch["node"]
        assert argv[argv.index("--main_process_ip") + 1] == "gpu-a"
        assert command(launch)[2:] == [
            "RUN",
            "--profile",
            "paper",
            "train.steps=3",
            "backend.teacher_url=http://t:8000",
        ]
        assert (launch["HF_HUB_OFFLINE"], launch["HF_DATASETS_OFFLINE"]) == ("1", "1")
    ports = {command(launch)[1]: launch["argv"][launch["argv"].index("--main_process_port") + 1] for launch in launches}
    assert ports["run"] != ports["evaluate"]  # the evaluation's rendezvous does not wait on the trainers' port


def test_every_step_runs_on_the_cpus_the_job_asked(tmp_path: Path) -> None:
    """Slurm 22.05-23.02 give a step 1 CPU unless srun names --cpus-per-task: the checks, trainers and
    evaluation shards must get the job's 2 (this machine's), not 1."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs to tell 1 from the job's ask")
    code, launches, checks, stderr = submit(tmp_path, 1, "RUN")
    assert code == 0, stderr
    assert [step["cpus"] for step in checks + launches] == [2, 2, 2]


def test_nodes_that_may_download_keep_the_network(tmp_path: Path) -> None:
    code, launches, _, stderr = submit(tmp_path, 1, "RUN", HF_HUB_OFFLINE="0")
    assert code == 0, stderr
    assert {(launch["HF_HUB_OFFLINE"], launch["HF_DATASETS_OFFLINE"]) for launch in launches} == {("0", "0")}


def test_a_job_before_pin_stops_before_launching(tmp_path: Path) -> None:
    code, launches, checks, stderr = submit(tmp_path, 1, "RUN", pinned=False)
    assert code == 2 and launches == checks == [] and "./reproduce.sh pin" in stderr


def test_a_failed_environment_check_stops_the_job_before_anything_loads(tmp_path: Path) -> None:
    code, launches, checks, _ = submit(tmp_path, 2, "RUN", CHECK_EXIT="2")
    assert code == 2 and len(checks) == 1 and launches == []  # the first node's check stopped it


def test_a_venv_made_on_the_login_node_stops_the_job_in_seconds_naming_the_command(tmp_path: Path) -> None:
    """A fresh clone whose .venv was first made without a GPU (./reproduce.sh rehearse on the login node)."""
    code, launches, checks, stderr = submit(tmp_path, 1, "RUN", gpu_venv=False)
    assert code == 2 and launches == checks == []
    assert "run ./reproduce.sh gpu-env once, from any node" in stderr


def test_a_step_whose_task_fails_on_one_node_ends_on_every_node(tmp_path: Path) -> None:
    """srun(1): without --kill-on-bad-exit a step's other tasks run on when one exits non-zero (Slurm's default,
    KillOnBadExit=0), and each node's launcher watches only its own workers: an evaluation shard that died on one node
    left the other's rank 0 waiting for its files until the job's time limit. Every step asks for the kill."""
    code, _, _, stderr = submit(tmp_path, 2, "RUN")
    assert code == 0, stderr
    steps = [line for line in (tmp_path / "steps").read_text().splitlines() if line.startswith("--")]  # a step's flags
    assert len(steps) == 3 and all("--kill-on-bad-exit=1" in step.split() for step in steps), steps


def requeues(tmp_path: Path) -> list[str]:
    path = tmp_path / "requeues"
    return path.read_text().splitlines() if path.exists() else []


def test_a_hung_rank_requeues_the_job_a_bounded_number_of_times(tmp_path: Path) -> None:
    """A rank's watchdog (gropd/train/watchdog.py) ends the training step and leaves the job's marker: the job
    requeues itself instead of exiting non-zero, which --requeue alone never resubmits; not past
    GROPD_MAX_REQUEUES restarts, and never for a step that failed without the marker (a bug would loop)."""
    hung = {"FAKE_RUN_EXIT": "1", "FAKE_HUNG": "1", "SLURM_JOB_ID": "4242"}
    code, launches, _, stderr = submit(tmp_path, 1, "RUN", **hung)
    assert code == 0, stderr
    assert requeues(tmp_path) == ["requeue 4242"] and "requeueing job 4242 (restart 1 of 3)" in stderr
    assert [command(launch)[1] for launch in launches] == ["run"]  # no evaluation of a run cut short
    assert not (tmp_path / "work" / ".hung" / "4242").exists()  # the next attempt starts without it

    again = tmp_path / "again"
    again.mkdir()
    code, _, _, stderr = submit(again, 1, "RUN", **hung, SLURM_RESTART_COUNT="3")
    assert code == 1 and requeues(again) == [] and "requeued 3 time(s) (GROPD_MAX_REQUEUES=3): not again" in stderr

    broken = tmp_path / "broken"
    broken.mkdir()
    code, launches, _, stderr = submit(broken, 1, "RUN", FAKE_RUN_EXIT="1", SLURM_JOB_ID="4243")
    assert code == 1 and requeues(broken) == [] and [command(launch)[1] for launch in launches] == ["run"]


def test_the_check_looks_at_the_jobs_run_only(tmp_path: Path) -> None:
    """The check is told the job's run (its teacher, if served, is the only server it looks at; its memory); before,
    every job looked at every Table 1 teacher server, the 4B-teacher runs too."""
    code, _, checks, stderr = submit(tmp_path, 1, "table1__I4think-B1.7__gropd")
    assert code == 0, stderr
    argv = checks[0]["argv"]
    assert argv[argv.index("--run") + 1] == "table1__I4think-B1.7__gropd" and "--results" not in argv


def test_a_timed_out_collective_requeues_the_job_as_a_hung_rank_does(tmp_path: Path) -> None:
    """A collective past the process group's timeout ends the ranks without the watchdog's marker: torch dumps what
    it waited for (TORCH_NCCL_DUMP_ON_TIMEOUT, into TORCH_NCCL_DEBUG_INFO_TEMP_FILE<rank>), which the job now sets
    beside the marker and requeues on; before, the job ended with exit 1 and never came back."""
    code, launches, _, stderr = submit(tmp_path, 1, "RUN", FAKE_RUN_EXIT="1", FAKE_NCCL_TIMEOUT="1", SLURM_JOB_ID="77")
    assert code == 0, stderr
    assert requeues(tmp_path) == ["requeue 77"] and "a collective timed out" in stderr
    assert [command(launch)[1] for launch in launches] == ["run"]
    assert not list((tmp_path / "work" / ".hung").glob("77*"))  # the next attempt starts without them


def test_a_hung_evaluation_shard_requeues_the_job(tmp_path: Path) -> None:
    """Evaluation shards run under the same watchdog; a hung one's marker requeues the job (before: exit non-zero,
    the job ended), and the run resumes its evaluation from the records on disk."""
    code, launches, _, stderr = submit(tmp_path, 1, "RUN", FAKE_EVAL_EXIT="75", FAKE_HUNG="1", SLURM_JOB_ID="78")
    assert code == 0, stderr
    assert requeues(tmp_path) == ["requeue 78"] and "an evaluation shard of RUN hung" in stderr
    assert [command(launch)[1] for launch in launches] == ["run", "evaluate"]


def test_a_smoke_job_writes_under_its_own_results_directory(tmp_path: Path) -> None:
    """GROPD_RESULTS (submit_grid.sh's smoke stage): the check, the training and the evaluation all take --results,
    so a 2-step smoke run never becomes the registered run's directory."""
    code, launches, checks, stderr = submit(tmp_path, 1, "RUN", "train.steps=2", GROPD_RESULTS="results/smoke")
    assert code == 0, stderr
    assert checks[0]["argv"][-2:] == ["--results", "results/smoke"]
    assert [command(launch)[1:5] for launch in launches] == [
        ["--results", "results/smoke", "run", "RUN"],
        ["--results", "results/smoke", "evaluate", "RUN"],
    ]
