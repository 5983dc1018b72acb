"""The job's environment check (gropd/runs/preflight_env.py): each finding one line, FAILED ones saying what to
set, exit 2, in seconds. On this CPU it runs for real and fails where a GPU job would; a GPU node that passes is
modelled with fakes of what the check reads: nvidia-smi's list, torch's CUDA view, the CPUs the step may run on
(os.sched_getaffinity: what srun's --cpus-per-task binds), vLLM's installed version, a Hugging Face cache laid out
as huggingface_hub documents it (models--ORG--NAME/snapshots/REVISION/FILE), and a teacher server answering
/v1/models as `vllm serve` does (tests/test_teacher_server.py's FakeVLLM)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_preflight import SHAPES, write_fake_lock
from test_teacher_server import FakeVLLM

import gropd.runs.preflight_env as check
from gropd.model.teacher.server import request_json
from gropd.runs.preflight_env import (
    cpus_line,
    disk_line,
    gpus_line,
    pins_line,
    snapshot_lines,
    teacher_line,
    torch_line,
    vllm_line,
)

REPO = Path(__file__).resolve().parents[1]
H100 = ("NVIDIA H100 80GB HBM3", "580.65.06")


def project(tmp_path: Path) -> Path:
    """A project root: experiments/ with a made-up lock, and the requirements files."""
    root = tmp_path / "project"
    shutil.copytree(REPO / "experiments", root / "experiments", ignore=shutil.ignore_patterns("runs", "lock.yaml"))
    for name in ("requirements.txt", "requirements-gpu.txt"):
        shutil.copy(REPO / name, root / name)
    write_fake_lock(root / "experiments")
    return root


def test_gpus_torch_cpus_and_vllm_lines() -> None:
    assert gpus_line([], 0, "2.14.0+cu130", "13.0", 8).status == "FAILED"
    unusable = gpus_line([H100] * 8, 0, "2.13.0+cpu", None, 8)
    assert unusable.status == "FAILED" and "CPU-only build" in unusable.text
    short = gpus_line([H100] * 8, 4, "2.14.0+cu130", "13.0", 8)
    assert short.status == "FAILED" and "--gpus-per-node=8" in short.text
    assert gpus_line([H100] * 8, 8, "2.14.0+cu130", "13.0", 8).status == "ok"
    assert gpus_line([H100] * 8, 8, "2.14.0+cu130", "13.0", 4, exact=False).status == "ok"  # a TP-4 server
    assert "pins 2.14.0: ./reproduce.sh gpu-env" in torch_line("2.13.0+cu128", "12.8", "580.1", "2.14.0").text
    assert "CPU-only" in torch_line("2.14.0+cpu", None, "580.1", "2.14.0").text
    old_driver = torch_line("2.14.0+cu130", "13.0", "535.104.05", "2.14.0")
    assert old_driver.status == "FAILED" and "driver >= 580, this node has 535.104.05" in old_driver.text
    assert torch_line("2.14.0+cu130", "13.0", "580.65.06", "2.14.0").status == "ok"
    # torch already runs CUDA 13 on a 550 driver: NVIDIA's forward-compatibility package (cuda-compat), documented
    # for data-centre GPUs; the driver's version is then no reason to refuse
    compat = torch_line("2.14.0+cu130", "13.0", "550.54.15", "2.14.0", cuda_works=True)
    assert compat.status == "ok" and "forward compatibility" in compat.text
    one = cpus_line(1, 64, 8)  # Slurm 22.05-23.02: a step without --cpus-per-task gets 1 CPU
    assert one.status == "FAILED" and "--cpus-per-task=$SLURM_CPUS_PER_TASK" in one.text and "asked 64" in one.text
    assert cpus_line(64, 64, 8).status == "ok" and cpus_line(8, None, 8).status == "FAILED"
    assert (
        "not installed" in vllm_line(None, None, "0.33.0").text
        and "./reproduce.sh gpu-env" in vllm_line(None, None, "0.33.0").text
    )
    assert vllm_line("0.32.0", None, "0.33.0").status == "FAILED"
    assert "does not import" in vllm_line("0.33.0", "ImportError: libcudart", "0.33.0").text
    assert vllm_line("0.33.0", None, "0.33.0").status == "ok"


def test_snapshot_teacher_and_disk_lines() -> None:
    lock = {
        "models": {"Qwen/Qwen3-32B": {"full": "9" * 40}},
        "datasets": {"HuggingFaceH4/MATH-500": {"full": "f" * 40}},
    }
    cached = lambda kind, repo, full: None if kind == "dataset" else "missing config.json"  # noqa: E731
    offline = snapshot_lines(lock, cached, offline=True)
    assert [line.status for line in offline] == ["FAILED", "ok"]
    assert f"hf download Qwen/Qwen3-32B --revision {'9' * 40}" in offline[0].text
    assert [line.status for line in snapshot_lines(lock, cached, offline=False)] == ["note", "ok"]
    assert len(snapshot_lines(lock, cached, True, only="Qwen/Qwen3-32B")) == 1  # a server needs its own model only

    served = "Qwen/Qwen3-32B@" + "9" * 40
    ask = lambda endpoint, payload: request_json(endpoint, payload, timeout_s=1.0, max_retries=0, backoff_s=0.0)  # noqa: E731
    with FakeVLLM(served=served) as right, FakeVLLM(served="Qwen/Qwen3-32B@" + "0" * 40) as wrong:
        assert teacher_line("I32", served, right.url, "TEACHER_URL", ask).status == "ok"
        assert right.requests[-1]["prompt"] == [[0, 1]] and right.requests[-1]["prompt_logprobs"] == 0
        right.delays.append(3.0)  # a hung engine: /v1/models answers, a completion does not (before: "ok")
        hung = teacher_line("I32", served, right.url, "TEACHER_URL", ask)
        assert hung.status == "FAILED" and "did not score two tokens" in hung.text
        assert "its engine is not serving" in hung.text
        other = teacher_line("I32", served, wrong.url, "TEACHER_URL", ask)
        assert other.status == "FAILED" and "manifest expects" in other.text
        gone = wrong.url
    assert teacher_line("I32", served, gone, "TEACHER_URL", ask).status == "note"  # not up (yet): runs wait
    assert "teacher_server.sh I32" in teacher_line("I32", served, None, ".teachers/I32.url", ask).text

    assert disk_line(10 * 2**30, {"I1.7": 2_000_000_000}, 2, Path("results")).status == "FAILED"
    assert disk_line(200 * 2**30, {"I1.7": 2_000_000_000}, 2, Path("results")).status == "ok"  # 2e9 x 38 bytes


def test_on_this_cpu_it_fails_in_seconds_one_line_a_finding(tmp_path: Path) -> None:
    root = project(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HOME": str(tmp_path / "hf"), "PATH": "/usr/bin:/bin"}
    env.pop("TEACHER_URL", None)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "gropd.runs.preflight_env", "--processes", "8"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert time.monotonic() - started < 60  # seconds (torch's import), on a loaded 2-core machine
    lines = done.stdout.splitlines()
    failed = {line.split(":")[0].split(None, 1)[1] for line in lines if line.startswith("FAILED")}
    assert {"GPUs", "torch build", "vLLM", "snapshot"} <= failed, done.stdout
    assert any(line.startswith("note    teacher server: I32: no address yet (.teachers/I32.url)") for line in lines)
    assert lines[-1].startswith("check: ") and "(exit 2)" in lines[-1]


def test_a_gpu_node_with_everything_in_place_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    import huggingface_hub.constants
    import torch
    import yaml

    root = project(tmp_path)
    monkeypatch.chdir(root)
    cache = tmp_path / "hub"
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    lock = yaml.safe_load((root / "experiments" / "lock.yaml").read_text())
    for repo, entry in lock["models"].items():
        snapshot = cache / f"models--{repo.replace('/', '--')}" / "snapshots" / entry["full"]
        snapshot.mkdir(parents=True)
        shape = SHAPES["I1.7"] if "1.7B" in repo else SHAPES["I4"]
        config = {"vocab_size": 151936, "num_key_value_heads": 8, "head_dim": 128, **shape}
        (snapshot / "config.json").write_text(json.dumps(config))
        (snapshot / "model.safetensors").write_text("weights")
        for name in ("tokenizer.json", "tokenizer_config.json"):
            (snapshot / name).write_text("{}")
    for repo, entry in lock["datasets"].items():
        snapshot = cache / f"datasets--{repo.replace('/', '--')}" / "snapshots" / entry["full"]
        snapshot.mkdir(parents=True)
        (snapshot / "data.parquet").write_text("rows")
    monkeypatch.setattr(check, "nvidia_gpus", lambda: [H100] * 8)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    taken = {}  # device -> bytes another process holds
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda index: (80 * 2**30 - taken.get(index, 0), 80 * 2**30))
    monkeypatch.setattr(torch, "__version__", "2.14.0+cu130")
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    disk = shutil.disk_usage(tmp_path)  # the node's disk: 2 TiB free, whatever this machine has left
    monkeypatch.setattr(check.shutil, "disk_usage", lambda path: disk._replace(free=2 * 2**40))
    # installed: requirements.txt's pins, requirements-gpu.txt's over them (vLLM 0.33.0 among them)
    pinned = {**check.gpu_pins(root / "requirements.txt"), **check.gpu_pins(root / "requirements-gpu.txt")}
    monkeypatch.setattr(check.importlib.metadata, "version", lambda name: pinned.get(name.lower(), "1.0"))
    monkeypatch.setitem(sys.modules, "vllm", SimpleNamespace(__version__="0.33.0"))
    served = check.run_settings(check.load_manifests(Path("experiments")), "paper")[0]["I32"]
    with FakeVLLM(served=served) as server:
        (root / ".teachers").mkdir()
        (root / ".teachers" / "I32.url").write_text(server.url + "\n")
        code = check.main(["--processes", "8"], {"SLURM_CPUS_PER_TASK": "64"})
    out = capsys.readouterr().out
    assert code == 0, out
    assert (
        "FAILED" not in out
        and out.splitlines()[-1] == f"check: 0 failed of {len(out.splitlines()) - 1}: the job may start"
    )
    assert f"ok      teacher server: I32: {server.url} serves {served}" in out
    taken[3] = 20 * 2**30  # another job's 20 GiB on GPU 3
    assert check.main(["--processes", "8"], {"SLURM_CPUS_PER_TASK": "64"}) == 2
    failed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("FAILED")]
    assert failed == [
        "FAILED  GPU memory: already in use (GPU 3: 20.0 GiB; nvidia-smi names the processes): end them, or ask "
        "Slurm for GPUs of your own (--exclusive)"
    ]
    taken.clear()
    base = next(repo for repo in lock["models"] if repo.endswith("-Base"))  # a cache filled without a tokenizer
    (
        cache / f"models--{base.replace('/', '--')}" / "snapshots" / lock["models"][base]["full"] / "tokenizer.json"
    ).unlink()
    assert check.main(["--processes", "8"], {"SLURM_CPUS_PER_TASK": "64"}) == 2
    failed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("FAILED")]
    assert len(failed) == 1 and base in failed[0] and "missing tokenizer.json" in failed[0]


def test_pins_line_names_every_move_of_a_requirements_txt_pin() -> None:
    """gpu-env installs requirements-gpu.txt over requirements.txt: a pin that file moves on purpose (torch, numpy)
    is listed; one a dependency moved that no file names fails (numpy went 2.4.6 -> 2.3.5 without a word)."""
    cpu = {"numpy": "2.4.6", "torch": "2.13.0", "pandas": "3.0.1"}
    installed = {"numpy": "2.3.5", "torch": "2.14.0", "pandas": "3.0.1"}.get
    silent = pins_line(cpu, {"torch": "2.14.0"}, installed)
    assert silent.status == "FAILED" and "numpy 2.3.5, not requirements.txt's 2.4.6" in silent.text
    on_purpose = pins_line(cpu, {"torch": "2.14.0", "numpy": "2.3.5"}, installed)
    assert on_purpose.status == "ok"
    assert on_purpose.text.endswith("numpy 2.3.5 (the CPU suite runs 2.4.6); torch 2.14.0 (the CPU suite runs 2.13.0)")
    assert pins_line(cpu, {}, {"numpy": "2.4.6", "torch": "2.13.0"}.get).text == (
        "every requirements.txt pin installed as pinned"
    )


NODE = """
import fcntl, sys
from pathlib import Path
if sys.argv[2] == "node-local":  # every flock granted, as a filesystem whose flock each node keeps to itself
    fcntl.flock = lambda fd, operation: None
