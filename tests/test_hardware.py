"""A GPU node whose torch cannot see its GPUs stops with exit 2 naming the driver and the torch build; it
never falls back to the tiny profile there (gropd/model/hardware.py, reproduce.sh). nvidia-smi is faked."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import torch
from test_reproduce_sh import REPO, copy_with_venv

from gropd.model.hardware import choose_profile, why_not_usable

FAKE_SMI = '#!/usr/bin/env bash\necho "NVIDIA H100 80GB HBM3, 535.104.05"\necho "NVIDIA H100 80GB HBM3, 535.104.05"\n'


def fake_nvidia_smi(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(FAKE_SMI)
    (bin_dir / "nvidia-smi").chmod(stat.S_IRWXU)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(REPO)}


def test_reproduce_sh_stops_on_a_gpu_node_whose_torch_cannot_use_it(tmp_path: Path) -> None:
    assert not torch.cuda.is_available()  # this machine's torch: a CPU build (or no GPU)
    script = copy_with_venv(tmp_path)
    python = tmp_path / ".venv" / "bin" / "python"  # this venv's interpreter (a symlink would lose its packages)
    python.unlink()
    python.write_text(f'#!/usr/bin/env bash\nexec {os.sys.executable} "$@"\n')
    python.chmod(stat.S_IRWXU)
    result = subprocess.run(
        ["bash", str(script), "table1"],
        cwd=tmp_path,
        env=fake_nvidia_smi(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert "nvidia-smi lists 2 GPU(s) (NVIDIA H100 80GB HBM3, driver 535.104.05)" in result.stderr
    assert torch.__version__ in result.stderr and "tiny" not in result.stderr.split("error:")[0]
    assert not (tmp_path / "results").exists()  # nothing ran


def test_without_nvidia_smi_the_tiny_profile_is_chosen_and_said(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": "/usr/bin:/bin"}  # no nvidia-smi on it
    result = subprocess.run(
        [os.sys.executable, "-m", "gropd.model.hardware"],
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert result.returncode == 0 and result.stdout.strip() == "tiny"
    assert "no CUDA device found" in result.stderr


def test_the_reason_names_the_build_and_the_driver_it_needs() -> None:
    assert "CPU-only build" in why_not_usable("535.104.05", "2.13.0+cpu", None)
    reason = why_not_usable("535.104.05", "2.14.0+cu130", "13.0")
    assert "CUDA 13.0, which needs an NVIDIA driver >= 580; the driver is 535.104.05" in reason
    assert "needs an NVIDIA driver" not in why_not_usable("590.1", "2.14.0+cu130", "13.0")


def test_choose_profile_raises_where_the_gpus_are_invisible(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", fake_nvidia_smi(tmp_path)["PATH"])
    try:
        choose_profile()
    except RuntimeError as err:
        assert "Not falling back to the tiny profile" in str(err)
    else:
        raise AssertionError("a GPU node without usable CUDA chose a profile")
