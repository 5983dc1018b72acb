"""experiments/launch/slurm_run.sbatch under a fake SLURM: `srun` runs its command once per node (with
SLURM_NODEID), `scontrol` names the nodes, `accelerate` records how it was launched. A job trains the run,
then evaluates it with a second launch (processes of its own, every GPU), offline after `pin`, with the
launch config and process count of its node count."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "experiments" / "launch" / "slurm_run.sbatch"
FAKES = {
    "srun": """#!/usr/bin/env bash
nodes=1
while [[ "$1" == --* ]]; do [[ "$1" == --nodes=* ]] && nodes=${1#--nodes=}; shift; done
for ((node = 0; node < nodes; node++)); do SLURM_NODEID=$node "$@" || exit $?; done
""",
    "scontrol": "#!/usr/bin/env bash\nprintf 'gpu-a\\ngpu-b\\n'\n",
    "accelerate": """#!/usr/bin/env python3
import json, os, sys
offline = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
with open(os.environ["LAUNCHES"], "a") as log:
    log.write(json.dumps({"argv": sys.argv[1:], "node": os.environ["SLURM_NODEID"], **offline}) + "\\n")
""",
}


def submit(tmp_path: Path, nodes: int, *args: str, pinned: bool = True, **env: str) -> tuple[int, list[dict], str]:
    bin_dir, work = tmp_path / "bin", tmp_path / "work"
    for name, text in FAKES.items():
        (bin_dir / name).parent.mkdir(exist_ok=True)
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (work / "experiments" / "launch").mkdir(parents=True, exist_ok=True)
    if pinned:
        (work / "experiments" / "lock.yaml").write_text("models: {}\n")
    shutil.copy(SCRIPT, work / "job.sbatch")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "SLURM_", "TEACHER"))}
    slurm = {"SLURM_NNODES": str(nodes), "SLURM_GPUS_ON_NODE": "8", "SLURM_JOB_NODELIST": "gpu-[a-b]"}
    environ = {**base, **slurm, "PATH": f"{bin_dir}:{os.environ['PATH']}", "LAUNCHES": str(tmp_path / "launches")}
    result = subprocess.run(
        ["bash", "job.sbatch", *args], cwd=work, env={**environ, **env}, capture_output=True, text=True, timeout=60
    )
    path = tmp_path / "launches"
    launches = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return result.returncode, launches, result.stderr


def command(launch: dict) -> list[str]:
    return launch["argv"][launch["argv"].index("-m") + 1 :]


@pytest.mark.parametrize(("nodes", "config"), [(1, "eight_gpu_fsdp.yaml"), (2, "multi_node_fsdp.yaml")])
def test_a_job_trains_then_evaluates_on_every_gpu_offline(tmp_path: Path, nodes: int, config: str) -> None:
    code, launches, stderr = submit(tmp_path, nodes, "RUN", "train.steps=3", TEACHER_URL="http://t:8000")
    assert code == 0, stderr
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


def test_nodes_that_may_download_keep_the_network(tmp_path: Path) -> None:
    code, launches, stderr = submit(tmp_path, 1, "RUN", HF_HUB_OFFLINE="0")
    assert code == 0, stderr
    assert {(launch["HF_HUB_OFFLINE"], launch["HF_DATASETS_OFFLINE"]) for launch in launches} == {("0", "0")}


def test_a_job_before_pin_stops_before_launching(tmp_path: Path) -> None:
    code, launches, stderr = submit(tmp_path, 1, "RUN", pinned=False)
    assert code == 2 and launches == [] and "./reproduce.sh pin" in stderr
