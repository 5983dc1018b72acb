"""The CPU and the GPU requirement files pin the same versions of what they both name, so the tests and
the rehearsal import the library a cluster does; torch and numpy are the deliberate exceptions (a CPU build here,
vLLM's CUDA build there; numpy below 2.4 where vLLM's mistral_common asks it), each said in requirements-gpu.txt."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DIFFERS_ON_PURPOSE = {"torch", "numpy"}  # said in requirements-gpu.txt (torch: the CPU wheel vs vLLM's CUDA pin)


def pins(name: str) -> dict[str, str]:
    lines = (REPO / name).read_text().splitlines()
    pairs = [line.split("#")[0].strip().split("==") for line in lines if "==" in line.split("#")[0]]
    return {package.strip().lower(): version.strip() for package, version in pairs}


def test_packages_in_both_files_have_one_version() -> None:
    cpu, gpu = pins("requirements.txt"), pins("requirements-gpu.txt")
    both = (set(cpu) & set(gpu)) - DIFFERS_ON_PURPOSE
    assert {name: (cpu[name], gpu[name]) for name in both if cpu[name] != gpu[name]} == {}
    assert cpu["transformers"] == "5.20.2"  # the newest vLLM 0.33.0 accepts (transformers < 5.21)
    header = (REPO / "requirements-gpu.txt").read_text().split("vllm==")[0]
    assert all(name in header for name in DIFFERS_ON_PURPOSE)  # each exception is stated
