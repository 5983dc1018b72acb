"""The op battery (tools/numerics/op_battery.py) computes under the pin set it is given, set before torch loads in
its own process, and records it; a pin set it does not know is refused before anything is computed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from tiny_runs import REPO

from gropd.numerics import PINNED, cpu_record

BATTERY = REPO / "tools" / "numerics" / "op_battery.py"


def battery(*args: str) -> subprocess.CompletedProcess:
    """The battery in a fresh process whose environment pins nothing (the battery must set what it records)."""
    env = {k: v for k, v in os.environ.items() if k not in PINNED}
    return subprocess.run([sys.executable, str(BATTERY), *args], env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.skipif("avx2" not in cpu_record().get("flags", []), reason="ATen's AVX2 kernels need a CPU with AVX2")
def test_the_avx2_pins_are_set_before_torch_and_recorded() -> None:
    done = battery("--pins", "avx2")
    assert done.returncode == 0, done.stderr
    machine = json.loads(done.stdout)["machine"]
    # issue 67's pin set: MKL's and ATen's AVX2 branches, oneDNN capped at AVX2, MKL's vector math off
    assert machine["pins"] == "avx2"
    assert machine["pinned"] == {
        "MKL_CBWR": "AVX2",
        "ATEN_CPU_CAPABILITY": "avx2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "GROPD_VECTOR_MATH": "aten",
    }
    assert machine["aten"] == "AVX2"  # read by torch at import: the pins were in place before it loaded


def test_an_unknown_pin_set_is_refused_before_anything_is_computed() -> None:
    done = battery("--pins", "avx512")
    assert done.returncode == 2
    assert "avx512" in done.stderr and "portable" in done.stderr and "avx2" in done.stderr
    assert done.stdout == ""
