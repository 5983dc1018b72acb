"""A GPU node whose torch cannot see its GPUs stops with exit 2 naming the driver and the torch build; it
never falls back to the tiny profile there (gropd/model/hardware.py, reproduce.sh). The machine each test describes
is faked, whatever this one has: nvidia-smi by a script on PATH (or none: an empty PATH), and what torch sees by
CUDA_VISIBLE_DEVICES="" (CUDA's documented way to hide every device: torch.cuda.is_available() is then False) or,
in this process, by replacing torch.cuda.is_available."""

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
    """The environment of a node whose nvidia-smi lists two GPUs that torch does not see."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(FAKE_SMI)
    (bin_dir / "nvidia-smi").chmod(stat.S_IRWXU)
    path = f"{bin_dir}:{os.environ['PATH']}"
    return {**os.environ, "PATH": path, "PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": ""}


def test_reproduce_sh_stops_on_a_gpu_node_whose_torch_cannot_use_it(tmp_path: Path) -> None:
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
    (tmp_path / "empty").mkdir()  # a PATH without nvidia-smi, and no device for torch
    env = {**os.environ, "PATH": str(tmp_path / "empty"), "CUDA_VISIBLE_DEVICES": ""}
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
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # torch sees none of them
    try:
        choose_profile()
    except RuntimeError as err:
        assert "Not falling back to the tiny profile" in str(err)
    else:
        raise AssertionError("a GPU node without usable CUDA chose a profile")


def test_a_node_whose_torch_sees_cuda_runs_the_paper_profile(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a GPU node, faked on any machine
    assert choose_profile() == ("paper", "CUDA is available")
