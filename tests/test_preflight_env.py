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
from gropd.model.teacher.server import TeacherAddress
from gropd.runs import cgroup
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


def test_snapshot_and_disk_lines() -> None:
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

    assert disk_line(10 * 2**30, {"I1.7": 2_000_000_000}, 2, Path("results")).status == "FAILED"
    assert disk_line(200 * 2**30, {"I1.7": 2_000_000_000}, 2, Path("results")).status == "ok"  # 2e9 x 38 bytes


def test_the_teacher_check_asks_liveness_and_waits_with_backoff() -> None:
    """A server busy scoring other runs' rows (1.5 M tokens queued ahead: a completion answers minutes later) is
    alive: the check asks /health and /v1/models (vLLM answers both at once, whatever is queued) and never a
    generation, which it used to send with one 60 s try and report as FAILED. An engine that died (/health 503)
    or a server not up is a note within the check's share of the wait (its runs wait GROPD_TEACHER_WAIT_S); a
    server that comes alive during the wait is found, after pauses of 1, 2, ... s; another model fails."""
    served = "Qwen/Qwen3-32B@" + "9" * 40
    with FakeVLLM(served=served) as busy, FakeVLLM(served="Qwen/Qwen3-32B@" + "0" * 40) as wrong:
        busy.delays.append(120.0)  # the next completion would answer in 2 minutes
        started = time.monotonic()
        line = teacher_line("I32", served, TeacherAddress(url=busy.url), "TEACHER_URL", wait_s=5.0)
        assert line.status == "ok" and "is alive, serving" in line.text and time.monotonic() - started < 5.0
        assert busy.requests == [] and busy.gets == ["/health", "/v1/models"]  # no generation asked
        busy.health.extend([503, 503])  # an engine still starting (or restarted): alive on the third look
        started = time.monotonic()
        assert teacher_line("I32", served, TeacherAddress(url=busy.url), "TEACHER_URL", wait_s=10.0).status == "ok"
        assert 3.0 <= time.monotonic() - started < 8.0  # pauses of 1 s, then 2 s
        busy.health.extend([503] * 10)  # a dead engine: a note, after the check's wait
        dead = teacher_line("I32", served, TeacherAddress(url=busy.url), "TEACHER_URL", wait_s=2.0)
        assert dead.status == "note" and "HTTP 503" in dead.text and "runs wait" in dead.text
        other = teacher_line("I32", served, TeacherAddress(url=wrong.url), "TEACHER_URL", wait_s=2.0)
        assert other.status == "FAILED" and "manifest expects" in other.text
        gone = wrong.url
    assert teacher_line("I32", served, TeacherAddress(url=gone), "TEACHER_URL", wait_s=1.0).status == "note"
    nowhere = TeacherAddress(file=Path("/nonexistent/I32.url"))
    assert "teacher_server.sh I32" in teacher_line("I32", served, nowhere, ".teachers/I32.url").text


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
    manifests = check.load_manifests(Path("experiments"))
    served = check.run_settings(manifests, check.job_runs(manifests, "paper", None, Path("results")))[0]["I32"]
    need = check.plan_memory(manifests, check.job_runs(manifests, "paper", None, Path("results")), 8, False)[0]
    fake_cgroup(tmp_path / "cgroup", monkeypatch, v2={"": "max", "job_42": str(need * 2**30)})
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
    assert f"ok      teacher server: I32: {server.url} is alive, serving {served}" in out
    assert f"ok      host memory: the job's cgroup allows {need:.1f} GiB, its plan needs {need} GiB" in out
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


def fake_cgroup(
    root: Path, monkeypatch: pytest.MonkeyPatch, v2: dict[str, str] | None = None, v1: dict[str, str] | None = None
) -> None:
    """A cgroup tree as the kernel mounts it (Documentation/admin-guide/cgroup-v2.rst: memory.max at each level, "max"
    for none; cgroup-v1/memory.rst: memory/<path>/memory.limit_in_bytes) with the job's cgroup at job_42 under its
    parents, and /proc/self/cgroup naming it (`0::/job_42`, or `7:memory:/job_42` under v1). `v2`/`v1`: the
    path below the root -> the limit file's text."""
    for path, text in (v2 or {}).items():
        (root / path).mkdir(parents=True, exist_ok=True)
        (root / path / "memory.max").write_text(text + "\n")
    for path, text in (v1 or {}).items():
        (root / "memory" / path).mkdir(parents=True, exist_ok=True)
        (root / "memory" / path / "memory.limit_in_bytes").write_text(text + "\n")
    monkeypatch.setattr(cgroup, "ROOT", root)
    line = "0::/job_42" if v2 else "12:cpuset:/job_42\n7:memory:/job_42"
    monkeypatch.setattr(cgroup, "read_proc_cgroup", lambda: line + "\n")