from gropd.runs.preflight_env import nodes_line
print(nodes_line(__import__("os").environ, Path(sys.argv[1])))
"""


@pytest.mark.parametrize("flock", ["coherent", "node-local"])
def test_the_nodes_of_a_job_meet_and_test_that_a_lock_holds_across_them(tmp_path: Path, flock: str) -> None:
    """Two nodes (two processes, SLURM_PROCID 0 and 1, GROPD_RENDEZVOUS as slurm_run.sbatch sets it): they meet over
    gloo; where node 1 can take the flock node 0 holds (node-local flock: two writers of one run), the check fails."""
    import socket

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    nodes = []
    for rank in (0, 1):
        env = {**os.environ, "PYTHONPATH": str(REPO), "SLURM_PROCID": str(rank), "SLURM_NTASKS": "2"}
        env["GROPD_RENDEZVOUS"] = f"127.0.0.1:{port}"
        argv = [sys.executable, "-c", NODE, str(tmp_path / "locks"), flock if rank else "coherent"]  # node 1 patches
        nodes.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True))
    lines = [node.communicate(timeout=120)[0].strip() for node in nodes]
    if flock == "coherent":
        assert all(line.startswith("ok      nodes: 2 nodes met at 127.0.0.1:") for line in lines), lines
    else:
        assert all(line.startswith("FAILED  nodes: 1 of 1 other node(s) took an flock node 0 held") for line in lines)
    one = {**os.environ, "SLURM_NTASKS": "1", "GROPD_RENDEZVOUS": "127.0.0.1:1"}
    assert check.nodes_line(one, tmp_path) is None  # one node: nothing to meet