def test_the_job_cgroup_memory_limit_is_read_as_the_kernel_writes_it(tmp_path: Path, monkeypatch) -> None:
    """The least limit of the job's cgroup and its parents, v2 or v1; none set (v2 "max", v1's page-counter
    maximum) is None; and the check fails when it is below the plan's need (a cluster default of 2 GiB a CPU)."""
    gib = 2**30
    fake_cgroup(tmp_path / "a", monkeypatch, v2={"": "max", "slurm": str(100 * gib), "slurm/job_42": str(200 * gib)})
    assert cgroup.memory_limit("0::/slurm/job_42\n", tmp_path / "a") == 100 * gib  # a parent caps it
    fake_cgroup(tmp_path / "b", monkeypatch, v2={"": "max", "job_42": "max"})
    assert cgroup.memory_limit("0::/job_42\n", tmp_path / "b") is None
    fake_cgroup(tmp_path / "c", monkeypatch, v1={"": "9223372036854771712", "job_42": str(128 * gib)})
    assert cgroup.memory_limit("12:cpuset:/job_42\n7:memory:/job_42\n", tmp_path / "c") == 128 * gib
    assert cgroup.memory_limit("0::/job_42\n7:memory:/job_42\n", tmp_path / "c") == 128 * gib  # hybrid: v1 memory
    assert cgroup.memory_limit("7:memory:/\n", tmp_path / "c") is None  # v1 "no limit"
    assert cgroup.memory_limit("", tmp_path / "c") is None  # no cgroup (not Linux)
    low = check.host_memory_line(128 * gib, 152, "the derivation")
    assert low.status == "FAILED" and "allows 128.0 GiB, its plan needs 152 GiB" in low.text
    assert "--mem=152G" in low.text
    assert check.host_memory_line(152 * gib, 152, "the derivation").status == "ok"
    assert check.host_memory_line(None, 152, "the derivation").status == "note"


def test_a_job_whose_cgroup_is_below_the_plan_stops_in_seconds(tmp_path: Path) -> None:
    """The check, run as the job runs it (its run named), on a node whose cgroup allows 64 GiB (a site default of
    1 GiB a CPU x 64 CPUs): host memory FAILED, naming --mem; its run's teacher is in-process, so no server is
    looked at (the served teachers' address files are absent and no teacher line is printed)."""
    root = project(tmp_path)
    root_of_cgroups = tmp_path / "cgroup"
    (root_of_cgroups / "job_42").mkdir(parents=True)
    (root_of_cgroups / "memory.max").write_text("max\n")
    (root_of_cgroups / "job_42" / "memory.max").write_text(f"{64 * 2**30}\n")
    code = (
        "import sys, pathlib, gropd.runs.preflight_env as check, gropd.runs.cgroup as cgroup; "
        "check.environment_lines = lambda processes, serving, environ: []; "
        f"cgroup.ROOT = pathlib.Path({str(root_of_cgroups)!r}); cgroup.read_proc_cgroup = lambda: '0::/job_42\\n'; "
        "sys.exit(check.main(sys.argv[1:]))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HOME": str(tmp_path / "hf")}
    env.pop("TEACHER_URL", None)
    run = "table1__I4nothink-I1.7nothink__gropd"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", code, "--processes", "8", "--run", run],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert time.monotonic() - started < 60, done.stdout
    lines = done.stdout.splitlines()
    memory = [line for line in lines if "host memory" in line]
    assert done.returncode == 2 and len(memory) == 1 and memory[0].startswith("FAILED  host memory:"), done.stdout
    assert "allows 64.0 GiB, its plan needs 152 GiB" in memory[0] and "--mem=152G" in memory[0]
    assert not any("teacher server" in line for line in lines)  # an in-process teacher: no server looked at


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
